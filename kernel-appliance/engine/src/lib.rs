//! # skua-engine: the sans-IO DNS engine every Skua dataplane calls
//!
//! One engine answers for the kernel-socket daemon, the AF_XDP workers and the unikernel's
//! virtio-net loop. It owns **no sockets, no clock and no RNG**: the caller hands it the
//! client address, the query bytes and a buffer to write the answer into, and gets back an
//! [`Outcome`] (reply of `n` bytes, or drop). The same call therefore serves a UDP socket, an
//! AF_XDP UMEM frame and a virtio buffer.
//!
//! ```text
//!   caller (socket / XSK / virtio)          skua-engine
//!   ─────────────────────────────          ───────────────────────────────────────────────
//!   src, query bytes, &mut out  ──────▶    acl ─▶ wire::Query::parse (zero-copy)
//!                                               ├─ hot path: store lookup ─▶ memcpy of a
//!                                               │  response precompiled at load + patches
//!                                               └─ general path (hickory-proto): FORMERR,
//!                                                  NOTIMP, ANY (RFC 8482), CHAOS, ...
//!   Outcome::Reply(len) / Drop  ◀──────
//! ```
//!
//! Layers, top to bottom: [`engine`] (policy: ACL, local-zone semantics, which path),
//! [`store`] (answers compiled at load time), [`localzone`] (Unbound's zone types),
//! [`acl`] (most-specific netblock match), [`wire`] (zero-copy query view; no allocation;
//! and the one reader of whole messages the resolver and the transfers share),
//! [`name`]/[`rr`]/[`text`]/[`zonefile`] (load-time data: names, records, presentation format,
//! RFC 1035 master files).
//!
//! [`rrl`] is BIND 9-style response rate limiting, applied by [`Engine::handle_query`] to
//! every UDP reply when the engine holds a table, so every dataplane limits alike.
//!
//! What it does **not** do (yet): forwarding, caching, recursion and DNSSEC validation
//! (queries outside served zones are answered REFUSED), zone transfers.
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
