//! Response rate limiting (RRL), with the semantics of BIND 9's `rate-limit` (BIND ARM,
//! "Response Rate Limiting"; `lib/dns/rrl.c`).
//!
//! A UDP response is charged to an **account**: the client's netblock (IPv4 /24, IPv6 /56 by
//! default), the kind of response ([`ResponseClass`]), for answers the question type and
//! class, and a hash of a name: the query name, or for NXDOMAIN the zone apex, for a referral
//! the delegation point, for an answer synthesised from a wildcard the wildcard's parent (so a
//! flood of random names under one zone or one wildcard lands in one account). Each account is
//! a token bucket counted in whole seconds: every second credits `rate` tokens (at most `rate`
//! held), every response costs one; when the balance goes negative the response is
//! **dropped**, or one in `slip` is **slipped**: sent as an empty truncated reply (TC=1) so a
//! real client retries over TCP, where it is never limited. Errors are not truncated but sent
//! as they are ("leaked") at the slip rate. The debt is floored at `window × rate`, so a
//! flood stays limited for up to `window` seconds after it stops exceeding the rate.
//!
//! The table ([`Rrl`]) is allocated once, at [`Rrl::new`], and shared by every worker through
//! `&self`. A slot is one `AtomicU64` holding the whole account (a 22-bit fingerprint, the
//! balance, the last second charged, the slip counter), eight slots to a 64-byte bucket,
//! and every change is one compare-and-swap of that word: concurrent debits of one account
//! are never lost, and an account is created or replaced by the same single CAS. Per
//! response: the query name's hash is the one the answer lookup computed anyway
//! ([`name_hash`](crate::store::name_hash)); one folded multiply of the client netblock and
//! that hash mixed with the class and type (foldhash's mixer, keyed by the caller's seed:
//! clients cannot aim collisions) gives the bucket and the fingerprint; the fingerprint
//! picks the account's two slots in the bucket (two-choice hashing: two words read, not
//! eight); an account charged already this second with a token left is debited without
//! unpacking. Nothing allocates, nothing locks.
//!
//! Races and limits, by design:
//! - Two workers that create the same new account at the same instant pick the same slot
//!   (one CAS wins, the other finds the account and debits it), unless they saw the slots
//!   differently: then the account may exist twice, the copy found second is orphaned and
//!   ages out, and the client gets up to twice its rate for that second.
//! - A new account whose two slots are taken evicts one of them (BIND evicts the least
//!   recently used of the whole table): the one charged longer ago (all accounts idle for
//!   more than `window` seconds count alike), else the one holding more tokens. Evicting
//!   an account forgives its debt, so a flooding account, in debt and charged every second,
//!   is the last to go. With [`RrlConfig::max_table_size`] well above the number of
//!   netblocks × names × types active within `window` seconds, nothing that matters is
//!   evicted.
//! - A fingerprint is 22 bits: a new account matches an unrelated one of its bucket with
//!   probability 2 / 2^22 (1 in 2 million), and is then charged to it (BIND accepts the same
//!   of its 32-bit name hashes: "rare and benign").
//! - Time is 14 bits of seconds in each slot (4.5 hours); an account idle for a multiple of
//!   that (± `window`) comes back with its old balance instead of a full one.
//!
//! The engine owns no clock: the caller passes `now`, whole seconds of a monotonic clock.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::net::IpAddr;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::acl::Netblock;

/// Largest rate accepted (BIND's `DNS_RRL_MAX_RATE`); larger rates are clamped.
pub const MAX_RATE: u32 = 1000;
/// Largest `window` in seconds (BIND: 1-3600).
pub const MAX_WINDOW: u32 = 3600;
/// Largest `slip` (BIND: 0-10).
pub const MAX_SLIP: u8 = 10;
/// Largest table accepted, in accounts (16 Mi slots of 16 bytes: 256 MiB).
pub const MAX_TABLE_SIZE: usize = 1 << 24;

/// The options of BIND's `rate-limit { ... }`, with BIND's defaults ([`Default`]). The
/// configuration names them `rrl-*:` in `server:` (see `docs/rrl.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrlConfig {
    /// `responses-per-second` [`rrl-responses-per-second:`]: answers (NOERROR with records
    /// in the answer section) per second per account; also the rate of the four classes
    /// below when they are not set. 0 = unlimited. Default 0.
    pub responses_per_second: u32,
    /// `nodata-per-second` [`rrl-nodata-per-second:`]: NOERROR responses with an empty
    /// answer section that are not referrals. `None` = as `responses_per_second`.
    pub nodata_per_second: Option<u32>,
    /// `nxdomains-per-second` [`rrl-nxdomains-per-second:`]: NXDOMAIN responses, counted per
    /// zone (not per name). `None` = as `responses_per_second`.
    pub nxdomains_per_second: Option<u32>,
    /// `referrals-per-second` [`rrl-referrals-per-second:`]: referrals (NOERROR, no answer,
    /// NS in authority, AA clear), counted per delegation point. `None` = as
    /// `responses_per_second`.
    pub referrals_per_second: Option<u32>,
    /// `errors-per-second` [`rrl-errors-per-second:`]: every other RCODE (REFUSED, FORMERR,
    /// SERVFAIL, NOTIMP...). `None` = as `responses_per_second`.
    pub errors_per_second: Option<u32>,
    /// `all-per-second` [`rrl-all-per-second:`]: all responses to one client netblock,
    /// whatever the name; checked first, never slips. 0 = unlimited. Default 0.
    pub all_per_second: u32,
    /// `window` [`rrl-window:`]: seconds, 1-3600: how long a flood stays limited (the debt
    /// is floored at `window × rate`) and how long an idle account is remembered. Default 15.
    pub window: u32,
    /// `slip` [`rrl-slip:`], 0-10: one limited response in `slip` is sent truncated (errors:
    /// as is) instead of dropped; 0 = drop all, 1 = slip all. Default 2.
    pub slip: u8,
    /// `ipv4-prefix-length` [`rrl-ipv4-prefix-length:`], 0-32: IPv4 clients share an account
    /// per netblock of this length. Default 24.
    pub ipv4_prefix_length: u8,
    /// `ipv6-prefix-length` [`rrl-ipv6-prefix-length:`], 0-128: IPv6 clients share an
    /// account per netblock of this length. Default 56.
    pub ipv6_prefix_length: u8,
    /// `exempt-clients` [`rrl-exempt-clients:`]: netblocks never limited.
    pub exempt_clients: Vec<Netblock>,
    /// `qps-scale` [`rrl-qps-scale:`]: when the server's responses per second (measured
    /// over the previous second) exceed this, every rate is scaled by `qps-scale / measured`
    /// (at least 1), and a `slip` above 2 too (at least 2); clients that used TCP within
    /// `window` seconds keep the configured rates. 0 = off. Default 0.
    pub qps_scale: u32,
    /// `log-only` [`rrl-log-only:`]: decide and count, but send every response. Default no.
    pub log_only: bool,
    /// `max-table-size` [`rrl-max-table-size:`]: accounts tracked; the table is this many
    /// slots rounded up to a power of two, allocated at once. Default 20000.
    pub max_table_size: usize,
    /// `min-table-size` [`rrl-min-table-size:`]: accepted for BIND compatibility and
    /// ignored (the whole table is allocated at start). Default 500.
    pub min_table_size: usize,
}

impl Default for RrlConfig {
    fn default() -> Self {
        Self {
            responses_per_second: 0,
            nodata_per_second: None,
            nxdomains_per_second: None,
            referrals_per_second: None,
            errors_per_second: None,
            all_per_second: 0,
            window: 15,
            slip: 2,
            ipv4_prefix_length: 24,
            ipv6_prefix_length: 56,
            exempt_clients: Vec::new(),
            qps_scale: 0,
            log_only: false,
            max_table_size: 20_000,
            min_table_size: 500,
        }
    }
}

/// An out-of-range [`RrlConfig`] value ([`Rrl::new`] clamps instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RrlConfigError {
    /// A rate above [`MAX_RATE`].
    Rate,
    /// `window` outside 1-3600.
    Window,
    /// `slip` above 10.
    Slip,
    /// `ipv4-prefix-length` above 32.
    Ipv4Prefix,
    /// `ipv6-prefix-length` above 128.
    Ipv6Prefix,
    /// `max-table-size` 0 or above [`MAX_TABLE_SIZE`].
    TableSize,
}

impl fmt::Display for RrlConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rate => "rates must be at most 1000 per second",
            Self::Window => "the window must be 1 to 3600 seconds",
            Self::Slip => "slip must be 0 to 10",
            Self::Ipv4Prefix => "the IPv4 prefix length must be 0 to 32",
            Self::Ipv6Prefix => "the IPv6 prefix length must be 0 to 128",
            Self::TableSize => "the table size must be 1 to 16777216",
        })
    }
}

impl core::error::Error for RrlConfigError {}

