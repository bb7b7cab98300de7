//! The connection slots that TCP, DNS over TLS, DNS over HTTPS and DNS over QUIC share
//! (`incoming-num-tcp:` × `num-threads:`), and how idle connections give theirs up.
//!
//! Connections that never send a byte must not be able to keep everyone else out. Three
//! things see to it:
//!
//! - **The idle timeout shrinks as the slots fill**, as Unbound's does (its
//!   `setup_tcp_handler`, util/netevent.c): past half the slots in use a connection may stay
//!   idle for `tcp-idle-timeout:` / 100, past 65 % for / 500, past 80 % not at all; never
//!   less than 200 ms (Unbound's `TCP_QUERY_TIMEOUT_MINIMUM`), never more than the
//!   configured timeout. Unbound decides once, when a connection is accepted; here every
//!   idle wait reads the level in force, and connections already idle are told when it
//!   rises, so those accepted while the slots were free give theirs up too.
//! - **When every slot is taken, the connection that has been idle longest is closed**
//!   to make room for a new one (Unbound has no such step: past its limit, new
//!   connections wait). Idle means nothing owed to the client: no query being answered,
//!   no answer unsent. A connection asked to go that is not idle (a query came meanwhile)
//!   stays, and the next longest idle one is asked.
//! - A per-source limit (`tcp-connection-limit-per-source:`, in
//!   [`super::sockets::ClientLimits`]), so that one address cannot make all the others the
//!   longest idle.
//!
//! Each connection notes when bytes last moved on it; nothing here runs per query but that
//! store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

pub use crate::base::serving::StreamCounters;

/// The shortest idle timeout pressure makes (Unbound's `TCP_QUERY_TIMEOUT_MINIMUM`).
pub const PRESSURE_FLOOR: Duration = Duration::from_millis(200);
/// How long a new connection waits for the idle one asked to go before another is asked.
const EVICT_WAIT: Duration = Duration::from_millis(500);
/// How often a new connection looks again when every slot is busy (none idle to close).
const BUSY_LOOK: Duration = Duration::from_millis(200);
/// Connections already idle are told of a rise in pressure at most this often (a level
/// flapping at a boundary would otherwise wake them all at each accept and close).
const RISE_EVERY_MS: u64 = 100;

/// What one connection shares with its [`Slots`].
struct State {
    /// Milliseconds since [`Slots::epoch`] when bytes last moved (or a query was answered).
    last_ms: Arc<AtomicU64>,
    /// Asked to close (if idle): set by a new connection that needs the slot.
    asked: AtomicBool,
    /// Wakes the connection when asked (a permit is kept if it is not waiting then).
    evict: Notify,
}

struct Inner {
    used: usize,
    next_id: u64,
    conns: HashMap<u64, Arc<State>>,
}

/// The slots of the stream listeners.
pub struct Slots {
    limit: usize,
    epoch: Instant,
    inner: Mutex<Inner>,
    /// A slot came free, or a connection asked to go stays (look again).
    freed: Notify,
    /// The pressure level rose: idle connections look at their deadline again.
    rose: Notify,
    level: AtomicU8,
    /// When connections were last told of a rise (ms since `epoch`), and whether one is
    /// still to be told (it came too soon after the last).
    rose_at: AtomicU64,
    rise_due: AtomicBool,
    counters: Arc<StreamCounters>,
}

/// The pressure level for `used` slots of `limit`, as Unbound: 0 up to half, 1 up to
/// 65 %, 2 up to 80 %, 3 beyond.
fn level(used: usize, limit: usize) -> u8 {
    let pct = used.saturating_mul(100) / limit.max(1);
    match pct {
        0..=50 => 0,
        51..=65 => 1,
        66..=80 => 2,
        _ => 3,
    }
}

/// The idle timeout at pressure `level`, for a configured `idle`.
fn idle_at_level(idle: Duration, level: u8) -> Duration {
    let scaled = match level {
        0 => return idle,
        1 => idle / 100,
        2 => idle / 500,
        _ => Duration::ZERO,
    };
    scaled.max(PRESSURE_FLOOR).min(idle)
}

