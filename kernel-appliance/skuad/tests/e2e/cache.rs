//! The resolver's cache through the operator's tools, against a real upstream: Unbound
//! serving `example.net.` on 127.0.0.1@5301 and skuad forwarding `.` to it, both in a
//! network namespace of their own (only loopback), skuactl talking to skuad over its
//! control socket (root: role admin).
//!
//! One scenario, in order: a miss then a hit (TTL lower, the upstream asked once: skuad's
//! and Unbound's own counters), `cache lookup`, flushes (a name, negative answers, a
//! subtree; each next question reaches the upstream again), `upstreams` and `/metrics`
//! (hits, misses, the upstream's RTT), the audit log's `cache-flush` and `cache-load`
//! entries, and `cache dump` → the upstream stopped → skuad restarted (SERVFAIL: empty
//! cache, no upstream) → `cache load` → the names answered from the cache, TTLs counting
//! on from the dump.
//!
//! Needs root (a network namespace): it asserts it, never skips. Every wait is bounded.
//! skuactl is found next to skuad (`SKUACTL_BIN` overrides) and built with cargo when it
//! is missing.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::{SKUAD, assert_root, run_bounded};
const UPSTREAM_PORT: u16 = 5301;
const DNS_PORT: u16 = 5353;

/// The skuactl binary: `SKUACTL_BIN`, else next to skuad, built if missing.
fn skuactl() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("SKUACTL_BIN") {
            return PathBuf::from(p);
        }
        let bin = Path::new(SKUAD).with_file_name("skuactl");
        if bin.is_file() {
            return bin;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
        let mut cmd = Command::new(&cargo);
        cmd.args(["build", "-p", "skuactl", "--bin", "skuactl"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if Path::new(SKUAD)
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "release")
        {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("run cargo build -p skuactl");
        assert!(st.success(), "cargo build -p skuactl: {st}");
        assert!(
            bin.is_file(),
            "no {} (CARGO_TARGET_DIR differs? set SKUACTL_BIN)",
            bin.display()
        );
        bin
    })
}

/// A network namespace with loopback up, deleted on drop (with what runs in it).
struct Ns(String);

impl Ns {
    fn new() -> Self {
        let name = format!("skuad-cache-{}", std::process::id());
        let _ = run_bounded(10, "ip", &["netns", "del", &name]);
        let o = run_bounded(10, "ip", &["netns", "add", &name]);
        assert!(o.status.success(), "ip netns add: {o:?}");
        let ns = Ns(name);
        let o = run_bounded(10, "ip", &["-n", &ns.0, "link", "set", "lo", "up"]);
        assert!(o.status.success(), "ip link set lo up: {o:?}");
        ns
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let pids = run_bounded(10, "ip", &["netns", "pids", &self.0]);
        for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
            let _ = run_bounded(10, "kill", &["-KILL", pid]);
        }
        let _ = run_bounded(10, "ip", &["netns", "del", &self.0]);
    }
}

