//! Answers compiled at load time.
//!
//! Every name the engine can answer for becomes a node in a hash table keyed by its
//! lower-cased wire name. Each node carries two *type maps* — what to answer when the query
//! name **is** this node (`exact`) and when this node is the closest existing ancestor of the
//! query name (`below`: NXDOMAIN, wildcard, referral, redirect...). A type map sends a qtype
//! to an [`AnsRef`]: either a verdict (drop, not ours) or a **response rendered once, at load**:
//! header flags and counts, then the bytes that follow the question. At query time the engine
//! copies the query's own question (which keeps the client's 0x20 case) and these bytes, then
//! patches the ID, RD/CD and a few compression pointers. No name is parsed or compressed on
//! the hot path.
//!
//! Two compile modes keep that possible:
//! - *exact* answers are rendered for one query-name length, so they use full name
//!   compression (RFC 1035 §4.1.4) against the question and earlier records;
//! - *relocatable* answers (NXDOMAIN with SOA, wildcard, redirect, referrals) serve any query
//!   name under a node: owners that equal the query name are written as a pointer to offset
//!   12, owners that are a suffix of it (zone apex, delegation point) as a pointer patched
//!   per query, everything else uncompressed.
//!
//! Zone semantics live here, in the compile step: Unbound's `local-zone` types
//! ([`build_local`]) and authoritative zones (RFC 1034 §4.3.2, [`build_auth`]).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;
use core::hash::{BuildHasher, Hasher};

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use crate::localzone::LocalZoneType;
use crate::name::{self, WireName};
use crate::rr::{self, Rr, rtype};
use crate::rrl::{AccountName, AnswerRrl, ResponseClass};
use crate::wire::{HEADER_LEN, flags, rcode};

/// A compiled answer or a verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AnsRef(u32);

impl AnsRef {
    /// Drop the query (deny zones).
    pub const DROP: Self = Self(u32::MAX);
    /// Drop the query and log the client (inform_deny).
    pub const DROP_INFORM: Self = Self(u32::MAX - 1);
    /// Not answered from local data: resolve normally (today: REFUSED).
    pub const NOT_LOCAL: Self = Self(u32::MAX - 2);

    fn is_rendered(self) -> bool {
        self.0 < u32::MAX - 2
    }
}

/// A rendered answer, borrowed from the store.
#[derive(Clone, Copy, Debug)]
pub struct Answer<'a> {
    /// Header flags (QR, AA, RA, RCODE); the engine adds RD and CD from the query.
    pub flags: u16,
    /// ANCOUNT, NSCOUNT, ARCOUNT, big-endian, ready to copy into the header.
    pub counts: &'a [u8],
    /// Compression pointers to patch: (offset in `tail`, length of the query-name suffix
    /// they point to).
    patches: &'a [u8],
    /// RRset boundaries for truncation: (end offset in `tail`, counts up to there).
    bounds: &'a [u8],
    /// The bytes after the question.
    pub tail: &'a [u8],
    /// Log the client (inform zones).
    pub inform: bool,
    /// The record's meta byte (bits 1-3 RRL class, 4-5 account name kind).
    meta: u8,
    /// The account name's hash (8 bytes, little-endian) for a fixed name, else empty.
    rrl_name: &'a [u8],
}

impl Answer<'static> {
    /// An answer with no records and these header flags.
    pub(crate) fn empty(flags: u16) -> Self {
        Answer {
            flags,
            counts: &[0; 6],
            patches: &[],
            bounds: &[],
            tail: &[],
            inform: false,
            meta: (ResponseClass::classify(
                flags & flags::RCODE_MASK,
                0,
                flags & flags::AA != 0,
                false,
            ) as u8)
                << 1,
            rrl_name: &[],
        }
    }
}

impl<'a> Answer<'a> {
    /// An answer rendered outside the store (the resolver's cache): flags, counts, tail
    /// and truncation bounds in the store's formats, nothing to patch, rate-limited by
    /// `class` under the query name.
    pub(crate) fn rendered(
        flags: u16,
        counts: &'a [u8],
        bounds: &'a [u8],
        tail: &'a [u8],
        class: ResponseClass,
    ) -> Self {
        Answer {
            flags,
            counts,
            patches: &[],
            bounds,
            tail,
            inform: false,
            meta: (class as u8) << 1,
            rrl_name: &[],
        }
    }

    /// How response rate limiting counts it (class, account name), decided at compile time.
    #[inline]
    pub fn rrl(&self) -> AnswerRrl {
        decode_rrl(self.meta, self.rrl_name)
    }

    /// Compression pointers to write for a query name of `qname_len` octets:
    /// yields (offset in tail, pointer value).
    pub fn patches(&self, qname_len: usize) -> impl Iterator<Item = (usize, u16)> + 'a {
        let qlen = qname_len;
        self.patches.chunks_exact(3).map(move |p| {
            let off = usize::from(u16::from_le_bytes([p[0], p[1]]));
            let suffix = usize::from(p[2]);
            // The suffix is a proper ancestor of the query name by construction (the node
            // it belongs to was found by walking up the query name), so it fits.
            let target = HEADER_LEN + qlen.saturating_sub(suffix);
            // Cannot truncate: target < 12 + 255.
            (off, 0xc000 | target as u16)
        })
    }

    /// The longest prefix of the answer that fits `room` bytes of tail, at an RRset
    /// boundary: (tail length, counts, truncated-in-answer-or-authority). RFC 2181 §9: an
    /// RRset is never split; dropping additional records alone does not set TC.
    pub fn truncate(&self, room: usize) -> (usize, [u8; 6], bool) {
        let mut best = (0usize, [0u8; 6]);
        for b in self.bounds.chunks_exact(8) {
            let end = usize::from(u16::from_le_bytes([b[0], b[1]]));
            if end > room {
                break;
            }
            best = (end, [b[2], b[3], b[4], b[5], b[6], b[7]]);
        }
        let (an, ns) = (
            u16::from_be_bytes([self.counts[0], self.counts[1]]),
            u16::from_be_bytes([self.counts[2], self.counts[3]]),
        );
        let (kept_an, kept_ns) = (
            u16::from_be_bytes([best.1[0], best.1[1]]),
            u16::from_be_bytes([best.1[2], best.1[3]]),
        );
        (best.0, best.1, kept_an < an || kept_ns < ns)
    }
}

#[derive(Clone, Copy)]
struct Node {
    name_off: u32,
    name_len: u8,
    exact: u32,
    below: u32,
}

#[derive(Clone, Copy)]
struct Map {
    start: u32,
    len: u32,
    fallback: AnsRef,
}

/// One compiled tree of names (the local zones, or the authoritative zones).
pub struct Tree {
    table: HashTable<u32>,
    nodes: Vec<Node>,
    names: Vec<u8>,
    maps: Vec<Map>,
    entries: Vec<(u16, AnsRef)>,
    answers: Vec<u8>,
    /// The top-level labels (wire form, lower case, root label included) of every name in
    /// the tree, or `None` when the root itself is a node: a query under another TLD cannot
    /// be enclosed by any node, so its lookup ends after one comparison instead of walking
    /// every suffix (auth-zone queries first miss the local-zone tree).
    tlds: Option<Vec<Vec<u8>>>,
}

/// The last label of a valid lower-cased wire name, with the root label (`\x03com\x00`);
/// `None` for the root itself.
fn tld(name: &[u8]) -> Option<&[u8]> {
    let mut pos = 0usize;
    let mut last = None;
    while let Some(&l) = name.get(pos) {
        if l == 0 {
            break;
        }
        last = Some(pos);
        pos += 1 + usize::from(l);
    }
    last.and_then(|p| name.get(p..))
}

/// Bytes before the patches in an arena record: flags (2), counts (6), tail length (2, LE),
/// patch count, bound count, meta (bit 0 inform, bits 1-3 RRL class, bits 4-5 RRL account
/// name kind); then, for a fixed account name, its 8-byte hash (LE).
const RECORD_HEADER: usize = 13;

