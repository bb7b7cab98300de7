//! One VRRP instance at run time: skua-vrrp's router, its socket, and the lease on skuad's
//! service addresses that makes the addresses answered by at most one node.
//!
//! The rules (`docs/ha.md` has the timing argument):
//! - **Renew before every advertisement.** The lease is extended right before each of our
//!   advertisements goes out, so it never outlives our last advertisement by more than the
//!   lease (< 3 intervals, the shortest master-down interval): when this agent dies or
//!   stalls, its skuad stops answering before any backup takes over.
//! - **Take only when the previous master's lease is over.** On becoming Master we take the
//!   lease once the last advertisement heard from another master is a lease old (it renewed
//!   at the latest when it sent it), or at once when that master said it left (priority
//!   0, which skua-agent sends whenever it gives mastership up). Only then are the
//!   addresses added and announced, so traffic never moves to a node that does not answer
//!   yet.
//! - **skuad unusable → step down.** A take or renewal that fails (skuad down, or the lease
//!   ran out because we stalled) makes the router leave with priority 0 (the backup takes
//!   over after its skew time) and hold in Initialize until skuad answers again.

use std::net::{IpAddr, Ipv6Addr};

use skua_vrrp::packet::ChecksumMode;
use skua_vrrp::router::{self, ForeignMaster, Output, Reason, Router, State};

use crate::addr::Vip;
use crate::config;
use crate::logging::log;
use crate::net::{self, VrrpSocket};
use crate::skuad::Client;

/// Attempts at taking the lease (20 ms apart) before a silent skuad counts as gone.
const TAKE_TRIES: u32 = 5;
/// How often the link state is read.
const LINK_POLL_NS: u64 = 20_000_000;
/// How long a step-down holds the router in Initialize before it tries again.
const HOLD_DOWN_NS: u64 = 1_000_000_000;
/// Announcements are repeated once, this long after the first (a neighbour that missed
/// the first moves on the second; keepalived repeats too).
const REANNOUNCE_NS: u64 = 1_000_000_000;

/// Where the lease stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Not master, nothing held.
    Idle,
    /// Master, waiting until the previous master's lease is surely over.
    Waiting {
        /// When it will be.
        safe_at: u64,
    },
    /// Held and renewed; the addresses are ours.
    Held {
        /// Last successful take or renewal.
        renewed_at: u64,
    },
    /// Master, but another station announced our address while we held it: another node
    /// took over without hearing our advertisements (they are lost on the way). We gave
    /// the lease and the addresses up, and take them again only when nobody answers DNS on
    /// the address any more, or when that node says it left (priority 0).
    Conflict {
        /// Since when.
        since: u64,
        /// Next look at whether somebody still answers.
        probe_at: u64,
    },
}

/// When the lease may be taken, given the last other master heard: at once if none, or if
/// it left (priority 0); else a lease after its last advertisement (it renewed its own
/// lease at the latest right before sending that advertisement).
pub fn safe_at(foreign: Option<ForeignMaster>, lease_ns: u64, now: u64) -> u64 {
    match foreign {
        Some(f) if !f.released => now.max(f.last_advert_ns.saturating_add(lease_ns)),
        _ => now,
    }
}

/// Counters and state for metrics and `skuactl ha status`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Status {
    /// Instance name.
    pub name: String,
    /// Interface.
    pub interface: String,
    /// VRID.
    pub vrid: u8,
    /// `initialize`, `backup`, `master`, `fault`.
    pub state: String,
    /// Effective priority.
    pub priority: u8,
    /// The lease: `idle`, `waiting`, `held`.
    pub lease: String,
    /// Milliseconds since the last take or renewal (when held).
    pub lease_age_ms: Option<u64>,
    /// The virtual addresses.
    pub addresses: Vec<String>,
    /// The last other router heard (address, priority).
    pub peer: Option<(String, u8)>,
    /// State changes.
    pub transitions: u64,
    /// Adverts sent / received / dropped.
    pub adverts_sent: u64,
    /// Adverts received.
    pub adverts_received: u64,
    /// Adverts dropped by the receive checks.
    pub adverts_dropped: u64,
    /// Lease takes.
    pub lease_takes: u64,
    /// Lease renewals.
    pub lease_renewals: u64,
    /// Failed takes or renewals (each one a step-down).
    pub lease_failures: u64,
    /// Another station announced our address while we held it (we gave it up).
    pub conflicts: u64,
    /// Times mastership was given up because skuad could not be used.
    pub step_downs: u64,
}

