//! One audit entry: its JSON line, the canonical bytes its MAC covers, and the MAC.
//!
//! The line is the compact JSON object
//! `{"seq":..,"ts":..,"kind":..,"actor":..,"source":..,"detail":..,"key_id":..,"prev":..,"mac":..}`
//! with the members in exactly that order and `mac` last. The canonical bytes are the line
//! without its `mac` member: the line with its last 74 bytes (`,"mac":"`, 64 lowercase hex
//! digits, `"}`) replaced by `}`. A verifier works on those bytes as read and never
//! re-serializes, so it needs no JSON canonicalization and can be written in any language.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::key::AuditKey;

/// `prev` of the first entry of a log: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The longest line (newline included) that [`crate::AuditLog::append`] writes and the
/// verifier reads. Keeps a damaged or hostile log from making a reader allocate without bound.
pub const MAX_LINE: usize = 64 * 1024;

/// `,"mac":"` + 64 hex digits + `"}`.
const MAC_SUFFIX_LEN: usize = 8 + 64 + 2;

/// One entry of the log, as written and as read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Position in the log: 0 for the first entry, then +1 for each entry.
    pub seq: u64,
    /// When the entry was written: RFC 3339, UTC, milliseconds (`2026-05-01T12:00:00.123Z`).
    pub ts: String,
    /// What happened (see [`crate::kind`]).
    pub kind: String,
    /// Who did it: an API token's name, or `system` for the daemon itself.
    pub actor: String,
    /// The client address of the request, if there was one.
    pub source: Option<IpAddr>,
    /// What changed; a JSON object (its keys are written sorted).
    pub detail: Value,
    /// The id of the key that made `mac`.
    pub key_id: String,
    /// `mac` of the previous entry ([`GENESIS`] for the first).
    pub prev: String,
    /// HMAC-SHA256 of the canonical bytes, 64 lowercase hex digits.
    pub mac: String,
}

/// The members that the MAC covers, in the order they are written.
#[derive(Serialize)]
struct Body<'a> {
    seq: u64,
    ts: &'a str,
    kind: &'a str,
    actor: &'a str,
    source: Option<IpAddr>,
    detail: &'a Value,
    key_id: &'a str,
    prev: &'a str,
}

impl Entry {
    /// The bytes the MAC covers: the entry serialized without its `mac` member.
    pub fn canonical(&self) -> Vec<u8> {
        let body = Body {
            seq: self.seq,
            ts: &self.ts,
            kind: &self.kind,
            actor: &self.actor,
            source: self.source,
            detail: &self.detail,
            key_id: &self.key_id,
            prev: &self.prev,
        };
        // Serializing plain strings, numbers and a `Value` into a Vec cannot fail.
        serde_json::to_vec(&body).expect("an entry body always serializes")
    }

    /// Sets `key_id` to `key`'s id and `mac` to the MAC of the entry under `key`.
    pub fn seal(&mut self, key: &AuditKey) {
        self.key_id = key.id().to_string();
        self.mac = hex::encode(key.mac(&self.canonical()));
    }

    /// Whether `mac` is the entry's MAC under `key` (recomputed from the fields: entries
    /// written by this crate serialize back to the bytes they were read from).
    pub fn verifies(&self, key: &AuditKey) -> bool {
        self.key_id == key.id() && key.verify(&self.canonical(), &self.mac)
    }

    /// The entry's line, without the newline.
    pub fn to_line(&self) -> String {
        let mut line = self.canonical();
        line.pop(); // the closing brace
        line.extend_from_slice(b",\"mac\":\"");
        line.extend_from_slice(self.mac.as_bytes());
        line.extend_from_slice(b"\"}");
        // Built from JSON text (UTF-8) and the mac string.
        String::from_utf8(line).expect("JSON is UTF-8")
    }

