//! The serving handle: what every dataplane shares with the control core.
//!
//! It holds the engine in force (an [`ArcSwap`]: a worker loads it once per batch, a few
//! nanoseconds and no lock; the control core swaps in a new one atomically), the generation
//! counter that tells the AF_XDP workers an engine changed, the stop flag, and the registry
//! of the kernel-socket workers' counters. Queries in flight finish on the engine they
//! started with; none is lost.
//!
//! It knows nothing of configuration files, the API or sockets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arc_swap::ArcSwap;
use skua_engine::Engine;

/// Per-worker counters (written by one thread each).
pub use skua_engine::stats::Counters as WorkerStats;

/// State shared by every worker.
pub struct Serving {
    /// The engine in force.
    pub engine: ArcSwap<Engine>,
    /// Set to stop.
    pub stop: AtomicBool,
    /// Incremented at every engine swap (XDP workers reload only when it changes).
    pub generation: AtomicU64,
    /// Counters of every kernel-socket worker started so far (retired ones included, so
    /// totals never go down) and of TCP.
    pub stats: std::sync::Mutex<Vec<Arc<WorkerStats>>>,
    /// The resolver (its cache and job queue), when forwarding is configured.
    pub resolver: arc_swap::ArcSwapOption<crate::base::resolving::ResolverHandle>,
    /// Copies of the cache kept by dataplanes (the XDP programs' cached answers).
    pub mirrors: crate::base::resolving::Mirrors,
    /// The service addresses answered only under the host agent's lease (`ha:`).
    pub leases: crate::base::lease::Leases,
    /// Zone transfers: what they are answered from, and the reports of the TCP dataplane.
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
            engine: ArcSwap::from_pointee(engine),
            stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            stats: std::sync::Mutex::new(Vec::new()),
            resolver: arc_swap::ArcSwapOption::empty(),
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
        self.engine.store(engine);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The engine generation in force.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}