/// One running instance.
pub struct Instance {
    /// Its configuration.
    pub cfg: config::Instance,
    agent: String,
    router: Router,
    sock: VrrpSocket,
    /// Announcements of our addresses by other stations (ARP or NA), for conflicts.
    watch: net::Watch,
    mac: [u8; 6],
    primary: IpAddr,
    ifindex: u32,
    vips: Vec<Vip>,
    ll: Option<Ipv6Addr>,
    lease_ns: u64,
    hold: Hold,
    link: bool,
    link_checked: u64,
    /// In Initialize after a step-down: try again after this.
    held_down_until: Option<u64>,
    reannounce_at: Option<u64>,
    /// Renewed for this `now` already (several Sends in one batch: one renewal).
    renewed_for: Option<u64>,
    /// A critical health check fails: out of the election (Initialize) until it passes.
    health_blocked: Option<String>,
    /// The early probe: (the other master's last advertisement it followed, answered?).
    early_probe: Option<(u64, bool)>,
    /// Takes in a row that skuad did not answer in time.
    take_failures: u32,
    status: Status,
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Initialize => "initialize",
        State::Backup => "backup",
        State::Master => "master",
        State::Fault => "fault",
    }
}

impl Instance {
    /// Opens the instance's socket and builds its router (not started).
    pub fn open(cfg: config::Instance, agent: &str) -> Result<Instance, String> {
        let vips = cfg.vips()?;
        let v6 = vips[0].addr.is_ipv6();
        let name = &cfg.name;
        let ifindex = net::if_index(&cfg.interface).map_err(|e| format!("[{name}] {e}"))?;
        let own = net::addresses(&cfg.interface, v6).map_err(|e| format!("[{name}] {e}"))?;
        let ll = own.iter().find_map(|a| match a {
            IpAddr::V6(v) if v.is_unicast_link_local() => Some(*v),
            _ => None,
        });
        let primary = match cfg.source {
            Some(s) => s,
            None if v6 => IpAddr::V6(ll.ok_or_else(|| {
                format!("[{name}] {} has no IPv6 link-local address", cfg.interface)
            })?),
            None => *own
                .iter()
                .find(|a| !vips.iter().any(|v| v.addr == **a))
                .ok_or_else(|| format!("[{name}] {} has no IPv4 address", cfg.interface))?,
        };
        let router = build_router(&cfg, primary, &vips).map_err(|e| format!("[{name}] {e}"))?;
        let sock = VrrpSocket::open(&cfg.interface, primary, !cfg.unicast_peers.is_empty())
            .map_err(|e| format!("[{name}] VRRP socket on {}: {e}", cfg.interface))?;
        let watch = if v6 {
            net::Watch::Na(
                net::NaWatch::open(&cfg.interface)
                    .map_err(|e| format!("[{name}] NA watch on {}: {e}", cfg.interface))?,
            )
        } else {
            net::Watch::Arp(
                net::ArpWatch::open(ifindex)
                    .map_err(|e| format!("[{name}] ARP watch on {}: {e}", cfg.interface))?,
            )
        };
        let mac = net::mac(&cfg.interface).map_err(|e| format!("[{name}] {e}"))?;
        let status = Status {
            name: cfg.name.clone(),
            interface: cfg.interface.clone(),
            vrid: cfg.vrid,
            addresses: vips.iter().map(|v| v.addr.to_string()).collect(),
            ..Status::default()
        };
        Ok(Instance {
            lease_ns: u64::from(cfg.lease()) * 1_000_000,
            agent: agent.to_string(),
            link: net::link_up(&cfg.interface),
            cfg,
            router,
            sock,
            watch,
            mac,
            primary,
            ifindex,
            vips,
            ll,
            hold: Hold::Idle,
            link_checked: 0,
            held_down_until: None,
            reannounce_at: None,
            renewed_for: None,
            health_blocked: None,
            early_probe: None,
            take_failures: 0,
            status,
        })
    }

