//! The kernel-socket dataplane's workers: UDP (one `SO_REUSEPORT` socket per thread,
//! batched `recvmmsg`/`sendmmsg`) and stream listeners: TCP (RFC 7766), DNS over TLS (RFC
//! 7858) and, handed to [`super::doh`], DNS over HTTPS (RFC 8484), with the connection
//! limits (`incoming-num-tcp:`, `tcp-connection-limit:`). [`super::listeners`] starts,
//! rebinds and stops them; they read the engine from the [`Serving`] handle only.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::base::lease::{self, Gate};
use crate::base::log;
use crate::base::resolving::Route;

use super::answer::{Conn, Step, after, answer_stream, hand_over, with_door};
use super::slots::{Slots, Wake};
use crate::base::serving::{Serving, WorkerStats};
use skua_serve::{Ask, Kind, Step as DoorStep};

/// TCP parameters read at each accept.
pub struct TcpParams {
    /// Idle timeout (RFC 7766 §6.2.3).
    pub idle: Duration,
    /// The connection slots (`incoming-num-tcp:` × `num-threads:`), shared with DNS over
    /// QUIC.
    pub slots: Arc<Slots>,
    /// `tcp-connection-limit:` per netblock, `tcp-connection-limit-per-source:` per source.
    pub per_client: Arc<ClientLimits>,
    /// The rules it was made from (a reload that keeps them keeps the counters).
    pub per_client_rules: (Vec<(skua_engine::acl::Netblock, u32)>, u32),
}

/// Datagrams per `recvmmsg`/`sendmmsg`.
const BATCH: usize = 64;
/// Receive buffer per datagram: queries are small; a longer one is truncated and answered
/// FORMERR (its tail is lost anyway).
const RX_BUF: usize = 4096;
/// Send buffer of accepted TCP connections.
const TCP_SNDBUF: usize = 64 * 1024;
/// How often blocked UDP workers look at the stop flag.
const POLL: Duration = Duration::from_millis(200);
/// Replies written together on a stream connection, at most (octets): one TLS record's
/// plaintext (RFC 8446 §5.1).
const COALESCE_MAX: usize = 16 * 1024;

