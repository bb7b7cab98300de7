//! # skua-xfr: zone transfers, sans-IO
//!
//! The protocol side of keeping authoritative zones in step between servers, for skuad as
//! a primary and as a secondary. It owns **no socket, clock or file**: callers
//! pass bytes, addresses and the time, and send what it returns (the quinn-proto style of
//! skua-engine).
//!
//! - [`tsig`]: TSIG (RFC 8945) with HMAC-SHA256: request checks in the order of §5.2
//!   (BADKEY, BADSIG, BADTIME, BADTRUNC) and the error responses they call for, signing of
//!   requests and of multi-message responses (§5.3.1), verification of responses and
//!   streams (unsigned runs included).
//! - [`zone`]: a zone's [`zone::Version`]s, the [`zone::Diff`] between two, the bounded
//!   [`zone::Journal`] IXFR answers from, RFC 1982 serial arithmetic.
//! - [`transfer`]: AXFR (RFC 5936) and IXFR (RFC 1995) responses cut into messages of
//!   16 KiB and signed one by one.
//! - [`server`]: the primary's decision for one request: form, TSIG, zone, `provide-xfr:`
//!   entries, then AXFR, IXFR, the whole zone when the journal does not reach the client's
//!   serial, or the SOA alone when it is up to date.
//! - [`notify`]: NOTIFY (RFC 1996) messages, replies, the reading of one received and the
//!   secondary's answer to it (TSIG, `allow-notify:`).
//! - [`client`]: the secondary's requests (SOA query, AXFR, IXFR) and the reading of their
//!   answers: TSIG on every message, bounds on bytes and records, RFC 5936 / RFC 1995
//!   layouts, the new version built from the whole zone or the diffs applied.
//! - [`secondary`]: the secondary's clock for a zone: REFRESH, RETRY, EXPIRE (RFC 1035
//!   §3.3.13), NOTIFY, back-off before anything is held.
//! - [`wire`]: the message format as transfers need it: names with compression pointers
//!   read from untrusted bytes, messages written with compression.
//!
//! What it does **not** do: sockets and retries (skuad's control core sends NOTIFY, its
//! TCP dataplane streams the messages), configuration (skua-config reads `tsig-key:`,
//! `provide-xfr:` and `notify:`; skuad turns them into [`tsig::Key`] and
//! [`server::Allow`]), persistence of journals and zone files, the secondary's sockets and
//! timeouts (skuad's dataplane), TSIG algorithms other than `hmac-sha256`, TKEY, SIG(0), DNSSEC signing
//! of the zone, IXFR over UDP.
//!
//! Contract: no input from the network can make it panic; malformed messages are errors
//! ([`wire::WireError`]) or FORMERR answers. `#![forbid(unsafe_code)]`, `no_std` + `alloc`,
//! built for `x86_64-unknown-none` in CI (sha2 with its portable backend there: its x86
//! backends need SIMD registers that target lacks; see the workspace's `.cargo/config.toml`).

#![no_std]
#![forbid(unsafe_code)]
#![warn(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod client;
pub mod notify;
pub mod secondary;
pub mod server;
pub mod transfer;
pub mod tsig;
pub mod wire;
pub mod zone;
