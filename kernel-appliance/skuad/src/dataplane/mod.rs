//! The dataplanes: kernel sockets ([`listeners`], [`sockets`], DNS over HTTPS on them:
//! [`doh`], DNS over QUIC: [`doq`]) and AF_XDP ([`xdp`]), and
//! the zone transfers' own sockets: the NOTIFY sender ([`notify`]) and the secondary
//! ([`xfrin`]).
//!
//! They serve whatever engine the [`Serving`] handle holds and know nothing of the
//! configuration file, the control core or the API. [`Planes`] bundles them behind the
//! [`Dataplanes`] interface the control core drives. New dataplanes go here, each behind
//! the same interface.

pub mod answer;
pub mod doh;
pub mod doq;
pub mod listeners;
pub mod notify;
pub mod slots;
pub mod sockets;
pub mod upstream;
pub mod xdp;
pub mod xfrin;

use std::sync::{Arc, Mutex, MutexGuard};

use skua_engine::Engine;

use crate::base::log;
use crate::base::planes::{DataplaneState, Dataplanes, ProgramCounters, QueueCounters};
use crate::base::resolving::ResolverSettings;
use crate::base::serving::Serving;
use crate::base::settings::Settings;
use listeners::Listeners;
use xdp::{Started, XdpOptions, XdpPlane};

/// The process's dataplanes: the kernel-socket listeners (always) and the AF_XDP plane
/// (when it started and passed its self-test).
pub struct Planes {
    serving: Arc<Serving>,
    xdp_opts: XdpOptions,
    listeners: Mutex<Option<Listeners>>,
    xdp: Mutex<Option<XdpPlane>>,
    state: Mutex<DataplaneState>,
    resolver: Mutex<Option<upstream::Resolver>>,
    rt: tokio::runtime::Handle,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Planes {
    /// Binds the kernel sockets for `settings` and starts their workers (no XDP yet).
    pub fn start_sockets(
        settings: &Settings,
        serving: Arc<Serving>,
        xdp_opts: XdpOptions,
    ) -> Result<Self, String> {
        let listeners = Listeners::start(settings, serving.clone())?;
        Ok(Self {
            serving,
            xdp_opts,
            listeners: Mutex::new(Some(listeners)),
            xdp: Mutex::new(None),
            state: Mutex::new(DataplaneState::Sockets),
            resolver: Mutex::new(None),
            rt: tokio::runtime::Handle::current(),
        })
    }

    /// Starts AF_XDP per the options given at start. It comes after the sockets: the kernel
    /// path is always there to fall back to, and what the XDP program passes (TCP,
    /// fragments, other queues) lands on it. `Err`: `--xdp-required` and impossible.
    pub fn start_xdp(&self, settings: &Settings) -> Result<DataplaneState, String> {
        let slow = match lock(&self.listeners).as_ref() {
            Some(l) => l.slow_sockets(),
            None => Vec::new(),
        };
        let state = match xdp::start(settings, &self.xdp_opts, &self.serving, &slow)? {
            Started::Running(p) => {
                *lock(&self.xdp) = Some(p);
                DataplaneState::Xdp
            }
            Started::NotUsed => DataplaneState::Sockets,
            Started::FellBack(why) => DataplaneState::Degraded(why),
        };
        *lock(&self.state) = state.clone();
        Ok(state)
    }

    /// Stops the kernel sockets, then AF_XDP (logging its counters and detaching its
    /// programs). Call with the serving handle's stop flag set, inside the runtime.
    pub fn stop(&self) {
        if let Some(mut l) = lock(&self.listeners).take() {
            l.stop();
        }
        if let Some(r) = lock(&self.resolver).take() {
            self.serving.set_resolver(None);
            r.stop();
        }
        if let Some(mut p) = lock(&self.xdp).take() {
            for line in p.summary() {
                log::info(format_args!("{line}"));
            }
            p.shutdown();
        }
    }
}

impl Dataplanes for Planes {
    fn leases_changed(&self) {
        if let Some(p) = lock(&self.xdp).as_ref() {
            p.leases_changed();
        }
    }

