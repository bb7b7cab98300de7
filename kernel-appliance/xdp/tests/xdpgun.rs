//! `skua-xdpgun`, the benchmarks' load generator, end to end: in a network namespace of its
//! own, over a veth pair, it sends paced queries from a prefix of sources to a kernel UDP
//! socket that answers them in a test thread, and must report what it sent and count every
//! reply that came back through its AF_XDP receive path.
//!
//! Needs root (network namespaces, AF_XDP, BPF), like `bpf_prog.rs`: it fails without it
//! rather than skip.

use std::collections::HashMap;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

const GUN: &str = env!("CARGO_BIN_EXE_skua-xdpgun");

fn root() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the load generator test needs root (AF_XDP, BPF, network namespaces); it does not skip"
    );
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A namespace with veth `xg0` (198.18.9.1/24, the responder's) <-> `xg1` (no address: the
/// generator's, sending from 198.18.9.128/26); replies to the generator's sources go out of
/// `xg0` to `xg1`'s MAC. Deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "xgun-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Self { name };
        // No IPv6: no router solicitation or MLD report may cross the pair and be counted.
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sysctl", "-qw"])
            .args([
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .status()
            .expect("sysctl");
        assert!(out.success(), "sysctl disable_ipv6");
        ns.ip(&["link", "add", "xg0", "type", "veth", "peer", "name", "xg1"]);
        ns.ip(&["addr", "add", "198.18.9.1/24", "dev", "xg0"]);
        ns.ip(&["link", "set", "xg0", "up"]);
        ns.ip(&["link", "set", "xg1", "up"]);
        let mac1 = ns.mac("xg1");
        for i in 129..191 {
            let a = format!("198.18.9.{i}");
            ns.ip(&[
                "neigh",
                "replace",
                &a,
                "lladdr",
                &mac1,
                "dev",
                "xg0",
                "nud",
                "permanent",
            ]);
        }
        ns
    }

    fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip(&all)
    }

    fn mac(&self, dev: &str) -> String {
        let out = self.ip(&["-br", "link", "show", "dev", dev]);
        out.split_whitespace().nth(2).expect("MAC").to_string()
    }

    fn counter(&self, dev: &str, name: &str) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "cat"])
            .arg(format!("/sys/class/net/{dev}/statistics/{name}"))
            .output()
            .expect("cat");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("counter")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// What the responder saw: answers sent, per question name, per source address.
#[derive(Default)]
struct Seen {
    answered: u64,
    names: HashMap<Vec<u8>, u64>,
    sources: HashMap<Ipv4Addr, u64>,
}

/// Answers every query on `sock` (the query with QR set, NXDOMAIN for names starting with
/// "nx") until `stop`.
fn respond(sock: &UdpSocket, stop: &AtomicBool) -> Seen {
    let mut seen = Seen::default();
    let mut buf = [0u8; 1500];
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        assert!(n > 12, "a query too short for a DNS header: {n} octets");
        assert_eq!(buf[2] & 0x80, 0, "QR set in a query");
        assert_eq!(buf[2] & 0x01, 0x01, "RD not set (kxdpgun sets it)");
        let qend = 12 + buf[12..n].iter().position(|&b| b == 0).expect("qname") + 1;
        let name = buf[12..qend].to_vec();
        let nx = &name[1..3] == b"nx";
        *seen.names.entry(name).or_default() += 1;
        let SocketAddr::V4(f) = from else {
            panic!("IPv6 source {from}")
        };
        *seen.sources.entry(*f.ip()).or_default() += 1;
        buf[2] |= 0x80;
        buf[3] = if nx { 3 } else { 0 };
        sock.send_to(&buf[..n], from).expect("send reply");
        seen.answered += 1;
    }
    seen
}

fn field(out: &str, prefix: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no '{prefix}' in the generator's output:\n{out}"))
}

