//! VRRPv3 advertisements (RFC 9568 §5): the VRRP payload of an IPv4 or IPv6 packet with
//! protocol / next header 112, read and written.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version| Type  | Virtual Rtr ID|   Priority    |Count IPvX Addr|
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |(rsvd) |     Max Adver Int     |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       IPvX Address(es)                        |
//! ```
//!
//! The IP header is not handled here: the caller's raw socket writes it (TTL / hop limit
//! [`TTL`], RFC 9568 §5.1.1.3 and §5.1.2.3) and hands the received TTL to the router.
//! The address family of an advertisement is the family of its IP source (§5.2.5: there is
//! no family field).

use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;

/// IP protocol number (IPv4) and next header (IPv6) of VRRP (RFC 9568 §5.1.1.4, §5.1.2.4).
pub const PROTO: u8 = 112;
/// The IPv4 multicast group of VRRP advertisements (RFC 9568 §5.1.1.2).
pub const MCAST_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 18);
/// The IPv6 multicast group of VRRP advertisements (RFC 9568 §5.1.2.2).
pub const MCAST_V6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x12);
/// The TTL / hop limit every advertisement is sent with and must arrive with
/// (RFC 9568 §5.1.1.3, §5.1.2.3, §7.1): a packet from off the link has a lower one.
pub const TTL: u8 = 255;
/// VRRP version carried in the high nibble of the first byte (RFC 9568 §5.2.1).
pub const VERSION: u8 = 3;
/// The only packet type defined: ADVERTISEMENT (RFC 9568 §5.2.2).
pub const TYPE_ADVERTISEMENT: u8 = 1;
/// Length of the fixed part, before the addresses.
pub const HEADER_LEN: usize = 8;
/// The largest Max Adver Int the 12-bit field holds, in centiseconds (40.95 s).
pub const MAX_INTERVAL_CS: u16 = 0x0fff;

/// How the IPv4 pseudo-header's destination is chosen for the checksum.
///
/// RFC 9568 §5.2.8 puts the packet's real destination in the pseudo-header. keepalived
/// before 1.3 put the multicast group 224.0.0.18 there even for unicast adverts; newer
/// keepalived speaks to such peers with `old_unicast_checksum` (and switches to it by
/// itself when it first sees one). For multicast adverts and for IPv6 both forms are the
/// same, so the mode only matters for IPv4 unicast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ChecksumMode {
    /// Send and accept only the RFC checksum.
    #[default]
    Rfc,
    /// Send the old form (224.0.0.18 in the pseudo-header); accept either form.
    OldUnicast,
}

/// An advertisement's fields (RFC 9568 §5.2). The reserved bits and the checksum are not
/// kept: the reserved bits are sent as zero and ignored on receipt (§5.2.6).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Advert {
    /// Virtual Router Identifier, 1..=255 (§5.2.3).
    pub vrid: u8,
    /// Sender's priority: 255 for the address owner, 0 when the Active Router stops (§5.2.4).
    pub priority: u8,
    /// Advertisement interval in centiseconds, 1..=4095 on the wire (§5.2.7).
    pub max_advert_int_cs: u16,
    /// The virtual addresses, all of the family of the IP source (§5.2.9).
    pub addrs: Vec<IpAddr>,
}

