//! RRsets and how much to believe them (RFC 2181 §5.4.1).

use alloc::vec::Vec;

use crate::msg::Record;

/// How trustworthy an RRset is, by where it came from (RFC 2181 §5.4.1, lowest first).
/// Data of a lower rank never replaces live data of a higher one, so an answer can't be
/// overwritten by what another reply carried in its additional section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rank {
    /// Additional section (glue, addresses of names mentioned).
    Additional = 1,
    /// Authority section of a non-authoritative reply.
    AuthorityNonAuth = 2,
    /// Answer section of a non-authoritative reply (what a forwarder's upstream sends).
    AnswerNonAuth = 3,
    /// Authority section of an authoritative reply.
    AuthorityAuth = 4,
    /// Answer section of an authoritative reply.
    AnswerAuth = 5,
}

impl Rank {
    /// The rank of the records of `section` (0 answer, 1 authority, 2 additional) in a
    /// reply with or without AA.
    pub fn of(section: u8, aa: bool) -> Self {
        match (section, aa) {
            (0, true) => Self::AnswerAuth,
            (0, false) => Self::AnswerNonAuth,
            (1, true) => Self::AuthorityAuth,
            (1, false) => Self::AuthorityNonAuth,
            _ => Self::Additional,
        }
    }
}

/// Records of one owner, type and class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrSet {
    /// Owner, uncompressed wire format, case as first received.
    pub owner: Vec<u8>,
    /// TYPE.
    pub rtype: u16,
    /// CLASS.
    pub class: u16,
    /// TTL (the smallest of the records', RFC 2181 §5.2), after the configured bounds.
    pub ttl: u32,
    /// RDATA of each record, decompressed, duplicates removed.
    pub rdatas: Vec<Vec<u8>>,
    /// Where it came from.
    pub rank: Rank,
}

impl RrSet {
    /// Octets this RRset takes in memory, for the cache's size accounting.
    pub fn bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + self.owner.capacity()
            + self
                .rdatas
                .iter()
                .map(|r| r.capacity() + core::mem::size_of::<Vec<u8>>())
                .sum::<usize>()
    }

    /// Whether `r` belongs to this RRset (owner compared case-insensitively).
    pub fn holds(&self, r: &Record) -> bool {
        r.rtype == self.rtype && r.class == self.class && r.owner.eq_ignore_ascii_case(&self.owner)
    }
}

/// Groups records into RRsets, in order of first appearance: the TTL of each set is the
/// smallest of its records' (RFC 2181 §5.2 forbids differing TTLs; Unbound takes the
/// minimum), duplicate RDATA dropped (RFC 2181 §5).
pub fn group(records: &[Record], rank: Rank) -> Vec<RrSet> {
    let mut sets: Vec<RrSet> = Vec::new();
    for r in records {
        match sets.iter_mut().find(|s| s.holds(r)) {
            Some(s) => {
                s.ttl = s.ttl.min(r.ttl);
                if !s.rdatas.contains(&r.rdata) {
                    s.rdatas.push(r.rdata.clone());
                }
            }
            None => sets.push(RrSet {
                owner: r.owner.clone(),
                rtype: r.rtype,
                class: r.class,
                ttl: r.ttl,
                rdatas: alloc::vec![r.rdata.clone()],
                rank,
            }),
        }
    }
    sets
}
