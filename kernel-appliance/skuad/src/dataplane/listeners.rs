//! The kernel-socket listeners, and how a reload changes them without losing queries.
//!
//! UDP: one group of `SO_REUSEPORT` sockets (one per worker thread) per address. A reload
//! that changes an address's socket parameters (threads, buffers, CPUs, reply size) binds
//! the new group **next to** the old one (same address, same reuseport group), starts its
//! workers, and only then retires the old group: each old socket is `connect()`ed to its own
//! address, which takes it out of the kernel's choice for every other peer (since Linux 5.2
//! a reuseport group with connected sockets only gives a connected socket its own 4-tuple),
//! its worker drains what was already queued, and the socket is closed. A new address is
//! bound, a removed one retired. Without `so-reuseport` the old socket must close before
//! the new one binds: a short gap, logged.
//!
//! TCP: one accept loop per address; idle timeout and connection limit are read at each
//! accept, so they change for new connections at once; connections in progress finish on
//! the old values. A removed address stops accepting (open connections finish).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::base::lease::Gate;
use crate::base::log;
use crate::base::serving::{Serving, WorkerStats};
use crate::base::settings::Settings;
use crate::dataplane::doq::{self, DoqListener};
use crate::dataplane::slots::Slots;
use crate::dataplane::sockets::{self, ClientLimits, StreamKind, TcpParams};
use arc_swap::ArcSwap;

#[derive(Clone, Debug, PartialEq, Eq)]
struct UdpKey {
    threads: usize,
    reuseport: bool,
    rcvbuf: Option<usize>,
    sndbuf: Option<usize>,
    cpus: Option<Vec<usize>>,
    max_udp_size: u16,
}

impl UdpKey {
    fn of(s: &Settings) -> Self {
        Self {
            threads: s.threads,
            reuseport: s.reuseport,
            rcvbuf: s.rcvbuf,
            sndbuf: s.sndbuf,
            cpus: s.cpus.clone(),
            max_udp_size: s.max_udp_size,
        }
    }
}

struct UdpGroup {
    addr: SocketAddr,
    key: UdpKey,
    /// Clones of the workers' sockets (to connect them away when retiring; the first one
    /// also serves the XDP workers' replies that do not fit a frame).
    sockets: Vec<UdpSocket>,
    workers: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// The lease the address is answered under (`ha: address:`), if any.
    gate: Gate,
}

struct TcpEntry {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    gate: Gate,
    /// What it serves ([`StreamKind`]), read at each accept: an address that switches
    /// between plain TCP, TLS and HTTPS at a reload keeps its socket (a rebind would race
    /// the old one's close).
    kind: Arc<AtomicU8>,
}

/// Whether a listener bound with `bound` still has the right gate for `want` (the lease in
/// force for its address): none for both, or the same lease (a lease re-created by a
/// reload that dropped and re-added the address is another one).
fn same_gate(bound: &Gate, want: &Gate) -> bool {
    match (bound, want) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// The stream listeners of `s`, each address once: DNS over TLS, over HTTPS (with or
/// without TLS) where it is in their lists, plain TCP otherwise.
fn stream_addrs(s: &Settings) -> Vec<(SocketAddr, StreamKind)> {
    let https = if s.https_tls {
        StreamKind::Https
    } else {
        StreamKind::Http
    };
    let mut out: Vec<(SocketAddr, StreamKind)> = Vec::new();
    let lists = [
        (&s.tls, StreamKind::Tls),
        (&s.https, https),
        (&s.tcp, StreamKind::Tcp),
    ];
    for (list, kind) in lists {
        for &a in list {
            if !out.iter().any(|(b, _)| *b == a) {
                out.push((a, kind));
            }
        }
    }
    out
}

fn kind(k: StreamKind) -> &'static str {
    k.name()
}

/// The per-client limits of `s`.
fn client_limits(s: &Settings) -> Arc<ClientLimits> {
    Arc::new(ClientLimits::new(&s.connection_limits, s.per_source_limit))
}

/// What the per-client limits of `s` are made from.
fn client_rules(s: &Settings) -> (Vec<(skua_engine::acl::Netblock, u32)>, u32) {
    (s.connection_limits.clone(), s.per_source_limit)
}

