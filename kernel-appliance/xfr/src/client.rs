//! The secondary's side of a transfer: the SOA query and the AXFR/IXFR request, the reading
//! of their answers from untrusted bytes, and the new version built from them.
//!
//! - [`soa_query`] and [`transfer_request`] write the requests (the caller signs them with
//!   [`crate::tsig::sign_request`] and keeps the MAC for the answer's [`StreamVerifier`]).
//! - [`soa_answer`] reads the primary's answer to the SOA query: the SOA, or why not.
//! - [`Incoming`] reads a transfer message by message (RFC 5936 §2.2, RFC 1995 §4), checks
//!   each message's TSIG in order (RFC 8945 §5.3.1: unsigned runs allowed, the last message
//!   signed), bounds the bytes and records it accepts ([`Limits`]), and ends with a
//!   [`Transfer`]: the whole zone, the diffs from the serial held, or "up to date".
//! - [`build`] turns a [`Transfer`] into the new [`Version`]: the whole zone checked as a
//!   zone, or the diffs applied in order to the version held (a record to delete that is
//!   not there is an error, not a guess).
//!
//! Every error is a [`ClientError`]; nothing here panics on what a primary sends.

use alloc::vec::Vec;
use core::fmt;

use skua_engine::name::WireName;
use skua_engine::rr::{Rr, class, rtype};

use crate::tsig::{StreamVerifier, VerifyError};
use crate::wire::{self, MessageWriter, Section, WireError, flags, opcode, rcode};
use crate::zone::{Diff, Version, ZoneError, canonical_cmp, serial_lt, serial_of};

/// Bounds on what one transfer may bring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of messages (framing excluded).
    pub max_bytes: usize,
    /// Records (every SOA copy included).
    pub max_records: usize,
}

impl Default for Limits {
    /// 100 MiB and one million records: far above a large zone's transfer, far below what
    /// would exhaust the appliance's memory.
    fn default() -> Self {
        Limits {
            max_bytes: 100 << 20,
            max_records: 1_000_000,
        }
    }
}

/// Why an answer or a transfer is not usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// Malformed bytes.
    Wire(WireError),
    /// The TSIG of a message did not verify, or the primary answered with a TSIG error.
    Tsig(VerifyError),
    /// The primary answered with this RCODE.
    Rcode(u8),
    /// Not the answer to our request (ID, QR, opcode or question differ), or truncated.
    Mismatch(&'static str),
    /// The records are not laid out as RFC 5936 or RFC 1995 say.
    Form(&'static str),
    /// A record outside the zone.
    OutOfZone(WireName),
    /// Over a bound of [`Limits`]: `bytes` or `records`, and the bound.
    TooLarge(&'static str, usize),
    /// An IXFR diff does not apply to the version held: it starts at another serial, or a
    /// record it deletes is not there.
    DoesNotApply(u32),
    /// The records are not a zone (SOA).
    Zone(ZoneError),
}

impl ClientError {
    /// A stable short name for logs and the audit log.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientError::Wire(_) | ClientError::Tsig(VerifyError::Wire(_)) => "malformed",
            ClientError::Tsig(VerifyError::Error(_)) => "tsig-error",
            ClientError::Tsig(_) => "tsig",
            ClientError::Rcode(rcode::REFUSED) => "refused",
            ClientError::Rcode(rcode::NOTAUTH) => "notauth",
            ClientError::Rcode(_) => "rcode",
            ClientError::Mismatch(_) => "mismatch",
            ClientError::Form(_) => "malformed",
            ClientError::OutOfZone(_) => "out-of-zone",
            ClientError::TooLarge(..) => "too-large",
            ClientError::DoesNotApply(_) => "ixfr-does-not-apply",
            ClientError::Zone(_) => "not-a-zone",
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Wire(e) => write!(f, "malformed message: {e}"),
            ClientError::Tsig(e) => write!(f, "TSIG: {e}"),
            ClientError::Rcode(c) => write!(f, "answered {}", rcode_name(*c)),
            ClientError::Mismatch(m) => write!(f, "not the answer to the request: {m}"),
            ClientError::Form(m) => write!(f, "malformed transfer: {m}"),
            ClientError::OutOfZone(n) => write!(f, "record {n} outside the zone"),
            ClientError::TooLarge(what, n) => write!(f, "transfer over the limit of {n} {what}"),
            ClientError::DoesNotApply(s) => {
                write!(
                    f,
                    "the IXFR diff from serial {s} does not apply to the zone held"
                )
            }
            ClientError::Zone(e) => write!(f, "not a zone: {e}"),
        }
    }
}