impl Slots {
    /// `limit` slots, none taken.
    pub fn new(limit: usize, counters: Arc<StreamCounters>) -> Arc<Self> {
        counters.slots.store(limit.max(1), Ordering::Relaxed);
        Arc::new(Self {
            limit: limit.max(1),
            epoch: Instant::now(),
            inner: Mutex::new(Inner {
                used: 0,
                next_id: 0,
                conns: HashMap::new(),
            }),
            freed: Notify::new(),
            rose: Notify::new(),
            level: AtomicU8::new(0),
            rose_at: AtomicU64::new(0),
            rise_due: AtomicBool::new(false),
            counters,
        })
    }

    /// How many slots there are.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Slots taken now.
    pub fn used(&self) -> usize {
        self.lock().used
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The idle timeout in force now for a configured `idle`.
    pub fn idle_now(&self, idle: Duration) -> Duration {
        idle_at_level(idle, self.level.load(Ordering::Relaxed))
    }

    /// Notes `used` slots taken: the level, and the idle connections told if it rose.
    fn set_level(&self, used: usize) {
        let new = level(used, self.limit);
        let old = self.level.swap(new, Ordering::Relaxed);
        if new > old {
            self.rise_due.store(true, Ordering::Relaxed);
        }
        if self.rise_due.load(Ordering::Relaxed) {
            let now = self.now_ms();
            let last = self.rose_at.load(Ordering::Relaxed);
            if now.saturating_sub(last) >= RISE_EVERY_MS || last == 0 {
                self.rose_at.store(now.max(1), Ordering::Relaxed);
                self.rise_due.store(false, Ordering::Relaxed);
                self.rose.notify_waiters();
            }
        }
    }

    /// A slot now, if one is free.
    pub fn try_take(self: &Arc<Self>) -> Option<Slot> {
        let mut g = self.lock();
        if g.used >= self.limit {
            return None;
        }
        g.used += 1;
        let id = g.next_id;
        g.next_id += 1;
        let state = Arc::new(State {
            last_ms: Arc::new(AtomicU64::new(self.now_ms())),
            asked: AtomicBool::new(false),
            evict: Notify::new(),
        });
        g.conns.insert(id, state.clone());
        let used = g.used;
        drop(g);
        self.counters.open.fetch_add(1, Ordering::Relaxed);
        self.set_level(used);
        Some(Slot {
            handle: SlotHandle {
                slots: self.clone(),
                state,
            },
            id,
        })
    }

    /// A slot: at once if one is free; else the connection idle longest is asked to go and
    /// its slot taken when it has; with none idle, the first slot that comes free.
    pub async fn take(self: &Arc<Self>) -> Slot {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(s) = self.try_take() {
                return s;
            }
            let wait = if self.ask_longest_idle() {
                EVICT_WAIT
            } else {
                BUSY_LOOK
            };
            let _ = tokio::time::timeout(wait, freed).await;
        }
    }

    /// Asks the connection idle longest (by when bytes last moved on it), among those not
    /// asked already, to close. Whether one was asked.
    fn ask_longest_idle(&self) -> bool {
        let g = self.lock();
        let victim = g
            .conns
            .values()
            .filter(|s| !s.asked.load(Ordering::Relaxed))
            .min_by_key(|s| s.last_ms.load(Ordering::Relaxed));
        match victim {
            Some(s) => {
                s.asked.store(true, Ordering::Relaxed);
                s.evict.notify_one();
                true
            }
            None => false,
        }
    }

    fn release(&self, id: u64) {
        let mut g = self.lock();
        g.conns.remove(&id);
        g.used = g.used.saturating_sub(1);
        let used = g.used;
        drop(g);
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
        self.set_level(used);
        self.freed.notify_one();
    }
}

/// A connection's slot, given back when dropped.
pub struct Slot {
    handle: SlotHandle,
    id: u64,
}

