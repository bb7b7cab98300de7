//! What a query and its outcome are, shared by the engine and its general path.
//!
//! [`Request`], [`Outcome`], [`ReplyInfo`], [`DropReason`] and [`EngineConfig`] are the
//! engine's vocabulary with every dataplane; [`Tables`] is what the general path
//! (`general.rs`) needs of the compiled answer tables. Both sit below `engine.rs` so that
//! the engine uses the general path and the general path uses only this interface, never
//! the engine itself (no import circle between the two).

use alloc::string::String;
use core::net::IpAddr;

use crate::acl::AclAction;
use crate::rrl::Limit;
use crate::store::Answer;
use crate::wire::Query;
/// How the query arrived; decides the size limit (RFC 1035 §4.2.1, RFC 7766 §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP (or an AF_XDP / virtio frame carrying UDP): limited by the client's EDNS size.
    Udp,
    /// TCP: up to 65535 bytes.
    Tcp,
}

/// Who asked, how, and when.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// Client address (after any proxy unwrapping by the caller).
    pub src: IpAddr,
    /// Transport.
    pub transport: Transport,
    /// Whole seconds of a monotonic clock (any origin, the same for every dataplane sharing
    /// an engine): the time response rate limiting counts in.
    pub now: u32,
}

/// Why no reply is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// `access-control: ... deny`.
    Acl,
    /// Shorter than a header, or a response (QR=1): nothing safe to answer.
    Malformed,
    /// A `deny`/`inform_deny`/`always_deny` local zone.
    Zone,
    /// `deny_non_local` and the answer is not local data.
    NonLocal,
    /// The caller's buffer is too small for even a minimal reply.
    Buffer,
    /// Response rate limiting ([`crate::rrl`]) dropped the response.
    RateLimited,
}

/// Facts about a reply, for counters and logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyInfo {
    /// RCODE (extended: BADVERS is 16).
    pub rcode: u16,
    /// Answered by the precompiled hot path.
    pub hot: bool,
    /// TC was set.
    pub truncated: bool,
    /// The zone asks for the client to be logged (inform types).
    pub inform: bool,
    /// The question's type (0 when the query had no readable question).
    pub qtype: u16,
    /// Rate limiting slipped this response: the reply was cut to header, question and OPT
    /// with TC=1, or (an error response) sent as it is instead of dropped.
    pub slipped: bool,
    /// With `log-only`: what rate limiting would have done (the reply is sent anyway).
    pub rrl_would: Option<Limit>,
    /// Answered from the resolver's cache ([`AnswerCache`]).
    pub cached: bool,
    /// The cache asks for this question to be resolved again (a prefetch in the last 10 %
    /// of the TTL, or a stale answer's refresh): hand it to the resolver as well.
    pub refresh: bool,
}

/// What the caller must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Outcome {
    /// Send the first `len` bytes of the output buffer.
    Reply {
        /// Length of the reply in the output buffer.
        len: usize,
        /// Facts about it.
        info: ReplyInfo,
    },
    /// Not local data and not in the cache: hand the query to the resolver, which answers
    /// it later (only when [`EngineConfig::resolve`] is set).
    Resolve,
    /// Send nothing.
    Drop {
        /// Why.
        reason: DropReason,
        /// The zone asks for the client to be logged (inform_deny).
        inform: bool,
    },
}

/// Server-wide answering options (unbound.conf `server:` names in brackets).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Answer to CHAOS `id.server`/`hostname.bind` [`identity`]; `None` = hidden
    /// [`hide-identity: yes`].
    pub identity: Option<String>,
    /// Answer to CHAOS `version.server`/`version.bind` [`version`]; `None` = hidden.
    pub version: Option<String>,
    /// Set RA in replies (a resolver does; Unbound always sets it).
    pub recursion_available: bool,
    /// UDP payload size we advertise in our OPT record [`edns-buffer-size`].
    pub edns_buffer_size: u16,
    /// Largest UDP reply we send [`max-udp-size`].
    pub max_udp_size: u16,
    /// Names outside local data are resolved (a `forward-zone:` or `stub-zone:` is
    /// configured): the engine consults the cache and answers [`Outcome::Resolve`] on a
    /// miss. Off, they get REFUSED.
    pub resolve: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            identity: None,
            version: None,
            recursion_available: true,
            // Unbound 1.17 defaults: advertise 1232 (DNS flag day 2020), send up to 4096.
            edns_buffer_size: 1232,
            max_udp_size: 4096,
            resolve: false,
        }
    }
}

