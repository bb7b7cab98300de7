//! When to renew: two thirds of the lifetime, or a time in the ACME Renewal Information
//! window (RFC 9773 §4.2) bounded by the certificate's age and expiry; the back-off after a
//! failure.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::control::tls::CertFacts;

pub(super) fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The renewal time ARI suggests, kept between checks: a new time is picked only when the
/// window changes (RFC 9773 §4.2: one uniformly random time in the window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pick {
    pub(super) window: (u64, u64),
    pub(super) at: u64,
}

/// A uniformly random second in `[start, end]` (RFC 9773 §4.2).
pub(super) fn pick_in(start: u64, end: u64) -> u64 {
    let span = end.saturating_sub(start);
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    start + u64::from_le_bytes(b) % (span + 1)
}

/// When ARI is asked again after a Retry-After of `retry` seconds: held between 1 minute
/// and 6 hours (RFC 9773 §4.3.2 asks clients to bound it), and shown no later than the
/// renewal time `at`. At `at` the task orders on the answer it has (at most 6 hours old),
/// it does not ask again first: a check due at the same time is the order's.
pub(super) fn next_check(now: u64, retry: u64, at: u64) -> u64 {
    (now + retry.clamp(60, 6 * 3600)).min(at.max(now + 60))
}

/// The least time between an ARI-planned renewal and the expiry: an hour, or a tenth of
/// the lifetime `life` if longer; but at most a third of it (a certificate of less than
/// three hours, a test CA's, would otherwise be due before it is issued).
pub(super) fn ari_margin(life: u64) -> u64 {
    (life / 10).max(3600).min(life / 3)
}

/// The least time between an issuance and the next order ARI starts: an hour (at most a
/// third of the lifetime `life`). Enough that a server answering every new certificate
/// with a window in the past cannot start order after order (24 a day at most), short
/// enough that a certificate the CA revoked soon after issuance is replaced within the
/// hour, not days later as a tenth of a 90-day lifetime would have it.
pub(super) fn ari_floor(life: u64) -> u64 {
    3600u64.min(life / 3)
}

/// The renewal time of the certificate `f` (issued by this task at `last_issued`, if it
/// was) from the time `at` picked in ARI's window: not before `last_issued` plus the
/// margin (a window already past for a certificate just issued, by a server's mistake or
/// a hostile one, must not start order after order), and never later than the margin
/// before `not_after` (a window that slides must not let the certificate expire; this bound
/// wins over the first). Also whether the first bound moved it (the certificate too young).
pub(super) fn ari_due(at: u64, now: u64, f: &CertFacts, last_issued: Option<u64>) -> (u64, bool) {
    let life = f.not_after.saturating_sub(f.not_before);
    let latest = f.not_after.saturating_sub(ari_margin(life));
    let floor = last_issued.map_or(0, |t| t.saturating_add(ari_floor(life)));
    let wanted = at.max(now);
    let due = wanted.max(floor).min(latest).max(now);
    (due, due > wanted)
}

/// Seconds until ARI is asked again after `errors` failed checks in a row: the server's
/// Retry-After on a 429 or 503 (RFC 9773 §4.3.2; held between 1 minute and 24 hours), or
/// 1 hour doubling up to 24 hours.
pub(super) fn ari_retry(errors: u32, retry_after: Option<u64>) -> u64 {
    match retry_after {
        Some(r) => r.clamp(60, 86_400),
        None => 3600u64
            .saturating_mul(1 << errors.saturating_sub(1).min(5))
            .min(86_400),
    }
}

/// Why the next attempt is due when it is (`next_reason` in `GET /tls`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Due {
    /// No certificate in force: now.
    NoCertificate,
    /// The certificate in force lacks a configured name: now.
    NamesChanged,
    /// Two thirds of the certificate's lifetime (no renewal information).
    TwoThirds,
    /// The time picked in the ACME server's suggested window (RFC 9773 §4.2).
    RenewalInformation,
    /// The back-off after a failed attempt.
    RetryAfterFailure,
    /// The time a rate-limit problem named (RFC 8555 §6.7), later than the back-off.
    RetryAfterRateLimit,
}

impl Due {
    /// Its text in `GET /tls`.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Due::NoCertificate => "no certificate",
            Due::NamesChanged => "the names changed",
            Due::TwoThirds => "two thirds of its lifetime",
            Due::RenewalInformation => "renewal information",
            Due::RetryAfterFailure => "retry after a failure",
            Due::RetryAfterRateLimit => "retry after a rate limit",
        }
    }
}

/// The renewal time without renewal information: two thirds of the lifetime of the
/// certificate `c` when it has all `names`, else now.
pub(super) fn base_schedule(c: Option<&CertFacts>, names: &[String], now: u64) -> (u64, Due) {
    match c {
        Some(f) if names.iter().all(|n| f.names.contains(n)) => (
            f.not_before + (f.not_after.saturating_sub(f.not_before)) * 2 / 3,
            Due::TwoThirds,
        ),
        Some(_) => (now, Due::NamesChanged),
        None => (now, Due::NoCertificate),
    }
}

/// Seconds to wait after `n` failures in a row: 60, 120, 240 ... up to 6 hours, with up to
/// a tenth more of jitter (so nodes that failed together do not retry together).
pub(super) fn backoff(n: u32) -> u64 {
    let base = 60u64
        .saturating_mul(1 << n.saturating_sub(1).min(9))
        .min(6 * 3600);
    let mut b = [0u8; 2];
    let _ = getrandom::fill(&mut b);
    base + base * u64::from(u16::from_le_bytes(b)) / 65535 / 10
}
