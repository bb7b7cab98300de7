//! Reading upstream replies (RFC 1035 §4.1) into owned records.
//!
//! Every byte here comes from the network and may be hostile: [`Message::parse`] returns an
//! error for anything it cannot read completely and never panics. Names and records are
//! read by the engine's one message reader ([`skua_engine::wire::record`]): names are
//! decompressed (RFC 1035 §4.1.4) with pointers that must point strictly backwards, so a
//! pointer loop cannot form, and checked against the 255-octet limit. Domain names inside
//! RDATA are decompressed for the types of its layout table
//! ([`skua_engine::wire::rdata`]: the RFC 1035 types, and RP, AFSDB, RT, SIG, PX, NXT,
//! NAPTR, SRV as RFC 3597 §4 asks receivers, DNAME and KX should a sender have compressed
//! them), so a record can be written into another message later; every other RDATA is kept
//! as received.
//!
//! Not handled here: what to believe of a reply (that is [`crate::scrub`]).

use alloc::vec::Vec;

use skua_engine::rr::rtype;
use skua_engine::wire::HEADER_LEN;
use skua_engine::wire::names;
use skua_engine::wire::record::{self, ReadError};

/// Why a reply could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MsgError {
    /// The message ends before a header, name, record or RDATA it announces.
    Truncated,
    /// A name with a bad label type, a forward or looping pointer, or over 255 octets.
    BadName,
    /// RDATA whose length does not match its type (an A record that is not 4 octets...).
    BadRdata,
    /// More than one OPT record, or an OPT record outside the additional section.
    BadOpt,
    /// More than one question.
    Questions,
}

impl core::fmt::Display for MsgError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::Truncated => "message truncated",
            Self::BadName => "malformed domain name",
            Self::BadRdata => "malformed record data",
            Self::BadOpt => "misplaced or repeated OPT record",
            Self::Questions => "more than one question",
        })
    }
}

/// The question of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// Uncompressed wire name, case as received.
    pub name: Vec<u8>,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

/// One resource record, names decompressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Owner, uncompressed wire format, case as received.
    pub owner: Vec<u8>,
    /// TYPE.
    pub rtype: u16,
    /// CLASS.
    pub class: u16,
    /// TTL; values with the top bit set read as 0 (RFC 2181 §8).
    pub ttl: u32,
    /// RDATA with any domain names in it decompressed.
    pub rdata: Vec<u8>,
}

/// The EDNS facts of a reply (RFC 6891 §6.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opt {
    /// Sender's UDP payload size.
    pub udp_size: u16,
    /// Upper 8 bits of the extended RCODE.
    pub ext_rcode: u8,
    /// EDNS version.
    pub version: u8,
    /// DO bit.
    pub dnssec_ok: bool,
}

/// A parsed message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// ID.
    pub id: u16,
    /// The flags word (QR, opcode, AA, TC, RD, RA, Z, AD, CD, RCODE).
    pub flags: u16,
    /// The question, when there is one.
    pub question: Option<Question>,
    /// Answer section.
    pub answer: Vec<Record>,
    /// Authority section.
    pub authority: Vec<Record>,
    /// Additional section, without the OPT record.
    pub additional: Vec<Record>,
    /// The OPT record.
    pub opt: Option<Opt>,
}

impl Message {
    /// The full RCODE (with the OPT record's upper bits, RFC 6891 §6.1.3).
    pub fn rcode(&self) -> u16 {
        let low = self.flags & 0x000f;
        match self.opt {
            Some(o) => (u16::from(o.ext_rcode) << 4) | low,
            None => low,
        }
    }

