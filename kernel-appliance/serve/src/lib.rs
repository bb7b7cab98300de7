//! # skua-serve: the front door, one query from any transport answered or handed on
//!
//! Every dataplane (the kernel-socket UDP workers, the stream path of TCP, DNS over TLS,
//! HTTPS and QUIC, the AF_XDP workers' fast and slow paths, and next the unikernel) hands
//! a query here and gets one [`Step`] back. The door decides, in this order:
//!
//! ```text
//!   query ─▶ NOTIFY for a secondary zone? ─ yes ─▶ skua-xfr's answer (+ Event::Notified…)
//!              │ no
//!            TSIG-signed, with keys?  ─── yes ─▶ engine's answer, signed (or the TSIG error)
//!              │ no
//!            engine: access list, local data, the resolver's cache ─▶ Reply | Drop
//!              │ neither local nor cached
//!            Step::Resolve(Miss)  (the question read once, the client's EDNS facts)
//! ```
//!
//! and it builds what the transports used to build by hand: the padding of answers to
//! encrypted clients (RFC 7830, RFC 8467 §4.1), the two-octet length of stream transports
//! (RFC 1035 §4.2.2, RFC 7766 §8, RFC 9250 §4.2), the answers to the clients who waited on
//! the resolver ([`Door::answer_waiting`]) and the bare REFUSED or SERVFAIL when the
//! resolver cannot take a question ([`bare_error`]).
//!
//! Like the engine it owns **no socket, clock or RNG**: the caller passes the time in
//! ([`Ask::now`], [`Ask::unix`]) and carries every byte; what the control core must hear of
//! (a NOTIFY accepted, a request refused) comes back as an [`Event`]. `#![no_std]` +
//! `alloc`, built for `x86_64-unknown-none` in CI.
//!
//! What it does **not** do: zone transfers over streams (AXFR/IXFR need many messages and a
//! connection: the stream path keeps them), rate limiting beyond the engine's, and any I/O.

#![no_std]
#![forbid(unsafe_code)]
#![warn(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

extern crate alloc;

use alloc::vec::Vec;
use core::net::SocketAddr;

use skua_engine::engine::{DropReason, ReplyInfo};
use skua_engine::rrl::ResponseClass;
use skua_engine::wire::Edns;
use skua_engine::{AnswerCache, Cached, Engine, Outcome, Request, Transport};
use skua_resolver::forward::Question;
use skua_xfr::server::{Allow, Refusal, SignedQuery};
use skua_xfr::tsig::Key;

#[cfg(test)]
mod tests;

/// How a query arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A datagram: a kernel UDP socket, an AF_XDP frame, a virtio frame.
    Udp,
    /// TCP (RFC 7766).
    Tcp,
    /// DNS over TLS (RFC 7858): TCP's framing inside TLS.
    Tls,
    /// DNS over HTTPS (RFC 8484): the message alone, HTTP carries its length.
    Https,
    /// DNS over QUIC (RFC 9250 §4.2): a stream per query, with TCP's length prefix.
    Quic,
}

impl Kind {
    /// The engine's size limit class: UDP's EDNS size, or 65535 octets.
    pub fn transport(self) -> Transport {
        match self {
            Kind::Udp => Transport::Udp,
            _ => Transport::Tcp,
        }
    }

    /// Whether answers carry a two-octet length first (RFC 1035 §4.2.2).
    pub fn framed(self) -> bool {
        matches!(self, Kind::Tcp | Kind::Tls | Kind::Quic)
    }

    /// A stream: a denied client or an unanswerable NOTIFY closes the connection (as
    /// Unbound closes a denied client's TCP connection).
    pub fn stream(self) -> bool {
        self != Kind::Udp
    }
}

/// One query as it arrived.
#[derive(Clone, Copy, Debug)]
pub struct Ask<'q> {
    /// The transport.
    pub kind: Kind,
    /// The client.
    pub peer: SocketAddr,
    /// Whole seconds of the monotonic clock every dataplane sharing the engine uses (rate
    /// limiting, cache expiry).
    pub now: u32,
    /// Seconds since the Unix epoch: TSIG's time (RFC 8945 §5.2.3). Read only when keys
    /// exist; 0 will do without them.
    pub unix: u64,
    /// Pad answers to clients that ask (the EDNS Padding option) to this block length: the
    /// encrypted transports' setting (RFC 8467 §4.1); `None` elsewhere.
    pub pad: Option<u16>,
    /// The DNS message.
    pub query: &'q [u8],
}

