//! Queries (built by hand so the qname case is sent byte-exact) and
//! responses normalised for comparison and printed dig-style.

use std::fmt::Write as _;

use hickory_proto::rr::{Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable, BinEncoder};

/// DNS type numbers used by the generators.
pub mod types {
    /// A
    pub const A: u16 = 1;
    /// NS
    pub const NS: u16 = 2;
    /// CNAME
    pub const CNAME: u16 = 5;
    /// SOA
    pub const SOA: u16 = 6;
    /// PTR
    pub const PTR: u16 = 12;
    /// MX
    pub const MX: u16 = 15;
    /// TXT
    pub const TXT: u16 = 16;
    /// AAAA
    pub const AAAA: u16 = 28;
    /// SRV
    pub const SRV: u16 = 33;
    /// NAPTR
    pub const NAPTR: u16 = 35;
    /// DNAME
    pub const DNAME: u16 = 39;
    /// DS
    pub const DS: u16 = 43;
    /// SSHFP
    pub const SSHFP: u16 = 44;
    /// DNSKEY
    pub const DNSKEY: u16 = 48;
    /// TLSA
    pub const TLSA: u16 = 52;
    /// SVCB
    pub const SVCB: u16 = 64;
    /// HTTPS
    pub const HTTPS: u16 = 65;
    /// CAA
    pub const CAA: u16 = 257;
}

/// EDNS parameters of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdnsQuery {
    /// Advertised UDP payload size.
    pub udp_size: u16,
    /// DO bit.
    pub dnssec_ok: bool,
}

/// One test query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Absolute qname in presentation form, with the case to send (0x20).
    pub qname: String,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// RD bit.
    pub rd: bool,
    /// CD bit.
    pub cd: bool,
    /// OPT record, if any.
    pub edns: Option<EdnsQuery>,
    /// Send over TCP instead of UDP.
    pub tcp: bool,
    /// Generator's category of the qname (stats, allow-list matching).
    pub category: &'static str,
    /// Generator's model says the reference resolves this (no local answer).
    pub needs_resolution: bool,
}

impl Query {
    /// Wire form with the given message ID.
    pub fn to_wire(&self, id: u16) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&id.to_be_bytes());
        let mut flags: u16 = 0;
        if self.rd {
            flags |= 0x0100;
        }
        if self.cd {
            flags |= 0x0010;
        }
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&u16::from(self.edns.is_some()).to_be_bytes());
        encode_name(&self.qname, &mut out);
        out.extend_from_slice(&self.qtype.to_be_bytes());
        out.extend_from_slice(&self.qclass.to_be_bytes());
        if let Some(e) = self.edns {
            out.push(0); // root owner
            out.extend_from_slice(&41u16.to_be_bytes());
            out.extend_from_slice(&e.udp_size.to_be_bytes());
            let ttl: u32 = if e.dnssec_ok { 0x8000 } else { 0 };
            out.extend_from_slice(&ttl.to_be_bytes());
            out.extend_from_slice(&0u16.to_be_bytes());
        }
        out
    }

    /// One-line description, e.g. `Www.Static.skua. A IN +norec edns(1232,do) udp`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} {} {}",
            self.qname,
            type_name(self.qtype),
            class_name(self.qclass)
        );
        if !self.rd {
            s.push_str(" +norec");
        }
        if self.cd {
            s.push_str(" +cd");
        }
        match self.edns {
            None => s.push_str(" +noedns"),
            Some(e) => {
                let _ = write!(s, " +bufsize={}", e.udp_size);
                if e.dnssec_ok {
                    s.push_str(" +dnssec");
                }
            }
        }
        s.push_str(if self.tcp { " +tcp" } else { " (udp)" });
        let _ = write!(
            s,
            "  [{}{}]",
            self.category,
            if self.needs_resolution {
                ", resolution"
            } else {
                ""
            }
        );
        s
    }
}

/// Encodes a presentation-form name (plain labels, no escapes) into `out`.
pub fn encode_name(name: &str, out: &mut Vec<u8>) {
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        let bytes = label.as_bytes();
        let len = u8::try_from(bytes.len().min(63)).unwrap_or(63);
        out.push(len);
        out.extend_from_slice(&bytes[..usize::from(len)]);
    }
    out.push(0);
}

