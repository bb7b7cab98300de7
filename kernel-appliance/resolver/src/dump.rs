//! The operator's view of the cache: what it holds for a name ([`Cache::lookup_name`]),
//! and a text dump of the whole cache ([`Cache::dump`]) that [`Cache::load`] reads back,
//! as Unbound's `dump_cache` and `load_cache` do (across a restart, say).
//!
//! # The dump format (version 1)
//!
//! Line-based text, records in presentation format (RFC 1035 §5.1, as
//! [`skua_engine::text::rr_to_string`] writes them), TTLs being the seconds each record
//! had **left** when the dump was written. Blank lines and lines starting with `;` are
//! comments; leading and trailing blanks are ignored.
//!
//! ```text
//! skua-cache-dump 1 written=1767225600
//! rrset answer-nonauth
//!   www.example.net. 295 IN A 198.18.5.1
//! end
//! msg www.example.net. IN A NOERROR positive 295
//!   answer www.example.net. 295 IN A 198.18.5.1
//! end
//! msg nx.example.net. IN A NXDOMAIN nxdomain 115
//!   authority example.net. 115 IN SOA ns.example.net. admin.example.net. 1 2 3 4 120
//! end
//! eof rrsets=1 messages=2
//! ```
//!
//! - The first line: `skua-cache-dump VERSION written=UNIX-SECONDS` (wall clock).
//! - `rrset RANK` opens an entry of the RRset store: its rank (`additional`,
//!   `authority-nonauth`, `answer-nonauth`, `authority-auth`, `answer-auth`; RFC 2181
//!   §5.4.1), then its records (one owner, type, class and TTL), then `end`.
//! - `msg QNAME CLASS TYPE RCODE KIND TTL [ede=N]` opens an entry of the message store:
//!   the question, the RCODE (`NOERROR`, `NXDOMAIN`... or `RCODEn`), the kind
//!   (`positive`, `nodata`, `nxdomain`), the seconds the answer had left and, when it
//!   carries one, its Extended DNS Error code; then its records in message order, each
//!   after its section (`answer`, `authority`, `additional`), then `end`. Consecutive
//!   records of one section, owner, type, class and TTL make one RRset.
//! - `eof rrsets=N messages=M` ends the dump with the number of blocks: a dump cut
//!   short, or one that lost blocks, is refused.
//!
//! RRsets come first (as in Unbound's dump), then the answers. Only fresh entries are
//! written (not stale ones kept for `serve-expired`).
//!
//! # Loading
//!
//! [`Cache::load`] reads the whole text before it changes anything: a malformed line is
//! an error naming its number and what is wrong, and then **nothing** is loaded. A dump
//! that reads is loaded entry by entry as the cache takes replies: each TTL minus the
//! seconds since the dump was written (by the wall clock; none when the clock went back)
//! becomes an expiry from now, capped by `cache-max-ttl` (`cache-max-negative-ttl` for
//! negative answers); entries with nothing left are skipped, and so are names that no
//! forward or stub zone of the configuration in force would resolve (the caller tells
//! which zone does). An RRset goes through the rank rule (a live cached RRset of a higher
//! rank stays), an answer replaces the cached answer to the same question; both stores
//! stay within their size and evict as usual. A dump is trusted: its records are served
//! as they are (no bailiwick check), which is why loading one is an administrator's
//! operation.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write as _;

use skua_engine::name::WireName;
use skua_engine::rr::Rr;
use skua_engine::text::{class_from_str, parse_rr, rr_to_string, rtype_from_str, rtype_to_string};
use skua_engine::wire::{HEADER_LEN, flags};

use crate::cache::{Cache, Key, Kind, MsgShard, MsgView, Rendered, SetShard, ShardLock};
use crate::msg::{Message, Record};
use crate::render::{Section, patch_ttls, render};
use crate::rrset::{Rank, RrSet};

/// First word of a dump.
pub const MAGIC: &str = "skua-cache-dump";
/// The format version written and read.
pub const VERSION: u32 = 1;

/// What the cache holds for one name ([`Cache::lookup_name`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameEntries {
    /// Live RRsets owned by the name, every type.
    pub rrsets: Vec<RrSetEntry>,
    /// Answers to questions for the name, every type; stale ones included.
    pub messages: Vec<MessageEntry>,
}

