//! The cache: rendered answers for (name, type, class) and the RRsets they were built from.
//!
//! Two stores, as Unbound has (`msg-cache-size`, `rrset-cache-size`), each split in shards
//! by the hash of the name so that readers on different workers rarely meet:
//! - the **message store** holds, per question, the answer as it will be sent: header
//!   flags, counts, the records after the question (rendered by [`crate::render`]) and, per
//!   record, where its TTL sits and when its RRset expires. A hit copies those bytes and
//!   writes each TTL as `expiry - now`, so TTLs count down with no work when nothing is
//!   asked;
//! - the **RRset store** holds each RRset once with its rank (RFC 2181 §5.4.1): a new
//!   reply's RRset replaces a live cached one only when it ranks at least as high, and the
//!   message is then built from the RRset that won, so an additional section can't
//!   override an answer.
//!
//! Memory is bounded per store: each shard gets its share of the configured size and
//! evicts with the CLOCK algorithm (a hit only sets a per-entry flag, with a relaxed
//! atomic store done only when the flag is clear, so hits never write shared state in the
//! steady state). Expired entries are removed by eviction or by [`Cache::purge`].
//!
//! The cache owns no lock implementation: the caller picks one per shard through
//! [`ShardLock`] (the daemon a `RwLock`, the unikernel a cell), which keeps this crate
//! `no_std` and the lock choice measurable.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hashbrown::HashTable;
use skua_engine::rrl::ResponseClass;
use skua_engine::store::name_hash;
use skua_engine::{AnswerCache, Cached};

use crate::rrset::RrSet;

/// A lock around one shard, supplied by the caller.
pub trait ShardLock<T> {
    /// Wraps a shard.
    fn new(shard: T) -> Self;
    /// Runs `f` with shared access.
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R;
    /// Runs `f` with exclusive access.
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// Sizes and TTL policy (unbound.conf names in brackets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Bytes for rendered answers [`msg-cache-size`, default 4 MiB].
    pub msg_bytes: usize,
    /// Bytes for RRsets [`rrset-cache-size`, default 4 MiB].
    pub rrset_bytes: usize,
    /// Shards per store (a power of two).
    pub shards: usize,
    /// Lower bound on cached TTLs [`cache-min-ttl`, 0].
    pub min_ttl: u32,
    /// Upper bound on cached TTLs [`cache-max-ttl`, 86400].
    pub max_ttl: u32,
    /// Upper bound on negative TTLs [`cache-max-negative-ttl`, 3600].
    pub max_negative_ttl: u32,
    /// Refresh names asked in the last 10 % of their TTL [`prefetch`].
    pub prefetch: bool,
    /// Answer from expired entries (RFC 8767) [`serve-expired`].
    pub serve_expired: bool,
    /// How long past expiry an entry may be served, 0 for no limit [`serve-expired-ttl`].
    pub serve_expired_ttl: u32,
    /// TTL of stale answers [`serve-expired-reply-ttl`, 30].
    pub serve_expired_reply_ttl: u32,
    /// Milliseconds to try the upstream before a stale answer is sent, 0 to send it at
    /// once [`serve-expired-client-timeout`].
    pub serve_expired_client_timeout: u32,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            msg_bytes: 4 << 20,
            rrset_bytes: 4 << 20,
            shards: 16,
            min_ttl: 0,
            max_ttl: 86400,
            max_negative_ttl: 3600,
            prefetch: false,
            serve_expired: false,
            serve_expired_ttl: 0,
            serve_expired_reply_ttl: 30,
            serve_expired_client_timeout: 0,
        }
    }
}

impl CacheConfig {
    /// A positive TTL within the configured bounds.
    pub fn clamp(&self, ttl: u32) -> u32 {
        ttl.max(self.min_ttl).min(self.max_ttl)
    }

    /// A negative TTL (RFC 2308 §5: min(SOA TTL, SOA MINIMUM)) within the bounds.
    pub fn clamp_negative(&self, ttl: u32) -> u32 {
        ttl.max(self.min_ttl)
            .min(self.max_negative_ttl)
            .min(self.max_ttl)
    }

    /// Whether an entry that expired at `expires` may still be served at `now`.
    fn stale_ok(&self, expires: u32, now: u32) -> bool {
        self.serve_expired
            && (self.serve_expired_ttl == 0 || now.saturating_sub(expires) < self.serve_expired_ttl)
    }
}

/// A question as the cache keys it.
#[derive(Clone, Copy, Debug)]
pub struct Key<'a> {
    /// Lower-cased wire name.
    pub name: &'a [u8],
    /// Its [`name_hash`].
    pub hash: u64,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