impl RrlConfig {
    /// Whether any rate is set (RRL does nothing otherwise).
    pub fn enabled(&self) -> bool {
        self.responses_per_second != 0
            || self.all_per_second != 0
            || [
                self.nodata_per_second,
                self.nxdomains_per_second,
                self.referrals_per_second,
                self.errors_per_second,
            ]
            .iter()
            .any(|r| r.is_some_and(|r| r != 0))
    }

    /// Checks every value against BIND's ranges.
    pub fn check(&self) -> Result<(), RrlConfigError> {
        let rates = [
            Some(self.responses_per_second),
            self.nodata_per_second,
            self.nxdomains_per_second,
            self.referrals_per_second,
            self.errors_per_second,
            Some(self.all_per_second),
        ];
        if rates.iter().flatten().any(|&r| r > MAX_RATE) {
            return Err(RrlConfigError::Rate);
        }
        if !(1..=MAX_WINDOW).contains(&self.window) {
            return Err(RrlConfigError::Window);
        }
        if self.slip > MAX_SLIP {
            return Err(RrlConfigError::Slip);
        }
        if self.ipv4_prefix_length > 32 {
            return Err(RrlConfigError::Ipv4Prefix);
        }
        if self.ipv6_prefix_length > 128 {
            return Err(RrlConfigError::Ipv6Prefix);
        }
        if !(1..=MAX_TABLE_SIZE).contains(&self.max_table_size) {
            return Err(RrlConfigError::TableSize);
        }
        Ok(())
    }

    /// The rate of a class, defaults applied.
    fn rate(&self, class: ResponseClass) -> u32 {
        let or = |r: Option<u32>| r.unwrap_or(self.responses_per_second);
        match class {
            ResponseClass::Response => self.responses_per_second,
            ResponseClass::Nodata => or(self.nodata_per_second),
            ResponseClass::Nxdomain => or(self.nxdomains_per_second),
            ResponseClass::Referral => or(self.referrals_per_second),
            ResponseClass::Error => or(self.errors_per_second),
        }
    }
}

/// The kind of a response, which picks its rate and how its account is named (BIND's
/// `dns_rrl_rtype_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ResponseClass {
    /// NOERROR with records in the answer section.
    Response = 0,
    /// NOERROR, empty answer section, not a referral.
    Nodata = 1,
    /// NXDOMAIN (name: the zone apex).
    Nxdomain = 2,
    /// NOERROR, no answer, NS in authority, AA clear (name: the delegation point).
    Referral = 3,
    /// Any other RCODE.
    Error = 4,
}

impl ResponseClass {
    /// Classifies by header facts: RCODE, answer count, AA, and whether the authority
    /// section holds NS records.
    pub fn classify(rcode: u16, ancount: u16, aa: bool, ns_in_authority: bool) -> Self {
        match rcode {
            0 if ancount > 0 => Self::Response,
            0 if !aa && ns_in_authority => Self::Referral,
            0 => Self::Nodata,
            3 => Self::Nxdomain,
            _ => Self::Error,
        }
    }

    #[inline(always)]
    pub(crate) fn from_bits(b: u8) -> Self {
        match b {
            0 => Self::Response,
            1 => Self::Nodata,
            2 => Self::Nxdomain,
            3 => Self::Referral,
            _ => Self::Error,
        }
    }
}

/// Which name an account of a precompiled answer is keyed by. Names are kept as their
/// [`name_hash`](crate::store::name_hash), the hash the answer lookup computes anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccountName {
    /// The query name.
    Qname,
    /// A name fixed when the zone is compiled, by its hash: the zone apex (NXDOMAIN) or the
    /// delegation point (referral).
    Fixed(u64),
    /// Synthesised from a wildcard (or a redirect zone) whose parent has this hash: keyed as
    /// the wildcard (`*.` + the parent), apart from the parent's own account.
    Wildcard(u64),
}

impl AccountName {
    /// The account name's hash and whether it is a wildcard, given the query name's hash.
    #[inline]
    pub fn resolve(self, qname_hash: u64) -> (u64, bool) {
        match self {
            Self::Qname => (qname_hash, false),
            Self::Fixed(h) => (h, false),
            Self::Wildcard(h) => (h, true),
        }
    }
}

/// The RRL facts of a precompiled answer, computed when the zone is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerRrl {
    /// Its class.
    pub class: ResponseClass,
    /// Its account name.
    pub name: AccountName,
}

/// One response to charge.
#[derive(Clone, Copy, Debug)]
pub struct Response {
    /// Its class.
    pub class: ResponseClass,
    /// Question type (part of the key of [`ResponseClass::Response`] accounts).
    pub qtype: u16,
    /// Question class (part of the key of answers, NODATA and referrals).
    pub qclass: u16,
    /// The [`name_hash`](crate::store::name_hash) of the account's name, lower-cased wire
    /// form (query name, zone apex, delegation point or wildcard parent; the empty name
    /// when the query had no readable question).
    pub name_hash: u64,
    /// The answer was synthesised from a wildcard whose parent is `name`.
    pub wildcard: bool,
}

impl Response {
    /// The response to charge for a reply counted as `rrl`, to a query whose lower-cased
    /// name has [`name_hash`](crate::store::name_hash) `qname_hash`.
    #[inline(always)]
    pub fn new(rrl: AnswerRrl, qname_hash: u64, qtype: u16, qclass: u16) -> Self {
        let (name_hash, wildcard) = rrl.name.resolve(qname_hash);
        Self {
            class: rrl.class,
            qtype,
            qclass,
            name_hash,
            wildcard,
        }
    }
}

/// What to do with a limited response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Send nothing.
    Drop,
    /// Send a truncated empty reply (TC=1), or for [`ResponseClass::Error`] the response as
    /// it is.
    Slip,
}

/// Account kinds beyond the response classes.
const KIND_ALL: u8 = 5;
const KIND_TCP: u8 = 6;

/// Slots per bucket: 8 × 8 bytes, one cache line.
const SLOTS: usize = 8;
/// Seconds a timestamp may be ahead of `now` and still count as "now": workers read the
/// clock once per batch, so a slower worker may pass a slightly older second.
const MAX_TIME_TRAVEL: u32 = 5;

// Slot word layout: fingerprint (never 0; 0 = free slot), balance (two's complement: the
// floor, MAX_WINDOW × MAX_RATE = 3.6 M, fits), last second charged, slip counter (≤ 10).
const FP_BITS: u32 = 22;
const BAL_BITS: u32 = 24;
const TIME_BITS: u32 = 14;
const BAL_SHIFT: u32 = FP_BITS;
const TIME_SHIFT: u32 = FP_BITS + BAL_BITS;
const SLIP_SHIFT: u32 = FP_BITS + BAL_BITS + TIME_BITS;
const FP_MASK: u64 = (1 << FP_BITS) - 1;
const BAL_MASK: u64 = (1 << BAL_BITS) - 1;
const TIME_MASK: u32 = (1 << TIME_BITS) - 1;

#[derive(Default)]
#[repr(align(64))]
struct Bucket {
    slots: [AtomicU64; SLOTS],
}

/// An account's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Acct {
    /// Tokens; negative = debt.
    balance: i32,
    /// Last second it was charged, low 14 bits.
    time: u32,
    /// Limited responses since the last slip.
    slip: u8,
}

/// The fingerprint of a key: its top bits (the bucket index uses the low ones), never 0.
#[inline(always)]
fn fingerprint(key: u64) -> u64 {
    (key >> (64 - FP_BITS)).max(1)
}

#[inline(always)]
fn pack(a: Acct, fp: u64) -> u64 {
    // Cannot lose bits: |balance| ≤ MAX_WINDOW × MAX_RATE < 2^23, time is masked, slip ≤ 10.
    fp | ((a.balance as u32 as u64) & BAL_MASK) << BAL_SHIFT
        | u64::from(a.time & TIME_MASK) << TIME_SHIFT
        | u64::from(a.slip) << SLIP_SHIFT
}

#[inline(always)]
fn unpack(w: u64) -> Acct {
    // Sign-extend the 24-bit balance.
    let bal = ((((w >> BAL_SHIFT) & BAL_MASK) as u32) << (32 - BAL_BITS)) as i32 >> (32 - BAL_BITS);
    Acct {
        balance: bal,
        time: (w >> TIME_SHIFT) as u32 & TIME_MASK,
        slip: (w >> SLIP_SHIFT) as u8,
    }
}

/// Seconds from `then` to `now` (both 14-bit); timestamps slightly ahead count as 0.
#[inline(always)]
fn age(then: u32, now: u32) -> u32 {
    let d = now.wrapping_sub(then) & TIME_MASK;
    if d > TIME_MASK - MAX_TIME_TRAVEL {
        0
    } else {
        d
    }
}

