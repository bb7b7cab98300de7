//! ACME (RFC 8555) against a real ACME server: Let's Encrypt's pebble, on loopback,
//! resolving names (and DNS-01 TXT records) through the skuad under test.
//!
//! Against Debian's pebble 2.4 (no renewal information, no profiles): HTTP-01: skuad
//! starts without a certificate, obtains one (account, order, the token served on its
//! HTTP-01 port, finalization), writes it where `tls-service-pem:` says and serves DNS over
//! TLS with it (kdig verifies it against pebble's root); renewal is planned at two thirds of
//! its lifetime; a renewal asked through the API gives a new certificate to new handshakes
//! while a connection opened before keeps answering; with pebble down, the renewal fails,
//! is reported (`GET /tls`, metrics, the audit log) and the old certificate keeps serving.
//! DNS-01: the TXT record put in skuad's own zone, validated, taken out. A failed order (a
//! name nobody can validate) is reported and retried, nothing changes.
//!
//! Against pebble 2.10 (built from its Go module by tests/run.sh; `SKUA_PEBBLE` or
//! `target/tools/pebble-v2.10.3/pebble`; missing, the tests fail): renewal information
//! (RFC 9773) plans the renewal of a 60-second certificate and skuad renews it by itself;
//! a certificate revoked is replaced at skuad's next renewal-information check, the order
//! naming it in `replaces`; a profile the server does not offer is reported, nothing
//! changes. A certificate without `acme:` is shown in `GET /tls` and the metrics.
//!
//! Without an ACME server: a certificate signed from skuad's own request by a CA that
//! copies the request's subject (as step-ca does) has the first name as its CN and kdig
//! accepts it; a reload whose `acme:` clause the start would refuse is refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

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

/// Starts Debian's pebble with its HTTPS certificate from our test CA `ca_tag` (the
/// package ships none), validating HTTP-01 on `http_port` and TLS-ALPN-01 on `tls`,
/// resolving through `dns`.
fn pebble(dir: &Path, ca_tag: &str, http_port: u16, tls: u16, dns: u16) -> Pebble {
    pebble_at(
        Path::new("pebble"),
        dir,
        ca_tag,
        (http_port, tls, dns),
        None,
    )
}

/// pebble 2.10 (renewal information, profiles): tests/run.sh installs it from the Go
/// module proxy; missing, the test fails (never skipped).
fn pebble_new_binary() -> PathBuf {
    let p = std::env::var_os("SKUA_PEBBLE").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/pebble-v2.10.3/pebble"),
        PathBuf::from,
    );
    assert!(
        p.is_file(),
        "pebble v2.10.3 not found at {} (tests/run.sh installs it: GOBIN=target/tools/pebble-v2.10.3 go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3; or set SKUA_PEBBLE)",
        p.display()
    );
    p
}

/// pebble 2.10 with two profiles: `shortlived` (60-second certificates: renewal
/// information puts the whole lifetime in the window) and `long` (30 days: the window
/// is days away).
fn pebble_new(dir: &Path, ca_tag: &str, http_port: u16, dns: u16) -> Pebble {
    let profiles = serde_json::json!({
        "shortlived": {"description": "60 seconds", "validityPeriod": 60},
        "long": {"description": "30 days", "validityPeriod": 2_592_000},
    });
    pebble_at(
        &pebble_new_binary(),
        dir,
        ca_tag,
        (http_port, free_port(), dns),
        Some(profiles),
    )
}

fn pebble_at(
    bin: &Path,
    dir: &Path,
    ca_tag: &str,
    (http_port, tls, dns): (u16, u16, u16),
    profiles: Option<serde_json::Value>,
) -> Pebble {
    let (cert, key) = test_leaf(dir, ca_tag, "pebble", "DNS:localhost,IP:127.0.0.1");
    let (port, mgmt) = (free_port(), free_port());
    let cfg = dir.join("pebble.json");
    let mut conf = serde_json::json!({"pebble": {
        "listenAddress": format!("127.0.0.1:{port}"),
        "managementListenAddress": format!("127.0.0.1:{mgmt}"),
        "certificate": cert,
        "privateKey": key,
        "httpPort": http_port,
        "tlsPort": tls,
        "ocspResponderURL": "",
        "externalAccountBindingRequired": false
    }});
    if let Some(p) = profiles {
        conf["pebble"]["profiles"] = p;
    }
    std::fs::write(&cfg, conf.to_string()).unwrap();
    let child = Command::new(bin)
        .arg("-config")
        .arg(&cfg)
        .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
        .env("PEBBLE_VA_NOSLEEP", "1")
        .env("PEBBLE_WFE_NONCEREJECT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{} (Debian package pebble, or tests/run.sh): {e}",
                bin.display()
            )
        });
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
    tls_all(d)["acme"].clone()
}

