//! The serving handle: what every dataplane shares with the control core.
//!
//! It holds the door in force ([`InForce`]: the engine, the resolver's handle and the zone
//! transfer tables, behind one [`ArcSwap`]: a worker loads it once per batch, a few
//! nanoseconds and no lock, and makes the front door, [`skua_serve::Door`], from it; the
//! control core swaps a part in atomically), the generation counter that tells the AF_XDP
//! workers an engine changed, the stop flag, and the registry of the workers' counters.
//! Queries in flight finish on the tables they started with; none is lost.
//!
//! It knows nothing of configuration files, the API or sockets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arc_swap::ArcSwap;
use skua_engine::Engine;

/// Per-worker counters (written by one thread each).
pub use skua_engine::stats::Counters as WorkerStats;

/// What every query is answered from, swapped as one: the tables the front door is made of.
#[derive(Clone)]
pub struct InForce {
    /// The engine.
    pub engine: Arc<Engine>,
    /// The resolver (its cache and job queue), when forwarding is configured.
    pub resolver: Option<Arc<crate::base::resolving::ResolverHandle>>,
    /// The zone-transfer tables: TSIG keys, transferred and secondary zones.
    pub zones: Arc<crate::base::xfr::Transfers>,
}

/// State shared by every worker.
pub struct Serving {
    /// The door in force.
    pub door: ArcSwap<InForce>,
    /// Set to stop.
    pub stop: AtomicBool,
    /// Incremented at every engine swap (XDP workers reload only when it changes).
    pub generation: AtomicU64,
    /// Counters of every kernel-socket worker started so far (retired ones included, so
    /// totals never go down) and of TCP.
    pub stats: std::sync::Mutex<Vec<Arc<WorkerStats>>>,
    /// Copies of the cache kept by dataplanes (the XDP programs' cached answers).
    pub mirrors: crate::base::resolving::Mirrors,
    /// The service addresses answered only under the host agent's lease (`ha:`).
    pub leases: crate::base::lease::Leases,
    /// Zone transfers: the dataplanes' reports, NOTIFY jobs, the secondary's queues.
    pub xfr: crate::base::xfr::Xfr,
    /// The encrypted transports: the certificate in force, DNS over HTTPS parameters,
    /// the listeners' counters.
    pub tls: crate::base::tls::Encrypted,
    /// Stream connections closed at once for their netblock's `tcp-connection-limit:`
    /// (TCP, TLS and HTTPS alike).
    pub per_client_refused: AtomicU64,
    /// The stream connections: open now, closed to make room or under pressure, refused
    /// for their source's limit.
    pub streams: Arc<StreamCounters>,
}

/// Counters of the stream connections, kept across reloads (a reload that changes
/// `incoming-num-tcp:` makes new slots, `crate::dataplane::slots`).
#[derive(Default)]
pub struct StreamCounters {
    /// Connections open now (every set of slots together).
    pub open: AtomicUsize,
    /// The slots in force (`incoming-num-tcp:` × `num-threads:`).
    pub slots: AtomicUsize,
    /// Connections closed, idle, to make room for a new one.
    pub evicted: AtomicU64,
    /// Connections closed by an idle timeout shortened by pressure.
    pub idle_pressure: AtomicU64,
    /// Connections closed at once: their source was at `tcp-connection-limit-per-source:`.
    pub per_source: AtomicU64,
}

impl Serving {
    /// State for `engine`, no workers yet.
    pub fn new(engine: Engine) -> Self {
        Self {
            door: ArcSwap::from_pointee(InForce {
                engine: Arc::new(engine),
                resolver: None,
                zones: Arc::default(),
            }),
            stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            stats: std::sync::Mutex::new(Vec::new()),
            mirrors: crate::base::resolving::Mirrors::default(),
            leases: crate::base::lease::Leases::default(),
            xfr: crate::base::xfr::Xfr::default(),
            tls: crate::base::tls::Encrypted::default(),
            per_client_refused: AtomicU64::new(0),
            streams: Arc::default(),
        }
    }

    /// Adds a worker's counters to the totals.
    pub fn register(&self, c: Arc<WorkerStats>) {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).push(c);
    }

    /// Sum of every worker's counters.
    pub fn totals(&self) -> skua_engine::stats::Totals {
        let mut t = skua_engine::stats::Totals::default();
        for c in self.stats.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            c.sum_into(&mut t);
        }
        t
    }

    /// Puts `engine` in force for every worker's next batch (the caller keeps the AF_XDP
    /// program's answers in step, see [`crate::base::planes::Dataplanes::swap`]).
    pub fn install(&self, engine: Arc<Engine>) {
        self.door.rcu(|d| InForce {
            engine: engine.clone(),
            ..InForce::clone(d)
        });
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The engine in force.
    pub fn engine(&self) -> Arc<Engine> {
        self.door.load().engine.clone()
    }

    /// The resolver in force, if any.
    pub fn resolver(&self) -> Option<Arc<crate::base::resolving::ResolverHandle>> {
        self.door.load().resolver.clone()
    }

    /// Puts a resolver in force (or none).
    pub fn set_resolver(&self, resolver: Option<Arc<crate::base::resolving::ResolverHandle>>) {
        self.door.rcu(|d| InForce {
            resolver: resolver.clone(),
            ..InForce::clone(d)
        });
    }

    /// The zone-transfer tables in force.
    pub fn zones(&self) -> Arc<crate::base::xfr::Transfers> {
        self.door.load().zones.clone()
    }

    /// Puts zone-transfer tables in force (a load, a secondary's transfer).
    pub fn set_zones(&self, zones: Arc<crate::base::xfr::Transfers>) {
        self.door.rcu(|d| InForce {
            zones: zones.clone(),
            ..InForce::clone(d)
        });
    }

    /// The engine generation in force.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}
