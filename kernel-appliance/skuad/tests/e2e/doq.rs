//! DNS over QUIC (RFC 9250): an `interface:` on `quic-port:` with the `tls-service-*`
//! certificate serves, over UDP, the same answers as plain DNS to a QUIC client (quinn, the
//! client side of the library skuad serves with: no DoQ client ships in Debian bookworm),
//! one query per stream with ID 0, many at once on a connection; pads on request; answers
//! forwarded names; announces its stream limit; closes a connection that breaks the
//! protocol (an ID other than 0, a bad length) with DOQ_PROTOCOL_ERROR; refuses ALPNs
//! other than `doq` and clients the access list denies; and takes a new certificate at a
//! reload: new connections get it, one opened before keeps answering.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;

/// A DoQ client endpoint on `from` trusting `ca`, offering `alpn`.
fn client(from: &str, ca: &Path, alpn: &[u8]) -> quinn::Endpoint {
    let mut cfg = (*TlsClient::config(ca, &[alpn])).clone();
    cfg.enable_early_data = false;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(cfg).unwrap();
    let mut ep = quinn::Endpoint::client(from.parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    ep
}

async fn connect(ep: &quinn::Endpoint, port: u16) -> Result<quinn::Connection, String> {
    let c = ep
        .connect(SocketAddr::new(LO, port), "dot.test")
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(3), c)
        .await
        .map_err(|_| "handshake timed out".to_string())?
        .map_err(|e| e.to_string())
}

/// Sends `msg` with its length on a new stream and reads the answer (without the length).
async fn exchange(conn: &quinn::Connection, msg: &[u8]) -> Result<Vec<u8>, String> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(msg);
    send.write_all(&framed).await.map_err(|e| e.to_string())?;
    send.finish().map_err(|e| e.to_string())?;
    let b = tokio::time::timeout(Duration::from_secs(3), recv.read_to_end(70_000))
        .await
        .map_err(|_| "no answer".to_string())?
        .map_err(|e| e.to_string())?;
    assert!(b.len() >= 14, "short answer {b:?}");
    assert_eq!(usize::from(u16::from_be_bytes([b[0], b[1]])), b.len() - 2);
    Ok(b[2..].to_vec())
}

/// (rcode, the last 4 octets) of an answer.
fn rcode_a(m: &[u8]) -> (u8, [u8; 4]) {
    (m[3] & 0xf, m[m.len() - 4..].try_into().unwrap())
}

/// The query for `name` A with ID 0 and an OPT record carrying an empty Padding option.
fn padded_query(name: &str) -> Vec<u8> {
    let mut q = query(0, name, 1);
    q[11] = 1; // ARCOUNT
    q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 4, 0, 12, 0, 0]);
    q
}