/// What the door needs of zone transfers: the keys and the secondary zones' `allow-notify:`
/// (skuad's table of transfers implements it; [`NoZones`] where there are none).
pub trait Zones {
    /// The `tsig-key:` keys, in configuration order.
    fn keys(&self) -> &[Key];
    /// Whether this server is a secondary for any zone (NOTIFYs are answered only then).
    fn has_secondaries(&self) -> bool;
    /// The `allow-notify:` entries of the secondary zone with this lower-cased apex (wire
    /// form); `None` when it is not one.
    fn allow_notify(&self, apex: &[u8]) -> Option<&[Allow]>;
}

/// No keys, no secondary zones.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoZones;

impl Zones for NoZones {
    fn keys(&self) -> &[Key] {
        &[]
    }
    fn has_secondaries(&self) -> bool {
        false
    }
    fn allow_notify(&self, _: &[u8]) -> Option<&[Allow]> {
        None
    }
}

/// What the control core must hear of (the client is the [`Ask::peer`]).
#[derive(Clone, Debug)]
pub enum Event {
    /// A NOTIFY was accepted: the zone is due for a check of its primary's SOA.
    Notified {
        /// The zone's apex, lower case.
        zone: skua_engine::name::WireName,
        /// The serial the primary announced, if it sent its SOA.
        serial: Option<u32>,
    },
    /// A NOTIFY was refused.
    NotifyRefused(Refusal),
    /// A TSIG-signed query was refused (its TSIG error was answered).
    Refused(Refusal),
}

/// A question the engine could not answer from local data or the cache, read once: the
/// resolver takes it as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Miss {
    /// The question, its name lower-cased.
    pub question: Question,
    /// The query's header flags (RD, CD: what the client asked of a resolver).
    pub flags: u16,
    /// The query's EDNS facts (RFC 6891), when it carried OPT in the common form the
    /// engine's query view reads (`None` otherwise, or without OPT).
    pub edns: Option<Edns>,
}

impl Miss {
    /// Reads the question of a query (its first question, an uncompressed name as every
    /// query carries: RFC 1035 §4.1.4 gives a pointer nothing earlier to point to).
    /// `None` for anything else.
    pub fn of(query: &[u8]) -> Option<Miss> {
        if query.len() < 12 || u16::from_be_bytes([query[4], query[5]]) == 0 {
            return None;
        }
        let mut at = 12;
        let mut name = Vec::with_capacity(32);
        loop {
            let len = usize::from(*query.get(at)?);
            if len == 0 {
                name.push(0);
                at += 1;
                break;
            }
            // A pointer or a reserved label type (RFC 6891 §5), or too long a name.
            if len > 63 || name.len() + 1 + len > 254 {
                return None;
            }
            let label = query.get(at..at + 1 + len)?;
            name.extend(label.iter().map(u8::to_ascii_lowercase));
            at += 1 + len;
        }
        let t = query.get(at..at + 4)?;
        Some(Miss {
            question: Question {
                name,
                qtype: u16::from_be_bytes([t[0], t[1]]),
                qclass: u16::from_be_bytes([t[2], t[3]]),
            },
            flags: u16::from_be_bytes([query[2], query[3]]),
            edns: skua_engine::wire::Query::parse(query)
                .ok()
                .and_then(|q| q.edns),
        })
    }
}

/// What became of one query.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Step {
    /// Send the first `len` octets of the output buffer (framed for [`Kind::framed`]).
    Reply {
        /// Octets to send.
        len: usize,
        /// The engine's facts about its answer (counters, inform, refresh); `None` for
        /// a NOTIFY's or a signed query's answer, which the engine's counters leave out.
        info: Option<ReplyInfo>,
    },
    /// Hand the question to the resolver, which answers the client later
    /// ([`Door::answer_waiting`]).
    Resolve(Miss),
    /// Send nothing.
    Drop {
        /// Why.
        reason: DropReason,
        /// The zone asks for the client to be logged (inform_deny).
        inform: bool,
        /// On a stream, close the connection: a denied client, an unanswerable NOTIFY.
        close: bool,
    },
}

impl Step {
    /// The engine's outcome this step counts as (the dataplanes' counters are kept in it);
    /// `None` for answers the engine did not give (NOTIFY, TSIG).
    pub fn outcome(&self) -> Option<Outcome> {
        match *self {
            Step::Reply { len, info } => info.map(|info| Outcome::Reply { len, info }),
            Step::Resolve(_) => Some(Outcome::Resolve),
            Step::Drop { reason, inform, .. } => Some(Outcome::Drop { reason, inform }),
        }
    }