/// Header fields of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeaderBits {
    /// Message ID.
    pub id: u16,
    /// QR.
    pub qr: bool,
    /// OPCODE.
    pub opcode: u8,
    /// AA.
    pub aa: bool,
    /// TC.
    pub tc: bool,
    /// RD.
    pub rd: bool,
    /// RA.
    pub ra: bool,
    /// Z (reserved bit).
    pub z: bool,
    /// AD.
    pub ad: bool,
    /// CD.
    pub cd: bool,
    /// Low 4 bits of the RCODE.
    pub rcode: u8,
    /// QDCOUNT, ANCOUNT, NSCOUNT, ARCOUNT as received.
    pub counts: [u16; 4],
}

/// A question entry as echoed (name exactly as received, case included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Name in presentation form, case preserved.
    pub name: String,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

/// A resource record reduced to what is compared.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rr {
    /// Comparison key: lower-cased owner, type, class, TTL, canonical RDATA
    /// (DNSSEC canonical form: names lower-cased, uncompressed).
    pub key: (String, u16, u16, u32, Vec<u8>),
    /// dig-like text, as received (case preserved).
    pub text: String,
}

/// The reply's OPT record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptRr {
    /// UDP payload size (CLASS field).
    pub udp_size: u16,
    /// Upper 8 bits of the extended RCODE.
    pub ext_rcode: u8,
    /// EDNS version.
    pub version: u8,
    /// DO bit.
    pub dnssec_ok: bool,
    /// The other 15 flag bits.
    pub other_flags: u16,
    /// Options (code, data).
    pub options: Vec<(u16, Vec<u8>)>,
}

/// A parsed, normalised response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The bytes received.
    pub raw: Vec<u8>,
    /// Header.
    pub header: HeaderBits,
    /// Question section.
    pub question: Vec<Question>,
    /// Answer, authority, additional (without OPT), each sorted.
    pub sections: [Vec<Rr>; 3],
    /// OPT records found in the additional section (normally 0 or 1).
    pub opts: Vec<OptRr>,
    /// Set when the message could not be parsed completely.
    pub parse_error: Option<String>,
}

impl Response {
    /// Full RCODE: header bits plus the OPT extension.
    pub fn rcode(&self) -> u16 {
        let ext = self.opts.first().map_or(0, |o| u16::from(o.ext_rcode));
        (ext << 4) | u16::from(self.header.rcode)
    }

    /// The first OPT record.
    pub fn opt(&self) -> Option<&OptRr> {
        self.opts.first()
    }

    /// Parses a message. Never fails: problems end up in `parse_error` and
    /// the comparison then falls back to the raw bytes.
    pub fn parse(raw: &[u8]) -> Response {
        let mut r = Response {
            raw: raw.to_vec(),
            header: HeaderBits::default(),
            question: Vec::new(),
            sections: [Vec::new(), Vec::new(), Vec::new()],
            opts: Vec::new(),
            parse_error: None,
        };
        if let Err(e) = r.parse_inner(raw) {
            r.parse_error = Some(e);
        }
        for s in &mut r.sections {
            s.sort();
        }
        r
    }

