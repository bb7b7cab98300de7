//! CNAME/DNAME chains that leave the zone asked: the target is resolved as a question of
//! its own zone, waited on by the first (a restart), within the first question's budget and
//! at most [`MAX_RESTARTS`] times.

use alloc::vec::Vec;

use super::{Begin, Done, Entropy, Forwarder, Question, Waiter, secs};
use crate::cache::{Kind, MsgShard, SetShard, ShardLock};
use crate::render::Section;
use crate::rrset::RrSet;
use crate::scrub;

/// Restarts of one client question at a CNAME/DNAME target resolved on its own (a new
/// question for the target, through the zone that holds it) before it fails: Unbound's
/// `max-query-restarts` default (11, `util/config_file.c`; `MAX_RESTART_COUNT` was 8 in
/// older releases).
pub const MAX_RESTARTS: u32 = 11;

impl<C: Clone, M: ShardLock<MsgShard>, S: ShardLock<SetShard>> Forwarder<C, M, S> {
    /// The chain left `q`'s zone at `target`: resolve the target (through its own zone),
    /// and finish `q` when it is done.
    pub(super) fn follow(
        &mut self,
        q: &Question,
        kept: Vec<(RrSet, u32)>,
        target: Vec<u8>,
        now: u64,
        rng: &mut impl Entropy,
    ) {
        let Some(f) = self.flights.get_mut(q) else {
            return;
        };
        f.chain.extend(kept);
        // Each target resolved on its own is a restart of the client's question, bounded
        // as Unbound's are (`max-query-restarts`): an upstream that answers `aK CNAME
        // aK+1` for ever costs MAX_RESTARTS + 1 questions, not one every round trip.
        let restarts = f.restarts + 1;
        let deadline = f.deadline_ms;
        if f.chain.len() > scrub::MAX_CHAIN * 2 || restarts > MAX_RESTARTS {
            return self.fail(q, now);
        }
        let next = Question {
            name: target,
            qtype: q.qtype,
            qclass: q.qclass,
        };
        if next == *q || self.chain_would_loop_or_overrun(&next, q) {
            // A loop through zones (a CNAME b in one, b CNAME a in another), or a chain
            // in flight already longer than any answer may be: SERVFAIL now rather than
            // waiting on each other until the budget runs out.
            return self.fail(q, now);
        }
        if self.zone_for_question(&next.name, next.qtype).is_none() {
            // Nobody to ask about the target: the chain as far as it goes (the client's
            // stub asks the target itself), as an answer that is not cached.
            let sets = self.flights[q]
                .chain
                .iter()
                .map(|(s, e)| (s.clone(), Section::Answer, *e))
                .collect();
            return self.finish(
                q,
                Done {
                    rcode: 0,
                    kind: Kind::Positive,
                    sets,
                    ede: None,
                    cache: false,
                    restarts: 0,
                },
                now,
            );
        }
        // Cached already (and not in flight: a question in flight is joined)?
        let now_s = secs(now);
        if !self.flights.contains_key(&next)
            && let Some(done) = self.cached_sets(&next, now_s)
        {
            return self.finish_chain(q, done, now);
        }
        // The chain's waiter goes in with the question, so that a target that fails at
        // once (no address to ask) fails `q` too. A target in flight already is joined,
        // within the bound on its waiters; a new one gets `q`'s restarts and deadline.
        match self.begin(
            next.clone(),
            Some(Waiter::Chain(q.clone())),
            Some((restarts, deadline)),
            now,
            rng,
        ) {
            Begin::Pending => {
                if let Some(f) = self.flights.get_mut(q) {
                    f.target = Some(next);
                }
            }
            Begin::NoZone(_) | Begin::Busy(_) => self.fail(q, now),
        }
    }

    /// Whether waiting on `next` would have `q` wait on itself (`next`'s chain, through
    /// the targets in flight, leads back to `q`), or on a chain longer than the restarts
    /// an answer may take.
    fn chain_would_loop_or_overrun(&self, next: &Question, q: &Question) -> bool {
        let mut at = next;
        for _ in 0..=MAX_RESTARTS {
            if at == q {
                return true;
            }
            match self.flights.get(at).and_then(|f| f.target.as_ref()) {
                Some(t) => at = t,
                None => return false,
            }
        }
        true
    }

    /// `q` ended (answered, failed or dropped): it no longer waits on its chain target,
    /// and a target started for a chain that nobody waits on any more ends too (its
    /// queries cancelled), and so on down the chain. A question whose client got its
    /// SERVFAIL leaves nothing asking upstreams on its behalf.
    pub(super) fn release_target(&mut self, q: &Question, target: Option<Question>) {
        let mut child = q.clone();
        let mut target = target;
        while let Some(t) = target.take() {
            let Some(f) = self.flights.get_mut(&t) else {
                return;
            };
            let before = f.waiters.len();
            f.waiters
                .retain(|w| !matches!(w, Waiter::Chain(p) if *p == child));
            if f.waiters.len() == before || !f.waiters.is_empty() || !f.for_chain {
                return;
            }
            self.drop_flight_queries(&t, None);
            let Some(f) = self.flights.remove(&t) else {
                return;
            };
            if f.parked {
                self.unindex_parked(f.zone, &t);
            }
            target = f.target;
            child = t;
        }
    }

    /// The RRsets of a cached positive answer for `q` from the RRset store, if all there.
    fn cached_sets(&self, q: &Question, now_s: u32) -> Option<Done> {
        let (set, exp) = self.cache.rrset(&q.name, q.qtype, q.qclass, now_s)?;
        Some(Done {
            rcode: 0,
            kind: Kind::Positive,
            sets: alloc::vec![(set, Section::Answer, exp)],
            ede: None,
            cache: true,
            restarts: 0,
        })
    }

    /// Finishes `q` (waiting on a chain target) with the target's result.
    pub(super) fn finish_chain(&mut self, q: &Question, target: Done, now: u64) {
        let Some(f) = self.flights.get(q) else {
            return;
        };
        // One restart more than the target's answer took: an answer made of chains in
        // flight that joined one another is bounded as one question's own restarts are.
        let restarts = target.restarts + 1;
        if restarts > MAX_RESTARTS {
            return self.fail(q, now);
        }
        let cache_it = target.cache && !self.config.zones[f.zone].no_cache;
        let mut sets: Vec<(RrSet, Section, u32)> = f
            .chain
            .iter()
            .map(|(s, e)| (s.clone(), Section::Answer, *e))
            .collect();
        // The target's additional data (an NS answer's addresses) belongs to its own
        // question only.
        sets.extend(
            target
                .sets
                .into_iter()
                .filter(|(_, sec, _)| *sec != Section::Additional),
        );
        self.finish(
            q,
            Done {
                rcode: target.rcode,
                kind: if target.kind == Kind::Positive {
                    Kind::Positive
                } else {
                    target.kind
                },
                sets,
                ede: target.ede,
                cache: cache_it,
                restarts,
            },
            now,
        );
    }
}
