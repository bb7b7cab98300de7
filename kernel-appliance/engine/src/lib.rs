//! # skua-engine: the sans-IO DNS engine every Skua dataplane calls
//!
//! One engine answers for the kernel-socket daemon, the AF_XDP workers and, next, the
//! unikernel's virtio-net loop. It owns **no sockets, no clock and no RNG**: the caller hands
//! it a [`Request`] (client address, transport, the time in whole seconds), the query bytes
//! and a buffer to write the answer into, and gets back an [`Outcome`]: a reply of `len`
//! bytes, [`Outcome::Resolve`] (hand the query to the resolver), or drop. The same call
//! therefore serves a UDP socket, an AF_XDP UMEM frame and a virtio buffer.
//!
//! ```text
//!   caller (socket / XSK / virtio)          skua-engine
//!   ─────────────────────────────          ───────────────────────────────────────────────
//!   src, query bytes, &mut out  ──────▶    acl ─▶ wire::Query::parse (zero-copy)
//!                                               ├─ hot path: store lookup ─▶ memcpy of a
//!                                               │  response precompiled at load + patches
//!                                               ├─ not local data: AnswerCache (the
//!                                               │  resolver's) ─▶ copy, TTLs counted down
//!                                               └─ general path (hickory-proto): FORMERR,
//!                                                  NOTIMP, ANY (RFC 8482), CHAOS, ...
//!   Reply { len } / Resolve / Drop ◀──
//! ```
//!
//! Names outside local data: with [`engine::EngineConfig::resolve`] (a `forward-zone:` or
//! `stub-zone:` is configured) and a client that may have them resolved (RD=1 under
//! `allow`; `allow_snoop`, `allow_setrd`), [`Engine::handle_query_with`] answers from the
//! resolver's cache through [`AnswerCache`] (TTLs counted down, stale TTL and Extended DNS
//! Error as the cache gives them) and says [`Outcome::Resolve`] on a miss. The caller hands
//! the query to skua-resolver's forwarder and, when it is done, answers each client that
//! waited with [`Engine::answer_cached`]. Otherwise they are answered REFUSED (dropped for
//! `deny_non_local`). The engine knows the cache only through [`AnswerCache`]: it does not
//! depend on skua-resolver, which depends on it.
//!
//! Layers, top to bottom: [`engine`] (policy: ACL, local-zone semantics, which path),
//! [`store`] (answers compiled at load time), [`localzone`] (Unbound's zone types),
//! [`acl`] (most-specific netblock match), [`wire`] (zero-copy query view; no allocation;
//! and the one reader of whole messages the resolver and the transfers share),
//! [`name`]/[`rr`]/[`text`]/[`zonefile`] (load-time data: names, records, presentation format,
//! RFC 1035 master files).
//!
//! [`rrl`] is BIND 9-style response rate limiting, applied by [`Engine::handle_query`] to
//! every UDP reply when the engine holds a table, so every dataplane limits alike. Beside
//! the engine, for every dataplane alike: [`doh`] (an RFC 8484 request as DNS sees it),
//! [`padding`] (RFC 7830 padding of encrypted responses) and [`stats`] (the query counters).
//!
//! What it does **not** do: send, wait for or cache anything itself (upstream queries and
//! the cache are skua-resolver's); recursion from the root and DNSSEC validation (not built
//! yet); zone transfers, NOTIFY and TSIG (skua-xfr's, which skuad calls before the engine:
//! a NOTIFY or a transfer request that reaches the engine is answered REFUSED, as Unbound
//! does).
//!
//! Contract: no input from the network can make the engine panic; malformed queries are
//! answered FORMERR or dropped (see [`engine::Engine::handle_query`]). `#![forbid(unsafe_code)]`.

#![no_std]
#![forbid(unsafe_code)]
#![warn(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod acl;
pub mod doh;
pub mod engine;
mod exchange;
mod general;
pub mod localzone;
pub mod name;
pub mod padding;
pub mod rr;
pub mod rrl;
pub mod stats;
pub mod store;
#[doc(hidden)]
pub mod testing;
pub mod text;
pub mod wire;
pub mod zonefile;

pub use engine::{
    AnswerCache, Cached, Engine, EngineBuilder, NoCache, Outcome, Request, Transport,
};
pub use exchange::patch_ttls;