/// One kernel-socket UDP worker: runs until the daemon or its group stops. With a `gate`
/// (a service address under the host agent's lease) it answers only while the lease holds:
/// checked once per batch, and again by the resolver before it answers a query it took.
#[allow(clippy::too_many_arguments)] // the worker's whole context, passed once at spawn
pub(crate) fn udp_worker(
    sock: UdpSocket,
    shared: Arc<Serving>,
    stats: Arc<WorkerStats>,
    stop: Arc<AtomicBool>,
    idx: usize,
    cpu: Option<usize>,
    tx_size: usize,
    gate: Gate,
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
    // The resolver answers later through this socket (a shared reference to it).
    let sock = Arc::new(sock);
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
        if let Some(l) = &gate
            && !l.serving()
        {
            // Not ours to answer now (another node may be): read and dropped.
            l.count_unleased(n as u64);
            continue;
        }
        let t0 = Instant::now();
        // One clock read per batch (rate limiting counts whole seconds); the door in force
        // once per batch too.
        let now = crate::base::clock::now_secs();
        with_door(&shared, |door, resolver, unix| {
            for i in 0..n {
                let Some((q, peer)) = rx.get(i) else { continue };
                let Some(out) = tx.next_buf() else { break };
                let ask = Ask {
                    kind: Kind::Udp,
                    peer,
                    now,
                    unix,
                    pad: None,
                    query: q,
                };
                let step = door.handle(&ask, out, &mut |e| shared.xfr.door_event(peer.ip(), e));
                after(&step, stats, resolver, peer, q);
                match step {
                    DoorStep::Reply { len, .. } => tx.push(len, peer),
                    DoorStep::Resolve(miss) => {
                        let route = Route::Udp {
                            sock: sock.clone(),
                            peer,
                            gate: gate.clone(),
                        };
                        hand_over(resolver, q, miss, route);
                    }
                    DoorStep::Drop { .. } => {}
                }
            }
        });
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
///
/// The same for DNS over TLS (RFC 7858 §3.3: the TCP framing inside the TLS session), with
/// `pad`: responses to clients that carry the EDNS Padding option are padded to this block
/// length (RFC 7830, RFC 8467 §4.1).
async fn tcp_conn<S>(stream: S, c: Conn, pad: Option<u16>, dot: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let Conn {
        peer,
        shared,
        stats,
        idle,
        gate,
        slot,
    } = c;
    let (mut rd, mut wr) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    // Whether the writer holds a reply not yet written (the connection is not idle then).
    let writing = Arc::new(AtomicBool::new(false));
    // A client that stops reading its replies must not hold the connection (and its slot)
    // forever: writes get the idle timeout too.
    let wgate = gate.clone();
    let (wslot, wwriting) = (slot.clone(), writing.clone());
    let writer = tokio::spawn(async move {
        // A reply taken from the queue that did not fit the last batch: the next one's first.
        let mut held: Option<Vec<u8>> = None;
        loop {
            let mut buf = match held.take() {
                Some(b) => b,
                None => {
                    wwriting.store(false, Ordering::Relaxed);
                    match rx.recv().await {
                        Some(b) => {
                            wwriting.store(true, Ordering::Relaxed);
                            b
                        }
                        None => break,
                    }
                }
            };
            // The lease may have ended since the query was read (a resolver answer comes
            // later): then nothing more is written on this connection.
            if !lease::open(&wgate) {
                break;
            }
            // Replies already queued behind this one (a client pipelining its queries,
            // RFC 7766 §6.2.1.1) go out in the same write, in order: one system call and,
            // over TLS, one record for all of them instead of one each. A batch stays
            // within one TLS record's plaintext (RFC 8446 §5.1: 16 KiB; a single larger
            // reply goes alone); it is freed after the write, so an idle connection keeps
            // no buffer.
            while buf.len() < COALESCE_MAX {
                match rx.try_recv() {
                    Ok(more) if buf.len() + more.len() <= COALESCE_MAX => {
                        buf.extend_from_slice(&more)
                    }
                    Ok(more) => {
                        held = Some(more);
                        break;
                    }
                    Err(_) => break,
                }
            }
            match tokio::time::timeout(idle, async {
                wr.write_all(&buf).await?;
                // TLS: the record goes out now, not when a later write fills a buffer.
                wr.flush().await
            })
            .await
            {
                Ok(Ok(())) => wslot.touch(),
                _ => break,
            }
        }
        let _ = tokio::time::timeout(idle, wr.shutdown()).await;
    });
    let stats = &*stats;
    // No message buffer lives with the connection: a query is read into one of its own
    // size, and answers are built in the thread's buffer (no await while it is borrowed)
    // and copied out framed. So an idle connection costs its socket (and TLS state), not
    // 128 KiB: thousands of DoT clients keep theirs open.
    // Idle: nothing owed to the client, i.e. no query with the resolver (it holds a clone
    // of `tx`), no answer queued for the writer or being written.
    let idle_now = |tx: &mpsc::Sender<Vec<u8>>| {
        tx.strong_count() == 1
            && tx.capacity() == tx.max_capacity()
            && !writing.load(Ordering::Relaxed)
    };
    loop {
        // The next message's length: within the idle timeout in force (shorter when the
        // slots fill), unless the connection is asked to make room for a new one first.
        let mut len = [0u8; 2];
        let got = {
            let read = rd.read_exact(&mut len);
            tokio::pin!(read);
            loop {
                tokio::select! {
                    r = &mut read => break r.is_ok(),
                    w = slot.wait(idle) => match w {
                        Wake::TimedOut => {
                            slot.timed_out(idle);
                            break false;
                        }
                        Wake::Asked => {
                            if slot.answer_ask(idle_now(&tx)) {
                                break false;
                            }
                        }
                        Wake::Rose => {}
                    },
                }
            }
        };
        if !got {
            break;
        }
        slot.touch();
        let n = usize::from(u16::from_be_bytes(len));
        let mut q = vec![0u8; n];
        match tokio::time::timeout(slot.idle_now(idle), rd.read_exact(&mut q[..n])).await {
            Ok(Ok(_)) => {}
            _ => break,
        }
        slot.touch();
        if let Some(l) = &gate
            && !l.serving()
        {
            // Another node may answer this address now: close, the client reconnects
            // (to whoever holds it).
            l.count_unleased(1);
            break;
        }
        if skua_xfr::server::is_transfer_request(&q[..n]) {
            if !transfer(&shared, peer, &q[..n], &tx, idle).await {
                break;
            }
            continue;
        }
        if dot {
            crate::base::tls::inc(&shared.tls.dot_queries);
        }
        let kind = if dot { Kind::Tls } else { Kind::Tcp };
        let step = answer_stream(&shared, stats, kind, peer, &q, pad, || tx.clone());
        match step {
            Step::Reply(framed) => match tokio::time::timeout(idle, tx.send(framed)).await {
                Ok(Ok(())) => {}
                _ => break,
            },
            Step::Resolving | Step::Dropped(_) => {}
            Step::Close => break,
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// Answers an AXFR or IXFR request (RFC 5936, RFC 1995) from the transfer state in force
/// (docs/zone-transfer.md): the messages go to the connection's writer one by one (its
/// channel and write timeout pace a slow reader), and the control core gets a report of
/// the transfer or the refusal. `false` when the connection is to be closed (a message
/// could not be queued, or nothing could be answered).
async fn transfer(
    shared: &Serving,
    peer: SocketAddr,
    query: &[u8],
    tx: &mpsc::Sender<Vec<u8>>,
    idle: Duration,
) -> bool {
    use crate::base::xfr::Event;
    use skua_xfr::server::{Answer, ZoneRef, answer};
    let client = peer.ip().to_canonical();
    let state = shared.zones();
    let now = crate::base::clock::unix_secs();
    let framed = |m: &[u8]| {
        let mut b = Vec::with_capacity(2 + m.len());
        // Cannot truncate: messages are at most 65535 bytes.
        b.extend_from_slice(&(m.len() as u16).to_be_bytes());
        b.extend_from_slice(m);
        b
    };
    let a = answer(query, client, &state.keys, now, |apex| {
        state.zones.get(apex.as_bytes()).map(|z| ZoneRef {
            version: &z.version,
            journal: &z.journal,
            allow: &z.allow,
        })
    });
    match a {
        Answer::Refused { message, refusal } => {
            shared.xfr.report(Event::Refused { client, refusal });
            if message.is_empty() {
                return false;
            }
            matches!(
                tokio::time::timeout(idle, tx.send(framed(&message))).await,
                Ok(Ok(()))
            )
        }
        Answer::Transfer(t) => {
            let mut messages = 0usize;
            let mut complete = true;
            let mut stream = t.messages;
            for m in stream.by_ref() {
                if !matches!(
                    tokio::time::timeout(idle, tx.send(framed(&m))).await,
                    Ok(Ok(()))
                ) {
                    complete = false;
                    break;
                }
                messages += 1;
            }
            if stream.failed() {
                complete = false;
            }
            shared.xfr.report(Event::Served {
                client,
                zone: t.zone,
                kind: t.kind,
                from: t.from,
                to: t.to,
                key: t.key,
                records: t.records,
                messages,
                complete,
            });
            complete
        }
    }
}

/// The longest a TLS handshake may take (less when `tcp-idle-timeout:` is shorter).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A TLS connection: the handshake with the certificate in force now (none configured:
/// closed), within [`HANDSHAKE_TIMEOUT`] (a client that stalls mid-handshake holds only
/// its own slot, and not for long), then DNS over TLS (queries as over TCP) or DNS over
/// HTTPS.
async fn tls_conn(stream: TcpStream, c: Conn, https: bool) {
    use crate::base::tls::inc;
    let shared = c.shared.clone();
    let tls = &shared.tls;
    let Some(service) = tls.service.load_full() else {
        return;
    };
    let (config, hs) = if https {
        (service.doh.clone(), &tls.doh_handshakes)
    } else {
        (service.dot.clone(), &tls.dot_handshakes)
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    // A handshake gets less time than an idle connection: a client that stalls in it holds
    // a connection slot for nothing. Nothing is owed to it yet: asked to make room for a
    // new connection, it goes.
    let limit = c.idle.min(HANDSHAKE_TIMEOUT);
    let Some(done) = c
        .slot
        .unless_asked(tokio::time::timeout(limit, acceptor.accept(stream)))
        .await
    else {
        return;
    };
    let stream = match done {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            hs.fail(crate::base::tls::HandshakeFailure::of_io(&e));
            return;
        }
        Err(_) => {
            inc(&hs.timeout);
            return;
        }
    };
    // A TLS-ALPN-01 validation (RFC 8737 §3): the handshake was all of it.
    if stream.get_ref().1.alpn_protocol() == Some(crate::base::tls::ALPN_ACME_TLS) {
        return;
    }
    inc(&hs.ok);
    if matches!(
        stream.get_ref().1.handshake_kind(),
        Some(tokio_rustls::rustls::HandshakeKind::Resumed)
    ) {
        inc(&hs.resumed);
    }
    if https {
        super::doh::serve(stream, c).await;
    } else {
        tcp_conn(stream, c, service.pad_block, true).await;
    }
}

/// What a stream listener serves (read at each accept: an address that switches at a
/// reload keeps its socket, a rebind would race the old one's close).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StreamKind {
    /// DNS over TCP (RFC 7766).
    Tcp = 0,
    /// DNS over TLS (RFC 7858).
    Tls = 1,
    /// DNS over HTTPS (RFC 8484) over TLS.
    Https = 2,
    /// DNS over HTTPS without TLS (`http-notls-downstream:`, behind a TLS proxy).
    Http = 3,
}

impl StreamKind {
    /// The kind stored as `v` by [`Self::as_u8`].
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => StreamKind::Tls,
            2 => StreamKind::Https,
            3 => StreamKind::Http,
            _ => StreamKind::Tcp,
        }
    }

    /// For an atomic.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// A word for logs.
    pub fn name(self) -> &'static str {
        match self {
            StreamKind::Tcp => "tcp",
            StreamKind::Tls => "tls",
            StreamKind::Https => "https",
            StreamKind::Http => "http (DNS over HTTPS without TLS)",
        }
    }
}

