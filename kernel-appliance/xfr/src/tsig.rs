//! TSIG (RFC 8945): HMAC-SHA256 signatures on requests, responses and multi-message
//! streams.
//!
//! - [`find`] locates and parses the TSIG record of a message (the last record of the
//!   additional section, §5.1).
//! - [`check_request`] is the server's side of §5.2: key, MAC, time, truncation, in that
//!   order, with the error the response must carry.
//! - [`StreamSigner`] signs a response and every message after it (§5.3, §5.3.1: the first
//!   with the request's MAC and the full variables, the next ones with the previous MAC and
//!   the timers only); [`sign_request`] signs a request (NOTIFY).
//! - [`StreamVerifier`] is the client's side: a response, or every message of a transfer,
//!   including runs of unsigned messages between signed ones (§5.3.1 allows up to 99).
//!
//! MACs are compared in constant time (the `hmac` crate's `verify`). Only `hmac-sha256` is
//! implemented (§6: the one every implementation must have); other algorithms are BADKEY,
//! as for an unknown key. A truncated MAC (§5.2.2.1) is never accepted: BADTRUNC.

use alloc::vec::Vec;
use core::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use skua_engine::name::WireName;

use crate::wire::{self, WireError, be16};

/// The TSIG RR type (RFC 8945 §4.2).
pub const TSIG_TYPE: u16 = 250;
/// Class ANY, which a TSIG record carries.
pub const CLASS_ANY: u16 = 255;
/// The fudge skuad signs with and the widest window it accepts: 300 s (RFC 8945 §10
/// recommends it). See [`in_window`].
pub const FUDGE: u16 = 300;
/// Consecutive unsigned messages a stream may carry between signed ones (§5.3.1).
pub const MAX_UNSIGNED_RUN: usize = 99;

/// TSIG error codes (RFC 8945 §3, the extended RCODEs it uses).
#[allow(missing_docs)]
pub mod error {
    pub const NOERROR: u16 = 0;
    pub const BADSIG: u16 = 16;
    pub const BADKEY: u16 = 17;
    pub const BADTIME: u16 = 18;
    pub const BADTRUNC: u16 = 22;

    /// The mnemonic of a TSIG error code, for logs and the audit log.
    pub fn name(code: u16) -> &'static str {
        match code {
            NOERROR => "NOERROR",
            BADSIG => "BADSIG",
            BADKEY => "BADKEY",
            BADTIME => "BADTIME",
            BADTRUNC => "BADTRUNC",
            _ => "other",
        }
    }
}

/// A MAC algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// `hmac-sha256` (RFC 8945 §6, RFC 4635).
    HmacSha256,
}

impl Algorithm {
    /// Its name in presentation form (`hmac-sha256.`).
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::HmacSha256 => "hmac-sha256.",
        }
    }

    /// Its name in wire form.
    pub fn wire_name(self) -> WireName {
        match self {
            Algorithm::HmacSha256 => {
                WireName::from_wire(b"\x0bhmac-sha256\x00").unwrap_or_else(|_| WireName::root())
            }
        }
    }

    /// The algorithm named `name` (wire form, any case), if implemented.
    pub fn from_wire_name(name: &WireName) -> Option<Self> {
        name.to_lowercase()
            .as_bytes()
            .eq(b"\x0bhmac-sha256\x00")
            .then_some(Algorithm::HmacSha256)
    }

    /// The algorithm named `text` in configuration (`hmac-sha256`, trailing dot optional,
    /// any case).
    pub fn parse(text: &str) -> Option<Self> {
        text.trim_end_matches('.')
            .eq_ignore_ascii_case("hmac-sha256")
            .then_some(Algorithm::HmacSha256)
    }

    /// Length of a full MAC.
    pub fn mac_len(self) -> usize {
        match self {
            Algorithm::HmacSha256 => 32,
        }
    }
}

/// A shared key.
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    name: WireName,
    algorithm: Algorithm,
    secret: Vec<u8>,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        f.debug_struct("Key")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl Key {
    /// A key; its name is kept lower-cased (§4.2: names compare case-insensitively and
    /// enter the MAC in canonical form).
    pub fn new(name: &WireName, algorithm: Algorithm, secret: Vec<u8>) -> Self {
        Key {
            name: name.to_lowercase(),
            algorithm,
            secret,
        }
    }

    /// The key's name, lower case.
    pub fn name(&self) -> &WireName {
        &self.name
    }

    /// Its algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length (RFC 2104 §2): this cannot fail.
        match Hmac::<Sha256>::new_from_slice(&self.secret) {
            Ok(m) => m,
            Err(_) => unreachable_hmac(),
        }
    }
}