impl Slot {
    /// What the connection uses to note its activity and hear that it is asked to go.
    pub fn handle(&self) -> SlotHandle {
        self.handle.clone()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.handle.slots.release(self.id);
    }
}

/// A connection's view of its slot.
#[derive(Clone)]
pub struct SlotHandle {
    slots: Arc<Slots>,
    state: Arc<State>,
}

/// Why a connection waiting for its client's next message stops waiting.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// Idle for the idle timeout in force.
    TimedOut,
    /// Asked to make room for a new connection.
    Asked,
    /// The pressure rose: the deadline is to be read again.
    Rose,
}

impl SlotHandle {
    /// Bytes moved on the connection (or a query was answered) now.
    pub fn touch(&self) {
        self.state
            .last_ms
            .store(self.slots.now_ms(), Ordering::Relaxed);
    }

    /// Where the last activity is kept (milliseconds since [`Self::epoch`]): DNS over
    /// HTTPS notes its reads and writes there itself.
    pub fn last_ms(&self) -> Arc<AtomicU64> {
        self.state.last_ms.clone()
    }

    /// What [`Self::last_ms`] counts from.
    pub fn epoch(&self) -> Instant {
        self.slots.epoch
    }

    /// When the connection goes idle, with the idle timeout in force for `idle`.
    pub fn deadline(&self, idle: Duration) -> Instant {
        self.slots.epoch
            + Duration::from_millis(self.state.last_ms.load(Ordering::Relaxed))
            + self.slots.idle_now(idle)
    }

    /// The idle timeout in force for a configured `idle`.
    pub fn idle_now(&self, idle: Duration) -> Duration {
        self.slots.idle_now(idle)
    }

    /// Waits until the connection's idle deadline for `idle` passes, it is asked to go, or
    /// the pressure rises; never returns [`Wake::TimedOut`] for a deadline that moved on
    /// meanwhile (a write noted after the wait began).
    pub async fn wait(&self, idle: Duration) -> Wake {
        loop {
            let rose = self.rose();
            let asked = self.state.evict.notified();
            let deadline = self.deadline(idle);
            tokio::select! {
                () = tokio::time::sleep_until(deadline.into()) => {
                    if Instant::now() >= self.deadline(idle) {
                        return Wake::TimedOut;
                    }
                }
                () = asked => return Wake::Asked,
                () = rose => return Wake::Rose,
            }
        }
    }

    /// Waits until the connection is asked to make room (for a phase with a bound of its
    /// own, as a handshake: nothing is owed to the client yet).
    pub async fn asked(&self) {
        self.state.evict.notified().await
    }

    /// Runs a phase in which nothing is owed to the client yet (a TLS or QUIC handshake):
    /// `None` when the connection was asked to make room meanwhile and goes.
    pub async fn unless_asked<F: std::future::Future>(&self, phase: F) -> Option<F::Output> {
        tokio::pin!(phase);
        loop {
            tokio::select! {
                r = &mut phase => return Some(r),
                () = self.asked() => {
                    if self.answer_ask(true) {
                        return None;
                    }
                }
            }
        }
    }

