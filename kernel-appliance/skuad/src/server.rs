//! The kernel-socket dataplane: UDP workers (one `SO_REUSEPORT` socket per thread,
//! batched `recvmmsg`/`sendmmsg`), a TCP server (RFC 7766), signals and reload.
//!
//! The engine is held in an [`ArcSwap`]: a worker loads it once per batch (a few
//! nanoseconds, no lock), and a reload swaps in a new one atomically. Queries in flight
//! finish on the engine they started with; none is lost.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use skua_engine::{Engine, Outcome, Request, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};

use crate::load::{self, Loaded, Settings};
use crate::log;

/// Datagrams per `recvmmsg`/`sendmmsg`.
const BATCH: usize = 64;
/// Receive buffer per datagram: queries are small; a longer one is truncated and answered
/// FORMERR (its tail is lost anyway).
const RX_BUF: usize = 4096;
/// Send buffer of accepted TCP connections.
const TCP_SNDBUF: usize = 64 * 1024;
/// How often blocked UDP workers look at the stop flag.
const POLL: Duration = Duration::from_millis(200);

/// Per-worker counters (one cache line each, written by one thread).
#[repr(align(64))]
#[derive(Default)]
pub struct WorkerStats {
    /// Queries received.
    pub queries: AtomicU64,
    /// Replies sent.
    pub replies: AtomicU64,
    /// Queries dropped (ACL, deny zones, malformed).
    pub dropped: AtomicU64,
    /// Replies from the precompiled hot path.
    pub hot: AtomicU64,
}

/// State shared by every worker.
pub struct Shared {
    /// The engine in force.
    pub engine: ArcSwap<Engine>,
    /// Set to stop.
    pub stop: AtomicBool,
    /// Incremented at every engine swap (XDP workers reload only when it changes).
    pub generation: AtomicU64,
    /// UDP worker counters, then one for TCP.
    pub stats: Vec<WorkerStats>,
}

/// Where the configuration comes from, for reloads.
#[derive(Clone, Debug)]
pub enum Source {
    /// The embedded default.
    Default,
    /// A file.
    File(PathBuf),
}

impl Source {
    /// Loads it.
    pub fn load(&self) -> Result<Loaded, load::LoadError> {
        match self {
            Self::Default => load::load_default(),
            Self::File(p) => load::load_file(p),
        }
    }
}

