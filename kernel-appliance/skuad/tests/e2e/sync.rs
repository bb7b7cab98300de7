//! Configuration and API data synced from the master to the other node through the API
//! (`sync:` clause, `GET /sync`), with both audit logs recording it: two skuads on loopback,
//! each with its own service address under a lease, the same `sync:` clause pointing at the
//! other. The data follow the lease: the master's shared file and API records reach the
//! other node (at start, before its API opens; then within the long-poll), the follower
//! refuses API writes, a version the follower cannot load is recorded and changes nothing,
//! and after the lease moves the data flow the other way.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;

struct Node {
    dir: Dir,
    dns: u16,
    api: u16,
    conf: String,
    d: Option<Daemon>,
}

/// The followers' token: role `sync`, good for `GET /sync` only.
const SYNC_TOKEN: &str = "sync-token-0123456789ab";

const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn secret(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn node(tag: &str, vip: &str, dns: u16, api: u16, peer_api: u16) -> Node {
    let dir = Dir::new(tag);
    secret(&dir.0.join("audit.key"), KEY);
    secret(&dir.0.join("sync.token"), SYNC_TOKEN);
    std::fs::write(dir.0.join("shared.conf"), "server:\n").unwrap();
    let mut conf = config(
        dns,
        api,
        &dir.0,
        &format!(
            "  token: \"follower sync sha256:{}\"\n",
            sha256_hex(SYNC_TOKEN)
        ),
    );
    conf.push_str(&format!(
        "include: \"{shared}\"\n\
         ha:\n  address: {vip}\n  lease-max: 60000\n\
         audit:\n  log: \"{log}\"\n  key: file:{key}\n\
         sync:\n  from: http://127.0.0.1:{peer_api}\n  token-file: sync.token\n  shared-config: shared.conf\n  wait: 5\n",
        shared = dir.0.join("shared.conf").display(),
        log = dir.0.join("audit.log").display(),
        key = dir.0.join("audit.key").display(),
    ));
    Node {
        dir,
        dns,
        api,
        conf,
        d: None,
    }
}

impl Node {
    fn start(&mut self) {
        self.d = Some(start(&self.dir.0, &self.conf, self.dns, self.api));
    }
    fn d(&self) -> &Daemon {
        self.d.as_ref().unwrap()
    }
    fn call(&self, method: &str, path: &str, role: &str, body: Option<&str>) -> Resp {
        http(self.d(), method, path, Some(tok(role)), body).unwrap()
    }
    /// `POST /records` with a dns token.
    fn add_record(&self, rr: &str) -> Resp {
        let body = serde_json::json!({ "rr": rr }).to_string();
        self.call("POST", "/records", "dns", Some(&body))
    }
    fn addr(&self) -> SocketAddr {
        SocketAddr::new(LO, self.dns)
    }
    /// The A record's address for `name`, if answered.
    fn a(&self, name: &str) -> Option<[u8; 4]> {
        let (rcode, an, last) = ask(self.addr(), name);
        (rcode == 0 && an > 0).then_some(last)
    }
    fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.0.join("audit.log"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    fn kinds(&self, kind: &str) -> Vec<serde_json::Value> {
        self.audit()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }
}

/// Waits until `f` holds, at most `limit`; returns the time it took.
fn until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
    t0.elapsed()
}

#[test]
fn configuration_and_api_data_follow_the_lease_with_both_sides_audited() {
    let _suite = crate::common::suite(module_path!());
    let (a_dns, a_api, b_dns, b_api) = (free_port(), free_port(), free_port(), free_port());
    let mut a = node("sync-a", "127.0.0.61", a_dns, a_api, b_api);
    let mut b = node("sync-b", "127.0.0.62", b_dns, b_api, a_api);
    let shared_v1 = "server:\n  local-zone: \"shared.\" static\n  local-data: \"one.shared. 300 IN A 198.18.1.1\"\n";
    std::fs::write(a.dir.0.join("shared.conf"), shared_v1).unwrap();

    // A is the master (it holds its lease); B starts after, and takes A's data before its
    // API opens: the first answer it gives already has them.
    a.start();
    let r = a.call(
        "POST",
        "/ha/lease",
        "operator",
        Some(r#"{"ttl_ms": 60000}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = a.call(
        "POST",
        "/zones",
        "dns",
        Some(r#"{"name": "api.example.", "type": "static"}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = a.add_record("www.api.example. 300 IN A 198.18.2.2");
    assert_eq!(r.status, 201, "{}", r.body);
    b.start();
    assert_eq!(
        b.a("one.shared."),
        Some([198, 18, 1, 1]),
        "shared file at start"
    );
    assert_eq!(
        b.a("www.api.example."),
        Some([198, 18, 2, 2]),
        "API data at start"
    );
    assert_eq!(
        std::fs::read_to_string(b.dir.0.join("shared.conf")).unwrap(),
        shared_v1,
        "the shared file is written on the follower"
    );
    let state_b = std::fs::read_to_string(b.dir.0.join("state.conf")).unwrap();
    assert!(state_b.contains("www.api.example."), "{state_b}");

    // The source's route needs a sync token (or operator); a sync token gets nothing else.
    let r = a.call("GET", "/sync", "dns", None);
    assert_eq!(r.status, 403, "{}", r.body);
    for (m, path, body) in [
        ("GET", "/status", None),
        ("POST", "/ha/release", Some("{}")),
        ("POST", "/reload", None),
        ("GET", "/config", None),
    ] {
        let r = http(a.d(), m, path, Some(SYNC_TOKEN), body).unwrap();
        assert_eq!(r.status, 403, "sync token on {m} {path}: {}", r.body);
    }
    let st = b.call("GET", "/status", "read", None).json();
    assert_eq!(
        st["sync"]["at_start"],
        format!("took the version of http://127.0.0.1:{a_api}"),
        "{st}"
    );
    let offer = a.call("GET", "/sync", "operator", None).json();
    assert_eq!(offer["leased"], true);
    assert_eq!(offer["bundle"]["config"], shared_v1);

    // An API write on the master reaches the follower within the long-poll (not its 5 s
    // wait): a change wakes the waiting request.
    let r = a.add_record("mail.api.example. 300 IN A 198.18.2.3");
    assert_eq!(r.status, 201, "{}", r.body);
    let t = until(Duration::from_secs(3), "API record on B", || {
        b.a("mail.api.example.") == Some([198, 18, 2, 3])
    });
    eprintln!("API write on the master served by the follower after {t:?}");

    // The follower refuses writes, naming the master; its status says whom it follows.
    let r = b.add_record("x.api.example. 300 IN A 198.18.2.9");
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.body
            .contains(&format!("follows http://127.0.0.1:{a_api}")),
        "{}",
        r.body
    );
    let st = b.call("GET", "/status", "read", None).json();
    assert_eq!(st["sync"]["following"], format!("http://127.0.0.1:{a_api}"));
    let a_digest = a.call("GET", "/sync", "operator", None).json()["digest"].clone();
    assert_eq!(
        st["sync"]["digest"], a_digest,
        "the follower offers what it took"
    );

    // The shared file edited on the master and reloaded: the follower takes the text the
    // master loaded.
    let shared_v2 = format!("{shared_v1}  local-data: \"two.shared. 300 IN A 198.18.1.2\"\n");
    std::fs::write(a.dir.0.join("shared.conf"), &shared_v2).unwrap();
    assert_eq!(a.call("POST", "/reload", "operator", None).status, 200);
    until(Duration::from_secs(3), "shared change on B", || {
        b.a("two.shared.") == Some([198, 18, 1, 2])
    });
    assert_eq!(
        std::fs::read_to_string(b.dir.0.join("shared.conf")).unwrap(),
        shared_v2
    );

    // A version the follower cannot load (a zone file only the master has): recorded once
    // on the follower, which keeps serving what it had.
    std::fs::write(
        a.dir.0.join("only-a.zone"),
        "$ORIGIN onlya.\n@ 300 IN SOA ns. h. 1 60 60 600 60\n@ 300 IN NS ns.\nw 300 IN A 198.18.3.3\n",
    )
    .unwrap();
    let shared_v3 =
        format!("{shared_v2}auth-zone:\n  name: \"onlya.\"\n  zonefile: \"only-a.zone\"\n");
    std::fs::write(a.dir.0.join("shared.conf"), &shared_v3).unwrap();
    assert_eq!(a.call("POST", "/reload", "operator", None).status, 200);
    assert_eq!(a.a("w.onlya."), Some([198, 18, 3, 3]));
    until(Duration::from_secs(3), "sync-in-failed on B", || {
        !b.kinds("sync-in-failed").is_empty()
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(b.a("two.shared."), Some([198, 18, 1, 2]), "old data serve");
    assert_eq!(b.a("mail.api.example."), Some([198, 18, 2, 3]));
    assert_eq!(
        std::fs::read_to_string(b.dir.0.join("shared.conf")).unwrap(),
        shared_v2,
        "the follower's shared file is untouched"
    );
    let failed = b.kinds("sync-in-failed");
    assert_eq!(failed.len(), 1, "once per version: {failed:?}");
    assert!(
        failed[0]["detail"]["error"]
            .as_str()
            .unwrap()
            .contains("only-a.zone"),
        "{failed:?}"
    );
    let st = b.call("GET", "/status", "read", None).json();
    assert!(
        st["sync"]["last_error"]
            .as_str()
            .unwrap()
            .contains("only-a.zone")
    );
    // Fixed on the follower (the zone file copied in, a local reload): the same version
    // is asked for again and taken.
    std::fs::copy(a.dir.0.join("only-a.zone"), b.dir.0.join("only-a.zone")).unwrap();
    assert_eq!(b.call("POST", "/reload", "operator", None).status, 200);
    until(Duration::from_secs(3), "v3 on B after its reload", || {
        b.a("w.onlya.") == Some([198, 18, 3, 3])
    });
    assert_eq!(
        std::fs::read_to_string(b.dir.0.join("shared.conf")).unwrap(),
        shared_v3
    );
    // And a new version after it.
    let shared_v4 =
        format!("{shared_v3}server:\n  local-data: \"three.shared. 300 IN A 198.18.1.3\"\n");
    std::fs::write(a.dir.0.join("shared.conf"), &shared_v4).unwrap();
    assert_eq!(a.call("POST", "/reload", "operator", None).status, 200);
    let v4 = a.call("GET", "/sync", "operator", None).json()["digest"].clone();
    until(Duration::from_secs(3), "v4 on B", || {
        b.a("three.shared.") == Some([198, 18, 1, 3])
    });
    assert_eq!(b.kinds("sync-in").last().unwrap()["detail"]["digest"], v4);

    // Both audit logs: each version B took is a sync-out on A (to B's token, from B's
    // address) and a sync-in on B (from A), with the same digest.
    let outs = a.kinds("sync-out");
    let ins = b.kinds("sync-in");
    assert!(ins.len() >= 5, "{ins:?}");
    for i in &ins {
        let d = &i["detail"]["digest"];
        assert_eq!(i["detail"]["from"], format!("http://127.0.0.1:{a_api}"));
        assert!(
            outs.iter().any(|o| o["detail"]["digest"] == *d
                && o["actor"] == "follower"
                && o["source"] == "127.0.0.1"),
            "sync-in {d} without its sync-out: {outs:?}"
        );
    }
    let config_changes = ins
        .iter()
        .filter(|i| i["detail"]["config_changed"] == true)
        .count();
    assert!(config_changes >= 2, "{ins:?}");
    let m = b.call("GET", "/metrics", "read", None).body;
    assert!(m.contains("\nskua_sync_following 1\n"), "{m}");
    assert!(
        m.contains("skua_sync_events_total{event=\"failed\"} 1"),
        "{m}"
    );
    let m = a.call("GET", "/metrics", "read", None).body;
    assert!(m.contains("\nskua_sync_following 0\n"), "{m}");
    for n in [&a, &b] {
        let v = n.call("POST", "/audit/verify", "admin", None);
        assert_eq!(v.status, 200, "{}", v.body);
        assert_eq!(v.json()["ok"], true, "{}", v.body);
    }

    // The lease moves to B (a failover): B is writable, and A now follows B. In between,
    // with no lease on either node, neither takes writes (they would diverge).
    assert_eq!(
        a.call("POST", "/ha/release", "operator", Some("{}")).status,
        200
    );
    for n in [&a, &b] {
        let r = n.add_record("z.api.example. 300 IN A 198.18.2.9");
        assert_eq!(r.status, 409, "{}", r.body);
    }
    let r = b.call(
        "POST",
        "/ha/lease",
        "operator",
        Some(r#"{"ttl_ms": 60000}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = b.add_record("new.api.example. 300 IN A 198.18.2.4");
    assert_eq!(r.status, 201, "the new master takes writes: {}", r.body);
    until(Duration::from_secs(8), "B's write on A", || {
        a.a("new.api.example.") == Some([198, 18, 2, 4])
    });
    let r = a.add_record("y.api.example. 300 IN A 198.18.2.9");
    assert_eq!(r.status, 409, "{}", r.body);

    // A stopped, a change on B, A back: A serves it from its first answer (it caught up
    // before its API opened, so before its agent could take a lease with old data).
    a.d = None;
    let r = b.add_record("late.api.example. 300 IN A 198.18.2.5");
    assert_eq!(r.status, 201, "{}", r.body);
    a.start();
    assert_eq!(a.a("late.api.example."), Some([198, 18, 2, 5]));
}

/// Without `ha:` a node follows its source whenever it answers; over HTTPS the source's
/// certificate must chain to `tls-ca:` (a follower given another authority takes nothing
/// and says why); the follower refuses API writes while it follows.
#[test]
fn https_sources_are_verified_against_tls_ca() {
    let _suite = crate::common::suite(module_path!());
    let (a_dns, a_api) = (free_port(), free_port());
    let src = Dir::new("sync-tls-a");
    let ca = test_ca(&src.0, "api");
    let (cert, key) = test_leaf(&src.0, "api", "api-leaf", "IP:127.0.0.1");
    let shared = "server:\n  local-data: \"tls.shared. 300 IN A 198.18.4.4\"\n";
    std::fs::write(src.0.join("shared.conf"), shared).unwrap();
    let mut conf = config(
        a_dns,
        a_api,
        &src.0,
        &format!(
            "  tls-cert: \"{}\"\n  tls-key: \"{}\"\n  token: \"follower sync sha256:{}\"\n",
            cert.display(),
            key.display(),
            sha256_hex(SYNC_TOKEN)
        ),
    );
    conf.push_str(&format!(
        "include: \"{}\"\nsync:\n  shared-config: shared.conf\n",
        src.0.join("shared.conf").display()
    ));
    std::fs::write(src.0.join("skuad.conf"), &conf).unwrap();
    let child = std::process::Command::new(SKUAD)
        .args(["--no-xdp", "--config"])
        .arg(src.0.join("skuad.conf"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let _a = Daemon {
        child,
        dns: SocketAddr::new(LO, a_dns),
        api: SocketAddr::new(LO, a_api),
        conf: src.0.join("skuad.conf"),
    };
    until(
        Duration::from_secs(20),
        "the source's API accepts connections",
        || std::net::TcpStream::connect((LO, a_api)).is_ok(),
    );

    let follower = |tag: &str, ca: &Path| {
        let (dns, api) = (free_port(), free_port());
        let mut n = node(tag, "127.0.0.63", dns, api, a_api);
        n.conf = n
            .conf
            .replace(
                &format!("from: http://127.0.0.1:{a_api}"),
                &format!(
                    "from: https://127.0.0.1:{a_api}\n  tls-ca: \"{}\"",
                    ca.display()
                ),
            )
            .replace("ha:\n  address: 127.0.0.63\n  lease-max: 60000\n", "");
        n.start();
        n
    };
    let good = follower("sync-tls-b", &ca);
    assert_eq!(
        good.a("tls.shared."),
        Some([198, 18, 4, 4]),
        "taken at start"
    );
    assert_eq!(
        std::fs::read_to_string(good.dir.0.join("shared.conf")).unwrap(),
        shared
    );
    let r = good.add_record("w.example. 300 IN A 198.18.4.5");
    assert_eq!(r.status, 409, "a follower refuses writes: {}", r.body);

    let other = Dir::new("sync-tls-other");
    let wrong_ca = test_ca(&other.0, "other");
    let bad = follower("sync-tls-c", &wrong_ca);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        bad.a("tls.shared."),
        None,
        "nothing taken from an unverified source"
    );
    assert_eq!(
        std::fs::read_to_string(bad.dir.0.join("shared.conf")).unwrap(),
        "server:\n"
    );
    let st = bad.call("GET", "/status", "read", None).json();
    let e = st["sync"]["last_error"].as_str().unwrap_or("").to_string();
    assert!(e.contains("TLS") && e.contains("certificate"), "{st}");
    assert_eq!(st["sync"]["following"], serde_json::Value::Null);
    // Nothing followed: it takes writes.
    let r = bad.add_record("w.example. 300 IN A 198.18.4.5");
    assert_eq!(r.status, 201, "{}", r.body);

    // The source's shared file changed and reloaded (SIGHUP): the good follower takes it.
    let shared2 = format!("{shared}  local-data: \"tls2.shared. 300 IN A 198.18.4.6\"\n");
    std::fs::write(src.0.join("shared.conf"), &shared2).unwrap();
    let pid = _a.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    until(
        Duration::from_secs(5),
        "the reloaded shared file on B",
        || good.a("tls2.shared.") == Some([198, 18, 4, 6]),
    );
}

/// A sync source that is not a skuad (what a compromised or impersonated source can send):
/// it answers every `GET /sync` at once, says it holds the lease, and offers the shared
/// text `offer` holds now (the bundle only to a follower that does not know it yet).
fn fake_source(offer: std::sync::Arc<std::sync::Mutex<String>>) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind((LO, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut head = Vec::new();
            let mut b = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let known = head
                .split_once("known=")
                .map(|(_, r)| r.split(['&', ' ']).next().unwrap_or("").to_owned())
                .unwrap_or_default();
            let config = offer.lock().unwrap().clone();
            let digest = skuad::control::sync::digest(Some(&config), &[], &[]);
            let bundle = (known != digest).then(|| {
                serde_json::json!({"digest": digest, "config": config, "zones": [], "records": []})
            });
            let body = serde_json::json!({
                "node": "source", "leased": true, "digest": digest, "bundle": bundle,
            })
            .to_string();
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// Issue 28, finding 1: a source offered a shared file with `acme:` (and the TLS service
/// files), whose `account-file:` named a file outside the follower's configuration
/// directory. The follower took it; at its next start the ACME code renamed that file away
/// (or, without `tls-service-*:`, skuad refused to start and stayed down). Now the version
/// is refused, audited and logged, nothing is written, the outside file is untouched, and
/// the follower starts again; a version it may take is still taken.
#[test]
fn a_source_cannot_give_a_follower_acme_or_make_it_touch_files_elsewhere() {
    let _suite = crate::common::suite(module_path!());
    let outside = Dir::new("sync-outside");
    let victim = outside.0.join("victim.conf");
    std::fs::write(&victim, "precious\n").unwrap();
    let with_tls = format!(
        "server:\n  local-data: \"evil.shared. 300 IN A 198.18.6.6\"\n  \
         tls-service-pem: cert.pem\n  tls-service-key: key.pem\n\
         acme:\n  directory: https://127.0.0.1:9/dir\n  name: dns.example.test\n  \
         account-file: \"{}\"\n",
        victim.display()
    );
    let offer = std::sync::Arc::new(std::sync::Mutex::new(with_tls));
    let src = fake_source(offer.clone());

    let dir = Dir::new("sync-acme-follower");
    let (dns, api) = (free_port(), free_port());
    secret(&dir.0.join("audit.key"), KEY);
    secret(&dir.0.join("sync.token"), SYNC_TOKEN);
    std::fs::write(dir.0.join("shared.conf"), "server:\n").unwrap();
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "include: \"{shared}\"\n\
         audit:\n  log: \"{log}\"\n  key: file:{key}\n\
         sync:\n  from: http://127.0.0.1:{src}\n  token-file: sync.token\n  shared-config: shared.conf\n  wait: 1\n",
        shared = dir.0.join("shared.conf").display(),
        log = dir.0.join("audit.log").display(),
        key = dir.0.join("audit.key").display(),
    ));
    let status = |d: &Daemon| {
        http(d, "GET", "/status", Some(tok("read")), None)
            .unwrap()
            .json()["sync"]
            .clone()
    };
    let failed_entries = || {
        std::fs::read_to_string(dir.0.join("audit.log"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| e["kind"] == "sync-in-failed")
            .collect::<Vec<_>>()
    };
    let untouched = |what: &str| {
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious\n",
            "{what}: the file outside the configuration directory"
        );
        let names: Vec<_> = std::fs::read_dir(&outside.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["victim.conf"], "{what}: nothing renamed or added");
        assert_eq!(
            std::fs::read_to_string(dir.0.join("shared.conf")).unwrap(),
            "server:\n",
            "{what}: the follower's shared file"
        );
    };

    // The catch-up at start asks the source before the API opens.
    let mut d = start(&dir.0, &conf, dns, api);
    let st = status(&d);
    assert_eq!(st["failed"], 1, "{st}");
    assert_eq!(st["applied"], 0, "{st}");
    let err = st["last_error"].as_str().unwrap_or_default();
    assert!(err.contains("'tls-service-pem:' in server:"), "{err}");
    let entries = failed_entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(
        entries[0]["detail"]["error"]
            .as_str()
            .unwrap()
            .contains("shared.conf:3: 'tls-service-pem:' in server:"),
        "the first directive refused is named with its line: {entries:?}"
    );
    assert_eq!(ask(SocketAddr::new(LO, dns), "evil.shared.").1, 0);
    untouched("offered acme: with the TLS service files");

    // acme: alone (the start then refused to run: "set both").
    *offer.lock().unwrap() = format!(
        "server:\n  local-data: \"evil.shared. 300 IN A 198.18.6.6\"\n\
         acme:\n  directory: https://127.0.0.1:9/dir\n  name: dns.example.test\n  account-file: \"{}\"\n",
        victim.display()
    );
    until(
        Duration::from_secs(10),
        "the second version refused",
        || status(&d)["failed"] == 2,
    );
    assert!(
        status(&d)["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("clause 'acme:'")
    );
    assert_eq!(failed_entries().len(), 2);
    untouched("offered acme: alone");

    // The follower starts again, and asks the same source at start.
    drop(d);
    d = start(&dir.0, &conf, dns, api);
    assert_eq!(status(&d)["applied"], 0);
    untouched("after a restart");

    // What a shared file may hold is still taken from that source.
    let fine = "server:\n  local-zone: \"shared.\" static\n  local-data: \"ok.shared. 300 IN A 198.18.7.7\"\n";
    *offer.lock().unwrap() = fine.to_owned();
    until(Duration::from_secs(10), "an allowed version taken", || {
        status(&d)["applied"] == 1
    });
    assert_eq!(
        ask(SocketAddr::new(LO, dns), "ok.shared.").2,
        [198, 18, 7, 7]
    );
    assert_eq!(
        std::fs::read_to_string(dir.0.join("shared.conf")).unwrap(),
        fine
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    drop(d);
}
