//! The RDATA layout table: for each type whose RDATA a reader must understand, the
//! sequence of its fields, and which of its domain names may be compressed.
//!
//! RFC 3597 §4 sets the rules this table encodes:
//! - only the types of RFC 1035 are "well-known": their names may be compressed by a
//!   sender and a receiver MUST decompress them (NS, MD, MF, CNAME, SOA, MB, MG, MR, PTR,
//!   MINFO, MX: [`Compression::Rfc1035`]);
//! - a receiver SHOULD also decompress RP, AFSDB, RT, SIG, PX, NXT, NAPTR and SRV (earlier
//!   specifications allowed their senders to compress), but a sender MUST NOT compress
//!   them ([`Compression::Receive`]);
//! - every other type's names are never compressed. DNAME (RFC 6672 §2.5) and KX
//!   (RFC 2230) say so themselves ([`Compression::Never`]); they are in the table because
//!   a record whose target was compressed anyway is decompressed when read (as Knot and
//!   Unbound do), never kept with a pointer that would mean something else in the next
//!   message. A type not in the table (TXT, RRSIG, SVCB, unknown types...) is copied as
//!   received: its RDATA is opaque to the reader (RFC 3597 §4), and a pointer-looking
//!   byte in it is data.
//!
//! Types are in the table only when a reader needs their layout: the ones with names
//! above, and A and AAAA, whose fixed lengths are checked. The presentation format
//! ([`crate::text`]) knows many more.

use alloc::vec::Vec;

use super::error::ReadError;
use super::names::read_name;

/// Whether a name in RDATA may be compressed (RFC 3597 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// A type of RFC 1035: a sender may compress the name, a receiver must decompress it.
    Rfc1035,
    /// A type RFC 3597 §4 lists for receivers: decompressed when read, never compressed
    /// when written.
    Receive,
    /// A name its type's specification forbids compressing: written in full; read
    /// leniently (decompressed) should a sender have compressed it.
    Never,
}

/// One field of RDATA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// A domain name.
    Name(Compression),
    /// Octets of a fixed length (16- and 32-bit numbers, addresses).
    Fixed(usize),
    /// A character-string: a length octet and that many octets (RFC 1035 §3.3).
    CharString,
    /// Everything up to the end of the RDATA (may be empty).
    Rest,
}

use Compression::{Never, Receive, Rfc1035};
use Field::{CharString, Fixed, Name, Rest};

/// The fields of `rtype`'s RDATA, in order, when a reader needs them; `None` for a type
/// whose RDATA is copied as received.
pub fn layout(rtype: u16) -> Option<&'static [Field]> {
    Some(match rtype {
        1 => &[Fixed(4)],   // A (RFC 1035 §3.4.1)
        28 => &[Fixed(16)], // AAAA (RFC 3596 §2.2)
        // NS, MD, MF, CNAME, MB, MG, MR, PTR (RFC 1035 §3.3)
        2 | 3 | 4 | 5 | 7 | 8 | 9 | 12 => &[Name(Rfc1035)],
        6 => &[Name(Rfc1035), Name(Rfc1035), Fixed(20)], // SOA: MNAME RNAME, five numbers
        14 => &[Name(Rfc1035), Name(Rfc1035)],           // MINFO
        15 => &[Fixed(2), Name(Rfc1035)],                // MX
        17 => &[Name(Receive), Name(Receive)],           // RP (RFC 1183 §2.2)
        18 | 21 => &[Fixed(2), Name(Receive)],           // AFSDB, RT (RFC 1183)
        24 => &[Fixed(18), Name(Receive), Rest],         // SIG (RFC 2535 §4.1): signer
        26 => &[Fixed(2), Name(Receive), Name(Receive)], // PX (RFC 2163)
        30 => &[Name(Receive), Rest],                    // NXT (RFC 2535 §5.2)
        33 => &[Fixed(6), Name(Receive)],                // SRV (RFC 2782)
        // NAPTR (RFC 3403 §4.1): order, preference, flags, services, regexp, replacement
        35 => &[Fixed(4), CharString, CharString, CharString, Name(Receive)],
        36 => &[Fixed(2), Name(Never)], // KX (RFC 2230)
        39 => &[Name(Never)],           // DNAME (RFC 6672 §2.5)
        _ => return None,
    })
}

/// True when a writer may compress the names of `rtype`'s RDATA: the RFC 1035 types
/// (RFC 3597 §4).
pub fn compressible(rtype: u16) -> bool {
    layout(rtype).is_some_and(|f| f.contains(&Name(Rfc1035)))
}