fn encode_rrl(inform: bool, rrl: AnswerRrl, out: &mut Vec<u8>) {
    let (kind, hash) = match rrl.name {
        AccountName::Qname => (0u8, None),
        AccountName::Fixed(h) => (1, Some(h)),
        AccountName::Wildcard(h) => (2, Some(h)),
    };
    out.push(u8::from(inform) | (rrl.class as u8) << 1 | kind << 4);
    if let Some(h) = hash {
        out.extend_from_slice(&h.to_le_bytes());
    }
}

/// Bytes of account-name hash after a record's meta byte: 8 for a fixed or wildcard
/// account name (kinds 1 and 2 of [`encode_rrl`]), none for the query name.
#[inline(always)]
fn rrl_name_len(meta: u8) -> usize {
    if (meta >> 4) & 3 == 0 { 0 } else { 8 }
}

/// The RRL facts of a record: its meta byte and the 8-byte name hash that follows it (for
/// a fixed account name).
#[inline(always)]
fn decode_rrl(meta: u8, hash: &[u8]) -> AnswerRrl {
    let class = ResponseClass::from_bits((meta >> 1) & 7);
    let h = || {
        let mut b = [0u8; 8];
        if let Some(x) = hash.get(..8) {
            b.copy_from_slice(x);
        }
        u64::from_le_bytes(b)
    };
    let name = match (meta >> 4) & 3 {
        1 => AccountName::Fixed(h()),
        2 => AccountName::Wildcard(h()),
        _ => AccountName::Qname,
    };
    AnswerRrl { class, name }
}

/// The hash of a lower-cased wire name: the key of the answer tables, and of the names of
/// response-rate-limiting accounts (so the name hashed for the lookup is not hashed again).
#[inline(always)]
pub fn name_hash(lower: &[u8]) -> u64 {
    // Wire names are self-delimiting; foldhash mixes the length in anyway.
    let mut h = FixedState::with_seed(HASH_SEED).build_hasher();
    h.write(lower);
    h.finish()
}

/// Fixed seed: the keys come from configuration, not from the network, so a flooding
/// attacker cannot choose colliding keys; lookups of absent names cost one probe sequence.
const HASH_SEED: u64 = 0x5b0a_d0c5_5c0a_1234;

impl Tree {
    fn new() -> Self {
        Self {
            table: HashTable::new(),
            nodes: Vec::new(),
            names: Vec::new(),
            maps: Vec::new(),
            entries: Vec::new(),
            answers: Vec::new(),
            tlds: Some(Vec::new()),
        }
    }

    /// Number of names (nodes).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the tree holds no name.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Heap bytes held by the compiled tables (for memory reporting).
    pub fn heap_bytes(&self) -> usize {
        self.table.capacity() * (core::mem::size_of::<u32>() + 1)
            + self.nodes.capacity() * core::mem::size_of::<Node>()
            + self.names.capacity()
            + self.maps.capacity() * core::mem::size_of::<Map>()
            + self.entries.capacity() * core::mem::size_of::<(u16, AnsRef)>()
            + self.answers.capacity()
    }

    #[inline]
    fn find(&self, lower: &[u8], h: u64) -> Option<&Node> {
        self.table
            .find(h, |&i| {
                let n = &self.nodes[i as usize];
                let s = n.name_off as usize;
                &self.names[s..s + usize::from(n.name_len)] == lower
            })
            .map(|&i| &self.nodes[i as usize])
    }

    #[inline]
    fn map_lookup(&self, map: u32, qtype: u16) -> AnsRef {
        let m = &self.maps[map as usize];
        let s = m.start as usize;
        self.entries[s..s + m.len as usize]
            .iter()
            .find(|e| e.0 == qtype)
            .map_or(m.fallback, |e| e.1)
    }

    /// What this tree answers for `qname_lower` (lower-cased wire name) and `qtype`;
    /// `None` when no node of the tree encloses the name.
    #[inline]
    pub fn lookup(&self, qname_lower: &[u8], qtype: u16) -> Option<AnsRef> {
        self.lookup_hashed(qname_lower, name_hash(qname_lower), qtype)
    }

    /// [`Tree::lookup`] with the name's [`name_hash`] already computed.
    #[inline]
    pub fn lookup_hashed(&self, qname_lower: &[u8], hash: u64, qtype: u16) -> Option<AnsRef> {
        if let (Some(tlds), Some(t)) = (&self.tlds, tld(qname_lower))
            && !tlds.iter().any(|x| x.as_slice() == t)
        {
            return None;
        }
        if let Some(n) = self.find(qname_lower, hash) {
            return Some(self.map_lookup(n.exact, qtype));
        }
        let mut pos = 0usize;
        while let Some(&len) = qname_lower.get(pos) {
            if len == 0 {
                break;
            }
            pos += 1 + usize::from(len);
            let suffix = qname_lower.get(pos..)?;
            if let Some(n) = self.find(suffix, name_hash(suffix)) {
                return Some(self.map_lookup(n.below, qtype));
            }
        }
        None
    }

    /// Every (lower-cased wire name, qtype) this tree has an exact-match entry for, and for
    /// each name also the types its fallback covers among `extra` (e.g. A and AAAA, whose
    /// NODATA answers are common queries). Order: names in insertion order. For dataplanes
    /// that precompute answers further (the XDP answer map): they must still ask the
    /// engine for each answer, since another tree may shadow this one.
    pub fn exact_keys<'a>(
        &'a self,
        extra: &'a [u16],
    ) -> impl Iterator<Item = (&'a [u8], u16)> + 'a {
        self.nodes.iter().flat_map(move |n| {
            let s = n.name_off as usize;
            let name = &self.names[s..s + usize::from(n.name_len)];
            let m = &self.maps[n.exact as usize];
            let st = m.start as usize;
            let entries = &self.entries[st..st + m.len as usize];
            let listed = entries.iter().map(|e| e.0);
            let more = extra
                .iter()
                .copied()
                .filter(move |t| !entries.iter().any(|e| e.0 == *t));
            listed.chain(more).map(move |t| (name, t))
        })
    }

    /// The rendered answer behind `r`, or `None` for a verdict.
    #[inline]
    pub fn answer(&self, r: AnsRef) -> Option<Answer<'_>> {
        if !r.is_rendered() {
            return None;
        }
        let a = &self.answers[r.0 as usize..];
        let tail_len = usize::from(u16::from_le_bytes([a[8], a[9]]));
        let np = usize::from(a[10]) * 3;
        let nb = usize::from(a[11]) * 8;
        let meta = a[12];
        let p = RECORD_HEADER + rrl_name_len(meta);
        Some(Answer {
            flags: u16::from_be_bytes([a[0], a[1]]),
            counts: &a[2..8],
            patches: &a[p..p + np],
            bounds: &a[p + np..p + np + nb],
            tail: &a[p + np + nb..p + np + nb + tail_len],
            inform: meta & 1 != 0,
            meta,
            rrl_name: &a[RECORD_HEADER..p],
        })
    }
}

/// Errors found while compiling zone data. `tag` is the caller's handle passed with the
/// offending record (e.g. an index into its table of config locations).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The same local zone configured twice.
    DuplicateZone(WireName),
    /// A CNAME next to other data at one name (RFC 1034 §3.6.2, RFC 2181 §10.1).
    CnameAndOtherData {
        /// The name.
        owner: WireName,
        /// Caller's tag of the record that made the conflict.
        tag: u32,
    },
    /// Two CNAMEs at one name (RFC 2181 §10.1).
    MultipleCnames {
        /// The name.
        owner: WireName,
        /// Caller's tag.
        tag: u32,
    },
    /// An authoritative zone without exactly one SOA at its apex (RFC 1035 §5.2).
    MissingSoa(WireName),
    /// A record outside its authoritative zone.
    OutOfZone {
        /// The zone.
        zone: WireName,
        /// The record owner.
        owner: WireName,
        /// Caller's tag.
        tag: u32,
    },
    /// A rendered answer does not fit a 64 KiB message.
    TooLarge(WireName),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateZone(z) => write!(f, "local-zone {z} is configured twice"),
            Self::CnameAndOtherData { owner, .. } => {
                write!(f, "{owner} has a CNAME and other data (RFC 2181 §10.1)")
            }
            Self::MultipleCnames { owner, .. } => write!(f, "{owner} has more than one CNAME"),
            Self::MissingSoa(z) => write!(f, "zone {z} has no SOA record at its apex"),
            Self::OutOfZone { zone, owner, .. } => {
                write!(f, "record {owner} is outside zone {zone}")
            }
            Self::TooLarge(n) => write!(f, "the answer for {n} exceeds 65535 bytes"),
        }
    }
}

