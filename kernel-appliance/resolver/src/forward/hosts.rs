//! Upstreams given by name (`forward-host:`/`stub-host:`): their resolution through the
//! zone that holds the name, what they resolved to, and the questions parked on a zone
//! until its hosts give it an address.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use skua_engine::rr::rtype;
use skua_engine::wire::rcode;

use super::{
    Begin, Done, Entropy, Family, Forwarder, HostPlan, HostState, Question, Refused, Upstream, Via,
    Waiter, plan_hosts, secs, upstream_addr,
};
use crate::cache::{Kind, MsgShard, SetShard, ShardLock};
use crate::render::Section;

/// What the forwarder knows of a host ([`Forwarder::hosts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostStatus {
    /// The zone it serves ([`HostConfig::zone`](super::HostConfig::zone)).
    pub zone: Vec<u8>,
    /// Its name ([`HostConfig::name`](super::HostConfig::name)).
    pub name: Vec<u8>,
    /// The port its addresses are asked on.
    pub port: u16,
    /// How its name is resolved.
    pub plan: HostPlan,
    /// The addresses in use, with the port (IPv4 first): upstreams of the zone.
    pub addrs: Vec<SocketAddr>,
    /// Addresses it resolved to that are not used, and why ([`upstream_addr`]:
    /// `do-not-query-localhost`, multicast, broadcast, link-local).
    pub refused: Vec<(IpAddr, Refused)>,
    /// A resolution is under way.
    pub resolving: bool,
    /// Every family asked was answered at least once (addresses, or none).
    pub answered: bool,
    /// Resolutions that failed in a row (SERVFAIL, no upstream answered); 0 after an
    /// answer. The addresses in use are kept meanwhile.
    pub failures: u32,
    /// When it is next resolved, ms (the earliest of its families); `None` if never.
    pub next_ms: Option<u64>,
}

/// Addresses of one family a `forward-host:`/`stub-host:` name contributes at most (the
/// lowest ones of its answer): Unbound too uses only a few addresses per server name.
pub const MAX_HOST_ADDRS: usize = 8;

/// The least time between two resolutions of a host's name, ms (a TTL of 0 would
/// otherwise have it asked continuously).
pub const HOST_MIN_REFRESH_MS: u64 = 5_000;
/// After a failed resolution of a host's name, the next one comes after 1 s, doubling on
/// each failure in a row up to this, ms.
pub const HOST_MAX_RETRY_MS: u64 = 60_000;

/// The address in an A or AAAA record's RDATA.
fn ip_of(rdata: &[u8]) -> Option<IpAddr> {
    match rdata.len() {
        4 => {
            let b: [u8; 4] = rdata.try_into().ok()?;
            Some(IpAddr::V4(Ipv4Addr::from(b)))
        }
        16 => {
            let b: [u8; 16] = rdata.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(b)))
        }
        _ => None,
    }
}

/// What came of resolving a host's name for one address type.
pub(super) enum HostOutcome {
    /// These addresses, fresh until the expiry (cache seconds).
    Addrs(Vec<IpAddr>, u32),
    /// None (NXDOMAIN, NODATA), until the expiry (cache seconds).
    Negative(u32),
    /// SERVFAIL, no upstream answered, over a limit.
    Failed,
}

impl<C: Clone, M: ShardLock<MsgShard>, S: ShardLock<SetShard>> Forwarder<C, M, S> {
    /// Each host of `config.hosts`, in order: how it is resolved and what it resolved to.
    pub fn hosts(&self) -> Vec<HostStatus> {
        self.hosts
            .iter()
            .map(|h| {
                let mut addrs = Vec::new();
                let mut refused = Vec::new();
                for fam in &h.fams {
                    for &ip in &fam.addrs {
                        // Once: an AAAA record may hold an IPv4-mapped address, kept as
                        // the IPv4 address.
                        let a = SocketAddr::new(ip, h.cfg.port);
                        if !addrs.contains(&a) {
                            addrs.push(a);
                        }
                    }
                    refused.extend(fam.refused.iter().copied());
                }
                let on = || h.fams.iter().filter(|f| f.on);
                HostStatus {
                    zone: h.cfg.zone.clone(),
                    name: h.cfg.name.clone(),
                    port: h.cfg.port,
                    plan: h.plan,
                    addrs,
                    refused,
                    resolving: on().any(|f| f.pending),
                    answered: on().count() > 0 && on().all(|f| f.answered),
                    failures: on().map(|f| f.failures).max().unwrap_or(0),
                    next_ms: match h.plan {
                        HostPlan::Via(_) => on().filter(|f| !f.pending).map(|f| f.due).min(),
                        _ => None,
                    },
                }
            })
            .collect()
    }

