//! A zone's versions and the journal of differences between them.
//!
//! A [`Version`] is the zone's records at one serial, in canonical order, its SOA apart. A
//! [`Diff`] is what changed between two versions (RFC 1995 §4's unit: old SOA, records
//! removed, new SOA, records added). The [`Journal`] keeps the latest diffs, contiguous
//! (each starts at the serial the previous one ended at), bounded by a number of diffs and
//! a number of bytes; the oldest go first. An IXFR reaches a client's serial when the
//! journal holds the chain from it to the current serial ([`Journal::chain`]).
//!
//! Serials compare with RFC 1982 serial number arithmetic ([`serial_lt`]).

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::fmt;

use skua_engine::name::WireName;
use skua_engine::rr::{Rr, class, rtype};

use crate::wire::soa_serial;

/// `a < b` in RFC 1982 §3.2 serial arithmetic (32 bits). Undefined pairs (exactly 2^31
/// apart) are "not less".
pub fn serial_lt(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < 0x8000_0000
}

/// The SOA serial of a record (it must be a SOA), 0 when its RDATA is malformed.
pub fn serial_of(soa: &Rr) -> u32 {
    soa_serial(&soa.rdata).unwrap_or(0)
}

/// `soa` with its serial replaced.
pub fn with_serial(soa: &Rr, serial: u32) -> Rr {
    let mut out = soa.clone();
    let n = out.rdata.len();
    if n >= 20 {
        out.rdata[n - 20..n - 16].copy_from_slice(&serial.to_be_bytes());
    }
    out
}

/// Why records are not a zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneError {
    /// No SOA at the apex, or more than one.
    Soa,
    /// A record outside the zone.
    OutOfZone(WireName),
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneError::Soa => f.write_str("the zone needs exactly one SOA record at its apex"),
            ZoneError::OutOfZone(n) => write!(f, "{n} is outside the zone"),
        }
    }
}

impl core::error::Error for ZoneError {}

/// Canonical comparison of two records: owner (lower case, label by label from the right:
/// RFC 4034 §6.1 order), type, class, RDATA. TTL is not part of the identity.
pub fn canonical_cmp(a: &Rr, b: &Rr) -> Ordering {
    cmp_names(a.owner.as_bytes(), b.owner.as_bytes())
        .then(a.rtype.cmp(&b.rtype))
        .then(a.class.cmp(&b.class))
        .then_with(|| a.rdata.cmp(&b.rdata))
}

fn labels_rev(name: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = skua_engine::name::labels(name).collect();
    v.reverse();
    v
}

fn cmp_names(a: &[u8], b: &[u8]) -> Ordering {
    let (la, lb) = (labels_rev(a), labels_rev(b));
    for (x, y) in la.iter().zip(&lb) {
        let o = x
            .iter()
            .map(u8::to_ascii_lowercase)
            .cmp(y.iter().map(u8::to_ascii_lowercase));
        if o != Ordering::Equal {
            return o;
        }
    }
    la.len().cmp(&lb.len())
}

/// The zone's records at one serial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    apex: WireName,
    soa: Rr,
    /// Every other record, canonical order, no duplicates.
    records: Vec<Rr>,
}

impl Version {
    /// The version made of `records` (in any order, duplicates dropped; the first of two
    /// records that differ only by TTL is kept): exactly one SOA, at `apex`, and every
    /// record at or under `apex`.
    pub fn new(apex: &WireName, records: Vec<Rr>) -> Result<Self, ZoneError> {
        let mut soa = None;
        let mut rest = Vec::with_capacity(records.len());
        for r in records {
            if !r.owner.is_subdomain_of(apex) {
                return Err(ZoneError::OutOfZone(r.owner));
            }
            if r.rtype == rtype::SOA {
                if r.owner.to_lowercase() != apex.to_lowercase() || soa.is_some() {
                    return Err(ZoneError::Soa);
                }
                soa = Some(r);
            } else {
                rest.push(r);
            }
        }
        let soa = soa.ok_or(ZoneError::Soa)?;
        rest.sort_by(canonical_cmp);
        rest.dedup_by(|b, a| canonical_cmp(a, b) == Ordering::Equal);
        Ok(Version {
            apex: apex.clone(),
            soa,
            records: rest,
        })
    }

    /// The apex.
    pub fn apex(&self) -> &WireName {
        &self.apex
    }

