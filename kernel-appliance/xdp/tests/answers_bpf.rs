//! Differential test of the XDP program's own answers (`SKUA_F_ANSWER`) against the engine.
//!
//! The answer map is compiled from an engine ([`skua_xdp::answers::compile`]) and loaded into
//! the real program; then thousands of crafted frames (IPv4/IPv6, VLAN tags, 0x20 case, header
//! flags, EDNS shapes, clients under every ACL action, good, zero, partial and broken
//! checksums, Ethernet padding, unknown names, destinations and sources that are not unicast)
//! run through `BPF_PROG_TEST_RUN`. Every frame
//! the program answers (`XDP_TX`) must be byte for byte the frame `skua-fastpath` builds with
//! the engine; every frame it does not answer must leave the program unchanged.
//!
//! Cached answers (`SKUA_F_CACHE`) likewise: a forwarder fills a resolver cache from an
//! authoritative engine (CNAME chains across zones, NXDOMAIN, NODATA, several records and
//! expiries), the answers the daemon would push are compiled
//! ([`skua_xdp::cached::compile`]) and loaded, and random frames run at several ages of each
//! answer (the program's clock set by the test) against `handle_frame_with` on that cache at
//! the same second: TTLs byte for byte, nothing answered from the answer's end on.
//!
//! Needs root (CI runs as root); fails, never skips, without it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use skua_engine::acl::{AclAction, Netblock};
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::text::parse_rr;
use skua_engine::{Engine, EngineBuilder};
use skua_fastpath::{Drop, Verdict, build_udp_frame, handle_frame};
use skua_xdp::abi::{F_ANSWER, F_TX_REDIRECT, Stat, XdpConfig};
use skua_xdp::answers::{compile, query};
use skua_xdp::bpf::{XDP_REDIRECT, XDP_TX, XdpProgram};

fn root() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the XDP program tests need root; they do not skip");
}

fn engine() -> Engine {
    let mut b = EngineBuilder::new();
    for (nb, a) in [
        ("198.18.0.0/15", AclAction::Allow),
        ("198.18.9.0/24", AclAction::Refuse),
        ("198.18.10.0/24", AclAction::DenyNonLocal),
        ("198.18.11.0/24", AclAction::AllowSetRd),
        ("198.18.12.0/24", AclAction::Deny),
        ("fd00::/8", AclAction::AllowSnoop),
        ("fd00:9::/32", AclAction::Refuse),
    ] {
        b.acl_mut().insert(nb.parse::<Netblock>().unwrap(), a);
    }
    b.local_zone(
        WireName::parse("example.", None).unwrap(),
        LocalZoneType::Static,
    );
    b.local_zone(
        WireName::parse("gone.example.", None).unwrap(),
        LocalZoneType::AlwaysNxdomain,
    );
    let mut lines = vec![
        "example. 3600 IN SOA ns.example. host.example. 1 3600 600 86400 300".to_string(),
        "example. 3600 IN NS ns.example.".into(),
        "ns.example. 3600 IN A 198.18.0.53".into(),
        "www.example. 300 IN A 198.18.0.1".into(),
        "www.example. 300 IN A 198.18.0.2".into(),
        "www.example. 300 IN AAAA fd00::1".into(),
        "mail.example. 300 IN MX 10 www.example.".into(),
        "alias.example. 300 IN CNAME www.example.".into(),
        "txt.example. 300 IN TXT \"v=spf1 -all\"".into(),
        "UPPER.Example. 300 IN A 198.18.0.3".into(),
        "a.very.deep.name.with.many.labels.example. 300 IN A 198.18.0.4".into(),
        "gone.example. 300 IN A 198.18.0.5".into(),
    ];
    for i in 0..40 {
        lines.push(format!("h{i}.example. 60 IN A 198.18.1.{i}"));
    }
    for l in &lines {
        b.local_data(parse_rr(l, None, 3600).unwrap(), 0);
    }
    b.build().unwrap()
}

/// xorshift64*: deterministic cases without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const SERVER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 53);
const SERVER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x5c, 0, 0, 0, 0, 0, 0x53);

/// Our address of `src`'s family.
fn server_for(src: IpAddr) -> IpAddr {
    match src {
        IpAddr::V4(_) => IpAddr::V4(SERVER4),
        IpAddr::V6(_) => IpAddr::V6(SERVER6),
    }
}

/// An untagged frame from `src`:5353 to us with valid checksums.
fn plain_frame(src: IpAddr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 512];
    let len = build_udp_frame(
        &mut buf,
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        None,
        SocketAddr::new(src, 5353),
        SocketAddr::new(server_for(src), 53),
        payload,
    )
    .unwrap();
    buf.truncate(len);
    buf
}

