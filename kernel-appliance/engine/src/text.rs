//! Presentation-format resource records: Unbound `local-data` / `local-data-ptr` strings and
//! the RDATA of master-file records (RFC 1035 §5.1, RFC 3597 §5).
//!
//! What this module does:
//!
//! - Tokenises presentation text as RFC 1035 §5.1 describes it: blanks separate fields, `;`
//!   starts a comment, `( … )` groups fields across lines, `"…"` quotes a character-string,
//!   `\X` and `\DDD` escape a byte. The same tokeniser drives [`crate::zonefile`].
//! - Parses RR type mnemonics and the RFC 3597 §5 `TYPEnnn` / `CLASSnnn` forms, TTLs in seconds
//!   or BIND units (`1h30m`), and whole records in Unbound `local-data` syntax
//!   (`owner [TTL] [CLASS] TYPE RDATA`, TTL and class in either order).
//! - Turns RDATA text into **uncompressed** wire format (RFC 3597 §4: no name compression, case
//!   preserved). Names in RDATA written without a trailing dot are made absolute with the
//!   origin given; with no origin they are taken as absolute, as Unbound does.
//! - Accepts the generic RDATA syntax `\# <length> <hex>` (RFC 3597 §5) for every type, and
//!   checks it against the wire layout of the types whose layout the engine relies on
//!   (A, AAAA, the single-name types, MX-like types, SOA, SRV).
//!
//! Types with a presentation parser here: A, NS, MD, MF, CNAME, SOA, MB, MG, MR, PTR, HINFO,
//! MINFO, MX, TXT, RP, AFSDB, RT, PX, AAAA, SRV, NAPTR, KX, CERT, DNAME, DS, SSHFP, RRSIG, NSEC,
//! DNSKEY, DHCID, NSEC3, NSEC3PARAM, TLSA, SMIMEA, CDS, CDNSKEY, OPENPGPKEY, CSYNC, ZONEMD, SVCB,
//! HTTPS, SPF, EUI48, EUI64, URI, CAA, AVC, RESINFO, WALLET, TA, DLV.
//!
//! What it does not do: other types (LOC, APL, WKS, IPSECKEY, HIP, …) must be written in the
//! RFC 3597 `\#` form, and meta/query types (OPT, ANY, AXFR, TSIG, …; RFC 6895 §3.1) are
//! refused. It does not check zone semantics (CNAME and other data, SOA placement, names
//! outside the zone): that is the store's job. It does not use hickory-proto's text parser:
//! in 0.26.3 that parser decodes `\DDD` wrongly in quoted strings, refuses `@`, rejects SvcParams
//! written out of key order and allocates several times per record.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write as _};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::name::{MAX_LABEL_LEN, MAX_NAME_LEN, NameError, WireName, fmt_wire_name, wire_name_len};
use crate::rr::{Rr, class, rtype};

/// A presentation-format record or RDATA that could not be parsed. The message is meant for
/// operators (`unknown RR type 'AX'`, `bad IPv4 address '1.2.3'`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextError(pub String);

impl TextError {
    /// The message, without any file or line prefix.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl core::error::Error for TextError {}

fn err<T>(msg: String) -> Result<T, TextError> {
    Err(TextError(msg))
}

/// Shows user text in a message, cut to a readable length.
struct Show<'a>(&'a str);

impl fmt::Display for Show<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX: usize = 60;
        let mut chars = self.0.char_indices();
        match chars.nth(MAX) {
            Some((cut, _)) => write!(f, "{}...", &self.0[..cut]),
            None => f.write_str(self.0),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RR types and classes
// ---------------------------------------------------------------------------------------------

/// IANA "Resource Record (RR) TYPEs" mnemonics (2025 registry).
const TYPE_NAMES: &[(u16, &str)] = &[
    (1, "A"),
    (2, "NS"),
    (3, "MD"),
    (4, "MF"),
    (5, "CNAME"),
    (6, "SOA"),
    (7, "MB"),
    (8, "MG"),
    (9, "MR"),
    (10, "NULL"),
    (11, "WKS"),
    (12, "PTR"),
    (13, "HINFO"),
    (14, "MINFO"),
    (15, "MX"),
    (16, "TXT"),
    (17, "RP"),
    (18, "AFSDB"),
    (19, "X25"),
    (20, "ISDN"),
    (21, "RT"),
    (22, "NSAP"),
    (23, "NSAP-PTR"),
    (24, "SIG"),
    (25, "KEY"),
    (26, "PX"),
    (27, "GPOS"),
    (28, "AAAA"),
    (29, "LOC"),
    (30, "NXT"),
    (31, "EID"),
    (32, "NIMLOC"),
    (33, "SRV"),
    (34, "ATMA"),
    (35, "NAPTR"),
    (36, "KX"),
    (37, "CERT"),
    (38, "A6"),
    (39, "DNAME"),
    (40, "SINK"),
    (41, "OPT"),
    (42, "APL"),
    (43, "DS"),
    (44, "SSHFP"),
    (45, "IPSECKEY"),
    (46, "RRSIG"),
    (47, "NSEC"),
    (48, "DNSKEY"),
    (49, "DHCID"),
    (50, "NSEC3"),
    (51, "NSEC3PARAM"),
    (52, "TLSA"),
    (53, "SMIMEA"),
    (55, "HIP"),
    (56, "NINFO"),
    (57, "RKEY"),
    (58, "TALINK"),
    (59, "CDS"),
    (60, "CDNSKEY"),
    (61, "OPENPGPKEY"),
    (62, "CSYNC"),
    (63, "ZONEMD"),
    (64, "SVCB"),
    (65, "HTTPS"),
    (66, "DSYNC"),
    (67, "HHIT"),
    (68, "BRID"),
    (99, "SPF"),
    (100, "UINFO"),
    (101, "UID"),
    (102, "GID"),
    (103, "UNSPEC"),
    (104, "NID"),
    (105, "L32"),
    (106, "L64"),
    (107, "LP"),
    (108, "EUI48"),
    (109, "EUI64"),
    (128, "NXNAME"),
    (249, "TKEY"),
    (250, "TSIG"),
    (251, "IXFR"),
    (252, "AXFR"),
    (253, "MAILB"),
    (254, "MAILA"),
    (255, "ANY"),
    (256, "URI"),
    (257, "CAA"),
    (258, "AVC"),
    (259, "DOA"),
    (260, "AMTRELAY"),
    (261, "RESINFO"),
    (262, "WALLET"),
    (263, "CLA"),
    (264, "IPN"),
    (32768, "TA"),
    (32769, "DLV"),
];

// Type codes used below that `crate::rr::rtype` does not name.
const MD: u16 = 3;
const MF: u16 = 4;
const MB: u16 = 7;
const MG: u16 = 8;
const MR: u16 = 9;
const MINFO: u16 = 14;
const RP: u16 = 17;
const AFSDB: u16 = 18;
const RT: u16 = 21;
const PX: u16 = 26;
const KX: u16 = 36;
const CERT: u16 = 37;
const DHCID: u16 = 49;
const NSEC3: u16 = 50;
const NSEC3PARAM: u16 = 51;
const SMIMEA: u16 = 53;
const CDS: u16 = 59;
const CDNSKEY: u16 = 60;
const OPENPGPKEY: u16 = 61;
const CSYNC: u16 = 62;
const ZONEMD: u16 = 63;
const SPF: u16 = 99;
const EUI48: u16 = 108;
const EUI64: u16 = 109;
const URI: u16 = 256;
const AVC: u16 = 258;
const RESINFO: u16 = 261;
const WALLET: u16 = 262;
const TA: u16 = 32768;
const DLV: u16 = 32769;

/// Parses an RR type: a mnemonic (case-insensitive) or the RFC 3597 §5 form `TYPEnnn`.
pub fn rtype_from_str(s: &str) -> Option<u16> {
    // Fast path for the spellings bulk data uses.
    match s {
        "A" => return Some(rtype::A),
        "AAAA" => return Some(rtype::AAAA),
        "CNAME" => return Some(rtype::CNAME),
        "PTR" => return Some(rtype::PTR),
        "TXT" => return Some(rtype::TXT),
        "MX" => return Some(rtype::MX),
        "NS" => return Some(rtype::NS),
        _ => {}
    }
    if let Some(n) = strip_prefix_ignore_case(s, "TYPE") {
        return parse_decimal::<u16>(n);
    }
    TYPE_NAMES
        .iter()
        .find(|(_, name)| name.eq_ignore_ascii_case(s))
        .map(|&(code, _)| code)
}

/// The mnemonic of an RR type, or `TYPEnnn` (RFC 3597 §5) for types without one.
pub fn rtype_to_string(t: u16) -> String {
    match TYPE_NAMES.iter().find(|&&(code, _)| code == t) {
        Some((_, name)) => (*name).to_string(),
        None => format!("TYPE{t}"),
    }
}

/// Parses a class: `IN`, `CS`, `CH`, `HS` (case-insensitive) or `CLASSnnn` (RFC 3597 §5).
/// `NONE` and `ANY` are query/update-only classes and are not accepted (and `ANY` would be
/// ambiguous with the type of the same name).
pub fn class_from_str(s: &str) -> Option<u16> {
    if s == "IN" {
        return Some(class::IN);
    }
    if let Some(n) = strip_prefix_ignore_case(s, "CLASS") {
        return parse_decimal::<u16>(n);
    }
    [("IN", class::IN), ("CS", 2), ("CH", class::CH), ("HS", 4)]
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(s))
        .map(|&(_, code)| code)
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// Decimal digits only (no sign, no blanks), within the range of `T`.
fn parse_decimal<T: core::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses a TTL: plain seconds, or BIND units (`1w`, `1d`, `1h30m`, `90s`; case-insensitive),
/// where every number carries a unit. Values above 2^31 − 1 are refused (RFC 2181 §8).
pub fn parse_ttl(s: &str) -> Option<u32> {
    parse_duration(s).filter(|&v| v <= 0x7fff_ffff)
}

/// Like [`parse_ttl`] but over the whole `u32` range (SOA timers, RFC 1035 §3.3.13).
fn parse_duration(s: &str) -> Option<u32> {
    if let Some(v) = parse_decimal::<u32>(s) {
        return Some(v);
    }
    if s.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut num: Option<u64> = None;
    for b in s.bytes() {
        if b.is_ascii_digit() {
            let v = num.unwrap_or(0) * 10 + u64::from(b - b'0');
            if v > u64::from(u32::MAX) {
                return None;
            }
            num = Some(v);
        } else {
            let unit: u64 = match b.to_ascii_lowercase() {
                b's' => 1,
                b'm' => 60,
                b'h' => 3600,
                b'd' => 86_400,
                b'w' => 604_800,
                _ => return None,
            };
            total += num.take()? * unit;
            if total > u64::from(u32::MAX) {
                return None;
            }
        }
    }
    if num.is_some() {
        return None; // "1h30": BIND wants a unit on every number once units are used
    }
    u32::try_from(total).ok()
}

/// Types that may appear in data (not meta or query types, RFC 6895 §3.1).
fn is_data_type(t: u16) -> bool {
    t != 0 && t != rtype::OPT && !(128..=255).contains(&t)
}

// ---------------------------------------------------------------------------------------------
// Tokeniser (RFC 1035 §5.1)
// ---------------------------------------------------------------------------------------------

/// One field of presentation text. `text` is raw: escapes are not decoded, and for a quoted
/// string the quotes are removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tok<'a> {
    pub(crate) text: &'a str,
    pub(crate) quoted: bool,
}