/// BIND's `debit_rrl_entry`: credit the elapsed seconds, debit one response, decide.
#[inline(always)]
fn debit(acct: Option<Acct>, now: u32, rate: u32, window: u32, slip: u32) -> (Acct, Option<Limit>) {
    let now = now & TIME_MASK;
    // Rates and windows are clamped in `Rrl::new`: these products fit an i32.
    let rate_i = rate as i32;
    let (mut bal, mut sc, time) = match acct {
        None => (rate_i, 0u8, now),
        Some(a) => {
            let el = age(a.time, now);
            // Keep the later of two timestamps (a worker may pass an older second).
            let time = if el == 0 { a.time } else { now };
            if el > window {
                (rate_i, 0, time)
            } else {
                let b = a.balance + rate_i * el as i32;
                if b > rate_i {
                    (rate_i, 0, time)
                } else {
                    (b, a.slip, time)
                }
            }
        }
    };
    bal -= 1;
    if bal >= 0 {
        return (
            Acct {
                balance: bal,
                time,
                slip: sc,
            },
            None,
        );
    }
    let min = -(window as i32 * rate_i);
    bal = bal.max(min);
    let mut verdict = Limit::Drop;
    if slip != 0 {
        if sc == 0 {
            verdict = Limit::Slip;
        }
        sc = sc.saturating_add(1);
        if u32::from(sc) >= slip {
            sc = 0;
        }
    }
    (
        Acct {
            balance: bal,
            time,
            slip: sc,
        },
        Some(verdict),
    )
}

/// A client and its netblock, folded to 64 bits.
#[derive(Clone, Copy, Debug)]
struct Prefix {
    client: IpAddr,
    /// IPv4: the masked address; IPv6: a keyed fold of the masked address.
    net: u64,
    v6: bool,
}

/// An account's place: its bucket (the low bits of `place`) and its fingerprint.
#[derive(Clone, Copy)]
struct Key {
    place: u64,
    fp: u64,
}

/// foldhash's folded multiply: the two halves of the 128-bit product, xored.
#[inline(always)]
fn folded_multiply(x: u64, y: u64) -> u64 {
    let p = u128::from(x) * u128::from(y);
    // Cannot lose what matters: both halves are kept, xored.
    (p as u64) ^ ((p >> 64) as u64)
}

/// The rate-limiting table. Share it between workers (`Arc<Rrl>`); every method takes
/// `&self`.
pub struct Rrl {
    cfg: RrlConfig,
    /// Rates by [`ResponseClass`], then all-per-second.
    rates: [u32; 6],
    window: u32,
    slip: u32,
    v4_mask: u32,
    v6_mask: u128,
    /// Keys of the hash (from the caller's seed): clients cannot aim collisions.
    k_net: u64,
    k_name: u64,
    k_v6: u64,
    /// No exempt clients, no `qps-scale`, no `all-per-second`: [`Rrl::check`]'s fast path.
    simple: bool,
    buckets: Box<[Bucket]>,
    /// Response count of the current second: second << 32 | count.
    qps_now: AtomicU64,
    /// Responses in the previous measured second.
    qps_last: AtomicU32,
}

impl fmt::Debug for Rrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rrl")
            .field("config", &self.cfg)
            .field("slots", &self.capacity())
            .finish_non_exhaustive()
    }
}

fn prefix_mask32(len: u8) -> u32 {
    match len.min(32) {
        0 => 0,
        l => u32::MAX << (32 - u32::from(l)),
    }
}

fn prefix_mask128(len: u8) -> u128 {
    match len.min(128) {
        0 => 0,
        l => u128::MAX << (128 - u32::from(l)),
    }
}

impl Rrl {
    /// Allocates the table (`max_table_size` slots rounded up to a power of two, at least
    /// one bucket of eight) for `cfg`, whose out-of-range values are clamped to BIND's ranges
    /// (see [`RrlConfig::check`]). `seed` keys the hash: pass a random value, so clients
    /// cannot predict which accounts share a bucket.
    pub fn new(cfg: RrlConfig, seed: u64) -> Self {
        let rate = |r: u32| r.min(MAX_RATE);
        let rates = [
            rate(cfg.rate(ResponseClass::Response)),
            rate(cfg.rate(ResponseClass::Nodata)),
            rate(cfg.rate(ResponseClass::Nxdomain)),
            rate(cfg.rate(ResponseClass::Referral)),
            rate(cfg.rate(ResponseClass::Error)),
            rate(cfg.all_per_second),
        ];
        let slots = cfg
            .max_table_size
            .clamp(SLOTS, MAX_TABLE_SIZE)
            .next_power_of_two();
        let buckets: Vec<Bucket> = (0..slots / SLOTS).map(|_| Bucket::default()).collect();
        Self {
            rates,
            window: cfg.window.clamp(1, MAX_WINDOW),
            slip: u32::from(cfg.slip.min(MAX_SLIP)),
            v4_mask: prefix_mask32(cfg.ipv4_prefix_length),
            v6_mask: prefix_mask128(cfg.ipv6_prefix_length),
            // Never zero after the xor with a 32-bit netblock: the top bit is set.
            k_net: folded_multiply(seed, 0x243f_6a88_85a3_08d3) | 1 << 63,
            k_name: folded_multiply(seed ^ 0x1319_8a2e_0370_7344, 0xa409_3822_299f_31d0),
            k_v6: folded_multiply(seed.rotate_left(29), 0x082e_fa98_ec4e_6c89) | 1,
            simple: cfg.exempt_clients.is_empty() && cfg.qps_scale == 0 && rates[5] == 0,
            buckets: buckets.into_boxed_slice(),
            qps_now: AtomicU64::new(0),
            qps_last: AtomicU32::new(0),
            cfg,
        }
    }

    /// The configuration it was built with (as given, before clamping): a daemon keeps the
    /// table across reloads when this equals the new one.
    pub fn config(&self) -> &RrlConfig {
        &self.cfg
    }

    /// `log-only`: the caller sends limited responses anyway.
    pub fn log_only(&self) -> bool {
        self.cfg.log_only
    }

    /// Number of account slots.
    pub fn capacity(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    /// Heap bytes of the table.
    pub fn heap_bytes(&self) -> usize {
        self.buckets.len() * core::mem::size_of::<Bucket>()
    }

    /// Slots in use (a scan of the whole table: for tests and occasional reports).
    pub fn accounts(&self) -> usize {
        self.buckets
            .iter()
            .flat_map(|b| &b.slots)
            .filter(|s| s.load(Ordering::Relaxed) != 0)
            .count()
    }

    /// Whether `client` is in `exempt-clients`.
    pub fn is_exempt(&self, client: IpAddr) -> bool {
        self.cfg
            .exempt_clients
            .iter()
            .any(|n| n.contains_addr(client))
    }

    /// Charges one response to `client` at second `now` and says whether to limit it
    /// (`None`: send it). `tcp` responses are never limited (with `qps-scale`, they mark the
    /// client as a TCP user). The answer does not depend on `log-only`: the caller checks
    /// [`Rrl::log_only`].
    #[inline(always)]
    pub fn check(&self, now: u32, client: IpAddr, tcp: bool, resp: &Response) -> Option<Limit> {
        if !self.simple {
            return self.check_full(now, self.prefix(client), tcp, resp);
        }
        // The common case: one account, one multiply, two words of one bucket, one store.
        let rate = self.rates[resp.class as usize];
        if tcp || rate == 0 {
            return None;
        }
        let key = self.response_key(self.prefix(client), resp);
        self.charge(key, now, rate, self.slip)
    }

    /// [`Rrl::check`] with TCP, `qps-scale` and `all-per-second`.
    #[inline(never)]
    fn check_full(&self, now: u32, prefix: Prefix, tcp: bool, resp: &Response) -> Option<Limit> {
        if !self.cfg.exempt_clients.is_empty() && self.is_exempt(prefix.client) {
            return None;
        }
        let measured = if self.cfg.qps_scale != 0 {
            self.count_qps(now)
        } else {
            0
        };
        if tcp {
            if self.cfg.qps_scale != 0 {
                self.mark_tcp(prefix, now);
            }
            return None;
        }
        // (qps-scale, measured) when the server is over qps-scale and the client did not use
        // TCP lately.
        let scale = (measured > self.cfg.qps_scale
            && self.cfg.qps_scale != 0
            && !self.used_tcp(prefix, now))
        .then_some((u64::from(self.cfg.qps_scale), u64::from(measured)));
        let scaled = |rate: u32| match scale {
            // Cannot truncate: the result is at most `rate`.
            Some((q, m)) => ((u64::from(rate) * q / m) as u32).max(1),
            None => rate,
        };
        let all = self.rates[KIND_ALL as usize];
        if all != 0 {
            let key = self.key(prefix, 0, KIND_ALL, 0);
            if let Some(l) = self.charge(key, now, scaled(all), 0) {
                return Some(l);
            }
        }
        let rate = self.rates[resp.class as usize];
        if rate == 0 {
            return None;
        }
        let slip = match scale {
            // Cannot truncate: at most `slip`.
            Some((q, m)) if self.slip > 2 => ((u64::from(self.slip) * q / m) as u32).max(2),
            _ => self.slip,
        };
        let key = self.response_key(prefix, resp);
        self.charge(key, now, scaled(rate), slip)
    }

    /// BIND's `make_key`: the question type counts for answers only, the class for answers,
    /// NODATA and referrals (their empty answer sections carry no type).
    #[inline(always)]
    fn response_key(&self, prefix: Prefix, resp: &Response) -> Key {
        // Which of qtype (bits 16-31) and qclass (bits 32-47) each class keeps.
        const KEEP: [u64; 5] = [
            0xffff_ffff << 16, // answers: qtype and qclass
            0xffff << 32,      // NODATA: qclass
            0,                 // NXDOMAIN
            0xffff << 32,      // referral: qclass
            0,                 // error
        ];
        let word = (u64::from(resp.qtype) << 16 | u64::from(resp.qclass) << 32)
            & KEEP[resp.class as usize]
            | u64::from(resp.wildcard) << 48;
        self.key(prefix, resp.name_hash, resp.class as u8, word)
    }

    /// The client's netblock and whether it is IPv6 (IPv4-mapped IPv6 clients count as
    /// IPv4: a dual-stack socket reports IPv4 clients so).
    #[inline(always)]
    fn prefix(&self, client: IpAddr) -> Prefix {
        let (net, v6) = match client {
            IpAddr::V4(a) => (u64::from(u32::from(a) & self.v4_mask), false),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(a) => (u64::from(u32::from(a) & self.v4_mask), false),
                None => {
                    let b = u128::from(a) & self.v6_mask;
                    // Cannot lose what matters: both halves go into the fold.
                    let (hi, lo) = ((b >> 64) as u64, b as u64);
                    (folded_multiply(hi ^ self.k_v6, lo ^ self.k_name), true)
                }
            },
        };
        Prefix { client, net, v6 }
    }

