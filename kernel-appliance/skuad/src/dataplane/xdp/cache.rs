//! The XDP programs' cached answers: which of the resolver's answers the programs send
//! themselves, and when they stop.
//!
//! One thread per XDP plane (`xdp-cache`) is the only writer of the programs' cache maps
//! (`skua_cache_index`, `skua_cache_slots`, see `bpf/skua_xdp_abi.h`):
//! - **Promotion.** An AF_XDP worker proposes a question it answered from the cache twice
//!   within ten seconds ([`skua_xdp::worker::Admission`]). The thread looks the answer up
//!   without counting a hit ([`skua_resolver::cache::Cache::peek`]), compiles a recipe and
//!   proves it against the engine in force ([`skua_xdp::cached::compile`]), writes it into
//!   a free slot of every program, then points the key at it. The first push after start
//!   or an engine swap also runs one query through the program and the engine path and
//!   requires the same reply frame, TTLs included (the clocks agree), before
//!   `SKUA_F_CACHE` is set.
//! - **Expiry.** The program itself stops at the recipe's `valid_until` (the answer's expiry,
//!   or its prefetch point, so the first query from then on reaches the engine and asks for
//!   the refresh). Each second the thread removes what is past it, what the cache no longer
//!   holds (evicted, flushed by the forwarder) and what changed there (a new answer: the
//!   next hits propose it again), marks the rest referenced in the cache (so it is not
//!   evicted as unused) and adds the programs' `answered_cached` to the cache's hits.
//! - **Flushes and loads** go through [`CacheMirror::forget_all`]: every key is removed
//!   from the programs before the cache is touched, and nothing is pushed until it is done.
//!   Engine swaps and resolver changes forget everything too; hot names come back within
//!   two hits.
//! - **Slots rest** two seconds after their key was removed before they are rewritten: an
//!   XDP run that looked the key up just before may still read the slot (microseconds).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use skua_resolver::cache::Key;
use skua_xdp::abi::{self, AnswerKey, Stat};
use skua_xdp::answers::key as program_key;
use skua_xdp::cached::{Clients, Skip, compile};

use super::Attached;
use crate::base::clock;
use crate::base::log;
use crate::base::resolving::CacheMirror;
use crate::base::serving::Serving;

/// How long a removed key's slot rests before it is rewritten.
const REST: Duration = Duration::from_secs(2);
/// How long a question the program cannot answer is not looked at again.
const REJECT_SECS: u32 = 10;

/// Counters of the publisher, for the summary and metrics.
#[derive(Debug, Default)]
pub struct PublisherStats {
    /// Candidates proposed by the workers.
    pub proposed: AtomicU64,
    /// Candidates lost because the queue to the thread was full.
    pub dropped: AtomicU64,
    /// Answers pushed into the programs.
    pub pushed: AtomicU64,
    /// Candidates not pushed (too long, not plain, expiring, not reproducible).
    pub rejected: AtomicU64,
    /// Candidates not pushed because every slot was taken.
    pub full: AtomicU64,
    /// Answers in the programs now.
    pub entries: AtomicU64,
}

struct Pushed {
    slot: u32,
    name: Vec<u8>,
    qtype: u16,
    /// The recipe's valid_until, and what it was compiled from (to notice a new answer).
    until: u32,
    expires: u32,
    digest: u64,
}

struct State {
    free: Vec<u32>,
    resting: VecDeque<(u32, Instant)>,
    pushed: HashMap<AnswerKey, Pushed>,
    rejected: HashMap<AnswerKey, u32>,
    /// The engine generation the clients and the self-test are for.
    generation: u64,
    clients: Option<Clients>,
    /// `SKUA_F_CACHE` is on (a push passed the self-test since the last forget).
    live: bool,
    /// The self-test failed: nothing is pushed any more.
    broken: bool,
    /// The programs' answered_cached total at the last tick.
    credited: u64,
}

