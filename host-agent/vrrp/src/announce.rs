//! Takeover announcements and conflict detection: pure builders and readers of the frames
//! a new Master sends so that the link learns where the virtual addresses went
//! (RFC 9568 §6.4.1 and §6.4.2: gratuitous ARP for IPv4, unsolicited Neighbor
//! Advertisement for IPv6), and of the ARP and NA packets by which another host claims
//! one of them.
//!
//! The appliance keeps its own MAC address (no VRRP virtual MAC, §7.3), so these
//! announcements are what moves the traffic: every neighbour's cache entry for a virtual
//! address must be overwritten with the new Master's MAC.
//!
//! What it does not do: send anything (the caller uses an `AF_PACKET` socket for ARP and a
//! raw ICMPv6 socket with hop limit 255 for NA), repeat announcements (keepalived's
//! `garp_master_repeat`: the caller's timer), or verify an NA's ICMPv6 checksum (the kernel
//! does for raw ICMPv6 sockets, RFC 3542 §3.1).

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;

/// Ethernet broadcast address.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv4 (ARP's protocol type).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// ARP operation: request.
pub const ARP_REQUEST: u16 = 1;
/// ARP operation: reply.
pub const ARP_REPLY: u16 = 2;
/// Length of a gratuitous ARP frame: Ethernet header (14) + ARP for IPv4 over Ethernet (28).
pub const GARP_LEN: usize = 42;
/// IPv6 all-nodes multicast address, the destination of unsolicited NAs (RFC 4861 §7.2.6).
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// ICMPv6 protocol number (the pseudo-header's next header).
pub const IPPROTO_ICMPV6: u8 = 58;
/// ICMPv6 type of a Neighbor Advertisement (RFC 4861 §4.4).
pub const ND_NEIGHBOR_ADVERT: u8 = 136;
/// Length of the NA [`unsolicited_na`] builds: 24 bytes of message, 8 of option.
pub const NA_LEN: usize = 32;

const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const NA_ROUTER: u8 = 0x80;
const NA_SOLICITED: u8 = 0x40;
const NA_OVERRIDE: u8 = 0x20;
/// ND option: Target Link-Layer Address (RFC 4861 §4.6.1).
const OPT_TARGET_LLADDR: u8 = 2;

/// The gratuitous ARP announcing that `ip` is now at `mac` (RFC 5227 §3 "ARP
/// Announcement"): Ethernet broadcast from `mac`, an ARP request with sender IP = target
/// IP = `ip`, sender MAC `mac`, target MAC zero. 42 bytes (the NIC pads to 60).
///
/// A request, not a reply: RFC 5227 §3 prefers it, and every stack updates an existing
/// cache entry from either (keepalived sends requests too).
pub fn garp_frame(mac: [u8; 6], ip: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::with_capacity(GARP_LEN);
    f.extend_from_slice(&BROADCAST_MAC);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    f.extend_from_slice(&1u16.to_be_bytes()); // hardware type: Ethernet
    f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    f.extend_from_slice(&[6, 4]);
    f.extend_from_slice(&ARP_REQUEST.to_be_bytes());
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ip.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&ip.octets());
    f
}

/// The unsolicited Neighbor Advertisement announcing that `target` is now at `mac`
/// (RFC 4861 §7.2.6): the ICMPv6 message for a raw ICMPv6 socket sending from `src_ll`
/// (the interface's link-local address) to [`ALL_NODES`] with hop limit 255. Override
/// set (the entry must be replaced), Solicited clear (nobody asked), Router clear (the
/// virtual addresses are a service's, not a router's: RFC 9568 sets R for a virtual
/// router, which this appliance is not), the Target Link-Layer Address option, and the
/// checksum over the IPv6 pseudo-header. 32 bytes.
///
/// Linux computes the checksum of raw ICMPv6 sockets itself, taking a pre-filled one into
/// account; it is filled here so the message is right on any path (and testable).
pub fn unsolicited_na(src_ll: Ipv6Addr, target: Ipv6Addr, mac: [u8; 6]) -> Vec<u8> {
    let mut m = Vec::with_capacity(NA_LEN);
    m.extend_from_slice(&[ND_NEIGHBOR_ADVERT, 0, 0, 0]);
    m.extend_from_slice(&[NA_OVERRIDE, 0, 0, 0]);
    m.extend_from_slice(&target.octets());
    m.extend_from_slice(&[OPT_TARGET_LLADDR, 1]);
    m.extend_from_slice(&mac);
    let c = checksum::compute(
        IpAddr::V6(src_ll),
        IpAddr::V6(ALL_NODES),
        IPPROTO_ICMPV6,
        &m,
    );
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// An ARP packet for IPv4 over Ethernet, as [`parse_arp`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arp {
    /// Operation: [`ARP_REQUEST`], [`ARP_REPLY`] or another.
    pub op: u16,
    /// Sender hardware address.
    pub sender_mac: [u8; 6],
    /// Sender protocol address: the address the sender claims.
    pub sender_ip: Ipv4Addr,
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
}

