//! Zero-copy view of a DNS query (RFC 1035 §4.1, RFC 6891 §6).
//!
//! [`Query::parse`] validates a datagram once; after it succeeds no accessor panics
//! (the smoltcp `wire` contract). It borrows the packet and allocates nothing, so it runs on
//! the hot path of every dataplane. It accepts only what the hot path can answer
//! by copying precompiled bytes: a standard query with one question and at most one OPT
//! record. Everything else is reported as a [`ParseError`] that tells the engine which
//! general-path answer is due (FORMERR, NOTIMP, ...).
//!
//! Not handled here: name decompression in the question (a query's question name is never
//! compressed: it is the first name of the message, RFC 1035 §4.1.4, so a pointer there
//! is malformed), and anything in the answer/authority sections of a query.
//!
//! Whole messages, which allocate, are read by the submodules, the one reader of every
//! crate that reads DNS messages (the resolver's upstream replies, the zone transfers):
//! [`record`] (questions and records), [`names`] (the decompressor, bounded) and [`rdata`]
//! (the RDATA layout table: which fields each type has and which of its names may be
//! compressed, RFC 3597 §4).

use crate::name::MAX_LABEL_LEN;
use crate::rr::rtype;

mod error;
pub mod names;
pub mod rdata;
pub mod record;

/// Header length (RFC 1035 §4.1.1).
pub const HEADER_LEN: usize = 12;
/// Largest DNS message (TCP length prefix is 16 bits, RFC 1035 §4.2.2).
pub const MAX_MESSAGE_LEN: usize = 65535;
/// Size of the OPT record we append: root owner, type, class, TTL, RDLENGTH (RFC 6891 §6.1.2).
pub const OPT_RR_LEN: usize = 11;

/// Header flag bits in the 16-bit flags word (RFC 1035 §4.1.1, RFC 4035 §3.2 for AD/CD).
#[allow(missing_docs)]
pub mod flags {
    pub const QR: u16 = 0x8000;
    pub const OPCODE_MASK: u16 = 0x7800;
    pub const AA: u16 = 0x0400;
    pub const TC: u16 = 0x0200;
    pub const RD: u16 = 0x0100;
    pub const RA: u16 = 0x0080;
    pub const Z: u16 = 0x0040;
    pub const AD: u16 = 0x0020;
    pub const CD: u16 = 0x0010;
    pub const RCODE_MASK: u16 = 0x000f;
}

/// Response codes (RFC 1035 §4.1.1, RFC 6891 §9 for the extended BADVERS).
#[allow(missing_docs)]
pub mod rcode {
    pub const NOERROR: u8 = 0;
    pub const FORMERR: u8 = 1;
    pub const SERVFAIL: u8 = 2;
    pub const NXDOMAIN: u8 = 3;
    pub const NOTIMP: u8 = 4;
    pub const REFUSED: u8 = 5;
    /// Extended RCODE 16: upper 8 bits (=1) go in the OPT TTL, lower 4 bits (=0) in the header.
    pub const BADVERS: u16 = 16;
}

/// The EDNS(0) facts of a query that shape the answer (RFC 6891 §6.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edns {
    /// Requestor's UDP payload size, as sent (values below 512 are treated as 512, §6.2.5).
    pub udp_size: u16,
    /// EDNS version; anything but 0 gets BADVERS (§6.1.3).
    pub version: u8,
    /// The DO bit (RFC 3225).
    pub dnssec_ok: bool,
}

/// Why a datagram is not a hot-path query. The engine maps each to an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Shorter than a header: nothing can be echoed, drop (RFC 1035 gives no way to answer).
    TooShort,
    /// QR=1: a response, never answered (prevents reflection loops).
    IsResponse,
    /// The header is fine but the rest is malformed (bad name, truncated, counts wrong): FORMERR.
    Malformed,
    /// Opcode other than QUERY: NOTIMP unless the general path knows it.
    Opcode,
    /// Well-formed but not for the hot path (EDNS options to look at, qdcount ≠ 1, odd class…).
    General,
}

/// A validated standard query. Offsets point into the original packet.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    packet: &'a [u8],
    /// End of the question name (exclusive); the name starts at [`HEADER_LEN`].
    qname_end: usize,
    /// Question type.
    pub qtype: u16,
    /// Question class.
    pub qclass: u16,
    /// EDNS facts, when the query carried an OPT record.
    pub edns: Option<Edns>,
}

