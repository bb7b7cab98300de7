//! Integration tests of skuad's AF_XDP dataplane against real interfaces: **root only**.
//!
//! Each test builds its own network namespaces (`skx-PID-TEST-srv` / `-cli`, joined by a
//! veth pair `srv0` / `cli0`, addresses in 198.18.N.0/24 and fd00:N::/64 with N unique per
//! test), runs `ip netns exec SRV skuad --config FILE [XDP options]` in the server namespace,
//! queries it from the client namespace, and reads its counters (SIGUSR1 logs them to
//! stderr): the XSK queue lines (`answered`, drop reasons), the XDP program line (`seen`,
//! `redirected`, `pass_*`, `drop_malformed`) and the kernel sockets' `stats:` line. That is
//! how a test tells "answered through AF_XDP" from "answered by the kernel sockets".
//! Namespaces, processes and configuration files are removed by `Drop` guards, on failure
//! too; every wait is bounded.
//!
//! Without root the tests **fail** (they do not skip): CI runs them as root. Tools used:
//! `ip` (iproute2), `ethtool`, `dig` (bind9-dnsutils), `kdig` (knot-dnsutils) and `ping`
//! (iputils-ping). Raw Ethernet frames (VLAN-tagged and malformed queries) are sent and
//! received here through AF_PACKET sockets opened in the client namespace.
//!
//! Kernels without some link types (e.g. a minimal VM kernel): without 802.1Q support
//! (`type vlan`), the VLAN test still sends tagged queries as raw frames and checks the tagged
//! replies, but cannot run `dig` over a VLAN interface (it says so on stderr); without
//! `dummy`, the no-native-XDP test uses an `ifb` interface, which lacks native XDP too.
//!
//! Run: `cargo test -p skuad --test e2e xdp::` (parallel-safe) as root.

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SKUAD: &str = env!("CARGO_BIN_EXE_skuad");
/// The server's end of the veth pair, in the server namespace.
const SRV_IF: &str = "srv0";
/// The client's end, in the client namespace.
const CLI_IF: &str = "cli0";
/// The name every test asks for, and its records.
const NAME: &str = "a.example.";
const ANSWER_V4: &str = "198.19.0.53";
const ANSWER_V6: &str = "fd00::53";
/// Bound on any helper command (dig, ip, ping...): they bound themselves, this is a backstop.
const CMD_TIMEOUT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------
// Root, commands.

fn require_root() {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the AF_XDP tests need root (network namespaces, XDP, AF_XDP and AF_PACKET sockets); \
         they do not skip: run them as root, e.g. `sudo -E cargo test -p skuad --test e2e xdp::`"
    );
}