    /// The sockets, for poll: VRRP first, then the ARP watch.
    pub fn fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        vec![self.sock.fd(), self.watch.fd()]
    }

    /// Starts the router (Backup, or Master for an owner), or Fault when the link is down.
    pub fn start(&mut self, now: u64, skuad: &mut Client) {
        // Whatever a previous run left: the addresses are not ours until we take the lease.
        self.remove_addresses();
        self.router.startup(now);
        if !self.link {
            self.router.link_down(now);
        }
        self.drain(now, skuad);
    }

    /// The earliest time [`Instance::tick`] has work.
    pub fn deadline(&self) -> Option<u64> {
        let w = match self.hold {
            Hold::Waiting { safe_at } => Some(safe_at),
            Hold::Conflict { probe_at, .. } => Some(probe_at),
            _ => None,
        };
        [
            self.router.poll_timeout(),
            w,
            self.held_down_until,
            self.reannounce_at,
            self.early_probe_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Timers, link state, the lease wait.
    pub fn tick(&mut self, now: u64, skuad: &mut Client) {
        // The link state (a sysfs read) at most every 20 ms, not at every wake-up.
        let up = if now >= self.link_checked + LINK_POLL_NS {
            self.link_checked = now;
            net::link_up(&self.cfg.interface)
        } else {
            self.link
        };
        if up != self.link {
            self.link = up;
            log(
                &self.cfg.name,
                format_args!("link {}", if up { "up" } else { "down" }),
            );
            if up {
                self.router.link_up(now);
            } else {
                self.router.link_down(now);
            }
        }
        if self.router.poll_timeout().is_some_and(|t| t <= now) {
            self.router.handle_timeout(now);
        }
        self.drain(now, skuad);
        if let Some(t) = self.held_down_until
            && now >= t
            && self.health_blocked.is_none()
        {
            // Ready again only when skuad answers its health check.
            match skuad.call("GET", "/health", None) {
                Ok(r) if r.status == 200 => {
                    self.held_down_until = None;
                    log(
                        &self.cfg.name,
                        format_args!("skuad answers again: rejoining as backup"),
                    );
                    self.router.startup(now);
                    if !self.link {
                        self.router.link_down(now);
                    }
                    self.drain(now, skuad);
                }
                _ => self.held_down_until = Some(now + HOLD_DOWN_NS),
            }
        }
        if let Some(at) = self.early_probe_at()
            && now >= at
            && let Some(f) = self.router.foreign_master()
        {
            // The master has been silent for longer than a lease: its lease is over, so
            // whether anybody answers now is what the takeover will need to know. Asked
            // here, before the master-down interval ends, it costs the failover nothing.
            let answered = self.probe();
            self.early_probe = Some((f.last_advert_ns, answered));
        }
        if let Hold::Waiting { .. } = self.hold {
            let foreign = self.router.foreign_master();
            let at = safe_at(foreign, self.lease_ns, now);
            // An early probe made after the same silence (see above).
            let early = match (foreign, self.early_probe) {
                (Some(f), Some((last, answered))) if f.last_advert_ns == last => Some(answered),
                _ => None,
            };
            if now < at {
                self.hold = Hold::Waiting { safe_at: at };
            } else if !foreign.is_some_and(|f| f.released)
                && early.map_or_else(|| self.probe(), |answered| answered && self.probe())
            {
                // The previous master did not say it left, and somebody still answers the
                // address: its advertisements do not reach us (a partition), but it
                // serves. Taking over would make two nodes answer; hold instead.
                log(
                    &self.cfg.name,
                    format_args!(
                        "another node still answers {}: not taking over (our advertisements or theirs are lost on the way)",
                        self.vips[0].addr
                    ),
                );
                self.status.conflicts += 1;
                let interval = u64::from(self.cfg.advert_interval_ms) * 1_000_000;
                self.hold = Hold::Conflict {
                    since: now,
                    probe_at: now + interval,
                };
            } else {
                self.take(now, skuad);
            }
        }
        if let Hold::Conflict { since, probe_at } = self.hold
            && now >= probe_at
        {
            let left = self
                .router
                .foreign_master()
                .is_some_and(|f| f.released && f.last_advert_ns >= since);
            if left || !self.probe() {
                log(
                    &self.cfg.name,
                    format_args!(
                        "{}: taking the address back",
                        if left {
                            "the other node left (priority 0)"
                        } else {
                            "nobody answers the address any more"
                        }
                    ),
                );
                self.hold = Hold::Waiting { safe_at: now };
                let at = safe_at(self.router.foreign_master(), self.lease_ns, now);
                if now >= at {
                    self.take(now, skuad);
                } else {
                    self.hold = Hold::Waiting { safe_at: at };
                }
            } else {
                let interval = u64::from(self.cfg.advert_interval_ms) * 1_000_000;
                self.hold = Hold::Conflict {
                    since,
                    probe_at: now + interval,
                };
            }
        }
        if let Some(t) = self.reannounce_at
            && now >= t
        {
            self.reannounce_at = None;
            if matches!(self.hold, Hold::Held { .. }) {
                self.announce();
            }
        }
    }

    /// Applies the health checks' verdict: the priority moves by their weights (keepalived's
    /// `track_script`), and a failing critical check takes the instance out of the election
    /// (priority 0 if master, so the backup takes over at once) until it passes.
    pub fn apply_health(&mut self, now: u64, v: &crate::health::Verdict, skuad: &mut Client) {
        match (&v.critical, &self.health_blocked) {
            (Some(why), None) => {
                log(&self.cfg.name, format_args!("giving mastership up: {why}"));
                self.health_blocked = Some(why.clone());
                if self.router.state() != State::Initialize {
                    self.router.shutdown(now);
                    self.drain(now, skuad);
                }
                self.release(skuad, why);
            }
            (None, Some(_)) => {
                log(
                    &self.cfg.name,
                    format_args!("health checks pass: rejoining"),
                );
                self.health_blocked = None;
                if self.router.state() == State::Initialize && self.held_down_until.is_none() {
                    self.router.startup(now);
                    if !self.link {
                        self.router.link_down(now);
                    }
                    self.drain(now, skuad);
                }
            }
            _ => {}
        }
        if !self.router.is_owner() {
            let p = (i32::from(self.cfg.priority) + v.priority_delta).clamp(1, 254) as u8;
            if p != self.router.priority() {
                log(
                    &self.cfg.name,
                    format_args!("priority {} -> {p} (health checks)", self.router.priority()),
                );
                self.router.set_priority(now, p);
                self.drain(now, skuad);
            }
        }
    }

    /// Reads what waits on socket `which` (the index in [`Instance::fds`]).
    pub fn readable(&mut self, now: u64, which: usize, skuad: &mut Client) {
        if which == 1 {
            self.watch_readable(now, skuad);
            return;
        }
        loop {
            match self.sock.recv() {
                Ok(Some(r)) => {
                    let _ = self
                        .router
                        .handle_advert(now, r.src, r.dst, r.ttl, &r.payload);
                }
                Ok(None) => break,
                Err(e) => {
                    log(&self.cfg.name, format_args!("receive: {e}"));
                    break;
                }
            }
        }
        self.drain(now, skuad);
    }

    fn watch_readable(&mut self, now: u64, skuad: &mut Client) {
        let mut stolen = None;
        loop {
            match self.watch.recv() {
                Ok(Some((addr, mac))) => {
                    if self.vips.iter().any(|v| v.addr == addr) && mac != self.mac {
                        stolen = Some((addr, mac));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log(&self.cfg.name, format_args!("announcement watch: {e}"));
                    break;
                }
            }
        }
        let Some((addr, m)) = stolen else { return };
        if !matches!(self.hold, Hold::Held { .. } | Hold::Waiting { .. }) {
            return;
        }
        let who = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        );
        log(
            &self.cfg.name,
            format_args!(
                "conflict: {who} announced {addr} while we held it (our advertisements do not reach it): giving it up until nobody answers it"
            ),
        );
        self.status.conflicts += 1;
        self.release(skuad, &format!("conflict: {who} announced {addr}"));
        let interval = u64::from(self.cfg.advert_interval_ms) * 1_000_000;
        self.hold = Hold::Conflict {
            since: now,
            probe_at: now + interval,
        };
    }

    /// When to probe the address early (Backup, the master silent for a lease and 5 ms):
    /// once per silence.
    fn early_probe_at(&self) -> Option<u64> {
        if self.router.state() != State::Backup || self.hold != Hold::Idle {
            return None;
        }
        let f = self.router.foreign_master()?;
        if f.released
            || self
                .early_probe
                .is_some_and(|(last, _)| last == f.last_advert_ns)
        {
            return None;
        }
        Some(f.last_advert_ns + self.lease_ns + 5_000_000)
    }

    /// Whether some node answers DNS on the first virtual address (one query from our
    /// primary address, 30 ms to answer; any DNS reply counts).
    fn probe(&self) -> bool {
        let vip = self.vips[0].addr;
        let Ok(s) = std::net::UdpSocket::bind((self.primary, 0)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(30)));
        // ID, RD clear, one question: ". IN SOA".
        let q = [0x5b, 0x1a, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 1];
        if s.send_to(&q, (vip, 53)).is_err() {
            return false;
        }
        let mut b = [0u8; 512];
        matches!(s.recv_from(&mut b), Ok((n, _)) if n >= 12 && b[0] == 0x5b && b[1] == 0x1a)
    }

    /// Leaves with priority 0 and gives everything back (the agent stops).
    pub fn stop(&mut self, now: u64, skuad: &mut Client) {
        self.router.shutdown(now);
        self.drain(now, skuad);
        self.release(skuad, "skua-agent stopping");
    }

    fn drain(&mut self, now: u64, skuad: &mut Client) {
        while let Some(o) = self.router.poll_output() {
            match o {
                Output::Send { dst, bytes } => {
                    // Renew first: the lease must never outlive our last advertisement by
                    // more than the lease itself.
                    if let Hold::Held { .. } = self.hold
                        && self.renewed_for != Some(now)
                        && !self.renew(now, skuad)
                    {
                        // step_down queued a priority-0 advertisement: send that instead.
                        continue;
                    }
                    if let Err(e) = self.sock.send(dst, &bytes) {
                        log(&self.cfg.name, format_args!("send to {dst}: {e}"));
                    }
                }
                Output::Transition { from, to, reason } => {
                    log(
                        &self.cfg.name,
                        format_args!(
                            "{} -> {} ({reason:?}), priority {}",
                            state_name(from),
                            state_name(to),
                            self.router.priority()
                        ),
                    );
                    if to == State::Master {
                        self.hold = Hold::Waiting { safe_at: now };
                    } else if from == State::Master || self.hold != Hold::Idle {
                        let why = format!("VRRP: {} ({reason:?})", state_name(to));
                        let held = matches!(self.hold, Hold::Held { .. });
                        self.release(skuad, &why);
                        if held && reason == Reason::Preempted {
                            // Tell the new master we stopped answering, so it takes the
                            // lease now rather than a lease after our last advertisement.
                            self.send_released();
                        }
                    }
                    if reason == Reason::Shutdown {
                        self.hold = Hold::Idle;
                    }
                }
                // Announced when the lease is taken (see the module docs), not before.
                Output::Announce => {}
            }
        }
    }

    /// A priority-0 advertisement (RFC 9568 §6.4.3 has a master that leaves send one at
    /// shutdown; skua-agent also sends one after yielding to a higher priority, once its
    /// lease is released). A master answers it with an advertisement; backups set their
    /// timer to the skew time, which that advertisement resets.
    fn send_released(&self) {
        let c = self.router.config();
        let adv = skua_vrrp::packet::Advert {
            vrid: c.vrid,
            priority: 0,
            max_advert_int_cs: c.advert_interval_cs,
            addrs: c.addresses.clone(),
        };
        let dsts: Vec<IpAddr> = if c.unicast_peers.is_empty() {
            vec![match c.primary {
                IpAddr::V4(_) => IpAddr::V4(skua_vrrp::packet::MCAST_V4),
                IpAddr::V6(_) => IpAddr::V6(skua_vrrp::packet::MCAST_V6),
            }]
        } else {
            c.unicast_peers.clone()
        };
        for d in dsts {
            let bytes = adv.encode(c.primary, d, c.checksum);
            if let Err(e) = self.sock.send(d, &bytes) {
                log(&self.cfg.name, format_args!("send to {d}: {e}"));
            }
        }
    }

    fn lease_body(&self, renew: bool) -> String {
        serde_json::json!({
            "ttl_ms": self.cfg.lease(),
            "renew": renew,
            "addresses": self.vips.iter().map(|v| v.addr).collect::<Vec<_>>(),
            "holder": format!("{}/{}", self.agent, self.cfg.name),
        })
        .to_string()
    }

    fn take(&mut self, now: u64, skuad: &mut Client) {
        match skuad.call("POST", "/ha/lease", Some(&self.lease_body(false))) {
            Ok(r) if r.status == 200 => {
                self.take_failures = 0;
                self.hold = Hold::Held { renewed_at: now };
                self.renewed_for = Some(now);
                self.status.lease_takes += 1;
                if self.cfg.manage_addresses {
                    for v in self.vips.clone() {
                        if let Err(e) = net::set_address(self.ifindex, v, true) {
                            log(&self.cfg.name, format_args!("adding {}: {e}", v.addr));
                        }
                    }
                }
                self.announce();
                self.reannounce_at = Some(now + REANNOUNCE_NS);
                log(
                    &self.cfg.name,
                    format_args!("lease taken: answering {}", self.status.addresses.join(" ")),
                );
            }
            Ok(r) => self.step_down(
                now,
                skuad,
                &format!("skuad refused the lease: {} {}", r.status, r.body.trim()),
            ),
            // A slow skuad (a loaded host) is not a dead one: try again shortly, and give
            // mastership up only when it keeps failing. Taking twice is harmless (a
            // running lease is extended, never shortened).
            Err(e) if slow(&e) && self.take_failures + 1 < TAKE_TRIES => {
                self.take_failures += 1;
                log(
                    &self.cfg.name,
                    format_args!(
                        "taking the lease: skuad did not answer in time ({e}); again in 20 ms"
                    ),
                );
                self.hold = Hold::Waiting {
                    safe_at: now + 20_000_000,
                };
            }
            Err(e) => self.step_down(now, skuad, &format!("skuad unreachable: {e}")),
        }
    }

    fn renew(&mut self, now: u64, skuad: &mut Client) -> bool {
        match skuad.call("POST", "/ha/lease", Some(&self.lease_body(true))) {
            Ok(r) if r.status == 200 => {
                self.hold = Hold::Held { renewed_at: now };
                self.renewed_for = Some(now);
                self.status.lease_renewals += 1;
                true
            }
            Ok(r) => {
                self.step_down(
                    now,
                    skuad,
                    &format!("renewal refused: {} {}", r.status, r.body.trim()),
                );
                false
            }
            // No answer in time: skuad may be slow (a loaded host) rather than gone. While
            // the lease still outlasts the next interval, go on: sending this advertisement
            // without a renewal is safe (the lease then ends *earlier* than a lease after
            // it, never later). Give mastership up only when the lease would lapse.
            Err(e) => {
                let Hold::Held { renewed_at } = self.hold else {
                    return false;
                };
                let interval = u64::from(self.cfg.advert_interval_ms) * 1_000_000;
                if slow(&e) && now + interval + 10_000_000 < renewed_at + self.lease_ns {
                    self.status.lease_failures += 1;
                    log(
                        &self.cfg.name,
                        format_args!(
                            "renewal: skuad did not answer in time ({e}); the lease still runs, trying again at the next advertisement"
                        ),
                    );
                    // One attempt per advertisement.
                    self.renewed_for = Some(now);
                    true
                } else {
                    self.step_down(now, skuad, &format!("skuad unreachable: {e}"));
                    false
                }
            }
        }
    }

    /// skuad cannot serve for us: leave with priority 0 (so a backup takes over at once)
    /// and hold in Initialize until skuad answers again.
    fn step_down(&mut self, now: u64, skuad: &mut Client, why: &str) {
        self.status.lease_failures += 1;
        self.status.step_downs += 1;
        log(&self.cfg.name, format_args!("stepping down: {why}"));
        self.router.shutdown(now);
        self.release(skuad, why);
        self.held_down_until = Some(now + HOLD_DOWN_NS);
        // The shutdown's priority-0 advertisement and transition.
        while let Some(o) = self.router.poll_output() {
            match o {
                Output::Send { dst, bytes } => {
                    let _ = self.sock.send(dst, &bytes);
                }
                Output::Transition { from, to, reason } => log(
                    &self.cfg.name,
                    format_args!("{} -> {} ({reason:?})", state_name(from), state_name(to)),
                ),
                Output::Announce => {}
            }
        }
    }

    /// Gives the lease back and removes the addresses (best effort: skuad may be gone, in
    /// which case its lease runs out by itself).
    fn release(&mut self, skuad: &mut Client, why: &str) {
        let was = self.hold;
        self.hold = Hold::Idle;
        self.reannounce_at = None;
        self.renewed_for = None;
        if matches!(was, Hold::Held { .. }) {
            let body = serde_json::json!({
                "addresses": self.vips.iter().map(|v| v.addr).collect::<Vec<_>>(),
                "reason": why,
            })
            .to_string();
            if let Err(e) = skuad.call("POST", "/ha/release", Some(&body)) {
                log(
                    &self.cfg.name,
                    format_args!("release: skuad unreachable ({e}); its lease runs out by itself"),
                );
            }
        }
        self.remove_addresses();
    }

    fn remove_addresses(&self) {
        if !self.cfg.manage_addresses {
            return;
        }
        for v in &self.vips {
            if let Err(e) = net::set_address(self.ifindex, *v, false) {
                log(&self.cfg.name, format_args!("removing {}: {e}", v.addr));
            }
        }
    }

    fn announce(&self) {
        for v in &self.vips {
            if let Err(e) = net::announce(&self.cfg.interface, v.addr, self.ll) {
                log(&self.cfg.name, format_args!("announcing {}: {e}", v.addr));
            }
        }
    }

    /// The status now.
    pub fn status(&self, now: u64) -> Status {
        let st = self.router.stats();
        let mut s = self.status.clone();
        s.state = state_name(self.router.state()).into();
        s.priority = self.router.priority();
        (s.lease, s.lease_age_ms) = match self.hold {
            Hold::Idle => ("idle".into(), None),
            Hold::Waiting { .. } => ("waiting".into(), None),
            Hold::Conflict { .. } => ("conflict".into(), None),
            Hold::Held { renewed_at } => (
                "held".into(),
                Some(now.saturating_sub(renewed_at) / 1_000_000),
            ),
        };
        s.peer = self
            .router
            .foreign_master()
            .map(|f| (f.addr.to_string(), f.priority));
        s.transitions = st.transitions;
        s.adverts_sent = st.adverts_sent;
        s.adverts_received = st.adverts_received;
        s.adverts_dropped = st.dropped.total();
        s
    }
}