/// The application error code a connection was closed with, once it is.
async fn closed_with(conn: &quinn::Connection) -> Option<u64> {
    match tokio::time::timeout(Duration::from_secs(3), conn.closed()).await {
        Ok(quinn::ConnectionError::ApplicationClosed(c)) => Some(c.error_code.into_inner()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_over_quic_answers_like_udp_and_keeps_to_the_protocol() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("doq");
    let ca = test_ca(&dir.0, "doq");
    let (c1, k1) = test_leaf(&dir.0, "doq", "leaf1", "DNS:dot.test,IP:127.0.0.1");
    let (c2, k2) = test_leaf(&dir.0, "doq", "leaf2", "DNS:dot.test,IP:127.0.0.1");
    let (pem, key) = (dir.0.join("doq.pem"), dir.0.join("doq.key"));
    std::fs::copy(&c1, &pem).unwrap();
    std::fs::copy(&k1, &key).unwrap();
    let up_dir = Dir::new("doq-up");
    let (up_dns, up_api) = (free_port(), free_port());
    let mut up_conf = config(up_dns, up_api, &up_dir.0, "");
    up_conf.push_str(
        "server:\n  local-zone: \"up.example.net.\" static\n  \
         local-data: \"www.up.example.net. 300 IN A 198.18.7.7\"\n",
    );
    let _up = tokio::task::block_in_place(|| start(&up_dir.0, &up_conf, up_dns, up_api));
    let (dns, api, quic) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{quic}\n  quic-port: {quic}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n  do-not-query-localhost: no\n  \
         access-control: 127.0.0.9 deny\n\
         forward-zone:\n  name: \"up.example.net.\"\n  forward-addr: 127.0.0.1@{up_dns}\n",
        pem.display(),
        key.display()
    ));
    let d = tokio::task::block_in_place(|| start(&dir.0, &conf, dns, api));
    assert_eq!(ask(d.dns, "a.example."), (0, 1, [198, 18, 0, 1]));

    let ep = client("127.0.0.1:0", &ca, b"doq");
    let conn = connect(&ep, quic).await.unwrap();
    assert_eq!(
        conn.peer_identity()
            .unwrap()
            .downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
            .unwrap()[0]
            .to_vec(),
        der(&c1)
    );
    // The same answers as over UDP, ID 0 kept.
    let a = exchange(&conn, &query(0, "a.example.", 1)).await.unwrap();
    assert_eq!(&a[..2], &[0, 0]);
    assert_eq!(rcode_a(&a), (0, [198, 18, 0, 1]));
    let nx = exchange(&conn, &query(0, "nx.example.", 1)).await.unwrap();
    assert_eq!(nx[3] & 0xf, 3, "NXDOMAIN");
    // 50 queries at once on one connection, each on its stream.
    let many: Vec<_> = (0..50)
        .map(|_| {
            let conn = conn.clone();
            tokio::spawn(async move { exchange(&conn, &query(0, "a.example.", 1)).await })
        })
        .collect();
    for m in many {
        assert_eq!(rcode_a(&m.await.unwrap().unwrap()), (0, [198, 18, 0, 1]));
    }
    // Padding on request (RFC 9250 §5.4, RFC 8467), and a forwarded name (padded too).
    let p = exchange(&conn, &padded_query("a.example.")).await.unwrap();
    assert_eq!(p.len() % 468, 0, "{} octets", p.len());
    let plain = exchange(&conn, &query(0, "a.example.", 1)).await.unwrap();
    assert!(plain.len() < 468);
    for _ in 0..2 {
        let f = exchange(&conn, &padded_query("www.up.example.net."))
            .await
            .unwrap();
        assert_eq!(f.len() % 468, 0);
        let an = u16::from_be_bytes([f[6], f[7]]);
        assert_eq!(an, 1, "one answer");
    }

    // The stream limit: on a new connection, 100 streams open at once, the 101st waits
    // for one to end.
    let limited = connect(&ep, quic).await.unwrap();
    let mut open = Vec::new();
    for i in 0..100 {
        let s = tokio::time::timeout(Duration::from_secs(2), limited.open_bi())
            .await
            .unwrap_or_else(|_| panic!("stream {i}: no credit"))
            .unwrap();
        open.push(s);
    }
    // A stream counts once the peer sees it: send something on each.
    for (i, (s, _)) in open.iter_mut().enumerate() {
        tokio::time::timeout(Duration::from_secs(2), s.write_all(&[0]))
            .await
            .unwrap_or_else(|_| panic!("stream {i}: write blocked"))
            .unwrap();
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(500), limited.open_bi())
            .await
            .is_err(),
        "a 101st stream while 100 are open"
    );
    // Given up (reset): no protocol error for the server to see.
    for (mut s, _) in open {
        s.reset(0u32.into()).unwrap();
    }

    // A certificate swap: new connections get the new one, this one keeps answering.
    std::fs::copy(&c2, &pem).unwrap();
    std::fs::copy(&k2, &key).unwrap();
    let r = tokio::task::block_in_place(|| {
        http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap()
    });
    assert_eq!(r.status, 200, "{}", r.body);
    // (A new client: one that resumes a session sees the certificate of the session.)
    let ep2 = client("127.0.0.1:0", &ca, b"doq");
    let fresh = connect(&ep2, quic).await.unwrap();
    let cert = fresh
        .peer_identity()
        .unwrap()
        .downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
        .unwrap()[0]
        .to_vec();
    assert_eq!(cert, der(&c2), "the new certificate");
    assert_eq!(
        rcode_a(&exchange(&conn, &query(0, "a.example.", 1)).await.unwrap()),
        (0, [198, 18, 0, 1]),
        "the connection from before the swap answers"
    );

    // Protocol errors close the connection with DOQ_PROTOCOL_ERROR (0x2): a message ID
    // other than 0 (RFC 9250 §4.2.1), a length that does not match.
    let bad = connect(&ep, quic).await.unwrap();
    let _ = exchange(&bad, &query(0x1234, "a.example.", 1)).await;
    assert_eq!(closed_with(&bad).await, Some(2));
    let bad = connect(&ep, quic).await.unwrap();
    let (mut s, _r) = bad.open_bi().await.unwrap();
    let q = query(0, "a.example.", 1);
    let mut framed = ((q.len() + 5) as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).await.unwrap();
    s.finish().unwrap();
    assert_eq!(closed_with(&bad).await, Some(2));
    // And the others keep their answers.
    assert_eq!(
        rcode_a(&exchange(&fresh, &query(0, "a.example.", 1)).await.unwrap()),
        (0, [198, 18, 0, 1])
    );

    // ALPN other than doq: no connection. A denied client: refused before a handshake.
    let h3 = client("127.0.0.1:0", &ca, b"h3");
    assert!(connect(&h3, quic).await.is_err());
    let denied = client("127.0.0.9:0", &ca, b"doq");
    let e = connect(&denied, quic).await.unwrap_err();
    assert!(e.contains("refused"), "{e}");

    let m = tokio::task::block_in_place(|| {
        http(&d, "GET", "/metrics", Some(tok("read")), None)
            .unwrap()
            .body
    });
    let metric = |key: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {m}"))
    };
    assert_eq!(metric("skua_doq_protocol_errors_total"), 2, "{m}");
    assert_eq!(metric("skua_doq_refused_total"), 1, "{m}");
    // a, nx, 50, padded, plain, 2 forwarded, after the swap, after the errors (the bad
    // ones never reach the engine).
    assert_eq!(
        metric("skua_encrypted_queries_total{transport=\"doq\"}"),
        58,
        "{m}"
    );
    assert!(
        metric("skua_tls_handshakes_total{transport=\"doq\",result=\"ok\"}") >= 5,
        "{m}"
    );
    assert!(
        metric("skua_tls_handshakes_total{transport=\"doq\",result=\"failed\"}") >= 1,
        "{m}"
    );
    // The h3 client's: no application protocol in common (RFC 9001 §8.1, TLS alert 120).
    assert!(
        metric("skua_tls_handshake_failures_total{transport=\"doq\",reason=\"alpn\"}") >= 1,
        "{m}"
    );
}