/// All of `GET /tls`: the certificate in force and the ACME task.
fn tls_all(d: &Daemon) -> serde_json::Value {
    let r = http(d, "GET", "/tls", Some(tok("read")), None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// Waits until all of `GET /tls` satisfies `f` (at most `secs`): the certificate in force
/// and the ACME task's status read in one answer.
fn wait_tls_all(
    d: &Daemon,
    secs: u64,
    what: &str,
    f: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let all = tls_all(d);
        if f(&all) {
            return all;
        }
        assert!(Instant::now() < deadline, "{what}: {all}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The serial of a DER certificate as GET /tls shows it (hex, lower case, no sign octet).
fn serial_of(der: &[u8]) -> String {
    let (_, c) = x509_parser::parse_x509_certificate(der).unwrap();
    let mut raw = c.tbs_certificate.raw_serial();
    while raw.len() > 1 && raw[0] == 0 {
        raw = &raw[1..];
    }
    raw.iter().map(|b| format!("{b:02x}")).collect()
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
    ports: (u16, u16, u16),
) -> Daemon {
    skuad_with_acme_at(dir, &p.dir_url, ca, names, extra, ports)
}

/// The same with the ACME directory at `url`.
fn skuad_with_acme_at(
    dir: &Path,
    url: &str,
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
    let _suite = crate::common::suite(module_path!());
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
    let _suite = crate::common::suite(module_path!());
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
    let (dns, api) = (d.dns.port(), d.api.port());
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
    let _suite = crate::common::suite(module_path!());
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
fn a_stalled_acme_server_holds_neither_the_task_nor_a_renewal_asked() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("acme-stalled");
    let ca = test_ca(&dir.0, "acmestall");
    // A certificate for the name in force from the start: skuad asks renewal information.
    let (cert, key) = test_leaf(&dir.0, "acmestall", "dns", "DNS:dns.example.test");
    std::fs::create_dir_all(dir.0.join("tls")).unwrap();
    std::fs::copy(&cert, dir.0.join("tls/cert.pem")).unwrap();
    std::fs::copy(&key, dir.0.join("tls/key.pem")).unwrap();
    // The "ACME server" accepts connections and says nothing, not even TLS.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}/dir", l.local_addr().unwrap().port());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming() {
            held.push(c);
        }
    });
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    let d = skuad_with_acme_at(
        &dir.0,
        &url,
        &ca,
        &["dns.example.test"],
        "",
        (dns, api, tls),
    );
    // The task planned from the certificate and is now asking the stalled server.
    wait_tls(&d, 10, "planned", |s| {
        s["next_reason"] == "two thirds of its lifetime"
    });
    std::thread::sleep(Duration::from_secs(1));
    // The operator's request does not wait for the stalled check: the order starts at
    // once, its first request times out after 30 s, and the failure is reported. (Were
    // the request waiting for the check, or the request without a timeout, it would come
    // after 60 s, or never.)
    let asked = Instant::now();
    let r = http(&d, "POST", "/tls/renew", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 202);
    let st = wait_tls(&d, 50, "failure reported", |s| s["failures"] == 1);
    assert!(asked.elapsed() < Duration::from_secs(50), "{st}");
    let e = st["last_error"].as_str().unwrap();
    assert!(e.contains("did not answer in 30 s"), "{st}");
    assert_eq!(st["issued"], 0, "{st}");
    // The certificate in force kept, plain DNS served.
    assert_eq!(
        std::fs::read(dir.0.join("tls/cert.pem")).unwrap(),
        std::fs::read(&cert).unwrap()
    );
    assert_eq!(ask(d.dns, "a.example."), (0, 1, [198, 18, 0, 1]));
}

#[test]
fn a_failed_order_is_reported_and_nothing_changes() {
    let _suite = crate::common::suite(module_path!());
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

/// The ARI certificate identifier (RFC 9773 §4.1) of the PEM certificate file `pem`.
fn ari_id(der: &[u8]) -> String {
    let der = rustls_pki_types::CertificateDer::from(der.to_vec());
    instant_acme::CertificateIdentifier::try_from(&der)
        .unwrap()
        .to_string()
}

/// skuad's ACME account (its `account-file:`), as the test's own ACME client: the test
/// does what an operator or the CA would do with it (revoke, order).
fn skuads_account(dir: &Path, ca: &Path) -> (tokio::runtime::Runtime, instant_acme::Account) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let text = std::fs::read_to_string(dir.join("tls/account.json")).unwrap();
    let creds: instant_acme::AccountCredentials = serde_json::from_str(&text).unwrap();
    let acct = rt
        .block_on(async {
            tokio::time::timeout(
                Duration::from_secs(20),
                instant_acme::Account::builder_with_root(ca)
                    .unwrap()
                    .from_credentials(creds),
            )
            .await
        })
        .expect("pebble answers in 20 s")
        .unwrap();
    (rt, acct)
}

/// The certificate a new DNS over TLS handshake gets.
fn served(tls: u16, root: &Path) -> Vec<u8> {
    TlsClient::with_name(tls, TlsClient::config(root, &[b"dot"]), "dns.example.test")
        .unwrap()
        .peer_cert()
}

/// skuad ordering a certificate for dns.example.test with HTTP-01 and `profile` from a
/// pebble 2.10 of its own (`tag`: the directory and CA names): (dir, CA, pebble, skuad,
/// the DoT port).
fn ari_world(tag: &str, profile: &str) -> (Dir, PathBuf, Pebble, Daemon, u16) {
    let dir = Dir::new(&format!("acme-{tag}"));
    let ca = test_ca(&dir.0, &format!("acme{tag}"));
    let (dns, api, tls, h01) = (free_port(), free_port(), free_port(), free_port());
    let p = pebble_new(&dir.0, &format!("acme{tag}"), h01, dns);
    let d = skuad_with_acme(
        &dir.0,
        &p,
        &ca,
        &["dns.example.test"],
        &format!("  http-01-interface: 127.0.0.1@{h01}\n  profile: {profile}\n"),
        (dns, api, tls),
    );
    (dir, ca, p, d, tls)
}

#[test]
fn renewal_information_renews_a_short_lived_certificate_by_itself() {
    let _suite = crate::common::suite(module_path!());
    let (dir, ca, p, d, tls) = ari_world("ari", "shortlived");
    let root = pebble_root(&p, &ca, &dir.0);
    // The certificate in force and the count in one answer (a renewal comes seconds later:
    // not before a third of the 60 s lifetime after this one's issuance).
    let all = wait_tls_all(&d, 60, "first certificate", |a| a["acme"]["issued"] == 1);
    let st = all["acme"].clone();
    let serial1 = all["certificate"]["serial"].as_str().unwrap().to_string();
    let first = der(&dir.0.join("tls/cert.pem"));
    assert_eq!(
        serial_of(&first),
        serial1,
        "the file read is the one shown: {all}"
    );
    assert_eq!(serial_of(&served(tls, &root)), serial1);
    assert_eq!(st["profile"], "shortlived", "{st}");
    assert!(
        st["last_replaced"].is_null(),
        "a first order replaces nothing: {st}"
    );
    // The schedule comes from the server's renewal information: a time inside the
    // suggested window (pebble's window for a 60 s certificate is its whole lifetime).
    let st = wait_tls(&d, 10, "renewal information asked", |s| {
        s["next_reason"] == "renewal information"
    });
    let (nb, na) = (
        st["not_before"].as_u64().unwrap(),
        st["not_after"].as_u64().unwrap(),
    );
    // The profile was applied: pebble's shortlived certificates last 60 s.
    assert!(na - nb <= 60, "{st}");
    let (ws, we, next) = (
        st["window_start"].as_u64().unwrap(),
        st["window_end"].as_u64().unwrap(),
        st["next_attempt"].as_u64().unwrap(),
    );
    assert!(nb <= ws && ws < we && we <= na + 1, "{st}");
    let asked = st["renewal_info_next"].as_u64().unwrap();
    assert!(ws <= next && next <= we.max(asked), "{st}");
    // Not before a third of the lifetime after the issuance, and not after a third of it
    // before the expiry (a window must not let a certificate expire, nor start orders
    // back to back).
    assert!(
        next >= nb + (na - nb) / 3 - 1 && next <= na - (na - nb) / 3,
        "{st}"
    );

    // No API call: skuad renews by itself inside the window, and the order names the
    // certificate it replaces (RFC 9773 §5).
    let all = wait_tls_all(&d, 120, "renewal by itself", |a| a["acme"]["issued"] == 2);
    let st = all["acme"].clone();
    assert_eq!(st["last_replaced"], ari_id(&first), "{st}");
    assert_eq!(st["failures"], 0, "{st}");
    let serial2 = all["certificate"]["serial"].as_str().unwrap().to_string();
    assert_ne!(serial2, serial1, "{all}");
    let second = der(&dir.0.join("tls/cert.pem"));
    assert_eq!(serial_of(&second), serial2, "{all}");
    assert_eq!(
        serial_of(&served(tls, &root)),
        serial2,
        "a new handshake gets the new one"
    );
    let mut c =
        TlsClient::with_name(tls, TlsClient::config(&root, &[b"dot"]), "dns.example.test").unwrap();
    assert_eq!(c.ask("a.example."), (0, [198, 18, 0, 1]));
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    assert!(m.contains("skua_tls_certificate_expiry_seconds "), "{m}");
    assert!(
        m.contains("skua_acme_failures_total{reason=\"rate-limited\"} 0\n"),
        "{m}"
    );
}

#[test]
fn a_revoked_certificate_is_replaced_at_the_next_renewal_information_check() {
    let _suite = crate::common::suite(module_path!());
    let (dir, ca, p, d, tls) = ari_world("rev", "long");
    wait_tls(&d, 60, "first certificate", |s| s["issued"] == 1);
    // A 30-day certificate: its window is days away, nothing happens by itself.
    let st = wait_tls(&d, 10, "renewal information asked", |s| {
        s["next_reason"] == "renewal information"
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(st["window_start"].as_u64().unwrap() > now + 86_400, "{st}");
    let first = der(&dir.0.join("tls/cert.pem"));

    // The CA revokes it (here with skuad's own account, RFC 8555 §7.6): its renewal
    // information now says "renew now" (a window in the past, RFC 9773 §4.2).
    let (rt, acct) = skuads_account(&dir.0, &ca);
    let cert = rustls_pki_types::CertificateDer::from(first.clone());
    rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(30),
            acct.revoke(&instant_acme::RevocationRequest {
                certificate: &cert,
                reason: None,
            }),
        )
        .await
    })
    .expect("pebble answers in 30 s")
    .unwrap();
    // skuad's next check (at its restart here: pebble's Retry-After is 6 hours) sees it
    // and renews without being asked.
    let conf = std::fs::read_to_string(&d.conf).unwrap();
    let (dns, api) = (d.dns.port(), d.api.port());
    drop(d);
    let d = start(&dir.0, &conf, dns, api);
    let st = wait_tls(&d, 60, "replacement", |s| s["issued"] == 1);
    assert_eq!(st["last_replaced"], ari_id(&first), "{st}");
    let second = der(&dir.0.join("tls/cert.pem"));
    assert_ne!(second, first);
    let root = pebble_root(&p, &ca, &dir.0);
    assert_eq!(served(tls, &root), second);
    // pebble recorded the replacement: another order replacing the same certificate is
    // refused as already replaced (RFC 9773 §5).
    let ids = [instant_acme::Identifier::Dns("dns.example.test".into())];
    let id = instant_acme::CertificateIdentifier::try_from(&cert).unwrap();
    let order = instant_acme::NewOrder::new(&ids).replaces(id);
    let r = rt
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(30), acct.new_order(&order)).await
        })
        .expect("pebble answers in 30 s");
    match r {
        Err(instant_acme::Error::Api(p)) => assert_eq!(
            p.r#type.as_deref(),
            Some("urn:ietf:params:acme:error:alreadyReplaced"),
            "{p:?}"
        ),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("pebble took a second replacement of the revoked certificate"),
    }
    // The new certificate is planned by renewal information again.
    wait_tls(&d, 10, "renewal information for the new one", |s| {
        s["next_reason"] == "renewal information"
    });
}

