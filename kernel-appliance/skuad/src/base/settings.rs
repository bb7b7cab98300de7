//! What the dataplanes are told to serve: addresses, threads, buffers, limits.
//!
//! The control core derives it from the configuration ([`crate::control::load`]); the
//! dataplanes read it and nothing else of the configuration.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Where and how to listen (changes need a restart; reload only swaps the engine).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// UDP addresses.
    pub udp: Vec<SocketAddr>,
    /// TCP addresses.
    pub tcp: Vec<SocketAddr>,
    /// DNS over TLS addresses (RFC 7858: `interface:` on `tls-port:` with a certificate).
    pub tls: Vec<SocketAddr>,
    /// DNS over HTTPS addresses (RFC 8484: `interface:` on `https-port:` with a
    /// certificate, or with `http-notls-downstream:`).
    pub https: Vec<SocketAddr>,
    /// DNS over QUIC addresses (RFC 9250: UDP, `interface:` on `quic-port:` with a
    /// certificate).
    pub doq: Vec<SocketAddr>,
    /// DNS over HTTPS over TLS (else plain HTTP, `http-notls-downstream: yes`).
    pub https_tls: bool,
    /// `tcp-connection-limit:` rules: connections at once per netblock.
    pub connection_limits: Vec<(skua_engine::acl::Netblock, u32)>,
    /// `tcp-connection-limit-per-source:`: connections at once from one source (an IPv4
    /// address, an IPv6 /56) that no `tcp-connection-limit:` netblock names; 0: no limit.
    pub per_source_limit: u32,
    /// Worker threads (one UDP socket per thread and address, SO_REUSEPORT).
    pub threads: usize,
    /// Use SO_REUSEPORT.
    pub reuseport: bool,
    /// `ip-freebind:`: bind every listener with `IP_FREEBIND`, so that an address the host
    /// does not hold can be listened on (an anycast service address the host agent adds
    /// and removes as health allows, docs/ha-anycast.md). Leased addresses always are.
    pub freebind: bool,
    /// SO_RCVBUF request.
    pub rcvbuf: Option<usize>,
    /// SO_SNDBUF request.
    pub sndbuf: Option<usize>,
    /// TCP idle timeout (RFC 7766 §6.2.3).
    pub tcp_idle: Duration,
    /// Concurrent stream connections (TCP, TLS, HTTPS, QUIC): `incoming-num-tcp:` ×
    /// `num-threads:`.
    pub tcp_limit: usize,
    /// Log level (0 errors, 1 operational, 2+ details).
    pub verbosity: u8,
    /// CPUs to pin the UDP workers to, in order.
    pub cpus: Option<Vec<usize>>,
    /// Largest UDP reply.
    pub max_udp_size: u16,
    /// Service addresses (`ha: address:`, also in `udp` and `tcp`): bound even while the
    /// host does not hold them, answered only under the host agent's lease.
    pub leased: Vec<IpAddr>,
    /// The longest lease granted (`ha: lease-max:`).
    pub lease_max: Duration,
}