fn client(rng: &mut Rng, v6: bool) -> IpAddr {
    if v6 {
        let net = [0xfd00u16, 0xfd00, 0xfd00, 0xfd00, 0xfd00, 0xfc00][rng.below(6) as usize];
        let second = if rng.chance(20) { 9 } else { 0x5c };
        IpAddr::V6(Ipv6Addr::new(
            net,
            second,
            0,
            0,
            0,
            0,
            0,
            rng.below(65535) as u16 + 1,
        ))
    } else {
        // Mostly allowed; some refused, deny_non_local, allow_setrd, deny, unmatched.
        let third = [0u8, 0, 0, 1, 2, 9, 10, 11, 12][rng.below(9) as usize];
        let first = if rng.chance(5) { 203 } else { 198 };
        IpAddr::V4(Ipv4Addr::new(first, 18, third, rng.below(254) as u8 + 1))
    }
}

fn random_case(rng: &mut Rng, name: &[u8]) -> Vec<u8> {
    name.iter()
        .map(|b| {
            if rng.chance(50) {
                b.to_ascii_uppercase()
            } else {
                *b
            }
        })
        .collect()
}

/// One random DNS message for `name`/`qtype`, mostly well-formed, sometimes not.
fn random_query(rng: &mut Rng, name: &[u8], qtype: u16) -> Vec<u8> {
    let name = random_case(rng, name);
    let mut flags = 0u16;
    for bit in [0x0100u16, 0x0010, 0x0020, 0x0400] {
        if rng.chance(40) {
            flags |= bit;
        }
    }
    if rng.chance(3) {
        flags |= 0x0200; // TC
    }
    if rng.chance(3) {
        flags |= 0x2000; // opcode 4
    }
    let cookie = [0u8, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
    let two = [0u8, 10, 0, 0, 0, 12, 0, 0];
    let edns: Option<(u16, bool, &[u8])> = match rng.below(6) {
        0 | 1 => None,
        2 => Some((1232, rng.chance(50), &[])),
        3 => Some((rng.below(5000) as u16, rng.chance(50), &cookie)),
        4 => Some((4096, true, &two)),
        _ => Some((512, false, &[0, 10, 0, 9])), // option overruns RDLEN: FORMERR
    };
    let mut q = query(rng.next() as u16, flags, &name, qtype, edns);
    if rng.chance(3) {
        let n = q.len();
        q[n - 1 - if edns.is_some() { 11 } else { 0 }] = 3; // class CH (or garbage)
    }
    if edns.is_some() && rng.chance(5) {
        let at = 12 + name.len() + 4 + 6;
        q[at] = 1; // EDNS version 1: BADVERS
    }
    if rng.chance(5) {
        q.extend_from_slice(&[0xde, 0xad]); // trailing bytes, ignored
    }
    q
}

/// Where a random frame is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    /// Our unicast address, in a frame to our MAC: may be answered in the program.
    Ours,
    /// Our address, but in a frame to an Ethernet group address (broadcast, multicast):
    /// never answered (RFC 1122 §3.3.6).
    GroupMac,
    /// An address that is not in the program's maps: a broadcast, multicast or another
    /// host's address (with a matching group MAC or our MAC). Never answered.
    NotOurs,
}

/// A random Ethernet group address: the I/G bit (bit 0 of the first octet) set.
fn group_mac(rng: &mut Rng) -> [u8; 6] {
    match rng.below(4) {
        0 => [0xff; 6],
        1 => [0x01, 0x00, 0x5e, 0, 0, 0xfb],
        2 => [0x33, 0x33, 0, 0, 0, 1],
        _ => {
            let r = rng.next().to_be_bytes();
            [r[0] | 1, r[1], r[2], r[3], r[4], r[5]]
        }
    }
}

/// A destination that is not ours, of `src`'s family, and the MAC it would be sent to.
fn not_ours(rng: &mut Rng, src: IpAddr) -> (IpAddr, [u8; 6]) {
    let ours = [0x02, 0, 0, 0, 0, 0x53];
    match src {
        IpAddr::V4(_) => match rng.below(5) {
            0 => (Ipv4Addr::BROADCAST.into(), [0xff; 6]),
            1 => (Ipv4Addr::new(198, 18, 0, 255).into(), [0xff; 6]),
            2 => (Ipv4Addr::new(198, 18, 0, 255).into(), ours),
            3 => (
                Ipv4Addr::new(224, 0, 0, 251).into(),
                [0x01, 0x00, 0x5e, 0, 0, 0xfb],
            ),
            _ => (Ipv4Addr::new(198, 18, 0, 99).into(), ours),
        },
        IpAddr::V6(_) => match rng.below(3) {
            0 => (
                Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xfb).into(),
                [0x33, 0x33, 0, 0, 0, 0xfb],
            ),
            1 => (Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1).into(), ours),
            _ => (
                Ipv6Addr::new(0xfd00, 0x5c, 0, 0, 0, 0, 0, 0x99).into(),
                ours,
            ),
        },
    }
}