/// A live RRset and the seconds it has left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrSetEntry {
    /// The RRset as stored (its `ttl` is the one it came with).
    pub set: RrSet,
    /// Seconds left.
    pub ttl: u32,
}

/// A cached answer, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageEntry {
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// RCODE.
    pub rcode: u16,
    /// Positive, NODATA or NXDOMAIN.
    pub kind: Kind,
    /// Seconds left; 0 when stale.
    pub ttl: u32,
    /// Expired, kept for `serve-expired` (sent with the `serve-expired-reply-ttl`).
    pub stale: bool,
    /// The Extended DNS Error it carries.
    pub ede: Option<u16>,
    /// Its records with the TTLs a client gets now (0 for a stale entry's), by section.
    pub records: Vec<(Section, Record)>,
}

/// What [`Cache::load`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// RRsets offered to the RRset store.
    pub rrsets: usize,
    /// Answers stored.
    pub messages: usize,
    /// Entries skipped: their TTL ran out since the dump was written.
    pub expired: usize,
    /// Entries skipped: no forward or stub zone resolves their name now.
    pub outside: usize,
}

/// Why a dump could not be loaded (nothing was).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// Line number, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// A rank's name in dumps and the API.
pub fn rank_name(r: Rank) -> &'static str {
    match r {
        Rank::Additional => "additional",
        Rank::AuthorityNonAuth => "authority-nonauth",
        Rank::AnswerNonAuth => "answer-nonauth",
        Rank::AuthorityAuth => "authority-auth",
        Rank::AnswerAuth => "answer-auth",
    }
}

fn rank_from(s: &str) -> Option<Rank> {
    [
        Rank::Additional,
        Rank::AuthorityNonAuth,
        Rank::AnswerNonAuth,
        Rank::AuthorityAuth,
        Rank::AnswerAuth,
    ]
    .into_iter()
    .find(|r| rank_name(*r) == s)
}

/// A kind's name in dumps and the API.
pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Positive => "positive",
        Kind::NoData => "nodata",
        Kind::NxDomain => "nxdomain",
    }
}

fn kind_from(s: &str) -> Option<Kind> {
    [Kind::Positive, Kind::NoData, Kind::NxDomain]
        .into_iter()
        .find(|k| kind_name(*k) == s)
}

/// A section's name in dumps and the API.
pub fn section_name(s: Section) -> &'static str {
    match s {
        Section::Answer => "answer",
        Section::Authority => "authority",
        Section::Additional => "additional",
    }
}

fn section_from(s: &str) -> Option<Section> {
    [Section::Answer, Section::Authority, Section::Additional]
        .into_iter()
        .find(|x| section_name(*x) == s)
}

const RCODES: [&str; 11] = [
    "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET",
    "NXRRSET", "NOTAUTH", "NOTZONE",
];

/// An RCODE's mnemonic (RFC 6895 §2.3), or `RCODEn`.
pub fn rcode_name(r: u16) -> String {
    match RCODES.get(usize::from(r)) {
        Some(n) => (*n).to_string(),
        None => format!("RCODE{r}"),
    }
}

/// An RCODE a cached answer can carry (4 bits), by mnemonic or `RCODEn`.
fn rcode_from(s: &str) -> Option<u16> {
    if let Some(i) = RCODES.iter().position(|n| n.eq_ignore_ascii_case(s)) {
        return Some(i as u16);
    }
    let n = s.strip_prefix("RCODE")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok().filter(|r| *r <= 15)
}

/// A class as [`rr_to_string`] writes it.
pub fn class_name(c: u16) -> String {
    match c {
        1 => "IN".into(),
        3 => "CH".into(),
        c => format!("CLASS{c}"),
    }
}

/// A record in presentation format with the given TTL; `None` for an owner that is not a
/// wire name (cannot happen for what the cache holds).
pub fn record_text(owner: &[u8], rtype: u16, class: u16, ttl: u32, rdata: &[u8]) -> Option<String> {
    Some(rr_to_string(&Rr {
        owner: WireName::from_wire(owner).ok()?,
        rtype,
        class,
        ttl,
        rdata: rdata.to_vec(),
    }))
}

