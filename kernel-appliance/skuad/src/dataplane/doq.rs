//! DNS over QUIC (RFC 9250) on quinn: one UDP socket per `quic-port:` address, each query
//! on its own bidirectional stream, answered through the same path as one over TCP
//! ([`super::answer::answer_stream`]): access list, local data, cache, resolver, padding.
//!
//! Each new connection takes the certificate in force when it arrives (a swapped
//! certificate serves the next handshake; connections open keep theirs). A client must
//! first prove its address (a Retry, RFC 9000 §8.1.2) before it takes a connection slot;
//! then a client the access list denies, one whose netblock is at its
//! `tcp-connection-limit:` or whose source is at `tcp-connection-limit-per-source:` are
//! refused at once, before a handshake. The slots are those of TCP (`incoming-num-tcp:`,
//! [`super::slots`]): with every one taken, the connection idle longest (over any
//! transport) is closed to make room, the new one waiting for it a handshake's time at
//! most (a few at once: QUIC has no backlog); with none idle, refused. A connection with
//! no query for the idle timeout in force (shorter as the slots fill) is closed, and so is
//! an idle one asked to make room. The QUIC transport bounds each connection (streams at once, windows, the
//! idle timeout: see `control::tls`). A stream that does not carry exactly one
//! length-prefixed message, or a message whose ID is not 0, closes the connection with
//! DOQ_PROTOCOL_ERROR (RFC 9250 §4.2, §4.3). 0-RTT is off.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::mpsc;

use super::answer::{Conn, Step, answer_stream};
use super::slots::Wake;
use super::sockets::{ClientLimits, TcpParams};
use crate::base::lease::Gate;
use crate::base::serving::{Serving, WorkerStats};
use crate::base::tls::inc;

/// RFC 9250 §4.3: no error (a connection closed normally).
const DOQ_NO_ERROR: u32 = 0x0;
/// RFC 9250 §4.3: an internal error (no answer could be made).
const DOQ_INTERNAL_ERROR: u32 = 0x1;
/// RFC 9250 §4.3: the peer broke the protocol.
const DOQ_PROTOCOL_ERROR: u32 = 0x2;
/// RFC 9250 §4.3: the request was cancelled (not answered for this client).
const DOQ_REQUEST_CANCELLED: u32 = 0x3;
/// RFC 9250 §4.3: the server is overloaded (rate limited).
const DOQ_EXCESSIVE_LOAD: u32 = 0x4;
/// The longest a handshake may take (less when `tcp-idle-timeout:` is shorter).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a query waits for the resolver, at least.
const RESOLVE_WAIT: Duration = Duration::from_secs(10);
/// New connections waiting at once, per address, for an idle one to make room.
const MAX_WAITING: usize = 16;

/// A DNS over QUIC endpoint on one UDP socket.
pub(crate) struct DoqListener {
    pub addr: SocketAddr,
    pub gate: Gate,
    endpoint: quinn::Endpoint,
    task: tokio::task::JoinHandle<()>,
    watcher: tokio::task::JoinHandle<()>,
}

impl DoqListener {
    /// Serves DNS over QUIC on `sock` (bound by the caller), with the certificate in force
    /// (none yet, as before ACME's first certificate: the endpoint takes no connection
    /// until one is in force).
    pub fn start(
        sock: std::net::UdpSocket,
        shared: Arc<Serving>,
        stats: Arc<WorkerStats>,
        params: Arc<ArcSwap<TcpParams>>,
        gate: Gate,
    ) -> std::io::Result<Self> {
        let addr = sock.local_addr()?;
        let first = shared.tls.service.load_full();
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            first.as_ref().map(|s| (*s.doq).clone()),
            sock,
            Arc::new(quinn::TokioRuntime),
        )?;
        // Each connection takes the certificate in force (accept_with); the endpoint's
        // own configuration only decides whether new connections are taken at all: kept
        // in step with the service, so a first certificate (ACME) opens it.
        let watcher = {
            let (ep, shared) = (endpoint.clone(), shared.clone());
            tokio::spawn(async move {
                let mut had = first.is_some();
                loop {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let now = shared.tls.service.load_full();
                    if now.is_some() != had {
                        had = now.is_some();
                        ep.set_server_config(now.map(|s| (*s.doq).clone()));
                    }
                }
            })
        };
        let task = tokio::spawn(accept(
            endpoint.clone(),
            shared,
            stats,
            params,
            gate.clone(),
        ));
        Ok(Self {
            addr,
            gate,
            endpoint,
            task,
            watcher,
        })
    }

    /// Closes every connection and the socket.
    pub fn stop(self) {
        self.task.abort();
        self.watcher.abort();
        self.endpoint.close(DOQ_NO_ERROR.into(), b"");
    }
}

