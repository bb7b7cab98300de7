//! Address leases: the service addresses of the `ha:` clause are answered only while the
//! host agent (`skua-agent`, which runs VRRP) holds a lease on them for this node.
//!
//! Why a lease and not "the address is on the interface": a VRRP master whose agent dies
//! (`kill -9` of keepalived, a frozen agent) keeps the address configured, so two hosts
//! would answer for it. Here the agent renews a short lease every advertisement interval;
//! when it stops, the lease runs out and every dataplane stops answering the address by
//! itself, within the lease, whatever the kernel still holds. `docs/ha.md` has the timing
//! argument (lease shorter than the backup's master-down interval).
//!
//! A lease is an expiry on `CLOCK_MONOTONIC` (never stepped). Readers (the UDP workers once
//! per batch, TCP per query, the resolver before it answers a client, the XDP program per
//! packet from its destination map) compare it with the clock themselves: nothing has to
//! run for a lease to end. The control core grants, renews and revokes
//! ([`crate::control`]), and audits the transitions.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use crate::base::clock;

/// One leased address.
#[derive(Debug)]
pub struct Lease {
    /// The service address (canonical: IPv4-mapped IPv6 as IPv4).
    pub addr: IpAddr,
    /// Expiry in [`clock::mono_ns`] nanoseconds; 0: no lease.
    until: AtomicU64,
    /// Queries to the address left unanswered for want of a lease (kernel sockets).
    unleased: AtomicU64,
}

impl Lease {
    /// A lease not held.
    pub fn new(addr: IpAddr) -> Self {
        Self {
            addr: addr.to_canonical(),
            until: AtomicU64::new(0),
            unleased: AtomicU64::new(0),
        }
    }

    /// Counts `n` queries left unanswered for want of a lease.
    pub fn count_unleased(&self, n: u64) {
        self.unleased.fetch_add(n, Ordering::Relaxed);
    }

    /// Queries left unanswered for want of a lease, since the address was first leased.
    pub fn unleased(&self) -> u64 {
        self.unleased.load(Ordering::Relaxed)
    }

    /// Whether the address may be answered now.
    pub fn serving(&self) -> bool {
        self.serving_at(clock::mono_ns())
    }

    /// Whether the address may be answered at `now` ([`clock::mono_ns`]).
    pub fn serving_at(&self, now: u64) -> bool {
        now < self.until.load(Ordering::Acquire)
    }

    /// The expiry ([`clock::mono_ns`]; 0: none).
    pub fn until(&self) -> u64 {
        self.until.load(Ordering::Acquire)
    }

    /// Sets the expiry (0 revokes). Only the control core calls this.
    pub fn set_until(&self, until: u64) {
        self.until.store(until, Ordering::Release);
    }
}

/// The leased addresses in force (changed by reloads; a lease on an address that stays in
/// the configuration survives a reload).
#[derive(Debug, Default)]
pub struct Leases {
    list: ArcSwap<Vec<Arc<Lease>>>,
    /// The longest lease granted, in nanoseconds (`ha: lease-max:`).
    max_ns: AtomicU64,
}

impl Leases {
    /// The lease on `ip`, if it is a leased address (dataplanes ask when they bind).
    pub fn get(&self, ip: IpAddr) -> Option<Arc<Lease>> {
        let ip = ip.to_canonical();
        self.list.load().iter().find(|l| l.addr == ip).cloned()
    }

    /// Every leased address.
    pub fn all(&self) -> Arc<Vec<Arc<Lease>>> {
        self.list.load_full()
    }

    /// The longest lease granted.
    pub fn max(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.max_ns.load(Ordering::Relaxed))
    }

    /// Makes the leased addresses `addrs`, granted for at most `max`: kept ones keep their
    /// lease, new ones start without, removed ones are revoked (a listener that still holds
    /// one stops answering).
    pub fn configure(&self, addrs: &[IpAddr], max: std::time::Duration) {
        self.max_ns.store(
            u64::try_from(max.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let old = self.list.load_full();
        let mut next: Vec<Arc<Lease>> = Vec::new();
        for a in addrs.iter().map(|a| a.to_canonical()) {
            if next.iter().any(|l| l.addr == a) {
                continue;
            }
            match old.iter().find(|l| l.addr == a) {
                Some(l) => next.push(l.clone()),
                None => next.push(Arc::new(Lease::new(a))),
            }
        }
        for l in old
            .iter()
            .filter(|l| !next.iter().any(|n| n.addr == l.addr))
        {
            l.set_until(0);
        }
        self.list.store(Arc::new(next));
    }
}

/// What the dataplanes check before answering a client: nothing (`None`, an ordinary
/// address) or a lease.
pub type Gate = Option<Arc<Lease>>;

/// Whether a client of an address with gate `g` may be answered now.
pub fn open(g: &Gate) -> bool {
    g.as_ref().is_none_or(|l| l.serving())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_ends_by_itself() {
        let l = Lease::new("::ffff:198.18.53.53".parse().unwrap());
        assert_eq!(l.addr, "198.18.53.53".parse::<IpAddr>().unwrap());
        assert!(!l.serving(), "no lease until granted");
        let now = clock::mono_ns();
        l.set_until(now + 50_000_000);
        assert!(l.serving());
        assert!(l.serving_at(now + 49_999_999));
        assert!(!l.serving_at(now + 50_000_000), "expiry is exclusive");
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert!(!l.serving(), "nobody revoked it: the clock ended it");
        assert!(open(&None));
        assert!(!open(&Some(Arc::new(l))));
    }

    #[test]
    fn reconfiguring_keeps_held_leases_and_revokes_removed_ones() {
        let ls = Leases::default();
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = (
            "198.18.53.53".parse().unwrap(),
            "fd00:53::53".parse().unwrap(),
            "198.18.53.54".parse().unwrap(),
        );
        ls.configure(&[a, b, a], std::time::Duration::from_secs(1));
        assert_eq!(ls.all().len(), 2, "duplicates are one lease");
        let la = ls.get(a).unwrap();
        let lb = ls.get(b).unwrap();
        let until = clock::mono_ns() + 10_000_000_000;
        la.set_until(until);
        lb.set_until(until);
        ls.configure(&[a, c], std::time::Duration::from_millis(500));
        assert_eq!(ls.max(), std::time::Duration::from_millis(500));
        assert!(Arc::ptr_eq(&ls.get(a).unwrap(), &la), "kept with its lease");
        assert!(la.serving());
        assert!(!lb.serving(), "removed: revoked for whoever still holds it");
        assert!(ls.get(b).is_none());
        assert!(!ls.get(c).unwrap().serving(), "new: not held");
    }
}