/// Where an entry (one record or directive, possibly spanning lines in parentheses) starts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    /// 1-based line of the entry's first line.
    pub(crate) line: usize,
    /// The entry's first line starts with a blank: the owner is omitted (RFC 1035 §5.1).
    pub(crate) blank_owner: bool,
}

/// A tokenising error, at the line where the entry starts.
#[derive(Clone, Debug)]
pub(crate) struct LexError {
    pub(crate) line: usize,
    pub(crate) msg: String,
}

/// Splits presentation text into entries of tokens without allocating (the token vector is the
/// caller's and is reused).
pub(crate) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    line: usize,
    /// Zone-file mode: a newline outside parentheses ends an entry. Otherwise newlines are
    /// blanks and the whole text is one entry.
    lines: bool,
}

impl<'a> Lexer<'a> {
    /// `lines`: see the field. Line numbers start at 1.
    pub(crate) fn new(src: &'a str, lines: bool) -> Self {
        Self {
            src,
            pos: 0,
            line: 1,
            lines,
        }
    }

    /// Reads the next non-empty entry into `toks` (cleared first); `None` at the end.
    pub(crate) fn next_entry(
        &mut self,
        toks: &mut Vec<Tok<'a>>,
    ) -> Result<Option<Entry>, LexError> {
        toks.clear();
        let src = self.src;
        let bytes = src.as_bytes();
        let mut start = self.line;
        let mut blank_owner = matches!(bytes.get(self.pos), Some(b' ' | b'\t'));
        let mut paren: Option<usize> = None;
        loop {
            let Some(&b) = bytes.get(self.pos) else {
                if let Some(open) = paren {
                    return Err(LexError {
                        line: start,
                        msg: format!("'(' opened on line {open} is never closed"),
                    });
                }
                return Ok((!toks.is_empty()).then_some(Entry {
                    line: start,
                    blank_owner,
                }));
            };
            match b {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    if paren.is_none() && self.lines {
                        if !toks.is_empty() {
                            return Ok(Some(Entry {
                                line: start,
                                blank_owner,
                            }));
                        }
                        start = self.line;
                        blank_owner = matches!(bytes.get(self.pos), Some(b' ' | b'\t'));
                    }
                }
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b';' => {
                    while bytes.get(self.pos).is_some_and(|&c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                b'(' => {
                    if let Some(open) = paren {
                        return Err(LexError {
                            line: start,
                            msg: format!("nested '(' (the one on line {open} is still open)"),
                        });
                    }
                    paren = Some(self.line);
                    self.pos += 1;
                }
                b')' => {
                    if paren.take().is_none() {
                        return Err(LexError {
                            line: start,
                            msg: "')' without a matching '('".to_string(),
                        });
                    }
                    self.pos += 1;
                }
                b'"' => {
                    let open = self.pos + 1;
                    let close = self.skip_quoted(open).ok_or_else(|| unterminated(start))?;
                    toks.push(Tok {
                        text: &src[open..close],
                        quoted: true,
                    });
                    self.pos = close + 1;
                }
                _ => {
                    let first = self.pos;
                    let mut i = self.pos;
                    while let Some(&c) = bytes.get(i) {
                        match c {
                            b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')' => break,
                            b'\\' => {
                                i += if bytes.get(i + 1).is_some_and(|&n| n != b'\n') {
                                    2
                                } else {
                                    1
                                }
                            }
                            // `key="a b"` (RFC 9460 SvcParams): the quoted part stays in the token.
                            b'"' => {
                                i = self.skip_quoted(i + 1).ok_or_else(|| unterminated(start))? + 1
                            }
                            _ => i += 1,
                        }
                    }
                    let end = i.min(bytes.len());
                    toks.push(Tok {
                        text: &src[first..end],
                        quoted: false,
                    });
                    self.pos = end;
                }
            }
        }
    }

    /// From just after an opening quote, the index of the closing quote. A quoted string may not
    /// span lines.
    fn skip_quoted(&self, mut i: usize) -> Option<usize> {
        let bytes = self.src.as_bytes();
        loop {
            match *bytes.get(i)? {
                b'"' => return Some(i),
                b'\n' => return None,
                b'\\' => {
                    if bytes.get(i + 1).is_some_and(|&n| n != b'\n') {
                        i += 2;
                    } else {
                        return None;
                    }
                }
                _ => i += 1,
            }
        }
    }
}

fn unterminated(line: usize) -> LexError {
    LexError {
        line,
        msg: "unterminated quoted string (quotes must close on the same line)".to_string(),
    }
}

/// All tokens of `text` taken as one entry (newlines are blanks).
fn tokens_of(text: &str) -> Result<Vec<Tok<'_>>, TextError> {
    let mut toks = Vec::new();
    match Lexer::new(text, false).next_entry(&mut toks) {
        Ok(_) => Ok(toks),
        Err(e) => err(e.msg),
    }
}

