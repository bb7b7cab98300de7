//! The primary's decision for one transfer request: parse it, check its TSIG, find the
//! zone, check who may transfer it, and answer with a transfer or a refusal.
//!
//! [`answer`] takes the request bytes, the client's address, the keys and a lookup of the
//! zones, and returns either [`Answer::Transfer`] (a [`Responder`] that yields the signed
//! messages) or [`Answer::Refused`] (one message: FORMERR, NOTAUTH with a TSIG error,
//! REFUSED) with the reason, for the caller's log and audit log.
//!
//! Order (RFC 8945 §5.2 puts TSIG first): the message's form (FORMERR), its TSIG (BADKEY,
//! BADSIG, BADTIME, BADTRUNC: NOTAUTH), the zone (NOTAUTH when not served, RFC 5936
//! §2.2.1), `provide-xfr:` (REFUSED), then the transfer: AXFR; IXFR from the journal, the
//! whole zone when the journal does not reach the client's serial (RFC 1995 §4), the SOA
//! alone when the client is up to date (§2).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::net::IpAddr;

use skua_engine::acl::Netblock;
use skua_engine::name::WireName;
use skua_engine::rr::{class, rtype};

use crate::transfer::{Question, Records, Responder};
use crate::tsig::{self, Checked, Key, StreamSigner};
use crate::wire::{self, MessageWriter, WireError, flags, opcode, rcode};
use crate::zone::{Journal, Version, serial_lt};

/// What one `provide-xfr:` entry asks of a client in its netblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRule {
    /// `NOKEY`: any request, signed or not.
    NoKey,
    /// A request signed with this key (index in the keys given to [`answer`]).
    Key(usize),
    /// `BLOCKED`: refused, whatever another entry says.
    Blocked,
}

/// One `provide-xfr:` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allow {
    /// The clients it covers.
    pub netblock: Netblock,
    /// What it asks of them.
    pub rule: KeyRule,
}

/// A zone as [`answer`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct ZoneRef<'a> {
    /// The version served.
    pub version: &'a Version,
    /// Its journal.
    pub journal: &'a Journal,
    /// Its `provide-xfr:` entries.
    pub allow: &'a [Allow],
}

/// A transfer request, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The question (ID, name as written, type, class, RD).
    pub question: Question,
    /// IXFR: the serial of the client's version (the authority section's SOA).
    pub client_serial: Option<u32>,
}

/// Whether `msg` looks like a transfer request (a cheap check for the dataplane: QR=0,
/// opcode QUERY, one question of type AXFR or IXFR). [`answer`] checks the rest.
pub fn is_transfer_request(msg: &[u8]) -> bool {
    if msg.len() < wire::HEADER_LEN + 5
        || msg[2] & 0x80 != 0
        || (msg[2] >> 3) & 0xf != opcode::QUERY
    {
        return false;
    }
    if wire::be16(msg, 4) != Ok(1) {
        return false;
    }
    match wire::read_question(msg, wire::HEADER_LEN) {
        Ok((_, t, _, _)) => t == rtype::AXFR || t == rtype::IXFR,
        Err(_) => false,
    }
}