    /// Builds the hosts' state for `self.config` (its zones as configured, without the
    /// hosts' addresses), keeping what `old` knew of a host that is configured the same and
    /// resolved through a zone configured the same (`refresh`: resolve them all again
    /// soon), and the zones' upstreams from it. A host whose resolving zone changed (other
    /// addresses, settings, hosts, or another zone now holds its name) starts afresh:
    /// what the old zone said is not trusted any more, as its cache entries are not.
    pub(super) fn set_hosts(&mut self, old: Vec<HostState>, refresh: bool) {
        let plans = plan_hosts(&self.config);
        let (ip4, ip6) = (self.config.do_ip4, self.config.do_ip6);
        let mut hosts = Vec::with_capacity(self.config.hosts.len());
        for (cfg, plan) in self.config.hosts.iter().zip(plans) {
            let fresh = [Family::new(rtype::A, ip4), Family::new(rtype::AAAA, ip6)];
            let via = match plan {
                HostPlan::Via(v) => self.config.zones.get(v).map(|z| Via {
                    zone: z.clone(),
                    hosts: self
                        .config
                        .hosts
                        .iter()
                        .filter(|h| h.zone == z.name)
                        .cloned()
                        .collect(),
                }),
                _ => None,
            };
            let mut fams = match old.iter().find(|o| o.cfg == *cfg) {
                Some(o) if via.is_some() && o.via == via => o.fams.clone(),
                _ => fresh.clone(),
            };
            for (fam, on) in fams.iter_mut().zip([ip4, ip6]) {
                if !on {
                    *fam = Family::new(fam.qtype, false);
                }
                fam.on = on;
                if refresh && !fam.pending {
                    fam.due = 0;
                }
            }
            hosts.push(HostState {
                cfg: cfg.clone(),
                plan,
                zone: self.config.zones.iter().position(|z| z.name == cfg.zone),
                via,
                fams,
            });
        }
        self.hosts = hosts;
        let zones = &self.config.zones;
        self.cuts = zones
            .iter()
            .map(|z| {
                zones
                    .iter()
                    .filter(|c| {
                        c.name.len() > z.name.len()
                            && skua_engine::name::is_subdomain(&c.name, &z.name)
                    })
                    .map(|c| c.name.clone())
                    .collect()
            })
            .collect();
        self.base = self
            .config
            .zones
            .iter()
            .map(|z| z.upstreams.clone())
            .collect();
        for z in 0..self.config.zones.len() {
            self.rebuild(z);
        }
        self.prune_infra();
        self.generation += 1;
    }

    /// Sets zone `z`'s upstreams: its own, then its hosts' addresses.
    fn rebuild(&mut self, z: usize) {
        let Some(mut ups) = self.base.get(z).cloned() else {
            return;
        };
        for h in self.hosts.iter().filter(|h| h.zone == Some(z)) {
            for ip in h.fams.iter().flat_map(|f| f.addrs.iter()) {
                let addr = SocketAddr::new(*ip, h.cfg.port);
                if !ups.iter().any(|u| u.addr == addr) {
                    ups.push(Upstream {
                        addr,
                        tls_name: h.cfg.tls_name.clone(),
                    });
                }
            }
        }
        if let Some(zone) = self.config.zones.get_mut(z)
            && zone.upstreams != ups
        {
            zone.upstreams = ups;
            self.generation += 1;
        }
    }

    /// Forgets what is known of addresses that are no zone's upstream any more.
    fn prune_infra(&mut self) {
        let keep: BTreeSet<SocketAddr> = self
            .config
            .zones
            .iter()
            .flat_map(|z| z.upstreams.iter().map(|u| u.addr))
            .collect();
        self.infra.retain(|a| keep.contains(a));
    }