// ---------------------------------------------------------------------------------------------
// Field decoders
// ---------------------------------------------------------------------------------------------

/// Decodes a `\X` / `\DDD` escape (the bytes after the backslash): (byte, bytes used).
fn escape(rest: &[u8]) -> Option<(u8, usize)> {
    match rest {
        [a, b, c, ..] if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            let v = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            u8::try_from(v).ok().map(|v| (v, 3))
        }
        [d, ..] if d.is_ascii_digit() => None,
        [x, ..] => Some((*x, 1)),
        [] => None,
    }
}

/// Appends the wire form of a presentation name (RFC 1035 §5.1) to `out`: the same rules as
/// [`WireName::parse`], without the intermediate allocation.
pub(crate) fn push_name(
    text: &str,
    origin: Option<&WireName>,
    out: &mut Vec<u8>,
) -> Result<(), NameError> {
    let base = out.len();
    let r = push_name_inner(text, origin, out);
    if r.is_err() {
        out.truncate(base);
    }
    r
}

fn push_name_inner(
    text: &str,
    origin: Option<&WireName>,
    out: &mut Vec<u8>,
) -> Result<(), NameError> {
    let base = out.len();
    if text == "@" {
        out.extend_from_slice(origin.map_or(&[0u8][..], WireName::as_bytes));
        return Ok(());
    }
    if text == "." {
        out.push(0);
        return Ok(());
    }
    let bytes = text.as_bytes();
    let mut label_start = out.len();
    out.push(0);
    let mut absolute = false;
    let mut i = 0usize;
    let close = |out: &mut Vec<u8>, label_start: usize| -> Result<(), NameError> {
        let len = out.len() - label_start - 1;
        if len == 0 {
            return Err(NameError::EmptyLabel);
        }
        out[label_start] = u8::try_from(len)
            .ok()
            .filter(|&l| usize::from(l) <= MAX_LABEL_LEN)
            .ok_or(NameError::LabelTooLong)?;
        Ok(())
    };
    while let Some(&c) = bytes.get(i) {
        match c {
            b'.' => {
                close(out, label_start)?;
                if i + 1 == bytes.len() {
                    absolute = true;
                } else {
                    label_start = out.len();
                    out.push(0);
                }
                i += 1;
            }
            b'\\' => {
                let (b, used) = escape(&bytes[i + 1..]).ok_or(NameError::BadEscape)?;
                out.push(b);
                i += 1 + used;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    if !absolute {
        close(out, label_start)?;
    }
    match origin {
        Some(o) if !absolute => out.extend_from_slice(o.as_bytes()),
        _ => out.push(0),
    }
    if out.len() - base > MAX_NAME_LEN {
        return Err(NameError::NameTooLong);
    }
    Ok(())
}

/// Decodes a character-string's escapes (RFC 1035 §5.1) and appends the bytes (no length
/// byte, no length limit). `None` on a bad escape.
pub(crate) fn push_unescaped(text: &str, out: &mut Vec<u8>) -> Option<()> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&c) = bytes.get(i) {
        if c == b'\\' {
            let (b, used) = escape(&bytes[i + 1..])?;
            out.push(b);
            i += 1 + used;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Some(())
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Hex digits spread over several tokens (blanks allowed between digits). `None` on a bad
/// digit or an odd count.
fn push_hex<'a>(toks: impl IntoIterator<Item = &'a str>, out: &mut Vec<u8>) -> Option<()> {
    let mut high: Option<u8> = None;
    for t in toks {
        for c in t.bytes() {
            let v = hex_val(c)?;
            match high.take() {
                Some(h) => out.push(h << 4 | v),
                None => high = Some(v),
            }
        }
    }
    high.is_none().then_some(())
}

fn b64_val(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Base64 (RFC 4648 §4, padded) spread over several tokens.
fn push_base64<'a>(toks: impl IntoIterator<Item = &'a str>, out: &mut Vec<u8>) -> Option<()> {
    let (mut acc, mut bits, mut chars, mut pad) = (0u32, 0u32, 0usize, 0usize);
    for t in toks {
        for c in t.bytes() {
            if c == b'=' {
                pad += 1;
                continue;
            }
            if pad > 0 {
                return None;
            }
            acc = (acc << 6) | b64_val(c)?;
            bits += 6;
            chars += 1;
            if bits >= 8 {
                bits -= 8;
                out.push(((acc >> bits) & 0xff) as u8);
                acc &= (1 << bits) - 1;
            }
        }
    }
    ((chars + pad) % 4 == 0 && pad <= 2 && chars % 4 != 1).then_some(())
}

/// Base32hex without padding (RFC 4648 §7, as NSEC3 uses it, RFC 5155 §3.3).
fn push_base32hex(t: &str, out: &mut Vec<u8>) -> Option<()> {
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in t.bytes() {
        let v = match c.to_ascii_uppercase() {
            d @ b'0'..=b'9' => d - b'0',
            l @ b'A'..=b'V' => l - b'A' + 10,
            _ => return None,
        };
        acc = (acc << 5) | u32::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    (bits < 5).then_some(())
}

/// DNSSEC algorithm mnemonics (RFC 4034 Appendix A.1, IANA registry).
fn dnssec_alg(s: &str) -> Option<u8> {
    if let Some(v) = parse_decimal::<u8>(s) {
        return Some(v);
    }
    const ALGS: &[(&str, u8)] = &[
        ("RSAMD5", 1),
        ("DH", 2),
        ("DSA", 3),
        ("RSASHA1", 5),
        ("DSA-NSEC3-SHA1", 6),
        ("RSASHA1-NSEC3-SHA1", 7),
        ("RSASHA256", 8),
        ("RSASHA512", 10),
        ("ECC-GOST", 12),
        ("ECDSAP256SHA256", 13),
        ("ECDSAP384SHA384", 14),
        ("ED25519", 15),
        ("ED448", 16),
        ("INDIRECT", 252),
        ("PRIVATEDNS", 253),
        ("PRIVATEOID", 254),
    ];
    ALGS.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|&(_, v)| v)
}

/// CERT type mnemonics (RFC 4398 §2.1).
fn cert_type(s: &str) -> Option<u16> {
    if let Some(v) = parse_decimal::<u16>(s) {
        return Some(v);
    }
    const TYPES: &[(&str, u16)] = &[
        ("PKIX", 1),
        ("SPKI", 2),
        ("PGP", 3),
        ("IPKIX", 4),
        ("ISPKI", 5),
        ("IPGP", 6),
        ("ACPKIX", 7),
        ("IACPKIX", 8),
        ("URI", 253),
        ("OID", 254),
    ];
    TYPES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|&(_, v)| v)
}

/// RRSIG time (RFC 4034 §3.2): `YYYYMMDDHHmmSS` in UTC, or seconds since the epoch; the wire
/// value is taken modulo 2^32 (serial number arithmetic, RFC 4034 §3.1.5).
fn rrsig_time(s: &str) -> Option<u32> {
    if s.len() != 14 {
        return parse_decimal::<u32>(s);
    }
    let num = |r: core::ops::Range<usize>| parse_decimal::<i64>(s.get(r)?);
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, sec) = (num(8..10)?, num(10..12)?, num(12..14)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let mdays = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let max_day = *mdays.get(usize::try_from(mo.checked_sub(1)?).ok()?)?;
    if d < 1 || d > max_day || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    // Days from 1970-01-01 (H. Hinnant's days_from_civil).
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    u32::try_from(secs.rem_euclid(1 << 32)).ok()
}

/// Type bitmap (RFC 4034 §4.1.2) from a sorted-or-not list of types.
fn push_type_bitmap(types: &mut [u16], out: &mut Vec<u8>) {
    types.sort_unstable();
    let mut i = 0;
    while let Some(&first) = types.get(i) {
        let [window, _] = first.to_be_bytes();
        let mut bitmap = [0u8; 32];
        let mut used = 0usize;
        while let Some(&t) = types.get(i) {
            let [w, low] = t.to_be_bytes();
            if w != window {
                break;
            }
            let low = usize::from(low);
            bitmap[low / 8] |= 0x80 >> (low % 8);
            used = low / 8 + 1;
            i += 1;
        }
        out.push(window);
        out.push(used as u8); // 1..=32
        out.extend_from_slice(&bitmap[..used]);
    }
}

// ---------------------------------------------------------------------------------------------
// RDATA
// ---------------------------------------------------------------------------------------------

/// Cursor over the RDATA tokens of one record, producing typed errors.
struct Fields<'t, 'a> {
    toks: &'t [Tok<'a>],
    pos: usize,
    rtype: u16,
}

impl<'t, 'a> Fields<'t, 'a> {
    fn fail<T>(&self, msg: fmt::Arguments<'_>) -> Result<T, TextError> {
        err(format!("{} record: {msg}", rtype_to_string(self.rtype)))
    }

    fn next(&mut self, what: &str) -> Result<Tok<'a>, TextError> {
        match self.toks.get(self.pos) {
            Some(&t) => {
                self.pos += 1;
                Ok(t)
            }
            None => self.fail(format_args!("missing {what}")),
        }
    }

    fn word(&mut self, what: &str) -> Result<&'a str, TextError> {
        let t = self.next(what)?;
        if t.quoted {
            return self.fail(format_args!(
                "{what} must not be quoted (got \"{}\")",
                Show(t.text)
            ));
        }
        Ok(t.text)
    }

    fn with<T>(&mut self, what: &str, f: impl FnOnce(&str) -> Option<T>) -> Result<T, TextError> {
        let w = self.word(what)?;
        match f(w) {
            Some(v) => Ok(v),
            None => self.fail(format_args!("bad {what} '{}'", Show(w))),
        }
    }

    fn u8(&mut self, what: &str) -> Result<u8, TextError> {
        self.with(what, parse_decimal::<u8>)
    }

    fn u16(&mut self, what: &str) -> Result<u16, TextError> {
        self.with(what, parse_decimal::<u16>)
    }

    fn u32(&mut self, what: &str) -> Result<u32, TextError> {
        self.with(what, parse_decimal::<u32>)
    }

    fn name(
        &mut self,
        what: &str,
        origin: Option<&WireName>,
        out: &mut Vec<u8>,
    ) -> Result<(), TextError> {
        let w = self.word(what)?;
        match push_name(w, origin, out) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(format_args!("bad {what} '{}': {e}", Show(w))),
        }
    }

    /// One character-string (RFC 1035 §3.3): length byte + at most 255 octets.
    fn char_string(&mut self, what: &str, out: &mut Vec<u8>) -> Result<(), TextError> {
        let t = self.next(what)?;
        push_char_string(t, out).map_err(|m| {
            TextError(format!(
                "{} record: {what}: {m}",
                rtype_to_string(self.rtype)
            ))
        })
    }

    /// The rest of the tokens (consumed).
    fn rest(&mut self) -> &'t [Tok<'a>] {
        let r = self.toks.get(self.pos..).unwrap_or(&[]);
        self.pos = self.toks.len();
        r
    }

    /// The rest as unquoted words, of which there must be at least one.
    fn rest_words(&mut self, what: &str) -> Result<&'t [Tok<'a>], TextError> {
        let rest = self.rest();
        match rest.iter().find(|t| t.quoted) {
            _ if rest.is_empty() => self.fail(format_args!("missing {what}")),
            Some(q) => self.fail(format_args!(
                "{what} must not be quoted (got \"{}\")",
                Show(q.text)
            )),
            None => Ok(rest),
        }
    }

    fn hex_rest(&mut self, what: &str, out: &mut Vec<u8>) -> Result<(), TextError> {
        let rest = self.rest_words(what)?;
        match push_hex(rest.iter().map(|t| t.text), out) {
            Some(()) => Ok(()),
            None => self.fail(format_args!("bad hex in {what}")),
        }
    }

    fn base64_rest(&mut self, what: &str, out: &mut Vec<u8>) -> Result<(), TextError> {
        let rest = self.rest_words(what)?;
        match push_base64(rest.iter().map(|t| t.text), out) {
            Some(()) => Ok(()),
            None => self.fail(format_args!("bad base64 in {what}")),
        }
    }

    /// A list of RR types (NSEC, NSEC3, CSYNC) as a type bitmap; the list may be empty.
    fn type_bitmap_rest(&mut self, out: &mut Vec<u8>) -> Result<(), TextError> {
        let mut types = Vec::new();
        for t in self.rest() {
            match rtype_from_str(t.text).filter(|_| !t.quoted) {
                Some(v) => types.push(v),
                None => {
                    return self.fail(format_args!(
                        "unknown type '{}' in the type list",
                        Show(t.text)
                    ));
                }
            }
        }
        push_type_bitmap(&mut types, out);
        Ok(())
    }

    fn end(&self) -> Result<(), TextError> {
        match self.toks.get(self.pos) {
            Some(t) => self.fail(format_args!(
                "unexpected '{}' after the RDATA",
                Show(t.text)
            )),
            None => Ok(()),
        }
    }
}