#[cold]
fn unreachable_hmac() -> Hmac<Sha256> {
    // `new_from_slice` accepts every length for HMAC; an empty key is hashed like any
    // other. Kept as a function so no panic path hides in the hot code.
    Hmac::<Sha256>::new(&Default::default())
}

/// A message's TSIG record, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tsig {
    /// Offset of the record in the message (the signed part ends there).
    pub start: usize,
    /// The key's name, as written.
    pub key_name: WireName,
    /// The algorithm's name, as written.
    pub algorithm: WireName,
    /// Time signed, seconds since the epoch (48 bits).
    pub time_signed: u64,
    /// Fudge, seconds.
    pub fudge: u16,
    /// The MAC.
    pub mac: Vec<u8>,
    /// The ID the message had when signed.
    pub original_id: u16,
    /// TSIG error.
    pub error: u16,
    /// Other data (the server's time in a BADTIME response).
    pub other: Vec<u8>,
}

/// The TSIG record of `msg`, `None` when it has none. It must be the last record of the
/// additional section, once, with class ANY and TTL 0 (RFC 8945 §5.1, §4.2); anything
/// else is an error (the message is FORMERR).
pub fn find(msg: &[u8]) -> Result<Option<Tsig>, WireError> {
    let [qd, an, ns, ar] = wire::counts(msg)?;
    let mut off = wire::HEADER_LEN;
    for _ in 0..qd {
        off = wire::read_question(msg, off)?.3;
    }
    let total = usize::from(an) + usize::from(ns) + usize::from(ar);
    for i in 0..total {
        let v = wire::read_rr(msg, off)?;
        if v.rtype == TSIG_TYPE {
            if i + 1 != total || ar == 0 {
                return Err(WireError::Layout("TSIG is not the last additional record"));
            }
            if v.class != CLASS_ANY || v.ttl != 0 {
                return Err(WireError::Layout(
                    "TSIG with a class other than ANY or a TTL",
                ));
            }
            return parse_rdata(msg, &v).map(Some);
        }
        off = v.end();
    }
    Ok(None)
}

fn parse_rdata(msg: &[u8], v: &wire::RrView) -> Result<Tsig, WireError> {
    let end = v.end();
    let rd = &msg[..end];
    // §4.2: the algorithm name is never compressed; a pointer is refused with the rest.
    let alg_len = msg
        .get(v.rdata..end)
        .and_then(skua_engine::name::wire_name_len)
        .ok_or(WireError::BadName)?;
    let algorithm =
        WireName::from_wire(&msg[v.rdata..v.rdata + alg_len]).map_err(|_| WireError::BadName)?;
    let mut p = v.rdata + alg_len;
    let hi = u64::from(be16(rd, p)?);
    let lo = u64::from(wire::be32(rd, p + 2)?);
    let time_signed = (hi << 32) | lo;
    let fudge = be16(rd, p + 6)?;
    let mac_len = usize::from(be16(rd, p + 8)?);
    p += 10;
    let mac = rd.get(p..p + mac_len).ok_or(WireError::Truncated)?.to_vec();
    p += mac_len;
    let original_id = be16(rd, p)?;
    let error = be16(rd, p + 2)?;
    let other_len = usize::from(be16(rd, p + 4)?);
    p += 6;
    let other = rd
        .get(p..p + other_len)
        .ok_or(WireError::Truncated)?
        .to_vec();
    if p + other_len != end {
        return Err(WireError::Layout(
            "TSIG RDATA length does not match its fields",
        ));
    }
    Ok(Tsig {
        start: v.start,
        key_name: v.owner.clone(),
        algorithm,
        time_signed,
        fudge,
        mac,
        original_id,
        error,
        other,
    })
}

/// What enters the MAC after the message (RFC 8945 §4.3.3).
#[derive(Clone, Copy)]
enum Vars<'a> {
    /// Every TSIG variable.
    Full {
        time: u64,
        fudge: u16,
        error: u16,
        other: &'a [u8],
    },
    /// The timers only (second and later messages of a stream, §5.3.1).
    Timers { time: u64, fudge: u16 },
}