impl<'a> Key<'a> {
    /// The key of a lower-cased name.
    pub fn new(name: &'a [u8], qtype: u16, qclass: u16) -> Self {
        Key {
            name,
            hash: name_hash(name),
            qtype,
            qclass,
        }
    }

    fn mixed(&self) -> u64 {
        self.hash
            ^ (u64::from(self.qtype) << 16 | u64::from(self.qclass))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// What a rendered answer says, for counters, rate limiting and flushing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Records in the answer section.
    Positive,
    /// NOERROR, no data (RFC 2308 §2.2).
    NoData,
    /// NXDOMAIN (RFC 2308 §2.1).
    NxDomain,
}

impl Kind {
    /// How response rate limiting classes it.
    pub fn class(self) -> ResponseClass {
        match self {
            Kind::Positive => ResponseClass::Response,
            Kind::NoData => ResponseClass::Nodata,
            Kind::NxDomain => ResponseClass::Nxdomain,
        }
    }
}

impl Rendered {
    /// The answer as the engine takes it ([`skua_engine::Engine::answer_cached`]), with
    /// every TTL fixed (a stale answer) or counted down from the expiries.
    pub fn as_cached(&self, fixed_ttl: Option<u32>) -> Cached<'_> {
        Cached {
            flags: self.flags,
            counts: &self.body.counts,
            bounds: &self.body.bounds,
            tail: &self.body.tail,
            ttls: &self.body.ttls,
            fixed_ttl,
            ede: self.ede,
            refresh: false,
            class: if self.flags & 0xf == 2 {
                ResponseClass::Error
            } else {
                self.kind.class()
            },
        }
    }
}

/// A rendered answer ready to enter the message store.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// Header flags: QR, RA, RCODE (the engine adds RD and CD from the query).
    pub flags: u16,
    /// What it is.
    pub kind: Kind,
    /// The body ([`crate::render::Body`]).
    pub body: crate::render::Body,
    /// When the answer stops being fresh: the earliest expiry of its RRsets.
    pub expires: u32,
    /// Its TTL when it was stored (for prefetch: the last 10 % of it).
    pub ttl: u32,
    /// The forwarding zone it was resolved through (for dropping entries of a zone whose
    /// configuration changed).
    pub zone: u32,
    /// An Extended DNS Error to attach (RFC 8914): SERVFAIL's reason, or 3 for stale.
    pub ede: Option<u16>,
}

/// An entry of the message store.
pub struct MsgEntry {
    name: Box<[u8]>,
    hash: u64,
    qtype: u16,
    qclass: u16,
    r: Rendered,
    prefetch_at: u32,
    bytes: usize,
    referenced: AtomicBool,
    /// A refresh (prefetch or stale) was handed out; cleared when a new answer replaces
    /// this entry.
    refreshing: AtomicBool,
}

/// A message-store hit: the answer as the engine takes it (stale: every TTL fixed, EDE 3
/// "Stale Answer", RFC 8767 §4 and RFC 8914 §4.4; `refresh`: the caller should ask the
/// resolver for the question again, prefetch or stale, and is the first to be told).
pub type Hit<'a> = Cached<'a>;

impl MsgEntry {
    fn hit(&self, fixed_ttl: Option<u32>, stale: bool, refresh: bool) -> Hit<'_> {
        Cached {
            flags: self.r.flags,
            counts: &self.r.body.counts,
            bounds: &self.r.body.bounds,
            tail: &self.r.body.tail,
            ttls: &self.r.body.ttls,
            fixed_ttl,
            ede: stale.then_some(3),
            refresh,
            class: self.r.kind.class(),
        }
    }
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Nothing usable: resolve.
    Miss,
    /// Only a stale entry, to be sent if the upstream does not answer within
    /// `serve-expired-client-timeout`.
    StaleLater,
}

/// Counters, read by metrics.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Fresh hits.
    pub hits: AtomicU64,
    /// Stale answers sent.
    pub stale: AtomicU64,
    /// Lookups that found nothing usable.
    pub misses: AtomicU64,
    /// Refreshes handed out because a name was asked in the last 10 % of its TTL.
    pub prefetches: AtomicU64,
    /// Entries evicted for room.
    pub evictions: AtomicU64,
}

/// One shard of a store: a slab of entries, a hash index and a CLOCK hand.
pub struct Shard<E> {
    index: HashTable<u32>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    hand: usize,
    bytes: usize,
    budget: usize,
}