/// `tcp-connection-limit:`: connections at once from a netblock, the most specific
/// netblock of a client counting (as Unbound's); and for a client no netblock names,
/// `tcp-connection-limit-per-source:` connections at once from its source: its IPv4
/// address, or its IPv6 /56 (one site's allocation, as one IPv4 address is one site
/// behind its NAT: a host changes its /64's privacy addresses at will, and a site has 256
/// /64s). Counted over TCP, TLS, HTTPS and QUIC alike.
#[derive(Default)]
pub struct ClientLimits {
    /// Longest prefix first.
    rules: Vec<(skua_engine::acl::Netblock, u32, Arc<AtomicUsize>)>,
    /// Connections at once per source (0: no limit).
    per_source: u32,
    /// Connections open now per source (only sources with some).
    sources: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, u32>>>,
}

/// A client is at its limit.
#[derive(Debug, PartialEq, Eq)]
pub enum AtLimit {
    /// Its netblock's `tcp-connection-limit:`.
    Netblock,
    /// Its source's `tcp-connection-limit-per-source:`.
    Source,
}

/// A connection counted against its netblock's or its source's limit, given back when
/// dropped.
pub enum ClientSlot {
    /// Counted against a `tcp-connection-limit:` netblock.
    Netblock(Arc<AtomicUsize>),
    /// Counted against its source (the map, the source's key).
    Source(
        Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, u32>>>,
        std::net::IpAddr,
    ),
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        match self {
            ClientSlot::Netblock(n) => {
                n.fetch_sub(1, Ordering::Relaxed);
            }
            ClientSlot::Source(map, key) => {
                let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(n) = m.get_mut(key) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        m.remove(key);
                    }
                }
            }
        }
    }
}