fn time48(time: u64) -> [u8; 6] {
    let b = time.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// Feeds the message as it was signed: the bytes before the TSIG record, with the original
/// ID and ARCOUNT without the TSIG record (§4.3.1).
fn feed_message(m: &mut Hmac<Sha256>, msg: &[u8], original_id: u16, had_tsig: bool) {
    if msg.len() < wire::HEADER_LEN {
        m.update(msg);
        return;
    }
    let mut head = [0u8; wire::HEADER_LEN];
    head.copy_from_slice(&msg[..wire::HEADER_LEN]);
    head[..2].copy_from_slice(&original_id.to_be_bytes());
    if had_tsig {
        let ar = u16::from_be_bytes([head[10], head[11]]).saturating_sub(1);
        head[10..12].copy_from_slice(&ar.to_be_bytes());
    }
    m.update(&head);
    m.update(&msg[wire::HEADER_LEN..]);
}

fn feed_vars(m: &mut Hmac<Sha256>, key: &Key, vars: Vars<'_>) {
    match vars {
        Vars::Full {
            time,
            fudge,
            error,
            other,
        } => {
            m.update(key.name.as_bytes());
            m.update(&CLASS_ANY.to_be_bytes());
            m.update(&0u32.to_be_bytes());
            m.update(key.algorithm.wire_name().as_bytes());
            m.update(&time48(time));
            m.update(&fudge.to_be_bytes());
            m.update(&error.to_be_bytes());
            // Other data is at most a few bytes here (a 48-bit time).
            m.update(&(other.len().min(usize::from(u16::MAX)) as u16).to_be_bytes());
            m.update(other);
        }
        Vars::Timers { time, fudge } => {
            m.update(&time48(time));
            m.update(&fudge.to_be_bytes());
        }
    }
}

fn feed_prior(m: &mut Hmac<Sha256>, prior: Option<&[u8]>) {
    if let Some(p) = prior {
        m.update(&(p.len().min(usize::from(u16::MAX)) as u16).to_be_bytes());
        m.update(p);
    }
}

/// Appends a TSIG record to `msg` (which has none) and counts it in ARCOUNT.
#[allow(clippy::too_many_arguments)] // the record's fields
fn append_record(
    msg: &mut Vec<u8>,
    key_name: &WireName,
    algorithm: &WireName,
    time: u64,
    fudge: u16,
    mac: &[u8],
    original_id: u16,
    error: u16,
    other: &[u8],
) {
    msg.extend_from_slice(key_name.as_bytes());
    msg.extend_from_slice(&TSIG_TYPE.to_be_bytes());
    msg.extend_from_slice(&CLASS_ANY.to_be_bytes());
    msg.extend_from_slice(&0u32.to_be_bytes());
    let rdlen = algorithm.len() + 16 + mac.len() + other.len();
    msg.extend_from_slice(&(rdlen.min(usize::from(u16::MAX)) as u16).to_be_bytes());
    msg.extend_from_slice(algorithm.as_bytes());
    msg.extend_from_slice(&time48(time));
    msg.extend_from_slice(&fudge.to_be_bytes());
    msg.extend_from_slice(&(mac.len() as u16).to_be_bytes());
    msg.extend_from_slice(mac);
    msg.extend_from_slice(&original_id.to_be_bytes());
    msg.extend_from_slice(&error.to_be_bytes());
    msg.extend_from_slice(&(other.len() as u16).to_be_bytes());
    msg.extend_from_slice(other);
    if msg.len() >= wire::HEADER_LEN {
        let ar = u16::from_be_bytes([msg[10], msg[11]]).wrapping_add(1);
        msg[10..12].copy_from_slice(&ar.to_be_bytes());
    }
}

/// Room a TSIG record of `key` takes at most (for message size limits): owner, fixed
/// fields, algorithm name, full MAC and a 6-byte other data.
pub fn record_len(key: &Key) -> usize {
    key.name.len() + 10 + key.algorithm.wire_name().len() + 16 + key.algorithm.mac_len() + 6
}

fn sign_with(msg: &mut Vec<u8>, key: &Key, prior: Option<&[u8]>, vars: Vars<'_>) -> Vec<u8> {
    let id = be16(msg, 0).unwrap_or(0);
    let mut m = key.mac();
    feed_prior(&mut m, prior);
    feed_message(&mut m, msg, id, false);
    feed_vars(&mut m, key, vars);
    let mac = m.finalize().into_bytes().to_vec();
    let (time, fudge, error, other) = match vars {
        Vars::Full {
            time,
            fudge,
            error,
            other,
        } => (time, fudge, error, other),
        Vars::Timers { time, fudge } => (time, fudge, error::NOERROR, &[][..]),
    };
    append_record(
        msg,
        &key.name,
        &key.algorithm.wire_name(),
        time,
        fudge,
        &mac,
        id,
        error,
        other,
    );
    mac
}

/// Whether a message signed at `time_signed` with `fudge` is timely at `now`: within
/// `min(fudge, FUDGE)` seconds either side. RFC 8945 §5.2.3 requires BADTIME outside Time
/// Signed ± the message's own Fudge, and leaves a narrower window to the receiver: the
/// signer's fudge cannot widen ours, so a captured request stays replayable for 300 s at
/// most, not the 18 hours a fudge of 65,535 would allow (BIND and Knot accept whatever
/// fudge the message carries; here the bound docs/zone-transfer.md states holds).
pub fn in_window(now: u64, time_signed: u64, fudge: u16) -> bool {
    now.abs_diff(time_signed) <= u64::from(fudge.min(FUDGE))
}

/// Signs a request (a NOTIFY, a transfer request): returns its MAC, which the response's
/// MAC covers (§5.1).
pub fn sign_request(msg: &mut Vec<u8>, key: &Key, now: u64) -> Vec<u8> {
    sign_with(
        msg,
        key,
        None,
        Vars::Full {
            time: now,
            fudge: FUDGE,
            error: error::NOERROR,
            other: &[],
        },
    )
}

/// A request that carried a TSIG record skuad verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// Index of the key in the slice given to [`check_request`].
    pub key: usize,
    /// The request's MAC (the first response message's MAC covers it).
    pub mac: Vec<u8>,
}