fn push_char_string(t: Tok<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    let at = out.len();
    out.push(0);
    if push_unescaped(t.text, out).is_none() {
        out.truncate(at);
        return Err(format!("bad escape in '{}'", Show(t.text)));
    }
    match u8::try_from(out.len() - at - 1) {
        Ok(len) => {
            out[at] = len;
            Ok(())
        }
        Err(_) => {
            let len = out.len() - at - 1;
            out.truncate(at);
            Err(format!(
                "character-string of {len} octets is longer than 255"
            ))
        }
    }
}

/// Parses RDATA text for `rtype` into uncompressed wire format (RFC 3597 §4). Names without a
/// trailing dot are relative to `origin` (absolute when `origin` is `None`). The RFC 3597 §5
/// generic form `\# <length> <hex>` is accepted for every type.
pub fn parse_rdata(
    rtype: u16,
    rdata: &str,
    origin: Option<&WireName>,
) -> Result<Vec<u8>, TextError> {
    let toks = tokens_of(rdata)?;
    check_data_type(rtype)?;
    rdata_from_tokens(rtype, &toks, origin)
}

fn check_data_type(t: u16) -> Result<(), TextError> {
    if is_data_type(t) {
        Ok(())
    } else {
        err(format!(
            "{} is a query or meta type and cannot be used in a record",
            rtype_to_string(t)
        ))
    }
}