/// Reads a stored answer back into records, TTLs as sent at `now` (0 once expired).
fn read_back(m: &MsgView<'_>, now: u32) -> Option<MessageEntry> {
    let r = m.rendered;
    let mut wire = Vec::with_capacity(HEADER_LEN + m.name.len() + 4 + r.body.tail.len());
    wire.extend_from_slice(&[0, 0]);
    wire.extend_from_slice(&r.flags.to_be_bytes());
    wire.extend_from_slice(&[0, 1]);
    wire.extend_from_slice(&r.body.counts);
    wire.extend_from_slice(m.name);
    wire.extend_from_slice(&m.qtype.to_be_bytes());
    wire.extend_from_slice(&m.qclass.to_be_bytes());
    let base = wire.len();
    wire.extend_from_slice(&r.body.tail);
    patch_ttls(&mut wire[base..], &r.body.ttls, now, None);
    let msg = Message::parse(&wire).ok()?;
    let mut records = Vec::with_capacity(msg.answer.len() + msg.authority.len());
    for (sec, list) in [
        (Section::Answer, msg.answer),
        (Section::Authority, msg.authority),
        (Section::Additional, msg.additional),
    ] {
        records.extend(list.into_iter().map(|rec| (sec, rec)));
    }
    Some(MessageEntry {
        qtype: m.qtype,
        qclass: m.qclass,
        rcode: r.flags & 0xf,
        kind: r.kind,
        ttl: r.expires.saturating_sub(now),
        stale: m.stale,
        ede: r.ede,
        records,
    })
}

impl<M: ShardLock<MsgShard>, S: ShardLock<SetShard>> Cache<M, S> {
    /// What the cache holds for the lower-cased wire name `lower` at `now`: its live
    /// RRsets and the answers to questions for it (stale ones included, marked), sorted by
    /// type. Counts no hit, changes nothing.
    pub fn lookup_name(&self, lower: &[u8], now: u32) -> NameEntries {
        let mut out = NameEntries::default();
        self.for_each_rrset_of(lower, now, |set, expires| {
            out.rrsets.push(RrSetEntry {
                set: set.clone(),
                ttl: expires.saturating_sub(now),
            });
        });
        self.for_each_msg(now, Some(lower), |m| {
            if let Some(e) = read_back(m, now) {
                out.messages.push(e);
            }
        });
        out.rrsets
            .sort_by_key(|e| (e.set.rtype, e.set.class, e.set.owner.clone()));
        out.messages.sort_by_key(|e| (e.qtype, e.qclass));
        out
    }