/// Parses a transfer request (RFC 5936 §2.1, RFC 1995 §3): one question of type AXFR or
/// IXFR, class IN, no answer records; IXFR with exactly one authority record, the
/// client's SOA at the zone's name; AXFR with none.
pub fn parse_request(msg: &[u8]) -> Result<Request, WireError> {
    if msg.len() < wire::HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let fl = wire::be16(msg, 2)?;
    if fl & flags::QR != 0 || (fl >> 11) & 0xf != u16::from(opcode::QUERY) {
        return Err(WireError::Layout("not a query"));
    }
    let [qd, an, ns, _] = wire::counts(msg)?;
    if qd != 1 || an != 0 {
        return Err(WireError::Layout(
            "a transfer request has one question and no answer",
        ));
    }
    let (name, qtype, qclass, off) = wire::read_question(msg, wire::HEADER_LEN)?;
    if qtype != rtype::AXFR && qtype != rtype::IXFR {
        return Err(WireError::Layout("not AXFR or IXFR"));
    }
    if qclass != class::IN {
        return Err(WireError::Layout("class other than IN"));
    }
    let client_serial = match (qtype, ns) {
        (rtype::AXFR, 0) => None,
        (rtype::IXFR, 1) => {
            let (soa, _) = wire::read_owned_rr(msg, off)?;
            if soa.rtype != rtype::SOA || soa.owner.to_lowercase() != name.to_lowercase() {
                return Err(WireError::Layout(
                    "IXFR without the zone's SOA in authority",
                ));
            }
            Some(wire::soa_serial(&soa.rdata).ok_or(WireError::Layout("bad SOA"))?)
        }
        _ => {
            return Err(WireError::Layout(
                "AXFR with authority records, or IXFR without exactly one",
            ));
        }
    };
    Ok(Request {
        question: Question {
            id: wire::be16(msg, 0)?,
            name,
            qtype,
            qclass,
            rd: fl & flags::RD != 0,
        },
        client_serial,
    })
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Malformed (FORMERR).
    Malformed,
    /// TSIG with an unknown key or algorithm (BADKEY).
    BadKey,
    /// TSIG MAC wrong (BADSIG).
    BadSig,
    /// TSIG signed outside the time window (BADTIME).
    BadTime,
    /// TSIG MAC truncated (BADTRUNC).
    BadTrunc,
    /// Not a zone skuad serves (NOTAUTH).
    NotAuth,
    /// No `provide-xfr:` entry allows this client with this key (REFUSED).
    NotAllowed,
    /// A `BLOCKED` entry holds the client (REFUSED).
    Blocked,
}

impl Reason {
    /// A stable name for logs and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Malformed => "malformed",
            Reason::BadKey => "tsig-badkey",
            Reason::BadSig => "tsig-badsig",
            Reason::BadTime => "tsig-badtime",
            Reason::BadTrunc => "tsig-badtrunc",
            Reason::NotAuth => "not-authoritative",
            Reason::NotAllowed => "not-allowed",
            Reason::Blocked => "blocked",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a transfer is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// AXFR.
    Axfr,
    /// IXFR from the journal.
    Ixfr,
    /// IXFR answered with the whole zone (the journal does not reach the client's serial).
    IxfrFull,
    /// IXFR from a client already up to date: the SOA alone.
    UpToDate,
}

impl Kind {
    /// A stable name for logs and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Axfr => "AXFR",
            Kind::Ixfr => "IXFR",
            Kind::IxfrFull => "IXFR (whole zone)",
            Kind::UpToDate => "IXFR (up to date)",
        }
    }
}

/// A refusal, for logs and the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Why.
    pub reason: Reason,
    /// The zone asked for, when the question could be read (presentation form).
    pub zone: Option<String>,
    /// The TSIG key named by the request, if any.
    pub key: Option<String>,
    /// AXFR or IXFR, when known.
    pub qtype: Option<u16>,
}

/// A transfer about to be sent.
#[derive(Debug)]
pub struct Transfer<'a> {
    /// Its messages.
    pub messages: Responder<'a>,
    /// How it is answered.
    pub kind: Kind,
    /// The zone (presentation form, lower case).
    pub zone: String,
    /// The client's serial (IXFR).
    pub from: Option<u32>,
    /// The serial sent.
    pub to: u32,
    /// The key that signed the request, if any.
    pub key: Option<String>,
    /// Records sent, both SOA copies included.
    pub records: usize,
}

/// The answer to one request.
#[derive(Debug)]
pub enum Answer<'a> {
    /// Send these messages.
    Transfer(Transfer<'a>),
    /// Send this one message; the request was refused.
    Refused {
        /// The response (empty when nothing can be answered: fewer than 12 bytes).
        message: Vec<u8>,
        /// Why, for the log and the audit log.
        refusal: Refusal,
    },
}

