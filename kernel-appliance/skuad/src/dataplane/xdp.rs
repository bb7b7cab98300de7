//! Starting, self-testing and stopping the AF_XDP dataplane.
//!
//! Policy (`--no-xdp`, default, `--xdp-required`):
//! - off: kernel sockets only;
//! - default: try XDP on every non-loopback interface holding a served address; on any
//!   failure (no such interface, attach refused, socket bind refused, **self-test failed**)
//!   detach what was attached, log the reason once, and keep serving through the kernel
//!   sockets, which run in every mode;
//! - required: the same failures end the process with a non-zero status and the reason.
//!
//! The self-test (Runbound issue 167 broke 100 % of DNS on virtio because nothing checked
//! the path) injects a DNS query into every queue through the attached program itself
//! (`BPF_PROG_TEST_RUN` with live frames, as if it arrived on that queue) and requires the
//! queue's worker to receive and answer it within a second. Where the kernel refuses live
//! frames (`EPERM` on hardened kernels and some sandboxes; `--xdp-self-test traffic` asks
//! for this path everywhere), the program is test-run on the same frame instead, which must
//! redirect it to queue 0's socket (program, destination map, port and XSKMAP proven), and
//! the first real queries prove the rest: a watch thread ([`watch`]) compares
//! the program's redirect counter with what the workers receive, logs when real queries
//! reached the sockets, and falls back to the kernel sockets (or, with `--xdp-required`,
//! ends the process) when dozens were redirected over five seconds and none arrived. The
//! log says which proof was used. The watch runs after a live-frame proof too.
//!
//! Answers in the program (`--xdp-answers N`, on by default): once the AF_XDP path has passed
//! its self-test, the engine's answers that the XDP program can reproduce exactly are compiled
//! into its answer map ([`skua_xdp::answers`]), and the program sends them itself with
//! `XDP_TX`; everything else still goes to the AF_XDP workers. A test run of the program on one
//! such query must produce the engine's own reply frame before the feature is switched on. On
//! reload the feature is switched off before the new engine is swapped in and on again once
//! the map holds the new answers, so no client ever gets an old answer after a new one.
//!
//! The program cannot rate-limit: while the engine does (`rrl-*` directives), no answer is
//! loaded into the program and every query goes to the AF_XDP workers, which apply the
//! engine's rate limiting (logged once: "xdp: answers in the program off: rate limiting is
//! on"). A reload that turns rate limiting off loads the answers again.
//!
//! Destinations: the program answers (or redirects) only queries to the addresses in its
//! maps, and only in frames to a unicast MAC. A specific listener address is put there as it
//! is. A wildcard listener (`interface: 0.0.0.0` / `::`) puts there the interface's own
//! unicast addresses of that family, link-local included ([`skua_xdp::ifaddr::answerable`]
//! refuses broadcast, multicast and anycast ones), and a watcher thread keeps them current:
//! it applies rtnetlink address notifications as they come and takes a full resync every
//! [`RESYNC`], so a change is followed within a second at worst. Everything else (broadcast,
//! multicast, another host's address) goes to the kernel, whose wildcard sockets never reply
//! from such an address. The service addresses of the `ha:` clause are in every program's
//! maps with their lease's expiry on the kernel's clock (rewritten at each take, renewal and
//! release): the program compares it per packet, so a VIP whose lease is over goes to the
//! kernel sockets (which drop it) even if nothing rewrote the map.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use skua_engine::Engine;
use skua_xdp::abi::{self, XdpConfig};
use skua_xdp::bpf::{AttachMode, XdpProgram};
use skua_xdp::ifaddr::{self, AddrEvents, IfAddr};
use skua_xdp::socket::{XskConfig, XskSocket};
use skua_xdp::worker::{EngineSource, QueueStats};

mod cache;
pub mod watch;

use crate::base::log;
use crate::base::resolving::{Job, Route, SharedCache};
use crate::base::serving::Serving;
use crate::base::settings::Settings;

/// Whether and how to run the XDP dataplane.
#[derive(Clone, Debug)]
pub struct XdpOptions {
    /// Off, try, or required.
    pub policy: XdpPolicy,
    /// Native, generic, or native-then-generic.
    pub attach: AttachMode,
    /// At most this many queues per interface (default: all RX queues).
    pub max_queues: Option<usize>,
    /// Never try zero-copy.
    pub copy_only: bool,
    /// Attach to these interfaces instead of those holding the served addresses (e.g. the
    /// parent of a VLAN interface: the program handles one 802.1Q tag).
    pub interfaces: Vec<String>,
    /// At most this many answers precompiled into the XDP program (0: none).
    pub answers: u32,
    /// At most this many of the resolver's cached answers in the XDP program (0: none;
    /// also none when `answers` is 0).
    pub cached: u32,
    /// How the start-up self-test proves the path to the sockets.
    pub self_test: SelfTest,
}

/// `--xdp-self-test`: how the path from the program to the AF_XDP sockets is proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelfTest {
    /// A live frame injected through the program where the kernel allows it; else a test
    /// run of the program and the first real queries.
    Auto,
    /// Never inject: a test run of the program and the first real queries.
    Traffic,
}

/// `--no-xdp` / default / `--xdp-required`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpPolicy {
    /// Kernel sockets only.
    Off,
    /// XDP when it works, else kernel sockets.
    Try,
    /// XDP or exit.
    Required,
}

impl Default for XdpOptions {
    fn default() -> Self {
        Self {
            policy: XdpPolicy::Try,
            attach: AttachMode::Auto,
            max_queues: None,
            copy_only: false,
            interfaces: Vec::new(),
            answers: abi::MAX_ANSWERS,
            cached: abi::MAX_CACHED,
            self_test: SelfTest::Auto,
        }
    }
}

struct Engines(Arc<Serving>);

/// The resolver for the AF_XDP workers: the cache the serving handle holds (a hit is
/// answered in the frame), misses handed over with the kernel socket of the address the
/// client asked (the resolver answers through it: a kernel socket's send is not seen by
/// the XDP program, which only handles received frames).
struct Resolving {
    serving: Arc<Serving>,
    /// Per served address: its kernel socket and, for a service address, its lease.
    routes: Vec<(SocketAddr, Arc<UdpSocket>, crate::base::lease::Gate)>,
    /// To the plane's cached-answer publisher, when the program answers from the cache.
    promotions: Option<(std::sync::mpsc::SyncSender<Vec<u8>>, Arc<cache::Publisher>)>,
}

impl skua_xdp::worker::Resolution for Resolving {
    type Cache = SharedCache;

    fn cache(&self) -> Option<Arc<SharedCache>> {
        self.serving
            .door
            .load()
            .resolver
            .as_ref()
            .map(|r| r.cache.clone())
    }