/// Reads an Ethernet frame carrying ARP for IPv4 over Ethernet (one 802.1Q or 802.1ad tag
/// allowed, trailing padding ignored). `None` for anything else or anything truncated.
/// A host claiming a virtual address shows as `sender_ip` = that address with a
/// `sender_mac` not ours.
pub fn parse_arp(frame: &[u8]) -> Option<Arp> {
    let mut off = 12;
    let mut ethertype = be16(frame, off)?;
    if ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
        off += 4;
        ethertype = be16(frame, off)?;
    }
    if ethertype != ETHERTYPE_ARP {
        return None;
    }
    let a = frame.get(off + 2..off + 2 + 28)?;
    // Hardware Ethernet (1), protocol IPv4, address lengths 6 and 4.
    if be16(a, 0)? != 1 || be16(a, 2)? != ETHERTYPE_IPV4 || a[4] != 6 || a[5] != 4 {
        return None;
    }
    Some(Arp {
        op: be16(a, 6)?,
        sender_mac: a.get(8..14)?.try_into().ok()?,
        sender_ip: Ipv4Addr::from(<[u8; 4]>::try_from(a.get(14..18)?).ok()?),
        target_ip: Ipv4Addr::from(<[u8; 4]>::try_from(a.get(24..28)?).ok()?),
    })
}

/// A Neighbor Advertisement, as [`parse_na`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Na {
    /// The address advertised.
    pub target: Ipv6Addr,
    /// The Target Link-Layer Address option's MAC, if present.
    pub mac: Option<[u8; 6]>,
    /// The Override flag.
    pub override_flag: bool,
}

/// Reads an ICMPv6 Neighbor Advertisement (the ICMPv6 message, as a raw ICMPv6 socket
/// returns it), with the validity checks of RFC 4861 §7.1.2 that the message itself
/// allows: type 136, code 0, at least 24 bytes, a target that is not multicast, and no
/// option of length zero. The hop limit (must be 255) and the checksum are the caller's
/// and the kernel's. `None` for anything invalid or truncated.
pub fn parse_na(icmp: &[u8]) -> Option<Na> {
    if icmp.len() < 24 || icmp[0] != ND_NEIGHBOR_ADVERT || icmp[1] != 0 {
        return None;
    }
    let target = Ipv6Addr::from(<[u8; 16]>::try_from(icmp.get(8..24)?).ok()?);
    if target.is_multicast() {
        return None;
    }
    let mut mac = None;
    let mut opts = &icmp[24..];
    while !opts.is_empty() {
        let [ty, len, ..] = *opts else {
            return None;
        };
        let n = usize::from(len) * 8;
        if n == 0 || n > opts.len() {
            return None;
        }
        // Ethernet's option is one 8-byte unit; other lengths are other link layers.
        if ty == OPT_TARGET_LLADDR && n == 8 && mac.is_none() {
            mac = opts.get(2..8).and_then(|m| m.try_into().ok());
        }
        opts = &opts[n..];
    }
    Some(Na {
        target,
        mac,
        override_flag: icmp[4] & NA_OVERRIDE != 0,
    })
}

/// Whether the NA has the Router or Solicited flag (for logs; not needed to detect a
/// conflict).
pub fn na_flags(icmp: &[u8]) -> Option<(bool, bool)> {
    let f = *icmp.get(4)?;
    Some((f & NA_ROUTER != 0, f & NA_SOLICITED != 0))
}