/// Answers the transfer request `msg` from `src` at time `now` (seconds since the epoch).
/// `zones` finds a zone by its lower-cased apex.
pub fn answer<'a>(
    msg: &[u8],
    src: IpAddr,
    keys: &'a [Key],
    now: u64,
    zones: impl FnOnce(&WireName) -> Option<ZoneRef<'a>>,
) -> Answer<'a> {
    let mut refusal = Refusal {
        reason: Reason::Malformed,
        zone: None,
        key: None,
        qtype: None,
    };
    let req = match parse_request(msg) {
        Ok(r) => r,
        Err(_) => {
            if let Ok((name, qt, _, _)) = wire::read_question(msg, wire::HEADER_LEN) {
                refusal.zone = Some(name.to_lowercase().to_string());
                refusal.qtype = Some(qt);
            }
            return Answer::Refused {
                message: header_only(msg, rcode::FORMERR),
                refusal,
            };
        }
    };
    refusal.zone = Some(req.question.name.to_lowercase().to_string());
    refusal.qtype = Some(req.question.qtype);
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
            let mut m = reply(&req.question, rcode::NOTAUTH);
            tsig::append_error(&mut m, &r, keys, now);
            return Answer::Refused {
                message: m,
                refusal,
            };
        }
        Err(_) => {
            return Answer::Refused {
                message: header_only(msg, rcode::FORMERR),
                refusal,
            };
        }
    };
    let signer = signed
        .as_ref()
        .and_then(|s| keys.get(s.key).map(|k| StreamSigner::new(k, &s.mac, now)));
    let refuse = |reason, code, signer: Option<StreamSigner<'a>>, mut refusal: Refusal| {
        refusal.reason = reason;
        let mut m = reply(&req.question, code);
        if let Some(mut s) = signer {
            s.sign(&mut m);
        }
        Answer::Refused {
            message: m,
            refusal,
        }
    };
    let Some(zone) = zones(&req.question.name.to_lowercase()) else {
        return refuse(Reason::NotAuth, rcode::NOTAUTH, signer, refusal);
    };
    let covers = |a: &&Allow| a.netblock.contains_addr(src);
    if zone
        .allow
        .iter()
        .filter(covers)
        .any(|a| a.rule == KeyRule::Blocked)
    {
        return refuse(Reason::Blocked, rcode::REFUSED, signer, refusal);
    }
    let allowed = zone.allow.iter().filter(covers).any(|a| match a.rule {
        KeyRule::NoKey => true,
        KeyRule::Key(i) => signed.as_ref().is_some_and(|s| s.key == i),
        KeyRule::Blocked => false,
    });
    if !allowed {
        return refuse(Reason::NotAllowed, rcode::REFUSED, signer, refusal);
    }
    let v = zone.version;
    let current = v.serial();
    let (records, kind) = match req.client_serial {
        None => (Records::Full(v), Kind::Axfr),
        Some(s) if !serial_lt(s, current) => (Records::UpToDate(v.soa()), Kind::UpToDate),
        Some(s) => match zone.journal.chain(s, current) {
            Some(chain) => (
                Records::Incremental {
                    current: v.soa(),
                    diffs: chain.collect(),
                },
                Kind::Ixfr,
            ),
            None => (Records::Full(v), Kind::IxfrFull),
        },
    };
    let count = records.count();
    Answer::Transfer(Transfer {
        messages: Responder::new(req.question.clone(), &records, signer),
        kind,
        zone: v.apex().to_lowercase().to_string(),
        from: req.client_serial,
        to: current,
        key: refusal.key,
        records: count,
    })
}