    /// An account: a keyed hash of the netblock, the account's name (its hash, the one the
    /// answer lookup computed) and the kind and `word` (question type and class, wildcard
    /// flag): one folded multiply. Its low bits pick the bucket, its top bits are the
    /// fingerprint.
    #[inline(always)]
    fn key(&self, prefix: Prefix, name_hash: u64, kind: u8, word: u64) -> Key {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let w = word | u64::from(prefix.v6) << 56 | u64::from(kind);
        let place = folded_multiply(
            prefix.net ^ self.k_net,
            name_hash ^ self.k_name ^ w.wrapping_mul(K),
        );
        Key {
            place,
            fp: fingerprint(place),
        }
    }

    #[inline(always)]
    fn bucket(&self, place: u64) -> &Bucket {
        // The bucket count is a power of two.
        &self.buckets[(place as usize) & (self.buckets.len() - 1)]
    }

    /// The two slots account `key` may live in: its bucket's, picked by its fingerprint
    /// (two-choice hashing: a lookup reads two words, not eight).
    #[inline(always)]
    fn candidates(&self, key: Key) -> [&AtomicU64; 2] {
        let b = self.bucket(key.place);
        let i = (key.fp & 7) as usize;
        let j = i ^ (((key.fp >> 3) & 7) | 1) as usize;
        [&b.slots[i], &b.slots[j]]
    }

    /// The slot of account `key` and its word, or (a new account) the slot it is to take.
    #[inline(always)]
    fn slot(&self, key: Key, now: u32) -> (&AtomicU64, u64, bool) {
        let fp = key.fp;
        let [si, sj] = self.candidates(key);
        let wi = si.load(Ordering::Relaxed);
        if wi & FP_MASK == fp {
            return (si, wi, true);
        }
        let wj = sj.load(Ordering::Relaxed);
        if wj & FP_MASK == fp {
            return (sj, wj, true);
        }
        // A new account: free slot first, else the account charged longer ago (up to
        // `window`: older ones are all as good as free), else the one with more tokens
        // (evicting it forgives the least). A flood's account, in debt and charged every
        // second, is the last to go.
        if self.evictability(wj, now) > self.evictability(wi, now) {
            (sj, wj, false)
        } else {
            (si, wi, false)
        }
    }

    /// How little is lost by evicting the account of slot word `w`.
    #[inline(always)]
    fn evictability(&self, w: u64, now: u32) -> u64 {
        if w == 0 {
            return u64::MAX;
        }
        let a = unpack(w);
        let el = age(a.time, now & TIME_MASK).min(self.window + 1);
        // Cannot wrap: |balance| < 2^23.
        u64::from(el) << 32 | u64::from((a.balance + (1 << 23)) as u32)
    }

    /// Debits account `key` (BIND's `debit_rrl_entry`).
    #[inline(always)]
    fn charge(&self, key: Key, now: u32, rate: u32, slip: u32) -> Option<Limit> {
        let fp = key.fp;
        loop {
            let (slot, cur, found) = self.slot(key, now);
            // The common case, answered without unpacking: an account already charged
            // this second with a token left loses one token.
            let bal_field = (cur >> BAL_SHIFT) & BAL_MASK;
            let (next, verdict) = if found
                && (cur >> TIME_SHIFT) as u32 & TIME_MASK == now & TIME_MASK
                && bal_field.wrapping_sub(1) < (1 << (BAL_BITS - 1)) - 1
            {
                (cur - (1 << BAL_SHIFT), None)
            } else {
                let (a, v) = debit(found.then(|| unpack(cur)), now, rate, self.window, slip);
                (pack(a, fp), v)
            };
            if slot
                .compare_exchange(cur, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return verdict;
            }
        }
    }

    #[cold]
    fn mark_tcp(&self, prefix: Prefix, now: u32) {
        let key = self.key(prefix, 0, KIND_TCP, 0);
        let fresh = Acct {
            balance: 0,
            time: now & TIME_MASK,
            slip: 0,
        };
        loop {
            let (slot, cur, _) = self.slot(key, now);
            if slot
                .compare_exchange(
                    cur,
                    pack(fresh, key.fp),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return;
            }
        }
    }

    fn used_tcp(&self, prefix: Prefix, now: u32) -> bool {
        let key = self.key(prefix, 0, KIND_TCP, 0);
        self.candidates(key).iter().any(|s| {
            let w = s.load(Ordering::Relaxed);
            w & FP_MASK == key.fp && age(unpack(w).time, now & TIME_MASK) < self.window
        })
    }

