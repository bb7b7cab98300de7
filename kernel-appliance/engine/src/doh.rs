//! DNS over HTTPS (RFC 8484) requests and responses as far as DNS is concerned, sans-IO:
//! the HTTP server (skuad's, later the unikernel's) hands over the method, the request
//! target, the content type and the body; this module says which DNS query that is, or
//! which HTTP error answers it, and how long the answer may be cached.
//!
//! What it checks (RFC 8484 §4.1): `GET` with the query in the `dns` parameter, base64url
//! without padding (trailing `=` are tolerated: some clients send them); `POST` with the
//! media type `application/dns-message` (§6) and the query as the body; the path is the
//! configured endpoint, compared byte for byte. A query shorter than a DNS header or
//! longer than 65535 octets is refused here; anything else about it is the engine's
//! business (a malformed query gets FORMERR like one over UDP, inside a 200 response: §4.2.1
//! leaves DNS errors to DNS).
//!
//! Freshness (§5.1): an answer's HTTP lifetime is no longer than the smallest TTL of its
//! answer section; a negative answer's is its SOA's negative-caching TTL (the smaller of
//! the SOA record's TTL and MINIMUM, RFC 2308 §5). Never panics on any input.

use alloc::vec::Vec;

use crate::padding::be16;
use crate::rr::rtype;
use crate::wire::names::skip_name;
use crate::wire::{HEADER_LEN, MAX_MESSAGE_LEN};

/// The media type of DNS messages over HTTP (RFC 8484 §6).
pub const MEDIA_TYPE: &str = "application/dns-message";

/// Why a request is not a DNS query, as the HTTP status that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The path is not the endpoint: 404.
    NotFound,
    /// Neither GET nor POST (HEAD neither: it has no body to carry the answer): 405.
    MethodNotAllowed,
    /// A GET without a `dns` parameter: 400.
    NoQuery,
    /// The `dns` parameter is not base64url: 400.
    BadBase64,
    /// The query is shorter than a DNS header: 400.
    TooShort,
    /// POST with another media type: 415.
    UnsupportedMediaType,
    /// The query (decoded, or the body) is longer than a DNS message: 413.
    TooLarge,
    /// The body ended early or came too slowly: 400.
    Incomplete,
    /// The engine found no query to answer in it (a response, say): 400.
    NotAQuery,
}

impl Refusal {
    /// The HTTP status code.
    pub fn status(self) -> u16 {
        match self {
            Refusal::NotFound => 404,
            Refusal::MethodNotAllowed => 405,
            Refusal::NoQuery
            | Refusal::BadBase64
            | Refusal::TooShort
            | Refusal::Incomplete
            | Refusal::NotAQuery => 400,
            Refusal::UnsupportedMediaType => 415,
            Refusal::TooLarge => 413,
        }
    }

    /// A short explanation for the response body (plain text).
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::NotFound => "not a DNS over HTTPS endpoint",
            Refusal::MethodNotAllowed => "DNS over HTTPS takes GET and POST only",
            Refusal::NoQuery => "GET needs the query in the 'dns' parameter",
            Refusal::BadBase64 => "the 'dns' parameter is not base64url",
            Refusal::TooShort => "the query is shorter than a DNS header",
            Refusal::UnsupportedMediaType => "POST needs Content-Type: application/dns-message",
            Refusal::TooLarge => "the query is longer than a DNS message (65535 octets)",
            Refusal::Incomplete => "the request body ended early or came too slowly",
            Refusal::NotAQuery => "not a DNS query",
        }
    }
}

/// The HTTP method, as far as DNS over HTTPS cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET: the query is in the request target.
    Get,
    /// POST: the query is the body.
    Post,
    /// Anything else.
    Other,
}

/// Checks the request line: the path of `target` (up to `?`) must be `endpoint` and the
/// method GET or POST. For GET, returns the query decoded from the `dns` parameter; for
/// POST, `None` (the caller reads the body, after [`check_post`]).
pub fn check_target(
    method: Method,
    target: &str,
    endpoint: &str,
) -> Result<Option<Vec<u8>>, Refusal> {
    let (path, params) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    if path != endpoint {
        return Err(Refusal::NotFound);
    }
    match method {
        Method::Get => query_from_params(params.unwrap_or("")).map(Some),
        Method::Post => Ok(None),
        Method::Other => Err(Refusal::MethodNotAllowed),
    }
}