    /// The whole cache's fresh entries as text (see the module's documentation) at `now`
    /// (the cache's clock); `wall` is the wall clock's UNIX seconds, written in the first
    /// line so that a load can age the TTLs. Holds one shard's read lock at a time while
    /// it formats that shard's entries.
    pub fn dump(&self, now: u32, wall: u64) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{MAGIC} {VERSION} written={wall}");
        out.push_str("; TTLs are the seconds left when written; `skuactl cache load FILE`\n");
        let mut sets = 0usize;
        self.for_each_rrset(now, |set, expires| {
            let ttl = expires.saturating_sub(now);
            let lines: Option<Vec<String>> = set
                .rdatas
                .iter()
                .map(|rd| record_text(&set.owner, set.rtype, set.class, ttl, rd))
                .collect();
            let Some(lines) = lines else { return };
            let _ = writeln!(out, "rrset {}", rank_name(set.rank));
            for l in lines {
                let _ = writeln!(out, "  {l}");
            }
            out.push_str("end\n");
            sets += 1;
        });
        let mut msgs = 0usize;
        self.for_each_msg(now, None, |m| {
            if m.stale {
                return;
            }
            let Some(e) = read_back(m, now) else { return };
            let Ok(qname) = WireName::from_wire(m.name) else {
                return;
            };
            let lines: Option<Vec<String>> = e
                .records
                .iter()
                .map(|(sec, r)| {
                    record_text(&r.owner, r.rtype, r.class, r.ttl, &r.rdata)
                        .map(|t| format!("  {} {t}", section_name(*sec)))
                })
                .collect();
            let Some(lines) = lines else { return };
            let _ = write!(
                out,
                "msg {qname} {} {} {} {} {}",
                class_name(m.qclass),
                rtype_to_string(m.qtype),
                rcode_name(e.rcode),
                kind_name(e.kind),
                e.ttl
            );
            if let Some(ede) = e.ede {
                let _ = write!(out, " ede={ede}");
            }
            out.push('\n');
            for l in lines {
                out.push_str(&l);
                out.push('\n');
            }
            out.push_str("end\n");
            msgs += 1;
        });
        let _ = writeln!(out, "eof rrsets={sets} messages={msgs}");
        out
    }

    /// Reads a dump (see the module's documentation) into the cache at `now` (the cache's
    /// clock); `wall`: the wall clock's UNIX seconds (a TTL loses the seconds since the
    /// dump was written); `zone_of`: the id of the forward or stub zone that resolves a
    /// lower-cased name now, `None` when none does or its answers are not cached (such
    /// entries are skipped). On error nothing was loaded.
    pub fn load(
        &self,
        text: &str,
        now: u32,
        wall: u64,
        zone_of: impl Fn(&[u8]) -> Option<u32>,
    ) -> Result<Loaded, LoadError> {
        Ok(self.load_parsed(Dump::parse(text)?, now, wall, zone_of))
    }

    /// [`Self::load`] of a dump already read (the daemon records what it loads before it
    /// does).
    pub fn load_parsed(
        &self,
        parsed: Dump,
        now: u32,
        wall: u64,
        zone_of: impl Fn(&[u8]) -> Option<u32>,
    ) -> Loaded {
        let age = u32::try_from(wall.saturating_sub(parsed.written)).unwrap_or(u32::MAX);
        let c = self.config();
        let mut done = Loaded::default();
        for mut set in parsed.sets {
            let left = set.ttl.saturating_sub(age);
            if left == 0 {
                done.expired += 1;
                continue;
            }
            if zone_of(&set.owner.to_ascii_lowercase()).is_none() {
                done.outside += 1;
                continue;
            }
            set.ttl = left.min(c.max_ttl);
            self.offer(set, now);
            done.rrsets += 1;
        }
        for m in parsed.msgs {
            let left = m
                .sets
                .iter()
                .map(|(s, _)| s.ttl)
                .chain([m.ttl])
                .min()
                .unwrap_or(0)
                .saturating_sub(age);
            if left == 0 {
                done.expired += 1;
                continue;
            }
            let Some(zone) = zone_of(&m.qname) else {
                done.outside += 1;
                continue;
            };
            let cap = match m.kind {
                Kind::Positive => c.max_ttl,
                _ => c.max_negative_ttl.min(c.max_ttl),
            };
            let expires = now.saturating_add(left.min(cap));
            let sets: Vec<(RrSet, Section, u32)> = m
                .sets
                .into_iter()
                .map(|(s, sec)| {
                    let e = now.saturating_add(s.ttl.saturating_sub(age).min(c.max_ttl));
                    (s, sec, e.max(expires))
                })
                .collect();
            let body = render(&m.qname, sets.iter().map(|(s, sec, e)| (s, *sec, *e)));
            let r = Rendered {
                flags: flags::QR | flags::RA | m.rcode,
                kind: m.kind,
                body,
                expires,
                ttl: expires - now,
                zone,
                ede: m.ede,
            };
            self.insert(&Key::new(&m.qname, m.qtype, m.qclass), r, now);
            done.messages += 1;
        }
        done
    }
}

/// A message block, read.
struct MsgBlock {
    qname: Vec<u8>,
    qtype: u16,
    qclass: u16,
    rcode: u16,
    kind: Kind,
    ttl: u32,
    ede: Option<u16>,
    /// RRsets (their `ttl` as written) with their section.
    sets: Vec<(RrSet, Section)>,
}

/// A dump read whole ([`Dump::parse`]), not loaded yet.
pub struct Dump {
    written: u64,
    sets: Vec<RrSet>,
    msgs: Vec<MsgBlock>,
}

impl Dump {
    /// Reads a dump; the first malformed line is the error.
    pub fn parse(text: &str) -> Result<Dump, LoadError> {
        parse(text)
    }

    /// When it was written (wall clock, UNIX seconds).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Its RRset blocks.
    pub fn rrsets(&self) -> usize {
        self.sets.len()
    }

    /// Its answer blocks.
    pub fn messages(&self) -> usize {
        self.msgs.len()
    }
}

enum Block {
    None,
    Set(Option<RrSet>, Rank),
    Msg(MsgBlock),
}

