//! Frame-level tests: every verdict on crafted frames, reply frames checked field by field.

extern crate std;

use std::vec;
use std::vec::Vec;

use super::*;
use skua_engine::testing::fuzz_engine;
use skua_engine::{Outcome, Request};

const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SERVER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

fn dns_query(name: &[u8], qtype: u16) -> Vec<u8> {
    let mut q = vec![0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(name);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&[0, 1]);
    q
}

const A_STATIC: &[u8] = b"\x01a\x06static\x07example\x00";

fn frame(src: &str, dst: &str, vlan: Option<u16>, payload: &[u8]) -> (Vec<u8>, usize) {
    let mut buf = vec![0u8; 4096];
    let len = build_udp_frame(
        &mut buf,
        CLIENT_MAC,
        SERVER_MAC,
        vlan,
        src.parse().unwrap(),
        dst.parse().unwrap(),
        payload,
    )
    .unwrap();
    (buf, len)
}

fn run(buf: &mut [u8], len: usize) -> Verdict {
    let e = engine();
    let mut scratch = vec![0u8; 4096];
    handle_frame(e, 0, buf, len, &mut scratch)
}

fn engine() -> &'static Engine {
    static E: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    E.get_or_init(fuzz_engine)
}

/// Checks a reply frame: addresses swapped, checksums valid (by re-parsing it), payload =
/// what the engine answers directly.
fn check_reply(buf: &[u8], len: usize, query_frame: &[u8], query: &[u8]) {
    let u = parse(&buf[..len]).unwrap_or_else(|e| panic!("reply does not verify: {e:?}"));
    assert_eq!(&buf[0..6], &query_frame[6..12], "dst MAC = query's src MAC");
    assert_eq!(&buf[6..12], &query_frame[0..6]);
    let (c, s) = endpoints(buf, &u);
    let qu = parse(query_frame).unwrap();
    let (qc, qs) = endpoints(query_frame, &qu);
    assert_eq!((c, s), (qs, qc), "endpoints swapped");
    let mut direct = vec![0u8; 4096];
    let Outcome::Reply { len: dl, .. } = engine().handle_query(
        &Request {
            src: qc.ip(),
            transport: Transport::Udp,
            now: 0,
        },
        query,
        &mut direct,
    ) else {
        panic!("engine dropped")
    };
    let off = u.udp_off + UDP_HLEN;
    assert_eq!(&buf[off..len], &direct[..dl], "payload = engine's answer");
}

#[test]
fn ipv4_query_answered_in_place() {
    let q = dns_query(A_STATIC, 1);
    let (mut buf, len) = frame("127.0.0.1:40000", "127.0.0.2:53", None, &q);
    let orig = buf[..len].to_vec();
    let Verdict::Reply { len: rl, info, .. } = run(&mut buf, len) else {
        panic!()
    };
    assert!(info.unwrap().hot);
    check_reply(&buf, rl, &orig, &q);
    assert_eq!(buf[12..14], [0x08, 0x00]);
}

#[test]
fn ipv6_and_vlan_queries_answered() {
    let q = dns_query(A_STATIC, 28);
    let (mut buf, len) = frame("[::1]:40000", "[::1]:53", None, &q);
    let orig = buf[..len].to_vec();
    let Verdict::Reply { len: rl, .. } = run(&mut buf, len) else {
        panic!()
    };
    check_reply(&buf, rl, &orig, &q);
    let (mut buf, len) = frame("127.0.0.1:40000", "127.0.0.2:53", Some(42), &q);
    let orig = buf[..len].to_vec();
    let Verdict::Reply { len: rl, .. } = run(&mut buf, len) else {
        panic!()
    };
    check_reply(&buf, rl, &orig, &q);
    assert_eq!(&buf[12..16], &[0x81, 0x00, 0x00, 42], "VLAN tag kept");
}

