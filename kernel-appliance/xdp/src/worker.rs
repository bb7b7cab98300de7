//! The per-queue worker: one thread, one AF_XDP socket, no locks on the hot path.
//!
//! Each turn: completed transmissions back to the free pool, the fill ring topped up, a
//! batch of received frames answered in place by the fast path and put on TX, one TX kick
//! when the kernel asks for it (NEED_WAKEUP), replies too large for a frame sent through the
//! kernel socket, and a `poll` when there was nothing to do.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use skua_engine::engine::{DropReason, ReplyInfo};
use skua_engine::rrl::Limit;
use skua_engine::{Engine, Outcome};
use skua_fastpath::{Drop, Verdict, handle_frame_with};
use skua_serve::{Ask, Door, Event, Kind, Miss, NoZones, Step, Zones};

use crate::queue::RxAction;
use crate::socket::XskSocket;

/// Counters of one queue, written by its worker only (relaxed atomics, one cache line
/// group per queue), read by the daemon for metrics.
#[derive(Default, Debug)]
#[repr(align(64))]
pub struct QueueStats {
    /// Frames received on the XSK.
    pub rx: AtomicU64,
    /// Replies built in place and queued on TX.
    pub answered: AtomicU64,
    /// Of those, from the engine's precompiled hot path.
    pub hot: AtomicU64,
    /// Queries answered through the kernel socket (reply larger than a frame).
    pub slow_path: AtomicU64,
    /// Queries handed to the resolver (not local data, not in the cache); cache hits are
    /// in `replies.cached`.
    pub resolve: AtomicU64,
    /// Frames that were not DNS over UDP (should not reach the XSK; counted, released).
    pub not_dns: AtomicU64,
    /// Replies lost because TX was full.
    pub tx_ring_full: AtomicU64,
    /// Drops by reason ([`Drop::ALL`] order); rate-limited responses are
    /// `dropped[Drop::RateLimited]` ([`QueueStats::rate_limited`]).
    pub dropped: [AtomicU64; Drop::COUNT],
    /// Responses slipped by rate limiting: sent truncated (TC=1, no records) or, for
    /// errors, sent as they are instead of dropped.
    pub slipped: AtomicU64,
    /// Replies by RCODE and QTYPE, as the kernel-socket workers count them (the same
    /// [`skua_engine::stats::Counters`]; only its reply fields are used here).
    pub replies: skua_engine::stats::Counters,
    /// `log-only` rate limiting: responses sent that would have been dropped.
    pub rrl_would_drop: AtomicU64,
    /// `log-only` rate limiting: responses sent that would have been slipped.
    pub rrl_would_slip: AtomicU64,
    /// Kernel counters of the socket (XDP_STATISTICS), refreshed about once a second.
    pub xsk: XskCounters,
}

/// Copies of the socket's `XDP_STATISTICS`.
#[derive(Default, Debug)]
pub struct XskCounters {
    /// `rx_dropped`.
    pub rx_dropped: AtomicU64,
    /// `rx_invalid_descs`.
    pub rx_invalid_descs: AtomicU64,
    /// `tx_invalid_descs`.
    pub tx_invalid_descs: AtomicU64,
    /// `rx_ring_full`.
    pub rx_ring_full: AtomicU64,
    /// `rx_fill_ring_empty_descs`.
    pub rx_fill_ring_empty_descs: AtomicU64,
    /// `tx_ring_empty_descs`.
    pub tx_ring_empty_descs: AtomicU64,
}

