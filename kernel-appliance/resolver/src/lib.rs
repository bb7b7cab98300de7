//! # skua-resolver: the sans-IO resolver core (the cache and the forwarding state machine)
//!
//! Beside the engine, for the names that are not local data. Like the engine it owns **no
//! socket, clock, thread or RNG**: the caller passes the time and random numbers in and
//! carries every message. The same core therefore serves the kernel-socket workers, the
//! AF_XDP workers and, later, recursion and the unikernel.
//!
//! ```text
//!   dataplane                         skua-engine            skua-resolver
//!   ─────────                         ───────────            ─────────────
//!   query ──────────────────────────▶ local data? ─ no ─▶   cache hit? ─ yes ─▶ reply
//!                                                            │ no
//!   upstream socket ◀── Transmit ◀─────────────────────────  forwarder: question in flight
//!   upstream reply ───────────────────────────────────────▶ match, scrub, cache
//!   reply to each waiting client ◀───────────────────────── (identical questions coalesced)
//! ```
//!
//! Modules: [`msg`] (reading upstream replies), [`rrset`] (RRsets and their rank),
//! [`render`] (cached answers as ready-to-copy bytes with TTL offsets), [`cache`] (the
//! sharded, size-bounded message and RRset stores), [`dump`] (what the cache holds for a
//! name, and a text dump of it that loads back).
//!
//! What it does **not** do (yet): recursion from the root, DNSSEC validation.
//!
//! Contract: no upstream reply can make it panic or put a record outside the bailiwick of
//! the zone it was asked in into the cache. `#![forbid(unsafe_code)]`.

#![no_std]
#![forbid(unsafe_code)]
#![warn(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod cache;
pub mod dump;
pub mod forward;
pub mod infra;
pub mod msg;
pub mod render;
pub mod rrset;
pub mod scrub;