#[test]
fn corrupted_frames_are_dropped_with_a_reason() {
    let q = dns_query(A_STATIC, 1);
    let (good, len) = frame("127.0.0.1:40000", "127.0.0.2:53", None, &q);
    let case = |f: &dyn Fn(&mut Vec<u8>) -> usize| {
        let mut b = good.clone();
        let l = f(&mut b);
        run(&mut b, l)
    };
    assert_eq!(
        case(&|b| {
            b[14 + 8] ^= 1;
            len
        }),
        Verdict::Drop(Drop::BadIpChecksum)
    );
    assert_eq!(
        case(&|b| {
            b[len - 1] ^= 0x40;
            len
        }),
        Verdict::Drop(Drop::BadUdpChecksum)
    );
    // UDP length 4 (< 8) and 2000 (> IP payload); IP checksum stays right (UDP header).
    assert_eq!(
        case(&|b| {
            b[38..40].copy_from_slice(&4u16.to_be_bytes());
            len
        }),
        Verdict::Drop(Drop::BadUdpLength)
    );
    assert_eq!(
        case(&|b| {
            b[38..40].copy_from_slice(&2000u16.to_be_bytes());
            len
        }),
        Verdict::Drop(Drop::BadUdpLength)
    );
    assert_eq!(
        case(&|b| {
            b[14] = 0x44;
            len
        }),
        Verdict::Drop(Drop::BadIpHeader)
    );
    assert_eq!(case(&|_| 30), Verdict::Drop(Drop::Truncated));
    assert_eq!(case(&|_| 10), Verdict::Drop(Drop::Truncated));
    // IPv4 total length beyond the frame.
    assert_eq!(
        case(&|b| {
            b[16..18].copy_from_slice(&3000u16.to_be_bytes());
            len
        }),
        Verdict::Drop(Drop::Truncated)
    );
    // IPv6 with a zero UDP checksum is invalid (RFC 8200 §8.1).
    let (mut b6, l6) = frame("[::1]:40000", "[::1]:53", None, &q);
    let uo = 14 + 40;
    b6[uo + 6] = 0;
    b6[uo + 7] = 0;
    assert_eq!(run(&mut b6, l6), Verdict::Drop(Drop::BadUdpChecksum));
    // Checksum left by TX offload on a local peer (CHECKSUM_PARTIAL): the folded
    // pseudo-header sum. Accepted, over IPv4 and IPv6.
    for (src, dst) in [
        ("127.0.0.1:40000", "127.0.0.2:53"),
        ("[::1]:40000", "[::1]:53"),
    ] {
        let (mut b, l) = frame(src, dst, None, &q);
        let u = parse(&b[..l]).unwrap();
        let udp_len = 8 + q.len();
        let partial = csum_fold(pseudo_sum(&b, &u, udp_len));
        b[u.udp_off + 6..u.udp_off + 8].copy_from_slice(&partial.to_be_bytes());
        assert!(matches!(run(&mut b, l), Verdict::Reply { .. }), "{src}");
    }
    // IPv4 with a zero UDP checksum is fine ("not computed").
    let mut b4 = good.clone();
    b4[40] = 0;
    b4[41] = 0;
    assert!(matches!(run(&mut b4, len), Verdict::Reply { .. }));
}

#[test]
fn not_for_us_goes_to_the_kernel() {
    let q = dns_query(A_STATIC, 1);
    let (good, len) = frame("127.0.0.1:40000", "127.0.0.2:53", None, &q);
    let kernel = |v: Verdict| matches!(v, Verdict::Kernel { query_len: 0, .. });
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert!(kernel(run(&mut arp, len)));
    let mut tcp = good.clone();
    tcp[14 + 9] = 6;
    assert!(kernel(run(&mut tcp, len)));
    let mut frag = good.clone();
    frag[14 + 6] = 0x20; // MF
    assert!(kernel(run(&mut frag, len)));
    let mut opts = good.clone();
    opts[14] = 0x46;
    assert!(kernel(run(&mut opts, len)));
}

#[test]
fn engine_drops_and_refusals() {
    // Denied client (198.19/16 in the test engine): dropped; refused client: REFUSED frame.
    let q = dns_query(A_STATIC, 1);
    let (mut b, l) = frame("198.19.0.5:4000", "198.18.0.1:53", None, &q);
    assert_eq!(run(&mut b, l), Verdict::Drop(Drop::Engine));
    let (mut b, l) = frame("198.18.0.5:4000", "198.18.0.1:53", None, &q);
    let Verdict::Reply { len, info, .. } = run(&mut b, l) else {
        panic!()
    };
    assert_eq!(info.unwrap().rcode, 5);
    assert_eq!(len, 14 + 20 + 8 + 12, "bare 12-byte REFUSED");
    assert!(parse(&b[..len]).is_ok());
}