/// What a reconciliation changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// UDP groups bound (new or rebound addresses).
    pub udp_started: Vec<SocketAddr>,
    /// UDP groups retired.
    pub udp_retired: Vec<SocketAddr>,
    /// TCP listeners added.
    pub tcp_started: Vec<SocketAddr>,
    /// TCP listeners removed.
    pub tcp_stopped: Vec<SocketAddr>,
}

impl Changes {
    /// Whether the UDP sockets changed (the XDP plane, which sends through them and serves
    /// their addresses, must restart).
    pub fn udp_changed(&self) -> bool {
        !self.udp_started.is_empty() || !self.udp_retired.is_empty()
    }
}

/// The running listeners.
pub struct Listeners {
    shared: Arc<Serving>,
    udp: Vec<UdpGroup>,
    tcp: Vec<TcpEntry>,
    doq: Vec<DoqListener>,
    tcp_params: Arc<ArcSwap<TcpParams>>,
    tcp_stats: Arc<WorkerStats>,
    next_worker: AtomicUsize,
}

/// How long a retired UDP worker keeps reading after its socket was connected away: its
/// queue is drained well within this (a worker takes a batch of 64 every few µs).
const DRAIN: Duration = Duration::from_millis(300);

impl Listeners {
    /// Binds every listener of `s` (TCP listeners need a Tokio runtime context).
    pub fn start(s: &Settings, shared: Arc<Serving>) -> Result<Self, String> {
        shared.leases.configure(&s.leased, s.lease_max);
        let tcp_stats = Arc::new(WorkerStats::default());
        shared.register(tcp_stats.clone());
        let slots = Slots::new(s.tcp_limit, shared.streams.clone());
        let mut l = Listeners {
            shared,
            udp: Vec::new(),
            tcp: Vec::new(),
            doq: Vec::new(),
            tcp_params: Arc::new(ArcSwap::from_pointee(TcpParams {
                idle: s.tcp_idle,
                slots,
                per_client: client_limits(s),
                per_client_rules: client_rules(s),
            })),
            tcp_stats,
            next_worker: AtomicUsize::new(0),
        };
        for &a in &s.udp {
            let g = l
                .bind_udp(a, s)
                .map_err(|e| format!("cannot listen: udp {a}: {e}"))?;
            l.udp.push(g);
        }
        for (a, k) in stream_addrs(s) {
            let t = l
                .bind_tcp(a, s.freebind, k)
                .map_err(|e| format!("cannot listen: {} {a}: {e}", kind(k)))?;
            l.tcp.push(t);
        }
        for a in &s.udp {
            log::info(format_args!(
                "listening on {a} udp ({} worker threads)",
                s.threads
            ));
        }
        for &a in &s.doq {
            let d = l
                .bind_doq(a, s.freebind)
                .map_err(|e| format!("cannot listen: quic {a}: {e}"))?;
            l.doq.push(d);
        }
        for (a, k) in stream_addrs(s) {
            log::info(format_args!("listening on {a} {}", kind(k)));
        }
        for a in &s.doq {
            log::info(format_args!("listening on {a} quic (DNS over QUIC)"));
        }
        Ok(l)
    }

    fn bind_doq(&self, addr: SocketAddr, freebind: bool) -> io::Result<DoqListener> {
        let gate = self.shared.leases.get(addr.ip());
        let sock = doq::bind(addr, gate.is_some() || freebind)?;
        DoqListener::start(
            sock,
            self.shared.clone(),
            self.tcp_stats.clone(),
            self.tcp_params.clone(),
            gate,
        )
    }