    fn resolve(
        &self,
        query: &[u8],
        miss: skua_serve::Miss,
        client: SocketAddr,
        server: SocketAddr,
    ) {
        let guard = self.serving.resolver();
        let (Some(r), Some((_, sock, gate))) = (
            guard.as_ref(),
            self.routes.iter().find(|(a, _, _)| *a == server),
        ) else {
            return;
        };
        let route = Route::Udp {
            sock: sock.clone(),
            peer: client,
            gate: gate.clone(),
        };
        let _ = r.submit(Job::miss(query, miss, route));
    }

    fn refresh(&self, query: &[u8]) {
        if let (Some(r), Some(job)) = (self.serving.resolver().as_ref(), Job::refresh(query)) {
            let _ = r.submit(job);
        }
    }

    fn wants_promotions(&self) -> bool {
        self.promotions.is_some()
    }

    fn promote(&self, query: &[u8]) {
        if let Some((tx, p)) = &self.promotions
            && tx.try_send(query.to_vec()).is_err()
        {
            p.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl EngineSource for Engines {
    fn current(&self) -> Arc<Engine> {
        self.0.engine()
    }

    fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Acquire)
    }

    fn zones(&self) -> Arc<dyn skua_serve::Zones + Send + Sync> {
        self.0.zones()
    }

    fn report(&self, client: std::net::IpAddr, event: skua_serve::Event) {
        self.0.xfr.door_event(client, event);
    }

    fn unix(&self) -> u64 {
        crate::base::clock::unix_secs()
    }
}

/// One queue's worker.
pub struct QueueWorker {
    /// Interface name.
    pub ifname: String,
    /// Queue id.
    pub queue: u32,
    /// Its counters.
    pub stats: Arc<QueueStats>,
    handle: Option<JoinHandle<()>>,
}

/// One interface's program, the config record it runs with, and the destinations it answers.
struct Attached {
    ifname: String,
    ifindex: u32,
    program: XdpProgram,
    config: XdpConfig,
    /// Specific served addresses: in the maps whatever the interface holds (with
    /// `--xdp-interface` they may sit on a VLAN interface above it).
    fixed: Vec<IpAddr>,
    /// Wildcard listeners: the interface's own unicast addresses of these families (IPv4,
    /// IPv6) are in the maps, kept current by the watcher.
    track: (bool, bool),
    /// Also the addresses of the interfaces stacked on this one (`--xdp-interface`, the
    /// parent of VLAN interfaces: the program sees their tagged frames).
    uppers: bool,
    /// What the maps hold now (canonical form: IPv4-mapped IPv6 as IPv4, as `add_dest`
    /// stores it).
    dests: BTreeSet<IpAddr>,
    /// Service addresses under the host agent's lease (`ha:`): always in the maps (of the
    /// families this program serves), each with its lease's expiry on the kernel's clock,
    /// which the program compares itself (an address whose lease is over goes to the
    /// kernel sockets, which drop it); rewritten at every renewal.
    leased: Vec<Arc<crate::base::lease::Lease>>,
    /// The families of the served addresses (IPv4, IPv6).
    serves: (bool, bool),
    /// The watch found that this native veth's peer drops the program's `XDP_TX` answers:
    /// they stay off here (see [`watch_paths`]).
    tx_lost: bool,
}

impl Attached {
    /// The destinations the maps should hold, given every address of the host.
    fn wanted(&self, all: &[IfAddr]) -> BTreeSet<IpAddr> {
        let mut indexes = vec![self.ifindex];
        if self.uppers {
            indexes.extend(upper_indexes(&self.ifname));
        }
        let own = all
            .iter()
            .filter(|i| indexes.contains(&i.index) && i.usable())
            .map(|i| i.addr)
            .filter(|a| {
                if a.is_ipv4() {
                    self.track.0
                } else {
                    self.track.1
                }
            });
        // The maps must hold nothing but unicast addresses: the program answers whatever
        // they hold, and a broadcast or multicast destination would become the reply's
        // source. `answerable` is that check (RFC 919/922 broadcast, multicast, anycast).
        // Service addresses are in whether the interface holds them or not (the agent adds
        // them on takeover): their lease decides.
        let leased = self.leased.iter().map(|l| l.addr).filter(|a| {
            if a.is_ipv4() {
                self.serves.0
            } else {
                self.serves.1
            }
        });
        self.fixed
            .iter()
            .copied()
            .chain(own)
            .map(|a| a.to_canonical())
            .filter(|a| ifaddr::answerable(*a, all))
            .chain(leased)
            .collect()
    }

    /// The map value of `a`: its lease's expiry for a service address (1, long past, when
    /// no lease runs: 0 would mean "always ours"), else 0.
    fn dest_of(&self, a: IpAddr) -> abi::Dest {
        let lease_until_ns = match self.leased.iter().find(|l| l.addr == a) {
            None => 0,
            Some(l) => match l.until() {
                0 => 1,
                u => crate::base::clock::to_kernel_ns(u).max(1),
            },
        };
        abi::Dest { lease_until_ns }
    }

    /// Rewrites the service addresses' values (after a lease was taken, renewed or
    /// released).
    fn refresh_leases(&mut self) -> Result<(), String> {
        for l in self.leased.clone() {
            if self.dests.contains(&l.addr) {
                let d = self.dest_of(l.addr);
                self.program.set_dest(l.addr, d).map_err(|e| {
                    format!("{}: lease of {}: {}", self.ifname, l.addr, log::chain(&e))
                })?;
            }
        }
        Ok(())
    }

    /// Makes the maps hold [`Attached::wanted`]; returns what was added and removed.
    /// On a map error the maps keep what was applied so far.
    fn sync(&mut self, all: &[IfAddr]) -> Result<(Vec<IpAddr>, Vec<IpAddr>), String> {
        let want = self.wanted(all);
        let gone: Vec<IpAddr> = self.dests.difference(&want).copied().collect();
        let new: Vec<IpAddr> = want.difference(&self.dests).copied().collect();
        // Removals first: a full map (MAX_DESTS) then has room for what replaces them.
        for a in &gone {
            self.program
                .remove_dest(*a)
                .map_err(|e| format!("{}: removing {a}: {}", self.ifname, log::chain(&e)))?;
            self.dests.remove(a);
        }
        for a in &new {
            let d = self.dest_of(*a);
            self.program
                .set_dest(*a, d)
                .map_err(|e| format!("{}: adding {a}: {}", self.ifname, log::chain(&e)))?;
            self.dests.insert(*a);
        }
        Ok((new, gone))
    }

    /// Addresses to send test queries to: ours, IPv4 first.
    fn probes(&self, port: u16) -> impl Iterator<Item = SocketAddr> + '_ {
        self.dests.iter().map(move |ip| SocketAddr::new(*ip, port))
    }
}

