//! The kernel-socket dataplane's workers: UDP (one `SO_REUSEPORT` socket per thread,
//! batched `recvmmsg`/`sendmmsg`) and TCP (RFC 7766). [`super::listeners`] starts, rebinds
//! and stops them; they read the engine from the [`Serving`] handle only.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use skua_engine::{Outcome, Request, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};

use crate::base::lease::{self, Gate};
use crate::base::log;
use crate::base::resolving::{Job, ResolverHandle, Route};
use crate::base::serving::{Serving, WorkerStats};

/// TCP parameters read at each accept.
pub struct TcpParams {
    /// Idle timeout (RFC 7766 §6.2.3).
    pub idle: Duration,
    /// Concurrent connections.
    pub limit: Arc<Semaphore>,
    /// The limit's size.
    pub limit_n: usize,
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

fn inform(o: &Outcome, peer: SocketAddr, q: &[u8]) {
    let informs = match o {
        Outcome::Reply { info, .. } => info.inform,
        Outcome::Drop { inform, .. } => *inform,
        Outcome::Resolve => false,
    };
    if informs {
        log::info(format_args!(
            "inform: {peer} asked {}",
            log::describe_query(q)
        ));
    }
}

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
        // One clock read per batch (rate limiting counts whole seconds).
        let now = crate::base::clock::now_secs();
        let engine = shared.engine.load();
        let resolver = shared.resolver.load();
        // TSIG keys (zone transfers): signed queries are checked and answered signed.
        let xfr = shared.xfr.state.load();
        let unix = if xfr.keys.is_empty() {
            0
        } else {
            crate::base::clock::unix_secs()
        };
        for i in 0..n {
            let Some((q, peer)) = rx.get(i) else { continue };
            let Some(out) = tx.next_buf() else { break };
            let req = Request {
                src: peer.ip(),
                transport: Transport::Udp,
                now,
            };
            if !xfr.secondaries.is_empty() && skua_xfr::notify::is_notify(q) {
                let resp = notify_in(&shared, &xfr, q, peer);
                if let Some(dst) = out.get_mut(..resp.len())
                    && !resp.is_empty()
                {
                    dst.copy_from_slice(&resp);
                    tx.push(resp.len(), peer);
                }
                continue;
            }
            if !xfr.keys.is_empty()
                && q.len() >= 12
                && q[10..12] != [0, 0]
                && let Some(sq) = skua_xfr::server::check_signed_query(q, &xfr.keys, unix)
            {
                if let Some(len) =
                    signed_reply(&engine, &req, sq, out, &xfr.keys, unix, &shared, peer)
                {
                    tx.push(len, peer);
                }
                continue;
            }
            let o = match resolver.as_deref() {
                Some(r) => engine.handle_query_with(&req, q, out, &*r.cache),
                None => engine.handle_query(&req, q, out),
            };
            stats.record(&o);
            inform(&o, peer, q);
            match o {
                Outcome::Reply { len, info } => {
                    if info.refresh {
                        refresh(resolver.as_deref(), q);
                    }
                    tx.push(len, peer);
                }
                Outcome::Resolve => {
                    let route = Route::Udp {
                        sock: sock.clone(),
                        peer,
                        gate: gate.clone(),
                    };
                    hand_over(resolver.as_deref(), q, route);
                }
                Outcome::Drop { .. } => {}
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

/// Hands a query that missed the cache to the resolver, which answers on `route`. A full
/// queue drops it (the client retries), as an overloaded Unbound drops.
fn hand_over(resolver: Option<&ResolverHandle>, query: &[u8], route: Route) {
    if let Some(r) = resolver {
        let _ = r.submit(Job {
            query: query.to_vec(),
            route: Some(route),
        });
    }
}

/// Asks the resolver to refresh a question the cache answered (prefetch, stale).
fn refresh(resolver: Option<&ResolverHandle>, query: &[u8]) {
    if let Some(r) = resolver {
        let _ = r.submit(Job {
            query: query.to_vec(),
            route: None,
        });
    }
}

/// One TCP connection: pipelined queries (RFC 7766 §6.2.1.1), replies written by a separate
/// task so that a slow reader does not stall query processing, idle timeout per message
/// (§6.2.3: a client that stops mid-message is disconnected).
///
/// The same for DNS over TLS (RFC 7858 §3.3: the TCP framing inside the TLS session), with
/// `pad`: responses to clients that carry the EDNS Padding option are padded to this block
/// length (RFC 7830, RFC 8467 §4.1).
async fn tcp_conn<S>(
    stream: S,
    peer: SocketAddr,
    shared: Arc<Serving>,
    stats: Arc<WorkerStats>,
    idle: Duration,
    gate: Gate,
    pad: Option<u16>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    // A client that stops reading its replies must not hold the connection (and its slot)
    // forever: writes get the idle timeout too.
    let wgate = gate.clone();
    let writer = tokio::spawn(async move {
        while let Some(buf) = rx.recv().await {
            // The lease may have ended since the query was read (a resolver answer comes
            // later): then nothing more is written on this connection.
            if !lease::open(&wgate) {
                break;
            }
            match tokio::time::timeout(idle, async {
                wr.write_all(&buf).await?;
                // TLS: the record goes out now, not when a later write fills a buffer.
                wr.flush().await
            })
            .await
            {
                Ok(Ok(())) => {}
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
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(idle, rd.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => break,
        }
        let n = usize::from(u16::from_be_bytes(len));
        let mut q = vec![0u8; n];
        match tokio::time::timeout(idle, rd.read_exact(&mut q[..n])).await {
            Ok(Ok(_)) => {}
            _ => break,
        }
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
        if skua_xfr::notify::is_notify(&q[..n]) {
            let xfr = shared.xfr.state.load_full();
            if !xfr.secondaries.is_empty() {
                let resp = notify_in(&shared, &xfr, &q[..n], peer);
                if resp.is_empty() {
                    break;
                }
                let mut framed = Vec::with_capacity(2 + resp.len());
                // Cannot truncate: a NOTIFY response is a few hundred bytes.
                framed.extend_from_slice(&(resp.len() as u16).to_be_bytes());
                framed.extend_from_slice(&resp);
                match tokio::time::timeout(idle, tx.send(framed)).await {
                    Ok(Ok(())) => {}
                    _ => break,
                }
                continue;
            }
        }
        let engine = shared.engine.load();
        let resolver = shared.resolver.load();
        let req = Request {
            src: peer.ip(),
            transport: Transport::Tcp,
            now: crate::base::clock::now_secs(),
        };
        let xfr = shared.xfr.state.load_full();
        if !xfr.keys.is_empty() && n >= 12 && q[10..12] != [0, 0] {
            let unix = crate::base::clock::unix_secs();
            if let Some(sq) = skua_xfr::server::check_signed_query(&q[..n], &xfr.keys, unix) {
                let framed = with_out(|out| {
                    let len = signed_reply(
                        &engine,
                        &req,
                        sq,
                        &mut out[2..],
                        &xfr.keys,
                        unix,
                        &shared,
                        peer,
                    )?;
                    // Cannot truncate: replies are at most 65535 bytes.
                    out[..2].copy_from_slice(&(len as u16).to_be_bytes());
                    Some(out[..2 + len].to_vec())
                });
                if let Some(framed) = framed {
                    match tokio::time::timeout(idle, tx.send(framed)).await {
                        Ok(Ok(())) => {}
                        _ => break,
                    }
                }
                continue;
            }
        }
        let pad_to = pad.filter(|_| skua_engine::padding::query_wants_padding(&q[..n]));
        let (o, framed) = with_out(|out| {
            let o = match resolver.as_deref() {
                Some(r) => engine.handle_query_with(&req, &q[..n], &mut out[2..], &*r.cache),
                None => engine.handle_query(&req, &q[..n], &mut out[2..]),
            };
            let framed = match o {
                Outcome::Reply { len, .. } => {
                    let len = match pad_to {
                        Some(b) => skua_engine::padding::pad_response(&mut out[2..], len, b),
                        None => len,
                    };
                    // Cannot truncate: replies are at most 65535 bytes.
                    out[..2].copy_from_slice(&(len as u16).to_be_bytes());
                    Some(out[..2 + len].to_vec())
                }
                _ => None,
            };
            (o, framed)
        });
        stats.record(&o);
        inform(&o, peer, &q[..n]);
        match o {
            Outcome::Reply { info, .. } => {
                if info.refresh {
                    refresh(resolver.as_deref(), &q[..n]);
                }
                if let Some(framed) = framed {
                    match tokio::time::timeout(idle, tx.send(framed)).await {
                        Ok(Ok(())) => {}
                        _ => break,
                    }
                }
            }
            // A denied client over TCP: close, as Unbound does.
            Outcome::Drop {
                reason: skua_engine::engine::DropReason::Acl,
                ..
            } => break,
            Outcome::Resolve => {
                let route = Route::Tcp {
                    tx: tx.clone(),
                    peer,
                    pad: pad_to,
                };
                hand_over(resolver.as_deref(), &q[..n], route);
            }
            Outcome::Drop { .. } => {}
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// The answer to a query that carried a TSIG record (RFC 8945): the engine's answer to the
/// query without it, signed with the request's key, or the TSIG error (reported to the
/// control core). Written into `out`; `None` when nothing is to be sent (the engine drops
/// the query or hands it to the resolver: signed queries are answered from local data
/// only, or the answer does not fit).
#[allow(clippy::too_many_arguments)] // the query's whole context
fn signed_reply(
    engine: &skua_engine::Engine,
    req: &Request,
    sq: skua_xfr::server::SignedQuery,
    out: &mut [u8],
    keys: &[skua_xfr::tsig::Key],
    unix: u64,
    shared: &Serving,
    peer: SocketAddr,
) -> Option<usize> {
    use skua_xfr::server::SignedQuery;
    let resp = match sq {
        SignedQuery::Rejected { response, refusal } => {
            shared.xfr.report(crate::base::xfr::Event::Refused {
                client: peer.ip().to_canonical(),
                refusal,
            });
            response
        }
        SignedQuery::Verified { query, key, mac } => {
            let mut buf = vec![0u8; out.len()];
            match engine.handle_query(req, &query, &mut buf) {
                Outcome::Reply { len, .. } => {
                    let mut v = buf[..len].to_vec();
                    let k = keys.get(key)?;
                    skua_xfr::server::sign_response(&mut v, k, &mac, unix);
                    v
                }
                _ => return None,
            }
        }
    };
    let dst = out.get_mut(..resp.len())?;
    dst.copy_from_slice(&resp);
    Some(resp.len())
}

/// Answers a NOTIFY for a secondary zone (RFC 1996, docs/zone-transfer.md): checked by
/// skua-xfr (TSIG, the zone's `allow-notify:` entries and primaries); an accepted one makes
/// the zone due for the secondary's task, a refused one is reported to the control core.
/// The response (empty when nothing can be answered).
fn notify_in(
    shared: &Serving,
    xfr: &crate::base::xfr::Transfers,
    q: &[u8],
    peer: SocketAddr,
) -> Vec<u8> {
    use crate::base::xfr::{Event, NotifyIn};
    let client = peer.ip().to_canonical();
    let a = skua_xfr::notify::answer(q, client, &xfr.keys, crate::base::clock::unix_secs(), |z| {
        xfr.secondaries
            .get(z.as_bytes())
            .map(|s| s.allow_notify.as_slice())
    });
    match a.outcome {
        Ok(acc) => {
            shared.xfr.notified(NotifyIn {
                zone: acc.zone.as_bytes().to_vec(),
                serial: acc.serial,
            });
            shared.xfr.report(Event::Notified {
                client,
                zone: acc.zone.to_string(),
                serial: acc.serial,
            });
        }
        Err(refusal) => shared.xfr.report(Event::NotifyRefused { client, refusal }),
    }
    a.response
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
    let state = shared.xfr.state.load_full();
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

/// Runs `f` with this thread's answer buffer (2 bytes of TCP length prefix, then room for
/// the largest DNS message). `f` must not await: the buffer is the thread's.
fn with_out<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    thread_local! {
        static OUT: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 2 + 65535]);
    }
    OUT.with(|b| f(&mut b.borrow_mut()))
}

/// The longest a TLS handshake may take (less when `tcp-idle-timeout:` is shorter).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A DNS over TLS connection: the handshake with the certificate in force now (none
/// configured: closed), within [`HANDSHAKE_TIMEOUT`] (a client that stalls mid-handshake
/// holds only its own slot, and not for long), then queries as over TCP.
async fn tls_conn(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Serving>,
    stats: Arc<WorkerStats>,
    idle: Duration,
    gate: Gate,
) {
    use crate::base::tls::DotStats;
    let dot = &shared.dot;
    let Some(service) = dot.service.load_full() else {
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(service.config.clone());
    // A handshake gets less time than an idle connection: a client that stalls in it holds
    // a connection slot for nothing.
    let limit = idle.min(HANDSHAKE_TIMEOUT);
    let tls = match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(t)) => t,
        Ok(Err(_)) => {
            DotStats::inc(&dot.stats.handshake_failures);
            return;
        }
        Err(_) => {
            DotStats::inc(&dot.stats.handshake_timeouts);
            return;
        }
    };
    DotStats::inc(&dot.stats.handshakes);
    if matches!(
        tls.get_ref().1.handshake_kind(),
        Some(tokio_rustls::rustls::HandshakeKind::Resumed)
    ) {
        DotStats::inc(&dot.stats.resumed);
    }
    tcp_conn(tls, peer, shared, stats, idle, gate, service.pad_block).await;
}

/// Accepts TCP connections on `listener` until aborted, with the parameters in force at
/// each accept.
///
/// With `tls`, each connection is DNS over TLS: the handshake (with the certificate in
/// force when it begins, bounded by the idle timeout) comes first.
pub(crate) async fn tcp_accept(
    listener: TcpListener,
    shared: Arc<Serving>,
    stats: Arc<WorkerStats>,
    params: Arc<ArcSwap<TcpParams>>,
    gate: Gate,
    tls: Arc<std::sync::atomic::AtomicBool>,
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
                if let Some(l) = &gate
                    && !l.serving()
                {
                    l.count_unleased(1);
                    drop(stream);
                    continue;
                }
                let tls = tls.load(std::sync::atomic::Ordering::Relaxed);
                if tls
                    && shared.engine.load().acl().check(peer.ip())
                        == skua_engine::acl::AclAction::Deny
                {
                    // Dropped anyway: not worth a handshake.
                    continue;
                }
                let (shared, stats, idle, gate) =
                    (shared.clone(), stats.clone(), p.idle, gate.clone());
                let _ = stream.set_nodelay(true);
                // Replies of a pipelining client fit easily; a client that never reads
                // fills this and then the write timeout disconnects it (instead of
                // megabytes of autotuned buffer).
                let _ = skua_netio::set_send_buffer(&stream, TCP_SNDBUF);
                tokio::spawn(async move {
                    if tls {
                        tls_conn(stream, peer, shared, stats, idle, gate).await;
                    } else {
                        tcp_conn(stream, peer, shared, stats, idle, gate, None).await;
                    }
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