/// A source no reply may go to (the reply would go to a group or unspecified address), in
/// place of `src`: a group source MAC (IEEE 802) with `src`, or a source address of `src`'s
/// family that is unspecified, broadcast or multicast (RFC 1122 §3.2.1.3, RFC 4291 §2.7).
fn bad_source(rng: &mut Rng, src: IpAddr) -> ([u8; 6], IpAddr) {
    let mac = [0x02, 0, 0, 0, 0, 0x0c];
    if rng.chance(30) {
        return (group_mac(rng), src);
    }
    let ip = match src {
        IpAddr::V4(_) => match rng.below(4) {
            0 => Ipv4Addr::UNSPECIFIED,
            1 => Ipv4Addr::BROADCAST,
            // Multicast 224/4, then the rest of 240/4.
            2 => Ipv4Addr::from(0xe000_0000 | (rng.next() as u32 & 0x0fff_ffff)),
            _ => Ipv4Addr::from(0xf000_0000 | (rng.next() as u32 & 0x0fff_ffff)),
        }
        .into(),
        IpAddr::V6(_) => match rng.below(3) {
            0 => Ipv6Addr::UNSPECIFIED,
            1 => Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
            _ => Ipv6Addr::from((0xffu128 << 120) | (u128::from(rng.next()) << 8)),
        }
        .into(),
    };
    (mac, ip)
}

/// A random frame and what the program must do with it.
struct Case {
    bytes: Vec<u8>,
    dest: Dest,
    /// From a source no reply may go to ([`bad_source`]).
    bad_source: bool,
    /// The IPv4 header or UDP checksum was broken on purpose.
    broken_checksum: bool,
}