impl<E> Shard<E> {
    fn new(budget: usize) -> Self {
        Shard {
            index: HashTable::new(),
            slots: Vec::new(),
            free: Vec::new(),
            hand: 0,
            bytes: 0,
            budget,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the shard holds nothing.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

trait Slot {
    fn bytes(&self) -> usize;
    fn hash(&self) -> u64;
    fn referenced(&self) -> &AtomicBool;
}

impl Slot for MsgEntry {
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn hash(&self) -> u64 {
        Key {
            name: &self.name,
            hash: self.hash,
            qtype: self.qtype,
            qclass: self.qclass,
        }
        .mixed()
    }
    fn referenced(&self) -> &AtomicBool {
        &self.referenced
    }
}

/// An entry of the RRset store.
pub struct SetEntry {
    set: RrSet,
    lower: Box<[u8]>,
    hash: u64,
    expires: u32,
    bytes: usize,
    referenced: AtomicBool,
}

impl Slot for SetEntry {
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn hash(&self) -> u64 {
        Key {
            name: &self.lower,
            hash: self.hash,
            qtype: self.set.rtype,
            qclass: self.set.class,
        }
        .mixed()
    }
    fn referenced(&self) -> &AtomicBool {
        &self.referenced
    }
}

#[allow(private_bounds)] // Slot is how the two stores share one shard type, not an API.
impl<E: Slot> Shard<E> {
    fn remove_slot(&mut self, slot: u32) -> Option<E> {
        let e = self.slots.get_mut(slot as usize)?.take()?;
        let h = e.hash();
        if let Ok(o) = self.index.find_entry(h, |&s| s == slot) {
            o.remove();
        }
        self.bytes -= e.bytes();
        self.free.push(slot);
        Some(e)
    }

    /// Evicts until `need` more bytes fit the budget; returns how many entries went.
    /// Expired entries (`expired(e)`) go first in the sweep, referenced ones get a second
    /// chance.
    fn make_room(&mut self, need: usize, expired: impl Fn(&E) -> bool) -> u64 {
        let mut evicted = 0;
        // Two full turns of the hand clear every reference bit, so this ends.
        let mut steps = self.slots.len() * 2 + 1;
        while self.bytes + need > self.budget && !self.index.is_empty() && steps > 0 {
            steps -= 1;
            if self.hand >= self.slots.len() {
                self.hand = 0;
            }
            let slot = self.hand as u32;
            self.hand += 1;
            let Some(e) = &self.slots[slot as usize] else {
                continue;
            };
            if !expired(e) && e.referenced().swap(false, Ordering::Relaxed) {
                continue;
            }
            self.remove_slot(slot);
            evicted += 1;
        }
        evicted
    }

    fn insert(&mut self, e: E, same: impl Fn(&E) -> bool) -> u32 {
        let h = e.hash();
        if let Some(&old) = self
            .index
            .find(h, |&s| self.slots[s as usize].as_ref().is_some_and(&same))
        {
            self.remove_slot(old);
        }
        self.bytes += e.bytes();
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(e);
                s
            }
            None => {
                self.slots.push(Some(e));
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        self.index.insert_unique(h, slot, |&s| {
            slots[s as usize].as_ref().map_or(0, Slot::hash)
        });
        slot
    }

    fn find(&self, h: u64, same: impl Fn(&E) -> bool) -> Option<&E> {
        let &slot = self
            .index
            .find(h, |&s| self.slots[s as usize].as_ref().is_some_and(&same))?;
        self.slots[slot as usize].as_ref()
    }

    fn retain(&mut self, keep: impl Fn(&E) -> bool) -> usize {
        let mut gone = 0;
        for slot in 0..self.slots.len() as u32 {
            if self.slots[slot as usize].as_ref().is_some_and(|e| !keep(e)) {
                self.remove_slot(slot);
                gone += 1;
            }
        }
        gone
    }
}

/// The message shard type, for [`ShardLock`] implementations.
pub type MsgShard = Shard<MsgEntry>;
/// The RRset shard type, for [`ShardLock`] implementations.
pub type SetShard = Shard<SetEntry>;

/// What to flush.
#[derive(Clone, Copy, Debug)]
pub enum Flush<'a> {
    /// Every type of one lower-cased name.
    Name(&'a [u8]),
    /// One name and type.
    Type(&'a [u8], u16),
    /// A name and everything below it.
    Subtree(&'a [u8]),
    /// Negative answers (NXDOMAIN, NODATA) and SERVFAIL entries.
    Negative,
    /// Everything resolved through these zones (their ids).
    Zones(&'a [u32]),
    /// Everything.
    All,
}

/// The cache. `M` and `S` lock one shard of each store.
pub struct Cache<M: ShardLock<MsgShard>, S: ShardLock<SetShard>> {
    config: CacheConfig,
    msgs: Box<[M]>,
    sets: Box<[S]>,
    mask: usize,
    /// Counters.
    pub stats: CacheStats,
}

fn touch(flag: &AtomicBool) {
    // Read first: the common case (already set) writes nothing.
    if !flag.load(Ordering::Relaxed) {
        flag.store(true, Ordering::Relaxed);
    }
}

impl<M: ShardLock<MsgShard>, S: ShardLock<SetShard>> Cache<M, S> {
    /// An empty cache.
    pub fn new(config: CacheConfig) -> Self {
        let shards = config.shards.max(1).next_power_of_two();
        let msgs = (0..shards)
            .map(|_| M::new(Shard::new(config.msg_bytes / shards)))
            .collect();
        let sets = (0..shards)
            .map(|_| S::new(Shard::new(config.rrset_bytes / shards)))
            .collect();
        Cache {
            config,
            msgs,
            sets,
            mask: shards - 1,
            stats: CacheStats::default(),
        }
    }

    /// The policy in force.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    fn shard(&self, hash: u64) -> usize {
        // The low bits pick the hashbrown bucket; take high ones for the shard.
        (hash >> 52) as usize & self.mask
    }

    /// Looks a question up at `now` and calls `f` with what can be sent right away.
    pub fn lookup<R>(
        &self,
        key: &Key<'_>,
        now: u32,
        f: impl FnOnce(&Hit<'_>) -> R,
    ) -> Result<R, Lookup> {
        let h = key.mixed();
        let c = &self.config;
        let r = self.msgs[self.shard(key.hash)].read(|shard| {
            let Some(e) = shard.find(h, |e| {
                e.qtype == key.qtype && e.qclass == key.qclass && *e.name == *key.name
            }) else {
                return Err(Lookup::Miss);
            };
            let fresh = now < e.r.expires;
            let stale = !fresh && c.stale_ok(e.r.expires, now);
            if !fresh && !stale {
                return Err(Lookup::Miss);
            }
            if stale && c.serve_expired_client_timeout != 0 {
                return Err(Lookup::StaleLater);
            }
            touch(&e.referenced);
            let want_refresh = stale || (c.prefetch && now >= e.prefetch_at);
            let refresh = want_refresh
                && !e.refreshing.load(Ordering::Relaxed)
                && !e.refreshing.swap(true, Ordering::Relaxed);
            let hit = e.hit(stale.then_some(c.serve_expired_reply_ttl), stale, refresh);
            Ok((f(&hit), stale, refresh && !stale))
        });
        match r {
            Ok((v, stale, prefetch)) => {
                let counter = if stale {
                    &self.stats.stale
                } else {
                    &self.stats.hits
                };
                counter.fetch_add(1, Ordering::Relaxed);
                if prefetch {
                    self.stats.prefetches.fetch_add(1, Ordering::Relaxed);
                }
                Ok(v)
            }
            Err(e) => {
                if e == Lookup::Miss {
                    self.stats.misses.fetch_add(1, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }

    /// Looks a question up at `now` for a copy of the cache kept elsewhere (the XDP
    /// program's cached answers): calls `f` with the entry and the second from which the
    /// cache stops answering it plainly (its expiry, or its prefetch point with `prefetch`,
    /// or `now` when a refresh is already pending), if it is fresh. Counts no hit and marks
    /// nothing referenced.
    pub fn peek<R>(
        &self,
        key: &Key<'_>,
        now: u32,
        f: impl FnOnce(&Rendered, u32) -> R,
    ) -> Option<R> {
        let h = key.mixed();
        let c = &self.config;
        self.msgs[self.shard(key.hash)].read(|shard| {
            let e = shard.find(h, |e| {
                e.qtype == key.qtype && e.qclass == key.qclass && *e.name == *key.name
            })?;
            if now >= e.r.expires {
                return None;
            }
            let until = if e.refreshing.load(Ordering::Relaxed) {
                now
            } else if c.prefetch {
                e.r.expires.min(e.prefetch_at)
            } else {
                e.r.expires
            };
            Some(f(&e.r, until))
        })
    }

    /// Marks a question's entry referenced: answers sent from a copy of the entry
    /// ([`Cache::peek`]) keep it as safe from eviction as hits here would. False when the
    /// entry is gone.
    pub fn touch(&self, key: &Key<'_>) -> bool {
        let h = key.mixed();
        self.msgs[self.shard(key.hash)].read(|shard| {
            shard
                .find(h, |e| {
                    e.qtype == key.qtype && e.qclass == key.qclass && *e.name == *key.name
                })
                .map(|e| touch(&e.referenced))
                .is_some()
        })
    }

    /// A stale answer for a question whose resolution took too long or failed (RFC 8767
    /// §5), if one may be served at `now`: calls `f` with it.
    pub fn stale<R>(&self, key: &Key<'_>, now: u32, f: impl FnOnce(&Hit<'_>) -> R) -> Option<R> {
        let h = key.mixed();
        let c = &self.config;
        let r = self.msgs[self.shard(key.hash)].read(|shard| {
            let e = shard.find(h, |e| {
                e.qtype == key.qtype && e.qclass == key.qclass && *e.name == *key.name
            })?;
            if now < e.r.expires || !c.stale_ok(e.r.expires, now) {
                return None;
            }
            Some(f(&e.hit(Some(c.serve_expired_reply_ttl), true, false)))
        });
        if r.is_some() {
            self.stats.stale.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// Stores a rendered answer for a question at `now`, replacing the old one.
    pub fn insert(&self, key: &Key<'_>, r: Rendered, now: u32) {
        let ttl = r.ttl;
        let bytes = core::mem::size_of::<MsgEntry>()
            + key.name.len()
            + r.body.tail.capacity()
            + r.body.bounds.capacity()
            + r.body.ttls.capacity();
        let e = MsgEntry {
            name: key.name.into(),
            hash: key.hash,
            qtype: key.qtype,
            qclass: key.qclass,
            // RFC-less but Unbound's rule: refresh in the last 10 % of the TTL.
            prefetch_at: now.saturating_add(ttl - ttl / 10),
            r,
            bytes,
            referenced: AtomicBool::new(false),
            refreshing: AtomicBool::new(false),
        };
        let c = &self.config;
        let evicted = self.msgs[self.shard(key.hash)].write(|shard| {
            if bytes > shard.budget {
                return 0;
            }
            let n = shard.make_room(bytes, |e| {
                now >= e.r.expires && !c.stale_ok(e.r.expires, now)
            });
            shard.insert(e, |o| {
                o.qtype == key.qtype && o.qclass == key.qclass && *o.name == *key.name
            });
            n
        });
        self.stats.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Offers an RRset to the RRset store at `now` and returns the one to use: the new
    /// one, or the cached one when that is still live and ranks higher (RFC 2181 §5.4.1),
    /// with its expiry.
    pub fn offer(&self, set: RrSet, now: u32) -> (RrSet, u32) {
        let lower: Box<[u8]> = set.owner.to_ascii_lowercase().into();
        let hash = name_hash(&lower);
        let key = Key {
            name: &lower,
            hash,
            qtype: set.rtype,
            qclass: set.class,
        };
        let h = key.mixed();
        let (rtype, class) = (set.rtype, set.class);
        let l2 = lower.clone();
        let same = |o: &SetEntry| o.set.rtype == rtype && o.set.class == class && *o.lower == *l2;
        let shard = self.shard(hash);
        let kept = self.sets[shard].read(|s| {
            let o = s.find(h, same)?;
            (now < o.expires && o.set.rank > set.rank).then(|| (o.set.clone(), o.expires))
        });
        if let Some(k) = kept {
            return k;
        }
        let expires = now.saturating_add(set.ttl);
        let bytes = set.bytes() + lower.len() + core::mem::size_of::<SetEntry>();
        let out = set.clone();
        let evicted = self.sets[shard].write(|s| {
            if bytes > s.budget {
                return 0;
            }
            let n = s.make_room(bytes, |o| now >= o.expires);
            s.insert(
                SetEntry {
                    set,
                    lower: lower.clone(),
                    hash,
                    expires,
                    bytes,
                    referenced: AtomicBool::new(false),
                },
                same,
            );
            n
        });
        self.stats.evictions.fetch_add(evicted, Ordering::Relaxed);
        (out, expires)
    }

    /// A live RRset of the store, with its expiry (for following CNAMEs and `lookup`).
    pub fn rrset(&self, lower: &[u8], rtype: u16, class: u16, now: u32) -> Option<(RrSet, u32)> {
        let key = Key::new(lower, rtype, class);
        self.sets[self.shard(key.hash)].read(|s| {
            let o = s.find(key.mixed(), |o| {
                o.set.rtype == rtype && o.set.class == class && *o.lower == *lower
            })?;
            touch(&o.referenced);
            (now < o.expires).then(|| (o.set.clone(), o.expires))
        })
    }

    /// Removes entries; returns how many messages and RRsets went.
    pub fn flush(&self, what: Flush<'_>) -> (usize, usize) {
        use skua_engine::name::is_subdomain;
        let msg_gone = |e: &MsgEntry| match what {
            Flush::Name(n) => *e.name == *n,
            Flush::Type(n, t) => *e.name == *n && e.qtype == t,
            Flush::Subtree(n) => is_subdomain(&e.name, n),
            Flush::Negative => e.r.kind != Kind::Positive,
            Flush::Zones(z) => z.contains(&e.r.zone),
            Flush::All => true,
        };
        let set_gone = |e: &SetEntry| match what {
            Flush::Name(n) => *e.lower == *n,
            Flush::Type(n, t) => *e.lower == *n && e.set.rtype == t,
            Flush::Subtree(n) => is_subdomain(&e.lower, n),
            // RRsets carry no zone: a changed forwarding zone drops its whole subtree
            // through `Subtree` as well.
            Flush::Negative | Flush::Zones(_) => false,
            Flush::All => true,
        };
        let m = self
            .msgs
            .iter()
            .map(|s| s.write(|s| s.retain(|e| !msg_gone(e))))
            .sum();
        let r = self
            .sets
            .iter()
            .map(|s| s.write(|s| s.retain(|e| !set_gone(e))))
            .sum();
        (m, r)
    }

    /// Removes what can no longer be served at `now` (expired, and past serve-expired).
    pub fn purge(&self, now: u32) -> usize {
        let c = &self.config;
        let m: usize = self
            .msgs
            .iter()
            .map(|s| s.write(|s| s.retain(|e| now < e.r.expires || c.stale_ok(e.r.expires, now))))
            .sum();
        let r: usize = self
            .sets
            .iter()
            .map(|s| s.write(|s| s.retain(|e| now < e.expires)))
            .sum();
        m + r
    }

    /// (messages, RRsets, bytes of messages, bytes of RRsets).
    pub fn size(&self) -> (usize, usize, usize, usize) {
        let (mut m, mut mb) = (0, 0);
        for s in self.msgs.iter() {
            s.read(|s| {
                m += s.len();
                mb += s.bytes;
            });
        }
        let (mut r, mut rb) = (0, 0);
        for s in self.sets.iter() {
            s.read(|s| {
                r += s.len();
                rb += s.bytes;
            });
        }
        (m, r, mb, rb)
    }

    /// Calls `f` for every live RRset (name lower-cased, the set, its expiry): for dumps
    /// and `lookup`. Holds one shard's read lock at a time.
    pub fn for_each_rrset(&self, now: u32, mut f: impl FnMut(&RrSet, u32)) {
        for s in self.sets.iter() {
            s.read(|s| {
                for e in s.slots.iter().flatten() {
                    if now < e.expires {
                        f(&e.set, e.expires);
                    }
                }
            });
        }
    }

    /// [`Self::for_each_rrset`] for one lower-cased name: only its shard is read.
    pub fn for_each_rrset_of(&self, lower: &[u8], now: u32, mut f: impl FnMut(&RrSet, u32)) {
        self.sets[self.shard(name_hash(lower))].read(|s| {
            for e in s.slots.iter().flatten() {
                if now < e.expires && *e.lower == *lower {
                    f(&e.set, e.expires);
                }
            }
        });
    }

    /// Calls `f` for every message entry that may be served at `now` (fresh, or stale
    /// within `serve-expired`), of one lower-cased name (its shard only) or of all: for
    /// dumps and lookups ([`crate::dump`]). Holds one shard's read lock at a time; counts
    /// no hit and marks nothing referenced.
    pub fn for_each_msg(&self, now: u32, name: Option<&[u8]>, mut f: impl FnMut(&MsgView<'_>)) {
        let shards = match name {
            Some(n) => {
                let i = self.shard(name_hash(n));
                &self.msgs[i..=i]
            }
            None => &self.msgs[..],
        };
        for s in shards {
            s.read(|s| {
                for e in s.slots.iter().flatten() {
                    if name.is_some_and(|n| *e.name != *n) {
                        continue;
                    }
                    let fresh = now < e.r.expires;
                    if fresh || self.config.stale_ok(e.r.expires, now) {
                        f(&MsgView {
                            name: &e.name,
                            qtype: e.qtype,
                            qclass: e.qclass,
                            rendered: &e.r,
                            stale: !fresh,
                        });
                    }
                }
            });
        }
    }
}

/// A message entry as [`Cache::for_each_msg`] shows it.
#[derive(Clone, Copy, Debug)]
pub struct MsgView<'a> {
    /// Lower-cased query name.
    pub name: &'a [u8],
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// The answer as stored.
    pub rendered: &'a Rendered,
    /// Past its expiry: served only as a stale answer (`serve-expired`).
    pub stale: bool,
}

/// The engine consults the message store for names outside local data: a fresh entry
/// (or a stale one with `serve-expired` and no client timeout) is sent at once.
impl<M: ShardLock<MsgShard>, S: ShardLock<SetShard>> AnswerCache for Cache<M, S> {
    #[inline]
    fn lookup<R>(
        &self,
        lower: &[u8],
        hash: u64,
        qtype: u16,
        qclass: u16,
        now: u32,
        f: impl FnOnce(&Cached<'_>) -> R,
    ) -> Option<R> {
        let key = Key {
            name: lower,
            hash,
            qtype,
            qclass,
        };
        Cache::lookup(self, &key, now, f).ok()
    }
}

/// One thread's lock: a `RefCell` (tests, and the unikernel's single event loop). A cache
/// built on it is not `Sync`, so the compiler keeps it on one thread.
impl<T> ShardLock<T> for core::cell::RefCell<T> {
    fn new(shard: T) -> Self {
        core::cell::RefCell::new(shard)
    }
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.borrow())
    }
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.borrow_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{Section, render};
    use crate::rrset::Rank;
    use alloc::vec;
    use core::cell::RefCell;

    type TestCache = Cache<RefCell<MsgShard>, RefCell<SetShard>>;

    fn a_set(owner: &[u8], ttl: u32, last: u8, rank: Rank) -> RrSet {
        RrSet {
            owner: owner.to_vec(),
            rtype: 1,
            class: 1,
            ttl,
            rdatas: vec![vec![192, 0, 2, last]],
            rank,
        }
    }

    fn rendered(name: &[u8], set: &RrSet, expires: u32, kind: Kind) -> Rendered {
        Rendered {
            flags: 0x8180,
            kind,
            body: render(name, [(set, Section::Answer, expires)]),
            expires,
            ttl: set.ttl,
            zone: 0,
            ede: None,
        }
    }

    fn name(i: u32) -> Vec<u8> {
        let mut n = vec![8];
        n.extend_from_slice(alloc::format!("n{i:07}").as_bytes());
        n.extend_from_slice(b"\x04test\x00");
        n
    }

    /// The TTL the first record of a hit carries at `now`.
    fn ttl_at(c: &TestCache, key: &Key<'_>, now: u32) -> Result<(u32, bool, bool), Lookup> {
        c.lookup(key, now, |h| {
            let mut tail = h.tail.to_vec();
            crate::render::patch_ttls(&mut tail, h.ttls, now, h.fixed_ttl);
            let off = usize::from(u16::from_le_bytes([h.ttls[0], h.ttls[1]]));
            (
                u32::from_be_bytes([tail[off], tail[off + 1], tail[off + 2], tail[off + 3]]),
                h.ede == Some(3),
                h.refresh,
            )
        })
    }

    #[test]
    fn ttl_counts_down_and_entry_expires() {
        let c = TestCache::new(CacheConfig::default());
        let n = name(1);
        let key = Key::new(&n, 1, 1);
        assert_eq!(ttl_at(&c, &key, 100), Err(Lookup::Miss));
        let set = a_set(&n, 300, 1, Rank::AnswerNonAuth);
        c.insert(&key, rendered(&n, &set, 400, Kind::Positive), 100);
        assert_eq!(ttl_at(&c, &key, 100), Ok((300, false, false)));
        assert_eq!(ttl_at(&c, &key, 250), Ok((150, false, false)));
        assert_eq!(ttl_at(&c, &key, 399), Ok((1, false, false)));
        assert_eq!(ttl_at(&c, &key, 400), Err(Lookup::Miss));
        // Another type of the same name is another entry.
        assert_eq!(ttl_at(&c, &Key::new(&n, 28, 1), 100), Err(Lookup::Miss));
        assert_eq!(c.stats.hits.load(Ordering::Relaxed), 3);
        assert_eq!(c.stats.misses.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn prefetch_once_in_last_tenth() {
        let c = TestCache::new(CacheConfig {
            prefetch: true,
            ..CacheConfig::default()
        });
        let n = name(2);
        let key = Key::new(&n, 1, 1);
        let set = a_set(&n, 100, 1, Rank::AnswerNonAuth);
        c.insert(&key, rendered(&n, &set, 1100, Kind::Positive), 1000);
        assert_eq!(ttl_at(&c, &key, 1089), Ok((11, false, false)));
        // At 90 % of the TTL the first hit is told to refresh, the next ones are not.
        assert_eq!(ttl_at(&c, &key, 1090), Ok((10, false, true)));
        assert_eq!(ttl_at(&c, &key, 1091), Ok((9, false, false)));
        assert_eq!(c.stats.prefetches.load(Ordering::Relaxed), 1);
        // The refreshed answer starts over.
        let set = a_set(&n, 100, 2, Rank::AnswerNonAuth);
        c.insert(&key, rendered(&n, &set, 1192, Kind::Positive), 1092);
        assert_eq!(ttl_at(&c, &key, 1181), Ok((11, false, false)));
        assert_eq!(ttl_at(&c, &key, 1182), Ok((10, false, true)));
    }

    #[test]
    fn serve_expired_with_and_without_limit() {
        let cfg = CacheConfig {
            serve_expired: true,
            serve_expired_ttl: 50,
            ..CacheConfig::default()
        };
        let c = TestCache::new(cfg.clone());
        let n = name(3);
        let key = Key::new(&n, 1, 1);
        c.insert(
            &key,
            rendered(
                &n,
                &a_set(&n, 10, 1, Rank::AnswerNonAuth),
                110,
                Kind::Positive,
            ),
            100,
        );
        // Stale: reply TTL 30, EDE flag, one refresh.
        assert_eq!(ttl_at(&c, &key, 110), Ok((30, true, true)));
        assert_eq!(ttl_at(&c, &key, 159), Ok((30, true, false)));
        assert_eq!(ttl_at(&c, &key, 160), Err(Lookup::Miss));
        // With a client timeout the stale answer waits for the resolver.
        let c = TestCache::new(CacheConfig {
            serve_expired_client_timeout: 1800,
            ..cfg
        });
        c.insert(
            &key,
            rendered(
                &n,
                &a_set(&n, 10, 1, Rank::AnswerNonAuth),
                110,
                Kind::Positive,
            ),
            100,
        );
        assert_eq!(ttl_at(&c, &key, 120), Err(Lookup::StaleLater));
        assert_eq!(c.stale(&key, 120, |h| h.fixed_ttl), Some(Some(30)));
        assert_eq!(c.stale(&key, 105, |h| h.fixed_ttl), None);
    }

    #[test]
    fn rank_keeps_answers_from_additional_data() {
        let c = TestCache::new(CacheConfig::default());
        let n = name(4);
        let (won, exp) = c.offer(a_set(&n, 300, 1, Rank::AnswerNonAuth), 0);
        assert_eq!((won.rdatas[0][3], exp), (1, 300));
        // Additional data for the same RRset: the answer stays.
        let (won, exp) = c.offer(a_set(&n, 900, 6, Rank::Additional), 10);
        assert_eq!((won.rdatas[0][3], exp), (1, 300));
        // An answer of the same rank replaces it.
        let (won, exp) = c.offer(a_set(&n, 60, 2, Rank::AnswerNonAuth), 20);
        assert_eq!((won.rdatas[0][3], exp), (2, 80));
        // Once expired, anything replaces it.
        let (won, _) = c.offer(a_set(&n, 60, 7, Rank::Additional), 80);
        assert_eq!(won.rdatas[0][3], 7);
        assert_eq!(c.rrset(&n, 1, 1, 100).unwrap().0.rdatas[0][3], 7);
        assert_eq!(c.rrset(&n, 1, 1, 140), None);
    }

    #[test]
    fn size_is_bounded_and_hot_entries_survive() {
        let cfg = CacheConfig {
            msg_bytes: 64 << 10,
            rrset_bytes: 64 << 10,
            shards: 4,
            ..CacheConfig::default()
        };
        let c = TestCache::new(cfg);
        let hot = name(0);
        let hot_key = Key::new(&hot, 1, 1);
        c.insert(
            &hot_key,
            rendered(
                &hot,
                &a_set(&hot, 3600, 1, Rank::AnswerNonAuth),
                3600,
                Kind::Positive,
            ),
            0,
        );
        for i in 1..5000 {
            let n = name(i);
            let set = a_set(&n, 3600, 1, Rank::AnswerNonAuth);
            c.offer(set.clone(), 0);
            c.insert(
                &Key::new(&n, 1, 1),
                rendered(&n, &set, 3600, Kind::Positive),
                0,
            );
            // The hot name is asked all along.
            let _ = c.lookup(&hot_key, 0, |_| ());
        }
        let (m, r, mb, rb) = c.size();
        assert!(mb <= 64 << 10 && rb <= 64 << 10, "{mb} {rb}");
        assert!(m > 50 && r > 50 && m < 5000, "{m} {r}");
        assert!(c.lookup(&hot_key, 0, |_| ()).is_ok());
        assert!(c.stats.evictions.load(Ordering::Relaxed) > 0);
    }

    #[test]
    fn flushes() {
        let c = TestCache::new(CacheConfig::default());
        let names: Vec<Vec<u8>> = (0..10).map(name).collect();
        for (i, n) in names.iter().enumerate() {
            let kind = if i % 2 == 0 {
                Kind::Positive
            } else {
                Kind::NxDomain
            };
            let mut r = rendered(n, &a_set(n, 300, 1, Rank::AnswerNonAuth), 300, kind);
            r.zone = i as u32 % 3;
            c.insert(&Key::new(n, 1, 1), r, 0);
            c.offer(a_set(n, 300, 1, Rank::AnswerNonAuth), 0);
        }
        assert_eq!(c.flush(Flush::Name(&names[0])), (1, 1));
        assert_eq!(c.flush(Flush::Negative), (5, 0));
        // Left: 2, 4, 6, 8; zones 2, 1, 0, 2.
        assert_eq!(c.flush(Flush::Zones(&[2])), (2, 0));
        assert_eq!(c.flush(Flush::Subtree(b"\x04test\x00")), (2, 9));
        assert_eq!(c.size().0 + c.size().1, 0);
    }
}