    /// Whether the zone asks for the client to be logged (inform, inform_deny).
    pub fn informs(&self) -> bool {
        match self {
            Step::Reply { info, .. } => info.is_some_and(|i| i.inform),
            Step::Drop { inform, .. } => *inform,
            Step::Resolve(_) => false,
        }
    }

    /// Whether the cache asks for the question to be resolved again (prefetch, stale).
    pub fn wants_refresh(&self) -> bool {
        matches!(self, Step::Reply { info: Some(i), .. } if i.refresh)
    }

    fn drop(reason: DropReason) -> Step {
        Step::Drop {
            reason,
            inform: false,
            close: false,
        }
    }
}

/// The door in force: the engine, the resolver's cache (if a resolver runs) and the zone
/// transfer tables. Cheap to make (references): a dataplane makes one per batch.
pub struct Door<'a, C, Z: ?Sized> {
    /// The engine in force.
    pub engine: &'a Engine,
    /// The resolver's cache, read for names outside local data.
    pub cache: Option<&'a C>,
    /// Keys and secondary zones.
    pub zones: &'a Z,
}

impl<'a> Door<'a, skua_engine::NoCache, NoZones> {
    /// The engine alone: no cache, no keys, no secondary zones.
    pub fn engine(engine: &'a Engine) -> Self {
        Door {
            engine,
            cache: None,
            zones: &NoZones,
        }
    }
}

