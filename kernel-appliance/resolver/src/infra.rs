//! What we know of each upstream: smoothed round-trip time, retransmission timeout and
//! back-off, as Unbound's infrastructure cache keeps them (`util/rtt.c`, after RFC 6298's
//! estimator), so the fastest healthy upstream is asked first and a dead one is left alone
//! but probed now and then.
//!
//! Times are milliseconds of the caller's monotonic clock.

use alloc::vec::Vec;
use core::net::SocketAddr;

/// Timeout given to an upstream never heard from (Unbound's `UNKNOWN_SERVER_NICENESS`).
pub const UNKNOWN_RTO: u32 = 376;
/// Smallest timeout (Unbound's `RTT_MIN_TIMEOUT`).
pub const MIN_RTO: u32 = 50;
/// Largest timeout; an upstream whose timeout backed off to this is considered down
/// (Unbound's `RTT_MAX_TIMEOUT` and `USEFUL_SERVER_TOP_TIMEOUT`).
pub const MAX_RTO: u32 = 120_000;
/// Upstreams within this many milliseconds of the fastest are equally good and picked
/// at random among (Unbound's `RTT_BAND`).
pub const RTT_BAND: u32 = 400;
/// How long an upstream that stopped answering is left alone before one query probes it
/// (Unbound probes a blocked server once its `infra-host-ttl` entry expires; 900 s
/// there — shorter here, because a forwarder has few upstreams and needs them back).
pub const PROBE_AFTER_MS: u64 = 60_000;

/// The estimator of one upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rtt {
    /// Smoothed RTT, ms.
    pub srtt: u32,
    /// RTT variance, ms.
    pub rttvar: u32,
    /// Current retransmission timeout, ms, after back-off.
    pub rto: u32,
}

impl Default for Rtt {
    fn default() -> Self {
        Rtt {
            srtt: 0,
            rttvar: UNKNOWN_RTO / 4,
            rto: UNKNOWN_RTO,
        }
    }
}

impl Rtt {
    fn calc(&self) -> u32 {
        (self.srtt + 4 * self.rttvar).clamp(MIN_RTO, MAX_RTO)
    }

    /// A reply came after `ms` (RFC 6298 §2.3 with Unbound's integer arithmetic).
    pub fn update(&mut self, ms: u32) {
        let ms = ms.min(MAX_RTO) as i64;
        let srtt = self.srtt as i64;
        let delta = ms - srtt;
        let srtt = (srtt + delta / 8).max(0);
        let var = self.rttvar as i64;
        let var = (var + (delta.abs() - var) / 4).max(0);
        self.srtt = srtt as u32;
        self.rttvar = var as u32;
        self.rto = self.calc();
    }

    /// A query sent with timeout `orig` timed out: the timeout becomes twice `orig`
    /// (RFC 6298 §5.5), up to [`MAX_RTO`]. Doubling the query's own timeout rather than the
    /// current one is Unbound's `rtt_lost`: when many queries in flight time out together
    /// (a stalled upstream, or the resolver itself late), the timeout doubles once, not once
    /// per query; and a reply that lowered it meanwhile wins.
    pub fn lost(&mut self, orig: u32) {
        if self.rto < orig {
            return;
        }
        let doubled = orig.saturating_mul(2).min(MAX_RTO);
        if self.rto <= doubled {
            self.rto = doubled;
        }
    }
}

/// One upstream's record.
#[derive(Clone, Debug)]
pub struct Host {
    /// Address and port.
    pub addr: SocketAddr,
    /// The estimator.
    pub rtt: Rtt,
    /// Consecutive timeouts.
    pub timeouts: u32,
    /// When a query to it may next be sent while it is down (a probe), ms.
    pub probe_at: u64,
    /// A probe is out.
    pub probing: bool,
    /// Replies, timeouts and errors, for metrics.
    pub replies: u64,
    /// Timeouts seen.
    pub lost: u64,
    /// Error replies (SERVFAIL, REFUSED, FORMERR, NOTIMP) and connection failures.
    pub errors: u64,
}

impl Host {
    fn new(addr: SocketAddr) -> Self {
        Host {
            addr,
            rtt: Rtt::default(),
            timeouts: 0,
            probe_at: 0,
            probing: false,
            replies: 0,
            lost: 0,
            errors: 0,
        }
    }

    /// Down: its timeout backed off to the maximum (Unbound's `USEFUL_SERVER_TOP_TIMEOUT`):
    /// about nine timeouts in a row with no reply between them, since every reply brings
    /// the timeout back to what the RTT says. A few lost packets never make it down.
    pub fn is_down(&self) -> bool {
        self.rtt.rto >= MAX_RTO
    }
}

/// The infrastructure cache: a record per upstream address.
#[derive(Clone, Debug, Default)]
pub struct Infra {
    hosts: Vec<Host>,
}

impl Infra {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn index(&mut self, addr: SocketAddr) -> usize {
        match self.hosts.iter().position(|h| h.addr == addr) {
            Some(i) => i,
            None => {
                self.hosts.push(Host::new(addr));
                self.hosts.len() - 1
            }
        }
    }