    /// The SOA record.
    pub fn soa(&self) -> &Rr {
        &self.soa
    }

    /// The serial.
    pub fn serial(&self) -> u32 {
        serial_of(&self.soa)
    }

    /// Every record but the SOA, canonical order.
    pub fn records(&self) -> &[Rr] {
        &self.records
    }

    /// The same records with another serial.
    pub fn with_serial(&self, serial: u32) -> Version {
        Version {
            apex: self.apex.clone(),
            soa: with_serial(&self.soa, serial),
            records: self.records.clone(),
        }
    }

    /// Whether `other` holds the same data (SOA serial aside: its other fields count).
    pub fn same_data(&self, other: &Version) -> bool {
        with_serial(&self.soa, 0) == with_serial(&other.soa, 0)
            && self.records.len() == other.records.len()
            && self
                .records
                .iter()
                .zip(&other.records)
                .all(|(a, b)| canonical_cmp(a, b) == Ordering::Equal && a.ttl == b.ttl)
    }

    /// Every record, SOA first, as an AXFR sends them (without the closing SOA).
    pub fn iter(&self) -> impl Iterator<Item = &Rr> {
        core::iter::once(&self.soa).chain(self.records.iter())
    }
}

/// What changed from one version to the next (RFC 1995 §4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diff {
    /// The old version's SOA.
    pub from: Rr,
    /// Records removed (canonical order).
    pub removed: Vec<Rr>,
    /// The new version's SOA.
    pub to: Rr,
    /// Records added (canonical order).
    pub added: Vec<Rr>,
}

impl Diff {
    /// The difference from `old` to `new`: a record whose TTL changed is removed and added.
    pub fn between(old: &Version, new: &Version) -> Diff {
        let (mut removed, mut added) = (Vec::new(), Vec::new());
        let (a, b) = (&old.records, &new.records);
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) => match canonical_cmp(x, y) {
                    Ordering::Less => {
                        removed.push(x.clone());
                        i += 1;
                    }
                    Ordering::Greater => {
                        added.push(y.clone());
                        j += 1;
                    }
                    Ordering::Equal => {
                        if x.ttl != y.ttl {
                            removed.push(x.clone());
                            added.push(y.clone());
                        }
                        i += 1;
                        j += 1;
                    }
                },
                (Some(x), None) => {
                    removed.push(x.clone());
                    i += 1;
                }
                (None, Some(y)) => {
                    added.push(y.clone());
                    j += 1;
                }
                (None, None) => break,
            }
        }
        Diff {
            from: old.soa.clone(),
            removed,
            to: new.soa.clone(),
            added,
        }
    }

    /// The old serial.
    pub fn from_serial(&self) -> u32 {
        serial_of(&self.from)
    }

    /// The new serial.
    pub fn to_serial(&self) -> u32 {
        serial_of(&self.to)
    }

    /// Bytes it holds, as the journal counts them: owner, type, class, TTL, RDATA length
    /// and RDATA of every record, SOAs included.
    pub fn size(&self) -> usize {
        let rr = |r: &Rr| r.owner.len() + 10 + r.rdata.len();
        rr(&self.from)
            + rr(&self.to)
            + self
                .removed
                .iter()
                .chain(&self.added)
                .map(rr)
                .sum::<usize>()
    }

    /// Applies the diff to `old` (which must be at [`Self::from_serial`]): the new version.
    /// `None` when `old` is at another serial or a removed record is missing.
    pub fn apply(&self, old: &Version) -> Option<Version> {
        if old.serial() != self.from_serial() {
            return None;
        }
        let mut records = old.records.clone();
        for r in &self.removed {
            let at = records.binary_search_by(|x| canonical_cmp(x, r)).ok()?;
            records.remove(at);
        }
        for r in &self.added {
            match records.binary_search_by(|x| canonical_cmp(x, r)) {
                Ok(at) => records[at] = r.clone(),
                Err(at) => records.insert(at, r.clone()),
            }
        }
        Some(Version {
            apex: old.apex.clone(),
            soa: self.to.clone(),
            records,
        })
    }
}