/// A query (not a transfer) that carries a TSIG record, checked (RFC 8945 §5.2): a
/// secondary's SOA probe, signed with the key it shares with the primary.
#[derive(Debug)]
pub enum SignedQuery {
    /// The MAC verified: answer `query` (the request without its TSIG record, with its
    /// original ID) as usual, then sign the response with [`sign_response`].
    Verified {
        /// The query without its TSIG record.
        query: Vec<u8>,
        /// Index of the key in the keys given.
        key: usize,
        /// The request's MAC.
        mac: Vec<u8>,
    },
    /// The TSIG failed: send `response` (NOTAUTH with the TSIG error).
    Rejected {
        /// The response.
        response: Vec<u8>,
        /// Why, for the log.
        refusal: Refusal,
    },
}

/// Checks a query that carries a TSIG record; `None` when it carries none or is too
/// malformed to answer (the engine answers it as any other).
pub fn check_signed_query(msg: &[u8], keys: &[Key], now: u64) -> Option<SignedQuery> {
    let t = tsig::find(msg).ok()??;
    let (name, qtype, qclass, _) = wire::read_question(msg, wire::HEADER_LEN).ok()?;
    let fl = wire::be16(msg, 2).ok()?;
    let q = Question {
        id: wire::be16(msg, 0).ok()?,
        name,
        qtype,
        qclass,
        rd: fl & flags::RD != 0,
    };
    match tsig::check_request(msg, keys, now) {
        Ok(Checked::Signed(s)) => {
            let mut query = msg[..t.start].to_vec();
            query[..2].copy_from_slice(&t.original_id.to_be_bytes());
            let ar = wire::be16(&query, 10).ok()?.saturating_sub(1);
            query[10..12].copy_from_slice(&ar.to_be_bytes());
            Some(SignedQuery::Verified {
                query,
                key: s.key,
                mac: s.mac,
            })
        }
        Ok(Checked::Rejected(r)) => {
            let mut m = reply(&q, rcode::NOTAUTH);
            // Keep the opcode (a signed NOTIFY is answered in kind).
            m[2] |= msg[2] & 0x78;
            tsig::append_error(&mut m, &r, keys, now);
            let reason = match r.error {
                tsig::error::BADKEY => Reason::BadKey,
                tsig::error::BADSIG => Reason::BadSig,
                tsig::error::BADTIME => Reason::BadTime,
                _ => Reason::BadTrunc,
            };
            Some(SignedQuery::Rejected {
                response: m,
                refusal: Refusal {
                    reason,
                    zone: Some(q.name.to_lowercase().to_string()),
                    key: Some(r.key_name.to_string()),
                    qtype: Some(q.qtype),
                },
            })
        }
        Ok(Checked::Unsigned) | Err(_) => None,
    }
}

/// Signs the response to a query [`check_signed_query`] verified.
pub fn sign_response(response: &mut Vec<u8>, key: &Key, request_mac: &[u8], now: u64) {
    StreamSigner::new(key, request_mac, now).sign(response);
}

/// A response with the question and no records.
fn reply(q: &Question, code: u8) -> Vec<u8> {
    let fl = flags::QR | if q.rd { flags::RD } else { 0 } | u16::from(code);
    let mut w = MessageWriter::new(q.id, fl);
    w.question(&q.name, q.qtype, q.qclass);
    w.finish()
}