impl core::error::Error for ClientError {}

impl From<WireError> for ClientError {
    fn from(e: WireError) -> Self {
        ClientError::Wire(e)
    }
}

/// The mnemonic of an RCODE.
pub fn rcode_name(c: u8) -> &'static str {
    match c {
        rcode::NOERROR => "NOERROR",
        rcode::FORMERR => "FORMERR",
        rcode::SERVFAIL => "SERVFAIL",
        rcode::NXDOMAIN => "NXDOMAIN",
        rcode::NOTIMP => "NOTIMP",
        rcode::REFUSED => "REFUSED",
        rcode::NOTAUTH => "NOTAUTH",
        _ => "another RCODE",
    }
}

/// The SOA query a secondary sends to learn the primary's serial (RFC 1035 §4.3.5): `apex
/// IN SOA`, RD clear.
pub fn soa_query(id: u16, apex: &WireName) -> Vec<u8> {
    let mut w = MessageWriter::new(id, 0);
    w.question(apex, rtype::SOA, class::IN);
    w.finish()
}

/// An AXFR request (RFC 5936 §2.1), or an IXFR request from the version whose SOA is
/// `held` (RFC 1995 §3: that SOA in the authority section).
pub fn transfer_request(id: u16, apex: &WireName, held: Option<&Rr>) -> Vec<u8> {
    let mut w = MessageWriter::new(id, 0);
    match held {
        Some(soa) => {
            w.question(apex, rtype::IXFR, class::IN);
            // A SOA always fits a 64 KiB message.
            let _ = w.try_rr(Section::Authority, soa, wire::MAX_MESSAGE_LEN);
        }
        None => w.question(apex, rtype::AXFR, class::IN),
    }
    w.finish()
}

/// Checks that `msg` answers the request `id` for (`apex`, `qtype`) and verifies its TSIG
/// with `verifier` (when the request was signed). Returns the RCODE and whether the
/// message carried a question. A TSIG error (BADSIG, BADKEY...) or a bad MAC comes before
/// the RCODE: an unsigned REFUSED is reported as REFUSED, though.
fn check_header(
    msg: &[u8],
    id: u16,
    apex: &WireName,
    qtype: u16,
    first: bool,
    verifier: Option<&mut StreamVerifier<'_>>,
    now: u64,
) -> Result<(u8, bool), ClientError> {
    let fl = wire::be16(msg, 2)?;
    if wire::be16(msg, 0)? != id {
        return Err(ClientError::Mismatch("another ID"));
    }
    if fl & flags::QR == 0 || (fl >> 11) & 0xf != u16::from(opcode::QUERY) {
        return Err(ClientError::Mismatch("not a response to a query"));
    }
    let code = (fl & 0xf) as u8;
    let [qd, _, _, _] = wire::counts(msg)?;
    if qd > 1 || (first && qd == 0 && code == rcode::NOERROR) {
        return Err(ClientError::Mismatch("question missing or repeated"));
    }
    if qd == 1 {
        let (name, qt, qc, _) = wire::read_question(msg, wire::HEADER_LEN)?;
        if name.to_lowercase() != apex.to_lowercase() || qt != qtype || qc != class::IN {
            return Err(ClientError::Mismatch("another question"));
        }
    }
    if let Some(v) = verifier {
        match v.verify(msg, now) {
            Ok(_) => {}
            Err(VerifyError::Unsigned) if code != rcode::NOERROR => {
                return Err(ClientError::Rcode(code));
            }
            Err(VerifyError::Wire(e)) => return Err(ClientError::Wire(e)),
            Err(e) => return Err(ClientError::Tsig(e)),
        }
    }
    if code != rcode::NOERROR {
        return Err(ClientError::Rcode(code));
    }
    if fl & flags::TC != 0 {
        return Err(ClientError::Mismatch("truncated (TC)"));
    }
    Ok((code, qd == 1))
}