/// [`parse_rdata`] on tokens already split. Does not check that `rtype` is a data type.
pub(crate) fn rdata_from_tokens(
    rtype: u16,
    toks: &[Tok<'_>],
    origin: Option<&WireName>,
) -> Result<Vec<u8>, TextError> {
    let mut out = Vec::new();
    rdata_into(rtype, toks, origin, &mut out)?;
    Ok(out)
}

/// [`rdata_from_tokens`] into a caller's buffer (cleared first), so that the zone-file loop can
/// reuse one buffer and copy each RDATA out at its exact size.
pub(crate) fn rdata_into(
    rtype: u16,
    toks: &[Tok<'_>],
    origin: Option<&WireName>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    out.clear();
    let Some(first) = toks.first() else {
        return err(format!(
            "missing RDATA for {} record",
            rtype_to_string(rtype)
        ));
    };
    if first.text == "\\#" && !first.quoted {
        return generic_rdata(rtype, &toks[1..], out);
    }
    let mut f = Fields {
        toks,
        pos: 0,
        rtype,
    };
    known_rdata(&mut f, origin, out)?;
    f.end()?;
    if out.len() > usize::from(u16::MAX) {
        return err(format!(
            "{} RDATA is {} octets, longer than 65535",
            rtype_to_string(rtype),
            out.len()
        ));
    }
    Ok(())
}

/// `\# <length> <hex…>` (RFC 3597 §5).
fn generic_rdata(rtype: u16, toks: &[Tok<'_>], out: &mut Vec<u8>) -> Result<(), TextError> {
    let Some(len_tok) = toks.first() else {
        return err("\\# RDATA: missing length".to_string());
    };
    let Some(len) = parse_decimal::<u16>(len_tok.text).filter(|_| !len_tok.quoted) else {
        return err(format!(
            "\\# RDATA: bad length '{}' (0 to 65535)",
            Show(len_tok.text)
        ));
    };
    let hex = &toks[1..];
    if let Some(q) = hex.iter().find(|t| t.quoted) {
        return err(format!(
            "\\# RDATA: data must be hex, not a quoted string (\"{}\")",
            Show(q.text)
        ));
    }
    if push_hex(hex.iter().map(|t| t.text), out).is_none() {
        return err("\\# RDATA: bad hex data".to_string());
    }
    if out.len() != usize::from(len) {
        return err(format!(
            "\\# RDATA: length {len} does not match the {} octets of data",
            out.len()
        ));
    }
    if let Err(why) = check_wire(rtype, out) {
        return err(format!(
            "\\# RDATA is not valid {} RDATA: {why}",
            rtype_to_string(rtype)
        ));
    }
    Ok(())
}

/// Checks wire RDATA for the types whose layout the engine relies on.
fn check_wire(rtype: u16, rdata: &[u8]) -> Result<(), &'static str> {
    let name_at = |off: usize| -> Result<usize, &'static str> {
        rdata
            .get(off..)
            .and_then(wire_name_len)
            .map(|l| off + l)
            .ok_or("malformed domain name")
    };
    let exact = |end: usize| {
        if end == rdata.len() {
            Ok(())
        } else {
            Err("wrong length")
        }
    };
    match rtype {
        rtype::A => exact(4),
        rtype::AAAA => exact(16),
        rtype::NS | rtype::CNAME | rtype::PTR | rtype::DNAME | MD | MF | MB | MG | MR => {
            exact(name_at(0)?)
        }
        rtype::MX | AFSDB | RT | KX => {
            if rdata.len() < 2 {
                return Err("too short");
            }
            exact(name_at(2)?)
        }
        rtype::SOA => {
            let end = name_at(name_at(0)?)?;
            exact(end + 20)
        }
        rtype::SRV => {
            if rdata.len() < 6 {
                return Err("too short");
            }
            exact(name_at(6)?)
        }
        _ => Ok(()),
    }
}

fn known_rdata(
    f: &mut Fields<'_, '_>,
    origin: Option<&WireName>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    let t = f.rtype;
    match t {
        rtype::A => {
            let w = f.word("IPv4 address")?;
            match w.parse::<Ipv4Addr>() {
                Ok(a) => out.extend_from_slice(&a.octets()),
                Err(_) => return err(format!("bad IPv4 address '{}'", Show(w))),
            }
        }
        rtype::AAAA => {
            let w = f.word("IPv6 address")?;
            match w.parse::<Ipv6Addr>() {
                Ok(a) => out.extend_from_slice(&a.octets()),
                Err(_) => return err(format!("bad IPv6 address '{}'", Show(w))),
            }
        }
        rtype::NS | rtype::CNAME | rtype::PTR | rtype::DNAME | MD | MF | MB | MG | MR => {
            f.name("target name", origin, out)?
        }
        MINFO | RP => {
            f.name("mailbox name", origin, out)?;
            f.name("second name", origin, out)?;
        }
        rtype::MX | AFSDB | RT | KX => {
            out.extend_from_slice(&f.u16("preference")?.to_be_bytes());
            f.name("host name", origin, out)?;
        }
        PX => {
            out.extend_from_slice(&f.u16("preference")?.to_be_bytes());
            f.name("MAP822 name", origin, out)?;
            f.name("MAPX400 name", origin, out)?;
        }
        rtype::SOA => {
            f.name("MNAME (primary server)", origin, out)?;
            f.name("RNAME (mailbox)", origin, out)?;
            out.extend_from_slice(&f.u32("serial")?.to_be_bytes());
            for what in ["refresh", "retry", "expire", "minimum"] {
                out.extend_from_slice(&f.with(what, parse_duration)?.to_be_bytes());
            }
        }
        rtype::HINFO => {
            f.char_string("CPU", out)?;
            f.char_string("OS", out)?;
        }
        rtype::TXT | SPF | AVC | RESINFO | WALLET => {
            f.char_string("text", out)?;
            while f.pos < f.toks.len() {
                f.char_string("text", out)?;
            }
        }
        rtype::SRV => {
            for what in ["priority", "weight", "port"] {
                out.extend_from_slice(&f.u16(what)?.to_be_bytes());
            }
            f.name("target", origin, out)?;
        }
        rtype::NAPTR => {
            out.extend_from_slice(&f.u16("order")?.to_be_bytes());
            out.extend_from_slice(&f.u16("preference")?.to_be_bytes());
            f.char_string("flags", out)?;
            f.char_string("services", out)?;
            f.char_string("regexp", out)?;
            f.name("replacement", origin, out)?;
        }
        CERT => {
            out.extend_from_slice(&f.with("certificate type", cert_type)?.to_be_bytes());
            out.extend_from_slice(&f.u16("key tag")?.to_be_bytes());
            out.push(f.with("algorithm", dnssec_alg)?);
            f.base64_rest("certificate", out)?;
        }
        rtype::DS | CDS | TA | DLV => {
            out.extend_from_slice(&f.u16("key tag")?.to_be_bytes());
            out.push(f.with("algorithm", dnssec_alg)?);
            out.push(f.u8("digest type")?);
            f.hex_rest("digest", out)?;
        }
        rtype::SSHFP => {
            out.push(f.u8("algorithm")?);
            out.push(f.u8("fingerprint type")?);
            f.hex_rest("fingerprint", out)?;
        }
        rtype::TLSA | SMIMEA => {
            out.push(f.u8("certificate usage")?);
            out.push(f.u8("selector")?);
            out.push(f.u8("matching type")?);
            f.hex_rest("certificate association data", out)?;
        }
        rtype::RRSIG => {
            out.extend_from_slice(&f.with("type covered", rtype_from_str)?.to_be_bytes());
            out.push(f.with("algorithm", dnssec_alg)?);
            out.push(f.u8("labels")?);
            out.extend_from_slice(&f.with("original TTL", parse_duration)?.to_be_bytes());
            out.extend_from_slice(&f.with("signature expiration", rrsig_time)?.to_be_bytes());
            out.extend_from_slice(&f.with("signature inception", rrsig_time)?.to_be_bytes());
            out.extend_from_slice(&f.u16("key tag")?.to_be_bytes());
            f.name("signer's name", origin, out)?;
            f.base64_rest("signature", out)?;
        }
        rtype::NSEC => {
            f.name("next domain name", origin, out)?;
            f.type_bitmap_rest(out)?;
        }
        rtype::DNSKEY | CDNSKEY => {
            out.extend_from_slice(&f.u16("flags")?.to_be_bytes());
            out.push(f.u8("protocol")?);
            out.push(f.with("algorithm", dnssec_alg)?);
            f.base64_rest("public key", out)?;
        }
        DHCID | OPENPGPKEY => f.base64_rest("data", out)?,
        NSEC3 | NSEC3PARAM => {
            out.push(f.u8("hash algorithm")?);
            out.push(f.u8("flags")?);
            out.extend_from_slice(&f.u16("iterations")?.to_be_bytes());
            let salt = f.word("salt")?;
            let at = out.len();
            out.push(0);
            if salt != "-" {
                let ok = push_hex([salt], out).is_some();
                match u8::try_from(out.len() - at - 1) {
                    Ok(len) if ok => out[at] = len,
                    _ => {
                        return f.fail(format_args!(
                            "bad salt '{}' (hex, at most 255 octets, or '-')",
                            Show(salt)
                        ));
                    }
                }
            }
            if t == NSEC3 {
                let next = f.word("next hashed owner name")?;
                let at = out.len();
                out.push(0);
                let ok = push_base32hex(next, out).is_some();
                match u8::try_from(out.len() - at - 1) {
                    Ok(len) if ok && len > 0 => out[at] = len,
                    _ => {
                        return f.fail(format_args!(
                            "bad next hashed owner name '{}' (base32hex)",
                            Show(next)
                        ));
                    }
                }
                f.type_bitmap_rest(out)?;
            }
        }
        CSYNC => {
            out.extend_from_slice(&f.u32("SOA serial")?.to_be_bytes());
            out.extend_from_slice(&f.u16("flags")?.to_be_bytes());
            f.type_bitmap_rest(out)?;
        }
        ZONEMD => {
            out.extend_from_slice(&f.u32("serial")?.to_be_bytes());
            out.push(f.u8("scheme")?);
            out.push(f.u8("hash algorithm")?);
            f.hex_rest("digest", out)?;
        }
        rtype::SVCB | rtype::HTTPS => svcb(f, origin, out)?,
        EUI48 | EUI64 => {
            let n = if t == EUI48 { 6 } else { 8 };
            let w = f.word("address")?;
            let ok = w.len() == 3 * n - 1
                && w.split('-').all(|p| p.len() == 2)
                && push_hex(w.split('-'), out).is_some()
                && out.len() == n;
            if !ok {
                return f.fail(format_args!(
                    "bad address '{}' (xx-xx-…, {n} octets)",
                    Show(w)
                ));
            }
        }
        URI => {
            out.extend_from_slice(&f.u16("priority")?.to_be_bytes());
            out.extend_from_slice(&f.u16("weight")?.to_be_bytes());
            let target = f.next("target")?;
            if push_unescaped(target.text, out).is_none() || out.len() == 4 {
                return f.fail(format_args!("bad target '{}'", Show(target.text)));
            }
        }
        rtype::CAA => {
            out.push(f.u8("flags")?);
            let tag = f.word("tag")?;
            let Ok(len) = u8::try_from(tag.len()) else {
                return f.fail(format_args!("tag '{}' is too long", Show(tag)));
            };
            if len == 0 || !tag.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return f.fail(format_args!(
                    "bad tag '{}' (letters and digits only)",
                    Show(tag)
                ));
            }
            out.push(len);
            out.extend_from_slice(tag.as_bytes());
            let value = f.next("value")?;
            if push_unescaped(value.text, out).is_none() {
                return f.fail(format_args!("bad escape in value '{}'", Show(value.text)));
            }
        }
        _ => {
            return err(format!(
                "no presentation format is supported for {} records; write the RDATA as \
                 \\# <length> <hex> (RFC 3597)",
                rtype_to_string(t)
            ));
        }
    }
    Ok(())
}

