//! `skua-agent`, Skua's host agent: VRRPv3 failover (RFC 9568, interoperable with
//! keepalived 2.2) whose virtual addresses are answered by at most one node, because the
//! agent holds a **lease** on them in skuad that ends by itself when the agent stops
//! renewing it.
//!
//! What it does: runs one skua-vrrp router per `[[vrrp]]` instance on raw sockets; when a
//! router becomes master it takes skuad's lease (once the previous master's is surely
//! over), adds the addresses and announces them (gratuitous ARP / unsolicited NA); it
//! renews the lease before every advertisement and gives everything back when it leaves.
//! It serves `/metrics` and `/status` for Prometheus and `skuactl ha status`.
//!
//! It runs the health checks (`[[check]]`, [`health`]) and follows their verdict: VRRP
//! priority and mastership, and the anycast prefixes (`[[anycast]]`, [`anycast`]) that an
//! existing routing daemon announces by BGP while this node is healthy.
//!
//! What it does not do (yet): zone transfer sync; SR-IOV is `skua-sriov`; BGP itself is
//! the routing daemon's (BIRD 2 or FRR, docs/ha-anycast.md).
//!
//! Usage: `skua-agent --config /etc/skua/agent.toml` (`--check` only reads the file).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod addr;
mod anycast;
mod config;
mod health;
mod instance;
mod logging;
mod metrics;
mod net;
mod skuad;

use instance::{Instance, Status};
use logging::log;

/// Set by SIGTERM / SIGINT.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// `CLOCK_MONOTONIC` in nanoseconds (the routers' clock).
fn now_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC exists on Linux");
    (t.tv_sec() as u64) * 1_000_000_000 + t.tv_nsec() as u64
}

fn usage() -> ! {
    eprintln!(
        "usage: skua-agent [--config FILE] [--check]      run (or only read the file)\n       \
         skua-agent [--config FILE] sriov status|plan|apply [--force]\n                       \
         the [[sriov]] tables: what is there, what apply would do, do it (JSON)"
    );
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    let mut check = false;
    let mut sriov: Option<String> = None;
    let mut force = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--config" | "-c" => path = Some(args.next().unwrap_or_else(|| usage())),
            "--check" => check = true,
            "--force" => force = true,
            "sriov" => sriov = Some(args.next().unwrap_or_else(|| usage())),
            "--version" => {
                println!("skua-agent {}", env!("CARGO_PKG_VERSION"));
                return;
            }
            _ => usage(),
        }
    }
    let path = path.unwrap_or_else(|| "/etc/skua/agent.toml".into());
    let cfg = match config::load(std::path::Path::new(&path)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skua-agent: {e}");
            std::process::exit(1);
        }
    };
    if check {
        println!(
            "{path}: OK ({} VRRP instances, {} checks, {} SR-IOV functions, {} anycast sections)",
            cfg.vrrp.len(),
            cfg.check.len(),
            cfg.sriov.len(),
            cfg.anycast.len()
        );
        return;
    }
    if let Some(cmd) = sriov {
        let opts = skua_sriov::PlanOptions { force };
        let Some((out, ok)) =
            skua_sriov::command(&skua_sriov::Host::system(), &cfg.sriov, &cmd, opts)
        else {
            usage()
        };
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        std::process::exit(if ok { 0 } else { 1 });
    }
    if let Err(e) = run(cfg) {
        eprintln!("skua-agent: {e}");
        std::process::exit(1);
    }
}

