//! Reload under load: dnsperf (Debian's) sends queries for 40 s while 100 reloads (each
//! changing one record of the main configuration, spread over the first 24 s) and 1,000
//! record writes through the API run. No query may be lost (dnsperf's own count) or answered
//! with anything but NOERROR, and the changing data must be answered consistently: once a
//! reload or write has returned, no later answer shows the data from before it.

use crate::common::*;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const NAMES: usize = 100;
const RELOADS: u64 = 100;
const WRITES: usize = 1000;
const SECONDS: u64 = 40;
/// The reloads are spread over the first this many seconds (the writes run meanwhile, as
/// fast as they go): the rest of dnsperf's run is margin for a slow machine.
const SPAN: u64 = 24;

/// The main configuration at reload number `k`: 100 fixed names (the ones dnsperf asks)
/// and `v.load.example.` whose address encodes `k`.
fn main_conf(base: &str, k: u64) -> String {
    let mut c = base.to_string();
    c.push_str("server:\n  so-rcvbuf: 8m\n  local-zone: \"load.example.\" static\n");
    for i in 0..NAMES {
        c.push_str(&format!(
            "  local-data: \"n{i}.load.example. 300 IN A 198.18.3.{}\"\n",
            i % 250
        ));
    }
    c.push_str(&format!(
        "  local-data: \"v.load.example. 300 IN A 198.19.{}.{}\"\n",
        k / 256,
        k % 256
    ));
    c
}

/// The generation encoded in `v.load.example.`'s answer.
fn version(server: SocketAddr, sock: &UdpSocket, id: u16) -> Option<u64> {
    let q = query(id, "v.load.example.", 1);
    sock.send_to(&q, server).ok()?;
    let mut b = [0u8; 512];
    loop {
        let (n, _) = sock.recv_from(&mut b).ok()?;
        if n >= 16 && b[..2] == q[..2] {
            assert_eq!(b[3] & 0xf, 0, "v.load.example. must always exist");
            let a = &b[n - 4..n];
            assert_eq!(a[0..2], [198, 19]);
            return Some(u64::from(a[2]) * 256 + u64::from(a[3]));
        }
    }
}

