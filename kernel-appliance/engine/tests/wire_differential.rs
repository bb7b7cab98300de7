//! Differential test of the one DNS wire reader (`skua_engine::wire::{record, names,
//! rdata}`) against the two readers it replaced: the resolver's (`skua_resolver::msg`,
//! upstream replies) and skua-xfr's (`skua_xfr::wire`, transfers, NOTIFY), kept below as
//! they were.
//!
//! Every record of the corpus is read by all three:
//! - messages captured from real peers (Knot 3.2 and NSD 4.6 AXFR answers, kdig, Knot and
//!   NSD requests: `xfr/tests/fixtures/peers.txt`) and the fuzzing seeds (upstream replies,
//!   transfer messages: `tests/fuzz/seeds`): all three agree;
//! - one record of every RR type the engine knows with names in its RDATA, and a few
//!   without, written in full, then with each name compressed (whole and after its first
//!   label) against an earlier record: the readers disagree exactly where their tables
//!   did, and the new reader does what RFC 3597 §4 says ([`expected_disagreements`]);
//! - pointer-looking octets where no name may be compressed (TXT, an unknown type, RRSIG,
//!   NSEC, SVCB, HTTPS): all three keep them as received;
//! - hostile input (pointer loops, forward pointers, pointers past the end, labels over 63
//!   octets, names over 255, RDATA that does not fit its type, pointer chains): the new
//!   reader returns an error and never panics, and a mutation run over the corpus finds
//!   it agreeing with the resolver's reader wherever the RFC does not separate them.

use std::collections::{BTreeMap, BTreeSet};

use skua_engine::wire::record;

mod old_resolver {
    //! `skua_resolver::msg`'s record reader before the engine's, verbatim.
    #![allow(dead_code, clippy::all)]

    use skua_engine::name::{MAX_LABEL_LEN, MAX_NAME_LEN};
    use skua_engine::rr::rtype;

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

    /// Reads one record at `pos`: the record, its raw TTL field (the OPT record keeps its
    /// flags there) and the offset after it.
    pub fn read_record(msg: &[u8], pos: usize) -> Result<(Record, u32, usize), MsgError> {
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
}

mod old_xfr {
    //! `skua_xfr::wire`'s record reader before the engine's, verbatim.
    #![allow(dead_code, clippy::all)]

    use skua_engine::name::{MAX_NAME_LEN, WireName, wire_name_len};
    use skua_engine::rr::{self, Rr};

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

    /// Reads the possibly compressed name at `off`: the name uncompressed (case kept) and the
    /// offset just after it where it is written (after the first pointer, if any).
    pub fn read_name(msg: &[u8], off: usize) -> Result<(WireName, usize), WireError> {
        let mut out: Vec<u8> = Vec::with_capacity(32);
        let mut pos = off;
        let mut end = None;
        // Each pointer must point strictly before the label sequence that holds it, so
        // positions decrease at every jump: the walk ends.
        let mut limit = off;
        loop {
            let len = *msg.get(pos).ok_or(WireError::Truncated)?;
            match len & 0xc0 {
                0x00 => {
                    let len = usize::from(len);
                    if len == 0 {
                        out.push(0);
                        if out.len() > MAX_NAME_LEN {
                            return Err(WireError::BadName);
                        }
                        let end = end.unwrap_or(pos + 1);
                        return WireName::from_wire(&out)
                            .map(|n| (n, end))
                            .map_err(|_| WireError::BadName);
                    }
                    let label = msg.get(pos..pos + 1 + len).ok_or(WireError::Truncated)?;
                    out.extend_from_slice(label);
                    if out.len() >= MAX_NAME_LEN {
                        return Err(WireError::BadName);
                    }
                    pos += 1 + len;
                }
                0xc0 => {
                    let p = usize::from(be16(msg, pos)? & 0x3fff);
                    if end.is_none() {
                        end = Some(pos + 2);
                    }
                    if p >= limit {
                        return Err(WireError::BadName);
                    }
                    limit = p;
                    pos = p;
                }
                // 0x40 and 0x80: extended and reserved label types (RFC 6891 §5).
                _ => return Err(WireError::BadName),
            }
        }
    }

