//! The XDP program and its loader against the real kernel (needs root: CI runs as root).
//!
//! - Verdicts: `BPF_PROG_TEST_RUN` on hand-built frames; each case asserts the XDP action and
//!   that exactly `seen` and the expected counter moved by one.
//! - Attachment: a veth pair in a network namespace made for the test (deleted on drop):
//!   native and generic mode as `ip -d link` shows them, detach, foreign programs, programs
//!   left by a netlink loader, and a bpf_link owner killed with SIGKILL.
//!
//! They need root (CI runs as root) and fail, never skip, without it.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use skua_xdp::abi::{Dest, MAX_QUEUES, Stat, XdpConfig};
use skua_xdp::bpf::{
    AttachMode, AttachedMode, PROGRAM_NAME, XDP_DROP, XDP_PASS, XDP_REDIRECT, XdpError, XdpProgram,
    current_program, detach_stale,
};

const OUR_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 53);
const OTHER_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 99);
const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
const OUR_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x5c, 0, 0, 0, 0, 0, 0x53);
const OTHER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x5c, 0, 0, 0, 0, 0, 0x99);
const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x5c, 0, 0, 0, 0, 0, 2);

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_ARP: u16 = 0x0806;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_ICMPV6: u8 = 58;

// Offsets in an untagged frame.
const IP: usize = 14;
const IP4_TOT_LEN: usize = IP + 2;
const IP4_FRAG: usize = IP + 6;
const UDP4: usize = IP + 20;
const UDP6: usize = IP + 40;

/// Loading BPF and making namespaces need root: without it the test fails (CI is root;
/// a silently skipped test would prove nothing).
fn root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the XDP program tests need root (BPF, network namespaces); they do not skip"
    );
    true
}

// --- frames ---------------------------------------------------------------------------------

/// `example. IN A`, RD set: 25 bytes.
fn dns_query() -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x07example\x00\x00\x01\x00\x01");
    q
}

fn ether(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Inserts a VLAN tag (TPID, VID 7) after the MAC addresses.
fn tagged(frame: &[u8], tpid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&7u16.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !u16::try_from(sum).expect("folded")
}

/// IPv4 header without options (RFC 791), valid checksum, then `l4`.
fn ipv4(proto: u8, dst: Ipv4Addr, l4: &[u8]) -> Vec<u8> {
    let tot = u16::try_from(20 + l4.len()).expect("small");
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&tot.to_be_bytes());
    h.extend_from_slice(&[0xab, 0xcd, 0x40, 0x00, 64, proto, 0, 0]); // id, DF, ttl, proto
    h.extend_from_slice(&CLIENT_V4.octets());
    h.extend_from_slice(&dst.octets());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(l4);
    h
}

/// IPv6 fixed header (RFC 8200) with `next`, then `l4`.
fn ipv6(next: u8, dst: Ipv6Addr, l4: &[u8]) -> Vec<u8> {
    let plen = u16::try_from(l4.len()).expect("small");
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&plen.to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&CLIENT_V6.octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(l4);
    h
}

/// UDP header (RFC 768) with checksum 0 (the program does not check it), then `payload`.
fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(8 + payload.len()).expect("small");
    let mut u = 40000u16.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

fn udp4(dst: Ipv4Addr, dport: u16) -> Vec<u8> {
    ether(ETH_P_IP, &ipv4(IPPROTO_UDP, dst, &udp(dport, &dns_query())))
}

fn udp6(dst: Ipv6Addr, dport: u16) -> Vec<u8> {
    ether(
        ETH_P_IPV6,
        &ipv6(IPPROTO_UDP, dst, &udp(dport, &dns_query())),
    )
}

/// The frame with another Ethernet destination.
fn to_mac(mut f: Vec<u8>, mac: [u8; 6]) -> Vec<u8> {
    f[..6].copy_from_slice(&mac);
    f
}

const BROADCAST_MAC: [u8; 6] = [0xff; 6];

/// The frame with another Ethernet source.
fn from_mac(mut f: Vec<u8>, mac: [u8; 6]) -> Vec<u8> {
    f[6..12].copy_from_slice(&mac);
    f
}

/// The untagged IPv4 frame from another source address (header checksum redone).
fn from4(mut f: Vec<u8>, src: Ipv4Addr) -> Vec<u8> {
    f[IP + 12..IP + 16].copy_from_slice(&src.octets());
    f[IP + 10..IP + 12].fill(0);
    let c = checksum(&f[IP..IP + 20]);
    f[IP + 10..IP + 12].copy_from_slice(&c.to_be_bytes());
    f
}

/// The untagged IPv6 frame from another source address.
fn from6(mut f: Vec<u8>, src: Ipv6Addr) -> Vec<u8> {
    f[IP + 8..IP + 24].copy_from_slice(&src.octets());
    f
}

fn set16(mut f: Vec<u8>, at: usize, v: u16) -> Vec<u8> {
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
    f
}

// --- verdict tests ----------------------------------------------------------------------------