/// Frame around `payload`, mostly to us, sometimes to a group MAC or an address that is not
/// ours, sometimes from a source that cannot be answered; then perhaps a VLAN tag, Ethernet
/// padding, a zero, partial or broken UDP checksum.
fn frame(rng: &mut Rng, src: IpAddr, payload: &[u8]) -> Case {
    let bad = rng.chance(4);
    let (src_mac, src) = if bad {
        bad_source(rng, src)
    } else {
        ([0x02, 0, 0, 0, 0, 0x0c], src)
    };
    let (kind, dst, dst_mac) = match rng.below(100) {
        0..=4 => (Dest::GroupMac, server_for(src), group_mac(rng)),
        5..=9 => {
            let (ip, mac) = not_ours(rng, src);
            (Dest::NotOurs, ip, mac)
        }
        _ => (Dest::Ours, server_for(src), [0x02, 0, 0, 0, 0, 0x53]),
    };
    let vlan = rng.chance(20).then_some(7);
    let mut buf = vec![0u8; 2048];
    let len = build_udp_frame(
        &mut buf,
        src_mac,
        dst_mac,
        vlan,
        SocketAddr::new(src, 1024 + rng.below(60000) as u16),
        SocketAddr::new(dst, 53),
        payload,
    )
    .unwrap();
    buf.truncate(len);
    let l3 = if vlan.is_some() { 18 } else { 14 };
    let uo = l3 + if src.is_ipv4() { 20 } else { 40 };
    let mut broken_checksum = false;
    match rng.below(20) {
        0 if src.is_ipv4() => {
            buf[uo + 6] = 0;
            buf[uo + 7] = 0;
        }
        1 => {
            // CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum.
            let mut sum: u64 = 17 + (len - uo) as u64;
            let (s, e) = if src.is_ipv4() {
                (l3 + 12, l3 + 20)
            } else {
                (l3 + 8, l3 + 40)
            };
            for w in buf[s..e].chunks(2) {
                sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            buf[uo + 6..uo + 8].copy_from_slice(&(sum as u16).to_be_bytes());
        }
        2 => {
            buf[uo + 7] ^= 0x40;
            broken_checksum = true;
        }
        3 if src.is_ipv4() => {
            buf[l3 + 11] ^= 1; // IPv4 header checksum
            broken_checksum = true;
        }
        _ => {}
    }
    if buf.len() < 60 || rng.chance(10) {
        // Ethernet minimum frame, or padding after the IP datagram.
        let pad = 60usize.saturating_sub(buf.len()).max(rng.below(8) as usize);
        buf.extend(std::iter::repeat_n(0u8, pad));
    }
    Case {
        bytes: buf,
        dest: kind,
        bad_source: bad,
        broken_checksum,
    }
}

fn program(engine: &Engine) -> XdpProgram {
    let mut p = XdpProgram::load().expect("load");
    let c = compile(engine, 100_000);
    assert!(c.answers.len() > 40, "compiled {} answers", c.answers.len());
    assert_eq!(c.skipped.not_reproducible, 0);
    p.set_acl(&c.acl).unwrap();
    p.set_answers(&c.answers).unwrap();
    assert_eq!(p.answer_count().unwrap(), c.answers.len());
    p.add_dest(IpAddr::V4(SERVER4)).unwrap();
    p.add_dest(IpAddr::V6(SERVER6)).unwrap();
    p.set_config(XdpConfig::enabled(53).with_flags(F_ANSWER))
        .unwrap();
    p
}

#[test]
fn program_answers_are_the_engines_byte_for_byte() {
    root();
    let engine = engine();
    let p = program(&engine);
    let mut keys: Vec<(Vec<u8>, u16)> =
        engine.answer_keys().map(|(n, t)| (n.to_vec(), t)).collect();
    // Names and types with no entry: NXDOMAIN below a name, other types, long names.
    keys.push((
        WireName::parse("nope.example.", None)
            .unwrap()
            .as_bytes()
            .to_vec(),
        1,
    ));
    keys.push((
        WireName::parse("www.example.", None)
            .unwrap()
            .as_bytes()
            .to_vec(),
        99,
    ));
    keys.push((
        WireName::parse(&format!("{}.example.", "x".repeat(60)), None)
            .unwrap()
            .as_bytes()
            .to_vec(),
        1,
    ));
    let mut rng = Rng(0x5eed_5c0a_0000_0001);
    let (mut tx, mut other, mut not_ours, mut bad_sources) = (0usize, 0usize, 0u64, 0u64);
    let before = p.stats().unwrap();
    let mut scratch = vec![0u8; 4096];
    for i in 0..6000 {
        let (name, qtype) = &keys[rng.below(keys.len() as u64) as usize];
        let v6 = rng.chance(30);
        let src = client(&mut rng, v6);
        let q = random_query(&mut rng, name, *qtype);
        let Case {
            bytes: f,
            dest,
            bad_source,
            broken_checksum,
        } = frame(&mut rng, src, &q);
        let (action, out) = p.test_run_output(&f).unwrap();
        let mut reference = vec![0u8; 2048];
        reference[..f.len()].copy_from_slice(&f);
        let verdict = handle_frame(&engine, 0, &mut reference, f.len(), &mut scratch);
        if dest != Dest::Ours {
            not_ours += 1;
            // Passed to the kernel untouched (an empty XSKMAP slot would also give
            // XDP_PASS, but pass_other_dest is checked below).
            assert_eq!(
                (action, &out),
                (skua_xdp::bpf::XDP_PASS, &f),
                "case {i}: {dest:?} frame not passed untouched\nframe {f:02x?}"
            );
        }
        if bad_source {
            // Never answered nor redirected, whatever else is wrong with the frame: passed
            // to the kernel untouched (counted as pass_bad_source when it is to us: the
            // destination is judged first). skua-fastpath drops it as NotUnicastSource, or
            // earlier for a broken checksum or a destination that is not unicast.
            if dest == Dest::Ours {
                bad_sources += 1;
            }
            assert_eq!(
                (action, &out),
                (skua_xdp::bpf::XDP_PASS, &f),
                "case {i}: frame from a bad source not passed untouched\nframe {f:02x?}"
            );
            let want = if broken_checksum {
                matches!(
                    verdict,
                    Verdict::Drop(Drop::BadUdpChecksum | Drop::BadIpChecksum)
                )
            } else if dest == Dest::Ours {
                verdict == Verdict::Drop(Drop::NotUnicastSource)
            } else {
                matches!(
                    verdict,
                    Verdict::Drop(Drop::NotUnicast | Drop::NotUnicastSource)
                )
            };
            assert!(
                want,
                "case {i}: fast path on a bad source: {verdict:?}\nframe {f:02x?}"
            );
        }
        // skua-fastpath never answers a group MAC either (it drops the frame as NotUnicast,
        // or earlier for a broken checksum).
        if f[0] & 1 != 0 {
            assert!(
                matches!(verdict, Verdict::Drop(_)),
                "case {i}: fast path on a group MAC: {verdict:?}\nframe {f:02x?}"
            );
        }
        if action == XDP_TX {
            tx += 1;
            let Verdict::Reply { len, .. } = verdict else {
                panic!("case {i}: program answered, engine says {verdict:?}\nframe {f:02x?}");
            };
            assert_eq!(
                out,
                &reference[..len],
                "case {i}: program reply differs from the engine's\nquery frame {f:02x?}"
            );
        } else {
            other += 1;
            assert_eq!(
                out, f,
                "case {i}: frame modified without XDP_TX (action {action})"
            );
        }
    }
    let after = p.stats().unwrap();
    let answered = after[Stat::Answered.index()] - before[Stat::Answered.index()];
    assert_eq!(answered as usize, tx);
    let other_dest = after[Stat::PassOtherDest.index()] - before[Stat::PassOtherDest.index()];
    assert_eq!(other_dest, not_ours, "pass_other_dest = frames not to us");
    let passed_bad = after[Stat::PassBadSource.index()] - before[Stat::PassBadSource.index()];
    assert_eq!(
        passed_bad, bad_sources,
        "pass_bad_source = frames to us from a bad source"
    );
    let seen = after[Stat::Seen.index()] - before[Stat::Seen.index()];
    assert_eq!(seen, 6000);
    eprintln!(
        "{tx} answered in the program, {other} left to the engine ({not_ours} of them not to \
         one of our unicast addresses, {bad_sources} to us from a source that cannot be \
         answered)"
    );
    assert!(not_ours > 300, "only {not_ours} frames not to us");
    assert!(
        bad_sources > 120,
        "only {bad_sources} frames from a bad source"
    );
    // The random mix is mostly answerable: a program that never answers fails here.
    // About 30 % of the mix is answerable by design (see random_query, client, frame).
    assert!(tx > 1200, "only {tx} of 6000 answered in the program");
    assert!(other > 1000, "only {other} of 6000 left to the engine");
}

#[test]
fn program_leaves_what_it_must_to_the_engine() {
    root();
    let engine = engine();
    let p = program(&engine);
    let www = WireName::parse("www.example.", None).unwrap();
    let ok = query(7, 0x0100, www.as_bytes(), 1, None);
    let send =
        |src: IpAddr, payload: &[u8]| p.test_run_output(&plain_frame(src, payload)).unwrap().0;
    let allowed = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
    assert_eq!(send(allowed, &ok), XDP_TX);
    assert_eq!(
        send(IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 2)), &ok),
        XDP_TX
    );
    // deny_non_local still gets local data.
    assert_eq!(send(IpAddr::V4(Ipv4Addr::new(198, 18, 10, 2)), &ok), XDP_TX);
    for (what, src) in [
        ("refuse", IpAddr::V4(Ipv4Addr::new(198, 18, 9, 2))),
        ("allow_setrd", IpAddr::V4(Ipv4Addr::new(198, 18, 11, 2))),
        ("deny", IpAddr::V4(Ipv4Addr::new(198, 18, 12, 2))),
        ("no rule", IpAddr::V4(Ipv4Addr::new(203, 0, 113, 2))),
        (
            "refuse v6",
            IpAddr::V6(Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 2)),
        ),
    ] {
        assert_ne!(send(src, &ok), XDP_TX, "{what}");
    }
    let mut group = plain_frame(allowed, &ok);
    group[..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(
        p.test_run_output(&group).unwrap(),
        (skua_xdp::bpf::XDP_PASS, group.clone()),
        "broadcast MAC"
    );
    // A query from a source no reply may go to is never answered (the fuzz target's find:
    // a reply to 0.0.0.0), nor one from a group source MAC.
    let before = p.stats().unwrap()[Stat::PassBadSource.index()];
    for (what, f) in [
        (
            "source 0.0.0.0",
            plain_frame(IpAddr::V4(Ipv4Addr::UNSPECIFIED), &ok),
        ),
        (
            "source ::",
            plain_frame(IpAddr::V6(Ipv6Addr::UNSPECIFIED), &ok),
        ),
        ("group source MAC", {
            let mut f = plain_frame(allowed, &ok);
            f[6] |= 1;
            f
        }),
    ] {
        assert_eq!(
            p.test_run_output(&f).unwrap(),
            (skua_xdp::bpf::XDP_PASS, f.clone()),
            "{what}"
        );
    }
    assert_eq!(p.stats().unwrap()[Stat::PassBadSource.index()] - before, 3);
    let mut tc = ok.clone();
    tc[2] |= 0x02;
    assert_ne!(send(allowed, &tc), XDP_TX, "TC set");
    let unknown = query(
        7,
        0,
        WireName::parse("nope.example.", None).unwrap().as_bytes(),
        1,
        None,
    );
    assert_ne!(send(allowed, &unknown), XDP_TX, "no entry");
    // With SKUA_F_TX_REDIRECT (veth) the same reply leaves by redirect.
    let mut p2 = p;
    let f = plain_frame(allowed, &ok);
    let (act_tx, out_tx) = p2.test_run_output(&f).unwrap();
    p2.set_config(XdpConfig::enabled(53).with_flags(F_ANSWER | F_TX_REDIRECT))
        .unwrap();
    let (act_redir, out_redir) = p2.test_run_output(&f).unwrap();
    assert_eq!((act_tx, act_redir), (XDP_TX, XDP_REDIRECT));
    assert_eq!(out_tx, out_redir);
    // Switching the flag off sends everything to the engine.
    p2.set_config(XdpConfig::enabled(53)).unwrap();
    let (act_off, out_off) = p2.test_run_output(&f).unwrap();
    // No socket in the XSKMAP: the redirect falls back to XDP_PASS.
    assert_eq!(act_off, skua_xdp::bpf::XDP_PASS, "flag off");
    assert_eq!(out_off, f, "flag off: frame untouched");
    // Replacing the answers drops stale ones.
    p2.set_answers(&[]).unwrap();
    assert_eq!(p2.answer_count().unwrap(), 0);
}

