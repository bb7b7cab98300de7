//! The kernel-socket dataplane: UDP workers (one `SO_REUSEPORT` socket per thread,
//! batched `recvmmsg`/`sendmmsg`), a TCP server (RFC 7766), signals and reload.
//!
//! The engine is held in an [`ArcSwap`]: a worker loads it once per batch (a few
//! nanoseconds, no lock), and a reload swaps in a new one atomically. Queries in flight
//! finish on the engine they started with; none is lost.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use skua_engine::{Engine, Outcome, Request, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::api;
use crate::control::{self, Control, DataplaneState};
use crate::listeners::Listeners;
use crate::load::{self, Loaded};
use crate::log;
use crate::state::Overlay;

/// Datagrams per `recvmmsg`/`sendmmsg`.
const BATCH: usize = 64;
/// Receive buffer per datagram: queries are small; a longer one is truncated and answered
/// FORMERR (its tail is lost anyway).
const RX_BUF: usize = 4096;
/// Send buffer of accepted TCP connections.
const TCP_SNDBUF: usize = 64 * 1024;
/// How often blocked UDP workers look at the stop flag.
const POLL: Duration = Duration::from_millis(200);

/// Per-worker counters (written by one thread each).
pub use skua_engine::stats::Counters as WorkerStats;

/// State shared by every worker.
pub struct Shared {
    /// The engine in force.
    pub engine: ArcSwap<Engine>,
    /// Set to stop.
    pub stop: AtomicBool,
    /// Incremented at every engine swap (XDP workers reload only when it changes).
    pub generation: AtomicU64,
    /// Counters of every kernel-socket worker started so far (retired ones included, so
    /// totals never go down) and of TCP.
    pub stats: std::sync::Mutex<Vec<Arc<WorkerStats>>>,
}

impl Shared {
    /// State for `engine`, no workers yet.
    pub fn new(engine: Engine) -> Self {
        Self {
            engine: ArcSwap::from_pointee(engine),
            stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            stats: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Adds a worker's counters to the totals.
    pub fn register(&self, c: Arc<WorkerStats>) {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).push(c);
    }

    /// Sum of every worker's counters.
    pub fn totals(&self) -> skua_engine::stats::Totals {
        let mut t = skua_engine::stats::Totals::default();
        for c in self.stats.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            c.sum_into(&mut t);
        }
        t
    }
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

    /// Parses it (without compiling), with the directory relative zone files are looked
    /// up in.
    pub fn parse(&self) -> Result<(skua_config::Config, Option<PathBuf>), load::LoadError> {
        match self {
            Self::Default => skua_config::parse_str(load::DEFAULT_CONFIG, "<embedded default>")
                .map(|c| (c, None))
                .map_err(|e| load::LoadError(e.to_string())),
            Self::File(p) => skua_config::parse_file(p)
                .map(|c| (c, p.parent().map(std::path::Path::to_path_buf)))
                .map_err(|e| load::LoadError(e.to_string())),
        }
    }