/// The publisher of one XDP plane.
pub struct Publisher {
    state: Mutex<State>,
    programs: Arc<Mutex<Vec<Attached>>>,
    serving: Arc<Serving>,
    port: u16,
    /// Counters.
    pub stats: PublisherStats,
}

fn digest(r: &skua_resolver::cache::Rendered) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in r.body.tail.iter().chain(&r.body.ttls) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    h ^ u64::from(r.flags)
}

/// The lower-cased question name and type of a query (class IN, uncompressed name).
fn question(q: &[u8]) -> Option<(Vec<u8>, u16)> {
    let (name, qtype, qclass) = skua_xdp::answers::question(q)?;
    (qclass == 1).then(|| (name.to_ascii_lowercase(), qtype))
}

impl Publisher {
    /// A publisher for `programs`, each loaded with room for `capacity` cached answers.
    pub(super) fn new(
        programs: Arc<Mutex<Vec<Attached>>>,
        serving: Arc<Serving>,
        port: u16,
        capacity: u32,
    ) -> Self {
        Publisher {
            state: Mutex::new(State {
                free: (0..abi::cache_slots(capacity)).rev().collect(),
                resting: VecDeque::new(),
                pushed: HashMap::new(),
                rejected: HashMap::new(),
                generation: u64::MAX,
                clients: None,
                live: false,
                broken: false,
                credited: 0,
            }),
            programs,
            serving,
            port,
            stats: PublisherStats::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn programs(&self) -> MutexGuard<'_, Vec<Attached>> {
        self.programs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs until `stop`: candidates from `rx`, a tick every second.
    pub(super) fn run(&self, rx: &Receiver<Vec<u8>>, stop: &AtomicBool) {
        let mut next_tick = Instant::now() + Duration::from_secs(1);
        while !stop.load(Ordering::Relaxed) {
            let wait = next_tick
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200));
            match rx.recv_timeout(wait) {
                Ok(q) => self.propose(&q),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + Duration::from_secs(1);
                self.tick();
            }
        }
    }

