//! Integration tests of the REST API against a real `skuad` on loopback: every route with
//! and without a token, each role's allowed and denied routes, malformed requests, the
//! failed-authentication limit, zone and record changes served at once and kept across a
//! restart, reload through the API, metrics.

use crate::common::*;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

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
    ("GET", "/zones/example.", Some("read"), None),
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
    // No forward-zone here: the cache routes answer 409 (cache.rs has a resolver).
    (
        "GET",
        "/cache/lookup?name=www.example.net.",
        Some("operator"),
        None,
    ),
    (
        "POST",
        "/cache/flush",
        Some("operator"),
        Some(r#"{"all":true}"#),
    ),
    ("GET", "/cache/dump", Some("operator"), None),
    (
        "POST",
        "/cache/load",
        Some("admin"),
        Some("skua-cache-dump 1 written=0\neof rrsets=0 messages=0\n"),
    ),
    ("GET", "/resolver/upstreams", Some("read"), None),
    ("GET", "/ha", Some("read"), None),
    (
        "POST",
        "/ha/lease",
        Some("operator"),
        Some(r#"{"ttl_ms":100}"#),
    ),
    ("POST", "/ha/release", Some("operator"), Some("{}")),
    ("GET", "/sync", Some("operator"), None),
    ("GET", "/tls", Some("read"), None),
    // No acme: clause here: 409 (acme.rs has one).
    ("POST", "/tls/renew", Some("operator"), None),
];

const ROLES: [&str; 4] = ["read", "dns", "operator", "admin"];

fn rank(r: &str) -> usize {
    ROLES.iter().position(|x| *x == r).unwrap()
}

#[test]
fn every_route_with_and_without_tokens_and_roles() {
    let _suite = crate::common::suite(module_path!());
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
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("limit");
    let (p, a) = (free_port(), free_port());
    let d = start(
        &dir.0,
        &config(p, a, &dir.0, "  auth-fail-limit: 3\n"),
        p,
        a,
    );
    for i in 0..3 {
        let r = http(&d, "GET", "/status", None, None).unwrap();
        assert_eq!(r.status, 401, "attempt {i}: {r:?}");
    }
    // Past the limit, failures get 429 until the minute is over...
    let r = http(&d, "GET", "/status", Some("wrong-token-0123456789"), None).unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "too_many_auth_failures"),
        "{r:?}"
    );
    // ...but a valid token still passes: token-less requests from any local process must
    // not lock the operator out.
    let r = http(&d, "GET", "/status", Some(tok("read")), None).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(http(&d, "GET", "/health", None, None).unwrap().status, 200);
}

/// The paths of docs/openapi.json with their parameters filled in.
fn documented_paths() -> Vec<(String, Vec<String>)> {
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/openapi.json"
        ))
        .unwrap(),
    )
    .unwrap();
    doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, item)| {
            let methods = item
                .as_object()
                .unwrap()
                .keys()
                .map(|m| m.to_uppercase())
                .collect();
            (p.replace("{name}", "example."), methods)
        })
        .collect()
}