#[test]
fn reloads_and_writes_under_dnsperf_lose_nothing() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("load");
    let (p, a) = (free_port(), free_port());
    let base = config(p, a, &dir.0, "  auth-fail-limit: 1000\n");
    let d = start(&dir.0, &main_conf(&base, 0), p, a);
    let qfile = dir.0.join("queries.txt");
    let names: String = (0..NAMES)
        .map(|i| format!("n{i}.load.example. A\n"))
        .collect();
    std::fs::write(&qfile, names).unwrap();
    let perf = Command::new("dnsperf")
        .args(["-s", "127.0.0.1", "-p", &p.to_string(), "-d"])
        .arg(&qfile)
        .args([
            "-l",
            &SECONDS.to_string(),
            "-Q",
            "4000",
            "-t",
            "5",
            "-c",
            "4",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dnsperf (Debian package dnsperf) must be installed");
    let started = Instant::now();
    let done_reload = Arc::new(AtomicU64::new(0));
    let begun_reload = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    // Consistency checker for reloads: the answer is never older than the last reload
    // that returned before the query, never newer than the last one begun.
    let checker = {
        let (done, begun, stop) = (done_reload.clone(), begun_reload.clone(), stop.clone());
        let server = d.dns;
        std::thread::spawn(move || {
            let sock = UdpSocket::bind((LO, 0)).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut checks = 0u64;
            let mut id = 0u16;
            while !stop.load(Ordering::Relaxed) {
                id = id.wrapping_add(1);
                let lo = done.load(Ordering::SeqCst);
                let v = version(server, &sock, id).expect("v.load.example. unanswered");
                let hi = begun.load(Ordering::SeqCst);
                assert!(lo <= v && v <= hi, "answer {v} outside [{lo}, {hi}]");
                checks += 1;
            }
            checks
        })
    };

    // 100 reloads spread over the run.
    let reloader = {
        let (done, begun) = (done_reload.clone(), begun_reload.clone());
        let (conf, api, base) = (d.conf.clone(), d.api, base.clone());
        std::thread::spawn(move || {
            // Reload k starts at k × gap (a schedule, not a sleep after each reload: slow
            // reloads on a loaded machine must not push the last ones past dnsperf's end).
            let gap = Duration::from_millis(SPAN * 1000 / RELOADS);
            let t0 = Instant::now();
            for k in 1..=RELOADS {
                std::thread::sleep(
                    (t0 + gap * (k as u32 - 1)).saturating_duration_since(Instant::now()),
                );
                std::fs::write(&conf, main_conf(&base, k)).unwrap();
                begun.store(k, Ordering::SeqCst);
                let req = format!(
                    "POST /reload HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
                     Authorization: Bearer {}\r\nContent-Length: 0\r\n\r\n",
                    tok("operator")
                )
                .into_bytes();
                let r = raw(api, &req).unwrap();
                assert_eq!(r.status, 200, "reload {k}: {r:?}");
                done.store(k, Ordering::SeqCst);
            }
        })
    };

    // 1,000 writes: 500 records added then removed, each checked right after it returned.
    let r = http(
        &d,
        "POST",
        "/zones",
        Some(tok("dns")),
        Some(r#"{"name":"w.example.","type":"static"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    let mut write_ms = Vec::with_capacity(WRITES);
    for i in 0..WRITES / 2 {
        let rr = format!("w{i}.w.example. 60 IN A 198.18.4.{}", i % 250);
        let t = Instant::now();
        let r = http(
            &d,
            "POST",
            "/records",
            Some(tok("dns")),
            Some(&format!(r#"{{"rr":"{rr}"}}"#)),
        )
        .unwrap();
        assert_eq!(r.status, 201, "{r:?}");
        write_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let (rcode, an, addr) = ask(d.dns, &format!("w{i}.w.example."));
        assert_eq!(
            (rcode, an, addr),
            (0, 1, [198, 18, 4, (i % 250) as u8]),
            "after add {i}"
        );
        let t = Instant::now();
        let enc = rr.replace(' ', "%20");
        let r = http(
            &d,
            "DELETE",
            &format!("/records?rr={enc}"),
            Some(tok("dns")),
            None,
        )
        .unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        write_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            ask(d.dns, &format!("w{i}.w.example.")).0,
            3,
            "after remove {i}"
        );
    }
    reloader.join().expect("reloads");
    let writes_done = started.elapsed();
    let out = perf.wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    let checks = checker.join().expect("consistency");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(
        out.status.success(),
        "dnsperf failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |key: &str| -> u64 {
        let l = text
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no '{key}' in dnsperf output"));
        l.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let sent = field("Queries sent:");
    let completed = field("Queries completed:");
    let lost = field("Queries lost:");
    write_ms.sort_by(f64::total_cmp);
    eprintln!(
        "dnsperf: {sent} sent, {completed} completed, {lost} lost; {RELOADS} reloads and {WRITES} writes \
         in {:.1} s; write latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {checks} consistency checks",
        writes_done.as_secs_f64(),
        write_ms[write_ms.len() / 2],
        write_ms[write_ms.len() * 99 / 100],
        write_ms[write_ms.len() - 1]
    );
    assert!(
        sent > 40_000,
        "dnsperf sent too little to mean anything: {sent}"
    );
    assert_eq!(lost, 0, "queries lost during reloads and writes");
    assert_eq!(completed, sent);
    let noerror = text
        .lines()
        .find(|l| l.contains("Response codes:"))
        .expect("response codes line");
    assert!(
        noerror.contains("NOERROR")
            && !noerror.contains("SERVFAIL")
            && !noerror.contains("NXDOMAIN")
            && !noerror.contains("REFUSED"),
        "{noerror}"
    );
    assert!(
        writes_done < Duration::from_secs(SECONDS),
        "the writes and reloads must happen while dnsperf runs ({writes_done:?})"
    );
    assert!(checks > 100);
}