/// Why bytes are not a valid advertisement. Every error is a reason to discard the packet
/// (RFC 9568 §7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// The IP source and destination are of different families.
    FamilyMismatch,
    /// Shorter than the 8-byte fixed part.
    TooShort {
        /// Bytes received.
        len: usize,
    },
    /// Version is not 3 (VRRPv2 packets land here too).
    Version(u8),
    /// Type is not 1 (ADVERTISEMENT).
    Type(u8),
    /// Count IPvX Addr is zero (§5.2.5: the minimum is 1).
    NoAddresses,
    /// The length does not match 8 + Count IPvX Addr × address length.
    Length {
        /// Count IPvX Addr.
        count: u8,
        /// The length the count calls for.
        expected: usize,
        /// Bytes received.
        len: usize,
    },
    /// Max Adver Int is zero.
    ZeroInterval,
    /// The checksum does not match the pseudo-header and the payload.
    Checksum,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FamilyMismatch => f.write_str("IP source and destination of different families"),
            Self::TooShort { len } => write!(f, "{len} bytes, shorter than the 8-byte header"),
            Self::Version(v) => write!(f, "VRRP version {v}, not 3"),
            Self::Type(t) => write!(f, "VRRP type {t}, not 1 (advertisement)"),
            Self::NoAddresses => f.write_str("address count 0"),
            Self::Length {
                count,
                expected,
                len,
            } => write!(f, "{len} bytes, but {count} addresses call for {expected}"),
            Self::ZeroInterval => f.write_str("advertisement interval 0"),
            Self::Checksum => f.write_str("bad checksum"),
        }
    }
}

impl core::error::Error for ParseError {}