    fn parse_inner(&mut self, m: &[u8]) -> Result<(), String> {
        if m.len() < 12 {
            return Err(format!("short message ({} bytes)", m.len()));
        }
        let u16at = |i: usize| u16::from_be_bytes([m[i], m[i + 1]]);
        let flags = u16at(2);
        self.header = HeaderBits {
            id: u16at(0),
            qr: flags & 0x8000 != 0,
            opcode: ((flags >> 11) & 0xf) as u8,
            aa: flags & 0x0400 != 0,
            tc: flags & 0x0200 != 0,
            rd: flags & 0x0100 != 0,
            ra: flags & 0x0080 != 0,
            z: flags & 0x0040 != 0,
            ad: flags & 0x0020 != 0,
            cd: flags & 0x0010 != 0,
            rcode: (flags & 0xf) as u8,
            counts: [u16at(4), u16at(6), u16at(8), u16at(10)],
        };
        let mut pos = 12;
        for _ in 0..self.header.counts[0] {
            let (name, next) = read_name(m, pos)?;
            if next + 4 > m.len() {
                return Err("truncated question".into());
            }
            self.question.push(Question {
                name,
                qtype: u16at(next),
                qclass: u16at(next + 2),
            });
            pos = next + 4;
        }
        for section in 0..3 {
            for _ in 0..self.header.counts[section + 1] {
                let start = pos;
                let (owner, next) = read_name(m, pos)?;
                if next + 10 > m.len() {
                    return Err("truncated RR header".into());
                }
                let rtype = u16at(next);
                let class = u16at(next + 2);
                let ttl = u32::from_be_bytes([m[next + 4], m[next + 5], m[next + 6], m[next + 7]]);
                let rdlen = usize::from(u16at(next + 8));
                let rdata_start = next + 10;
                if rdata_start + rdlen > m.len() {
                    return Err("truncated RDATA".into());
                }
                pos = rdata_start + rdlen;
                let rdata = &m[rdata_start..pos];
                if section == 2 && rtype == 41 {
                    self.opts.push(OptRr {
                        udp_size: class,
                        ext_rcode: (ttl >> 24) as u8,
                        version: (ttl >> 16) as u8,
                        dnssec_ok: ttl & 0x8000 != 0,
                        other_flags: (ttl & 0x7fff) as u16,
                        options: parse_options(rdata),
                    });
                    continue;
                }
                let (canon, text) = canonical_rr(m, start, &owner, rtype, class, ttl, rdata);
                self.sections[section].push(Rr {
                    key: (owner.to_ascii_lowercase(), rtype, class, ttl, canon),
                    text,
                });
            }
        }
        Ok(())
    }

    /// dig-like multi-line rendering.
    pub fn render(&self) -> String {
        let h = &self.header;
        let mut s = String::new();
        let _ = writeln!(
            s,
            ";; ->>HEADER<<- opcode: {}, status: {}, id: {}",
            opcode_name(h.opcode),
            rcode_name(self.rcode()),
            h.id
        );
        let mut flags = Vec::new();
        for (on, name) in [
            (h.qr, "qr"),
            (h.aa, "aa"),
            (h.tc, "tc"),
            (h.rd, "rd"),
            (h.ra, "ra"),
            (h.z, "z"),
            (h.ad, "ad"),
            (h.cd, "cd"),
        ] {
            if on {
                flags.push(name);
            }
        }
        let _ = writeln!(
            s,
            ";; flags: {}; QUERY: {}, ANSWER: {}, AUTHORITY: {}, ADDITIONAL: {}",
            flags.join(" "),
            h.counts[0],
            h.counts[1],
            h.counts[2],
            h.counts[3]
        );
        for o in &self.opts {
            let _ = writeln!(
                s,
                "; EDNS: version: {}, flags:{}{}; udp: {}{}",
                o.version,
                if o.dnssec_ok { " do" } else { "" },
                if o.other_flags != 0 {
                    format!(" MBZ: {:#06x}", o.other_flags)
                } else {
                    String::new()
                },
                o.udp_size,
                if o.options.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; options: {}",
                        o.options
                            .iter()
                            .map(|(c, d)| format!("{c}:{}", hex(d)))
                            .collect::<Vec<_>>()
                            .join(" ")
                    )
                }
            );
        }
        for q in &self.question {
            let _ = writeln!(
                s,
                ";{}\t\t{}\t{}",
                q.name,
                class_name(q.qclass),
                type_name(q.qtype)
            );
        }
        for (i, title) in ["ANSWER", "AUTHORITY", "ADDITIONAL"].iter().enumerate() {
            if !self.sections[i].is_empty() {
                let _ = writeln!(s, ";; {title} SECTION:");
                for rr in &self.sections[i] {
                    let _ = writeln!(s, "{}", rr.text);
                }
            }
        }
        if let Some(e) = &self.parse_error {
            let _ = writeln!(s, ";; PARSE ERROR: {e}; raw: {}", hex(&self.raw));
        }
        s
    }
}

