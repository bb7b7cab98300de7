//! NOTIFY (RFC 1996): the message a primary sends when a zone's serial moves, the check of
//! the secondary's reply, and the reading of a NOTIFY received.

use alloc::vec::Vec;

use skua_engine::name::WireName;
use skua_engine::rr::{Rr, class, rtype};

use crate::wire::{self, MessageWriter, Section, WireError, flags, opcode};

/// A NOTIFY for `apex` (RFC 1996 §3.7): opcode NOTIFY, AA, the question `apex IN SOA`, and
/// the new SOA in the answer section when given (a hint the secondary may use).
pub fn message(id: u16, apex: &WireName, soa: Option<&Rr>) -> Vec<u8> {
    let mut w = MessageWriter::new(id, (u16::from(opcode::NOTIFY) << 11) | flags::AA);
    w.question(apex, rtype::SOA, class::IN);
    if let Some(s) = soa {
        // A SOA always fits a 64 KiB message.
        let _ = w.try_rr(Section::Answer, s, wire::MAX_MESSAGE_LEN);
    }
    w.finish()
}

/// Whether `reply` answers the NOTIFY `id` for `apex` (RFC 1996 §4.7: QR, opcode NOTIFY, the
/// same ID and question): its RCODE when it does.
pub fn reply_rcode(reply: &[u8], id: u16, apex: &WireName) -> Option<u8> {
    let fl = wire::be16(reply, 2).ok()?;
    if wire::be16(reply, 0).ok()? != id
        || fl & flags::QR == 0
        || (fl >> 11) & 0xf != u16::from(opcode::NOTIFY)
    {
        return None;
    }
    let (name, qt, _, _) = wire::read_question(reply, wire::HEADER_LEN).ok()?;
    (qt == rtype::SOA && name.to_lowercase() == apex.to_lowercase()).then_some((fl & 0xf) as u8)
}

/// A NOTIFY received (skuad as a secondary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The message ID.
    pub id: u16,
    /// The zone, as written.
    pub zone: WireName,
    /// The serial of the SOA in the answer section, when the primary sent one.
    pub serial: Option<u32>,
}

/// Reads a NOTIFY request: QR=0, opcode NOTIFY, one question of type SOA.
pub fn parse(msg: &[u8]) -> Result<Received, WireError> {
    let fl = wire::be16(msg, 2)?;
    if fl & flags::QR != 0 || (fl >> 11) & 0xf != u16::from(opcode::NOTIFY) {
        return Err(WireError::Layout("not a NOTIFY request"));
    }
    let [qd, an, _, _] = wire::counts(msg)?;
    if qd != 1 {
        return Err(WireError::Layout("a NOTIFY has one question"));
    }
    let (zone, qt, _, mut off) = wire::read_question(msg, wire::HEADER_LEN)?;
    if qt != rtype::SOA {
        return Err(WireError::Layout("a NOTIFY asks for SOA"));
    }
    let mut serial = None;
    for _ in 0..an {
        let (r, o) = wire::read_owned_rr(msg, off)?;
        if r.rtype == rtype::SOA && r.owner.to_lowercase() == zone.to_lowercase() {
            serial = wire::soa_serial(&r.rdata);
        }
        off = o;
    }
    Ok(Received {
        id: wire::be16(msg, 0)?,
        zone,
        serial,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsig::{Algorithm, Checked, Key, StreamVerifier, check_request, sign_request};
    use skua_engine::text::parse_rr;

    #[test]
    fn a_signed_notify_reads_back_and_its_reply_is_recognised() {
        let apex = WireName::parse("example.", None).unwrap();
        let soa = parse_rr(
            "example. 3600 IN SOA ns.example. admin.example. 42 3600 600 86400 300",
            None,
            0,
        )
        .unwrap();
        let key = Key::new(
            &WireName::parse("k.", None).unwrap(),
            Algorithm::HmacSha256,
            b"0123456789abcdef".to_vec(),
        );
        let mut m = message(900, &apex, Some(&soa));
        let mac = sign_request(&mut m, &key, 5000);
        assert_eq!(
            parse(&m).unwrap(),
            Received {
                id: 900,
                zone: apex.clone(),
                serial: Some(42)
            }
        );
        assert!(matches!(
            check_request(&m, core::slice::from_ref(&key), 5000),
            Ok(Checked::Signed(_))
        ));
        // The secondary's reply: same header and question, QR set, signed with the request's MAC.
        let mut r = message(900, &apex, None);
        r[2] |= 0x80;
        let mut s = crate::tsig::StreamSigner::new(&key, &mac, 5001);
        s.sign(&mut r);
        assert_eq!(reply_rcode(&r, 900, &apex), Some(0));
        assert_eq!(StreamVerifier::new(&key, &mac).verify(&r, 5001), Ok(true));
        assert_eq!(reply_rcode(&r, 901, &apex), None, "another ID");
        assert_eq!(reply_rcode(&m, 900, &apex), None, "not a reply");
        assert_eq!(
            reply_rcode(&r, 900, &WireName::parse("other.", None).unwrap()),
            None
        );
        for n in 0..m.len() {
            let _ = parse(&m[..n]);
        }
        for n in 0..r.len() {
            let _ = reply_rcode(&r[..n], 900, &apex);
        }
    }
}