    /// Parses one line (without its newline) and returns the entry and the canonical bytes
    /// the MAC covers, taken from the line as it is.
    pub fn parse_line(line: &[u8]) -> Result<(Entry, Vec<u8>), String> {
        let Some(cut) = line.len().checked_sub(MAC_SUFFIX_LEN) else {
            return Err("too short to be an entry".into());
        };
        let (head, suffix) = line.split_at(cut);
        let mac = suffix
            .strip_prefix(b",\"mac\":\"")
            .and_then(|s| s.strip_suffix(b"\"}"))
            .filter(|m| m.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        if mac.is_none() {
            return Err("does not end with a \"mac\" member of 64 lowercase hex digits".into());
        }
        let entry: Entry = serde_json::from_slice(line).map_err(|e| format!("bad JSON: {e}"))?;
        let mut canonical = head.to_vec();
        canonical.push(b'}');
        Ok((entry, canonical))
    }
}

/// Whether `s` is 64 lowercase hex digits (a MAC or a SHA-256 as this crate writes them).
pub(crate) fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> AuditKey {
        AuditKey::with_id("k1", vec![7; 32]).unwrap()
    }

    fn entry() -> Entry {
        let mut e = Entry {
            seq: 3,
            ts: "2026-05-01T12:00:00.123Z".into(),
            kind: "api-write".into(),
            actor: "ops \"token\"".into(),
            source: Some("2001:db8::1".parse().unwrap()),
            detail: serde_json::json!({"zone": "example.", "b": [1, 2], "a": null}),
            key_id: String::new(),
            prev: GENESIS.into(),
            mac: String::new(),
        };
        e.seal(&key());
        e
    }

    #[test]
    fn line_round_trips_and_canonical_is_the_line_without_mac() {
        let e = entry();
        let line = e.to_line();
        assert!(line.starts_with(
            "{\"seq\":3,\"ts\":\"2026-05-01T12:00:00.123Z\",\"kind\":\"api-write\",\
             \"actor\":\"ops \\\"token\\\"\",\"source\":\"2001:db8::1\",\
             \"detail\":{\"a\":null,\"b\":[1,2],\"zone\":\"example.\"},\"key_id\":\"k1\",\"prev\":\"000"
        ));
        let (back, canonical) = Entry::parse_line(line.as_bytes()).unwrap();
        assert_eq!(back, e);
        assert_eq!(canonical, e.canonical());
        assert!(back.verifies(&key()));
    }

    #[test]
    fn parse_line_rejects_lines_without_a_final_mac() {
        let line = entry().to_line();
        let mut upper = line.clone();
        upper.replace_range(line.len() - 10..line.len() - 9, "A");
        assert!(Entry::parse_line(upper.as_bytes()).is_err());
        assert!(Entry::parse_line(&line.as_bytes()[..line.len() - 1]).is_err());
        assert!(Entry::parse_line(b"{}").is_err());
        // mac present but not last
        let e = entry();
        let body = String::from_utf8(e.canonical()).unwrap();
        let moved = format!("{{\"mac\":\"{}\",{}", e.mac, &body[1..]);
        assert!(serde_json::from_str::<Entry>(&moved).is_ok());
        assert!(Entry::parse_line(moved.as_bytes()).is_err());
        // an unknown member
        let extra = line.replacen("{\"seq\":3,", "{\"seq\":3,\"x\":1,", 1);
        assert!(Entry::parse_line(extra.as_bytes()).is_err());
    }

    #[test]
    fn any_change_breaks_the_mac() {
        let e = entry();
        for f in [
            |e: &mut Entry| e.seq += 1,
            |e: &mut Entry| e.ts.push('1'),
            |e: &mut Entry| e.kind.push('x'),
            |e: &mut Entry| e.actor.push('x'),
            |e: &mut Entry| e.source = None,
            |e: &mut Entry| e.detail["zone"] = "other.".into(),
            |e: &mut Entry| e.prev.replace_range(0..1, "1"),
        ] {
            let mut t = e.clone();
            f(&mut t);
            assert!(!t.verifies(&key()), "{t:?}");
        }
    }
}