/// Reads a possibly compressed name at `pos`; returns it in presentation
/// form (case preserved) and the offset after it in the original stream.
pub fn read_name(m: &[u8], mut pos: usize) -> Result<(String, usize), String> {
    let mut out = String::new();
    let mut end: Option<usize> = None;
    let mut hops = 0;
    loop {
        let len = *m.get(pos).ok_or("name runs past the end")?;
        match len & 0xc0 {
            0x00 => {
                if len == 0 {
                    if out.is_empty() {
                        out.push('.');
                    }
                    return Ok((out, end.unwrap_or(pos + 1)));
                }
                let l = usize::from(len);
                let label = m
                    .get(pos + 1..pos + 1 + l)
                    .ok_or("label runs past the end")?;
                for &b in label {
                    match b {
                        b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => {
                            out.push('\\');
                            out.push(char::from(b));
                        }
                        0x21..=0x7e => out.push(char::from(b)),
                        _ => {
                            let _ = write!(out, "\\{b:03}");
                        }
                    }
                }
                out.push('.');
                pos += 1 + l;
            }
            0xc0 => {
                let lo = *m.get(pos + 1).ok_or("pointer runs past the end")?;
                if end.is_none() {
                    end = Some(pos + 2);
                }
                pos = usize::from(u16::from_be_bytes([len & 0x3f, lo]));
                hops += 1;
                if hops > 64 {
                    return Err("compression loop".into());
                }
            }
            _ => return Err(format!("bad label type {len:#04x}")),
        }
    }
}

fn parse_options(mut d: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    while d.len() >= 4 {
        let code = u16::from_be_bytes([d[0], d[1]]);
        let len = usize::from(u16::from_be_bytes([d[2], d[3]]));
        let data = d.get(4..4 + len).unwrap_or(&d[4..]).to_vec();
        d = d.get(4 + len..).unwrap_or(&[]);
        out.push((code, data));
    }
    out
}

/// Canonical RDATA and display text of the RR starting at `start`. Uses
/// hickory for the RDATA (it knows which types embed compressible names);
/// falls back to the RFC 3597 generic form.
fn canonical_rr(
    m: &[u8],
    start: usize,
    owner: &str,
    rtype: u16,
    class: u16,
    ttl: u32,
    rdata: &[u8],
) -> (Vec<u8>, String) {
    if rtype == types::TXT
        && let Some(text) = txt_presentation(rdata)
    {
        let line = format!("{owner}\t{ttl}\t{}\tTXT\t{text}", class_name(class));
        return (rdata.to_vec(), line);
    }
    if rtype == types::DNAME
        && let Ok((target, end)) = read_name(rdata, 0)
        && end == rdata.len()
    {
        // RFC 6672 §2.5: never compressed; canonical form lower-cases it (RFC 4034 §6.2).
        let line = format!("{owner}\t{ttl}\t{}\tDNAME\t{target}", class_name(class));
        return (rdata.to_ascii_lowercase(), line);
    }
    let mut decoder = BinDecoder::new(m);
    let parsed = decoder
        .read_slice(start)
        .ok()
        .and_then(|_| Record::read(&mut decoder).ok());
    if let Some(rec) = parsed {
        let mut buf = Vec::new();
        let mut enc = BinEncoder::new(&mut buf);
        enc.set_canonical_form(true);
        if rec.data.emit(&mut enc).is_ok() {
            let text = format!(
                "{owner}\t{ttl}\t{}\t{}\t{}",
                class_name(class),
                type_name(rtype),
                rec.data
            );
            return (buf, text);
        }
    }
    let text = format!(
        "{owner}\t{ttl}\t{}\t{}\t\\# {} {}",
        class_name(class),
        type_name(rtype),
        rdata.len(),
        hex(rdata)
    );
    (rdata.to_vec(), text)
}