/// A loaded program serving port 53 on OUR_V4 and OUR_V6.
fn program() -> XdpProgram {
    let mut p = XdpProgram::load().expect("load skua_xdp");
    p.set_config(XdpConfig::enabled(53)).expect("config");
    p.add_dest(IpAddr::V4(OUR_V4)).expect("dest4");
    p.add_dest(IpAddr::V6(OUR_V6)).expect("dest6");
    p
}

/// Runs `frame` and asserts the XDP action and that exactly `seen` and `stat` moved, by one.
///
/// The action follows from the counter: `Redirected` gives `redirect` (the redirect result:
/// `XDP_PASS` with an empty XSKMAP slot, `XDP_REDIRECT` with a socket), `DropMalformed`
/// gives `XDP_DROP`, every `Pass*` gives `XDP_PASS`.
fn check(p: &XdpProgram, what: &str, frame: &[u8], stat: Stat, redirect: u32) {
    let action = match stat {
        Stat::Redirected => redirect,
        Stat::DropMalformed => XDP_DROP,
        _ => XDP_PASS,
    };
    let before = p.stats().expect("stats");
    let got = p
        .test_run(frame)
        .unwrap_or_else(|e| panic!("{what}: test_run: {e}"));
    let after = p.stats().expect("stats");
    assert_eq!(got, action, "{what}: XDP action");
    for s in Stat::ALL {
        let want = u64::from(s == Stat::Seen || s == stat);
        let moved = after[s.index()] - before[s.index()];
        assert_eq!(moved, want, "{what}: counter {}", s.name());
    }
}

/// Runs a table of `(what, frame, expected counter)`.
fn check_all(p: &XdpProgram, cases: &[(&str, Vec<u8>, Stat)], redirect: u32) {
    for (what, frame, stat) in cases {
        check(p, what, frame, *stat, redirect);
    }
}