    /// The question at `off`: (name, type, class, offset after it).
    pub fn read_question(msg: &[u8], off: usize) -> Result<(WireName, u16, u16, usize), WireError> {
        let (name, p) = read_name(msg, off)?;
        Ok((name, be16(msg, p)?, be16(msg, p + 2)?, p + 4))
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
        let (owner, p) = read_name(msg, off)?;
        let rtype = be16(msg, p)?;
        let class = be16(msg, p + 2)?;
        let ttl = be32(msg, p + 4)?;
        let rdlen = usize::from(be16(msg, p + 8)?);
        let rdata = p + 10;
        if msg.len() < rdata + rdlen {
            return Err(WireError::Truncated);
        }
        Ok(RrView {
            start: off,
            owner,
            rtype,
            class,
            ttl,
            rdata,
            rdlen,
        })
    }

    /// The RDATA of `v` uncompressed: names of the RFC 1035 types that may be compressed
    /// (RFC 3597 §4: NS, CNAME, PTR, MX, SOA) are expanded, other RDATA is copied.
    pub fn rdata_uncompressed(msg: &[u8], v: &RrView) -> Result<Vec<u8>, WireError> {
        let raw = msg.get(v.rdata..v.end()).ok_or(WireError::Truncated)?;
        let names: &[usize] = match v.rtype {
            rr::rtype::NS | rr::rtype::CNAME | rr::rtype::PTR => &[0],
            rr::rtype::MX => &[2],
            rr::rtype::SOA => &[0, usize::MAX],
            _ => return Ok(raw.to_vec()),
        };
        let mut out = Vec::with_capacity(raw.len() + 32);
        let mut pos = v.rdata;
        for &n in names {
            let at = if n == usize::MAX { pos } else { v.rdata + n };
            if at < pos || at > v.end() {
                return Err(WireError::Layout("RDATA too short for its names"));
            }
            out.extend_from_slice(&msg[pos..at]);
            let (name, after) = read_name(msg, at)?;
            if after > v.end() {
                return Err(WireError::Layout("name runs past the RDATA"));
            }
            out.extend_from_slice(name.as_bytes());
            pos = after;
        }
        out.extend_from_slice(&msg[pos..v.end()]);
        if v.rtype == rr::rtype::SOA {
            let m = wire_name_len(&out).unwrap_or(out.len());
            let r = out.get(m..).and_then(wire_name_len).unwrap_or(out.len());
            if out.len() != m + r + 20 {
                return Err(WireError::Layout(
                    "SOA RDATA is not two names and five numbers",
                ));
            }
        }
        Ok(out)
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
}

/// What a reader made of one record: owner, type, class, TTL field, RDATA and the offset
/// after the record; or the name of its error.
type Read = Result<(Vec<u8>, u16, u16, u32, Vec<u8>, usize), String>;

fn by_new(msg: &[u8], off: usize) -> Read {
    record::read_record(msg, off)
        .map(|(v, rd)| (v.owner.clone(), v.rtype, v.class, v.ttl, rd, v.end()))
        .map_err(|e| format!("{e:?}"))
}

fn by_resolver(msg: &[u8], off: usize) -> Read {
    old_resolver::read_record(msg, off)
        .map(|(r, ttl, next)| (r.owner, r.rtype, r.class, ttl, r.rdata, next))
        .map_err(|e| format!("{e:?}"))
}

fn by_xfr(msg: &[u8], off: usize) -> Read {
    old_xfr::read_owned_rr(msg, off)
        .map(|(r, next)| {
            (
                r.owner.as_bytes().to_vec(),
                r.rtype,
                r.class,
                r.ttl,
                r.rdata,
                next,
            )
        })
        .map_err(|e| match e {
            old_xfr::WireError::Layout(_) => "Layout".to_string(),
            e => format!("{e:?}"),
        })
}

/// One record as the three readers read it.
struct Row {
    rtype: u16,
    new: Read,
    resolver: Read,
    xfr: Read,
}

/// Every record of `msg`, read by the three readers at the offsets the new one finds (the
/// walk stops after the first record it refuses).
fn read_all(msg: &[u8]) -> Vec<Row> {
    let mut rows = Vec::new();
    if msg.len() < 12 {
        return rows;
    }
    let count = |i: usize| usize::from(u16::from_be_bytes([msg[4 + 2 * i], msg[5 + 2 * i]]));
    let mut off = 12;
    for _ in 0..count(0) {
        match record::read_question(msg, off) {
            Ok(q) => off = q.end,
            Err(_) => return rows,
        }
    }
    for _ in 0..count(1) + count(2) + count(3) {
        let new = by_new(msg, off);
        let next = new.as_ref().ok().map(|r| r.5);
        rows.push(Row {
            rtype: record::read_record_view(msg, off).map_or(0, |v| v.rtype),
            new,
            resolver: by_resolver(msg, off),
            xfr: by_xfr(msg, off),
        });
        match next {
            Some(n) => off = n,
            None => break,
        }
    }
    rows
}

/// (old reader, type) wherever an old reader read a record otherwise than the new one.
fn disagreements(rows: &[Row]) -> BTreeSet<(&'static str, u16)> {
    let mut d = BTreeSet::new();
    for r in rows {
        if r.resolver != r.new {
            d.insert(("resolver", r.rtype));
        }
        if r.xfr != r.new {
            d.insert(("xfr", r.rtype));
        }
    }
    d
}

fn unhex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The captured messages: (label, bytes).
fn captured() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = include_str!("../../xfr/tests/fixtures/peers.txt")
        .lines()
        .filter_map(|l| {
            let (name, hex) = l.split_once(' ')?;
            // The key and the MACs are not messages.
            if name == "secret" || name.ends_with("-mac") {
                return None;
            }
            Some((name.to_string(), unhex(hex.trim())?))
        })
        .collect();
    macro_rules! seed {
        ($($p:literal),*) => {
            $(v.push(($p.to_string(), include_bytes!(concat!("../../../tests/fuzz/seeds/", $p)).to_vec()));)*
        };
    }
    seed!(
        "upstream_reply/answer",
        "upstream_reply/chain_out",
        "upstream_reply/dname",
        "upstream_reply/nxdomain",
        "upstream_reply/poison_additional",
        "xfr_request/kdig-axfr.bin",
        "xfr_request/kdig-ixfr.bin",
        "xfr_request/knot-response-8.bin",
        "xfr_request/nsd-response-8.bin"
    );
    v
}

#[test]
fn captured_messages_read_alike() {
    let mut types = BTreeMap::<u16, usize>::new();
    let mut records = 0;
    for (label, m) in captured() {
        let rows = read_all(&m);
        assert!(!rows.is_empty() || label.contains("request"), "{label}");
        for r in &rows {
            // The captures are whole; some fuzzing seeds are cut on purpose.
            assert!(r.new.is_ok() || label.contains('/'), "{label}: {:?}", r.new);
            *types.entry(r.rtype).or_default() += 1;
        }
        records += rows.len();
        assert_eq!(disagreements(&rows), BTreeSet::new(), "{label}");
    }
    // The captured transfers carry SOA, NS, A, TXT and TSIG (250) records; the other
    // types are the synthetic ones below.
    assert!(records > 1000, "{records}");
    for t in [1u16, 2, 6, 16, 250] {
        assert!(
            types.contains_key(&t),
            "type {t} not in the corpus: {types:?}"
        );
    }
    eprintln!("captured corpus: {records} records, types {types:?}");
}

/// A part of synthetic RDATA: a domain name (presentation format, absolute) or octets.
#[derive(Clone)]
enum P {
    N(&'static str),
    B(Vec<u8>),
}
use P::{B, N};

fn wire(name: &str) -> Vec<u8> {
    let mut w = Vec::new();
    for l in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        w.push(l.len() as u8);
        w.extend_from_slice(l.as_bytes());
    }
    w.push(0);
    w
}

/// One record of every type whose RDATA holds names (where the names are is written out
/// here, from each type's RFC, not taken from the table under test), and some without.
fn samples() -> Vec<(u16, Vec<P>)> {
    let n = |b: &[u8]| B(b.to_vec());
    let cs = |s: &str| [&[s.len() as u8][..], s.as_bytes()].concat();
    vec![
        (1, vec![n(&[192, 0, 2, 1])]),
        (2, vec![N("ns.example.")]),
        (3, vec![N("md.example.")]),
        (4, vec![N("mf.example.")]),
        (5, vec![N("target.example.")]),
        (
            6,
            vec![
                N("ns.example."),
                N("admin.example."),
                B((1u8..=20).collect()),
            ],
        ),
        (7, vec![N("mb.example.")]),
        (8, vec![N("mg.example.")]),
        (9, vec![N("mr.example.")]),
        (12, vec![N("host.example.")]),
        (13, vec![B([cs("cpu"), cs("os")].concat())]),
        (14, vec![N("rmail.example."), N("email.example.")]),
        (15, vec![n(&[0, 10]), N("mx.example.")]),
        (16, vec![B([cs("v=spf1"), cs("-all")].concat())]),
        (17, vec![N("mbox.example."), N("txt.example.")]),
        (18, vec![n(&[0, 1]), N("afs.example.")]),
        (21, vec![n(&[0, 2]), N("rt.example.")]),
        (
            24,
            vec![B(vec![0; 18]), N("signer.example."), n(&[0xaa, 0xbb])],
        ),
        (
            26,
            vec![n(&[0, 5]), N("map822.example."), N("mapx400.example.")],
        ),
        (28, vec![B((0u8..16).collect())]),
        (30, vec![N("next.example."), n(&[0x40, 0x01])]),
        (33, vec![n(&[0, 0, 0, 5, 0, 53]), N("srv.example.")]),
        (
            35,
            vec![
                B([&[0, 100, 0, 10][..], &cs("S"), &cs("SIP+D2U"), &cs("")].concat()),
                N("_sip._udp.example."),
            ],
        ),
        (36, vec![n(&[0, 5]), N("kx.example.")]),
        (39, vec![N("other.example.")]),
        (43, vec![B([&[0x30, 0x39, 8, 2][..], &[0x5a; 32]].concat())]),
        // Names whose specifications forbid compression, in types the readers do not
        // interpret: the RRSIG signer (RFC 4034 §3.1.7), the NSEC next name (§4.1.1), the
        // SVCB and HTTPS target (RFC 9460 §2.2), an unknown type.
        (
            46,
            vec![
                B([&[0, 1, 8, 2, 0, 0, 1, 44][..], &[0; 10]].concat()),
                N("example."),
                n(&[1; 8]),
            ],
        ),
        (47, vec![N("next.example."), n(&[0, 1, 0x40])]),
        (
            64,
            vec![n(&[0, 1]), N("svc.example."), n(&[0, 3, 0, 2, 0x01, 0xbb])],
        ),
        (65, vec![n(&[0, 1]), N("svc.example.")]),
        (0xff00, vec![N("opaque.example.")]),
    ]
}

/// RFC 3597 §4: the RFC 1035 types, whose names a receiver MUST decompress.
const MUST: &[u16] = &[2, 3, 4, 5, 6, 7, 8, 9, 12, 14, 15];
/// RFC 3597 §4: RP, AFSDB, RT, SIG, PX, NXT, NAPTR, SRV, which a receiver SHOULD
/// decompress.
const SHOULD: &[u16] = &[17, 18, 21, 24, 26, 30, 33, 35];
/// KX and DNAME: their specifications forbid compressing their names (RFC 2230,
/// RFC 6672 §2.5); the new reader decompresses them anyway, as the resolver's did (and
/// Knot and Unbound do): a pointer kept in the RDATA would point at something else in the
/// next message, the corruption RFC 3597 §4 is about.
const LENIENT: &[u16] = &[36, 39];

/// Where the old readers read compressed RDATA otherwise than the new one, and why the new
/// one is right:
/// - the resolver's did not decompress SIG and NXT, which RFC 3597 §4 says a receiver
///   should;
/// - skua-xfr's decompressed only NS, CNAME, PTR, MX and SOA: not MD, MF, MB, MG, MR,
///   MINFO, which a receiver must (RFC 3597 §4), nor the eight it should, nor KX and DNAME
///   (see [`LENIENT`]); it kept their pointers, which a secondary would then have served
///   into other messages.
fn expected_disagreements() -> BTreeSet<(&'static str, u16)> {
    let mut d = BTreeSet::new();
    for t in [24, 30] {
        d.insert(("resolver", t));
    }
    for &t in [3u16, 4, 7, 8, 9, 14].iter().chain(SHOULD).chain(LENIENT) {
        d.insert(("xfr", t));
    }
    d
}

/// A message: for every name of `parts`, a NULL record owned by it (the pointers'
/// targets), then the record of `rtype` whose RDATA names are written in full (`how` 0),
/// as a pointer to the NULL record owning them (1), or as their first label and a pointer
/// to the NULL record's parent name (2). Returns the message, the RDATA uncompressed and as
/// written.
fn message(rtype: u16, parts: &[P], how: u8) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let names: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            N(n) => Some(*n),
            B(_) => None,
        })
        .collect();
    let mut m = vec![
        0x12,
        0x34,
        0x84,
        0x00,
        0,
        0,
        0,
        (names.len() + 1) as u8,
        0,
        0,
        0,
        0,
    ];
    let mut at = BTreeMap::new();
    for n in &names {
        at.insert(*n, m.len());
        m.extend_from_slice(&wire(n));
        m.extend_from_slice(&[0, 10, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
    let (mut plain, mut written) = (Vec::new(), Vec::new());
    for p in parts {
        match p {
            B(b) => {
                plain.extend_from_slice(b);
                written.extend_from_slice(b);
            }
            N(n) => {
                let w = wire(n);
                plain.extend_from_slice(&w);
                let target = at[n];
                match how {
                    0 => written.extend_from_slice(&w),
                    1 => written.extend_from_slice(&(0xc000 | target as u16).to_be_bytes()),
                    _ => {
                        let first = 1 + usize::from(w[0]);
                        written.extend_from_slice(&w[..first]);
                        written
                            .extend_from_slice(&(0xc000 | (target + first) as u16).to_be_bytes());
                    }
                }
            }
        }
    }
    m.extend_from_slice(&wire("rec.example."));
    m.extend_from_slice(&rtype.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 1, 44]);
    m.extend_from_slice(&(written.len() as u16).to_be_bytes());
    m.extend_from_slice(&written);
    (m, plain, written)
}

#[test]
fn every_type_in_full_reads_alike() {
    for (t, parts) in samples() {
        let (m, plain, _) = message(t, &parts, 0);
        let rows = read_all(&m);
        assert_eq!(
            rows.len(),
            parts.iter().filter(|p| matches!(p, N(_))).count() + 1
        );
        assert_eq!(disagreements(&rows), BTreeSet::new(), "type {t}");
        assert_eq!(
            rows.last().unwrap().new.as_ref().unwrap().4,
            plain,
            "type {t}"
        );
    }
}

#[test]
fn compressed_names_in_rdata_follow_rfc_3597() {
    let mut found = BTreeSet::new();
    for (t, parts) in samples() {
        for how in [1, 2] {
            let (m, plain, written) = message(t, &parts, how);
            let rows = read_all(&m);
            let last = rows.last().unwrap();
            assert_eq!(last.rtype, t);
            let rdata = &last.new.as_ref().unwrap().4;
            if MUST.contains(&t) || SHOULD.contains(&t) || LENIENT.contains(&t) {
                assert_eq!(rdata, &plain, "type {t} decompressed (how {how})");
            } else {
                // No name of this type may be compressed: the octets are data.
                assert_eq!(rdata, &written, "type {t} kept as received (how {how})");
            }
            found.extend(disagreements(&rows));
        }
    }
    eprintln!("old readers that read compressed RDATA otherwise: {found:?}");
    assert_eq!(found, expected_disagreements());
}

#[test]
fn pointer_looking_octets_in_opaque_rdata_stay() {
    // A TXT string, an unknown type and a NULL record holding c0 0c (a pointer to the
    // first name, if it were one): all three readers keep them.
    for (t, rd) in [
        (16u16, b"\x02\xc0\x0c".to_vec()),
        (0xff00, vec![0xc0, 0x0c]),
        (10, vec![0xc0, 0x0c, 0x00]),
    ] {
        let mut m = vec![0, 0, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0];
        m.extend_from_slice(b"\x07example\x00\x00\x10\x00\x01");
        m.extend_from_slice(&[0xc0, 12]);
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 0, 0, 60, 0, rd.len() as u8]);
        m.extend_from_slice(&rd);
        let rows = read_all(&m);
        assert_eq!(disagreements(&rows), BTreeSet::new(), "type {t}");
        assert_eq!(rows[0].new.as_ref().unwrap().4, rd, "type {t}");
    }
}