// --- cached answers (SKUA_F_CACHE) ------------------------------------------------------------

type TestCache = skua_resolver::cache::Cache<
    std::cell::RefCell<skua_resolver::cache::MsgShard>,
    std::cell::RefCell<skua_resolver::cache::SetShard>,
>;
type Fwd = skua_resolver::forward::Forwarder<
    (),
    std::cell::RefCell<skua_resolver::cache::MsgShard>,
    std::cell::RefCell<skua_resolver::cache::SetShard>,
>;

/// The answers the resolver caches: an authoritative engine for `cache.org.` and
/// `other.net.` answers the forwarder's queries.
fn upstream() -> Engine {
    let mut b = EngineBuilder::new();
    for z in ["cache.org.", "other.net."] {
        b.local_zone(WireName::parse(z, None).unwrap(), LocalZoneType::Static);
    }
    let mut lines = vec![
        "cache.org. 3600 IN SOA ns.cache.org. host.cache.org. 1 3600 600 86400 120".to_string(),
        "other.net. 3600 IN SOA ns.other.net. host.other.net. 1 3600 600 86400 90".into(),
        "a1.cache.org. 300 IN A 198.18.7.1".into(),
        "a2.cache.org. 300 IN A 198.18.7.2".into(),
        "a2.cache.org. 300 IN A 198.18.7.3".into(),
        "v6.cache.org. 300 IN AAAA fd00::7".into(),
        "mx.cache.org. 300 IN MX 10 a1.cache.org.".into(),
        "mx.cache.org. 300 IN MX 20 a2.cache.org.".into(),
        "alias.cache.org. 3600 IN CNAME t.other.net.".into(),
        "t.other.net. 60 IN A 198.18.7.4".into(),
        "c1.cache.org. 900 IN CNAME c2.cache.org.".into(),
        "c2.cache.org. 500 IN CNAME c3.other.net.".into(),
        "c3.other.net. 200 IN A 198.18.7.5".into(),
        "one.cache.org. 1 IN A 198.18.7.6".into(),
        "Mixed.Cache.Org. 300 IN A 198.18.7.7".into(),
        "www.example. 300 IN A 198.18.7.8".into(),
        format!(
            "long.cache.org. 300 IN TXT \"{}\" \"{}\"",
            "t".repeat(250),
            "u".repeat(250)
        ),
    ];
    for i in 0..8 {
        lines.push(format!("a8.cache.org. 600 IN A 198.18.8.{i}"));
    }
    for i in 0..17 {
        lines.push(format!("m17.cache.org. 300 IN A 198.18.9.{i}"));
    }
    for l in &lines {
        b.local_data(parse_rr(l, None, 3600).unwrap(), 0);
    }
    b.build().unwrap()
}