#[test]
fn a_profile_the_server_does_not_offer_is_reported_and_nothing_changes() {
    let _suite = crate::common::suite(module_path!());
    let (dir, ca, p, d, tls) = ari_world("prof", "long");
    wait_tls(&d, 60, "first certificate", |s| s["issued"] == 1);
    let pem = std::fs::read(dir.0.join("tls/cert.pem")).unwrap();
    let key = std::fs::read(dir.0.join("tls/key.pem")).unwrap();
    let root = pebble_root(&p, &ca, &dir.0);
    let first = der(&dir.0.join("tls/cert.pem"));
    // The operator asks for a profile pebble does not list: reported as soon as skuad
    // reads the directory, before any order.
    let conf = std::fs::read_to_string(&d.conf)
        .unwrap()
        .replace("profile: long", "profile: tiny");
    let (dns, api) = (d.dns.port(), d.api.port());
    drop(d);
    let d = start(&dir.0, &conf, dns, api);
    let st = wait_tls(&d, 20, "profile reported", |s| !s["last_error"].is_null());
    assert_eq!(st["last_error_reason"], "profile", "{st}");
    // An order asked for fails the same way, counted.
    let r = http(&d, "POST", "/tls/renew", Some(tok("operator")), None).unwrap();
    assert_eq!(r.status, 202);
    let st = wait_tls(&d, 30, "failure reported", |s| s["failures"] == 1);
    let e = st["last_error"].as_str().unwrap();
    assert!(
        e.contains("profile 'tiny'") && e.contains("long, shortlived"),
        "{st}"
    );
    assert_eq!(st["failures_by_reason"]["profile"], 1, "{st}");
    assert_eq!(st["issued"], 0, "{st}");
    // Nothing written, the old certificate serving.
    assert_eq!(std::fs::read(dir.0.join("tls/cert.pem")).unwrap(), pem);
    assert_eq!(std::fs::read(dir.0.join("tls/key.pem")).unwrap(), key);
    assert_eq!(served(tls, &root), first);
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    assert!(
        m.contains("skua_acme_failures_total{reason=\"profile\"} 1\n"),
        "{m}"
    );
}