#[test]
fn verdicts_for_dns_and_everything_else() {
    use Stat::*;
    if !root() {
        return;
    }
    let p = program();
    let query = dns_query();
    let v4 = udp4(OUR_V4, 53);
    let v6 = udp6(OUR_V6, 53);
    let other_port = udp4(OUR_V4, 80);

    // Ethernet pads short frames to 60 bytes: the IP total length counts, not the frame.
    let mut padded = ether(ETH_P_IP, &ipv4(IPPROTO_UDP, OUR_V4, &udp(53, &query[..12])));
    padded.resize(60, 0);
    let mut ihl4 = v4.clone();
    ihl4[IP] = 0x44;
    let mut v6_in_v4 = v4.clone();
    v6_in_v4[IP] = 0x65;
    // IHL 6 with NOP NOP NOP EOL.
    let mut opts = ipv4(IPPROTO_UDP, OUR_V4, &udp(53, &query));
    opts[0] = 0x46;
    opts.splice(20..20, [1, 1, 1, 0]);
    let opts = set16(ether(ETH_P_IP, &opts), IP4_TOT_LEN, 24 + 8 + 25);
    let tcp_syn = [
        0, 80, 0, 53, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 2, 0xff, 0xff, 0, 0, 0, 0,
    ];
    let arp = [0, 1, 8, 0, 6, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    // Hop-by-Hop (0) with a PadN option, and a Fragment header (44), each followed by UDP.
    let hop_by_hop = ether(ETH_P_IPV6, &ipv6(0, OUR_V6, &[17, 0, 1, 4, 0, 0, 0, 0]));
    let fragment6 = ether(ETH_P_IPV6, &ipv6(44, OUR_V6, &[17, 0, 0, 1, 0, 0, 0, 1]));

    #[rustfmt::skip]
    let cases = [
        // Ours.
        ("IPv4 DNS query", v4.clone(), Redirected),
        ("IPv6 DNS query", v6.clone(), Redirected),
        ("802.1Q IPv4", tagged(&v4, ETH_P_8021Q), Redirected),
        ("802.1ad IPv6", tagged(&v6, ETH_P_8021AD), Redirected),
        ("padded to 60 bytes", padded, Redirected),
        // UDP length below the IP payload is legal (the kernel trims the rest).
        ("UDP shorter than IP payload", set16(v4.clone(), UDP4 + 4, 8 + 12), Redirected),
        ("DF set", set16(v4.clone(), IP4_FRAG, 0x4000), Redirected),
        // Not ours: the kernel stack gets them.
        ("QinQ (two tags)", tagged(&tagged(&v4, ETH_P_8021Q), ETH_P_8021AD), PassNotIp),
        ("ARP", ether(ETH_P_ARP, &arp), PassNotIp),
        ("runt VLAN", ether(ETH_P_8021Q, &[]), PassNotIp),
        ("TCP/53 IPv4", ether(ETH_P_IP, &ipv4(IPPROTO_TCP, OUR_V4, &tcp_syn)), PassNotUdp),
        ("TCP/53 IPv6", ether(ETH_P_IPV6, &ipv6(IPPROTO_TCP, OUR_V6, &tcp_syn)), PassNotUdp),
        ("ICMPv6", ether(ETH_P_IPV6, &ipv6(IPPROTO_ICMPV6, OUR_V6, &[135, 0, 0, 0])), PassNotUdp),
        ("UDP other port", udp4(OUR_V4, 5353), PassOtherPort),
        ("UDP6 other port", udp6(OUR_V6, 123), PassOtherPort),
        ("other IPv4 dest", udp4(OTHER_V4, 53), PassOtherDest),
        ("other IPv6 dest", udp6(OTHER_V6, 53), PassOtherDest),
        // An Ethernet group destination (I/G bit) is never ours, even to our address
        // (RFC 1122 §3.3.6): broadcast, IPv4 and IPv6 multicast MACs, tagged or not.
        ("broadcast MAC, our IPv4", to_mac(v4.clone(), BROADCAST_MAC), PassOtherDest),
        ("IPv4 multicast MAC", to_mac(v4.clone(), [0x01, 0, 0x5e, 0, 0, 0xfb]), PassOtherDest),
        ("IPv6 multicast MAC", to_mac(v6.clone(), [0x33, 0x33, 0, 0, 0, 1]), PassOtherDest),
        ("group bit only", to_mac(v6.clone(), [0x03, 0, 0, 0, 0, 1]), PassOtherDest),
        ("802.1Q, broadcast MAC", tagged(&to_mac(v4.clone(), BROADCAST_MAC), ETH_P_8021Q), PassOtherDest),
        // Ours, but from a source no reply may go to (it would go to a group or unspecified
        // address): a group source MAC (IEEE 802), IPv4 0.0.0.0 / broadcast / multicast /
        // 240/4 (RFC 1122 §3.2.1.3), IPv6 :: / multicast (RFC 4291 §2.7). Passed to the kernel.
        ("group source MAC, IPv4", from_mac(v4.clone(), [0x03, 0, 0, 0, 0, 2]), PassBadSource),
        ("broadcast source MAC, IPv6", from_mac(v6.clone(), BROADCAST_MAC), PassBadSource),
        ("802.1Q, multicast source MAC", tagged(&from_mac(v4.clone(), [0x01, 0, 0x5e, 0, 0, 1]), ETH_P_8021Q), PassBadSource),
        ("source 0.0.0.0", from4(v4.clone(), Ipv4Addr::UNSPECIFIED), PassBadSource),
        ("source 255.255.255.255", from4(v4.clone(), Ipv4Addr::BROADCAST), PassBadSource),
        ("source 224.0.0.251", from4(v4.clone(), Ipv4Addr::new(224, 0, 0, 251)), PassBadSource),
        ("source 239.255.255.255", from4(v4.clone(), Ipv4Addr::new(239, 255, 255, 255)), PassBadSource),
        ("source 240.0.0.1", from4(v4.clone(), Ipv4Addr::new(240, 0, 0, 1)), PassBadSource),
        ("source ::", from6(v6.clone(), Ipv6Addr::UNSPECIFIED), PassBadSource),
        ("source ff02::1", from6(v6.clone(), Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)), PassBadSource),
        ("802.1ad, source ff05::1:3", tagged(&from6(v6.clone(), Ipv6Addr::new(0xff05, 0, 0, 0, 0, 0, 1, 3)), ETH_P_8021AD), PassBadSource),
        // Checked before the lengths: such a frame is the kernel's to judge.
        ("source 0.0.0.0, UDP length 2000", set16(from4(v4.clone(), Ipv4Addr::UNSPECIFIED), UDP4 + 4, 2000), PassBadSource),
        // Their unicast neighbours are ours.
        ("source 0.0.0.1", from4(v4.clone(), Ipv4Addr::new(0, 0, 0, 1)), Redirected),
        ("source 223.255.255.255", from4(v4.clone(), Ipv4Addr::new(223, 255, 255, 255)), Redirected),
        ("source ::1", from6(v6.clone(), Ipv6Addr::LOCALHOST), Redirected),
        ("source feff::1", from6(v6.clone(), Ipv6Addr::new(0xfeff, 0, 0, 0, 0, 0, 0, 1)), Redirected),
        ("source MAC 02:..", from_mac(v4.clone(), [0x02, 0xff, 0xff, 0xff, 0xff, 0xff]), Redirected),
        // The port and the destination are judged first.
        ("bad source, other port", from4(udp4(OUR_V4, 80), Ipv4Addr::UNSPECIFIED), PassOtherPort),
        ("bad source, other dest", from4(udp4(OTHER_V4, 53), Ipv4Addr::UNSPECIFIED), PassOtherDest),
        ("bad source, broadcast MAC", to_mac(from_mac(v4.clone(), BROADCAST_MAC), BROADCAST_MAC), PassOtherDest),
        // Other traffic to group MACs keeps its own counter.
        ("broadcast ARP", to_mac(ether(ETH_P_ARP, &arp), BROADCAST_MAC), PassNotIp),
        ("broadcast, other port", to_mac(udp4(OUR_V4, 67), BROADCAST_MAC), PassOtherPort),
        ("first fragment (MF)", set16(v4.clone(), IP4_FRAG, 0x2000), PassFragment),
        ("later fragment (offset)", set16(v4.clone(), IP4_FRAG, 0x0010), PassFragment),
        ("IPv4 options", opts, PassIpOptions),
        ("IPv6 hop-by-hop", hop_by_hop, PassIpv6Ext),
        ("IPv6 fragment header", fragment6, PassIpv6Ext),
        // A truncated frame to another port is the kernel's business.
        ("truncated, other port", other_port[..UDP4 + 8 + 4].to_vec(), PassOtherPort),
        // Broken: dropped and counted.
        ("IHL 4", ihl4, DropMalformed),
        ("version 6 in IPv4", v6_in_v4, DropMalformed),
        ("UDP length 4", set16(v4.clone(), UDP4 + 4, 4), DropMalformed),
        ("UDP length 2000", set16(v4.clone(), UDP4 + 4, 2000), DropMalformed),
        ("UDP6 length 4", set16(v6.clone(), UDP6 + 4, 4), DropMalformed),
        ("UDP6 length 2000", set16(v6.clone(), UDP6 + 4, 2000), DropMalformed),
        ("IPv4 total length beyond frame", set16(v4.clone(), IP4_TOT_LEN, 1500), DropMalformed),
        ("IPv4 total length < IP + UDP", set16(v4.clone(), IP4_TOT_LEN, 20), DropMalformed),
        ("IPv6 payload length beyond frame", set16(v6.clone(), IP + 4, 1500), DropMalformed),
        ("truncated in IPv4 header", v4[..IP + 10].to_vec(), DropMalformed),
        ("truncated in UDP header", v4[..UDP4 + 4].to_vec(), DropMalformed),
        ("truncated in payload", v4[..UDP4 + 8 + 4].to_vec(), DropMalformed),
        ("truncated in IPv6 header", v6[..IP + 20].to_vec(), DropMalformed),
        ("truncated in UDP6 header", v6[..UDP6 + 6].to_vec(), DropMalformed),
        ("truncated in UDP6 payload", v6[..UDP6 + 8 + 4].to_vec(), DropMalformed),
    ];
    // No socket in the XSKMAP: bpf_redirect_map() returns its fallback action, XDP_PASS.
    check_all(&p, &cases, XDP_PASS);

    let s = p.stats().expect("stats");
    let outcomes: u64 = Stat::ALL[1..].iter().map(|st| s[st.index()]).sum();
    assert_eq!(s[Seen.index()], outcomes, "seen == sum of outcomes");
    assert_eq!(s[Seen.index()], cases.len() as u64);
}