    fn propose(&self, query: &[u8]) {
        self.stats.proposed.fetch_add(1, Ordering::Relaxed);
        let Some((name, qtype)) = question(query) else {
            return;
        };
        let Some(key) = program_key(&name, qtype) else {
            return;
        };
        let mut st = self.state();
        let now = clock::now_secs();
        if st.broken
            || st.pushed.contains_key(&key)
            || st.rejected.get(&key).is_some_and(|until| *until > now)
        {
            return;
        }
        let Some(resolver) = self.serving.resolver() else {
            return;
        };
        let engine = self.serving.engine();
        let generation = self.serving.generation();
        if st.generation != generation || st.clients.is_none() {
            st.generation = generation;
            st.clients = Some(Clients::of(&engine));
        }
        let Some(clients) = st.clients else { return };
        let compiled = resolver
            .cache
            .peek(&Key::new(&name, qtype, 1), now, |r, until| {
                compile(
                    &engine,
                    &clients,
                    &name,
                    qtype,
                    &r.as_cached(None),
                    until,
                    now,
                )
                .map(|v| (v, until, r.expires, digest(r)))
            });
        let (value, until, expires, digest) = match compiled {
            None => return,
            Some(Ok(v)) => v,
            Some(Err(skip)) => {
                self.stats.rejected.fetch_add(1, Ordering::Relaxed);
                let hold = if skip == Skip::Expiring {
                    2
                } else {
                    REJECT_SECS
                };
                st.rejected.insert(key, now + hold);
                return;
            }
        };
        self.release_rested(&mut st);
        let Some(slot) = st.free.pop() else {
            self.stats.full.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut programs = self.programs();
        let failed = programs.iter_mut().find_map(|a| {
            a.program
                .set_cache_slot(slot, &value)
                .and_then(|()| a.program.set_cache_ref(&key, slot))
                .err()
                .map(|e| format!("{}: {}", a.ifname, log::chain(&e)))
        });
        if let Some(e) = failed {
            log::error(format_args!("xdp: pushing a cached answer: {e}"));
            for a in programs.iter_mut() {
                let _ = a.program.remove_cache_ref(&key);
            }
            st.resting.push_back((slot, Instant::now() + REST));
            return;
        }
        st.pushed.insert(
            key,
            Pushed {
                slot,
                name: name.clone(),
                qtype,
                until,
                expires,
                digest,
            },
        );
        self.stats.pushed.fetch_add(1, Ordering::Relaxed);
        self.stats
            .entries
            .store(st.pushed.len() as u64, Ordering::Relaxed);
        if !st.live {
            match self.self_test(
                &mut programs,
                &engine,
                &resolver.cache,
                &clients,
                &name,
                qtype,
            ) {
                // Nothing could be tried (no address of the client's family yet, or a
                // second boundary in every try): stays off, tried again at the next push.
                Ok(false) => {}
                Ok(true) => {
                    // Not where the path watch found the veth peer dropping XDP_TX answers.
                    for a in programs.iter_mut().filter(|a| !a.tx_lost) {
                        a.config.flags |= abi::F_CACHE;
                        if let Err(e) = a.program.set_config(a.config) {
                            log::error(format_args!("xdp: {}: {}", a.ifname, log::chain(&e)));
                        }
                    }
                    st.live = true;
                    log::info(format_args!(
                        "xdp: cached answers in the program on (self-test passed)"
                    ));
                }
                Err(e) => {
                    log::warn(format_args!(
                        "xdp: cached answers in the program off: {e}; the AF_XDP workers answer cache hits"
                    ));
                    drop(programs);
                    st.broken = true;
                    self.forget(&mut st);
                }
            }
        }
    }

    /// One query for the pushed answer through the program (with `SKUA_F_CACHE` set for
    /// the test) and through the engine path, at the same second: the same reply frame.
    /// `Ok(true)` when at least one program was tried and every program tried passed;
    /// `Ok(false)` when none could be tried.
    fn self_test(
        &self,
        programs: &mut [Attached],
        engine: &skua_engine::Engine,
        cache: &crate::base::resolving::SharedCache,
        clients: &Clients,
        name: &[u8],
        qtype: u16,
    ) -> Result<bool, String> {
        let mut tried = false;
        if clients.with_rd().is_none() {
            return Err("no client may get cached answers".into());
        }
        for a in programs.iter_mut() {
            // One of the program's addresses, with a client of its family.
            let Some((server, client)) = a
                .probes(self.port)
                .find_map(|s| clients.with_rd_of(s.is_ipv6()).map(|c| (s, c)))
            else {
                continue;
            };
            let (frame, len) = super::probe_frame(client, server, name, qtype)?;
            let test_cfg = abi::XdpConfig {
                flags: a.config.flags | abi::F_CACHE,
                ..a.config
            };
            a.program.set_config(test_cfg).map_err(|e| log::chain(&e))?;
            // A second boundary between the two runs changes the TTLs: try again once.
            let mut result = None;
            for _ in 0..2 {
                let before = clock::now_secs();
                let run = a.program.test_run_output(&frame[..len]);
                let mut reference = frame;
                let mut scratch = [0u8; 1024];
                let door = skua_serve::Door {
                    engine,
                    cache: Some(cache),
                    zones: &skua_serve::NoZones,
                };
                let verdict = skua_fastpath::handle_frame_with(
                    &door,
                    before,
                    0,
                    &mut reference,
                    len,
                    &mut scratch,
                    &mut |_, _| {},
                );
                if clock::now_secs() != before {
                    continue;
                }
                result = Some(match (run, verdict) {
                    (Ok((action, out)), skua_fastpath::Verdict::Reply { len: rlen, .. })
                        if (action == skua_xdp::bpf::XDP_TX
                            || action == skua_xdp::bpf::XDP_REDIRECT)
                            && out == reference[..rlen] =>
                    {
                        Ok(())
                    }
                    (Ok((action, _)), v) => Err(format!(
                        "the program's cached reply differs from the engine's (action {action}, engine {v:?})"
                    )),
                    (Err(e), _) => Err(log::chain(&e)),
                });
                break;
            }
            a.program.set_config(a.config).map_err(|e| log::chain(&e))?;
            if let Some(r) = result {
                r.map_err(|e| format!("{}: {e}", a.ifname))?;
                tried = true;
            }
        }
        Ok(tried)
    }

    /// Removes `key` from every program and rests its slot.
    fn drop_key(&self, st: &mut State, key: &AnswerKey) {
        let Some(p) = st.pushed.remove(key) else {
            return;
        };
        for a in self.programs().iter_mut() {
            if let Err(e) = a.program.remove_cache_ref(key) {
                log::error(format_args!(
                    "xdp: {}: removing a cached answer: {}",
                    a.ifname,
                    log::chain(&e)
                ));
            }
        }
        st.resting.push_back((p.slot, Instant::now() + REST));
        self.stats
            .entries
            .store(st.pushed.len() as u64, Ordering::Relaxed);
    }

    fn release_rested(&self, st: &mut State) {
        let now = Instant::now();
        while let Some(&(slot, at)) = st.resting.front() {
            if at > now {
                break;
            }
            st.resting.pop_front();
            st.free.push(slot);
        }
    }

    /// Removes every key and switches cached answers off until the next self-test.
    fn forget(&self, st: &mut State) {
        let keys: Vec<AnswerKey> = st.pushed.keys().copied().collect();
        for k in &keys {
            self.drop_key(st, k);
        }
        st.rejected.clear();
        st.live = false;
        st.clients = None;
        for a in self.programs().iter_mut() {
            if a.config.flags & abi::F_CACHE != 0 {
                a.config.flags &= !abi::F_CACHE;
                if let Err(e) = a.program.set_config(a.config) {
                    log::error(format_args!("xdp: {}: {}", a.ifname, log::chain(&e)));
                }
            }
        }
    }

    /// Forgets everything (an engine swap, a resolver change).
    pub(super) fn forget_now(&self) {
        let mut st = self.state();
        self.forget(&mut st);
    }

    /// Once a second: drops what expired, went or changed in the cache; keeps the rest
    /// warm there; credits the programs' answers to the cache's hits.
    fn tick(&self) {
        let mut st = self.state();
        self.release_rested(&mut st);
        let now = clock::now_secs();
        st.rejected.retain(|_, until| *until > now);
        let Some(resolver) = self.serving.resolver() else {
            if !st.pushed.is_empty() {
                self.forget(&mut st);
            }
            return;
        };
        let mut gone = Vec::new();
        for (k, p) in &st.pushed {
            let key = Key::new(&p.name, p.qtype, 1);
            let same = p.until > now
                && resolver
                    .cache
                    .peek(&key, now, |r, until| {
                        until == p.until && r.expires == p.expires && digest(r) == p.digest
                    })
                    .unwrap_or(false);
            if same {
                resolver.cache.touch(&key);
            } else {
                gone.push(*k);
            }
        }
        for k in &gone {
            self.drop_key(&mut st, k);
        }
        let answered: u64 = self
            .programs()
            .iter()
            .filter_map(|a| a.program.stats().ok())
            .map(|s| s[Stat::AnsweredCached.index()])
            .sum();
        let delta = answered.saturating_sub(st.credited);
        st.credited = answered;
        if delta > 0 {
            resolver
                .cache
                .stats
                .hits
                .fetch_add(delta, Ordering::Relaxed);
        }
    }
}

impl CacheMirror for Publisher {
    fn forget_all(&self, then: &mut dyn FnMut()) {
        let mut st = self.state();
        self.forget(&mut st);
        then();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_of_queries() {
        let q = skua_xdp::answers::query(1, 0x0100, b"\x03WwW\x07example\x00", 28, None);
        assert_eq!(question(&q), Some((b"\x03www\x07example\x00".to_vec(), 28)));
        let mut ch = q.clone();
        let n = ch.len();
        ch[n - 1] = 3;
        assert_eq!(question(&ch), None, "class CH");
        assert_eq!(question(&q[..15]), None);
    }
}