/// Reads the answer to [`soa_query`] `id` for `apex`: the zone's SOA (RFC 1035 §4.3.5: the
/// answer section holds it). `verifier` verifies its TSIG when the query was signed; a
/// truncated answer (TC) is [`ClientError::Mismatch`] (the caller asks again over TCP).
pub fn soa_answer(
    msg: &[u8],
    id: u16,
    apex: &WireName,
    verifier: Option<&mut StreamVerifier<'_>>,
    now: u64,
) -> Result<Rr, ClientError> {
    check_header(msg, id, apex, rtype::SOA, true, verifier, now)?;
    let [qd, an, _, _] = wire::counts(msg)?;
    let mut off = wire::HEADER_LEN;
    for _ in 0..qd {
        off = wire::read_question(msg, off)?.3;
    }
    for _ in 0..an {
        let (r, next) = wire::read_owned_rr(msg, off)?;
        if r.rtype == rtype::SOA
            && r.class == class::IN
            && r.owner.to_lowercase() == apex.to_lowercase()
        {
            return Ok(r);
        }
        off = next;
    }
    Err(ClientError::Form("no SOA in the answer"))
}

/// What a transfer brought.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// The secondary is up to date (RFC 1995 §2: the primary's SOA alone), or ahead.
    UpToDate(Rr),
    /// The whole zone (AXFR, or an IXFR answered in the AXFR form): the SOA and every other
    /// record, in the order received.
    Full {
        /// The zone's SOA.
        soa: Rr,
        /// Every other record.
        records: Vec<Rr>,
    },
    /// The differences (RFC 1995 §4) from the serial held to `current`.
    Incremental {
        /// The new SOA.
        current: Rr,
        /// The diffs, oldest first, each one's records in canonical order.
        diffs: Vec<Diff>,
    },
}

impl Transfer {
    /// The serial it brings the zone to.
    pub fn serial(&self) -> u32 {
        match self {
            Transfer::UpToDate(s) | Transfer::Full { soa: s, .. } => serial_of(s),
            Transfer::Incremental { current, .. } => serial_of(current),
        }
    }
}

/// Where a transfer's reading is.
#[derive(Debug)]
enum State {
    /// Before the first record.
    Start,
    /// After the first SOA, before the second record (which says AXFR or IXFR form).
    First(Rr),
    /// The AXFR form: records until the SOA comes back.
    Full { soa: Rr, records: Vec<Rr> },
    /// The IXFR form, in a diff's deletions.
    Removing {
        current: Rr,
        diffs: Vec<Diff>,
        from: Rr,
        removed: Vec<Rr>,
    },
    /// The IXFR form, in a diff's additions.
    Adding {
        current: Rr,
        diffs: Vec<Diff>,
        from: Rr,
        removed: Vec<Rr>,
        to: Rr,
        added: Vec<Rr>,
    },
    /// Complete.
    Done(Transfer),
    /// Failed, or its result taken.
    Over,
}

/// Reads one transfer, message by message.
#[derive(Debug)]
pub struct Incoming<'k> {
    apex: WireName,
    id: u16,
    qtype: u16,
    held: Option<u32>,
    limits: Limits,
    verifier: Option<StreamVerifier<'k>>,
    state: State,
    bytes: usize,
    records: usize,
    messages: usize,
    last_signed: bool,
}

fn is_apex_soa(r: &Rr, apex: &WireName) -> bool {
    r.rtype == rtype::SOA && r.owner.to_lowercase() == apex.to_lowercase()
}

fn sorted(mut v: Vec<Rr>) -> Vec<Rr> {
    v.sort_by(canonical_cmp);
    v
}

impl<'k> Incoming<'k> {
    /// The reader of the answer to [`transfer_request`] `id` for `apex`: `held` is the
    /// serial of the version held (`None` for an AXFR), `verifier` checks the messages'
    /// TSIG when the request was signed.
    pub fn new(
        apex: &WireName,
        id: u16,
        held: Option<u32>,
        limits: Limits,
        verifier: Option<StreamVerifier<'k>>,
    ) -> Self {
        Incoming {
            apex: apex.clone(),
            id,
            qtype: if held.is_some() {
                rtype::IXFR
            } else {
                rtype::AXFR
            },
            held,
            limits,
            verifier,
            state: State::Start,
            bytes: 0,
            records: 0,
            messages: 0,
            last_signed: false,
        }
    }