impl QueueStats {
    /// Total drops.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|d| d.load(Ordering::Relaxed)).sum()
    }

    /// Responses dropped by rate limiting.
    pub fn rate_limited(&self) -> u64 {
        self.dropped[Drop::RateLimited as usize].load(Ordering::Relaxed)
    }

    /// Counts the rate-limiting facts of a reply sent.
    fn count_rrl(&self, info: &ReplyInfo) {
        if info.slipped {
            self.slipped.fetch_add(1, Ordering::Relaxed);
        }
        match info.rrl_would {
            None => {}
            Some(Limit::Drop) => {
                self.rrl_would_drop.fetch_add(1, Ordering::Relaxed);
            }
            Some(Limit::Slip) => {
                self.rrl_would_slip.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Where the worker gets the engine in force. The worker reads `generation` once per batch
/// (one relaxed load, no shared write) and fetches the engine only when it changed, so a
/// reload takes effect within one batch at no cost to the hot path.
pub trait EngineSource: Send + Sync {
    /// The current engine.
    fn current(&self) -> Arc<Engine>;
    /// Increases whenever the engine is replaced.
    fn generation(&self) -> u64;
    /// The zone-transfer tables in force (TSIG keys, secondary zones), read once per batch:
    /// the door answers NOTIFYs and signed queries with them.
    fn zones(&self) -> Arc<dyn Zones + Send + Sync> {
        Arc::new(NoZones)
    }
    /// What the door reports (a NOTIFY accepted or refused, a signed query refused), with
    /// the client it came from; called off the receive loop.
    fn report(&self, _client: IpAddr, _event: Event) {}
    /// Seconds since the Unix epoch (TSIG's clock), read once per batch when keys exist.
    fn unix(&self) -> u64 {
        0
    }
}

/// The resolver as an AF_XDP worker sees it (skuad implements it): its cache, read for
/// every name outside local data (a hit is answered in the frame), and where misses and
/// refreshes go (the resolver answers misses later through the kernel socket of the
/// address the client asked).
pub trait Resolution {
    /// The cache type.
    type Cache: skua_engine::AnswerCache;
    /// The cache in force, if a resolver runs (read once per batch).
    fn cache(&self) -> Option<Arc<Self::Cache>>;
    /// A query that missed (`miss`: its question, read once): resolve it and answer
    /// `client` from `server`.
    fn resolve(&self, query: &[u8], miss: Miss, client: SocketAddr, server: SocketAddr);
    /// A hit asks for its question to be resolved again (prefetch, stale).
    fn refresh(&self, query: &[u8]);
    /// Whether [`Resolution::promote`] wants to hear of names asked often.
    fn wants_promotions(&self) -> bool {
        false
    }
    /// A cache hit whose question this worker answered [`PROMOTE_AFTER`] times within
    /// [`PROMOTE_WINDOW`] seconds: a candidate for the XDP program's cached answers.
    fn promote(&self, _query: &[u8]) {}
}

/// Cache hits on one question, within [`PROMOTE_WINDOW`] seconds, that make it a candidate
/// for the XDP program.
pub const PROMOTE_AFTER: u16 = 2;
/// See [`PROMOTE_AFTER`]; also how long a promoted question is not proposed again.
pub const PROMOTE_WINDOW: u16 = 10;

/// Which questions a worker answered from the cache recently: a direct-mapped table of
/// (tag, hits, second) per hash of the question, private to the worker (no shared write
/// on the hit path). Collisions only forget a count.
pub struct Admission {
    table: Vec<u64>,
}

const PROMOTED: u16 = u16::MAX;

/// Entries of the admission table (512 KiB per worker): a hot set of tens of thousands of
/// names asked in turn keeps most of its counts (with 4,096 entries, 10,000 names asked in a
/// cycle mostly evicted each other before their second hit).
const ADMISSION_SLOTS: usize = 1 << 16;

impl Default for Admission {
    fn default() -> Self {
        Admission {
            table: vec![0; ADMISSION_SLOTS],
        }
    }
}

impl Admission {
    /// Counts a cache hit on the DNS message `query` at second `now`; true when it makes
    /// the question a candidate (once per [`PROMOTE_WINDOW`]).
    pub fn hit(&mut self, query: &[u8], now: u32) -> bool {
        let Some(h) = question_hash(query) else {
            return false;
        };
        // FNV's low bits vary little between names like h1, h2...: mix (Fibonacci
        // hashing), take the entry from the top bits and the tag from the bottom.
        let h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = &mut self.table[(h >> 48) as usize & (ADMISSION_SLOTS - 1)];
        // Cannot truncate: the low half of the hash, the low 16 bits of the second.
        let (tag, sec) = (h as u32, now as u16);
        let pack = |count: u16, second: u16| {
            u64::from(tag) << 32 | u64::from(count) << 16 | u64::from(second)
        };
        let (old_tag, count, second) = ((*slot >> 32) as u32, (*slot >> 16) as u16, *slot as u16);
        let age = sec.wrapping_sub(second);
        if old_tag != tag || (count != 0 && age >= PROMOTE_WINDOW) {
            *slot = pack(1, sec);
            return PROMOTE_AFTER <= 1;
        }
        if count == PROMOTED {
            return false;
        }
        if count + 1 >= PROMOTE_AFTER {
            *slot = pack(PROMOTED, sec);
            return true;
        }
        *slot = pack(count + 1, second);
        false
    }
}

/// FNV-1a over the lower-cased question name and type of a DNS message (uncompressed
/// name, as a query's is); `None` for anything else.
fn question_hash(q: &[u8]) -> Option<u64> {
    let (name, qtype, _) = crate::answers::question(q)?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name
        .iter()
        .map(u8::to_ascii_lowercase)
        .chain(qtype.to_be_bytes())
    {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    Some(h)
}

/// No resolver: names outside local data are REFUSED by the engine.
pub struct NoResolution;

impl Resolution for NoResolution {
    type Cache = skua_engine::NoCache;
    fn cache(&self) -> Option<Arc<Self::Cache>> {
        None
    }
    fn resolve(&self, _: &[u8], _: Miss, _: SocketAddr, _: SocketAddr) {}
    fn refresh(&self, _: &[u8]) {}
}

/// Kernel sockets for replies that do not fit a frame, by the local address queried.
pub trait SlowPath: Send {
    /// A kernel UDP socket bound to `server` (our address and port), if one exists.
    fn socket_for(&self, server: SocketAddr) -> Option<&UdpSocket>;
}

/// Sockets with their local addresses (resolved once, when the plane starts).
impl SlowPath for Vec<(SocketAddr, UdpSocket)> {
    fn socket_for(&self, server: SocketAddr) -> Option<&UdpSocket> {
        self.iter().find(|(a, _)| *a == server).map(|(_, s)| s)
    }
}

fn copy_kernel_stats(sock: &XskSocket, c: &XskCounters) {
    if let Ok(k) = sock.stats() {
        c.rx_dropped.store(k.rx_dropped, Ordering::Relaxed);
        c.rx_invalid_descs
            .store(k.rx_invalid_descs, Ordering::Relaxed);
        c.tx_invalid_descs
            .store(k.tx_invalid_descs, Ordering::Relaxed);
        c.rx_ring_full.store(k.rx_ring_full, Ordering::Relaxed);
        c.rx_fill_ring_empty_descs
            .store(k.rx_fill_ring_empty_descs, Ordering::Relaxed);
        c.tx_ring_empty_descs
            .store(k.tx_ring_empty_descs, Ordering::Relaxed);
    }
}

/// Kicks transmission until the kernel has taken every TX descriptor (bounded).
fn kick_tx(sock: &mut XskSocket) {
    for _ in 0..MAX_KICKS {
        let q = sock.queue();
        let before = q.tx_in_flight();
        if before == 0 || !q.tx_needs_wakeup() {
            return;
        }
        sock.wakeup_tx();
        let q = sock.queue();
        if q.tx_in_flight() == before {
            // No progress (completion ring full, or the device busy): make room and let the
            // next turn try again rather than spin here.
            q.reap_completions();
            return;
        }
    }
}

/// Kicks per turn at most: a full 2048-entry TX ring at 32 frames per kick, plus one.
const MAX_KICKS: usize = 65;

/// Runs the worker until `stop` is set. `poll_ms` bounds how long an idle worker sleeps in
/// `poll` (and therefore how quickly it sees `stop`). `clock` gives whole seconds of a
/// monotonic clock, read once per batch: response rate limiting counts in it, so every
/// dataplane sharing an engine must pass the same clock.
#[allow(clippy::too_many_arguments)]
pub fn run<R: Resolution>(
    sock: &mut XskSocket,
    engines: &dyn EngineSource,
    slow: &dyn SlowPath,
    resolution: &R,
    stats: &QueueStats,
    stop: &AtomicBool,
    poll_ms: i32,
    clock: fn() -> u32,
) {
    let mut scratch = vec![0u8; 65536];
    let mut big = vec![0u8; 65535];
    let mut slow_queue: Vec<(Vec<u8>, SocketAddr, SocketAddr)> = Vec::new();
    let mut resolve_queue: Vec<(Vec<u8>, Miss, SocketAddr, SocketAddr)> = Vec::new();
    let mut events: Vec<(IpAddr, Event)> = Vec::new();
    let mut refresh_queue: Vec<Vec<u8>> = Vec::new();
    let mut promote_queue: Vec<Vec<u8>> = Vec::new();
    let mut admission = Admission::default();
    let promotions = resolution.wants_promotions();
    let mut generation = engines.generation();
    let mut engine = engines.current();
    let mut last_stats = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let g = engines.generation();
        if g != generation {
            generation = g;
            engine = engines.current();
        }
        if last_stats.elapsed() >= std::time::Duration::from_secs(1) {
            last_stats = std::time::Instant::now();
            copy_kernel_stats(sock, &stats.xsk);
        }
        let now = clock();
        let cache = resolution.cache();
        let zones = engines.zones();
        let unix = if zones.keys().is_empty() {
            0
        } else {
            engines.unix()
        };
        let door = Door {
            engine: &engine,
            cache: cache.as_deref(),
            zones: &*zones,
        };
        let q = sock.queue();
        q.reap_completions();
        q.refill();
        let tx_before = q.counters.tx;
        let full_before = q.counters.tx_ring_full;
        let t0 = std::time::Instant::now();
        let n = q.process_rx(|buf, len| {
            let mut report = |c: SocketAddr, e| events.push((c.ip(), e));
            match handle_frame_with(&door, now, unix, buf, len, &mut scratch, &mut report) {
                Verdict::Reply {
                    len,
                    info,
                    query_len,
                } => {
                    stats.answered.fetch_add(1, Ordering::Relaxed);
                    // The door's own answers (NOTIFY, a signed query) carry no engine facts.
                    if let Some(info) = info {
                        if info.refresh {
                            refresh_queue.push(scratch[..query_len].to_vec());
                        } else if info.cached
                            && promotions
                            && admission.hit(&scratch[..query_len], now)
                        {
                            promote_queue.push(scratch[..query_len].to_vec());
                        }
                        if info.hot {
                            stats.hot.fetch_add(1, Ordering::Relaxed);
                        }
                        stats.count_rrl(&info);
                        stats.replies.record(&Outcome::Reply { len, info });
                    }
                    RxAction::Transmit(len)
                }
                Verdict::Drop(d) => {
                    stats.dropped[d as usize].fetch_add(1, Ordering::Relaxed);
                    RxAction::Release
                }
                Verdict::Kernel {
                    query_len,
                    client: Some(c),
                    server: Some(s),
                } if query_len > 0 => {
                    slow_queue.push((scratch[..query_len].to_vec(), c, s));
                    RxAction::Release
                }
                Verdict::Resolve {
                    miss,
                    query_len,
                    client,
                    server,
                } => {
                    resolve_queue.push((scratch[..query_len].to_vec(), miss, client, server));
                    stats.resolve.fetch_add(1, Ordering::Relaxed);
                    RxAction::Release
                }
                Verdict::Kernel { .. } => {
                    stats.not_dns.fetch_add(1, Ordering::Relaxed);
                    RxAction::Release
                }
            }
        });
        stats.rx.fetch_add(n as u64, Ordering::Relaxed);
        let full = q.counters.tx_ring_full - full_before;
        if full > 0 {
            stats.tx_ring_full.fetch_add(full, Ordering::Relaxed);
        }
        let produced = q.counters.tx != tx_before;
        // In copy mode the kernel transmits only when kicked (NEED_WAKEUP says so), and at
        // most 32 frames per kick (TX_BATCH_SIZE in net/xdp/xsk.c): kick until the ring is
        // drained, or frames pile up in TX, the free pool runs dry and the fill ring empties
        // (measured: 15 % of replies lost to a full TX ring with one kick per batch).
        if produced {
            kick_tx(sock);
        }
        if n > 0 {
            // Per query: from the batch's pickup to its replies handed to the kernel.
            stats
                .replies
                .record_latency(t0.elapsed().as_nanos() as u64, n as u64);
        }
        // Off the RX loop: misses to the resolver, refreshes too.
        for (query, miss, client, server) in resolve_queue.drain(..) {
            resolution.resolve(&query, miss, client, server);
        }
        for query in refresh_queue.drain(..) {
            resolution.refresh(&query);
        }
        for query in promote_queue.drain(..) {
            resolution.promote(&query);
        }
        // Replies too large for a frame: through the same door (with the cache: a hit too
        // large for a frame is still a hit), sent by the kernel socket of the address asked.
        for (query, client, server) in slow_queue.drain(..) {
            let ask = Ask {
                kind: Kind::Udp,
                peer: client,
                now,
                unix,
                pad: None,
                query: &query,
            };
            let mut report = |e| events.push((client.ip(), e));
            match door.handle(&ask, &mut big, &mut report) {
                Step::Reply { len, info } => {
                    if let Some(info) = info {
                        stats.count_rrl(&info);
                        if info.refresh {
                            resolution.refresh(&query);
                        }
                    }
                    match slow.socket_for(server) {
                        Some(s) if s.send_to(&big[..len], client).is_ok() => {
                            stats.slow_path.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            stats.dropped[Drop::NoRoom as usize].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Step::Resolve(miss) => {
                    stats.resolve.fetch_add(1, Ordering::Relaxed);
                    resolution.resolve(&query, miss, client, server);
                }
                Step::Drop {
                    reason: DropReason::RateLimited,
                    ..
                } => {
                    stats.dropped[Drop::RateLimited as usize].fetch_add(1, Ordering::Relaxed);
                }
                Step::Drop { .. } => {
                    stats.dropped[Drop::Engine as usize].fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        for (client, event) in events.drain(..) {
            engines.report(client, event);
        }
        if n == 0 {
            // Nothing received: sleep in poll (which also wakes the kernel's RX side when
            // the fill ring has NEED_WAKEUP), unless TX still has frames in flight.
            let q = sock.queue();
            if q.tx_in_flight() > 0 {
                sock.wakeup_tx();
                std::thread::yield_now();
            } else {
                sock.wait_rx(poll_ms);
            }
        }
    }
    copy_kernel_stats(sock, &stats.xsk);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_promotes_the_second_hit_once_per_window() {
        let q = |name: &[u8], t: u8| {
            let mut m = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
            m.extend_from_slice(name);
            m.extend_from_slice(&[0, t, 0, 1]);
            m
        };
        let mut a = Admission::default();
        let www = q(b"\x03www\x07example\x00", 1);
        let upper = q(b"\x03WWW\x07Example\x00", 1);
        assert!(!a.hit(&www, 100));
        assert!(a.hit(&upper, 101), "case does not matter");
        assert!(!a.hit(&www, 102), "promoted already");
        assert!(!a.hit(&www, 109));
        // A window later it may be proposed again (the program may have dropped it).
        assert!(!a.hit(&www, 111));
        assert!(a.hit(&www, 112));
        // Another type is another question; hits too far apart do not add up.
        assert!(!a.hit(&q(b"\x03www\x07example\x00", 28), 100));
        assert!(!a.hit(&q(b"\x01a\x00", 1), 100));
        assert!(!a.hit(&q(b"\x01a\x00", 1), 120));
        assert!(a.hit(&q(b"\x01a\x00", 1), 121));
        // Not a plain question.
        assert!(!a.hit(&[0u8; 5], 1));
        assert!(!a.hit(&q(b"\xc0\x0c", 1), 1));
    }

    #[test]
    fn admission_keeps_a_large_hot_set_asked_in_turn() {
        // 10,000 names asked one after the other, twice: most are proposed on their
        // second turn (a name shares its entry with another in about 14 % of cases).
        let mut a = Admission::default();
        let q = |i: u32| {
            let mut m = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
            let label = format!("h{i}");
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
            m.extend_from_slice(b"\x08internal\x00\x00\x01\x00\x01");
            m
        };
        let mut proposed = 0;
        for pass in 0..2 {
            for i in 0..10_000 {
                if a.hit(&q(i), 100 + pass) {
                    proposed += 1;
                }
            }
        }
        assert!(proposed > 8_000, "{proposed} of 10000 proposed");
    }

    #[test]
    fn rate_limiting_counters() {
        let s = QueueStats::default();
        let info = ReplyInfo::default();
        s.count_rrl(&info);
        s.count_rrl(&ReplyInfo {
            slipped: true,
            truncated: true,
            ..info
        });
        s.count_rrl(&ReplyInfo {
            rrl_would: Some(Limit::Drop),
            ..info
        });
        s.count_rrl(&ReplyInfo {
            rrl_would: Some(Limit::Slip),
            ..info
        });
        s.dropped[Drop::RateLimited as usize].fetch_add(2, Ordering::Relaxed);
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(
            (
                r(&s.slipped),
                r(&s.rrl_would_drop),
                r(&s.rrl_would_slip),
                s.rate_limited(),
                s.dropped_total()
            ),
            (1, 1, 1, 2, 2)
        );
    }
}