#[test]
fn replies_larger_than_the_frame_go_to_the_kernel() {
    let mut q = dns_query(b"\x03big\x06static\x07example\x00", 1);
    q[11] = 1; // EDNS 4096
    q.extend_from_slice(&[0, 0, 0x29, 0x10, 0x00, 0, 0, 0, 0, 0, 0]);
    let (buf, len) = frame("127.0.0.1:40000", "127.0.0.2:53", None, &q);
    // A 1024-byte frame buffer cannot hold 120 A records.
    let mut small = buf[..1024].to_vec();
    let v = run(&mut small, len);
    assert!(
        matches!(v, Verdict::Kernel { query_len, .. } if query_len == q.len()),
        "{v:?}"
    );
    // Without EDNS the client's limit is 512: TC in the frame is the right answer.
    let q512 = dns_query(b"\x03big\x06static\x07example\x00", 1);
    let (buf, len) = frame("127.0.0.1:40000", "127.0.0.2:53", None, &q512);
    let mut small = buf[..1024].to_vec();
    let Verdict::Reply { info, .. } = run(&mut small, len) else {
        panic!()
    };
    assert!(info.unwrap().truncated);
}

#[test]
fn garbage_never_panics() {
    let q = dns_query(A_STATIC, 1);
    let (good, len) = frame("127.0.0.1:40000", "127.0.0.2:53", Some(7), &q);
    let mut seed = 0x1234_5678_9abc_def0u64;
    for _ in 0..20_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut b = good.clone();
        let n = (seed % 4) as usize + 1;
        for k in 0..n {
            let at = ((seed >> (8 * k)) as usize) % len;
            b[at] = (seed >> (3 * k)) as u8;
        }
        let l = ((seed >> 40) as usize) % (len + 8);
        let _ = run(&mut b, l);
    }
}

#[test]
fn rate_limited_replies_are_dropped_or_slipped_in_the_frame() {
    use skua_engine::rrl::{Rrl, RrlConfig};
    let mut e = fuzz_engine();
    e.set_rrl(Some(std::sync::Arc::new(Rrl::new(
        RrlConfig {
            responses_per_second: 1,
            slip: 2,
            ..RrlConfig::default()
        },
        1,
    ))));
    let mut scratch = vec![0u8; 4096];
    let mut q = dns_query(b"\x03big\x06static\x07example\x00", 1);
    q[11] = 1; // EDNS 4096: the whole answer does not fit a 1024-byte frame
    q.extend_from_slice(&[0, 0, 0x29, 0x10, 0x00, 0, 0, 0, 0, 0, 0]);
    let (buf, len) = frame("127.0.0.1:40000", "127.0.0.2:53", None, &q);
    let mut verdicts = Vec::new();
    for now in [10, 10, 10] {
        let mut small = buf[..1024].to_vec();
        let v = handle_frame(&e, now, &mut small, len, &mut scratch);
        verdicts.push((v, small));
    }
    // The first reply does not fit the frame: charged here, then answered (and charged
    // again) by the kernel path.
    assert!(
        matches!(verdicts[0].0, Verdict::Kernel { .. }),
        "{:?}",
        verdicts[0].0
    );
    // The slip goes out in the frame: TC, the question and the OPT only.
    let Verdict::Reply { len: rl, info, .. } = verdicts[1].0 else {
        panic!("{:?}", verdicts[1].0)
    };
    assert!(info.unwrap().slipped && info.unwrap().truncated);
    let frame_out = &verdicts[1].1;
    let u = parse(&frame_out[..rl]).unwrap();
    let dns = &frame_out[u.udp_off + UDP_HLEN..rl];
    assert_eq!(dns.len(), 12 + q.len() - 12);
    assert_eq!(&dns[4..12], &[0, 1, 0, 0, 0, 0, 0, 1]);
    assert_ne!(dns[2] & 0x02, 0, "TC");
    // Then a drop.
    assert_eq!(verdicts[2].0, Verdict::Drop(Drop::RateLimited));
    assert_eq!(Drop::ALL[Drop::RateLimited as usize], Drop::RateLimited);
}