#[test]
fn config_flags_and_port() {
    use Stat::*;
    if !root() {
        return;
    }
    let mut p = program();
    let arp = ether(ETH_P_ARP, &[0; 28]);
    let set = |p: &mut XdpProgram, cfg| p.set_config(cfg).expect("config");

    set(&mut p, XdpConfig::disabled());
    check_all(
        &p,
        &[
            ("disabled", udp4(OUR_V4, 53), PassDisabled),
            ("disabled ARP", arp, PassDisabled),
        ],
        XDP_PASS,
    );
    // 0x0002 and 0x0004 were the "any destination" flags, retired: they change nothing.
    set(&mut p, XdpConfig::enabled(53).with_flags(0x0006));
    check_all(
        &p,
        &[
            ("retired ANY bits, IPv4", udp4(OTHER_V4, 53), PassOtherDest),
            ("retired ANY bits, IPv6", udp6(OTHER_V6, 53), PassOtherDest),
            ("retired ANY bits, ours", udp4(OUR_V4, 53), Redirected),
        ],
        XDP_PASS,
    );
    set(&mut p, XdpConfig::enabled(5353));
    check_all(
        &p,
        &[
            ("port 5353", udp4(OUR_V4, 5353), Redirected),
            ("53 when serving 5353", udp4(OUR_V4, 53), PassOtherPort),
        ],
        XDP_PASS,
    );

    set(&mut p, XdpConfig::enabled(53));
    p.remove_dest(IpAddr::V4(OUR_V4)).expect("remove");
    p.remove_dest(IpAddr::V4(OUR_V4)).expect("remove twice");
    check(
        &p,
        "removed dest",
        &udp4(OUR_V4, 53),
        PassOtherDest,
        XDP_PASS,
    );
    // IPv4-mapped IPv6 is stored as IPv4.
    p.add_dest(IpAddr::V6(OUR_V4.to_ipv6_mapped()))
        .expect("mapped");
    check(&p, "mapped dest", &udp4(OUR_V4, 53), Redirected, XDP_PASS);
}