impl<C: AnswerCache, Z: Zones + ?Sized> Door<'_, C, Z> {
    /// Answers `ask` into `out` (framed for stream transports), or says what to do instead.
    /// `events` hears what the control core must know of. Never panics, whatever the bytes.
    pub fn handle(&self, ask: &Ask<'_>, out: &mut [u8], events: &mut dyn FnMut(Event)) -> Step {
        if !ask.kind.framed() {
            return self.unframed(ask, out, events);
        }
        let Some((head, body)) = out.split_at_mut_checked(2) else {
            return Step::drop(DropReason::Buffer);
        };
        let step = self.unframed(ask, body, events);
        if let Step::Reply { len, info } = step {
            // Cannot truncate: a DNS message is at most 65535 octets (engine's limit), and
            // the responses copied below are checked against it.
            head.copy_from_slice(&(len as u16).to_be_bytes());
            return Step::Reply { len: len + 2, info };
        }
        step
    }

    fn unframed(&self, ask: &Ask<'_>, out: &mut [u8], events: &mut dyn FnMut(Event)) -> Step {
        let q = ask.query;
        // RFC 1996 §3.7: a secondary answers its primaries' NOTIFYs. Only a secondary
        // looks; anyone else's engine answers the opcode (NOTIMP, as Unbound).
        if self.zones.has_secondaries() && skua_xfr::notify::is_notify(q) {
            return self.notify(ask, out, events);
        }
        // RFC 8945 §5.2: a signed query is checked (then answered signed, or with the
        // TSIG error) only where keys are configured; a TSIG RR is an additional record.
        let keys = self.zones.keys();
        if !keys.is_empty()
            && q.len() >= 12
            && q[10..12] != [0, 0]
            && let Some(sq) = skua_xfr::server::check_signed_query(q, keys, ask.unix)
        {
            return self.signed(ask, sq, out, events);
        }
        let req = Request {
            src: ask.peer.ip(),
            transport: ask.kind.transport(),
            now: ask.now,
        };
        let o = match self.cache {
            Some(c) => self.engine.handle_query_with(&req, q, out, c),
            None => self.engine.handle_query(&req, q, out),
        };
        match o {
            Outcome::Reply { len, info } => {
                let len = match ask
                    .pad
                    .filter(|_| skua_engine::padding::query_wants_padding(q))
                {
                    Some(block) => skua_engine::padding::pad_response(out, len, block),
                    None => len,
                };
                Step::Reply {
                    len,
                    info: Some(info),
                }
            }
            // The engine read the question already; the resolver needs it lower-cased.
            Outcome::Resolve => match Miss::of(q) {
                Some(m) => Step::Resolve(m),
                None => Step::drop(DropReason::Malformed),
            },
            Outcome::Drop { reason, inform } => Step::Drop {
                reason,
                inform,
                close: reason == DropReason::Acl && ask.kind.stream(),
            },
        }
    }

    /// A NOTIFY for a secondary zone (RFC 1996, docs/zone-transfer.md): checked by skua-xfr
    /// (form, TSIG, the zone's `allow-notify:` entries and primaries).
    fn notify(&self, ask: &Ask<'_>, out: &mut [u8], events: &mut dyn FnMut(Event)) -> Step {
        let a = skua_xfr::notify::answer(
            ask.query,
            ask.peer.ip().to_canonical(),
            self.zones.keys(),
            ask.unix,
            |z| self.zones.allow_notify(z.as_bytes()),
        );
        events(match a.outcome {
            Ok(acc) => Event::Notified {
                zone: acc.zone,
                serial: acc.serial,
            },
            Err(refusal) => Event::NotifyRefused(refusal),
        });
        if a.response.is_empty() {
            return Step::Drop {
                reason: DropReason::Malformed,
                inform: false,
                close: true,
            };
        }
        // Padded like every other answer on an encrypted transport (RFC 7830 §4, RFC 8467
        // §4.1): a NOTIFY's response is as telling to an observer as a query's.
        let resp = match ask
            .pad
            .filter(|_| skua_engine::padding::query_wants_padding(ask.query))
        {
            Some(block) => pad_notify_response(a.response, block),
            None => a.response,
        };
        copy_out(&resp, out)
    }

    /// The answer to a query that carried a TSIG record (RFC 8945): the engine's answer to
    /// the query without it, signed with the request's key, or the TSIG error. Signed
    /// queries are answered from local data only: a miss is not handed to the resolver
    /// (its answer could not be signed later without keeping the request's MAC).
    fn signed(
        &self,
        ask: &Ask<'_>,
        sq: SignedQuery,
        out: &mut [u8],
        events: &mut dyn FnMut(Event),
    ) -> Step {
        let resp = match sq {
            SignedQuery::Rejected { response, refusal } => {
                events(Event::Refused(refusal));
                response
            }
            SignedQuery::Verified { query, key, mac } => {
                let req = Request {
                    src: ask.peer.ip(),
                    transport: ask.kind.transport(),
                    now: ask.now,
                };
                let Outcome::Reply { len, .. } = self.engine.handle_query(&req, &query, out) else {
                    return Step::drop(DropReason::Malformed);
                };
                let Some(k) = self.zones.keys().get(key) else {
                    return Step::drop(DropReason::Malformed);
                };
                let mut v = out[..len].to_vec();
                skua_xfr::server::sign_response(&mut v, k, &mac, ask.unix);
                v
            }
        };
        copy_out(&resp, out)
    }

    /// Answers a client who waited on the resolver with its answer `cached` (or a
    /// [`bare_error`]): as a cache hit would be (the client's ID, letter case, flags, EDNS,
    /// size limit, rate limiting), padded and framed as [`Door::handle`] does. `None` when
    /// nothing is to be sent (rate limited, or no room).
    pub fn answer_waiting(
        &self,
        ask: &Ask<'_>,
        cached: &Cached<'_>,
        out: &mut [u8],
    ) -> Option<usize> {
        let off = if ask.kind.framed() { 2 } else { 0 };
        let body = out.get_mut(off..)?;
        let req = Request {
            src: ask.peer.ip(),
            transport: ask.kind.transport(),
            now: ask.now,
        };
        let Outcome::Reply { len, .. } = self.engine.answer_cached(&req, ask.query, body, cached)
        else {
            return None;
        };
        let len = match ask
            .pad
            .filter(|_| skua_engine::padding::query_wants_padding(ask.query))
        {
            Some(block) => skua_engine::padding::pad_response(body, len, block),
            None => len,
        };
        if off == 2 {
            // Cannot truncate: the engine's replies are at most 65535 octets.
            out[..2].copy_from_slice(&(len as u16).to_be_bytes());
        }
        Some(off + len)
    }
}

/// A bare error for a client the resolver cannot serve, as [`Door::answer_waiting`] takes
/// it: REFUSED (5) when no zone resolves the name, SERVFAIL (2) over a limit. QR and RA set,
/// no records (the engine adds the question, RD and CD from the query, and OPT).
pub fn bare_error(rcode: u16) -> Cached<'static> {
    Cached {
        flags: 0x8080 | (rcode & 0xf),
        counts: &[0; 6],
        bounds: &[],
        tail: &[],
        ttls: &[],
        fixed_ttl: None,
        ede: None,
        refresh: false,
        class: ResponseClass::Error,
    }
}

/// Copies a response built aside into `out`.
fn copy_out(resp: &[u8], out: &mut [u8]) -> Step {
    match out.get_mut(..resp.len()) {
        Some(dst) if resp.len() <= 65535 => {
            dst.copy_from_slice(resp);
            Step::Reply {
                len: resp.len(),
                info: None,
            }
        }
        _ => Step::drop(DropReason::Buffer),
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
pub fn pad_notify_response(mut resp: Vec<u8>, block: u16) -> Vec<u8> {
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