impl core::error::Error for BuildError {}

// ---------------------------------------------------------------------------------------
// Rendering

/// Where an owner name comes from in a rendered answer.
#[derive(Clone, Copy)]
enum NameOut<'a> {
    /// The query name (pointer to offset 12).
    Qname,
    /// A suffix of the query name of this many wire octets (patched per query).
    QnameSuffix(u8),
    /// A literal name.
    Literal(&'a [u8]),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Answer,
    Authority,
    Additional,
}

struct Render {
    tail: Vec<u8>,
    /// Exact mode: absolute offset of the tail in the message.
    base: Option<usize>,
    /// Exact mode: lower-cased name suffixes already in the message and their offsets.
    dict: Vec<(Vec<u8>, u16)>,
    counts: [u16; 3],
    patches: Vec<(u16, u8)>,
    bounds: Vec<(u16, [u16; 3])>,
    flags: u16,
    inform: bool,
    /// The account name for response rate limiting (the class follows from the rest).
    rrl_name: AccountName,
    /// NS records in the authority section (a referral, when AA is clear and no answer).
    ns_in_authority: bool,
}

impl Render {
    /// Exact mode for this lower-cased query name.
    fn exact(qname_lower: &[u8], flags: u16) -> Self {
        let mut dict = Vec::new();
        let mut pos = 0usize;
        while qname_lower.get(pos).is_some_and(|&l| l != 0) {
            // Cannot truncate: pos < 255.
            dict.push((qname_lower[pos..].to_vec(), (HEADER_LEN + pos) as u16));
            pos += 1 + usize::from(qname_lower[pos]);
        }
        Self {
            tail: Vec::new(),
            base: Some(HEADER_LEN + qname_lower.len() + 4),
            dict,
            counts: [0; 3],
            patches: Vec::new(),
            bounds: Vec::new(),
            flags,
            inform: false,
            rrl_name: AccountName::Qname,
            ns_in_authority: false,
        }
    }

    fn relocatable(flags: u16) -> Self {
        Self {
            tail: Vec::new(),
            base: None,
            dict: Vec::new(),
            counts: [0; 3],
            patches: Vec::new(),
            bounds: Vec::new(),
            flags,
            inform: false,
            rrl_name: AccountName::Qname,
            ns_in_authority: false,
        }
    }

    fn name(&mut self, n: NameOut<'_>) {
        match n {
            NameOut::Qname => self.tail.extend_from_slice(&[0xc0, HEADER_LEN as u8]),
            NameOut::QnameSuffix(len) => {
                // Cannot truncate: tails are capped at 65535 bytes by `finish`.
                self.patches.push((self.tail.len() as u16, len));
                self.tail.extend_from_slice(&[0xc0, 0]);
            }
            NameOut::Literal(name) => self.literal(name),
        }
    }

    /// Writes a literal name, compressed against the dictionary in exact mode.
    fn literal(&mut self, name: &[u8]) {
        let Some(base) = self.base else {
            self.tail.extend_from_slice(name);
            return;
        };
        let lower: Vec<u8> = name.iter().map(u8::to_ascii_lowercase).collect();
        let mut pos = 0usize;
        while lower.get(pos).is_some_and(|&l| l != 0) {
            let suffix = &lower[pos..];
            if let Some(&(_, off)) = self.dict.iter().find(|(s, _)| s.as_slice() == suffix) {
                self.tail.extend_from_slice(&(0xc000 | off).to_be_bytes());
                return;
            }
            let here = base + self.tail.len();
            if here < 0x3fff {
                // Cannot truncate: checked against the 14-bit pointer range.
                self.dict.push((suffix.to_vec(), here as u16));
            }
            let l = usize::from(name[pos]);
            self.tail.extend_from_slice(&name[pos..pos + 1 + l]);
            pos += 1 + l;
        }
        self.tail.push(0);
    }

    fn rrset(&mut self, sec: Section, owner: NameOut<'_>, rs: &Rrset) {
        if sec == Section::Authority && rs.rtype == rtype::NS {
            self.ns_in_authority = true;
        }
        for (ttl, rdata) in &rs.rrs {
            self.name(owner);
            self.tail.extend_from_slice(&rs.rtype.to_be_bytes());
            self.tail.extend_from_slice(&rs.class.to_be_bytes());
            self.tail.extend_from_slice(&ttl.to_be_bytes());
            let len_at = self.tail.len();
            self.tail.extend_from_slice(&[0, 0]);
            let names = if self.base.is_some() {
                rr::compressible_names(rs.rtype, rdata)
            } else {
                Vec::new()
            };
            let mut copied = 0usize;
            for off in names {
                let Some(len) = name::wire_name_len(&rdata[off..]) else {
                    continue;
                };
                self.tail.extend_from_slice(&rdata[copied..off]);
                self.literal(&rdata[off..off + len]);
                copied = off + len;
            }
            self.tail.extend_from_slice(&rdata[copied..]);
            let rdlen = self.tail.len() - len_at - 2;
            // Cannot truncate: RDATA is at most 65535 bytes (checked at parse), and
            // compression only shrinks it.
            self.tail[len_at..len_at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
            let i = match sec {
                Section::Answer => 0,
                Section::Authority => 1,
                Section::Additional => 2,
            };
            self.counts[i] = self.counts[i].saturating_add(1);
        }
        // Cannot truncate for valid answers; oversize tails are rejected in `finish`.
        self.bounds
            .push((self.tail.len().min(0xffff) as u16, self.counts));
    }

    /// Serialises to the arena record format.
    fn finish(self) -> Option<Vec<u8>> {
        if self.tail.len() > 0xffff - HEADER_LEN - 259 {
            return None;
        }
        // Boundaries are only needed when the answer may exceed the smallest UDP limit
        // (512, RFC 1035 §4.2.1) with the longest question and an OPT record.
        let need_bounds = HEADER_LEN + 259 + self.tail.len() + crate::wire::OPT_RR_LEN > 512;
        let bounds: &[(u16, [u16; 3])] = if need_bounds { &self.bounds } else { &[] };
        let mut out = Vec::with_capacity(
            RECORD_HEADER + 8 + self.patches.len() * 3 + bounds.len() * 8 + self.tail.len(),
        );
        out.extend_from_slice(&self.flags.to_be_bytes());
        for c in self.counts {
            out.extend_from_slice(&c.to_be_bytes());
        }
        // Cannot truncate: checked above.
        out.extend_from_slice(&(self.tail.len() as u16).to_le_bytes());
        out.push(u8::try_from(self.patches.len()).ok()?);
        out.push(u8::try_from(bounds.len()).ok()?);
        let class = ResponseClass::classify(
            self.flags & flags::RCODE_MASK,
            self.counts[0],
            self.flags & flags::AA != 0,
            self.ns_in_authority,
        );
        encode_rrl(
            self.inform,
            AnswerRrl {
                class,
                name: self.rrl_name,
            },
            &mut out,
        );
        for (off, len) in &self.patches {
            out.extend_from_slice(&off.to_le_bytes());
            out.push(*len);
        }
        for (end, c) in bounds {
            out.extend_from_slice(&end.to_le_bytes());
            for x in c {
                out.extend_from_slice(&x.to_be_bytes());
            }
        }
        out.extend_from_slice(&self.tail);
        Some(out)
    }
}

// ---------------------------------------------------------------------------------------
// Load-time data

#[derive(Clone, Debug)]
struct Rrset {
    rtype: u16,
    class: u16,
    rrs: Vec<(u32, Vec<u8>)>,
}

struct NodeSrc {
    owner: WireName,
    rrsets: Vec<Rrset>,
    zone: usize,
}

impl NodeSrc {
    fn rrset(&self, t: u16) -> Option<&Rrset> {
        self.rrsets.iter().find(|r| r.rtype == t)
    }
}

type Nodes = BTreeMap<Vec<u8>, NodeSrc>;

fn add_rr(nodes: &mut Nodes, rr: Rr, zone: usize, tag: u32) -> Result<(), BuildError> {
    let key = rr.owner.to_lowercase().as_bytes().to_vec();
    let node = nodes.entry(key).or_insert_with(|| NodeSrc {
        owner: rr.owner.clone(),
        rrsets: Vec::new(),
        zone,
    });
    let is_cname = rr.rtype == rtype::CNAME;
    // RRSIG/NSEC may sit beside a CNAME (RFC 4035 §2.5); nothing else may.
    let dnssec = matches!(rr.rtype, rtype::RRSIG | rtype::NSEC);
    if !dnssec {
        let has_cname = node.rrset(rtype::CNAME).is_some();
        let has_other = node
            .rrsets
            .iter()
            .any(|r| !matches!(r.rtype, rtype::CNAME | rtype::RRSIG | rtype::NSEC));
        if (is_cname && has_other) || (!is_cname && has_cname) {
            return Err(BuildError::CnameAndOtherData {
                owner: rr.owner,
                tag,
            });
        }
    }
    match node.rrsets.iter_mut().find(|r| r.rtype == rr.rtype) {
        Some(set) => {
            if set.rrs.iter().any(|(_, d)| *d == rr.rdata) {
                return Ok(()); // duplicate RR: RFC 2181 §5 (an RRset is a set)
            }
            if is_cname {
                return Err(BuildError::MultipleCnames {
                    owner: rr.owner,
                    tag,
                });
            }
            set.rrs.push((rr.ttl, rr.rdata));
        }
        None => node.rrsets.push(Rrset {
            rtype: rr.rtype,
            class: rr.class,
            rrs: alloc::vec![(rr.ttl, rr.rdata)],
        }),
    }
    Ok(())
}

/// The longest common suffix of two lower-cased wire names, on label boundaries.
fn common_ancestor(a: &[u8], b: &[u8]) -> Vec<u8> {
    let suffixes = |n: &[u8]| {
        let mut v = Vec::new();
        let mut pos = 0usize;
        while let Some(&l) = n.get(pos) {
            v.push(pos);
            if l == 0 {
                break;
            }
            pos += 1 + usize::from(l);
        }
        v
    };
    let sb = suffixes(b);
    for pa in suffixes(a) {
        let tail = &a[pa..];
        if sb.iter().any(|&pb| &b[pb..] == tail) {
            return tail.to_vec();
        }
    }
    alloc::vec![0]
}

/// Lower-cased parents of `name` strictly between it and `apex` (empty non-terminals).
fn ents_between(name: &[u8], apex_len: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = usize::from(name[0]) + 1;
    while name.len() - pos > apex_len {
        out.push(name[pos..].iter().map(u8::to_ascii_lowercase).collect());
        pos += usize::from(name[pos]) + 1;
    }
    out
}

struct TreeBuilder {
    tree: Tree,
    interned: BTreeMap<Vec<u8>, AnsRef>,
    map_interned: BTreeMap<(Vec<(u16, AnsRef)>, AnsRef), u32>,
}

impl TreeBuilder {
    fn new() -> Self {
        Self {
            tree: Tree::new(),
            interned: BTreeMap::new(),
            map_interned: BTreeMap::new(),
        }
    }

