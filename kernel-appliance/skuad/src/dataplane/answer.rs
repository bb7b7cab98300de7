//! One query asked over any transport, through the front door ([`skua_serve::Door`]: NOTIFY
//! for secondary zones, TSIG-signed queries, the engine with the cache, a miss read once):
//! the door in force made from the serving handle, its events reported, its steps counted,
//! and the stream transports' reading of a step; shared by the UDP workers, TCP and DNS
//! over TLS ([`super::sockets`]), DNS over HTTPS ([`super::doh`]) and QUIC ([`super::doq`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use skua_serve::{Ask, Door, Kind, Miss};
use tokio::sync::mpsc;

use crate::base::lease::Gate;
use crate::base::log;
use crate::base::resolving::{Job, ResolverHandle, Route, SharedCache};
use crate::base::serving::{Serving, WorkerStats};
use crate::base::xfr::Transfers;
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

/// Runs `f` with the door in force (the engine, the resolver's cache if a resolver runs,
/// the transfer tables) and the resolver's handle, and TSIG's clock (read only when keys
/// exist).
pub(crate) fn with_door<R>(
    shared: &Serving,
    f: impl FnOnce(&Door<'_, SharedCache, Transfers>, Option<&ResolverHandle>, u64) -> R,
) -> R {
    let d = shared.door.load();
    let unix = if d.zones.keys.is_empty() {
        0
    } else {
        crate::base::clock::unix_secs()
    };
    let door = Door {
        engine: &d.engine,
        cache: d.resolver.as_deref().map(|r| &*r.cache),
        zones: &*d.zones,
    };
    f(&door, d.resolver.as_deref(), unix)
}

/// Counts a step, logs the client when its zone asks (inform types), and hands the
/// question to the resolver again when the cache asks (prefetch, stale).
pub(crate) fn after(
    step: &skua_serve::Step,
    stats: &WorkerStats,
    resolver: Option<&ResolverHandle>,
    peer: SocketAddr,
    q: &[u8],
) {
    if let Some(o) = step.outcome() {
        stats.record(&o);
    }
    if step.informs() {
        log::info(format_args!(
            "inform: {peer} asked {}",
            log::describe_query(q)
        ));
    }
    if step.wants_refresh()
        && let (Some(r), Some(job)) = (resolver, Job::refresh(q))
    {
        let _ = r.submit(job);
    }
}

/// Hands a question that missed the cache to the resolver, which answers on `route`. A
/// full queue drops it (the client retries), as an overloaded Unbound drops.
pub(crate) fn hand_over(resolver: Option<&ResolverHandle>, query: &[u8], miss: Miss, route: Route) {
    if let Some(r) = resolver {
        let _ = r.submit(Job::miss(query, miss, route));
    }
}

/// What became of one query asked over a stream (TCP, TLS, HTTPS, QUIC): the door's step
/// as the stream's I/O needs it.
pub(crate) enum Step {
    /// The answer, as the transport sends it (framed: 2 octets of length, RFC 1035
    /// §4.2.2, then the message; over HTTPS the message alone).
    Reply(Vec<u8>),
    /// Handed to the resolver, which sends the answer on the channel given.
    Resolving,
    /// Not answered (the engine's reason).
    Dropped(skua_engine::engine::DropReason),
    /// Not answered, and the connection is to be closed: a denied client (as Unbound
    /// does over TCP), or a NOTIFY that cannot be answered.
    Close,
}

/// Answers one query that came over the stream transport `kind` from `peer` through the
/// door; `pad`: the transport's padding block (RFC 7830, RFC 8467 §4.1). A query the cache
/// misses goes to the resolver, which answers on the sender `tx` makes (called only then:
/// a query answered at once costs no channel). Never awaits: the answer is built in the
/// thread's buffer.
pub(crate) fn answer_stream(
    shared: &Serving,
    stats: &WorkerStats,
    kind: Kind,
    peer: SocketAddr,
    q: &[u8],
    pad: Option<u16>,
    tx: impl FnOnce() -> mpsc::Sender<Vec<u8>>,
) -> Step {
    with_door(shared, |door, resolver, unix| {
        let ask = Ask {
            kind,
            peer,
            now: crate::base::clock::now_secs(),
            unix,
            pad,
            query: q,
        };
        let (step, reply) = with_out(|out| {
            let step = door.handle(&ask, out, &mut |e| shared.xfr.door_event(peer.ip(), e));
            let reply = match step {
                skua_serve::Step::Reply { len, .. } => Some(out[..len].to_vec()),
                _ => None,
            };
            (step, reply)
        });
        after(&step, stats, resolver, peer, q);
        match step {
            skua_serve::Step::Reply { .. } => reply.map_or(
                Step::Dropped(skua_engine::engine::DropReason::Buffer),
                Step::Reply,
            ),
            skua_serve::Step::Resolve(miss) => {
                let route = Route::Tcp {
                    kind,
                    tx: tx(),
                    peer,
                    pad,
                };
                hand_over(resolver, q, miss, route);
                Step::Resolving
            }
            skua_serve::Step::Drop { close: true, .. } => Step::Close,
            skua_serve::Step::Drop { reason, .. } => Step::Dropped(reason),
        }
    })
}

/// Runs `f` with this thread's answer buffer (2 bytes of TCP length prefix, then room for
/// the largest DNS message). `f` must not await: the buffer is the thread's.
pub(crate) fn with_out<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    thread_local! {
        static OUT: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 2 + 65535]);
    }
    OUT.with(|b| f(&mut b.borrow_mut()))
}
