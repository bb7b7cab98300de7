//! # skuad: the Skua resolver daemon
//!
//! What it does: reads an `unbound.conf`-style file, compiles it into a
//! [`skua_engine::Engine`] (local zones and data, auth zones, ACL, response rate limiting),
//! and serves it over kernel sockets (UDP with one `SO_REUSEPORT` socket per worker thread
//! and batched `recvmmsg`/`sendmmsg`, TCP per RFC 7766), DNS over TLS (RFC 7858), DNS over
//! HTTPS (RFC 8484, HTTP/2) and DNS over QUIC (RFC 9250), and AF_XDP (answers the XDP
//! program sends itself, the rest from per-queue workers). Names outside local data go to
//! the forwarding and stub resolver with its cache (`forward-zone:`, `stub-zone:`, over UDP,
//! TCP or TLS upstream; skua-resolver). Zones are transferred both ways (AXFR/IXFR with
//! NOTIFY and TSIG, as primary and as secondary; skua-xfr). The REST API and the local
//! control socket show the state and counters and change records and zones, the cache, the
//! leases and the configuration (a reload), with roles, every change audited;
//! ACME (RFC 8555) obtains and renews the encrypted listeners' certificate; nodes keep their
//! configuration in sync, and service addresses follow the host agent's lease. SIGHUP and
//! the API reload without dropping a query; a configuration that fails to load is rejected
//! and the old one keeps serving. [`bench`] runs the engine in-process over a query file
//! (after BIND 10's query_bench).
//!
//! The process is built in layers; each imports only the layers below it (none imports one
//! above, so no module circle):
//!
//! - [`supervisor`] wires the process: loads the configuration, starts the dataplanes, the
//!   control core, ACME and the API, turns signals into control operations, stops in order.
//! - [`api`]: the REST API (routes, HTTP server, the local control socket, metrics
//!   rendering, sync). It depends on the control core and ACME; the control core never
//!   names it (the API's own settings are reloaded through [`control::Reconfigure`]).
//! - [`acme`]: the ACME task (its plan between attempts, orders, challenges, the account
//!   and the files it writes). It depends on the control core (audited writes for DNS-01,
//!   the reload that puts a certificate in force); only the API and the supervisor name it.
//! - [`control`]: the control core: configuration loading, reloads and API writes (compiled
//!   off the hot path, swapped atomically), the state file, tokens and roles, the audit log,
//!   zone transfers, sync, leases, certificates. No HTTP, no sockets: it drives the
//!   dataplanes through [`base::planes::Dataplanes`].
//! - [`dataplane`]: the kernel-socket listeners, the encrypted transports, the upstream
//!   side of the resolver, inbound transfers and AF_XDP. They see only the serving handle
//!   ([`base::serving::Serving`]: the engine in force, counters, stop) and their settings.
//! - [`base`]: the serving handle, settings, the dataplane interface, log, clock.
//!
//! What it does not do yet: recursion from the root (a name no `forward-zone:` or
//! `stub-zone:` covers is REFUSED), DNSSEC validation, privilege dropping (`username:`,
//! `chroot:` are accepted and not applied).

#![forbid(unsafe_code)]

pub mod acme;
pub mod api;
pub mod base;
pub mod bench;
pub mod control;
pub mod dataplane;
pub mod supervisor;