    /// Reads a whole message. Trailing bytes after the last announced record are ignored
    /// (as Unbound and BIND do).
    pub fn parse(msg: &[u8]) -> Result<Self, MsgError> {
        if msg.len() < HEADER_LEN {
            return Err(MsgError::Truncated);
        }
        let be = |at: usize| u16::from_be_bytes([msg[at], msg[at + 1]]);
        let (qd, an, ns, ar) = (be(4), be(6), be(8), be(10));
        let mut m = Message {
            id: be(0),
            flags: be(2),
            ..Message::default()
        };
        let mut pos = HEADER_LEN;
        match qd {
            0 => {}
            1 => {
                let q = record::read_question(msg, pos)?;
                pos = q.end;
                m.question = Some(Question {
                    name: q.name,
                    qtype: q.qtype,
                    qclass: q.qclass,
                });
            }
            _ => return Err(MsgError::Questions),
        }
        // Counts are bounded by what the message can hold (a record is at least 11 octets),
        // so a forged count cannot make us reserve much.
        let cap = |n: u16| usize::from(n).min(msg.len() / 11);
        m.answer.reserve(cap(an));
        for _ in 0..an {
            let (r, _, next) = read_record(msg, pos)?;
            if r.rtype == rtype::OPT {
                return Err(MsgError::BadOpt);
            }
            m.answer.push(r);
            pos = next;
        }
        m.authority.reserve(cap(ns));
        for _ in 0..ns {
            let (r, _, next) = read_record(msg, pos)?;
            if r.rtype == rtype::OPT {
                return Err(MsgError::BadOpt);
            }
            m.authority.push(r);
            pos = next;
        }
        m.additional.reserve(cap(ar));
        for _ in 0..ar {
            let (r, ttl, next) = read_record(msg, pos)?;
            pos = next;
            if r.rtype == rtype::OPT {
                // RFC 6891 §6.1.1: one OPT, owner the root.
                if m.opt.is_some() || r.owner != [0] {
                    return Err(MsgError::BadOpt);
                }
                m.opt = Some(Opt {
                    udp_size: r.class,
                    ext_rcode: (ttl >> 24) as u8,
                    version: (ttl >> 16) as u8,
                    dnssec_ok: ttl & 0x8000 != 0,
                });
                continue;
            }
            m.additional.push(r);
        }
        Ok(m)
    }
}

/// Reads one record at `pos`: the record, its raw TTL field (the OPT record keeps its
/// flags there) and the offset after it.
fn read_record(msg: &[u8], pos: usize) -> Result<(Record, u32, usize), MsgError> {
    let (v, rdata) = record::read_record(msg, pos).map_err(MsgError::from)?;
    let ttl = if v.ttl & 0x8000_0000 != 0 { 0 } else { v.ttl };
    let end = v.end();
    let record = Record {
        owner: v.owner,
        rtype: v.rtype,
        class: v.class,
        ttl,
        rdata,
    };
    Ok((record, v.ttl, end))
}

impl From<ReadError> for MsgError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Truncated => Self::Truncated,
            ReadError::BadName => Self::BadName,
            ReadError::BadRdata => Self::BadRdata,
        }
    }
}