struct Seq(u32);
impl skua_resolver::forward::Entropy for Seq {
    fn u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12345);
        self.0
    }
}

/// Resolves (name, qtype) at second `now` through a forwarder whose upstream is `up`
/// (CNAME chains take several upstream queries), so that the cache holds its answer.
fn resolve(f: &mut Fwd, up: &Engine, name: &[u8], qtype: u16, now: u32) {
    use skua_resolver::forward::{Event, Question};
    let upstream: SocketAddr = "198.18.0.99:53".parse().unwrap();
    let mut rng = Seq(7);
    let now_ms = u64::from(now) * 1000;
    let q = Question {
        name: name.to_vec(),
        qtype,
        qclass: 1,
    };
    f.resolve(q, None, now_ms, &mut rng);
    let mut out = vec![0u8; 65535];
    for _ in 0..20 {
        match f.poll_event() {
            Some(Event::Transmit(t)) => {
                let req = skua_engine::Request {
                    src: "127.0.0.1".parse().unwrap(),
                    transport: skua_engine::Transport::Udp,
                    now,
                };
                let skua_engine::Outcome::Reply { len, .. } =
                    up.handle_query(&req, &t.bytes, &mut out)
                else {
                    panic!("upstream did not answer")
                };
                f.reply(t.token, upstream, &out[..len], now_ms + 1, &mut rng);
            }
            Some(Event::Cancel(_)) => {}
            Some(Event::Answer(_)) | None => return,
        }
    }
    panic!("resolution of {name:02x?} did not end");
}

/// CLOCK_MONOTONIC in nanoseconds: `bpf_ktime_get_ns()`'s clock.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the one we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sets the program's clock so that it reads second `now` for the next half second. The
/// origin is taken modulo 2^64 (the ABI's rule), so `now` may be later than the machine's
/// uptime: on a machine started minutes ago the origin lies "before boot", wrapped.
fn set_clock(p: &mut XdpProgram, cfg: XdpConfig, now: u32) -> XdpConfig {
    let cfg = XdpConfig {
        clock_origin_ns: mono_ns()
            .wrapping_sub(u64::from(now) * 1_000_000_000)
            .wrapping_sub(500_000_000),
        ..cfg
    };
    p.set_config(cfg).unwrap();
    cfg
}