impl<'a> Query<'a> {
    /// Parses and validates `packet` as a standard query for the hot path.
    ///
    /// Accepted: QR=0, opcode QUERY, QDCOUNT=1, ANCOUNT=NSCOUNT=0, ARCOUNT ≤ 1 where the only
    /// additional record is an OPT with a root owner (RFC 6891 §6.1.1); an uncompressed
    /// question name. Bytes after the last record are ignored, as Unbound does.
    pub fn parse(packet: &'a [u8]) -> Result<Self, ParseError> {
        if packet.len() < HEADER_LEN {
            return Err(ParseError::TooShort);
        }
        let flags = be16(packet, 2);
        if flags & flags::QR != 0 {
            return Err(ParseError::IsResponse);
        }
        if flags & flags::OPCODE_MASK != 0 {
            return Err(ParseError::Opcode);
        }
        // A query with TC set is malformed (Unbound: FORMERR); the general path answers.
        if flags & flags::TC != 0 {
            return Err(ParseError::General);
        }
        let (qd, an, ns, ar) = (
            be16(packet, 4),
            be16(packet, 6),
            be16(packet, 8),
            be16(packet, 10),
        );
        if qd != 1 || an != 0 || ns != 0 || ar > 1 {
            return Err(ParseError::General);
        }
        let qname_end = scan_name(packet, HEADER_LEN).ok_or(ParseError::Malformed)?;
        let fixed = packet
            .get(qname_end..qname_end + 4)
            .ok_or(ParseError::Malformed)?;
        let qtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        let qclass = u16::from_be_bytes([fixed[2], fixed[3]]);
        let mut pos = qname_end + 4;
        let mut edns = None;
        if ar == 1 {
            // Only a root-owned OPT without options is hot-path material (§6.1.2); options
            // (cookies, ECS, padding...) go to the general path, which knows what to echo.
            let rr = packet
                .get(pos..pos + OPT_RR_LEN)
                .ok_or(ParseError::Malformed)?;
            if rr[0] != 0 {
                return Err(ParseError::General);
            }
            if u16::from_be_bytes([rr[1], rr[2]]) != rtype::OPT {
                return Err(ParseError::General);
            }
            let rdlen = usize::from(u16::from_be_bytes([rr[9], rr[10]]));
            let options = packet
                .get(pos + OPT_RR_LEN..pos + OPT_RR_LEN + rdlen)
                .ok_or(ParseError::Malformed)?;
            // Options are validated and ignored (RFC 6891 §6.1.2: unknown options are
            // ignored; none we implement yet needs echoing). A length overrun is FORMERR.
            let mut o = 0usize;
            while o < options.len() {
                let hdr = options.get(o..o + 4).ok_or(ParseError::Malformed)?;
                o += 4 + usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
            }
            if o != options.len() {
                return Err(ParseError::Malformed);
            }
            edns = Some(Edns {
                udp_size: u16::from_be_bytes([rr[3], rr[4]]),
                version: rr[6],
                dnssec_ok: rr[7] & 0x80 != 0,
            });
            pos += OPT_RR_LEN + rdlen;
        }
        // Bytes after the last record are ignored, as Unbound does.
        let _ = pos;
        Ok(Self {
            packet,
            qname_end,
            qtype,
            qclass,
            edns,
        })
    }

    /// The whole query packet.
    pub fn packet(&self) -> &'a [u8] {
        self.packet
    }

    /// Message ID.
    pub fn id(&self) -> u16 {
        be16(self.packet, 0)
    }

    /// The 16-bit flags word.
    pub fn flags(&self) -> u16 {
        be16(self.packet, 2)
    }

    /// The question name in wire format, case as sent (for 0x20 echo).
    pub fn qname(&self) -> &'a [u8] {
        &self.packet[HEADER_LEN..self.qname_end]
    }

    /// The whole question entry (name, type, class): echoed byte for byte in the answer.
    pub fn question(&self) -> &'a [u8] {
        &self.packet[HEADER_LEN..self.qname_end + 4]
    }
}

/// The first question of a message, without looking at the rest: (offset just past its
/// name, qtype, qclass). `None` when QDCOUNT is 0 or the name is compressed, malformed or
/// cut. The name starts at [`HEADER_LEN`].
pub(crate) fn first_question(msg: &[u8]) -> Option<(usize, u16, u16)> {
    if msg.len() < HEADER_LEN || be16(msg, 4) == 0 {
        return None;
    }
    let end = scan_name(msg, HEADER_LEN)?;
    let f = msg.get(end..end + 4)?;
    Some((
        end,
        u16::from_be_bytes([f[0], f[1]]),
        u16::from_be_bytes([f[2], f[3]]),
    ))
}

/// Scans an uncompressed name starting at `start`; returns the offset just past it.
/// Rejects compression pointers, reserved label types, over-long labels and names.
fn scan_name(packet: &[u8], start: usize) -> Option<usize> {
    let mut pos = start;
    loop {
        let len = usize::from(*packet.get(pos)?);
        if len == 0 {
            let end = pos + 1;
            return (end - start <= crate::name::MAX_NAME_LEN).then_some(end);
        }
        if len > MAX_LABEL_LEN {
            return None;
        }
        pos += 1 + len;
        if pos - start >= crate::name::MAX_NAME_LEN {
            return None;
        }
    }
}

