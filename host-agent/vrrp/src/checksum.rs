//! The Internet checksum (RFC 1071) over an upper-layer pseudo-header, shared by the VRRP
//! codec (RFC 9568 §5.2.8) and the ICMPv6 Neighbor Advertisement builder (RFC 4443 §2.3).

use core::net::IpAddr;

/// Adds `data` as big-endian 16-bit words to `acc` (an odd last byte is padded with zero).
/// A `u64` accumulator cannot overflow for any slice a machine can hold.
fn add(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds the carries back in and returns the 16-bit one's complement sum.
fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    // The loop leaves at most 0xffff.
    u16::try_from(acc).unwrap_or(0xffff)
}

/// The one's complement sum of the pseudo-header for `proto` and of `data`, not yet
/// complemented: a packet whose checksum field is right sums to 0xffff.
///
/// IPv4: source, destination, zero, protocol, 16-bit length (as UDP, RFC 768).
/// IPv6: source, destination, 32-bit length, three zero bytes, next header (RFC 8200 §8.1).
/// Addresses of different families have no pseudo-header: the destination is then taken as
/// the unspecified address of the source's family (the caller refuses such pairs first).
pub(crate) fn sum(src: IpAddr, dst: IpAddr, proto: u8, data: &[u8]) -> u16 {
    let mut acc = 0u64;
    match src {
        IpAddr::V4(s) => {
            let d = match dst {
                IpAddr::V4(d) => d.octets(),
                IpAddr::V6(_) => [0; 4],
            };
            acc = add(acc, &s.octets());
            acc = add(acc, &d);
            acc += u64::from(proto);
            // The IPv4 pseudo-header's length is 16 bits; a longer payload cannot be an IPv4
            // datagram, and its checksum then simply does not match.
            acc += data.len() as u64 & 0xffff;
        }
        IpAddr::V6(s) => {
            let d = match dst {
                IpAddr::V6(d) => d.octets(),
                IpAddr::V4(_) => [0; 16],
            };
            acc = add(acc, &s.octets());
            acc = add(acc, &d);
            let len = data.len() as u64 & 0xffff_ffff;
            acc += (len >> 16) + (len & 0xffff);
            acc += u64::from(proto);
        }
    }
    fold(add(acc, data))
}

/// The checksum to write into a packet whose checksum field is zero.
pub(crate) fn compute(src: IpAddr, dst: IpAddr, proto: u8, data: &[u8]) -> u16 {
    !sum(src, dst, proto, data)
}

/// Whether `data` (checksum field included) carries the right checksum.
pub(crate) fn verify(src: IpAddr, dst: IpAddr, proto: u8, data: &[u8]) -> bool {
    sum(src, dst, proto, data) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (with end-around carry).
        assert_eq!(
            fold(add(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])),
            0xddf2
        );
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(add(0, &[0x12, 0x34, 0x56])), 0x6834);
    }

    #[test]
    fn computed_checksum_verifies() {
        let s4 = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
        let d4 = IpAddr::V4(Ipv4Addr::new(224, 0, 0, 18));
        let mut p = [0x31, 51, 100, 1, 0, 100, 0, 0, 198, 18, 53, 53];
        let c = compute(s4, d4, 112, &p);
        p[6..8].copy_from_slice(&c.to_be_bytes());
        assert!(verify(s4, d4, 112, &p));
        assert!(!verify(
            s4,
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
            112,
            &p
        ));
        let s6 = IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
        let d6 = IpAddr::V6(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x12));
        let mut q = [0u8; 24];
        q[0] = 0x31;
        let c = compute(s6, d6, 112, &q);
        q[6..8].copy_from_slice(&c.to_be_bytes());
        assert!(verify(s6, d6, 112, &q));
        assert!(!verify(s6, d6, 58, &q));
    }
}
