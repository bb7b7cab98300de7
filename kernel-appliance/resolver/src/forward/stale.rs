//! Stale answers (RFC 8767): for clients that waited `serve-expired-client-timeout`, and
//! for questions that failed while the cache holds an expired answer.

use alloc::sync::Arc;
use alloc::vec::Vec;

use super::{Forwarder, Question, Waiter, ede, secs};
use crate::cache::{Kind, MsgShard, Rendered, SetShard, ShardLock};

impl<C: Clone, M: ShardLock<MsgShard>, S: ShardLock<SetShard>> Forwarder<C, M, S> {
    /// The stale answer the cache may serve for `key` at `now_s` (RFC 8767 §4), as an
    /// answer for waiting clients: EDE 3 "Stale Answer".
    pub(super) fn stale_rendered(
        &self,
        key: &crate::cache::Key<'_>,
        now_s: u32,
    ) -> Option<Rendered> {
        self.cache.stale(key, now_s, |h| Rendered {
            flags: h.flags,
            kind: Kind::Positive,
            body: crate::render::Body {
                counts: h.counts.try_into().unwrap_or([0; 6]),
                bounds: h.bounds.to_vec(),
                tail: h.tail.to_vec(),
                ttls: h.ttls.to_vec(),
            },
            expires: 0,
            ttl: 0,
            zone: 0,
            ede: Some(ede::STALE_ANSWER),
        })
    }

    pub(super) fn stale_now(&mut self, q: &Question, now: u64) {
        let Some(f) = self.flights.get_mut(q) else {
            return;
        };
        f.stale_at = None;
        let now_s = secs(now);
        let stale = self.stale_rendered(&q.key(), now_s);
        let Some(r) = stale else {
            return;
        };
        let f = self.flights.get_mut(q).expect("present");
        let (mut clients, rest): (Vec<_>, Vec<_>) = f
            .waiters
            .drain(..)
            .partition(|w| matches!(w, Waiter::Client(_)));
        f.waiters = rest;
        let ttl = self.cache.config().serve_expired_reply_ttl;
        self.answer_waiters(q, &mut clients, Arc::new(r), Some(ttl), None, now);
    }
}
