//! Query counters every dataplane keeps the same way: by RCODE, by QTYPE, by drop reason,
//! and a latency histogram.
//!
//! One [`Counters`] belongs to one worker thread (kernel-socket worker, AF_XDP queue
//! worker): it is the only writer, with relaxed atomic adds on its own cache lines, and
//! the control plane sums them when asked (metrics, stats). No clock here: the caller
//! measures latency and passes nanoseconds.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::engine::{DropReason, Outcome};

/// RCODEs counted by name; any other lands in the last slot (`other`).
pub const RCODES: [(u16, &str); 7] = [
    (0, "NOERROR"),
    (1, "FORMERR"),
    (2, "SERVFAIL"),
    (3, "NXDOMAIN"),
    (4, "NOTIMP"),
    (5, "REFUSED"),
    (16, "BADVERS"),
];

/// QTYPEs counted by name; any other lands in the last slot (`other`).
pub const QTYPES: [(u16, &str); 16] = [
    (1, "A"),
    (2, "NS"),
    (5, "CNAME"),
    (6, "SOA"),
    (12, "PTR"),
    (15, "MX"),
    (16, "TXT"),
    (28, "AAAA"),
    (33, "SRV"),
    (35, "NAPTR"),
    (43, "DS"),
    (48, "DNSKEY"),
    (64, "SVCB"),
    (65, "HTTPS"),
    (257, "CAA"),
    (255, "ANY"),
];

/// Drop reasons counted, in slot order (the last slot is any future reason).
pub const DROPS: [&str; 7] = [
    "acl",
    "malformed",
    "zone",
    "non_local",
    "buffer",
    "rate_limited",
    "other",
];

/// Upper bounds of the latency histogram buckets, in nanoseconds (the last bucket,
/// `+Inf`, is implicit). Covers an in-frame answer (~0.2 µs) to a stalled batch (10 ms).
pub const LATENCY_BOUNDS_NS: [u64; 12] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000,
    10_000_000,
];

