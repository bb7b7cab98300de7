//! The forwarder's counters, and the defence that the count of unwanted replies triggers
//! (`unwanted-reply-threshold`).

use super::Forwarder;
use crate::cache::{MsgShard, SetShard, ShardLock};

/// Counters for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForwardStats {
    /// Upstream queries sent.
    pub queries: u64,
    /// Replies that matched nothing we asked (wrong ID, question, address).
    pub unwanted: u64,
    /// Questions answered SERVFAIL.
    pub servfail: u64,
    /// Retries over TCP after TC=1.
    pub tcp_retries: u64,
    /// Cache flushes after `unwanted-reply-threshold`.
    pub defences: u64,
    /// Questions that joined one already in flight.
    pub coalesced: u64,
    /// Addresses in hosts' answers left out as upstreams
    /// ([`upstream_addr`](super::upstream_addr)), each time an answer holds them.
    pub host_addrs_refused: u64,
}

impl<C: Clone, M: ShardLock<MsgShard>, S: ShardLock<SetShard>> Forwarder<C, M, S> {
    pub(super) fn unwanted(&mut self) {
        self.stats.unwanted += 1;
        self.unwanted_run += 1;
        let t = self.config.unwanted_reply_threshold;
        if t != 0 && self.unwanted_run >= t {
            // Unbound's defence: a flood of mismatched replies may be a spoofing attempt
            // that succeeded somewhere; drop what we cached.
            self.unwanted_run = 0;
            self.stats.defences += 1;
            self.cache.flush(crate::cache::Flush::All);
        }
    }
}
