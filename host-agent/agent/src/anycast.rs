//! Anycast: the service prefixes announced by an existing routing daemon (BIRD 2 or FRR)
//! while this node is healthy, withdrawn while a critical health check fails.
//!
//! The mechanism is an address, not a protocol: while every critical check (`weight = 0`)
//! passes, the agent keeps each `[[anycast]]` prefix as an address on a dummy interface of
//! its own (`skua-any0` by default, created and set up if absent); when one fails, it
//! removes them (an existing interface of that name, `lo` for one, is used as it is). The
//! routing daemon announces whatever that interface holds (BIRD:
//! `protocol direct { interface "skua-any*"; }` exported to its BGP sessions; FRR:
//! `redistribute connected` through a route map matching the interface), so the BGP
//! announcement follows the address. Why an address rather than the daemon's control
//! socket (`birdc disable`, vtysh): it works unchanged with any daemon that announces
//! connected prefixes; nothing couples the agent to a daemon's version, socket path or
//! permissions; and it is state, not an event: a routing daemon that restarts reads the
//! interface again and announces exactly what the agent decided, where a command sent to
//! the old daemon would be lost. `docs/ha-anycast.md` has the configurations, the
//! measured times, and what happens when the agent itself dies (the addresses stay: the
//! route stays).
//!
//! Hysteresis is the checks' `fall`/`rise`. At start the prefixes are announced only once
//! every critical check has passed `rise` runs in a row ([`Verdict::unproven`]); prefixes
//! found already on the interface (a previous run killed without withdrawing) are kept
//! while the checks confirm them, so that an agent restarted after a crash does not flap
//! the route (a stopped one withdrew them: SIGTERM withdraws).
//! The kernel state is compared with the wanted one every second, and repaired (logged)
//! if something else changed it.
//!
//! What it does not do: speak BGP (the routing daemon does; no home-made routing
//! protocol), take weights into account (a weighted check moves VRRP priority only; an
//! anycast prefix is announced or not), or lease the addresses in skuad: every anycast
//! node answers on them, by design.

use std::io;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::addr::{Vip, contains, parse_vips};
use crate::health::{CheckConfig, Verdict};
use crate::logging::log;
use crate::net;

/// How often the kernel's state is compared with the wanted one (ns).
const SYNC_NS: u64 = 1_000_000_000;

/// `[[anycast]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnycastConfig {
    /// A name for logs and metrics.
    pub name: String,
    /// The interface the prefixes are added to: created as a dummy if absent, used as it
    /// is (set up if down) if present. Default `skua-any0`.
    #[serde(default = "default_interface")]
    pub interface: String,
    /// The service prefixes, `ADDR` or `ADDR/PREFIX` (32/128 when not given): each becomes
    /// an address on the interface and is announced with that prefix length. Both
    /// families may be mixed. skuad listens on each address (`interface:` with
    /// `ip-freebind: yes`, see docs/ha-anycast.md).
    pub addresses: Vec<String>,
}

fn default_interface() -> String {
    "skua-any0".into()
}

impl AnycastConfig {
    /// The prefixes, parsed.
    pub fn prefixes(&self) -> Result<Vec<Vip>, String> {
        parse_vips(&self.addresses)
    }

    /// Checks the section on its own (errors name the field).
    pub fn check(&self) -> Result<(), String> {
        let i = &self.interface;
        // IFNAMSIZ is 16 with the terminating NUL; dev_valid_name() refuses the rest.
        if i.is_empty()
            || i.len() > 15
            || i == "."
            || i == ".."
            || i.chars().any(|c| c == '/' || c == ':' || c.is_whitespace())
        {
            return Err(format!(
                "interface = \"{i}\": not a valid interface name (1-15 characters, no '/', ':' \
                 or spaces)"
            ));
        }
        let prefixes = self.prefixes()?;
        if prefixes.is_empty() {
            return Err("addresses is empty".into());
        }
        for (k, p) in prefixes.iter().enumerate() {
            let bad = match p.addr {
                IpAddr::V4(a) => {
                    a.is_unspecified()
                        || a.is_loopback()
                        || a.is_multicast()
                        || a.is_broadcast()
                        || a.is_link_local()
                }
                IpAddr::V6(a) => {
                    a.is_unspecified()
                        || a.is_loopback()
                        || a.is_multicast()
                        || a.is_unicast_link_local()
                }
            };
            if bad {
                return Err(format!(
                    "address '{}' is not a routable unicast address",
                    self.addresses[k]
                ));
            }
            if prefixes[..k].iter().any(|o| o.addr == p.addr) {
                return Err(format!("address '{}' is listed twice", self.addresses[k]));
            }
        }
        Ok(())
    }
}