    fn answer(&mut self, r: Render, owner: &WireName) -> Result<AnsRef, BuildError> {
        let rec = r
            .finish()
            .ok_or_else(|| BuildError::TooLarge(owner.clone()))?;
        let at = AnsRef(
            u32::try_from(self.tree.answers.len())
                .map_err(|_| BuildError::TooLarge(owner.clone()))?,
        );
        self.tree.answers.extend_from_slice(&rec);
        Ok(at)
    }

    /// Relocatable answers repeat across names (same NXDOMAIN for a whole zone): share them.
    fn shared(&mut self, r: Render, owner: &WireName) -> Result<AnsRef, BuildError> {
        let rec = r
            .finish()
            .ok_or_else(|| BuildError::TooLarge(owner.clone()))?;
        if let Some(&a) = self.interned.get(&rec) {
            return Ok(a);
        }
        let at = AnsRef(
            u32::try_from(self.tree.answers.len())
                .map_err(|_| BuildError::TooLarge(owner.clone()))?,
        );
        self.tree.answers.extend_from_slice(&rec);
        self.interned.insert(rec, at);
        Ok(at)
    }

    fn map(&mut self, entries: Vec<(u16, AnsRef)>, fallback: AnsRef, share: bool) -> u32 {
        if share && let Some(&m) = self.map_interned.get(&(entries.clone(), fallback)) {
            return m;
        }
        // Cannot truncate in practice: the tables index with u32 (4 G entries).
        let m = Map {
            start: self.tree.entries.len() as u32,
            len: entries.len() as u32,
            fallback,
        };
        self.tree.entries.extend_from_slice(&entries);
        let id = self.tree.maps.len() as u32;
        self.tree.maps.push(m);
        if share {
            self.map_interned.insert((entries, fallback), id);
        }
        id
    }

    fn node(&mut self, lower: &[u8], exact: u32, below: u32) {
        // Cannot truncate: names are at most 255 octets; tables index with u32.
        let idx = self.tree.nodes.len() as u32;
        self.tree.nodes.push(Node {
            name_off: self.tree.names.len() as u32,
            name_len: lower.len() as u8,
            exact,
            below,
        });
        self.tree.names.extend_from_slice(lower);
        match tld(lower) {
            None => self.tree.tlds = None,
            Some(t) => {
                if let Some(tlds) = &mut self.tree.tlds
                    && !tlds.iter().any(|x| x.as_slice() == t)
                {
                    tlds.push(t.to_vec());
                }
            }
        }
        let h = name_hash(lower);
        let (nodes, names) = (&self.tree.nodes, &self.tree.names);
        self.tree.table.insert_unique(h, idx, |&i| {
            let n = &nodes[i as usize];
            let s = n.name_off as usize;
            name_hash(&names[s..s + usize::from(n.name_len)])
        });
    }