/// Accepts connections until the endpoint closes.
async fn accept(
    endpoint: quinn::Endpoint,
    shared: Arc<Serving>,
    stats: Arc<WorkerStats>,
    params: Arc<ArcSwap<TcpParams>>,
    gate: Gate,
) {
    let waiting = Arc::new(tokio::sync::Semaphore::new(MAX_WAITING));
    while let Some(incoming) = endpoint.accept().await {
        let peer = incoming.remote_address();
        if let Some(l) = &gate
            && !l.serving()
        {
            // Another node may answer this address now: no word, as for UDP.
            l.count_unleased(1);
            incoming.ignore();
            continue;
        }
        let refuse = |incoming: quinn::Incoming| {
            inc(&shared.tls.doq_refused);
            incoming.refuse();
        };
        if shared.engine().acl().check(peer.ip()) == skua_engine::acl::AclAction::Deny {
            refuse(incoming);
            continue;
        }
        // A connection takes a slot only from an address that answered (a Retry, RFC 9000
        // §8.1.2): an Initial packet with a forged source holds nothing.
        if !incoming.remote_address_validated() {
            if incoming.may_retry() {
                let _ = incoming.retry();
            } else {
                refuse(incoming);
            }
            continue;
        }
        let p = params.load_full();
        let client = match p.per_client.admit(peer.ip()) {
            Ok(c) => c,
            Err(why) => {
                ClientLimits::count_refusal(&shared, why);
                refuse(incoming);
                continue;
            }
        };
        if shared.tls.service.load().is_none() {
            refuse(incoming);
            continue;
        }
        // A slot now; else, as over TCP, the connection idle longest is asked to make
        // room, and this one waits for it (a handshake's time at most: QUIC has no
        // backlog, the client's Initial is what waits; a few at once, past them refused).
        let permit = match p.slots.try_take() {
            Some(s) => s,
            None => {
                let Ok(w) = waiting.clone().try_acquire_owned() else {
                    refuse(incoming);
                    continue;
                };
                let (shared, stats, gate) = (shared.clone(), stats.clone(), gate.clone());
                tokio::spawn(async move {
                    let limit = p.idle.min(HANDSHAKE_TIMEOUT);
                    match tokio::time::timeout(limit, p.slots.take()).await {
                        Ok(permit) => {
                            drop(w);
                            start(incoming, peer, permit, client, &p, shared, stats, gate)
                        }
                        Err(_) => {
                            inc(&shared.tls.doq_refused);
                            incoming.refuse();
                        }
                    }
                });
                continue;
            }
        };
        start(
            incoming,
            peer,
            permit,
            client,
            &p,
            shared.clone(),
            stats.clone(),
            gate.clone(),
        );
    }
}