#[test]
fn a_certificate_without_acme_is_shown() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("acme-none");
    let _ca = test_ca(&dir.0, "plain");
    let (cert, key) = test_leaf(&dir.0, "plain", "dns", "DNS:dns.example.test");
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n",
        cert.display(),
        key.display()
    ));
    let d = start(&dir.0, &conf, dns, api);
    let unix_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let before = unix_now();
    let all = tls_all(&d);
    let after = unix_now();
    assert!(all["acme"].is_null(), "{all}");
    let c = &all["certificate"];
    assert_eq!(c["names"], serde_json::json!(["dns.example.test"]), "{all}");
    assert_eq!(c["file"], cert.display().to_string(), "{all}");
    // The serial as openssl prints it (an independent parser).
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-enddate", "-in"])
        .arg(&cert)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let serial = text
        .lines()
        .find_map(|l| l.strip_prefix("serial="))
        .unwrap()
        .to_ascii_lowercase();
    // Exactly (no sign octet of DER's INTEGER, lower case).
    assert_eq!(c["serial"].as_str().unwrap(), serial, "{all} vs {text}");
    let (nb, na) = (
        c["not_before"].as_u64().unwrap(),
        c["not_after"].as_u64().unwrap(),
    );
    assert!(nb < na, "{all}");
    // Whole days left, rounded down (the certificate lasts 2 days: 1 or 2 by the second).
    let days = c["days_left"].as_u64().unwrap();
    assert!(
        (na - after) / 86_400 <= days && days <= (na - before) / 86_400,
        "{all}"
    );
    let now = unix_now();
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    let secs: i64 = m
        .lines()
        .find_map(|l| l.strip_prefix("skua_tls_certificate_expiry_seconds "))
        .expect("expiry metric without acme:")
        .parse()
        .unwrap();
    assert!(
        (secs - (na - now) as i64).abs() <= 5,
        "{secs} vs {}",
        na - now
    );
    assert!(!m.contains("skua_acme_attempts_total"), "{m}");
}