fn count(s: &WorkerStats, o: &Outcome) {
    s.queries.fetch_add(1, Ordering::Relaxed);
    match o {
        Outcome::Reply { info, .. } => {
            s.replies.fetch_add(1, Ordering::Relaxed);
            if info.hot {
                s.hot.fetch_add(1, Ordering::Relaxed);
            }
        }
        Outcome::Drop { .. } => {
            s.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn inform(o: &Outcome, peer: SocketAddr, q: &[u8]) {
    let informs = match o {
        Outcome::Reply { info, .. } => info.inform,
        Outcome::Drop { inform, .. } => *inform,
    };
    if informs {
        log::info(format_args!(
            "inform: {peer} asked {}",
            log::describe_query(q)
        ));
    }
}

fn udp_worker(
    sock: UdpSocket,
    shared: Arc<Shared>,
    idx: usize,
    cpu: Option<usize>,
    tx_size: usize,
) {
    if let Some(cpu) = cpu
        && let Err(e) = skua_netio::pin_to_cpu(cpu)
    {
        log::warn(format_args!("worker {idx}: cannot pin to CPU {cpu}: {e}"));
    }
    if let Err(e) = sock.set_read_timeout(Some(POLL)) {
        log::warn(format_args!("worker {idx}: SO_RCVTIMEO: {e}"));
    }
    let mut rx = skua_netio::Batch::new(BATCH, RX_BUF);
    let mut tx = skua_netio::Batch::new(BATCH, tx_size);
    let stats = &shared.stats[idx];
    while !shared.stop.load(Ordering::Relaxed) {
        let n = match rx.recv(&sock) {
            Ok(n) => n,
            Err(e) => {
                log::warn(format_args!("worker {idx}: recvmmsg: {e}"));
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if n == 0 {
            continue;
        }
        let engine = shared.engine.load();
        for i in 0..n {
            let Some((q, peer)) = rx.get(i) else { continue };
            let Some(out) = tx.next_buf() else { break };
            let req = Request {
                src: peer.ip(),
                transport: Transport::Udp,
            };
            let o = engine.handle_query(&req, q, out);
            count(stats, &o);
            inform(&o, peer, q);
            if let Outcome::Reply { len, .. } = o {
                tx.push(len, peer);
            }
        }
        if !tx.is_empty()
            && let Err(e) = tx.send(&sock)
        {
            log::warn(format_args!("worker {idx}: sendmmsg: {e}"));
        }
    }
}

/// One TCP connection: pipelined queries (RFC 7766 §6.2.1.1), replies written by a separate
/// task so that a slow reader does not stall query processing, idle timeout per message
/// (§6.2.3: a client that stops mid-message is disconnected).
async fn tcp_conn(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, idle: Duration) {
    let _ = stream.set_nodelay(true);
    // Replies of a pipelining client fit easily; a client that never reads fills this and
    // then the write timeout disconnects it (instead of megabytes of autotuned buffer).
    let _ = skua_netio::set_send_buffer(&stream, TCP_SNDBUF);
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    // A client that stops reading its replies must not hold the connection (and its slot)
    // forever: writes get the idle timeout too.
    let writer = tokio::spawn(async move {
        while let Some(buf) = rx.recv().await {
            match tokio::time::timeout(idle, wr.write_all(&buf)).await {
                Ok(Ok(())) => {}
                _ => break,
            }
        }
        let _ = tokio::time::timeout(idle, wr.shutdown()).await;
    });
    let stats = &shared.stats[shared.stats.len() - 1];
    let mut q = vec![0u8; 65535];
    let mut out = vec![0u8; 2 + 65535];
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(idle, rd.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => break,
        }
        let n = usize::from(u16::from_be_bytes(len));
        match tokio::time::timeout(idle, rd.read_exact(&mut q[..n])).await {
            Ok(Ok(_)) => {}
            _ => break,
        }
        let engine = shared.engine.load();
        let req = Request {
            src: peer.ip(),
            transport: Transport::Tcp,
        };
        let o = engine.handle_query(&req, &q[..n], &mut out[2..]);
        count(stats, &o);
        inform(&o, peer, &q[..n]);
        match o {
            Outcome::Reply { len, .. } => {
                // Cannot truncate: replies are at most 65535 bytes.
                out[..2].copy_from_slice(&(len as u16).to_be_bytes());
                match tokio::time::timeout(idle, tx.send(out[..2 + len].to_vec())).await {
                    Ok(Ok(())) => {}
                    _ => break,
                }
            }
            // A denied client over TCP: close, as Unbound does.
            Outcome::Drop {
                reason: skua_engine::engine::DropReason::Acl,
                ..
            } => break,
            Outcome::Drop { .. } => {}
        }
    }
    drop(tx);
    let _ = writer.await;
}

async fn tcp_accept(
    listener: TcpListener,
    shared: Arc<Shared>,
    limit: Arc<Semaphore>,
    idle: Duration,
) {
    loop {
        // Take a slot before accepting: past the limit, clients wait in the backlog instead
        // of being accepted and starved (RFC 7766 §6.2.2).
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, peer)) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    tcp_conn(stream, peer, shared, idle).await;
                    drop(permit);
                });
            }
            Err(e) => {
                log::warn(format_args!("tcp accept: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn bind_udp(s: &Settings) -> io::Result<Vec<(UdpSocket, usize)>> {
    let mut out = Vec::new();
    for &addr in &s.udp {
        for t in 0..s.threads {
            // One socket per thread only makes sense with SO_REUSEPORT; without it, one socket.
            if t > 0 && !s.reuseport {
                break;
            }
            let fd = skua_netio::bind_socket(
                addr,
                skua_netio::Kind::Udp,
                s.reuseport,
                s.rcvbuf,
                s.sndbuf,
                0,
            )
            .map_err(|e| io::Error::new(e.kind(), format!("udp {addr}: {e}")))?;
            out.push((UdpSocket::from(fd), t));
        }
    }
    Ok(out)
}

fn bind_tcp(s: &Settings) -> io::Result<Vec<std::net::TcpListener>> {
    s.tcp
        .iter()
        .map(|&addr| {
            skua_netio::bind_socket(addr, skua_netio::Kind::Tcp, false, None, None, 256)
                .map(std::net::TcpListener::from)
                .map_err(|e| io::Error::new(e.kind(), format!("tcp {addr}: {e}")))
        })
        .collect()
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(source: Source, xdp_opts: &crate::xdp::XdpOptions) -> Result<(), String> {
    let loaded = source
        .load()
        .map_err(|e| format!("cannot load configuration: {e}"))?;
    log::set_verbosity(loaded.settings.verbosity);
    log::install_bridge();
    for w in &loaded.warnings {
        log::warn(format_args!("{w}"));
    }
    skua_netio::release_free_memory();
    log::info(format_args!(
        "loaded {} records, {} names in {:.1} ms ({} KiB of answer tables)",
        loaded.records,
        loaded.engine.name_count(),
        loaded.elapsed.as_secs_f64() * 1e3,
        loaded.engine.heap_bytes() / 1024
    ));
    let settings = loaded.settings.clone();
    // The runtime and the signal handlers come first: a SIGHUP or SIGTERM that arrives as
    // soon as we answer must find its handler, not the default action (which kills).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("tcp")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))?;
    let sigs = {
        use tokio::signal::unix::{SignalKind, signal};
        let _guard = rt.enter();
        let mk =
            |k: SignalKind| signal(k).map_err(|e| format!("cannot install signal handler: {e}"));
        Signals {
            usr1: mk(SignalKind::user_defined1())?,
            hup: mk(SignalKind::hangup())?,
            term: mk(SignalKind::terminate())?,
            int: mk(SignalKind::interrupt())?,
        }
    };
    let udp = bind_udp(&settings).map_err(|e| format!("cannot listen: {e}"))?;
    let tcp = bind_tcp(&settings).map_err(|e| format!("cannot listen: {e}"))?;
    let shared = Arc::new(Shared {
        engine: ArcSwap::from_pointee(loaded.engine),
        stop: AtomicBool::new(false),
        generation: AtomicU64::new(0),
        stats: (0..=udp.len()).map(|_| WorkerStats::default()).collect(),
    });
    let tx_size = usize::from(settings.max_udp_size);
    // The XDP workers send replies too large for a frame through these (kernel) sockets.
    let slow: Vec<UdpSocket> = udp
        .iter()
        .filter(|(_, t)| *t == 0)
        .filter_map(|(s, _)| s.try_clone().ok())
        .collect();
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    for (i, (sock, t)) in udp.into_iter().enumerate() {
        let cpu = settings.cpus.as_ref().map(|c| c[t % c.len()]);
        let sh = shared.clone();
        let h = std::thread::Builder::new()
            .name(format!("udp-{i}"))
            .spawn(move || udp_worker(sock, sh, i, cpu, tx_size))
            .map_err(|e| format!("cannot start worker: {e}"))?;
        workers.push(h);
    }
    for a in &settings.udp {
        log::info(format_args!(
            "listening on {a} udp ({} worker threads)",
            settings.threads
        ));
    }
    for a in &settings.tcp {
        log::info(format_args!("listening on {a} tcp"));
    }
    // XDP comes after the sockets: the kernel path is always there to fall back to, and
    // what the XDP program passes (TCP, fragments, other queues) lands on it.
    let mut plane = match crate::xdp::start(&settings, xdp_opts, &shared, &slow) {
        Ok(p) => p,
        Err(e) => {
            shared.stop.store(true, Ordering::Relaxed);
            for w in workers {
                let _ = w.join();
            }
            return Err(e);
        }
    };
    let result = rt.block_on(async {
        let limit = Arc::new(Semaphore::new(settings.tcp_limit));
        for l in tcp {
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            let l = TcpListener::from_std(l).map_err(|e| e.to_string())?;
            tokio::spawn(tcp_accept(
                l,
                shared.clone(),
                limit.clone(),
                settings.tcp_idle,
            ));
        }
        let dump = || {
            log::info(format_args!("stats: {}", socket_summary(&shared)));
            if let Some(p) = plane.as_ref() {
                for line in p.summary() {
                    log::info(format_args!("{line}"));
                }
            }
        };
        crate::notify::notify(&format!(
            "READY=1\nSTATUS=serving on {} ({})",
            settings
                .udp
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            if plane.is_some() {
                "AF_XDP"
            } else {
                "kernel sockets"
            }
        ));
        let hooks = ReloadHooks {
            before_swap: &|| {
                if let Some(p) = plane.as_ref() {
                    p.suspend_answers();
                }
            },
            after_swap: &|e: &Engine| {
                if let Some(p) = plane.as_ref() {
                    p.resume_answers(e);
                }
            },
        };
        signals(sigs, &source, &shared, &settings, &dump, &hooks).await
    });
    shared.stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    if let Some(p) = plane.as_mut() {
        for line in p.summary() {
            log::info(format_args!("{line}"));
        }
        p.shutdown();
    }
    rt.shutdown_timeout(Duration::from_millis(500));
    log::info(format_args!("stopped: {}", socket_summary(&shared)));
    result
}

/// Kernel-socket counters, one line.
fn socket_summary(shared: &Shared) -> String {
    let total = |f: fn(&WorkerStats) -> &AtomicU64| -> u64 {
        shared
            .stats
            .iter()
            .map(|s| f(s).load(Ordering::Relaxed))
            .sum()
    };
    format!(
        "{} queries, {} replies ({} hot path), {} dropped (kernel sockets)",
        total(|s| &s.queries),
        total(|s| &s.replies),
        total(|s| &s.hot),
        total(|s| &s.dropped)
    )
}

/// The signals the daemon handles, registered before it starts answering.
struct Signals {
    usr1: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

/// What the XDP plane does around an engine swap (answers in the program off before, back
/// on with the new engine's answers after).
struct ReloadHooks<'a> {
    before_swap: &'a dyn Fn(),
    after_swap: &'a dyn Fn(&Engine),
}

/// SIGHUP reloads (a bad configuration is rejected and the old one keeps serving);
/// SIGUSR1 logs the counters; SIGTERM and SIGINT stop.
async fn signals(
    sigs: Signals,
    source: &Source,
    shared: &Arc<Shared>,
    settings: &Settings,
    dump: &dyn Fn(),
    hooks: &ReloadHooks<'_>,
) -> Result<(), String> {
    let Signals {
        mut usr1,
        mut hup,
        mut term,
        mut int,
    } = sigs;
    loop {
        tokio::select! {
            _ = hup.recv() => {
                crate::notify::notify("RELOADING=1");
                let src = source.clone();
                match tokio::task::spawn_blocking(move || src.load()).await {
                    Ok(Ok(new)) => {
                        for w in &new.warnings {
                            log::warn(format_args!("{w}"));
                        }
                        if new.settings != *settings {
                            log::warn(format_args!("reload: listener settings changed (interfaces, ports, threads, buffers); they take effect at restart"));
                        }
                        log::set_verbosity(new.settings.verbosity);
                        (hooks.before_swap)();
                        let engine = Arc::new(new.engine);
                        shared.engine.store(engine.clone());
                        shared.generation.fetch_add(1, Ordering::Release);
                        (hooks.after_swap)(&engine);
                        skua_netio::release_free_memory();
                        log::info(format_args!("reloaded: {} records in {:.1} ms", new.records, new.elapsed.as_secs_f64() * 1e3));
                    }
                    Ok(Err(e)) => log::error(format_args!("reload rejected, still serving the previous configuration: {e}")),
                    Err(e) => log::error(format_args!("reload failed: {e}")),
                }
                // Old or new, a configuration is serving again.
                crate::notify::notify("READY=1");
            }
            _ = usr1.recv() => dump(),
            _ = term.recv() => {
                crate::notify::notify("STOPPING=1");
                return Ok(());
            }
            _ = int.recv() => {
                crate::notify::notify("STOPPING=1");
                return Ok(());
            }
        }
    }
}
