//! The encrypted transports as the dataplanes see them: DNS over TLS (RFC 7858), DNS over
//! HTTPS (RFC 8484) and DNS over QUIC (RFC 9250): the TLS configurations in force, the DNS over HTTPS parameters,
//! the shared byte budgets and the counters.
//!
//! The control core builds a [`TlsService`] at each load (certificate chain and key read
//! and checked there, so a bad one fails the reload and the old one keeps serving) and
//! swaps it in; every new handshake takes the one in force, connections in progress keep
//! the session they began with. So a renewed certificate serves at once, and nothing
//! restarts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use arc_swap::{ArcSwap, ArcSwapOption};

/// ALPN protocol of DNS over TLS (RFC 7858 §3.2, the IANA registration `dot`).
pub const ALPN_DOT: &[u8] = b"dot";
/// ALPN protocol of the TLS-ALPN-01 challenge (RFC 8737 §6.2).
pub const ALPN_ACME_TLS: &[u8] = b"acme-tls/1";
/// ALPN protocol of DNS over QUIC (RFC 9250 §4.1.1).
pub const ALPN_DOQ: &[u8] = b"doq";
/// ALPN protocols of DNS over HTTPS: HTTP/2 (RFC 8484 §5.2 recommends it), then HTTP/1.1.
pub const ALPN_DOH: &[&[u8]] = &[b"h2", b"http/1.1"];

/// The TLS configurations of the encrypted listeners (one certificate, one session store).
pub struct TlsService {
    /// DNS over TLS: TLS 1.3 and 1.2, ALPN `dot`, session tickets and a session cache.
    pub dot: Arc<tokio_rustls::rustls::ServerConfig>,
    /// DNS over HTTPS: the same with ALPN `h2` and `http/1.1`.
    pub doh: Arc<tokio_rustls::rustls::ServerConfig>,
    /// DNS over QUIC: TLS 1.3, ALPN `doq`, the QUIC transport's bounds.
    pub doq: Arc<quinn::ServerConfig>,
    /// Pad responses to clients that ask to this block length (RFC 8467 §4.1), if any.
    pub pad_block: Option<u16>,
    /// The certificate served (the chain's first) and the file it was read from; none
    /// while an `acme:` clause has not obtained one yet.
    pub certificate: Option<(
        std::path::PathBuf,
        rustls_pki_types::CertificateDer<'static>,
    )>,
}

/// TLS-ALPN-01 challenge certificates being validated, by the name they are for: shown to
/// a client that offers only ALPN `acme-tls/1` for that name (RFC 8737 §3), on the DNS
/// over TLS and HTTPS listeners. One map for the process (the ACME task fills it, the
/// listeners' certificate resolvers read it).
pub fn alpn_challenges() -> &'static std::sync::Mutex<
    std::collections::HashMap<String, Arc<tokio_rustls::rustls::sign::CertifiedKey>>,
> {
    static M: std::sync::OnceLock<
        std::sync::Mutex<
            std::collections::HashMap<String, Arc<tokio_rustls::rustls::sign::CertifiedKey>>,
        >,
    > = std::sync::OnceLock::new();
    M.get_or_init(Default::default)
}

/// DNS over HTTPS parameters (from the configuration, swapped at each load).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DohParams {
    /// The path queries are asked on (`http-endpoint:`).
    pub endpoint: String,
    /// Concurrent HTTP/2 streams per connection (`http-max-streams:`).
    pub max_streams: u32,
    /// Bytes of queries held at once, every connection together
    /// (`http-query-buffer-size:`).
    pub query_buffer: usize,
    /// Bytes of answers waiting to be sent, every connection together
    /// (`http-response-buffer-size:`).
    pub response_buffer: usize,
    /// Pad responses to clients that ask, over plain HTTP too (behind a proxy that
    /// terminates TLS, `http-notls-downstream:`), to this block length.
    pub pad_block: Option<u16>,
}

impl Default for DohParams {
    fn default() -> Self {
        Self {
            endpoint: "/dns-query".into(),
            max_streams: 100,
            query_buffer: 4 << 20,
            response_buffer: 4 << 20,
            pad_block: None,
        }
    }
}

/// Counters of one TLS transport's handshakes.
#[derive(Default)]
pub struct HandshakeStats {
    /// Handshakes completed.
    pub ok: AtomicU64,
    /// Handshakes that did not finish in time.
    pub timeout: AtomicU64,
    /// Resumed sessions (a ticket or the session cache).
    pub resumed: AtomicU64,
    /// The failed ones by reason, indexed by [`HandshakeFailure`].
    pub failures: [AtomicU64; HandshakeFailure::ALL.len()],
}

impl HandshakeStats {
    /// Counts a failed handshake and its reason.
    pub fn fail(&self, why: HandshakeFailure) {
        inc(&self.failures[why as usize]);
    }

    /// Handshakes that failed, whatever the reason.
    pub fn failed(&self) -> u64 {
        self.failures
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

/// Why a TLS handshake failed, as operators tell misconfigured clients from attacks and
/// from networks that cut connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// No application protocol in common (RFC 7301 §3.2 `no_application_protocol`): a
    /// client asking for something else than `dot`, `h2`/`http/1.1` or `doq`.
    Alpn = 0,
    /// No TLS version, cipher suite, group or signature scheme in common (TLS 1.0/1.1
    /// clients, RFC 8996; a client with only unsupported suites).
    Incompatible = 1,
    /// Not TLS, or TLS the peer broke (a malformed message, an unexpected one, plain DNS
    /// sent to the TLS port, another fatal alert than those above).
    Protocol = 2,
    /// The connection closed or was reset before the handshake ended.
    Closed = 3,
}

impl HandshakeFailure {
    /// Every reason, in index order.
    pub const ALL: [HandshakeFailure; 4] = [
        HandshakeFailure::Alpn,
        HandshakeFailure::Incompatible,
        HandshakeFailure::Protocol,
        HandshakeFailure::Closed,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            HandshakeFailure::Alpn => "alpn",
            HandshakeFailure::Incompatible => "incompatible",
            HandshakeFailure::Protocol => "protocol",
            HandshakeFailure::Closed => "closed",
        }
    }