/// Reads a big-endian u16; the caller guarantees `at + 2 <= buf.len()`.
#[inline]
pub(crate) fn be16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Writes a big-endian u16; the caller guarantees `at + 2 <= buf.len()`.
#[inline]
pub(crate) fn put16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes our OPT record (RFC 6891 §6.1.2) into `out` at `at`; returns its length.
/// `ext_rcode` is the upper 8 bits of the extended RCODE (1 for BADVERS).
pub(crate) fn write_opt(out: &mut [u8], at: usize, udp_size: u16, ext_rcode: u8, dnssec_ok: bool) {
    let rr = &mut out[at..at + OPT_RR_LEN];
    rr[0] = 0;
    rr[1..3].copy_from_slice(&rtype::OPT.to_be_bytes());
    rr[3..5].copy_from_slice(&udp_size.to_be_bytes());
    rr[5] = ext_rcode;
    rr[6] = 0; // version 0: the only one we speak
    rr[7] = if dnssec_ok { 0x80 } else { 0 };
    rr[8] = 0;
    rr[9] = 0;
    rr[10] = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `www.example.com. A IN`, id 0x1234, RD.
    const Q: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\
\x03www\x07example\x03com\x00\x00\x01\x00\x01";

    #[test]
    fn parse_plain_query() {
        let q = Query::parse(Q).unwrap();
        assert_eq!(q.id(), 0x1234);
        assert_eq!(q.flags(), flags::RD);
        assert_eq!(q.qname(), b"\x03www\x07example\x03com\x00");
        assert_eq!(q.qtype, rtype::A);
        assert_eq!(q.qclass, 1);
        assert_eq!(q.edns, None);
        assert_eq!(q.question().len(), 17 + 4);
    }

    #[test]
    fn parse_edns_query() {
        let mut p = Q.to_vec();
        p[11] = 1;
        p.extend_from_slice(b"\x00\x00\x29\x10\x00\x00\x00\x80\x00\x00\x00");
        let q = Query::parse(&p).unwrap();
        assert_eq!(
            q.edns,
            Some(Edns {
                udp_size: 4096,
                version: 0,
                dnssec_ok: true
            })
        );
        // An option (here a 4-byte unknown one) is skipped; an overrun is malformed.
        let mut o = p.clone();
        o[Q.len() + 10] = 4;
        o.extend_from_slice(b"\x00\x0f\x00\x00");
        assert!(Query::parse(&o).is_ok());
        let mut bad = p.clone();
        bad[Q.len() + 10] = 4;
        bad.extend_from_slice(b"\x00\x0f\x00\x09");
        assert_eq!(Query::parse(&bad).unwrap_err(), ParseError::Malformed);
        // OPT with a non-root owner: general (it will be FORMERR there).
        let mut n = Q.to_vec();
        n[11] = 1;
        n.extend_from_slice(b"\x01a\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x00");
        assert_eq!(Query::parse(&n).unwrap_err(), ParseError::General);
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(Query::parse(&Q[..11]).unwrap_err(), ParseError::TooShort);
        let mut r = Q.to_vec();
        r[2] |= 0x80;
        assert_eq!(Query::parse(&r).unwrap_err(), ParseError::IsResponse);
        let mut op = Q.to_vec();
        op[2] |= 0x20; // opcode 4 NOTIFY
        assert_eq!(Query::parse(&op).unwrap_err(), ParseError::Opcode);
        let mut qd = Q.to_vec();
        qd[5] = 2;
        assert_eq!(Query::parse(&qd).unwrap_err(), ParseError::General);
        // Truncated inside the name, inside qtype, trailing garbage.
        assert_eq!(Query::parse(&Q[..20]).unwrap_err(), ParseError::Malformed);
        assert_eq!(
            Query::parse(&Q[..Q.len() - 1]).unwrap_err(),
            ParseError::Malformed
        );
        // Trailing bytes after the question are ignored (as Unbound).
        let mut t = Q.to_vec();
        t.push(0);
        assert!(Query::parse(&t).is_ok());
        // Compression pointer in the question (a pointer loop to itself).
        let mut p = Q[..12].to_vec();
        p.extend_from_slice(b"\xc0\x0c\x00\x01\x00\x01");
        assert_eq!(Query::parse(&p).unwrap_err(), ParseError::Malformed);
        // Label of 64 octets and name of 256 octets.
        let mut l = Q[..12].to_vec();
        l.push(64);
        l.extend_from_slice(&[b'a'; 64]);
        l.extend_from_slice(b"\x00\x00\x01\x00\x01");
        assert_eq!(Query::parse(&l).unwrap_err(), ParseError::Malformed);
        let mut long = Q[..12].to_vec();
        for _ in 0..5 {
            long.push(63);
            long.extend_from_slice(&[b'a'; 63]);
        }
        long.extend_from_slice(b"\x00\x00\x01\x00\x01");
        assert_eq!(Query::parse(&long).unwrap_err(), ParseError::Malformed);
    }

    #[test]
    fn opt_round_trip() {
        let mut buf = [0xffu8; OPT_RR_LEN];
        write_opt(&mut buf, 0, 1232, 1, true);
        assert_eq!(&buf, b"\x00\x00\x29\x04\xd0\x01\x00\x80\x00\x00\x00");
    }
}
