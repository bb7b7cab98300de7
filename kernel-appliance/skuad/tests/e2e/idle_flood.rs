//! Idle stream clients cannot keep everyone else out: 1,000 connections that never send a
//! byte, from one source and then from a hundred, reopened as soon as skuad closes them,
//! while a client keeps asking over TCP and DNS over TLS, on fresh connections, and gets
//! every answer in time. The connection slots (`incoming-num-tcp:`) are shared by TCP,
//! TLS, HTTPS and QUIC; skuad keeps them free with a per-source limit
//! (`tcp-connection-limit-per-source:`, 100 by default), an idle timeout that shortens as
//! they fill, and the longest idle connection closed when a new one needs its slot
//! (src/dataplane/slots.rs).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{
    Dir, LO, config, free_port, http, metric_value, query, start, test_ca, test_leaf, tok,
};
use tokio_rustls::rustls;

/// How long the client waits for an answer (connect, handshake, answer), at most.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// Counts of a flood.
#[derive(Default)]
struct Counts {
    /// Connection attempts that ended (connected or not).
    attempts: AtomicUsize,
    /// Connections made.
    opened: AtomicUsize,
    /// Connections skuad closed.
    closed: AtomicUsize,
}

/// `per_source` connections from each address of `sources`, each left idle (nothing sent)
/// and reopened a quarter second after skuad closes it, until `stop`.
fn flood(
    port: u16,
    sources: Vec<Ipv4Addr>,
    per_source: usize,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for src in sources {
                for _ in 0..per_source {
                    let (stop, counts) = (stop.clone(), counts.clone());
                    tasks.push(tokio::spawn(async move {
                        let to = SocketAddr::new(LO, port);
                        while !stop.load(Ordering::Relaxed) {
                            let sock = tokio::net::TcpSocket::new_v4().unwrap();
                            sock.bind(SocketAddr::new(IpAddr::V4(src), 0)).unwrap();
                            let conn =
                                tokio::time::timeout(Duration::from_secs(1), sock.connect(to))
                                    .await;
                            counts.attempts.fetch_add(1, Ordering::Relaxed);
                            if let Ok(Ok(mut s)) = conn {
                                counts.opened.fetch_add(1, Ordering::Relaxed);
                                // Idle: read until skuad closes (or the flood stops).
                                let mut b = [0u8; 1];
                                let read = async {
                                    use tokio::io::AsyncReadExt;
                                    let _ = s.read(&mut b).await;
                                };
                                let stopped = async {
                                    while !stop.load(Ordering::Relaxed) {
                                        tokio::time::sleep(Duration::from_millis(50)).await;
                                    }
                                };
                                tokio::select! {
                                    () = read => {
                                        counts.closed.fetch_add(1, Ordering::Relaxed);
                                    }
                                    () = stopped => return,
                                }
                            }
                            tokio::time::sleep(Duration::from_millis(250)).await;
                        }
                    }));
                }
            }
            for t in tasks {
                let _ = t.await;
            }
        });
    })
}

/// One `a.example. A` query over TCP on a fresh connection from 127.0.0.1: its rcode, or
/// why there was none within [`ANSWER_WITHIN`].
fn ask_tcp(port: u16, id: u16) -> Result<u8, String> {
    let mut s = TcpStream::connect_timeout(&SocketAddr::new(LO, port), ANSWER_WITHIN)
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    exchange(&mut s, id)
}

fn exchange(s: &mut impl ReadWrite, id: u16) -> Result<u8, String> {
    let q = query(id, "a.example.", 1);
    let mut m = (q.len() as u16).to_be_bytes().to_vec();
    m.extend_from_slice(&q);
    s.write_all(&m).map_err(|e| format!("write: {e}"))?;
    s.flush().map_err(|e| format!("flush: {e}"))?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len).map_err(|e| format!("read: {e}"))?;
    let mut b = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut b).map_err(|e| format!("read: {e}"))?;
    if b.len() < 12 || b[..2] != id.to_be_bytes() {
        return Err(format!("not the answer: {b:?}"));
    }
    Ok(b[3] & 0xf)
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// The same over DNS over TLS (a fresh connection and handshake each time).
fn ask_dot(port: u16, cfg: &Arc<rustls::ClientConfig>, id: u16) -> Result<u8, String> {
    let sock = TcpStream::connect_timeout(&SocketAddr::new(LO, port), ANSWER_WITHIN)
        .map_err(|e| format!("connect: {e}"))?;
    sock.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    let name = rustls_pki_types::ServerName::try_from("dot.test").unwrap();
    let conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    exchange(&mut tls, id)
}