    /// Whether one of zone `z`'s hosts that is resolved through another zone is being
    /// resolved, or is due and will be by the end of this call ([`Forwarder::drain`]): a
    /// question of `z` without an address may wait for it. (A host resolved through `z`
    /// itself cannot give it its first address.)
    pub(super) fn zone_waits(&self, z: usize, now: u64) -> bool {
        self.hosts.iter().any(|h| {
            h.zone == Some(z)
                && matches!(h.plan, HostPlan::Via(v) if v != z)
                && h.fams.iter().any(|f| f.pending || (f.on && f.due <= now))
        })
    }

    /// Starts resolving every host name that is due.
    pub(super) fn run_hosts(&mut self, now: u64, rng: &mut impl Entropy) {
        let mut due: Vec<Question> = Vec::new();
        for h in &self.hosts {
            if !matches!(h.plan, HostPlan::Via(_)) {
                continue;
            }
            for fam in &h.fams {
                if fam.on && !fam.pending && fam.due <= now {
                    let q = Question {
                        name: h.cfg.name.clone(),
                        qtype: fam.qtype,
                        qclass: skua_engine::rr::class::IN,
                    };
                    if !due.contains(&q) {
                        due.push(q);
                    }
                }
            }
        }
        for q in due {
            self.start_host(q, now, rng);
        }
    }

    /// Resolves `q` (a host's name, A or AAAA) for every host that waits on it: from the
    /// cache's RRsets when there, else as a question of the zone that holds the name.
    fn start_host(&mut self, q: Question, now: u64, rng: &mut impl Entropy) {
        let mut any = false;
        for h in &mut self.hosts {
            if h.cfg.name != q.name || !matches!(h.plan, HostPlan::Via(_)) {
                continue;
            }
            for fam in &mut h.fams {
                if fam.on && fam.qtype == q.qtype && !fam.pending {
                    fam.pending = true;
                    any = true;
                }
            }
        }
        if !any {
            return;
        }
        // No new generation: that a resolution is under way is in `hosts()`, which the
        // caller reads whenever it likes; what it republishes on a new generation (the
        // zones' upstreams, what it logs) changes only with the outcome.
        if let Some((set, exp)) = self.cache.rrset(&q.name, q.qtype, q.qclass, secs(now)) {
            let ips = set.rdatas.iter().filter_map(|r| ip_of(r)).collect();
            return self.host_result(&q, HostOutcome::Addrs(ips, exp), now);
        }
        match self.begin(q.clone(), Some(Waiter::Host), None, now, rng) {
            Begin::Pending => {}
            Begin::NoZone(_) | Begin::Busy(_) => self.host_result(&q, HostOutcome::Failed, now),
        }
    }

    /// What the resolution of `q` for hosts came to, from the question's end.
    pub(super) fn host_outcome(q: &Question, done: Option<&Done>, now_s: u32) -> HostOutcome {
        let Some(d) = done else {
            return HostOutcome::Failed;
        };
        if d.rcode != 0 && d.rcode != u16::from(rcode::NXDOMAIN) {
            return HostOutcome::Failed;
        }
        let expires = d
            .sets
            .iter()
            .filter(|(_, sec, _)| *sec != Section::Additional)
            .map(|&(_, _, e)| e)
            .min()
            .unwrap_or(now_s);
        let ips: Vec<IpAddr> = d
            .sets
            .iter()
            .filter(|(s, sec, _)| *sec == Section::Answer && s.rtype == q.qtype)
            .flat_map(|(s, _, _)| s.rdatas.iter().filter_map(|r| ip_of(r)))
            .collect();
        if d.kind == Kind::Positive && !ips.is_empty() {
            HostOutcome::Addrs(ips, expires)
        } else {
            HostOutcome::Negative(expires)
        }
    }

