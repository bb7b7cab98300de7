//! Writing cached RRsets as the part of a reply that follows the question.
//!
//! A cached answer is rendered once, when it enters the cache, for the one query-name
//! length its key has: every reply to that name has its question at offset 12 and the same
//! length, whatever the client's letter case (0x20), so compression pointers into the
//! question and into earlier records stay valid (RFC 1035 §4.1.4). A hit then copies the
//! bytes as the engine copies a local-data answer and only patches the TTL of each record
//! (their offsets are kept with the bytes) from the time its RRset expires.
//!
//! Names in RDATA are compressed only for the RFC 1035 types (RFC 3597 §4, the engine's
//! RDATA layout table [`skua_engine::wire::rdata`]); every other RDATA is written as it was
//! received (decompressed by [`crate::msg`]).

use alloc::vec::Vec;

use skua_engine::wire::HEADER_LEN;
use skua_engine::wire::rdata::{self, Compression, Field};

use crate::rrset::RrSet;

/// Which section an RRset goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// Answer.
    Answer = 0,
    /// Authority.
    Authority = 1,
    /// Additional.
    Additional = 2,
}

/// A rendered message body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Body {
    /// ANCOUNT, NSCOUNT, ARCOUNT, big-endian.
    pub counts: [u8; 6],
    /// RRset boundaries for truncation: per RRset, (end offset u16 LE, counts up to there),
    /// the engine's format.
    pub bounds: Vec<u8>,
    /// Records after the question.
    pub tail: Vec<u8>,
    /// Per record: offset of its TTL field in `tail` (u16 LE) and the expiry of its RRset
    /// (u32 LE, seconds of the caller's clock): 6 octets each.
    pub ttls: Vec<u8>,
}

/// Longest tail we render: a reply must fit in 65535 octets with a header, a question of
/// up to 259 octets and an OPT record.
pub const MAX_TAIL: usize = 65535 - HEADER_LEN - 259 - 11;

/// Most names remembered for compression; later names are written in full.
const MAX_DICT: usize = 256;

struct Writer {
    body: Body,
    /// (offset in the message, lower-cased uncompressed suffix) for compression targets.
    dict: Vec<(u16, Vec<u8>)>,
    /// Where the tail starts in the message.
    base: usize,
    an: u16,
    ns: u16,
    ar: u16,
}

impl Writer {
    fn new(qname_lower: &[u8]) -> Self {
        let mut w = Writer {
            body: Body::default(),
            dict: Vec::new(),
            base: HEADER_LEN + qname_lower.len() + 4,
            an: 0,
            ns: 0,
            ar: 0,
        };
        w.remember(qname_lower, qname_lower.len(), HEADER_LEN);
        w
    }

    /// Remembers the suffixes of `name` that start before `upto`, written at message
    /// offset `at` (pointers must fit 14 bits).
    fn remember(&mut self, name: &[u8], upto: usize, at: usize) {
        let mut p = 0usize;
        while p < upto && p < name.len() && name[p] != 0 {
            if self.dict.len() >= MAX_DICT || at + p > 0x3fff {
                return;
            }
            let suffix = name[p..].to_ascii_lowercase();
            if !self.dict.iter().any(|(_, s)| *s == suffix) {
                self.dict.push(((at + p) as u16, suffix));
            }
            p += 1 + usize::from(name[p]);
        }
    }

    /// Writes a name, its longest suffix already in the message replaced by a pointer.
    fn name(&mut self, name: &[u8]) {
        let at = self.base + self.body.tail.len();
        let mut pos = 0usize;
        let mut target = None;
        while pos < name.len() && name[pos] != 0 {
            let suffix = &name[pos..];
            if let Some((off, _)) = self
                .dict
                .iter()
                .find(|(_, s)| s.len() == suffix.len() && s.eq_ignore_ascii_case(suffix))
            {
                target = Some(*off);
                break;
            }
            pos += 1 + usize::from(name[pos]);
        }
        match target {
            Some(off) => {
                self.body.tail.extend_from_slice(&name[..pos]);
                self.body
                    .tail
                    .extend_from_slice(&(0xc000 | off).to_be_bytes());
            }
            None => self.body.tail.extend_from_slice(name),
        }
        self.remember(name, pos, at);
    }