/// Checks a POST's `Content-Type` (media type compared without case, parameters allowed)
/// and its declared length, if any.
pub fn check_post(content_type: Option<&[u8]>, content_length: Option<u64>) -> Result<(), Refusal> {
    let ct = content_type.ok_or(Refusal::UnsupportedMediaType)?;
    let media = ct.split(|&b| b == b';').next().unwrap_or(&[]);
    if !media
        .trim_ascii()
        .eq_ignore_ascii_case(MEDIA_TYPE.as_bytes())
    {
        return Err(Refusal::UnsupportedMediaType);
    }
    if content_length.is_some_and(|n| n > MAX_MESSAGE_LEN as u64) {
        return Err(Refusal::TooLarge);
    }
    Ok(())
}

/// Checks a query's length (a POST body, once read).
pub fn check_query(query: &[u8]) -> Result<(), Refusal> {
    if query.len() > MAX_MESSAGE_LEN {
        Err(Refusal::TooLarge)
    } else if query.len() < HEADER_LEN {
        Err(Refusal::TooShort)
    } else {
        Ok(())
    }
}

/// The query in the `dns` parameter of a query string (`a=b&dns=...&c`); the first one
/// counts.
fn query_from_params(params: &str) -> Result<Vec<u8>, Refusal> {
    let value = params
        .split('&')
        .find_map(|p| p.strip_prefix("dns="))
        .ok_or(Refusal::NoQuery)?;
    let value = value.trim_end_matches('=');
    // 65535 octets are 87380 base64 characters: a longer parameter is refused before it is
    // decoded.
    if value.len() > (MAX_MESSAGE_LEN * 4).div_ceil(3) {
        return Err(Refusal::TooLarge);
    }
    let q = base64url_decode(value.as_bytes()).ok_or(Refusal::BadBase64)?;
    check_query(&q)?;
    Ok(q)
}