#[test]
fn redirect_with_a_socket_in_the_xskmap() {
    use Stat::*;
    if !root() {
        return;
    }
    let mut p = program();
    let xsk = Xsk::new().expect("AF_XDP sockets must be available on this kernel");
    assert!(matches!(
        p.set_socket(MAX_QUEUES, xsk.fd.as_fd()),
        Err(XdpError::QueueOutOfRange { .. })
    ));
    p.set_socket(0, xsk.fd.as_fd()).expect("XSKMAP insert");
    let cases = [
        ("IPv4 with socket", udp4(OUR_V4, 53), Redirected),
        ("IPv6 with socket", udp6(OUR_V6, 53), Redirected),
        ("ARP with socket", ether(ETH_P_ARP, &[0; 28]), PassNotIp),
        (
            "malformed with socket",
            udp4(OUR_V4, 53)[..UDP4 + 4].to_vec(),
            DropMalformed,
        ),
        (
            "bad source with socket",
            from4(udp4(OUR_V4, 53), Ipv4Addr::UNSPECIFIED),
            PassBadSource,
        ),
    ];
    check_all(&p, &cases, XDP_REDIRECT);
    p.clear_socket(0).expect("XSKMAP delete");
    p.clear_socket(0).expect("XSKMAP delete twice");
    check(&p, "after clear", &udp4(OUR_V4, 53), Redirected, XDP_PASS);
    // Closing the socket empties its slot too.
    p.set_socket(0, xsk.fd.as_fd()).expect("XSKMAP insert");
    check(
        &p,
        "socket back",
        &udp4(OUR_V4, 53),
        Redirected,
        XDP_REDIRECT,
    );
    drop(xsk);
    check(&p, "socket closed", &udp4(OUR_V4, 53), Redirected, XDP_PASS);
}

/// An AF_XDP socket with a UMEM and an RX ring, as skuad makes them, but unbound: test runs
/// never deliver anything.
struct Xsk {
    fd: OwnedFd,
    umem: *mut libc::c_void,
    len: usize,
}

impl Xsk {
    fn new() -> Option<Self> {
        const LEN: usize = 16 * 4096;
        // SAFETY: plain syscall; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: anonymous private mapping, no address hint; the result is checked.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return None;
        }
        let xsk = Self { fd, umem, len: LEN };
        let reg = libc::xdp_umem_reg {
            addr: umem as u64,
            len: LEN as u64,
            chunk_size: 4096,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let entries: libc::c_int = 64;
        (xsk.setopt(libc::XDP_UMEM_REG, &reg) && xsk.setopt(libc::XDP_RX_RING, &entries))
            .then_some(xsk)
    }

    fn setopt<T>(&self, name: libc::c_int, value: &T) -> bool {
        let len = libc::socklen_t::try_from(size_of::<T>()).expect("small");
        // SAFETY: `value` is a live `T` of `len` bytes; the kernel only reads it.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                name,
                std::ptr::from_ref(value).cast(),
                len,
            )
        };
        rc == 0
    }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // SAFETY: `umem`/`len` are the mapping made in `new`; the socket that pinned it is
        // closed after this (field drop order), and nothing else refers to it.
        unsafe { libc::munmap(self.umem, self.len) };
    }
}

// --- attachment tests ---------------------------------------------------------------------------

/// A network namespace holding veth pair `sx0` (198.18.7.1/24) / `sx1` (no address), both
/// up; deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "skxdp-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Self { name };
        ns.ip(&["link", "add", "sx0", "type", "veth", "peer", "name", "sx1"]);
        ns.ip(&["addr", "add", "198.18.7.1/24", "dev", "sx0"]);
        ns.ip(&["link", "set", "sx0", "up"]);
        ns.ip(&["link", "set", "sx1", "up"]);
        ns
    }

    fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// `ip -d link show sx0`.
    fn link(&self) -> String {
        self.ip(&["-d", "link", "show", "dev", "sx0"])
    }

    /// Runs `f` on a thread that has entered the namespace (netns membership is per thread,
    /// and dies with it).
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = File::open(&path).expect("open netns");
                // SAFETY: `ns` is an open namespace file for the whole call; setns only
                // changes this (scoped) thread's network namespace.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .expect("netns thread panicked")
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
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

/// The XDP flavour `ip -d link` prints after the MTU, or "" if none.
fn xdp_flag(link: &str) -> &'static str {
    if link.contains(" xdpgeneric ") {
        "xdpgeneric"
    } else if link.contains(" xdp ") {
        "xdp"
    } else {
        ""
    }
}