    /// Bytes, records and messages read so far.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.bytes, self.records, self.messages)
    }

    /// Reads the next message at time `now` (seconds since the epoch): `Ok(Some(..))` when
    /// the transfer is complete (nothing may follow), `Ok(None)` when more messages are to
    /// come. After an error the transfer is over: every later call fails.
    pub fn feed(&mut self, msg: &[u8], now: u64) -> Result<Option<Transfer>, ClientError> {
        let r = self.feed_inner(msg, now);
        if r.is_err() {
            self.state = State::Over;
        }
        r
    }

    fn feed_inner(&mut self, msg: &[u8], now: u64) -> Result<Option<Transfer>, ClientError> {
        if matches!(self.state, State::Done(_) | State::Over) {
            return Err(ClientError::Form("a message after the end of the transfer"));
        }
        self.bytes = self.bytes.saturating_add(msg.len());
        if self.bytes > self.limits.max_bytes {
            return Err(ClientError::TooLarge("bytes", self.limits.max_bytes));
        }
        let first = self.messages == 0;
        self.messages += 1;
        let (_, has_q) = check_header(
            msg,
            self.id,
            &self.apex,
            self.qtype,
            first,
            self.verifier.as_mut(),
            now,
        )?;
        self.last_signed = match &self.verifier {
            // `check_header` verified it: signed unless inside an unsigned run.
            Some(_) => crate::tsig::find(msg).ok().flatten().is_some(),
            None => false,
        };
        let [_, an, _, _] = wire::counts(msg)?;
        let mut off = wire::HEADER_LEN;
        if has_q {
            off = wire::read_question(msg, off)?.3;
        }
        for _ in 0..an {
            if matches!(self.state, State::Done(_)) {
                return Err(ClientError::Form("records after the closing SOA"));
            }
            self.records += 1;
            if self.records > self.limits.max_records {
                return Err(ClientError::TooLarge("records", self.limits.max_records));
            }
            let (r, next) = wire::read_owned_rr(msg, off)?;
            off = next;
            if r.class != class::IN {
                return Err(ClientError::Form("a record of a class other than IN"));
            }
            if !r.owner.is_subdomain_of(&self.apex) {
                return Err(ClientError::OutOfZone(r.owner));
            }
            self.record(r)?;
        }
        // One message holding the SOA alone, to an IXFR from a serial at least as new:
        // up to date (RFC 1995 §2).
        if let (State::First(soa), Some(held)) = (&self.state, self.held)
            && self.records == 1
            && !serial_lt(held, serial_of(soa))
        {
            self.state = State::Done(Transfer::UpToDate(soa.clone()));
        }
        if matches!(self.state, State::Done(_)) {
            if self.verifier.is_some() && !self.last_signed {
                // §5.3.1: the last message must be signed (the unsigned ones are covered
                // by a later MAC, and there is none).
                return Err(ClientError::Tsig(VerifyError::Unsigned));
            }
            return match core::mem::replace(&mut self.state, State::Over) {
                State::Done(t) => Ok(Some(t)),
                _ => Ok(None),
            };
        }
        Ok(None)
    }

    /// One record of the answer section, in order.
    fn record(&mut self, r: Rr) -> Result<(), ClientError> {
        let soa = is_apex_soa(&r, &self.apex);
        if r.rtype == rtype::SOA && !soa {
            return Err(ClientError::Form("a SOA record below the apex"));
        }
        self.state = match core::mem::replace(&mut self.state, State::Over) {
            State::Start if soa => State::First(r),
            State::Start => {
                return Err(ClientError::Form("the first record is not the zone's SOA"));
            }
            State::First(first) => {
                if !soa {
                    State::Full {
                        soa: first,
                        records: alloc::vec![r],
                    }
                } else if serial_of(&r) == serial_of(&first) {
                    // The SOA twice: a zone of its SOA alone (RFC 5936 §2.2).
                    State::Done(Transfer::Full {
                        soa: first,
                        records: Vec::new(),
                    })
                } else if self.qtype == rtype::IXFR {
                    State::Removing {
                        current: first,
                        diffs: Vec::new(),
                        from: r,
                        removed: Vec::new(),
                    }
                } else {
                    return Err(ClientError::Form("an AXFR whose SOA changes"));
                }
            }
            State::Full {
                soa: first,
                mut records,
            } => {
                if soa {
                    if r != first && serial_of(&r) != serial_of(&first) {
                        return Err(ClientError::Form("the closing SOA differs from the first"));
                    }
                    State::Done(Transfer::Full {
                        soa: first,
                        records,
                    })
                } else {
                    records.push(r);
                    State::Full {
                        soa: first,
                        records,
                    }
                }
            }
            State::Removing {
                current,
                diffs,
                from,
                mut removed,
            } => {
                if soa {
                    State::Adding {
                        current,
                        diffs,
                        from,
                        removed,
                        to: r,
                        added: Vec::new(),
                    }
                } else {
                    removed.push(r);
                    State::Removing {
                        current,
                        diffs,
                        from,
                        removed,
                    }
                }
            }
            State::Adding {
                current,
                mut diffs,
                from,
                removed,
                to,
                mut added,
            } => {
                if !soa {
                    added.push(r);
                    State::Adding {
                        current,
                        diffs,
                        from,
                        removed,
                        to,
                        added,
                    }
                } else {
                    let to_serial = serial_of(&to);
                    diffs.push(Diff {
                        from,
                        removed: sorted(removed),
                        to,
                        added: sorted(added),
                    });
                    if serial_of(&r) == serial_of(&current) {
                        if to_serial != serial_of(&current) {
                            return Err(ClientError::Form(
                                "an IXFR that ends before the current serial",
                            ));
                        }
                        State::Done(Transfer::Incremental { current, diffs })
                    } else if serial_of(&r) != to_serial {
                        return Err(ClientError::Form(
                            "IXFR diffs that do not follow each other",
                        ));
                    } else {
                        State::Removing {
                            current,
                            diffs,
                            from: r,
                            removed: Vec::new(),
                        }
                    }
                }
            }
            State::Done(_) | State::Over => {
                return Err(ClientError::Form("records after the closing SOA"));
            }
        };
        Ok(())
    }
}