/// What a finished command printed.
#[derive(Debug)]
struct Out {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Out {
    fn ok(&self) -> bool {
        self.status.success()
    }
}

/// Runs `prog args`, killing it if it outlives `timeout` (then it panics).
fn run(prog: &str, args: &[&str], timeout: Duration) -> Out {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{prog}`: {e} (these tests need ip, ethtool, dig, kdig and ping: \
                 apt-get install iproute2 ethtool bind9-dnsutils knot-dnsutils iputils-ping)"
            )
        });
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout piped")));
    let err = drain(Box::new(child.stderr.take().expect("stderr piped")));
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().expect("wait for killed command");
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("waiting for `{prog}`: {e}"),
        }
    };
    let res = Out {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    };
    assert!(
        !timed_out,
        "`{prog} {}` did not finish within {timeout:?} (killed)\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        res.stdout,
        res.stderr
    );
    res
}

/// Runs `prog args` and requires success; returns its stdout.
fn run_ok(prog: &str, args: &[&str]) -> String {
    let o = run(prog, args, CMD_TIMEOUT);
    assert!(
        o.ok(),
        "`{prog} {}` failed ({}):\n{}{}",
        args.join(" "),
        o.status,
        o.stdout,
        o.stderr
    );
    o.stdout
}

fn ip(args: &[&str]) -> String {
    run_ok("ip", args)
}

/// Runs `prog args` inside network namespace `ns`.
fn in_ns(ns: &Netns, prog: &str, args: &[&str]) -> Out {
    let mut a = vec!["netns", "exec", ns.name(), prog];
    a.extend_from_slice(args);
    run("ip", &a, CMD_TIMEOUT)
}

/// Waits until `cond` holds, at most `timeout`; returns whether it did.
fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------
// Namespaces, links, configuration files.

/// A network namespace, deleted on drop (processes still in it are killed first).
struct Netns(String);

impl Netns {
    /// `skx-PID-TEST-ROLE`: unique per process and test, so tests run in parallel.
    fn new(test: &str, role: &str) -> Self {
        let name = format!("skx-{}-{test}-{role}", std::process::id());
        if Path::new("/run/netns").join(&name).exists() {
            // Left by a killed run whose pid this process reuses: it is ours by its name.
            let _ = run("ip", &["netns", "del", &name], CMD_TIMEOUT);
        }
        ip(&["netns", "add", &name]);
        let ns = Self(name);
        ip(&["-n", ns.name(), "link", "set", "lo", "up"]);
        ns
    }

    fn name(&self) -> &str {
        &self.0
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Only skuad processes this test started can be inside: kill them by pid.
        if let Ok(o) = Command::new("ip")
            .args(["netns", "pids", &self.0])
            .stdin(Stdio::null())
            .output()
        {
            for pid in String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse::<libc::pid_t>().ok())
            {
                // SAFETY: kill(2) takes plain integers; the pid is a process in our namespace.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.0])
            .stdin(Stdio::null())
            .output();
    }
}

/// A server and a client namespace joined by veth `srv0` <-> `cli0`, both up.
struct Pair {
    srv: Netns,
    cli: Netns,
    /// The third octet of 198.18.N.0/24 and the second group of fd00:N::/64.
    net: u8,
}

impl Pair {
    /// The namespaces and the link, no addresses.
    fn new(test: &str, net: u8) -> Self {
        let srv = Netns::new(test, "srv");
        let cli = Netns::new(test, "cli");
        ip(&[
            "-n",
            srv.name(),
            "link",
            "add",
            SRV_IF,
            "type",
            "veth",
            "peer",
            "name",
            CLI_IF,
            "netns",
            cli.name(),
        ]);
        ip(&["-n", srv.name(), "link", "set", SRV_IF, "up"]);
        ip(&["-n", cli.name(), "link", "set", CLI_IF, "up"]);
        // GRO on the client's end gives it a NAPI ring, which a native-mode veth needs to
        // deliver the frames skuad's program sends with XDP_TX (a real NIC does not care).
        set_gro(&cli, true);
        Self { srv, cli, net }
    }

    /// With 198.18.N.1/24 + fd00:N::1/64 on srv0 and .2 / ::2 on cli0 (no DAD).
    fn with_addresses(test: &str, net: u8) -> Self {
        let p = Self::new(test, net);
        for (ns, ifname, v4, v6) in [
            (&p.srv, SRV_IF, p.srv_v4(), p.srv_v6()),
            (&p.cli, CLI_IF, p.cli_v4(), p.cli_v6()),
        ] {
            ip(&[
                "-n",
                ns.name(),
                "addr",
                "add",
                &format!("{v4}/24"),
                "dev",
                ifname,
            ]);
            ip(&[
                "-n",
                ns.name(),
                "addr",
                "add",
                &format!("{v6}/64"),
                "dev",
                ifname,
                "nodad",
            ]);
        }
        p
    }

    fn srv_v4(&self) -> String {
        format!("198.18.{}.1", self.net)
    }

    fn cli_v4(&self) -> String {
        format!("198.18.{}.2", self.net)
    }

    fn srv_v6(&self) -> String {
        format!("fd00:{}::1", self.net)
    }

    fn cli_v6(&self) -> String {
        format!("fd00:{}::2", self.net)
    }
}

/// `ethtool -K cli0 gro on|off` in `ns`.
fn set_gro(ns: &Netns, on: bool) {
    let o = in_ns(
        ns,
        "ethtool",
        &["-K", CLI_IF, "gro", if on { "on" } else { "off" }],
    );
    assert!(o.ok(), "ethtool -K {CLI_IF} gro: {}{}", o.stdout, o.stderr);
}

/// `ip link add NAME type KIND` in `ns`; `false` if this kernel lacks the link type.
fn try_add_link(ns: &Netns, args: &[&str]) -> bool {
    let mut a = vec!["-n", ns.name(), "link", "add"];
    a.extend_from_slice(args);
    let o = run("ip", &a, CMD_TIMEOUT);
    if o.ok() {
        return true;
    }
    assert!(
        o.stderr.contains("Unknown device type") || o.stderr.contains("not supported"),
        "`ip {}` failed:\n{}",
        a.join(" "),
        o.stderr
    );
    false
}

/// The MAC address of `ifname` in `ns`.
fn mac_of(ns: &Netns, ifname: &str) -> [u8; 6] {
    let out = ip(&["-n", ns.name(), "link", "show", "dev", ifname]);
    let text = out
        .split_whitespace()
        .skip_while(|t| *t != "link/ether")
        .nth(1)
        .unwrap_or_else(|| panic!("no link/ether in:\n{out}"));
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        *b = parts
            .next()
            .and_then(|p| u8::from_str_radix(p, 16).ok())
            .unwrap_or_else(|| panic!("bad MAC {text}"));
    }
    mac
}

/// `ip -d link show dev IF` in `ns`.
fn link_details(ns: &Netns, ifname: &str) -> String {
    ip(&["-n", ns.name(), "-d", "link", "show", "dev", ifname])
}

/// The XDP attachment `ip -d link` shows: `xdp` (native), `xdpgeneric`, ..., or `None`.
fn xdp_token(details: &str) -> Option<String> {
    details
        .split_whitespace()
        .find(|t| {
            matches!(
                *t,
                "xdp" | "xdpgeneric" | "xdpdrv" | "xdpoffload" | "xdpmulti"
            )
        })
        .map(str::to_string)
}

/// A configuration file serving `a.example.` (A and AAAA) on `addrs`, port 53; removed on
/// drop.
struct Conf(PathBuf);

impl Conf {
    fn new(test: &str, addrs: &[String]) -> Self {
        Self::with_extra(test, addrs, "")
    }

    /// [`Conf::new`] followed by `extra` (more clauses).
    fn with_extra(test: &str, addrs: &[String], extra: &str) -> Self {
        let mut c = String::from("server:\n");
        for a in addrs {
            c.push_str(&format!("    interface: {a}\n"));
        }
        c.push_str(
            "    port: 53\n    num-threads: 1\n    access-control: 198.18.0.0/15 allow\n    \
             access-control: fd00::/8 allow\n    local-zone: \"example.\" static\n",
        );
        c.push_str(&format!(
            "    local-data: \"{NAME} 300 IN A {ANSWER_V4}\"\n"
        ));
        c.push_str(&format!(
            "    local-data: \"{NAME} 300 IN AAAA {ANSWER_V6}\"\n"
        ));
        c.push_str(extra);
        let p = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("skx-{}-{test}.conf", std::process::id()));
        std::fs::write(&p, c).expect("write configuration");
        Self(p)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("UTF-8 path")
    }
}

impl Drop for Conf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ---------------------------------------------------------------------------------------
// DNS clients.

/// `dig @server NAME A` from `ns` (+short, bounded): the answer text.
fn dig_a(ns: &Netns, server: &str, extra: &[&str]) -> String {
    let at = format!("@{server}");
    let mut args = vec!["+short", "+time=2", "+tries=2"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[&at, NAME, "A"]);
    let o = in_ns(ns, "dig", &args);
    assert!(
        o.ok(),
        "dig {} from {} failed ({}):\n{}{}",
        args.join(" "),
        ns.name(),
        o.status,
        o.stdout,
        o.stderr
    );
    o.stdout.trim().to_string()
}

/// `kdig @server NAME AAAA` from `ns` (+short, bounded): the answer text.
fn kdig_aaaa(ns: &Netns, server: &str) -> String {
    let at = format!("@{server}");
    let args = ["+short", "+timeout=2", "+retry=1", &at, NAME, "AAAA"];
    let o = in_ns(ns, "kdig", &args);
    assert!(
        o.ok(),
        "kdig {} from {} failed ({}):\n{}{}",
        args.join(" "),
        ns.name(),
        o.status,
        o.stdout,
        o.stderr
    );
    o.stdout.trim().to_string()
}

/// A DNS query with RD set, one question, class IN.
fn dns_query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(u8::try_from(label.len()).expect("label too long"));
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    q
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn skip_name(b: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *b.get(pos)?;
        match len {
            0 => return Some(pos + 1),
            l if l & 0xc0 == 0xc0 => return Some(pos + 2),
            l => pos += 1 + usize::from(l),
        }
    }
}

/// (RCODE, first A record) of a DNS reply.
fn parse_reply(dns: &[u8]) -> Option<(u8, Option<Ipv4Addr>)> {
    let rcode = *dns.get(3)? & 0x0f;
    let (qd, an) = (be16(dns, 4)?, be16(dns, 6)?);
    let mut pos = 12;
    for _ in 0..qd {
        pos = skip_name(dns, pos)? + 4;
    }
    for _ in 0..an {
        pos = skip_name(dns, pos)?;
        let (ty, len) = (be16(dns, pos)?, usize::from(be16(dns, pos + 8)?));
        let data = dns.get(pos + 10..pos + 10 + len)?;
        if ty == 1 && len == 4 {
            return Some((
                rcode,
                Some(Ipv4Addr::new(data[0], data[1], data[2], data[3])),
            ));
        }
        pos += 10 + len;
    }
    Some((rcode, None))
}

// ---------------------------------------------------------------------------------------
// Raw frames (AF_PACKET in a namespace).

/// Ones' complement sum (RFC 1071) of `data`, unfolded.
fn sum16(data: &[u8]) -> u32 {
    data.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    // Cannot truncate: folded to 16 bits above.
    s as u16
}

/// An Ethernet (+ optional 802.1Q tag) + IPv4 + UDP frame, with the offsets of its
/// headers so that a test can break one field.
struct UdpFrame {
    bytes: Vec<u8>,
    ip: usize,
    udp: usize,
}

impl UdpFrame {
    #[allow(clippy::too_many_arguments)]
    fn new(
        dst_mac: [u8; 6],
        src_mac: [u8; 6],
        vlan: Option<u16>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        sport: u16,
        dport: u16,
        payload: &[u8],
    ) -> Self {
        let mut b = Vec::with_capacity(64 + payload.len());
        b.extend_from_slice(&dst_mac);
        b.extend_from_slice(&src_mac);
        if let Some(v) = vlan {
            b.extend_from_slice(&0x8100u16.to_be_bytes());
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&0x0800u16.to_be_bytes());
        let ip = b.len();
        let udp_len = u16::try_from(8 + payload.len()).expect("payload fits");
        b.extend_from_slice(&[0x45, 0]);
        b.extend_from_slice(&(20 + udp_len).to_be_bytes());
        b.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, 17, 0, 0]);
        b.extend_from_slice(&src.octets());
        b.extend_from_slice(&dst.octets());
        let udp = b.len();
        b.extend_from_slice(&sport.to_be_bytes());
        b.extend_from_slice(&dport.to_be_bytes());
        b.extend_from_slice(&udp_len.to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(payload);
        let mut f = Self { bytes: b, ip, udp };
        f.fix_ip_checksum();
        f.fix_udp_checksum();
        f
    }

    fn fix_ip_checksum(&mut self) {
        let ip = self.ip;
        self.bytes[ip + 10..ip + 12].fill(0);
        let c = !fold(sum16(&self.bytes[ip..ip + 20]));
        self.bytes[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    }

    /// The folded pseudo-header sum (what a sender with TX offload leaves in the field).
    fn pseudo(&self) -> u32 {
        let ip = self.ip;
        let len = u32::from(be16(&self.bytes, self.udp + 4).expect("udp header"));
        sum16(&self.bytes[ip + 12..ip + 20]) + 17 + len
    }

    fn fix_udp_checksum(&mut self) {
        let u = self.udp;
        self.bytes[u + 6..u + 8].fill(0);
        let mut c = !fold(self.pseudo() + sum16(&self.bytes[u..]));
        if c == 0 {
            c = 0xffff;
        }
        self.bytes[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
    }

    /// Replaces the UDP checksum with a wrong one that is neither "none" (0), nor the
    /// correct one, nor the pseudo-header pattern skuad accepts from TX offload.
    fn break_udp_checksum(&mut self) {
        let u = self.udp;
        let good = be16(&self.bytes, u + 6).expect("udp header");
        let partial = fold(self.pseudo());
        let bad = [good ^ 0x00ff, good ^ 0xff00, 0x1234, 0x4321]
            .into_iter()
            .find(|c| ![0, 0xffff, good, partial, !partial].contains(c))
            .expect("a wrong checksum");
        self.bytes[u + 6..u + 8].copy_from_slice(&bad.to_be_bytes());
    }
}

/// Runs `f` on a thread that has joined network namespace `ns` (only that thread moves).
fn in_netns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{}", ns.name());
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
        // SAFETY: setns(2) on a valid namespace fd; it moves only the calling thread, which
        // ends with `f`.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

const ETH_P_ALL: u16 = 0x0003;
/// `PACKET_AUXDATA` (linux/if_packet.h): a `tpacket_auxdata` with each frame received.
const PACKET_AUXDATA: libc::c_int = 8;
/// `TP_STATUS_VLAN_VALID`: `tp_vlan_tci` holds the tag the kernel took off the frame.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;

/// `N` bytes of `b` at `at` (zeroes past the end).
fn ne_bytes<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b.get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; N])
}

/// An AF_PACKET raw socket bound to one interface of the calling thread's namespace.
struct PacketSocket(OwnedFd);

impl PacketSocket {
    /// `protocol` 0 only sends; `ETH_P_ALL` also receives every frame of the interface.
    fn open(ifname: &str, protocol: u16) -> io::Result<Self> {
        let cname = std::ffi::CString::new(ifname).expect("interface name");
        // SAFETY: if_nametoindex reads a NUL-terminated string that outlives the call.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if index == 0 {
            return Err(io::Error::last_os_error());
        }
        let proto = libc::c_int::from(protocol.to_be());
        // SAFETY: socket(2) takes plain integers.
        let fd =
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
        let sock = Self(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = u16::try_from(libc::AF_PACKET).expect("AF_PACKET fits");
        sll.sll_protocol = protocol.to_be();
        sll.sll_ifindex = libc::c_int::try_from(index).expect("ifindex fits");
        let len = libc::socklen_t::try_from(size_of::<libc::sockaddr_ll>()).expect("fits");
        let addr = (&raw const sll).cast::<libc::sockaddr>();
        // SAFETY: `addr` points to a sockaddr_ll of `len` bytes that outlives the call.
        if unsafe { libc::bind(sock.0.as_raw_fd(), addr, len) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    }

    fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: the buffer is valid for `frame.len()` bytes during the call.
        let n = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if usize::try_from(n).ok() == Some(frame.len()) {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Receives with `tpacket_auxdata`: (frame length, VLAN TCI the kernel took off, if any).
    fn recv(&self, buf: &mut [u8], timeout: Duration) -> io::Result<(usize, Option<u16>)> {
        let on: libc::c_int = 1;
        let fd = self.0.as_raw_fd();
        let optlen = libc::socklen_t::try_from(size_of::<libc::c_int>()).expect("fits");
        // SAFETY: `on` is a c_int that outlives the call.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                PACKET_AUXDATA,
                (&raw const on).cast(),
                optlen,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: libc::suseconds_t::try_from(timeout.as_micros().clamp(1000, 999_999))
                .expect("fits"),
        };
        let tvlen = libc::socklen_t::try_from(size_of::<libc::timeval>()).expect("fits");
        // SAFETY: `tv` is a timeval that outlives the call.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const tv).cast(),
                tvlen,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = [0u64; 16];
        // SAFETY: msghdr is plain data; all zeroes is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control);
        // SAFETY: `msg` points to `iov` (into `buf`) and `control`, valid during the call.
        let n = unsafe { libc::recvmsg(fd, &raw mut msg, 0) };
        let Ok(n) = usize::try_from(n) else {
            return Err(io::Error::last_os_error());
        };
        // Walk the control messages by hand: cmsghdr {len: usize, level: i32, type: i32},
        // data aligned to usize.
        let bytes: Vec<u8> = control.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let hdr = size_of::<libc::cmsghdr>();
        let word = size_of::<usize>();
        let mut off = 0;
        let mut tci = None;
        while off + hdr <= msg.msg_controllen.min(bytes.len()) {
            let len = usize::from_ne_bytes(ne_bytes(&bytes, off));
            let level = i32::from_ne_bytes(ne_bytes(&bytes, off + word));
            let kind = i32::from_ne_bytes(ne_bytes(&bytes, off + word + 4));
            if len < hdr {
                break;
            }
            if level == libc::SOL_PACKET && kind == PACKET_AUXDATA {
                // tpacket_auxdata: tp_status u32, tp_len u32, tp_snaplen u32, tp_mac u16,
                // tp_net u16, tp_vlan_tci u16, tp_vlan_tpid u16.
                let status = u32::from_ne_bytes(ne_bytes(&bytes, off + hdr));
                if status & TP_STATUS_VLAN_VALID != 0 {
                    tci = Some(u16::from_ne_bytes(ne_bytes(&bytes, off + hdr + 16)));
                }
            }
            off += len.div_ceil(word) * word;
        }
        Ok((n, tci))
    }
}

/// Sends raw frames out of `ifname` in namespace `ns`.
fn send_raw(ns: &Netns, ifname: &str, frames: Vec<Vec<u8>>) {
    let ifname = ifname.to_string();
    in_netns(ns, move || {
        let s =
            PacketSocket::open(&ifname, 0).unwrap_or_else(|e| panic!("AF_PACKET on {ifname}: {e}"));
        for f in &frames {
            s.send(f)
                .unwrap_or_else(|e| panic!("send raw frame on {ifname}: {e}"));
        }
    });
}

/// A reply to a raw query.
#[derive(Debug)]
struct RawReply {
    /// The 802.1Q VLAN id it carried, in the frame or in the kernel's metadata.
    vlan: Option<u16>,
    rcode: u8,
    a: Option<Ipv4Addr>,
}

/// Sends `frame` (a DNS query from UDP port `sport`, ID `id`) out of `ifname` in `ns`, and
/// waits up to `timeout` for the IPv4 UDP reply from port 53 to `sport` with that ID.
fn raw_exchange(
    ns: &Netns,
    ifname: &str,
    frame: Vec<u8>,
    sport: u16,
    id: u16,
    timeout: Duration,
) -> Option<RawReply> {
    let ifname = ifname.to_string();
    in_netns(ns, move || {
        let s = PacketSocket::open(&ifname, ETH_P_ALL)
            .unwrap_or_else(|e| panic!("AF_PACKET on {ifname}: {e}"));
        s.send(&frame)
            .unwrap_or_else(|e| panic!("send raw frame on {ifname}: {e}"));
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 4096];
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let (n, aux_tci) = match s.recv(&mut buf, left.min(Duration::from_millis(200))) {
                Ok(r) => r,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    continue;
                }
                Err(e) => panic!("recv on {ifname}: {e}"),
            };
            let b = &buf[..n];
            let (data_tci, l3) = match be16(b, 12) {
                Some(0x8100) => (be16(b, 14), 18),
                _ => (None, 14),
            };
            if be16(b, l3 - 2) != Some(0x0800) || b.get(l3 + 9) != Some(&17) {
                continue;
            }
            let udp = l3 + usize::from(b[l3] & 0x0f) * 4;
            if be16(b, udp) != Some(53) || be16(b, udp + 2) != Some(sport) {
                continue;
            }
            let Some(end) = be16(b, udp + 4).map(|l| udp + usize::from(l)) else {
                continue;
            };
            let Some(dns) = b.get(udp + 8..end) else {
                continue;
            };
            if be16(dns, 0) != Some(id) {
                continue;
            }
            let (rcode, a) = parse_reply(dns)?;
            return Some(RawReply {
                vlan: data_tci.or(aux_tci).map(|t| t & 0x0fff),
                rcode,
                a,
            });
        }
        None
    })
}

// ---------------------------------------------------------------------------------------
// skuad and its counters.

/// The counters of one SIGUSR1 dump.
#[derive(Debug, Default)]
struct Counters {
    /// Kernel sockets (`stats:` line): queries and replies, UDP and TCP.
    socket_queries: u64,
    socket_replies: u64,
    /// Per interface, summed over its queues: `rx`, `answered`, `hot`, `slow_path`,
    /// `not_dns`, `tx_full`, `dropped`, the drop reasons, the socket's kernel counters.
    queues: HashMap<String, HashMap<String, u64>>,
    /// Per interface: the XDP program's counters (`seen`, `redirected`, ...).
    programs: HashMap<String, HashMap<String, u64>>,
}

impl Counters {
    /// Parses complete log lines; `None` until the `stats:` line is there.
    fn parse(text: &str) -> Option<Self> {
        let mut c = Self::default();
        let mut seen_stats = false;
        for line in text.lines() {
            let Some((_, msg)) = line.split_once("skuad info: ") else {
                continue;
            };
            if let Some(rest) = msg.strip_prefix("stats: ") {
                let mut it = rest.split(", ");
                let num = |s: Option<&str>| {
                    s.and_then(|s| s.split_whitespace().next())
                        .and_then(|n| n.parse().ok())
                };
                c.socket_queries = num(it.next())?;
                c.socket_replies = num(it.next())?;
                seen_stats = true;
            } else if let Some(rest) = msg.strip_prefix("xdp program on ") {
                let (ifname, fields) = rest.split_once(": ")?;
                let m = c.programs.entry(ifname.to_string()).or_default();
                for (k, v) in fields.split_whitespace().filter_map(|t| t.split_once('=')) {
                    m.insert(k.to_string(), v.parse().ok()?);
                }
            } else if let Some(rest) = msg.strip_prefix("xdp ")
                && let Some((head, body)) = rest.split_once(": ")
                && let Some((ifname, _queue)) = head.split_once(" queue ")
            {
                let mut q: HashMap<String, u64> = HashMap::new();
                // "rx R, answered A (H hot), slow path S, not dns X, tx full T, dropped D"
                let plain = body.split(" [").next().unwrap_or_default();
                for item in plain.split(", ") {
                    let item = match item.split_once(" (") {
                        Some((a, hot)) => {
                            let h = hot.strip_suffix(" hot)")?.parse().ok()?;
                            q.insert("hot".into(), h);
                            a
                        }
                        None => item,
                    };
                    let (name, v) = item.rsplit_once(' ')?;
                    q.insert(name.replace(' ', "_"), v.parse().ok()?);
                }
                // "[truncated=0 ...], kernel: rx_dropped=0 ..."
                for tok in body.split(|ch: char| ch.is_whitespace() || "[],".contains(ch)) {
                    if let Some((k, v)) = tok.split_once('=') {
                        q.insert(k.to_string(), v.parse().ok()?);
                    }
                }
                let total = c.queues.entry(ifname.to_string()).or_default();
                for (k, v) in q {
                    *total.entry(k).or_default() += v;
                }
            }
        }
        seen_stats.then_some(c)
    }

    /// A queue counter of `ifname` (0 if absent).
    fn queue(&self, ifname: &str, key: &str) -> u64 {
        self.queues
            .get(ifname)
            .and_then(|m| m.get(key))
            .copied()
            .unwrap_or(0)
    }

    /// Queries answered through XDP on `ifname`: by the AF_XDP queues plus by the program
    /// itself (its precompiled answers).
    fn answered(&self, ifname: &str) -> u64 {
        self.queue(ifname, "answered") + self.prog(ifname, "answered")
    }

    /// A program counter of `ifname` (0 if absent).
    fn prog(&self, ifname: &str, key: &str) -> u64 {
        self.programs
            .get(ifname)
            .and_then(|m| m.get(key))
            .copied()
            .unwrap_or(0)
    }
}

/// True once the process handles SIGHUP, SIGUSR1 and SIGTERM (`SigCgt` in /proc/PID/status).
fn signal_handlers_installed(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let Some(mask) = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
    else {
        return false;
    };
    let want = [libc::SIGHUP, libc::SIGUSR1, libc::SIGTERM]
        .iter()
        .fold(0u64, |m, s| m | 1u64 << (s - 1));
    mask & want == want
}

/// `ip netns exec NS skuad --config FILE ARGS` (`ip netns exec` execs: the child is skuad),
/// killed on drop, its stderr collected.
struct Skuad {
    child: Child,
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Skuad {
    fn spawn(ns: &Netns, conf: &Conf, args: &[&str]) -> Self {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns.name(), SKUAD, "--config", conf.path()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ip netns exec skuad");
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("stderr piped");
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self {
            child,
            log,
            reader: Some(reader),
        }
    }

    /// Spawns and waits (bounded) until the XDP start-up has ended one way or another
    /// (self-test passed, fell back, or disabled) and the signal handlers are in place.
    fn start(ns: &Netns, conf: &Conf, args: &[&str]) -> Self {
        let mut d = Self::spawn(ns, conf, args);
        let ready = wait_until(Duration::from_secs(15), || {
            if !d.running() {
                return true;
            }
            let log = d.log();
            ["xdp: self-test passed", "xdp: not used", "xdp: disabled"]
                .iter()
                .any(|n| log.contains(n))
                && signal_handlers_installed(d.child.id())
        });
        if !d.running() {
            let st = d.wait_exit(Duration::from_secs(2));
            panic!(
                "skuad {} exited during start-up ({st:?}); its stderr:\n{}",
                args.join(" "),
                d.log()
            );
        }
        assert!(
            ready,
            "skuad {} not ready within 15 s; its stderr:\n{}",
            args.join(" "),
            d.log()
        );
        d
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Asserts the XDP plane runs on `ifname`: the self-test passed and nothing fell back.
    /// The log says the program holds precompiled answers (within 5 s).
    fn assert_answers_precompiled(&self) {
        assert!(
            wait_until(Duration::from_secs(5), || self
                .log()
                .contains("answers precompiled into the program")),
            "no answers were precompiled:\n{}",
            self.log()
        );
    }

    fn assert_xdp_serving(&self, ifname: &str) {
        let log = self.log();
        assert!(
            log.contains(&format!("xdp: self-test passed on {ifname} "))
                && !log.contains("xdp: not used"),
            "skuad is not serving through AF_XDP on {ifname}; its stderr:\n{log}"
        );
    }

    fn signal(&mut self, sig: libc::c_int) {
        assert!(
            self.running(),
            "cannot signal skuad: it exited:\n{}",
            self.log()
        );
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits pid_t");
        // SAFETY: kill(2) takes plain integers. The child is not reaped yet (checked just
        // above; only this thread waits for it), so its pid cannot have been reused.
        let r = unsafe { libc::kill(pid, sig) };
        assert_eq!(r, 0, "kill({pid}, {sig}): {}", io::Error::last_os_error());
    }

    /// SIGUSR1, then the counters it logs; waits for the program line of each interface
    /// in `programs` (they come last).
    fn counters(&mut self, programs: &[&str]) -> Counters {
        let from = self.log.lock().unwrap().len();
        self.signal(libc::SIGUSR1);
        let mut got = None;
        let ok = wait_until(Duration::from_secs(5), || {
            let log = self.log();
            let text = &log[from..];
            let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            got = Counters::parse(complete)
                .filter(|c| programs.iter().all(|p| c.programs.contains_key(*p)));
            got.is_some()
        });
        assert!(
            ok,
            "no counters (with program lines for {programs:?}) within 5 s of SIGUSR1; \
             stderr:\n{}",
            self.log()
        );
        got.expect("counters")
    }

    /// Counters, polled until `pred(counters)` holds (at most `timeout`); the last ones.
    fn counters_until(
        &mut self,
        programs: &[&str],
        timeout: Duration,
        pred: impl Fn(&Counters) -> bool,
    ) -> Counters {
        let deadline = Instant::now() + timeout;
        loop {
            let c = self.counters(programs);
            if pred(&c) || Instant::now() >= deadline {
                return c;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM and the exit status (bounded).
    fn stop(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        let st = self.wait_exit(Duration::from_secs(10));
        st.unwrap_or_else(|| panic!("skuad did not stop within 10 s of SIGTERM:\n{}", self.log()))
    }

    /// SIGKILL and the exit status (bounded).
    fn kill9(&mut self) -> ExitStatus {
        self.signal(libc::SIGKILL);
        let st = self.wait_exit(Duration::from_secs(10));
        st.unwrap_or_else(|| panic!("skuad did not die within 10 s of SIGKILL"))
    }
}

impl Drop for Skuad {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
fn xdp_answers_ipv4_and_ipv6_native_and_generic() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    // Each mode twice: the AF_XDP queues answering everything (--xdp-answers 0), then the
    // program answering the precompiled names itself (the default).
    for (net, mode, token, logged, in_program) in [
        (10, "native", "xdp", "Native", false),
        (11, "generic", "xdpgeneric", "Generic", false),
        (12, "native", "xdp", "Native", true),
        (13, "generic", "xdpgeneric", "Generic", true),
    ] {
        let test = format!("modes-{mode}-{in_program}");
        let pair = Pair::with_addresses(&test, net);
        let conf = Conf::new(&test, &[pair.srv_v4(), pair.srv_v6()]);
        let mut args = vec!["--xdp-mode", mode];
        if !in_program {
            args.extend_from_slice(&["--xdp-answers", "0"]);
        }
        let mut d = Skuad::start(&pair.srv, &conf, &args);
        d.assert_xdp_serving(SRV_IF);
        assert!(
            d.log()
                .contains(&format!("xdp: attached to {SRV_IF} in {logged} mode")),
            "{mode}: no '{logged} mode' attach line:\n{}",
            d.log()
        );
        let link = link_details(&pair.srv, SRV_IF);
        assert_eq!(
            xdp_token(&link).as_deref(),
            Some(token),
            "{mode}: ip -d link shows:\n{link}"
        );
        assert!(
            link.contains("name skua_xdp"),
            "{mode}: ip -d link:\n{link}"
        );

        let before = d.counters(&[SRV_IF]);
        assert_eq!(
            dig_a(&pair.cli, &pair.srv_v4(), &[]),
            ANSWER_V4,
            "{mode}: dig over IPv4"
        );
        assert_eq!(
            kdig_aaaa(&pair.cli, &pair.srv_v6()),
            ANSWER_V6,
            "{mode}: kdig over IPv6"
        );
        let after = d.counters(&[SRV_IF]);
        let answered = after.queue(SRV_IF, "answered") - before.queue(SRV_IF, "answered");
        let redirected = after.prog(SRV_IF, "redirected") - before.prog(SRV_IF, "redirected");
        let in_prog = after.prog(SRV_IF, "answered") - before.prog(SRV_IF, "answered");
        if in_program {
            assert!(
                in_prog >= 2 && answered == 0 && after.socket_queries == 0,
                "{mode}: want >= 2 answered in the program, none by the XSK queue or the \
                 kernel sockets; got +{in_prog}, +{answered}, {}:\n{}",
                after.socket_queries,
                d.log()
            );
        } else {
            assert!(
                answered >= 2 && redirected >= 2 && in_prog == 0 && after.socket_queries == 0,
                "{mode}: want >= 2 answered by the XSK queue, >= 2 redirected by the program, \
                 none answered in the program and 0 queries on the kernel sockets; got \
                 answered +{answered}, redirected +{redirected}, in the program +{in_prog}, \
                 socket queries {}:\n{}",
                after.socket_queries,
                d.log()
            );
        }
        let st = d.stop();
        assert!(st.success(), "{mode}: SIGTERM exit {st}:\n{}", d.log());
        let link = link_details(&pair.srv, SRV_IF);
        assert_eq!(
            xdp_token(&link),
            None,
            "{mode}: XDP left after stop:\n{link}"
        );
    }
}

/// An Unbound serving `example.net.` (static) with `data` (local-data lines) on
/// 127.0.0.1@`port` in `ns`: an upstream for skuad's forward-zone. Stopped on drop.
struct Upstream {
    child: Child,
    conf: PathBuf,
}

impl Upstream {
    fn start(ns: &Netns, test: &str, port: u16, data: &[&str]) -> Self {
        let conf = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("skx-{}-{test}-up.conf", std::process::id()));
        let mut text = format!(
            "server:\n  interface: 127.0.0.1@{port}\n  do-daemonize: no\n  use-syslog: no\n  \
             username: \"\"\n  chroot: \"\"\n  pidfile: \"\"\n  access-control: 127.0.0.0/8 allow\n  \
             local-zone: \"example.net.\" static\n"
        );
        for d in data {
            text.push_str(&format!("  local-data: \"{d}\"\n"));
        }
        std::fs::write(&conf, text).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns.name(), "unbound", "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start unbound");
        Self { child, conf }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.conf);
    }
}

/// A cache hit is answered by the AF_XDP worker, in the frame: skuad forwards
/// `cached.example.net.` to an Unbound in the server namespace; the first question is
/// resolved (the reply leaves through the kernel socket); with the upstream then stopped,
/// the second is answered with a lower TTL by the XSK queue (its `answered` counter),
/// while the kernel sockets receive nothing.
#[test]
fn cache_hits_answered_by_the_xsk_worker() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("cachehit", 24);
    ip(&["-n", pair.srv.name(), "link", "set", "lo", "up"]);
    let mut upstream = Upstream::start(
        &pair.srv,
        "cachehit",
        5301,
        &["cached.example.net. 300 IN A 198.18.24.77"],
    );
    let conf = Conf::with_extra(
        "cachehit",
        &[pair.srv_v4()],
        "    do-not-query-localhost: no\nforward-zone:\n    name: \"example.net.\"\n    \
         forward-addr: 127.0.0.1@5301\n",
    );
    // The AF_XDP worker's path: no cached answers in the program.
    let mut d = Skuad::start(&pair.srv, &conf, &["--xdp-cache-answers", "0"]);
    d.assert_xdp_serving(SRV_IF);
    let ask = |ns: &Netns| {
        let at = format!("@{}", pair.srv_v4());
        in_ns(
            ns,
            "dig",
            &[
                "+noall",
                "+answer",
                "+time=3",
                "+tries=1",
                &at,
                "cached.example.net.",
                "A",
            ],
        )
        .stdout
    };
    // The upstream may need a moment to listen: ask until it answers (bounded).
    let mut first = String::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            first = ask(&pair.cli);
            first.contains("198.18.24.77")
        }),
        "not resolved through the upstream: {first:?}\n{}",
        d.log()
    );
    upstream.stop();
    std::thread::sleep(Duration::from_millis(1100));
    let before = d.counters(&[SRV_IF]);
    let second = ask(&pair.cli);
    let after = d.counters(&[SRV_IF]);
    let ttl = |t: &str| -> u32 {
        t.split_whitespace()
            .nth(1)
            .and_then(|x| x.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        second.contains("198.18.24.77") && ttl(&second) < ttl(&first),
        "the second answer comes from the cache with a lower TTL: {first:?} then {second:?}\n{}",
        d.log()
    );
    let xsk = after.queue(SRV_IF, "answered") - before.queue(SRV_IF, "answered");
    assert!(
        xsk >= 1 && after.socket_queries == 0,
        "want the hit answered by the XSK queue (+{xsk}) and no query on the kernel sockets \
         ({}):\n{}",
        after.socket_queries,
        d.log()
    );
}

/// The hottest cache hits are answered by the XDP program itself (XDP_TX), TTLs counting
/// down to the second: skuad forwards `example.net.` to an Unbound in the server namespace;
/// `hot.` is resolved, then asked until a worker proposes it and the program answers it
/// (`answered_cached`); with the upstream stopped, five more questions over two seconds are
/// answered by the program alone (no XSK, no kernel socket), each TTL the cached one minus
/// the whole seconds since it was resolved. A flush through the control socket takes it out
/// of the program at once; `short.` (TTL 4) leaves the program when it expires.
#[test]
fn cache_hits_answered_by_the_program() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("progcache", 25);
    ip(&["-n", pair.srv.name(), "link", "set", "lo", "up"]);
    let ctl = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("skx-{}-progcache.sock", std::process::id()));
    let mut upstream = Upstream::start(
        &pair.srv,
        "progcache",
        5302,
        &["hot.example.net. 300 IN A 198.18.25.77"],
    );
    let conf = Conf::with_extra(
        "progcache",
        &[pair.srv_v4()],
        &format!(
            "    do-not-query-localhost: no\nforward-zone:\n    name: \"example.net.\"\n    \
             forward-addr: 127.0.0.1@5302\napi:\n    control-socket: {}\n",
            ctl.display()
        ),
    );
    let mut d = Skuad::start(&pair.srv, &conf, &[]);
    d.assert_xdp_serving(SRV_IF);
    let ask = |name: &str| {
        let at = format!("@{}", pair.srv_v4());
        in_ns(
            &pair.cli,
            "dig",
            &["+noall", "+answer", "+time=3", "+tries=1", &at, name, "A"],
        )
        .stdout
    };
    let ttl = |t: &str| -> Option<u32> { t.split_whitespace().nth(1).and_then(|x| x.parse().ok()) };
    let mut first = String::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            first = ask("hot.example.net.");
            first.contains("198.18.25.77")
        }),
        "not resolved through the upstream: {first:?}\n{}",
        d.log()
    );
    let resolved_at = Instant::now();
    let first_ttl = ttl(&first).expect("TTL");
    // Hits through the worker until it proposes the name and the program answers it.
    let mut c = d.counters(&[SRV_IF]);
    let c0 = c.prog(SRV_IF, "answered_cached");
    let promoted = wait_until(Duration::from_secs(10), || {
        assert!(ask("hot.example.net.").contains("198.18.25.77"));
        c = d.counters(&[SRV_IF]);
        c.prog(SRV_IF, "answered_cached") > c0
    });
    assert!(promoted, "hot. never answered in the program:\n{}", d.log());
    upstream.stop();
    let before = d.counters(&[SRV_IF]);
    let mut answers = Vec::new();
    for i in 0..5 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(550));
        }
        let a = ask("hot.example.net.");
        answers.push((resolved_at.elapsed(), a));
    }
    let after = d.counters(&[SRV_IF]);
    let in_prog = after.prog(SRV_IF, "answered_cached") - before.prog(SRV_IF, "answered_cached");
    let xsk = after.queue(SRV_IF, "answered") - before.queue(SRV_IF, "answered");
    assert!(
        in_prog == 5 && xsk == 0 && after.socket_queries == before.socket_queries,
        "want 5 answered by the program, none by the XSK queue or the kernel sockets; got \
         +{in_prog}, +{xsk}, sockets {} -> {}:\n{answers:?}\n{}",
        before.socket_queries,
        after.socket_queries,
        d.log()
    );
    for (elapsed, a) in &answers {
        let t = ttl(a).unwrap_or(0);
        // The TTL the cache stored minus the whole seconds since: within one second of the
        // elapsed time (the resolution and the query straddle second boundaries).
        let want = first_ttl.saturating_sub(elapsed.as_secs() as u32);
        assert!(
            a.contains("198.18.25.77") && t <= want && t + 2 >= want,
            "TTL {t} at {elapsed:?} after a first answer with {first_ttl}: {answers:?}"
        );
    }
    let (t_first, t_last) = (ttl(&answers[0].1).unwrap(), ttl(&answers[4].1).unwrap());
    assert!(
        t_first - t_last >= 1 && t_first - t_last <= 3,
        "TTLs count down: {answers:?}"
    );
    // A flush takes it out of the program before it returns: the next query reaches the
    // worker (and SERVFAILs or is dropped: the upstream is gone).
    let flush = in_ns(
        &pair.srv,
        "curl",
        &[
            "-s",
            "--max-time",
            "5",
            "--unix-socket",
            ctl.to_str().unwrap(),
            "-H",
            "content-type: application/json",
            "-d",
            "{\"name\": \"hot.example.net.\"}",
            "http://skua/cache/flush",
        ],
    );
    assert!(
        flush.stdout.contains("\"flushed\""),
        "flush: {flush:?}\n{}",
        d.log()
    );
    let b2 = d.counters(&[SRV_IF]);
    let gone = ask("hot.example.net.");
    let a2 = d.counters(&[SRV_IF]);
    assert!(
        !gone.contains("198.18.25.77")
            && a2.prog(SRV_IF, "answered_cached") == b2.prog(SRV_IF, "answered_cached"),
        "flushed, yet answered: {gone:?}\n{}",
        d.log()
    );
    let st = d.stop();
    assert!(st.success(), "SIGTERM exit {st}:\n{}", d.log());
    let log = d.log();
    assert!(
        log.contains("cached answers in the program on (self-test passed)"),
        "{log}"
    );
}

/// A cached answer leaves the program when it expires: `short.` (TTL 4) is promoted, and
/// from its expiry on the program answers it no more (the worker asks the upstream again).
#[test]
fn cached_answers_leave_the_program_at_expiry() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("progexp", 26);
    ip(&["-n", pair.srv.name(), "link", "set", "lo", "up"]);
    let _upstream = Upstream::start(
        &pair.srv,
        "progexp",
        5303,
        &["short.example.net. 5 IN A 198.18.26.78"],
    );
    let conf = Conf::with_extra(
        "progexp",
        &[pair.srv_v4()],
        "    do-not-query-localhost: no\nforward-zone:\n    name: \"example.net.\"\n    \
         forward-addr: 127.0.0.1@5303\n",
    );
    let mut d = Skuad::start(&pair.srv, &conf, &[]);
    d.assert_xdp_serving(SRV_IF);
    let ask = || {
        let at = format!("@{}", pair.srv_v4());
        in_ns(
            &pair.cli,
            "dig",
            &[
                "+noall",
                "+answer",
                "+time=3",
                "+tries=1",
                &at,
                "short.example.net.",
                "A",
            ],
        )
        .stdout
    };
    let mut c = d.counters(&[SRV_IF]);
    let c0 = c.prog(SRV_IF, "answered_cached");
    // Resolve, then hit until the program answers (a fresh resolution each time it
    // expired meanwhile).
    let promoted = wait_until(Duration::from_secs(15), || {
        let _ = ask();
        let _ = ask();
        c = d.counters(&[SRV_IF]);
        c.prog(SRV_IF, "answered_cached") > c0
    });
    assert!(
        promoted,
        "short. never answered in the program:\n{}",
        d.log()
    );
    // Past its expiry (5 s at most from now), the program answers it no more: the
    // questions reach the worker (resolved again through the upstream).
    std::thread::sleep(Duration::from_millis(5200));
    let before = d.counters(&[SRV_IF]);
    let again = ask();
    let after = d.counters(&[SRV_IF]);
    assert!(
        again.contains("198.18.26.78")
            && after.prog(SRV_IF, "answered_cached") == before.prog(SRV_IF, "answered_cached")
            && after.prog(SRV_IF, "redirected") > before.prog(SRV_IF, "redirected"),
        "expired, yet answered in the program: {again:?}\n{}",
        d.log()
    );
}

#[test]
fn kernel_path_still_works() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("kpath", 20);
    let conf = Conf::new("kpath", &[pair.srv_v4(), pair.srv_v6()]);
    let mut d = Skuad::start(&pair.srv, &conf, &[]);
    d.assert_xdp_serving(SRV_IF);

    let c0 = d.counters(&[SRV_IF]);
    let ping = in_ns(
        &pair.cli,
        "ping",
        &["-c", "1", "-W", "2", "-w", "4", &pair.srv_v4()],
    );
    assert!(
        ping.ok(),
        "ping through the XDP interface failed:\n{}{}",
        ping.stdout,
        ping.stderr
    );
    let c1 = d.counters(&[SRV_IF]);
    assert!(
        c1.prog(SRV_IF, "pass_not_udp") > c0.prog(SRV_IF, "pass_not_udp"),
        "ICMP was not passed to the kernel by the program: {:?} -> {:?}",
        c0.programs,
        c1.programs
    );

    assert_eq!(
        dig_a(&pair.cli, &pair.srv_v4(), &["+tcp"]),
        ANSWER_V4,
        "dig +tcp"
    );
    let c2 = d.counters(&[SRV_IF]);
    let not_udp = c2.prog(SRV_IF, "pass_not_udp") - c1.prog(SRV_IF, "pass_not_udp");
    let sockets = c2.socket_queries - c1.socket_queries;
    let xsk = c2.queue(SRV_IF, "answered") - c1.queue(SRV_IF, "answered");
    assert!(
        sockets >= 1 && not_udp >= 3 && xsk == 0,
        "want the TCP query on the kernel sockets (got +{sockets}), its segments passed by \
         the program (pass_not_udp +{not_udp}, want >= 3) and nothing answered by XSK (got \
         +{xsk}):\n{}",
        d.log()
    );
}

#[test]
fn vlan_tagged_query_answered() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    const VID: u16 = 100;
    let pair = Pair::new("vlan", 30);
    for (ns, ifname) in [(&pair.srv, SRV_IF), (&pair.cli, CLI_IF)] {
        let o = in_ns(
            ns,
            "ethtool",
            &["-K", ifname, "rxvlan", "off", "txvlan", "off"],
        );
        assert!(
            o.ok(),
            "ethtool -K {ifname} rxvlan off txvlan off:\n{}{}",
            o.stdout,
            o.stderr
        );
    }
    let (srv_dev, cli_dev) = ("srv0.100", "cli0.100");
    let vid = VID.to_string();
    let have_8021q = try_add_link(
        &pair.srv,
        &["link", SRV_IF, "name", srv_dev, "type", "vlan", "id", &vid],
    );
    let (srv_dev, cli_dev) = if have_8021q {
        assert!(
            try_add_link(
                &pair.cli,
                &["link", CLI_IF, "name", cli_dev, "type", "vlan", "id", &vid],
            ),
            "vlan on the server side but not on the client side"
        );
        ip(&["-n", pair.srv.name(), "link", "set", srv_dev, "up"]);
        ip(&["-n", pair.cli.name(), "link", "set", cli_dev, "up"]);
        (srv_dev, cli_dev)
    } else {
        eprintln!(
            "vlan_tagged_query_answered: this kernel has no 802.1Q interfaces: tagged queries \
             are sent as raw frames only, no dig over a VLAN interface"
        );
        (SRV_IF, CLI_IF)
    };
    ip(&[
        "-n",
        pair.srv.name(),
        "addr",
        "add",
        &format!("{}/24", pair.srv_v4()),
        "dev",
        srv_dev,
    ]);
    ip(&[
        "-n",
        pair.cli.name(),
        "addr",
        "add",
        &format!("{}/24", pair.cli_v4()),
        "dev",
        cli_dev,
    ]);
    let conf = Conf::new("vlan", &[pair.srv_v4()]);
    let mut d = Skuad::start(&pair.srv, &conf, &["--xdp-interface", SRV_IF]);
    d.assert_xdp_serving(SRV_IF);
    let c0 = d.counters(&[SRV_IF]);

    let (id, sport) = (0x7a11, 40_100);
    let frame = UdpFrame::new(
        mac_of(&pair.srv, SRV_IF),
        mac_of(&pair.cli, CLI_IF),
        Some(VID),
        pair.cli_v4().parse().expect("v4"),
        pair.srv_v4().parse().expect("v4"),
        sport,
        53,
        &dns_query(id, NAME, 1),
    );
    let reply = raw_exchange(
        &pair.cli,
        CLI_IF,
        frame.bytes,
        sport,
        id,
        Duration::from_secs(3),
    );
    let reply = reply.unwrap_or_else(|| {
        panic!(
            "no reply to a VLAN {VID} tagged query within 3 s:\n{}",
            d.log()
        )
    });
    assert_eq!(reply.vlan, Some(VID), "the reply lost its tag: {reply:?}");
    assert_eq!(reply.rcode, 0, "{reply:?}");
    assert_eq!(reply.a, Some(ANSWER_V4.parse().expect("v4")), "{reply:?}");
    let mut expected = 1;
    if have_8021q {
        assert_eq!(
            dig_a(&pair.cli, &pair.srv_v4(), &[]),
            ANSWER_V4,
            "dig over {cli_dev}"
        );
        expected += 1;
    }
    let c1 = d.counters(&[SRV_IF]);
    let answered = c1.answered(SRV_IF) - c0.answered(SRV_IF);
    // Taken by the program: answered there, or redirected to the queue.
    let taken = c1.prog(SRV_IF, "redirected") - c0.prog(SRV_IF, "redirected")
        + c1.prog(SRV_IF, "answered")
        - c0.prog(SRV_IF, "answered");
    assert!(
        answered >= expected && taken >= expected && c1.socket_queries == 0,
        "want >= {expected} tagged queries answered through XDP and none on the kernel \
         sockets; got answered +{answered}, taken by the program +{taken}, socket queries \
         {}:\n{}",
        c1.socket_queries,
        d.log()
    );
}

#[test]
fn malformed_frames_dropped_and_counted() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("malformed", 40);
    let conf = Conf::new("malformed", &[pair.srv_v4()]);
    let mut d = Skuad::start(&pair.srv, &conf, &[]);
    d.assert_xdp_serving(SRV_IF);
    let (srv_mac, cli_mac) = (mac_of(&pair.srv, SRV_IF), mac_of(&pair.cli, CLI_IF));
    let (cli, srv): (Ipv4Addr, Ipv4Addr) = (
        pair.cli_v4().parse().expect("v4"),
        pair.srv_v4().parse().expect("v4"),
    );
    let frame = |id: u16| {
        UdpFrame::new(
            srv_mac,
            cli_mac,
            None,
            cli,
            srv,
            41_000 + id,
            53,
            &dns_query(id, NAME, 1),
        )
    };
    let wait = Duration::from_secs(3);
    let iface = [SRV_IF];

    // A well-formed raw frame first: the frame builder is right, so each frame below has
    // exactly one defect.
    let mut prev = d.counters(&iface);
    send_raw(&pair.cli, CLI_IF, vec![frame(1).bytes]);
    let now = d.counters_until(&iface, wait, |c| c.answered(SRV_IF) > prev.answered(SRV_IF));
    assert!(
        now.answered(SRV_IF) > prev.answered(SRV_IF),
        "a well-formed raw query was not answered through XSK:\n{}",
        d.log()
    );
    let answered_ok = now.answered(SRV_IF);
    prev = now;

    // (what, frame, counters that must grow: (queue keys, program keys), any of them)
    let mut bad_udp_csum = frame(2);
    bad_udp_csum.break_udp_checksum();
    let mut bad_ip_csum = frame(3);
    let ip = bad_ip_csum.ip;
    bad_ip_csum.bytes[ip + 10] ^= 0x5a;
    let mut short_udp = frame(4);
    let u = short_udp.udp;
    short_udp.bytes[u + 4..u + 6].copy_from_slice(&4u16.to_be_bytes());
    short_udp.fix_udp_checksum();
    let mut ihl4 = frame(5);
    let ip = ihl4.ip;
    ihl4.bytes[ip] = 0x44;
    ihl4.fix_ip_checksum();
    let cases: [(&str, UdpFrame, &[&str], &[&str]); 4] = [
        ("bad UDP checksum", bad_udp_csum, &["bad_udp_checksum"], &[]),
        (
            "bad IPv4 header checksum",
            bad_ip_csum,
            &["bad_ip_checksum"],
            &[],
        ),
        (
            "UDP length 4",
            short_udp,
            &["bad_udp_length"],
            &["drop_malformed"],
        ),
        ("IPv4 IHL 4", ihl4, &[], &["drop_malformed"]),
    ];
    for (what, f, queue_keys, prog_keys) in cases {
        let grew = |c: &Counters, p: &Counters| {
            queue_keys
                .iter()
                .any(|k| c.queue(SRV_IF, k) > p.queue(SRV_IF, k))
                || prog_keys
                    .iter()
                    .any(|k| c.prog(SRV_IF, k) > p.prog(SRV_IF, k))
        };
        send_raw(&pair.cli, CLI_IF, vec![f.bytes]);
        let now = d.counters_until(&iface, wait, |c| grew(c, &prev));
        assert!(
            grew(&now, &prev),
            "{what}: none of {queue_keys:?} (queue) / {prog_keys:?} (program) grew within \
             {wait:?}:\nqueue {:?}\nprogram {:?}\n{}",
            now.queues,
            now.programs,
            d.log()
        );
        assert_eq!(
            now.answered(SRV_IF),
            answered_ok,
            "{what}: the malformed query was answered"
        );
        assert!(d.running(), "{what}: skuad died:\n{}", d.log());
        prev = now;
    }
    assert_eq!(
        prev.socket_queries, 0,
        "a malformed query reached the kernel sockets"
    );

    assert_eq!(
        dig_a(&pair.cli, &pair.srv_v4(), &[]),
        ANSWER_V4,
        "dig after the bad frames"
    );
    let last = d.counters(&iface);
    assert!(
        last.answered(SRV_IF) > answered_ok,
        "the query after the bad frames was not answered through XSK:\n{}",
        d.log()
    );
}

#[test]
fn kill9_then_restart_and_sigterm_detaches() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("kill9", 50);
    let conf = Conf::new("kill9", &[pair.srv_v4()]);
    let mut first = Skuad::start(&pair.srv, &conf, &[]);
    first.assert_xdp_serving(SRV_IF);
    assert_eq!(
        dig_a(&pair.cli, &pair.srv_v4(), &[]),
        ANSWER_V4,
        "first instance"
    );
    let st = first.kill9();
    assert_eq!(st.signal(), Some(libc::SIGKILL), "{st}");
    // With a bpf_link the program leaves with the process; a netlink attachment would stay
    // (and the next skuad would remove it as stale). Either way DNS must come back.
    let left = xdp_token(&link_details(&pair.srv, SRV_IF));
    let cleared = wait_until(Duration::from_secs(2), || {
        xdp_token(&link_details(&pair.srv, SRV_IF)).is_none()
    });
    eprintln!("kill9: right after SIGKILL, ip link showed {left:?}; cleared within 2 s: {cleared}");

    let mut second = Skuad::start(&pair.srv, &conf, &[]);
    second.assert_xdp_serving(SRV_IF);
    let c0 = second.counters(&[SRV_IF]);
    assert_eq!(
        dig_a(&pair.cli, &pair.srv_v4(), &[]),
        ANSWER_V4,
        "after restart"
    );
    let c1 = second.counters(&[SRV_IF]);
    assert!(
        c1.answered(SRV_IF) > c0.answered(SRV_IF) && c1.socket_queries == 0,
        "after the restart the query was not answered through XSK:\n{}",
        second.log()
    );

    let st = second.stop();
    assert_eq!(st.code(), Some(0), "SIGTERM exit {st}:\n{}", second.log());
    assert!(
        second
            .log()
            .contains(&format!("xdp: detached from {SRV_IF}")),
        "no detach line:\n{}",
        second.log()
    );
    let link = link_details(&pair.srv, SRV_IF);
    assert_eq!(xdp_token(&link), None, "XDP left after SIGTERM:\n{link}");
    assert!(
        !link.contains("skua_xdp"),
        "XDP left after SIGTERM:\n{link}"
    );
}

#[test]
fn xdp_required_fails_cleanly_and_default_falls_back() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let ns = Netns::new("fallback", "srv");
    // dummy has no native XDP; neither has ifb (for kernels built without dummy).
    let kind = ["dummy", "ifb"]
        .into_iter()
        .find(|k| try_add_link(&ns, &["d0", "type", k]))
        .expect("this kernel has neither dummy nor ifb interfaces");
    let addr = "198.18.60.1";
    ip(&[
        "-n",
        ns.name(),
        "addr",
        "add",
        &format!("{addr}/24"),
        "dev",
        "d0",
    ]);
    ip(&["-n", ns.name(), "link", "set", "d0", "up"]);
    let conf = Conf::new("fallback", &[addr.to_string()]);

    let t0 = Instant::now();
    let o = run(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            SKUAD,
            "--config",
            conf.path(),
            "--xdp-required",
            "--xdp-mode",
            "native",
        ],
        Duration::from_secs(10),
    );
    let took = t0.elapsed();
    assert!(
        !o.ok() && took < Duration::from_secs(5),
        "--xdp-required on a {kind} interface: want a non-zero exit within 5 s, got {} after \
         {took:?}:\n{}",
        o.status,
        o.stderr
    );
    assert!(
        o.stderr.contains("XDP required but unavailable")
            && o.stderr.contains("d0")
            && o.stderr.contains("native mode"),
        "--xdp-required: the message does not name the reason (native attach refused on \
         d0):\n{}",
        o.stderr
    );
    let link = link_details(&ns, "d0");
    assert_eq!(
        xdp_token(&link),
        None,
        "XDP left after the failed start:\n{link}"
    );

    // Loopback up in the namespace: the REST API listens on 127.0.0.1:8053 there.
    ip(&["-n", ns.name(), "link", "set", "lo", "up"]);
    let mut d = Skuad::start(&ns, &conf, &["--xdp-mode", "native"]);
    let log = d.log();
    assert!(
        log.contains("xdp: not used: ") && log.contains("serving through kernel sockets"),
        "no fallback line:\n{log}"
    );
    // /health says the dataplane is degraded (503) and why: a load balancer takes the node
    // out, an operator reads the reason.
    let health = run(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            "curl",
            "-s",
            "--max-time",
            "5",
            "-w",
            "\n%{http_code}",
            "http://127.0.0.1:8053/health",
        ],
        Duration::from_secs(10),
    );
    assert!(
        health.stdout.ends_with("\n503")
            && health.stdout.contains("\"degraded\"")
            && health.stdout.contains("d0"),
        "/health after the fallback: {}\n{}",
        health.stdout,
        d.log()
    );
    let c0 = d.counters(&[]);
    assert_eq!(
        dig_a(&ns, addr, &[]),
        ANSWER_V4,
        "dig from the server namespace"
    );
    let c1 = d.counters(&[]);
    assert!(
        c1.socket_queries > c0.socket_queries && c1.programs.is_empty(),
        "the query was not answered by the kernel sockets: {c0:?} -> {c1:?}\n{}",
        d.log()
    );
    assert_eq!(xdp_token(&link_details(&ns, "d0")), None);
    let st = d.stop();
    assert!(st.success(), "SIGTERM exit {st}:\n{}", d.log());
}

#[test]
fn no_xdp_flag() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("noxdp", 70);
    let conf = Conf::new("noxdp", &[pair.srv_v4()]);
    let mut d = Skuad::start(&pair.srv, &conf, &["--no-xdp"]);
    assert!(
        d.log().contains("xdp: disabled (--no-xdp)"),
        "no 'disabled' line:\n{}",
        d.log()
    );
    let link = link_details(&pair.srv, SRV_IF);
    assert_eq!(xdp_token(&link), None, "--no-xdp, yet:\n{link}");
    let c0 = d.counters(&[]);
    assert_eq!(dig_a(&pair.cli, &pair.srv_v4(), &[]), ANSWER_V4);
    let c1 = d.counters(&[]);
    assert!(
        c1.socket_queries > c0.socket_queries && c1.queues.is_empty() && c1.programs.is_empty(),
        "want the query counted by the kernel sockets and no XDP counters: {c0:?} -> {c1:?}"
    );
    let st = d.stop();
    assert!(st.success(), "SIGTERM exit {st}:\n{}", d.log());
    let log = d.log();
    assert!(
        !log.contains("xdp program on") && !log.contains(" queue 0: rx "),
        "--no-xdp, yet XDP counters:\n{log}"
    );
}

/// `dig @server NAME TYPE` from `ns`: (status word, answer section as +short prints it).
fn dig_status(ns: &Netns, server: &str, name: &str, qtype: &str) -> (String, String) {
    let at = format!("@{server}");
    let args = [
        "+time=2",
        "+tries=2",
        "+noall",
        "+comments",
        "+answer",
        &at,
        name,
        qtype,
    ];
    let o = in_ns(ns, "dig", &args);
    assert!(o.ok(), "dig {}: {}{}", args.join(" "), o.stdout, o.stderr);
    let status = o
        .stdout
        .split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or_default()
        .to_string();
    let answer = o
        .stdout
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().last())
        .collect::<Vec<_>>()
        .join(" ");
    (status, answer)
}

#[test]
fn program_answers_follow_reloads() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("reload", 60);
    let conf = Conf::new("reload", &[pair.srv_v4(), pair.srv_v6()]);
    let mut d = Skuad::start(&pair.srv, &conf, &[]);
    d.assert_xdp_serving(SRV_IF);
    d.assert_answers_precompiled();

    // A precompiled name: answered by the program, not by the queue.
    let c0 = d.counters(&[SRV_IF]);
    assert_eq!(dig_a(&pair.cli, &pair.srv_v4(), &[]), ANSWER_V4);
    let c1 = d.counters(&[SRV_IF]);
    assert!(
        c1.prog(SRV_IF, "answered") > c0.prog(SRV_IF, "answered")
            && c1.queue(SRV_IF, "answered") == c0.queue(SRV_IF, "answered"),
        "want the A query answered in the program: {:?} -> {:?}",
        c0.programs,
        c1.programs
    );
    // A name without an entry (NXDOMAIN): the program leaves it to the AF_XDP queue.
    let (status, _) = dig_status(&pair.cli, &pair.srv_v4(), "nope.example.", "A");
    assert_eq!(status, "NXDOMAIN");
    let c2 = d.counters(&[SRV_IF]);
    assert!(
        c2.queue(SRV_IF, "answered") > c1.queue(SRV_IF, "answered")
            && c2.prog(SRV_IF, "answered") == c1.prog(SRV_IF, "answered"),
        "want NXDOMAIN answered by the queue: {:?} -> {:?}",
        c1.queues,
        c2.queues
    );

    // Reload with new data: the program serves the new answer, never the old one again.
    let text = std::fs::read_to_string(conf.path()).unwrap();
    std::fs::write(conf.path(), text.replace(ANSWER_V4, "198.19.0.54")).unwrap();
    d.signal(libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(10), || d
            .log()
            .matches("answers precompiled into the program")
            .count()
            >= 2),
        "no reload of the program's answers:\n{}",
        d.log()
    );
    for _ in 0..3 {
        assert_eq!(dig_a(&pair.cli, &pair.srv_v4(), &[]), "198.19.0.54");
    }
    let c3 = d.counters(&[SRV_IF]);
    assert!(
        c3.prog(SRV_IF, "answered") >= c2.prog(SRV_IF, "answered") + 3,
        "the new answer did not come from the program: {:?} -> {:?}",
        c2.programs,
        c3.programs
    );
    let st = d.stop();
    assert!(st.success(), "SIGTERM exit {st}:\n{}", d.log());
}

/// Both proofs: at start with a live frame where the kernel allows it (`auto`; on a kernel
/// that refuses live frames this is the traffic proof too), and on real queries
/// (`traffic`: the path watch sees the program's answers go and the peer's counter stand
/// still, and switches the answers off there).
#[test]
fn veth_peer_without_napi_keeps_answers_in_the_queues() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    for (i, how) in ["auto", "traffic"].into_iter().enumerate() {
        veth_peer_without_napi(how, 80 + u8::try_from(i).expect("small"));
    }
}

fn veth_peer_without_napi(how: &str, net: u8) {
    let pair = Pair::with_addresses(&format!("nonapi{net}"), net);
    set_gro(&pair.cli, false);
    let conf = Conf::new(&format!("nonapi{net}"), &[pair.srv_v4(), pair.srv_v6()]);
    let mut d = Skuad::start(
        &pair.srv,
        &conf,
        &["--xdp-mode", "native", "--xdp-self-test", how],
    );
    d.assert_xdp_serving(SRV_IF);
    d.assert_answers_precompiled();
    let detected = |d: &Skuad| d.log().contains("takes no XDP frames");
    if how == "traffic" || !detected(&d) {
        // Proof by traffic: queries the program answers (and the peer drops), in bursts,
        // until the watch has seen enough of them go without the peer's counter moving.
        let burst = format!(
            "import socket,struct\n\
             s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
             q=b''.join(bytes([len(l)])+l.encode() for l in '{NAME}'.rstrip('.').split('.'))\n\
             for i in range(16): s.sendto(struct.pack('>6H',i,0x100,1,0,0,0)+q+b'\\0\\0\\1\\0\\1',('{}',53))\n",
            pair.srv_v4()
        );
        assert!(
            wait_until(Duration::from_secs(20), || {
                let o = in_ns(&pair.cli, "python3", &["-c", &burst]);
                assert!(o.ok(), "burst: {}{}", o.stdout, o.stderr);
                detected(&d)
            }),
            "skuad ({how}) did not detect that the veth peer drops XDP_TX frames:\n{}",
            d.log()
        );
    }
    // Nothing is lost: the AF_XDP queue answers everything.
    let c0 = d.counters(&[SRV_IF]);
    assert_eq!(dig_a(&pair.cli, &pair.srv_v4(), &[]), ANSWER_V4);
    assert_eq!(kdig_aaaa(&pair.cli, &pair.srv_v6()), ANSWER_V6);
    let c1 = d.counters(&[SRV_IF]);
    assert!(
        c1.queue(SRV_IF, "answered") >= c0.queue(SRV_IF, "answered") + 2
            && c1.prog(SRV_IF, "answered") == c0.prog(SRV_IF, "answered"),
        "want both answered by the queue: {:?} {:?}",
        c1.queues,
        c1.programs
    );
    let st = d.stop();
    assert!(st.success(), "SIGTERM exit {st}:\n{}", d.log());
}

// ---------------------------------------------------------------------------------------
// Wildcard listeners: only the interface's own unicast addresses are answered through XDP.

/// An Ethernet + IPv6 + UDP frame with a valid UDP checksum (RFC 8200 §8.1).
fn udp6_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    sport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(62 + payload.len());
    b.extend_from_slice(&dst_mac);
    b.extend_from_slice(&src_mac);
    b.extend_from_slice(&0x86ddu16.to_be_bytes());
    let udp_len = u16::try_from(8 + payload.len()).expect("payload fits");
    b.extend_from_slice(&[0x60, 0, 0, 0]);
    b.extend_from_slice(&udp_len.to_be_bytes());
    b.extend_from_slice(&[17, 64]);
    b.extend_from_slice(&src.octets());
    b.extend_from_slice(&dst.octets());
    let udp = b.len();
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&53u16.to_be_bytes());
    b.extend_from_slice(&udp_len.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(payload);
    let pseudo = sum16(&b[22..54]) + 17 + u32::from(udp_len);
    let mut c = !fold(pseudo + sum16(&b[udp..]));
    if c == 0 {
        c = 0xffff;
    }
    b[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
    b
}

/// Records the source address of every UDP datagram from port 53 seen on `ifname` in `ns`
/// (IPv4 and IPv6, tagged or not) until the returned guard is finished.
struct ReplyCapture {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: Option<JoinHandle<Vec<IpAddr>>>,
}

impl ReplyCapture {
    fn start(ns: &Netns, ifname: &str) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let path = format!("/run/netns/{}", ns.name());
        let (ifname, flag) = (ifname.to_string(), stop.clone());
        let handle = std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
            // SAFETY: setns(2) on a valid namespace fd; it moves only this thread.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns {path}: {}", io::Error::last_os_error());
            let s = PacketSocket::open(&ifname, ETH_P_ALL)
                .unwrap_or_else(|e| panic!("AF_PACKET on {ifname}: {e}"));
            let _ = ready_tx.send(());
            let mut sources = Vec::new();
            let mut buf = vec![0u8; 4096];
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((n, _)) = s.recv(&mut buf, Duration::from_millis(100)) else {
                    continue;
                };
                let b = &buf[..n];
                let l3 = if be16(b, 12) == Some(0x8100) { 18 } else { 14 };
                let (src, udp) = match be16(b, l3 - 2) {
                    Some(0x0800) if b.get(l3 + 9) == Some(&17) => (
                        IpAddr::V4(Ipv4Addr::from(ne_bytes::<4>(b, l3 + 12))),
                        l3 + usize::from(b[l3] & 0x0f) * 4,
                    ),
                    Some(0x86dd) if b.get(l3 + 6) == Some(&17) => (
                        IpAddr::V6(Ipv6Addr::from(ne_bytes::<16>(b, l3 + 8))),
                        l3 + 40,
                    ),
                    _ => continue,
                };
                if be16(b, udp) == Some(53) {
                    sources.push(src);
                }
            }
            sources
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the capture socket did not open within 5 s");
        Self {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the capture; the source address of every reply seen.
    fn finish(mut self) -> Vec<IpAddr> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .take()
            .expect("capture running")
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}

impl Drop for ReplyCapture {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The server's IPv6 link-local address on `ifname`, once DAD has finished (bounded).
fn link_local(ns: &Netns, ifname: &str) -> Ipv6Addr {
    let mut found = None;
    let ok = wait_until(Duration::from_secs(10), || {
        let out = ip(&[
            "-n",
            ns.name(),
            "-6",
            "addr",
            "show",
            "dev",
            ifname,
            "scope",
            "link",
        ]);
        found = out
            .lines()
            .filter(|l| !l.contains("tentative"))
            .find_map(|l| l.trim().strip_prefix("inet6 "))
            .and_then(|l| l.split('/').next())
            .and_then(|a| a.parse().ok());
        found.is_some()
    });
    assert!(ok, "no usable link-local address on {ifname} within 10 s");
    found.expect("link-local")
}

/// How long the XDP address watcher may take to follow an address change (docs/xdp.md),
/// with a margin for a loaded machine.
const WATCHER_BOUND: Duration = Duration::from_millis(1500);

#[test]
fn wildcard_listener_answers_only_own_unicast_addresses() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("wildcard", 90);
    let conf = Conf::new("wildcard", &["0.0.0.0".into(), "::".into()]);
    let mut d = Skuad::start(&pair.srv, &conf, &[]);
    d.assert_xdp_serving(SRV_IF);
    d.assert_answers_precompiled();
    let iface = [SRV_IF];
    let (srv_mac, cli_mac) = (mac_of(&pair.srv, SRV_IF), mac_of(&pair.cli, CLI_IF));
    let (cli4, srv4): (Ipv4Addr, Ipv4Addr) = (
        pair.cli_v4().parse().expect("v4"),
        pair.srv_v4().parse().expect("v4"),
    );
    let (cli6, srv6): (Ipv6Addr, Ipv6Addr) = (
        pair.cli_v6().parse().expect("v6"),
        pair.srv_v6().parse().expect("v6"),
    );
    let srv_ll = link_local(&pair.srv, SRV_IF);
    let capture = ReplyCapture::start(&pair.cli, CLI_IF);

    // (a) The server's own addresses: answered through XDP (in the program), not by the
    // kernel sockets.
    let c0 = d.counters(&iface);
    assert_eq!(dig_a(&pair.cli, &pair.srv_v4(), &[]), ANSWER_V4);
    assert_eq!(kdig_aaaa(&pair.cli, &pair.srv_v6()), ANSWER_V6);
    let c1 = d.counters(&iface);
    assert!(
        c1.answered(SRV_IF) >= c0.answered(SRV_IF) + 2 && c1.socket_queries == c0.socket_queries,
        "own addresses: want both queries answered through XDP: {:?} {:?} -> {:?} {:?}\n{}",
        c0.programs,
        c0.queues,
        c1.programs,
        c1.queues,
        d.log()
    );
    // The link-local address is ours too (IPv6 link-local included).
    let scoped = format!("{srv_ll}%{CLI_IF}");
    let (status, _) = dig_status(&pair.cli, &scoped, NAME, "AAAA");
    assert!(
        ["NOERROR", "REFUSED"].contains(&status.as_str()),
        "dig @{scoped}: status {status:?}"
    );
    let c2 = d.counters(&iface);
    assert!(
        c2.answered(SRV_IF) > c1.answered(SRV_IF) && c2.socket_queries == c1.socket_queries,
        "link-local {srv_ll}: not answered through XDP: {:?} -> {:?}\n{}",
        c1.queues,
        c2.queues,
        d.log()
    );

    // (b)-(d) Broadcast, multicast and another host's address: never answered through XDP.
    let bcast_mac = [0xff; 6];
    let subnet_bcast = Ipv4Addr::new(198, 18, pair.net, 255);
    let other4 = Ipv4Addr::new(198, 18, pair.net, 99);
    let other6 = Ipv6Addr::new(0xfd00, u16::from(pair.net), 0, 0, 0, 0, 0, 0x99);
    let mdns4 = Ipv4Addr::new(224, 0, 0, 251);
    let mdns6 = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xfb);
    let q = |id: u16, qtype: u16| dns_query(id, NAME, qtype);
    let v4 = |id: u16, mac: [u8; 6], dst: Ipv4Addr| {
        UdpFrame::new(mac, cli_mac, None, cli4, dst, 42_000 + id, 53, &q(id, 1)).bytes
    };
    let v6 = |id: u16, mac: [u8; 6], dst: Ipv6Addr| {
        udp6_frame(mac, cli_mac, cli6, dst, 42_000 + id, &q(id, 28))
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("subnet broadcast", v4(1, bcast_mac, subnet_bcast)),
        ("255.255.255.255", v4(2, bcast_mac, Ipv4Addr::BROADCAST)),
        ("subnet broadcast to our MAC", v4(3, srv_mac, subnet_bcast)),
        // RFC 1122 §3.3.6: a link-layer broadcast carrying a unicast IP destination.
        ("our address in a broadcast frame", v4(4, bcast_mac, srv4)),
        (
            "224.0.0.251",
            v4(5, [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb], mdns4),
        ),
        ("ff02::fb", v6(6, [0x33, 0x33, 0, 0, 0, 0xfb], mdns6)),
        ("another host's IPv4 address", v4(7, srv_mac, other4)),
        ("another host's IPv6 address", v6(8, srv_mac, other6)),
        (
            "our IPv6 address in a multicast frame",
            v6(9, [0x33, 0x33, 0, 0, 0, 1], srv6),
        ),
    ];
    for (what, frame) in cases {
        let before = d.counters(&iface);
        send_raw(&pair.cli, CLI_IF, vec![frame]);
        let after = d.counters_until(&iface, Duration::from_secs(3), |c| {
            c.prog(SRV_IF, "pass_other_dest") > before.prog(SRV_IF, "pass_other_dest")
        });
        // Give a worker that should not have it time to answer it anyway.
        std::thread::sleep(Duration::from_millis(100));
        let after2 = d.counters(&iface);
        assert!(
            after.prog(SRV_IF, "pass_other_dest") > before.prog(SRV_IF, "pass_other_dest")
                && after2.answered(SRV_IF) == before.answered(SRV_IF)
                && after2.prog(SRV_IF, "redirected") == before.prog(SRV_IF, "redirected")
                && after2.queue(SRV_IF, "rx") == before.queue(SRV_IF, "rx"),
            "{what}: want it passed to the kernel as another destination and nothing answered \
             or redirected through XDP:\nprogram {:?}\n -> {:?}\nqueue {:?}\n -> {:?}\n{}",
            before.programs,
            after2.programs,
            before.queues,
            after2.queues,
            d.log()
        );
    }

    // (e) An address added while skuad runs is answered through XDP once the watcher has
    // seen it; once removed, it no longer is.
    let (new4, new6) = (
        format!("198.18.{}.77", pair.net),
        format!("fd00:{}::77", pair.net),
    );
    let srv = pair.srv.name();
    ip(&[
        "-n",
        srv,
        "addr",
        "add",
        &format!("{new4}/24"),
        "dev",
        SRV_IF,
    ]);
    ip(&[
        "-n",
        srv,
        "addr",
        "add",
        &format!("{new6}/64"),
        "dev",
        SRV_IF,
        "nodad",
    ]);
    std::thread::sleep(WATCHER_BOUND);
    let c3 = d.counters(&iface);
    assert_eq!(dig_a(&pair.cli, &new4, &[]), ANSWER_V4, "dig @{new4}");
    assert_eq!(kdig_aaaa(&pair.cli, &new6), ANSWER_V6, "kdig @{new6}");
    let c4 = d.counters(&iface);
    assert!(
        c4.answered(SRV_IF) >= c3.answered(SRV_IF) + 2 && c4.socket_queries == c3.socket_queries,
        "addresses added while running: want both answered through XDP within \
         {WATCHER_BOUND:?}: {:?} {:?} -> {:?} {:?}\n{}",
        c3.programs,
        c3.queues,
        c4.programs,
        c4.queues,
        d.log()
    );
    for a in [&new4, &new6] {
        assert!(
            d.log()
                .contains(&format!("xdp: {SRV_IF}: answering queries to {a}\n")),
            "no watcher line for {a}:\n{}",
            d.log()
        );
    }
    ip(&[
        "-n",
        srv,
        "addr",
        "del",
        &format!("{new4}/24"),
        "dev",
        SRV_IF,
    ]);
    ip(&[
        "-n",
        srv,
        "addr",
        "del",
        &format!("{new6}/64"),
        "dev",
        SRV_IF,
    ]);
    std::thread::sleep(WATCHER_BOUND);
    for (what, frame) in [
        (
            "removed IPv4 address",
            v4(10, srv_mac, new4.parse().expect("v4")),
        ),
        (
            "removed IPv6 address",
            v6(11, srv_mac, new6.parse().expect("v6")),
        ),
    ] {
        let before = d.counters(&iface);
        send_raw(&pair.cli, CLI_IF, vec![frame]);
        let after = d.counters_until(&iface, Duration::from_secs(3), |c| {
            c.prog(SRV_IF, "pass_other_dest") > before.prog(SRV_IF, "pass_other_dest")
        });
        assert!(
            after.prog(SRV_IF, "pass_other_dest") > before.prog(SRV_IF, "pass_other_dest")
                && after.answered(SRV_IF) == before.answered(SRV_IF),
            "{what}: still answered through XDP {WATCHER_BOUND:?} after its removal:\n\
             program {:?}\n -> {:?}\n{}",
            before.programs,
            after.programs,
            d.log()
        );
    }

    // No reply, from XDP or the kernel sockets, ever came from a broadcast, multicast or
    // foreign address: only from the server's own addresses.
    let own: Vec<IpAddr> = vec![
        srv4.into(),
        srv6.into(),
        srv_ll.into(),
        new4.parse().expect("v4"),
        new6.parse().expect("v6"),
    ];
    let sources = capture.finish();
    assert!(
        sources.len() >= 5,
        "the capture saw only {} replies",
        sources.len()
    );
    let bad: Vec<&IpAddr> = sources.iter().filter(|s| !own.contains(s)).collect();
    assert!(
        bad.is_empty(),
        "replies from addresses that are not the server's own: {bad:?}"
    );
    let st = d.stop();
    assert!(st.success(), "SIGTERM exit {st}:\n{}", d.log());
}

// ---------------------------------------------------------------------------------------
// The front door over AF_XDP: NOTIFY, TSIG, a cache hit too large for a frame.

const XFR_KEY: &str = "xfr.example.";
const XFR_SECRET: &[u8; 32] = b"0123456789abcdef0123456789abcdef";

fn xfr_key() -> skua_xfr::tsig::Key {
    skua_xfr::tsig::Key::new(
        &skua_engine::name::WireName::parse(XFR_KEY, None).unwrap(),
        skua_xfr::tsig::Algorithm::HmacSha256,
        XFR_SECRET.to_vec(),
    )
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Sends `msg` over UDP from the client namespace to `server`:53 and returns the reply
/// (none within two seconds: `None`).
fn udp_exchange(ns: &Netns, server: Ipv4Addr, msg: Vec<u8>) -> Option<Vec<u8>> {
    in_netns(ns, move || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s.send_to(&msg, (server, 53)).unwrap();
        let mut b = vec![0u8; 65535];
        let (n, _) = s.recv_from(&mut b).ok()?;
        b.truncate(n);
        Some(b)
    })
}

/// example.org. with serial `serial` and the records given (SOA REFRESH one hour: only a
/// NOTIFY makes the secondary look before then).
fn org_zone(serial: u32, records: &str) -> String {
    format!(
        "$ORIGIN example.org.\n$TTL 300\n@ IN SOA ns.example.org. admin.example.org. {serial} 3600 600 86400 60\n\
         @ IN NS ns.example.org.\nns IN A 198.18.91.53\n{records}"
    )
}

/// With AF_XDP up, UDP to the served address goes to the XSK, and the AF_XDP worker asks
/// the front door: a NOTIFY for a secondary zone is answered NOERROR and the secondary
/// refreshes from its primary within a second (the zone's REFRESH is an hour), and a
/// TSIG-signed query gets a signed answer that verifies, both counted by the XSK queue
/// (before the door, the worker handed both to the engine alone: REFUSED, and an unsigned
/// answer).
#[test]
fn notify_and_tsig_over_af_xdp() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("notifyxdp", 91);
    ip(&["-n", pair.srv.name(), "link", "set", "lo", "up"]);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("skx-{}-notifyxdp", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let keyfile = dir.join("xfr.key");
    std::fs::write(&keyfile, data_encoding::BASE64.encode(XFR_SECRET)).unwrap();
    std::fs::set_permissions(
        &keyfile,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let tsig = format!(
        "tsig-key:\n    name: {XFR_KEY}\n    secret: file:{}\n",
        keyfile.display()
    );
    let primary_zone = dir.join("primary.zone");
    std::fs::write(&primary_zone, org_zone(1, "www IN A 198.18.91.10\n")).unwrap();
    // The primary: kernel sockets on the server namespace's loopback.
    let primary_conf = Conf(dir.join("primary.conf"));
    std::fs::write(
        &primary_conf.0,
        format!(
            "server:\n    interface: 127.0.0.1@5391\n    num-threads: 1\n    \
             access-control: 127.0.0.0/8 allow\n{tsig}auth-zone:\n    name: example.org.\n    \
             zonefile: {}\n    provide-xfr: 127.0.0.0/8 {XFR_KEY}\n",
            primary_zone.display()
        ),
    )
    .unwrap();
    let mut primary = Skuad::start(&pair.srv, &primary_conf, &["--no-xdp"]);
    // The secondary, AF_XDP on the veth.
    let conf = Conf::with_extra(
        "notifyxdp",
        &[pair.srv_v4()],
        &format!(
            "{tsig}auth-zone:\n    name: example.org.\n    zonefile: {}\n    \
             primary: 127.0.0.1@5391 {XFR_KEY}\n    allow-notify: 198.18.91.0/24 {XFR_KEY}\n",
            dir.join("secondary.zone").display()
        ),
    );
    let mut d = Skuad::start(&pair.srv, &conf, &[]);
    d.assert_xdp_serving(SRV_IF);
    let srv: Ipv4Addr = pair.srv_v4().parse().unwrap();
    let mut got = (String::new(), String::new());
    assert!(
        wait_until(Duration::from_secs(15), || {
            got = dig_status(&pair.cli, &pair.srv_v4(), "www.example.org.", "A");
            got.1 == "198.18.91.10"
        }),
        "the first transfer: {got:?}\nsecondary:\n{}\nprimary:\n{}",
        d.log(),
        primary.log()
    );

    // A new serial on the primary; the secondary learns of it only by NOTIFY.
    std::fs::write(
        &primary_zone,
        org_zone(2, "www IN A 198.18.91.10\nnew IN A 198.18.91.11\n"),
    )
    .unwrap();
    primary.signal(libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(10), || primary
            .log()
            .contains("reloaded:")),
        "primary reloaded:\n{}",
        primary.log()
    );
    let before = d.counters(&[]);
    let mut notify = skua_xfr::notify::message(
        0x4e4e,
        &skua_engine::name::WireName::parse("example.org.", None).unwrap(),
        None,
    );
    skua_xfr::tsig::sign_request(&mut notify, &xfr_key(), unix_now());
    let reply = udp_exchange(&pair.cli, srv, notify).expect("an answer to the NOTIFY");
    let sent = Instant::now();
    assert_eq!(
        ((reply[2] >> 3) & 0xf, reply[3] & 0xf),
        (4, 0),
        "NOTIFY answered NOERROR: {reply:?}\n{}",
        d.log()
    );
    let mut new = (String::new(), String::new());
    let refreshed = wait_until(Duration::from_secs(5), || {
        new = dig_status(&pair.cli, &pair.srv_v4(), "new.example.org.", "A");
        new.1 == "198.18.91.11"
    });
    assert!(
        refreshed && sent.elapsed() < Duration::from_secs(3),
        "the secondary refreshed after the NOTIFY ({:?}): {new:?}\n{}",
        sent.elapsed(),
        d.log()
    );

    // A TSIG-signed query over AF_XDP: a signed answer that verifies with the key.
    let mut q = dns_query(0x5151, "www.example.org.", 1);
    let key = xfr_key();
    let now = unix_now();
    let mac = skua_xfr::tsig::sign_request(&mut q, &key, now);
    let reply = udp_exchange(&pair.cli, srv, q).expect("an answer to the signed query");
    assert_eq!(reply[3] & 0xf, 0, "NOERROR: {reply:?}");
    let mut v = skua_xfr::tsig::StreamVerifier::new(&key, &mac);
    assert_eq!(
        v.verify(&reply, unix_now()),
        Ok(true),
        "the answer is signed with the key: {reply:?}"
    );
    let after = d.counters(&[]);
    // The NOTIFY, the signed query and the digs came over the XSK; none over the kernel
    // sockets.
    let xsk = after.queue(SRV_IF, "answered") - before.queue(SRV_IF, "answered");
    assert!(
        xsk >= 3 && after.socket_queries == before.socket_queries,
        "want everything answered by the XSK queue (+{xsk}), none by the kernel sockets \
         ({} -> {}):\n{}",
        before.socket_queries,
        after.socket_queries,
        d.log()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cache hit too large for a frame goes to the AF_XDP worker's slow path, which asks the
/// door with the cache and answers through the kernel socket (before, the slow path asked
/// the engine without the cache: the hit came back as a miss and was dropped uncounted).
/// `max-udp-size: 65535` and a client accepting 16000 octets (dig sends 1232 for any
/// `+bufsize` over 32767): 40 TXT records of 200 octets (about 8 KiB) fit no 4 KiB frame
/// and need no TCP.
#[test]
fn oversized_cache_hit_answered_over_af_xdp() {
    let _suite = crate::common::suite(module_path!());
    require_root();
    let pair = Pair::with_addresses("bighit", 92);
    ip(&["-n", pair.srv.name(), "link", "set", "lo", "up"]);
    let records: Vec<String> = (0..40)
        .map(|i| format!("big.example.net. 300 IN TXT {i:02}{}", "x".repeat(198)))
        .collect();
    let refs: Vec<&str> = records.iter().map(String::as_str).collect();
    let mut upstream = Upstream::start(&pair.srv, "bighit", 5392, &refs);
    let conf = Conf::with_extra(
        "bighit",
        &[pair.srv_v4()],
        "    max-udp-size: 65535\n    do-not-query-localhost: no\nforward-zone:\n    \
         name: \"example.net.\"\n    forward-addr: 127.0.0.1@5392\n",
    );
    let mut d = Skuad::start(&pair.srv, &conf, &["--xdp-cache-answers", "0"]);
    d.assert_xdp_serving(SRV_IF);
    let ask = |ns: &Netns| {
        let at = format!("@{}", pair.srv_v4());
        in_ns(
            ns,
            "dig",
            &[
                "+noall",
                "+answer",
                "+time=2",
                "+tries=1",
                "+bufsize=16000",
                "+ignore",
                &at,
                "big.example.net.",
                "TXT",
            ],
        )
        .stdout
    };
    let mut first = String::new();
    let resolved = wait_until(Duration::from_secs(10), || {
        first = ask(&pair.cli);
        first.lines().count() == 40
    });
    if !resolved {
        let c = d.counters(&[SRV_IF]);
        panic!(
            "resolved through the upstream: {first:?} (dig without +bufsize: {:?}), {c:?}\n{}",
            in_ns(
                &pair.cli,
                "dig",
                &[
                    &format!("@{}", pair.srv_v4()),
                    "+bufsize=16000",
                    "+ignore",
                    "big.example.net.",
                    "TXT"
                ]
            )
            .stdout,
            d.log()
        );
    }
    upstream.stop();
    let before = d.counters(&[]);
    let second = ask(&pair.cli);
    let after = d.counters(&[]);
    assert_eq!(
        second.lines().count(),
        40,
        "the hit, whole, from the cache: {second:?}\n{}",
        d.log()
    );
    let slow = after.queue(SRV_IF, "slow_path") - before.queue(SRV_IF, "slow_path");
    assert!(
        slow >= 1 && after.socket_queries == before.socket_queries,
        "want the hit sent by the XSK worker's slow path (+{slow}), not asked of the kernel \
         sockets:\n{}",
        d.log()
    );
}