#[test]
fn attach_native_generic_and_detach_on_veth() {
    if !root() {
        return;
    }
    let ns = Netns::new();
    ns.run(|| {
        let mut p = XdpProgram::load().expect("load");
        let id = p.program_id().expect("id");
        assert_eq!(current_program("sx0").expect("query"), None);

        assert_eq!(
            p.attach("sx0", AttachMode::Native).expect("native"),
            AttachedMode::Native
        );
        let link = ns.link();
        assert_eq!(xdp_flag(&link), "xdp", "{link}");
        assert!(
            link.contains(&format!("prog/xdp id {id} name {PROGRAM_NAME}")),
            "{link}"
        );
        assert_eq!(
            current_program("sx0").expect("query"),
            Some((id, PROGRAM_NAME.to_owned()))
        );
        assert!(matches!(
            p.attach("sx0", AttachMode::Native),
            Err(XdpError::AlreadyAttached { .. })
        ));
        p.detach().expect("detach");
        p.detach().expect("detach twice");
        let link = ns.link();
        assert_eq!(xdp_flag(&link), "", "{link}");
        assert!(!link.contains("prog/xdp"), "{link}");
        assert_eq!(current_program("sx0").expect("query"), None);

        assert_eq!(
            p.attach("sx0", AttachMode::Generic).expect("generic"),
            AttachedMode::Generic
        );
        assert_eq!(xdp_flag(&ns.link()), "xdpgeneric");
        assert_eq!(p.attached_mode(), Some(AttachedMode::Generic));
        drop(p); // detaches
        assert_eq!(xdp_flag(&ns.link()), "");

        let mut p = XdpProgram::load().expect("load");
        assert_eq!(
            p.attach("sx0", AttachMode::Auto).expect("auto"),
            AttachedMode::Native
        );
        p.detach().expect("detach");

        // The namespace's loopback has no native XDP: Native fails, Auto falls back.
        let err = p
            .attach("lo", AttachMode::Native)
            .expect_err("lo has no native XDP");
        assert!(
            matches!(
                err,
                XdpError::Attach {
                    mode: AttachedMode::Native,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(
            p.attach("lo", AttachMode::Auto).expect("auto"),
            AttachedMode::Generic
        );
        assert_eq!(
            xdp_flag(&ns.ip(&["-d", "link", "show", "dev", "lo"])),
            "xdpgeneric"
        );
        p.detach().expect("detach");

        assert!(matches!(
            p.attach("nosuchif0", AttachMode::Auto),
            Err(XdpError::UnknownInterface(_))
        ));
        assert!(!ns.link().contains("prog/xdp"));
    });
}

#[test]
fn second_instance_and_foreign_programs_are_refused() {
    if !root() {
        return;
    }
    let ns = Netns::new();
    ns.run(|| {
        // Another live skuad: its program is held by a bpf_link.
        let mut first = XdpProgram::load().expect("load");
        first.attach("sx0", AttachMode::Generic).expect("attach");
        let mut second = XdpProgram::load().expect("load");
        let err = second
            .attach("sx0", AttachMode::Auto)
            .expect_err("must refuse");
        assert!(matches!(err, XdpError::HeldByLink { .. }), "{err}");
        assert!(matches!(
            detach_stale("sx0"),
            Err(XdpError::HeldByLink { .. })
        ));
        assert_eq!(xdp_flag(&ns.link()), "xdpgeneric", "first stays");
        drop(first);

        // Someone else's program, attached through its own link.
        let foreign = load_dummy_xdp("foreign_xdp");
        let ifindex = ifindex("sx0");
        let link = xdp_link_create(foreign.as_fd(), ifindex);
        let err = second
            .attach("sx0", AttachMode::Auto)
            .expect_err("must refuse");
        match &err {
            XdpError::ForeignProgram { name, .. } => assert_eq!(name, "foreign_xdp"),
            other => panic!("wrong error: {other}"),
        }
        assert!(err.to_string().contains("refusing to replace"), "{err}");
        assert!(
            !detach_stale("sx0").expect("detach_stale"),
            "leaves foreign alone"
        );
        let (_, name) = current_program("sx0").expect("query").expect("still there");
        assert_eq!(name, "foreign_xdp");
        drop(link);
        drop(foreign);
        assert_eq!(current_program("sx0").expect("query"), None);
        assert_eq!(
            second.attach("sx0", AttachMode::Auto).expect("attach"),
            AttachedMode::Native
        );
    });
}

#[test]
fn stale_netlink_program_is_removed() {
    if !root() {
        return;
    }
    // What a killed loader that used netlink (an older kernel, or `ip link`) leaves behind:
    // the program stays attached with nobody holding it.
    let obj = std::env::temp_dir().join(format!("skua_xdp-{}.bpf.o", std::process::id()));
    std::fs::write(&obj, skua_xdp::bpf::OBJECT).expect("write object");
    let obj_path = obj.to_str().expect("utf-8 temp path").to_owned();
    let ns = Netns::new();
    let leave_stale = || {
        ns.ip(&[
            "link",
            "set",
            "dev",
            "sx0",
            "xdpgeneric",
            "obj",
            &obj_path,
            "sec",
            "xdp",
        ]);
    };
    leave_stale();
    ns.run(|| {
        let (stale_id, name) = current_program("sx0").expect("query").expect("attached");
        assert_eq!(name, PROGRAM_NAME);
        assert!(detach_stale("sx0").expect("detach_stale"));
        assert_eq!(current_program("sx0").expect("query"), None);
        assert!(!detach_stale("sx0").expect("nothing left"));

        leave_stale();
        let mut p = XdpProgram::load().expect("load");
        assert_eq!(
            p.attach("sx0", AttachMode::Auto).expect("replaces"),
            AttachedMode::Native
        );
        let (id, _) = current_program("sx0").expect("query").expect("attached");
        assert_ne!(id, stale_id);
        assert_eq!(id, p.program_id().expect("id"));
    });
    let _ = std::fs::remove_file(&obj);
}

#[test]
fn query_without_socket_reaches_the_kernel_stack() {
    if !root() {
        return;
    }
    let ns = Netns::new();
    let mac = ns
        .link()
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .map(|m| {
            let b: Vec<u8> = m
                .split(':')
                .map(|x| u8::from_str_radix(x, 16).expect("hex"))
                .collect();
            <[u8; 6]>::try_from(b).expect("6 bytes")
        })
        .expect("sx0 MAC");
    ns.run(|| {
        let server = Ipv4Addr::new(198, 18, 7, 1);
        let sock = std::net::UdpSocket::bind((server, 53)).expect("bind 198.18.7.1:53");
        sock.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let mut p = program();
        p.add_dest(IpAddr::V4(server)).expect("dest");
        assert_eq!(
            p.attach("sx0", AttachMode::Native).expect("attach"),
            AttachedMode::Native
        );

        // To sx0's MAC, from an on-link address that is not local (the stack drops
        // "martian" frames whose source is one of its own addresses).
        let mut ip = ipv4(IPPROTO_UDP, server, &udp(53, &dns_query()));
        ip[12..16].copy_from_slice(&[198, 18, 7, 2]);
        ip[10..12].fill(0);
        let c = checksum(&ip[..20]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let mut frame = ether(ETH_P_IP, &ip);
        frame[..6].copy_from_slice(&mac);

        // A real frame, sent by the peer: it works on every kernel, including those that
        // refuse live-frame test runs (EPERM), and proves the same thing.
        let before = p.stats().expect("stats");
        send_raw("sx1", &frame);
        let mut buf = [0u8; 512];
        // No socket on queue 0: the redirect's fallback hands it to the stack.
        let (n, from) = sock
            .recv_from(&mut buf)
            .expect("query from the peer reached the UDP socket");
        assert_eq!(&buf[..n], &dns_query()[..]);
        assert_eq!(from, "198.18.7.2:40000".parse().expect("addr"));
        let after = p.stats().expect("stats");
        let moved = |s: Stat| after[s.index()] - before[s.index()];
        // The stack may send its own frames on the link (IPv6 router solicitations and
        // the like), which the program sees and passes: exactly one was ours.
        assert!(moved(Stat::Seen) >= 1, "{before:?} -> {after:?}");
        assert_eq!(moved(Stat::Redirected), 1);

        // The same with a live frame injected through the program, where the kernel
        // takes live frames (some refuse them: EPERM); the frame is ours either way.
        let before = p.stats().expect("stats");
        match p.inject(&frame, ifindex("sx0"), 0) {
            Ok(()) => {
                let after = p.stats().expect("stats");
                assert_eq!(
                    after[Stat::Redirected.index()] - before[Stat::Redirected.index()],
                    1
                );
                let (n, _) = sock
                    .recv_from(&mut buf)
                    .expect("injected query reached the UDP socket");
                assert_eq!(&buf[..n], &dns_query()[..]);
            }
            Err(e) => eprintln!("live frames refused here ({e}): the peer's frame proved it"),
        }
        let err = p
            .inject(&frame, ifindex("sx0"), 64)
            .expect_err("no queue 64");
        assert!(matches!(err, XdpError::TestRun(_)), "{err}");
    });
}

/// Sends `frame` (Ethernet header included) out of `ifname` from a packet socket: on a
/// veth, it arrives on the peer as a frame from the wire would.
fn send_raw(ifname: &str, frame: &[u8]) {
    // SAFETY: socket(2) takes plain integers; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    assert!(
        fd >= 0,
        "AF_PACKET socket: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `fd` is a descriptor we just opened and own alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    to.sll_family = libc::AF_PACKET as u16;
    to.sll_ifindex = i32::try_from(ifindex(ifname)).expect("ifindex fits");
    to.sll_halen = 6;
    to.sll_addr[..6].copy_from_slice(&frame[..6]);
    let len = libc::socklen_t::try_from(size_of::<libc::sockaddr_ll>()).expect("small");
    // SAFETY: `frame` is valid for its length, `to` is a live sockaddr_ll of `len` bytes.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            0,
            std::ptr::from_ref(&to).cast(),
            len,
        )
    };
    assert_eq!(
        usize::try_from(n).ok(),
        Some(frame.len()),
        "sendto on {ifname}: {}",
        std::io::Error::last_os_error()
    );
}

/// Child side of `killed_instance_leaves_nothing`: attaches and waits to be killed.
#[test]
#[ignore = "helper, run by killed_instance_leaves_nothing"]
fn xdp_child_attach_and_wait() {
    let Ok(ifname) = std::env::var("SKUA_XDP_CHILD_IFNAME") else {
        return;
    };
    let mut p = XdpProgram::load().expect("child load");
    p.attach(&ifname, AttachMode::Generic)
        .expect("child attach");
    println!("ATTACHED {}", p.program_id().expect("id"));
    std::thread::sleep(Duration::from_secs(30));
}

#[test]
fn killed_instance_leaves_nothing() {
    if !root() {
        return;
    }
    let ns = Netns::new();
    ns.run(|| {
        // The child inherits this thread's namespace.
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "xdp_child_attach_and_wait",
                "--ignored",
                "--nocapture",
            ])
            .env("SKUA_XDP_CHILD_IFNAME", "sx0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(id) = line.strip_prefix("ATTACHED ") {
                    let _ = tx.send(id.trim().parse::<u32>().expect("id"));
                    return;
                }
            }
        });
        let child_id = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(id) => id,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("child did not attach: {e}");
            }
        };
        assert_eq!(
            current_program("sx0").expect("query"),
            Some((child_id, PROGRAM_NAME.to_owned()))
        );
        // Alive: its link is not ours to break.
        assert!(matches!(
            detach_stale("sx0"),
            Err(XdpError::HeldByLink { .. })
        ));

        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        // The kernel releases the link when the dead process's fds are closed.
        let deadline = Instant::now() + Duration::from_secs(5);
        while current_program("sx0").expect("query").is_some() {
            assert!(
                Instant::now() < deadline,
                "program outlived its killed owner"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!ns.link().contains("prog/xdp"));
        assert!(!detach_stale("sx0").expect("detach_stale"));
    });
}

