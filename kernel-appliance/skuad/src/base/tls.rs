//! DNS over TLS (RFC 7858) as the dataplanes see it: the TLS configuration in force and the
//! counters of its listeners.
//!
//! The control core builds a [`DotService`] at each load (certificate chain and key read
//! and checked there, so a bad one fails the reload and the old one keeps serving) and
//! swaps it in; every new handshake takes the one in force, connections in progress keep
//! the session they began with. So a renewed certificate serves at once, and nothing
//! restarts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwapOption;

/// ALPN protocol of DNS over TLS (RFC 7858 §3.2, the IANA registration `dot`).
pub const ALPN_DOT: &[u8] = b"dot";

/// What the DNS over TLS listeners serve.
pub struct DotService {
    /// TLS 1.3 and 1.2, ALPN `dot`, session tickets and a session cache.
    pub config: Arc<tokio_rustls::rustls::ServerConfig>,
    /// Pad responses to clients that ask to this block length (RFC 8467 §4.1), if any.
    pub pad_block: Option<u16>,
}

/// Counters of the DNS over TLS listeners.
#[derive(Default)]
pub struct DotStats {
    /// Handshakes completed.
    pub handshakes: AtomicU64,
    /// Handshakes that failed (including no ALPN in common, a bad client hello).
    pub handshake_failures: AtomicU64,
    /// Handshakes that did not finish in time.
    pub handshake_timeouts: AtomicU64,
    /// Resumed sessions (a ticket or the session cache).
    pub resumed: AtomicU64,
}

impl DotStats {
    /// Adds one to `c`.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// The DNS over TLS state of the serving handle.
#[derive(Default)]
pub struct Dot {
    /// The service in force (none: no `tls-service-key:`/`tls-service-pem:`).
    pub service: ArcSwapOption<DotService>,
    /// The counters.
    pub stats: DotStats,
}