    fn finish(mut self) -> Tree {
        self.tree.answers.shrink_to_fit();
        self.tree.entries.shrink_to_fit();
        self.tree.maps.shrink_to_fit();
        self.tree.nodes.shrink_to_fit();
        self.tree.names.shrink_to_fit();
        self.tree.table.shrink_to(0, |&i| {
            let n = &self.tree.nodes[i as usize];
            let s = n.name_off as usize;
            name_hash(&self.tree.names[s..s + usize::from(n.name_len)])
        });
        self.tree
    }
}

fn header_flags(aa: bool, ra: bool, rc: u8) -> u16 {
    let mut f = flags::QR | u16::from(rc);
    if aa {
        f |= flags::AA;
    }
    if ra {
        f |= flags::RA;
    }
    f
}

/// The SOA used in negative answers: TTL = min(SOA TTL, MINIMUM) (RFC 2308 §3, §5).
fn negative_soa(soa: &Rrset) -> Rrset {
    let mut s = soa.clone();
    for (ttl, rdata) in &mut s.rrs {
        if let Some(min) = rr::soa_minimum(rdata) {
            *ttl = (*ttl).min(min);
        }
    }
    s
}

// ---------------------------------------------------------------------------------------
// Local zones (Unbound semantics)

/// A local zone to compile.
#[derive(Clone, Debug)]
pub struct LocalZoneSpec {
    /// Zone name.
    pub name: WireName,
    /// Zone type.
    pub zone_type: LocalZoneType,
}

struct LocalZone {
    name: WireName,
    lower: Vec<u8>,
    ztype: LocalZoneType,
    soa_negative: Option<Rrset>,
}

/// Compiles Unbound `local-zone`/`local-data` semantics (unbound.conf(5); Unbound's
/// `local_zones_answer`): local data first (exact name, then a CNAME at that name),
/// then the zone type decides (drop, REFUSED, NXDOMAIN/NODATA with the apex SOA, resolve
/// normally, redirect to the apex data, null addresses).
///
/// `data` items carry a caller tag reported in errors. A record outside every zone creates
/// a `transparent` zone at its owner, as Unbound does.
pub fn build_local(
    zones: &[LocalZoneSpec],
    data: Vec<(Rr, u32)>,
    ra: bool,
) -> Result<Tree, BuildError> {
    let mut lz: Vec<LocalZone> = Vec::new();
    let mut by_name: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for z in zones {
        let lower = z.name.to_lowercase().as_bytes().to_vec();
        if by_name.contains_key(&lower) {
            return Err(BuildError::DuplicateZone(z.name.clone()));
        }
        by_name.insert(lower.clone(), lz.len());
        lz.push(LocalZone {
            name: z.name.clone(),
            lower,
            ztype: z.zone_type,
            soa_negative: None,
        });
    }
    let closest = |by_name: &BTreeMap<Vec<u8>, usize>, lower: &[u8]| -> Option<usize> {
        let mut pos = 0usize;
        loop {
            if let Some(&z) = by_name.get(&lower[pos..]) {
                return Some(z);
            }
            let l = usize::from(*lower.get(pos)?);
            if l == 0 {
                return None;
            }
            pos += 1 + l;
        }
    };
    // Records outside every zone share ONE implicit transparent zone at the closest common
    // ancestor of their owners (Unbound's lz_setup_implicit; observed with 1.17).
    let mut common: Option<Vec<u8>> = None;
    for (rr, _) in &data {
        let lower = rr.owner.to_lowercase();
        if closest(&by_name, lower.as_bytes()).is_none() {
            common = Some(match common {
                None => lower.as_bytes().to_vec(),
                Some(c) => common_ancestor(&c, lower.as_bytes()),
            });
        }
    }
    if let Some(c) = common {
        by_name.insert(c.clone(), lz.len());
        lz.push(LocalZone {
            name: WireName::from_wire(&c).unwrap_or_else(|_| WireName::root()),
            lower: c,
            ztype: LocalZoneType::Transparent,
            soa_negative: None,
        });
    }
    let mut nodes: Nodes = BTreeMap::new();
    for (rr, tag) in data {
        let lower = rr.owner.to_lowercase();
        // Every owner has a zone now (the implicit one covers the rest).
        let zone = closest(&by_name, lower.as_bytes()).unwrap_or(lz.len() - 1);
        add_rr(&mut nodes, rr, zone, tag)?;
    }
    // Empty non-terminals between data and its zone apex exist as names (they answer NODATA
    // in static zones), as in Unbound's local data tree.
    // The apex counts too: a zone with data below its apex answers NODATA there (observed).
    let mut ents: Vec<(Vec<u8>, usize)> = Vec::new();
    for (k, n) in &nodes {
        let apex = &lz[n.zone].lower;
        for e in ents_between(k, apex.len()) {
            ents.push((e, n.zone));
        }
        if k != apex {
            ents.push((apex.clone(), n.zone));
        }
    }
    for (e, zone) in ents {
        nodes.entry(e).or_insert_with_key(|k| NodeSrc {
            owner: WireName::from_wire(k).unwrap_or_else(|_| WireName::root()),
            rrsets: Vec::new(),
            zone,
        });
    }
    for z in &mut lz {
        if let Some(soa) = nodes.get(&z.lower).and_then(|n| n.rrset(rtype::SOA)) {
            z.soa_negative = Some(negative_soa(soa));
        }
    }

    let mut b = TreeBuilder::new();
    // Per-zone maps: the answer for names without local data (`below`), then the apex,
    // whose DS is answered by the parent zone (DS is parent-side data, RFC 4035 §2.4;
    // Unbound looks DS up in the zone above).
    let mut belows: Vec<u32> = Vec::with_capacity(lz.len());
    for z in &lz {
        let apex = nodes.get(&z.lower);
        belows.push(local_map(&mut b, z, None, apex, ra, None)?);
    }
    let mut zone_maps: Vec<(u32, u32)> = Vec::with_capacity(lz.len());
    for (zi, z) in lz.iter().enumerate() {
        let parent = (z.lower.len() > 1)
            .then(|| closest(&by_name, &z.lower[usize::from(z.lower[0]) + 1..]))
            .flatten();
        let ds = match parent {
            Some(p) => b.tree.map_lookup(belows[p], rtype::DS),
            None => AnsRef::NOT_LOCAL,
        };
        let apex = nodes.get(&z.lower);
        let exact_apex = local_map(&mut b, z, apex, apex, ra, Some((rtype::DS, ds)))?;
        zone_maps.push((exact_apex, belows[zi]));
    }
    for (zi, z) in lz.iter().enumerate() {
        if !nodes.contains_key(&z.lower) {
            let (exact, below) = zone_maps[zi];
            b.node(&z.lower, exact, below);
        }
    }
    for (k, n) in &nodes {
        let z = &lz[n.zone];
        let (zone_exact, below) = zone_maps[n.zone];
        let exact = if *k == z.lower {
            zone_exact
        } else if z.ztype.redirects() || !z.ztype.uses_local_data() {
            // Redirect answers every name from the apex; always_* ignore local data.
            below
        } else {
            local_map(&mut b, z, Some(n), None, ra, None)?
        };
        b.node(k, exact, below);
    }
    Ok(b.finish())
}

/// The type map for one name of a local zone. `ld` is the local data at the query name
/// (None for names without data), `apex` the data at the zone apex (used by redirect).
fn local_map(
    b: &mut TreeBuilder,
    z: &LocalZone,
    ld: Option<&NodeSrc>,
    apex: Option<&NodeSrc>,
    ra: bool,
    extra: Option<(u16, AnsRef)>,
) -> Result<u32, BuildError> {
    use LocalZoneType as T;
    let inform = z.ztype.informs();
    // RRL accounts: NXDOMAIN per zone (BIND: the zone origin); every name of a redirect zone
    // is answered from the apex, like a wildcard, so they share the apex's account.
    let apex_hash = name_hash(&z.lower);
    let rrl_name = |rc: u8| {
        if rc == rcode::NXDOMAIN {
            AccountName::Fixed(apex_hash)
        } else if z.ztype.redirects() && rc == rcode::NOERROR {
            AccountName::Wildcard(apex_hash)
        } else {
            AccountName::Qname
        }
    };
    let neg = |b: &mut TreeBuilder, rc: u8, with_soa: bool| -> Result<AnsRef, BuildError> {
        let mut r = Render::relocatable(header_flags(true, ra, rc));
        r.inform = inform;
        r.rrl_name = rrl_name(rc);
        if let (true, Some(soa)) = (with_soa, &z.soa_negative) {
            // Cannot truncate: names are at most 255 octets.
            r.rrset(
                Section::Authority,
                NameOut::QnameSuffix(z.lower.len() as u8),
                soa,
            );
        }
        b.shared(r, &z.name)
    };
    let drop = if inform {
        AnsRef::DROP_INFORM
    } else {
        AnsRef::DROP
    };
    // Zone types that ignore local data answer the same everywhere.
    let fixed: Vec<(u16, AnsRef)> = extra.into_iter().collect();
    match z.ztype {
        T::AlwaysTransparent => return Ok(b.map(fixed, AnsRef::NOT_LOCAL, true)),
        T::AlwaysRefuse => {
            let a = neg(b, rcode::REFUSED, false)?;
            return Ok(b.map(fixed, a, true));
        }
        T::AlwaysNxdomain => {
            let a = neg(b, rcode::NXDOMAIN, true)?;
            return Ok(b.map(fixed, a, true));
        }
        T::AlwaysNodata => {
            let a = neg(b, rcode::NOERROR, true)?;
            return Ok(b.map(fixed, a, true));
        }
        T::AlwaysDeny => return Ok(b.map(fixed, drop, true)),
        _ => {}
    }
    // Redirect: every name is answered from the apex data, owner rewritten to the query name.
    let (data, relocate) = if z.ztype.redirects() {
        (apex, true)
    } else {
        (ld, false)
    };
    let mut entries: Vec<(u16, AnsRef)> = extra.into_iter().collect();
    let mut cname = None;
    if let Some(n) = data {
        for set in &n.rrsets {
            let r = if relocate {
                let mut r = Render::relocatable(header_flags(true, ra, rcode::NOERROR));
                r.inform = inform;
                r.rrl_name = rrl_name(rcode::NOERROR);
                r.rrset(Section::Answer, NameOut::Qname, set);
                b.shared(r, &n.owner)?
            } else {
                let lower = n.owner.to_lowercase();
                let mut r = Render::exact(lower.as_bytes(), header_flags(true, ra, rcode::NOERROR));
                r.inform = inform;
                r.rrset(Section::Answer, NameOut::Qname, set);
                b.answer(r, &n.owner)?
            };
            if set.rtype == rtype::CNAME {
                cname = Some(r);
            }
            entries.push((set.rtype, r));
        }
    }
    // A CNAME at the name answers every other type (Unbound: local_data_find_type with
    // alias_ok); the target is not chased in local data. In a redirect zone the apex CNAME
    // is an alias whose target Unbound resolves (not from local data): not ours to answer.
    if let Some(c) = cname {
        let fb = if relocate { AnsRef::NOT_LOCAL } else { c };
        return Ok(b.map(entries, fb, relocate));
    }
    let has_data = data.is_some_and(|n| !n.rrsets.is_empty());
    let exists = data.is_some();
    if z.ztype == T::AlwaysNull {
        // 0.0.0.0 / :: (TTL 3600, as Unbound) for the address types local data lacks.
        for (t, rdata) in [(rtype::A, &[0u8; 4][..]), (rtype::AAAA, &[0u8; 16][..])] {
            if entries.iter().any(|(et, _)| *et == t) {
                continue;
            }
            let mut r = Render::relocatable(header_flags(true, ra, rcode::NOERROR));
            let set = Rrset {
                rtype: t,
                class: crate::rr::class::IN,
                rrs: alloc::vec![(3600, rdata.to_vec())],
            };
            r.rrset(Section::Answer, NameOut::Qname, &set);
            entries.push((t, b.shared(r, &z.name)?));
        }
    }
    let fallback = match z.ztype {
        T::AlwaysNull => neg(b, rcode::NOERROR, false)?,
        T::Deny | T::InformDeny => drop,
        T::Refuse => neg(b, rcode::REFUSED, false)?,
        T::Static | T::Redirect | T::InformRedirect => {
            let rc = if exists || z.ztype.redirects() {
                rcode::NOERROR
            } else {
                rcode::NXDOMAIN
            };
            neg(b, rc, true)?
        }
        T::TypeTransparent => AnsRef::NOT_LOCAL,
        // transparent, inform, noview, nodefault: NODATA for names with data, else resolve.
        _ if has_data => neg(b, rcode::NOERROR, true)?,
        _ => AnsRef::NOT_LOCAL,
    };
    let share = entries.is_empty() || relocate;
    Ok(b.map(entries, fallback, share))
}

// ---------------------------------------------------------------------------------------
// Authoritative zones (RFC 1034 §4.3.2)

/// An authoritative zone to compile.
pub struct AuthZoneSpec {
    /// Zone apex.
    pub name: WireName,
    /// Its records, each with a caller tag.
    pub records: Vec<(Rr, u32)>,
}

/// Longest CNAME chain followed inside a zone when building an answer.
const MAX_CNAME_CHAIN: usize = 8;

/// Compiles authoritative zones: exact answers, CNAME chains inside the zone (RFC 1034
/// §4.3.2 step 3a, RFC 6604 for the final RCODE), NODATA and NXDOMAIN with the SOA
/// (RFC 2308 §2), wildcards (RFC 4592) and referrals at delegations (RFC 1034 §4.3.2 3b),
/// with glue from the zone.
pub fn build_auth(zones: Vec<AuthZoneSpec>, ra: bool) -> Result<Tree, BuildError> {
    build_auth_with(zones, &[], ra)
}

/// As [`build_auth`], plus zones that are configured but have no data to serve (a
/// secondary zone before its first transfer, or after its copy expired, RFC 1035
/// §3.3.13): every name at or under each of `unavailable` is answered SERVFAIL, without
/// AA, as NSD answers for a zone it cannot serve.
pub fn build_auth_with(
    zones: Vec<AuthZoneSpec>,
    unavailable: &[WireName],
    ra: bool,
) -> Result<Tree, BuildError> {
    let mut b = TreeBuilder::new();
    for z in zones {
        build_one_auth(&mut b, z, ra)?;
    }
    for name in unavailable {
        let lower = name.to_lowercase();
        let mut r = Render::relocatable(header_flags(false, ra, rcode::SERVFAIL));
        // One account per zone (the names asked may be random).
        r.rrl_name = AccountName::Fixed(name_hash(lower.as_bytes()));
        let a = b.shared(r, name)?;
        let m = b.map(Vec::new(), a, true);
        b.node(lower.as_bytes(), m, m);
    }
    Ok(b.finish())
}

fn build_one_auth(b: &mut TreeBuilder, z: AuthZoneSpec, ra: bool) -> Result<(), BuildError> {
    let apex_lower = z.name.to_lowercase().as_bytes().to_vec();
    let apex_len = apex_lower.len();
    let mut nodes: Nodes = BTreeMap::new();
    for (rr, tag) in z.records {
        if !rr.owner.is_subdomain_of(&z.name) {
            return Err(BuildError::OutOfZone {
                zone: z.name.clone(),
                owner: rr.owner,
                tag,
            });
        }
        add_rr(&mut nodes, rr, 0, tag)?;
    }
    let soa = nodes
        .get(&apex_lower)
        .and_then(|n| n.rrset(rtype::SOA))
        .filter(|s| s.rrs.len() == 1)
        .ok_or_else(|| BuildError::MissingSoa(z.name.clone()))?;
    let soa = negative_soa(soa);
    let mut ents = Vec::new();
    for k in nodes.keys() {
        ents.extend(ents_between(k, apex_len));
    }
    for e in ents {
        nodes.entry(e).or_insert_with_key(|k| NodeSrc {
            owner: WireName::from_wire(k).unwrap_or_else(|_| WireName::root()),
            rrsets: Vec::new(),
            zone: 0,
        });
    }
    // Delegation points: NS below the apex. Names under one are not authoritative.
    let cuts: Vec<Vec<u8>> = nodes
        .iter()
        .filter(|(k, n)| **k != apex_lower && n.rrset(rtype::NS).is_some())
        .map(|(k, _)| k.clone())
        .collect();
    let cut_above = |k: &[u8]| -> Option<&Vec<u8>> {
        cuts.iter()
            .filter(|c| c.as_slice() != k && name::is_subdomain(k, c))
            .max_by_key(|c| c.len())
    };

    let nx = {
        let mut r = Render::relocatable(header_flags(true, ra, rcode::NXDOMAIN));
        r.rrl_name = AccountName::Fixed(name_hash(&apex_lower));
        // Cannot truncate: names are at most 255 octets.
        r.rrset(
            Section::Authority,
            NameOut::QnameSuffix(apex_len as u8),
            &soa,
        );
        b.shared(r, &z.name)?
    };
    let nodata = {
        let mut r = Render::relocatable(header_flags(true, ra, rcode::NOERROR));
        r.rrset(
            Section::Authority,
            NameOut::QnameSuffix(apex_len as u8),
            &soa,
        );
        b.shared(r, &z.name)?
    };
    let nx_map = b.map(Vec::new(), nx, true);

    // Referral from each cut, shared by every name at or under it.
    let mut referrals: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    for c in &cuts {
        let n = &nodes[c];
        let mut r = Render::relocatable(header_flags(false, ra, rcode::NOERROR));
        r.rrl_name = AccountName::Fixed(name_hash(c));
        if let Some(ns) = n.rrset(rtype::NS) {
            // Cannot truncate: names are at most 255 octets.
            r.rrset(Section::Authority, NameOut::QnameSuffix(c.len() as u8), ns);
            for (_, target) in &ns.rrs {
                let tl: Vec<u8> = target.iter().map(u8::to_ascii_lowercase).collect();
                if let Some(g) = nodes.get(&tl) {
                    for t in [rtype::A, rtype::AAAA] {
                        if let Some(set) = g.rrset(t) {
                            r.rrset(Section::Additional, NameOut::Literal(target), set);
                        }
                    }
                }
            }
        }
        let a = b.shared(r, &n.owner)?;
        let m = b.map(Vec::new(), a, true);
        referrals.insert(c.clone(), m);
    }

    for (k, n) in &nodes {
        // Under a cut: occluded, everything is a referral.
        if let Some(c) = cut_above(k) {
            let m = referrals[c];
            b.node(k, m, m);
            continue;
        }
        if let Some(&refm) = referrals.get(k) {
            // At a cut, only DS is answered from this side (RFC 4035 §3.1.4.1).
            let mut e = Vec::new();
            let lower = k.clone();
            let ds = match n.rrset(rtype::DS) {
                Some(set) => {
                    let mut r = Render::exact(&lower, header_flags(true, ra, rcode::NOERROR));
                    r.rrset(Section::Answer, NameOut::Qname, set);
                    b.answer(r, &n.owner)?
                }
                None => nodata,
            };
            e.push((rtype::DS, ds));
            let fallback = b.maps_fallback(refm);
            let m = b.map(e, fallback, false);
            b.node(k, m, refm);
            continue;
        }
        let exact = auth_exact_map(b, &nodes, k, n, None, ra, &soa, apex_len, nodata)?;
        let wild_key = {
            let mut w = alloc::vec![1u8, b'*'];
            w.extend_from_slice(k);
            w
        };
        let below = match nodes.get(&wild_key) {
            Some(w) if cut_above(&wild_key).is_none() => {
                let parent = Some(name_hash(k));
                auth_exact_map(b, &nodes, &wild_key, w, parent, ra, &soa, apex_len, nodata)?
            }
            _ => nx_map,
        };
        b.node(k, exact, below);
    }
    Ok(())
}

impl TreeBuilder {
    fn maps_fallback(&self, m: u32) -> AnsRef {
        self.tree.maps[m as usize].fallback
    }
}

/// The wildcard node that covers a nonexistent `lower` name, if any: the `*` child of its
/// closest existing ancestor inside the zone (RFC 4592 §4.1).
fn wildcard_for<'a>(nodes: &'a Nodes, lower: &[u8], apex_len: usize) -> Option<&'a NodeSrc> {
    let mut pos = usize::from(*lower.first()?) + 1;
    while lower.len() - pos >= apex_len {
        let suffix = &lower[pos..];
        if nodes.contains_key(suffix) || lower.len() - pos == apex_len {
            let mut w = alloc::vec![1u8, b'*'];
            w.extend_from_slice(suffix);
            return nodes.get(&w);
        }
        pos += usize::from(lower[pos]) + 1;
    }
    None
}

