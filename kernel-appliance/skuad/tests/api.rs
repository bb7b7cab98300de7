//! Integration tests of the REST API against a real `skuad` on loopback: every route with
//! and without a token, each role's allowed and denied routes, malformed requests, the
//! failed-authentication limit, zone and record changes served at once and kept across a
//! restart, reload through the API, metrics.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SKUAD: &str = env!("CARGO_BIN_EXE_skuad");
const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

const TOKENS: [(&str, &str); 4] = [
    ("read", "read-token-0123456789"),
    ("dns", "dns-token-01234567890"),
    ("operator", "operator-token-012345"),
    ("admin", "admin-token-012345678"),
];

fn sha256_hex(s: &str) -> String {
    // The test computes the hash with the system's sha256sum: an independent implementation.
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(s.as_bytes())?;
            c.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

fn free_port() -> u16 {
    static USED: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    loop {
        let l = TcpListener::bind((LO, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        if UdpSocket::bind((LO, port)).is_err() {
            continue;
        }
        let mut used = USED.lock().unwrap();
        if !used.contains(&port) {
            used.push(port);
            return port;
        }
    }
}

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("skuad-api-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Daemon {
    child: Child,
    dns: SocketAddr,
    api: SocketAddr,
    conf: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dns_port: u16, api_port: u16, dir: &Path, extra_api: &str) -> String {
    let mut c = format!(
        "server:\n  interface: 127.0.0.1\n  port: {dns_port}\n  access-control: 127.0.0.0/8 allow\n  \
         local-zone: \"example.\" static\n  local-data: \"a.example. 300 IN A 198.18.0.1\"\n\
         api:\n  interface: 127.0.0.1@{api_port}\n  state-file: \"{}\"\n",
        dir.join("state.conf").display()
    );
    for (role, tok) in TOKENS {
        c.push_str(&format!(
            "  token: \"{role}-tok {role} sha256:{}\"\n",
            sha256_hex(tok)
        ));
    }
    c.push_str(extra_api);
    c
}

fn start(dir: &Path, conf_text: &str, dns_port: u16, api_port: u16) -> Daemon {
    let conf = dir.join("skuad.conf");
    std::fs::write(&conf, conf_text).unwrap();
    let child = Command::new(SKUAD)
        .args(["--no-xdp", "--config"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let d = Daemon {
        child,
        dns: SocketAddr::new(LO, dns_port),
        api: SocketAddr::new(LO, api_port),
        conf,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(r) = http(&d, "GET", "/health", None, None)
            && r.status == 200
        {
            return d;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("skuad's API did not come up on {}", d.api);
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: String,
    body: String,
}

impl Resp {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

/// One HTTP/1.1 request (Connection: close), by hand: the test does not share the
/// server's HTTP stack.
fn raw(api: SocketAddr, req: &[u8]) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect_timeout(&api, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(req)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // Bodies here are small; a chunked one is reassembled naively.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut b = String::new();
        let mut rest = body;
        while let Some((len, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            b.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        b
    } else {
        body.to_string()
    };
    Ok(Resp {
        status,
        headers: head.to_string(),
        body,
    })
}

fn http(
    d: &Daemon,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> std::io::Result<Resp> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: skuad\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ));
    } else {
        req.push_str("Content-Length: 0\r\n\r\n");
    }
    raw(d.api, req.as_bytes())
}

fn tok(role: &str) -> &'static str {
    TOKENS.iter().find(|(r, _)| *r == role).unwrap().1
}

fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for l in name.split('.').filter(|l| !l.is_empty()) {
        q.push(l.len() as u8);
        q.extend_from_slice(l.as_bytes());
    }
    q.extend_from_slice(&[0, (qtype >> 8) as u8, qtype as u8, 0, 1]);
    q
}

/// (rcode, ancount, last 4 bytes of the reply: the A record's address when there is one).
fn ask(server: SocketAddr, name: &str) -> (u8, u16, [u8; 4]) {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let q = query(0x4242, name, 1);
    for _ in 0..3 {
        s.send_to(&q, server).unwrap();
        let mut b = [0u8; 1500];
        if let Ok((n, _)) = s.recv_from(&mut b) {
            let b = &b[..n];
            return (
                b[3] & 0xf,
                u16::from_be_bytes([b[6], b[7]]),
                b[n - 4..].try_into().unwrap(),
            );
        }
    }
    panic!("no DNS reply for {name}");
}

/// Every route of the API, with a body that is valid for it.
const ROUTES: &[(&str, &str, Option<&str>, Option<&str>)] = &[
    ("GET", "/health", None, None),
    ("GET", "/openapi.json", None, None),
    ("GET", "/status", Some("read"), None),
    ("GET", "/stats", Some("read"), None),
    ("GET", "/metrics", Some("read"), None),
    ("GET", "/acl", Some("read"), None),
    ("GET", "/zones", Some("read"), None),
    (
        "POST",
        "/zones",
        Some("dns"),
        Some(r#"{"name":"roles.example.net.","type":"static"}"#),
    ),
    ("DELETE", "/zones/roles.example.net.", Some("dns"), None),
    ("GET", "/records", Some("read"), None),
    (
        "POST",
        "/records",
        Some("dns"),
        Some(r#"{"rr":"r.roles.example.net. 60 A 198.18.0.9"}"#),
    ),
    (
        "DELETE",
        "/records?rr=r.roles.example.net.%2060%20A%20198.18.0.9",
        Some("dns"),
        None,
    ),
    ("GET", "/config", Some("operator"), None),
    ("POST", "/reload", Some("operator"), None),
    ("GET", "/audit", Some("operator"), None),
    ("POST", "/audit/verify", Some("admin"), None),
];

const ROLES: [&str; 4] = ["read", "dns", "operator", "admin"];

fn rank(r: &str) -> usize {
    ROLES.iter().position(|x| *x == r).unwrap()
}

#[test]
fn every_route_with_and_without_tokens_and_roles() {
    let dir = Dir::new("roles");
    let (p, a) = (free_port(), free_port());
    let d = start(
        &dir.0,
        &config(p, a, &dir.0, "  auth-fail-limit: 1000\n"),
        p,
        a,
    );
    for &(m, path, need, body) in ROUTES {
        let r = http(&d, m, path, None, body).unwrap();
        match need {
            None => assert_eq!(r.status, 200, "{m} {path} without token: {r:?}"),
            Some(_) => {
                assert_eq!(r.status, 401, "{m} {path} without token: {r:?}");
                assert_eq!(r.code(), "unauthorized");
                assert!(
                    r.headers
                        .to_ascii_lowercase()
                        .contains("www-authenticate: bearer"),
                    "{r:?}"
                );
                let r = http(&d, m, path, Some("not-a-token-0123456789"), body).unwrap();
                assert_eq!(r.status, 401, "{m} {path} bad token: {r:?}");
            }
        }
    }
    for role in ROLES {
        for &(m, path, need, body) in ROUTES {
            let Some(need) = need else { continue };
            let r = http(&d, m, path, Some(tok(role)), body).unwrap();
            if rank(role) >= rank(need) {
                assert!(
                    r.status != 401 && r.status != 403,
                    "{role} must be allowed {m} {path}: {r:?}"
                );
            } else {
                assert_eq!(r.status, 403, "{role} must be denied {m} {path}: {r:?}");
                assert_eq!(r.code(), "forbidden");
                assert!(
                    r.json()["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains(need)
                );
            }
        }
    }
}

#[test]
fn failed_authentications_are_limited_per_source() {
    let dir = Dir::new("limit");
    let (p, a) = (free_port(), free_port());
    let d = start(
        &dir.0,
        &config(p, a, &dir.0, "  auth-fail-limit: 3\n"),
        p,
        a,
    );
    for i in 0..3 {
        let r = http(&d, "GET", "/status", Some("wrong-token-0123456789"), None).unwrap();
        assert_eq!(r.status, 401, "attempt {i}: {r:?}");
    }
    // Past the limit, even a good token gets 429 until the minute is over; /health stays.
    let r = http(&d, "GET", "/status", Some(tok("admin")), None).unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "too_many_auth_failures"),
        "{r:?}"
    );
    assert_eq!(http(&d, "GET", "/health", None, None).unwrap().status, 200);
}

#[test]
fn malformed_requests_get_clear_4xx() {
    let dir = Dir::new("malformed");
    let (p, a) = (free_port(), free_port());
    let d = start(&dir.0, &config(p, a, &dir.0, "  max-body: 1k\n"), p, a);
    let t = Some(tok("admin"));
    let cases: &[(&str, &str, Option<&str>, u16, &str)] = &[
        ("POST", "/zones", Some("{not json"), 400, "invalid_json"),
        (
            "POST",
            "/zones",
            Some(r#"{"name":"x.test."}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/zones",
            Some(r#"{"name":"x.test.","type":"static","ttl":3}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/zones",
            Some(r#"{"name":5,"type":"static"}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/zones",
            Some(r#"{"name":"x.test.","type":"bogus"}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/records",
            Some(r#"{"rr":"a.x.test. A 1.2.3"}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/records",
            Some(r#"{"rr":"a.example. 300 IN A 198.18.0.1"}"#),
            409,
            "conflict",
        ),
        ("DELETE", "/zones/example.", None, 409, "conflict"),
        ("DELETE", "/zones/nothere.test.", None, 404, "not_found"),
        ("DELETE", "/records", None, 400, "invalid_request"),
        ("GET", "/nothere", None, 404, "not_found"),
        ("PUT", "/zones", Some("{}"), 405, "method_not_allowed"),
    ];
    for &(m, path, body, status, code) in cases {
        let r = http(&d, m, path, t, body).unwrap();
        assert_eq!(
            (r.status, r.code().as_str()),
            (status, code),
            "{m} {path} {body:?}: {r:?}"
        );
        assert!(!r.json()["error"]["message"].as_str().unwrap().is_empty());
    }
    let big = format!(r#"{{"rr":"{}"}}"#, "a".repeat(2000));
    let r = http(&d, "POST", "/records", t, Some(&big)).unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (413, "body_too_large"),
        "{r:?}"
    );
    let req = format!(
        "POST /zones HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {}\r\n\
         Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{{}}",
        tok("admin")
    );
    let r = raw(d.api, req.as_bytes()).unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (415, "unsupported_media_type"),
        "{r:?}"
    );
    // A record that conflicts with the configuration's data does not compile: 422, and the
    // old data keeps being served.
    let r = http(
        &d,
        "POST",
        "/records",
        t,
        Some(r#"{"rr":"a.example. 300 CNAME b.example."}"#),
    )
    .unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "invalid_config"),
        "{r:?}"
    );
    assert_eq!(ask(d.dns, "a.example."), (0, 1, [198, 18, 0, 1]));
}

#[test]
fn changes_are_served_at_once_and_survive_a_restart() {
    let dir = Dir::new("crud");
    let (p, a) = (free_port(), free_port());
    let text = config(p, a, &dir.0, "");
    let d = start(&dir.0, &text, p, a);
    let t = Some(tok("dns"));
    assert_eq!(
        ask(d.dns, "www.api.example.net.").0,
        5,
        "outside every zone: REFUSED"
    );
    let r = http(
        &d,
        "POST",
        "/zones",
        t,
        Some(r#"{"name":"API.example.net.","type":"static"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    let r = http(
        &d,
        "POST",
        "/records",
        t,
        Some(r#"{"rr":"www.api.example.net. 60 A 198.18.7.7"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    // The write returns once the new engine serves: the very next query sees it.
    let served = Instant::now();
    assert_eq!(ask(d.dns, "www.api.example.net."), (0, 1, [198, 18, 7, 7]));
    assert!(served.elapsed() < Duration::from_millis(100));
    assert_eq!(
        ask(d.dns, "nope.api.example.net.").0,
        3,
        "static zone: NXDOMAIN"
    );
    let r = http(
        &d,
        "POST",
        "/records",
        t,
        Some(r#"{"rr":"www.api.example.net. 60 A 198.18.7.7"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 409, "duplicate: {r:?}");
    let zones = http(&d, "GET", "/zones", t, None).unwrap().json();
    let z = zones["zones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["name"] == "api.example.net.")
        .expect("zone listed");
    assert_eq!(z["source"], "api");
    let recs = http(&d, "GET", "/records?zone=api.example.net.", t, None)
        .unwrap()
        .json();
    assert_eq!(
        recs["records"][0]["rr"],
        "www.api.example.net. 60 IN A 198.18.7.7"
    );
    assert_eq!(recs["records"].as_array().unwrap().len(), 1);
    // Restart: the state file brings them back.
    drop(d);
    let state = std::fs::read_to_string(dir.0.join("state.conf")).unwrap();
    assert!(
        state.contains("www.api.example.net. 60 IN A 198.18.7.7"),
        "{state}"
    );
    let d = start(&dir.0, &text, p, a);
    assert_eq!(ask(d.dns, "www.api.example.net."), (0, 1, [198, 18, 7, 7]));
    let r = http(
        &d,
        "DELETE",
        "/records?rr=www.api.example.net.%2060%20A%20198.18.7.7",
        t,
        None,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(ask(d.dns, "www.api.example.net.").0, 3);
    let r = http(&d, "DELETE", "/zones/api.example.net.", t, None).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(ask(d.dns, "www.api.example.net.").0, 5);
    // Reload through the API: a new record in the main file appears; a broken file is
    // rejected with its line and the old configuration keeps serving.
    std::fs::write(
        &d.conf,
        text.replace(
            "  local-data: \"a.example. 300 IN A 198.18.0.1\"\n",
            "  local-data: \"a.example. 300 IN A 198.18.0.1\"\n  local-data: \"b.example. 300 IN A 198.18.0.2\"\n",
        ),
    )
    .unwrap();
    let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(ask(d.dns, "b.example."), (0, 1, [198, 18, 0, 2]));
    std::fs::write(&d.conf, text.replace("A 198.18.0.1", "A 198.18.0")).unwrap();
    let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "invalid_config"),
        "{r:?}"
    );
    assert!(r.body.contains("skuad.conf:6"), "{r:?}");
    assert_eq!(ask(d.dns, "b.example."), (0, 1, [198, 18, 0, 2]));
    // Metrics count what was asked.
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None).unwrap();
    assert!(m.headers.contains("text/plain"), "{m:?}");
    let line = m
        .body
        .lines()
        .find(|l| l.starts_with("skua_queries_total{path=\"socket\"}"))
        .expect("queries line");
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 2, "{line}");
    assert!(
        m.body
            .contains("skua_responses_total{path=\"socket\",rcode=\"NOERROR\"}")
    );
    assert!(
        m.body
            .contains("skua_query_duration_seconds_bucket{path=\"socket\",le=\"+Inf\"}")
    );
    let s = http(&d, "GET", "/stats", Some(tok("read")), None)
        .unwrap()
        .json();
    assert!(s["socket"]["queries"].as_u64().unwrap() >= n);
}

#[test]
fn health_without_token() {
    let dir = Dir::new("health");
    let (p, a) = (free_port(), free_port());
    let d = start(&dir.0, &config(p, a, &dir.0, ""), p, a);
    let r = http(&d, "GET", "/health", None, None).unwrap();
    assert_eq!(r.json()["status"], "ok");
    assert_eq!(r.json()["dataplane"]["state"], "sockets");
    let r = http(&d, "GET", "/openapi.json", None, None).unwrap();
    assert_eq!(r.json()["openapi"], "3.0.3");
}