/// Hostile records: (case, message, the record's offset, what the new reader, the
/// resolver's and skua-xfr's said).
fn hostile() -> Vec<(&'static str, Vec<u8>, usize, [&'static str; 3])> {
    // A header and the name "example." at 12; the record under test at 21.
    let base = || {
        let mut m = vec![0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        m.extend_from_slice(b"\x07example\x00");
        m
    };
    let rec = |owner: &[u8], t: u16, rd: &[u8]| {
        let mut m = base();
        m.extend_from_slice(owner);
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
        m.extend_from_slice(&(rd.len() as u16).to_be_bytes());
        m.extend_from_slice(rd);
        (m, 21)
    };
    let a = [192, 0, 2, 1];
    let rdata_at = 21 + 2 + 10; // after a compressed owner
    let mut cases = Vec::new();
    let mut add = |case, (m, off): (Vec<u8>, usize), said| cases.push((case, m, off, said));
    const ERR_NAME: [&str; 3] = ["BadName", "BadName", "BadName"];
    add(
        "owner: pointer to itself",
        rec(&[0xc0, 21], 1, &a),
        ERR_NAME,
    );
    add(
        "owner: pointer forwards",
        rec(&[0xc0, 23, 0], 1, &a),
        ERR_NAME,
    );
    add(
        "owner: pointer past the end",
        rec(&[0xff, 0xff], 1, &a),
        ERR_NAME,
    );
    add(
        "owner: two pointers in a loop",
        rec(&[0x01, b'a', 0xc0, 21], 1, &a),
        ERR_NAME,
    );
    let mut l64 = vec![64];
    l64.extend_from_slice(&[b'a'; 64]);
    l64.push(0);
    add("owner: label of 64 octets", rec(&l64, 1, &a), ERR_NAME);
    add("owner: label type 0x80", rec(&[0x80, 0], 1, &a), ERR_NAME);
    let mut n256 = Vec::new();
    for _ in 0..3 {
        n256.push(63);
        n256.extend_from_slice(&[b'a'; 63]);
    }
    n256.push(62);
    n256.extend_from_slice(&[b'a'; 62]);
    n256.push(0);
    add("owner: name of 256 octets", rec(&n256, 1, &a), ERR_NAME);
    // Four 63-octet labels through pointers to "example.": 4 * 64 + 9 octets.
    {
        let mut m = base();
        let mut prev = 12u16;
        for _ in 0..4 {
            let at = m.len() as u16;
            m.push(63);
            m.extend_from_slice(&[b'a'; 63]);
            m.extend_from_slice(&(0xc000 | prev).to_be_bytes());
            prev = at;
        }
        let off = m.len();
        m.extend_from_slice(&(0xc000 | prev).to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        add(
            "owner: over 255 octets through pointers",
            (m, off),
            ERR_NAME,
        );
    }
    // 257 pointers, each to the one before, ending at "example.".
    {
        let mut m = base();
        let mut prev = 12u16;
        for _ in 0..257 {
            let at = m.len() as u16;
            m.extend_from_slice(&(0xc000 | prev).to_be_bytes());
            prev = at;
        }
        let off = m.len();
        m.extend_from_slice(&(0xc000 | prev).to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        // Disagreement: the old readers followed any number of backward pointers (at most
        // one per two octets of the message); the new one stops after 256, as Unbound.
        add(
            "owner: chain of 258 pointers",
            (m, off),
            ["BadName", "Ok", "Ok"],
        );
    }
    add(
        "CNAME: pointer to itself",
        rec(&[0xc0, 12], 5, &[0xc0, rdata_at as u8]),
        ERR_NAME,
    );
    add(
        "CNAME: pointer forwards",
        rec(&[0xc0, 12], 5, &[0xc0, rdata_at as u8 + 2, 0]),
        ERR_NAME,
    );
    add(
        "MX: pointer past the end",
        rec(&[0xc0, 12], 15, &[0, 1, 0xff, 0xff]),
        ERR_NAME,
    );
    add(
        "NS: label of 64 octets",
        rec(&[0xc0, 12], 2, &l64),
        ERR_NAME,
    );
    add(
        "NS: name of 256 octets",
        rec(&[0xc0, 12], 2, &n256),
        ERR_NAME,
    );
    add(
        "SOA: RNAME a pointer loop",
        rec(
            &[0xc0, 12],
            6,
            &[&[0xc0, 12][..], &[0xc0, rdata_at as u8 + 2], &[0; 20]].concat(),
        ),
        ERR_NAME,
    );
    // RDATA that does not fit its type. skua-xfr's reader copied whatever followed a name
    // and did not know A, AAAA or NAPTR: RFC 1035 §3.4.1 (A is 32 bits), RFC 3596 §2.2
    // (AAAA 128), RFC 1035 §3.3 (RDATA is exactly its fields; Knot refuses trailing data).
    add(
        "A of 5 octets",
        rec(&[0xc0, 12], 1, &[1, 2, 3, 4, 5]),
        ["BadRdata", "BadRdata", "Ok"],
    );
    add(
        "AAAA of 4 octets",
        rec(&[0xc0, 12], 28, &a),
        ["BadRdata", "BadRdata", "Ok"],
    );
    add(
        "NS: an octet after the name",
        rec(&[0xc0, 12], 2, b"\x01a\xc0\x0c\x00"),
        ["BadRdata", "BadRdata", "Ok"],
    );
    add(
        "NAPTR: a string past the RDATA",
        rec(&[0xc0, 12], 35, b"\x00\x01\x00\x02\x09ab"),
        ["BadRdata", "BadRdata", "Ok"],
    );
    // skua-xfr's did not read SRV names (RFC 3597 §4: a receiver should).
    add(
        "SRV: label of 64 octets",
        rec(&[0xc0, 12], 33, &[&[0; 6][..], &l64].concat()),
        ["BadName", "BadName", "Ok"],
    );
    add(
        "MX of 1 octet",
        rec(&[0xc0, 12], 15, &[0]),
        ["BadRdata", "BadRdata", "Layout"],
    );
    add(
        "SOA: 19 octets of numbers",
        rec(
            &[0xc0, 12],
            6,
            &[&[0xc0, 12, 0xc0, 12][..], &[0; 19]].concat(),
        ),
        ["BadRdata", "BadRdata", "Layout"],
    );
    add(
        "CNAME: name past RDLENGTH",
        {
            let (mut m, off) = rec(&[0xc0, 12], 5, b"\x01b\x00");
            m[rdata_at - 1] = 2;
            (m, off)
        },
        ["BadRdata", "BadRdata", "Layout"],
    );
    add(
        "RDLENGTH past the end",
        {
            let (mut m, off) = rec(&[0xc0, 12], 1, &a);
            m[rdata_at - 1] = 5;
            (m, off)
        },
        ["Truncated", "Truncated", "Truncated"],
    );
    add(
        "cut in the fixed fields",
        (base()[..20].to_vec(), 12),
        ["Truncated"; 3],
    );
    cases
}

#[test]
fn hostile_records_are_errors_never_panics() {
    let word = |r: &Read| match r {
        Ok(_) => "Ok".to_string(),
        Err(e) => e.clone(),
    };
    for (case, m, off, said) in hostile() {
        let got = [
            word(&by_new(&m, off)),
            word(&by_resolver(&m, off)),
            word(&by_xfr(&m, off)),
        ];
        assert_eq!(got, said.map(String::from), "{case}");
        assert!(by_new(&m, off).is_err(), "{case}");
    }
}

/// A small xorshift generator: the mutation run is the same on every machine.
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn mutated_corpus_reads_as_the_resolver_did() {
    let mut corpus: Vec<Vec<u8>> = captured().into_iter().map(|(_, m)| m).collect();
    for (t, parts) in samples() {
        for how in 0..3 {
            corpus.push(message(t, &parts, how).0);
        }
    }
    for (_, m, _, _) in hostile() {
        corpus.push(m);
    }
    let mut seed = 0x5eed_u64;
    let mut compared = 0usize;
    for m in &corpus {
        for _ in 0..64 {
            let mut x = m.clone();
            for _ in 0..1 + xorshift(&mut seed) % 3 {
                let i = (xorshift(&mut seed) as usize) % x.len();
                x[i] = match xorshift(&mut seed) % 4 {
                    0 => 0xc0,
                    1 => x[i] ^ (1 << (xorshift(&mut seed) % 8)),
                    2 => (xorshift(&mut seed) % 70) as u8,
                    _ => xorshift(&mut seed) as u8,
                };
            }
            if xorshift(&mut seed).is_multiple_of(8) {
                let cut = (xorshift(&mut seed) as usize) % x.len();
                x.truncate(cut);
            }
            // Never a panic (from any reader); the same records as the resolver's reader,
            // but for SIG and NXT, whose names the new reader decompresses (and refuses
            // when malformed).
            for r in read_all(&x) {
                compared += 1;
                if r.rtype == 24 || r.rtype == 30 {
                    continue;
                }
                assert_eq!(r.new.is_ok(), r.resolver.is_ok(), "{x:02x?}");
                if r.new.is_ok() {
                    assert_eq!(r.new, r.resolver, "{x:02x?}");
                }
            }
        }
    }
    assert!(compared > 10_000, "{compared}");
}