/// Accepts `incoming`, which holds `permit` and `client`, and serves it in a task.
#[allow(clippy::too_many_arguments)] // the connection's whole context, passed once
fn start(
    incoming: quinn::Incoming,
    peer: SocketAddr,
    permit: super::slots::Slot,
    client: Option<super::sockets::ClientSlot>,
    p: &TcpParams,
    shared: Arc<Serving>,
    stats: Arc<WorkerStats>,
    gate: Gate,
) {
    let Some(service) = shared.tls.service.load_full() else {
        inc(&shared.tls.doq_refused);
        incoming.refuse();
        return;
    };
    // The certificate in force now, whatever the endpoint started with.
    // The client's first flight (its ClientHello) is read here: a handshake that
    // fails at once (no ALPN in common, say) fails here.
    let connecting = match incoming.accept_with(service.doq.clone()) {
        Ok(c) => c,
        Err(e) => {
            let hs = &shared.tls.doq_handshakes;
            match quic_failure(&e) {
                Some(why) => hs.fail(why),
                None => inc(&hs.timeout),
            }
            return;
        }
    };
    let c = Conn {
        peer,
        shared: shared.clone(),
        stats,
        idle: p.idle,
        gate,
        slot: permit.handle(),
    };
    let pad = service.pad_block;
    tokio::spawn(async move {
        connection(connecting, c, pad).await;
        drop(client);
        drop(permit);
    });
}

/// One connection: the handshake, then a task per stream until it closes.
async fn connection(connecting: quinn::Connecting, c: Conn, pad: Option<u16>) {
    let hs = &c.shared.tls.doq_handshakes;
    let limit = c.idle.min(HANDSHAKE_TIMEOUT);
    // Nothing is owed to a client still in its handshake: asked to make room, it goes.
    let Some(done) = c
        .slot
        .unless_asked(tokio::time::timeout(limit, connecting))
        .await
    else {
        return;
    };
    let conn = match done {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            match quic_failure(&e) {
                Some(why) => hs.fail(why),
                None => inc(&hs.timeout),
            }
            return;
        }
        Err(_) => {
            inc(&hs.timeout);
            return;
        }
    };
    inc(&hs.ok);
    let c = Arc::new(c);
    // Queries being answered: a connection with none and no new stream for the idle
    // timeout is closed (QUIC's own idle timeout would let a client's PINGs keep it, and
    // its connection slot, forever).
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let is_idle = |busy: &std::sync::atomic::AtomicUsize| {
        busy.load(std::sync::atomic::Ordering::Relaxed) == 0
    };
    c.slot.touch();
    loop {
        // The next stream, within the idle timeout in force (shorter as the slots fill)
        // while no query is being answered; an idle connection asked to make room goes.
        let next = {
            let accept = conn.accept_bi();
            tokio::pin!(accept);
            loop {
                tokio::select! {
                    r = &mut accept => break Some(r),
                    w = c.slot.wait(c.idle) => match w {
                        Wake::TimedOut if is_idle(&busy) => {
                            c.slot.timed_out(c.idle);
                            break None;
                        }
                        // Answering: the idle timeout counts from the last answer.
                        Wake::TimedOut => c.slot.touch(),
                        Wake::Asked => {
                            if c.slot.answer_ask(is_idle(&busy)) {
                                break None;
                            }
                        }
                        Wake::Rose => {}
                    },
                }
            }
        };
        let (send, recv) = match next {
            Some(Ok(s)) => s,
            Some(Err(_)) => break,
            None => {
                conn.close(DOQ_NO_ERROR.into(), b"idle");
                break;
            }
        };
        c.slot.touch();
        let (conn, c, busy) = (conn.clone(), c.clone(), busy.clone());
        busy.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(async move {
            stream(conn, send, recv, &c, pad).await;
            c.slot.touch();
            busy.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        });
    }
}