#[test]
fn broadcast_and_multicast_are_never_answered() {
    let q = dns_query(A_STATIC, 1);
    let frame_to = |dst_mac: [u8; 6], src: &str, dst: &str| {
        let mut buf = vec![0u8; 4096];
        let len = build_udp_frame(
            &mut buf,
            CLIENT_MAC,
            dst_mac,
            None,
            src.parse().unwrap(),
            dst.parse().unwrap(),
            &q,
        )
        .unwrap();
        (buf, len)
    };
    let bcast = [0xff; 6];
    for (what, mac, src, dst) in [
        // RFC 1122 §3.3.6: unicast IP in a link-layer broadcast or multicast.
        ("broadcast MAC", bcast, "127.0.0.1:40000", "127.0.0.2:53"),
        (
            "IPv4 multicast MAC",
            [0x01, 0, 0x5e, 0, 0, 0xfb],
            "127.0.0.1:40000",
            "127.0.0.2:53",
        ),
        (
            "IPv6 multicast MAC",
            [0x33, 0x33, 0, 0, 0, 1],
            "[::1]:40000",
            "[::2]:53",
        ),
        // IP broadcast and multicast, even in a unicast frame.
        (
            "255.255.255.255",
            SERVER_MAC,
            "127.0.0.1:40000",
            "255.255.255.255:53",
        ),
        (
            "224.0.0.251",
            SERVER_MAC,
            "127.0.0.1:40000",
            "224.0.0.251:53",
        ),
        ("0.0.0.0", SERVER_MAC, "127.0.0.1:40000", "0.0.0.0:53"),
        ("ff02::fb", SERVER_MAC, "[::1]:40000", "[ff02::fb]:53"),
        ("ff05::1:3", SERVER_MAC, "[::1]:40000", "[ff05::1:3]:53"),
        ("::", SERVER_MAC, "[::1]:40000", "[::]:53"),
    ] {
        let (mut buf, len) = frame_to(mac, src, dst);
        let orig = buf[..len].to_vec();
        assert_eq!(
            run(&mut buf, len),
            Verdict::Drop(Drop::NotUnicast),
            "{what}"
        );
        assert_eq!(&buf[..len], &orig[..], "{what}: frame modified");
    }
    // The same queries to a unicast MAC and address are answered.
    let (mut buf, len) = frame_to(SERVER_MAC, "[::1]:40000", "[::2]:53");
    assert!(matches!(run(&mut buf, len), Verdict::Reply { .. }));
    for (i, d) in Drop::ALL.iter().enumerate() {
        assert_eq!(*d as usize, i, "{}", d.as_str());
    }
}

