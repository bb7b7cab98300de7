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

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The running XDP dataplane; detaches on drop.
pub struct XdpPlane {
    programs: Vec<(String, XdpProgram)>,
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
        for (name, p) in &mut self.programs {
            match p.detach() {
                Ok(()) => log::info(format_args!("xdp: detached from {name}")),
                Err(e) => log::error(format_args!("xdp: detach from {name} failed: {e}")),
            }
        }
        self.programs.clear();
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
                     tx full {}, dropped {} [{}], kernel: rx_dropped={} rx_ring_full={} \
                     fill_empty={} tx_invalid={}",
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
                    r(&s.xsk.rx_dropped),
                    r(&s.xsk.rx_ring_full),
                    r(&s.xsk.rx_fill_ring_empty_descs),
                    r(&s.xsk.tx_invalid_descs),
                )
            })
            .collect();
        for (name, p) in &self.programs {
            if let Ok(st) = p.stats() {
                let fields: Vec<String> = abi::Stat::ALL
                    .iter()
                    .map(|k| format!("{}={}", k.name(), st[*k as usize]))
                    .collect();
                out.push(format!("xdp program on {name}: {}", fields.join(" ")));
            }
        }
        out
    }
}

impl Drop for XdpPlane {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts the XDP dataplane per `opts`. `Ok(None)`: not running (off, or fell back — the
/// reason is logged). `Err`: required and impossible.
pub fn start(
    settings: &Settings,
    opts: &XdpOptions,
    shared: &Arc<Shared>,
    slow: &[UdpSocket],
) -> Result<Option<XdpPlane>, String> {
    if opts.policy == XdpPolicy::Off {
        log::info(format_args!(
            "xdp: disabled (--no-xdp); serving through kernel sockets"
        ));
        return Ok(None);
    }
    match try_start(settings, opts, shared, slow) {
        Ok(plane) => Ok(Some(plane)),
        Err(reason) if opts.policy == XdpPolicy::Required => {
            Err(format!("XDP required but unavailable: {reason}"))
        }
        Err(reason) => {
            log::warn(format_args!(
                "xdp: not used: {reason}; serving through kernel sockets"
            ));
            Ok(None)
        }
    }
}

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
            "no interface holds a served address".to_string()
        } else {
            "the served addresses are on loopback, where XDP brings nothing".to_string()
        };
        return Err(why);
    }
    let mut plane = XdpPlane {
        programs: Vec::new(),
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
        let mut prog = XdpProgram::load()
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
        prog.set_config(XdpConfig {
            port,
            flags,
            pad: 0,
        })
        .map_err(|e| log::chain(&e))?;
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
        plane.programs.push((iface.name.clone(), prog));
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
                    skua_xdp::worker::run(&mut sock, &engines, sl.as_ref(), &st, &stop, 100);
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
    Ok(plane)
}

/// Injects one query per queue through the attached program and waits for its worker.
fn self_test(plane: &XdpPlane, ifaces: &[skua_netio::Interface], port: u16) -> Result<(), String> {
    for (name, prog) in &plane.programs {
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
        for w in plane.workers.iter().filter(|w| &w.ifname == name) {
            let before = w.stats.rx.load(Ordering::Relaxed);
            let deadline = Instant::now() + Duration::from_secs(1);
            let mut next_try = Instant::now();
            while w.stats.rx.load(Ordering::Relaxed) == before {
                let now = Instant::now();
                if now > deadline {
                    return Err(format!(
                        "self-test: queries injected on {name} queue {} never reached its AF_XDP socket",
                        w.queue
                    ));
                }
                // A few tries: the worker may still be starting.
                if now >= next_try {
                    prog.inject(&frame[..len], iface.index, w.queue)
                        .map_err(|e| {
                            format!(
                                "self-test injection on {name} queue {}: {}",
                                w.queue,
                                log::chain(&e)
                            )
                        })?;
                    next_try = now + Duration::from_millis(200);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        log::info(format_args!(
            "xdp: self-test passed on {name} ({} queues)",
            plane.workers.iter().filter(|w| &w.ifname == name).count()
        ));
    }
    Ok(())
}
