//! The general path: every query the hot path does not take, built on `hickory-proto`.
//!
//! It parses the whole message with hickory (so malformed input is caught by a second,
//! independent parser), decides FORMERR / NOTIMP / BADVERS / REFUSED, answers CHAOS
//! `id.server` / `version.bind` and ANY (RFC 8482), and for ordinary questions builds the
//! reply as a hickory `Message` from the same compiled data the hot path copies. Because it
//! shares no encoding code with the hot path, it doubles as the oracle of the differential
//! tests (`Engine::handle_query_general`).
//!
//! It allocates; it is not meant to be fast.

use alloc::string::String;
use alloc::vec::Vec;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query as HQuery, ResponseCode};
use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use hickory_proto::serialize::binary::BinEncodable;

use crate::acl::AclAction;
use crate::exchange::{DropReason, Found, Outcome, ReplyInfo, Request, Tables, Transport};
use crate::rr::rtype;
use crate::rrl::AnswerRrl;
use crate::wire::{self, HEADER_LEN, Query, flags, rcode};

/// What the general path learnt that the rate limiter needs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Meta {
    /// The class and account name of the compiled answer used, if any (otherwise the
    /// engine classifies the reply by its header, keyed by the query name).
    pub rrl: Option<AnswerRrl>,
    /// The query's EDNS DO bit, when it had an OPT record.
    pub edns_do: Option<bool>,
    /// The question is not local data (the REFUSED written is what the engine sends when
    /// it does not resolve).
    pub not_local: bool,
}

fn drop_malformed() -> Outcome {
    Outcome::Drop {
        reason: DropReason::Malformed,
        inform: false,
    }
}

/// `access-control: refuse`: a bare 12-byte REFUSED header (no question, no OPT), as
/// Unbound sends: a refused client learns nothing, and the reply is never larger than the
/// query (no amplification).
pub(crate) fn refuse(_e: &dyn Tables, query: &[u8], out: &mut [u8]) -> Outcome {
    if query.len() < HEADER_LEN || query[2] & 0x80 != 0 {
        return drop_malformed();
    }
    header_only(false, query, rcode::REFUSED, out)
}

/// A bare header answer (no question): for input too broken to echo anything else.
fn header_only(ra: bool, query: &[u8], rc: u8, out: &mut [u8]) -> Outcome {
    if out.len() < HEADER_LEN {
        return Outcome::Drop {
            reason: DropReason::Buffer,
            inform: false,
        };
    }
    let qf = wire::be16(query, 2);
    let mut f = flags::QR | (qf & (flags::OPCODE_MASK | flags::RD)) | u16::from(rc);
    if ra {
        f |= flags::RA;
    }
    out[..2].copy_from_slice(&query[..2]);
    wire::put16(out, 2, f);
    out[4..HEADER_LEN].fill(0);
    Outcome::Reply {
        len: HEADER_LEN,
        info: ReplyInfo {
            rcode: u16::from(rc),
            hot: false,
            truncated: false,
            inform: false,
            ..ReplyInfo::default()
        },
    }
}

