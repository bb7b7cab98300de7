//! The resolver's I/O: one task that owns the forwarding state machine
//! ([`skua_resolver::forward::Forwarder`]) and carries what it asks for.
//!
//! - **Jobs** come from the dataplanes (a query that missed the cache, with its way back to
//!   the client, or a refresh). Answers go back through the engine
//!   ([`skua_engine::Engine::answer_cached`]: the client's ID, case, EDNS, size limit and
//!   rate limiting) on the socket or TCP connection the query came in on.
//! - **UDP upstream queries** leave from a fresh socket bound to a random port (RFC 5452
//!   §9.2; `outgoing-port-permit`/`-avoid` narrow the choice) and connected to the
//!   upstream, so the kernel drops datagrams from any other address or port; the state
//!   machine checks ID and question on top.
//! - **TCP and TLS upstream queries** (TC=1 retries, `tcp-upstream`, DoT with
//!   `forward-tls-upstream`, RFC 7858) share one connection per upstream, pipelined
//!   (RFC 7766 §6.2.1.1: replies matched by ID), reopened on demand, closed when idle or
//!   when the upstream stops reading (a write that does not finish in
//!   `TCP_WRITE_TIMEOUT`). TLS is rustls; the certificate must be valid for the `#name`
//!   of the address (or the address itself) under the configured roots.
//!
//! - **Hosts** (`forward-host:`/`stub-host:`) are resolved by the forwarder itself; when
//!   their addresses change, the task publishes the zones' upstreams with them
//!   ([`ResolverHandle::forward`], which the upstream list and metrics read) and logs what
//!   changed.
//!
//! Time is the daemon's monotonic clock in milliseconds; the cache counts its seconds
//! ([`crate::base::clock`]), the clock the engine's requests carry.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket as StdUdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use skua_engine::{Cached, Engine};
use skua_resolver::forward::{
    Answer, Entropy, Event, Forwarder, HostPlan, HostStatus, Start, Transmit, Transport, ZoneKind,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_rustls::rustls;

use crate::base::clock;
use crate::base::log;
use crate::base::query::show_name;
use crate::base::resolving::{
    Job, ResolverHandle, ResolverSettings, ResolverSnapshot, Route, RwShard, SharedCache,
};
use crate::base::serving::Serving;

/// Jobs queued before the dataplanes answer SERVFAIL themselves.
const JOB_QUEUE: usize = 16 * 1024;
/// A shared upstream connection closes after this long without a query in flight.
const TCP_IDLE: Duration = Duration::from_secs(10);
/// A query that cannot be written on an upstream connection within this long (the
/// upstream stopped reading: its receive window and our send buffer are full) closes the
/// connection; its queries fail over and the next query opens a new one. Without it the
/// writer would wait for ever, the idle close with it, and every later query to that
/// upstream would fail at once on a connection nobody reopens. Unbound closes a stream
/// whose write does not finish within the query's timeout the same way.
const TCP_WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// Queries in flight on one upstream connection (RFC 7766 §6.2.1.1 leaves it to us).
const TCP_PIPELINE: usize = 128;
/// How often the forwarder's counters are copied for metrics and the control core.
const SNAPSHOT_EVERY: Duration = Duration::from_secs(1);

/// Builds the TLS client configuration for DoT upstreams: the roots of `bundle` (PEM, as
/// `tls-cert-bundle:`), or the system's when `system` or no bundle is given.
pub fn tls_client(bundle: Option<&str>, system: bool) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(path) = bundle {
        let pem = std::fs::read(path).map_err(|e| format!("tls-cert-bundle {path}: {e}"))?;
        let (added, _) = roots.add_parsable_certificates(
            rustls_pki_types::CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok),
        );
        if added == 0 {
            return Err(format!("tls-cert-bundle {path}: no certificate in it"));
        }
    }
    if system || bundle.is_none() {
        for path in [
            "/etc/ssl/certs/ca-certificates.crt",
            "/etc/pki/tls/certs/ca-bundle.crt",
        ] {
            if let Ok(pem) = std::fs::read(path) {
                roots.add_parsable_certificates(
                    rustls_pki_types::CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok),
                );
                break;
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

/// Randomness for IDs, 0x20 and ports: the OS generator (getrandom(2)) behind a buffer.
struct OsEntropy {
    buf: [u8; 256],
    at: usize,
}

impl OsEntropy {
    fn new() -> Self {
        OsEntropy {
            buf: [0; 256],
            at: 256,
        }
    }
}

impl Entropy for OsEntropy {
    fn u32(&mut self) -> u32 {
        if self.at + 4 > self.buf.len() {
            if getrandom::fill(&mut self.buf).is_err() {
                // getrandom(2) does not fail on Linux ≥ 3.17 once the pool is initialised;
                // should it, time is better than a constant.
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                self.buf[..16].copy_from_slice(&t.to_le_bytes());
            }
            self.at = 0;
        }
        let v = u32::from_le_bytes([
            self.buf[self.at],
            self.buf[self.at + 1],
            self.buf[self.at + 2],
            self.buf[self.at + 3],
        ]);
        self.at += 4;
        v
    }
}

/// A client waiting on the forwarder.
#[derive(Clone, Debug)]
struct Client {
    query: Arc<[u8]>,
    route: Route,
}

type Fwd = Forwarder<
    Client,
    RwShard<skua_resolver::cache::MsgShard>,
    RwShard<skua_resolver::cache::SetShard>,
>;

/// What the transport tasks report.
enum Io {
    Reply {
        token: u64,
        from: SocketAddr,
        bytes: Vec<u8>,
    },
    Failed {
        token: u64,
    },
}

/// An upstream and, for TLS, the name its certificate must carry.
type ConnKey = (SocketAddr, Option<Arc<str>>);

/// A shared TCP/TLS connection to an upstream.
struct Conn {
    tx: mpsc::Sender<(u64, Vec<u8>)>,
    /// ID -> token of the queries in flight on it.
    ids: Arc<Mutex<HashMap<u16, u64>>>,
}

/// Control messages to the resolver task.
enum Control {
    /// New settings (a reload).
    Reconfigure(Box<Upstream>),
}

/// The settings the task works with: forwarding, ports, TLS roots built.
#[derive(Clone, Debug)]
struct Upstream {
    forward: skua_resolver::forward::ForwardConfig,
    ports: Vec<(u16, u16)>,
    tls: Arc<rustls::ClientConfig>,
}

impl Upstream {
    fn from(s: &ResolverSettings) -> Result<Self, String> {
        Ok(Upstream {
            forward: s.forward.clone(),
            ports: s.ports.clone(),
            tls: tls_client(s.tls_cert_bundle.as_deref(), s.tls_system_cert)?,
        })
    }
}

/// The running resolver: the handle the dataplanes use and the control core's channel.
pub struct Resolver {
    /// For the dataplanes ([`Serving::resolver`]).
    pub handle: Arc<ResolverHandle>,
    settings: ResolverSettings,
    control: mpsc::UnboundedSender<Control>,
    task: tokio::task::JoinHandle<()>,
}

impl Resolver {
    /// Starts the resolver task on `rt` with an empty cache.
    pub fn start(
        rt: &tokio::runtime::Handle,
        serving: Arc<Serving>,
        settings: &ResolverSettings,
    ) -> Result<Self, String> {
        let up = Upstream::from(settings)?;
        let cache = Arc::new(SharedCache::new(settings.cache.clone()));
        let (jobs_tx, jobs_rx) = mpsc::channel(JOB_QUEUE);
        let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
        let handle = Arc::new(ResolverHandle::new(
            cache.clone(),
            jobs_tx,
            up.forward.clone(),
        ));
        let fwd = Forwarder::new(up.forward.clone(), cache);
        let task = rt.spawn(run(
            serving,
            Arc::downgrade(&handle),
            fwd,
            up,
            jobs_rx,
            ctl_rx,
        ));
        Ok(Resolver {
            handle,
            settings: settings.clone(),
            control: ctl_tx,
            task,
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &ResolverSettings {
        &self.settings
    }

    /// Applies new settings with the same cache configuration (the cache is kept; entries
    /// resolved through zones that changed are dropped); questions in flight finish.
    pub fn reconfigure(&mut self, settings: &ResolverSettings) -> Result<(), String> {
        let up = Upstream::from(settings)?;
        self.handle.forward.store(Arc::new(up.forward.clone()));
        let _ = self.control.send(Control::Reconfigure(Box::new(up)));
        self.settings = settings.clone();
        Ok(())
    }

    /// Stops the task (questions in flight are dropped).
    pub fn stop(&self) {
        self.task.abort();
    }
}

struct Task {
    serving: Arc<Serving>,
    fwd: Fwd,
    settings: Upstream,
    rng: OsEntropy,
    io_tx: mpsc::UnboundedSender<Io>,
    udp: HashMap<u64, AbortHandle>,
    conns: HashMap<ConnKey, Conn>,
    /// token -> connection and ID, for cancelling on a shared connection.
    on_conn: HashMap<u64, (ConnKey, u16)>,
    buf: Vec<u8>,
}

fn now_ms() -> u64 {
    clock::now_millis()
}

async fn run(
    serving: Arc<Serving>,
    // Weak: the handle holds the job queue's sender, whose end stops this task.
    handle: std::sync::Weak<ResolverHandle>,
    fwd: Fwd,
    settings: Upstream,
    mut jobs: mpsc::Receiver<Job>,
    mut ctl: mpsc::UnboundedReceiver<Control>,
) {
    let (io_tx, mut io_rx) = mpsc::unbounded_channel();
    let mut t = Task {
        serving,
        fwd,
        settings,
        rng: OsEntropy::new(),
        io_tx,
        udp: HashMap::new(),
        conns: HashMap::new(),
        on_conn: HashMap::new(),
        // Two octets of a stream's length, then the largest DNS message.
        buf: vec![0u8; 2 + 65535],
    };
    // The counters the control core and metrics read: copied about once a second (a few
    // integers per upstream), never read from the forwarder by another task.
    let mut snapshot = tokio::time::interval(SNAPSHOT_EVERY);
    snapshot.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The forwarder's generation last published, and its hosts then.
    let mut published = 0u64;
    let mut hosts: Vec<HostStatus> = Vec::new();
    loop {
        if t.fwd.generation() != published {
            published = t.fwd.generation();
            if let Some(h) = handle.upgrade() {
                h.forward.store(Arc::new(t.fwd.config().clone()));
            }
            hosts = log_hosts(&t.fwd, &hosts, now_ms());
        }
        let timer = t.fwd.next_timer();
        let sleep = async {
            match timer {
                Some(at) => {
                    let now = now_ms();
                    tokio::time::sleep(Duration::from_millis(at.saturating_sub(now))).await
                }
                None => std::future::pending().await,
            }
        };
        // Upstream replies first, timers last: a reply that is already here must be
        // matched before its query's timeout is run (a task that fell behind would
        // otherwise time out queries whose answers wait in its queue, and back off an
        // upstream that answered).
        tokio::select! {
            biased;
            Some(io) = io_rx.recv() => {
                t.io(io);
                // Everything that arrived meanwhile, before any timer.
                while let Ok(io) = io_rx.try_recv() {
                    t.io(io);
                }
            }
            job = jobs.recv() => match job {
                Some(job) => t.job(job),
                None => break,
            },
            Some(c) = ctl.recv() => match c {
                Control::Reconfigure(s) => {
                    t.fwd.reconfigure(s.forward.clone());
                    t.settings = *s;
                }
            },
            () = sleep => {
                while let Ok(io) = io_rx.try_recv() {
                    t.io(io);
                }
                let now = now_ms();
                t.fwd.tick(now, &mut t.rng);
            }
            _ = snapshot.tick() => {
                if let Some(h) = handle.upgrade() {
                    h.snapshot.store(Arc::new(ResolverSnapshot {
                        forward: t.fwd.stats.clone(),
                        in_flight: t.fwd.in_flight(),
                        upstreams: t.fwd.infra().hosts().to_vec(),
                        hosts: t.fwd.hosts(),
                    }));
                }
                continue;
            }
        }
        t.events();
    }
}

impl Task {
    fn job(&mut self, job: Job) {
        // The question was read once, by the front door.
        let client = job.route.map(|route| Client {
            query: job.query.into(),
            route,
        });
        match self
            .fwd
            .resolve(job.question, client, now_ms(), &mut self.rng)
        {
            Start::Pending => {}
            Start::NoZone(c) => self.error(&c, 5),
            Start::Busy(c) => self.error(&c, 2),
        }
    }

    /// Answers a client with a bare error (REFUSED: no zone resolves the name; SERVFAIL:
    /// over a limit), through the door like any answer.
    fn error(&mut self, c: &Client, rcode: u16) {
        let engine = self.serving.engine();
        send(&engine, c, &skua_serve::bare_error(rcode), &mut self.buf);
    }

    fn io(&mut self, io: Io) {
        let now = now_ms();
        match io {
            Io::Reply { token, from, bytes } => {
                self.fwd.reply(token, from, &bytes, now, &mut self.rng)
            }
            Io::Failed { token } => self.fwd.failed(token, now, &mut self.rng),
        }
    }

    fn events(&mut self) {
        while let Some(ev) = self.fwd.poll_event() {
            match ev {
                Event::Transmit(t) => self.transmit(t),
                Event::Answer(a) => self.answer(a),
                Event::Cancel(token) => self.cancel(token),
            }
        }
    }

    fn answer(&mut self, a: Answer<Client>) {
        let engine = self.serving.engine();
        let cached = a.rendered.as_cached(a.fixed_ttl);
        for c in &a.clients {
            send(&engine, c, &cached, &mut self.buf);
        }
    }

    fn cancel(&mut self, token: u64) {
        if let Some(h) = self.udp.remove(&token) {
            h.abort();
        }
        if let Some((key, id)) = self.on_conn.remove(&token)
            && let Some(c) = self.conns.get(&key)
        {
            c.ids.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        }
    }

    fn transmit(&mut self, t: Transmit) {
        match t.transport.clone() {
            Transport::Udp => {
                let port = pick_port(&self.settings.ports, &mut self.rng);
                let io = self.io_tx.clone();
                let token = t.token;
                let h = tokio::spawn(udp_query(t, port, io));
                self.udp.insert(token, h.abort_handle());
            }
            Transport::Tcp => self.stream(t, None),
            Transport::Tls(name) => self.stream(t, Some(name)),
        }
    }

    /// Sends `t` on the shared connection to its upstream, opening one when needed.
    fn stream(&mut self, t: Transmit, tls: Option<Arc<str>>) {
        let key = (t.to, tls.clone());
        let id = u16::from_be_bytes([t.bytes[0], t.bytes[1]]);
        let usable = self.conns.get(&key).is_some_and(|c| {
            !c.tx.is_closed() && {
                let ids = c.ids.lock().unwrap_or_else(|e| e.into_inner());
                ids.len() < TCP_PIPELINE && !ids.contains_key(&id)
            }
        });
        if !usable {
            // A busy connection with this ID in flight: a second connection would do, but
            // a fresh ID is simpler; the forwarder retries with one.
            if self.conns.get(&key).is_some_and(|c| !c.tx.is_closed()) {
                let _ = self.io_tx.send(Io::Failed { token: t.token });
                return;
            }
            let conn = open_conn(t.to, tls, self.settings.tls.clone(), self.io_tx.clone());
            self.conns.insert(key.clone(), conn);
        }
        let Some(c) = self.conns.get(&key) else {
            return;
        };
        c.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, t.token);
        self.on_conn.insert(t.token, (key, id));
        if c.tx.try_send((t.token, t.bytes)).is_err() {
            let _ = self.io_tx.send(Io::Failed { token: t.token });
        }
    }
}

/// Logs what changed about the forwarder's hosts since `before` (addresses found, lost or
/// left out, a failing resolution, a recovery) and returns their state now.
fn log_hosts(fwd: &Fwd, before: &[HostStatus], now: u64) -> Vec<HostStatus> {
    let hosts = fwd.hosts();
    for h in &hosts {
        let zone = fwd.config().zones.iter().find(|z| z.name == h.zone);
        let (clause, what) = match zone.map(|z| z.kind) {
            Some(ZoneKind::Stub) => ("stub-zone", "stub-host"),
            _ => ("forward-zone", "forward-host"),
        };
        let who = format!(
            "{what} {} (port {}, {clause} {})",
            show_name(&h.name),
            h.port,
            show_name(&h.zone)
        );
        let zone_empty = zone.is_none_or(|z| z.upstreams.is_empty());
        let prev = before
            .iter()
            .find(|p| p.zone == h.zone && p.name == h.name && p.port == h.port);
        let list = |a: &[SocketAddr]| {
            a.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let next = h.next_ms.map_or_else(String::new, |t| {
            format!(
                "; resolved again in {} s",
                t.saturating_sub(now).div_ceil(1000)
            )
        });
        match h.plan {
            HostPlan::Via(_) => {}
            // Warned about at load, with the line.
            _ => continue,
        }
        let (old_addrs, old_refused, old_failures) = prev.map_or((&[][..], &[][..], 0), |p| {
            (&p.addrs[..], &p.refused[..], p.failures)
        });
        if h.answered && (prev.is_none_or(|p| !p.answered) || old_addrs != h.addrs) {
            if h.addrs.is_empty() {
                log::warn(format_args!(
                    "{who}: the name has no address{}",
                    if zone_empty {
                        ": the zone has no other upstream, its names get SERVFAIL"
                    } else {
                        ""
                    }
                ));
            } else {
                log::info(format_args!("{who}: upstreams {}{next}", list(&h.addrs)));
            }
        } else if old_failures > 0 && h.failures == 0 {
            log::info(format_args!(
                "{who}: resolved again, upstreams {}{next}",
                list(&h.addrs)
            ));
        }
        if !h.refused.is_empty() && old_refused != h.refused {
            // One line per reason: `127.0.0.1 not used: a loopback address
            // (do-not-query-localhost is yes)`.
            let mut reasons: Vec<_> = h.refused.iter().map(|&(_, why)| why).collect();
            reasons.sort_unstable();
            reasons.dedup();
            for why in reasons {
                let ips: Vec<String> = h
                    .refused
                    .iter()
                    .filter(|&&(_, w)| w == why)
                    .map(|(ip, _)| ip.to_string())
                    .collect();
                log::warn(format_args!("{who}: {} not used: {why}", ips.join(", ")));
            }
        }
        if h.failures == 1 && old_failures == 0 {
            if h.addrs.is_empty() {
                log::warn(format_args!(
                    "{who}: its name could not be resolved{}{next}",
                    if zone_empty {
                        " (the zone has no upstream yet: its names get SERVFAIL)"
                    } else {
                        ""
                    }
                ));
            } else {
                log::warn(format_args!(
                    "{who}: its name could not be resolved again; keeping {}{next}",
                    list(&h.addrs)
                ));
            }
        }
    }
    hosts
}

/// Builds the reply for one waiting client through the front door (the client's ID, case,
/// EDNS, size limit, padding, framing) and sends it on the client's route.
fn send(engine: &Engine, c: &Client, cached: &Cached<'_>, buf: &mut [u8]) {
    let ask = skua_serve::Ask {
        kind: c.route.kind(),
        peer: c.route.peer(),
        now: clock::now_secs(),
        unix: 0,
        pad: c.route.pad(),
        query: &c.query,
    };
    let Some(len) = skua_serve::Door::engine(engine).answer_waiting(&ask, cached, buf) else {
        return;
    };
    match &c.route {
        Route::Udp { sock, peer, gate } => {
            if crate::base::lease::open(gate) {
                let _ = sock.send_to(&buf[..len], peer);
            }
        }
        Route::Tcp { tx, .. } => {
            let _ = tx.try_send(buf[..len].to_vec());
        }
    }
}

/// A random source port from `ranges` (1024-65535 when empty).
fn pick_port(ranges: &[(u16, u16)], rng: &mut OsEntropy) -> u16 {
    let total: u32 = if ranges.is_empty() {
        65535 - 1024 + 1
    } else {
        ranges.iter().map(|&(a, b)| u32::from(b - a) + 1).sum()
    };
    let mut k = rng.u32() % total.max(1);
    if ranges.is_empty() {
        return 1024 + k as u16;
    }
    for &(a, b) in ranges {
        let n = u32::from(b - a) + 1;
        if k < n {
            return a + k as u16;
        }
        k -= n;
    }
    0
}

/// One UDP query: a socket on a random port, connected to the upstream; every datagram
/// that arrives is handed over until the forwarder cancels the query.
async fn udp_query(t: Transmit, port: u16, io: mpsc::UnboundedSender<Io>) {
    let token = t.token;
    let sock = match bind_udp(t.to, port) {
        Ok(s) => s,
        Err(e) => {
            log::warn(format_args!("upstream {}: UDP socket: {e}", t.to));
            let _ = io.send(Io::Failed { token });
            return;
        }
    };
    if sock.connect(t.to).await.is_err() || sock.send(&t.bytes).await.is_err() {
        let _ = io.send(Io::Failed { token });
        return;
    }
    let mut buf = vec![0u8; 65535];
    loop {
        match sock.recv(&mut buf).await {
            Ok(n) => {
                let _ = io.send(Io::Reply {
                    token,
                    from: t.to,
                    bytes: buf[..n].to_vec(),
                });
            }
            // ICMP port unreachable and the like, reported on a connected socket.
            Err(_) => {
                let _ = io.send(Io::Failed { token });
                return;
            }
        }
    }
}

/// A UDP socket of `to`'s family bound to `port` (another random one when taken; the
/// kernel's choice after a few tries).
fn bind_udp(to: SocketAddr, port: u16) -> std::io::Result<UdpSocket> {
    let any: IpAddr = match to {
        SocketAddr::V4(_) => IpAddr::from([0u8; 4]),
        SocketAddr::V6(_) => IpAddr::from([0u16; 8]),
    };
    let mut p = port;
    for _ in 0..8 {
        if let Ok(s) = StdUdpSocket::bind(SocketAddr::new(any, p)) {
            s.set_nonblocking(true)?;
            return UdpSocket::from_std(s);
        }
        p = 1024 + (p.wrapping_mul(31).wrapping_add(7) % (65535 - 1024));
    }
    let s = StdUdpSocket::bind(SocketAddr::new(any, 0))?;
    s.set_nonblocking(true)?;
    UdpSocket::from_std(s)
}

/// Opens a shared TCP (or TLS) connection to `to`: a writer loop taking queries from the
/// returned channel, a reader handing replies over by ID.
fn open_conn(
    to: SocketAddr,
    tls: Option<Arc<str>>,
    tls_cfg: Arc<rustls::ClientConfig>,
    io: mpsc::UnboundedSender<Io>,
) -> Conn {
    let (tx, rx) = mpsc::channel::<(u64, Vec<u8>)>(TCP_PIPELINE);
    let ids: Arc<Mutex<HashMap<u16, u64>>> = Arc::new(Mutex::new(HashMap::new()));
    let ids2 = ids.clone();
    tokio::spawn(async move {
        let failed_all = |ids: &Mutex<HashMap<u16, u64>>, io: &mpsc::UnboundedSender<Io>| {
            for (_, token) in ids.lock().unwrap_or_else(|e| e.into_inner()).drain() {
                let _ = io.send(Io::Failed { token });
            }
        };
        let connect = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(to)).await;
        let Ok(Ok(stream)) = connect else {
            failed_all(&ids2, &io);
            return;
        };
        let _ = stream.set_nodelay(true);
        match tls {
            None => conn_loop(stream, to, rx, &ids2, &io).await,
            Some(name) => {
                let server = match server_name(&name, to) {
                    Some(s) => s,
                    None => {
                        log::warn(format_args!("upstream {to}: bad TLS name {name:?}"));
                        failed_all(&ids2, &io);
                        return;
                    }
                };
                let connector = tokio_rustls::TlsConnector::from(tls_cfg);
                match tokio::time::timeout(
                    Duration::from_secs(5),
                    connector.connect(server, stream),
                )
                .await
                {
                    Ok(Ok(s)) => conn_loop(s, to, rx, &ids2, &io).await,
                    Ok(Err(e)) => {
                        log::warn(format_args!("upstream {to}: TLS: {e}"));
                    }
                    Err(_) => log::warn(format_args!("upstream {to}: TLS handshake timed out")),
                }
            }
        }
        failed_all(&ids2, &io);
    });
    Conn { tx, ids }
}

/// The name the upstream's certificate must carry: `#name`, or its address.
fn server_name(name: &str, to: SocketAddr) -> Option<rustls_pki_types::ServerName<'static>> {
    if name.is_empty() {
        return Some(rustls_pki_types::ServerName::IpAddress(to.ip().into()));
    }
    rustls_pki_types::ServerName::try_from(name.trim_end_matches('.').to_string()).ok()
}

/// Runs one connection: writes queries as they come (length-prefixed, RFC 1035 §4.2.2),
/// reads replies and hands them over by ID; ends on EOF, error, idleness, or a write that
/// does not finish within [`TCP_WRITE_TIMEOUT`].
async fn conn_loop<S>(
    stream: S,
    to: SocketAddr,
    mut rx: mpsc::Receiver<(u64, Vec<u8>)>,
    ids: &Mutex<HashMap<u16, u64>>,
    io: &mpsc::UnboundedSender<Io>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let reader = async {
        let mut len = [0u8; 2];
        loop {
            if rd.read_exact(&mut len).await.is_err() {
                return;
            }
            let n = usize::from(u16::from_be_bytes(len));
            let mut msg = vec![0u8; n];
            if rd.read_exact(&mut msg).await.is_err() {
                return;
            }
            if n < 2 {
                continue;
            }
            let id = u16::from_be_bytes([msg[0], msg[1]]);
            let token = ids.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            if let Some(token) = token {
                let _ = io.send(Io::Reply {
                    token,
                    from: to,
                    bytes: msg,
                });
            }
        }
    };
    let writer = async {
        loop {
            let next = tokio::time::timeout(TCP_IDLE, rx.recv()).await;
            match next {
                Ok(Some((_, q))) => {
                    let mut framed = Vec::with_capacity(q.len() + 2);
                    framed.extend_from_slice(&(q.len() as u16).to_be_bytes());
                    framed.extend_from_slice(&q);
                    match tokio::time::timeout(TCP_WRITE_TIMEOUT, wr.write_all(&framed)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => return,
                        Err(_) => {
                            log::warn(format_args!(
                                "upstream {to}: a query could not be written in {} s (it \
                                 does not read): connection closed, the next query opens \
                                 another",
                                TCP_WRITE_TIMEOUT.as_secs()
                            ));
                            return;
                        }
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    // Idle: close once nothing is in flight.
                    if ids.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
                        let _ = wr.shutdown().await;
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = reader => {}
        () = writer => {}
    }
}