/// The source a per-source limit counts `ip` under: the IPv4 address (an IPv4-mapped
/// IPv6 one as IPv4), or the IPv6 /56.
pub fn source_key(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip.to_canonical() {
        std::net::IpAddr::V6(a) => {
            let masked = u128::from(a) & (u128::MAX << (128 - 56));
            std::net::IpAddr::V6(masked.into())
        }
        v4 => v4,
    }
}

impl ClientLimits {
    /// The limits of `rules` (netblock, connections) and `per_source` (0: none),
    /// counters at zero.
    pub fn new(rules: &[(skua_engine::acl::Netblock, u32)], per_source: u32) -> Self {
        let mut rules: Vec<_> = rules
            .iter()
            .map(|&(nb, n)| (nb, n, Arc::new(AtomicUsize::new(0))))
            .collect();
        rules.sort_by_key(|r| std::cmp::Reverse(r.0.prefix()));
        Self {
            rules,
            per_source,
            sources: Arc::default(),
        }
    }

    /// A slot for a connection from `ip`: `Ok(None)` when nothing limits it, `Err` when
    /// its netblock or its source is at its limit.
    pub fn admit(&self, ip: std::net::IpAddr) -> Result<Option<ClientSlot>, AtLimit> {
        let Some((_, limit, n)) = self.rules.iter().find(|r| r.0.contains_addr(ip)) else {
            if self.per_source == 0 {
                return Ok(None);
            }
            let key = source_key(ip);
            let mut m = self.sources.lock().unwrap_or_else(|e| e.into_inner());
            let n = m.entry(key).or_insert(0);
            if *n >= self.per_source {
                return Err(AtLimit::Source);
            }
            *n += 1;
            return Ok(Some(ClientSlot::Source(self.sources.clone(), key)));
        };
        let limit = *limit as usize;
        n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            (v < limit).then_some(v + 1)
        })
        .map(|_| Some(ClientSlot::Netblock(n.clone())))
        .map_err(|_| AtLimit::Netblock)
    }

    /// Counts a refusal for `why` in `shared`'s counters.
    pub fn count_refusal(shared: &Serving, why: AtLimit) {
        match why {
            AtLimit::Netblock => crate::base::tls::inc(&shared.per_client_refused),
            AtLimit::Source => crate::base::tls::inc(&shared.streams.per_source),
        }
    }
}