    /// Resolves when the pressure rises (the idle deadline is to be read again).
    pub fn rose(&self) -> Notified<'_> {
        self.slots.rose.notified()
    }

    /// Closes for the idle timeout: counted when pressure had shortened it.
    pub fn timed_out(&self, idle: Duration) {
        if self.slots.idle_now(idle) < idle {
            self.slots
                .counters
                .idle_pressure
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Asked to go: whether it still should (a new connection is still waiting: every
    /// slot is taken). The connection must be idle too, which only it can tell: `idle`.
    /// When it goes, counted; when it stays, noted active (the next idle one is asked) and
    /// the waiting connection told to look again.
    pub fn answer_ask(&self, idle: bool) -> bool {
        let needed = self.slots.used() >= self.slots.limit;
        if idle && needed {
            self.slots.counters.evicted.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.touch();
        self.state.asked.store(false, Ordering::Relaxed);
        self.slots.freed.notify_one();
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_timeouts_follow_unbound() {
        assert_eq!(level(5, 10), 0);
        assert_eq!(level(6, 10), 1);
        assert_eq!(level(65, 100), 1);
        assert_eq!(level(66, 100), 2);
        assert_eq!(level(80, 100), 2);
        assert_eq!(level(81, 100), 3);
        assert_eq!(level(10, 10), 3);
        let idle = Duration::from_secs(30);
        assert_eq!(idle_at_level(idle, 0), idle);
        assert_eq!(idle_at_level(idle, 1), Duration::from_millis(300));
        assert_eq!(idle_at_level(idle, 2), PRESSURE_FLOOR);
        assert_eq!(idle_at_level(idle, 3), PRESSURE_FLOOR);
        // Never longer than configured.
        let short = Duration::from_millis(50);
        assert_eq!(idle_at_level(short, 3), short);
    }

    #[tokio::test]
    async fn the_longest_idle_connection_is_asked_to_make_room() {
        let slots = Slots::new(2, Arc::default());
        let a = slots.try_take().unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let b = slots.try_take().unwrap();
        assert!(slots.try_take().is_none());
        // b was active after a: a is asked.
        b.handle().touch();
        let (ha, hb) = (a.handle(), b.handle());
        let taker = tokio::spawn({
            let slots = slots.clone();
            async move { slots.take().await }
        });
        // (Not `wait`: with every slot in use its idle deadline is 200 ms away.)
        tokio::time::timeout(Duration::from_secs(5), ha.asked())
            .await
            .expect("asked");
        assert!(ha.answer_ask(true));
        drop(a);
        let c = taker.await.unwrap();
        assert_eq!(slots.used(), 2);
        assert_eq!(slots.counters.evicted.load(Ordering::Relaxed), 1);
        drop((b, c, hb));
    }

    #[tokio::test]
    async fn a_busy_connection_asked_stays_and_the_next_is_asked() {
        let slots = Slots::new(2, Arc::default());
        let a = slots.try_take().unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let b = slots.try_take().unwrap();
        let (ha, hb) = (a.handle(), b.handle());
        let taker = tokio::spawn({
            let slots = slots.clone();
            async move { slots.take().await }
        });
        tokio::time::timeout(Duration::from_secs(5), ha.asked())
            .await
            .expect("asked");
        // a has a query in progress: it stays, and b is asked next.
        assert!(!ha.answer_ask(false));
        tokio::time::timeout(Duration::from_secs(5), hb.asked())
            .await
            .expect("asked");
        assert!(hb.answer_ask(true));
        drop(b);
        let _c = taker.await.unwrap();
        assert_eq!(slots.counters.evicted.load(Ordering::Relaxed), 1);
        drop(a);
    }

    #[tokio::test]
    async fn idle_connections_hear_of_a_rise_and_time_out_sooner() {
        let slots = Slots::new(10, Arc::default());
        let idle = Duration::from_secs(30);
        let first = slots.try_take().unwrap();
        let h = first.handle();
        let waiter = tokio::spawn(async move {
            let t0 = tokio::time::Instant::now();
            loop {
                match h.wait(idle).await {
                    Wake::TimedOut => {
                        h.timed_out(idle);
                        return t0.elapsed();
                    }
                    Wake::Rose => continue,
                    Wake::Asked => panic!("not asked"),
                }
            }
        });
        tokio::task::yield_now().await;
        // Nine more: 100 % in use, the floor applies to the first one too.
        let more: Vec<_> = (0..9).map(|_| slots.try_take().unwrap()).collect();
        let waited = waiter.await.unwrap();
        assert!(waited < Duration::from_secs(1), "{waited:?}");
        assert_eq!(slots.counters.idle_pressure.load(Ordering::Relaxed), 1);
        drop((first, more));
        assert_eq!(slots.used(), 0);
        assert_eq!(slots.idle_now(idle), idle);
    }
}
