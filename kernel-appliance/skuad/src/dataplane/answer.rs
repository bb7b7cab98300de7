//! One query asked over any transport, answered: the engine (with the cache), NOTIFY for
//! secondary zones, TSIG-signed queries, the hand-over to the resolver; shared by the UDP
//! workers, TCP and DNS over TLS ([`super::sockets`]) and DNS over HTTPS ([`super::doh`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use skua_engine::{Outcome, Request, Transport};
use tokio::sync::mpsc;

use crate::base::lease::Gate;
use crate::base::log;
use crate::base::resolving::{Job, ResolverHandle, Route};
use crate::base::serving::{Serving, WorkerStats};

/// One accepted stream connection's context.
pub(crate) struct Conn {
    /// The client.
    pub peer: SocketAddr,
    /// The serving handle.
    pub shared: Arc<Serving>,
    /// The listener's counters.
    pub stats: Arc<WorkerStats>,
    /// Idle timeout (RFC 7766 §6.2.3), also bounding every read and write.
    pub idle: Duration,
    /// The lease the address is answered under, if any.
    pub gate: Gate,
    /// Its connection slot: activity noted, the idle timeout in force, asked to make room.
    pub slot: super::slots::SlotHandle,
}

pub(crate) fn inform(o: &Outcome, peer: SocketAddr, q: &[u8]) {
    let informs = match o {
        Outcome::Reply { info, .. } => info.inform,
        Outcome::Drop { inform, .. } => *inform,
        Outcome::Resolve => false,
    };
    if informs {
        log::info(format_args!(
            "inform: {peer} asked {}",
            log::describe_query(q)
        ));
    }
}

/// Hands a query that missed the cache to the resolver, which answers on `route`. A full
/// queue drops it (the client retries), as an overloaded Unbound drops.
pub(crate) fn hand_over(resolver: Option<&ResolverHandle>, query: &[u8], route: Route) {
    if let Some(r) = resolver {
        let _ = r.submit(Job {
            query: query.to_vec(),
            route: Some(route),
        });
    }
}

/// Asks the resolver to refresh a question the cache answered (prefetch, stale).
pub(crate) fn refresh(resolver: Option<&ResolverHandle>, query: &[u8]) {
    if let Some(r) = resolver {
        let _ = r.submit(Job {
            query: query.to_vec(),
            route: None,
        });
    }
}

/// What became of one query asked over a stream (TCP, TLS, HTTPS).
pub(crate) enum Step {
    /// The answer, framed (2 octets of length, RFC 1035 §4.2.2, then the message).
    Reply(Vec<u8>),
    /// Handed to the resolver, which sends the framed answer on the channel given.
    Resolving,
    /// Not answered (the engine's reason).
    Dropped(skua_engine::engine::DropReason),
    /// Not answered, and the connection is to be closed: a denied client (as Unbound
    /// does over TCP), or a NOTIFY that cannot be answered.
    Close,
}