    /// Applies the outcome of resolving `q` to the hosts waiting on it, and their zones'
    /// upstreams; questions parked on those zones go on (or fail when nothing is left to
    /// wait for) in [`Forwarder::drain`].
    pub(super) fn host_result(&mut self, q: &Question, out: HostOutcome, now: u64) {
        let dnql = self.config.do_not_query_localhost;
        let mut refused = 0u64;
        let mut changed = false;
        let refresh_at = |exp: u32| (u64::from(exp) * 1000).max(now + HOST_MIN_REFRESH_MS);
        let mut zones: Vec<usize> = Vec::new();
        for h in &mut self.hosts {
            if h.cfg.name != q.name {
                continue;
            }
            for fam in &mut h.fams {
                if fam.qtype != q.qtype || !fam.pending {
                    continue;
                }
                fam.pending = false;
                let before = (
                    fam.addrs.clone(),
                    fam.refused.clone(),
                    fam.answered,
                    fam.failures,
                );
                match &out {
                    HostOutcome::Addrs(ips, exp) => {
                        fam.addrs.clear();
                        fam.refused.clear();
                        // Canonical, sorted (a rotated answer is the same set, not a
                        // change) and capped: an upstream's reply must not turn into
                        // thousands of upstreams.
                        let mut ips: Vec<IpAddr> = ips.iter().map(|ip| ip.to_canonical()).collect();
                        ips.sort_unstable();
                        ips.dedup();
                        for ip in ips {
                            match upstream_addr(SocketAddr::new(ip, h.cfg.port), dnql) {
                                Ok(_) if fam.addrs.len() < MAX_HOST_ADDRS => fam.addrs.push(ip),
                                Ok(_) => {}
                                Err(why) => {
                                    refused += 1;
                                    if fam.refused.len() < MAX_HOST_ADDRS {
                                        fam.refused.push((ip, why));
                                    }
                                }
                            }
                        }
                        fam.failures = 0;
                        fam.answered = true;
                        fam.due = refresh_at(*exp);
                    }
                    HostOutcome::Negative(exp) => {
                        // The name stopped resolving (or has no address of this type).
                        fam.addrs.clear();
                        fam.refused.clear();
                        fam.failures = 0;
                        fam.answered = true;
                        fam.due = refresh_at(*exp);
                    }
                    HostOutcome::Failed => {
                        // The addresses in use stay until an answer says otherwise.
                        fam.failures = fam.failures.saturating_add(1);
                        let shift = fam.failures.min(7) - 1;
                        fam.due = now + (1000u64 << shift).min(HOST_MAX_RETRY_MS);
                    }
                }
                // Visible: the addresses (in use and left out), whether answered, the
                // failures in a row; not when it is next asked. The same addresses again
                // (sorted, so in any order) are no change.
                if (&fam.addrs, &fam.refused, fam.answered, fam.failures)
                    != (&before.0, &before.1, before.2, before.3)
                {
                    changed = true;
                }
                if let Some(z) = h.zone
                    && !zones.contains(&z)
                {
                    zones.push(z);
                }
            }
        }
        self.stats.host_addrs_refused += refused;
        if changed {
            self.generation += 1;
        }
        if zones.is_empty() {
            return;
        }
        for &z in &zones {
            self.rebuild(z);
        }
        self.prune_infra();
        self.to_unpark.extend(zones);
    }

    /// Takes `q` out of the questions parked on zone `z`.
    pub(super) fn unindex_parked(&mut self, z: usize, q: &Question) {
        if let Some(set) = self.parked.get_mut(&z) {
            set.remove(q);
            if set.is_empty() {
                self.parked.remove(&z);
            }
        }
    }

    /// Questions parked on zone `z`: sent when it has upstreams now, failed when it has
    /// none and nothing it waits for is under way.
    pub(super) fn unpark(&mut self, z: usize, now: u64, rng: &mut impl Entropy) {
        if !self.parked.contains_key(&z) {
            return;
        }
        let ready = self
            .config
            .zones
            .get(z)
            .is_some_and(|zc| !zc.upstreams.is_empty());
        if !ready && self.zone_waits(z, now) {
            self.hosts_due = true;
            return;
        }
        let parked = self.parked.remove(&z).unwrap_or_default();
        #[cfg(test)]
        {
            self.unpark_visits += parked.len() as u64;
        }
        for q in parked {
            match self.flights.get_mut(&q) {
                Some(f) if f.parked && f.zone == z => f.parked = false,
                _ => continue,
            }
            if ready {
                self.send(&q, now, rng, None);
            } else {
                self.fail(&q, now);
            }
        }
    }
}
