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
/// configuration names them `rrl-*:` in `server:` (see `docs/rrl.md`). **Not Unbound
/// directives**: Unbound rejects them, so a configuration that uses them is skuad-only.
///
/// The one declaration of these settings: the configuration reader keeps them as written,
/// `RrlConfig<Located<String>>` (`skua_config::Rrl`: the exempt netblocks as text with their
/// lines, the ranges checked as it reads them), and the daemon hands the engine
/// `RrlConfig<Netblock>` ([`RrlConfig::try_map_exempt`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrlConfig<E = Netblock> {
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
    /// `exempt-clients` [`rrl-exempt-clients:`]: netblocks never limited (repeatable, in
    /// order; `E`: [`Netblock`] for the engine, the text as written for the reader).
    pub exempt_clients: Vec<E>,
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

impl<E> Default for RrlConfig<E> {
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

impl<E> RrlConfig<E> {
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

    /// The same settings with each exempt client converted by `f` (the daemon parses the
    /// netblocks the reader kept as written); the first error `f` returns, in order.
    pub fn try_map_exempt<T, Err>(
        self,
        f: impl FnMut(E) -> Result<T, Err>,
    ) -> Result<RrlConfig<T>, Err> {
        let exempt_clients = self
            .exempt_clients
            .into_iter()
            .map(f)
            .collect::<Result<Vec<T>, Err>>()?;
        Ok(RrlConfig {
            responses_per_second: self.responses_per_second,
            nodata_per_second: self.nodata_per_second,
            nxdomains_per_second: self.nxdomains_per_second,
            referrals_per_second: self.referrals_per_second,
            errors_per_second: self.errors_per_second,
            all_per_second: self.all_per_second,
            window: self.window,
            slip: self.slip,
            ipv4_prefix_length: self.ipv4_prefix_length,
            ipv6_prefix_length: self.ipv6_prefix_length,
            exempt_clients,
            qps_scale: self.qps_scale,
            log_only: self.log_only,
            max_table_size: self.max_table_size,
            min_table_size: self.min_table_size,
        })
    }
}

impl RrlConfig {
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
mod tests;