/// A client asking over TCP and TLS, one after the other, for `period`: every failure.
fn keep_asking(
    tcp: u16,
    dot: u16,
    cfg: &Arc<rustls::ClientConfig>,
    period: Duration,
) -> Vec<String> {
    let (t0, mut id, mut failures, mut asked) = (Instant::now(), 0u16, Vec::new(), 0);
    while t0.elapsed() < period {
        id = id.wrapping_add(1);
        asked += 1;
        let at = t0.elapsed();
        match ask_tcp(tcp, id) {
            Ok(0) => {}
            other => failures.push(format!("tcp query {id} at {at:?}: {other:?}")),
        }
        id = id.wrapping_add(1);
        match ask_dot(dot, cfg, id) {
            Ok(0) => {}
            other => failures.push(format!("dot query {id} at {at:?}: {other:?}")),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        asked >= 5 || !failures.is_empty(),
        "the client asked only {asked} times"
    );
    failures
}

/// Waits until every connection of a flood has been tried at least once.
fn ramped(counts: &Counts, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while counts.attempts.load(Ordering::Relaxed) < n {
        assert!(
            Instant::now() < deadline,
            "the flood made {} of its {n} first attempts in 30 s",
            counts.attempts.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn raise_descriptor_limit() {
    // 1,000 flood sockets, the client's, the runtime's: above a shell's soft 1024.
    let have = skua_netio::raise_open_files(4096).expect("getrlimit/setrlimit");
    assert!(
        have >= 1500,
        "the descriptor limit is {have} (hard limit too low for this test: ulimit -Hn)"
    );
}

#[test]
fn idle_connections_from_one_source_or_many_do_not_keep_a_client_out() {
    let _suite = crate::common::suite(module_path!());
    raise_descriptor_limit();
    let dir = Dir::new("idle-flood");
    let ca = test_ca(&dir.0, "flood");
    let (pem, key) = test_leaf(&dir.0, "flood", "leaf", "DNS:dot.test");
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    // 200 slots for TCP and TLS together, the idle timeout 30 s (the default); the
    // per-source limit is left at its default.
    let conf = format!(
        "{}server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n  \
         num-threads: 1\n  incoming-num-tcp: 200\n",
        config(dns, api, &dir.0, ""),
        pem.display(),
        key.display()
    );
    let d = start(&dir.0, &conf, dns, api);
    let cfg = crate::common::TlsClient::config(&ca, &[b"dot"]);
    assert_eq!(ask_tcp(dns, 1), Ok(0));
    assert_eq!(ask_dot(tls, &cfg, 2), Ok(0));
    let metrics = || {
        http(&d, "GET", "/metrics", Some(tok("read")), None)
            .unwrap()
            .body
    };

    // One source, 1,000 idle connections: it gets its 100 (half the slots: no pressure
    // yet), the rest are closed at once, and the client never waits.
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let one = flood(
        dns,
        vec![Ipv4Addr::new(127, 0, 0, 2)],
        1000,
        stop.clone(),
        counts.clone(),
    );
    ramped(&counts, 1000);
    let failures = keep_asking(dns, tls, &cfg, Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    one.join().unwrap();
    assert!(
        failures.is_empty(),
        "with 1,000 idle connections from one source: {failures:#?}"
    );
    let m = metrics();
    let refused = metric_value(
        &m,
        "skua_stream_connections_closed_total{reason=\"per-source-limit\"}",
    );
    assert!(
        refused >= 900,
        "refused for the per-source limit: {refused}\n{m}"
    );

    // A hundred sources, ten idle connections each (within the per-source limit), all
    // reopened as soon as they are closed: every slot is wanted. The idle ones are cut off
    // (the timeout shortened under pressure, the longest idle closed for a new one) and
    // the client still gets every answer in time.
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let sources = (10..110).map(|n| Ipv4Addr::new(127, 0, 0, n)).collect();
    let many = flood(dns, sources, 10, stop.clone(), counts.clone());
    ramped(&counts, 1000);
    let failures = keep_asking(dns, tls, &cfg, Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    many.join().unwrap();
    assert!(
        failures.is_empty(),
        "with 1,000 idle connections from 100 sources: {failures:#?}"
    );
    let m = metrics();
    let cut = metric_value(
        &m,
        "skua_stream_connections_closed_total{reason=\"evicted\"}",
    ) + metric_value(
        &m,
        "skua_stream_connections_closed_total{reason=\"idle-pressure\"}",
    );
    assert!(
        cut > 0 && counts.closed.load(Ordering::Relaxed) > 0,
        "no idle connection was cut off: {m}"
    );
}