/// A process started in the namespace, killed on drop; its stderr in a file.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn start(ns: &Ns, log: PathBuf, prog: &str, args: &[&str]) -> Self {
        let err = std::fs::File::create(&log).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.0, prog])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {prog}: {e}"));
        Proc { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then wait (bounded), then SIGKILL.
    fn stop(&mut self) {
        let _ = run_bounded(5, "kill", &["-TERM", &self.child.id().to_string()]);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 100 ms until it holds or `secs` pass.
fn wait_for(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t.elapsed() > Duration::from_secs(secs) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A reply as dig shows it: its status and answer records `(owner, ttl, type, data)`.
#[derive(Debug)]
struct Reply {
    status: String,
    answer: Vec<(String, u32, String, String)>,
}

impl Reply {
    fn a(&self) -> Option<(u32, &str)> {
        self.answer
            .iter()
            .find(|r| r.2 == "A")
            .map(|r| (r.1, r.3.as_str()))
    }
}

struct World {
    ns: Ns,
    dir: PathBuf,
    socket: PathBuf,
    unbound_conf: PathBuf,
}

impl World {
    fn dig(&self, name: &str, qtype: &str) -> Reply {
        let o = run_bounded(
            20,
            "ip",
            &[
                "netns",
                "exec",
                &self.ns.0,
                "dig",
                "@127.0.0.1",
                "-p",
                &DNS_PORT.to_string(),
                "+tries=1",
                "+time=8",
                "+noall",
                "+comments",
                "+answer",
                name,
                qtype,
            ],
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let status = text
            .split("status: ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .unwrap_or("(no reply)")
            .to_string();
        let answer = text
            .lines()
            .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() >= 5).then(|| {
                    (
                        w[0].to_string(),
                        w[1].parse().unwrap_or(u32::MAX),
                        w[3].to_string(),
                        w[4..].join(" "),
                    )
                })
            })
            .collect();
        Reply { status, answer }
    }

    /// skuactl over the control socket: (exit code, stdout, stderr).
    fn ctl(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["--socket", self.socket.to_str().unwrap()];
        all.extend_from_slice(args);
        let o = run_bounded(30, skuactl().to_str().unwrap(), &all);
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    #[track_caller]
    fn ctl_ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.ctl(args);
        assert_eq!(code, 0, "skuactl {args:?}: {out}{err}");
        out
    }

    fn ctl_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.push("--json");
        let out = self.ctl_ok(&a);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// Replies skuad counted from the upstream (its snapshot is refreshed every second).
    fn upstream_replies(&self) -> u64 {
        let v = self.ctl_json(&["upstreams"]);
        v["upstreams"][0]["replies"].as_u64().unwrap_or(0)
    }

    /// Queries Unbound received, by its own count.
    fn unbound_queries(&self) -> u64 {
        let o = run_bounded(
            10,
            "ip",
            &[
                "netns",
                "exec",
                &self.ns.0,
                "unbound-control",
                "-c",
                self.unbound_conf.to_str().unwrap(),
                "stats_noreset",
            ],
        );
        let text = String::from_utf8_lossy(&o.stdout);
        text.lines()
            .find_map(|l| l.strip_prefix("total.num.queries="))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("unbound-control stats_noreset: {o:?}"))
    }

    fn start_unbound(&self) -> Proc {
        let p = Proc::start(
            &self.ns,
            self.dir.join("unbound.log"),
            "unbound",
            &["-d", "-c", self.unbound_conf.to_str().unwrap()],
        );
        assert!(
            wait_for(15, || run_bounded(
                5,
                "ip",
                &[
                    "netns",
                    "exec",
                    &self.ns.0,
                    "unbound-control",
                    "-c",
                    self.unbound_conf.to_str().unwrap(),
                    "status"
                ]
            )
            .status
            .success()),
            "unbound did not come up: {}",
            p.log()
        );
        p
    }

    fn start_skuad(&self) -> Proc {
        let conf = self.dir.join("skuad.conf");
        let p = Proc::start(
            &self.ns,
            self.dir.join("skuad.log"),
            SKUAD,
            &["--no-xdp", "--config", conf.to_str().unwrap()],
        );
        assert!(
            wait_for(20, || self.ctl(&["status"]).0 == 0),
            "skuad did not come up: {}",
            p.log()
        );
        p
    }
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn cache_lookup_flush_dump_restart_load() {
    let _suite = crate::common::suite(module_path!());
    assert_root("a network namespace");
    let t0 = Instant::now();
    let dir = std::env::temp_dir().join(format!("skuad-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let unbound_conf = dir.join("unbound.conf");
    std::fs::write(
        &unbound_conf,
        format!(
            "server:\n  interface: 127.0.0.1@{UPSTREAM_PORT}\n  do-daemonize: no\n  \
             use-syslog: no\n  logfile: \"\"\n  username: \"\"\n  chroot: \"\"\n  pidfile: \"\"\n  \
             directory: \"{d}\"\n  num-threads: 1\n  access-control: 127.0.0.0/8 allow\n  \
             module-config: \"iterator\"\n  \
             local-zone: \"example.net.\" static\n  \
             local-data: \"example.net. 300 IN SOA ns.example.net. admin.example.net. 1 2 3 4 120\"\n  \
             local-data: \"www.example.net. 300 IN A 198.18.5.1\"\n  \
             local-data: \"alias.example.net. 600 IN CNAME www.example.net.\"\n\
             remote-control:\n  control-enable: yes\n  control-interface: \"{d}/unbound.ctl\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let key = dir.join("audit.key");
    std::fs::write(&key, "5a".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let audit = dir.join("audit.log");
    let socket = dir.join("control.sock");
    std::fs::write(
        dir.join("skuad.conf"),
        format!(
            "server:\n  interface: 127.0.0.1@{DNS_PORT}\n  access-control: 127.0.0.0/8 allow\n  \
             do-not-query-localhost: no\n\
             forward-zone:\n  name: \".\"\n  forward-addr: 127.0.0.1@{UPSTREAM_PORT}\n\
             api:\n  enable: no\n  control-socket: \"{}\"\n\
             audit:\n  log: \"{}\"\n  key: \"file:{}\"\n",
            socket.display(),
            audit.display(),
            key.display()
        ),
    )
    .unwrap();
    let w = World {
        ns: Ns::new(),
        dir: dir.clone(),
        socket,
        unbound_conf,
    };
    let mut unbound = w.start_unbound();
    let mut skuad = w.start_skuad();
    let logs = |s: &Proc, u: &Proc| format!("skuad:\n{}\nunbound:\n{}", s.log(), u.log());

    // A miss: the upstream answers (its counter and ours), TTL 300 at most.
    let r = w.dig("www.example.net", "A");
    assert_eq!(r.status, "NOERROR", "{r:?}\n{}", logs(&skuad, &unbound));
    let (ttl1, addr) = r.a().expect("an address");
    assert_eq!(addr, "198.18.5.1");
    assert!((298..=300).contains(&ttl1), "{r:?}");
    assert_eq!(w.unbound_queries(), 1);
    assert!(
        wait_for(5, || w.upstream_replies() == 1),
        "upstream replies"
    );

    // A hit: a lower TTL, nothing more at the upstream.
    std::thread::sleep(Duration::from_millis(1100));
    let r = w.dig("www.example.net", "A");
    let (ttl2, _) = r.a().expect("an address");
    assert!(ttl2 < ttl1, "{ttl2} after {ttl1}");
    assert_eq!(w.unbound_queries(), 1);

    // lookup shows the answer and the RRset with what they have left.
    let out = w.ctl_ok(&["cache", "lookup", "WWW.example.net"]);
    assert!(
        out.contains("answer www.example.net. IN A: NOERROR positive")
            && out.contains("IN A 198.18.5.1")
            && out.contains("rrset www.example.net. IN A:"),
        "{out}"
    );
    let v = w.ctl_json(&["cache", "lookup", "www.example.net."]);
    let left = v["messages"][0]["ttl"].as_u64().unwrap();
    assert!(
        left <= u64::from(ttl2) && left + 3 >= u64::from(ttl2),
        "{v}"
    );

    // Flush the name: gone from the cache, the next question reaches the upstream.
    let out = w.ctl_ok(&["cache", "flush", "www.example.net"]);
    assert_eq!(
        out, "flushed name www.example.net.: 1 answers, 1 RRsets\n",
        "{out}"
    );
    let out = w.ctl_ok(&["cache", "lookup", "www.example.net"]);
    assert_eq!(out, "www.example.net.: not in the cache\n");
    let r = w.dig("www.example.net", "A");
    assert!(r.a().is_some_and(|(t, _)| t >= 298), "{r:?}");
    assert_eq!(w.unbound_queries(), 2);
    assert!(
        wait_for(5, || w.upstream_replies() == 2),
        "upstream replies"
    );

    // Negative answers (NODATA, NXDOMAIN) are cached, and flushed alone.
    assert_eq!(w.dig("www.example.net", "AAAA").status, "NOERROR");
    assert_eq!(w.dig("nx.example.net", "A").status, "NXDOMAIN");
    assert_eq!(w.dig("nx.example.net", "A").status, "NXDOMAIN");
    assert_eq!(w.unbound_queries(), 4);
    let v = w.ctl_json(&["cache", "lookup", "nx.example.net"]);
    assert_eq!(v["messages"][0]["kind"], "nxdomain", "{v}");
    let v = w.ctl_json(&["cache", "flush", "--negative"]);
    assert_eq!(v["messages"], 2, "{v}");
    assert_eq!(w.dig("nx.example.net", "A").status, "NXDOMAIN");
    assert_eq!(w.unbound_queries(), 5);
    // A CNAME chain, then the whole zone by subtree; a type alone.
    let r = w.dig("alias.example.net", "A");
    assert_eq!(r.answer.len(), 2, "{r:?}");
    let out = w.ctl_ok(&["cache", "flush", "example.net", "--subtree"]);
    assert!(
        out.starts_with("flushed subtree example.net.: 3 answers"),
        "{out}"
    );
    assert_eq!(
        w.ctl_ok(&["cache", "lookup", "alias.example.net"]),
        "alias.example.net.: not in the cache\n"
    );
    let before = w.unbound_queries();
    assert_eq!(w.dig("alias.example.net", "A").answer.len(), 2);
    assert!(w.unbound_queries() > before);
    let v = w.ctl_json(&["cache", "flush", "alias.example.net", "--type", "AAAA"]);
    assert_eq!(
        (v["messages"].as_u64(), v["rrsets"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
    assert_eq!(w.dig("www.example.net", "A").status, "NOERROR");

    // upstreams and /metrics: hits, misses, the upstream's RTT.
    std::thread::sleep(Duration::from_millis(1100));
    let out = w.ctl_ok(&["upstreams"]);
    assert!(
        out.contains(&format!("127.0.0.1:{UPSTREAM_PORT}"))
            && out.contains(" udp ")
            && out.contains(" up "),
        "{out}"
    );
    let m = w.ctl_ok(&["metrics"]);
    let up = format!("{{upstream=\"127.0.0.1:{UPSTREAM_PORT}\"}}");
    assert!(
        metric(&m, "skua_cache_hits_total").is_some_and(|n| n >= 2.0),
        "{m}"
    );
    assert!(
        metric(&m, "skua_cache_misses_total").is_some_and(|n| n >= 5.0),
        "{m}"
    );
    assert!(
        metric(&m, &format!("skua_upstream_srtt_seconds{up}"))
            .is_some_and(|s| (0.0..1.0).contains(&s)),
        "{m}"
    );
    assert!(
        metric(&m, &format!("skua_upstream_rto_seconds{up}")).is_some(),
        "{m}"
    );
    assert_eq!(
        metric(&m, &format!("skua_upstream_up{up}")),
        Some(1.0),
        "{m}"
    );
    assert!(
        metric(&m, &format!("skua_upstream_replies_total{up}")).is_some_and(|n| n >= 6.0),
        "{m}"
    );
    assert!(
        metric(&m, "skua_resolver_upstream_queries_total").is_some_and(|n| n >= 6.0),
        "{m}"
    );
    assert!(
        metric(&m, "skua_cache_entries{store=\"message\"}").is_some_and(|n| n >= 2.0),
        "{m}"
    );
    let stats = w.ctl_ok(&["stats"]);
    assert!(
        stats.contains("cache") && stats.contains("forwarder"),
        "{stats}"
    );

    // Dump; stop the upstream; restart skuad: an empty cache and no upstream (SERVFAIL).
    let dump = w.ctl_ok(&["cache", "dump"]);
    assert!(dump.starts_with("skua-cache-dump 1 written="), "{dump}");
    assert!(
        dump.contains("msg www.example.net. IN A NOERROR positive "),
        "{dump}"
    );
    assert!(
        dump.contains("msg alias.example.net. IN A NOERROR positive "),
        "{dump}"
    );
    assert!(dump.contains("eof rrsets="), "{dump}");
    let file = dir.join("cache.dump");
    std::fs::write(&file, &dump).unwrap();
    let before = w.ctl_json(&["cache", "lookup", "www.example.net"]);
    let dumped_ttl = before["messages"][0]["ttl"].as_u64().unwrap();
    // Unbound's local data comes with AA: the RRset ranks as an authoritative answer.
    assert_eq!(before["rrsets"][0]["rank"], "answer-auth", "{before}");
    unbound.stop();
    skuad.stop();
    let mut skuad = w.start_skuad();
    let r = w.dig("www.example.net", "A");
    assert_eq!(r.status, "SERVFAIL", "{r:?}\n{}", skuad.log());

    // Load: answered from the cache while the upstream is down, TTLs going on from the dump.
    let out = w.ctl_ok(&["cache", "load", file.to_str().unwrap()]);
    assert!(
        out.contains("answers") && out.contains("(0 expired"),
        "{out}"
    );
    for name in ["www.example.net", "alias.example.net"] {
        let r = w.dig(name, "A");
        assert_eq!(r.status, "NOERROR", "{name}: {r:?}\n{}", skuad.log());
        let (ttl, addr) = r.a().expect("an address");
        assert_eq!(addr, "198.18.5.1");
        // Aged by the seconds between the dump and the load (the restart), never more
        // than it had.
        assert!(
            u64::from(ttl) <= dumped_ttl && u64::from(ttl) + 15 >= dumped_ttl,
            "{name}: TTL {ttl} after a dump with {dumped_ttl} left"
        );
    }
    let v = w.ctl_json(&["cache", "lookup", "www.example.net"]);
    assert_eq!(v["rrsets"][0]["rank"], before["rrsets"][0]["rank"], "{v}");
    // A malformed dump: the line and the reason, nothing loaded (exit 1: the API refused).
    let bad = dir.join("bad.dump");
    std::fs::write(
        &bad,
        dump.replacen(
            "msg www.example.net. IN A",
            "msg www.example.net. IN BOGUS",
            1,
        ),
    )
    .unwrap();
    let (code, _, err) = w.ctl(&["cache", "load", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("line ") && err.contains("bad type 'BOGUS'") && err.contains("nothing loaded"),
        "{err}"
    );
    skuad.stop();

    // Every flush and load is in the audit log, by the control socket's caller.
    let entries = skua_audit::tail(&audit, 1000).unwrap();
    let of = |kind: &str| -> Vec<&skua_audit::Entry> {
        entries.iter().filter(|e| e.kind == kind).collect()
    };
    let flushes = of("cache-flush");
    assert_eq!(flushes.len(), 4, "{flushes:?}");
    assert!(
        flushes
            .iter()
            .all(|e| e.actor == "local:root" && e.detail["result"] == "ok")
    );
    assert_eq!(flushes[1].detail["flush"], "negative");
    let loads = of("cache-load");
    assert_eq!(loads.len(), 2, "{loads:?}");
    assert_eq!(loads[0].detail["result"], "ok");
    assert_eq!(loads[1].detail["result"], "refused");
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("cache scenario: {:.1} s", t0.elapsed().as_secs_f64());
}
