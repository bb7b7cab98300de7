//! Differential conformance harness for skuad.
//!
//! Each suite starts a reference server (Unbound for unbound.conf local
//! zones and for forwarding to an NSD upstream, NSD for an authoritative
//! zone) and the subject (skuad, or a second reference instance when
//! `SKUA_SUBJECT=unbound|nsd|self`) inside a private network namespace with
//! only loopback, sends both the same generated, seeded query set, and
//! compares the answers: header flags and rcode, the
//! question echo (byte-exact, 0x20 case included), the three sections as
//! RR multisets (owner and RDATA names case-insensitive, TTLs exact; in the
//! forwarding suite within the seconds elapsed since its first query), and
//! the reply OPT (presence, version, DO, UDP size). Differences not covered
//! by the documented allow-list ([`compare::ALLOW_LIST`]) fail the test.
//!
//! See docs/conformance.md.

#![forbid(unsafe_code)]

pub mod compare;
pub mod daemon;
pub mod fwdgen;
pub mod harness;
pub mod netns;
pub mod querygen;
pub mod transport;
pub mod wire;
