//! DNS over HTTPS (RFC 8484): an `interface:` on `https-port:` with the `tls-service-*`
//! certificate serves the same answers as plain DNS to real clients — `kdig +https` (POST
//! and GET), `dig +https`, curl over HTTP/2 and HTTP/1.1 and curl's own resolver
//! (`--doh-url`) — with Cache-Control from the answer's TTL, padding on request, names
//! the resolver forwards; refuses what is not a DNS query with a clear HTTP status; holds
//! HTTP/2 floods (streams past `http-max-streams:`, rapid resets), slow clients and idle
//! connections to their bounds while another client keeps its answers; answers many
//! HTTP/2 streams on one connection each with its own answer, a client's small
//! flow-control window, a slow POST body without holding the others up; serves plain HTTP
//! with `http-notls-downstream:`; and closes connections past a netblock's
//! `tcp-connection-limit:`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;

fn b64url(q: &[u8]) -> String {
    data_encoding::BASE64URL_NOPAD.encode(q)
}

/// `kdig` over HTTPS to `port` (POST unless `+https-get` is in `args`) ([`kdig_tls`]).
fn kdig(port: u16, ca: &Path, args: &[&str]) -> String {
    let mut a = vec!["+https"];
    a.extend_from_slice(args);
    kdig_tls(port, ca, &a)
}

/// What curl got: status, headers (lower case), body.
struct Got {
    status: u16,
    headers: String,
    body: Vec<u8>,
}

impl Got {
    /// The DNS answer's (rcode, last 4 octets).
    fn dns(&self) -> (u8, [u8; 4]) {
        let b = &self.body;
        assert!(b.len() >= 16, "not a DNS answer: {}", self.headers);
        (b[3] & 0xf, b[b.len() - 4..].try_into().unwrap())
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .map(str::trim)
    }
}