/// Issue 28, finding 11(a): a CA that copies the request's subject into the certificate
/// (smallstep step-ca does) issued, from the request instant-acme made (an empty
/// subject), a certificate with an empty subject, and kdig 3.2 refused every handshake
/// with skuad. pebble cannot show it: 2.4 always puts the first name in the CN, 2.10 only
/// with a profile's `promoteCommonName` (ca/ca.go), neither copies the request's subject.
/// So the test is that CA: it signs skuad's own request (`acme::csr`, what an order is
/// finalized with) copying its subject and names, skuad serves the certificate, and kdig
/// verifies it and gets its answer.
#[test]
fn a_certificate_with_the_requests_subject_is_accepted_by_kdig() {
    let _suite = crate::common::suite(module_path!());
    use x509_parser::prelude::*;
    let dir = Dir::new("acme-subject");
    let names = vec!["dns.example.test".to_string(), "doh.example.test".into()];
    let (csr_der, key_pem) = skuad::acme::csr(&names).unwrap();
    let (_, req) = X509CertificationRequest::from_der(&csr_der).unwrap();
    let info = &req.certification_request_info;
    // The CA: the request's subject (its CN, the only attribute skuad puts there) and its
    // DNS names, copied.
    let mut dn = rcgen::DistinguishedName::new();
    for cn in info.subject.iter_common_name() {
        dn.push(rcgen::DnType::CommonName, cn.as_str().unwrap());
    }
    let mut sans = Vec::new();
    for ext in req.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for g in &san.general_names {
                if let GeneralName::DNSName(n) = g {
                    sans.push(n.to_string());
                }
            }
        }
    }
    assert_eq!(sans, names);
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name = rcgen::DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "subject-copying test CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let mut leaf = rcgen::CertificateParams::new(sans).unwrap();
    leaf.distinguished_name = dn;
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = rcgen::KeyPair::from_pem(&key_pem).unwrap();
    let cert = leaf.signed_by(&leaf_key, &ca).unwrap();
    let (cert_path, key_path, ca_path) = (
        dir.0.join("cert.pem"),
        dir.0.join("key.pem"),
        dir.0.join("ca.pem"),
    );
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, &key_pem).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    std::fs::write(&ca_path, ca.pem()).unwrap();
    // The subject is the first name (openssl, an independent reader).
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in"])
        .arg(&cert_path)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "subject=CN=dns.example.test"
    );
    let (dns, api, tls) = (free_port(), free_port(), free_port());
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "server:\n  interface: 127.0.0.1@{tls}\n  tls-port: {tls}\n  \
         tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n",
        cert_path.display(),
        key_path.display()
    ));
    let _d = start(&dir.0, &conf, dns, api);
    let out = Command::new("kdig")
        .args(["@127.0.0.1", "-p", &tls.to_string()])
        .arg(format!("+tls-ca={}", ca_path.display()))
        .args([
            "+tls-hostname=dns.example.test",
            "+short",
            "+timeout=3",
            "+retry=0",
            "a.example.",
            "A",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "198.18.0.1",
        "kdig: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 28, finding 1(c): a configuration the start would refuse for its `acme:` clause
/// (no `tls-service-pem:`/`-key:`, an account file outside the configuration and data
/// directories) is refused by a reload too, the configuration in force serving on: a
/// reload, like a sync source's version (the same staging), must not leave a node that
/// cannot start again.
#[test]
fn a_reload_the_start_would_refuse_for_acme_is_refused() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("acme-reload");
    let outside = Dir::new("acme-reload-outside");
    let (dns, api) = (free_port(), free_port());
    let conf = config(dns, api, &dir.0, "");
    let d = start(&dir.0, &conf, dns, api);
    for (extra, want) in [
        (
            "acme:\n  directory: https://127.0.0.1:9/dir\n  name: dns.example.test\n".to_string(),
            "set both".to_string(),
        ),
        (
            format!(
                "server:\n  tls-service-pem: cert.pem\n  tls-service-key: key.pem\n\
                 acme:\n  directory: https://127.0.0.1:9/dir\n  name: dns.example.test\n  account-file: \"{}/a.json\"\n",
                outside.0.display()
            ),
            "is outside the configuration and data directories".to_string(),
        ),
    ] {
        std::fs::write(&d.conf, format!("{conf}{extra}")).unwrap();
        let r = http(&d, "POST", "/reload", Some(tok("operator")), None).unwrap();
        assert_eq!(r.status, 422, "{}", r.body);
        assert!(r.body.contains(&want), "{}", r.body);
        assert_eq!(ask(d.dns, "a.example.").2, [198, 18, 0, 1], "still serving");
    }
    assert_eq!(std::fs::read_dir(&outside.0).unwrap().count(), 0);
}