/// skuad did not answer in time (as opposed to: it is not there, the connection was
/// refused or its socket is gone, which is certain).
fn slow(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// The instance's router (not started), as its `[[vrrp]]` section says, with `primary`
/// as the source of its adverts.
fn build_router(cfg: &config::Instance, primary: IpAddr, vips: &[Vip]) -> Result<Router, String> {
    let rcfg = router::Config {
        vrid: cfg.vrid,
        priority: cfg.priority,
        advert_interval_cs: (cfg.advert_interval_ms / 10) as u16,
        preempt: cfg.preempt,
        preempt_delay_ms: cfg.preempt_delay_ms,
        accept_mode: cfg.accept,
        primary,
        addresses: vips.iter().map(|v| v.addr).collect(),
        unicast_peers: cfg.unicast_peers.clone(),
        checksum: if cfg.old_unicast_checksum {
            ChecksumMode::OldUnicast
        } else {
            ChecksumMode::Rfc
        },
    };
    let mut router = Router::new(rcfg).map_err(|e| e.to_string())?;
    router.set_strict_unicast_ttl(cfg.strict_unicast_ttl);
    Ok(router)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skua_vrrp::packet::Advert;
    use skua_vrrp::router::Drop;

    /// `strict_unicast_ttl` reaches the router: by default a unicast advert from a peer
    /// with TTL 64 (forged from off the link, or a routed peer) is dropped (RFC 9568
    /// §7.1); `strict_unicast_ttl = false` accepts it.
    #[test]
    fn strict_unicast_ttl_reaches_the_router() {
        let base = "[[vrrp]]\nname = \"v\"\ninterface = \"e\"\nvrid = 51\n\
                    advert_interval_ms = 100\naddresses = [\"198.18.53.53\"]\n\
                    unicast_peers = [\"198.18.0.2\"]\n";
        let us: IpAddr = "198.18.0.1".parse().unwrap();
        let peer: IpAddr = "198.18.0.2".parse().unwrap();
        let advert = Advert {
            vrid: 51,
            priority: 150,
            max_advert_int_cs: 10,
            addrs: vec!["198.18.53.53".parse().unwrap()],
        }
        .encode(peer, us, ChecksumMode::Rfc);
        for (extra, want) in [
            ("", Err(Drop::BadTtl)),
            ("strict_unicast_ttl = true\n", Err(Drop::BadTtl)),
            ("strict_unicast_ttl = false\n", Ok(())),
        ] {
            let c = config::parse(&format!("{base}{extra}"), "a.toml").unwrap();
            let inst = &c.vrrp[0];
            let mut r = build_router(inst, us, &inst.vips().unwrap()).unwrap();
            r.startup(0);
            assert_eq!(r.handle_advert(1, peer, us, 64, &advert), want, "{extra:?}");
            // TTL 255 always passes.
            assert_eq!(
                r.handle_advert(2, peer, us, 255, &advert),
                Ok(()),
                "{extra:?}"
            );
        }
    }

    fn fm(last: u64, released: bool) -> ForeignMaster {
        ForeignMaster {
            addr: "198.18.0.2".parse().unwrap(),
            priority: 100,
            last_advert_ns: last,
            released,
        }
    }

    #[test]
    fn the_lease_is_taken_once_the_previous_masters_is_over() {
        let lease = 250_000_000;
        // No other master ever heard: at once.
        assert_eq!(safe_at(None, lease, 5), 5);
        // Failover: the master fell silent 360 ms ago (the master-down interval): its
        // lease (250 ms from its last advert at most) is over, no wait.
        assert_eq!(
            safe_at(Some(fm(1_000_000_000, false)), lease, 1_360_000_000),
            1_360_000_000
        );
        // Preemption: it advertised 10 ms ago and may have renewed right before.
        assert_eq!(
            safe_at(Some(fm(1_000_000_000, false)), lease, 1_010_000_000),
            1_250_000_000
        );
        // It said it left (priority 0): at once.
        assert_eq!(
            safe_at(Some(fm(1_000_000_000, true)), lease, 1_010_000_000),
            1_010_000_000
        );
    }
}