/// Reads a possibly compressed name at `pos`; returns it uncompressed and the offset just
/// after its in-place part (the engine's decompressor, [`skua_engine::wire::names`]: every
/// pointer points strictly backwards, so the walk ends).
pub fn read_name(msg: &[u8], pos: usize) -> Result<(Vec<u8>, usize), MsgError> {
    names::read_name(msg, pos).map_err(MsgError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn header(id: u16, flags: u16, counts: [u16; 4]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(&flags.to_be_bytes());
        for c in counts {
            v.extend_from_slice(&c.to_be_bytes());
        }
        v
    }

    #[test]
    fn reads_compressed_reply() {
        // www.example. A? -> www CNAME host.example. (compressed), host A 192.0.2.1
        let mut m = header(7, 0x8180, [1, 2, 0, 1]);
        m.extend_from_slice(b"\x03www\x07example\x00\x00\x01\x00\x01");
        m.extend_from_slice(b"\xc0\x0c\x00\x05\x00\x01\x00\x00\x01\x00\x00\x07\x04host\xc0\x10");
        let host = m.len() - 7;
        m.extend_from_slice(&[0xc0, host as u8]);
        m.extend_from_slice(b"\x00\x01\x00\x01\xff\x00\x00\x00\x00\x04\xc0\x00\x02\x01");
        m.extend_from_slice(b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00");
        let p = Message::parse(&m).unwrap();
        assert_eq!(p.id, 7);
        let q = p.question.as_ref().unwrap();
        assert_eq!(q.name, b"\x03www\x07example\x00");
        assert_eq!(p.answer.len(), 2);
        assert_eq!(p.answer[0].owner, b"\x03www\x07example\x00");
        assert_eq!(p.answer[0].rdata, b"\x04host\x07example\x00");
        assert_eq!(p.answer[0].ttl, 256);
        assert_eq!(p.answer[1].owner, b"\x04host\x07example\x00");
        // Top bit set: 0 (RFC 2181 §8).
        assert_eq!(p.answer[1].ttl, 0);
        assert_eq!(p.answer[1].rdata, [192, 0, 2, 1]);
        assert_eq!(
            p.opt,
            Some(Opt {
                udp_size: 1232,
                ext_rcode: 0,
                version: 0,
                dnssec_ok: true
            })
        );
    }

    #[test]
    fn refuses_loops_forward_pointers_and_bad_lengths() {
        let mut m = header(1, 0x8180, [1, 1, 0, 0]);
        m.extend_from_slice(b"\x01a\x00\x00\x01\x00\x01");
        // Owner pointing at itself.
        let mut l = m.clone();
        l.extend_from_slice(&[0xc0, 19]);
        l.extend_from_slice(b"\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x01\x02\x03\x04");
        assert_eq!(Message::parse(&l), Err(MsgError::BadName));
        // Pointer forwards.
        let mut f = m.clone();
        f.extend_from_slice(&[0xc0, 40]);
        f.extend_from_slice(b"\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x01\x02\x03\x04");
        assert_eq!(Message::parse(&f), Err(MsgError::BadName));
        // A record with 5 octets.
        let mut a = m.clone();
        a.extend_from_slice(
            b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x05\x01\x02\x03\x04\x05",
        );
        assert_eq!(Message::parse(&a), Err(MsgError::BadRdata));
        // RDLENGTH past the end.
        let mut t = m.clone();
        t.extend_from_slice(b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x01\x02");
        assert_eq!(Message::parse(&t), Err(MsgError::Truncated));
        // CNAME whose name runs past its RDLENGTH.
        let mut c = m.clone();
        c.extend_from_slice(b"\xc0\x0c\x00\x05\x00\x01\x00\x00\x00\x01\x00\x02\x01b\x00");
        assert_eq!(Message::parse(&c), Err(MsgError::BadRdata));
        // Two questions.
        let mut two = header(1, 0x8180, [2, 0, 0, 0]);
        two.extend_from_slice(b"\x01a\x00\x00\x01\x00\x01\x01a\x00\x00\x01\x00\x01");
        assert_eq!(Message::parse(&two), Err(MsgError::Questions));
    }

    #[test]
    fn name_length_limit_counts_decompressed_octets() {
        // A 249-octet name in the question, then an owner that adds a label to it through
        // a pointer.
        let mut m = header(1, 0x8180, [1, 1, 0, 0]);
        let mut q = Vec::new();
        for _ in 0..4 {
            q.push(61);
            q.extend_from_slice(&[b'a'; 61]);
        }
        q.push(0);
        assert_eq!(q.len(), 249);
        m.extend_from_slice(&q);
        m.extend_from_slice(b"\x00\x01\x00\x01");
        let mut long = m.clone();
        long.extend_from_slice(
            b"\x07abcdefg\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x01\x02\x03\x04",
        );
        assert_eq!(Message::parse(&long), Err(MsgError::BadName));
        // 6 + 249 = 255 octets: the longest name there is.
        m.extend_from_slice(
            b"\x05abcde\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x01\x02\x03\x04",
        );
        assert_eq!(Message::parse(&m).unwrap().answer[0].owner.len(), 255);
        let ok = vec![0u8; 12];
        assert!(Message::parse(&ok).is_ok());
    }
}
