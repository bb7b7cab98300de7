//! ACME (RFC 8555) against a real ACME server: Let's Encrypt's pebble (Debian's package),
//! on loopback, resolving names (and DNS-01 TXT records) through the skuad under test.
//!
//! HTTP-01: skuad starts without a certificate, obtains one (account, order, the token
//! served on its HTTP-01 port, finalization), writes it where `tls-service-pem:` says and
//! serves DNS over TLS with it (kdig verifies it against pebble's root); a renewal asked
//! through the API gives a new certificate to new handshakes while a connection opened
//! before keeps answering; with pebble down, the renewal fails, is reported (`GET /tls`,
//! metrics, the audit log) and the old certificate keeps serving. DNS-01: the TXT record
//! put in skuad's own zone, validated, taken out. A failed order (a name nobody can
//! validate) is reported and retried, nothing changes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// pebble on loopback: its directory URL and its process.
struct Pebble {
    child: Child,
    dir_url: String,
    mgmt: u16,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts pebble with its HTTPS certificate from our test CA `ca_tag` (Debian's package
/// ships none), validating HTTP-01 on `http_port` and TLS-ALPN-01 on `tls`, resolving
/// through `dns`.
fn pebble(dir: &Path, ca_tag: &str, http_port: u16, tls: u16, dns: u16) -> Pebble {
    let (cert, key) = test_leaf(dir, ca_tag, "pebble", "DNS:localhost,IP:127.0.0.1");
    let (port, mgmt) = (free_port(), free_port());
    let cfg = dir.join("pebble.json");
    std::fs::write(
        &cfg,
        serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{port}"),
            "managementListenAddress": format!("127.0.0.1:{mgmt}"),
            "certificate": cert,
            "privateKey": key,
            "httpPort": http_port,
            "tlsPort": tls,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false
        }})
        .to_string(),
    )
    .unwrap();
    let child = Command::new("pebble")
        .arg("-config")
        .arg(&cfg)
        .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
        .env("PEBBLE_VA_NOSLEEP", "1")
        .env("PEBBLE_WFE_NONCEREJECT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pebble (Debian package pebble)");
    let p = Pebble {
        child,
        dir_url: format!("https://127.0.0.1:{port}/dir"),
        mgmt,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "pebble did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    p
}

/// pebble's issuing root (it makes a new one at each start), as a PEM file.
fn pebble_root(p: &Pebble, ca: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("pebble-root.pem");
    let ok = Command::new("curl")
        .args(["-s", "-S", "--max-time", "5", "--cacert"])
        .arg(ca)
        .arg("-o")
        .arg(&out)
        .arg(format!("https://127.0.0.1:{}/roots/0", p.mgmt))
        .status()
        .unwrap()
        .success();
    assert!(ok, "pebble's root");
    out
}

fn tls_status(d: &Daemon) -> serde_json::Value {
    http(d, "GET", "/tls", Some(tok("read")), None)
        .unwrap()
        .json()["acme"]
        .clone()
}

