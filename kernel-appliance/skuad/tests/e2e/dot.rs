//! DNS over TLS (RFC 7858): an `interface:` on `tls-port:` with `tls-service-key:` and
//! `tls-service-pem:` serves the same answers as plain DNS to `kdig +tls` (Knot's client,
//! verifying the chain and the name), pads responses to clients that ask (RFC 7830, RFC
//! 8467), refuses a client whose ALPN lacks `dot`, keeps serving others while a client
//! stalls mid-handshake, and takes a new certificate at a reload without a restart: new
//! handshakes get it, a connection opened before keeps answering on the old one.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use tokio_rustls::rustls;

/// One DNS query in plain TCP framing to `port` ([`ask_tcp`]).
fn plain_tcp(port: u16) -> Option<u8> {
    ask_tcp(SocketAddr::new(LO, port), Duration::from_secs(2))
}

/// `kdig` over TLS ([`kdig_tls`]).
fn kdig(port: u16, ca: &Path, args: &[&str]) -> String {
    kdig_tls(port, ca, args)
}

type Client = TlsClient;

#[test]
fn dns_over_tls_serves_pads_and_takes_a_new_certificate_without_a_restart() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("dot");
    let ca = test_ca(&dir.0, "dot");
    let (c1, k1) = test_leaf(&dir.0, "dot", "leaf1", "DNS:dot.test,IP:127.0.0.1");
    let (c2, k2) = test_leaf(&dir.0, "dot", "leaf2", "DNS:dot.test,IP:127.0.0.1");
    let (pem, key) = (dir.0.join("dot.pem"), dir.0.join("dot.key"));
    std::fs::copy(&c1, &pem).unwrap();
    std::fs::copy(&k1, &key).unwrap();
    // An upstream (another skuad with local data) for names this one forwards.
    let up_dir = Dir::new("dot-up");
    let (up_dns, up_api) = (free_port(), free_port());
    let mut up_conf = config(up_dns, up_api, &up_dir.0, "");
    up_conf.push_str(
        "server:\n  local-zone: \"up.example.net.\" static\n  \
         local-data: \"www.up.example.net. 300 IN A 198.18.7.7\"\n",
    );
    let _up = start(&up_dir.0, &up_conf, up_dns, up_api);
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n  do-not-query-localhost: no\n\
         forward-zone:\n  name: \"up.example.net.\"\n  forward-addr: 127.0.0.1@{up_dns}\n",
        pem.display(),
        key.display()
    ));
    let d = start(&dir.0, &conf, dns, api);

    // The same answers as over UDP.
    let udp = ask(d.dns, "a.example.");
    assert_eq!(udp, (0, 1, [198, 18, 0, 1]));
    let out = kdig(tls, &ca, &["+short", "a.example.", "A"]);
    assert_eq!(out.trim(), "198.18.0.1", "{out}");
    let out = kdig(tls, &ca, &["nx.example.", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    // The TLS port serves no plain DNS.
    assert!(
        std::net::UdpSocket::bind((LO, 0))
            .and_then(|s| {
                s.set_read_timeout(Some(Duration::from_millis(300)))?;
                s.send_to(&query(1, "a.example.", 1), (LO, tls))?;
                s.recv(&mut [0u8; 512])
            })
            .is_err()
    );

    // Padding: only when the query asks (kdig pads over TLS unless +nopadding), to a
    // multiple of 468 (RFC 8467).
    let out = kdig(tls, &ca, &["+padding", "a.example.", "A"]);
    assert_eq!(received(&out) % 468, 0, "{out}");
    assert!(out.contains("PADDING"), "{out}");
    let out = kdig(tls, &ca, &["+nopadding", "a.example.", "A"]);
    assert!(received(&out) < 468, "{out}");
    assert!(!out.contains("PADDING"), "{out}");
    // A forwarded name: resolved through the upstream, padded too; then from the cache.
    for _ in 0..2 {
        let out = kdig(tls, &ca, &["+padding", "www.up.example.net.", "A"]);
        assert!(out.contains("198.18.7.7"), "{out}");
        assert_eq!(received(&out) % 468, 0, "{out}");
    }

    // ALPN: `dot` or none is served; a client offering only another protocol is refused
    // (RFC 7301 §3.2).
    assert!(Client::connect(tls, &ca, &[b"dot"]).is_ok());
    assert!(Client::connect(tls, &ca, &[]).is_ok());
    assert!(Client::connect(tls, &ca, &[b"h2"]).is_err());

    // Plain DNS over TCP to the TLS port gets no DNS answer; a query asking for padding
    // over plain TCP gets none (padding is for encrypted transports).
    assert_eq!(plain_tcp(tls), None);
    let out = Command::new("kdig")
        .args([
            "@127.0.0.1",
            "-p",
            &dns.to_string(),
            "+tcp",
            "+padding",
            "a.example.",
            "A",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(received(&out) < 468 && !out.contains("PADDING"), "{out}");

    // A new certificate: the files replaced, a reload; no restart. A client holding a
    // ticket from before resumes after it (one ticket key for the process).
    let before = Client::config(&ca, &[b"dot"]);
    let mut ticketed = Client::with(tls, before.clone()).unwrap();
    assert_eq!(ticketed.ask("a.example."), (0, [198, 18, 0, 1]));
    drop(ticketed);
    let mut old = Client::connect(tls, &ca, &[b"dot"]).unwrap();
    assert_eq!(old.peer_cert(), der(&c1));
    assert_eq!(old.ask("a.example."), (0, [198, 18, 0, 1]));
    std::fs::copy(&c2, &pem).unwrap();
    std::fs::copy(&k2, &key).unwrap();
    let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let new = Client::connect(tls, &ca, &[b"dot"]).unwrap();
    assert_eq!(
        new.peer_cert(),
        der(&c2),
        "new handshakes get the new certificate"
    );
    let resumed = Client::with(tls, before).unwrap();
    assert_eq!(
        resumed.tls.conn.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed),
        "a ticket from before the swap"
    );
    assert_eq!(
        old.ask("a.example."),
        (0, [198, 18, 0, 1]),
        "the old connection answers"
    );
    assert_eq!(old.peer_cert(), der(&c1));
    let out = kdig(tls, &ca, &["+short", "a.example.", "A"]);
    assert_eq!(out.trim(), "198.18.0.1", "{out}");

    // A key that does not match the certificate: the reload fails, naming the line, and
    // the certificate in force keeps serving.
    std::fs::copy(&k1, &key).unwrap();
    let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("tls-service-pem"), "{}", r.body);
    let again = Client::connect(tls, &ca, &[b"dot"]).unwrap();
    assert_eq!(again.peer_cert(), der(&c2));
    // Session resumption (a ticket from the first connection, read with its answer).
    let cfg = Client::config(&ca, &[b"dot"]);
    let mut first = Client::with(tls, cfg.clone()).unwrap();
    assert_eq!(first.ask("a.example."), (0, [198, 18, 0, 1]));
    drop(first);
    let mut second = Client::with(tls, cfg).unwrap();
    assert_eq!(
        second.tls.conn.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed)
    );
    assert_eq!(second.ask("a.example."), (0, [198, 18, 0, 1]));
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    let count = |result: &str| {
        metric_value(
            &m,
            &format!("skua_tls_handshakes_total{{transport=\"dot\",result=\"{result}\"}}"),
        )
    };
    assert_eq!(count("ok"), 16, "{m}");
    assert_eq!(count("resumed"), 2, "{m}");
    assert_eq!(count("failed"), 2, "{m}");
    assert_eq!(count("timeout"), 0, "{m}");
    // And why: the h2-only client had no protocol in common, plain DNS is not TLS.
    let failures = |reason: &str| {
        metric_value(
            &m,
            &format!("skua_tls_handshake_failures_total{{transport=\"dot\",reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(failures("alpn"), 1, "{m}");
    assert_eq!(failures("protocol"), 1, "{m}");
    assert_eq!(failures("incompatible"), 0, "{m}");
    assert_eq!(failures("closed"), 0, "{m}");
    let _ = SocketAddr::new(LO, tls);
}

/// One DNS over HTTPS GET on a kept HTTP/1.1 connection: (rcode, the last 4 octets).
fn doh_get(c: &mut Client, name: &str) -> (u8, [u8; 4]) {
    let q = data_encoding::BASE64URL_NOPAD.encode(&query(0, name, 1));
    let req = format!("GET /dns-query?dns={q} HTTP/1.1\r\nHost: dot.test\r\n\r\n");
    c.tls.write_all(req.as_bytes()).unwrap();
    c.tls.flush().unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        c.tls.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let mut body = vec![0u8; len];
    c.tls.read_exact(&mut body).unwrap();
    (body[3] & 0xf, body[len - 4..].try_into().unwrap())
}

/// The certificate replaced 20 times under load, DNS over TLS and DNS over HTTPS on one
/// certificate: a `kdig +tls` and a `kdig +https` loop (a new handshake each time) and a
/// connection of each kept open and asking all along see no failure; after each reload
/// the next handshakes have the new certificate; the kept connections answer on the one
/// they began with.
#[test]
fn twenty_certificate_swaps_under_load_lose_nothing() {
    let _suite = crate::common::suite(module_path!());
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let dir = Dir::new("dot-swap");
    let ca = test_ca(&dir.0, "swap");
    let leaves: Vec<_> = (0..2)
        .map(|i| test_leaf(&dir.0, "swap", &format!("leaf{i}"), "DNS:dot.test"))
        .collect();
    let (pem, key) = (dir.0.join("dot.pem"), dir.0.join("dot.key"));
    std::fs::copy(&leaves[0].0, &pem).unwrap();
    std::fs::copy(&leaves[0].1, &key).unwrap();
    let (dns, api, tls, https) = (free_port(), free_port(), free_port(), free_port());
    let audit_key = audit_key(&dir.0);
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         interface: 127.0.0.1@{https}\n  https-port: {https}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n\
         audit:\n  log: \"{}\"\n  key: file:{}\n",
        pem.display(),
        key.display(),
        dir.0.join("audit.log").display(),
        audit_key.display()
    ));
    let d = start(&dir.0, &conf, dns, api);
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Vec<_> = (0..2)
        .map(|_| (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))))
        .collect();
    let loops: Vec<_> = [(tls, "+tls"), (https, "+https")]
        .into_iter()
        .zip(counts.iter().cloned())
        .map(|((port, mode), (ok, bad))| {
            let (stop, ca) = (stop.clone(), ca.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let out = kdig(port, &ca, &[mode, "+short", "a.example.", "A"]);
                    if out.trim() == "198.18.0.1" {
                        ok.fetch_add(1, Ordering::Relaxed);
                    } else {
                        eprintln!("kdig {mode} failed: {out}");
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let mut kept = Client::connect(tls, &ca, &[b"dot"]).unwrap();
    let mut kept_doh = Client::connect(https, &ca, &[b"http/1.1"]).unwrap();
    let first = kept.peer_cert();
    let mut kept_answers = 0;
    for i in 1..=20 {
        let (c, k) = &leaves[i % 2];
        std::fs::copy(c, &pem).unwrap();
        std::fs::copy(k, &key).unwrap();
        let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
        assert_eq!(r.status, 200, "swap {i}: {}", r.body);
        let fresh = Client::connect(tls, &ca, &[b"dot"]).unwrap();
        assert_eq!(fresh.peer_cert(), der(c), "swap {i}: the new certificate");
        let fresh = Client::connect(https, &ca, &[b"h2"]).unwrap();
        assert_eq!(
            fresh.peer_cert(),
            der(c),
            "swap {i}: the new certificate (https)"
        );
        for _ in 0..5 {
            assert_eq!(kept.ask("a.example."), (0, [198, 18, 0, 1]), "swap {i}");
            assert_eq!(
                doh_get(&mut kept_doh, "a.example."),
                (0, [198, 18, 0, 1]),
                "swap {i}"
            );
            kept_answers += 2;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.join().unwrap();
    }
    assert_eq!(
        kept.peer_cert(),
        first,
        "the kept connection stayed on its certificate"
    );
    assert_eq!(kept_doh.peer_cert(), first);
    for ((ok, bad), mode) in counts.iter().zip(["+tls", "+https"]) {
        let (ok, bad) = (ok.load(Ordering::Relaxed), bad.load(Ordering::Relaxed));
        eprintln!("20 swaps: kdig {mode}: {ok} answered, {bad} failed");
        assert_eq!(bad, 0, "kdig {mode}");
        assert!(ok >= 10, "the kdig {mode} loop ran ({ok})");
    }
    eprintln!("{kept_answers} answers on the kept connections");
    // Every swap audited (tls-swapped) with the serial it replaced and the new one; a
    // reload with the same files would not be (none here).
    let serial = |pem: &Path| {
        let out = std::process::Command::new("openssl")
            .args(["x509", "-noout", "-serial", "-in"])
            .arg(pem)
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&out.stdout);
        // skuad shows it as openssl prints it, lower case: compared exactly.
        s.trim().trim_start_matches("serial=").to_ascii_lowercase()
    };
    let serials = [serial(&leaves[0].0), serial(&leaves[1].0)];
    let log = std::fs::read_to_string(dir.0.join("audit.log")).unwrap();
    let swaps: Vec<(String, String)> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "tls-swapped" && e["detail"]["listener"] == "dns")
        .map(|e| {
            let f = |k: &str| e["detail"][k].as_str().unwrap_or("").to_string();
            (f("previous_serial"), f("serial"))
        })
        .collect();
    assert_eq!(swaps.len(), 20, "{log}");
    for (i, (prev, new)) in swaps.iter().enumerate() {
        let i = i + 1;
        assert_eq!(new, &serials[i % 2], "swap {i}: {log}");
        assert_eq!(prev, &serials[(i + 1) % 2], "swap {i}: {log}");
    }
}

/// Clients that stall mid-handshake are cut off after the handshake timeout (here the
/// shorter `tcp-idle-timeout:`) or closed to make room for a new connection, so with every
/// connection slot taken by them a real client still gets its answer; and an address switches between plain DNS and DNS over TLS at a
/// reload, keeping its socket.
#[test]
fn stalled_handshakes_time_out_and_an_address_switches_to_tls_at_a_reload() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("dot-stall");
    let ca = test_ca(&dir.0, "stall");
    let (pem, key) = test_leaf(&dir.0, "stall", "leaf", "DNS:dot.test");
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    let base = config(dns, api, &dir.0, "");
    let plain = format!(
        "{base}server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         incoming-num-tcp: 2\n  tcp-idle-timeout: 1000\n"
    );
    let with_tls = format!(
        "{plain}  tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n",
        pem.display(),
        key.display()
    );
    // First without a certificate: the tls-port interface serves plain DNS.
    let d = start(&dir.0, &plain, dns, api);
    assert_eq!(plain_tcp(tls), Some(0));
    // A reload with the certificate: the same address now serves TLS, and only TLS.
    std::fs::write(&d.conf, &with_tls).unwrap();
    let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let out = kdig(tls, &ca, &["+short", "a.example.", "A"]);
    assert_eq!(out.trim(), "198.18.0.1", "{out}");
    assert_eq!(plain_tcp(tls), None);

    // Both connection slots taken by clients that never finish their handshake.
    let stalled: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect((LO, tls)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let t0 = std::time::Instant::now();
    let out = kdig(tls, &ca, &["+short", "a.example.", "A"]);
    assert_eq!(out.trim(), "198.18.0.1", "{out}");
    let waited = t0.elapsed();
    assert!(
        waited < Duration::from_millis(2500),
        "answered once the stalled ones were cut off ({waited:?})"
    );
    drop(stalled);
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    // kdig got a slot because a stalled one was cut off: by the handshake timeout, or
    // closed to make room for kdig's connection (nothing is owed to a client in its
    // handshake); the other may still be in its handshake when the test closes it.
    let timeouts = metric_value(
        &m,
        "skua_tls_handshakes_total{transport=\"dot\",result=\"timeout\"}",
    );
    let evicted = metric_value(
        &m,
        "skua_stream_connections_closed_total{reason=\"evicted\"}",
    );
    assert!((1..=2).contains(&(timeouts + evicted)), "{m}");

    // And back to plain DNS.
    std::fs::write(&d.conf, &plain).unwrap();
    let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(plain_tcp(tls), Some(0));
}

/// A client pipelining 1,000 queries in one write (RFC 7766 §6.2.1.1) gets 1,000 answers in
/// the order asked, answered and NXDOMAIN alternately: the replies skuad writes together
/// (batches of up to 16 KiB, about 37 KiB here) lose, reorder and duplicate nothing.
#[test]
fn pipelined_queries_are_answered_in_order_across_batches() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("dot-pipe");
    let ca = test_ca(&dir.0, "pipe");
    let (c, k) = test_leaf(&dir.0, "pipe", "leaf", "DNS:dot.test");
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n",
        c.display(),
        k.display()
    ));
    let _d = start(&dir.0, &conf, dns, api);
    let mut client = Client::connect(tls, &ca, &[b"dot"]).unwrap();
    let mut all = Vec::new();
    for id in 0..1000u16 {
        let name = if id % 2 == 0 {
            "a.example."
        } else {
            "nx.example."
        };
        let q = query(id, name, 1);
        all.extend_from_slice(&(q.len() as u16).to_be_bytes());
        all.extend_from_slice(&q);
    }
    client.tls.write_all(&all).unwrap();
    client.tls.flush().unwrap();
    let mut bytes = 0;
    for id in 0..1000u16 {
        let mut len = [0u8; 2];
        client.tls.read_exact(&mut len).unwrap();
        let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
        client.tls.read_exact(&mut m).unwrap();
        bytes += 2 + m.len();
        assert_eq!(u16::from_be_bytes([m[0], m[1]]), id, "answer {id} in order");
        let rcode = m[3] & 0xf;
        assert_eq!(rcode, if id % 2 == 0 { 0 } else { 3 }, "answer {id}");
    }
    assert!(bytes > 2 * 16 * 1024, "several batches: {bytes} octets");
}