/// TXT RDATA as dig prints it (`"one" "two"`), or None if malformed.
fn txt_presentation(mut d: &[u8]) -> Option<String> {
    let mut parts = Vec::new();
    while let Some((&len, rest)) = d.split_first() {
        let len = usize::from(len);
        let chunk = rest.get(..len)?;
        let mut s = String::from("\"");
        for &b in chunk {
            match b {
                b'"' | b'\\' => {
                    s.push('\\');
                    s.push(char::from(b));
                }
                0x20..=0x7e => s.push(char::from(b)),
                _ => {
                    let _ = write!(s, "\\{b:03}");
                }
            }
        }
        s.push('"');
        parts.push(s);
        d = &rest[len..];
    }
    Some(parts.join(" "))
}

/// Lower-case hex.
pub fn hex(d: &[u8]) -> String {
    d.iter()
        .fold(String::with_capacity(d.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Mnemonic of a type number (`TYPE123` when unknown).
pub fn type_name(t: u16) -> String {
    match RecordType::from(t) {
        RecordType::Unknown(n) => format!("TYPE{n}"),
        rt => rt.to_string(),
    }
}

/// Mnemonic of a class number.
pub fn class_name(c: u16) -> String {
    match c {
        1 => "IN".into(),
        3 => "CH".into(),
        4 => "HS".into(),
        254 => "NONE".into(),
        255 => "ANY".into(),
        n => format!("CLASS{n}"),
    }
}

/// Mnemonic of an opcode.
pub fn opcode_name(o: u8) -> String {
    match o {
        0 => "QUERY".into(),
        1 => "IQUERY".into(),
        2 => "STATUS".into(),
        4 => "NOTIFY".into(),
        5 => "UPDATE".into(),
        n => format!("OPCODE{n}"),
    }
}

/// Mnemonic of a full (extended) RCODE.
pub fn rcode_name(r: u16) -> String {
    match r {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        6 => "YXDOMAIN".into(),
        7 => "YXRRSET".into(),
        8 => "NXRRSET".into(),
        9 => "NOTAUTH".into(),
        10 => "NOTZONE".into(),
        16 => "BADVERS".into(),
        23 => "BADCOOKIE".into(),
        n => format!("RCODE{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_round_trip_keeps_case_and_edns() {
        let q = Query {
            qname: "WwW.Example.skua.".into(),
            qtype: types::AAAA,
            qclass: 1,
            rd: true,
            cd: false,
            edns: Some(EdnsQuery {
                udp_size: 1400,
                dnssec_ok: true,
            }),
            tcp: false,
            category: "t",
            needs_resolution: false,
        };
        let r = Response::parse(&q.to_wire(0xbeef));
        assert!(r.parse_error.is_none(), "{:?}", r.parse_error);
        assert_eq!(r.header.id, 0xbeef);
        assert!(r.header.rd);
        assert_eq!(r.question[0].name, "WwW.Example.skua.");
        assert_eq!(r.question[0].qtype, types::AAAA);
        let o = r.opt().expect("opt");
        assert_eq!((o.udp_size, o.dnssec_ok, o.version), (1400, true, 0));
    }

    #[test]
    fn compressed_rdata_compares_case_insensitively() {
        // Reply to "A.x." CNAME with target compressed against the question
        // vs. the same target spelled in lower case.
        let mut a = vec![0, 1, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0];
        a.extend_from_slice(b"\x01A\x01x\x00\x00\x05\x00\x01");
        a.extend_from_slice(b"\xc0\x0c\x00\x05\x00\x01\x00\x00\x00\x3c\x00\x04\x01b\xc0\x0e");
        let mut b = vec![0, 1, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0];
        b.extend_from_slice(b"\x01A\x01x\x00\x00\x05\x00\x01");
        b.extend_from_slice(
            b"\x01a\x01x\x00\x00\x05\x00\x01\x00\x00\x00\x3c\x00\x05\x01b\x01X\x00",
        );
        let (ra, rb) = (Response::parse(&a), Response::parse(&b));
        assert!(ra.parse_error.is_none() && rb.parse_error.is_none());
        assert_eq!(ra.sections[0][0].key, rb.sections[0][0].key);
    }

    #[test]
    fn txt_is_printed_like_dig() {
        assert_eq!(
            txt_presentation(b"\x03one\x05t\"w o").as_deref(),
            Some(r#""one" "t\"w o""#)
        );
        assert_eq!(txt_presentation(b"\x05ab"), None);
    }
}