/// Where an answer came from.
#[derive(Clone, Copy)]
pub(crate) enum Found<'a> {
    Answer(Answer<'a>),
    Drop { inform: bool },
    NotLocal,
}

/// The answer tables as the general path sees them ([`crate::Engine`] implements it).
pub(crate) trait Tables {
    /// Server options in force.
    fn config(&self) -> &EngineConfig;
    /// The local or authoritative answer for a lower-cased wire name and type.
    fn find(&self, lower: &[u8], qtype: u16) -> Found<'_>;
    /// The type an ANY query is answered with (RFC 8482), if the name has data.
    fn first_positive_type(&self, lower: &[u8]) -> Option<u16>;
    /// Copies a compiled answer behind the query's header and question.
    fn emit(
        &self,
        q: &Query<'_>,
        acl: AclAction,
        a: &Answer<'_>,
        transport: Transport,
        out: &mut [u8],
        hot: bool,
    ) -> Outcome;
}

/// An answer held by the resolver's cache, as the engine needs it to build a reply: what
/// follows the question, rendered for this query name's length (compression pointers
/// into the question at offset 12 hold for any letter case), with each record's TTL
/// offset and expiry.
#[derive(Clone, Copy, Debug)]
pub struct Cached<'a> {
    /// Header flags: QR, RA, RCODE (the engine adds RD and CD from the query).
    pub flags: u16,
    /// ANCOUNT, NSCOUNT, ARCOUNT, big-endian.
    pub counts: &'a [u8],
    /// RRset boundaries for truncation: (end offset u16 LE, counts so far) per RRset.
    pub bounds: &'a [u8],
    /// The records.
    pub tail: &'a [u8],
    /// Per record: TTL offset in `tail` (u16 LE) and expiry (u32 LE, seconds of the
    /// clock of [`Request::now`]).
    pub ttls: &'a [u8],
    /// Write this TTL in every record (a stale answer, RFC 8767 §4) instead of expiry
    /// minus now.
    pub fixed_ttl: Option<u32>,
    /// Extended DNS Error to attach when the query has EDNS (RFC 8914).
    pub ede: Option<u16>,
    /// Resolve the question again (prefetch, stale refresh).
    pub refresh: bool,
    /// How rate limiting classes the answer.
    pub class: crate::rrl::ResponseClass,
}

/// The cache the engine consults for names outside local data (the resolver's; the
/// engine knows it only through this interface).
pub trait AnswerCache {
    /// Calls `f` with what the cache can send at `now` for a lower-cased name (with its
    /// [`crate::store::name_hash`]), type and class; `None` when it has nothing to send
    /// now.
    fn lookup<R>(
        &self,
        lower: &[u8],
        hash: u64,
        qtype: u16,
        qclass: u16,
        now: u32,
        f: impl FnOnce(&Cached<'_>) -> R,
    ) -> Option<R>;
}

/// No cache: every miss is a miss.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCache;

impl AnswerCache for NoCache {
    fn lookup<R>(
        &self,
        _: &[u8],
        _: u64,
        _: u16,
        _: u16,
        _: u32,
        _: impl FnOnce(&Cached<'_>) -> R,
    ) -> Option<R> {
        None
    }
}

/// Writes each record's TTL into `tail` (a reply's records after the question): its
/// RRset's expiry minus `now`, or `fixed` for every record (a stale answer). `ttls` holds
/// (offset u16 LE, expiry u32 LE) per record; offsets past `tail` (a truncated reply) are
/// skipped.
pub fn patch_ttls(tail: &mut [u8], ttls: &[u8], now: u32, fixed: Option<u32>) {
    for t in ttls.chunks_exact(6) {
        let off = usize::from(u16::from_le_bytes([t[0], t[1]]));
        let Some(field) = tail.get_mut(off..off + 4) else {
            continue;
        };
        let ttl = match fixed {
            Some(f) => f,
            None => u32::from_le_bytes([t[2], t[3], t[4], t[5]]).saturating_sub(now),
        };
        field.copy_from_slice(&ttl.to_be_bytes());
    }
}
