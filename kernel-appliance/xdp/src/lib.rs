//! # skua-xdp: the AF_XDP dataplane
//!
//! What it does: loads and attaches the XDP program of `bpf/` (with aya: pure Rust, no
//! libbpf/libelf to build), opens one AF_XDP socket per NIC queue with its UMEM, and runs
//! the rings **in Rust** (so ring operations inline into the worker loop). Frames are
//! answered in place by [`skua_fastpath`] and sent back on the queue they came from.
//!
//! What it does not do: choose interfaces or threads (the daemon does), TCP (passed to the
//! kernel by the XDP program), IP fragments or options (likewise).
//!
//! This crate holds the dataplane's `unsafe` code: the ring memory protocol ([`ring`]),
//! the UMEM ([`queue::Umem`]), the socket/mapping syscalls ([`socket`]) and the rtnetlink
//! sockets that read and watch interface addresses ([`ifaddr`]). Each block has a
//! `// SAFETY:` comment; the frame-ownership logic ([`queue`]) is safe code over them and is
//! tested without root against simulated rings.

pub mod abi;
pub mod answers;
pub mod bpf;
pub mod cached;
pub mod ifaddr;
pub mod queue;
pub mod ring;
pub mod socket;
pub mod worker;