fn addr_len(a: IpAddr) -> usize {
    match a {
        IpAddr::V4(_) => 4,
        IpAddr::V6(_) => 16,
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

/// The destination to put in the pseudo-header when sending to `dst` in `mode`.
fn pseudo_dst(dst: IpAddr, mode: ChecksumMode) -> IpAddr {
    match (dst, mode) {
        (IpAddr::V4(_), ChecksumMode::OldUnicast) => IpAddr::V4(MCAST_V4),
        _ => dst,
    }
}

/// Reads a VRRP payload received from `src` to `dst` (the IP header's addresses).
///
/// Checks, in order (RFC 9568 §7.1 and §5.2): the families of `src` and `dst`, the length
/// of the fixed part, version 3, type 1, Count IPvX Addr ≥ 1 and exactly matching the
/// length, Max Adver Int ≠ 0, and the checksum over the pseudo-header (§5.2.8). With
/// [`ChecksumMode::OldUnicast`] an IPv4 packet whose checksum was computed with 224.0.0.18
/// as the destination is accepted too. TTL, VRID and the sender are the router's checks.
/// No input makes it panic.
pub fn parse(
    bytes: &[u8],
    src: IpAddr,
    dst: IpAddr,
    mode: ChecksumMode,
) -> Result<Advert, ParseError> {
    if !same_family(src, dst) {
        return Err(ParseError::FamilyMismatch);
    }
    let alen = addr_len(src);
    let [vt, vrid, priority, count, i0, i1, ..] = *bytes else {
        return Err(ParseError::TooShort { len: bytes.len() });
    };
    if bytes.len() < HEADER_LEN {
        return Err(ParseError::TooShort { len: bytes.len() });
    }
    if vt >> 4 != VERSION {
        return Err(ParseError::Version(vt >> 4));
    }
    if vt & 0x0f != TYPE_ADVERTISEMENT {
        return Err(ParseError::Type(vt & 0x0f));
    }
    if count == 0 {
        return Err(ParseError::NoAddresses);
    }
    let expected = HEADER_LEN + usize::from(count) * alen;
    if bytes.len() != expected {
        return Err(ParseError::Length {
            count,
            expected,
            len: bytes.len(),
        });
    }
    // The top four bits are reserved: ignored on receipt (§5.2.6).
    let interval = u16::from_be_bytes([i0, i1]) & MAX_INTERVAL_CS;
    if interval == 0 {
        return Err(ParseError::ZeroInterval);
    }
    let ok = checksum::verify(src, dst, PROTO, bytes)
        || (mode == ChecksumMode::OldUnicast
            && src.is_ipv4()
            && checksum::verify(src, pseudo_dst(dst, mode), PROTO, bytes));
    if !ok {
        return Err(ParseError::Checksum);
    }
    let addrs = bytes[HEADER_LEN..]
        .chunks_exact(alen)
        .map(
            |c| match (src, <[u8; 4]>::try_from(c), <[u8; 16]>::try_from(c)) {
                (IpAddr::V4(_), Ok(a), _) => IpAddr::V4(Ipv4Addr::from(a)),
                (_, _, Ok(a)) => IpAddr::V6(Ipv6Addr::from(a)),
                // chunks_exact(alen) yields only slices of the family's length.
                _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            },
        )
        .collect();
    Ok(Advert {
        vrid,
        priority,
        max_advert_int_cs: interval,
        addrs,
    })
}

impl Advert {
    /// Writes the VRRP payload for an IP packet from `src` to `dst`, checksum included
    /// (RFC 9568 §5.2.8; with [`ChecksumMode::OldUnicast`], IPv4 sums 224.0.0.18 as the
    /// destination).
    ///
    /// The family is `src`'s: addresses of the other family are left out, and at most 255
    /// are written (Count IPvX Addr is one byte). The interval is clamped to the field's
    /// valid range 1..=4095. A `dst` of the other family gives a checksum no receiver
    /// accepts. [`parse`] reads back exactly what a valid advert encodes.
    pub fn encode(&self, src: IpAddr, dst: IpAddr, mode: ChecksumMode) -> Vec<u8> {
        let addrs = self
            .addrs
            .iter()
            .filter(|a| same_family(**a, src))
            .take(255);
        let count = addrs.clone().count();
        let interval = self.max_advert_int_cs.clamp(1, MAX_INTERVAL_CS);
        let mut out = Vec::with_capacity(HEADER_LEN + count * addr_len(src));
        out.extend_from_slice(&[
            (VERSION << 4) | TYPE_ADVERTISEMENT,
            self.vrid,
            self.priority,
            u8::try_from(count).unwrap_or(u8::MAX),
        ]);
        out.extend_from_slice(&interval.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        for a in addrs {
            match a {
                IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            }
        }
        let c = checksum::compute(src, pseudo_dst(dst, mode), PROTO, &out);
        out[6..8].copy_from_slice(&c.to_be_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use proptest::prelude::*;

    const SRC4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    const PEER4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
    const GRP4: IpAddr = IpAddr::V4(MCAST_V4);
    const SRC6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
    const GRP6: IpAddr = IpAddr::V6(MCAST_V6);

    fn v4_advert() -> Advert {
        Advert {
            vrid: 51,
            priority: 100,
            max_advert_int_cs: 100,
            addrs: vec![IpAddr::V4(Ipv4Addr::new(198, 18, 53, 53))],
        }
    }

    #[test]
    fn encodes_the_rfc_layout() {
        let b = v4_advert().encode(SRC4, GRP4, ChecksumMode::Rfc);
        assert_eq!(&b[..6], &[0x31, 51, 100, 1, 0, 100]);
        assert_eq!(&b[8..], &[198, 18, 53, 53]);
        // Checksum worked by hand: words 3133 6401 0064 0000 c612 3535 and the pseudo-header
        // c612 0001 e000 0012 0070 000c sum to 0x33780, folded 0x3783, complemented 0xc87c.
        assert_eq!(&b[6..8], &[0xc8, 0x7c]);
    }

    #[test]
    fn round_trip_v4_v6() {
        let a = v4_advert();
        let b = a.encode(SRC4, GRP4, ChecksumMode::Rfc);
        assert_eq!(parse(&b, SRC4, GRP4, ChecksumMode::Rfc), Ok(a));
        let a6 = Advert {
            vrid: 1,
            priority: 255,
            max_advert_int_cs: 4095,
            addrs: vec![
                SRC6,
                IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0x53, 0x53)),
            ],
        };
        let b6 = a6.encode(SRC6, GRP6, ChecksumMode::Rfc);
        assert_eq!(b6.len(), 8 + 32);
        assert_eq!(parse(&b6, SRC6, GRP6, ChecksumMode::OldUnicast), Ok(a6));
    }

    #[test]
    fn old_unicast_checksum() {
        let a = v4_advert();
        let old = a.encode(SRC4, PEER4, ChecksumMode::OldUnicast);
        let rfc = a.encode(SRC4, PEER4, ChecksumMode::Rfc);
        assert_ne!(old, rfc);
        // The old form is the RFC form for the multicast group.
        assert_eq!(old, a.encode(SRC4, GRP4, ChecksumMode::Rfc));
        assert_eq!(
            parse(&old, SRC4, PEER4, ChecksumMode::Rfc),
            Err(ParseError::Checksum)
        );
        assert_eq!(
            parse(&old, SRC4, PEER4, ChecksumMode::OldUnicast),
            Ok(a.clone())
        );
        assert_eq!(
            parse(&rfc, SRC4, PEER4, ChecksumMode::OldUnicast),
            Ok(a.clone())
        );
        assert_eq!(parse(&rfc, SRC4, PEER4, ChecksumMode::Rfc), Ok(a));
    }

    #[test]
    fn every_check_fails_when_it_should() {
        let good = v4_advert().encode(SRC4, GRP4, ChecksumMode::Rfc);
        let p = |b: &[u8]| parse(b, SRC4, GRP4, ChecksumMode::Rfc);
        assert_eq!(
            parse(&good, SRC4, GRP6, ChecksumMode::Rfc),
            Err(ParseError::FamilyMismatch)
        );
        assert_eq!(p(&good[..7]), Err(ParseError::TooShort { len: 7 }));
        assert_eq!(p(&[]), Err(ParseError::TooShort { len: 0 }));
        let mut b = good.clone();
        b[0] = 0x21;
        assert_eq!(p(&b), Err(ParseError::Version(2)));
        b[0] = 0x32;
        assert_eq!(p(&b), Err(ParseError::Type(2)));
        let mut b = good.clone();
        b[3] = 0;
        assert_eq!(p(&b), Err(ParseError::NoAddresses));
        b[3] = 2;
        assert_eq!(
            p(&b),
            Err(ParseError::Length {
                count: 2,
                expected: 16,
                len: 12
            })
        );
        let mut b = good.clone();
        b.push(0);
        assert!(matches!(p(&b), Err(ParseError::Length { .. })));
        let zero = Advert {
            max_advert_int_cs: 0,
            ..v4_advert()
        };
        let mut b = zero.encode(SRC4, GRP4, ChecksumMode::Rfc);
        // encode clamps 0 to 1; write a zero interval by hand, checksum fixed up.
        assert_eq!(&b[4..6], &[0, 1]);
        b[5] = 0;
        b[6..8].copy_from_slice(&[0, 0]);
        let c = checksum::compute(SRC4, GRP4, PROTO, &b);
        b[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(p(&b), Err(ParseError::ZeroInterval));
        let mut b = good.clone();
        b[11] ^= 1;
        assert_eq!(p(&b), Err(ParseError::Checksum));
        // Wrong source or destination in the pseudo-header.
        assert_eq!(
            parse(&good, PEER4, GRP4, ChecksumMode::Rfc),
            Err(ParseError::Checksum)
        );
    }

    #[test]
    fn reserved_bits_ignored() {
        let mut b = v4_advert().encode(SRC4, GRP4, ChecksumMode::Rfc);
        b[4] |= 0xf0;
        b[6..8].copy_from_slice(&[0, 0]);
        let c = checksum::compute(SRC4, GRP4, PROTO, &b);
        b[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            parse(&b, SRC4, GRP4, ChecksumMode::Rfc).map(|a| a.max_advert_int_cs),
            Ok(100)
        );
    }

    #[test]
    fn encode_keeps_the_family_and_the_limits() {
        let a = Advert {
            vrid: 7,
            priority: 9,
            max_advert_int_cs: 60_000,
            addrs: (0..300u32)
                .map(|i| IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i)))
                .chain([SRC6])
                .collect(),
        };
        let b = a.encode(SRC4, GRP4, ChecksumMode::Rfc);
        assert_eq!(b.len(), 8 + 255 * 4);
        let back = parse(&b, SRC4, GRP4, ChecksumMode::Rfc).unwrap();
        assert_eq!(back.max_advert_int_cs, 4095);
        assert_eq!(back.addrs[..], a.addrs[..255]);
    }

    #[test]
    fn display_names_the_problem() {
        let e = ParseError::Length {
            count: 2,
            expected: 16,
            len: 12,
        };
        assert_eq!(e.to_string(), "12 bytes, but 2 addresses call for 16");
        assert_eq!(ParseError::Version(2).to_string(), "VRRP version 2, not 3");
    }

    fn arb_advert_v4() -> impl Strategy<Value = Advert> {
        (
            any::<u8>(),
            any::<u8>(),
            1..=MAX_INTERVAL_CS,
            proptest::collection::vec(any::<u32>(), 1..=255),
        )
            .prop_map(|(vrid, priority, i, a)| Advert {
                vrid,
                priority,
                max_advert_int_cs: i,
                addrs: a.into_iter().map(|x| IpAddr::V4(x.into())).collect(),
            })
    }

    fn arb_advert_v6() -> impl Strategy<Value = Advert> {
        (
            any::<u8>(),
            any::<u8>(),
            1..=MAX_INTERVAL_CS,
            proptest::collection::vec(any::<u128>(), 1..=40),
        )
            .prop_map(|(vrid, priority, i, a)| Advert {
                vrid,
                priority,
                max_advert_int_cs: i,
                addrs: a.into_iter().map(|x| IpAddr::V6(x.into())).collect(),
            })
    }

    proptest! {
        #[test]
        fn prop_round_trip_v4(a in arb_advert_v4(), s in any::<u32>(), d in any::<u32>(),
                              old in any::<bool>()) {
            let (s, d) = (IpAddr::V4(s.into()), IpAddr::V4(d.into()));
            let mode = if old { ChecksumMode::OldUnicast } else { ChecksumMode::Rfc };
            let b = a.encode(s, d, mode);
            prop_assert_eq!(parse(&b, s, d, ChecksumMode::OldUnicast), Ok(a.clone()));
            if !old {
                prop_assert_eq!(parse(&b, s, d, ChecksumMode::Rfc), Ok(a));
            }
        }

        #[test]
        fn prop_round_trip_v6(a in arb_advert_v6(), s in any::<u128>(), d in any::<u128>()) {
            let (s, d) = (IpAddr::V6(s.into()), IpAddr::V6(d.into()));
            let b = a.encode(s, d, ChecksumMode::Rfc);
            prop_assert_eq!(parse(&b, s, d, ChecksumMode::Rfc), Ok(a));
        }

        #[test]
        fn prop_one_flipped_bit_is_refused(a in arb_advert_v4(), bit in any::<usize>()) {
            let mut b = a.encode(SRC4, GRP4, ChecksumMode::Rfc);
            // A single flipped bit always changes the one's complement sum, reserved bits
            // and the checksum field included.
            let bit = bit % (b.len() * 8);
            b[bit / 8] ^= 0x80 >> (bit % 8);
            prop_assert!(parse(&b, SRC4, GRP4, ChecksumMode::Rfc).is_err());
        }

        #[test]
        fn prop_never_panics(b in proptest::collection::vec(any::<u8>(), 0..600),
                             v6 in any::<bool>(), old in any::<bool>()) {
            let (s, d) = if v6 { (SRC6, GRP6) } else { (SRC4, PEER4) };
            let mode = if old { ChecksumMode::OldUnicast } else { ChecksumMode::Rfc };
            if let Ok(a) = parse(&b, s, d, mode) {
                prop_assert_eq!(a.addrs.len(), usize::from(b[3]));
            }
        }
    }
}
