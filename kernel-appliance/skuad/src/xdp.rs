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
//! queue's worker to receive and answer it within a second.
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

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use skua_engine::Engine;
use skua_xdp::abi::{self, XdpConfig};
use skua_xdp::bpf::{AttachMode, XdpProgram};
use skua_xdp::socket::{XskConfig, XskSocket};
use skua_xdp::worker::{EngineSource, QueueStats};

use crate::load::Settings;
use crate::log;
use crate::server::Shared;

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
        }
    }
}

struct Engines(Arc<Shared>);

impl EngineSource for Engines {
    fn current(&self) -> Arc<Engine> {
        self.0.engine.load_full()
    }

    fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Acquire)
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

/// One interface's program and the config record it runs with.
struct Attached {
    ifname: String,
    program: XdpProgram,
    config: XdpConfig,
    /// A served address and port on it, for the answer self-test.
    probe: Option<SocketAddr>,
}

/// The running XDP dataplane; detaches on drop.
pub struct XdpPlane {
    programs: Mutex<Vec<Attached>>,
    /// Answers in the program wanted (capacity > 0) and not failed at start.
    answers: AtomicBool,
    /// The answers' self-test has passed once (it runs on the first load).
    answers_proven: AtomicBool,
    /// "Off: rate limiting is on" was logged since answers were last loaded.
    rrl_noted: AtomicBool,
    capacity: u32,
    /// Stops this plane's workers (set on shutdown, including a failed start).
    stop: Arc<AtomicBool>,
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
        // A panic while holding the lock leaves maps the kernel keeps consistent anyway.
        self.programs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops answering in the programs (before a new engine is swapped in).
    pub fn suspend_answers(&self) {
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
        for a in programs.iter_mut() {
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
                    a.probe,
                    a.config.flags,
                )
                .map_err(|e| format!("{}: self-test of answers in the program: {e}", a.ifname))?;
                if let Some(frame) = frame {
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
    shared: &Arc<Shared>,
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
    shared: &Arc<Shared>,
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
    let ifaces = if opts.interfaces.is_empty() {
        skua_netio::interfaces_for(&served).map_err(|e| format!("cannot list interfaces: {e}"))?
    } else {
        // Explicit interfaces: every served address is ours on them.
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
        programs: Mutex::new(Vec::new()),
        answers: AtomicBool::new(false),
        answers_proven: AtomicBool::new(false),
        rrl_noted: AtomicBool::new(false),
        capacity: opts.answers,
        stop: Arc::new(AtomicBool::new(false)),
        workers: Vec::new(),
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
    let slow = Arc::new(slow);
    for iface in &ifaces {
        let mut prog = XdpProgram::load_with_capacity(opts.answers)
            .map_err(|e| format!("loading the XDP program: {}", log::chain(&e)))?;
        match skua_xdp::bpf::detach_stale(&iface.name) {
            Ok(true) => log::warn(format_args!(
                "xdp: removed a stale skua program from {}",
                iface.name
            )),
            Ok(false) => {}
            Err(e) => return Err(format!("{}: {}", iface.name, log::chain(&e))),
        }
        let any4 = served.iter().any(|a| a.is_ipv4() && a.is_unspecified());
        let any6 = served.iter().any(|a| a.is_ipv6() && a.is_unspecified());
        let mut flags = abi::F_ENABLED;
        if any4 {
            flags |= abi::F_ANY_V4;
        }
        if any6 {
            flags |= abi::F_ANY_V6;
        }
        let mut config = XdpConfig {
            port,
            flags,
            pad: 0,
        };
        prog.set_config(config).map_err(|e| log::chain(&e))?;
        for a in &iface.addrs {
            if !a.is_unspecified() {
                prog.add_dest(*a).map_err(|e| log::chain(&e))?;
            }
        }
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
        plane.programs().push(Attached {
            ifname: iface.name.clone(),
            program: prog,
            config,
            probe: iface.addrs.first().map(|ip| SocketAddr::new(*ip, port)),
        });
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
                        &st,
                        &stop,
                        100,
                        crate::clock::now_secs,
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
    self_test(&plane, &ifaces, port)?;
    if opts.answers > 0 {
        plane.answers.store(true, Ordering::Relaxed);
        // The first load runs the answers' self-test (now, or after a reload that turns
        // rate limiting off).
        plane.resume_answers(&shared.engine.load());
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
    let xmit = || -> u64 {
        skua_netio::ethtool::stats(ifname)
            .unwrap_or_default()
            .iter()
            .filter(|(k, _)| k.starts_with("tx_queue_") && k.ends_with("_xdp_xmit"))
            .map(|(_, v)| *v)
            .sum()
    };
    let Some(ifindex) = prog.ifindex() else {
        return Ok(());
    };
    let before = xmit();
    prog.inject(frame, ifindex, 0)
        .map_err(|e| format!("{ifname}: {}", log::chain(&e)))?;
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

/// Runs the program (not live) on a query for one precompiled answer from an allowed client
/// and requires `XDP_TX` with exactly the reply frame the engine path builds. Returns the
/// query frame, or `None` when there was nothing to test.
fn check_answer(
    prog: &XdpProgram,
    engine: &Engine,
    answers: &[(abi::AnswerKey, abi::AnswerValue)],
    probe: Option<SocketAddr>,
    prog_flags: u16,
) -> Result<Option<Vec<u8>>, String> {
    let (Some((key, _)), Some(server)) = (answers.first(), probe) else {
        return Ok(None);
    };
    // A wildcard listener (0.0.0.0 / ::) has the "any destination" flag: any address does.
    let server = match server.ip() {
        IpAddr::V4(a) if a.is_unspecified() => {
            SocketAddr::new([198, 18, 0, 53].into(), server.port())
        }
        IpAddr::V6(a) if a.is_unspecified() => {
            SocketAddr::new([0xfd00, 0x5c, 0, 0, 0, 0, 0, 0x53u16].into(), server.port())
        }
        _ => server,
    };
    let Some(client) = skua_xdp::answers::allowed_client(engine, server.is_ipv6()) else {
        // No client of this family may get answers in the program: nothing to prove.
        return Ok(None);
    };
    let name = &key.name[..usize::from(key.name_len)];
    let query = skua_xdp::answers::query(0x5e1f, 0x0100, name, key.qtype, None);
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

/// Injects one query per queue through the attached program and waits for its worker.
/// How long the start-up self-test waits for an injected query to reach a
/// worker's socket.
const SELF_TEST_TIMEOUT: Duration = Duration::from_secs(8);

fn self_test(plane: &XdpPlane, ifaces: &[skua_netio::Interface], port: u16) -> Result<(), String> {
    for a in plane.programs().iter() {
        let (name, prog) = (&a.ifname, &a.program);
        let Some(iface) = ifaces.iter().find(|i| &i.name == name) else {
            continue;
        };
        let Some(&dst) = iface.addrs.first() else {
            continue;
        };
        let mac = skua_netio::mac_address(name).unwrap_or([0; 6]);
        let src = SocketAddr::new(dst, 65000);
        let query = crate::bench::encode_query(
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
        let started = Instant::now();
        // Queue 0 only: an injected frame always arrives as queue 0's (XdpProgram::inject).
        // That still proves the path (program, map, socket, worker); the other queues'
        // sockets are bound to the same program and map.
        if let Some(w) = plane
            .workers
            .iter()
            .find(|w| &w.ifname == name && w.queue == 0)
        {
            let before = w.stats.rx.load(Ordering::Relaxed);
            // Generous: under emulation (QEMU/TCG) a freshly started worker
            // thread may not run for a second or more; a failed self-test
            // costs the operator the XDP plane, a slow one costs nothing.
            let deadline = Instant::now() + SELF_TEST_TIMEOUT;
            let mut next_try = Instant::now();
            while w.stats.rx.load(Ordering::Relaxed) == before {
                let now = Instant::now();
                if now > deadline {
                    return Err(format!(
                        "self-test: queries injected on {name} never reached queue 0's AF_XDP socket"
                    ));
                }
                // A few tries: the worker may still be starting.
                if now >= next_try {
                    prog.inject(&frame[..len], iface.index, 0).map_err(|e| {
                        format!("self-test injection on {name}: {}", log::chain(&e))
                    })?;
                    next_try = now + Duration::from_millis(200);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        log::info(format_args!(
            "xdp: self-test passed on {name} ({} queues, {} ms)",
            plane.workers.iter().filter(|w| &w.ifname == name).count(),
            started.elapsed().as_millis()
        ));
    }
    Ok(())
}