/// Answers one query that came over a stream from `peer`: a NOTIFY for a secondary zone,
/// a TSIG-signed query, or anything else through the engine (and its cache); `pad`:
/// responses to clients that carry the EDNS Padding option are padded to this block length
/// (RFC 7830, RFC 8467 §4.1). A query the cache misses goes to the resolver, which answers
/// on the sender `tx` makes (called only then: a query answered at once costs no channel).
/// Never awaits: the answer is built in the thread's buffer.
pub(crate) fn answer_stream(
    shared: &Serving,
    stats: &WorkerStats,
    peer: SocketAddr,
    q: &[u8],
    pad: Option<u16>,
    tx: impl FnOnce() -> mpsc::Sender<Vec<u8>>,
) -> Step {
    let framed = |m: &[u8]| {
        let mut b = Vec::with_capacity(2 + m.len());
        // Cannot truncate: messages are at most 65535 bytes.
        b.extend_from_slice(&(m.len() as u16).to_be_bytes());
        b.extend_from_slice(m);
        b
    };
    if skua_xfr::notify::is_notify(q) {
        let xfr = shared.xfr.state.load_full();
        if !xfr.secondaries.is_empty() {
            let resp = notify_in(shared, &xfr, q, peer);
            if resp.is_empty() {
                return Step::Close;
            }
            // Padded like every other answer on an encrypted transport (RFC 7830 §4, RFC
            // 8467 §4.1): a NOTIFY's response is as telling to an observer as a query's.
            let resp = match pad.filter(|_| skua_engine::padding::query_wants_padding(q)) {
                Some(block) => pad_notify_response(resp, block),
                None => resp,
            };
            return Step::Reply(framed(&resp));
        }
    }
    let engine = shared.engine.load();
    let resolver = shared.resolver.load();
    let req = Request {
        src: peer.ip(),
        transport: Transport::Tcp,
        now: crate::base::clock::now_secs(),
    };
    let xfr = shared.xfr.state.load_full();
    if !xfr.keys.is_empty() && q.len() >= 12 && q[10..12] != [0, 0] {
        let unix = crate::base::clock::unix_secs();
        if let Some(sq) = skua_xfr::server::check_signed_query(q, &xfr.keys, unix) {
            let reply = with_out(|out| {
                let len = signed_reply(
                    &engine,
                    &req,
                    sq,
                    &mut out[2..],
                    &xfr.keys,
                    unix,
                    shared,
                    peer,
                )?;
                // Cannot truncate: replies are at most 65535 bytes.
                out[..2].copy_from_slice(&(len as u16).to_be_bytes());
                Some(out[..2 + len].to_vec())
            });
            return match reply {
                Some(f) => Step::Reply(f),
                None => Step::Dropped(skua_engine::engine::DropReason::Malformed),
            };
        }
    }
    let pad_to = pad.filter(|_| skua_engine::padding::query_wants_padding(q));
    let (o, framed) = with_out(|out| {
        let o = match resolver.as_deref() {
            Some(r) => engine.handle_query_with(&req, q, &mut out[2..], &*r.cache),
            None => engine.handle_query(&req, q, &mut out[2..]),
        };
        let framed = match o {
            Outcome::Reply { len, .. } => {
                let len = match pad_to {
                    Some(b) => skua_engine::padding::pad_response(&mut out[2..], len, b),
                    None => len,
                };
                // Cannot truncate: replies are at most 65535 bytes.
                out[..2].copy_from_slice(&(len as u16).to_be_bytes());
                Some(out[..2 + len].to_vec())
            }
            _ => None,
        };
        (o, framed)
    });
    stats.record(&o);
    inform(&o, peer, q);
    match o {
        Outcome::Reply { info, .. } => {
            if info.refresh {
                refresh(resolver.as_deref(), q);
            }
            framed.map_or(
                Step::Dropped(skua_engine::engine::DropReason::Buffer),
                Step::Reply,
            )
        }
        Outcome::Drop {
            reason: skua_engine::engine::DropReason::Acl,
            ..
        } => Step::Close,
        Outcome::Resolve => {
            let route = Route::Tcp {
                tx: tx(),
                peer,
                pad: pad_to,
            };
            hand_over(resolver.as_deref(), q, route);
            Step::Resolving
        }
        Outcome::Drop { reason, .. } => Step::Dropped(reason),
    }
}