/// One query on its stream (RFC 9250 §4.2): a 2-octet length and the message, then the
/// stream's end; the answer the same way.
async fn stream(
    conn: quinn::Connection,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    c: &Conn,
    pad: Option<u16>,
) {
    let shared = &c.shared;
    let protocol_error = |why: &'static str| {
        inc(&shared.tls.doq_protocol_errors);
        conn.close(DOQ_PROTOCOL_ERROR.into(), why.as_bytes());
    };
    let data = match tokio::time::timeout(c.idle, recv.read_to_end(2 + 65_535)).await {
        Ok(Ok(d)) => d,
        Ok(Err(quinn::ReadToEndError::TooLong)) => return protocol_error("message too long"),
        // The client reset the stream or the connection ended: nothing to answer.
        Ok(Err(_)) => return,
        Err(_) => {
            let _ = send.reset(DOQ_REQUEST_CANCELLED.into());
            return;
        }
    };
    let Some((len, q)) = data.split_first_chunk::<2>() else {
        return protocol_error("no length");
    };
    if usize::from(u16::from_be_bytes(*len)) != q.len() || q.len() < 12 {
        return protocol_error("the length does not match the message");
    }
    // RFC 9250 §4.2.1: the Message ID of a query over DoQ is 0.
    if q[..2] != [0, 0] {
        return protocol_error("message ID not 0");
    }
    if let Some(l) = &c.gate
        && !l.serving()
    {
        l.count_unleased(1);
        conn.close(DOQ_NO_ERROR.into(), b"");
        return;
    }
    inc(&shared.tls.doq_queries);
    let (tx, mut rx) = mpsc::channel(1);
    let step = answer_stream(
        shared,
        &c.stats,
        skua_serve::Kind::Quic,
        c.peer,
        q,
        pad,
        || tx.clone(),
    );
    drop(tx);
    let framed = match step {
        Step::Reply(f) => f,
        Step::Resolving => match tokio::time::timeout(c.idle.max(RESOLVE_WAIT), rx.recv()).await {
            Ok(Some(f)) => f,
            _ => {
                let _ = send.reset(DOQ_INTERNAL_ERROR.into());
                return;
            }
        },
        Step::Dropped(skua_engine::engine::DropReason::RateLimited) => {
            let _ = send.reset(DOQ_EXCESSIVE_LOAD.into());
            return;
        }
        Step::Dropped(skua_engine::engine::DropReason::Malformed) => {
            return protocol_error("not a DNS query");
        }
        Step::Dropped(_) => {
            let _ = send.reset(DOQ_REQUEST_CANCELLED.into());
            return;
        }
        Step::Close => {
            conn.close(DOQ_REQUEST_CANCELLED.into(), b"");
            return;
        }
    };
    // The framing is DoQ's too (RFC 9250 §4.2): the 2-octet length, then the message.
    let write = async {
        send.write_all(&framed).await?;
        send.finish()?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    };
    if !matches!(tokio::time::timeout(c.idle, write).await, Ok(Ok(()))) {
        let _ = send.reset(DOQ_INTERNAL_ERROR.into());
    }
}

/// The UDP socket of a DNS over QUIC address.
pub(crate) fn bind(addr: SocketAddr, freebind: bool) -> std::io::Result<std::net::UdpSocket> {
    let fd = skua_netio::bind_socket(addr, skua_netio::Kind::Udp, false, None, None, 0, freebind)?;
    Ok(std::net::UdpSocket::from(fd))
}

/// Why a QUIC handshake failed: the TLS alert of a CRYPTO_ERROR (RFC 9001 §4.8: codes
/// 0x100 to 0x1ff), sent by either side; another transport error of ours is a protocol
/// failure; a connection the client closed otherwise, or reset, is closed; none for
/// quinn's own idle timeout (a timeout, counted as such by the caller).
fn quic_failure(e: &quinn::ConnectionError) -> Option<crate::base::tls::HandshakeFailure> {
    use crate::base::tls::HandshakeFailure;
    use quinn::ConnectionError;
    let alert = |code: quinn::TransportErrorCode| {
        let c = u64::from(code);
        (0x100..=0x1ff).contains(&c).then_some((c - 0x100) as u8)
    };
    Some(match e {
        ConnectionError::TimedOut => return None,
        ConnectionError::VersionMismatch => HandshakeFailure::Incompatible,
        ConnectionError::TransportError(t) => match alert(t.code) {
            Some(a) => HandshakeFailure::of_alert(a),
            None => HandshakeFailure::Protocol,
        },
        ConnectionError::ConnectionClosed(c) => match alert(c.error_code) {
            Some(a) => HandshakeFailure::of_alert(a),
            None => HandshakeFailure::Closed,
        },
        _ => HandshakeFailure::Closed,
    })
}