#[test]
fn queries_from_group_or_unspecified_sources_are_never_answered() {
    let q = dns_query(A_STATIC, 1);
    let frame_from = |src_mac: [u8; 6], vlan: Option<u16>, src: &str, dst: &str| {
        let mut buf = vec![0u8; 4096];
        let len = build_udp_frame(
            &mut buf,
            src_mac,
            SERVER_MAC,
            vlan,
            src.parse().unwrap(),
            dst.parse().unwrap(),
            &q,
        )
        .unwrap();
        (buf, len)
    };
    for (what, mac, vlan, src, dst) in [
        // IEEE 802: the I/G bit of a source MAC is never set; a reply would go to a group.
        (
            "broadcast source MAC",
            [0xff; 6],
            None,
            "127.0.0.1:40000",
            "127.0.0.2:53",
        ),
        (
            "IPv4 multicast source MAC",
            [0x01, 0, 0x5e, 0, 0, 0xfb],
            None,
            "127.0.0.1:40000",
            "127.0.0.2:53",
        ),
        (
            "IPv6 multicast source MAC",
            [0x33, 0x33, 0, 0, 0, 1],
            None,
            "[::1]:40000",
            "[::2]:53",
        ),
        (
            "group bit only, tagged",
            [0x03, 0, 0, 0, 0, 2],
            Some(7),
            "127.0.0.1:40000",
            "127.0.0.2:53",
        ),
        // RFC 1122 §3.2.1.3: never a broadcast or multicast IPv4 source; 0.0.0.0 only
        // while the host learns its address.
        ("0.0.0.0", CLIENT_MAC, None, "0.0.0.0:40000", "127.0.0.2:53"),
        (
            "255.255.255.255",
            CLIENT_MAC,
            None,
            "255.255.255.255:40000",
            "127.0.0.2:53",
        ),
        (
            "224.0.0.251",
            CLIENT_MAC,
            None,
            "224.0.0.251:5353",
            "127.0.0.2:53",
        ),
        (
            "239.255.255.250",
            CLIENT_MAC,
            Some(7),
            "239.255.255.250:1900",
            "127.0.0.2:53",
        ),
        (
            "240.0.0.1",
            CLIENT_MAC,
            None,
            "240.0.0.1:40000",
            "127.0.0.2:53",
        ),
        // RFC 4291 §2.7: never an IPv6 multicast source; `::` only before an address is
        // assigned (§2.5.2).
        ("::", CLIENT_MAC, None, "[::]:40000", "[::2]:53"),
        ("ff02::1", CLIENT_MAC, None, "[ff02::1]:40000", "[::2]:53"),
        (
            "ff05::1:3",
            CLIENT_MAC,
            Some(7),
            "[ff05::1:3]:547",
            "[::2]:53",
        ),
    ] {
        let (mut buf, len) = frame_from(mac, vlan, src, dst);
        let orig = buf[..len].to_vec();
        assert_eq!(
            run(&mut buf, len),
            Verdict::Drop(Drop::NotUnicastSource),
            "{what}"
        );
        assert_eq!(&buf[..len], &orig[..], "{what}: frame modified");
    }
    // A group destination is reported first when both ends are wrong.
    let (mut buf, len) = frame_from(CLIENT_MAC, None, "0.0.0.0:68", "255.255.255.255:53");
    assert_eq!(run(&mut buf, len), Verdict::Drop(Drop::NotUnicast));
    // The unicast neighbours of those ranges are answered.
    for src in [
        "223.255.255.254:40000",
        "0.0.0.1:40000",
        "[::1]:40000",
        "[fe80::1]:40000",
        "[feff::1]:40000",
    ] {
        let dst = if src.starts_with('[') {
            "[::2]:53"
        } else {
            "127.0.0.2:53"
        };
        let (mut buf, len) = frame_from(CLIENT_MAC, None, src, dst);
        let orig = buf.clone();
        let Verdict::Reply { len: rl, .. } = run(&mut buf, len) else {
            panic!("{src}: not answered");
        };
        check_reply(&buf, rl, &orig[..len], &q);
    }
    assert_eq!(
        Drop::ALL[Drop::NotUnicastSource as usize].as_str(),
        "not_unicast_source"
    );
}

/// The fuzz target's find (tests/fuzz/seeds/frame_zero_source_ip): an IPv4 query from
/// 0.0.0.0, unchecked UDP checksum, which was answered to 0.0.0.0.
#[test]
fn fuzz_find_query_from_0_0_0_0() {
    let mut buf = vec![0u8; 2048];
    let f: [u8; 77] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x3e, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x7c, 0xac, 0x00, 0x00, 0x00, 0x00,
        0x7f, 0x01, 0x7f, 0x02, 0x9c, 0x12, 0x02, 0x30, 0x00, 0x2a, 0x00, 0x00, 0x01, 0x60, 0x2f,
        0x00, 0x02, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xfb, 0x00, 0x00, 0xfa, 0xff, 0xfe, 0x00,
        0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x02, 0x75, 0x00, 0x40, 0xff, 0xff, 0x3e, 0x00, 0xff,
        0xff, 0x32,
    ];
    buf[..f.len()].copy_from_slice(&f);
    assert_eq!(
        run(&mut buf, f.len()),
        Verdict::Drop(Drop::NotUnicastSource)
    );
    assert_eq!(&buf[..f.len()], &f[..]);
    // The same frame from a unicast source is answered (so the test pins the source check).
    buf[..f.len()].copy_from_slice(&f);
    buf[26..30].copy_from_slice(&[0x7f, 0, 0, 1]);
    let c = !csum_fold(csum_add(0, &{
        let mut h = [0u8; 20];
        h.copy_from_slice(&buf[14..34]);
        h[10] = 0;
        h[11] = 0;
        h
    }));
    buf[24..26].copy_from_slice(&c.to_be_bytes());
    assert!(matches!(run(&mut buf, f.len()), Verdict::Reply { .. }));
}