/// A request whose TSIG record failed (RFC 8945 §5.2): the response carries `error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// BADKEY, BADSIG, BADTIME or BADTRUNC.
    pub error: u16,
    /// The key's name, as the request wrote it.
    pub key_name: WireName,
    /// The algorithm's name, as the request wrote it.
    pub algorithm: WireName,
    /// For BADTIME and BADTRUNC (the MAC verified): the key and the request's MAC, to
    /// sign the error response with.
    pub signer: Option<Signed>,
}

/// The result of [`check_request`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// No TSIG record.
    Unsigned,
    /// Signed with one of the keys, verified.
    Signed(Signed),
    /// TSIG present and wrong.
    Rejected(Rejected),
}

/// Checks a request's TSIG against `keys` at time `now` (seconds since the epoch), in the
/// order of RFC 8945 §5.2: the key (§5.2.1, BADKEY), the MAC (§5.2.2, BADSIG), the time
/// (§5.2.3, BADTIME), the MAC's length (§5.2.2.1: shorter than the full MAC is BADTRUNC;
/// shorter than half of it, or 10 bytes, or longer than the full MAC, is FORMERR: `Err`).
pub fn check_request(msg: &[u8], keys: &[Key], now: u64) -> Result<Checked, WireError> {
    let Some(t) = find(msg)? else {
        return Ok(Checked::Unsigned);
    };
    let reject = |error, signer| {
        Ok(Checked::Rejected(Rejected {
            error,
            key_name: t.key_name.clone(),
            algorithm: t.algorithm.clone(),
            signer,
        }))
    };
    let lname = t.key_name.to_lowercase();
    let alg = Algorithm::from_wire_name(&t.algorithm);
    let Some((idx, key)) = keys
        .iter()
        .enumerate()
        .find(|(_, k)| k.name == lname && Some(k.algorithm) == alg)
    else {
        return reject(error::BADKEY, None);
    };
    let full = key.algorithm.mac_len();
    if t.mac.len() > full || t.mac.len() < (full / 2).max(10) {
        return Err(WireError::Layout("TSIG MAC of an impossible length"));
    }
    let mut m = key.mac();
    feed_message(&mut m, &msg[..t.start], t.original_id, true);
    feed_vars(
        &mut m,
        key,
        Vars::Full {
            time: t.time_signed,
            fudge: t.fudge,
            error: t.error,
            other: &t.other,
        },
    );
    if m.verify_truncated_left(&t.mac).is_err() {
        return reject(error::BADSIG, None);
    }
    let signed = Signed {
        key: idx,
        mac: t.mac.clone(),
    };
    if !in_window(now, t.time_signed, t.fudge) {
        return reject(error::BADTIME, Some(signed));
    }
    if t.mac.len() < full {
        return reject(error::BADTRUNC, Some(signed));
    }
    Ok(Checked::Signed(signed))
}