/// The general path. Fills `meta` for the rate limiter.
pub(crate) fn handle(
    e: &dyn Tables,
    req: &Request,
    acl: AclAction,
    query: &[u8],
    out: &mut [u8],
    meta: &mut Meta,
) -> Outcome {
    if query.len() < HEADER_LEN || query[2] & 0x80 != 0 {
        return drop_malformed();
    }
    let msg = match Message::from_vec(query) {
        Ok(m) => m,
        // Unbound's FORMERR carries QR and RD only.
        Err(_) => return header_only(false, query, rcode::FORMERR, out),
    };
    let mut resp = Message::new(msg.metadata.id, MessageType::Response, msg.metadata.op_code);
    resp.metadata.recursion_desired =
        msg.metadata.recursion_desired || acl == AclAction::AllowSetRd;
    resp.metadata.checking_disabled = msg.metadata.checking_disabled;
    resp.metadata.recursion_available = e.config().recursion_available;
    resp.queries = msg.queries.clone();
    let edns = msg.edns.as_ref();
    meta.edns_do = edns.map(|ed| ed.flags().dnssec_ok);
    if let Some(q_edns) = edns {
        let mut r_edns = Edns::new();
        r_edns.set_max_payload(e.config().edns_buffer_size);
        r_edns.set_dnssec_ok(q_edns.flags().dnssec_ok);
        resp.edns = Some(r_edns);
    }
    let limit = match (req.transport, edns) {
        (Transport::Tcp, _) => wire::MAX_MESSAGE_LEN,
        (Transport::Udp, None) => 512,
        (Transport::Udp, Some(ed)) => usize::from(
            ed.max_payload()
                .max(512)
                .min(e.config().max_udp_size.max(512)),
        ),
    }
    .min(out.len());

    let ra = e.config().recursion_available;
    match msg.metadata.op_code {
        OpCode::Query => {}
        // NOTIFY for a zone this server is secondary for is skua-xfr's, which the daemon
        // calls before the engine; one that comes here is REFUSED, as by Unbound.
        OpCode::Notify if msg.queries.len() == 1 => {
            return finish(resp, ResponseCode::Refused, ra, limit, out);
        }
        OpCode::Notify => return finish(resp, ResponseCode::FormErr, false, limit, out),
        _ => return finish(resp, ResponseCode::NotImp, false, limit, out),
    }
    // RFC 1035 §4.1.2: one question; a query carries no answer or authority records and
    // is not truncated.
    if msg.queries.len() != 1
        || !msg.answers.is_empty()
        || !msg.authorities.is_empty()
        || msg.metadata.truncation
    {
        return finish(resp, ResponseCode::FormErr, false, limit, out);
    }
    if edns.is_some_and(|ed| ed.version() > 0) {
        // RFC 6891 §6.1.3: we speak version 0 only.
        return finish(resp, ResponseCode::BADVERS, ra, limit, out);
    }
    let q = &msg.queries[0];
    let qtype = u16::from(q.query_type());
    if q.query_class() == DNSClass::CH {
        return chaos(e, resp, q, limit, out);
    }
    if q.query_class() != DNSClass::IN {
        return finish(resp, ResponseCode::Refused, ra, limit, out);
    }
    match qtype {
        // Zone transfers are skua-xfr's: the daemon's TCP path takes them before the
        // engine; one that comes here (over UDP, say) is REFUSED.
        rtype::AXFR | rtype::IXFR => return finish(resp, ResponseCode::Refused, false, limit, out),
        // Meta-types that cannot be asked for (RFC 6895 §3.1; Unbound's list).
        rtype::OPT | 249 | 250 | rtype::MAILB | rtype::MAILA => {
            return finish(resp, ResponseCode::FormErr, false, limit, out);
        }
        _ => {}
    }
    let lower = match BinEncodable::to_bytes(&q.name().to_lowercase()) {
        Ok(b) => b,
        Err(_) => return finish(resp, ResponseCode::FormErr, false, limit, out),
    };
    // RFC 8482 §4.1: answer ANY with one RRset of our choosing (falling back to what the
    // name would answer for a type it does not have).
    let lookup_type = if qtype == rtype::ANY {
        e.first_positive_type(&lower).unwrap_or(qtype)
    } else {
        qtype
    };
    match e.find(&lower, lookup_type) {
        Found::Drop { inform } => Outcome::Drop {
            reason: DropReason::Zone,
            inform,
        },
        Found::NotLocal => {
            if acl == AclAction::DenyNonLocal {
                return Outcome::Drop {
                    reason: DropReason::NonLocal,
                    inform: false,
                };
            }
            meta.not_local = true;
            finish(resp, ResponseCode::Refused, ra, limit, out)
        }
        Found::Answer(a) => {
            meta.rrl = Some(a.rrl());
            // Decode the compiled answer as written for a canonical question, with hickory.
            let mut canon = Vec::with_capacity(HEADER_LEN + lower.len() + 4);
            canon.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
            canon.extend_from_slice(&lower);
            canon.extend_from_slice(&lookup_type.to_be_bytes());
            canon.extend_from_slice(&[0, 1]);
            let Ok(cq) = Query::parse(&canon) else {
                return finish(resp, ResponseCode::FormErr, false, limit, out);
            };
            let mut scratch = alloc::vec![0u8; wire::MAX_MESSAGE_LEN];
            let Outcome::Reply { len, .. } =
                e.emit(&cq, acl, &a, Transport::Tcp, &mut scratch, false)
            else {
                return finish(resp, ResponseCode::ServFail, ra, limit, out);
            };
            let Ok(compiled) = Message::from_vec(&scratch[..len]) else {
                return finish(resp, ResponseCode::ServFail, ra, limit, out);
            };
            resp.metadata.authoritative = compiled.metadata.authoritative;
            resp.answers = compiled.answers;
            resp.authorities = compiled.authorities;
            resp.additionals = compiled.additionals;
            let rc = compiled.metadata.response_code;
            let out = finish(resp, rc, compiled.metadata.recursion_available, limit, out);
            match out {
                Outcome::Reply { len, mut info } => {
                    info.inform = a.inform;
                    Outcome::Reply { len, info }
                }
                d => d,
            }
        }
    }
}