/// The interfaces stacked on `ifname` (VLANs, a bond or bridge it is part of), from the
/// `upper_*` links of sysfs, transitively (bounded: stacks are shallow).
fn upper_indexes(ifname: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![(ifname.to_string(), 0)];
    while let Some((name, depth)) = todo.pop() {
        let Ok(dir) = std::fs::read_dir(format!("/sys/class/net/{name}")) else {
            continue;
        };
        for e in dir.filter_map(Result::ok) {
            let f = e.file_name();
            let Some(upper) = f.to_str().and_then(|n| n.strip_prefix("upper_")) else {
                continue;
            };
            if let Some(i) = skua_netio::if_index(upper)
                && !out.contains(&i)
            {
                out.push(i);
                if depth < 4 {
                    todo.push((upper.to_string(), depth + 1));
                }
            }
        }
    }
    out
}

/// How often the watcher takes a full address dump even without a notification: the bound
/// on how stale the destination maps can be should a notification be lost.
pub const RESYNC: Duration = Duration::from_secs(1);

/// How long the watcher sleeps waiting for notifications: how soon it sees a shutdown.
const WATCH_POLL: Duration = Duration::from_millis(200);

/// The watcher thread: keeps every tracking program's destination maps equal to its
/// interface's unicast addresses until `stop`.
fn watch(programs: &Mutex<Vec<Attached>>, events: &AddrEvents, stop: &AtomicBool) {
    let mut next_resync = Instant::now() + RESYNC;
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        let changed = match events.wait(WATCH_POLL) {
            Ok(c) => c,
            Err(e) => {
                if !failing {
                    log::error(format_args!(
                        "xdp: address notifications failed: {e}; resyncing every {RESYNC:?}"
                    ));
                }
                failing = true;
                std::thread::sleep(WATCH_POLL);
                false
            }
        };
        if !changed && Instant::now() < next_resync {
            continue;
        }
        next_resync = Instant::now() + RESYNC;
        let all = match ifaddr::dump() {
            Ok(all) => all,
            Err(e) => {
                log::error(format_args!("xdp: cannot list addresses: {e}"));
                continue;
            }
        };
        let mut programs = programs.lock().unwrap_or_else(|e| e.into_inner());
        for a in programs.iter_mut().filter(|a| a.track != (false, false)) {
            match a.sync(&all) {
                Ok((new, gone)) => log_changes(&a.ifname, &new, &gone),
                Err(e) => log::error(format_args!("xdp: {e}")),
            }
        }
    }
}

fn log_changes(ifname: &str, new: &[IpAddr], gone: &[IpAddr]) {
    for a in new {
        log::info(format_args!("xdp: {ifname}: answering queries to {a}"));
    }
    for a in gone {
        log::info(format_args!(
            "xdp: {ifname}: queries to {a} left to the kernel (address gone)"
        ));
    }
}

/// The running XDP dataplane; detaches on drop.
pub struct XdpPlane {
    programs: Arc<Mutex<Vec<Attached>>>,
    /// The served UDP port.
    port: u16,
    /// Keeps the destination maps of wildcard listeners current.
    watcher: Option<JoinHandle<()>>,
    /// Answers in the program wanted (capacity > 0) and not failed at start.
    answers: AtomicBool,
    /// The answers' self-test has passed once (it runs on the first load).
    answers_proven: AtomicBool,
    /// "Off: rate limiting is on" was logged since answers were last loaded.
    rrl_noted: AtomicBool,
    capacity: u32,
    /// Stops this plane's workers (set on shutdown, including a failed start).
    stop: Arc<AtomicBool>,
    /// Pushes cached answers into the programs (when they answer from the cache).
    publisher: Option<Arc<cache::Publisher>>,
    publisher_thread: Option<JoinHandle<()>>,
    /// Live frames may be injected for self-tests (`--xdp-self-test auto`).
    inject: bool,
    /// Watches that what the programs hand on arrives (see [`watch_paths`]).
    path_watch: Option<JoinHandle<()>>,
    /// Why the watch took the plane down, once it did: the kernel sockets serve.
    failed: Arc<Mutex<Option<String>>>,
    /// Workers, one per (interface, queue).
    pub workers: Vec<QueueWorker>,
}