fn be16(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    const MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0x00, 0x01, 0x33];

    #[test]
    fn garp_layout() {
        let f = garp_frame(MAC, Ipv4Addr::new(198, 18, 53, 53));
        let want: Vec<u8> = [
            &[0xff; 6][..],
            &MAC,
            &[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1],
            &MAC,
            &[198, 18, 53, 53],
            &[0; 6],
            &[198, 18, 53, 53],
        ]
        .concat();
        assert_eq!(f, want);
        assert_eq!(f.len(), GARP_LEN);
        assert_eq!(
            parse_arp(&f),
            Some(Arp {
                op: ARP_REQUEST,
                sender_mac: MAC,
                sender_ip: Ipv4Addr::new(198, 18, 53, 53),
                target_ip: Ipv4Addr::new(198, 18, 53, 53),
            })
        );
    }

    #[test]
    fn arp_with_vlan_tag_and_padding() {
        let f = garp_frame(MAC, Ipv4Addr::new(198, 18, 0, 7));
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
        t.extend_from_slice(&f[12..]);
        t.resize(64, 0);
        let mut reply = t.clone();
        reply[25] = 2;
        assert_eq!(parse_arp(&reply).map(|a| a.op), Some(ARP_REPLY));
        assert_eq!(
            parse_arp(&t).map(|a| a.sender_ip),
            Some(Ipv4Addr::new(198, 18, 0, 7))
        );
    }

    #[test]
    fn arp_refusals() {
        let f = garp_frame(MAC, Ipv4Addr::new(198, 18, 0, 7));
        assert_eq!(parse_arp(&f[..41]), None);
        assert_eq!(parse_arp(&f[..13]), None);
        assert_eq!(parse_arp(&[]), None);
        for (i, v) in [(12, 0x86), (15, 6), (16, 0x86), (18, 8), (19, 16)] {
            let mut g = f.clone();
            g[i] = v;
            assert_eq!(parse_arp(&g), None, "byte {i} = {v}");
        }
    }

    #[test]
    fn na_layout_and_checksum() {
        let src = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
        let target = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0x53, 0x53);
        let m = unsolicited_na(src, target, MAC);
        assert_eq!(m.len(), NA_LEN);
        assert_eq!(&m[..2], &[136, 0]);
        assert_eq!(&m[4..8], &[0x20, 0, 0, 0]);
        assert_eq!(&m[8..24], &target.octets());
        assert_eq!(&m[24..26], &[2, 1]);
        assert_eq!(&m[26..], &MAC);
        assert!(checksum::verify(
            IpAddr::V6(src),
            IpAddr::V6(ALL_NODES),
            IPPROTO_ICMPV6,
            &m
        ));
        // The checksum covers the source: another one does not verify.
        assert!(!checksum::verify(
            IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2)),
            IpAddr::V6(ALL_NODES),
            IPPROTO_ICMPV6,
            &m
        ));
        assert_eq!(na_flags(&m), Some((false, false)));
        assert_eq!(
            parse_na(&m),
            Some(Na {
                target,
                mac: Some(MAC),
                override_flag: true
            })
        );
    }

    #[test]
    fn na_checksum_matches_an_independent_sum() {
        // The checksum recomputed word by word over the RFC 8200 §8.1 pseudo-header.
        let src = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x1, 0x2, 0x3, 0x4);
        let target = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x53);
        let m = unsolicited_na(src, target, MAC);
        let mut data = vec![];
        data.extend_from_slice(&src.octets());
        data.extend_from_slice(&ALL_NODES.octets());
        data.extend_from_slice(&32u32.to_be_bytes());
        data.extend_from_slice(&[0, 0, 0, 58]);
        data.extend_from_slice(&m[..2]);
        data.extend_from_slice(&[0, 0]);
        data.extend_from_slice(&m[4..]);
        let mut s: u32 = data
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        assert_eq!(u16::from_be_bytes([m[2], m[3]]), !(s as u16));
    }

    #[test]
    fn na_options_and_refusals() {
        let src = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
        let target = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 9);
        let m = unsolicited_na(src, target, MAC);
        // Without the option: no MAC.
        assert_eq!(parse_na(&m[..24]).and_then(|n| n.mac), None);
        assert!(parse_na(&m[..24]).is_some());
        // A nonce option (type 14, one unit) before it is skipped.
        let mut n = m[..24].to_vec();
        n.extend_from_slice(&[14, 1, 1, 2, 3, 4, 5, 6]);
        n.extend_from_slice(&m[24..]);
        assert_eq!(parse_na(&n).and_then(|n| n.mac), Some(MAC));
        // Length-zero option, overlong option, truncated option: invalid.
        let mut z = m.clone();
        z[25] = 0;
        assert_eq!(parse_na(&z), None);
        let mut o = m.clone();
        o[25] = 2;
        assert_eq!(parse_na(&o), None);
        let mut t = m.clone();
        t.push(1);
        assert_eq!(parse_na(&t), None);
        // Not an NA, code not 0, short, multicast target.
        let mut x = m.clone();
        x[0] = 135;
        assert_eq!(parse_na(&x), None);
        let mut x = m.clone();
        x[1] = 1;
        assert_eq!(parse_na(&x), None);
        assert_eq!(parse_na(&m[..23]), None);
        let mut x = m.clone();
        x[8] = 0xff;
        assert_eq!(parse_na(&x), None);
        // Override clear.
        let mut x = m.clone();
        x[4] = 0x40;
        assert_eq!(parse_na(&x).map(|n| n.override_flag), Some(false));
        assert_eq!(na_flags(&x), Some((false, true)));
    }

    proptest! {
        #[test]
        fn prop_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_arp(&b);
            let _ = na_flags(&b);
            if let Some(n) = parse_na(&b) {
                prop_assert!(!n.target.is_multicast());
            }
        }

        #[test]
        fn prop_round_trip(mac in any::<[u8; 6]>(), ip in any::<u32>(), t in any::<u128>(),
                           s in any::<u128>()) {
            let ip = Ipv4Addr::from(ip);
            let a = parse_arp(&garp_frame(mac, ip)).unwrap();
            prop_assert_eq!((a.sender_mac, a.sender_ip, a.target_ip), (mac, ip, ip));
            let t = Ipv6Addr::from(t);
            prop_assume!(!t.is_multicast());
            let n = parse_na(&unsolicited_na(Ipv6Addr::from(s), t, mac)).unwrap();
            prop_assert_eq!(n, Na { target: t, mac: Some(mac), override_flag: true });
        }
    }
}
