//! What the dataplanes share with the resolver: its cache, read on every query that is
//! not local data, and the queue of questions it must resolve.
//!
//! A dataplane asks the engine with the cache ([`skua_engine::Engine::handle_query_with`]);
//! a hit is answered on the spot like local data. On [`skua_engine::Outcome::Resolve`] it
//! hands a [`Job`] to the resolver (the query's bytes and how to reach the client back);
//! the resolver answers later, through the same socket. A hit that asks for a refresh
//! (prefetch, stale) is handed over as well, without a client.
//!
//! The cache's shards are `RwLock`s: readers on different workers share a shard's lock
//! only when their names hash to the same one of 64 shards; writers (upstream replies) take
//! it briefly.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, RwLock, Weak};

use arc_swap::ArcSwap;
use skua_resolver::cache::{Cache, CacheConfig, MsgShard, SetShard, ShardLock};
use skua_resolver::forward::{ForwardConfig, ForwardStats};
use skua_resolver::infra::Host;
use tokio::sync::mpsc;

/// A shard behind a `std::sync::RwLock` (poisoning ignored: a shard is consistent after
/// every operation, none panics halfway).
pub struct RwShard<T>(RwLock<T>);

impl<T> ShardLock<T> for RwShard<T> {
    fn new(shard: T) -> Self {
        RwShard(RwLock::new(shard))
    }
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.0.read().unwrap_or_else(|e| e.into_inner()))
    }
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.write().unwrap_or_else(|e| e.into_inner()))
    }
}

/// What the control core decides about resolving (from `forward-zone:`, `stub-zone:` and
/// the cache and upstream directives of `server:`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolverSettings {
    /// Zones, limits, EDNS size, 0x20, TCP.
    pub forward: ForwardConfig,
    /// Sizes and TTL policy of the cache.
    pub cache: CacheConfig,
    /// Source ports for UDP queries (`outgoing-port-permit` minus `-avoid`), inclusive
    /// ranges; empty for 1024-65535.
    pub ports: Vec<(u16, u16)>,
    /// `tls-cert-bundle:`: roots for DoT upstreams (PEM).
    pub tls_cert_bundle: Option<String>,
    /// `tls-system-cert:`: the system's roots too (also used when no bundle is given).
    pub tls_system_cert: bool,
}

/// The cache every dataplane reads.
pub type SharedCache = Cache<RwShard<MsgShard>, RwShard<SetShard>>;

/// How to reach a client again.
#[derive(Clone, Debug)]
pub enum Route {
    /// A UDP query: reply from the socket it came in on.
    Udp {
        /// The listening socket (a duplicate of the worker's descriptor).
        sock: Arc<UdpSocket>,
        /// The client.
        peer: SocketAddr,
        /// The lease the address the client asked is answered under, if any: checked
        /// again when the answer is ready (the lease may have ended while resolving).
        gate: crate::base::lease::Gate,
    },
    /// A query over a stream (TCP, TLS, HTTPS, QUIC): the connection's writer takes the
    /// reply, framed as the transport wants it ([`skua_serve::Kind::framed`]).
    Tcp {
        /// Which stream transport.
        kind: skua_serve::Kind,
        /// The writer of the connection.
        tx: mpsc::Sender<Vec<u8>>,
        /// The client.
        peer: SocketAddr,
        /// Pad the answer to this block length when the client asked (the encrypted
        /// transports: RFC 7830, RFC 8467 §4.1).
        pad: Option<u16>,
    },
}

impl Route {
    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        match self {
            Route::Udp { peer, .. } | Route::Tcp { peer, .. } => *peer,
        }
    }

    /// The client's source address (for the access list and rate limiting).
    pub fn src(&self) -> IpAddr {
        self.peer().ip()
    }

    /// How the client asked.
    pub fn kind(&self) -> skua_serve::Kind {
        match self {
            Route::Udp { .. } => skua_serve::Kind::Udp,
            Route::Tcp { kind, .. } => *kind,
        }
    }

    /// The padding block the client's transport asks for.
    pub fn pad(&self) -> Option<u16> {
        match self {
            Route::Udp { .. } => None,
            Route::Tcp { pad, .. } => *pad,
        }
    }
}