    fn bind_udp(&self, addr: SocketAddr, s: &Settings) -> io::Result<UdpGroup> {
        let key = UdpKey::of(s);
        let stop = Arc::new(AtomicBool::new(false));
        let mut sockets = Vec::new();
        let mut workers = Vec::new();
        let threads = if s.reuseport { s.threads } else { 1 };
        let gate = self.shared.leases.get(addr.ip());
        let mut bound = Vec::new();
        for _ in 0..threads {
            let fd = skua_netio::bind_socket(
                addr,
                skua_netio::Kind::Udp,
                s.reuseport,
                s.rcvbuf,
                s.sndbuf,
                0,
                gate.is_some() || s.freebind,
            )?;
            bound.push(UdpSocket::from(fd));
        }
        for (t, sock) in bound.into_iter().enumerate() {
            sockets.push(sock.try_clone()?);
            let cpu = s.cpus.as_ref().map(|c| c[t % c.len()]);
            let stats = Arc::new(WorkerStats::default());
            self.shared.register(stats.clone());
            let idx = self.next_worker.fetch_add(1, Ordering::Relaxed);
            let (sh, st) = (self.shared.clone(), stop.clone());
            let tx_size = usize::from(s.max_udp_size);
            let g = gate.clone();
            let h = std::thread::Builder::new()
                .name(format!("udp-{idx}"))
                .spawn(move || {
                    sockets::udp_worker(sock, sh, stats, st, idx, cpu, tx_size, g);
                })?;
            workers.push(h);
        }
        Ok(UdpGroup {
            addr,
            key,
            sockets,
            workers,
            stop,
            gate,
        })
    }

    fn bind_tcp(&self, addr: SocketAddr, freebind: bool, k: StreamKind) -> io::Result<TcpEntry> {
        let kind = Arc::new(AtomicU8::new(k.as_u8()));
        let gate = self.shared.leases.get(addr.ip());
        let fd = skua_netio::bind_socket(
            addr,
            skua_netio::Kind::Tcp,
            false,
            None,
            None,
            256,
            gate.is_some() || freebind,
        )?;
        let l = std::net::TcpListener::from(fd);
        l.set_nonblocking(true)?;
        let l = tokio::net::TcpListener::from_std(l)?;
        let task = tokio::spawn(sockets::tcp_accept(
            l,
            self.shared.clone(),
            self.tcp_stats.clone(),
            self.tcp_params.clone(),
            gate.clone(),
            kind.clone(),
        ));
        Ok(TcpEntry {
            addr,
            task,
            gate,
            kind,
        })
    }

    /// Kernel sockets for the XDP workers' replies that do not fit a frame: the first
    /// socket of each UDP address.
    pub fn slow_sockets(&self) -> Vec<UdpSocket> {
        self.udp
            .iter()
            .filter_map(|g| g.sockets.first().and_then(|s| s.try_clone().ok()))
            .collect()
    }

    /// Takes a group out of service: connected away, drained, stopped, joined.
    fn retire(g: UdpGroup, drain: bool) {
        if drain {
            for s in &g.sockets {
                // Connecting to its own address: it then only receives its own datagrams,
                // i.e. none; what was queued before stays readable.
                if let Err(e) = s.connect(g.addr) {
                    log::warn(format_args!(
                        "udp {}: retiring socket: connect: {e}",
                        g.addr
                    ));
                }
            }
            std::thread::sleep(DRAIN);
        }
        g.stop.store(true, Ordering::Relaxed);
        for w in g.workers {
            let _ = w.join();
        }
    }