/// Applies `diffs` in order to `old` (one copy of its records, however many diffs): the
/// new version, or the old serial of the first diff that does not apply (it starts at
/// another serial, or a record it removes is missing).
pub fn apply_chain(old: &Version, diffs: &[Diff]) -> Result<Version, u32> {
    let mut records = old.records.clone();
    let mut soa = old.soa.clone();
    for d in diffs {
        if serial_of(&soa) != d.from_serial() {
            return Err(d.from_serial());
        }
        // Linear merges over sorted lists: a large zone with a large diff stays O(n + k).
        let removed = sorted_copy(&d.removed);
        let added = sorted_copy(&d.added);
        records = remove_sorted(records, &removed).ok_or(d.from_serial())?;
        records = add_sorted(records, &added);
        soa = d.to.clone();
    }
    Ok(Version {
        apex: old.apex.clone(),
        soa,
        records,
    })
}

fn sorted_copy(v: &[Rr]) -> alloc::borrow::Cow<'_, [Rr]> {
    if v.is_sorted_by(|a, b| canonical_cmp(a, b) != Ordering::Greater) {
        alloc::borrow::Cow::Borrowed(v)
    } else {
        let mut o = v.to_vec();
        o.sort_by(canonical_cmp);
        alloc::borrow::Cow::Owned(o)
    }
}

/// `records` without `removed` (both in canonical order); `None` when one of `removed` is
/// not there.
fn remove_sorted(records: Vec<Rr>, removed: &[Rr]) -> Option<Vec<Rr>> {
    let mut out = Vec::with_capacity(records.len());
    let mut j = 0;
    for x in records {
        match removed.get(j).map(|r| canonical_cmp(r, &x)) {
            // Every held record before `x` was passed: this removal is not held.
            Some(Ordering::Less) => return None,
            Some(Ordering::Equal) => j += 1,
            _ => out.push(x),
        }
    }
    (j == removed.len()).then_some(out)
}

/// `records` with `added` merged in (both in canonical order); an added record equal to a
/// held one (TTL aside) replaces it.
fn add_sorted(records: Vec<Rr>, added: &[Rr]) -> Vec<Rr> {
    let mut out = Vec::with_capacity(records.len() + added.len());
    let mut j = 0;
    for x in records {
        while let Some(a) = added.get(j)
            && canonical_cmp(a, &x) == Ordering::Less
        {
            out.push(a.clone());
            j += 1;
        }
        match added.get(j) {
            Some(a) if canonical_cmp(a, &x) == Ordering::Equal => {
                out.push(a.clone());
                j += 1;
            }
            _ => out.push(x),
        }
    }
    out.extend(added[j.min(added.len())..].iter().cloned());
    out.dedup_by(|b, a| canonical_cmp(a, b) == Ordering::Equal);
    out
}

/// The latest diffs of a zone, bounded.
#[derive(Clone, Debug)]
pub struct Journal {
    diffs: VecDeque<Diff>,
    bytes: usize,
    max_number: usize,
    max_bytes: usize,
}

impl Journal {
    /// An empty journal that keeps at most `max_number` diffs and `max_bytes` bytes
    /// ([`Diff::size`]).
    pub fn new(max_number: usize, max_bytes: usize) -> Self {
        Journal {
            diffs: VecDeque::new(),
            bytes: 0,
            max_number,
            max_bytes,
        }
    }

    /// Diffs held.
    pub fn len(&self) -> usize {
        self.diffs.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.diffs.is_empty()
    }

