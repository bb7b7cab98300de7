//! The secondary's clock for one zone (RFC 1035 §3.3.13 and §4.3.5): when to ask the
//! primary for its SOA, when to retry after a failure, and when the copy held has expired.
//!
//! [`Schedule`] is a pure state machine over a caller's clock in seconds (monotonic or
//! not: it only adds and compares). The caller asks [`Schedule::due`], starts a check with
//! [`Schedule::start`], and reports [`Schedule::succeeded`] (the primary answered: the copy
//! is current, possibly after a transfer) or [`Schedule::failed`]. A NOTIFY
//! ([`Schedule::notified`]) makes the zone due at once, or once more right after the check
//! in progress. [`Schedule::expired`] says when the copy must stop being served.
//!
//! The SOA's timers (REFRESH, RETRY, EXPIRE) come from the copy held; a primary's silly
//! values are bounded ([`MIN_INTERVAL`]) so a zero cannot make the secondary spin. Before
//! there is any copy, failures back off from [`BACKOFF_START`] to [`BACKOFF_MAX`].

use skua_engine::rr::Rr;

/// The shortest REFRESH or RETRY honoured, seconds.
pub const MIN_INTERVAL: u64 = 1;
/// The first wait after a failure when no SOA is held yet, seconds (doubled each time).
pub const BACKOFF_START: u64 = 2;
/// The longest wait between attempts when no SOA is held, seconds.
pub const BACKOFF_MAX: u64 = 300;

/// A SOA's timers (RFC 1035 §3.3.13), seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// REFRESH: how long the copy is current before the primary is asked again.
    pub refresh: u32,
    /// RETRY: how long after a failed refresh before the next try.
    pub retry: u32,
    /// EXPIRE: how long without a successful refresh before the copy is no longer served.
    pub expire: u32,
}

impl Timers {
    /// The timers of a SOA record (its RDATA uncompressed: two names, then SERIAL,
    /// REFRESH, RETRY, EXPIRE, MINIMUM); `None` when it is not that.
    pub fn of(soa: &Rr) -> Option<Timers> {
        let n = soa.rdata.len();
        if n < 22 {
            return None;
        }
        let at = |off: usize| {
            let b = &soa.rdata[n - off..n - off + 4];
            u32::from_be_bytes([b[0], b[1], b[2], b[3]])
        };
        Some(Timers {
            refresh: at(16),
            retry: at(12),
            expire: at(8),
        })
    }
}

/// When one secondary zone is checked next, and until when its copy is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    timers: Option<Timers>,
    next: u64,
    expires_at: Option<u64>,
    failures: u32,
    in_progress: bool,
    again: bool,
}

impl Schedule {
    /// A zone with nothing held: due at `now`.
    pub fn empty(now: u64) -> Schedule {
        Schedule {
            timers: None,
            next: now,
            expires_at: None,
            failures: 0,
            in_progress: false,
            again: false,
        }
    }

    /// A zone whose copy (SOA `soa`) was last known current at `confirmed` (e.g. when its
    /// zone file was written): due at `now` (a restart asks the primary at once), expiring
    /// EXPIRE seconds after `confirmed`.
    pub fn held(now: u64, soa: &Rr, confirmed: u64) -> Schedule {
        let timers = Timers::of(soa);
        Schedule {
            timers,
            next: now,
            expires_at: timers.map(|t| confirmed.saturating_add(u64::from(t.expire))),
            failures: 0,
            in_progress: false,
            again: false,
        }
    }

    /// Whether a check should start at `now` (none is in progress and the time has come).
    pub fn due(&self, now: u64) -> bool {
        !self.in_progress && now >= self.next
    }

    /// A check starts.
    pub fn start(&mut self) {
        self.in_progress = true;
        self.again = false;
    }

    /// Whether a check is in progress.
    pub fn in_progress(&self) -> bool {
        self.in_progress
    }

    /// The primary answered at `now` and the copy held is current, with SOA `soa` (after a
    /// transfer, or because the serial did not move): next check after REFRESH, expiry
    /// EXPIRE from now (RFC 1035 §4.3.5).
    pub fn succeeded(&mut self, now: u64, soa: &Rr) {
        self.in_progress = false;
        self.failures = 0;
        self.timers = Timers::of(soa);
        let (refresh, expire) = match self.timers {
            Some(t) => (u64::from(t.refresh), Some(u64::from(t.expire))),
            None => (BACKOFF_MAX, None),
        };
        self.next = now.saturating_add(refresh.max(MIN_INTERVAL));
        self.expires_at = expire.map(|e| now.saturating_add(e));
        self.after_check(now);
    }

    /// The check failed at `now` (no answer, refused, a bad transfer): next try after
    /// RETRY, or after the back-off when no SOA is held. Expiry does not move.
    pub fn failed(&mut self, now: u64) {
        self.in_progress = false;
        self.failures = self.failures.saturating_add(1);
        let wait = match self.timers {
            Some(t) => u64::from(t.retry).max(MIN_INTERVAL),
            None => BACKOFF_START
                .saturating_mul(1u64 << self.failures.saturating_sub(1).min(16))
                .min(BACKOFF_MAX),
        };
        self.next = now.saturating_add(wait);
        self.after_check(now);
    }

    /// A NOTIFY for the zone was accepted at `now` (RFC 1996 §4.7: check the SOA at once):
    /// due now, or right after the check in progress ends.
    pub fn notified(&mut self, now: u64) {
        if self.in_progress {
            self.again = true;
        } else {
            self.next = self.next.min(now);
        }
    }

