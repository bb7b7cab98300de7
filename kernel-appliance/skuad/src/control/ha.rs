//! The host agent's leases on the service addresses (`ha:`), as the control core grants them.
//!
//! `skua-agent` takes the lease when VRRP makes this node master and renews it every
//! advertisement interval; it revokes it when it steps down. A renewal extends only a lease
//! still running: once a lease has run out (the agent stalled, or lost its link to skuad),
//! another node may hold the address, so the agent must go back through VRRP and *take* it
//! anew, which it does only after the previous master's lease is sure to have ended.
//! Grants are capped at `ha: lease-max:`.
//!
//! Transitions (taken, released, expired) are logged and audited (`ha-lease`); renewals
//! are counted, not recorded. The audit entry is written after the change, never before:
//! a failing audit disk must not keep a node from taking over (availability first; the
//! order of events is still in the log).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Control, CtlError};
use crate::base::clock;
use crate::base::lease::Lease;
use crate::base::log;

/// Audit entry kind of a lease transition.
pub const AUDIT_LEASE: &str = "ha-lease";

/// A lease request (the API's JSON).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// How long, in milliseconds (capped at `lease-max`).
    pub ttl_ms: u32,
    /// `true`: extend a running lease only (the agent's periodic renewal); `false`: take it
    /// (the agent just became master and waited out the previous master's lease).
    #[serde(default)]
    pub renew: bool,
    /// Only these addresses (default: every `ha:` address).
    #[serde(default)]
    pub addresses: Option<Vec<IpAddr>>,
    /// Who asks (the agent's name, for the log and audit).
    #[serde(default)]
    pub holder: Option<String>,
}

/// One address's lease, as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LeaseView {
    /// The service address.
    pub address: IpAddr,
    /// Answered now.
    pub serving: bool,
    /// Milliseconds left (0 when not serving).
    pub remaining_ms: u64,
    /// Queries to it left unanswered for want of a lease (kernel sockets).
    pub unleased_queries: u64,
}

/// The leases (`GET /ha`, and the answer to a grant).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LeaseState {
    /// Every `ha:` address.
    pub addresses: Vec<LeaseView>,
    /// `lease-max` in milliseconds.
    pub lease_max_ms: u64,
    /// Grants (takes) since start.
    pub taken: u64,
    /// Renewals since start.
    pub renewed: u64,
    /// Revocations since start.
    pub released: u64,
    /// Leases that ran out since start (the agent stopped renewing).
    pub expired: u64,
}

/// Counters and the transition watcher's memory.
#[derive(Debug, Default)]
pub struct LeaseBook {
    taken: AtomicU64,
    renewed: AtomicU64,
    released: AtomicU64,
    expired: AtomicU64,
    /// Per address: the expiry last granted, so the watcher can tell "ran out" from
    /// "revoked" and report each expiry once.
    granted: std::sync::Mutex<Vec<(IpAddr, u64)>>,
}

/// A caller's text (the holder's name, a release reason) fit for a log line and an audit
/// entry: no control characters (no forged lines), at most 200 characters.
pub(crate) fn printable(s: &str) -> String {
    printable_max(s, 200)
}

/// `s` without control characters, at most `max` characters: text from elsewhere (another
/// node, an upstream's answer) made fit for one log line.
pub(crate) fn printable_max(s: &str, max: usize) -> String {
    s.chars().filter(|c| !c.is_control()).take(max).collect()
}

fn view(l: &Lease, now: u64) -> LeaseView {
    let until = l.until();
    LeaseView {
        address: l.addr,
        serving: now < until,
        remaining_ms: until.saturating_sub(now) / 1_000_000,
        unleased_queries: l.unleased(),
    }
}

impl Control {
    /// Whether this node answers a service address under a lease now.
    pub fn holds_lease(&self) -> bool {
        let now = clock::mono_ns();
        self.serving.leases.all().iter().any(|l| l.serving_at(now))
    }

    /// Whether this node has service addresses (`ha: address:`).
    pub fn has_leases(&self) -> bool {
        !self.serving.leases.all().is_empty()
    }

    /// Every lease now.
    pub fn leases(&self) -> LeaseState {
        let now = clock::mono_ns();
        let b = &self.leases;
        LeaseState {
            addresses: self
                .serving
                .leases
                .all()
                .iter()
                .map(|l| view(l, now))
                .collect(),
            lease_max_ms: self.serving.leases.max().as_millis() as u64,
            taken: b.taken.load(Ordering::Relaxed),
            renewed: b.renewed.load(Ordering::Relaxed),
            released: b.released.load(Ordering::Relaxed),
            expired: b.expired.load(Ordering::Relaxed),
        }
    }

    fn chosen(&self, only: Option<&[IpAddr]>) -> Result<Vec<Arc<Lease>>, CtlError> {
        let all = self.serving.leases.all();
        if all.is_empty() {
            return Err(CtlError::Conflict(
                "no service address is configured for leases (ha: address:)".into(),
            ));
        }
        match only {
            None => Ok(all.to_vec()),
            Some(list) => list
                .iter()
                .map(|a| {
                    self.serving.leases.get(*a).ok_or_else(|| {
                        CtlError::NotFound(format!("{a} is not an ha: address of this node"))
                    })
                })
                .collect(),
        }
    }