/// Splits at blanks that are not escaped with a backslash (names may hold `\ `).
fn words(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = None;
    let mut escaped = false;
    for (i, ch) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if ch == '\\' {
            escaped = true;
            start.get_or_insert(i);
        } else if ch.is_ascii_whitespace() {
            if let Some(s) = start.take() {
                out.push(&line[s..i]);
            }
        } else {
            start.get_or_insert(i);
        }
    }
    if let Some(s) = start {
        out.push(&line[s..]);
    }
    out
}

/// `key=N` of a header word.
fn keyed<T: core::str::FromStr>(word: Option<&str>, key: &str) -> Option<T> {
    let v = word?.strip_prefix(key)?.strip_prefix('=')?;
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// One record of a block: presentation format with an explicit TTL.
fn record(text: &str) -> Result<Rr, String> {
    let rr = parse_rr(text, None, u32::MAX).map_err(|e| format!("bad record: {}", e.message()))?;
    if rr.ttl == u32::MAX {
        return Err("a record needs its TTL".into());
    }
    Ok(rr)
}

fn parse_msg_header(w: &[&str]) -> Result<MsgBlock, String> {
    let usage = "expected msg QNAME CLASS TYPE RCODE KIND TTL [ede=N]";
    if !(7..=8).contains(&w.len()) {
        return Err(usage.into());
    }
    let qname = WireName::parse(w[1], None)
        .map_err(|e| format!("bad name '{}': {e}", w[1]))?
        .to_lowercase();
    let qclass = class_from_str(w[2]).ok_or_else(|| format!("bad class '{}'", w[2]))?;
    let qtype = rtype_from_str(w[3]).ok_or_else(|| format!("bad type '{}'", w[3]))?;
    let rcode = rcode_from(w[4]).ok_or_else(|| format!("bad RCODE '{}'", w[4]))?;
    let kind = kind_from(w[5])
        .ok_or_else(|| format!("bad kind '{}' (positive, nodata, nxdomain)", w[5]))?;
    if (kind == Kind::NxDomain) != (rcode == 3) {
        return Err(format!(
            "kind {} does not go with RCODE {}",
            w[5],
            rcode_name(rcode)
        ));
    }
    let ttl = w[6]
        .parse::<u32>()
        .ok()
        .filter(|_| w[6].bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("bad TTL '{}'", w[6]))?;
    let ede = match w.get(7) {
        None => None,
        Some(x) => Some(keyed::<u16>(Some(x), "ede").ok_or_else(|| format!("bad '{x}'; {usage}"))?),
    };
    Ok(MsgBlock {
        qname: qname.as_bytes().to_vec(),
        qtype,
        qclass,
        rcode,
        kind,
        ttl,
        ede,
        sets: Vec::new(),
    })
}

/// Adds a record to the RRset being built, or says why it does not belong to it.
fn join(set: &mut Option<RrSet>, rr: Rr, rank: Rank) -> Result<(), String> {
    match set {
        None => {
            *set = Some(RrSet {
                owner: rr.owner.as_bytes().to_vec(),
                rtype: rr.rtype,
                class: rr.class,
                ttl: rr.ttl,
                rdatas: alloc::vec![rr.rdata],
                rank,
            });
            Ok(())
        }
        Some(s) => {
            if !s.owner.eq_ignore_ascii_case(rr.owner.as_bytes())
                || s.rtype != rr.rtype
                || s.class != rr.class
            {
                return Err("an rrset block holds one owner, type and class".into());
            }
            if s.ttl != rr.ttl {
                return Err("the records of an RRset have one TTL".into());
            }
            s.rdatas.push(rr.rdata);
            Ok(())
        }
    }
}

fn parse(text: &str) -> Result<Dump, LoadError> {
    let mut written = None;
    let mut sets = Vec::new();
    let mut msgs = Vec::new();
    let mut block = Block::None;
    let mut eof = false;
    let mut last = 0;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        last = n;
        let at = |reason: String| LoadError { line: n, reason };
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        if eof {
            return Err(at("text after the eof line".into()));
        }
        let w = words(line);
        if written.is_none() {
            if w.first() != Some(&MAGIC) {
                return Err(at(format!(
                    "not a cache dump: the first line must be '{MAGIC} {VERSION} written=SECONDS'"
                )));
            }
            if w.get(1) != Some(&"1") {
                return Err(at(format!(
                    "dump format version {}: this skuad reads version {VERSION}",
                    w.get(1).unwrap_or(&"(none)")
                )));
            }
            written = Some(
                keyed::<u64>(w.get(2).copied(), "written")
                    .filter(|_| w.len() == 3)
                    .ok_or_else(|| at("expected written=UNIX-SECONDS after the version".into()))?,
            );
            continue;
        }
        match &mut block {
            Block::None => match w[0] {
                "rrset" => {
                    let rank = (w.len() == 2)
                        .then(|| rank_from(w[1]))
                        .flatten()
                        .ok_or_else(|| {
                            at("expected rrset RANK (additional, authority-nonauth, answer-nonauth, authority-auth, answer-auth)".into())
                        })?;
                    block = Block::Set(None, rank);
                }
                "msg" => block = Block::Msg(parse_msg_header(&w).map_err(at)?),
                "eof" => {
                    let (rs, ms) = (
                        keyed::<usize>(w.get(1).copied(), "rrsets"),
                        keyed::<usize>(w.get(2).copied(), "messages"),
                    );
                    match (rs, ms, w.len()) {
                        (Some(r), Some(m), 3) if r == sets.len() && m == msgs.len() => {}
                        (Some(r), Some(m), 3) => {
                            return Err(at(format!(
                                "the dump says {r} rrsets and {m} messages, it holds {} and {}",
                                sets.len(),
                                msgs.len()
                            )));
                        }
                        _ => return Err(at("expected eof rrsets=N messages=M".into())),
                    }
                    eof = true;
                }
                other => {
                    return Err(at(format!("expected rrset, msg or eof, not '{other}'")));
                }
            },
            Block::Set(set, rank) => {
                if line == "end" {
                    let s = set
                        .take()
                        .ok_or_else(|| at("an rrset block without records".into()))?;
                    sets.push(s);
                    block = Block::None;
                } else {
                    let rank = *rank;
                    join(set, record(line).map_err(at)?, rank).map_err(at)?;
                }
            }
            Block::Msg(m) => {
                if line == "end" {
                    if m.kind == Kind::Positive
                        && !m.sets.iter().any(|(_, s)| *s == Section::Answer)
                    {
                        return Err(at("a positive answer without answer records".into()));
                    }
                    let Block::Msg(m) = core::mem::replace(&mut block, Block::None) else {
                        unreachable!("in a msg block");
                    };
                    msgs.push(m);
                } else {
                    let (sec, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                    let sec = section_from(sec).ok_or_else(|| {
                        at(format!(
                            "expected end, or a section (answer, authority, additional) and a record, not '{sec}'"
                        ))
                    })?;
                    let rr = record(rest.trim()).map_err(at)?;
                    if m.sets.last().is_some_and(|(_, s)| *s > sec) {
                        return Err(at(
                            "sections out of order (answer, then authority, then additional)"
                                .into(),
                        ));
                    }
                    let same = m.sets.last().is_some_and(|(s, last_sec)| {
                        *last_sec == sec
                            && s.owner.eq_ignore_ascii_case(rr.owner.as_bytes())
                            && s.rtype == rr.rtype
                            && s.class == rr.class
                            && s.ttl == rr.ttl
                    });
                    if same {
                        if let Some((s, _)) = m.sets.last_mut() {
                            s.rdatas.push(rr.rdata);
                        }
                    } else {
                        let mut one = None;
                        join(&mut one, rr, Rank::Additional).map_err(at)?;
                        if let Some(s) = one {
                            m.sets.push((s, sec));
                        }
                    }
                }
            }
        }
    }
    let end = |reason: &str| LoadError {
        line: last + 1,
        reason: reason.into(),
    };
    match (written, &block, eof) {
        (None, _, _) => Err(end("empty: no dump header")),
        (_, Block::Set(..) | Block::Msg(_), _) => {
            Err(end("the dump ends inside a block (cut short?)"))
        }
        (_, _, false) => Err(end("the dump ends without its eof line (cut short?)")),
        (Some(written), _, true) => Ok(Dump {
            written,
            sets,
            msgs,
        }),
    }
}

#[cfg(test)]
mod tests;