/// The version a transfer makes: the whole zone checked as a zone, or the diffs applied in
/// order to `held` (which must be at the first diff's serial). `UpToDate` makes none.
/// Returns the version and the diffs that lead to it from `held` (the IXFR's diffs; for
/// a whole zone, the one difference from `held`, none without it).
pub fn build(
    apex: &WireName,
    held: Option<&Version>,
    t: Transfer,
) -> Result<Option<(Version, Vec<Diff>)>, ClientError> {
    match t {
        Transfer::UpToDate(_) => Ok(None),
        Transfer::Full { soa, mut records } => {
            records.push(soa);
            let v = Version::new(apex, records).map_err(ClientError::Zone)?;
            let diffs = held
                .filter(|h| serial_lt(h.serial(), v.serial()))
                .map(|h| alloc::vec![Diff::between(h, &v)])
                .unwrap_or_default();
            Ok(Some((v, diffs)))
        }
        Transfer::Incremental { current, diffs } => {
            let Some(held) = held else {
                return Err(ClientError::Form("an IXFR answer to an AXFR request"));
            };
            let v = crate::zone::apply_chain(held, &diffs).map_err(ClientError::DoesNotApply)?;
            if v.serial() != serial_of(&current) {
                return Err(ClientError::Form(
                    "the diffs do not reach the current serial",
                ));
            }
            Ok(Some((v, diffs)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{Allow, KeyRule, ZoneRef, answer};
    use crate::transfer::MESSAGE_TARGET;
    use crate::tsig::{Algorithm, Key, sign_request};
    use crate::zone::Journal;
    use alloc::format;
    use alloc::vec;
    use skua_engine::text::parse_rr;

    const NOW: u64 = 1_750_000_000;

    fn rr(s: &str) -> Rr {
        parse_rr(s, None, 300).unwrap()
    }

    fn apex() -> WireName {
        WireName::parse("example.", None).unwrap()
    }

    fn key() -> Key {
        Key::new(
            &WireName::parse("k.", None).unwrap(),
            Algorithm::HmacSha256,
            b"0123456789abcdef0123456789abcdef".to_vec(),
        )
    }

    fn version(serial: u32, hosts: core::ops::Range<usize>) -> Version {
        let mut r = vec![
            rr(&format!(
                "example. 3600 IN SOA ns.example. admin.example. {serial} 3600 600 86400 300"
            )),
            rr("example. 3600 IN NS ns.example."),
        ];
        for i in hosts {
            r.push(rr(&format!(
                "h{i}.example. 300 IN TXT \"host {i} with some text to make messages fill\""
            )));
        }
        Version::new(&apex(), r).unwrap()
    }

    /// The messages skua-xfr's own primary sends for `req`.
    fn serve(req: &[u8], v: &Version, j: &Journal, keys: &[Key]) -> Vec<Vec<u8>> {
        let allow = [Allow {
            netblock: "198.18.0.0/15".parse().unwrap(),
            rule: if keys.is_empty() {
                KeyRule::NoKey
            } else {
                KeyRule::Key(0)
            },
        }];
        match answer(req, "198.18.0.2".parse().unwrap(), keys, NOW, |_| {
            Some(ZoneRef {
                version: v,
                journal: j,
                allow: &allow,
            })
        }) {
            crate::server::Answer::Transfer(t) => t.messages.collect(),
            crate::server::Answer::Refused { message, .. } => vec![message],
        }
    }

    fn read_all(
        msgs: &[Vec<u8>],
        held: Option<u32>,
        limits: Limits,
        verifier: Option<StreamVerifier<'_>>,
        id: u16,
    ) -> Result<Option<Transfer>, ClientError> {
        let mut inc = Incoming::new(&apex(), id, held, limits, verifier);
        let mut done = None;
        for m in msgs {
            // A message after the end is an error, reported by `feed`.
            done = inc.feed(m, NOW)?;
        }
        Ok(done)
    }

    #[test]
    fn axfr_signed_round_trip_in_many_messages() {
        let v = version(7, 0..2000);
        let k = key();
        let mut req = transfer_request(0x1111, &apex(), None);
        let mac = sign_request(&mut req, &k, NOW);
        let msgs = serve(
            &req,
            &v,
            &Journal::new(10, 1 << 20),
            core::slice::from_ref(&k),
        );
        assert!(msgs.len() > 3 && msgs.iter().all(|m| m.len() <= MESSAGE_TARGET));
        let t = read_all(
            &msgs,
            None,
            Limits::default(),
            Some(StreamVerifier::new(&k, &mac)),
            0x1111,
        )
        .unwrap()
        .unwrap();
        let (got, diffs) = build(&apex(), None, t).unwrap().unwrap();
        assert_eq!(got, v);
        assert!(diffs.is_empty());
        // Another key's MAC, or no TSIG at all on a signed request: refused.
        let other = Key::new(
            &WireName::parse("k.", None).unwrap(),
            Algorithm::HmacSha256,
            b"another secret, another secret..".to_vec(),
        );
        let e = read_all(
            &msgs,
            None,
            Limits::default(),
            Some(StreamVerifier::new(&other, &mac)),
            0x1111,
        );
        assert_eq!(e, Err(ClientError::Tsig(VerifyError::BadMac)));
        let unsigned = serve(
            &transfer_request(0x1111, &apex(), None),
            &v,
            &Journal::new(1, 1),
            &[],
        );
        let e = read_all(
            &unsigned,
            None,
            Limits::default(),
            Some(StreamVerifier::new(&k, &mac)),
            0x1111,
        );
        assert_eq!(e, Err(ClientError::Tsig(VerifyError::Unsigned)));
    }

    #[test]
    fn ixfr_diffs_apply_and_up_to_date() {
        let v1 = version(1, 0..50);
        let v2 = version(2, 10..60);
        let v3 = version(3, 10..61);
        let mut j = Journal::new(10, 1 << 20);
        j.push(Diff::between(&v1, &v2));
        j.push(Diff::between(&v2, &v3));
        let req = transfer_request(7, &apex(), Some(v1.soa()));
        let msgs = serve(&req, &v3, &j, &[]);
        let t = read_all(&msgs, Some(1), Limits::default(), None, 7)
            .unwrap()
            .unwrap();
        let Transfer::Incremental { ref diffs, .. } = t else {
            panic!("not incremental: {t:?}")
        };
        assert_eq!(diffs.len(), 2);
        assert_eq!(t.serial(), 3);
        let (got, diffs) = build(&apex(), Some(&v1), t).unwrap().unwrap();
        assert_eq!(got, v3);
        assert_eq!(
            diffs.iter().map(Diff::to_serial).collect::<Vec<_>>(),
            [2, 3]
        );
        // The same diffs do not apply to a version that lacks a record they delete.
        let other1 = version(1, 5..50);
        let t = read_all(&msgs, Some(1), Limits::default(), None, 7)
            .unwrap()
            .unwrap();
        assert_eq!(
            build(&apex(), Some(&other1), t),
            Err(ClientError::DoesNotApply(1))
        );
        // Up to date: the SOA alone; also when the primary is behind.
        for held in [3, 4] {
            let req = transfer_request(8, &apex(), Some(v3.with_serial(held).soa()));
            let msgs = serve(&req, &v3, &j, &[]);
            assert_eq!(msgs.len(), 1);
            let t = read_all(&msgs, Some(held), Limits::default(), None, 8)
                .unwrap()
                .unwrap();
            assert_eq!(t, Transfer::UpToDate(v3.soa().clone()));
            assert_eq!(build(&apex(), Some(&v3), t), Ok(None));
        }
        // A serial the journal lacks: the whole zone in the AXFR form, one diff from held.
        let v0 = version(0, 0..3);
        let req = transfer_request(9, &apex(), Some(v0.soa()));
        let msgs = serve(&req, &v3, &j, &[]);
        let t = read_all(&msgs, Some(0), Limits::default(), None, 9)
            .unwrap()
            .unwrap();
        assert!(matches!(t, Transfer::Full { .. }));
        let (got, diffs) = build(&apex(), Some(&v0), t).unwrap().unwrap();
        assert_eq!(got, v3);
        assert_eq!(diffs, vec![Diff::between(&v0, &v3)]);
    }

    #[test]
    fn serials_compare_in_rfc_1982_arithmetic() {
        // Held 0xffff_fff0, the primary wrapped to 5: newer, the diffs apply.
        let v1 = version(0xffff_fff0, 0..5);
        let v2 = version(5, 1..6);
        let mut j = Journal::new(10, 1 << 20);
        j.push(Diff::between(&v1, &v2));
        let req = transfer_request(3, &apex(), Some(v1.soa()));
        let msgs = serve(&req, &v2, &j, &[]);
        let t = read_all(&msgs, Some(0xffff_fff0), Limits::default(), None, 3)
            .unwrap()
            .unwrap();
        assert!(matches!(t, Transfer::Incremental { .. }));
        assert_eq!(build(&apex(), Some(&v1), t).unwrap().unwrap().0, v2);
        // Held 5, the primary says 0xffff_fff0: older, so up to date (nothing taken).
        let req = transfer_request(4, &apex(), Some(v2.soa()));
        let msgs = serve(&req, &v1, &Journal::new(1, 1), &[]);
        let t = read_all(&msgs, Some(5), Limits::default(), None, 4).unwrap();
        assert!(matches!(t, Some(Transfer::UpToDate(_))), "{t:?}");
    }

    #[test]
    fn limits_hold() {
        let v = version(7, 0..2000);
        let req = transfer_request(1, &apex(), None);
        let msgs = serve(&req, &v, &Journal::new(1, 1), &[]);
        let small = Limits {
            max_bytes: 20_000,
            max_records: 1_000_000,
        };
        assert_eq!(
            read_all(&msgs, None, small, None, 1),
            Err(ClientError::TooLarge("bytes", 20_000))
        );
        let few = Limits {
            max_bytes: usize::MAX,
            max_records: 100,
        };
        assert_eq!(
            read_all(&msgs, None, few, None, 1),
            Err(ClientError::TooLarge("records", 100))
        );
    }

    /// A message of the answer to request `id` holding `recs`, with the question when
    /// `q` is set.
    fn msg(id: u16, q: bool, recs: &[&str]) -> Vec<u8> {
        let mut w = MessageWriter::new(id, flags::QR | flags::AA);
        if q {
            w.question(&apex(), rtype::AXFR, class::IN);
        }
        for r in recs {
            assert!(w.try_rr(Section::Answer, &rr(r), 65535));
        }
        w.finish()
    }

    #[test]
    fn hostile_streams_are_errors() {
        let soa = "example. 300 IN SOA ns.example. a.example. 5 1 1 1 1";
        let soa6 = "example. 300 IN SOA ns.example. a.example. 6 1 1 1 1";
        let a = "a.example. 300 IN A 198.18.0.1";
        let cases: Vec<(Vec<Vec<u8>>, ClientError)> = vec![
            (
                vec![msg(2, true, &[soa, a, soa])],
                ClientError::Mismatch("another ID"),
            ),
            (
                vec![msg(1, true, &[a, soa])],
                ClientError::Form("the first record is not the zone's SOA"),
            ),
            (
                vec![msg(1, true, &[soa, "b.other. 300 IN A 198.18.0.1", soa])],
                ClientError::OutOfZone(WireName::parse("b.other.", None).unwrap()),
            ),
            (
                vec![msg(1, true, &[soa, a, soa6])],
                ClientError::Form("the closing SOA differs from the first"),
            ),
            (
                vec![msg(1, true, &[soa, a, soa, a])],
                ClientError::Form("records after the closing SOA"),
            ),
            (
                vec![msg(1, true, &[soa, a, soa]), msg(1, false, &[a])],
                ClientError::Form("a message after the end of the transfer"),
            ),
            (
                vec![msg(1, true, &[soa, soa6])],
                ClientError::Form("an AXFR whose SOA changes"),
            ),
            (
                vec![msg(
                    1,
                    true,
                    &[soa, "x.example. 300 IN SOA a. b. 1 1 1 1 1"],
                )],
                ClientError::Form("a SOA record below the apex"),
            ),
            (
                vec![msg(1, false, &[soa, a, soa])],
                ClientError::Mismatch("question missing or repeated"),
            ),
        ];
        for (msgs, want) in cases {
            assert_eq!(read_all(&msgs, None, Limits::default(), None, 1), Err(want));
        }
        // REFUSED, NOTIMP: the RCODE.
        let mut m = msg(1, true, &[]);
        m[3] |= rcode::REFUSED;
        assert_eq!(
            read_all(&[m], None, Limits::default(), None, 1),
            Err(ClientError::Rcode(5))
        );
        // Never ends: no result, no panic; more after an error: an error.
        let mut inc = Incoming::new(&apex(), 1, None, Limits::default(), None);
        assert_eq!(inc.feed(&msg(1, true, &[soa, a]), NOW), Ok(None));
        for _ in 0..10 {
            assert_eq!(inc.feed(&msg(1, false, &[a]), NOW), Ok(None));
        }
        assert_eq!(inc.counts().1, 12);
        // Cut anywhere: errors or "more to come", never a panic.
        let full = msg(1, true, &[soa, a, soa]);
        for n in 0..full.len() {
            let mut inc = Incoming::new(&apex(), 1, None, Limits::default(), None);
            let _ = inc.feed(&full[..n], NOW);
        }
        // IXFR whose diffs skip a serial.
        let ixfr = |recs: &[&str]| {
            let mut w = MessageWriter::new(1, flags::QR | flags::AA);
            w.question(&apex(), rtype::IXFR, class::IN);
            for r in recs {
                assert!(w.try_rr(Section::Answer, &rr(r), 65535));
            }
            w.finish()
        };
        let s = |n: u32| format!("example. 300 IN SOA ns.example. a.example. {n} 1 1 1 1");
        let (s3, s4, s5, s9) = (s(3), s(4), s(5), s(9));
        let bad = ixfr(&[&s9, &s3, &s4, a, &s5, &s9]);
        let mut inc = Incoming::new(&apex(), 1, Some(3), Limits::default(), None);
        assert_eq!(
            inc.feed(&bad, NOW),
            Err(ClientError::Form(
                "IXFR diffs that do not follow each other"
            ))
        );
        let short = ixfr(&[&s9, &s3, &s4, a, &s9]);
        let mut inc = Incoming::new(&apex(), 1, Some(3), Limits::default(), None);
        assert_eq!(
            inc.feed(&short, NOW),
            Err(ClientError::Form(
                "an IXFR that ends before the current serial"
            ))
        );
    }

    #[test]
    fn soa_answers() {
        let k = key();
        let mut q = soa_query(77, &apex());
        let mac = sign_request(&mut q, &k, NOW);
        let soa = rr("example. 300 IN SOA ns.example. a.example. 5 1 1 1 1");
        let mut w = MessageWriter::new(77, flags::QR | flags::AA);
        w.question(
            &WireName::parse("EXAMPLE.", None).unwrap(),
            rtype::SOA,
            class::IN,
        );
        assert!(w.try_rr(Section::Answer, &soa, 512));
        let plain = w.finish();
        let mut signed = plain.clone();
        crate::tsig::StreamSigner::new(&k, &mac, NOW).sign(&mut signed);
        let mut v = StreamVerifier::new(&k, &mac);
        assert_eq!(
            soa_answer(&signed, 77, &apex(), Some(&mut v), NOW),
            Ok(soa.clone())
        );
        assert_eq!(soa_answer(&plain, 77, &apex(), None, NOW), Ok(soa));
        let mut v = StreamVerifier::new(&k, &mac);
        assert_eq!(
            soa_answer(&plain, 77, &apex(), Some(&mut v), NOW),
            Err(ClientError::Tsig(VerifyError::Unsigned))
        );
        assert_eq!(
            soa_answer(&plain, 78, &apex(), None, NOW),
            Err(ClientError::Mismatch("another ID"))
        );
        for n in 0..signed.len() {
            let mut v = StreamVerifier::new(&k, &mac);
            let _ = soa_answer(&signed[..n], 77, &apex(), Some(&mut v), NOW);
        }
    }
}