// --- raw bpf(2) for a program that is not ours ------------------------------------------------

fn bpf(cmd: libc::c_int, attr: &mut [u8; 128]) -> libc::c_long {
    // SAFETY: `attr` is a live, zero-initialised 128-byte bpf_attr; the kernel reads and
    // writes at most that many bytes.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) }
}

fn fd_from(rc: libc::c_long, what: &str) -> OwnedFd {
    let raw = i32::try_from(rc).unwrap_or(-1);
    assert!(raw >= 0, "{what}: {}", std::io::Error::last_os_error());
    // SAFETY: the kernel just returned this descriptor to us and nobody else owns it.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

/// `r0 = XDP_PASS; exit`, named `name`, via BPF_PROG_LOAD.
fn load_dummy_xdp(name: &str) -> OwnedFd {
    const BPF_PROG_LOAD: libc::c_int = 5;
    const BPF_PROG_TYPE_XDP: u32 = 6;
    const BPF_XDP: u32 = 37;
    let insns: [u64; 2] = [
        u64::from_le_bytes([0xb7, 0, 0, 0, 2, 0, 0, 0]), // mov r0, 2
        u64::from_le_bytes([0x95, 0, 0, 0, 0, 0, 0, 0]), // exit
    ];
    let license = c"GPL";
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&BPF_PROG_TYPE_XDP.to_ne_bytes());
    attr[4..8].copy_from_slice(&2u32.to_ne_bytes());
    attr[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    attr[48..48 + name.len()].copy_from_slice(name.as_bytes());
    attr[68..72].copy_from_slice(&BPF_XDP.to_ne_bytes());
    fd_from(bpf(BPF_PROG_LOAD, &mut attr), "BPF_PROG_LOAD")
}

/// BPF_LINK_CREATE for XDP in generic mode; the link lives as long as the fd.
fn xdp_link_create(prog: BorrowedFd<'_>, ifindex: u32) -> OwnedFd {
    const BPF_LINK_CREATE: libc::c_int = 28;
    const BPF_XDP: u32 = 37;
    const XDP_FLAGS_SKB_MODE: u32 = 2;
    let prog_fd = u32::try_from(prog.as_raw_fd()).expect("fd");
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&prog_fd.to_ne_bytes());
    attr[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    attr[8..12].copy_from_slice(&BPF_XDP.to_ne_bytes());
    attr[12..16].copy_from_slice(&XDP_FLAGS_SKB_MODE.to_ne_bytes());
    fd_from(bpf(BPF_LINK_CREATE, &mut attr), "BPF_LINK_CREATE")
}

fn ifindex(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).expect("name");
    // SAFETY: `c` is a valid C string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert_ne!(i, 0, "no interface {name}");
    i
}