    fn after_check(&mut self, now: u64) {
        if self.again {
            self.again = false;
            self.next = now;
        }
    }

    /// Whether the copy held has expired at `now` (RFC 1035 §3.3.13: EXPIRE seconds
    /// without a successful refresh): it must not be served any more.
    pub fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|e| now >= e)
    }

    /// The copy was dropped (expired): nothing is held, the back-off starts over, but a
    /// RETRY known from the last SOA still paces the tries.
    pub fn drop_copy(&mut self) {
        self.expires_at = None;
        self.failures = 0;
    }

    /// When something happens next without news from outside: the next check, or the
    /// expiry if sooner. `None` while a check is in progress and nothing can expire.
    pub fn next_event(&self) -> Option<u64> {
        let check = (!self.in_progress).then_some(self.next);
        match (check, self.expires_at) {
            (Some(c), Some(e)) => Some(c.min(e)),
            (c, e) => c.or(e),
        }
    }

    /// Failures in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// When the next check is due.
    pub fn next_check(&self) -> u64 {
        self.next
    }

    /// When the copy expires, if one is held.
    pub fn expires_at(&self) -> Option<u64> {
        self.expires_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skua_engine::text::parse_rr;

    fn soa(refresh: u32, retry: u32, expire: u32) -> Rr {
        parse_rr(
            &alloc::format!(
                "example. 300 IN SOA ns.example. admin.example. 1 {refresh} {retry} {expire} 300"
            ),
            None,
            0,
        )
        .unwrap()
    }

    #[test]
    fn timers_read_from_the_soa() {
        assert_eq!(
            Timers::of(&soa(3600, 600, 86400)),
            Some(Timers {
                refresh: 3600,
                retry: 600,
                expire: 86400
            })
        );
        let mut bad = soa(1, 1, 1);
        bad.rdata.truncate(10);
        assert_eq!(Timers::of(&bad), None);
    }

    #[test]
    fn refresh_retry_expire() {
        let s = soa(100, 10, 1000);
        let mut z = Schedule::held(5000, &s, 4000);
        assert!(z.due(5000), "a restart checks at once");
        assert_eq!(z.expires_at(), Some(5000), "confirmed at 4000, EXPIRE 1000");
        z.start();
        assert!(!z.due(5000) && z.in_progress());
        z.succeeded(5001, &s);
        assert_eq!((z.next_check(), z.expires_at()), (5101, Some(6001)));
        assert!(!z.due(5100) && z.due(5101));
        // The primary goes away: RETRY, expiry unchanged.
        for i in 0..5 {
            let t = 5101 + i * 10;
            assert!(z.due(t), "{t}");
            z.start();
            z.failed(t);
            assert_eq!(z.next_check(), t + 10);
            assert_eq!(z.expires_at(), Some(6001));
        }
        assert_eq!(z.failures(), 5);
        assert!(!z.expired(6000) && z.expired(6001));
        assert_eq!(z.next_event(), Some(5151));
        // Back: the copy is current again, expiry moves.
        z.start();
        z.succeeded(5151, &s);
        assert_eq!((z.failures(), z.expires_at()), (0, Some(6151)));
    }

    #[test]
    fn nothing_held_backs_off() {
        let mut z = Schedule::empty(0);
        assert!(z.due(0) && !z.expired(u64::MAX));
        let mut t = 0;
        let mut waits = alloc::vec::Vec::new();
        for _ in 0..12 {
            z.start();
            z.failed(t);
            waits.push(z.next_check() - t);
            t = z.next_check();
        }
        assert_eq!(&waits[..9], &[2, 4, 8, 16, 32, 64, 128, 256, 300]);
        assert!(waits[9..].iter().all(|&w| w == 300));
        assert_eq!(z.next_event(), Some(t));
    }

    #[test]
    fn notify_makes_the_zone_due_now_or_after_the_check() {
        let s = soa(3600, 600, 86400);
        let mut z = Schedule::empty(0);
        z.start();
        z.succeeded(10, &s);
        assert!(!z.due(20));
        z.notified(20);
        assert!(z.due(20));
        // During a check: once more right after it, not in parallel.
        z.start();
        z.notified(21);
        assert!(!z.due(21));
        assert_eq!(
            z.next_event(),
            Some(86410),
            "only the expiry while in progress"
        );
        z.succeeded(22, &s);
        assert!(z.due(22), "the NOTIFY during the check asks again");
        z.start();
        z.succeeded(23, &s);
        assert!(!z.due(24));
    }

    #[test]
    fn silly_timers_are_bounded() {
        let s = soa(0, 0, 0);
        let mut z = Schedule::empty(0);
        z.start();
        z.succeeded(100, &s);
        assert_eq!(z.next_check(), 100 + MIN_INTERVAL);
        z.start();
        z.failed(101);
        assert_eq!(z.next_check(), 101 + MIN_INTERVAL);
        assert!(z.expired(101), "EXPIRE 0: expired at once");
        let s = soa(u32::MAX, u32::MAX, u32::MAX);
        let mut z = Schedule::held(u64::MAX - 5, &s, u64::MAX - 5);
        z.start();
        z.succeeded(u64::MAX - 1, &s);
        assert_eq!(z.next_check(), u64::MAX, "saturates");
        z.drop_copy();
        assert_eq!(z.expires_at(), None);
    }
}
