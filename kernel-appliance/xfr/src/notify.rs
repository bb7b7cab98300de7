//! NOTIFY (RFC 1996): the message a primary sends when a zone's serial moves, the check of
//! the secondary's reply, the reading of a NOTIFY received, and the secondary's decision on
//! it ([`answer`]: TSIG, zone, `allow-notify:`, then the response).

use alloc::string::ToString;
use alloc::vec::Vec;
use core::net::IpAddr;

use skua_engine::name::WireName;
use skua_engine::rr::{Rr, class, rtype};

use crate::server::{Allow, KeyRule, Reason, Refusal};
use crate::tsig::{self, Checked, Key, StreamSigner};
use crate::wire::{self, MessageWriter, Section, WireError, flags, opcode, rcode};

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

/// A NOTIFY a secondary accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The zone (lower case).
    pub zone: WireName,
    /// The serial the primary announced, if it sent its SOA.
    pub serial: Option<u32>,
    /// The key that signed it.
    pub key: Option<usize>,
}

/// The secondary's answer to a NOTIFY: the response to send (empty when nothing can be
/// answered) and what was decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    /// The response.
    pub response: Vec<u8>,
    /// Accepted (check the zone's SOA now), or refused and why.
    pub outcome: Result<Accepted, Refusal>,
}

/// Answers the NOTIFY `msg` from `src` at time `now` (skuad as a secondary, RFC 1996 §3.7,
/// §3.10, §4.7). In order: the message's form (FORMERR), its TSIG against `keys` (NOTAUTH
/// with the TSIG error, RFC 8945 §5.2), the zone (`allowed` finds the `allow-notify:`
/// entries of a secondary zone by its lower-cased apex; NOTAUTH when it is not one), the
/// entries (REFUSED unless one holds `src` with the key that signed, or `NOKEY`; `BLOCKED`
/// refuses). Accepted: NOERROR, AA, the question echoed, signed with the request's MAC
/// when it was signed.
pub fn answer<'a>(
    msg: &[u8],
    src: IpAddr,
    keys: &[Key],
    now: u64,
    allowed: impl FnOnce(&WireName) -> Option<&'a [Allow]>,
) -> Answered {
    let mut refusal = Refusal {
        reason: Reason::Malformed,
        zone: None,
        key: None,
        qtype: Some(rtype::SOA),
    };
    let received = match parse(msg) {
        Ok(r) => r,
        Err(_) => {
            let mut response = Vec::new();
            if msg.len() >= wire::HEADER_LEN {
                response.extend_from_slice(&msg[..wire::HEADER_LEN]);
                // QR set, opcode kept, RCODE FORMERR, no sections.
                response[2] = 0x80 | (msg[2] & 0x78);
                response[3] = rcode::FORMERR;
                response[4..12].fill(0);
            }
            return Answered {
                response,
                outcome: Err(refusal),
            };
        }
    };
    let zone = received.zone.to_lowercase();
    refusal.zone = Some(zone.to_string());
    let reply = |code: u8| {
        let mut w = MessageWriter::new(
            received.id,
            flags::QR | flags::AA | (u16::from(opcode::NOTIFY) << 11) | u16::from(code),
        );
        w.question(&received.zone, rtype::SOA, class::IN);
        w.finish()
    };
    let signed = match tsig::check_request(msg, keys, now) {
        Ok(Checked::Unsigned) => None,
        Ok(Checked::Signed(s)) => {
            refusal.key = keys.get(s.key).map(|k| k.name().to_string());
            Some(s)
        }
        Ok(Checked::Rejected(r)) => {
            refusal.key = Some(r.key_name.to_string());
            refusal.reason = match r.error {
                tsig::error::BADKEY => Reason::BadKey,
                tsig::error::BADSIG => Reason::BadSig,
                tsig::error::BADTIME => Reason::BadTime,
                _ => Reason::BadTrunc,
            };
            let mut m = reply(rcode::NOTAUTH);
            m[2] &= !((flags::AA >> 8) as u8);
            tsig::append_error(&mut m, &r, keys, now);
            return Answered {
                response: m,
                outcome: Err(refusal),
            };
        }
        Err(_) => {
            let mut m = reply(rcode::FORMERR);
            m[2] &= !((flags::AA >> 8) as u8);
            return Answered {
                response: m,
                outcome: Err(refusal),
            };
        }
    };
    let sign = |mut m: Vec<u8>| {
        if let Some(s) = &signed
            && let Some(k) = keys.get(s.key)
        {
            StreamSigner::new(k, &s.mac, now).sign(&mut m);
        }
        m
    };
    let Some(entries) = allowed(&zone) else {
        refusal.reason = Reason::NotAuth;
        return Answered {
            response: sign(reply(rcode::NOTAUTH)),
            outcome: Err(refusal),
        };
    };
    let covers = |a: &&Allow| a.netblock.contains_addr(src);
    let blocked = entries
        .iter()
        .filter(covers)
        .any(|a| a.rule == KeyRule::Blocked);
    let ok = !blocked
        && entries.iter().filter(covers).any(|a| match a.rule {
            KeyRule::NoKey => true,
            KeyRule::Key(i) => signed.as_ref().is_some_and(|s| s.key == i),
            KeyRule::Blocked => false,
        });
    if !ok {
        refusal.reason = if blocked {
            Reason::Blocked
        } else {
            Reason::NotAllowed
        };
        return Answered {
            response: sign(reply(rcode::REFUSED)),
            outcome: Err(refusal),
        };
    }
    Answered {
        response: sign(reply(rcode::NOERROR)),
        outcome: Ok(Accepted {
            zone,
            serial: received.serial,
            key: signed.map(|s| s.key),
        }),
    }
}

