//! The forwarder's counters.

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