    /// For logs and the API.
    pub fn describe(&self) -> String {
        match self {
            Self::Default => "<embedded default>".into(),
            Self::File(p) => p.display().to_string(),
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

/// One kernel-socket UDP worker: runs until the daemon or its group stops.
pub(crate) fn udp_worker(
    sock: UdpSocket,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
    stop: Arc<AtomicBool>,
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
    let stats = &*stats;
    while !shared.stop.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
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
        let t0 = Instant::now();
        // One clock read per batch (rate limiting counts whole seconds).
        let now = crate::clock::now_secs();
        let engine = shared.engine.load();
        for i in 0..n {
            let Some((q, peer)) = rx.get(i) else { continue };
            let Some(out) = tx.next_buf() else { break };
            let req = Request {
                src: peer.ip(),
                transport: Transport::Udp,
                now,
            };
            let o = engine.handle_query(&req, q, out);
            stats.record(&o);
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
        stats.record_latency(t0.elapsed().as_nanos() as u64, n as u64);
    }
}

/// One TCP connection: pipelined queries (RFC 7766 §6.2.1.1), replies written by a separate
/// task so that a slow reader does not stall query processing, idle timeout per message
/// (§6.2.3: a client that stops mid-message is disconnected).
async fn tcp_conn(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
    idle: Duration,
) {
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
    let stats = &*stats;
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
            now: crate::clock::now_secs(),
        };
        let o = engine.handle_query(&req, &q[..n], &mut out[2..]);
        stats.record(&o);
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

/// Accepts TCP connections on `listener` until aborted, with the parameters in force at
/// each accept.
pub(crate) async fn tcp_accept(
    listener: TcpListener,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
    params: Arc<ArcSwap<crate::listeners::TcpParams>>,
) {
    let (mut errors, mut last_log) = (0u64, None::<Instant>);
    loop {
        let p = params.load_full();
        // Take a slot before accepting: past the limit, clients wait in the backlog instead
        // of being accepted and starved (RFC 7766 §6.2.2).
        let Ok(permit) = p.limit.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, peer)) => {
                let (shared, stats, idle) = (shared.clone(), stats.clone(), p.idle);
                tokio::spawn(async move {
                    tcp_conn(stream, peer, shared, stats, idle).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of descriptors (EMFILE), typically: one line per interval with the
                // count, not one per retry.
                errors += 1;
                if last_log.is_none_or(|t: Instant| t.elapsed() >= crate::httpd::ERROR_LOG_INTERVAL)
                {
                    log::warn(format_args!(
                        "tcp accept: {e} ({errors} accept errors since the last report)"
                    ));
                    last_log = Some(Instant::now());
                    errors = 0;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(source: Source, xdp_opts: &crate::xdp::XdpOptions) -> Result<(), String> {
    let started = Instant::now();
    let (cfg, dir) = source
        .parse()
        .map_err(|e| format!("cannot load configuration: {e}"))?;
    let state_path = control::state_path(&cfg, dir.as_deref());
    let overlay = match &state_path {
        Some(p) => Overlay::load(p).map_err(|e| format!("cannot load the API state file: {e}"))?,
        None => Overlay::default(),
    };
    let mut merged = cfg.clone();
    if let Some(p) = &state_path {
        overlay.merge_into(&mut merged.server, p);
    }
    let loaded = load::load_config(merged.clone(), dir.clone())
        .map_err(|e| format!("cannot load configuration: {e}"))?;
    let api_state = api::api_state(&cfg).map_err(|e| format!("api: {e}"))?;
    let audit = crate::audit::Audit::open(&cfg.audit, dir.as_deref())?;
    check_descriptors(&loaded.settings, &cfg.api);
    log::set_verbosity(loaded.settings.verbosity);
    log::install_bridge();
    for w in &loaded.warnings {
        log::warn(format_args!("{w}"));
    }
    log::info(format_args!(
        "loaded {} records, {} names in {:.1} ms ({} KiB of answer tables)",
        loaded.records,
        loaded.engine.name_count(),
        loaded.elapsed.as_secs_f64() * 1e3,
        loaded.engine.heap_bytes() / 1024
    ));
    let view = control::make_view(&merged, &loaded, state_path.as_deref());
    drop(merged);
    let Loaded {
        mut engine,
        settings,
        rrl,
        ..
    } = loaded;
    let rrl = control::rrl_table(None, rrl);
    engine.set_rrl(rrl.as_ref().map(|t| t.table.clone()));
    skua_netio::release_free_memory();
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
    let shared = Arc::new(Shared::new(engine));
    let listeners = {
        let _guard = rt.enter();
        Listeners::start(&settings, shared.clone())?
    };
    let api_listeners = rt
        .block_on(api::bind(&cfg))
        .map_err(|e| format!("api: {e}"))?;
    // The XDP workers send replies too large for a frame through these (kernel) sockets.
    let slow = listeners.slow_sockets();
    let ctl = Arc::new(Control::new(
        source,
        shared.clone(),
        cfg,
        dir,
        settings.clone(),
        overlay,
        state_path,
        view,
        api_state,
        started,
        xdp_opts.clone(),
    ));
    *ctl.listeners.lock().unwrap_or_else(|e| e.into_inner()) = Some(listeners);
    *ctl.audit.lock().unwrap_or_else(|e| e.into_inner()) = audit;
    *ctl.rrl.lock().unwrap_or_else(|e| e.into_inner()) = rrl;
    // XDP comes after the sockets: the kernel path is always there to fall back to, and
    // what the XDP program passes (TCP, fragments, other queues) lands on it.
    let (plane, state) = match crate::xdp::start(&settings, xdp_opts, &shared, &slow) {
        Ok(crate::xdp::Started::Running(p)) => (Some(p), DataplaneState::Xdp),
        Ok(crate::xdp::Started::NotUsed) => (None, DataplaneState::Sockets),
        Ok(crate::xdp::Started::FellBack(why)) => (None, DataplaneState::Degraded(why)),
        Err(e) => {
            shared.stop.store(true, Ordering::Relaxed);
            if let Some(mut l) = ctl
                .listeners
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            {
                l.stop();
            }
            return Err(e);
        }
    };
    let on_xdp = plane.is_some();
    ctl.record(
        skua_audit::kind::START,
        "system",
        None,
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "config": ctl.source.describe(),
            "dataplane": state,
            "generation": ctl.generation(),
        }),
    );
    *ctl.plane.lock().unwrap_or_else(|e| e.into_inner()) = plane;
    *ctl.dataplane.lock().unwrap_or_else(|e| e.into_inner()) = state;
    let result = rt.block_on(async {
        let (api_stop, api_stopped) = tokio::sync::watch::channel(false);
        for l in api_listeners {
            let mut rx = api_stopped.clone();
            let addr = l.local_addr().map_err(|e| e.to_string())?;
            let stop = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            let scheme = if ctl.api.load().tls.is_some() {
                "https"
            } else {
                "http"
            };
            log::info(format_args!("api: listening on {scheme}://{addr}"));
            tokio::spawn(api::serve(l, ctl.clone(), stop));
        }
        // Summaries of refused API requests, when their window ends.
        let c = ctl.clone();
        let mut ticker = tokio::time::interval(Duration::from_secs(5));
        let flusher = tokio::spawn(async move {
            loop {
                ticker.tick().await;
                let c = c.clone();
                let _ = tokio::task::spawn_blocking(move || c.flush_refusals(false)).await;
            }
        });
        crate::notify::notify(&format!(
            "READY=1\nSTATUS=serving on {} ({})",
            settings
                .udp
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            if on_xdp { "AF_XDP" } else { "kernel sockets" }
        ));
        let r = signals(sigs, &ctl).await;
        let _ = api_stop.send(true);
        flusher.abort();
        r
    });
    shared.stop.store(true, Ordering::Relaxed);
    if let Some(mut l) = ctl
        .listeners
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        let _guard = rt.enter();
        l.stop();
    }
    let plane = ctl.plane.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(mut p) = plane {
        for line in p.summary() {
            log::info(format_args!("{line}"));
        }
        p.shutdown();
    }
    rt.shutdown_timeout(Duration::from_millis(500));
    ctl.flush_refusals(true);
    let t = shared.totals();
    ctl.record(
        skua_audit::kind::STOP,
        "system",
        None,
        serde_json::json!({"queries": t.queries, "replies": t.replies, "result": result.as_ref().err()}),
    );
    log::info(format_args!("stopped: {}", socket_summary(&shared)));
    result
}

/// Warns when the process's descriptor limit is below what the configured caps can use at
/// once: DNS over TCP (`incoming-num-tcp` × threads), the API's connections, and a margin
/// for sockets, files and AF_XDP. The appliance's unit sets `LimitNOFILE=65536`; a shell's
/// default (1024) is fine for the defaults too.
fn check_descriptors(settings: &load::Settings, api: &skua_config::Api) {
    let Some(soft) = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
                .and_then(|v| v.parse::<u64>().ok())
        })
    else {
        return;
    };
    let need = settings.tcp_limit as u64 * settings.tcp.len().max(1) as u64
        + if api.enable {
            u64::from(api.max_connections) * api.interfaces.len().max(1) as u64
        } else {
            0
        }
        + 256;
    if soft < need {
        log::warn(format_args!(
            "the descriptor limit is {soft}, below the {need} that DNS over TCP (incoming-num-tcp), the API (max-connections) and the sockets can use at once: raise it (LimitNOFILE=, ulimit -n) or lower those caps"
        ));
    }
}

/// Kernel-socket counters, one line.
fn socket_summary(shared: &Shared) -> String {
    let t = shared.totals();
    let dropped: u64 = t.dropped.iter().sum();
    format!(
        "{} queries, {} replies ({} hot path), {} dropped (kernel sockets)",
        t.queries, t.replies, t.hot, dropped
    )
}

/// The signals the daemon handles, registered before it starts answering.
struct Signals {
    usr1: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

/// SIGHUP reloads (a bad configuration is rejected and the old one keeps serving);
/// SIGUSR1 logs the counters; SIGTERM and SIGINT stop.
async fn signals(sigs: Signals, ctl: &Arc<Control>) -> Result<(), String> {
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
                match ctl.reload("signal", None).await {
                    Ok(a) => log::info(format_args!("reloaded: {} records in {:.1} ms", a.records, a.elapsed_ms)),
                    Err(e) => log::error(format_args!("reload rejected, still serving the previous configuration: {}", e.message())),
                }
                // Old or new, a configuration is serving again.
                crate::notify::notify("READY=1");
            }
            _ = usr1.recv() => {
                log::info(format_args!("stats: {}", socket_summary(&ctl.shared)));
                if let Some(p) = ctl.plane.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                    for line in p.summary() {
                        log::info(format_args!("{line}"));
                    }
                }
            }
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