#[test]
fn cached_answers_are_the_engines_at_every_age() {
    use skua_resolver::cache::{CacheConfig, Key};
    use skua_resolver::forward::{ForwardConfig, Upstream, ZoneConfig, ZoneKind};
    use skua_xdp::abi::F_CACHE;
    use skua_xdp::answers::key as cached_key;
    use skua_xdp::cached::{Clients, Skip, compile as compile_cached};
    root();
    let engine = {
        // The engine of the other tests, resolving (names outside local data go to the
        // cache, then to the resolver).
        let mut b = EngineBuilder::new();
        b.config_mut().resolve = true;
        let e = self::engine();
        for (addr, prefix, action) in e.acl().rules() {
            let ip = match std::net::Ipv6Addr::from(addr).to_ipv4_mapped() {
                Some(v4) if prefix >= 96 => Netblock::new(IpAddr::V4(v4), prefix - 96),
                _ => Netblock::new(IpAddr::V6(addr.into()), prefix),
            };
            b.acl_mut().insert(ip.unwrap(), action);
        }
        b.local_zone(
            WireName::parse("example.", None).unwrap(),
            LocalZoneType::Static,
        );
        b.local_data(
            parse_rr("www.example. 300 IN A 198.18.0.1", None, 3600).unwrap(),
            0,
        );
        b.build().unwrap()
    };
    let up = upstream();
    let t0 = 1000u32;
    let mut ages_seen = 0;
    for prefetch in [false, true] {
        // The forwarder takes an Arc; this test runs on one thread.
        #[allow(clippy::arc_with_non_send_sync)]
        let cache = std::sync::Arc::new(TestCache::new(CacheConfig {
            prefetch,
            ..CacheConfig::default()
        }));
        let mut f = Fwd::new(
            ForwardConfig {
                zones: vec![ZoneConfig {
                    name: vec![0],
                    kind: ZoneKind::Forward,
                    upstreams: vec![Upstream {
                        addr: "198.18.0.99:53".parse().unwrap(),
                        tls_name: None,
                    }],
                    no_cache: false,
                    first: false,
                    tls: false,
                    tcp: false,
                    id: 1,
                }],
                ..ForwardConfig::default()
            },
            cache.clone(),
        );
        let wire = |n: &str| WireName::parse(n, None).unwrap().as_bytes().to_vec();
        let names: Vec<(Vec<u8>, u16)> = [
            ("a1.cache.org.", 1),
            ("a2.cache.org.", 1),
            ("a8.cache.org.", 1),
            ("v6.cache.org.", 28),
            ("mx.cache.org.", 15),
            ("alias.cache.org.", 1),
            ("c1.cache.org.", 1),
            ("mixed.cache.org.", 1),
            ("nx.cache.org.", 1),
            ("a1.cache.org.", 16),
            ("one.cache.org.", 1),
            ("m17.cache.org.", 1),
            ("long.cache.org.", 16),
            ("www.example.", 1),
        ]
        .iter()
        .map(|(n, t)| (wire(n), *t))
        .collect();
        for (n, t) in &names {
            resolve(&mut f, &up, n, *t, t0);
        }
        // Compile and push what may be pushed.
        let clients = Clients::of(&engine);
        let mut p = program(&engine);
        let mut cfg = XdpConfig::enabled(53).with_flags(F_ANSWER | F_CACHE);
        let mut pushed = Vec::new();
        let mut skipped = Vec::new();
        for (slot, (n, t)) in names.iter().enumerate() {
            let k = Key::new(n, *t, 1);
            let r = cache
                .peek(&k, t0, |r, until| {
                    compile_cached(&engine, &clients, n, *t, &r.as_cached(None), until, t0)
                        .map(|v| (v, until, r.expires))
                })
                .unwrap_or_else(|| panic!("{} {t} not in the cache", String::from_utf8_lossy(n)));
            match r {
                Ok((v, until, expires)) => {
                    p.set_cache_slot(slot as u32, &v).unwrap();
                    p.set_cache_ref(&cached_key(n, *t).unwrap(), slot as u32)
                        .unwrap();
                    pushed.push((n.clone(), *t, until, expires));
                }
                Err(e) => skipped.push((String::from_utf8_lossy(n).into_owned(), *t, e)),
            }
        }
        let skip_of = |n: &str, t: u16| {
            skipped
                .iter()
                .find(|(s, st, _)| *st == t && s.contains(n))
                .map(|x| x.2)
        };
        assert_eq!(skip_of("m17", 1), Some(Skip::TooLong), "{skipped:?}");
        assert_eq!(skip_of("long", 16), Some(Skip::TooLong), "{skipped:?}");
        assert_eq!(skip_of("one", 1), Some(Skip::Expiring), "{skipped:?}");
        assert_eq!(
            skip_of("www", 1),
            Some(Skip::NotReproducible),
            "{skipped:?}"
        );
        assert_eq!(pushed.len(), 10, "pushed {pushed:?}, skipped {skipped:?}");
        // Every age: at the start, a second in, half way, the last second, the end, after.
        let mut scratch = vec![0u8; 4096];
        let mut rng = Rng(0x5eed_cace_0000_0001 + u64::from(prefetch));
        let mut cached_tx_total = 0u64;
        let mut no_rd_tx = 0;
        let before = p.stats().unwrap();
        for (name, qtype, until, expires) in pushed.clone() {
            let span = until - t0;
            for age in [0, 1, span / 2, span - 1, span, span + 5, expires - t0] {
                let now = t0 + age;
                cfg = set_clock(&mut p, cfg, now);
                let mut tx_here = 0;
                for i in 0..60 {
                    let v6 = rng.chance(30);
                    let src = client(&mut rng, v6);
                    let q = random_query(&mut rng, &name, qtype);
                    let case = frame(&mut rng, src, &q);
                    let f = case.bytes;
                    let (action, out) = p.test_run_output(&f).unwrap();
                    let mut reference = vec![0u8; 2048];
                    reference[..f.len()].copy_from_slice(&f);
                    let door = skua_serve::Door {
                        engine: &engine,
                        cache: Some(cache.as_ref()),
                        zones: &skua_serve::NoZones,
                    };
                    let verdict = skua_fastpath::handle_frame_with(
                        &door,
                        now,
                        0,
                        &mut reference,
                        f.len(),
                        &mut scratch,
                        &mut |_, _| {},
                    );
                    if action == XDP_TX {
                        tx_here += 1;
                        assert!(now < until, "answered at {now}, valid until {until}");
                        if q[2] & 1 == 0 {
                            no_rd_tx += 1;
                        }
                        let Verdict::Reply { len, .. } = verdict else {
                            panic!("age {age} case {i}: program answered, engine says {verdict:?}");
                        };
                        assert_eq!(
                            out,
                            &reference[..len],
                            "age {age} case {i}: cached reply differs from the engine's\nframe {f:02x?}"
                        );
                    } else {
                        assert_eq!(
                            out, f,
                            "age {age} case {i}: frame modified (action {action})"
                        );
                    }
                }
                if age < span {
                    assert!(
                        tx_here > 0,
                        "{name:02x?}/{qtype} at age {age}: nothing answered"
                    );
                } else {
                    assert_eq!(
                        tx_here, 0,
                        "{name:02x?}/{qtype} at age {age} (valid until {until})"
                    );
                }
                cached_tx_total += tx_here;
                ages_seen += 1;
            }
        }
        let after = p.stats().unwrap();
        assert_eq!(
            after[Stat::AnsweredCached.index()] - before[Stat::AnsweredCached.index()],
            cached_tx_total
        );
        assert_eq!(
            after[Stat::Answered.index()],
            before[Stat::Answered.index()]
        );
        // allow_snoop clients (fd00::/8) get cached answers without RD.
        assert!(no_rd_tx > 0, "no cached answer to a query without RD");
        // Targeted: what must go to the engine.
        let (a1, until) = (&pushed[0].0, pushed[0].2);
        cfg = set_clock(&mut p, cfg, t0 + 1);
        let send = |p: &XdpProgram, src: &str, flags: u16| {
            let q = query(9, flags, a1, 1, None);
            p.test_run_output(&plain_frame(src.parse().unwrap(), &q))
                .unwrap()
                .0
        };
        assert_eq!(send(&p, "198.18.0.2", 0x0100), XDP_TX, "allow, RD");
        // An origin after the kernel's clock (skuad never sets one) wraps to a second
        // beyond 32 bits: nothing is answered from the cache then.
        p.set_config(XdpConfig {
            clock_origin_ns: mono_ns() + 10_000_000_000,
            ..cfg
        })
        .unwrap();
        assert_ne!(send(&p, "198.18.0.2", 0x0100), XDP_TX, "origin ahead");
        p.set_config(cfg).unwrap();
        assert_ne!(
            send(&p, "198.18.0.2", 0),
            XDP_TX,
            "allow without RD: snooping"
        );
        assert_eq!(send(&p, "fd00::2", 0), XDP_TX, "allow_snoop without RD");
        for (what, src) in [
            ("deny_non_local", "198.18.10.2"),
            ("allow_setrd", "198.18.11.2"),
            ("refuse", "198.18.9.2"),
        ] {
            assert_ne!(send(&p, src, 0x0100), XDP_TX, "{what}");
        }
        // F_CACHE off: no cached answers, local ones still.
        p.set_config(XdpConfig {
            flags: cfg.flags & !F_CACHE,
            ..cfg
        })
        .unwrap();
        assert_ne!(send(&p, "198.18.0.2", 0x0100), XDP_TX, "F_CACHE off");
        let www = query(7, 0x0100, &wire("www.example."), 1, None);
        assert_eq!(
            p.test_run_output(&plain_frame("198.18.0.2".parse().unwrap(), &www))
                .unwrap()
                .0,
            XDP_TX,
            "local data with F_CACHE off"
        );
        p.set_config(cfg).unwrap();
        // A slot holding another key's recipe is a miss (the echo check).
        let a1_key = cached_key(a1, 1).unwrap();
        p.set_cache_ref(&a1_key, 1).unwrap();
        assert_ne!(
            send(&p, "198.18.0.2", 0x0100),
            XDP_TX,
            "slot of another key"
        );
        p.set_cache_ref(&a1_key, 0).unwrap();
        assert_eq!(send(&p, "198.18.0.2", 0x0100), XDP_TX, "back");
        // A removed reference (flush) is a miss at once.
        p.remove_cache_ref(&a1_key).unwrap();
        assert_ne!(send(&p, "198.18.0.2", 0x0100), XDP_TX, "flushed");
        assert!(until > t0 + 1);
        // Local answers are replaced on reload without touching cached ones.
        p.set_answers(&[]).unwrap();
        assert_eq!(p.cache_refs().unwrap().len(), pushed.len() - 1);
    }
    assert!(ages_seen >= 100);
}