/// A question for the resolver.
#[derive(Debug)]
pub struct Job {
    /// The client's query as received.
    pub query: Vec<u8>,
    /// Its question, read once by the front door.
    pub question: skua_resolver::forward::Question,
    /// The way back; `None` for a refresh (prefetch or stale), which no client waits on.
    pub route: Option<Route>,
}

impl Job {
    /// A client's question that missed the cache, as the front door read it.
    pub fn miss(query: &[u8], miss: skua_serve::Miss, route: Route) -> Job {
        Job {
            query: query.to_vec(),
            question: miss.question,
            route: Some(route),
        }
    }

    /// A question the cache answered asks to be resolved again (prefetch, stale): no
    /// client waits on it. `None` when the query has no question to read.
    pub fn refresh(query: &[u8]) -> Option<Job> {
        Some(Job {
            query: query.to_vec(),
            question: skua_serve::Miss::of(query)?.question,
            route: None,
        })
    }
}

/// The forwarder's counters and what it knows of each upstream, as the resolver's task
/// last copied them (about once a second): for metrics and the control core, which never
/// touch the forwarder itself.
#[derive(Clone, Debug, Default)]
pub struct ResolverSnapshot {
    /// Upstream queries, unwanted replies, SERVFAILs...
    pub forward: ForwardStats,
    /// Questions in flight.
    pub in_flight: usize,
    /// Every upstream asked so far (RTT estimator, replies, timeouts, errors).
    pub upstreams: Vec<Host>,
    /// The `forward-host:`/`stub-host:` names and what they resolved to.
    pub hosts: Vec<skua_resolver::forward::HostStatus>,
}

/// The resolver as the dataplanes see it.
pub struct ResolverHandle {
    /// The cache.
    pub cache: Arc<SharedCache>,
    jobs: mpsc::Sender<Job>,
    /// The forwarding settings in force (zones and their upstreams).
    pub forward: ArcSwap<ForwardConfig>,
    /// The forwarder's counters, refreshed by the resolver's task.
    pub snapshot: ArcSwap<ResolverSnapshot>,
}

impl ResolverHandle {
    /// A handle on `cache` whose jobs go to `jobs`, resolving with `forward`.
    pub fn new(cache: Arc<SharedCache>, jobs: mpsc::Sender<Job>, forward: ForwardConfig) -> Self {
        ResolverHandle {
            cache,
            jobs,
            forward: ArcSwap::from_pointee(forward),
            snapshot: ArcSwap::from_pointee(ResolverSnapshot::default()),
        }
    }

    /// Queues a job without blocking; `false` when the resolver's queue is full (the
    /// caller answers SERVFAIL or drops, as a busy Unbound does).
    pub fn submit(&self, job: Job) -> bool {
        self.jobs.try_send(job).is_ok()
    }
}

/// A copy of cache entries kept outside the cache, answered from without asking it: the
/// XDP programs' cached answers. Whoever removes entries from the cache on an operator's
/// request (a flush, a load) goes through [`Mirrors::without`], so that no copy outlives
/// what it copies.
pub trait CacheMirror: Send + Sync {
    /// Stops answering every copied entry, runs `then`, and copies nothing of what the
    /// cache held before `then` returned.
    fn forget_all(&self, then: &mut dyn FnMut());
}

/// The mirrors of the cache (registered by the dataplanes that keep one).
#[derive(Default)]
pub struct Mirrors(Mutex<Vec<Weak<dyn CacheMirror>>>);

impl Mirrors {
    /// Adds a mirror (dropped mirrors go by themselves).
    pub fn register(&self, m: Weak<dyn CacheMirror>) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        v.retain(|w| w.strong_count() > 0);
        v.push(m);
    }

    /// Runs `f` (a flush, a load) with every mirror emptied first and kept from copying
    /// until `f` returned.
    pub fn without<R>(&self, f: impl FnOnce() -> R) -> R {
        let live: Vec<Arc<dyn CacheMirror>> = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut f = Some(f);
        let mut out = None;
        nest(&live, &mut || out = f.take().map(|f| f()));
        // `nest` runs the innermost closure exactly once.
        out.unwrap_or_else(|| unreachable!("mirrors ran the flush"))
    }
}

fn nest(mirrors: &[Arc<dyn CacheMirror>], f: &mut dyn FnMut()) {
    match mirrors.split_first() {
        None => f(),
        Some((m, rest)) => m.forget_all(&mut || nest(rest, f)),
    }
}