    /// Takes or renews the lease (see the module documentation). Blocking only on the
    /// audit log, and only on a transition.
    pub fn lease(
        &self,
        actor: &str,
        source: Option<IpAddr>,
        req: &LeaseRequest,
    ) -> Result<LeaseState, CtlError> {
        if req.ttl_ms == 0 {
            return Err(CtlError::BadRequest("ttl_ms must be at least 1".into()));
        }
        let leases = self.chosen(req.addresses.as_deref())?;
        let ttl = Duration::from_millis(req.ttl_ms.into()).min(self.serving.leases.max());
        let now = clock::mono_ns();
        let until = now + ttl.as_nanos() as u64;
        if req.renew {
            // All or nothing: a renewal that finds any lease over changes none.
            if let Some(l) = leases.iter().find(|l| !l.serving_at(now)) {
                return Err(CtlError::Conflict(format!(
                    "lease on {} is not running: take it anew (renew: false) once the \
                     previous holder's lease is over",
                    l.addr
                )));
            }
        }
        let mut taken = Vec::new();
        {
            let mut granted = self
                .leases
                .granted
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for l in &leases {
                if !l.serving_at(now) {
                    taken.push(l.addr);
                }
                // Never shortens a running lease: the holder was promised it.
                if l.until() < until {
                    l.set_until(until);
                }
                let e = l.until();
                match granted.iter_mut().find(|(a, _)| *a == l.addr) {
                    Some(g) => g.1 = e,
                    None => granted.push((l.addr, e)),
                }
            }
        }
        self.planes.leases_changed();
        if req.renew {
            self.leases.renewed.fetch_add(1, Ordering::Relaxed);
        }
        if !taken.is_empty() {
            self.leases.taken.fetch_add(1, Ordering::Relaxed);
            let holder = printable(req.holder.as_deref().unwrap_or(actor));
            let list: Vec<String> = taken.iter().map(ToString::to_string).collect();
            log::info(format_args!(
                "ha: lease taken by {holder} on {} for {} ms",
                list.join(" "),
                ttl.as_millis()
            ));
            self.record(
                AUDIT_LEASE,
                actor,
                source,
                serde_json::json!({"event": "taken", "holder": holder, "addresses": list,
                    "ttl_ms": ttl.as_millis() as u64}),
            );
        }
        Ok(self.leases())
    }

    /// Revokes the leases (`only`: these addresses): this node stops answering them now.
    pub fn release(
        &self,
        actor: &str,
        source: Option<IpAddr>,
        only: Option<&[IpAddr]>,
        reason: &str,
    ) -> Result<LeaseState, CtlError> {
        let reason = printable(reason);
        let leases = self.chosen(only)?;
        let now = clock::mono_ns();
        let mut released = Vec::new();
        {
            let mut granted = self
                .leases
                .granted
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for l in &leases {
                if l.serving_at(now) {
                    released.push(l.addr.to_string());
                }
                l.set_until(0);
                granted.retain(|(a, _)| *a != l.addr);
            }
        }
        self.planes.leases_changed();
        if !released.is_empty() {
            self.leases.released.fetch_add(1, Ordering::Relaxed);
            log::info(format_args!(
                "ha: lease released on {} ({reason})",
                released.join(" ")
            ));
            self.record(
                AUDIT_LEASE,
                actor,
                source,
                serde_json::json!({"event": "released", "addresses": released, "reason": reason}),
            );
        }
        Ok(self.leases())
    }

    /// Reports leases that ran out since the last call (logged and audited once each);
    /// returns how long until the next one could. Blocking (audit).
    pub fn check_leases(&self) -> Duration {
        let now = clock::mono_ns();
        let mut ran_out = Vec::new();
        let mut next = u64::MAX;
        {
            let mut granted = self
                .leases
                .granted
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            granted.retain_mut(|(a, until)| {
                // Revoked or reconfigured away: nothing ran out.
                let current = self.serving.leases.get(*a).map_or(0, |l| l.until());
                if current == 0 {
                    return false;
                }
                *until = current;
                if now >= current {
                    ran_out.push(a.to_string());
                    false
                } else {
                    next = next.min(current);
                    true
                }
            });
        }
        if !ran_out.is_empty() {
            self.leases.expired.fetch_add(1, Ordering::Relaxed);
            log::warn(format_args!(
                "ha: lease on {} ran out (the agent stopped renewing it): not answered here",
                ran_out.join(" ")
            ));
            self.record(
                AUDIT_LEASE,
                "system",
                None,
                serde_json::json!({"event": "expired", "addresses": ran_out}),
            );
        }
        // At most every 20 ms when a lease runs, every 200 ms otherwise: the answer paths
        // do not wait for this (they read the clock), only the log and audit do.
        if next == u64::MAX {
            Duration::from_millis(200)
        } else {
            Duration::from_nanos(next.saturating_sub(now))
                .clamp(Duration::from_millis(1), Duration::from_millis(20))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn caller_text_cannot_forge_log_lines_or_grow_without_bound() {
        assert_eq!(
            printable("node1/dns4\nskuad info: forged"),
            "node1/dns4skuad info: forged"
        );
        assert_eq!(printable(&"x".repeat(5000)).len(), 200);
        assert_eq!(
            printable("VRRP: backup (Preempted)"),
            "VRRP: backup (Preempted)"
        );
    }
}