/// Reads the RDATA of a record of type `rtype` at `msg[start..end]`: its names decompressed
/// when the type is in the [`layout`] table (which must then describe it exactly), a copy
/// of the octets otherwise.
///
/// Errors: [`ReadError::Truncated`] when `end` lies past the message, [`ReadError::BadName`]
/// for a malformed name, [`ReadError::BadRdata`] when the fields do not fill the RDATA
/// exactly (a name or string running past its end, octets left over, an A record that is
/// not 4 octets).
pub fn read_rdata(msg: &[u8], rtype: u16, start: usize, end: usize) -> Result<Vec<u8>, ReadError> {
    let raw = msg
        .get(start..end)
        .filter(|_| start <= end)
        .ok_or(ReadError::Truncated)?;
    let Some(fields) = layout(rtype) else {
        return Ok(raw.to_vec());
    };
    // Fields are read within the RDATA: a name's labels cannot run past it, and its
    // pointers, which point backwards, land before it.
    let within = &msg[..end];
    let mut out = Vec::with_capacity(raw.len() + 16);
    let mut pos = start;
    for f in fields {
        match *f {
            Name(_) => {
                let (name, next) = read_name(within, pos).map_err(|e| match e {
                    ReadError::Truncated => ReadError::BadRdata,
                    e => e,
                })?;
                out.extend_from_slice(&name);
                pos = next;
            }
            Fixed(n) => {
                let b = within.get(pos..pos + n).ok_or(ReadError::BadRdata)?;
                out.extend_from_slice(b);
                pos += n;
            }
            CharString => {
                let len = usize::from(*within.get(pos).ok_or(ReadError::BadRdata)?);
                let b = within.get(pos..pos + 1 + len).ok_or(ReadError::BadRdata)?;
                out.extend_from_slice(b);
                pos += 1 + len;
            }
            Rest => {
                out.extend_from_slice(&within[pos..]);
                pos = end;
            }
        }
    }
    if pos != end {
        return Err(ReadError::BadRdata);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A message of `prefix` (a name `\x07example\x00` at 12) then RDATA `rd`: (message,
    /// RDATA start, end).
    fn msg(rd: &[u8]) -> (Vec<u8>, usize, usize) {
        let mut m = vec![0u8; 12];
        m.extend_from_slice(b"\x07example\x00");
        let start = m.len();
        m.extend_from_slice(rd);
        let end = m.len();
        (m, start, end)
    }

    #[test]
    fn table_follows_rfc_3597() {
        // Must decompress (RFC 1035 types), may compress when writing.
        for t in [2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 15] {
            assert!(compressible(t), "{t}");
            assert!(layout(t).unwrap().contains(&Name(Rfc1035)), "{t}");
        }
        // Should decompress, must not compress.
        for t in [17, 18, 21, 24, 26, 30, 33, 35] {
            assert!(!compressible(t), "{t}");
            assert!(layout(t).unwrap().contains(&Name(Receive)), "{t}");
        }
        // Never compressed: DNAME, KX; opaque: TXT, RRSIG, NSEC, SVCB, HTTPS, unknown.
        for t in [36, 39] {
            assert!(!compressible(t), "{t}");
        }
        for t in [16, 46, 47, 64, 65, 0xff00] {
            assert_eq!(layout(t), None, "{t}");
        }
    }

    #[test]
    fn names_of_listed_types_are_decompressed() {
        // MX 10 mail.example. with "example." compressed.
        let (m, s, e) = msg(b"\x00\x0a\x04mail\xc0\x0c");
        assert_eq!(
            read_rdata(&m, 15, s, e).unwrap(),
            b"\x00\x0a\x04mail\x07example\x00"
        );
        // The same octets in a TXT record or an unknown type stay as they are.
        assert_eq!(read_rdata(&m, 16, s, e).unwrap(), &m[s..e]);
        assert_eq!(read_rdata(&m, 0xff00, s, e).unwrap(), &m[s..e]);
    }

    #[test]
    fn rdata_must_match_its_layout() {
        // A of 5 octets, AAAA of 4.
        let (m, s, e) = msg(&[1, 2, 3, 4, 5]);
        assert_eq!(read_rdata(&m, 1, s, e), Err(ReadError::BadRdata));
        let (m, s, e) = msg(&[1, 2, 3, 4]);
        assert_eq!(read_rdata(&m, 28, s, e), Err(ReadError::BadRdata));
        // A name with an octet after it.
        let (m, s, e) = msg(b"\x01a\x00\x01");
        assert_eq!(read_rdata(&m, 2, s, e), Err(ReadError::BadRdata));
        // A name running past the RDATA (which ends inside it).
        let (m, s, _) = msg(b"\x01a\x00");
        assert_eq!(read_rdata(&m, 2, s, s + 2), Err(ReadError::BadRdata));
        // Empty RDATA for a name.
        assert_eq!(read_rdata(&m, 2, s, s), Err(ReadError::BadRdata));
        // A pointer whose second octet is past the RDATA.
        let (m, s, _) = msg(&[0xc0, 12]);
        assert_eq!(read_rdata(&m, 5, s, s + 1), Err(ReadError::BadRdata));
        // SOA short of its numbers; NAPTR whose string runs past the end.
        let (m, s, e) = msg(b"\x00\x00\x00\x00\x00\x01");
        assert_eq!(read_rdata(&m, 6, s, e), Err(ReadError::BadRdata));
        let (m, s, e) = msg(b"\x00\x01\x00\x02\x05ab");
        assert_eq!(read_rdata(&m, 35, s, e), Err(ReadError::BadRdata));
        // RDATA past the message.
        assert_eq!(read_rdata(&m, 16, s, e + 1), Err(ReadError::Truncated));
        assert_eq!(read_rdata(&m, 16, e, s), Err(ReadError::Truncated));
    }

    #[test]
    fn bad_pointers_in_rdata_are_errors() {
        // Forwards (to the RDATA's own end), to itself.
        let (m, s, e) = msg(&[0xc0, 23, 0]);
        assert_eq!(read_rdata(&m, 5, s, e), Err(ReadError::BadName));
        let (m, s, e) = msg(&[0xc0, 21]);
        assert_eq!(read_rdata(&m, 12, s, e), Err(ReadError::BadName));
    }
}