    /// The record of an upstream (created when new).
    pub fn host(&mut self, addr: SocketAddr) -> &mut Host {
        let i = self.index(addr);
        &mut self.hosts[i]
    }

    /// Every record, for metrics.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// A reply from `addr` after `ms`.
    pub fn replied(&mut self, addr: SocketAddr, ms: u32) {
        let h = self.host(addr);
        h.rtt.update(ms);
        h.timeouts = 0;
        h.probing = false;
        h.replies += 1;
    }

    /// A query to `addr`, sent with timeout `orig`, timed out at `now`.
    pub fn timed_out(&mut self, addr: SocketAddr, now: u64, orig: u32) {
        let h = self.host(addr);
        h.rtt.lost(orig);
        h.timeouts += 1;
        h.lost += 1;
        h.probing = false;
        if h.is_down() {
            h.probe_at = now + PROBE_AFTER_MS;
        }
    }

    /// `addr` answered with an error or the connection failed.
    pub fn failed(&mut self, addr: SocketAddr) {
        let h = self.host(addr);
        h.errors += 1;
        h.probing = false;
    }

    /// Forgets upstreams no longer configured.
    pub fn retain(&mut self, keep: impl Fn(&SocketAddr) -> bool) {
        self.hosts.retain(|h| keep(&h.addr));
    }

    /// Picks the upstream to ask among `candidates` (not yet tried for this question) at
    /// `now`, with `random` for the tie-break: among the live ones, a random one whose
    /// timeout is within [`RTT_BAND`] of the best (Unbound's `iter_filter_order`); when
    /// all are down, one whose probe is due (it becomes the probe); else none.
    pub fn select(
        &mut self,
        candidates: &[SocketAddr],
        now: u64,
        random: u32,
    ) -> Option<SocketAddr> {
        let live: Vec<(SocketAddr, u32)> = candidates
            .iter()
            .map(|&a| {
                let h = self.host(a);
                (a, if h.is_down() { u32::MAX } else { h.rtt.rto })
            })
            .filter(|&(_, rto)| rto != u32::MAX)
            .collect();
        if let Some(best) = live.iter().map(|&(_, r)| r).min() {
            let band: Vec<SocketAddr> = live
                .iter()
                .filter(|&&(_, r)| r <= best.saturating_add(RTT_BAND))
                .map(|&(a, _)| a)
                .collect();
            return Some(band[random as usize % band.len()]);
        }
        let due = candidates.iter().copied().find(|&a| {
            let h = self.host(a);
            !h.probing && now >= h.probe_at
        })?;
        let h = self.host(due);
        h.probing = true;
        h.probe_at = now + PROBE_AFTER_MS;
        Some(due)
    }

    /// The timeout to wait for `addr`'s reply.
    pub fn rto(&mut self, addr: SocketAddr) -> u32 {
        self.host(addr).rtt.rto
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(n: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, n], 53))
    }

    #[test]
    fn estimator_converges_and_backs_off() {
        let mut r = Rtt::default();
        assert_eq!(r.rto, 376);
        for _ in 0..50 {
            r.update(20);
        }
        // Integer steps of delta/8 stop within 8 ms of the sample, as Unbound's do.
        assert!(r.srtt > 12 && r.srtt <= 20, "{r:?}");
        assert_eq!(r.rto, MIN_RTO.max(r.srtt + 4 * r.rttvar));
        let before = r.rto;
        r.lost(before);
        assert_eq!(r.rto, before * 2);
        // Many queries sent with the same timeout, timing out together: doubled once.
        for _ in 0..40 {
            r.lost(before);
        }
        assert_eq!(r.rto, before * 2);
        // Each retry sent with the timeout in force: it doubles up to the maximum.
        for _ in 0..40 {
            let t = r.rto;
            r.lost(t);
        }
        assert_eq!(r.rto, MAX_RTO);
    }

    #[test]
    fn fastest_band_then_probe_when_all_down() {
        let mut i = Infra::new();
        for _ in 0..30 {
            i.replied(a(1), 10);
            i.replied(a(2), 900);
        }
        // a(3) unknown: 376 ms is within the band of a(1)'s ~50, a(2) is not.
        let c = [a(1), a(2), a(3)];
        for r in 0..20 {
            let s = i.select(&c, 0, r).unwrap();
            assert!(s == a(1) || s == a(3), "{s}");
        }
        // Five timeouts in a row (30 % loss does that now and then): still up.
        for _ in 0..5 {
            let t = i.rto(a(1));
            i.timed_out(a(1), 1000, t);
        }
        assert!(!i.host(a(1)).is_down());
        // All down: nothing until a probe is due, then exactly one probe.
        for _ in 0..12 {
            for x in c {
                let t = i.rto(x);
                i.timed_out(x, 1000, t);
            }
        }
        assert_eq!(i.select(&c, 1000, 0), None);
        let later = 1000 + PROBE_AFTER_MS;
        let p = i.select(&c, later, 0).unwrap();
        assert!(i.host(p).probing);
        let q = i.select(&c, later, 0).unwrap();
        assert_ne!(p, q);
        // A reply brings it back.
        i.replied(p, 30);
        assert!(!i.host(p).is_down());
    }
}