    /// The reason of a failed rustls handshake (tokio-rustls reports rustls' errors as an
    /// `io::Error` of kind `InvalidData` carrying them).
    pub fn of_io(e: &std::io::Error) -> Self {
        match e
            .get_ref()
            .and_then(|i| i.downcast_ref::<tokio_rustls::rustls::Error>())
        {
            Some(r) => Self::of_rustls(r),
            None if e.kind() == std::io::ErrorKind::InvalidData => Self::Protocol,
            None => Self::Closed,
        }
    }

    /// The reason of a rustls error: skuad's own finding, or the alert the client sent
    /// (read with the same table as QUIC's, so the two transports count alike).
    pub fn of_rustls(e: &tokio_rustls::rustls::Error) -> Self {
        use tokio_rustls::rustls::Error;
        match e {
            Error::NoApplicationProtocol => Self::Alpn,
            Error::PeerIncompatible(_) => Self::Incompatible,
            Error::AlertReceived(a) => Self::of_alert(u8::from(*a)),
            _ => Self::Protocol,
        }
    }

    /// The reason a TLS alert (RFC 8446 §6) gives, whichever side sent it.
    pub fn of_alert(alert: u8) -> Self {
        match alert {
            // no_application_protocol (RFC 7301 §3.2).
            120 => Self::Alpn,
            // handshake_failure, protocol_version, insufficient_security.
            40 | 70 | 71 => Self::Incompatible,
            _ => Self::Protocol,
        }
    }
}

/// Adds one to `c`.
pub fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Counters of DNS over HTTPS requests.
#[derive(Default)]
pub struct DohStats {
    /// Requests answered with a DNS message (200).
    pub answered: AtomicU64,
    /// Requests refused as not DNS queries (4xx: bad path, method, media type, base64,
    /// size).
    pub refused: AtomicU64,
    /// Requests not answered for want of room or an answer (503).
    pub unavailable: AtomicU64,
    /// Connections closed for having no request in progress and nothing read or written
    /// for the idle timeout.
    pub idle_closed: AtomicU64,
}

/// A share of a byte budget (`http-query-buffer-size:`, `http-response-buffer-size:`):
/// given back when dropped.
pub struct Reserved {
    budget: Arc<AtomicUsize>,
    n: usize,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.budget.fetch_sub(self.n, Ordering::Relaxed);
    }
}

/// Takes `n` bytes of `budget` (in use now) when that stays within `limit`.
pub fn reserve(budget: &Arc<AtomicUsize>, n: usize, limit: usize) -> Option<Reserved> {
    let mut cur = budget.load(Ordering::Relaxed);
    loop {
        let next = cur.checked_add(n).filter(|&v| v <= limit)?;
        match budget.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => {
                return Some(Reserved {
                    budget: budget.clone(),
                    n,
                });
            }
            Err(v) => cur = v,
        }
    }
}

/// The encrypted transports' state in the serving handle.
#[derive(Default)]
pub struct Encrypted {
    /// The TLS configurations in force (none: no `tls-service-key:`/`tls-service-pem:`).
    pub service: ArcSwapOption<TlsService>,
    /// DNS over HTTPS parameters in force.
    pub doh: ArcSwap<DohParams>,
    /// DNS over TLS handshakes.
    pub dot_handshakes: HandshakeStats,
    /// DNS over HTTPS (over TLS) handshakes.
    pub doh_handshakes: HandshakeStats,
    /// DNS over QUIC handshakes.
    pub doq_handshakes: HandshakeStats,
    /// Queries over DNS over QUIC.
    pub doq_queries: AtomicU64,
    /// DNS over QUIC connections refused at once (the access list, the connection limits,
    /// no certificate).
    pub doq_refused: AtomicU64,
    /// DNS over QUIC connections closed for a protocol error (RFC 9250 §4.3: a message ID
    /// other than 0, a bad length).
    pub doq_protocol_errors: AtomicU64,
    /// Queries over DNS over TLS.
    pub dot_queries: AtomicU64,
    /// Queries over DNS over HTTPS.
    pub doh_queries: AtomicU64,
    /// DNS over HTTPS requests.
    pub doh_stats: DohStats,
    /// Bytes of DNS over HTTPS queries held now.
    pub query_bytes: Arc<AtomicUsize>,
    /// Bytes of DNS over HTTPS answers waiting to be sent now.
    pub response_bytes: Arc<AtomicUsize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_given_back() {
        let b = Arc::new(AtomicUsize::new(0));
        let r1 = reserve(&b, 600, 1000).unwrap();
        assert!(reserve(&b, 401, 1000).is_none());
        let r2 = reserve(&b, 400, 1000).unwrap();
        assert_eq!(b.load(Ordering::Relaxed), 1000);
        drop(r1);
        assert!(reserve(&b, 600, 1000).is_some());
        drop(r2);
        assert_eq!(b.load(Ordering::Relaxed), 0);
        assert!(reserve(&b, usize::MAX, usize::MAX).is_some());
        assert!(reserve(&b, 1, 0).is_none());
    }
}