/// curl to `url` with `args` (certificates of `ca`, `dot.test` resolved to 127.0.0.1).
fn curl(ca: &Path, url: &str, args: &[&str]) -> Got {
    let tmp = std::env::temp_dir().join(format!(
        "skua-doh-body-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let out = Command::new("curl")
        .args(["-s", "-S", "--max-time", "5", "-D", "-", "-o"])
        .arg(&tmp)
        .arg("--cacert")
        .arg(ca)
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    let headers = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase()
        + &String::from_utf8_lossy(&out.stderr);
    let status = headers
        .lines()
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = std::fs::read(&tmp).unwrap_or_default();
    let _ = std::fs::remove_file(&tmp);
    Got {
        status,
        headers,
        body,
    }
}

/// A DNS over HTTPS URL on `port` for `dot.test`, with curl's `--resolve` for it.
fn url(port: u16, path: &str) -> (String, String) {
    (
        format!("https://dot.test:{port}{path}"),
        format!("dot.test:{port}:127.0.0.1"),
    )
}

/// curl GET of the query for `name`/`qtype`.
fn get(ca: &Path, port: u16, name: &str, qtype: u16, http: &str) -> Got {
    let (u, resolve) = url(
        port,
        &format!("/dns-query?dns={}", b64url(&query(0, name, qtype))),
    );
    curl(ca, &u, &["--resolve", &resolve, http])
}

/// curl POST of `body` with `ctype`.
fn post(ca: &Path, port: u16, body: &[u8], ctype: &str, http: &str) -> Got {
    let (u, resolve) = url(port, "/dns-query");
    let f = std::env::temp_dir().join(format!(
        "skua-doh-post-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&f, body).unwrap();
    let g = curl(
        ca,
        &u,
        &[
            "--resolve",
            &resolve,
            http,
            "-H",
            &format!("content-type: {ctype}"),
            "--data-binary",
            &format!("@{}", f.display()),
        ],
    );
    let _ = std::fs::remove_file(&f);
    g
}

/// Certificates for `dot.test` and 127.0.0.1: (CA, certificate, key).
fn certs(dir: &Path, tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let ca = test_ca(dir, tag);
    let (c, k) = test_leaf(dir, tag, "leaf", "DNS:dot.test,IP:127.0.0.1");
    (ca, c, k)
}

#[test]
fn dns_over_https_answers_real_clients_like_udp() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("doh");
    let (ca, pem, key) = certs(&dir.0, "doh");
    // An upstream (another skuad with local data) for names this one forwards.
    let up_dir = Dir::new("doh-up");
    let (up_dns, up_api) = (free_port(), free_port());
    let mut up_conf = config(up_dns, up_api, &up_dir.0, "");
    up_conf.push_str(
        "server:\n  local-zone: \"up.example.net.\" static\n  \
         local-data: \"www.up.example.net. 120 IN A 198.18.7.7\"\n",
    );
    let _up = start(&up_dir.0, &up_conf, up_dns, up_api);
    let (dns, api, https) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{https}\n  https-port: {https}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n  do-not-query-localhost: no\n  \
         local-data: \"example. 3600 IN SOA ns.example. admin.example. 1 3600 600 86400 900\"\n  \
         local-data: \"short.example. 42 IN A 198.18.0.42\"\n  \
         local-data: \"api.example. 60 IN A 127.0.0.1\"\n\
         forward-zone:\n  name: \"up.example.net.\"\n  forward-addr: 127.0.0.1@{up_dns}\n",
        pem.display(),
        key.display()
    ));
    let d = start(&dir.0, &conf, dns, api);
    assert_eq!(ask(d.dns, "a.example."), (0, 1, [198, 18, 0, 1]));

    // kdig: POST (its default) and GET, over HTTP/2.
    let out = kdig(https, &ca, &["+short", "a.example.", "A"]);
    assert_eq!(out.trim(), "198.18.0.1", "{out}");
    let out = kdig(https, &ca, &["+https-get", "+short", "a.example.", "A"]);
    assert_eq!(out.trim(), "198.18.0.1", "{out}");
    let out = kdig(https, &ca, &["nx.example.", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    // Padding when the query asks (RFC 7830, 468-octet blocks of RFC 8467).
    let out = kdig(https, &ca, &["+padding", "a.example.", "A"]);
    assert_eq!(received(&out) % 468, 0, "{out}");
    let out = kdig(https, &ca, &["+nopadding", "a.example.", "A"]);
    assert!(received(&out) < 468, "{out}");

    // BIND's dig, POST and GET.
    for get_arg in ["+https", "+https-get"] {
        let out = Command::new("dig")
            .args(["@127.0.0.1", "-p", &https.to_string(), get_arg])
            .arg(format!("+tls-ca={}", ca.display()))
            .args(["+tls-hostname=dot.test", "+short", "+timeout=3", "+tries=1"])
            .args(["a.example.", "A"])
            .output()
            .expect("dig (bind9-dnsutils)");
        let out = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.trim(), "198.18.0.1", "dig {get_arg}: {out}");
    }

    // curl, HTTP/2 and HTTP/1.1, GET and POST: the answer, its media type, and a
    // freshness lifetime of the answer's TTL (RFC 8484 §5.1); a negative answer's from the
    // SOA (RFC 2308 §5: the smaller of its TTL and MINIMUM).
    for http in ["--http2", "--http1.1"] {
        let g = get(&ca, https, "short.example.", 1, http);
        assert_eq!(g.status, 200, "{http}: {}", g.headers);
        let version = if http == "--http2" {
            "http/2 "
        } else {
            "http/1.1 "
        };
        assert!(g.headers.starts_with(version), "{}", g.headers);
        assert_eq!(g.dns(), (0, [198, 18, 0, 42]));
        assert_eq!(g.header("content-type"), Some("application/dns-message"));
        assert_eq!(
            g.header("cache-control"),
            Some("max-age=42"),
            "{}",
            g.headers
        );
        let g = post(
            &ca,
            https,
            &query(0, "a.example.", 1),
            "application/dns-message",
            http,
        );
        assert_eq!(g.status, 200, "{http}: {}", g.headers);
        assert_eq!(g.dns(), (0, [198, 18, 0, 1]));
        assert_eq!(g.header("cache-control"), Some("max-age=300"));
        let g = get(&ca, https, "nx.example.", 1, http);
        assert_eq!(g.status, 200);
        assert_eq!(g.body[3] & 0xf, 3, "NXDOMAIN");
        assert_eq!(
            g.header("cache-control"),
            Some("max-age=900"),
            "{}",
            g.headers
        );
    }
    // A forwarded name: resolved through the upstream (the resolver answers the request
    // later), by GET and POST, then from the cache with the TTL counting down.
    let g = get(&ca, https, "www.up.example.net.", 1, "--http2");
    assert_eq!(
        (g.status, g.dns()),
        (200, (0, [198, 18, 7, 7])),
        "{}",
        g.headers
    );
    let age: u32 = g
        .header("cache-control")
        .and_then(|v| v.strip_prefix("max-age="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!((100..=120).contains(&age), "{age}");
    let g = post(
        &ca,
        https,
        &query(0, "www.up.example.net.", 1),
        "application/dns-message",
        "--http1.1",
    );
    assert_eq!((g.status, g.dns()), (200, (0, [198, 18, 7, 7])));
    let out = kdig(https, &ca, &["+padding", "www.up.example.net.", "A"]);
    assert!(out.contains("198.18.7.7"), "{out}");
    assert_eq!(
        received(&out) % 468,
        0,
        "a forwarded answer padded too: {out}"
    );

    // curl's own resolver over DNS over HTTPS: api.example resolves (through skuad) to
    // 127.0.0.1, where skuad's API answers /health.
    let out = Command::new("curl")
        .args(["-s", "-S", "--max-time", "5", "--cacert"])
        .arg(&ca)
        .arg("--doh-url")
        .arg(format!("https://127.0.0.1:{https}/dns-query"))
        .arg(format!("http://api.example:{api}/health"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl --doh-url: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // What is not a DNS query: a clear status each, and the connection's other requests
    // unaffected.
    let (u, resolve) = url(https, "/dns-query?dns=not*base64");
    assert_eq!(curl(&ca, &u, &["--resolve", &resolve]).status, 400);
    let (u, resolve) = url(https, "/dns-query?name=a.example");
    assert_eq!(curl(&ca, &u, &["--resolve", &resolve]).status, 400);
    let (u, resolve) = url(https, "/dns-query?dns=AAAA");
    assert_eq!(
        curl(&ca, &u, &["--resolve", &resolve]).status,
        400,
        "shorter than a header"
    );
    let (u, resolve) = url(
        https,
        &format!("/resolve?dns={}", b64url(&query(0, "a.example.", 1))),
    );
    assert_eq!(curl(&ca, &u, &["--resolve", &resolve]).status, 404);
    let g = post(
        &ca,
        https,
        &query(0, "a.example.", 1),
        "application/json",
        "--http2",
    );
    assert_eq!(g.status, 415, "{}", g.headers);
    let g = post(
        &ca,
        https,
        &vec![0u8; 70_000],
        "application/dns-message",
        "--http2",
    );
    assert_eq!(g.status, 413);
    let g = post(
        &ca,
        https,
        &vec![0u8; 70_000],
        "application/dns-message",
        "--http1.1",
    );
    assert_eq!(g.status, 413);
    // A DNS response sent as a query.
    let mut resp = query(0, "a.example.", 1);
    resp[2] |= 0x80;
    let g = post(&ca, https, &resp, "application/dns-message", "--http2");
    assert_eq!(g.status, 400);
    let (u, resolve) = url(https, "/dns-query");
    let g = curl(&ca, &u, &["--resolve", &resolve, "-X", "PUT"]);
    assert_eq!(g.status, 405);
    assert_eq!(g.header("allow"), Some("get, post"));
    // DNS over TLS is not served on the HTTPS port (ALPN `dot` refused).
    assert!(TlsClient::connect(https, &ca, &[b"dot"]).is_err());

    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    assert_eq!(
        metric_value(&m, "skua_doh_requests_total{result=\"refused\"}"),
        9,
        "{m}"
    );
    // kdig 6, dig 2, curl 8, curl's resolver 2 (A and AAAA).
    assert_eq!(
        metric_value(&m, "skua_doh_requests_total{result=\"answered\"}"),
        18,
        "{m}"
    );
    assert_eq!(
        metric_value(&m, "skua_doh_requests_total{result=\"unavailable\"}"),
        0,
        "{m}"
    );
    // And the response sent as a query reached the engine.
    assert_eq!(
        metric_value(&m, "skua_encrypted_queries_total{transport=\"doh\"}"),
        19,
        "{m}"
    );
    assert!(
        metric_value(
            &m,
            "skua_tls_handshakes_total{transport=\"doh\",result=\"ok\"}"
        ) >= 25,
        "{m}"
    );
    assert_eq!(
        metric_value(
            &m,
            "skua_tls_handshakes_total{transport=\"doh\",result=\"failed\"}"
        ),
        1,
        "ALPN dot: {m}"
    );
    assert_eq!(
        metric_value(&m, "skua_doh_buffer_bytes{buffer=\"query\"}"),
        0,
        "{m}"
    );
    assert_eq!(
        metric_value(&m, "skua_doh_buffer_bytes{buffer=\"response\"}"),
        0,
        "{m}"
    );
}

/// Raw HTTP/2 over TLS (RFC 9113 frames written by hand, header blocks as HPACK literals
/// without indexing): what no polite client library sends.
struct RawH2 {
    c: TlsClient,
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;

fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[ty, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK string literal's length (RFC 7541 §5.1, 7-bit prefix, no Huffman).
fn hpack_len(out: &mut Vec<u8>, mut n: usize) {
    if n < 127 {
        out.push(n as u8);
        return;
    }
    out.push(127);
    n -= 127;
    while n >= 128 {
        out.push((n % 128 + 128) as u8);
        n /= 128;
    }
    out.push(n as u8);
}

fn hpack(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in headers {
        // Literal header field without indexing, new name (RFC 7541 §6.2.2).
        out.push(0);
        hpack_len(&mut out, n.len());
        out.extend_from_slice(n.as_bytes());
        hpack_len(&mut out, v.len());
        out.extend_from_slice(v.as_bytes());
    }
    out
}

impl RawH2 {
    fn connect(port: u16, ca: &Path) -> RawH2 {
        Self::connect_with(port, ca, &[])
    }

    /// A connection whose SETTINGS carry `settings` (6-octet entries).
    fn connect_with(port: u16, ca: &Path, settings: &[u8]) -> RawH2 {
        let mut c = TlsClient::connect(port, ca, &[b"h2"]).unwrap();
        c.tls
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .unwrap();
        c.tls.write_all(&frame(SETTINGS, 0, 0, settings)).unwrap();
        c.tls.flush().unwrap();
        RawH2 { c }
    }

    /// A GET for `name` on `stream` (END_HEADERS | END_STREAM).
    fn get(&self, stream: u32, name: &str) -> Vec<u8> {
        let path = format!("/dns-query?dns={}", b64url(&query(0, name, 1)));
        let block = hpack(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", &path),
            (":authority", "dot.test"),
        ]);
        frame(HEADERS, 0x4 | 0x1, stream, &block)
    }

    /// A POST's header block for a body of `len` octets on `stream` (END_HEADERS; the
    /// body follows in DATA frames).
    fn post_headers(&self, stream: u32, len: usize) -> Vec<u8> {
        let len = len.to_string();
        let block = hpack(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":path", "/dns-query"),
            (":authority", "dot.test"),
            ("content-type", "application/dns-message"),
            ("content-length", &len),
        ]);
        frame(HEADERS, 0x4, stream, &block)
    }

    fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.c.tls.write_all(bytes)?;
        self.c.tls.flush()
    }

    /// The next frame: (type, flags, stream, payload); acknowledges the server's
    /// SETTINGS. `None` at the end of the connection or after `wait` of silence.
    fn next(&mut self, wait: Duration) -> Option<(u8, u8, u32, Vec<u8>)> {
        self.c.tls.sock.set_read_timeout(Some(wait)).unwrap();
        let mut h = [0u8; 9];
        self.c.tls.read_exact(&mut h).ok()?;
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let stream = u32::from_be_bytes(h[5..9].try_into().unwrap()) & 0x7fff_ffff;
        let mut p = vec![0u8; len];
        self.c.tls.read_exact(&mut p).ok()?;
        if h[3] == SETTINGS && h[4] & 1 == 0 {
            let _ = self.send(&frame(SETTINGS, 1, 0, &[]));
        }
        Some((h[3], h[4], stream, p))
    }
}

/// A client asking all along in the background (kdig over HTTPS, a new connection each
/// time): counts of answers and failures.
struct Bystander {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    bad: Arc<AtomicU64>,
    worst: Arc<AtomicU64>,
    t: Option<std::thread::JoinHandle<()>>,
}

impl Bystander {
    fn start(port: u16, ca: &Path) -> Bystander {
        let stop = Arc::new(AtomicBool::new(false));
        let (ok, bad, worst) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let t = {
            let (stop, ok, bad, worst, ca) = (
                stop.clone(),
                ok.clone(),
                bad.clone(),
                worst.clone(),
                ca.to_path_buf(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    let out = kdig(port, &ca, &["+short", "a.example.", "A"]);
                    worst.fetch_max(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
                    if out.trim() == "198.18.0.1" {
                        ok.fetch_add(1, Ordering::Relaxed);
                    } else {
                        eprintln!("bystander failed: {out}");
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        Bystander {
            stop,
            ok,
            bad,
            worst,
            t: Some(t),
        }
    }

    /// Stops it: (answered, failed, slowest in ms).
    fn finish(mut self) -> (u64, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.t.take() {
            t.join().unwrap();
        }
        (
            self.ok.load(Ordering::Relaxed),
            self.bad.load(Ordering::Relaxed),
            self.worst.load(Ordering::Relaxed),
        )
    }
}

#[test]
fn http2_floods_slow_and_idle_clients_are_bounded_and_others_keep_their_answers() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("doh-flood");
    let (ca, pem, key) = certs(&dir.0, "flood");
    let (dns, api, https) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{https}\n  https-port: {https}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n  http-max-streams: 4\n  \
         tcp-idle-timeout: 1500\n",
        pem.display(),
        key.display()
    ));
    let d = start(&dir.0, &conf, dns, api);
    let by = Bystander::start(https, &ca);

    // The server announces http-max-streams (SETTINGS_MAX_CONCURRENT_STREAMS, id 3).
    let mut h2 = RawH2::connect(https, &ca);
    let (ty, _, _, p) = h2.next(Duration::from_secs(3)).unwrap();
    assert_eq!(ty, SETTINGS);
    let max_streams = p
        .chunks(6)
        .find(|s| s[..2] == [0, 3])
        .map(|s| u32::from_be_bytes(s[2..6].try_into().unwrap()));
    assert_eq!(max_streams, Some(4));
    // 20 streams opened at once: 4 at a time are served, the others refused with
    // RST_STREAM REFUSED_STREAM (RFC 9113 §5.1.2), each stream answered or refused.
    let burst: Vec<u8> = (0..20u32)
        .flat_map(|i| h2.get(1 + 2 * i, "a.example."))
        .collect();
    h2.send(&burst).unwrap();
    let (mut answered, mut refused) = (0, 0);
    while answered + refused < 20 {
        let Some((ty, flags, _, p)) = h2.next(Duration::from_secs(3)) else {
            panic!("{answered} answered, {refused} refused, then silence");
        };
        match ty {
            DATA if flags & 1 == 1 => answered += 1,
            RST_STREAM => {
                assert_eq!(p, 7u32.to_be_bytes(), "REFUSED_STREAM");
                refused += 1;
            }
            GOAWAY => panic!("GOAWAY after {answered} answers"),
            _ => {}
        }
    }
    eprintln!("20 streams at once, limit 4: {answered} answered, {refused} refused");
    assert!(
        answered >= 4 && refused >= 1,
        "{answered} answered, {refused} refused"
    );

    // Rapid reset (CVE-2023-44487): streams opened and reset at once, thousands of them:
    // the connection is told to go away (ENHANCE_YOUR_CALM) or closed.
    let mut flood = RawH2::connect(https, &ca);
    let mut burst = Vec::new();
    for i in 0..5000u32 {
        let id = 1 + 2 * i;
        burst.extend_from_slice(&flood.get(id, "a.example."));
        burst.extend_from_slice(&frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    let _ = flood.send(&burst);
    let t0 = Instant::now();
    let mut goaway = None;
    let mut closed = false;
    while t0.elapsed() < Duration::from_secs(5) {
        let t1 = Instant::now();
        match flood.next(Duration::from_secs(2)) {
            Some((GOAWAY, _, _, p)) => {
                goaway = Some(u32::from_be_bytes(p[4..8].try_into().unwrap()));
                break;
            }
            Some(_) => {}
            None => {
                // The end of the connection (not silence): closed with the flood unread,
                // the kernel resets it and the GOAWAY before may be lost with it.
                closed = t1.elapsed() < Duration::from_millis(1900);
                break;
            }
        }
    }
    eprintln!(
        "rapid reset: GOAWAY {goaway:?}, closed {closed}, after {:?}",
        t0.elapsed()
    );
    assert!(
        goaway == Some(0xb) || (goaway.is_none() && closed),
        "ENHANCE_YOUR_CALM or the connection closed: {goaway:?}"
    );

    // A slow HTTP/1.1 client that never finishes its headers is cut off after the idle
    // timeout; one that never finishes its body gets 400 then.
    let mut slow = TlsClient::connect(https, &ca, &[b"http/1.1"]).unwrap();
    slow.tls
        .write_all(b"GET /dns-query HTTP/1.1\r\nHost: dot.test\r\n")
        .unwrap();
    slow.tls.flush().unwrap();
    let t0 = Instant::now();
    slow.tls
        .sock
        .set_read_timeout(Some(Duration::from_secs(6)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = slow.tls.read_to_end(&mut rest);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1200) && took < Duration::from_millis(4000),
        "headers timeout after {took:?}"
    );
    let mut slow = TlsClient::connect(https, &ca, &[b"http/1.1"]).unwrap();
    slow.tls
        .write_all(
            b"POST /dns-query HTTP/1.1\r\nHost: dot.test\r\nContent-Type: application/dns-message\r\nContent-Length: 40\r\n\r\n0123456789",
        )
        .unwrap();
    slow.tls.flush().unwrap();
    slow.tls
        .sock
        .set_read_timeout(Some(Duration::from_secs(6)))
        .unwrap();
    let mut head = [0u8; 12];
    slow.tls.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 400");

    // An HTTP/2 connection left idle is closed (GOAWAY, then the end) after the idle
    // timeout.
    let mut idle = RawH2::connect(https, &ca);
    idle.send(&idle.get(1, "a.example.")).unwrap();
    let t0 = Instant::now();
    let mut went_away = false;
    while let Some((ty, ..)) = idle.next(Duration::from_secs(5)) {
        went_away |= ty == GOAWAY;
    }
    let took = t0.elapsed();
    assert!(went_away, "GOAWAY before the close");
    assert!(
        took >= Duration::from_millis(1200) && took < Duration::from_millis(4500),
        "idle close after {took:?}"
    );

    let (ok, bad, worst) = by.finish();
    eprintln!("bystander: {ok} answered, {bad} failed, slowest {worst} ms");
    assert_eq!(bad, 0);
    assert!(ok >= 5, "the bystander ran ({ok})");
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    assert!(metric_value(&m, "skua_doh_idle_closed_total") >= 1, "{m}");
}

#[test]
fn http2_streams_each_get_their_own_answer_and_a_slow_body_holds_no_one_up() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("doh-streams");
    let (ca, pem, key) = certs(&dir.0, "streams");
    let (dns, api, https) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{https}\n  https-port: {https}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n",
        pem.display(),
        key.display()
    ));
    const N: u32 = 80;
    for i in 0..N {
        conf.push_str(&format!(
            "  local-data: \"s{i}.example. 60 IN A 198.18.1.{i}\"\n"
        ));
    }
    let _d = start(&dir.0, &conf, dns, api);
    let mut h2 = RawH2::connect(https, &ca);
    // The answer's address: what the stream's own name has.
    let want = |stream: u32| [198, 18, 1, ((stream - 1) / 2) as u8];

    // N streams in one write, GETs and POSTs (header block and body together) in turn:
    // each answered (200), with its own name's address, however the answers are batched.
    let mut burst = Vec::new();
    for i in 0..N {
        let id = 1 + 2 * i;
        let name = format!("s{i}.example.");
        if i % 2 == 0 {
            burst.extend_from_slice(&h2.get(id, &name));
        } else {
            let q = query(0, &name, 1);
            burst.extend_from_slice(&h2.post_headers(id, q.len()));
            burst.extend_from_slice(&frame(DATA, 0x1, id, &q));
        }
    }
    h2.send(&burst).unwrap();
    let mut bodies: std::collections::HashMap<u32, Vec<u8>> = Default::default();
    let mut done = 0;
    let mut statuses = 0;
    while done < N {
        let Some((ty, flags, stream, p)) = h2.next(Duration::from_secs(5)) else {
            panic!("{done} of {N} streams answered, then silence");
        };
        match ty {
            // :status 200 is the static table's index 8 (RFC 7541 appendix A), which
            // an encoder sends indexed (0x88).
            HEADERS => {
                assert_eq!(p.first(), Some(&0x88), "stream {stream}: status 200");
                statuses += 1;
            }
            DATA => {
                bodies.entry(stream).or_default().extend_from_slice(&p);
                if flags & 1 == 1 {
                    done += 1;
                }
            }
            RST_STREAM | GOAWAY => panic!("frame {ty} on stream {stream}: {p:?}"),
            _ => {}
        }
    }
    assert_eq!(statuses, N);
    for (stream, body) in &bodies {
        assert_eq!(body[..2], [0, 0], "stream {stream}: the query's ID");
        assert_eq!(body[body.len() - 4..], want(*stream), "stream {stream}");
    }
    assert_eq!(bodies.len(), N as usize);

    // A client whose streams' window (SETTINGS_INITIAL_WINDOW_SIZE, id 4) is 20 octets,
    // smaller than the answer: it gets the first 20 at once, the rest once it opens the
    // window (WINDOW_UPDATE, RFC 9113 §6.9), not nothing.
    let mut small = RawH2::connect_with(https, &ca, &[0, 4, 0, 0, 0, 20]);
    small.send(&small.get(1, "s3.example.")).unwrap();
    let mut got = Vec::new();
    loop {
        let Some((ty, flags, stream, p)) = small.next(Duration::from_secs(3)) else {
            panic!("nothing of the answer within a 20-octet window: {got:?}");
        };
        if ty == DATA && stream == 1 {
            assert!(p.len() <= 20 && flags & 1 == 0, "{} octets", p.len());
            got.extend_from_slice(&p);
            if got.len() == 20 {
                break;
            }
        }
    }
    small
        .send(&frame(WINDOW_UPDATE, 0, 1, &1000u32.to_be_bytes()))
        .unwrap();
    loop {
        let Some((ty, flags, stream, p)) = small.next(Duration::from_secs(3)) else {
            panic!("the rest of the answer never came: {got:?}");
        };
        if ty == DATA && stream == 1 {
            got.extend_from_slice(&p);
            if flags & 1 == 1 {
                break;
            }
        }
    }
    assert!(got.ends_with(&[198, 18, 1, 3]), "{got:?}");

    // A POST whose body comes slowly, in two pieces: a GET sent after its headers is
    // answered first, and the POST gets its answer once the body is whole.
    let slow = 1 + 2 * N;
    let q = query(0, "s7.example.", 1);
    h2.send(&h2.post_headers(slow, q.len())).unwrap();
    h2.send(&frame(DATA, 0, slow, &q[..5])).unwrap();
    let quick = slow + 2;
    h2.send(&h2.get(quick, "s9.example.")).unwrap();
    let t0 = Instant::now();
    let mut quick_answer = None;
    while quick_answer.is_none() {
        let Some((ty, flags, stream, p)) = h2.next(Duration::from_secs(3)) else {
            panic!("no answer to the GET behind a slow POST");
        };
        assert!(
            !(stream == slow && matches!(ty, HEADERS | DATA)),
            "the slow POST answered before its body ended"
        );
        if ty == DATA && flags & 1 == 1 && stream == quick {
            quick_answer = Some(p);
        }
    }
    let quick_answer = quick_answer.unwrap();
    assert!(quick_answer.ends_with(&[198, 18, 1, 9]), "{quick_answer:?}");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    std::thread::sleep(Duration::from_millis(300));
    h2.send(&frame(DATA, 0x1, slow, &q[5..])).unwrap();
    loop {
        let Some((ty, flags, stream, p)) = h2.next(Duration::from_secs(3)) else {
            panic!("no answer to the slow POST");
        };
        if ty == DATA && flags & 1 == 1 && stream == slow {
            assert!(p.ends_with(&[198, 18, 1, 7]), "{p:?}");
            break;
        }
    }
}

#[test]
fn plain_http_behind_a_proxy_and_per_netblock_connection_limits() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("doh-plain");
    let (dns, api, http_port) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{http_port}\n  https-port: {http_port}\n  \
         http-notls-downstream: yes\n  http-endpoint: /q\n  \
         tcp-connection-limit: 127.0.0.0/8 3\n  tcp-connection-limit: 127.0.0.7 0\n"
    ));
    let d = start(&dir.0, &conf, dns, api);
    let q = b64url(&query(0, "a.example.", 1));
    // HTTP/2 without TLS (prior knowledge) and HTTP/1.1, on the configured endpoint.
    for http in ["--http2-prior-knowledge", "--http1.1"] {
        let out = Command::new("curl")
            .args([
                "-s",
                "-S",
                "--max-time",
                "5",
                http,
                "-o",
                "-",
                "-w",
                "%{http_code}",
            ])
            .arg(format!("http://127.0.0.1:{http_port}/q?dns={q}"))
            .output()
            .unwrap();
        let b = out.stdout;
        assert!(
            b.ends_with(b"200"),
            "{http}: {}",
            String::from_utf8_lossy(&b)
        );
        let msg = &b[..b.len() - 3];
        assert_eq!(&msg[msg.len() - 4..], &[198, 18, 0, 1], "{http}");
    }
    // /dns-query is not the endpoint here.
    let r = raw(
        std::net::SocketAddr::new(LO, http_port),
        format!("GET /dns-query?dns={q} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(r.status, 404);

    // tcp-connection-limit: three connections at once from 127.0.0.0/8; a fourth is
    // closed at once; 127.0.0.7 (its own rule, limit 0) none at all. Plain DNS over TCP
    // counts the same.
    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect((LO, http_port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let closed_at_once = |s: &mut TcpStream| {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        matches!(s.read(&mut [0u8; 1]), Ok(0) | Err(_))
    };
    let mut fourth = TcpStream::connect((LO, http_port)).unwrap();
    let t0 = Instant::now();
    assert!(closed_at_once(&mut fourth));
    assert!(t0.elapsed() < Duration::from_millis(1500), "closed at once");
    assert_eq!(
        ask_tcp(d.dns, Duration::from_secs(1)),
        None,
        "TCP counts too"
    );
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(ask_tcp(d.dns, Duration::from_secs(2)), Some(0));
    let seven = std::net::SocketAddr::new("127.0.0.7".parse().unwrap(), 0);
    let mut s = connect_from(seven, http_port);
    assert!(closed_at_once(&mut s), "127.0.0.7 has a limit of 0");
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    assert_eq!(
        metric_value(&m, "skua_tcp_connection_limit_closed_total"),
        3,
        "{m}"
    );
}

/// A TCP connection to 127.0.0.1:`port` from the source address `from` (bound before
/// connecting, which std cannot do).
fn connect_from(from: std::net::SocketAddr, port: u16) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind(from).unwrap();
        let c = s
            .connect(std::net::SocketAddr::new(LO, port))
            .await
            .unwrap();
        let c = c.into_std().unwrap();
        c.set_nonblocking(false).unwrap();
        c
    })
}