/// The connection slots are shared with TCP (`incoming-num-tcp:`) and QUIC has no backlog:
/// with every slot taken by idle QUIC connections, a new client is not refused, the
/// connection idle longest is closed to make room (or cut off by the idle timeout,
/// shortened with every slot in use) and the newcomer answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_make_room_for_a_new_one() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("doq-slots");
    let ca = test_ca(&dir.0, "doqs");
    let (pem, key) = test_leaf(&dir.0, "doqs", "leaf", "DNS:dot.test,IP:127.0.0.1");
    let (dns, api, quic) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{quic}\n  quic-port: {quic}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n  \
         num-threads: 1\n  incoming-num-tcp: 2\n",
        pem.display(),
        key.display()
    ));
    let d = tokio::task::block_in_place(|| start(&dir.0, &conf, dns, api));
    let ep = client("127.0.0.1:0", &ca, b"doq");
    // Two connections take both slots, each answered once, then left idle.
    let mut idle = Vec::new();
    for _ in 0..2 {
        let c = connect(&ep, quic).await.unwrap();
        let a = exchange(&c, &query(0, "a.example.", 1)).await.unwrap();
        assert_eq!(rcode_a(&a), (0, [198, 18, 0, 1]));
        idle.push(c);
    }
    // A third one is answered...
    let third = connect(&ep, quic)
        .await
        .expect("a new connection was refused with every slot idle");
    let a = exchange(&third, &query(0, "a.example.", 1)).await.unwrap();
    assert_eq!(rcode_a(&a), (0, [198, 18, 0, 1]));
    // ...because the first, idle longest, was closed (DOQ_NO_ERROR).
    assert_eq!(closed_with(&idle[0]).await, Some(0));
    let m = tokio::task::block_in_place(|| {
        http(&d, "GET", "/metrics", Some(tok("read")), None)
            .unwrap()
            .body
    });
    assert_eq!(metric_value(&m, "skua_doq_refused_total"), 0, "{m}");
}