/// One worker's counters.
#[derive(Debug)]
#[repr(align(64))]
pub struct Counters {
    /// Queries handled (replied or dropped).
    pub queries: AtomicU64,
    /// Replies sent.
    pub replies: AtomicU64,
    /// Replies from the precompiled hot path.
    pub hot: AtomicU64,
    /// Replies with TC set.
    pub truncated: AtomicU64,
    /// Replies slipped by rate limiting (truncated, or an error sent instead of dropped).
    pub slipped: AtomicU64,
    /// `log-only` rate limiting: replies sent that would have been dropped.
    pub rrl_would_drop: AtomicU64,
    /// `log-only` rate limiting: replies sent that would have been slipped.
    pub rrl_would_slip: AtomicU64,
    /// Replies from the resolver's cache.
    pub cached: AtomicU64,
    /// Queries handed to the resolver (not local data, not in the cache).
    pub resolve: AtomicU64,
    /// Replies by RCODE ([`RCODES`] order, then other).
    pub rcode: [AtomicU64; RCODES.len() + 1],
    /// Replies by QTYPE of the question ([`QTYPES`] order, then other).
    pub qtype: [AtomicU64; QTYPES.len() + 1],
    /// Drops by reason ([`DROPS`] order).
    pub dropped: [AtomicU64; DROPS.len()],
    /// Queries per latency bucket ([`LATENCY_BOUNDS_NS`], then +Inf).
    pub latency: [AtomicU64; LATENCY_BOUNDS_NS.len() + 1],
    /// Sum of the latencies, in nanoseconds.
    pub latency_sum_ns: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Self {
            queries: AtomicU64::new(0),
            replies: AtomicU64::new(0),
            hot: AtomicU64::new(0),
            truncated: AtomicU64::new(0),
            slipped: AtomicU64::new(0),
            rrl_would_drop: AtomicU64::new(0),
            rrl_would_slip: AtomicU64::new(0),
            cached: AtomicU64::new(0),
            resolve: AtomicU64::new(0),
            rcode: Default::default(),
            qtype: Default::default(),
            dropped: Default::default(),
            latency: Default::default(),
            latency_sum_ns: AtomicU64::new(0),
        }
    }
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Slot of `rcode` in [`Counters::rcode`] (a `match`: a jump table, no scan, on the hot
/// path of every dataplane).
pub fn rcode_slot(rcode: u16) -> usize {
    match rcode {
        0..=5 => rcode as usize,
        16 => 6,
        _ => RCODES.len(),
    }
}

/// Slot of `qtype` in [`Counters::qtype`].
pub fn qtype_slot(qtype: u16) -> usize {
    match qtype {
        1 => 0,
        2 => 1,
        5 => 2,
        6 => 3,
        12 => 4,
        15 => 5,
        16 => 6,
        28 => 7,
        33 => 8,
        35 => 9,
        43 => 10,
        48 => 11,
        64 => 12,
        65 => 13,
        257 => 14,
        255 => 15,
        _ => QTYPES.len(),
    }
}

/// Slot of a drop reason in [`Counters::dropped`].
pub fn drop_slot(r: DropReason) -> usize {
    match r {
        DropReason::Acl => 0,
        DropReason::Malformed => 1,
        DropReason::Zone => 2,
        DropReason::NonLocal => 3,
        DropReason::Buffer => 4,
        DropReason::RateLimited => 5,
        #[allow(unreachable_patterns)]
        _ => 6,
    }
}

impl Counters {
    /// Counts one query's outcome (a reply's question type is its
    /// [`ReplyInfo::qtype`](crate::engine::ReplyInfo::qtype); 0 when the query had none).
    pub fn record(&self, o: &Outcome) {
        add(&self.queries, 1);
        match o {
            Outcome::Reply { info, .. } => {
                add(&self.replies, 1);
                if info.hot {
                    add(&self.hot, 1);
                }
                if info.truncated {
                    add(&self.truncated, 1);
                }
                if info.slipped {
                    add(&self.slipped, 1);
                }
                if info.cached {
                    add(&self.cached, 1);
                }
                match info.rrl_would {
                    None => {}
                    Some(crate::rrl::Limit::Drop) => add(&self.rrl_would_drop, 1),
                    Some(crate::rrl::Limit::Slip) => add(&self.rrl_would_slip, 1),
                }
                add(&self.rcode[rcode_slot(info.rcode)], 1);
                if info.qtype != 0 {
                    add(&self.qtype[qtype_slot(info.qtype)], 1);
                }
            }
            Outcome::Drop { reason, .. } => add(&self.dropped[drop_slot(*reason)], 1),
            // Counted as a query here; its reply is counted when the resolver sends it.
            Outcome::Resolve => add(&self.resolve, 1),
        }
    }

    /// Counts `n` queries that each took `ns` nanoseconds (a batch: every query in it
    /// waits for the whole batch before its reply leaves).
    pub fn record_latency(&self, ns: u64, n: u64) {
        let slot = LATENCY_BOUNDS_NS
            .iter()
            .position(|&b| ns <= b)
            .unwrap_or(LATENCY_BOUNDS_NS.len());
        add(&self.latency[slot], n);
        add(&self.latency_sum_ns, ns.saturating_mul(n));
    }

    /// Adds `self` into plain totals.
    pub fn sum_into(&self, t: &mut Totals) {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        t.queries += r(&self.queries);
        t.replies += r(&self.replies);
        t.hot += r(&self.hot);
        t.truncated += r(&self.truncated);
        t.slipped += r(&self.slipped);
        t.rrl_would_drop += r(&self.rrl_would_drop);
        t.rrl_would_slip += r(&self.rrl_would_slip);
        for (d, s) in t.rcode.iter_mut().zip(&self.rcode) {
            *d += r(s);
        }
        for (d, s) in t.qtype.iter_mut().zip(&self.qtype) {
            *d += r(s);
        }
        for (d, s) in t.dropped.iter_mut().zip(&self.dropped) {
            *d += r(s);
        }
        for (d, s) in t.latency.iter_mut().zip(&self.latency) {
            *d += r(s);
        }
        t.latency_sum_ns += r(&self.latency_sum_ns);
    }
}

/// Sums of [`Counters`], same layout, plain numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// See [`Counters::queries`].
    pub queries: u64,
    /// See [`Counters::replies`].
    pub replies: u64,
    /// See [`Counters::hot`].
    pub hot: u64,
    /// See [`Counters::truncated`].
    pub truncated: u64,
    /// See [`Counters::slipped`].
    pub slipped: u64,
    /// See [`Counters::rrl_would_drop`].
    pub rrl_would_drop: u64,
    /// See [`Counters::rrl_would_slip`].
    pub rrl_would_slip: u64,
    /// See [`Counters::rcode`].
    pub rcode: [u64; RCODES.len() + 1],
    /// See [`Counters::qtype`].
    pub qtype: [u64; QTYPES.len() + 1],
    /// See [`Counters::dropped`].
    pub dropped: [u64; DROPS.len()],
    /// See [`Counters::latency`].
    pub latency: [u64; LATENCY_BOUNDS_NS.len() + 1],
    /// See [`Counters::latency_sum_ns`].
    pub latency_sum_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ReplyInfo;

    #[test]
    fn slot_functions_match_the_tables() {
        for (i, (c, _)) in RCODES.iter().enumerate() {
            assert_eq!(rcode_slot(*c), i);
        }
        for (i, (c, _)) in QTYPES.iter().enumerate() {
            assert_eq!(qtype_slot(*c), i);
        }
        assert_eq!(rcode_slot(9), RCODES.len());
        assert_eq!(qtype_slot(99), QTYPES.len());
        assert_eq!(drop_slot(DropReason::RateLimited), 5);
        assert_eq!(DROPS[drop_slot(DropReason::RateLimited)], "rate_limited");
    }

    #[test]
    fn slots_and_sums() {
        let c = Counters::default();
        let info = ReplyInfo {
            rcode: 3,
            qtype: 28,
            hot: true,
            truncated: false,
            inform: false,
            ..ReplyInfo::default()
        };
        c.record(&Outcome::Reply { len: 40, info });
        c.record(&Outcome::Reply {
            len: 40,
            info: ReplyInfo {
                rcode: 9,
                qtype: 99,
                ..info
            },
        });
        c.record(&Outcome::Drop {
            reason: DropReason::Acl,
            inform: false,
        });
        c.record_latency(1_500, 2);
        c.record_latency(50_000_000, 1);
        let mut t = Totals::default();
        c.sum_into(&mut t);
        c.sum_into(&mut t);
        assert_eq!((t.queries, t.replies, t.hot), (6, 4, 4));
        assert_eq!(t.rcode[3], 2);
        assert_eq!(t.rcode[RCODES.len()], 2);
        assert_eq!(t.qtype[7], 2, "AAAA");
        assert_eq!(t.qtype[QTYPES.len()], 2);
        assert_eq!(t.dropped[0], 2);
        assert_eq!(t.latency[1], 4);
        assert_eq!(t.latency[LATENCY_BOUNDS_NS.len()], 2);
        assert_eq!(t.latency_sum_ns, 2 * (3_000 + 50_000_000));
    }
}