/// CHAOS-class server identification (the `id.server` / `version.bind` convention,
/// RFC 4892 §2), honouring `hide-identity` / `hide-version`.
fn chaos(e: &dyn Tables, resp: Message, q: &HQuery, limit: usize, out: &mut [u8]) -> Outcome {
    let qt = q.query_type();
    let name = q.name().to_lowercase().to_ascii();
    let text = match name.as_str() {
        "id.server." | "hostname.bind." => e.config().identity.as_deref(),
        "version.server." | "version.bind." => e.config().version.as_deref(),
        _ => None,
    };
    let (Some(text), true) = (text, qt == RecordType::TXT || qt == RecordType::ANY) else {
        return finish(
            resp,
            ResponseCode::Refused,
            e.config().recursion_available,
            limit,
            out,
        );
    };
    let mut resp = resp;
    let chunks: Vec<String> = text
        .as_bytes()
        .chunks(255)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let mut rec = Record::from_rdata(q.name().clone(), 0, RData::TXT(TXT::new(chunks)));
    rec.dns_class = DNSClass::CH;
    // Not AA: these are not zone data (Unbound answers the same way).
    resp.answers.push(rec);
    finish(
        resp,
        ResponseCode::NoError,
        e.config().recursion_available,
        limit,
        out,
    )
}

/// Encodes `resp` within `limit`: drops whole RRsets from the end — additional records
/// silently, authority or answer records with TC=1 (RFC 2181 §9, RFC 6891 §7).
fn finish(mut resp: Message, rc: ResponseCode, ra: bool, limit: usize, out: &mut [u8]) -> Outcome {
    resp.metadata.response_code = rc;
    resp.metadata.recursion_available = ra;
    let mut truncated = false;
    loop {
        let bytes = match resp.to_vec() {
            Ok(b) => b,
            Err(_) => {
                return Outcome::Drop {
                    reason: DropReason::Buffer,
                    inform: false,
                };
            }
        };
        if bytes.len() <= limit {
            out[..bytes.len()].copy_from_slice(&bytes);
            return Outcome::Reply {
                len: bytes.len(),
                info: ReplyInfo {
                    rcode: u16::from(rc),
                    hot: false,
                    truncated,
                    inform: false,
                    ..ReplyInfo::default()
                },
            };
        }
        if !pop_rrset(&mut resp.additionals) {
            truncated = true;
            resp.metadata.truncation = true;
            if !pop_rrset(&mut resp.authorities) && !pop_rrset(&mut resp.answers) {
                // Nothing left to drop and still too big (e.g. a buffer under 12 bytes).
                return Outcome::Drop {
                    reason: DropReason::Buffer,
                    inform: false,
                };
            }
        }
    }
}

/// Removes the last RRset (consecutive records of one owner and type) of a section.
fn pop_rrset(section: &mut Vec<Record>) -> bool {
    let Some(last) = section.pop() else {
        return false;
    };
    while section
        .last()
        .is_some_and(|r| r.record_type() == last.record_type() && r.name == last.name)
    {
        section.pop();
    }
    true
}