    fn rrset(&mut self, set: &RrSet, section: Section, expires: u32) -> bool {
        let start = self.body.tail.len();
        let ttls = self.body.ttls.len();
        for rd in &set.rdatas {
            self.name(&set.owner);
            self.body.tail.extend_from_slice(&set.rtype.to_be_bytes());
            self.body.tail.extend_from_slice(&set.class.to_be_bytes());
            let ttl_at = self.body.tail.len();
            self.body.tail.extend_from_slice(&[0; 4]);
            let len_at = self.body.tail.len();
            self.body.tail.extend_from_slice(&[0; 2]);
            self.rdata(set.rtype, rd);
            let rdlen = self.body.tail.len() - len_at - 2;
            if self.body.tail.len() > MAX_TAIL || ttl_at > usize::from(u16::MAX) {
                self.body.tail.truncate(start);
                self.body.ttls.truncate(ttls);
                return false;
            }
            self.body.tail[len_at..len_at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
            self.body
                .ttls
                .extend_from_slice(&(ttl_at as u16).to_le_bytes());
            self.body.ttls.extend_from_slice(&expires.to_le_bytes());
            match section {
                Section::Answer => self.an += 1,
                Section::Authority => self.ns += 1,
                Section::Additional => self.ar += 1,
            }
        }
        let end = self.body.tail.len() as u16;
        self.body.bounds.extend_from_slice(&end.to_le_bytes());
        for c in [self.an, self.ns, self.ar] {
            self.body.bounds.extend_from_slice(&c.to_be_bytes());
        }
        true
    }

    /// Writes RDATA, compressing its names when its type is one of RFC 1035's (RFC 3597
    /// §4), after the engine's RDATA layout table.
    fn rdata(&mut self, rt: u16, rd: &[u8]) {
        let fields = match rdata::layout(rt) {
            Some(f) if rdata::compressible(rt) => f,
            _ => {
                self.body.tail.extend_from_slice(rd);
                return;
            }
        };
        let mut pos = 0usize;
        for f in fields {
            match *f {
                Field::Name(c) => {
                    // Decompressed by `msg` and validated there.
                    let len =
                        skua_engine::name::wire_name_len(&rd[pos..]).unwrap_or(rd.len() - pos);
                    let name = &rd[pos..pos + len];
                    if c == Compression::Rfc1035 {
                        self.name(name);
                    } else {
                        self.body.tail.extend_from_slice(name);
                    }
                    pos += len;
                }
                Field::Fixed(n) => {
                    let n = n.min(rd.len() - pos);
                    self.body.tail.extend_from_slice(&rd[pos..pos + n]);
                    pos += n;
                }
                Field::CharString | Field::Rest => break,
            }
        }
        self.body.tail.extend_from_slice(&rd[pos..]);
    }
}

/// Renders RRsets, given in section order, for a question whose name is `qname_lower`
/// (lower case: compression compares case-insensitively, and only its length and labels
/// matter). Each RRset comes with its expiry. RRsets that would push the body past
/// [`MAX_TAIL`] are left out (only possible for the additional section in practice; the
/// caller checks the counts).
pub fn render<'a>(
    qname_lower: &[u8],
    sets: impl IntoIterator<Item = (&'a RrSet, Section, u32)>,
) -> Body {
    let mut w = Writer::new(qname_lower);
    for (set, section, expires) in sets {
        w.rrset(set, section, expires);
    }
    let mut counts = [0u8; 6];
    counts[0..2].copy_from_slice(&w.an.to_be_bytes());
    counts[2..4].copy_from_slice(&w.ns.to_be_bytes());
    counts[4..6].copy_from_slice(&w.ar.to_be_bytes());
    w.body.counts = counts;
    w.body
}

/// Writes each record's TTL into `tail` from its RRset's expiry (or `fixed`): the
/// engine's [`skua_engine::patch_ttls`], which cache hits use.
pub use skua_engine::patch_ttls;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::Message;
    use crate::rrset::Rank;
    use alloc::vec;