/// CLOCK_MONOTONIC in nanoseconds: `bpf_ktime_get_ns()`'s clock (no time namespace here).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the one we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn a_service_address_is_ours_only_while_its_lease_runs() {
    if !root() {
        return;
    }
    let mut p = program();
    let vip4 = Ipv4Addr::new(198, 18, 0, 54);
    let vip6 = Ipv6Addr::new(0xfd00, 0x5c, 0, 0, 0, 0, 0, 0x54);
    let (q4, q6) = (udp4(vip4, 53), udp6(vip6, 53));
    // Not in the map: another host's address.
    check(&p, "no entry", &q4, Stat::PassOtherDest, XDP_PASS);
    for (ip, q) in [(IpAddr::V4(vip4), &q4), (IpAddr::V6(vip6), &q6)] {
        let running = Dest {
            lease_until_ns: monotonic_ns() + 10_000_000_000,
        };
        p.set_dest(ip, running).expect("lease");
        check(&p, "lease running", q, Stat::Redirected, XDP_PASS);
        let over = Dest {
            lease_until_ns: monotonic_ns() - 1,
        };
        p.set_dest(ip, over).expect("lease over");
        check(&p, "lease over", q, Stat::PassNoLease, XDP_PASS);
        // Renewed in place: ours again.
        p.set_dest(ip, running).expect("renewed");
        check(&p, "lease renewed", q, Stat::Redirected, XDP_PASS);
    }
    // An ordinary address (lease 0) is always ours.
    check(
        &p,
        "ordinary",
        &udp4(OUR_V4, 53),
        Stat::Redirected,
        XDP_PASS,
    );
}