/// base64url (RFC 4648 §5) without padding; `None` on any other character or an
/// impossible length. The non-zero trailing bits of a non-canonical last character are
/// ignored, as most decoders do.
fn base64url_decode(s: &[u8]) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        } as u32)
    }
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | val(c)?;
        }
        // 2, 3 or 4 characters carry 1, 2 or 3 octets.
        acc <<= 6 * (4 - chunk.len() as u32);
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// How long (seconds) an HTTP cache may keep `response` (RFC 8484 §5.1): the smallest TTL
/// of its answer section; with an empty answer section, the negative-caching TTL of the
/// SOA in its authority section (RFC 2308 §5); `None` when it has neither (an error
/// without SOA, say) or does not walk cleanly.
pub fn max_age(response: &[u8]) -> Option<u32> {
    let m = response;
    if m.len() < HEADER_LEN {
        return None;
    }
    let qd = be16(m, 4)?;
    let an = be16(m, 6)?;
    let ns = be16(m, 8)?;
    let mut at = HEADER_LEN;
    for _ in 0..qd {
        at = skip_name(m, at)?.checked_add(4)?;
    }
    let mut min: Option<u32> = None;
    for i in 0..u32::from(an) + u32::from(ns) {
        let after_name = skip_name(m, at)?;
        let rt = be16(m, after_name)?;
        let ttl = u32::from_be_bytes(m.get(after_name + 4..after_name + 8)?.try_into().ok()?);
        let rdlen = usize::from(be16(m, after_name + 8)?);
        let rdata = after_name + 10;
        at = rdata + rdlen;
        if at > m.len() {
            return None;
        }
        let ttl = if i < u32::from(an) {
            // Answer section: every record counts (RRSIGs too; OPT never appears here).
            ttl
        } else if an == 0 && rt == rtype::SOA {
            // Negative answer: the SOA's TTL and its MINIMUM field, the last 4 octets of
            // its RDATA (RFC 1035 §3.3.13).
            let minimum = m.get(at.checked_sub(4)?..at)?;
            ttl.min(u32::from_be_bytes(minimum.try_into().ok()?))
        } else {
            continue;
        };
        // TTLs with the top bit set are read as 0 (RFC 2181 §8).
        let ttl = if ttl > i32::MAX as u32 { 0 } else { ttl };
        min = Some(min.map_or(ttl, |m: u32| m.min(ttl)));
    }
    min
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn base64url_round_trips_rfc8484_example() {
        // RFC 8484 §4.1.1: the query for www.example.com A, ID 0.
        let q = base64url_decode(b"AAABAAABAAAAAAAAA3d3dwdleGFtcGxlA2NvbQAAAQAB").unwrap();
        assert_eq!(&q[..4], &[0, 0, 1, 0]);
        assert_eq!(&q[12..17], b"\x03www\x07");
        assert_eq!(q.len(), 33);
        // Every length that base64 can make, and every alphabet character.
        assert_eq!(base64url_decode(b"").unwrap(), Vec::<u8>::new());
        assert_eq!(base64url_decode(b"_w").unwrap(), vec![0xff]);
        assert_eq!(base64url_decode(b"__8").unwrap(), vec![0xff, 0xff]);
        assert_eq!(base64url_decode(b"-_-_").unwrap(), vec![0xfb, 0xff, 0xbf]);
        assert!(base64url_decode(b"A").is_none());
        assert!(
            base64url_decode(b"AB+/").is_none(),
            "standard base64 is not base64url"
        );
        assert!(base64url_decode(b"AB C").is_none());
    }

    #[test]
    fn targets() {
        let q = "AAABAAABAAAAAAAAA3d3dwdleGFtcGxlA2NvbQAAAQAB";
        let t = alloc::format!("/dns-query?ct=x&dns={q}&dns=zz");
        assert_eq!(
            check_target(Method::Get, &t, "/dns-query")
                .unwrap()
                .unwrap()
                .len(),
            33
        );
        let t = alloc::format!("/dns-query?dns={q}==");
        assert!(check_target(Method::Get, &t, "/dns-query").is_ok());
        assert_eq!(
            check_target(Method::Get, "/other?dns=AAAA", "/dns-query"),
            Err(Refusal::NotFound)
        );
        assert_eq!(
            check_target(Method::Get, "/dns-query/", "/dns-query"),
            Err(Refusal::NotFound)
        );
        assert_eq!(
            check_target(Method::Get, "/dns-query", "/dns-query"),
            Err(Refusal::NoQuery)
        );
        assert_eq!(
            check_target(Method::Get, "/dns-query?dns=%%", "/dns-query"),
            Err(Refusal::BadBase64)
        );
        assert_eq!(
            check_target(Method::Get, "/dns-query?dns=AAAA", "/dns-query"),
            Err(Refusal::TooShort)
        );
        assert_eq!(
            check_target(Method::Post, "/dns-query", "/dns-query"),
            Ok(None)
        );
        assert_eq!(
            check_target(Method::Other, "/dns-query", "/dns-query"),
            Err(Refusal::MethodNotAllowed)
        );
        let long = alloc::format!("/dns-query?dns={}", "A".repeat(90_000));
        assert_eq!(
            check_target(Method::Get, &long, "/dns-query"),
            Err(Refusal::TooLarge)
        );
    }

    #[test]
    fn post_checks() {
        assert!(check_post(Some(b"application/dns-message"), Some(40)).is_ok());
        assert!(check_post(Some(b"Application/DNS-Message; charset=x"), None).is_ok());
        assert_eq!(
            check_post(Some(b"application/json"), None),
            Err(Refusal::UnsupportedMediaType)
        );
        assert_eq!(check_post(None, None), Err(Refusal::UnsupportedMediaType));
        assert_eq!(
            check_post(Some(b"application/dns-message"), Some(65536)),
            Err(Refusal::TooLarge)
        );
        assert_eq!(check_query(&[0; 11]), Err(Refusal::TooShort));
        assert_eq!(check_query(&vec![0; 65536]), Err(Refusal::TooLarge));
    }

    /// A response for `a.example.` with the given answer TTLs and, optionally, an SOA
    /// (TTL, MINIMUM) in the authority section, and an OPT record.
    fn response(answers: &[u32], soa: Option<(u32, u32)>) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&[0x12, 0x34, 0x81, 0x80, 0, 1]);
        m.extend_from_slice(&(answers.len() as u16).to_be_bytes());
        m.extend_from_slice(&u16::from(soa.is_some()).to_be_bytes());
        m.extend_from_slice(&[0, 1]);
        m.extend_from_slice(b"\x01a\x07example\x00\x00\x01\x00\x01");
        for ttl in answers {
            m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&[0, 4, 198, 18, 0, 1]);
        }
        if let Some((ttl, minimum)) = soa {
            m.extend_from_slice(&[0xc0, 14, 0, 6, 0, 1]);
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&[0, 22, 0, 0]); // rdlength 22: two root names, 5 numbers
            m.extend_from_slice(&[1, 2, 3, 4, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]);
            m.extend_from_slice(&minimum.to_be_bytes());
        }
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        m
    }

    #[test]
    fn freshness() {
        assert_eq!(max_age(&response(&[300, 60, 3600], None)), Some(60));
        // The authority section does not count when there are answers.
        assert_eq!(max_age(&response(&[300], Some((10, 5)))), Some(300));
        assert_eq!(max_age(&response(&[], Some((3600, 900)))), Some(900));
        assert_eq!(max_age(&response(&[], Some((30, 900)))), Some(30));
        assert_eq!(max_age(&response(&[], None)), None);
        assert_eq!(max_age(&response(&[0x8000_0000], None)), Some(0));
        // Every cut of a message: no panic, and no figure from a message that is cut.
        let m = response(&[300, 60], Some((10, 5)));
        for n in 0..m.len() - 11 {
            assert_eq!(max_age(&m[..n]), None, "cut at {n}");
        }
    }
}
