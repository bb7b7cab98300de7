//! Reading upstream replies (RFC 1035 §4.1) into owned records.
//!
//! Every byte here comes from the network and may be hostile: [`Message::parse`] returns an
//! error for anything it cannot read completely and never panics. Names are decompressed
//! (RFC 1035 §4.1.4) with pointers that must point strictly backwards, so a pointer loop
//! cannot form, and the result is checked against the 255-octet limit. Domain names inside
//! RDATA are decompressed for the types whose RDATA may be compressed (RFC 3597 §4: the
//! RFC 1035 types, and RP, AFSDB, RT, PX, SRV, NAPTR, KX as receivers should), so a record
//! can be written into another message later; every other RDATA is kept as received.
//!
//! Not handled here: what to believe of a reply (that is [`crate::scrub`]).

use alloc::vec::Vec;

use skua_engine::name::{MAX_LABEL_LEN, MAX_NAME_LEN};
use skua_engine::rr::rtype;
use skua_engine::wire::HEADER_LEN;

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
                let (name, next) = read_name(msg, pos)?;
                let fixed = msg.get(next..next + 4).ok_or(MsgError::Truncated)?;
                m.question = Some(Question {
                    name,
                    qtype: u16::from_be_bytes([fixed[0], fixed[1]]),
                    qclass: u16::from_be_bytes([fixed[2], fixed[3]]),
                });
                pos = next + 4;
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
    let (owner, next) = read_name(msg, pos)?;
    let fixed = msg.get(next..next + 10).ok_or(MsgError::Truncated)?;
    let rt = u16::from_be_bytes([fixed[0], fixed[1]]);
    let class = u16::from_be_bytes([fixed[2], fixed[3]]);
    let ttl_raw = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    let rdlen = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
    let start = next + 10;
    let end = start + rdlen;
    if end > msg.len() {
        return Err(MsgError::Truncated);
    }
    let rdata = read_rdata(msg, rt, start, end)?;
    let ttl = if ttl_raw & 0x8000_0000 != 0 {
        0
    } else {
        ttl_raw
    };
    let record = Record {
        owner,
        rtype: rt,
        class,
        ttl,
        rdata,
    };
    Ok((record, ttl_raw, end))
}

/// How a type's RDATA is laid out, for decompression: a sequence of fields.
#[derive(Clone, Copy)]
enum Field {
    /// A domain name that may be compressed.
    Name,
    /// Fixed octets.
    Fixed(usize),
    /// A character string (length octet + data).
    Str,
}

fn layout(rt: u16) -> Option<&'static [Field]> {
    use Field::*;
    Some(match rt {
        // NS, MD, MF, CNAME, MB, MG, MR, PTR, DNAME (RFC 6672 §2.5 forbids compressing
        // DNAME's target, but a receiver reading one anyway is harmless).
        2 | 3 | 4 | 5 | 7 | 8 | 9 | 12 | 39 => &[Name],
        6 => &[Name, Name, Fixed(20)],          // SOA
        14 | 17 => &[Name, Name],               // MINFO, RP
        15 | 18 | 21 | 36 => &[Fixed(2), Name], // MX, AFSDB, RT, KX
        26 => &[Fixed(2), Name, Name],          // PX
        33 => &[Fixed(6), Name],                // SRV
        35 => &[Fixed(4), Str, Str, Str, Name], // NAPTR
        _ => return None,
    })
}

fn read_rdata(msg: &[u8], rt: u16, start: usize, end: usize) -> Result<Vec<u8>, MsgError> {
    let raw = &msg[start..end];
    match rt {
        rtype::A if raw.len() != 4 => return Err(MsgError::BadRdata),
        rtype::AAAA if raw.len() != 16 => return Err(MsgError::BadRdata),
        _ => {}
    }
    let Some(fields) = layout(rt) else {
        return Ok(raw.to_vec());
    };
    let mut out = Vec::with_capacity(raw.len() + 16);
    let mut pos = start;
    for f in fields {
        match *f {
            Field::Name => {
                let (name, next) = read_name_within(msg, pos, end)?;
                out.extend_from_slice(&name);
                pos = next;
            }
            Field::Fixed(n) => {
                let b = msg.get(pos..pos + n).filter(|_| pos + n <= end);
                out.extend_from_slice(b.ok_or(MsgError::BadRdata)?);
                pos += n;
            }
            Field::Str => {
                let len = usize::from(
                    *msg.get(pos)
                        .filter(|_| pos < end)
                        .ok_or(MsgError::BadRdata)?,
                );
                let b = msg.get(pos..pos + 1 + len).filter(|_| pos + 1 + len <= end);
                out.extend_from_slice(b.ok_or(MsgError::BadRdata)?);
                pos += 1 + len;
            }
        }
    }
    if pos != end {
        return Err(MsgError::BadRdata);
    }
    Ok(out)
}

/// A name inside RDATA: its first octets must lie before `end` (pointers may go anywhere
/// earlier in the message).
fn read_name_within(msg: &[u8], pos: usize, end: usize) -> Result<(Vec<u8>, usize), MsgError> {
    let (name, next) = read_name(msg, pos)?;
    if next > end {
        return Err(MsgError::BadRdata);
    }
    Ok((name, next))
}

/// Reads a possibly compressed name at `pos`; returns it uncompressed and the offset just
/// after its in-place part. Pointers must point strictly before the label that holds them,
/// so every jump goes backwards and the walk ends (RFC 1035 §4.1.4 allows only prior
/// occurrences).
pub fn read_name(msg: &[u8], pos: usize) -> Result<(Vec<u8>, usize), MsgError> {
    let mut out = Vec::with_capacity(32);
    let mut at = pos;
    let mut next = None;
    let mut limit = pos;
    loop {
        let len = *msg.get(at).ok_or(MsgError::Truncated)?;
        match len {
            0 => {
                out.push(0);
                if out.len() > MAX_NAME_LEN {
                    return Err(MsgError::BadName);
                }
                return Ok((out, next.unwrap_or(at + 1)));
            }
            l if usize::from(l) <= MAX_LABEL_LEN => {
                let l = usize::from(l);
                let label = msg.get(at..at + 1 + l).ok_or(MsgError::Truncated)?;
                out.extend_from_slice(label);
                if out.len() >= MAX_NAME_LEN {
                    return Err(MsgError::BadName);
                }
                at += 1 + l;
            }
            l if l & 0xc0 == 0xc0 => {
                let lo = *msg.get(at + 1).ok_or(MsgError::Truncated)?;
                let target = (usize::from(l & 0x3f) << 8) | usize::from(lo);
                if next.is_none() {
                    next = Some(at + 2);
                }
                // Strictly backwards from the start of the current run of labels.
                if target >= limit.min(at) {
                    return Err(MsgError::BadName);
                }
                limit = target;
                at = target;
            }
            // 0x40 and 0x80 label types (RFC 6891 §5 retired them).
            _ => return Err(MsgError::BadName),
        }
    }
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