/// Checks a section against the rest of the file: its addresses in no earlier section and
/// in no `[[vrrp]]` (one mechanism per address); no DNS check aimed inside its prefixes;
/// at least one critical check.
/// `vrrp` is each `[[vrrp]]` instance's name and addresses.
pub fn check_against(
    a: &AnycastConfig,
    earlier: &[AnycastConfig],
    vrrp: &[(&str, Vec<Vip>)],
    checks: &[CheckConfig],
) -> Result<(), String> {
    let mine = a.prefixes()?;
    for p in &mine {
        for o in earlier {
            if o.prefixes()
                .unwrap_or_default()
                .iter()
                .any(|q| q.addr == p.addr)
            {
                return Err(format!(
                    "address {} is also in [[anycast]] {}",
                    p.addr, o.name
                ));
            }
        }
        for (name, vips) in vrrp {
            if vips.iter().any(|q| q.addr == p.addr) {
                return Err(format!(
                    "address {} is also a VRRP address of [[vrrp]] {name} (an address is \
                     either moved by VRRP or announced by anycast)",
                    p.addr
                ));
            }
        }
    }
    // A canary aimed at the anycast address asks whoever holds the route once this node
    // withdrew it: another anycast node (the check passes, the prefixes come back while
    // skuad here is still down: a flap) or nobody (they never come back).
    for c in checks {
        if let Some(t) = c.target
            && let Some(p) = mine.iter().find(|p| contains(**p, t.ip()))
        {
            return Err(format!(
                "check {} asks {}, inside the anycast prefix {}/{}: once withdrawn, the address \
                 is no longer on this node and the canary would reach another node or none; \
                 aim it at an address of this node that skuad also listens on (127.0.0.1:53)",
                c.name, t, p.addr, p.prefix
            ));
        }
    }
    if !checks.iter().any(|c| c.weight == 0) {
        return Err(
            "no critical [[check]] (weight = 0): it is what withdraws the prefixes when this \
             node stops answering"
                .into(),
        );
    }
    Ok(())
}

/// What the agent does to the kernel, behind a trait so that the logic is tested without
/// one ([`System`] is the real one).
pub trait Kernel {
    /// Makes sure the interface exists (creating a dummy) and is up; its index.
    fn ensure_interface(&mut self, name: &str) -> io::Result<u32>;
    /// The interface's index, `None` if there is none.
    fn find_interface(&mut self, name: &str) -> io::Result<Option<u32>>;
    /// The interface's addresses (both families).
    fn addresses(&mut self, name: &str) -> io::Result<Vec<IpAddr>>;
    /// Adds or removes one address.
    fn set(&mut self, ifindex: u32, p: Vip, add: bool) -> io::Result<()>;
}

/// The kernel, through rtnetlink and `getifaddrs(3)`.
pub struct System;

impl Kernel for System {
    fn ensure_interface(&mut self, name: &str) -> io::Result<u32> {
        net::ensure_dummy(name)
    }
    fn find_interface(&mut self, name: &str) -> io::Result<Option<u32>> {
        Ok(net::link(name)?.map(|l| l.index))
    }
    fn addresses(&mut self, name: &str) -> io::Result<Vec<IpAddr>> {
        let mut v = net::addresses(name, false)?;
        v.extend(net::addresses(name, true)?);
        Ok(v)
    }
    fn set(&mut self, ifindex: u32, p: Vip, add: bool) -> io::Result<()> {
        net::set_address(ifindex, p, add)
    }
}

/// One prefix in [`AnycastStatus`].
#[derive(Debug, Clone, Serialize)]
pub struct PrefixStatus {
    /// `ADDR/LEN`.
    pub prefix: String,
    /// On the interface now (what the routing daemon announces).
    pub announced: bool,
}

/// State and counters for `/status` and `/metrics`.
#[derive(Debug, Clone, Serialize)]
pub struct AnycastStatus {
    /// Section name.
    pub name: String,
    /// The dummy interface.
    pub interface: String,
    /// Wanted: announced (the critical checks pass) or withdrawn.
    pub announced: bool,
    /// Each prefix.
    pub prefixes: Vec<PrefixStatus>,
    /// Announce/withdraw transitions since the agent started.
    pub transitions: u64,
    /// Milliseconds since the last transition (or the start).
    pub since_ms: u64,
    /// Why withdrawn (absent while announced).
    pub reason: Option<String>,
    /// The last kernel error, while the interface is not as wanted.
    pub error: Option<String>,
}

