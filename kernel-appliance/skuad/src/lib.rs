//! # skuad: the Skua resolver daemon
//!
//! What it does: reads an `unbound.conf`-style file, compiles it into a
//! [`skua_engine::Engine`], and serves it over kernel sockets (UDP with one `SO_REUSEPORT`
//! socket per worker thread and batched `recvmmsg`/`sendmmsg`, TCP per RFC 7766) and AF_XDP.
//! SIGHUP and the API reload without dropping a query; a configuration that fails to load is
//! rejected and the old one keeps serving. [`bench`] runs the engine in-process over a query
//! file (after BIND 10's query_bench).
//!
//! The process is built in layers; each imports only the layers below it (none imports one
//! above, so no module circle):
//!
//! - [`supervisor`] wires the process: loads the configuration, starts the dataplanes, the
//!   control core and the API, turns signals into control operations, stops in order.
//! - [`api`]: the REST API (routes, HTTP server, metrics rendering). It depends on the
//!   control core; the control core never names it (the API's own settings are reloaded
//!   through [`control::Reconfigure`]).
//! - [`control`]: the control core: configuration loading, reloads and API writes (compiled
//!   off the hot path, swapped atomically), the state file, tokens and roles, the audit log.
//!   No HTTP, no sockets: it drives the dataplanes through [`base::planes::Dataplanes`].
//! - [`dataplane`]: the kernel-socket listeners and AF_XDP. They see only the serving handle
//!   ([`base::serving::Serving`]: the engine in force, counters, stop) and their settings.
//! - [`base`]: the serving handle, settings, the dataplane interface, log, clock.
//!
//! What it does not do yet: forwarding and recursion (queries outside local data are
//! REFUSED), ACME, privilege dropping.

#![forbid(unsafe_code)]

pub mod acme;
pub mod api;
pub mod base;
pub mod bench;
pub mod control;
pub mod dataplane;
pub mod supervisor;
