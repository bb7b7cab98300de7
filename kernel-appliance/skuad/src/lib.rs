//! # skuad: the Skua resolver daemon
//!
//! What it does: reads an `unbound.conf`-style file ([`load`]), compiles it into a
//! [`skua_engine::Engine`], and serves it over kernel sockets ([`server`]): UDP with one
//! `SO_REUSEPORT` socket per worker thread and batched `recvmmsg`/`sendmmsg`, TCP per
//! RFC 7766 (pipelining, idle timeout, connection limit). SIGHUP reloads without dropping a
//! query; a configuration that fails to load is rejected and the old one keeps serving.
//! [`bench`] runs the engine in-process over a query file (after BIND 10's query_bench).
//!
//! With [`xdp`], it also runs the AF_XDP dataplane (skua-xdp) on the interfaces holding the
//! served addresses, with a self-test and a fall back to the kernel sockets.
//!
//! The control plane: [`control`] (reloads and API writes compiled off the hot path and
//! swapped atomically; listeners rebound without loss by [`listeners`]; API changes kept in
//! the [`state`] file), the REST API ([`api`], tokens and roles in [`auth`], Prometheus text
//! in [`metrics`]), the audit trail ([`audit`]). Response rate limiting is the engine's
//! (`skua_engine::rrl`); skuad gives it a table and a clock ([`clock`]).
//!
//! What it does not do yet: forwarding and recursion (queries outside local data are
//! REFUSED), ACME, privilege dropping.

#![forbid(unsafe_code)]

pub mod api;
pub mod audit;
pub mod auth;
pub mod bench;
pub mod clock;
pub mod control;
pub mod httpd;
pub mod listeners;
pub mod load;
pub mod log;
pub mod metrics;
pub mod notify;
pub mod server;
pub mod state;
pub mod xdp;