    /// Makes the listeners match `s`. Must run in the Tokio runtime (TCP accept tasks).
    /// On a bind error the listeners already changed stay changed and the error names the
    /// address; the old group of that address keeps serving.
    pub fn apply(&mut self, s: &Settings) -> Result<Changes, String> {
        self.shared.leases.configure(&s.leased, s.lease_max);
        let mut ch = Changes::default();
        let key = UdpKey::of(s);
        // UDP: rebind changed groups next to the old ones, bind new addresses.
        let mut keep = Vec::new();
        let old = std::mem::take(&mut self.udp);
        let mut retiring = Vec::new();
        for g in old {
            let gate = self.shared.leases.get(g.addr.ip());
            if s.udp.contains(&g.addr) && g.key == key && same_gate(&g.gate, &gate) {
                keep.push(g);
            } else {
                retiring.push(g);
            }
        }
        self.udp = keep;
        let mut err = None;
        for &a in &s.udp {
            if self.udp.iter().any(|g| g.addr == a) {
                continue;
            }
            let old_pos = retiring.iter().position(|g| g.addr == a);
            // Without SO_REUSEPORT on both, the old socket must go first.
            let shares = old_pos.is_some_and(|i| retiring[i].key.reuseport) && s.reuseport;
            if let (Some(i), false) = (old_pos, shares) {
                log::warn(format_args!(
                    "udp {a}: so-reuseport is off, the old socket closes before the new one binds: queries arriving meanwhile are refused"
                ));
                Self::retire(retiring.remove(i), false);
                ch.udp_retired.push(a);
            }
            match self.bind_udp(a, s) {
                Ok(g) => {
                    log::info(format_args!(
                        "listening on {a} udp ({} worker threads)",
                        s.threads
                    ));
                    self.udp.push(g);
                    ch.udp_started.push(a);
                }
                Err(e) => {
                    err = Some(format!("udp {a}: {e}"));
                    // Keep the old group of this address, if any.
                    if let Some(i) = retiring.iter().position(|g| g.addr == a) {
                        self.udp.push(retiring.remove(i));
                    }
                }
            }
        }
        for g in retiring {
            let a = g.addr;
            Self::retire(g, true);
            if !s.udp.contains(&a) {
                log::info(format_args!("stopped listening on {a} udp"));
            }
            ch.udp_retired.push(a);
        }
        // TCP.
        let cur = self.tcp_params.load();
        if cur.idle != s.tcp_idle
            || cur.slots.limit() != s.tcp_limit.max(1)
            || cur.per_client_rules != client_rules(s)
        {
            // A new limit starts counting afresh (connections open now count against the
            // limits they were admitted under until they close).
            let same_limit = cur.slots.limit() == s.tcp_limit.max(1);
            self.tcp_params.store(Arc::new(TcpParams {
                idle: s.tcp_idle,
                slots: if same_limit {
                    cur.slots.clone()
                } else {
                    Slots::new(s.tcp_limit, self.shared.streams.clone())
                },
                per_client: if cur.per_client_rules == client_rules(s) {
                    cur.per_client.clone()
                } else {
                    client_limits(s)
                },
                per_client_rules: client_rules(s),
            }));
        }
        let want = stream_addrs(s);
        let mut kept = Vec::new();
        for t in std::mem::take(&mut self.tcp) {
            let gate = self.shared.leases.get(t.addr.ip());
            match want.iter().find(|(a, _)| *a == t.addr) {
                Some(&(_, k)) if same_gate(&t.gate, &gate) => {
                    if t.kind.swap(k.as_u8(), Ordering::Relaxed) != k.as_u8() {
                        log::info(format_args!("{} now serves {}", t.addr, kind(k)));
                    }
                    kept.push(t);
                }
                _ => {
                    t.task.abort();
                    let k = kind(StreamKind::from_u8(t.kind.load(Ordering::Relaxed)));
                    log::info(format_args!("stopped listening on {} {k}", t.addr));
                    ch.tcp_stopped.push(t.addr);
                }
            }
        }
        self.tcp = kept;
        for (a, k) in want {
            if self.tcp.iter().any(|t| t.addr == a) {
                continue;
            }
            match self.bind_tcp(a, s.freebind, k) {
                Ok(t) => {
                    log::info(format_args!("listening on {a} {}", kind(k)));
                    self.tcp.push(t);
                    ch.tcp_started.push(a);
                }
                Err(e) => err = Some(format!("{} {a}: {e}", kind(k))),
            }
        }
        // DNS over QUIC: kept while the address and its lease stay (a new certificate
        // needs no rebind: each connection takes the one in force).
        let mut kept = Vec::new();
        for d in std::mem::take(&mut self.doq) {
            let gate = self.shared.leases.get(d.addr.ip());
            if s.doq.contains(&d.addr) && same_gate(&d.gate, &gate) {
                kept.push(d);
            } else {
                log::info(format_args!("stopped listening on {} quic", d.addr));
                d.stop();
            }
        }
        self.doq = kept;
        for &a in &s.doq {
            if self.doq.iter().any(|d| d.addr == a) {
                continue;
            }
            match self.bind_doq(a, s.freebind) {
                Ok(d) => {
                    log::info(format_args!("listening on {a} quic (DNS over QUIC)"));
                    self.doq.push(d);
                }
                Err(e) => err = Some(format!("quic {a}: {e}")),
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(ch),
        }
    }

    /// Stops every worker and accept loop.
    pub fn stop(&mut self) {
        for g in std::mem::take(&mut self.udp) {
            Self::retire(g, false);
        }
        for t in std::mem::take(&mut self.tcp) {
            t.task.abort();
        }
        for d in std::mem::take(&mut self.doq) {
            d.stop();
        }
    }
}
