//! EDNS(0) Padding (RFC 7830) of responses to encrypted clients, with the block-length
//! strategy of RFC 8467 §4.1 (responses padded to a multiple of 468 octets).
//!
//! A responder pads only a response to a query that carried the Padding option itself
//! (RFC 7830 §4, as Unbound's `pad-responses:`), only over an encrypted transport (the
//! caller decides), and only when the response's OPT record is its last record: a response
//! signed with TSIG (RFC 8945: TSIG must stay last) is never touched. A response that
//! would not fit its buffer (or 65535 octets) is left unpadded, never cut.
//!
//! Both functions walk the message with bounds checks on every step (names may be
//! compressed in responses) and give up on anything malformed: they never panic.

use crate::rr::rtype;
use crate::wire::names::skip_name;
use crate::wire::{HEADER_LEN, MAX_MESSAGE_LEN};

/// The EDNS option code of Padding (RFC 7830 §3).
pub const OPTION_PADDING: u16 = 12;
/// RFC 8467 §4.1: the recommended block length for responses.
pub const RESPONSE_BLOCK: u16 = 468;

pub(crate) fn be16(m: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*m.get(at)?, *m.get(at + 1)?]))
}

/// The offset of the last record of `m` (its owner name) and its type, when the message
/// walks cleanly to its end.
fn last_record(m: &[u8]) -> Option<(usize, u16)> {
    if m.len() < HEADER_LEN {
        return None;
    }
    let qd = be16(m, 4)?;
    let rrs = u32::from(be16(m, 6)?) + u32::from(be16(m, 8)?) + u32::from(be16(m, 10)?);
    let mut at = HEADER_LEN;
    for _ in 0..qd {
        at = skip_name(m, at)? + 4;
    }
    let mut last = None;
    for _ in 0..rrs {
        let start = at;
        let after_name = skip_name(m, at)?;
        let rtype = be16(m, after_name)?;
        let rdlen = usize::from(be16(m, after_name + 8)?);
        at = after_name + 10 + rdlen;
        last = Some((start, rtype));
    }
    (at == m.len()).then_some(last).flatten()
}

/// Whether the query's OPT record (its last record) carries the Padding option.
pub fn query_wants_padding(query: &[u8]) -> bool {
    let Some((at, rtype::OPT)) = last_record(query) else {
        return false;
    };
    // An OPT record's owner is the root (RFC 6891 §6.1.2): anything else is not one.
    if query.get(at) != Some(&0) {
        return false;
    }
    // An OPT record's owner is the root: one zero byte.
    let rdlen_at = at + 9;
    let Some(rdlen) = be16(query, rdlen_at) else {
        return false;
    };
    let mut o = rdlen_at + 2;
    let end = o + usize::from(rdlen);
    while o + 4 <= end {
        let (Some(code), Some(len)) = (be16(query, o), be16(query, o + 2)) else {
            return false;
        };
        if code == OPTION_PADDING {
            return true;
        }
        o += 4 + usize::from(len);
    }
    false
}