impl XdpPlane {
    /// Stops the workers and detaches the programs.
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in &mut self.workers {
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
        }
        if let Some(h) = self.watcher.take() {
            let _ = h.join();
        }
        if let Some(h) = self.publisher_thread.take() {
            let _ = h.join();
        }
        if let Some(h) = self.path_watch.take() {
            let _ = h.join();
        }
        let mut programs = self.programs();
        for a in programs.iter_mut() {
            match a.program.detach() {
                Ok(()) => log::info(format_args!("xdp: detached from {}", a.ifname)),
                Err(e) => log::error(format_args!("xdp: detach from {} failed: {e}", a.ifname)),
            }
        }
        programs.clear();
    }

    fn programs(&self) -> MutexGuard<'_, Vec<Attached>> {
        lock_programs(&self.programs)
    }

    /// Why the plane was taken down after its start (the path proven broken by traffic):
    /// the kernel sockets serve since.
    pub fn failed(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Puts the service addresses' current leases into every program's maps.
    pub fn leases_changed(&self) {
        for a in self.programs().iter_mut() {
            if let Err(e) = a.refresh_leases() {
                log::error(format_args!("xdp: {e}"));
            }
        }
    }

    /// Stops answering in the programs (before a new engine is swapped in): cached answers
    /// are dropped (pushed again, proven against the new engine, as they are asked).
    pub fn suspend_answers(&self) {
        self.forget_cached();
        if !self.answers.load(Ordering::Relaxed) {
            return;
        }
        for a in self.programs().iter_mut() {
            a.config.flags &= !abi::F_ANSWER;
            if let Err(e) = a.program.set_config(a.config) {
                log::error(format_args!("xdp: {}: {}", a.ifname, log::chain(&e)));
            }
        }
    }

    /// Loads `engine`'s answers into the programs and answers there again, unless `engine`
    /// rate-limits (the program cannot; the workers answer everything then).
    pub fn resume_answers(&self, engine: &Engine) {
        if !self.answers.load(Ordering::Relaxed) || self.rrl_keeps_answers_off(engine) {
            return;
        }
        let proven = self.answers_proven.load(Ordering::Relaxed);
        match self.load_answers(engine, !proven) {
            Ok(()) => self.answers_proven.store(true, Ordering::Relaxed),
            Err(e) if !proven => {
                self.suspend_answers();
                self.answers.store(false, Ordering::Relaxed);
                log::warn(format_args!(
                    "xdp: no answers in the program: {e}; the AF_XDP workers answer everything"
                ));
            }
            Err(e) => log::error(format_args!(
                "xdp: answers in the program stay off: {e}; the AF_XDP workers answer everything"
            )),
        }
    }

    /// Drops every cached answer from the programs (the resolver changed, or the engine).
    pub fn forget_cached(&self) {
        if let Some(p) = &self.publisher {
            p.forget_now();
        }
    }

    /// The cached-answer publisher's counters, if it runs.
    pub fn publisher_stats(&self) -> Option<&cache::PublisherStats> {
        self.publisher.as_deref().map(|p| &p.stats)
    }

    /// With rate limiting on, answers stay out of the program (logged once per change).
    fn rrl_keeps_answers_off(&self, engine: &Engine) -> bool {
        if engine.rrl().is_none() {
            self.rrl_noted.store(false, Ordering::Relaxed);
            return false;
        }
        if !self.rrl_noted.swap(true, Ordering::Relaxed) {
            log::info(format_args!(
                "xdp: answers in the program off: rate limiting is on"
            ));
        }
        true
    }

    /// Compiles and loads the answers; with `check`, proves on one query that the program's
    /// reply frame is the engine's before switching the feature on.
    fn load_answers(&self, engine: &Engine, check: bool) -> Result<(), String> {
        let started = Instant::now();
        let compiled = skua_xdp::answers::compile(engine, self.capacity as usize);
        let mut programs = self.programs();
        for a in programs.iter_mut().filter(|a| !a.tx_lost) {
            a.program
                .set_acl(&compiled.acl)
                .and_then(|()| a.program.set_answers(&compiled.answers))
                .map_err(|e| format!("{}: {}", a.ifname, log::chain(&e)))?;
            a.config.flags |= abi::F_ANSWER;
            a.program
                .set_config(a.config)
                .map_err(|e| format!("{}: {}", a.ifname, log::chain(&e)))?;
            // On failure the caller switches the feature off again.
            if check {
                let frame = check_answer(
                    &a.program,
                    engine,
                    &compiled.answers,
                    a.probes(self.port),
                    a.config.flags,
                )
                .map_err(|e| format!("{}: self-test of answers in the program: {e}", a.ifname))?;
                if let Some(frame) = frame.filter(|_| self.inject) {
                    check_veth_peer(a, &frame)?;
                }
            }
        }
        let s = compiled.skipped;
        log::info(format_args!(
            "xdp: {} answers precompiled into the program in {:.1} ms (left to the engine: {} too long, \
             {} client-dependent, {} not reproducible, {} over --xdp-answers)",
            compiled.answers.len(),
            started.elapsed().as_secs_f64() * 1e3,
            s.too_long,
            s.client_dependent,
            s.not_reproducible,
            s.over_capacity
        ));
        Ok(())
    }

    /// One line per queue for the stop summary and metrics.
    pub fn summary(&self) -> Vec<String> {
        let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let mut out: Vec<String> = self
            .workers
            .iter()
            .map(|w| {
                let s = &w.stats;
                let drops: Vec<String> = skua_fastpath::Drop::ALL
                    .iter()
                    .map(|d| format!("{}={}", d.as_str(), r(&s.dropped[*d as usize])))
                    .collect();
                format!(
                    "xdp {} queue {}: rx {}, answered {} ({} hot), slow path {}, not dns {}, \
                     tx full {}, dropped {} [{}], rrl: slipped={} would_drop={} would_slip={}, \
                     kernel: rx_dropped={} rx_ring_full={} fill_empty={} tx_invalid={}",
                    w.ifname,
                    w.queue,
                    r(&s.rx),
                    r(&s.answered),
                    r(&s.hot),
                    r(&s.slow_path),
                    r(&s.not_dns),
                    r(&s.tx_ring_full),
                    s.dropped_total(),
                    drops.join(" "),
                    r(&s.slipped),
                    r(&s.rrl_would_drop),
                    r(&s.rrl_would_slip),
                    r(&s.xsk.rx_dropped),
                    r(&s.xsk.rx_ring_full),
                    r(&s.xsk.rx_fill_ring_empty_descs),
                    r(&s.xsk.tx_invalid_descs),
                )
            })
            .collect();
        if let Some(p) = self.publisher_stats() {
            out.push(format!(
                "xdp cached answers: {} in the programs, {} pushed, {} proposed, {} not pushable, \
                 {} lost (queue full), {} refused (no free slot)",
                r(&p.entries),
                r(&p.pushed),
                r(&p.proposed),
                r(&p.rejected),
                r(&p.dropped),
                r(&p.full),
            ));
        }
        for a in self.programs().iter() {
            if let Ok(st) = a.program.stats() {
                let fields: Vec<String> = abi::Stat::ALL
                    .iter()
                    .map(|k| format!("{}={}", k.name(), st[*k as usize]))
                    .collect();
                out.push(format!("xdp program on {}: {}", a.ifname, fields.join(" ")));
            }
        }
        out
    }
}