/// Appends the TSIG record of an error response to `msg` (RFC 8945 §5.2): unsigned (an
/// empty MAC) for BADKEY and BADSIG; signed with the request's MAC for BADTIME (with
/// skuad's time in Other Data, §5.2.3) and BADTRUNC.
pub fn append_error(msg: &mut Vec<u8>, r: &Rejected, keys: &[Key], now: u64) {
    match r
        .signer
        .as_ref()
        .and_then(|s| keys.get(s.key).map(|k| (s, k)))
    {
        Some((s, key)) => {
            let other = if r.error == error::BADTIME {
                time48(now).to_vec()
            } else {
                Vec::new()
            };
            sign_with(
                msg,
                key,
                Some(&s.mac),
                Vars::Full {
                    time: now,
                    fudge: FUDGE,
                    error: r.error,
                    other: &other,
                },
            );
        }
        None => {
            let id = be16(msg, 0).unwrap_or(0);
            append_record(
                msg,
                &r.key_name,
                &r.algorithm,
                now,
                FUDGE,
                &[],
                id,
                r.error,
                &[],
            );
        }
    }
}

/// Signs the messages of a response, in order (RFC 8945 §5.3.1): the first with the
/// request's MAC and every variable, each next one with the previous message's MAC and the
/// timers only.
#[derive(Debug)]
pub struct StreamSigner<'k> {
    key: &'k Key,
    prior: Vec<u8>,
    first: bool,
    now: u64,
}

impl<'k> StreamSigner<'k> {
    /// A signer for the response to a request signed with `key` whose MAC was
    /// `request_mac`, at time `now`.
    pub fn new(key: &'k Key, request_mac: &[u8], now: u64) -> Self {
        StreamSigner {
            key,
            prior: request_mac.to_vec(),
            first: true,
            now,
        }
    }

    /// The key.
    pub fn key(&self) -> &Key {
        self.key
    }

    /// Signs the next message (which has no TSIG record yet).
    pub fn sign(&mut self, msg: &mut Vec<u8>) {
        let vars = if self.first {
            Vars::Full {
                time: self.now,
                fudge: FUDGE,
                error: error::NOERROR,
                other: &[],
            }
        } else {
            Vars::Timers {
                time: self.now,
                fudge: FUDGE,
            }
        };
        self.first = false;
        let prior = core::mem::take(&mut self.prior);
        self.prior = sign_with(msg, self.key, Some(&prior), vars);
    }
}

/// Why a response did not verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// The message is malformed.
    Wire(WireError),
    /// The first message, or the message after 99 unsigned ones, is unsigned.
    Unsigned,
    /// Signed with another key or algorithm.
    WrongKey,
    /// The server answered with this TSIG error (BADKEY, BADSIG, BADTIME...).
    Error(u16),
    /// The MAC does not verify.
    BadMac,
    /// Signed outside the fudge.
    BadTime,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Wire(e) => write!(f, "malformed: {e}"),
            VerifyError::Unsigned => f.write_str("unsigned message"),
            VerifyError::WrongKey => f.write_str("signed with another key"),
            VerifyError::Error(e) => write!(f, "TSIG error {}", error::name(*e)),
            VerifyError::BadMac => f.write_str("MAC does not verify"),
            VerifyError::BadTime => f.write_str("signed outside the time window"),
        }
    }
}

impl core::error::Error for VerifyError {}

/// Verifies a response, or the messages of a transfer in order, signed with `key` for a
/// request whose MAC was `request_mac` (RFC 8945 §5.3, §5.3.1).
#[derive(Debug)]
pub struct StreamVerifier<'k> {
    key: &'k Key,
    prior: Vec<u8>,
    first: bool,
    /// Unsigned messages since the last signed one, whole (they enter the next MAC).
    pending: Vec<u8>,
    run: usize,
}

impl<'k> StreamVerifier<'k> {
    /// A verifier for the response to a request signed with `key` (MAC `request_mac`).
    pub fn new(key: &'k Key, request_mac: &[u8]) -> Self {
        StreamVerifier {
            key,
            prior: request_mac.to_vec(),
            first: true,
            pending: Vec::new(),
            run: 0,
        }
    }