// SvcParamKeys (RFC 9460 §14.3.2 registry).
const SVC_KEYS: &[(&str, u16)] = &[
    ("mandatory", 0),
    ("alpn", 1),
    ("no-default-alpn", 2),
    ("port", 3),
    ("ipv4hint", 4),
    ("ech", 5),
    ("ipv6hint", 6),
    ("dohpath", 7),
    ("ohttp", 8),
    ("tls-supported-groups", 9),
];

fn svc_key(s: &str) -> Option<u16> {
    if let Some(n) = s.strip_prefix("key") {
        return parse_decimal::<u16>(n).filter(|&k| k != 65535);
    }
    SVC_KEYS.iter().find(|(n, _)| *n == s).map(|&(_, k)| k)
}

/// Splits a decoded value-list on unescaped commas (RFC 9460 Appendix A.1).
fn value_list(v: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut items = Vec::new();
    let mut cur = Vec::new();
    let mut i = 0;
    while let Some(&c) = v.get(i) {
        match c {
            b'\\' => {
                cur.push(*v.get(i + 1)?);
                i += 2;
            }
            b',' => {
                if cur.is_empty() {
                    return None;
                }
                items.push(core::mem::take(&mut cur));
                i += 1;
            }
            _ => {
                cur.push(c);
                i += 1;
            }
        }
    }
    if cur.is_empty() {
        return None;
    }
    items.push(cur);
    Some(items)
}