/// One message over an open DNS over TLS connection (RFC 7858 §3.3: TCP framing): the
/// reply.
fn exchange(c: &mut Client, m: &[u8]) -> Vec<u8> {
    let mut framed = (m.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(m);
    c.tls.write_all(&framed).unwrap();
    c.tls.flush().unwrap();
    let mut len = [0u8; 2];
    c.tls.read_exact(&mut len).unwrap();
    let mut b = vec![0u8; usize::from(u16::from_be_bytes(len))];
    c.tls.read_exact(&mut b).unwrap();
    b
}

/// `m` with an OPT record added (1232 octets, no flags) holding `options`.
fn with_opt(mut m: Vec<u8>, options: &[u8]) -> Vec<u8> {
    m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
    m.extend_from_slice(&(options.len() as u16).to_be_bytes());
    m.extend_from_slice(options);
    let ar = u16::from_be_bytes([m[10], m[11]]) + 1;
    m[10..12].copy_from_slice(&ar.to_be_bytes());
    m
}

/// A NOTIFY reply's records after its question (`example.org.` SOA, RFC 1996 §3.7): walked
/// here by hand, as (type, rdata) of each.
fn records_after_question(m: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut at = 12 + b"\x07example\x03org\x00".len() + 4;
    let n = u16::from_be_bytes([m[6], m[7]])
        + u16::from_be_bytes([m[8], m[9]])
        + u16::from_be_bytes([m[10], m[11]]);
    let mut out = Vec::new();
    for _ in 0..n {
        // The owner: labels up to the root, or up to a compression pointer.
        loop {
            match m[at] {
                0 => {
                    at += 1;
                    break;
                }
                b if b & 0xc0 == 0xc0 => {
                    at += 2;
                    break;
                }
                b => at += 1 + usize::from(b),
            }
        }
        let t = u16::from_be_bytes([m[at], m[at + 1]]);
        let rdlen = usize::from(u16::from_be_bytes([m[at + 8], m[at + 9]]));
        out.push((t, m[at + 10..at + 10 + rdlen].to_vec()));
        at += 10 + rdlen;
    }
    assert_eq!(at, m.len(), "the reply ends with its last record");
    out
}

#[test]
fn a_notify_over_tls_is_padded_when_asked_and_a_signed_one_is_left_alone() {
    let _suite = crate::common::suite(module_path!());
    use skua_engine::name::WireName;
    use skua_xfr::tsig::{self, Algorithm, Key};
    let dir = Dir::new("dot-notify");
    let ca = test_ca(&dir.0, "dotn");
    let (pem, key) = test_leaf(&dir.0, "dotn", "leaf", "DNS:dot.test,IP:127.0.0.1");
    let secret = *b"0123456789abcdef0123456789abcdef";
    let keyfile = dir.0.join("xfr.key");
    // The secret in base64 (coreutils), mode 600 as `secret: file:` wants it.
    let b64 = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf %s {} | base64 -w0",
            String::from_utf8_lossy(&secret)
        ))
        .output()
        .unwrap()
        .stdout;
    std::fs::write(&keyfile, b64).unwrap();
    std::fs::set_permissions(
        &keyfile,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let (dns, api, tls, primary) = (free_port(), free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    // A secondary zone (its primary never answers: NOTIFY handling needs none) that takes
    // NOTIFY from loopback, unsigned or signed with the key.
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n\
         tsig-key:\n  name: xfr.example.\n  algorithm: hmac-sha256\n  secret: file:{}\n\
         auth-zone:\n  name: example.org.\n  primary: 127.0.0.1@{primary}\n  \
         allow-notify: 127.0.0.0/8 NOKEY\n",
        pem.display(),
        key.display(),
        keyfile.display()
    ));
    let _d = start(&dir.0, &conf, dns, api);
    let apex = WireName::parse("example.org.", None).unwrap();
    // The Padding option, empty (RFC 7830 §3: the client's own padding may be empty).
    let asks = [0u8, 12, 0, 0];
    let mut c = Client::connect(tls, &ca, &[b"dot"]).unwrap();

    // Asked for padding: NOERROR, an OPT record added (RFC 6891 §7), the whole message a
    // multiple of 468 octets (RFC 8467 §4.1), the OPT's only option Padding, all zeros.
    let q = with_opt(skua_xfr::notify::message(0x4e01, &apex, None), &asks);
    let r = exchange(&mut c, &q);
    assert_eq!(&r[..2], &[0x4e, 0x01]);
    assert_eq!((r[2] & 0x80, (r[2] >> 3) & 0xf, r[3] & 0xf), (0x80, 4, 0));
    assert_eq!(r.len() % 468, 0, "padded: {} octets", r.len());
    let recs = records_after_question(&r);
    assert_eq!(recs.len(), 1, "{recs:?}");
    let (t, opt) = &recs[0];
    assert_eq!(*t, 41, "the OPT record");
    assert_eq!(&opt[..2], &[0, 12], "the Padding option");
    let plen = usize::from(u16::from_be_bytes([opt[2], opt[3]]));
    assert_eq!(opt.len(), 4 + plen, "Padding is the only option");
    assert!(opt[4..].iter().all(|&b| b == 0), "padding octets are zero");

    // Not asked (an OPT without Padding, then none at all): the short reply as before.
    for q in [
        with_opt(skua_xfr::notify::message(0x4e02, &apex, None), &[]),
        skua_xfr::notify::message(0x4e03, &apex, None),
    ] {
        let r = exchange(&mut c, &q);
        assert_eq!(r[3] & 0xf, 0);
        assert!(r.len() < 100, "not padded: {} octets", r.len());
        assert!(records_after_question(&r).is_empty());
    }

    // Signed (OPT with Padding, then the TSIG last, RFC 8945 §5.1): the reply is signed,
    // its TSIG last, and no padding follows it (it would break the MAC, RFC 8945 §5.3).
    let k = Key::new(
        &WireName::parse("xfr.example.", None).unwrap(),
        Algorithm::HmacSha256,
        secret.to_vec(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut q = with_opt(skua_xfr::notify::message(0x4e04, &apex, None), &asks);
    let mac = tsig::sign_request(&mut q, &k, now);
    let r = exchange(&mut c, &q);
    assert_eq!(r[3] & 0xf, 0, "signed NOTIFY accepted");
    assert!(r.len() < 468, "not padded: {} octets", r.len());
    let recs = records_after_question(&r);
    assert_eq!(
        recs.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![250],
        "the TSIG alone, last"
    );
    assert!(
        matches!(
            tsig::StreamVerifier::new(&k, &mac).verify(&r, now),
            Ok(true)
        ),
        "the reply's MAC verifies"
    );

    // Over plain TCP a query asking for padding is not padded (padding is for encrypted
    // transports, RFC 7830 §4).
    let q = with_opt(skua_xfr::notify::message(0x4e05, &apex, None), &asks);
    let mut s = TcpStream::connect((LO, dns)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut r = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut r).unwrap();
    assert_eq!(r[3] & 0xf, 0);
    assert!(r.len() < 100, "plain TCP: not padded ({} octets)", r.len());
}

/// `GET /config` lists the encrypted listeners beside UDP and TCP: DNS over TLS, HTTPS and
/// QUIC addresses, the ports that make them, the certificate's paths.
#[test]
fn the_effective_configuration_lists_the_encrypted_listeners() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("dot-effective");
    let ca = test_ca(&dir.0, "dote");
    let (pem, key) = test_leaf(&dir.0, "dote", "leaf", "DNS:dot.test,IP:127.0.0.1");
    let (dns, api, tls, https) = (free_port(), free_port(), free_port(), free_port());
    let quic = free_port();
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         interface: 127.0.0.1@{https}\n  https-port: {https}\n  \
         interface: 127.0.0.1@{quic}\n  quic-port: {quic}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n",
        pem.display(),
        key.display()
    ));
    let d = start(&dir.0, &conf, dns, api);
    let r = http(&d, "GET", "/config", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let s = &r.json()["effective"]["server"];
    let at = |p: u16| serde_json::json!([format!("127.0.0.1:{p}")]);
    assert_eq!(s["udp"], at(dns), "{s}");
    assert_eq!(s["tcp"], at(dns), "{s}");
    assert_eq!(s["tls"], at(tls), "{s}");
    assert_eq!(s["https"], at(https), "{s}");
    assert_eq!(s["https-tls"], true, "{s}");
    assert_eq!(s["doq"], at(quic), "{s}");
    assert_eq!(
        (&s["tls-port"], &s["https-port"], &s["quic-port"]),
        (
            &serde_json::json!(tls),
            &serde_json::json!(https),
            &serde_json::json!(quic)
        ),
        "{s}"
    );
    assert_eq!(s["http-endpoint"], "/dns-query");
    assert_eq!(s["tls-service-pem"], pem.display().to_string());
    assert_eq!(s["tls-service-key"], key.display().to_string());
    // Every one of them answers: the listing is what is served.
    assert_eq!(
        kdig(tls, &ca, &["+short", "a.example.", "A"]).trim(),
        "198.18.0.1"
    );
    assert_eq!(
        kdig(https, &ca, &["+https", "+short", "a.example.", "A"]).trim(),
        "198.18.0.1"
    );
}