/// The response to a NOTIFY whose query asked for padding, padded to a multiple of `block`
/// octets. skua-xfr answers a NOTIFY with the header and question only; the query carried an
/// OPT record (its Padding option), so the response gets one too (RFC 6891 §7: a responder
/// includes OPT in its response to a request that had one), advertising 1232 octets as the
/// engine's answers do, and the Padding option goes into it. A response with any additional
/// record is left as it is: that is a TSIG-signed one (a signed NOTIFY, or a TSIG error),
/// whose TSIG must stay its last record and whose MAC covers every octet before it (RFC 8945
/// §5.3); padding after it would break the signature. (A signed query never asks: its last
/// record is its TSIG, not its OPT, so [`skua_engine::padding::query_wants_padding`] says
/// no; this is the second guard.)
pub(crate) fn pad_notify_response(mut resp: Vec<u8>, block: u16) -> Vec<u8> {
    if resp.len() < 12 || resp[10..12] != [0, 0] {
        return resp;
    }
    // OPT (RFC 6891 §6.1.2): root owner, TYPE 41, CLASS = UDP payload size, TTL = extended
    // RCODE 0, version 0, no flags; no options yet.
    resp.extend_from_slice(&[0, 0, 41]);
    resp.extend_from_slice(&1232u16.to_be_bytes());
    resp.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    resp[10..12].copy_from_slice(&1u16.to_be_bytes());
    let len = resp.len();
    // Room for the option's header and at most one block of zeros.
    resp.resize(len + 4 + usize::from(block), 0);
    let padded = skua_engine::padding::pad_response(&mut resp, len, block);
    resp.truncate(padded);
    resp
}

/// The answer to a query that carried a TSIG record (RFC 8945): the engine's answer to the
/// query without it, signed with the request's key, or the TSIG error (reported to the
/// control core). Written into `out`; `None` when nothing is to be sent (the engine drops
/// the query or hands it to the resolver: signed queries are answered from local data
/// only, or the answer does not fit).
#[allow(clippy::too_many_arguments)] // the query's whole context
pub(crate) fn signed_reply(
    engine: &skua_engine::Engine,
    req: &Request,
    sq: skua_xfr::server::SignedQuery,
    out: &mut [u8],
    keys: &[skua_xfr::tsig::Key],
    unix: u64,
    shared: &Serving,
    peer: SocketAddr,
) -> Option<usize> {
    use skua_xfr::server::SignedQuery;
    let resp = match sq {
        SignedQuery::Rejected { response, refusal } => {
            shared.xfr.report(crate::base::xfr::Event::Refused {
                client: peer.ip().to_canonical(),
                refusal,
            });
            response
        }
        SignedQuery::Verified { query, key, mac } => {
            let mut buf = vec![0u8; out.len()];
            match engine.handle_query(req, &query, &mut buf) {
                Outcome::Reply { len, .. } => {
                    let mut v = buf[..len].to_vec();
                    let k = keys.get(key)?;
                    skua_xfr::server::sign_response(&mut v, k, &mac, unix);
                    v
                }
                _ => return None,
            }
        }
    };
    let dst = out.get_mut(..resp.len())?;
    dst.copy_from_slice(&resp);
    Some(resp.len())
}

/// Answers a NOTIFY for a secondary zone (RFC 1996, docs/zone-transfer.md): checked by
/// skua-xfr (TSIG, the zone's `allow-notify:` entries and primaries); an accepted one makes
/// the zone due for the secondary's task, a refused one is reported to the control core.
/// The response (empty when nothing can be answered).
pub(crate) fn notify_in(
    shared: &Serving,
    xfr: &crate::base::xfr::Transfers,
    q: &[u8],
    peer: SocketAddr,
) -> Vec<u8> {
    use crate::base::xfr::{Event, NotifyIn};
    let client = peer.ip().to_canonical();
    let a = skua_xfr::notify::answer(q, client, &xfr.keys, crate::base::clock::unix_secs(), |z| {
        xfr.secondaries
            .get(z.as_bytes())
            .map(|s| s.allow_notify.as_slice())
    });
    match a.outcome {
        Ok(acc) => {
            shared.xfr.notified(NotifyIn {
                zone: acc.zone.as_bytes().to_vec(),
                serial: acc.serial,
            });
            shared.xfr.report(Event::Notified {
                client,
                zone: acc.zone.to_string(),
                serial: acc.serial,
            });
        }
        Err(refusal) => shared.xfr.report(Event::NotifyRefused { client, refusal }),
    }
    a.response
}

/// Runs `f` with this thread's answer buffer (2 bytes of TCP length prefix, then room for
/// the largest DNS message). `f` must not await: the buffer is the thread's.
pub(crate) fn with_out<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    thread_local! {
        static OUT: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 2 + 65535]);
    }
    OUT.with(|b| f(&mut b.borrow_mut()))
}
