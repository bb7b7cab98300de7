//! The narrow interface through which the control core drives the dataplanes.
//!
//! The control core holds a `dyn` [`Dataplanes`] and never names a socket, a queue or an XDP
//! program: it asks for an engine swap, new listener settings, the state for `/health`, and
//! counters for metrics. [`crate::dataplane::Planes`] implements it for the kernel sockets
//! and AF_XDP; the resolver's upstream I/O and the encrypted listeners will sit behind it too.

use std::sync::Arc;

use serde::Serialize;
use skua_engine::Engine;
use skua_xdp::worker::QueueStats;

use crate::base::resolving::ResolverSettings;
use crate::base::serving::Serving;
use crate::base::settings::Settings;

/// Status of the AF_XDP dataplane, for `/health`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "state", content = "reason", rename_all = "snake_case")]
pub enum DataplaneState {
    /// Kernel sockets only, by choice (`--no-xdp`) or because no interface qualifies.
    Sockets,
    /// AF_XDP running, self-test passed.
    Xdp,
    /// XDP was wanted, its start or self-test failed; kernel sockets serve.
    Degraded(String),
}

/// One AF_XDP queue's counters.
pub struct QueueCounters {
    /// Interface name.
    pub ifname: String,
    /// Queue id.
    pub queue: u32,
    /// The worker's own counters (relaxed atomics, read at request time).
    pub stats: Arc<QueueStats>,
}

/// One XDP program's counters, by name.
pub struct ProgramCounters {
    /// Interface it is attached to.
    pub ifname: String,
    /// `(name, value)` in the program's order.
    pub counters: Vec<(&'static str, u64)>,
}

/// What the control core may ask of the dataplanes.
pub trait Dataplanes: Send + Sync {
    /// Puts `engine` in force on every dataplane: [`Serving::install`], with whatever a
    /// dataplane must do around it (the XDP program's own answers are suspended before and
    /// reloaded after, so no client gets an old answer after a new one).
    fn swap(&self, serving: &Serving, engine: Arc<Engine>);
    /// Makes the listeners match new settings (blocking: binds, drains, joins threads).
    /// `Err`: some listener could not be bound; the others changed.
    fn apply(&self, settings: &Settings) -> Result<(), String>;
    /// The AF_XDP state.
    fn state(&self) -> DataplaneState;
    /// Per-queue counters of the AF_XDP workers.
    fn queues(&self) -> Vec<QueueCounters>;
    /// Counters of the XDP programs.
    fn programs(&self) -> Vec<ProgramCounters>;
    /// Human-readable counters, one line per queue and program (SIGUSR1, stop).
    fn summary(&self) -> Vec<String>;
    /// Starts, reconfigures or (`None`) stops the resolver, and puts its handle in the
    /// serving handle. A change of cache sizes starts it afresh (an empty cache); other
    /// changes keep the cache. `Err` (a TLS root bundle that cannot be read): nothing
    /// changed.
    fn resolver(
        &self,
        serving: &Serving,
        settings: Option<&ResolverSettings>,
    ) -> Result<(), String>;
    /// A lease on a service address was taken, renewed or released: dataplanes that keep
    /// their own copy of it (the XDP programs' destination maps) update it.
    fn leases_changed(&self) {}
}