#[test]
fn paced_queries_from_a_prefix_and_every_reply_counted() {
    root();
    let ns = Netns::new();
    let dir = std::env::temp_dir().join(format!("xgun-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let qfile = dir.join("queries.txt");
    std::fs::write(
        &qfile,
        "h1.internal. A\nh2.internal. AAAA\nnx3.internal. A e\n",
    )
    .expect("write queries");

    // The responder's socket, bound inside the namespace (netns membership is per thread:
    // the socket keeps the namespace it was made in).
    let path = format!("/run/netns/{}", ns.name);
    let sock = std::thread::scope(|s| {
        s.spawn(|| {
            let f = File::open(&path).expect("open netns");
            // SAFETY: `f` is an open namespace file for the whole call; setns only changes
            // this (scoped) thread's network namespace.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            UdpSocket::bind("198.18.9.1:53").expect("bind 198.18.9.1:53")
        })
        .join()
        .expect("bind thread")
    });
    let stop = AtomicBool::new(false);
    let rx_before = ns.counter("xg1", "rx_packets");
    let (out, seen) = std::thread::scope(|s| {
        let responder = s.spawn(|| respond(&sock, &stop));
        let mac0 = ns.mac("xg0");
        let q = qfile.to_str().expect("path");
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.name, GUN])
            .args(["-t", "1", "-Q", "2000", "-i", q, "-I", "xg1"])
            .args([
                "-l",
                "198.18.9.128/26",
                "-R",
                &mac0,
                "-w",
                "300",
                "198.18.9.1",
            ])
            .output()
            .expect("run skua-xdpgun");
        stop.store(true, Ordering::Relaxed);
        let seen = responder.join().expect("responder");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "skua-xdpgun failed: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        (text, seen)
    });
    let _ = std::fs::remove_dir_all(&dir);

    // Paced: 2000 qps for 1 s is 2000 queries, all sent (the pacing sends what is due, and
    // stops at the total).
    let sent = field(&out, "total queries:");
    assert_eq!(sent, 2000, "queries sent:\n{out}");
    // Every query reached the responder, round-robin over the file's three questions and the
    // 62 hosts of the /26 (not the network and broadcast addresses).
    assert_eq!(seen.answered, sent, "the responder answered every query");
    assert_eq!(seen.names.len(), 3, "three distinct questions");
    assert!(seen.names.values().all(|&n| n >= 666), "{:?}", seen.names);
    assert_eq!(seen.sources.len(), 62, "every host of the /26 as a source");
    assert!(
        seen.sources
            .keys()
            .all(|a| (129..=190).contains(&a.octets()[3])),
        "{:?}",
        seen.sources.keys()
    );
    // Every answer came back through the generator's receive program and was counted, with
    // its RCODE; the veth saw exactly those frames.
    let replies = field(&out, "total replies:");
    assert_eq!(replies, seen.answered, "replies counted:\n{out}");
    let nx = seen
        .names
        .iter()
        .filter(|(n, _)| &n[1..3] == b"nx")
        .map(|(_, c)| *c)
        .sum::<u64>();
    assert_eq!(field(&out, "responded NXDOMAIN:"), nx, "{out}");
    assert_eq!(field(&out, "responded NOERROR:"), replies - nx, "{out}");
    assert_eq!(ns.counter("xg1", "rx_packets") - rx_before, replies);
    // The program left with the process.
    assert!(
        !ns.ip(&["-d", "link", "show", "dev", "xg1"])
            .contains("prog/xdp"),
        "the receive program is still attached after exit"
    );
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    // No root needed: every case fails before any socket is opened.
    let dir = std::env::temp_dir().join(format!("xgun-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let q = dir.join("q.txt");
    let run = |content: &str, extra: &[&str]| {
        std::fs::write(&q, content).expect("write");
        let out = Command::new(GUN)
            .args([
                "-i",
                q.to_str().expect("path"),
                "-I",
                "lo",
                "-R",
                "02:00:00:00:00:01",
            ])
            .args(extra)
            .arg("127.0.0.1")
            .output()
            .expect("run");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(run("h1.internal.\n", &[]).contains("q.txt:1: no query type"));
    assert!(run("h1.internal. BOGUS\n", &[]).contains("unknown type 'BOGUS'"));
    assert!(run("h1.internal. A x\n", &[]).contains("unknown flag 'x'"));
    assert!(run("\n", &[]).contains("no queries"));
    assert!(run("a A\n", &["-Q", "0"]).contains("-Q: not a rate"));
    assert!(run("a A\n", &["-l", "::1"]).contains("same address family"));
    let _ = std::fs::remove_dir_all(&dir);
}