/// Every documented route × every method × (no token, a wrong token, each role): the
/// expected status, and every refusal in the audit log (aggregated entries count theirs).
/// HEAD used to skip authentication altogether (`HEAD /config` without a token: 200).
#[test]
fn route_method_role_matrix() {
    let _suite = crate::common::suite(module_path!());
    use std::os::unix::fs::PermissionsExt;
    const METHODS: [&str; 8] = [
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE",
    ];
    let dir = Dir::new("matrix");
    let key = dir.0.join("k.hex");
    std::fs::write(&key, "33".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let log = dir.0.join("audit.log");
    let (p, a) = (free_port(), free_port());
    let mut conf = config(p, a, &dir.0, "  auth-fail-limit: 100000\n");
    conf.push_str(&format!(
        "audit:\n  log: \"{}\"\n  key: \"file:{}\"\n",
        log.display(),
        key.display()
    ));
    let mut d = start(&dir.0, &conf, p, a);
    let public = ["/health", "/openapi.json"];
    let mut refusals = 0u64;
    let mut checked = 0;
    for (path, documented) in documented_paths() {
        let routed = |m: &str| {
            let m = if m == "HEAD" { "GET" } else { m };
            documented.iter().any(|x| x == m)
        };
        let need = |m: &str| {
            let m = if m == "HEAD" { "GET" } else { m };
            ROUTES
                .iter()
                .find(|(rm, rp, _, _)| {
                    *rm == m
                        && rp
                            .split('?')
                            .next()
                            .unwrap()
                            .replace("roles.example.net.", "example.")
                            == path
                })
                .and_then(|r| r.2)
        };
        for m in METHODS {
            let body = (m == "POST" || m == "PUT" || m == "PATCH").then_some("{}");
            let is_public = public.contains(&path.as_str());
            for t in [None, Some("wrong-token-0123456789")] {
                let r = http(&d, m, &path, t, body).unwrap();
                let want = match (is_public, routed(m)) {
                    (true, true) => 200,
                    (true, false) => 405,
                    (false, _) => 401,
                };
                assert_eq!(r.status, want, "{m} {path} token {t:?}: {r:?}");
                if want == 401 {
                    refusals += 1;
                }
                checked += 1;
            }
            if is_public {
                continue;
            }
            for role in ROLES {
                let r = http(&d, m, &path, Some(tok(role)), body).unwrap();
                checked += 1;
                if !routed(m) {
                    assert_eq!(r.status, 405, "{role} {m} {path}: {r:?}");
                    continue;
                }
                let need = need(m).unwrap_or_else(|| panic!("no role for {m} {path}"));
                if rank(role) >= rank(need) {
                    assert!(
                        ![401, 403, 405, 429].contains(&r.status),
                        "{role} {m} {path}: {r:?}"
                    );
                } else {
                    assert_eq!(r.status, 403, "{role} {m} {path}: {r:?}");
                    refusals += 1;
                }
            }
        }
    }
    // An unknown path needs a token too (404 only for a caller who has one).
    assert_eq!(http(&d, "GET", "/nope", None, None).unwrap().status, 401);
    assert_eq!(
        http(&d, "GET", "/nope", Some(tok("read")), None)
            .unwrap()
            .status,
        404
    );
    refusals += 1;
    assert!(checked > 400, "{checked}");
    // SIGTERM flushes the open aggregation windows; then every refusal is accounted for.
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) }, 0);
    let _ = d.child.wait();
    let entries = skua_audit::tail(&log, 100_000).unwrap();
    let failures: Vec<_> = entries
        .iter()
        .filter(|e| e.kind == "auth-failure")
        .collect();
    let counted: u64 = failures
        .iter()
        .map(|e| e.detail["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, refusals, "{failures:?}");
    // One source, one window: per actor (anonymous, and the read, dns and operator tokens
    // refused for their role) the first refusal at once and the rest in one entry.
    assert!(failures.len() <= 8, "{}", failures.len());
}

#[test]
fn malformed_requests_get_clear_4xx() {
    let _suite = crate::common::suite(module_path!());
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
    let _suite = crate::common::suite(module_path!());
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
    assert_eq!(ask(d.dns, "www.api.example.net."), (0, 1, [198, 18, 7, 7]));
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
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("health");
    let (p, a) = (free_port(), free_port());
    let d = start(&dir.0, &config(p, a, &dir.0, ""), p, a);
    let r = http(&d, "GET", "/health", None, None).unwrap();
    assert_eq!(r.json()["status"], "ok");
    assert_eq!(r.json()["dataplane"]["state"], "sockets");
    let r = http(&d, "GET", "/openapi.json", None, None).unwrap();
    assert_eq!(r.json()["openapi"], "3.0.3");
}

/// Listeners and tokens change with a reload: an address added and removed, the thread
/// count changed under a steady query stream (no query lost), a token replaced.
#[test]
fn reload_changes_listeners_and_tokens() {
    let _suite = crate::common::suite(module_path!());
    use std::net::UdpSocket;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let dir = Dir::new("listeners");
    let (p, a, p2) = (free_port(), free_port(), free_port());
    let text = config(p, a, &dir.0, "");
    let d = start(&dir.0, &text, p, a);
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, lost) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let pinger = {
        let (stop, sent, lost, server) = (stop.clone(), sent.clone(), lost.clone(), d.dns);
        std::thread::spawn(move || {
            let s = UdpSocket::bind((LO, 0)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut id = 0u16;
            while !stop.load(Ordering::Relaxed) {
                id = id.wrapping_add(1);
                let q = query(id, "a.example.", 1);
                s.send_to(&q, server).unwrap();
                sent.fetch_add(1, Ordering::Relaxed);
                let mut b = [0u8; 512];
                match s.recv_from(&mut b) {
                    Ok((n, _)) if n > 2 && b[..2] == q[..2] => {}
                    _ => {
                        lost.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    let reload = |conf: &str| {
        std::fs::write(&d.conf, conf).unwrap();
        http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap()
    };
    // A second address.
    let two = text.replace(
        "  interface: 127.0.0.1\n",
        &format!("  interface: 127.0.0.1\n  interface: 127.0.0.1@{p2}\n"),
    );
    let r = reload(&two);
    assert_eq!(r.status, 200, "{r:?}");
    let second = SocketAddr::new(LO, p2);
    assert_eq!(ask(second, "a.example."), (0, 1, [198, 18, 0, 1]));
    // Two threads per address, then back to one: the sockets are rebound under load.
    for threads in [2, 1, 2] {
        let r = reload(&two.replace("  port:", &format!("  num-threads: {threads}\n  port:")));
        assert_eq!(r.status, 200, "{r:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // The second address removed: it no longer answers, the first still does.
    let r = reload(&text);
    assert_eq!(r.status, 200, "{r:?}");
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    s.send_to(&query(7, "a.example.", 1), second).unwrap();
    assert!(
        s.recv_from(&mut [0u8; 512]).is_err(),
        "removed address answered"
    );
    stop.store(true, Ordering::Relaxed);
    pinger.join().unwrap();
    let (sent, lost) = (sent.load(Ordering::Relaxed), lost.load(Ordering::Relaxed));
    assert!(sent > 100, "{sent}");
    assert_eq!(
        lost, 0,
        "{lost} of {sent} queries lost while listeners changed"
    );
    // A token replaced: the old one stops working at once, the new one works.
    let new_tok = "fresh-operator-token-0123";
    let swapped = text.replace(
        &format!(
            "operator-tok operator sha256:{}",
            sha256_hex(tok("operator"))
        ),
        &format!("operator-tok operator sha256:{}", sha256_hex(new_tok)),
    );
    let r = reload(&swapped);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        http(&d, "GET", "/config", Some(tok("operator")), None)
            .unwrap()
            .status,
        401
    );
    assert_eq!(
        http(&d, "GET", "/config", Some(new_tok), None)
            .unwrap()
            .status,
        200
    );
}

/// With `tls-cert:`/`tls-key:` the API speaks HTTPS only (checked with curl against the
/// self-signed certificate as the only trust anchor).
#[test]
fn https_when_a_certificate_is_configured() {
    let _suite = crate::common::suite(module_path!());
    use std::process::{Command, Stdio};
    let dir = Dir::new("tls");
    let (cert, key) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
    let self_signed = |cert: &Path, key: &Path| {
        let ok = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
            ])
            .arg(key)
            .arg("-out")
            .arg(cert)
            .stderr(Stdio::null())
            .status()
            .expect("openssl")
            .success();
        assert!(ok);
    };
    self_signed(&cert, &key);
    let (p, a) = (free_port(), free_port());
    let mut text = config(
        p,
        a,
        &dir.0,
        &format!(
            "  tls-cert: \"{}\"\n  tls-key: \"{}\"\n",
            cert.display(),
            key.display()
        ),
    );
    text.push_str(&format!(
        "audit:\n  log: \"{}\"\n  key: file:{}\n",
        dir.0.join("audit.log").display(),
        audit_key(&dir.0).display()
    ));
    let conf = dir.0.join("skuad.conf");
    std::fs::write(&conf, text).unwrap();
    // A private key others can read is refused, with the reason.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = Command::new(SKUAD)
            .args(["--no-xdp", "--config"])
            .arg(&conf)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("mode 644"), "{err}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut child = Command::new(SKUAD)
        .args(["--no-xdp", "--config"])
        .arg(&conf)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let trusted = dir.0.join("trusted.pem");
    std::fs::copy(&cert, &trusted).unwrap();
    let curl_as = |method: &str, path: &str, token: Option<&str>| -> (String, String) {
        let mut c = Command::new("curl");
        c.args(["-s", "--max-time", "5", "-X", method, "--cacert"])
            .arg(&trusted);
        c.args(["-w", "\n%{http_code}"]);
        if let Some(t) = token {
            c.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        c.arg(format!("https://127.0.0.1:{a}{path}"));
        let out = String::from_utf8_lossy(&c.output().unwrap().stdout).into_owned();
        let (body, code) = out.rsplit_once('\n').unwrap_or(("", ""));
        (code.to_string(), body.to_string())
    };
    let curl = |path: &str, token: Option<&str>| curl_as("GET", path, token);
    let deadline = Instant::now() + Duration::from_secs(20);
    while curl("/health", None).0 != "200" {
        assert!(Instant::now() < deadline, "no HTTPS API");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, body) = curl("/status", Some(tok("read")));
    assert_eq!(code, "200", "{body}");
    assert!(body.contains("\"version\""), "{body}");
    assert_eq!(curl("/status", None).0, "401");
    // Plain HTTP on the HTTPS port gets nothing useful.
    let r = raw(
        SocketAddr::new(LO, a),
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(r.map(|r| r.status != 200).unwrap_or(true));
    // A new certificate and a reload: new connections get it (the old one is trusted no
    // more), and the swap is audited before it serves.
    let (cert2, key2) = (dir.0.join("cert2.pem"), dir.0.join("key2.pem"));
    self_signed(&cert2, &key2);
    std::fs::copy(&cert2, &cert).unwrap();
    std::fs::copy(&key2, &key).unwrap();
    let (code, body) = curl_as("POST", "/reload", Some(tok("operator")));
    assert_eq!(code, "200", "{body}");
    assert_ne!(
        curl("/health", None).0,
        "200",
        "the old certificate is not served"
    );
    std::fs::copy(&cert2, &trusted).unwrap();
    assert_eq!(curl("/health", None).0, "200", "the new one is");
    let log = std::fs::read_to_string(dir.0.join("audit.log")).unwrap();
    let swaps: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "tls-swapped")
        .collect();
    assert_eq!(swaps.len(), 1, "{log}");
    assert_eq!(swaps[0]["detail"]["listener"], "api", "{log}");
    assert_eq!(
        swaps[0]["detail"]["file"],
        cert.display().to_string(),
        "{log}"
    );
    assert_ne!(
        swaps[0]["detail"]["serial"], swaps[0]["detail"]["previous_serial"],
        "{log}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The audit log records start, writes (done and refused), failed authentications,
/// reloads (with a key rotation) and stop; `GET /audit` and `POST /audit/verify` read it;
/// an edit of the file is reported.
#[test]
fn audit_log_records_state_changes() {
    let _suite = crate::common::suite(module_path!());
    use std::os::unix::fs::PermissionsExt;
    let dir = Dir::new("audit");
    let (k1, k2) = (dir.0.join("k1.hex"), dir.0.join("k2.hex"));
    for (k, hex) in [(&k1, "11".repeat(32)), (&k2, "22".repeat(32))] {
        std::fs::write(k, hex).unwrap();
        std::fs::set_permissions(k, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let log = dir.0.join("audit.log");
    let (p, a) = (free_port(), free_port());
    let base = config(p, a, &dir.0, "");
    let with_keys = |keys: &[&Path]| {
        let mut c = base.clone();
        c.push_str(&format!("audit:\n  log: \"{}\"\n", log.display()));
        for k in keys {
            c.push_str(&format!("  key: \"file:{}\"\n", k.display()));
        }
        c
    };
    let d = start(&dir.0, &with_keys(&[&k1]), p, a);
    let t = Some(tok("dns"));
    let r = http(
        &d,
        "POST",
        "/zones",
        t,
        Some(r#"{"name":"audited.example.net.","type":"static"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    let r = http(
        &d,
        "POST",
        "/zones",
        t,
        Some(r#"{"name":"audited.example.net.","type":"static"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 409, "{r:?}");
    assert_eq!(
        http(&d, "GET", "/status", Some("wrong-token-0123456789"), None)
            .unwrap()
            .status,
        401
    );
    // Rotate to k2 with a reload.
    std::fs::write(&d.conf, with_keys(&[&k1, &k2])).unwrap();
    let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let tail = http(&d, "GET", "/audit?n=50", Some(tok("operator")), None)
        .unwrap()
        .json();
    let kinds: Vec<&str> = tail["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "start",
            "api-write",
            "api-write",
            "auth-failure",
            "key-rotation",
            "reload"
        ],
        "{tail}"
    );
    let e = &tail["entries"][1];
    assert_eq!(e["actor"], "dns-tok");
    assert_eq!(e["source"], "127.0.0.1");
    assert_eq!(e["detail"]["result"], "ok");
    assert_eq!(tail["entries"][2]["detail"]["result"], "refused");
    let v = http(&d, "POST", "/audit/verify", Some(tok("admin")), None).unwrap();
    assert_eq!(v.status, 200, "{v:?}");
    assert_eq!(v.json()["ok"], true, "{v:?}");
    // SIGTERM: a stop entry, and the whole file verifies with both keys.
    let pid = d.child.id() as i32;
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let mut d = d;
    let _ = d.child.wait();
    let keys = [
        skua_audit::AuditKey::from_file(&k1).unwrap(),
        skua_audit::AuditKey::from_file(&k2).unwrap(),
    ];
    let rep = skua_audit::verify(&log, &keys, None).unwrap();
    assert!(rep.is_ok(), "{}", rep.to_json());
    assert_eq!(rep.rotations, 1);
    let last = skua_audit::tail(&log, 1).unwrap();
    assert_eq!(last[0].kind, "stop");
    // An edited entry is found, by the daemon's verifier too.
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, text.replacen("dns-tok", "xyz-tok", 1)).unwrap();
    let rep = skua_audit::verify(&log, &keys, None).unwrap();
    assert_eq!(
        rep.first_bad.as_ref().map(|b| b.seq),
        Some(Some(1)),
        "{}",
        rep.to_json()
    );
}

/// Config with an audit log at `log` (key in `dir`).
fn with_audit(dir: &Path, p: u16, a: u16, log: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let key = dir.join("audit.key");
    std::fs::write(&key, "55".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut conf = config(p, a, dir, "");
    conf.push_str(&format!(
        "audit:\n  log: \"{}\"\n  key: \"file:{}\"\n",
        log.display(),
        key.display()
    ));
    conf
}

fn api_writes(log: &Path) -> Vec<serde_json::Value> {
    skua_audit::tail(log, 1000)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "api-write")
        .map(|e| e.detail)
        .collect()
}

/// Writes are audited in their canonical form with the request's SHA-256, and request
/// fields are bounded before they are parsed: a record padded with a 70 KB comment (which
/// canonicalised to 30 bytes, was served, and whose audit entry was dropped for its size)
/// is refused, and its refusal is in the log.
#[test]
fn writes_are_audited_canonical_and_bounded() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("canon");
    let log = dir.0.join("audit.log");
    let (p, a) = (free_port(), free_port());
    let d = start(&dir.0, &with_audit(&dir.0, p, a, &log), p, a);
    let t = Some(tok("dns"));
    let raw = "WWW.Example. IN 300 A 198.18.0.7";
    let r = http(
        &d,
        "POST",
        "/records",
        t,
        Some(&format!(r#"{{"rr":"{raw}"}}"#)),
    )
    .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    let padded = format!("p.example. 300 A 198.18.0.5 ;{}", "x".repeat(70_000));
    let r = http(
        &d,
        "POST",
        "/records",
        t,
        Some(&format!(r#"{{"rr":"{padded}"}}"#)),
    )
    .unwrap();
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_request"),
        "{r:?}"
    );
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 8192")
    );
    assert_eq!(
        ask(d.dns, "p.example.").0,
        3,
        "the padded record must not be served"
    );
    let long = format!("q.example.%20300%20A%20198.18.0.5%20;{}", "y".repeat(9_000));
    let r = http(&d, "DELETE", &format!("/records?rr={long}"), t, None).unwrap();
    assert_eq!(r.status, 400, "{r:?}");
    let r = http(
        &d,
        "DELETE",
        "/records?rr=www.EXAMPLE.%20300%20A%20198.18.0.7",
        t,
        None,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let w = api_writes(&log);
    assert_eq!(w.len(), 4, "{w:?}");
    assert_eq!(w[0]["result"], "ok");
    assert_eq!(
        w[0]["changes"][0],
        "add record www.example. 300 IN A 198.18.0.7"
    );
    assert_eq!(w[0]["request_sha256"][0], sha256_hex(raw));
    assert_eq!(w[1]["result"], "refused");
    assert_eq!(
        w[1]["changes"][0],
        format!("add record (sha256 {})", sha256_hex(&padded))
    );
    assert_eq!(w[2]["result"], "refused");
    assert_eq!(w[3]["result"], "ok");
    assert_eq!(
        w[3]["changes"][0],
        "remove record www.example. 300 IN A 198.18.0.7"
    );
}

/// Unmounts a tmpfs when dropped.
struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A write whose audit entry cannot be written (the log's file system is full) is refused
/// and nothing changes: not served, not in the state file; once the log can be written
/// again, the same write goes through. Needs root (a small tmpfs); CI is root.
#[test]
fn a_write_the_audit_log_cannot_record_is_refused() {
    let _suite = crate::common::suite(module_path!());
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test mounts a tmpfs: run it as root (CI does)"
    );
    let dir = Dir::new("unaudited");
    let mnt = dir.0.join("audit");
    std::fs::create_dir_all(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount tmpfs");
    let _fs = Tmpfs(mnt.clone());
    let log = mnt.join("audit.log");
    let (p, a) = (free_port(), free_port());
    let d = start(&dir.0, &with_audit(&dir.0, p, a, &log), p, a);
    // Fill the file system.
    let filler = mnt.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        while f.write_all(&[0u8; 512]).is_ok() {}
        let _ = f.sync_all();
    }
    // The log's last page still has room: reloads (each audited, best effort) fill it
    // until an entry no longer fits.
    let size = || std::fs::metadata(&log).unwrap().len();
    let mut full = false;
    for _ in 0..200 {
        let before = size();
        let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        if size() == before {
            full = true;
            break;
        }
    }
    assert!(full, "the audit log kept growing on a full file system");
    let t = Some(tok("dns"));
    let body = r#"{"rr":"u.example. 300 A 198.18.0.8"}"#;
    let r = http(&d, "POST", "/records", t, Some(body)).unwrap();
    assert_eq!((r.status, r.code().as_str()), (503, "unavailable"), "{r:?}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("audit"),
        "{r:?}"
    );
    assert_eq!(
        ask(d.dns, "u.example.").0,
        3,
        "an unaudited write must not be served"
    );
    let state = std::fs::read_to_string(dir.0.join("state.conf")).unwrap_or_default();
    assert!(!state.contains("u.example"), "{state}");
    let listed = http(&d, "GET", "/records", t, None).unwrap().body;
    assert!(!listed.contains("u.example"), "{listed}");
    // Room again: the same write is audited, then served.
    std::fs::remove_file(&filler).unwrap();
    let r = http(&d, "POST", "/records", t, Some(body)).unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(ask(d.dns, "u.example.").2, [198, 18, 0, 8]);
    let w = api_writes(&log);
    assert_eq!(
        w.last().unwrap()["changes"][0],
        "add record u.example. 300 IN A 198.18.0.8"
    );
    drop(d);
}

/// A DNS query over TCP (RFC 7766): (RCODE, ANCOUNT).
fn ask_tcp(server: SocketAddr, name: &str) -> std::io::Result<(u8, u16)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&server, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    let q = query(0x7777, name, 1);
    let mut m = (q.len() as u16).to_be_bytes().to_vec();
    m.extend_from_slice(&q);
    s.write_all(&m)?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len)?;
    let mut r = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut r)?;
    Ok((r[3] & 0x0f, u16::from_be_bytes([r[6], r[7]])))
}

/// Descriptors skuad holds.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A slowloris: more half-sent requests than the caps, from many sources, against a skuad
/// with 256 descriptors. Once skuad has accepted all 400 (its connection counters say so),
/// the API keeps its connections under its cap (the rest are evicted: idle ones make room)
/// and its descriptors follow, DNS over TCP keeps answering, `GET /status` with a token
/// (what `skuactl status` sends) keeps working, and the half-open connections are closed
/// by the header deadline (each of the 400 reads its end). Before the caps and deadlines, 1,100 such connections stayed
/// open and DNS over TCP stopped accepting ("Too many open files").
#[test]
fn slowloris_cannot_starve_dns_or_the_operator() {
    let _suite = crate::common::suite(module_path!());
    use std::io::Write;
    let dir = Dir::new("slowloris");
    let (p, a) = (free_port(), free_port());
    let conf = dir.0.join("skuad.conf");
    std::fs::write(
        &conf,
        config(
            p,
            a,
            &dir.0,
            "  max-connections: 32\n  max-connections-per-source: 4\n",
        ),
    )
    .unwrap();
    let child = std::process::Command::new("prlimit")
        .arg("--nofile=256:256")
        .arg(SKUAD)
        .args(["--no-xdp", "--config"])
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut d = Daemon {
        child,
        dns: SocketAddr::new(LO, p),
        api: SocketAddr::new(LO, a),
        conf,
    };
    let t0 = Instant::now();
    while http(&d, "GET", "/health", None, None).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "skuad did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = d.child.id();
    let base_fds = open_fds(pid);
    // Connections skuad took from its accept queue (admitted or refused at once; each read
    // of the metrics is one more), open now, and evicted to make room.
    let conns = |d: &Daemon| -> (u64, u64, u64) {
        let m = http(d, "GET", "/metrics", Some(tok("read")), None).unwrap();
        assert_eq!(m.status, 200, "{m:?}");
        let v = |s: &str| metric_value(&m.body, s);
        (
            v("skua_api_connections_total{result=\"admitted\"}")
                + v("skua_api_connections_total{result=\"refused\"}"),
            v("skua_api_connections_open"),
            v("skua_api_connections_evicted_total"),
        )
    };
    let before = conns(&d).0;
    // 400 connections from 100 loopback sources, each with half a request line, every one
    // established: they come faster than skuad takes them from the API's accept queue
    // (128), and a SYN that finds it full is sent again by the kernel a second later.
    let mut held = Vec::new();
    for i in 0..400u32 {
        let src: std::net::IpAddr = format!("127.0.1.{}", 2 + i % 100).parse().unwrap();
        let mut s = socket2_connect(src, d.api, Duration::from_secs(3))
            .unwrap_or_else(|e| panic!("connection {i} from {src}: {e}"));
        s.write_all(b"GET /sta")
            .unwrap_or_else(|e| panic!("connection {i} from {src}: {e}"));
        held.push(s);
    }
    // Every one of them accepted by skuad (none left in the kernel's queue, where it
    // would cost skuad no descriptor), before its descriptors are counted.
    let t0 = Instant::now();
    let mut reads = 0;
    let (open, evicted) = loop {
        reads += 1;
        let (n, open, evicted) = conns(&d);
        let n = n - before - reads;
        if n >= 400 {
            break (open, evicted);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "skuad accepted {n} of the 400 connections"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Kept under the cap by evicting the idle ones (none refused: they are all idle).
    assert!(open <= 32, "{open} API connections open (cap 32)");
    assert!(evicted >= 400 - 32, "{evicted} connections evicted");
    // The evicted connections' descriptors are closed by their tasks as they run: soon,
    // long before the header deadline (10 s) would close them anyway.
    let t0 = Instant::now();
    loop {
        let fds = open_fds(pid);
        if fds <= base_fds + 32 + 4 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "skuad holds {fds} descriptors ({base_fds} before the flood; API cap 32)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // DNS over TCP and the operator still get through, several times over.
    for i in 0..5 {
        assert_eq!(
            ask_tcp(d.dns, "a.example.").unwrap(),
            (0, 1),
            "DNS over TCP, round {i}"
        );
        let r = http(&d, "GET", "/status", Some(tok("read")), None).unwrap();
        assert_eq!(r.status, 200, "status, round {i}: {r:?}");
    }
    // The header deadline (10 s) closes what is left of the half-open connections: skuad's
    // descriptors go back to where they were, and every connection of the flood reads its
    // end (evicted earlier, or closed now).
    let t0 = Instant::now();
    loop {
        let fds = open_fds(pid);
        if fds <= base_fds + 2 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{fds} descriptors left ({base_fds} before)"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for (i, s) in held.iter_mut().enumerate() {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Whatever skuad wrote before closing, then the end (or a reset).
        let mut rest = Vec::new();
        let r = std::io::Read::read_to_end(s, &mut rest);
        assert!(
            r.is_ok()
                || r.as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "connection {i} still open: {r:?}"
        );
    }
    drop(held);
    let _ = d.child.kill();
    let _ = d.child.wait();
}

/// A TCP connection from `src` (any loopback address) to `dst` (established within
/// `wait`), or why not.
fn socket2_connect(
    src: std::net::IpAddr,
    dst: SocketAddr,
    wait: Duration,
) -> Result<std::net::TcpStream, String> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: `fd` is a new descriptor owned by nothing else.
    let s = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    let sin = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let (std::net::IpAddr::V4(src), std::net::IpAddr::V4(dip)) = (src, dst.ip()) else {
        return Err("IPv4 only".into());
    };
    let a = sin(src, 0);
    let b = sin(dip, dst.port());
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `a` is a valid sockaddr_in of `len` bytes, alive across the call.
    let r = unsafe { libc::bind(fd, std::ptr::from_ref(&a).cast(), len) };
    if r != 0 {
        return Err(format!("bind: {}", std::io::Error::last_os_error()));
    }
    // Bounded: a server that stops accepting fills its backlog, and a blocking connect would
    // then wait for SYN retries (minutes) instead of failing the test.
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    // SAFETY: `b` is a valid sockaddr_in of `len` bytes, alive across the call.
    let r = unsafe { libc::connect(fd, std::ptr::from_ref(&b).cast(), len) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(format!("connect: {e}"));
        }
    }
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd, alive across the call.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    if n != 1 {
        return Err(format!("not established within {wait:?}"));
    }
    match s.take_error() {
        Ok(None) => Ok(s),
        Ok(Some(e)) | Err(e) => Err(format!("connect: {e}")),
    }
}

/// A record with quotes added through the API is served, and after a restart it is
/// still exactly that record: the state file used to hold `'... "it's"'`, which made the
/// next start fail ("unterminated quoted string"), and a crafted TXT could append
/// directives (`include:` of any file) to its line.
#[test]
fn quoted_records_survive_a_restart_and_inject_nothing() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("quotes");
    let (p, a) = (free_port(), free_port());
    let text = config(p, a, &dir.0, "");
    let d = start(&dir.0, &text, p, a);
    let t = Some(tok("dns"));
    let secret = dir.0.join("secret.conf");
    std::fs::write(
        &secret,
        "server:\n  local-data: \"leak.example. A 198.18.0.66\"\n",
    )
    .unwrap();
    let rrs = [
        r#"t.example. 300 TXT \"it's\""#.to_string(),
        format!(
            r#"x.example. 300 TXT \"a' include: {} '\" \"b\\\\\" \"'\""#,
            secret.display()
        ),
    ];
    for rr in &rrs {
        let r = http(
            &d,
            "POST",
            "/records",
            t,
            Some(&format!(r#"{{"rr":"{rr}"}}"#)),
        )
        .unwrap();
        assert_eq!(r.status, 201, "{rr}: {r:?}");
    }
    let before = http(&d, "GET", "/records", t, None).unwrap().json();
    drop(d);
    let d = start(&dir.0, &text, p, a);
    let after = http(&d, "GET", "/records", t, None).unwrap().json();
    assert_eq!(before, after);
    let listed = after.to_string();
    assert!(listed.contains("it's"), "{listed}");
    // The include: stayed inside the TXT string: nothing from the other file is served.
    assert_eq!(ask(d.dns, "leak.example.").0, 3);
    assert_eq!(ask(d.dns, "t.example.").0, 0);
    let state = std::fs::read_to_string(dir.0.join("state.conf")).unwrap();
    assert_eq!(state.matches("local-data:").count(), 2, "{state}");
}