/// SVCB / HTTPS (RFC 9460 §2.1): priority, target, then `key[=value]` parameters in any order;
/// the wire form lists them in increasing key order (§2.2).
fn svcb(
    f: &mut Fields<'_, '_>,
    origin: Option<&WireName>,
    out: &mut Vec<u8>,
) -> Result<(), TextError> {
    out.extend_from_slice(&f.u16("SvcPriority")?.to_be_bytes());
    f.name("TargetName", origin, out)?;
    let mut params: Vec<(u16, Vec<u8>)> = Vec::new();
    for tok in f.rest() {
        if tok.quoted {
            return f.fail(format_args!(
                "unexpected quoted string \"{}\" (SvcParams are key=value)",
                Show(tok.text)
            ));
        }
        let (key_text, raw) = match tok.text.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (tok.text, None),
        };
        let Some(key) = svc_key(key_text) else {
            return f.fail(format_args!("unknown SvcParamKey '{}'", Show(key_text)));
        };
        let mut value = Vec::new();
        if let Some(raw) = raw {
            let inner = match raw.strip_prefix('"') {
                Some(r) => match r.strip_suffix('"') {
                    Some(i) => i,
                    None => return f.fail(format_args!("bad quoting in '{}'", Show(tok.text))),
                },
                None => raw,
            };
            if push_unescaped(inner, &mut value).is_none() {
                return f.fail(format_args!("bad escape in '{}'", Show(tok.text)));
            }
        }
        let bad = |why: &str| {
            f.fail::<()>(format_args!(
                "bad {key_text} value in '{}': {why}",
                Show(tok.text)
            ))
        };
        let wire: Vec<u8> = match key {
            0 => {
                let Some(items) = value_list(&value) else {
                    return bad("expected a list of keys");
                };
                let mut keys = Vec::new();
                for item in items {
                    match core::str::from_utf8(&item).ok().and_then(svc_key) {
                        Some(0) => return bad("mandatory must not list itself"),
                        Some(k) => keys.push(k),
                        None => return bad("unknown key"),
                    }
                }
                keys.sort_unstable();
                if keys.windows(2).any(|w| w[0] == w[1]) {
                    return bad("a key is listed twice");
                }
                keys.iter().flat_map(|k| k.to_be_bytes()).collect()
            }
            1 => {
                let Some(items) = value_list(&value) else {
                    return bad("expected a list of ALPN ids");
                };
                let mut w = Vec::new();
                for item in items {
                    let Ok(len) = u8::try_from(item.len()) else {
                        return bad("ALPN id longer than 255");
                    };
                    w.push(len);
                    w.extend_from_slice(&item);
                }
                w
            }
            2 | 8 => {
                if raw.is_some() {
                    return bad("this key takes no value");
                }
                Vec::new()
            }
            3 => match core::str::from_utf8(&value)
                .ok()
                .and_then(parse_decimal::<u16>)
            {
                Some(p) => p.to_be_bytes().to_vec(),
                None => return bad("expected a port number"),
            },
            4 | 6 => {
                let Some(items) = value_list(&value) else {
                    return bad("expected a list of addresses");
                };
                let mut w = Vec::new();
                for item in items {
                    let s = core::str::from_utf8(&item).unwrap_or("");
                    match (key, s.parse::<Ipv4Addr>(), s.parse::<Ipv6Addr>()) {
                        (4, Ok(a), _) => w.extend_from_slice(&a.octets()),
                        (6, _, Ok(a)) => w.extend_from_slice(&a.octets()),
                        _ => return bad("bad address"),
                    }
                }
                w
            }
            5 => {
                let mut w = Vec::new();
                match core::str::from_utf8(&value) {
                    Ok(s) if !s.is_empty() && push_base64([s], &mut w).is_some() => w,
                    _ => return bad("expected base64"),
                }
            }
            7 => {
                if value.is_empty() || core::str::from_utf8(&value).is_err() {
                    return bad("expected a URI template");
                }
                value
            }
            9 => {
                let Some(items) = value_list(&value) else {
                    return bad("expected a list of group ids");
                };
                let mut w = Vec::new();
                for item in items {
                    match core::str::from_utf8(&item)
                        .ok()
                        .and_then(parse_decimal::<u16>)
                    {
                        Some(g) => w.extend_from_slice(&g.to_be_bytes()),
                        None => return bad("bad group id"),
                    }
                }
                w
            }
            _ => value,
        };
        if params.iter().any(|(k, _)| *k == key) {
            return f.fail(format_args!("SvcParamKey '{key_text}' appears twice"));
        }
        params.push((key, wire));
    }
    params.sort_unstable_by_key(|(k, _)| *k);
    if let Some((_, m)) = params.first().filter(|(k, _)| *k == 0) {
        for k in m.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])) {
            if !params.iter().any(|(p, _)| *p == k) {
                return f.fail(format_args!(
                    "key{k} is mandatory but missing (RFC 9460 §8)"
                ));
            }
        }
    }
    for (key, value) in &params {
        let Ok(len) = u16::try_from(value.len()) else {
            return f.fail(format_args!("SvcParam value too long"));
        };
        out.extend_from_slice(&key.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(value);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

/// The TTL, class and type fields after the owner.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Head {
    pub(crate) ttl: Option<u32>,
    pub(crate) class: Option<u16>,
    pub(crate) rtype: u16,
    /// Index of the first RDATA token.
    pub(crate) rdata: usize,
}

/// Parses `[TTL] [CLASS] TYPE` (TTL and class in either order, RFC 1035 §5.1) from `toks[at..]`.
/// Refuses meta and query types.
pub(crate) fn parse_head(toks: &[Tok<'_>], at: usize) -> Result<Head, TextError> {
    let (mut ttl, mut cls) = (None, None);
    let mut i = at;
    loop {
        let Some(t) = toks.get(i) else {
            return err("missing RR type".to_string());
        };
        i += 1;
        if t.quoted {
            return err(format!(
                "unexpected quoted string \"{}\" where a TTL, class or type belongs",
                Show(t.text)
            ));
        }
        if t.text.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            if ttl.is_some() {
                return err(format!(
                    "unexpected '{}': the TTL is already given",
                    Show(t.text)
                ));
            }
            match parse_ttl(t.text) {
                Some(v) => ttl = Some(v),
                None => return err(format!("bad TTL '{}'", Show(t.text))),
            }
        } else if let Some(c) = class_from_str(t.text) {
            if cls.is_some() {
                return err(format!(
                    "unexpected '{}': the class is already given",
                    Show(t.text)
                ));
            }
            cls = Some(c);
        } else if let Some(rt) = rtype_from_str(t.text) {
            check_data_type(rt)?;
            return Ok(Head {
                ttl,
                class: cls,
                rtype: rt,
                rdata: i,
            });
        } else {
            return err(format!("unknown RR type '{}'", Show(t.text)));
        }
    }
}

/// Parses one record in Unbound `local-data` syntax: `owner [TTL] [CLASS] TYPE RDATA…`, TTL and
/// class in either order, TTL defaulting to `default_ttl` and class to IN. Relative names (owner
/// and RDATA) are completed with `origin`, or taken as absolute without one. The record may
/// span lines (newlines are blanks); `;` comments are ignored.
pub fn parse_rr(text: &str, origin: Option<&WireName>, default_ttl: u32) -> Result<Rr, TextError> {
    let toks = tokens_of(text)?;
    let Some(owner_tok) = toks.first() else {
        return err("empty record".to_string());
    };
    if owner_tok.quoted {
        return err(format!(
            "owner name must not be quoted (got \"{}\")",
            Show(owner_tok.text)
        ));
    }
    let mut owner = Vec::new();
    if let Err(e) = push_name(owner_tok.text, origin, &mut owner) {
        return err(format!("bad owner name '{}': {e}", Show(owner_tok.text)));
    }
    let head = parse_head(&toks, 1)?;
    let rdata = rdata_from_tokens(head.rtype, &toks[head.rdata..], origin)?;
    Ok(Rr {
        owner: wire_name(&owner)?,
        rtype: head.rtype,
        class: head.class.unwrap_or(class::IN),
        ttl: head.ttl.unwrap_or(default_ttl),
        rdata,
    })
}

/// Wraps bytes built by [`push_name`] (which guarantees validity) as a [`WireName`].
pub(crate) fn wire_name(bytes: &[u8]) -> Result<WireName, TextError> {
    WireName::from_wire(bytes).map_err(|e| TextError(e.to_string()))
}

/// Parses Unbound's `local-data-ptr` shorthand, `"IP name"` or `"IP TTL name"`
/// (unbound.conf(5)): a PTR record at the reverse name of the address (`d.c.b.a.in-addr.arpa.`,
/// RFC 1035 §3.5, or the nibble form under `ip6.arpa.`, RFC 3596 §2.5) pointing at `name`
/// (absolute, with or without the trailing dot). Class IN.
pub fn parse_local_data_ptr(text: &str, default_ttl: u32) -> Result<Rr, TextError> {
    let toks = tokens_of(text)?;
    if let Some(q) = toks.iter().find(|t| t.quoted) {
        return err(format!(
            "unexpected quoted string \"{}\" in local-data-ptr",
            Show(q.text)
        ));
    }
    let (addr, ttl, target) = match toks.as_slice() {
        [a, n] => (a.text, None, n.text),
        [a, t, n] => (a.text, Some(t.text), n.text),
        _ => {
            return err(format!(
                "local-data-ptr wants \"IP name\" or \"IP TTL name\", got '{}'",
                Show(text.trim())
            ));
        }
    };
    let ttl = match ttl {
        None => default_ttl,
        Some(t) => parse_ttl(t).ok_or_else(|| TextError(format!("bad TTL '{}'", Show(t))))?,
    };
    let Ok(ip) = addr.parse::<IpAddr>() else {
        return err(format!("bad IP address '{}'", Show(addr)));
    };
    let mut owner = Vec::with_capacity(74);
    match ip {
        IpAddr::V4(a) => {
            for o in a.octets().iter().rev() {
                let mut digits = [0u8; 3];
                let mut n = 0;
                let mut v = *o;
                loop {
                    digits[n] = b'0' + v % 10;
                    n += 1;
                    v /= 10;
                    if v == 0 {
                        break;
                    }
                }
                owner.push(n as u8);
                owner.extend(digits[..n].iter().rev());
            }
            owner.extend_from_slice(b"\x07in-addr\x04arpa\x00");
        }
        IpAddr::V6(a) => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            for o in a.octets().iter().rev() {
                owner.extend_from_slice(&[
                    1,
                    HEX[usize::from(o & 0xf)],
                    1,
                    HEX[usize::from(o >> 4)],
                ]);
            }
            owner.extend_from_slice(b"\x03ip6\x04arpa\x00");
        }
    }
    let mut rdata = Vec::new();
    if let Err(e) = push_name(target, None, &mut rdata) {
        return err(format!("bad PTR target '{}': {e}", Show(target)));
    }
    Ok(Rr {
        owner: wire_name(&owner)?,
        rtype: rtype::PTR,
        class: class::IN,
        ttl,
        rdata,
    })
}