impl XdpPlane {
    /// Each program's counters, by interface (for metrics).
    pub fn program_stats(&self) -> Vec<(String, Vec<(&'static str, u64)>)> {
        self.programs()
            .iter()
            .filter_map(|a| {
                let st = a.program.stats().ok()?;
                Some((
                    a.ifname.clone(),
                    abi::Stat::ALL
                        .iter()
                        .map(|k| (k.name(), st[*k as usize]))
                        .collect(),
                ))
            })
            .collect()
    }
}

impl Drop for XdpPlane {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What [`start`] did.
pub enum Started {
    /// Running.
    Running(XdpPlane),
    /// Not wanted (`--no-xdp`) or nothing to attach to (served addresses on loopback only).
    NotUsed,
    /// Wanted, but its start or self-test failed: kernel sockets serve (reason logged).
    FellBack(String),
}

/// Starts the XDP dataplane per `opts`. `Err`: required and impossible.
pub fn start(
    settings: &Settings,
    opts: &XdpOptions,
    shared: &Arc<Serving>,
    slow: &[UdpSocket],
) -> Result<Started, String> {
    if opts.policy == XdpPolicy::Off {
        log::info(format_args!(
            "xdp: disabled (--no-xdp); serving through kernel sockets"
        ));
        return Ok(Started::NotUsed);
    }
    match try_start(settings, opts, shared, slow) {
        Ok(plane) => Ok(Started::Running(plane)),
        Err(reason) if opts.policy == XdpPolicy::Required => {
            Err(format!("XDP required but unavailable: {reason}"))
        }
        Err(reason) => {
            log::warn(format_args!(
                "xdp: not used: {reason}; serving through kernel sockets"
            ));
            if reason.starts_with(NO_INTERFACE) || reason.starts_with(ON_LOOPBACK) {
                Ok(Started::NotUsed)
            } else {
                Ok(Started::FellBack(reason))
            }
        }
    }
}

const NO_INTERFACE: &str = "no interface holds a served address";
const ON_LOOPBACK: &str = "the served addresses are on loopback";

fn try_start(
    settings: &Settings,
    opts: &XdpOptions,
    shared: &Arc<Serving>,
    slow: &[UdpSocket],
) -> Result<XdpPlane, String> {
    let Some(first) = settings.udp.first() else {
        return Err("no UDP address is served (do-udp: no?)".into());
    };
    let port = first.port();
    let served: Vec<IpAddr> = settings
        .udp
        .iter()
        .filter(|a| a.port() == port)
        .map(SocketAddr::ip)
        .collect();
    for a in settings.udp.iter().filter(|a| a.port() != port) {
        log::warn(format_args!(
            "xdp: {a} uses another port than {port}: served by kernel sockets only"
        ));
    }
    // Wildcard listeners: which families' interface addresses go into the maps.
    let track = (
        served.iter().any(|a| a.is_ipv4() && a.is_unspecified()),
        served.iter().any(|a| a.is_ipv6() && a.is_unspecified()),
    );
    // Subscribed before the first dump, so that no change falls between the two.
    let events = if track != (false, false) {
        Some(AddrEvents::subscribe().map_err(|e| format!("address notifications: {e}"))?)
    } else {
        None
    };
    let all = ifaddr::dump().map_err(|e| format!("cannot list addresses: {e}"))?;
    let explicit = !opts.interfaces.is_empty();
    let ifaces = if !explicit {
        skua_netio::interfaces_for(&served).map_err(|e| format!("cannot list interfaces: {e}"))?
    } else {
        // Explicit interfaces: every specific served address is ours on them (it may sit
        // on a VLAN interface above); a wildcard means their own addresses.
        let mut v = Vec::new();
        for name in &opts.interfaces {
            let index =
                skua_netio::if_index(name).ok_or_else(|| format!("no interface named {name}"))?;
            v.push(skua_netio::Interface {
                name: name.clone(),
                index,
                addrs: served.clone(),
                loopback: name == "lo",
            });
        }
        v
    };
    let (lo, ifaces): (Vec<_>, Vec<_>) = ifaces.into_iter().partition(|i| i.loopback);
    if ifaces.is_empty() {
        let why = if lo.is_empty() {
            NO_INTERFACE.to_string()
        } else {
            format!("{ON_LOOPBACK}, where XDP brings nothing")
        };
        return Err(why);
    }
    let mut plane = XdpPlane {
        programs: Arc::new(Mutex::new(Vec::new())),
        port,
        watcher: None,
        answers: AtomicBool::new(false),
        answers_proven: AtomicBool::new(false),
        rrl_noted: AtomicBool::new(false),
        capacity: opts.answers,
        stop: Arc::new(AtomicBool::new(false)),
        publisher: None,
        publisher_thread: None,
        inject: opts.self_test == SelfTest::Auto,
        path_watch: None,
        failed: Arc::new(Mutex::new(None)),
        workers: Vec::new(),
    };
    // Cached answers in the program: a publisher thread fed by the workers' promotions.
    let (promotions, promoted) = if opts.cached > 0 && opts.answers > 0 {
        let p = Arc::new(cache::Publisher::new(
            plane.programs.clone(),
            shared.clone(),
            port,
            opts.cached,
        ));
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4096);
        plane.publisher = Some(p.clone());
        (Some((tx, p)), Some(rx))
    } else {
        (None, None)
    };
    let cpus = settings
        .cpus
        .clone()
        .unwrap_or_else(skua_netio::available_cpus);
    let xsk_cfg = XskConfig {
        copy_only: opts.copy_only,
        ..XskConfig::default()
    };
    // Addresses resolved once here, not per slow-path reply.
    let slow: Vec<(SocketAddr, UdpSocket)> = slow
        .iter()
        .filter_map(|s| Some((s.local_addr().ok()?, s.try_clone().ok()?)))
        .collect();
    let routes: Vec<(SocketAddr, Arc<UdpSocket>, crate::base::lease::Gate)> = slow
        .iter()
        .filter_map(|(a, s)| Some((*a, Arc::new(s.try_clone().ok()?), shared.leases.get(a.ip()))))
        .collect();
    let slow = Arc::new(slow);
    let routes = Arc::new(routes);
    for iface in &ifaces {
        let mut prog =
            XdpProgram::load_object_with(skua_xdp::bpf::OBJECT, opts.answers, opts.cached)
                .map_err(|e| format!("loading the XDP program: {}", log::chain(&e)))?;
        match skua_xdp::bpf::detach_stale(&iface.name) {
            Ok(true) => log::warn(format_args!(
                "xdp: removed a stale skua program from {}",
                iface.name
            )),
            Ok(false) => {}
            Err(e) => return Err(format!("{}: {}", iface.name, log::chain(&e))),
        }
        let mut config = XdpConfig {
            // The program's clock for cached answers' TTLs: skuad's seconds.
            clock_origin_ns: crate::base::clock::kernel_origin_ns(),
            ..XdpConfig::enabled(port)
        };
        prog.set_config(config).map_err(|e| log::chain(&e))?;
        // No "any destination": the maps get the specific served addresses and, for a
        // wildcard listener, the interface's own unicast addresses (see Attached::wanted).
        let mut att = Attached {
            ifname: iface.name.clone(),
            ifindex: iface.index,
            program: prog,
            config,
            fixed: iface
                .addrs
                .iter()
                .copied()
                .filter(|a| !a.is_unspecified() && served.contains(a))
                .collect(),
            track,
            uppers: explicit,
            dests: BTreeSet::new(),
            leased: shared.leases.all().to_vec(),
            serves: (
                served.iter().any(|a| a.is_ipv4()),
                served.iter().any(|a| a.is_ipv6()),
            ),
            tx_lost: false,
        };
        att.sync(&all)?;
        let listed: Vec<String> = att.dests.iter().map(ToString::to_string).collect();
        log::info(format_args!(
            "xdp: {} answers queries to {}{}",
            iface.name,
            if listed.is_empty() {
                "none of its addresses yet".to_string()
            } else {
                listed.join(" ")
            },
            if track != (false, false) {
                " (following its address changes)"
            } else {
                ""
            }
        ));
        let prog = &mut att.program;
        let mode = prog
            .attach(&iface.name, opts.attach)
            .map_err(|e| log::chain(&e))?;
        log::info(format_args!(
            "xdp: attached to {} in {mode:?} mode",
            iface.name
        ));
        // Native veth: answers from the program leave by redirect, not XDP_TX (see
        // SKUA_F_TX_REDIRECT in bpf/skua_xdp_abi.h).
        if mode == skua_xdp::bpf::AttachedMode::Native
            && skua_netio::ethtool::driver(&iface.name).ok().as_deref() == Some("veth")
        {
            config.flags |= abi::F_TX_REDIRECT;
            prog.set_config(config).map_err(|e| log::chain(&e))?;
            att.config = config;
        }
        let nq = skua_netio::rx_queues(&iface.name)
            .min(opts.max_queues.unwrap_or(usize::MAX))
            .max(1);
        let mut socks = Vec::new();
        for q in 0..nq {
            // Cannot truncate: queue counts are small.
            let qid = q as u32;
            let s = XskSocket::open(iface.index, qid, &xsk_cfg)
                .map_err(|e| format!("AF_XDP socket on {} queue {q}: {e}", iface.name))?;
            if q == 0 {
                log::info(format_args!(
                    "xdp: {} sockets bound in {} mode",
                    iface.name,
                    s.mode().as_str()
                ));
            }
            prog.set_socket(qid, std::os::fd::AsFd::as_fd(&s))
                .map_err(|e| log::chain(&e))?;
            socks.push(s);
        }
        plane.programs().push(att);
        for (q, mut sock) in socks.into_iter().enumerate() {
            // Give the kernel frames to receive into before anything is redirected here
            // (the self-test's first frame must not find an empty fill ring).
            sock.queue().refill();
            let stats = Arc::new(QueueStats::default());
            let (sh, st, sl, stop) = (
                shared.clone(),
                stats.clone(),
                slow.clone(),
                plane.stop.clone(),
            );
            let resolving = Resolving {
                serving: shared.clone(),
                routes: routes.to_vec(),
                promotions: promotions.clone(),
            };
            let cpu = cpus[(plane.workers.len()) % cpus.len()];
            let name = iface.name.clone();
            let handle = std::thread::Builder::new()
                .name(format!("xsk-{name}-{q}"))
                .spawn(move || {
                    if let Err(e) = skua_netio::pin_to_cpu(cpu) {
                        log::warn(format_args!(
                            "xdp: cannot pin {name} queue {q} to CPU {cpu}: {e}"
                        ));
                    }
                    let engines = Engines(sh);
                    skua_xdp::worker::run(
                        &mut sock,
                        &engines,
                        sl.as_ref(),
                        &resolving,
                        &st,
                        &stop,
                        100,
                        crate::base::clock::now_secs,
                    );
                })
                .map_err(|e| format!("cannot start worker: {e}"))?;
            plane.workers.push(QueueWorker {
                ifname: iface.name.clone(),
                // Cannot truncate: queue counts are small.
                queue: q as u32,
                stats,
                handle: Some(handle),
            });
        }
    }
    self_test(&plane, &ifaces, port, opts.self_test)?;
    {
        // Every queue of an interface has a socket unless --xdp-queues left some out: a
        // redirect on those falls back to the kernel (XDP_PASS) and counts as redirected,
        // so the program's counter cannot be weighed against the workers' there.
        let watched: Vec<(String, Vec<Arc<QueueStats>>)> = ifaces
            .iter()
            .filter(|i| {
                let all = skua_netio::rx_queues(&i.name).max(1);
                let ours = plane.workers.iter().filter(|w| w.ifname == i.name).count();
                if ours < all {
                    log::warn(format_args!(
                        "xdp: {}: {ours} of {all} queues have a socket (--xdp-queues): the \
                         path to the sockets is not watched on real traffic",
                        i.name
                    ));
                }
                ours >= all
            })
            .map(|i| {
                let stats = plane
                    .workers
                    .iter()
                    .filter(|w| w.ifname == i.name)
                    .map(|w| w.stats.clone())
                    .collect();
                (i.name.clone(), stats)
            })
            .collect();
        let (programs, stop, failed) = (
            plane.programs.clone(),
            plane.stop.clone(),
            plane.failed.clone(),
        );
        let required = opts.policy == XdpPolicy::Required;
        plane.path_watch = Some(
            std::thread::Builder::new()
                .name("xdp-watch".into())
                .spawn(move || watch_paths(&programs, &watched, &stop, &failed, required))
                .map_err(|e| format!("cannot start the path watch: {e}"))?,
        );
    }
    if let Some(events) = events {
        // Notifications since the dump above wait in the socket: none is lost.
        let (programs, stop) = (plane.programs.clone(), plane.stop.clone());
        plane.watcher = Some(
            std::thread::Builder::new()
                .name("xdp-addrs".into())
                .spawn(move || watch(&programs, &events, &stop))
                .map_err(|e| format!("cannot start the address watcher: {e}"))?,
        );
    }
    if let (Some(p), Some(rx)) = (plane.publisher.clone(), promoted) {
        let stop = plane.stop.clone();
        let mirror: Arc<dyn crate::base::resolving::CacheMirror> = p.clone();
        shared.mirrors.register(Arc::downgrade(&mirror));
        plane.publisher_thread = Some(
            std::thread::Builder::new()
                .name("xdp-cache".into())
                .spawn(move || p.run(&rx, &stop))
                .map_err(|e| format!("cannot start the cached-answer publisher: {e}"))?,
        );
        log::info(format_args!(
            "xdp: up to {} cached answers in the program (--xdp-cache-answers)",
            opts.cached
        ));
    }
    if opts.answers > 0 {
        plane.answers.store(true, Ordering::Relaxed);
        // The first load runs the answers' self-test (now, or after a reload that turns
        // rate limiting off).
        plane.resume_answers(&shared.engine());
    } else {
        log::info(format_args!(
            "xdp: answers in the program off (--xdp-answers 0)"
        ));
    }
    Ok(plane)
}

/// A native-mode veth sends `XDP_TX` frames straight into its peer's NAPI ring, which exists
/// only when the peer runs an XDP program or has GRO on; otherwise the kernel drops them
/// without a trace on our side (veth_xdp_xmit: -ENXIO). Injects the test query for real and
/// requires the peer's `xdp_xmit` counter (shown on our side as `tx_queue_N_xdp_xmit`) to
/// move. Other drivers transmit `XDP_TX` frames themselves and are not checked here.
fn check_veth_peer(a: &Attached, frame: &[u8]) -> Result<(), String> {
    // TX_REDIRECT is set exactly for native-mode veth (at attach).
    if a.config.flags & abi::F_TX_REDIRECT == 0 {
        return Ok(());
    }
    let (prog, ifname) = (&a.program, a.ifname.as_str());
    let xmit = || veth_peer_xmit(ifname);
    let Some(ifindex) = prog.ifindex() else {
        return Ok(());
    };
    let before = xmit();
    if let Err(e) = prog.inject(frame, ifindex, 0) {
        // Live frames refused here: the path watch weighs the program's answers against
        // the peer's counter on real traffic instead (watch_paths).
        log::info(format_args!(
            "xdp: {ifname}: the veth peer's intake of XDP_TX answers is checked on real \
             traffic (live frames refused: {})",
            log::chain(&e)
        ));
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        if xmit() > before {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err(format!(
        "{ifname} is a veth whose peer takes no XDP frames (no XDP program and GRO off on \
         the peer), so replies sent with XDP_TX would be lost; enable them with \
         `ethtool -K PEER gro on` in the peer's namespace (or attach an XDP program there)"
    ))
}

/// The frames a veth's peer took from this side's XDP program (`ethtool -S`:
/// `tx_queue_N_xdp_xmit`, summed); 0 when unreadable.
fn veth_peer_xmit(ifname: &str) -> u64 {
    skua_netio::ethtool::stats(ifname)
        .unwrap_or_default()
        .iter()
        .filter(|(k, _)| k.starts_with("tx_queue_") && k.ends_with("_xdp_xmit"))
        .map(|(_, v)| *v)
        .sum()
}

/// Runs the program (not live) on a query for one precompiled answer from an allowed client
/// and requires `XDP_TX` with exactly the reply frame the engine path builds. Returns the
/// query frame, or `None` when there was nothing to test.
fn check_answer(
    prog: &XdpProgram,
    engine: &Engine,
    answers: &[(abi::AnswerKey, abi::AnswerValue)],
    mut probes: impl Iterator<Item = SocketAddr>,
    prog_flags: u16,
) -> Result<Option<Vec<u8>>, String> {
    let Some((key, _)) = answers.first() else {
        return Ok(None);
    };
    // One of the addresses in the program's maps (a real one: the program answers nothing
    // else), with a client of its family that may get answers in the program. None: the
    // interface has no address yet, or no client may get answers there; nothing to prove.
    let Some((server, client)) = probes.find_map(|server| {
        skua_xdp::answers::allowed_client(engine, server.is_ipv6()).map(|c| (server, c))
    }) else {
        return Ok(None);
    };
    let name = &key.name[..usize::from(key.name_len)];
    let (frame, len) = probe_frame(client, server, name, key.qtype)?;
    let (action, out) = prog
        .test_run_output(&frame[..len])
        .map_err(|e| log::chain(&e))?;
    let mut reference = frame;
    let mut scratch = [0u8; 1024];
    let skua_fastpath::Verdict::Reply { len: rlen, .. } =
        skua_fastpath::handle_frame(engine, 0, &mut reference, len, &mut scratch)
    else {
        return Err("the engine does not answer the test query".into());
    };
    let sent = if prog_flags & abi::F_TX_REDIRECT != 0 {
        skua_xdp::bpf::XDP_REDIRECT
    } else {
        skua_xdp::bpf::XDP_TX
    };
    if action != sent || out != reference[..rlen] {
        return Err(format!(
            "the program's reply differs from the engine's (action {action})"
        ));
    }
    Ok(Some(frame[..len].to_vec()))
}

/// A test query frame (RD set) for `name`/`qtype` from `client`:65000 to `server`, for
/// the answers' self-tests; with its length.
fn probe_frame(
    client: IpAddr,
    server: SocketAddr,
    name: &[u8],
    qtype: u16,
) -> Result<([u8; 1024], usize), String> {
    let query = skua_xdp::answers::query(0x5e1f, 0x0100, name, qtype, None);
    let mut frame = [0u8; 1024];
    let len = skua_fastpath::build_udp_frame(
        &mut frame,
        [0x02, 0, 0, 0, 0x5e, 0x1f],
        [0x02, 0, 0, 0, 0x5e, 0x20],
        None,
        SocketAddr::new(client, 65000),
        server,
        &query,
    )
    .ok_or("test frame does not fit")?;
    Ok((frame, len))
}

/// How long the start-up self-test waits for an injected query to reach a
/// worker's socket.
const SELF_TEST_TIMEOUT: Duration = Duration::from_secs(8);

/// Proves, per interface, that a query to a served address reaches queue 0's AF_XDP
/// socket: a live frame injected through the program where the kernel allows it (and
/// `how` is [`SelfTest::Auto`]), else a test run of the program, which must redirect the
/// same frame to the socket; the watch thread then proves the rest on real queries.
fn self_test(
    plane: &XdpPlane,
    ifaces: &[skua_netio::Interface],
    port: u16,
    how: SelfTest,
) -> Result<(), String> {
    for a in plane.programs().iter() {
        let (name, prog) = (&a.ifname, &a.program);
        let Some(iface) = ifaces.iter().find(|i| &i.name == name) else {
            continue;
        };
        // An address in the program's maps: the program redirects nothing else.
        let Some(&dst) = a.dests.first() else {
            log::warn(format_args!(
                "xdp: self-test skipped on {name}: it has no address to answer yet"
            ));
            continue;
        };
        let mac = skua_netio::mac_address(name).unwrap_or([0; 6]);
        let src = SocketAddr::new(dst, 65000);
        let query = crate::base::query::encode_query(
            0x5e1f,
            &skua_engine::name::WireName::parse("self-test.skua.", None)
                .map_err(|e| log::chain(&e))?,
            1,
            None,
            false,
        );
        let mut frame = [0u8; 512];
        let len = skua_fastpath::build_udp_frame(
            &mut frame,
            [0x02, 0, 0, 0, 0x5e, 0x1f],
            mac,
            None,
            src,
            SocketAddr::new(dst, port),
            &query,
        )
        .ok_or("self-test frame does not fit")?;
        let frame = &frame[..len];
        let started = Instant::now();
        let queues = plane.workers.iter().filter(|w| &w.ifname == name).count();
        // Queue 0 only: an injected frame always arrives as queue 0's (XdpProgram::inject).
        // That still proves the path (program, map, socket, worker); the other queues'
        // sockets are bound to the same program and map.
        let Some(w) = plane
            .workers
            .iter()
            .find(|w| &w.ifname == name && w.queue == 0)
        else {
            continue;
        };
        let refused = match how {
            SelfTest::Traffic => "not tried (--xdp-self-test traffic)".to_string(),
            SelfTest::Auto => match inject_until_received(prog, frame, iface.index, w, name)? {
                None => {
                    log::info(format_args!(
                        "xdp: self-test passed on {name} ({queues} queues, {} ms; proof: a live \
                         frame reached queue 0's AF_XDP socket)",
                        started.elapsed().as_millis()
                    ));
                    continue;
                }
                Some(why) => format!("refused here: {why}"),
            },
        };
        // RFC-less but kernel-defined: a redirect to an occupied XSKMAP slot reports
        // XDP_REDIRECT in a test run, to an empty one the fallback XDP_PASS.
        let action = prog
            .test_run(frame)
            .map_err(|e| format!("self-test run on {name}: {}", log::chain(&e)))?;
        if action != skua_xdp::bpf::XDP_REDIRECT {
            return Err(format!(
                "self-test: the program on {name} does not hand a query to {dst}:{port} to \
                 queue 0's AF_XDP socket (action {action})"
            ));
        }
        log::info(format_args!(
            "xdp: self-test passed on {name} ({queues} queues, {} ms; proof: a test run of the \
             program redirected a query to queue 0's socket; live frames {refused}; the first \
             real queries prove the path to the sockets, or the kernel sockets take over)",
            started.elapsed().as_millis()
        ));
    }
    Ok(())
}

/// Injects the self-test frame (live) until queue 0's worker counts it. `Ok(None)`: it
/// arrived; `Ok(Some(why))`: the kernel refuses live frames here; `Err`: it was injected
/// and never arrived.
fn inject_until_received(
    prog: &XdpProgram,
    frame: &[u8],
    ifindex: u32,
    w: &QueueWorker,
    name: &str,
) -> Result<Option<String>, String> {
    let before = w.stats.rx.load(Ordering::Relaxed);
    // Generous: under emulation (QEMU/TCG) a freshly started worker thread may not run
    // for a second or more; a failed self-test costs the operator the XDP plane, a slow
    // one costs nothing.
    let deadline = Instant::now() + SELF_TEST_TIMEOUT;
    let mut next_try = Instant::now();
    let mut injected = false;
    while w.stats.rx.load(Ordering::Relaxed) == before {
        let now = Instant::now();
        if now > deadline {
            return Err(format!(
                "self-test: queries injected on {name} never reached queue 0's AF_XDP socket"
            ));
        }
        // A few tries: the worker may still be starting.
        if now >= next_try {
            match prog.inject(frame, ifindex, 0) {
                Ok(()) => injected = true,
                // Refused at the first try: this kernel takes no live frames (EPERM on
                // hardened kernels and sandboxes, EINVAL before 5.18).
                Err(e) if !injected => return Ok(Some(log::chain(&e))),
                Err(e) => return Err(format!("self-test injection on {name}: {}", log::chain(&e))),
            }
            next_try = now + Duration::from_millis(200);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(None)
}

fn lock_programs(programs: &Mutex<Vec<Attached>>) -> MutexGuard<'_, Vec<Attached>> {
    // A panic while holding the lock leaves maps the kernel keeps consistent anyway.
    programs.lock().unwrap_or_else(|e| e.into_inner())
}

/// The path watch: every quarter second, per interface, the program's redirect counter
/// against what the interface's workers received, and on a native veth the program's
/// answers against the peer's `xdp_xmit` counter ([`watch::Watch`]). A broken
/// path to the sockets takes the whole plane down (programs detached: the kernel sockets,
/// which always run, get every query again) or, with `--xdp-required`, ends the process
/// after detaching; answers a veth peer drops are switched off on that interface.
fn watch_paths(
    programs: &Mutex<Vec<Attached>>,
    watched: &[(String, Vec<Arc<QueueStats>>)],
    stop: &AtomicBool,
    failed: &Mutex<Option<String>>,
    required: bool,
) {
    use watch::{Seen, Watch};
    let received = |stats: &[Arc<QueueStats>]| -> u64 {
        stats.iter().map(|s| s.rx.load(Ordering::Relaxed)).sum()
    };
    let xmit = veth_peer_xmit;
    let counters = |a: &Attached| -> Option<(u64, u64)> {
        let st = a.program.stats().ok()?;
        Some((
            st[abi::Stat::Redirected.index()],
            st[abi::Stat::Answered.index()] + st[abi::Stat::AnsweredCached.index()],
        ))
    };
    let started = Instant::now();
    let ms = || u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    // (ifname, path watch, answers watch on a native veth)
    let mut watches: Vec<(String, Watch, Option<Watch>)> = {
        let programs = lock_programs(programs);
        watched
            .iter()
            .filter_map(|(ifname, stats)| {
                let a = programs.iter().find(|a| &a.ifname == ifname)?;
                let (redirected, answered) = counters(a)?;
                let veth = a.config.flags & abi::F_TX_REDIRECT != 0;
                Some((
                    ifname.clone(),
                    Watch::new(redirected, received(stats)),
                    veth.then(|| {
                        Watch::with_bounds(
                            answered,
                            xmit(ifname),
                            watch::TX_MIN_LOST,
                            watch::TX_STILL_MS,
                        )
                    }),
                ))
            })
            .collect()
    };
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(250));
        let mut programs = lock_programs(programs);
        for ((ifname, path, tx), (_, stats)) in watches.iter_mut().zip(watched) {
            let Some(a) = programs.iter_mut().find(|a| &a.ifname == ifname) else {
                continue;
            };
            let Some((redirected, answered)) = counters(a) else {
                continue;
            };
            match path.sample(ms(), redirected, received(stats)) {
                Seen::Nothing => {}
                Seen::Proven => log::info(format_args!(
                    "xdp: {ifname}: real queries reached the AF_XDP sockets (path proven by traffic)"
                )),
                Seen::Broken { lost, still_ms } => {
                    let why = format!(
                        "{ifname}: the XDP program handed {lost} queries to the AF_XDP sockets \
                         over {:.1} s and no socket received one",
                        still_ms as f64 / 1e3
                    );
                    for a in programs.iter_mut() {
                        if let Err(e) = a.program.detach() {
                            log::error(format_args!("xdp: detach from {}: {e}", a.ifname));
                        }
                    }
                    programs.clear();
                    if required {
                        log::error(format_args!(
                            "XDP required but its path failed: {why}; programs detached, exiting"
                        ));
                        std::process::exit(1);
                    }
                    log::error(format_args!(
                        "xdp: {why}: programs detached, serving through kernel sockets"
                    ));
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
            }
            let Some(tx) = tx.as_mut() else { continue };
            match tx.sample(ms(), answered, xmit(ifname)) {
                Seen::Nothing => {}
                Seen::Proven => log::info(format_args!(
                    "xdp: {ifname}: the veth peer takes the program's XDP_TX answers"
                )),
                Seen::Broken { lost, .. } => {
                    a.tx_lost = true;
                    a.config.flags &= !(abi::F_ANSWER | abi::F_CACHE);
                    if let Err(e) = a.program.set_config(a.config) {
                        log::error(format_args!("xdp: {ifname}: {}", log::chain(&e)));
                    }
                    log::error(format_args!(
                        "xdp: {ifname} is a veth whose peer takes no XDP frames (no XDP program \
                         and GRO off on the peer): none of the last {lost} answers the program \
                         sent arrived; answers in the program are off there, the AF_XDP \
                         workers answer everything; enable them with `ethtool -K PEER gro on` \
                         in the peer's namespace (or attach an XDP program there)"
                    ));
                }
            }
        }
    }
}