/// Accepts TCP connections on `listener` until aborted, with the parameters in force at
/// each accept, serving what `kind` says (DNS over TCP, TLS or HTTPS; for TLS, the
/// handshake with the certificate in force when it begins comes first).
pub(crate) async fn tcp_accept(
    listener: TcpListener,
    shared: Arc<Serving>,
    stats: Arc<WorkerStats>,
    params: Arc<ArcSwap<TcpParams>>,
    gate: Gate,
    kind: Arc<AtomicU8>,
) {
    let (mut errors, mut last_log) = (0u64, None::<Instant>);
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let p = params.load_full();
                if let Some(l) = &gate
                    && !l.serving()
                {
                    l.count_unleased(1);
                    drop(stream);
                    continue;
                }
                // Past its netblock's `tcp-connection-limit:` or its source's
                // `tcp-connection-limit-per-source:`: closed at once, as Unbound.
                let client = match p.per_client.admit(peer.ip()) {
                    Ok(c) => c,
                    Err(why) => {
                        ClientLimits::count_refusal(&shared, why);
                        continue;
                    }
                };
                let kind = StreamKind::from_u8(kind.load(Ordering::Relaxed));
                if kind != StreamKind::Tcp
                    && shared.engine().acl().check(peer.ip()) == skua_engine::acl::AclAction::Deny
                {
                    // Dropped anyway: not worth a handshake or an HTTP exchange.
                    continue;
                }
                // A connection slot: with every one taken, the connection idle longest is
                // closed to make room (a connection with a query in progress is not);
                // with none idle, this one waits (and the listener's backlog behind it,
                // RFC 7766 §6.2.2), holding one descriptor per listener at most.
                let permit = p.slots.take().await;
                let c = Conn {
                    peer,
                    shared: shared.clone(),
                    stats: stats.clone(),
                    idle: p.idle,
                    gate: gate.clone(),
                    slot: permit.handle(),
                };
                let _ = stream.set_nodelay(true);
                // Replies of a pipelining client fit easily; a client that never reads
                // fills this and then the write timeout disconnects it (instead of
                // megabytes of autotuned buffer).
                let _ = skua_netio::set_send_buffer(&stream, TCP_SNDBUF);
                tokio::spawn(async move {
                    match kind {
                        StreamKind::Tcp => tcp_conn(stream, c, None, false).await,
                        StreamKind::Tls => tls_conn(stream, c, false).await,
                        StreamKind::Https => tls_conn(stream, c, true).await,
                        StreamKind::Http => super::doh::serve(stream, c).await,
                    }
                    drop(client);
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of descriptors (EMFILE), typically: one line per interval with the
                // count, not one per retry.
                errors += 1;
                if last_log.is_none_or(|t: Instant| t.elapsed() >= log::ERROR_LOG_INTERVAL) {
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
