//! skuad as a forwarder against real and scripted upstreams, each script in a network
//! namespace of its own with only loopback (tests/resolver/*.py, dnspython):
//!
//! - `hostile.py`: hostile and failing upstreams. Wrong IDs, wrong questions, wrong source
//!   addresses, garbage (each before the real reply, which must still be answered, and
//!   alone), out-of-bailiwick records, truncation, a 64 KiB TCP reply of garbage, a
//!   byte-a-second drip, silence, 30 % UDP loss (nftables), serve-stale while the upstream
//!   is down, an endless CNAME chain (at most 12 upstream queries), and a TCP upstream that
//!   stops reading (the connection reopened): no crash, no poisoned cache entry, SERVFAIL
//!   within the resolver's budget.
//! - `dot.py`: DNS over TLS upstreams (Unbound with a test CA): answered when the
//!   certificate carries the `#name`, SERVFAIL (EDE 23) when it does not or the port
//!   speaks plain DNS, the connection reused.
//! - `cache.py`: TTLs counting down, negative caching for the SOA MINIMUM, prefetch seen at
//!   the upstream, reloads keeping (or, for a changed zone, dropping) entries, resident
//!   memory bounded under 30,000 names with a 2 MiB cache.
//!
//! Needs root (network namespaces, nftables): it asserts it, never skips.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{LoopbackNs, SKUAD, assert_root, python_in};

#[test]
fn hostile_and_failing_upstreams() {
    let _suite = crate::common::suite(module_path!());
    run_script("hostile.py");
}

#[test]
fn dns_over_tls_upstreams() {
    let _suite = crate::common::suite(module_path!());
    run_script("dot.py");
}

#[test]
fn cache_ttls_negative_prefetch_reload_and_memory() {
    let _suite = crate::common::suite(module_path!());
    run_script("cache.py");
}

/// The embedded default configuration forwards: in a namespace with only loopback (so
/// nothing reaches the Internet), its demo zone answers and a name outside it goes to the
/// upstreams (unreachable here: SERVFAIL with EDE 23, at once) instead of being REFUSED.
#[test]
fn embedded_default_forwards() {
    let _suite = crate::common::suite(module_path!());
    assert_root("a network namespace");
    let ns = LoopbackNs::new(format!("skua-default-{}", std::process::id()));
    let mut skuad = Command::new("ip")
        .args(["netns", "exec", &ns.0, SKUAD])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start skuad");
    let dig = |name: &str| -> String {
        let out = Command::new("timeout")
            .args([
                "20",
                "ip",
                "netns",
                "exec",
                &ns.0,
                "dig",
                "@127.0.0.1",
                "-p",
                "5353",
                "+tries=1",
                "+time=8",
                name,
            ])
            .output()
            .expect("dig");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let t0 = Instant::now();
    let mut local = String::new();
    while t0.elapsed() < Duration::from_secs(20) {
        local = dig("www.skua.test");
        if local.contains("status: NOERROR") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let t1 = Instant::now();
    let remote = dig("example.com");
    let took = t1.elapsed();
    let _ = skuad.kill();
    let out = skuad.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        local.contains("198.18.0.10"),
        "the demo zone: {local}\n{log}"
    );
    assert!(
        remote.contains("status: SERVFAIL") && remote.contains("EDE: 23"),
        "a name outside local data is forwarded (upstreams unreachable here): {remote}\n{log}"
    );
    assert!(took < Duration::from_secs(6), "SERVFAIL took {took:?}");
    assert!(log.contains("resolver: 1 forward/stub zone(s)"), "{log}");
}

/// Runs tests/resolver/SCRIPT in a fresh namespace with skuad's binary and a work
/// directory; fails with its output and skuad's log unless it exits 0.
fn run_script(script: &str) {
    assert_root("a network namespace, nftables");
    let tag = script.trim_end_matches(".py");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/resolver")
        .join(script);
    let ns = LoopbackNs::new(format!("skua-{tag}-{}", std::process::id()));
    let work = std::env::temp_dir().join(format!("skua-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    // The system's python3 (python3-dnspython is a Debian package tests/run.sh installs).
    let out = python_in(&ns, &script, &work, 240);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    let log = std::fs::read_to_string(work.join("skuad.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{tag}.py: checks failed ({}):\n{stdout}\n{stderr}\nskuad's log:\n{log}",
        out.status
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// `fwdhost.py`: zones given by `forward-host:`/`stub-host:` only, the names resolved by
/// skuad through another forward zone (Unbound), the questions answered by Unbound and NSD
/// at the resolved addresses (IPv4 and IPv6); the upstream list shows them; a loop and a
/// loopback-only host fail at once (EDE 22); a changed or removed host record is followed
/// after its TTL.
#[test]
fn forward_and_stub_hosts_resolved_and_followed() {
    let _suite = crate::common::suite(module_path!());
    run_script("fwdhost.py");
}