    /// Counts this response in the current second; returns the responses of the previous
    /// second (per second, when seconds were skipped).
    fn count_qps(&self, now: u32) -> u32 {
        for _ in 0..4 {
            let cur = self.qps_now.load(Ordering::Relaxed);
            let sec = (cur >> 32) as u32;
            let ahead = now.wrapping_sub(sec);
            if ahead == 0 || ahead > u32::MAX / 2 {
                // This second, or a worker with an older second.
                break;
            }
            let fresh = (u64::from(now) << 32) | 1;
            if self
                .qps_now
                .compare_exchange(cur, fresh, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                // Cannot truncate: the low half of `cur` is the count.
                let last = cur as u32 / ahead;
                self.qps_last.store(last, Ordering::Relaxed);
                return last;
            }
        }
        self.qps_now.fetch_add(1, Ordering::Relaxed);
        self.qps_last.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{DropReason, Outcome, ReplyInfo, Request, Transport};
    use crate::name::WireName;
    use crate::store::AuthZoneSpec;
    use crate::text::parse_rr;
    use crate::{Engine, EngineBuilder};
    use alloc::string::String;
    use alloc::sync::Arc;
    use alloc::vec;
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn wire(name: &str) -> Vec<u8> {
        WireName::parse(name, None)
            .unwrap()
            .to_lowercase()
            .as_bytes()
            .to_vec()
    }

    fn cfg(rate: u32) -> RrlConfig {
        RrlConfig {
            responses_per_second: rate,
            ..RrlConfig::default()
        }
    }

    fn answer(name: &[u8]) -> Response {
        Response {
            class: ResponseClass::Response,
            qtype: 1,
            qclass: 1,
            name_hash: crate::store::name_hash(name),
            wildcard: false,
        }
    }

    impl Rrl {
        /// The state of `resp`'s account for `client`, if it has one.
        fn peek(&self, client: IpAddr, resp: &Response) -> Option<Acct> {
            let prefix = self.prefix(client);
            let key = self.response_key(prefix, resp);
            self.peek_key(key)
        }

        fn peek_all(&self, client: IpAddr) -> Option<Acct> {
            let prefix = self.prefix(client);
            self.peek_key(self.key(prefix, 0, KIND_ALL, 0))
        }

        fn peek_key(&self, key: Key) -> Option<Acct> {
            self.candidates(key)
                .iter()
                .map(|s| s.load(Ordering::Relaxed))
                .find(|w| w & FP_MASK == key.fp)
                .map(unpack)
        }
    }

    /// `n` UDP responses at `now`: the verdicts.
    fn run(r: &Rrl, now: u32, client: &str, resp: &Response, n: usize) -> Vec<Option<Limit>> {
        (0..n)
            .map(|_| r.check(now, ip(client), false, resp))
            .collect()
    }

    fn passes(v: &[Option<Limit>]) -> usize {
        v.iter().filter(|x| x.is_none()).count()
    }

    #[test]
    fn pack_round_trip() {
        for (balance, time, slip) in [(0, 0, 0), (-3_600_000, 0x3fff, 9), (1000, 12345, 10)] {
            let a = Acct {
                balance,
                time,
                slip,
            };
            for fp in [1, 0x2a_5a5a, FP_MASK] {
                let w = pack(a, fp);
                assert_eq!((unpack(w), w & FP_MASK), (a, fp));
            }
        }
        // Fingerprints are never 0 (a free slot).
        assert_eq!(fingerprint(0), 1);
        assert_eq!(fingerprint(u64::MAX), FP_MASK);
    }

    #[test]
    fn per_second_limit_and_debt() {
        let r = Rrl::new(RrlConfig { slip: 0, ..cfg(5) }, 1);
        let name = wire("www.example.");
        let a = answer(&name);
        // A fresh account holds `rate` tokens: 5 pass, the rest of the second is dropped.
        let v = run(&r, 100, "198.18.0.1", &a, 10);
        assert_eq!(v[..5], [None; 5]);
        assert_eq!(v[5..], [Some(Limit::Drop); 5]);
        assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, -5);
        // Dropped responses are debited too (BIND): a client asking twice its rate every
        // second gets nothing once its first second is spent, and its debt grows by 5 a
        // second...
        for now in 101..110 {
            assert_eq!(
                passes(&run(&r, now, "198.18.0.1", &a, 10)),
                0,
                "second {now}"
            );
        }
        assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, -50);
        // ... down to window × rate, where it stays.
        for now in 110..130 {
            assert_eq!(
                passes(&run(&r, now, "198.18.0.1", &a, 10)),
                0,
                "second {now}"
            );
        }
        assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, -75);
    }

    #[test]
    fn credit_after_idle_is_capped_at_rate() {
        let r = Rrl::new(RrlConfig { slip: 0, ..cfg(5) }, 1);
        let name = wire("www.example.");
        let a = answer(&name);
        assert_eq!(passes(&run(&r, 10, "198.18.0.1", &a, 5)), 5);
        // One second later: 5 tokens again (0 + 5, capped at 5).
        assert_eq!(passes(&run(&r, 11, "198.18.0.1", &a, 8)), 5);
        // Three idle seconds credit at most `rate`: still 5.
        assert_eq!(passes(&run(&r, 14, "198.18.0.1", &a, 8)), 5);
        // Partial credit: 2 used at 20 (3 left), next second 3 + 5 capped to 5.
        assert_eq!(passes(&run(&r, 20, "198.18.0.1", &a, 2)), 2);
        assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, 3);
        assert_eq!(passes(&run(&r, 21, "198.18.0.1", &a, 8)), 5);
    }

    #[test]
    fn window_floor_keeps_a_flood_limited_for_window_seconds() {
        let name = wire("www.example.");
        let a = answer(&name);
        let flooded = || {
            let r = Rrl::new(RrlConfig { slip: 0, ..cfg(5) }, 1);
            run(&r, 1000, "198.18.0.1", &a, 1000);
            assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, -75);
            r
        };
        // 15 seconds later the credit (75) only pays the debt: still limited.
        let r = flooded();
        assert_eq!(run(&r, 1015, "198.18.0.1", &a, 1), [Some(Limit::Drop)]);
        // 16 seconds: idle longer than the window, a fresh account.
        let r = flooded();
        assert_eq!(run(&r, 1016, "198.18.0.1", &a, 1), [None]);
        assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, 4);
        // A client that keeps asking once a second after the flood pays 4 a second back:
        // -75 + 4k ≥ 0 from the 19th second on (BIND's arithmetic).
        let r = flooded();
        let firsts: Vec<u32> = (1001..1030)
            .filter(|&t| r.check(t, ip("198.18.0.1"), false, &a).is_none())
            .collect();
        assert_eq!(firsts.first(), Some(&1019));
    }

    fn limited_sequence(slip: u8) -> Vec<Option<Limit>> {
        let r = Rrl::new(RrlConfig { slip, ..cfg(1) }, 7);
        let name = wire("www.example.");
        let v = run(&r, 5, "198.18.0.1", &answer(&name), 10);
        assert_eq!(v[0], None);
        v[1..].to_vec()
    }

    #[test]
    fn slip_ratios() {
        use Limit::{Drop as D, Slip as S};
        let all = |l: Limit| vec![Some(l); 9];
        assert_eq!(limited_sequence(1), all(S));
        assert_eq!(limited_sequence(0), all(D));
        let seq = |p: &[Limit]| p.iter().map(|&l| Some(l)).collect::<Vec<_>>();
        assert_eq!(limited_sequence(2), seq(&[S, D, S, D, S, D, S, D, S]));
        assert_eq!(limited_sequence(3), seq(&[S, D, D, S, D, D, S, D, D]));
        assert_eq!(limited_sequence(10), seq(&[S, D, D, D, D, D, D, D, D]));
        // Out of range: clamped to 10.
        assert_eq!(limited_sequence(200), limited_sequence(10));
    }

    #[test]
    fn slip_counter_resets_when_the_account_recovers() {
        let r = Rrl::new(RrlConfig { slip: 3, ..cfg(1) }, 7);
        let name = wire("www.example.");
        let a = answer(&name);
        // pass, slip, drop: the counter is at 2.
        assert_eq!(
            run(&r, 5, "198.18.0.1", &a, 3),
            [None, Some(Limit::Slip), Some(Limit::Drop)]
        );
        // Four seconds later: -2 + 4 > 1, full again and the counter reset: the first
        // limited response slips again.
        assert_eq!(run(&r, 9, "198.18.0.1", &a, 2), [None, Some(Limit::Slip)]);
        // After only three (-2 + 3 = 1, not above the rate) the counter goes on (BIND).
        let other = wire("other.example.");
        let o = answer(&other);
        run(&r, 5, "198.18.0.1", &o, 3);
        assert_eq!(run(&r, 8, "198.18.0.1", &o, 2), [None, Some(Limit::Drop)]);
    }

    #[test]
    fn all_per_second_is_checked_first_and_never_slips() {
        let r = Rrl::new(
            RrlConfig {
                all_per_second: 3,
                slip: 1,
                ..cfg(100)
            },
            3,
        );
        let names: Vec<Vec<u8>> = (0..5)
            .map(|i| wire(&std::format!("n{i}.example.")))
            .collect();
        let v: Vec<_> = names
            .iter()
            .map(|n| r.check(0, ip("198.18.0.1"), false, &answer(n)))
            .collect();
        // Every name's own account is fresh; the client's total decides, by dropping.
        assert_eq!(v, [None, None, None, Some(Limit::Drop), Some(Limit::Drop)]);
        // The limited responses were not debited from their names' accounts.
        assert_eq!(
            r.peek(ip("198.18.0.1"), &answer(&names[0]))
                .unwrap()
                .balance,
            99
        );
        assert!(r.peek(ip("198.18.0.1"), &answer(&names[3])).is_none());
        assert_eq!(r.peek_all(ip("198.18.0.1")).unwrap().balance, -2);
        // Another netblock has its own total.
        assert_eq!(
            r.check(0, ip("198.18.1.1"), false, &answer(&names[3])),
            None
        );
    }

    #[test]
    fn all_per_second_lets_the_class_limit_speak_when_under() {
        let r = Rrl::new(
            RrlConfig {
                all_per_second: 10,
                slip: 2,
                ..cfg(1)
            },
            3,
        );
        let name = wire("www.example.");
        assert_eq!(
            run(&r, 0, "198.18.0.1", &answer(&name), 3),
            [None, Some(Limit::Slip), Some(Limit::Drop)]
        );
        assert_eq!(r.peek_all(ip("198.18.0.1")).unwrap().balance, 7);
    }

    #[test]
    fn prefix_aggregation() {
        let r = Rrl::new(RrlConfig { slip: 0, ..cfg(1) }, 9);
        let name = wire("www.example.");
        let a = answer(&name);
        let one = |c: &str| r.check(0, ip(c), false, &a);
        assert_eq!(one("198.18.0.1"), None);
        // Same /24: shared account.
        assert_eq!(one("198.18.0.200"), Some(Limit::Drop));
        // IPv4-mapped IPv6 (dual-stack socket) is the same IPv4 client.
        assert_eq!(one("::ffff:198.18.0.7"), Some(Limit::Drop));
        // Next /24: its own.
        assert_eq!(one("198.18.1.1"), None);
        // IPv6 /56: 2001:db8:0:0000::/56 holds 2001:db8:0:ff::/64.
        assert_eq!(one("2001:db8::1"), None);
        assert_eq!(one("2001:db8:0:ff::2"), Some(Limit::Drop));
        assert_eq!(one("2001:db8:0:100::1"), None);
        // An IPv6 netblock never shares with the IPv4 one of equal bits.
        assert_eq!(one("::c612:0"), None);
        // Prefix lengths are options.
        let r32 = Rrl::new(
            RrlConfig {
                slip: 0,
                ipv4_prefix_length: 32,
                ipv6_prefix_length: 128,
                ..cfg(1)
            },
            9,
        );
        assert_eq!(r32.check(0, ip("198.18.0.1"), false, &a), None);
        assert_eq!(r32.check(0, ip("198.18.0.2"), false, &a), None);
        assert_eq!(r32.check(0, ip("2001:db8::1"), false, &a), None);
        assert_eq!(r32.check(0, ip("2001:db8::2"), false, &a), None);
    }

    #[test]
    fn keys_separate_names_types_and_classes() {
        let r = Rrl::new(RrlConfig { slip: 0, ..cfg(1) }, 9);
        let www = wire("www.example.");
        let mail = wire("mail.example.");
        let c = "198.18.0.1";
        assert_eq!(r.check(0, ip(c), false, &answer(&www)), None);
        assert_eq!(r.check(0, ip(c), false, &answer(&mail)), None);
        let aaaa = Response {
            qtype: 28,
            ..answer(&www)
        };
        assert_eq!(r.check(0, ip(c), false, &aaaa), None);
        let nodata = |qtype| Response {
            class: ResponseClass::Nodata,
            qtype,
            ..answer(&www)
        };
        // NODATA accounts ignore the type (BIND: nothing in the answer says which).
        assert_eq!(r.check(0, ip(c), false, &nodata(16)), None);
        assert_eq!(r.check(0, ip(c), false, &nodata(15)), Some(Limit::Drop));
        // A wildcard account differs from the exact name's.
        let w = Response {
            wildcard: true,
            ..answer(&www)
        };
        assert_eq!(r.check(0, ip(c), false, &w), None);
    }

    #[test]
    fn per_class_rates_default_to_responses_per_second() {
        let r = Rrl::new(
            RrlConfig {
                nxdomains_per_second: Some(0),
                errors_per_second: Some(2),
                slip: 0,
                ..cfg(1)
            },
            1,
        );
        let z = wire("example.");
        let of = |class| Response {
            class,
            ..answer(&z)
        };
        // NXDOMAIN unlimited (0), errors at 2, NODATA and referrals at 1 (the default).
        assert_eq!(
            passes(&run(&r, 0, "198.18.0.1", &of(ResponseClass::Nxdomain), 50)),
            50
        );
        assert_eq!(
            passes(&run(&r, 0, "198.18.0.1", &of(ResponseClass::Error), 5)),
            2
        );
        assert_eq!(
            passes(&run(&r, 0, "198.18.0.1", &of(ResponseClass::Nodata), 5)),
            1
        );
        assert_eq!(
            passes(&run(&r, 0, "198.18.0.1", &of(ResponseClass::Referral), 5)),
            1
        );
        // responses-per-second 0 with one class set: only that class is limited.
        let only = Rrl::new(
            RrlConfig {
                nxdomains_per_second: Some(1),
                slip: 0,
                ..cfg(0)
            },
            1,
        );
        assert!(only.config().enabled());
        assert_eq!(
            passes(&run(
                &only,
                0,
                "198.18.0.1",
                &of(ResponseClass::Response),
                9
            )),
            9
        );
        assert_eq!(
            passes(&run(
                &only,
                0,
                "198.18.0.1",
                &of(ResponseClass::Nxdomain),
                9
            )),
            1
        );
        assert!(!RrlConfig::default().enabled());
    }

    #[test]
    fn exempt_clients_are_never_limited() {
        let r = Rrl::new(
            RrlConfig {
                exempt_clients: vec![
                    "198.18.0.0/24".parse().unwrap(),
                    "2001:db8::/32".parse().unwrap(),
                ],
                slip: 0,
                ..cfg(1)
            },
            1,
        );
        let name = wire("www.example.");
        let a = answer(&name);
        assert_eq!(passes(&run(&r, 0, "198.18.0.9", &a, 20)), 20);
        assert_eq!(passes(&run(&r, 0, "::ffff:198.18.0.9", &a, 20)), 20);
        assert_eq!(passes(&run(&r, 0, "2001:db8:1::1", &a, 20)), 20);
        assert_eq!(passes(&run(&r, 0, "198.18.1.9", &a, 20)), 1);
        assert_eq!(r.accounts(), 1, "exempt clients create no account");
    }

    #[test]
    fn tcp_is_never_limited() {
        let r = Rrl::new(RrlConfig { slip: 0, ..cfg(1) }, 1);
        let name = wire("www.example.");
        let a = answer(&name);
        for _ in 0..100 {
            assert_eq!(r.check(0, ip("198.18.0.1"), true, &a), None);
        }
        // Nor does it use up the UDP account.
        assert_eq!(r.check(0, ip("198.18.0.1"), false, &a), None);
        assert_eq!(r.accounts(), 1);
    }

    #[test]
    fn qps_scale_scales_rates_and_spares_tcp_clients() {
        let r = Rrl::new(
            RrlConfig {
                qps_scale: 10,
                slip: 0,
                ..cfg(20)
            },
            1,
        );
        let name = wire("www.example.");
        let a = answer(&name);
        // Second 0: 99 UDP responses to 99 netblocks and one TCP response: 100 qps.
        for i in 0..99u32 {
            let c = IpAddr::from(core::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)));
            assert_eq!(r.check(0, c, false, &a), None);
        }
        assert_eq!(r.check(0, ip("198.18.7.1"), true, &a), None);
        // Second 1: 100 measured > 10: rate 20 × 10 / 100 = 2.
        assert_eq!(passes(&run(&r, 1, "198.18.0.1", &a, 5)), 2);
        // The client that used TCP keeps its 20.
        assert_eq!(passes(&run(&r, 1, "198.18.7.200", &a, 25)), 20);
        // Second 2 measures second 1's 30 responses: 20 × 10 / 30 = 6.
        assert_eq!(passes(&run(&r, 2, "198.18.9.1", &a, 10)), 6);
        // Second 4 (second 3 silent): 10 responses over 2 seconds = 5 ≤ 10, no scaling.
        assert_eq!(passes(&run(&r, 4, "198.18.10.1", &a, 25)), 20);
    }

    #[test]
    fn qps_scale_scales_slip_above_two_and_keeps_rate_at_least_one() {
        let r = Rrl::new(
            RrlConfig {
                qps_scale: 50,
                slip: 10,
                ..cfg(1)
            },
            1,
        );
        let name = wire("www.example.");
        let a = answer(&name);
        for i in 0..100u32 {
            let c = IpAddr::from(core::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)));
            r.check(0, c, false, &a);
        }
        // 100 > 50: rate 1 × 50 / 100 rounds to 0, kept at 1; slip 10 × 50 / 100 = 5.
        use Limit::{Drop as D, Slip as S};
        assert_eq!(
            run(&r, 1, "198.18.0.1", &a, 7),
            [None, Some(S), Some(D), Some(D), Some(D), Some(D), Some(S)]
        );
        // slip 2 is never scaled, slip 4 not below 2.
        let r2 = Rrl::new(
            RrlConfig {
                qps_scale: 1,
                slip: 4,
                ..cfg(1)
            },
            1,
        );
        for i in 0..100u32 {
            let c = IpAddr::from(core::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)));
            r2.check(0, c, false, &a);
        }
        assert_eq!(
            run(&r2, 1, "198.18.0.1", &a, 5),
            [None, Some(S), Some(D), Some(S), Some(D)]
        );
    }

    #[test]
    fn a_full_bucket_keeps_the_accounts_that_matter() {
        // One bucket of eight slots; every account has two of them.
        let r = Rrl::new(
            RrlConfig {
                max_table_size: 1,
                slip: 0,
                ..cfg(1)
            },
            1,
        );
        assert_eq!(r.capacity(), 8);
        let name = wire("www.example.");
        let a = answer(&name);
        let flooder = ip("198.18.0.1");
        assert_eq!(passes(&run(&r, 0, "198.18.0.1", &a, 20)), 1);
        assert_eq!(r.peek(flooder, &a).unwrap().balance, -15);
        // A thousand other netblocks, one response each, in the same second: free slots go
        // first, then accounts with more tokens than the flooder's debt.
        for i in 1..=1000u32 {
            let c = IpAddr::from(core::net::Ipv4Addr::from(0xc612_0000 + (i << 8)));
            assert_eq!(r.check(0, c, false, &a), None);
        }
        assert_eq!(r.accounts(), 8);
        assert_eq!(r.peek(flooder, &a).unwrap().balance, -15);
        assert_eq!(r.check(1, flooder, false, &a), Some(Limit::Drop));
        // An account charged longer ago goes before one charged this second, whatever its
        // balance: at 40, every account of seconds 0 and 1 is older than the window and
        // goes before the new ones, the flooder too once it is the last old one.
        for i in 1001..=3000u32 {
            let c = IpAddr::from(core::net::Ipv4Addr::from(0xc612_0000 + (i << 8)));
            assert_eq!(r.check(40, c, false, &a), None);
        }
        assert!(r.peek(flooder, &a).is_none());
        // Evicted, it starts afresh (BIND would too after `window` seconds).
        assert_eq!(r.check(40, flooder, false, &a), None);
        assert_eq!(r.accounts(), 8);
        // Many more accounts than slots over time: no panic, the table stays at its size.
        for i in 0..10_000u32 {
            let c = IpAddr::from(core::net::Ipv4Addr::from(i << 8));
            r.check(50 + i / 100, c, false, &a);
        }
        assert_eq!(r.accounts(), 8);
        // The default size: 20,000 rounded up to 32,768 slots of 8 bytes.
        let d = Rrl::new(cfg(1), 1);
        assert_eq!((d.capacity(), d.heap_bytes()), (32_768, 256 * 1024));
    }

    #[test]
    fn out_of_range_options_are_reported_and_clamped() {
        assert_eq!(RrlConfig::default().check(), Ok(()));
        let bad = [
            (cfg(1001), RrlConfigError::Rate),
            (
                RrlConfig {
                    window: 0,
                    ..cfg(1)
                },
                RrlConfigError::Window,
            ),
            (RrlConfig { slip: 11, ..cfg(1) }, RrlConfigError::Slip),
            (
                RrlConfig {
                    ipv4_prefix_length: 33,
                    ..cfg(1)
                },
                RrlConfigError::Ipv4Prefix,
            ),
            (
                RrlConfig {
                    ipv6_prefix_length: 129,
                    ..cfg(1)
                },
                RrlConfigError::Ipv6Prefix,
            ),
            (
                RrlConfig {
                    max_table_size: 0,
                    ..cfg(1)
                },
                RrlConfigError::TableSize,
            ),
        ];
        for (c, e) in bad {
            assert_eq!(c.check(), Err(e));
            // Rrl::new takes it anyway, clamped, and works.
            let r = Rrl::new(c, 1);
            let name = wire("x.");
            r.check(0, ip("198.18.0.1"), false, &answer(&name));
        }
    }

    #[test]
    fn concurrent_debits_are_never_lost() {
        const THREADS: usize = 8;
        const EACH: usize = 10_000;
        for slip in [0u8, 2] {
            let r = Arc::new(Rrl::new(
                RrlConfig {
                    window: 3600,
                    slip,
                    ..cfg(1000)
                },
                42,
            ));
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let r = r.clone();
                    std::thread::spawn(move || {
                        let name = wire("www.example.");
                        let a = answer(&name);
                        let (mut pass, mut slips, mut drops) = (0usize, 0usize, 0usize);
                        for i in 0..EACH {
                            // Workers in one /24 with different hosts.
                            let c = IpAddr::from([198, 18, 0, (t * 16 + i % 16) as u8]);
                            match r.check(7, c, false, &a) {
                                None => pass += 1,
                                Some(Limit::Slip) => slips += 1,
                                Some(Limit::Drop) => drops += 1,
                            }
                        }
                        (pass, slips, drops)
                    })
                })
                .collect();
            let (mut pass, mut slips, mut drops) = (0, 0, 0);
            for h in handles {
                let (p, s, d) = h.join().unwrap();
                pass += p;
                slips += s;
                drops += d;
            }
            let total = THREADS * EACH;
            assert_eq!(pass, 1000, "exactly `rate` responses pass");
            let limited = total - 1000;
            if slip == 0 {
                assert_eq!((slips, drops), (0, limited));
            } else {
                assert_eq!((slips, drops), (limited / 2, limited / 2));
            }
            let name = wire("www.example.");
            let acct = r.peek(ip("198.18.0.1"), &answer(&name)).unwrap();
            assert_eq!(acct.balance, 1000 - total as i32, "every debit counted");
        }
    }

    // --- Through the engine -------------------------------------------------------------

    fn engine(rrl: RrlConfig) -> Engine {
        let mut b = EngineBuilder::new();
        b.acl_mut()
            .insert("0.0.0.0/0".parse().unwrap(), crate::acl::AclAction::Allow);
        b.local_zone(
            WireName::parse("local.", None).unwrap(),
            crate::localzone::LocalZoneType::Static,
        );
        for l in [
            "local. 3600 IN SOA ns.local. h.local. 1 3600 600 86400 300",
            "www.local. 300 IN A 198.18.0.1",
            "mail.local. 300 IN A 198.18.0.2",
        ] {
            b.local_data(parse_rr(l, None, 3600).unwrap(), 0);
        }
        let recs = [
            "ex. 3600 IN SOA ns.ex. h.ex. 1 2 3 4 300",
            "ex. 3600 IN NS ns.ex.",
            "ns.ex. 3600 IN A 198.18.0.53",
            "www.ex. 3600 IN A 198.18.0.80",
            "*.wild.ex. 3600 IN TXT \"w\"",
            "sub.ex. 3600 IN NS ns.sub.ex.",
            "ns.sub.ex. 3600 IN A 198.18.0.54",
        ];
        b.auth_zone(AuthZoneSpec {
            name: WireName::parse("ex.", None).unwrap(),
            records: recs
                .iter()
                .map(|s| (parse_rr(s, None, 3600).unwrap(), 0))
                .collect(),
        });
        b.rrl(Arc::new(Rrl::new(rrl, 0x1234)));
        b.build().unwrap()
    }

    fn query(name: &str, qtype: u16, edns: Option<bool>) -> Vec<u8> {
        let mut p = vec![
            0xab,
            0xcd,
            1,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            u8::from(edns.is_some()),
        ];
        p.extend_from_slice(WireName::parse(name, None).unwrap().as_bytes());
        p.extend_from_slice(&qtype.to_be_bytes());
        p.extend_from_slice(&[0, 1]);
        if let Some(d) = edns {
            p.extend_from_slice(&[0, 0, 0x29, 0x10, 0, 0, 0, if d { 0x80 } else { 0 }, 0, 0, 0]);
        }
        p
    }

    fn ask(e: &Engine, src: &str, t: Transport, q: &[u8]) -> (Outcome, Vec<u8>) {
        let mut out = vec![0u8; 4096];
        let req = Request {
            src: ip(src),
            transport: t,
            now: 50,
        };
        let o = e.handle_query(&req, q, &mut out);
        if let Outcome::Reply { len, .. } = o {
            out.truncate(len);
        }
        (o, out)
    }

    fn kinds(e: &Engine, src: &str, names: &[String], qtype: u16) -> String {
        names
            .iter()
            .map(
                |n| match ask(e, src, Transport::Udp, &query(n, qtype, None)).0 {
                    Outcome::Reply { info, .. } if info.slipped => 'S',
                    Outcome::Reply { .. } => '.',
                    Outcome::Drop {
                        reason: DropReason::RateLimited,
                        ..
                    } => 'D',
                    Outcome::Drop { .. } | Outcome::Resolve => '?',
                },
            )
            .collect()
    }

    fn names(f: &str, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| f.replace("{}", &std::format!("{i}")))
            .collect()
    }

    #[test]
    fn engine_slip_is_a_truncated_empty_reply() {
        let e = engine(RrlConfig { slip: 1, ..cfg(1) });
        let q = query("WWW.local.", 1, Some(true));
        let (o, full) = ask(&e, "198.18.0.1", Transport::Udp, &q);
        assert!(matches!(o, Outcome::Reply { info, .. } if !info.slipped && info.qtype == 1));
        assert_eq!(&full[6..8], &[0, 1]);
        let (o, r) = ask(&e, "198.18.0.1", Transport::Udp, &q);
        let Outcome::Reply { info, len } = o else {
            panic!("{o:?}")
        };
        assert_eq!(
            info,
            ReplyInfo {
                rcode: 0,
                hot: true,
                truncated: true,
                inform: false,
                qtype: 1,
                slipped: true,
                rrl_would: None,
                cached: false,
                refresh: false,
            }
        );
        let question = &q[12..q.len() - 11];
        assert_eq!(len, 12 + question.len() + 11);
        // ID, QR AA TC RD RA, QD 1, AN 0, NS 0, AR 1 (OPT), the question as asked.
        assert_eq!(&r[..12], &[0xab, 0xcd, 0x87, 0x80, 0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&r[12..12 + question.len()], question);
        assert_eq!(
            &r[len - 11..],
            b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00"
        );
        // Without EDNS: no OPT.
        let (o, r) = ask(
            &e,
            "198.18.0.1",
            Transport::Udp,
            &query("www.local.", 1, None),
        );
        assert!(matches!(o, Outcome::Reply { info, .. } if info.slipped));
        assert_eq!(&r[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.len(), 12 + 15);
        // Over TCP: never limited.
        let (o, _) = ask(&e, "198.18.0.1", Transport::Tcp, &q);
        assert!(matches!(o, Outcome::Reply { info, .. } if !info.slipped && !info.truncated));
    }

    #[test]
    fn engine_errors_leak_instead_of_truncating() {
        let e = engine(RrlConfig { slip: 2, ..cfg(1) });
        let q = query("elsewhere.", 1, None);
        let (o, first) = ask(&e, "198.18.0.1", Transport::Udp, &q);
        assert!(matches!(o, Outcome::Reply { info, .. } if info.rcode == 5 && !info.slipped));
        let (o, leaked) = ask(&e, "198.18.0.1", Transport::Udp, &q);
        let Outcome::Reply { info, .. } = o else {
            panic!("{o:?}")
        };
        assert!(info.slipped && !info.truncated);
        assert_eq!(leaked, first, "sent as it is");
        let (o, _) = ask(&e, "198.18.0.1", Transport::Udp, &q);
        assert_eq!(
            o,
            Outcome::Drop {
                reason: DropReason::RateLimited,
                inform: false
            }
        );
        // General-path errors too (NOTIMP to another opcode).
        let mut notify = query("www.local.", 1, None);
        notify[2] = 0x20; // opcode 4
        let got: String = (0..4)
            .map(|_| match ask(&e, "198.18.9.1", Transport::Udp, &notify).0 {
                Outcome::Reply { info, .. } if info.slipped => 'S',
                Outcome::Reply { .. } => '.',
                _ => 'D',
            })
            .collect();
        assert_eq!(got, ".SDS");
    }

    #[test]
    fn engine_nxdomain_is_counted_per_zone() {
        let e = engine(RrlConfig {
            slip: 0,
            nxdomains_per_second: Some(2),
            ..cfg(100)
        });
        // Random names in one zone share the zone's account (local and authoritative).
        assert_eq!(kinds(&e, "198.18.0.1", &names("r{}.local.", 4), 1), "..DD");
        assert_eq!(kinds(&e, "198.18.0.1", &names("x.r{}.ex.", 4), 1), "..DD");
        // Answers are counted per name.
        assert_eq!(kinds(&e, "198.18.0.1", &names("www.local.", 4), 1), "....");
    }

    #[test]
    fn engine_wildcard_and_referral_accounts() {
        let e = engine(RrlConfig { slip: 0, ..cfg(2) });
        // Names synthesised from *.wild.ex. share one account, NODATA there too.
        assert_eq!(
            kinds(&e, "198.18.0.1", &names("h{}.wild.ex.", 4), 16),
            "..DD"
        );
        assert_eq!(
            kinds(&e, "198.18.1.1", &names("h{}.wild.ex.", 4), 1),
            "..DD"
        );
        // Referrals are counted per delegation point.
        assert_eq!(kinds(&e, "198.18.2.1", &names("h{}.sub.ex.", 4), 1), "..DD");
        // NODATA in the zone proper: per name.
        assert_eq!(kinds(&e, "198.18.3.1", &names("www.ex.", 1), 16), ".");
        assert_eq!(kinds(&e, "198.18.3.1", &names("ns.ex.", 1), 16), ".");
    }

    #[test]
    fn engine_log_only_sends_everything_and_says_what_it_would_do() {
        let e = engine(RrlConfig {
            log_only: true,
            ..cfg(1)
        });
        let q = query("www.local.", 1, None);
        let (_, first) = ask(&e, "198.18.0.1", Transport::Udp, &q);
        let would: Vec<Option<Limit>> = (0..3)
            .map(|_| {
                let (o, r) = ask(&e, "198.18.0.1", Transport::Udp, &q);
                assert_eq!(r, first, "sent unchanged");
                match o {
                    Outcome::Reply { info, .. } => {
                        assert!(!info.slipped);
                        info.rrl_would
                    }
                    d => panic!("{d:?}"),
                }
            })
            .collect();
        assert_eq!(
            would,
            [Some(Limit::Slip), Some(Limit::Drop), Some(Limit::Slip)]
        );
    }

    #[test]
    fn engine_without_rrl_is_unlimited() {
        let mut e = engine(cfg(1));
        assert!(e.rrl().is_some());
        e.set_rrl(None);
        assert_eq!(
            kinds(&e, "198.18.0.1", &names("www.local.", 50), 1)
                .matches('.')
                .count(),
            50
        );
    }

    fn arb_response() -> impl Strategy<Value = (u8, u16, u16, Vec<u8>, bool)> {
        (
            0u8..5,
            any::<u16>(),
            any::<u16>(),
            proptest::collection::vec(any::<u8>(), 0..300),
            any::<bool>(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// One account through any sequence of seconds (forward, repeated, a little
        /// backward as a slower worker's clock would be) gives, response by response, the
        /// verdicts of a plain model of BIND's `debit_rrl_entry`, written here without the
        /// packed word, the in-place debit or the table.
        #[test]
        fn one_account_follows_a_model_of_bind(
            steps in proptest::collection::vec((0u32..5, any::<bool>(), 1usize..25), 1..30),
            rate in 1u32..30,
            window in 1u32..20,
            slip in 0u8..5,
            start in 0u32..100_000,
        ) {
            let r = Rrl::new(
                RrlConfig {
                    responses_per_second: rate,
                    window,
                    slip,
                    ..RrlConfig::default()
                },
                11,
            );
            let name = wire("www.example.");
            let a = answer(&name);
            // The model: balance, last second charged, slip counter.
            let mut acct: Option<(i64, u32, u32)> = None;
            let (rate_l, window_l) = (i64::from(rate), i64::from(window));
            let mut now = start;
            for (dt, back, n) in steps {
                // A step back of up to 2 s (within MAX_TIME_TRAVEL) counts as "now".
                now = if back { now.wrapping_sub(dt.min(2)) } else { now.wrapping_add(dt) };
                for _ in 0..n {
                    let (mut bal, mut sc, time) = match acct {
                        None => (rate_l, 0, now),
                        Some((b, t, c)) => {
                            let el = now.wrapping_sub(t) & 0x3fff;
                            let el = if el > 0x3fff - 5 { 0 } else { i64::from(el) };
                            let time = if el == 0 { t } else { now };
                            if el > window_l || b + rate_l * el > rate_l {
                                (rate_l, 0, time)
                            } else {
                                (b + rate_l * el, c, time)
                            }
                        }
                    };
                    bal -= 1;
                    let want = if bal >= 0 {
                        None
                    } else {
                        bal = bal.max(-window_l * rate_l);
                        let mut v = Limit::Drop;
                        if slip != 0 {
                            if sc == 0 {
                                v = Limit::Slip;
                            }
                            sc += 1;
                            if sc >= u32::from(slip) {
                                sc = 0;
                            }
                        }
                        Some(v)
                    };
                    acct = Some((bal, time & 0x3fff, sc));
                    prop_assert_eq!(r.check(now, ip("198.18.0.1"), false, &a), want);
                }
            }
        }

        /// Any response, client, time and option set: no panic, the table stays in bounds.
        #[test]
        fn never_panics(
            (class, qtype, qclass, name, wildcard) in arb_response(),
            client in any::<u128>(),
            v4 in any::<bool>(),
            tcp in any::<bool>(),
            now in any::<u32>(),
            rates in proptest::array::uniform6(0u32..2000),
            window in 0u32..5000,
            slip in any::<u8>(),
            prefixes in (any::<u8>(), any::<u8>()),
            qps_scale in 0u32..200,
            max_table_size in 0usize..64,
        ) {
            let r = Rrl::new(
                RrlConfig {
                    responses_per_second: rates[0],
                    nodata_per_second: Some(rates[1]),
                    nxdomains_per_second: Some(rates[2]),
                    referrals_per_second: (rates[3] % 2 == 0).then_some(rates[3]),
                    errors_per_second: Some(rates[4]),
                    all_per_second: rates[5],
                    window,
                    slip,
                    ipv4_prefix_length: prefixes.0,
                    ipv6_prefix_length: prefixes.1,
                    exempt_clients: Vec::new(),
                    qps_scale,
                    log_only: false,
                    max_table_size,
                    min_table_size: 0,
                },
                client as u64,
            );
            let src = if v4 {
                IpAddr::from(core::net::Ipv4Addr::from(client as u32))
            } else {
                IpAddr::from(core::net::Ipv6Addr::from(client))
            };
            let resp = Response {
                class: ResponseClass::from_bits(class),
                qtype,
                qclass,
                name_hash: crate::store::name_hash(&name),
                wildcard,
            };
            for i in 0..20u32 {
                r.check(now.wrapping_add(i / 4), src, tcp, &resp);
            }
            prop_assert!(r.accounts() <= r.capacity());
        }

        /// Arbitrary datagrams through an engine whose every reply is limited: no panic,
        /// and every slipped reply is a well-formed header with TC and no records.
        #[test]
        fn engine_never_panics_and_slips_are_well_formed(
            q in proptest::collection::vec(any::<u8>(), 0..600),
            tcp in any::<bool>(),
        ) {
            let e = engine(RrlConfig { slip: 1, ..cfg(1) });
            let transport = if tcp { Transport::Tcp } else { Transport::Udp };
            for _ in 0..3 {
                let (o, r) = ask(&e, "198.18.0.1", transport, &q);
                if let Outcome::Reply { info, .. } = o
                    && info.slipped
                    && info.truncated
                {
                    prop_assert!(r.len() >= 12);
                    prop_assert!(r[2] & 0x02 != 0, "TC");
                    prop_assert_eq!(&r[6..10], &[0, 0, 0, 0]);
                }
            }
        }
    }
}