/// Pads the response in `buf[..len]` to a multiple of `block` octets by adding a Padding
/// option to its OPT record (see the module documentation); returns the new length
/// (`len` when it is left as it is).
pub fn pad_response(buf: &mut [u8], len: usize, block: u16) -> usize {
    let block = usize::from(block);
    if block < 2 || len > buf.len() {
        return len;
    }
    let Some((at, rtype::OPT)) = last_record(&buf[..len]) else {
        return len;
    };
    if buf[at] != 0 {
        return len;
    }
    // The option's header (code, length), then zeros up to the next multiple of `block`.
    let pad = (block - (len + 4) % block) % block;
    let new_len = len + 4 + pad;
    let rdlen_at = at + 9;
    let Some(rdlen) = be16(buf, rdlen_at) else {
        return len;
    };
    let new_rdlen = usize::from(rdlen) + 4 + pad;
    if new_len > buf.len() || new_len > MAX_MESSAGE_LEN || new_rdlen > usize::from(u16::MAX) {
        return len;
    }
    buf[rdlen_at..rdlen_at + 2].copy_from_slice(&(new_rdlen as u16).to_be_bytes());
    buf[len..len + 2].copy_from_slice(&OPTION_PADDING.to_be_bytes());
    buf[len + 2..len + 4].copy_from_slice(&(pad as u16).to_be_bytes());
    buf[len + 4..new_len].fill(0);
    new_len
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// A response: `a.example. A` with one compressed answer and, optionally, an OPT
    /// record (with `opt_rdata`) and a record after it.
    fn response(opt_rdata: Option<&[u8]>, after: Option<&[u8]>) -> Vec<u8> {
        let mut m = Vec::new();
        let arcount = u16::from(opt_rdata.is_some()) + u16::from(after.is_some());
        m.extend_from_slice(&[0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0]);
        m.extend_from_slice(&arcount.to_be_bytes());
        m.extend_from_slice(b"\x01a\x07example\x00\x00\x01\x00\x01");
        // Answer: pointer to the question name, A, IN, TTL 300, 198.18.0.1.
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 198, 18, 0, 1]);
        if let Some(rd) = opt_rdata {
            m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
            m.extend_from_slice(&(rd.len() as u16).to_be_bytes());
            m.extend_from_slice(rd);
        }
        if let Some(rr) = after {
            m.extend_from_slice(rr);
        }
        m
    }

    #[test]
    fn pads_to_the_block_and_keeps_the_message_valid() {
        let m = response(Some(&[]), None);
        let len = m.len();
        let mut buf = m.clone();
        buf.resize(4096, 0xee);
        let n = pad_response(&mut buf, len, RESPONSE_BLOCK);
        assert_eq!(n, 468);
        assert_eq!(
            &buf[..len - 2],
            &m[..len - 2],
            "only the OPT's RDLENGTH changes"
        );
        assert_eq!(be16(&buf, len - 2), Some((468 - len) as u16));
        assert_eq!(be16(&buf, len), Some(OPTION_PADDING));
        assert_eq!(usize::from(be16(&buf, len + 2).unwrap()), 468 - len - 4);
        assert!(buf[len + 4..n].iter().all(|&b| b == 0));
        // The padded message still walks to its end, OPT last.
        assert!(matches!(last_record(&buf[..n]), Some((_, rtype::OPT))));
        // Already a multiple minus the header: the option alone.
        let mut b2 = response(Some(&[0; 468 - 4 - 54]), None);
        let l2 = b2.len();
        assert_eq!(l2 + 4, 468);
        b2.resize(1000, 0);
        assert_eq!(pad_response(&mut b2, l2, RESPONSE_BLOCK), 468);
    }

    #[test]
    fn leaves_alone_what_it_must_not_touch() {
        // No OPT: nothing to pad.
        let m = response(None, None);
        let mut buf = m.clone();
        buf.resize(4096, 0);
        assert_eq!(pad_response(&mut buf, m.len(), RESPONSE_BLOCK), m.len());
        // A record after the OPT (TSIG must stay last).
        let tsig = [0u8, 0, 250, 0, 255, 0, 0, 0, 0, 0, 0];
        let m = response(Some(&[]), Some(&tsig));
        let mut buf = m.clone();
        buf.resize(4096, 0);
        assert_eq!(pad_response(&mut buf, m.len(), RESPONSE_BLOCK), m.len());
        assert_eq!(&buf[..m.len()], &m[..]);
        // No room: left unpadded, never cut.
        let m = response(Some(&[]), None);
        let mut buf = m.clone();
        buf.resize(100, 0);
        assert_eq!(pad_response(&mut buf, m.len(), RESPONSE_BLOCK), m.len());
        // Malformed (cut, a bad label type, a count beyond the end): no panic, unchanged.
        for cut in 0..m.len() {
            let mut b = m[..cut].to_vec();
            b.resize(4096, 0);
            assert_eq!(pad_response(&mut b, cut, RESPONSE_BLOCK), cut);
            assert!(!query_wants_padding(&m[..cut]));
        }
        let mut bad = m.clone();
        bad[27] = 0x80;
        bad.resize(4096, 0);
        assert_eq!(pad_response(&mut bad, m.len(), RESPONSE_BLOCK), m.len());
    }

    #[test]
    fn a_query_wants_padding_only_with_the_option() {
        let mut q = Vec::new();
        q.extend_from_slice(&[0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
        q.extend_from_slice(b"\x01a\x07example\x00\x00\x01\x00\x01");
        let with = |rdata: &[u8]| {
            let mut m = q.clone();
            m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
            m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            m.extend_from_slice(rdata);
            m
        };
        assert!(!query_wants_padding(&with(&[])));
        // A cookie (10) then Padding (12): found after another option.
        assert!(query_wants_padding(&with(&[
            0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 12, 0, 2, 0, 0
        ])));
        assert!(query_wants_padding(&with(&[0, 12, 0, 0])));
        assert!(!query_wants_padding(&q[..q.len()]));
    }
}