/// A header-only response with `code` (the question could not be read), or nothing when
/// the message is shorter than a header.
fn header_only(msg: &[u8], code: u8) -> Vec<u8> {
    if msg.len() < wire::HEADER_LEN {
        return Vec::new();
    }
    let mut m = msg[..wire::HEADER_LEN].to_vec();
    // QR set, opcode and RD kept, everything else cleared, RCODE set.
    m[2] = 0x80 | (m[2] & 0x79);
    m[3] = code;
    m[4..12].fill(0);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsig::{Algorithm, StreamVerifier, sign_request};
    use crate::wire::{Section, read_owned_rr};
    use crate::zone::Diff;
    use alloc::format;
    use alloc::vec;
    use skua_engine::rr::Rr;
    use skua_engine::text::parse_rr;

    const NOW: u64 = 1_750_000_000;

    fn rr(s: &str) -> Rr {
        parse_rr(s, None, 300).unwrap()
    }

    fn key(name: &str, secret: &[u8]) -> Key {
        Key::new(
            &WireName::parse(name, None).unwrap(),
            Algorithm::HmacSha256,
            secret.to_vec(),
        )
    }

    fn version(serial: u32, n: usize) -> Version {
        let apex = WireName::parse("example.", None).unwrap();
        let mut r = vec![rr(&format!(
            "example. 3600 IN SOA ns.example. admin.example. {serial} 3600 600 86400 300"
        ))];
        r.push(rr("example. 3600 IN NS ns.example."));
        for i in 0..n {
            r.push(rr(&format!(
                "h{i}.example. 300 IN A 198.18.{}.{}",
                i / 250,
                i % 250
            )));
        }
        Version::new(&apex, r).unwrap()
    }

    fn request(qtype: u16, serial: Option<u32>, k: Option<&Key>) -> (Vec<u8>, Vec<u8>) {
        let mut w = MessageWriter::new(0x4242, 0);
        let apex = WireName::parse("Example.", None).unwrap();
        w.question(&apex, qtype, 1);
        if let Some(s) = serial {
            assert!(w.try_rr(
                Section::Authority,
                &rr(&format!(
                    "example. 3600 IN SOA ns.example. admin.example. {s} 3600 600 86400 300"
                )),
                65535
            ));
        }
        let mut m = w.finish();
        let mac = k.map(|k| sign_request(&mut m, k, NOW)).unwrap_or_default();
        (m, mac)
    }

    struct Fixture {
        v: Version,
        j: Journal,
        allow: Vec<Allow>,
        keys: Vec<Key>,
    }

    fn fixture() -> Fixture {
        let keys = vec![
            key("xfr.example.", b"0123456789abcdef0123456789abcdef"),
            key("other.", b"another secret 16b"),
        ];
        let v1 = version(1, 10);
        let v2 = {
            let mut r: Vec<Rr> = v1.iter().cloned().collect();
            r.push(rr("new.example. 300 IN A 198.18.9.9"));
            Version::new(v1.apex(), r).unwrap().with_serial(2)
        };
        let v3 = v2.with_serial(3);
        let mut j = Journal::new(10, 1 << 20);
        j.push(Diff::between(&v1, &v2));
        j.push(Diff::between(&v2, &v3));
        let allow = vec![
            Allow {
                netblock: "198.18.0.0/24".parse().unwrap(),
                rule: KeyRule::Key(0),
            },
            Allow {
                netblock: "198.18.0.66".parse().unwrap(),
                rule: KeyRule::Blocked,
            },
            Allow {
                netblock: "fd00::/8".parse().unwrap(),
                rule: KeyRule::NoKey,
            },
        ];
        Fixture {
            v: v3,
            j,
            allow,
            keys,
        }
    }

    fn run<'a>(f: &'a Fixture, msg: &[u8], src: &str) -> Answer<'a> {
        answer(msg, src.parse().unwrap(), &f.keys, NOW, |apex| {
            (apex.as_bytes() == b"\x07example\x00").then_some(ZoneRef {
                version: &f.v,
                journal: &f.j,
                allow: &f.allow,
            })
        })
    }

    fn refused(a: Answer<'_>) -> (Vec<u8>, Refusal) {
        match a {
            Answer::Refused { message, refusal } => (message, refusal),
            Answer::Transfer(t) => panic!("transferred: {t:?}"),
        }
    }

    fn transfer(a: Answer<'_>) -> Transfer<'_> {
        match a {
            Answer::Transfer(t) => t,
            Answer::Refused { refusal, .. } => panic!("refused: {refusal:?}"),
        }
    }

    fn rcode_of(m: &[u8]) -> u8 {
        m[3] & 0xf
    }

    #[test]
    fn axfr_with_the_right_key_from_the_right_place() {
        let f = fixture();
        let (q, mac) = request(rtype::AXFR, None, Some(&f.keys[0]));
        let t = transfer(run(&f, &q, "198.18.0.7"));
        assert_eq!((t.kind, t.from, t.to), (Kind::Axfr, None, 3));
        assert_eq!(t.key.as_deref(), Some("xfr.example."));
        assert_eq!(t.zone, "example.");
        let msgs: Vec<Vec<u8>> = t.messages.collect();
        let mut v = StreamVerifier::new(&f.keys[0], &mac);
        for m in &msgs {
            assert_eq!(v.verify(m, NOW), Ok(true));
        }
        assert_eq!(t.records, f.v.records().len() + 2);
    }

    #[test]
    fn refusals_and_their_answers() {
        let f = fixture();
        // No key where a key is needed.
        let (q, _) = request(rtype::AXFR, None, None);
        let (m, r) = refused(run(&f, &q, "198.18.0.7"));
        assert_eq!(
            (r.reason, rcode_of(&m)),
            (Reason::NotAllowed, rcode::REFUSED)
        );
        assert_eq!(r.zone.as_deref(), Some("example."));
        // The other key, valid but not the one provide-xfr names: REFUSED, signed.
        let (q, mac) = request(rtype::AXFR, None, Some(&f.keys[1]));
        let (m, r) = refused(run(&f, &q, "198.18.0.7"));
        assert_eq!(
            (r.reason, rcode_of(&m)),
            (Reason::NotAllowed, rcode::REFUSED)
        );
        assert_eq!(
            StreamVerifier::new(&f.keys[1], &mac).verify(&m, NOW),
            Ok(true)
        );
        // Outside every netblock.
        let (q, _) = request(rtype::AXFR, None, Some(&f.keys[0]));
        let (_, r) = refused(run(&f, &q, "192.0.2.1"));
        assert_eq!(r.reason, Reason::NotAllowed);
        // BLOCKED beats the /24 entry.
        let (_, r) = refused(run(&f, &q, "198.18.0.66"));
        assert_eq!(r.reason, Reason::Blocked);
        // A key skuad does not know: NOTAUTH + BADKEY, unsigned.
        let (q, _) = request(
            rtype::AXFR,
            None,
            Some(&key("stranger.", b"whatever secret!")),
        );
        let (m, r) = refused(run(&f, &q, "198.18.0.7"));
        assert_eq!((r.reason, rcode_of(&m)), (Reason::BadKey, rcode::NOTAUTH));
        assert_eq!(r.key.as_deref(), Some("stranger."));
        let t = tsig::find(&m).unwrap().unwrap();
        assert_eq!((t.error, t.mac.len()), (tsig::error::BADKEY, 0));
        // The right name, the wrong secret: BADSIG.
        let (q, _) = request(
            rtype::AXFR,
            None,
            Some(&key("xfr.example.", b"not the secret!!")),
        );
        let (m, r) = refused(run(&f, &q, "198.18.0.7"));
        assert_eq!((r.reason, rcode_of(&m)), (Reason::BadSig, rcode::NOTAUTH));
        // A zone skuad does not serve.
        let mut w = MessageWriter::new(1, 0);
        w.question(&WireName::parse("other.", None).unwrap(), rtype::AXFR, 1);
        let (m, r) = refused(run(&f, &w.finish(), "fd00::1"));
        assert_eq!((r.reason, rcode_of(&m)), (Reason::NotAuth, rcode::NOTAUTH));
        // Malformed: IXFR without its SOA.
        let (q, _) = request(rtype::IXFR, None, None);
        let (m, r) = refused(run(&f, &q, "fd00::1"));
        assert_eq!(
            (r.reason, rcode_of(&m)),
            (Reason::Malformed, rcode::FORMERR)
        );
        // NOKEY: unsigned from fd00::/8.
        let (q, _) = request(rtype::AXFR, None, None);
        assert_eq!(transfer(run(&f, &q, "fd00::1")).kind, Kind::Axfr);
    }

    #[test]
    fn ixfr_from_the_journal_whole_zone_or_up_to_date() {
        let f = fixture();
        // From 1: both diffs.
        let (q, _) = request(rtype::IXFR, Some(1), None);
        let t = transfer(run(&f, &q, "fd00::1"));
        assert_eq!((t.kind, t.from, t.to), (Kind::Ixfr, Some(1), 3));
        let msgs: Vec<Vec<u8>> = t.messages.collect();
        let mut serials = Vec::new();
        let mut off = wire::read_question(&msgs[0], wire::HEADER_LEN).unwrap().3;
        let an = wire::counts(&msgs[0]).unwrap()[1];
        for _ in 0..an {
            let (r, o) = read_owned_rr(&msgs[0], off).unwrap();
            if r.rtype == rtype::SOA {
                serials.push(wire::soa_serial(&r.rdata).unwrap());
            }
            off = o;
        }
        assert_eq!(serials, vec![3, 1, 2, 2, 3, 3]);
        // From 0 (not in the journal): the whole zone.
        let (q, _) = request(rtype::IXFR, Some(0), None);
        assert_eq!(transfer(run(&f, &q, "fd00::1")).kind, Kind::IxfrFull);
        // From 3 or later: the SOA alone.
        for s in [3, 4] {
            let (q, _) = request(rtype::IXFR, Some(s), None);
            let t = transfer(run(&f, &q, "fd00::1"));
            assert_eq!(t.kind, Kind::UpToDate);
            assert_eq!(t.messages.count(), 1);
        }
    }

    #[test]
    fn signed_soa_queries_are_stripped_and_their_answers_signed() {
        let f = fixture();
        let mut w = MessageWriter::new(0x7777, flags::RD);
        w.question(&WireName::parse("example.", None).unwrap(), rtype::SOA, 1);
        let plain = w.finish();
        let mut q = plain.clone();
        let mac = sign_request(&mut q, &f.keys[0], NOW);
        let Some(SignedQuery::Verified {
            query,
            key: k,
            mac: m,
        }) = check_signed_query(&q, &f.keys, NOW)
        else {
            panic!("not verified")
        };
        assert_eq!((query, k, &m), (plain.clone(), 0, &mac));
        // The answer (here: the query with QR set) signed verifies at the client.
        let mut resp = plain.clone();
        resp[2] |= 0x80;
        sign_response(&mut resp, &f.keys[0], &mac, NOW);
        assert_eq!(
            StreamVerifier::new(&f.keys[0], &mac).verify(&resp, NOW),
            Ok(true)
        );
        // A wrong secret: NOTAUTH with BADSIG.
        let mut q = plain.clone();
        sign_request(&mut q, &key("xfr.example.", b"not the secret!!"), NOW);
        let Some(SignedQuery::Rejected { response, refusal }) =
            check_signed_query(&q, &f.keys, NOW)
        else {
            panic!("not rejected")
        };
        assert_eq!(
            (rcode_of(&response), refusal.reason),
            (rcode::NOTAUTH, Reason::BadSig)
        );
        // Unsigned: not ours.
        assert!(check_signed_query(&plain, &f.keys, NOW).is_none());
    }

    #[test]
    fn no_input_panics_and_short_input_gets_nothing_or_formerr() {
        let f = fixture();
        let (q, _) = request(rtype::IXFR, Some(1), Some(&f.keys[0]));
        for n in 0..q.len() {
            let a = run(&f, &q[..n], "198.18.0.7");
            if let Answer::Refused { message, .. } = a {
                assert!(message.is_empty() || message.len() >= wire::HEADER_LEN);
            }
        }
        assert!(is_transfer_request(&q));
        assert!(!is_transfer_request(&q[..10]));
    }
}