/// Answers at an authoritative name. `wildcard`: the node is a wildcard whose parent has
/// this [`name_hash`]; its answers are rendered for any query name (owner = query name, no
/// compression against it) and rate limited as the wildcard.
#[allow(clippy::too_many_arguments)]
fn auth_exact_map(
    b: &mut TreeBuilder,
    nodes: &Nodes,
    key: &[u8],
    n: &NodeSrc,
    wildcard: Option<u64>,
    ra: bool,
    soa: &Rrset,
    apex_len: usize,
    nodata: AnsRef,
) -> Result<u32, BuildError> {
    let relocatable = wildcard.is_some();
    let apex_hash = name_hash(&key[key.len() - apex_len..]);
    let new_render = |rc: u8| {
        let mut r = if relocatable {
            Render::relocatable(header_flags(true, ra, rc))
        } else {
            Render::exact(key, header_flags(true, ra, rc))
        };
        r.rrl_name = match (rc, wildcard) {
            (rcode::NXDOMAIN, _) => AccountName::Fixed(apex_hash),
            (_, Some(parent)) => AccountName::Wildcard(parent),
            (_, None) => AccountName::Qname,
        };
        r
    };
    // A wildcard's NODATA is counted as the wildcard too (random names, one account).
    let nodata = match wildcard {
        Some(_) => {
            let mut r = new_render(rcode::NOERROR);
            // Cannot truncate: names are at most 255 octets.
            r.rrset(
                Section::Authority,
                NameOut::QnameSuffix(apex_len as u8),
                soa,
            );
            b.shared(r, &n.owner)?
        }
        None => nodata,
    };
    let mut entries = Vec::new();
    let cname = n.rrset(rtype::CNAME);
    for set in &n.rrsets {
        let mut r = new_render(rcode::NOERROR);
        r.rrset(Section::Answer, NameOut::Qname, set);
        if set.rtype == rtype::NS {
            // Addresses of in-zone name servers (RFC 1034 §4.3.2 step 6; NSD sends them
            // even with minimal-responses).
            for (_, target) in &set.rrs {
                let tl: Vec<u8> = target.iter().map(u8::to_ascii_lowercase).collect();
                if let Some(g) = nodes.get(&tl) {
                    for t in [rtype::A, rtype::AAAA] {
                        if let Some(gs) = g.rrset(t) {
                            r.rrset(Section::Additional, NameOut::Literal(target), gs);
                        }
                    }
                }
            }
        }
        let a = if relocatable {
            b.shared(r, &n.owner)?
        } else {
            b.answer(r, &n.owner)?
        };
        entries.push((set.rtype, a));
    }
    let Some(cname) = cname else {
        let share = entries.is_empty();
        return Ok(b.map(entries, nodata, share));
    };
    // Follow the chain inside the zone (RFC 1034 §4.3.2 step 3a). The answer depends on the
    // qtype only at the end of the chain: one entry per type there, plus the fallback.
    let mut chain: Vec<(WireName, &Rrset)> = Vec::new();
    let mut target = cname.rrs[0].1.clone();
    let mut end: Option<(WireName, &NodeSrc)> = None;
    let mut end_state = 0u8; // 0 = out of zone, 1 = exists, 2 = nxdomain
    let apex = &key[key.len() - apex_len..];
    for _ in 0..MAX_CNAME_CHAIN {
        let tl: Vec<u8> = target.iter().map(u8::to_ascii_lowercase).collect();
        if tl.len() < apex_len || !name::is_subdomain(&tl, apex) {
            break;
        }
        // The target itself, or the wildcard that synthesises it (RFC 4592 §3.3.1).
        let Some(t) = nodes
            .get(&tl)
            .or_else(|| wildcard_for(nodes, &tl, apex_len))
        else {
            end_state = 2;
            break;
        };
        let owner = WireName::from_wire(&target).unwrap_or_else(|_| WireName::root());
        match t.rrset(rtype::CNAME) {
            Some(c2) => {
                chain.push((owner, c2));
                target = c2.rrs[0].1.clone();
            }
            None => {
                end = Some((owner, t));
                end_state = 1;
                break;
            }
        }
    }
    let start = |rc: u8| {
        let mut r = new_render(rc);
        r.rrset(Section::Answer, NameOut::Qname, cname);
        for (owner, c) in &chain {
            r.rrset(Section::Answer, NameOut::Literal(owner.as_bytes()), c);
        }
        r
    };
    let finish = |b: &mut TreeBuilder, r: Render| -> Result<AnsRef, BuildError> {
        if relocatable {
            b.shared(r, &n.owner)
        } else {
            b.answer(r, &n.owner)
        }
    };
    // Cannot truncate: names are at most 255 octets.
    let apex_out = NameOut::QnameSuffix(apex_len as u8);
    let fallback = match end_state {
        1 => {
            let t = end
                .map(|(owner, t)| (owner, t.rrsets.clone()))
                .unwrap_or((WireName::root(), Vec::new()));
            for set in &t.1 {
                if set.rtype == rtype::CNAME {
                    continue;
                }
                let mut r = start(rcode::NOERROR);
                r.rrset(Section::Answer, NameOut::Literal(t.0.as_bytes()), set);
                let a = finish(b, r)?;
                entries.push((set.rtype, a));
            }
            let mut r = start(rcode::NOERROR);
            r.rrset(Section::Authority, apex_out, soa);
            finish(b, r)?
        }
        2 => {
            let mut r = start(rcode::NXDOMAIN);
            r.rrset(Section::Authority, apex_out, soa);
            finish(b, r)?
        }
        _ => {
            let r = start(rcode::NOERROR);
            finish(b, r)?
        }
    };
    Ok(b.map(entries, fallback, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_rr;

    fn rr(s: &str) -> (Rr, u32) {
        (parse_rr(s, None, 3600).unwrap(), 0)
    }

    fn n(s: &str) -> Vec<u8> {
        WireName::parse(s, None)
            .unwrap()
            .to_lowercase()
            .as_bytes()
            .to_vec()
    }

    fn zone(name: &str, t: LocalZoneType) -> LocalZoneSpec {
        LocalZoneSpec {
            name: WireName::parse(name, None).unwrap(),
            zone_type: t,
        }
    }

    #[test]
    fn static_zone_answers_data_nodata_nxdomain() {
        let t = build_local(
            &[zone("example.", LocalZoneType::Static)],
            alloc::vec![
                rr("example. 300 IN SOA ns. host. 1 2 3 4 60"),
                rr("www.example. 120 IN A 198.18.0.1"),
                rr("a.b.example. 120 IN A 198.18.0.2"),
            ],
            true,
        )
        .unwrap();
        let a = t
            .answer(t.lookup(&n("www.example."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(a.flags, flags::QR | flags::AA | flags::RA);
        assert_eq!(a.counts, &[0, 1, 0, 0, 0, 0]);
        // owner = pointer to the question, A, IN, TTL 120, len 4, address
        assert_eq!(
            a.tail,
            b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x78\x00\x04\xc6\x12\x00\x01"
        );
        let nd = t
            .answer(t.lookup(&n("www.example."), rtype::AAAA).unwrap())
            .unwrap();
        assert_eq!(nd.flags & 0xf, 0);
        assert_eq!(nd.counts, &[0, 0, 0, 1, 0, 0]);
        // Negative TTL = min(300, 60).
        assert_eq!(&nd.tail[6..10], &60u32.to_be_bytes());
        let nx = t
            .answer(t.lookup(&n("nope.example."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(nx.flags & 0xf, u16::from(rcode::NXDOMAIN));
        // The SOA owner is patched to the zone apex inside the query name.
        let p: Vec<_> = nx.patches(n("nope.example.").len()).collect();
        assert_eq!(p, alloc::vec![(0, 0xc000 | (12 + 5))]);
        // Empty non-terminal: NODATA.
        let ent = t
            .answer(t.lookup(&n("b.example."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(ent.flags & 0xf, 0);
        assert!(t.lookup(&n("other."), rtype::A).is_none());
    }

    #[test]
    fn deny_refuse_transparent_redirect_null() {
        let t = build_local(
            &[
                zone("deny.", LocalZoneType::Deny),
                zone("refuse.", LocalZoneType::Refuse),
                zone("tp.", LocalZoneType::Transparent),
                zone("tt.", LocalZoneType::TypeTransparent),
                zone("redir.", LocalZoneType::Redirect),
                zone("null.", LocalZoneType::AlwaysNull),
                zone("anx.", LocalZoneType::AlwaysNxdomain),
            ],
            alloc::vec![
                rr("x.deny. A 198.18.0.1"),
                rr("x.refuse. A 198.18.0.1"),
                rr("x.tp. A 198.18.0.1"),
                rr("x.tt. A 198.18.0.1"),
                rr("redir. A 198.18.0.9"),
                rr("x.anx. A 198.18.0.1"),
                rr("alias.tp. CNAME x.tp."),
            ],
            true,
        )
        .unwrap();
        let rc = |r: AnsRef| t.answer(r).map(|a| a.flags & 0xf);
        assert_eq!(rc(t.lookup(&n("x.deny."), rtype::A).unwrap()), Some(0));
        assert_eq!(t.lookup(&n("y.deny."), rtype::A), Some(AnsRef::DROP));
        assert_eq!(t.lookup(&n("x.deny."), rtype::MX), Some(AnsRef::DROP));
        assert_eq!(rc(t.lookup(&n("y.refuse."), rtype::A).unwrap()), Some(5));
        assert_eq!(rc(t.lookup(&n("x.tp."), rtype::MX).unwrap()), Some(0));
        assert_eq!(t.lookup(&n("y.tp."), rtype::A), Some(AnsRef::NOT_LOCAL));
        assert_eq!(t.lookup(&n("x.tt."), rtype::MX), Some(AnsRef::NOT_LOCAL));
        let r = t
            .answer(t.lookup(&n("deep.www.redir."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(r.tail[..2], [0xc0, 0x0c]);
        assert_eq!(&r.tail[12..], &[198, 18, 0, 9]);
        let z = t
            .answer(t.lookup(&n("ad.null."), rtype::AAAA).unwrap())
            .unwrap();
        assert_eq!(&z.tail[12..], &[0u8; 16]);
        assert_eq!(rc(t.lookup(&n("x.anx."), rtype::A).unwrap()), Some(3));
        // A CNAME answers other types, unchased.
        let c = t
            .answer(t.lookup(&n("alias.tp."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(c.counts, &[0, 1, 0, 0, 0, 0]);
        assert_eq!(&c.tail[2..4], &rtype::CNAME.to_be_bytes());
    }

    #[test]
    fn cname_conflicts_are_errors() {
        let e = build_local(
            &[],
            alloc::vec![
                rr("a. A 198.18.0.1"),
                (parse_rr("a. CNAME b.", None, 1).unwrap(), 7)
            ],
            true,
        );
        assert!(matches!(
            e,
            Err(BuildError::CnameAndOtherData { tag: 7, .. })
        ));
    }

    #[test]
    fn an_unavailable_auth_zone_is_servfail_at_and_under_its_apex() {
        let t = build_auth_with(
            alloc::vec![AuthZoneSpec {
                name: WireName::parse("ok.", None).unwrap(),
                records: [
                    "ok. 3600 IN SOA ns.ok. h.ok. 1 2 3 4 300",
                    "www.ok. 300 IN A 198.18.0.1"
                ]
                .iter()
                .map(|s| rr(s))
                .collect(),
            }],
            &[WireName::parse("Gone.", None).unwrap()],
            false,
        )
        .unwrap();
        for q in ["gone.", "www.gone.", "a.b.c.gone."] {
            let a = t.answer(t.lookup(&n(q), rtype::A).unwrap()).unwrap();
            assert_eq!(a.flags, flags::QR | 2, "{q}: SERVFAIL, no AA");
            assert_eq!(a.counts, &[0, 0, 0, 0, 0, 0], "{q}");
        }
        let a = t
            .answer(t.lookup(&n("www.ok."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(a.flags, flags::QR | flags::AA);
        assert!(t.lookup(&n("other."), rtype::A).is_none());
    }

    #[test]
    fn auth_zone_referral_wildcard_cname() {
        let recs = [
            "ex. 3600 IN SOA ns.ex. h.ex. 1 2 3 4 300",
            "ex. 3600 IN NS ns.ex.",
            "ns.ex. 3600 IN A 198.18.0.53",
            "www.ex. 3600 IN A 198.18.0.80",
            "alias.ex. 3600 IN CNAME www.ex.",
            "dangling.ex. 3600 IN CNAME nothere.ex.",
            "*.wild.ex. 3600 IN TXT \"w\"",
            "sub.ex. 3600 IN NS ns.sub.ex.",
            "ns.sub.ex. 3600 IN A 198.18.0.54",
        ];
        let t = build_auth(
            alloc::vec![AuthZoneSpec {
                name: WireName::parse("ex.", None).unwrap(),
                records: recs.iter().map(|s| rr(s)).collect(),
            }],
            false,
        )
        .unwrap();
        let a = t
            .answer(t.lookup(&n("alias.ex."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(a.counts, &[0, 2, 0, 0, 0, 0]);
        let d = t
            .answer(t.lookup(&n("dangling.ex."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(d.flags & 0xf, 3);
        let w = t
            .answer(t.lookup(&n("x.y.wild.ex."), rtype::TXT).unwrap())
            .unwrap();
        assert_eq!(w.tail[..2], [0xc0, 0x0c]);
        let r = t
            .answer(t.lookup(&n("host.sub.ex."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(r.flags & flags::AA, 0);
        assert_eq!(r.counts, &[0, 0, 0, 1, 0, 1]);
        let r2 = t
            .answer(t.lookup(&n("ns.sub.ex."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(r2.flags & flags::AA, 0);
        let nx = t
            .answer(t.lookup(&n("none.ex."), rtype::A).unwrap())
            .unwrap();
        assert_eq!(nx.flags, flags::QR | flags::AA | 3);
        let ds = t
            .answer(t.lookup(&n("sub.ex."), rtype::DS).unwrap())
            .unwrap();
        assert_eq!(ds.flags & flags::AA, flags::AA);
        assert_eq!(ds.counts, &[0, 0, 0, 1, 0, 0]);
    }
}