/// Whether `msg` looks like a NOTIFY request (a cheap check for the dataplane: QR clear,
/// opcode NOTIFY). [`answer`] checks the rest.
pub fn is_notify(msg: &[u8]) -> bool {
    msg.len() >= wire::HEADER_LEN && msg[2] & 0x80 == 0 && (msg[2] >> 3) & 0xf == opcode::NOTIFY
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

    #[test]
    fn a_secondary_answers_notify_by_zone_key_and_address() {
        let apex = WireName::parse("Example.", None).unwrap();
        let k = Key::new(
            &WireName::parse("k.", None).unwrap(),
            Algorithm::HmacSha256,
            b"0123456789abcdef".to_vec(),
        );
        let other = Key::new(
            &WireName::parse("other.", None).unwrap(),
            Algorithm::HmacSha256,
            b"fedcba9876543210".to_vec(),
        );
        let keys = [k.clone(), other.clone()];
        let allow = [
            Allow {
                netblock: "198.18.0.1".parse().unwrap(),
                rule: KeyRule::Key(0),
            },
            Allow {
                netblock: "198.18.9.0/24".parse().unwrap(),
                rule: KeyRule::NoKey,
            },
            Allow {
                netblock: "198.18.9.9".parse().unwrap(),
                rule: KeyRule::Blocked,
            },
        ];
        let zones = |z: &WireName| (z.to_string() == "example.").then_some(&allow[..]);
        let soa = parse_rr("example. 300 IN SOA a. b. 42 1 1 1 1", None, 0).unwrap();
        let from = |a: &str| a.parse::<IpAddr>().unwrap();
        // Signed with the key, from the primary: NOERROR, AA, signed with the request's MAC.
        let mut m = message(5, &apex, Some(&soa));
        let mac = sign_request(&mut m, &k, 1000);
        let a = answer(&m, from("198.18.0.1"), &keys, 1000, zones);
        let acc = a.outcome.unwrap();
        assert_eq!(
            (acc.serial, acc.key, acc.zone.to_string().as_str()),
            (Some(42), Some(0), "example.")
        );
        assert_eq!(reply_rcode(&a.response, 5, &apex), Some(0));
        assert_ne!(a.response[2] & 0x04, 0, "AA");
        assert_eq!(
            StreamVerifier::new(&k, &mac).verify(&a.response, 1000),
            Ok(true)
        );
        // Same address, unsigned or signed with another known key: REFUSED.
        let m = message(6, &apex, None);
        let a = answer(&m, from("198.18.0.1"), &keys, 1000, zones);
        assert_eq!(a.outcome.unwrap_err().reason, Reason::NotAllowed);
        assert_eq!(reply_rcode(&a.response, 6, &apex), Some(rcode::REFUSED));
        let mut m = message(7, &apex, None);
        sign_request(&mut m, &other, 1000);
        let a = answer(&m, from("198.18.0.1"), &keys, 1000, zones);
        assert_eq!(a.outcome.unwrap_err().reason, Reason::NotAllowed);
        // A wrong secret: NOTAUTH, BADSIG.
        let mut m = message(8, &apex, None);
        sign_request(
            &mut m,
            &Key::new(
                k.name(),
                Algorithm::HmacSha256,
                b"wrong wrong wrong".to_vec(),
            ),
            1000,
        );
        let a = answer(&m, from("198.18.0.1"), &keys, 1000, zones);
        assert_eq!(a.outcome.unwrap_err().reason, Reason::BadSig);
        assert_eq!(reply_rcode(&a.response, 8, &apex), Some(rcode::NOTAUTH));
        assert_eq!(
            tsig::find(&a.response).unwrap().unwrap().error,
            tsig::error::BADSIG
        );
        // NOKEY netblock: unsigned is fine; BLOCKED wins.
        let m = message(9, &apex, None);
        assert!(
            answer(&m, from("198.18.9.1"), &keys, 1000, zones)
                .outcome
                .is_ok()
        );
        let a = answer(&m, from("198.18.9.9"), &keys, 1000, zones);
        assert_eq!(a.outcome.unwrap_err().reason, Reason::Blocked);
        // Another zone: NOTAUTH.
        let m = message(10, &WireName::parse("other.", None).unwrap(), None);
        let a = answer(&m, from("198.18.9.1"), &keys, 1000, zones);
        assert_eq!(a.outcome.unwrap_err().reason, Reason::NotAuth);
        // Garbage: FORMERR or nothing, never a panic.
        let mut m = message(11, &apex, Some(&soa));
        sign_request(&mut m, &k, 1000);
        for n in 0..m.len() {
            let _ = answer(&m[..n], from("198.18.0.1"), &keys, 1000, zones);
        }
        assert!(is_notify(&m) && !is_notify(&a.response));
    }
}