/// Waits until `GET /tls` satisfies `f` (at most `secs`).
fn wait_tls(
    d: &Daemon,
    secs: u64,
    what: &str,
    f: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let st = tls_status(d);
        if f(&st) {
            return st;
        }
        assert!(Instant::now() < deadline, "{what}: {st}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// kdig over TLS to `port`, trusting `root` for `dns.example.test`: the answer.
fn kdig_acme(port: u16, root: &Path) -> String {
    let out = Command::new("kdig")
        .args(["@127.0.0.1", "-p", &port.to_string()])
        .arg(format!("+tls-ca={}", root.display()))
        .args([
            "+tls-hostname=dns.example.test",
            "+short",
            "+timeout=3",
            "+retry=0",
        ])
        .args(["a.example.", "A"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// A skuad with DoT on `tls` (no certificate yet) and an `acme:` clause for `names`.
fn skuad_with_acme(
    dir: &Path,
    p: &Pebble,
    ca: &Path,
    names: &[&str],
    extra: &str,
    (dns, api, tls): (u16, u16, u16),
) -> Daemon {
    let mut conf = config(dns, api, dir, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         tls-service-pem: \"{d}/tls/cert.pem\"\n  tls-service-key: \"{d}/tls/key.pem\"\n  \
         local-zone: \"example.test.\" static\n  \
         local-data: \"example.test. 300 IN SOA ns.example.test. admin.example.test. 1 3600 600 86400 60\"\n  \
         local-data: \"dns.example.test. 300 IN A 127.0.0.1\"\n\
         acme:\n  directory: {url}\n  contact: mailto:ops@example.test\n  ca-bundle: \"{ca}\"\n  \
         account-file: \"{d}/tls/account.json\"\n{extra}",
        d = dir.display(),
        url = p.dir_url,
        ca = ca.display(),
    ));
    for n in names {
        conf.push_str(&format!("  name: {n}\n"));
    }
    std::fs::create_dir_all(dir.join("tls")).unwrap();
    start(dir, &conf, dns, api)
}

#[test]
fn http01_issuance_renewal_and_the_acme_server_down() {
    let dir = Dir::new("acme-http");
    let ca = test_ca(&dir.0, "acme");
    let (dns, api, tls, h01) = (free_port(), free_port(), free_port(), free_port());
    let p = pebble(&dir.0, "acme", h01, free_port(), dns);
    let d = skuad_with_acme(
        &dir.0,
        &p,
        &ca,
        &["dns.example.test"],
        &format!("  challenge: http-01\n  http-01-interface: 127.0.0.1@{h01}\n"),
        (dns, api, tls),
    );
    // Issued at start (no certificate yet), then in force without a restart.
    let st = wait_tls(&d, 60, "first certificate", |s| s["issued"] == 1);
    assert_eq!(st["names"], serde_json::json!(["dns.example.test"]), "{st}");
    let (nb, na) = (
        st["not_before"].as_u64().unwrap(),
        st["not_after"].as_u64().unwrap(),
    );
    let next = st["next_attempt"].as_u64().unwrap();
    assert_eq!(next, nb + (na - nb) * 2 / 3, "renewal at two thirds: {st}");
    let root = pebble_root(&p, &ca, &dir.0);
    assert_eq!(kdig_acme(tls, &root), "198.18.0.1");
    let key = dir.0.join("tls/key.pem");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let account = dir.0.join("tls/account.json");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&account).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let first = der(&dir.0.join("tls/cert.pem"));

    // A renewal on demand: new handshakes get the new certificate, a connection opened
    // before keeps answering on the old one.
    let dot = |root: &Path| {
        TlsClient::with_name(tls, TlsClient::config(root, &[b"dot"]), "dns.example.test").unwrap()
    };
    let mut kept = dot(&root);
    assert_eq!(kept.peer_cert(), first);
    let r = http(&d, "POST", "/tls/renew", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    wait_tls(&d, 60, "renewal", |s| s["issued"] == 2);
    let second = der(&dir.0.join("tls/cert.pem"));
    assert_ne!(second, first);
    let fresh = dot(&root);
    assert_eq!(fresh.peer_cert(), second);
    assert_eq!(kept.ask("a.example."), (0, [198, 18, 0, 1]));
    assert_eq!(kept.peer_cert(), first);

    // The ACME server down at renewal time: reported, retried later, the certificate in
    // force keeps serving.
    drop(p);
    let r = http(&d, "POST", "/tls/renew", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 202);
    let st = wait_tls(&d, 30, "failure reported", |s| s["failures"] == 1);
    assert!(
        st["last_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{st}"
    );
    assert_eq!(st["next_reason"], "retry after a failure", "{st}");
    assert_eq!(st["issued"], 2);
    assert_eq!(kdig_acme(tls, &root), "198.18.0.1");
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    assert!(
        m.contains("skua_acme_attempts_total{result=\"issued\"} 2\n"),
        "{m}"
    );
    assert!(
        m.contains("skua_acme_attempts_total{result=\"failed\"} 1\n"),
        "{m}"
    );
    assert!(m.contains("skua_tls_certificate_expiry_seconds "), "{m}");
    // Only the operator may ask for a renewal.
    let r = http(&d, "POST", "/tls/renew", Some(tok("read")), None).unwrap();
    assert_eq!(r.status, 403);
}

#[test]
fn dns01_from_skuads_own_zone() {
    let dir = Dir::new("acme-dns");
    let ca = test_ca(&dir.0, "acmedns");
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    let p = pebble(&dir.0, "acmedns", free_port(), free_port(), dns);
    let d = skuad_with_acme(
        &dir.0,
        &p,
        &ca,
        &["dns.example.test", "doh.example.test"],
        "  challenge: dns-01\n",
        (dns, api, tls),
    );
    let st = wait_tls(&d, 60, "certificate by dns-01", |s| s["issued"] == 1);
    let mut names: Vec<&str> = st["names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["dns.example.test", "doh.example.test"], "{st}");
    let root = pebble_root(&p, &ca, &dir.0);
    assert_eq!(kdig_acme(tls, &root), "198.18.0.1");
    // The TXT records are gone again.
    let out = Command::new("dig")
        .args(["@127.0.0.1", "-p", &dns.to_string(), "+short", "TXT"])
        .arg("_acme-challenge.dns.example.test.")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
    let recs = http(&d, "GET", "/records", Some(tok("read")), None)
        .unwrap()
        .body;
    assert!(!recs.contains("_acme-challenge"), "{recs}");
    // A record an order cut short by a stop left behind is taken out at the next start
    // (and no new order is placed: the certificate has the names).
    let body = r#"{"rr":"_acme-challenge.dns.example.test. 60 IN TXT \"left-behind\""}"#;
    let r = http(&d, "POST", "/records", Some(tok("dns")), Some(body)).unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    let conf = std::fs::read_to_string(&d.conf).unwrap();
    drop(d);
    let d = start(&dir.0, &conf, dns, api);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let recs = http(&d, "GET", "/records", Some(tok("read")), None)
            .unwrap()
            .body;
        if !recs.contains("left-behind") {
            break;
        }
        assert!(Instant::now() < deadline, "the stale record stays: {recs}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(tls_status(&d)["issued"], 0, "no new order");
}

#[test]
fn tls_alpn01_on_the_dns_over_tls_port() {
    let dir = Dir::new("acme-alpn");
    let ca = test_ca(&dir.0, "acmealpn");
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    // pebble validates TLS-ALPN-01 on skuad's DNS over TLS port, before skuad has any
    // certificate of its own.
    let p = pebble(&dir.0, "acmealpn", free_port(), tls, dns);
    let d = skuad_with_acme(
        &dir.0,
        &p,
        &ca,
        &["dns.example.test"],
        "  challenge: tls-alpn-01\n",
        (dns, api, tls),
    );
    wait_tls(&d, 60, "certificate by tls-alpn-01", |s| s["issued"] == 1);
    let root = pebble_root(&p, &ca, &dir.0);
    assert_eq!(kdig_acme(tls, &root), "198.18.0.1");
    // A renewal over the port that now serves DNS over TLS with the first certificate.
    let r = http(&d, "POST", "/tls/renew", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 202);
    wait_tls(&d, 60, "renewal by tls-alpn-01", |s| s["issued"] == 2);
    assert_eq!(kdig_acme(tls, &root), "198.18.0.1");
    // The DoT handshakes counted are DNS clients' only (validations are not).
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    assert!(
        m.contains("skua_tls_handshakes_total{transport=\"dot\",result=\"ok\"} 2\n"),
        "{m}"
    );
}

#[test]
fn a_failed_order_is_reported_and_nothing_changes() {
    let dir = Dir::new("acme-fail");
    let ca = test_ca(&dir.0, "acmefail");
    let (dns, api, tls, h01) = (free_port(), free_port(), free_port(), free_port());
    let p = pebble(&dir.0, "acmefail", h01, free_port(), dns);
    // A name outside skuad's data: pebble cannot resolve it, the authorization fails.
    let d = skuad_with_acme(
        &dir.0,
        &p,
        &ca,
        &["nowhere.elsewhere.test"],
        &format!("  http-01-interface: 127.0.0.1@{h01}\n"),
        (dns, api, tls),
    );
    let st = wait_tls(&d, 60, "failure reported", |s| s["failures"] == 1);
    assert_eq!(st["issued"], 0, "{st}");
    assert!(
        st["last_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{st}"
    );
    assert!(!dir.0.join("tls/cert.pem").exists());
    // Plain DNS serves on.
    assert_eq!(ask(d.dns, "a.example."), (0, 1, [198, 18, 0, 1]));
}
