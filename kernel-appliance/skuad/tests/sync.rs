//! Configuration and API data synced from the master to the other node through the API
//! (`sync:` clause, `GET /sync`), with both audit logs recording it: two skuads on loopback,
//! each with its own service address under a lease, the same `sync:` clause pointing at the
//! other. The data follow the lease: the master's shared file and API records reach the
//! other node (at start, before its API opens; then within the long-poll), the follower
//! refuses API writes, a version the follower cannot load is recorded and changes nothing,
//! and after the lease moves the data flow the other way.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

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
