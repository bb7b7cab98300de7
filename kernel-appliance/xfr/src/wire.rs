//! The DNS message format as far as transfers need it (RFC 1035 §4.1): reading names with
//! compression pointers, records and questions from untrusted bytes (through the engine's
//! one message reader, [`skua_engine::wire::record`]), and writing messages with name
//! compression (§4.1.4).
//!
//! Every reader returns [`WireError`] on malformed input, never panics, and bounds its work:
//! a name is at most 255 octets, a compression pointer must point backwards and a name
//! follows a bounded number of them, so a pointer loop cannot make a reader spin.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;

use skua_engine::name::{MAX_LABEL_LEN, WireName, wire_name_len};
use skua_engine::rr::{self, Rr};
use skua_engine::wire::record::{self, ReadError};
use skua_engine::wire::{names, rdata};

/// Header length (RFC 1035 §4.1.1).
pub const HEADER_LEN: usize = 12;
/// Largest message over TCP (its length prefix is 16 bits, RFC 1035 §4.2.2).
pub const MAX_MESSAGE_LEN: usize = 65535;

/// Opcodes (RFC 1035 §4.1.1, RFC 1996 §3.1).
#[allow(missing_docs)]
pub mod opcode {
    pub const QUERY: u8 = 0;
    pub const NOTIFY: u8 = 4;
}

/// Header flag bits in the 16-bit flags word (RFC 1035 §4.1.1).
#[allow(missing_docs)]
pub mod flags {
    pub const QR: u16 = 0x8000;
    pub const AA: u16 = 0x0400;
    pub const TC: u16 = 0x0200;
    pub const RD: u16 = 0x0100;
}

/// Response codes (RFC 1035 §4.1.1, RFC 2845 §1.7 / RFC 8945 §3 for NOTAUTH).
#[allow(missing_docs)]
pub mod rcode {
    pub const NOERROR: u8 = 0;
    pub const FORMERR: u8 = 1;
    pub const SERVFAIL: u8 = 2;
    pub const NXDOMAIN: u8 = 3;
    pub const NOTIMP: u8 = 4;
    pub const REFUSED: u8 = 5;
    pub const NOTAUTH: u8 = 9;
}

/// Why bytes are not a usable message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The message ends inside a field.
    Truncated,
    /// A name is malformed: a label over 63 octets, a name over 255, a reserved label type,
    /// a pointer that does not point backwards.
    BadName,
    /// The counts or layout are not what this kind of message must have.
    Layout(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => f.write_str("message truncated"),
            WireError::BadName => f.write_str("malformed name"),
            WireError::Layout(m) => f.write_str(m),
        }
    }
}

impl core::error::Error for WireError {}

/// The big-endian u16 at `off`.
pub fn be16(b: &[u8], off: usize) -> Result<u16, WireError> {
    match b.get(off..off + 2) {
        Some(s) => Ok(u16::from_be_bytes([s[0], s[1]])),
        None => Err(WireError::Truncated),
    }
}

/// The big-endian u32 at `off`.
pub fn be32(b: &[u8], off: usize) -> Result<u32, WireError> {
    match b.get(off..off + 4) {
        Some(s) => Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
        None => Err(WireError::Truncated),
    }
}

/// The header's four counts: QDCOUNT, ANCOUNT, NSCOUNT, ARCOUNT.
pub fn counts(msg: &[u8]) -> Result<[u16; 4], WireError> {
    Ok([be16(msg, 4)?, be16(msg, 6)?, be16(msg, 8)?, be16(msg, 10)?])
}

impl From<ReadError> for WireError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Truncated => WireError::Truncated,
            ReadError::BadName => WireError::BadName,
            ReadError::BadRdata => WireError::Layout("RDATA does not match its type"),
        }
    }
}

/// Reads the possibly compressed name at `off`: the name uncompressed (case kept) and the
/// offset just after it where it is written (after the first pointer, if any).
pub fn read_name(msg: &[u8], off: usize) -> Result<(WireName, usize), WireError> {
    let (name, end) = names::read_name(msg, off)?;
    WireName::from_wire(&name)
        .map(|n| (n, end))
        .map_err(|_| WireError::BadName)
}

/// The question at `off`: (name, type, class, offset after it).
pub fn read_question(msg: &[u8], off: usize) -> Result<(WireName, u16, u16, usize), WireError> {
    let q = record::read_question(msg, off)?;
    let name = WireName::from_wire(&q.name).map_err(|_| WireError::BadName)?;
    Ok((name, q.qtype, q.qclass, q.end))
}

/// One resource record as it sits in a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrView {
    /// Offset of its first byte (the owner name).
    pub start: usize,
    /// Owner, uncompressed.
    pub owner: WireName,
    /// Type.
    pub rtype: u16,
    /// Class.
    pub class: u16,
    /// TTL.
    pub ttl: u32,
    /// Offset of the RDATA.
    pub rdata: usize,
    /// RDLENGTH.
    pub rdlen: usize,
}

impl RrView {
    /// Offset just after the record.
    pub fn end(&self) -> usize {
        self.rdata + self.rdlen
    }
}