    fn resolver(
        &self,
        serving: &Serving,
        settings: Option<&ResolverSettings>,
    ) -> Result<(), String> {
        let mut guard = lock(&self.resolver);
        // Cached answers in the XDP programs were proven against the old settings (zones,
        // upstreams, cache policy): they go, and hot names come back as they are asked.
        if guard.as_ref().map(|r| r.settings()) != settings
            && let Some(p) = lock(&self.xdp).as_ref()
        {
            p.forget_cached();
        }
        let Some(new) = settings else {
            if let Some(r) = guard.take() {
                serving.set_resolver(None);
                r.stop();
                log::info(format_args!("resolver stopped"));
            }
            return Ok(());
        };
        match guard.as_mut() {
            Some(r) if r.settings() == new => Ok(()),
            Some(r) if r.settings().cache == new.cache => r.reconfigure(new),
            _ => {
                let r = upstream::Resolver::start(&self.rt, self.serving.clone(), new)?;
                serving.set_resolver(Some(r.handle.clone()));
                if let Some(old) = guard.replace(r) {
                    old.stop();
                }
                log::info(format_args!(
                    "resolver: {} forward/stub zone(s), cache {} + {} bytes",
                    new.forward.zones.len(),
                    new.cache.msg_bytes,
                    new.cache.rrset_bytes
                ));
                Ok(())
            }
        }
    }

    fn swap(&self, serving: &Serving, engine: Arc<Engine>) {
        let plane = lock(&self.xdp);
        if let Some(p) = plane.as_ref() {
            p.suspend_answers();
        }
        serving.install(engine.clone());
        if let Some(p) = plane.as_ref() {
            p.resume_answers(&engine);
        }
    }

    /// The XDP plane serves the same addresses and sends through the first socket of
    /// each, so it restarts when the UDP listeners change.
    fn apply(&self, s: &Settings) -> Result<(), String> {
        let mut guard = lock(&self.listeners);
        let Some(l) = guard.as_mut() else {
            return Ok(());
        };
        let r = l.apply(s);
        let udp_changed = match &r {
            Ok(c) => c.udp_changed(),
            Err(_) => true,
        };
        if udp_changed {
            let slow = l.slow_sockets();
            drop(guard);
            let mut plane = lock(&self.xdp);
            if let Some(mut p) = plane.take() {
                log::info(format_args!("xdp: restarting for the new listeners"));
                p.shutdown();
            }
            let state = match xdp::start(s, &self.xdp_opts, &self.serving, &slow) {
                Ok(Started::Running(p)) => {
                    *plane = Some(p);
                    DataplaneState::Xdp
                }
                Ok(Started::NotUsed) => DataplaneState::Sockets,
                Ok(Started::FellBack(why)) => DataplaneState::Degraded(why),
                Err(e) => DataplaneState::Degraded(e),
            };
            *lock(&self.state) = state;
        }
        r.map(|_| ())
    }

    fn state(&self) -> DataplaneState {
        // The path watch may have taken the XDP plane down since it started.
        if let Some(why) = lock(&self.xdp).as_ref().and_then(XdpPlane::failed) {
            return DataplaneState::Degraded(why);
        }
        lock(&self.state).clone()
    }

    fn queues(&self) -> Vec<QueueCounters> {
        lock(&self.xdp)
            .as_ref()
            .map(|p| {
                p.workers
                    .iter()
                    .map(|w| QueueCounters {
                        ifname: w.ifname.clone(),
                        queue: w.queue,
                        stats: w.stats.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn programs(&self) -> Vec<ProgramCounters> {
        lock(&self.xdp)
            .as_ref()
            .map(|p| {
                p.program_stats()
                    .into_iter()
                    .map(|(ifname, counters)| ProgramCounters { ifname, counters })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn summary(&self) -> Vec<String> {
        lock(&self.xdp)
            .as_ref()
            .map(XdpPlane::summary)
            .unwrap_or_default()
    }
}
