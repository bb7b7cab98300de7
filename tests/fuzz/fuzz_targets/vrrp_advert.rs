//! Fuzz target: VRRPv3 packets into skua-vrrp (host-agent/vrrp), and the same bytes as ARP
//! frames and ICMPv6 Neighbor Advertisements. Nothing may panic, and:
//!
//! - whatever `packet::parse` accepts (IPv4 and IPv6, both checksum modes) encodes back to
//!   bytes it reads as the same advert;
//! - a `Router` in each state (Initialize, Backup, Master, Fault; multicast or unicast;
//!   either checksum mode) fed the packet, with its checksum left as it is or made right,
//!   then driven through its timers and a priority change, only ever sends advertisements
//!   that parse with its own settings, carrying its current priority (or 0 on shutdown),
//!   and reports transitions from the state it was in.
//!
//! Input: one selector byte, then the packet. Selector bits: 0 IPv6, 1 unicast, 2 old
//! unicast checksum, 3-4 state, 5 fix the checksum up (and a preempt delay), 6-7 TTL
//! (255, 64, 254, 255).
//! Seeds (seeds/vrrp_advert/): a selector byte and each packet of
//! host-agent/vrrp/tests/fixtures/keepalived.txt (keepalived 2.2.7's adverts, gratuitous
//! ARPs and NAs), the addresses below being those of that capture.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use skua_vrrp::announce;
use skua_vrrp::packet::{self, ChecksumMode};
use skua_vrrp::router::{Config, Output, Router, State};

const KA4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const US4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
const KA_LL: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 1));
const US_LL: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 2));
const KA6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
const US6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
const S: u64 = 1_000_000_000;

/// The Internet checksum over the VRRP pseudo-header, written independently of the crate.
fn fix_checksum(b: &mut [u8], src: IpAddr, dst: IpAddr, mode: ChecksumMode) {
    if b.len() < 8 {
        return;
    }
    b[6] = 0;
    b[7] = 0;
    let dst = match (dst, mode) {
        (IpAddr::V4(_), ChecksumMode::OldUnicast) => IpAddr::V4(packet::MCAST_V4),
        _ => dst,
    };
    let mut pseudo = Vec::new();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&[0, packet::PROTO]);
            pseudo.extend_from_slice(&(b.len() as u16).to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&(b.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, packet::PROTO]);
        }
        _ => return,
    }
    let mut sum: u64 = 0;
    for part in [&pseudo[..], &b[..]] {
        for w in part.chunks(2) {
            sum += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    b[6..8].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

fn drain(r: &mut Router, state: &mut State, mode: ChecksumMode) {
    let primary = r.config().primary;
    while let Some(o) = r.poll_output() {
        match o {
            Output::Send { dst, bytes } => {
                let a = packet::parse(&bytes, primary, dst, mode)
                    .expect("the router's own adverts parse with its settings");
                assert!(a.priority == r.priority() || a.priority == 0);
                assert_eq!(a.vrid, r.config().vrid);
                assert_eq!(a.addrs, r.config().addresses);
            }
            Output::Transition { from, to, .. } => {
                assert_eq!(from, *state, "transition from the state we were in");
                *state = to;
            }
            Output::Announce => assert_eq!(r.state(), State::Master),
        }
    }
    assert_eq!(*state, r.state());
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, pkt)) = data.split_first() else {
        return;
    };

    // 1. The codec, every family and mode.
    for (src, dst) in [
        (KA4, IpAddr::V4(packet::MCAST_V4)),
        (KA4, US4),
        (KA_LL, IpAddr::V6(packet::MCAST_V6)),
        (KA6, US6),
    ] {
        for mode in [ChecksumMode::Rfc, ChecksumMode::OldUnicast] {
            if let Ok(a) = packet::parse(pkt, src, dst, mode) {
                assert_eq!(usize::from(pkt[3]), a.addrs.len());
                let again = a.encode(src, dst, mode);
                assert_eq!(packet::parse(&again, src, dst, mode), Ok(a));
            }
        }
    }

    // 2. Announcement readers.
    let _ = announce::parse_arp(pkt);
    let _ = announce::parse_na(pkt);
    let _ = announce::na_flags(pkt);

    // 3. A router in the state the selector asks for.
    let v6 = sel & 1 != 0;
    let unicast = sel & 2 != 0;
    let mode = if sel & 4 != 0 {
        ChecksumMode::OldUnicast
    } else {
        ChecksumMode::Rfc
    };
    let want = (sel >> 3) & 3;
    let ttl = [255, 64, 254, 255][usize::from(sel >> 6)];
    let (src, dst, primary, vip) = match (v6, unicast) {
        (false, false) => (KA4, IpAddr::V4(packet::MCAST_V4), US4, "198.18.53.53"),
        (false, true) => (KA4, US4, US4, "198.18.53.53"),
        (true, false) => (KA_LL, IpAddr::V6(packet::MCAST_V6), US_LL, "fd00::53:53"),
        (true, true) => (KA6, US6, US6, "fd00::53:53"),
    };
    let cfg = Config {
        vrid: 51,
        priority: 100,
        advert_interval_cs: 100,
        preempt: true,
        preempt_delay_ms: if sel & 0x20 != 0 { 1500 } else { 0 },
        accept_mode: false,
        primary,
        addresses: vec![vip.parse().unwrap()],
        unicast_peers: if unicast { vec![src] } else { vec![] },
        checksum: mode,
    };
    let mut r = Router::new(cfg).expect("valid config");
    let mut state = State::Initialize;
    match want {
        1 => r.startup(0),
        2 => {
            r.startup(0);
            r.handle_timeout(r.poll_timeout().unwrap());
        }
        3 => {
            r.startup(0);
            r.link_down(0);
        }
        _ => {}
    }
    drain(&mut r, &mut state, mode);

    let mut fixed = pkt.to_vec();
    if sel & 0x20 != 0 {
        fix_checksum(&mut fixed, src, dst, mode);
    }
    let mut now = 5 * S;
    for bytes in [pkt, &fixed[..]] {
        let _ = r.handle_advert(now, src, dst, ttl, bytes);
        drain(&mut r, &mut state, mode);
        // Run the timers the packet left (a takeover, advertisements).
        for _ in 0..3 {
            let Some(t) = r.poll_timeout() else { break };
            now = now.max(t);
            r.handle_timeout(now);
            drain(&mut r, &mut state, mode);
        }
        r.set_priority(now, pkt.get(2).copied().unwrap_or(100));
        drain(&mut r, &mut state, mode);
        now += S;
    }
    r.link_down(now);
    r.link_up(now);
    drain(&mut r, &mut state, mode);
    r.shutdown(now);
    drain(&mut r, &mut state, mode);
    assert_eq!(r.state(), State::Initialize);
    let st = r.stats();
    assert_eq!(st.adverts_received, 2);
    assert!(st.dropped.total() <= 2);
});