/// The record at `off`.
pub fn read_rr(msg: &[u8], off: usize) -> Result<RrView, WireError> {
    let v = record::read_record_view(msg, off)?;
    Ok(RrView {
        start: v.start,
        owner: WireName::from_wire(&v.owner).map_err(|_| WireError::BadName)?,
        rtype: v.rtype,
        class: v.class,
        ttl: v.ttl,
        rdata: v.rdata,
        rdlen: v.rdlen,
    })
}

/// The RDATA of `v` uncompressed, by the engine's RDATA layout table
/// ([`skua_engine::wire::rdata`]): the names of the types RFC 3597 §4 lets a sender
/// compress, or asks a receiver to decompress, are expanded; other RDATA is copied.
pub fn rdata_uncompressed(msg: &[u8], v: &RrView) -> Result<Vec<u8>, WireError> {
    Ok(rdata::read_rdata(msg, v.rtype, v.rdata, v.end())?)
}

/// The record at `off` as an owned [`Rr`] (RDATA uncompressed) and the offset after it.
pub fn read_owned_rr(msg: &[u8], off: usize) -> Result<(Rr, usize), WireError> {
    let v = read_rr(msg, off)?;
    let rdata = rdata_uncompressed(msg, &v)?;
    let end = v.end();
    Ok((
        Rr {
            owner: v.owner,
            rtype: v.rtype,
            class: v.class,
            ttl: v.ttl,
            rdata,
        },
        end,
    ))
}