    /// Verifies the next message at time `now`; `Ok(true)` when it was signed, `Ok(false)`
    /// for an unsigned message inside a stream (its MAC comes with the next signed one:
    /// the caller must see a signed message last).
    pub fn verify(&mut self, msg: &[u8], now: u64) -> Result<bool, VerifyError> {
        let t = find(msg).map_err(VerifyError::Wire)?;
        let Some(t) = t else {
            if self.first || self.run >= MAX_UNSIGNED_RUN {
                return Err(VerifyError::Unsigned);
            }
            self.pending.extend_from_slice(msg);
            self.run += 1;
            return Ok(false);
        };
        if t.key_name.to_lowercase() != self.key.name
            || Algorithm::from_wire_name(&t.algorithm) != Some(self.key.algorithm)
        {
            return Err(VerifyError::WrongKey);
        }
        if t.error != error::NOERROR && t.mac.is_empty() {
            return Err(VerifyError::Error(t.error));
        }
        let mut m = self.key.mac();
        feed_prior(&mut m, Some(&self.prior));
        m.update(&self.pending);
        feed_message(&mut m, &msg[..t.start], t.original_id, true);
        let vars = if self.first {
            Vars::Full {
                time: t.time_signed,
                fudge: t.fudge,
                error: t.error,
                other: &t.other,
            }
        } else {
            Vars::Timers {
                time: t.time_signed,
                fudge: t.fudge,
            }
        };
        feed_vars(&mut m, self.key, vars);
        if t.mac.len() != self.key.algorithm.mac_len() || m.verify_slice(&t.mac).is_err() {
            return Err(VerifyError::BadMac);
        }
        if t.error != error::NOERROR {
            return Err(VerifyError::Error(t.error));
        }
        if !in_window(now, t.time_signed, t.fudge) {
            return Err(VerifyError::BadTime);
        }
        self.first = false;
        self.prior = t.mac;
        self.pending.clear();
        self.run = 0;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{MessageWriter, flags};
    use alloc::string::ToString;
    use alloc::vec;

    fn key(name: &str, secret: &[u8]) -> Key {
        Key::new(
            &WireName::parse(name, None).unwrap(),
            Algorithm::HmacSha256,
            secret.to_vec(),
        )
    }

    fn query(id: u16) -> Vec<u8> {
        let mut w = MessageWriter::new(id, 0);
        w.question(&WireName::parse("example.", None).unwrap(), 252, 1);
        w.finish()
    }

    #[test]
    fn a_signed_request_verifies_and_its_response_stream_too() {
        let k = key("xfr.example.", b"0123456789abcdef0123456789abcdef");
        let mut q = query(0x1234);
        let mac = sign_request(&mut q, &k, 1_700_000_000);
        let keys = [key("other.", b"x"), k.clone()];
        let c = check_request(&q, &keys, 1_700_000_100).unwrap();
        assert_eq!(
            c,
            Checked::Signed(Signed {
                key: 1,
                mac: mac.clone()
            })
        );

        let mut signer = StreamSigner::new(&keys[1], &mac, 1_700_000_101);
        let mut verifier = StreamVerifier::new(&k, &mac);
        for i in 0..3u16 {
            let mut r = query(0x1234);
            r[2] |= 0x80;
            r.extend_from_slice(&i.to_be_bytes());
            let mut r = {
                let mut w = MessageWriter::new(0x1234, flags::QR);
                w.question(&WireName::parse("example.", None).unwrap(), 252, 1);
                let rr = skua_engine::text::parse_rr(
                    &alloc::format!("r{i}.example. 60 IN A 198.18.0.{i}"),
                    None,
                    60,
                )
                .unwrap();
                assert!(w.try_rr(crate::wire::Section::Answer, &rr, 65535));
                w.finish()
            };
            signer.sign(&mut r);
            assert_eq!(verifier.verify(&r, 1_700_000_102), Ok(true), "message {i}");
        }
    }

    #[test]
    fn rfc_8945_section_5_2_order_of_checks() {
        let k = key("xfr.example.", b"secret-secret-secret");
        let keys = [k.clone()];
        let now = 1_700_000_000;
        // Unknown key: BADKEY.
        let mut q = query(1);
        sign_request(&mut q, &key("nope.", b"secret-secret-secret"), now);
        let Checked::Rejected(r) = check_request(&q, &keys, now).unwrap() else {
            panic!()
        };
        assert_eq!((r.error, r.signer), (error::BADKEY, None));
        // Right name, wrong secret: BADSIG.
        let mut q = query(2);
        sign_request(&mut q, &key("XFR.example.", b"another secret"), now);
        let Checked::Rejected(r) = check_request(&q, &keys, now).unwrap() else {
            panic!()
        };
        assert_eq!((r.error, r.signer), (error::BADSIG, None));
        // A flipped bit in the signed part: BADSIG.
        let mut q = query(3);
        sign_request(&mut q, &k, now);
        q[13] ^= 0x20;
        let Checked::Rejected(r) = check_request(&q, &keys, now).unwrap() else {
            panic!()
        };
        assert_eq!(r.error, error::BADSIG);
        // Good MAC, too old: BADTIME, and the error response is signed.
        let mut q = query(4);
        let mac = sign_request(&mut q, &k, now - 301);
        let Checked::Rejected(r) = check_request(&q, &keys, now).unwrap() else {
            panic!()
        };
        assert_eq!(r.error, error::BADTIME);
        assert_eq!(
            r.signer,
            Some(Signed {
                key: 0,
                mac: mac.clone()
            })
        );
        let mut resp = query(4);
        resp[2] |= 0x80;
        append_error(&mut resp, &r, &keys, now);
        let t = find(&resp).unwrap().unwrap();
        assert_eq!((t.error, t.other.len()), (error::BADTIME, 6));
        let mut v = StreamVerifier::new(&k, &mac);
        assert_eq!(
            v.verify(&resp, now),
            Err(VerifyError::Error(error::BADTIME))
        );
        // Within the fudge on either side: fine.
        for skew in [-300i64, 300] {
            let mut q = query(5);
            sign_request(&mut q, &k, now.wrapping_add_signed(skew));
            assert!(matches!(
                check_request(&q, &keys, now),
                Ok(Checked::Signed(_))
            ));
        }
        // BADKEY response: unsigned (empty MAC), same key name.
        let mut q = query(6);
        sign_request(&mut q, &key("nope.", b"s"), now);
        let Checked::Rejected(r) = check_request(&q, &keys, now).unwrap() else {
            panic!()
        };
        let mut resp = query(6);
        append_error(&mut resp, &r, &keys, now);
        let t = find(&resp).unwrap().unwrap();
        assert_eq!((t.error, t.mac.len()), (error::BADKEY, 0));
        assert_eq!(t.key_name.to_string(), "nope.");
    }

    /// The window is min(the message's fudge, 300 s): a request claiming a fudge of 65,535
    /// s is timely exactly 300 s either side of its time and BADTIME one second past; one
    /// claiming 10 s keeps its own narrower window (RFC 8945 §5.2.3). Responses alike.
    #[test]
    fn the_time_window_is_300_s_whatever_the_fudge_says() {
        let k = key("xfr.example.", b"secret-secret-secret");
        let keys = [k.clone()];
        let now = 1_700_000_000u64;
        let signed = |id: u16, skew: i64, fudge: u16| {
            let mut q = query(id);
            let vars = Vars::Full {
                time: now.wrapping_add_signed(skew),
                fudge,
                error: error::NOERROR,
                other: &[],
            };
            let mac = sign_with(&mut q, &k, None, vars);
            (q, mac)
        };
        for (fudge, bound) in [(u16::MAX, 300i64), (FUDGE, 300), (10, 10)] {
            for (skew, timely) in [
                (-bound, true),
                (bound, true),
                (-bound - 1, false),
                (bound + 1, false),
            ] {
                let (q, _) = signed(7, skew, fudge);
                let got = check_request(&q, &keys, now).unwrap();
                match got {
                    Checked::Signed(_) => assert!(timely, "fudge {fudge}, skew {skew}: accepted"),
                    Checked::Rejected(r) => {
                        assert!(!timely, "fudge {fudge}, skew {skew}: {r:?}");
                        assert_eq!(r.error, error::BADTIME, "fudge {fudge}, skew {skew}");
                    }
                    Checked::Unsigned => panic!("unsigned"),
                }
                // A response signed that way, for a request of ours.
                let (_, req_mac) = signed(8, 0, FUDGE);
                let mut r = query(8);
                r[2] |= 0x80;
                let vars = Vars::Full {
                    time: now.wrapping_add_signed(skew),
                    fudge,
                    error: error::NOERROR,
                    other: &[],
                };
                sign_with(&mut r, &k, Some(&req_mac), vars);
                let want = if timely {
                    Ok(true)
                } else {
                    Err(VerifyError::BadTime)
                };
                assert_eq!(
                    StreamVerifier::new(&k, &req_mac).verify(&r, now),
                    want,
                    "response, fudge {fudge}, skew {skew}"
                );
            }
        }
    }

    #[test]
    fn truncated_macs() {
        let k = key("k.", b"0123456789abcdef");
        let keys = [k.clone()];
        let mut q = query(9);
        sign_request(&mut q, &k, 100);
        // Cut the MAC to 16 bytes (half of SHA-256): verifies, then BADTRUNC.
        let t = find(&q).unwrap().unwrap();
        let mut cut = q[..t.start].to_vec();
        append_record(
            &mut cut,
            &t.key_name,
            &t.algorithm,
            t.time_signed,
            t.fudge,
            &t.mac[..16],
            t.original_id,
            0,
            &[],
        );
        // ARCOUNT was counted again by append_record: fix it to one TSIG.
        cut[10..12].copy_from_slice(&1u16.to_be_bytes());
        let Checked::Rejected(r) = check_request(&cut, &keys, 100).unwrap() else {
            panic!()
        };
        assert_eq!(r.error, error::BADTRUNC);
        // Below 16 bytes: malformed.
        let mut cut2 = q[..t.start].to_vec();
        append_record(
            &mut cut2,
            &t.key_name,
            &t.algorithm,
            t.time_signed,
            t.fudge,
            &t.mac[..8],
            t.original_id,
            0,
            &[],
        );
        assert!(check_request(&cut2, &keys, 100).is_err());
    }

    #[test]
    fn tsig_must_be_last_and_well_formed() {
        let k = key("k.", b"0123456789abcdef");
        let mut q = query(1);
        sign_request(&mut q, &k, 100);
        // A record after the TSIG.
        let mut bad = q.clone();
        bad.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
        bad[10..12].copy_from_slice(&2u16.to_be_bytes());
        assert!(find(&bad).is_err());
        // Truncated anywhere: an error, never a panic.
        for n in 0..q.len() {
            let _ = find(&q[..n]);
            let _ = check_request(&q[..n], core::slice::from_ref(&k), 100);
        }
        assert_eq!(find(&query(1)).unwrap(), None);
        assert_eq!(
            check_request(&query(1), &[k], 100).unwrap(),
            Checked::Unsigned
        );
    }

    #[test]
    fn unsigned_messages_inside_a_stream() {
        let k = key("k.", b"0123456789abcdef");
        let mut q = query(1);
        let mac = sign_request(&mut q, &k, 100);
        // Server side by hand: first signed, two unsigned, then one signed over all three.
        let mut m1 = query(1);
        let m1mac = sign_with(
            &mut m1,
            &k,
            Some(&mac),
            Vars::Full {
                time: 100,
                fudge: FUDGE,
                error: 0,
                other: &[],
            },
        );
        let m2 = query(1);
        let m3 = query(1);
        let mut m4 = query(1);
        let id = 1u16;
        let mut h = k.mac();
        feed_prior(&mut h, Some(&m1mac));
        h.update(&m2);
        h.update(&m3);
        feed_message(&mut h, &m4, id, false);
        feed_vars(
            &mut h,
            &k,
            Vars::Timers {
                time: 100,
                fudge: FUDGE,
            },
        );
        let m4mac = h.finalize().into_bytes().to_vec();
        append_record(
            &mut m4,
            k.name(),
            &k.algorithm.wire_name(),
            100,
            FUDGE,
            &m4mac,
            id,
            0,
            &[],
        );
        let mut v = StreamVerifier::new(&k, &mac);
        assert_eq!(v.verify(&m1, 100), Ok(true));
        assert_eq!(v.verify(&m2, 100), Ok(false));
        assert_eq!(v.verify(&m3, 100), Ok(false));
        assert_eq!(v.verify(&m4, 100), Ok(true));
        // An unsigned first message is refused.
        let mut v = StreamVerifier::new(&k, &mac);
        assert_eq!(v.verify(&m2, 100), Err(VerifyError::Unsigned));
        let _ = vec![0u8];
    }
}