// ---------------------------------------------------------------------------------------------
// Wire to text (diagnostics)
// ---------------------------------------------------------------------------------------------

struct Reader<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.p..self.p.checked_add(n)?)?;
        self.p += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        let s = self.take(2)?;
        Some(u16::from_be_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        let s = self.take(4)?;
        Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn name(&mut self) -> Option<NameText<'a>> {
        let len = wire_name_len(self.b.get(self.p..)?)?;
        self.take(len).map(NameText)
    }
    fn char_string(&mut self) -> Option<CharText<'a>> {
        let len = self.u8()?;
        self.take(usize::from(len)).map(CharText)
    }
    fn rest(&mut self) -> &'a [u8] {
        let r = self.b.get(self.p..).unwrap_or(&[]);
        self.p = self.b.len();
        r
    }
    fn nonempty_rest(&mut self) -> Option<&'a [u8]> {
        Some(self.rest()).filter(|r| !r.is_empty())
    }
    fn done(&self) -> bool {
        self.p == self.b.len()
    }
}

struct NameText<'a>(&'a [u8]);

impl fmt::Display for NameText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_wire_name(self.0, f)
    }
}

/// A character-string in quotes with RFC 1035 §5.1 escapes.
struct CharText<'a>(&'a [u8]);

impl fmt::Display for CharText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for &b in self.0 {
            match b {
                b'"' | b'\\' => write!(f, "\\{}", char::from(b))?,
                0x20..=0x7e => write!(f, "{}", char::from(b))?,
                _ => write!(f, "\\{b:03}")?,
            }
        }
        f.write_str("\"")
    }
}

struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Renders wire RDATA in presentation format, for diagnostics and tests. Types without a
/// renderer here, and malformed RDATA, come out in the RFC 3597 `\# <length> <hex>` form, which
/// [`parse_rdata`] reads back.
pub fn rdata_to_string(rtype: u16, rdata: &[u8]) -> String {
    let mut s = String::new();
    if render(rtype, rdata, &mut s).is_none() {
        s.clear();
        let _ = write!(s, "\\# {}", rdata.len());
        if !rdata.is_empty() {
            let _ = write!(s, " {}", Hex(rdata));
        }
    }
    s
}

/// A record in presentation format with every field explicit, `owner TTL CLASS TYPE RDATA`
/// (class `IN`, `CH` or RFC 3597 `CLASSnnn`), the owner as stored. Names and
/// character-strings carry RFC 1035 §5.1 escapes and types without a renderer the RFC 3597
/// `\#` form, so [`parse_rr`] reads the text back as the same record (a property test
/// checks it for every type). The text is printable ASCII, but it may hold `'` and `"`: a
/// container that gives them a meaning (a configuration file) must quote it.
pub fn rr_to_string(rr: &Rr) -> String {
    let mut s = String::new();
    let _ = write!(s, "{} {} ", rr.owner, rr.ttl);
    match rr.class {
        class::IN => s.push_str("IN"),
        class::CH => s.push_str("CH"),
        c => {
            let _ = write!(s, "CLASS{c}");
        }
    }
    let _ = write!(
        s,
        " {} {}",
        rtype_to_string(rr.rtype),
        rdata_to_string(rr.rtype, &rr.rdata)
    );
    s
}

fn render(t: u16, rdata: &[u8], s: &mut String) -> Option<()> {
    let mut r = Reader { b: rdata, p: 0 };
    let w: fmt::Result = match t {
        rtype::A => {
            let o = r.take(4)?;
            write!(s, "{}", Ipv4Addr::new(o[0], o[1], o[2], o[3]))
        }
        rtype::AAAA => {
            let o: [u8; 16] = r.take(16)?.try_into().ok()?;
            write!(s, "{}", Ipv6Addr::from(o))
        }
        rtype::NS | rtype::CNAME | rtype::PTR | rtype::DNAME | MD | MF | MB | MG | MR => {
            write!(s, "{}", r.name()?)
        }
        MINFO | RP => write!(s, "{} {}", r.name()?, r.name()?),
        rtype::MX | AFSDB | RT | KX => write!(s, "{} {}", r.u16()?, r.name()?),
        rtype::SOA => write!(
            s,
            "{} {} {} {} {} {} {}",
            r.name()?,
            r.name()?,
            r.u32()?,
            r.u32()?,
            r.u32()?,
            r.u32()?,
            r.u32()?
        ),
        rtype::SRV => write!(s, "{} {} {} {}", r.u16()?, r.u16()?, r.u16()?, r.name()?),
        rtype::HINFO => write!(s, "{} {}", r.char_string()?, r.char_string()?),
        rtype::TXT | SPF | AVC | RESINFO | WALLET => {
            let mut first = true;
            while !r.done() || first {
                if !first {
                    s.push(' ');
                }
                write!(s, "{}", r.char_string()?).ok()?;
                first = false;
            }
            Ok(())
        }
        rtype::NAPTR => write!(
            s,
            "{} {} {} {} {} {}",
            r.u16()?,
            r.u16()?,
            r.char_string()?,
            r.char_string()?,
            r.char_string()?,
            r.name()?
        ),
        rtype::CAA => {
            let flags = r.u8()?;
            let tag_len = r.u8()?;
            let tag = core::str::from_utf8(r.take(usize::from(tag_len))?).ok()?;
            if tag.is_empty() || !tag.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return None;
            }
            write!(s, "{flags} {tag} {}", CharText(r.rest()))
        }
        // The hex field cannot be empty in presentation format: such RDATA goes out as `\#`.
        rtype::SSHFP => write!(s, "{} {} {}", r.u8()?, r.u8()?, Hex(r.nonempty_rest()?)),
        rtype::TLSA | SMIMEA => {
            let (u, sel, m) = (r.u8()?, r.u8()?, r.u8()?);
            write!(s, "{u} {sel} {m} {}", Hex(r.nonempty_rest()?))
        }
        rtype::DS | CDS | TA | DLV => {
            let (tag, alg, dt) = (r.u16()?, r.u8()?, r.u8()?);
            write!(s, "{tag} {alg} {dt} {}", Hex(r.nonempty_rest()?))
        }
        _ => return None,
    };
    w.ok()?;
    // Fixed-layout types must use every octet; the formats ending in "rest" always do.
    r.done().then_some(())
}

#[cfg(test)]
mod tests;