    /// The bounds it was made with: (diffs, bytes).
    pub fn bounds(&self) -> (usize, usize) {
        (self.max_number, self.max_bytes)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The oldest serial an IXFR can start from, if any.
    pub fn oldest(&self) -> Option<u32> {
        self.diffs.front().map(Diff::from_serial)
    }

    /// Appends a diff. One that does not continue the last diff (its old serial is not the
    /// last new serial) starts the journal afresh; the oldest diffs go until the bounds
    /// hold (a diff larger than the whole journal empties it: such a change is sent as the
    /// whole zone).
    pub fn push(&mut self, d: Diff) {
        if let Some(last) = self.diffs.back()
            && last.to_serial() != d.from_serial()
        {
            self.clear();
        }
        self.bytes += d.size();
        self.diffs.push_back(d);
        while !self.diffs.is_empty()
            && (self.diffs.len() > self.max_number || self.bytes > self.max_bytes)
        {
            if let Some(old) = self.diffs.pop_front() {
                self.bytes -= old.size();
            }
        }
    }

    /// Empties it.
    pub fn clear(&mut self) {
        self.diffs.clear();
        self.bytes = 0;
    }

    /// The diffs from serial `from` to serial `to`, in order, when the journal holds that
    /// whole chain.
    pub fn chain(&self, from: u32, to: u32) -> Option<impl Iterator<Item = &Diff>> {
        let start = self.diffs.iter().position(|d| d.from_serial() == from)?;
        let last = self.diffs.back()?;
        (last.to_serial() == to).then(|| self.diffs.iter().skip(start))
    }
}

/// Builds a SOA record (tests, callers that make zones).
pub fn soa_record(
    apex: &WireName,
    ttl: u32,
    mname: &WireName,
    rname: &WireName,
    serial: u32,
) -> Rr {
    let mut rdata = Vec::with_capacity(mname.len() + rname.len() + 20);
    rdata.extend_from_slice(mname.as_bytes());
    rdata.extend_from_slice(rname.as_bytes());
    for v in [serial, 3600, 600, 86400, 300] {
        rdata.extend_from_slice(&v.to_be_bytes());
    }
    Rr {
        owner: apex.clone(),
        rtype: rtype::SOA,
        class: class::IN,
        ttl,
        rdata,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::String;
    use alloc::vec;
    use skua_engine::text::parse_rr;

    fn rr(s: &str) -> Rr {
        parse_rr(s, None, 300).unwrap()
    }

    fn zone(serial: u32, extra: &[&str]) -> Version {
        let apex = WireName::parse("example.", None).unwrap();
        let mut recs = vec![rr(&format!(
            "example. 3600 IN SOA ns.example. admin.example. {serial} 3600 600 86400 300"
        ))];
        recs.extend(extra.iter().map(|s| rr(s)));
        Version::new(&apex, recs).unwrap()
    }

    #[test]
    fn serial_arithmetic() {
        assert!(serial_lt(1, 2));
        assert!(!serial_lt(2, 1));
        assert!(serial_lt(u32::MAX, 0), "wraps");
        assert!(serial_lt(0xffff_fff0, 5));
        assert!(!serial_lt(5, 5));
        assert!(!serial_lt(0, 0x8000_0000) && !serial_lt(0x8000_0000, 0));
    }

    #[test]
    fn versions_need_one_soa_at_the_apex() {
        let apex = WireName::parse("example.", None).unwrap();
        assert_eq!(
            Version::new(&apex, vec![rr("www.example. 300 IN A 198.18.0.1")]),
            Err(ZoneError::Soa)
        );
        assert!(matches!(
            Version::new(
                &apex,
                vec![
                    rr("example. 300 IN SOA a. b. 1 2 3 4 5"),
                    rr("www.other. 300 IN A 198.18.0.1")
                ]
            ),
            Err(ZoneError::OutOfZone(_))
        ));
        let v = zone(
            7,
            &[
                "b.example. 300 IN A 198.18.0.2",
                "A.example. 300 IN A 198.18.0.1",
                "a.example. 300 IN A 198.18.0.1",
            ],
        );
        assert_eq!(v.serial(), 7);
        assert_eq!(v.records().len(), 2, "duplicates (any case) dropped");
        assert_eq!(v.with_serial(9).serial(), 9);
    }

    #[test]
    fn diffs_apply_and_round_trip() {
        let a = zone(
            1,
            &[
                "a.example. 300 IN A 198.18.0.1",
                "b.example. 300 IN A 198.18.0.2",
                "c.example. 300 IN TXT \"x\"",
            ],
        );
        let b = zone(
            2,
            &[
                "a.example. 300 IN A 198.18.0.1",
                "b.example. 60 IN A 198.18.0.2",
                "d.example. 300 IN A 198.18.0.4",
            ],
        );
        let d = Diff::between(&a, &b);
        assert_eq!((d.from_serial(), d.to_serial()), (1, 2));
        assert_eq!(
            d.removed,
            vec![
                rr("b.example. 300 IN A 198.18.0.2"),
                rr("c.example. 300 IN TXT \"x\"")
            ]
        );
        assert_eq!(
            d.added,
            vec![
                rr("b.example. 60 IN A 198.18.0.2"),
                rr("d.example. 300 IN A 198.18.0.4")
            ]
        );
        assert_eq!(d.apply(&a).as_ref(), Some(&b));
        assert_eq!(d.apply(&b), None, "wrong starting serial");
        assert!(!a.same_data(&b));
        assert!(a.same_data(&a.with_serial(5)));
    }

    #[test]
    fn a_chain_of_diffs_applies_in_one_pass() {
        let v: Vec<Version> = (1..=5u32)
            .map(|s| {
                let mut extra: Vec<String> = (0..20)
                    .filter(|i| (i + s) % 3 != 0)
                    .map(|i| format!("r{i}.example. {} IN A 198.18.0.{i}", 300 + s % 2))
                    .collect();
                extra.push(format!("s{s}.example. 60 IN TXT \"{s}\""));
                let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
                zone(s, &refs)
            })
            .collect();
        let diffs: Vec<Diff> = v.windows(2).map(|w| Diff::between(&w[0], &w[1])).collect();
        assert_eq!(apply_chain(&v[0], &diffs), Ok(v[4].clone()));
        assert_eq!(
            apply_chain(&v[0], &diffs[..2]),
            diffs[1].apply(&v[1]).ok_or(0)
        );
        assert_eq!(apply_chain(&v[0], &[]), Ok(v[0].clone()));
        // Out of order, or from another serial: the serial of the diff that fails.
        assert_eq!(apply_chain(&v[0], &diffs[1..]), Err(2));
        // A removal that is not held.
        let mut bad = diffs[0].clone();
        bad.removed.push(rr("zz.example. 300 IN A 198.18.9.9"));
        assert_eq!(apply_chain(&v[0], &[bad.clone()]), Err(1));
        assert_eq!(bad.apply(&v[0]), None, "as Diff::apply says");
        // A removal listed twice.
        let mut twice = diffs[0].clone();
        if let Some(r) = twice.removed.first().cloned() {
            twice.removed.push(r);
            twice.removed.sort_by(canonical_cmp);
            assert_eq!(apply_chain(&v[0], &[twice]), Err(1));
        }
        // Unsorted diff lists are sorted first.
        let mut shuffled = diffs[0].clone();
        shuffled.added.reverse();
        shuffled.removed.reverse();
        assert_eq!(apply_chain(&v[0], &[shuffled]), Ok(v[1].clone()));
    }

    #[test]
    fn the_journal_is_bounded_and_contiguous() {
        let v: Vec<Version> = (1..=6)
            .map(|s| zone(s, &[&format!("r{s}.example. 300 IN A 198.18.0.{s}")]))
            .collect();
        let mut j = Journal::new(3, 1 << 20);
        for w in v.windows(2) {
            j.push(Diff::between(&w[0], &w[1]));
        }
        assert_eq!(j.len(), 3, "at most 3 diffs");
        assert_eq!(j.oldest(), Some(3));
        assert!(j.chain(2, 6).is_none(), "serial 2 fell out");
        let chain: Vec<u32> = j.chain(3, 6).unwrap().map(Diff::to_serial).collect();
        assert_eq!(chain, vec![4, 5, 6]);
        assert!(j.chain(3, 7).is_none(), "not up to the current serial");
        // A diff that does not continue the chain starts it afresh.
        j.push(Diff::between(&v[0], &v[1]));
        assert_eq!((j.len(), j.oldest()), (1, Some(1)));
        // Byte bound: only the newest diff fits.
        let one = Diff::between(&v[0], &v[1]).size();
        let mut j = Journal::new(100, one + one / 2);
        for w in v.windows(2) {
            j.push(Diff::between(&w[0], &w[1]));
        }
        assert_eq!(j.len(), 1);
        assert!(j.bytes() <= one + one / 2);
        // Too small for any diff: empty.
        let mut j = Journal::new(100, 10);
        j.push(Diff::between(&v[0], &v[1]));
        assert!(j.is_empty());
        assert_eq!(j.bytes(), 0);
    }

    #[test]
    fn canonical_order_is_rfc_4034() {
        // RFC 4034 §6.1's example order.
        let names = [
            "example.",
            "a.example.",
            "yljkjljk.a.example.",
            "Z.a.example.",
            "zABC.a.EXAMPLE.",
            "z.example.",
            "\\001.z.example.",
            "*.z.example.",
            "\\200.z.example.",
        ];
        let rrs: Vec<Rr> = names
            .iter()
            .map(|n| rr(&format!("{n} 300 IN A 198.18.0.1")))
            .collect();
        for w in rrs.windows(2) {
            assert_eq!(
                canonical_cmp(&w[0], &w[1]),
                Ordering::Less,
                "{} < {}",
                w[0].owner,
                w[1].owner
            );
        }
    }
}