/// One `[[anycast]]` section at run time.
pub struct Anycast {
    cfg: AnycastConfig,
    prefixes: Vec<Vip>,
    /// Wanted on the interface.
    announced: bool,
    /// Each prefix on the interface, as last seen or set.
    present: Vec<bool>,
    transitions: u64,
    since: u64,
    reason: Option<String>,
    next_sync: u64,
    error: Option<String>,
}

impl Anycast {
    /// The section, withdrawn, not touching the kernel yet.
    pub fn new(cfg: AnycastConfig) -> Result<Anycast, String> {
        let prefixes = cfg.prefixes().map_err(|e| format!("[{}] {e}", cfg.name))?;
        Ok(Anycast {
            present: vec![false; prefixes.len()],
            prefixes,
            cfg,
            announced: false,
            transitions: 0,
            since: 0,
            reason: Some("starting: waiting for the critical checks to pass".into()),
            next_sync: 0,
            error: None,
        })
    }

    fn list(&self) -> String {
        self.prefixes
            .iter()
            .map(|p| format!("{}/{}", p.addr, p.prefix))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Creates the interface if absent and looks at what a previous run left there:
    /// prefixes found stay announced while the checks confirm them.
    pub fn start(&mut self, now: u64, k: &mut impl Kernel) -> Result<(), String> {
        let name = &self.cfg.name;
        k.ensure_interface(&self.cfg.interface)
            .map_err(|e| format!("[{name}] {e}"))?;
        let have = k
            .addresses(&self.cfg.interface)
            .map_err(|e| format!("[{name}] {}: {e}", self.cfg.interface))?;
        for (i, p) in self.prefixes.iter().enumerate() {
            self.present[i] = have.contains(&p.addr);
        }
        self.since = now;
        if self.present.iter().any(|p| *p) {
            self.announced = true;
            self.reason = None;
            log(
                name,
                format_args!(
                    "{} already on {} (left by a previous run): kept announced while the \
                     checks confirm",
                    self.list(),
                    self.cfg.interface
                ),
            );
        }
        Ok(())
    }

    /// Follows the checks' verdict; called every loop turn. Cheap when nothing changes: the
    /// kernel is touched on a transition and once a second otherwise.
    pub fn apply(&mut self, now: u64, v: &Verdict, k: &mut impl Kernel) {
        let want = match (&v.critical, &v.unproven) {
            (Some(why), _) => Err(why),
            // Not announced yet since the start: wait until every critical check passed.
            (None, Some(why)) if !self.announced => Err(why),
            _ => Ok(()),
        };
        if want.is_ok() != self.announced {
            self.set_wanted(now, want.err().cloned());
        }
        if now >= self.next_sync {
            self.sync(now, k);
        }
    }

    fn set_wanted(&mut self, now: u64, withdraw: Option<String>) {
        self.announced = withdraw.is_none();
        self.transitions += 1;
        self.since = now;
        let (name, list, ifname) = (&self.cfg.name, self.list(), &self.cfg.interface);
        match &withdraw {
            None => log(
                name,
                format_args!("announcing {list} (adding to {ifname}): the critical checks pass"),
            ),
            Some(why) => log(
                name,
                format_args!("withdrawing {list} (removing from {ifname}): {why}"),
            ),
        }
        self.reason = withdraw;
        // At once, not at the next periodic look.
        self.next_sync = 0;
    }

    /// Withdraws now (the agent is stopping).
    pub fn withdraw(&mut self, now: u64, why: &str, k: &mut impl Kernel) {
        if self.announced {
            self.set_wanted(now, Some(why.into()));
        }
        self.sync(now, k);
    }

    fn sync(&mut self, now: u64, k: &mut impl Kernel) {
        self.next_sync = now.saturating_add(SYNC_NS);
        match self.reconcile(k) {
            Ok(()) => {
                if self.error.take().is_some() {
                    log(
                        &self.cfg.name,
                        format_args!("{} is as wanted again", self.cfg.interface),
                    );
                }
            }
            Err(e) => {
                if self.error.as_deref() != Some(e.as_str()) {
                    log(
                        &self.cfg.name,
                        format_args!("{e} (tried again every second)"),
                    );
                }
                self.error = Some(e);
            }
        }
    }

    /// Makes the interface hold the prefixes, or not, as wanted.
    fn reconcile(&mut self, k: &mut impl Kernel) -> Result<(), String> {
        let ifname = self.cfg.interface.clone();
        let index = if self.announced {
            Some(k.ensure_interface(&ifname).map_err(|e| e.to_string())?)
        } else {
            k.find_interface(&ifname)
                .map_err(|e| format!("{ifname}: {e}"))?
        };
        let Some(index) = index else {
            // No interface, no address: withdrawn.
            self.present.fill(false);
            return Ok(());
        };
        let have = k.addresses(&ifname).map_err(|e| format!("{ifname}: {e}"))?;
        for (i, p) in self.prefixes.iter().enumerate() {
            let on = have.contains(&p.addr);
            if on != self.present[i] {
                log(
                    &self.cfg.name,
                    format_args!(
                        "{}/{} was {} {ifname} by something else",
                        p.addr,
                        p.prefix,
                        if on { "added to" } else { "removed from" }
                    ),
                );
            }
            self.present[i] = on;
            if on != self.announced {
                let verb = if self.announced { "adding" } else { "removing" };
                k.set(index, *p, self.announced)
                    .map_err(|e| format!("{verb} {}/{} on {ifname}: {e}", p.addr, p.prefix))?;
                self.present[i] = self.announced;
            }
        }
        Ok(())
    }

    /// The status now.
    pub fn status(&self, now: u64) -> AnycastStatus {
        AnycastStatus {
            name: self.cfg.name.clone(),
            interface: self.cfg.interface.clone(),
            announced: self.announced,
            prefixes: self
                .prefixes
                .iter()
                .zip(&self.present)
                .map(|(p, on)| PrefixStatus {
                    prefix: format!("{}/{}", p.addr, p.prefix),
                    announced: *on,
                })
                .collect(),
            transitions: self.transitions,
            since_ms: now.saturating_sub(self.since) / 1_000_000,
            reason: self.reason.clone(),
            error: self.error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel in memory that counts what it is asked.
    #[derive(Default)]
    struct Fake {
        exists: bool,
        addrs: Vec<IpAddr>,
        calls: usize,
        /// `set` fails while this is set.
        fail: Option<i32>,
    }

    impl Kernel for Fake {
        fn ensure_interface(&mut self, _: &str) -> io::Result<u32> {
            self.calls += 1;
            self.exists = true;
            Ok(7)
        }
        fn find_interface(&mut self, _: &str) -> io::Result<Option<u32>> {
            self.calls += 1;
            Ok(self.exists.then_some(7))
        }
        fn addresses(&mut self, _: &str) -> io::Result<Vec<IpAddr>> {
            self.calls += 1;
            Ok(self.addrs.clone())
        }
        fn set(&mut self, ifindex: u32, p: Vip, add: bool) -> io::Result<()> {
            self.calls += 1;
            assert_eq!(ifindex, 7);
            if let Some(e) = self.fail {
                return Err(io::Error::from_raw_os_error(e));
            }
            self.addrs.retain(|a| *a != p.addr);
            if add {
                self.addrs.push(p.addr);
            }
            Ok(())
        }
    }

    fn cfg() -> AnycastConfig {
        AnycastConfig {
            name: "dns".into(),
            interface: "skua-any0".into(),
            addresses: vec!["198.18.99.53/32".into(), "fd00:99::53".into()],
        }
    }

    const MS: u64 = 1_000_000;

    fn ok() -> Verdict {
        Verdict::default()
    }
    fn failing() -> Verdict {
        Verdict {
            critical: Some("check canary fails: timeout".into()),
            ..Verdict::default()
        }
    }
    fn unproven() -> Verdict {
        Verdict {
            unproven: Some("check canary has not passed yet".into()),
            ..Verdict::default()
        }
    }

    fn ips(k: &Fake) -> Vec<String> {
        let mut v: Vec<String> = k.addrs.iter().map(ToString::to_string).collect();
        v.sort();
        v
    }

    #[test]
    fn announced_once_proven_withdrawn_on_failure_and_back_on_recovery() {
        let mut k = Fake::default();
        let mut a = Anycast::new(cfg()).unwrap();
        a.start(0, &mut k).unwrap();
        assert!(k.exists, "the interface is created at start");
        a.apply(MS, &unproven(), &mut k);
        assert!(k.addrs.is_empty(), "not before every critical check passed");
        assert_eq!(a.status(MS).transitions, 0);
        a.apply(2 * MS, &ok(), &mut k);
        assert_eq!(ips(&k), ["198.18.99.53", "fd00:99::53"]);
        let s = a.status(3 * MS);
        assert!(s.announced && s.prefixes.iter().all(|p| p.announced));
        assert_eq!((s.transitions, s.since_ms, s.reason), (1, 1, None));
        // Once announced, an unproven check (it cannot be, but a new one) does not withdraw.
        a.apply(4 * MS, &unproven(), &mut k);
        assert_eq!(k.addrs.len(), 2);
        a.apply(5 * MS, &failing(), &mut k);
        assert!(k.addrs.is_empty(), "withdrawn on the same turn");
        let s = a.status(5 * MS);
        assert!(!s.announced && s.prefixes.iter().all(|p| !p.announced));
        assert_eq!(s.transitions, 2);
        assert_eq!(s.reason.as_deref(), Some("check canary fails: timeout"));
        a.apply(6 * MS, &ok(), &mut k);
        assert_eq!(k.addrs.len(), 2);
        assert_eq!(a.status(6 * MS).transitions, 3);
    }

    #[test]
    fn nothing_is_asked_of_the_kernel_between_transitions_but_once_a_second() {
        let mut k = Fake::default();
        let mut a = Anycast::new(cfg()).unwrap();
        a.start(0, &mut k).unwrap();
        a.apply(0, &ok(), &mut k);
        let after = k.calls;
        for t in 1..50 {
            a.apply(t * 20 * MS, &ok(), &mut k);
        }
        assert_eq!(k.calls, after, "no kernel call within the second");
        a.apply(SYNC_NS, &ok(), &mut k);
        assert_eq!(
            k.calls,
            after + 2,
            "one look: the interface and its addresses"
        );
    }

    #[test]
    fn the_kernel_is_repaired_when_something_else_changes_it() {
        let mut k = Fake::default();
        let mut a = Anycast::new(cfg()).unwrap();
        a.start(0, &mut k).unwrap();
        a.apply(0, &ok(), &mut k);
        k.addrs.clear();
        a.apply(SYNC_NS, &ok(), &mut k);
        assert_eq!(k.addrs.len(), 2, "re-added at the next look");
        a.apply(SYNC_NS + MS, &failing(), &mut k);
        k.addrs.push("198.18.99.53".parse().unwrap());
        a.apply(3 * SYNC_NS, &failing(), &mut k);
        assert!(k.addrs.is_empty(), "removed again");
        assert_eq!(a.status(0).transitions, 2, "repairs are not transitions");
    }

    #[test]
    fn kernel_errors_are_reported_and_retried() {
        let mut k = Fake {
            fail: Some(libc::EPERM),
            ..Fake::default()
        };
        let mut a = Anycast::new(cfg()).unwrap();
        a.start(0, &mut k).unwrap();
        a.apply(0, &ok(), &mut k);
        let s = a.status(0);
        assert!(s.announced, "wanted");
        assert!(s.prefixes.iter().all(|p| !p.announced), "but not there");
        assert!(
            s.error
                .unwrap()
                .contains("adding 198.18.99.53/32 on skua-any0")
        );
        k.fail = None;
        a.apply(SYNC_NS / 2, &ok(), &mut k);
        assert!(k.addrs.is_empty(), "not before a second passed");
        a.apply(SYNC_NS, &ok(), &mut k);
        assert_eq!(k.addrs.len(), 2);
        assert!(a.status(0).error.is_none());
    }

    #[test]
    fn a_previous_runs_prefixes_stay_and_stopping_withdraws() {
        let mut k = Fake {
            exists: true,
            addrs: vec!["198.18.99.53".parse().unwrap()],
            ..Fake::default()
        };
        let mut a = Anycast::new(cfg()).unwrap();
        a.start(0, &mut k).unwrap();
        // The checks have not proven themselves yet, but what was announced stays (and is
        // completed), so that an agent restart does not flap the route.
        a.apply(0, &unproven(), &mut k);
        assert_eq!(ips(&k), ["198.18.99.53", "fd00:99::53"]);
        assert_eq!(a.status(0).transitions, 0);
        a.withdraw(MS, "stopping", &mut k);
        assert!(k.addrs.is_empty());
        let s = a.status(MS);
        assert_eq!((s.transitions, s.reason.as_deref()), (1, Some("stopping")));
        // Withdrawn with no interface at all: nothing to do, no error.
        let mut k = Fake::default();
        let mut a = Anycast::new(cfg()).unwrap();
        a.withdraw(0, "stopping", &mut k);
        assert!(!k.exists && a.status(0).error.is_none());
    }
}