fn run(cfg: config::Config) -> Result<(), String> {
    let name = cfg.agent.name.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "skua-agent".into())
    });
    let token = match &cfg.agent.token {
        Some(t) => Some(skuad::read_token(t)?),
        None => None,
    };
    let endpoint = skuad::Endpoint::parse(&cfg.agent.skuad)?;
    let mut client = skuad::Client::new(endpoint.clone(), token.clone());
    let checks: health::Shared = Arc::new(Mutex::new(health::initial(&cfg.check)));
    if !cfg.check.is_empty() {
        let (c, s) = (cfg.check.clone(), checks.clone());
        std::thread::Builder::new()
            .name("checks".into())
            .spawn(move || health::run(c, endpoint, token, s))
            .map_err(|e| e.to_string())?;
    }
    // NIC passthrough first: the VFs exist before anything uses them. A failure is logged,
    // not fatal: failover must not depend on a VF's settings.
    if !cfg.sriov.is_empty() {
        let opts = skua_sriov::PlanOptions::default();
        match skua_sriov::reconcile(&skua_sriov::Host::system(), &cfg.sriov, opts) {
            Ok(outcomes) => {
                for o in outcomes {
                    match o.result {
                        Ok(done) if done.is_empty() => {
                            eprintln!("skua-agent: sriov {}: as configured", o.pf);
                        }
                        Ok(done) => {
                            for a in done {
                                eprintln!("skua-agent: sriov {}: {a}", o.pf);
                            }
                        }
                        Err(e) => eprintln!("skua-agent: sriov {}: {e}", o.pf),
                    }
                }
            }
            Err(e) => eprintln!("skua-agent: sriov: {e}"),
        }
    }
    let mut instances = Vec::new();
    for i in cfg.vrrp {
        instances.push(Instance::open(i, &name)?);
    }
    let mut kernel = anycast::System;
    let mut anycasts = Vec::new();
    for a in cfg.anycast {
        let mut a = anycast::Anycast::new(a)?;
        a.start(now_ns(), &mut kernel)?;
        anycasts.push(a);
    }
    for sig in [nix::sys::signal::SIGTERM, nix::sys::signal::SIGINT] {
        let act = nix::sys::signal::SigAction::new(
            nix::sys::signal::SigHandler::Handler(on_signal),
            nix::sys::signal::SaFlags::empty(),
            nix::sys::signal::SigSet::empty(),
        );
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { nix::sys::signal::sigaction(sig, &act) }.map_err(|e| format!("sigaction: {e}"))?;
    }
    let shared: Arc<Mutex<Vec<Status>>> = Arc::new(Mutex::new(Vec::new()));
    let any_shared: Arc<Mutex<Vec<anycast::AnycastStatus>>> = Arc::new(Mutex::new(Vec::new()));
    if cfg.agent.listen != "off" {
        let l = TcpListener::bind(&cfg.agent.listen)
            .map_err(|e| format!("[agent] listen = {}: {e}", cfg.agent.listen))?;
        let (s, h, a) = (shared.clone(), checks.clone(), any_shared.clone());
        std::thread::Builder::new()
            .name("status".into())
            .spawn(move || serve_status(&l, &s, &h, &a))
            .map_err(|e| e.to_string())?;
    }
    eprintln!(
        "skua-agent: {name}: {} VRRP instances, {} anycast sections, skuad at {}",
        instances.len(),
        anycasts.len(),
        cfg.agent.skuad
    );
    let t = now_ns();
    for i in &mut instances {
        i.start(t, &mut client);
    }
    let mut published = 0u64;
    let mut result = Ok(());
    while !STOP.load(Ordering::Relaxed) {
        let now = now_ns();
        let v = health::verdict(&checks.lock().unwrap_or_else(|e| e.into_inner()));
        for i in &mut instances {
            i.apply_health(now, &v, &mut client);
            i.tick(now, &mut client);
        }
        for a in &mut anycasts {
            a.apply(now, &v, &mut kernel);
        }
        // The status for /status and /metrics, at most every 100 ms.
        if now >= published + 100_000_000 {
            published = now;
            *shared.lock().unwrap_or_else(|e| e.into_inner()) =
                instances.iter().map(|i| i.status(now)).collect();
            if !anycasts.is_empty() {
                *any_shared.lock().unwrap_or_else(|e| e.into_inner()) =
                    anycasts.iter().map(|a| a.status(now)).collect();
            }
        }
        // Sleep until the next deadline, at most 20 ms (the link state is looked at that
        // often; a signal ends the wait at once).
        let next = instances.iter().filter_map(Instance::deadline).min();
        let wait_ms = next.map_or(20, |t| {
            t.saturating_sub(now_ns()).div_ceil(1_000_000).min(20)
        });
        // (instance, socket index) of every descriptor polled.
        let mut owners = Vec::new();
        let mut fds: Vec<nix::poll::PollFd<'_>> = Vec::new();
        for (k, i) in instances.iter().enumerate() {
            for (j, fd) in i.fds().into_iter().enumerate() {
                owners.push((k, j));
                fds.push(nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN));
            }
        }
        let timeout = nix::poll::PollTimeout::try_from(wait_ms as i32)
            .unwrap_or(nix::poll::PollTimeout::ZERO);
        match nix::poll::poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                result = Err(format!("poll: {e}"));
                break;
            }
        }
        let ready: Vec<(usize, usize)> = fds
            .iter()
            .zip(&owners)
            .filter(|(f, _)| {
                f.revents()
                    .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLIN))
            })
            .map(|(_, o)| *o)
            .collect();
        drop(fds);
        let now = now_ns();
        for (k, j) in ready {
            instances[k].readable(now, j, &mut client);
        }
    }
    let now = now_ns();
    for i in &mut instances {
        log(
            &i.cfg.name,
            format_args!("stopping: leaving with priority 0"),
        );
        i.stop(now, &mut client);
    }
    for a in &mut anycasts {
        a.withdraw(now, "the agent is stopping", &mut kernel);
    }
    result
}

/// `GET /status` (JSON) and `GET /metrics` (Prometheus text), one request per connection.
fn serve_status(
    l: &TcpListener,
    shared: &Mutex<Vec<Status>>,
    checks: &health::Shared,
    anycast: &Mutex<Vec<anycast::AnycastStatus>>,
) {
    for conn in l.incoming() {
        let Ok(mut c) = conn else { continue };
        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
        let mut line = String::new();
        let mut rd = BufReader::new(match c.try_clone() {
            Ok(r) => r,
            Err(_) => continue,
        });
        if rd.read_line(&mut line).is_err() {
            continue;
        }
        // Headers are read and ignored.
        let mut h = String::new();
        while rd.read_line(&mut h).is_ok_and(|n| n > 2) {
            h.clear();
        }
        let st = shared.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let hc = checks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let any = anycast.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let path = line.split(' ').nth(1).unwrap_or("");
        let (code, ctype, body) = match path {
            "/status" => (
                "200 OK",
                "application/json",
                serde_json::to_string_pretty(
                    &serde_json::json!({"instances": st, "checks": hc, "anycast": any}),
                )
                .unwrap_or_default(),
            ),
            "/metrics" => (
                "200 OK",
                "text/plain; version=0.0.4",
                metrics::render(&st, &hc, &any),
            ),
            _ => (
                "404 Not Found",
                "text/plain",
                "GET /status or /metrics\n".into(),
            ),
        };
        let _ = write!(
            c,
            "HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}
