//! # skua-vrrp: sans-IO VRRPv3 (RFC 9568) for IPv4 and IPv6
//!
//! The failover protocol of `skua-agent`: two or more appliances share virtual addresses;
//! the Active Router (RFC 9568 says Active, keepalived and this crate's API say Master)
//! holds them and advertises, the others watch and take over when it falls silent.
//! Interoperable with keepalived's `vrrp_version 3` (its adverts are the test vectors).
//!
//! Like the engine and the resolver core, it owns **no socket, clock or RNG**: the caller
//! passes the time in as `now: u64`, nanoseconds of a monotonic clock, hands in every
//! packet it receives and sends every packet it is given.
//!
//! ```text
//!   skua-agent                                   skua-vrrp
//!   ──────────                                   ─────────
//!   raw socket (proto 112) ── bytes, src, dst, TTL ──▶ Router::handle_advert
//!   timer at poll_timeout() ─────────────────────────▶ Router::handle_timeout
//!   link / health events ────────────────────────────▶ link_down, link_up, set_priority
//!   raw socket ◀── Output::Send ◀──────────────────── Router::poll_output
//!   add/remove VIPs ◀── Output::Transition
//!   GARP / unsolicited NA ◀── Output::Announce  (frames from `announce`)
//! ```
//!
//! Modules: [`packet`] (the advertisement codec, with keepalived's old unicast checksum),
//! [`router`] (the §6 state machine, plus a Fault state for a link that is down),
//! [`announce`] (gratuitous ARP and unsolicited Neighbor Advertisement builders, ARP and
//! NA readers for address-conflict detection).
//!
//! What it does **not** do: open sockets, add or remove addresses, join multicast groups,
//! run health checks (the caller turns them into [`router::Router::set_priority`]), virtual
//! MAC addresses (RFC 9568 §7.3: the appliance keeps its own MAC and announces the move
//! with gratuitous ARP / unsolicited NA, as keepalived does without `use_vmac`), VRRPv2,
//! authentication (none exists in v3), sync groups.
//!
//! Contract: no packet makes it panic. `#![no_std]` + `alloc`, `#![forbid(unsafe_code)]`,
//! builds for `x86_64-unknown-none`.

#![no_std]
#![forbid(unsafe_code)]
#![warn(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod announce;
mod checksum;
pub mod packet;
pub mod router;