    fn set(owner: &[u8], rt: u16, rdatas: &[&[u8]]) -> RrSet {
        RrSet {
            owner: owner.to_vec(),
            rtype: rt,
            class: 1,
            ttl: 300,
            rdatas: rdatas.iter().map(|r| r.to_vec()).collect(),
            rank: Rank::AnswerAuth,
        }
    }

    /// Renders, prefixes a header and question, and reads the result back.
    fn round_trip(qname: &[u8], body: &Body) -> Message {
        let mut m = vec![0, 1, 0x81, 0x80, 0, 1];
        m.extend_from_slice(&body.counts);
        m.extend_from_slice(qname);
        m.extend_from_slice(&[0, 1, 0, 1]);
        let base = m.len();
        m.extend_from_slice(&body.tail);
        let len = body.tail.len();
        patch_ttls(&mut m[base..base + len], &body.ttls, 100, None);
        Message::parse(&m).unwrap()
    }

    #[test]
    fn compresses_against_question_and_records() {
        let q = b"\x03www\x07example\x00";
        let cname = set(q, 5, &[b"\x04host\x07Example\x00"]);
        let a = set(
            b"\x04host\x07Example\x00",
            1,
            &[&[192, 0, 2, 1], &[192, 0, 2, 2]],
        );
        let soa = set(
            b"\x07example\x00",
            6,
            &[b"\x02ns\x07example\x00\x05admin\x07example\x00\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00\x05"],
        );
        let b = render(
            q,
            [
                (&cname, Section::Answer, 400),
                (&a, Section::Answer, 350),
                (&soa, Section::Authority, 160),
            ],
        );
        assert_eq!(b.counts, [0, 3, 0, 1, 0, 0]);
        // CNAME owner = pointer to the question, its target shares "example".
        assert_eq!(&b.tail[0..2], &[0xc0, 12]);
        let m = round_trip(q, &b);
        assert_eq!(m.answer.len(), 3);
        // Compression compares names case-insensitively (as Unbound's does): the target's
        // "example" is a pointer into the question and reads back in the question's case.
        assert!(
            m.answer[0]
                .rdata
                .eq_ignore_ascii_case(b"\x04host\x07example\x00")
        );
        assert_eq!(m.answer[0].ttl, 300);
        assert!(
            m.answer[1]
                .owner
                .eq_ignore_ascii_case(b"\x04host\x07example\x00")
        );
        assert_eq!(m.answer[1].ttl, 250);
        assert_eq!(m.answer[2].rdata, [192, 0, 2, 2]);
        assert!(m.authority[0].rdata.eq_ignore_ascii_case(&soa.rdatas[0]));
        assert_eq!(m.authority[0].ttl, 60);
        // Compressed: much shorter than the names written in full.
        assert!(b.tail.len() < 2 + 10 + 13 + 2 * (7 + 10 + 4) + 45 + 10);
        assert_eq!(b.bounds.len(), 3 * 8);
    }

    #[test]
    fn uncompressible_rdata_is_kept_whole() {
        let q = b"\x01s\x07example\x00";
        let srv = set(q, 33, &[b"\x00\x01\x00\x02\x00\x35\x04host\x07example\x00"]);
        let b = render(q, [(&srv, Section::Answer, 10)]);
        let m = round_trip(q, &b);
        assert_eq!(m.answer[0].rdata, srv.rdatas[0]);
        assert!(b.tail.ends_with(b"\x04host\x07example\x00"));
    }
}
