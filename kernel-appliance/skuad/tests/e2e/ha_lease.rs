//! The service address under the host agent's lease (`ha:` clause, `/ha` routes): skuad
//! answers it only while a lease runs, stops by itself when nobody renews it, refuses to
//! renew a lease that ran out, and audits the transitions. On loopback (127.0.0.0/8 is all
//! local, so 127.0.0.53 needs no address configured); the two-node VRRP tests with the
//! agent are in host-agent/ and tests/ha/. Also: an anycast service address, which the
//! host holds only while the agent finds it healthy, is listened on with `ip-freebind:`.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::common::*;

/// One UDP query to `server`, waiting at most `wait`: `Some(rcode)` or `None` (no answer).
fn try_ask(server: SocketAddr, wait: Duration) -> Option<u8> {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    s.send_to(&query(0x5353, "a.example.", 1), server).unwrap();
    let mut b = [0u8; 1500];
    s.recv_from(&mut b).ok().map(|_| b[3] & 0xf)
}

/// One TCP query, waiting 500 ms ([`ask_tcp`]).
fn ask_tcp_short(server: SocketAddr) -> Option<u8> {
    ask_tcp(server, Duration::from_millis(500))
}

fn lease(d: &Daemon, body: &str) -> Resp {
    http(d, "POST", "/ha/lease", Some(tok("operator")), Some(body)).unwrap()
}

#[test]
fn the_service_address_is_answered_only_under_a_running_lease() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("ha-lease");
    let (dns, api) = (free_port(), free_port());
    let key = audit_key(&dir.0);
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&format!(
        "ha:\n  address: 127.0.0.53\n  lease-max: 2000\n\
         audit:\n  log: \"{}\"\n  key: file:{}\n",
        dir.0.join("audit.log").display(),
        key.display()
    ));
    let d = start(&dir.0, &conf, dns, api);
    let vip = SocketAddr::new("127.0.0.53".parse().unwrap(), dns);
    let short = Duration::from_millis(300);

    // The ordinary address answers; the service address does not without a lease.
    assert_eq!(try_ask(d.dns, short), Some(0));
    assert_eq!(try_ask(vip, short), None, "no lease yet: not answered");
    assert_eq!(ask_tcp_short(vip), None, "nor over TCP");
    let st = http(&d, "GET", "/ha", Some(tok("read")), None)
        .unwrap()
        .json();
    assert_eq!(st["addresses"][0]["address"], "127.0.0.53");
    assert_eq!(st["addresses"][0]["serving"], false);
    assert!(st["addresses"][0]["unleased_queries"].as_u64().unwrap() >= 2);

    // Roles: a read token may look, not take.
    let r = http(
        &d,
        "POST",
        "/ha/lease",
        Some(tok("read")),
        Some(r#"{"ttl_ms":500}"#),
    )
    .unwrap();
    assert_eq!(r.status, 403, "{}", r.body);
    // A renewal of a lease never taken is refused: the agent must take it.
    let r = lease(&d, r#"{"ttl_ms":500,"renew":true}"#);
    assert_eq!((r.status, r.code()), (409, "conflict".into()), "{}", r.body);
    // Addresses that are not ha: addresses.
    let r = lease(&d, r#"{"ttl_ms":500,"addresses":["127.0.0.1"]}"#);
    assert_eq!(r.status, 404, "{}", r.body);
    let r = lease(&d, r#"{"ttl_ms":0}"#);
    assert_eq!(r.status, 400, "{}", r.body);

    // Taken for 600 ms: answered over UDP and TCP.
    let t0 = Instant::now();
    let r = lease(&d, r#"{"ttl_ms":600,"holder":"test-agent"}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["addresses"][0]["serving"], true);
    assert_eq!(try_ask(vip, short), Some(0));
    assert_eq!(ask_tcp_short(vip), Some(0));
    // Renewed while running (at 400 ms, for 600 ms more): still answered past the first
    // expiry (600 ms), not past the second.
    let until = |ms: u64| {
        let at = t0 + Duration::from_millis(ms);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
    };
    until(400);
    let r = lease(&d, r#"{"ttl_ms":600,"renew":true}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    until(700);
    assert_eq!(try_ask(vip, short), Some(0), "renewed lease still runs");

    // Nobody renews: it ends by itself.
    until(1100);
    assert_eq!(try_ask(vip, short), None, "lease ran out: not answered");
    assert_eq!(ask_tcp_short(vip), None);
    assert_eq!(
        try_ask(d.dns, short),
        Some(0),
        "the other address is not affected"
    );
    let r = lease(&d, r#"{"ttl_ms":600,"renew":true}"#);
    assert_eq!(
        r.status, 409,
        "a lease that ran out is not renewed: {}",
        r.body
    );

    // Capped at lease-max (2000 ms).
    let r = lease(&d, r#"{"ttl_ms":60000}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    let left = r.json()["addresses"][0]["remaining_ms"].as_u64().unwrap();
    assert!(left <= 2000 && left > 1500, "{left}");
    // Released: not answered at once.
    let r = http(
        &d,
        "POST",
        "/ha/release",
        Some(tok("operator")),
        Some(r#"{"reason":"VRRP: backup"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(try_ask(vip, short), None, "released");

    // Metrics and audit.
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    assert!(
        m.contains("skua_ha_lease_serving{address=\"127.0.0.53\"} 0"),
        "{m}"
    );
    assert!(
        m.contains("skua_ha_lease_events_total{event=\"taken\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("skua_ha_lease_events_total{event=\"expired\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("skua_ha_lease_events_total{event=\"released\"} 1"),
        "{m}"
    );
    let log = std::fs::read_to_string(dir.0.join("audit.log")).unwrap();
    let events: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "ha-lease")
        .map(|e| e["detail"]["event"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(events, ["taken", "expired", "taken", "released"], "{log}");
}

/// An `interface:` address the host does not hold: refused at start (a typo is caught),
/// unless `ip-freebind: yes`, as for an anycast address the host agent adds only while the
/// node is healthy (tests/ha/bgp.py has it with BIRD).
#[test]
fn an_address_the_host_lacks_is_listened_on_only_with_ip_freebind() {
    let _suite = crate::common::suite(module_path!());
    // 198.18.251.53 is on no interface of a test machine (198.18.0.0/15 is for tests).
    let absent = "198.18.251.53";
    let dir = Dir::new("freebind");
    let (dns, api) = (free_port(), free_port());
    let conf = config(dns, api, &dir.0, "").replace(
        "  interface: 127.0.0.1\n",
        &format!("  interface: 127.0.0.1\n  interface: {absent}\n"),
    );
    let path = dir.0.join("strict.conf");
    std::fs::write(&path, &conf).unwrap();
    let out = std::process::Command::new(SKUAD)
        .args(["--no-xdp", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started without the address: {err}");
    assert!(
        err.contains(&format!("{absent}:{dns}")) && err.contains("annot assign"),
        "{err}"
    );
    let conf = conf.replace("server:\n", "server:\n  ip-freebind: yes\n");
    let d = start(&dir.0, &conf, dns, api);
    assert_eq!(try_ask(d.dns, Duration::from_millis(500)), Some(0));
    let c = http(&d, "GET", "/config", Some(tok("operator")), None)
        .unwrap()
        .json();
    assert_eq!(c["effective"]["server"]["ip-freebind"], true, "{c}");
    assert!(
        c["effective"]["server"]["udp"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == &format!("{absent}:{dns}")),
        "{c}"
    );
}