/// The serial of SOA RDATA in uncompressed form.
pub fn soa_serial(rdata: &[u8]) -> Option<u32> {
    let m = wire_name_len(rdata)?;
    let r = wire_name_len(rdata.get(m..)?)?;
    let s = rdata.get(m + r..m + r + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// A message being written: header, question, records with name compression. Records are
/// appended whole or not at all ([`MessageWriter::try_rr`]), so a caller can fill messages
/// up to a size.
#[derive(Clone, Debug)]
pub struct MessageWriter {
    buf: Vec<u8>,
    /// Name suffixes already written (case kept), and where (only offsets a pointer can
    /// reach, below 0x4000).
    names: BTreeMap<Vec<u8>, u16>,
    counts: [u16; 4],
}

/// The sections of a message, for [`MessageWriter::try_rr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Answer.
    Answer = 1,
    /// Authority.
    Authority = 2,
    /// Additional.
    Additional = 3,
}

impl MessageWriter {
    /// A message with this ID and flags word (opcode and RCODE included), no records.
    pub fn new(id: u16, flags: u16) -> Self {
        let mut buf = Vec::with_capacity(512);
        buf.extend_from_slice(&id.to_be_bytes());
        buf.extend_from_slice(&flags.to_be_bytes());
        buf.extend_from_slice(&[0; 8]);
        MessageWriter {
            buf,
            names: BTreeMap::new(),
            counts: [0; 4],
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when no record or question was written.
    pub fn is_empty(&self) -> bool {
        self.counts == [0; 4]
    }

    /// Records in `section` so far.
    pub fn count(&self, section: Section) -> u16 {
        self.counts[section as usize]
    }

    /// Appends the question (call before any record).
    pub fn question(&mut self, name: &WireName, qtype: u16, qclass: u16) {
        self.name(name.as_bytes());
        self.buf.extend_from_slice(&qtype.to_be_bytes());
        self.buf.extend_from_slice(&qclass.to_be_bytes());
        self.counts[0] += 1;
    }

    /// Appends `rr` to `section` if the message stays within `limit` bytes; `false` (and
    /// nothing written) otherwise.
    pub fn try_rr(&mut self, section: Section, rr: &Rr, limit: usize) -> bool {
        let mark = self.buf.len();
        let names_before = self.names.len();
        self.name(rr.owner.as_bytes());
        self.buf.extend_from_slice(&rr.rtype.to_be_bytes());
        self.buf.extend_from_slice(&rr.class.to_be_bytes());
        self.buf.extend_from_slice(&rr.ttl.to_be_bytes());
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        let mut pos = 0usize;
        for at in rr::compressible_names(rr.rtype, &rr.rdata) {
            let Some(n) = rr.rdata.get(at..).and_then(wire_name_len) else {
                break;
            };
            if at < pos {
                break;
            }
            self.buf.extend_from_slice(&rr.rdata[pos..at]);
            self.name(&rr.rdata[at..at + n]);
            pos = at + n;
        }
        self.buf
            .extend_from_slice(&rr.rdata[pos.min(rr.rdata.len())..]);
        let rdlen = self.buf.len() - len_at - 2;
        if self.buf.len() > limit || rdlen > usize::from(u16::MAX) {
            self.buf.truncate(mark);
            if self.names.len() != names_before {
                self.names.retain(|_, off| usize::from(*off) < mark);
            }
            return false;
        }
        // Cannot truncate: checked against u16::MAX above.
        self.buf[len_at..len_at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
        self.counts[section as usize] += 1;
        true
    }

    /// Writes `name` (valid uncompressed wire form) compressed against the names written
    /// before, and remembers its suffixes.
    fn name(&mut self, name: &[u8]) {
        let mut pos = 0usize;
        while pos < name.len() {
            let len = usize::from(name[pos]);
            if len == 0 || len > MAX_LABEL_LEN {
                self.buf.push(0);
                return;
            }
            // Exact bytes: compressing against a name of other case would change the case
            // of the data sent (RFC 4343 §4.1 asks servers to keep it).
            let suffix: Vec<u8> = name[pos..].to_vec();
            if let Some(&off) = self.names.get(&suffix) {
                self.buf.extend_from_slice(&(0xc000 | off).to_be_bytes());
                return;
            }
            if let Ok(off) = u16::try_from(self.buf.len())
                && off < 0x4000
            {
                self.names.insert(suffix, off);
            }
            self.buf
                .extend_from_slice(&name[pos..(pos + 1 + len).min(name.len())]);
            pos += 1 + len;
        }
        self.buf.push(0);
    }

    /// The message.
    pub fn finish(mut self) -> Vec<u8> {
        for (i, c) in self.counts.iter().enumerate() {
            self.buf[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_be_bytes());
        }
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use skua_engine::text::parse_rr;

    fn rr(s: &str) -> Rr {
        parse_rr(s, None, 3600).unwrap()
    }

    #[test]
    fn written_records_read_back_with_compression() {
        let mut w = MessageWriter::new(7, flags::QR | flags::AA);
        let apex = WireName::parse("Example.", None).unwrap();
        w.question(&apex, 252, 1);
        let recs = [
            rr("example. 3600 IN SOA ns1.example. admin.example. 5 7200 3600 1209600 300"),
            rr("www.example. 300 IN A 198.18.0.1"),
            rr("example. 300 IN MX 10 mail.EXAMPLE."),
            rr("x.example. 300 IN TXT \"hello\""),
        ];
        for r in &recs {
            assert!(w.try_rr(Section::Answer, r, 65535));
        }
        let m = w.finish();
        assert_eq!(counts(&m).unwrap(), [1, 4, 0, 0]);
        let (q, qt, qc, mut off) = read_question(&m, HEADER_LEN).unwrap();
        assert_eq!((q.to_string().as_str(), qt, qc), ("Example.", 252, 1));
        for r in &recs {
            let (got, next) = read_owned_rr(&m, off).unwrap();
            // Case kept, names in RDATA expanded back.
            assert_eq!(&got, r);
            off = next;
        }
        assert_eq!(off, m.len());
        // Compression happened: "example." is written once in full (and "Example." in
        // the question, whose case differs, once too).
        let full = b"\x07example\x00";
        let n = m.windows(full.len()).filter(|w| w == full).count();
        assert_eq!(n, 1, "{m:?}");
    }

    #[test]
    fn a_record_over_the_limit_is_not_written() {
        let mut w = MessageWriter::new(1, 0);
        let a = rr("a.example. 300 IN A 198.18.0.1");
        assert!(w.try_rr(Section::Answer, &a, 100));
        let before = w.len();
        let big = rr(
            "b.example. 300 IN TXT \"0123456789012345678901234567890123456789012345678901234567890123456789\"",
        );
        assert!(!w.try_rr(Section::Answer, &big, 100));
        assert_eq!(w.len(), before);
        // The names of the rolled-back record are forgotten: the next one is correct.
        let b = rr("b.example. 300 IN A 198.18.0.2");
        assert!(w.try_rr(Section::Answer, &b, 100));
        let m = w.finish();
        let (r1, o) = read_owned_rr(&m, HEADER_LEN).unwrap();
        let (r2, _) = read_owned_rr(&m, o).unwrap();
        assert_eq!((r1, r2), (a, b));
    }

    #[test]
    fn pointer_loops_and_forward_pointers_are_errors() {
        let mut m = vec![0u8; HEADER_LEN];
        m.extend_from_slice(&[0xc0, 12]); // points at itself
        assert_eq!(read_name(&m, 12), Err(WireError::BadName));
        let mut m = vec![0u8; HEADER_LEN];
        m.extend_from_slice(&[0xc0, 14, 0]); // points forwards
        assert_eq!(read_name(&m, 12), Err(WireError::BadName));
        let mut m = vec![0u8; HEADER_LEN];
        m.extend_from_slice(&[0x40, 0]); // extended label type
        assert_eq!(read_name(&m, 12), Err(WireError::BadName));
        assert_eq!(read_name(&[3, b'a'], 0), Err(WireError::Truncated));
    }

    #[test]
    fn long_names_through_pointers_are_refused() {
        // A 63-octet label repeated through backward pointers would exceed 255 octets.
        let mut m = vec![0u8; HEADER_LEN];
        let mut prev: Option<u16> = None;
        for _ in 0..5 {
            let at = m.len();
            m.push(63);
            m.extend_from_slice(&[b'a'; 63]);
            match prev {
                Some(p) => m.extend_from_slice(&(0xc000u16 | p).to_be_bytes()),
                None => m.push(0),
            }
            prev = Some(at as u16);
        }
        assert_eq!(
            read_name(&m, usize::from(prev.unwrap())),
            Err(WireError::BadName)
        );
    }
}
