//! The directive tables: which clauses and directives exist in Unbound, and which of them
//! this crate implements.
//!
//! The server list was taken from unbound.conf(5) of Unbound 1.17 (including the module
//! options that go in `server:`: dns64, EDNS client subnet, ipsecmod), completed with the
//! aliases and obsolete names Unbound's lexer still accepts and with directives of later
//! Unbound releases. A name that is in no table is *unknown*.

/// How many values a directive takes on its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arity {
    /// Exactly this many tokens.
    Exactly(usize),
    /// One quoted token, or, if the first token is bare, every remaining token of the line
    /// joined with single spaces (`local-data: www.example. A 192.0.2.1`).
    RestOfLine,
}

/// Whether a known directive is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Support<K> {
    /// Implemented: stored in the data model.
    Implemented(K),
    /// Known to Unbound, not supported here: warned about and ignored. Takes at least this
    /// many values.
    Unsupported(usize),
}

/// The clauses (directives without a value that open a section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClauseKind {
    /// `server:`
    Server,
    /// `auth-zone:`
    AuthZone,
    /// `forward-zone:`
    ForwardZone,
    /// `stub-zone:`
    StubZone,
    /// `api:` (skuad's REST API; not an Unbound clause).
    Api,
    /// `audit:` (skuad's audit log; not an Unbound clause).
    Audit,
    /// `ha:` (addresses served only under the host agent's lease; not an Unbound clause).
    Ha,
    /// `tsig-key:` (a TSIG key for zone transfers; not an Unbound clause, NSD's `key:`).
    TsigKey,
    /// `sync:` (configuration and API data pulled from another skuad; not an Unbound clause).
    Sync,
    /// `acme:` (certificates obtained and renewed by skuad over ACME; not an Unbound clause).
    Acme,
    /// A clause that exists in Unbound but is not supported here.
    Unsupported,
}

const CLAUSES: &[(&str, ClauseKind)] = &[
    ("server", ClauseKind::Server),
    ("auth-zone", ClauseKind::AuthZone),
    ("forward-zone", ClauseKind::ForwardZone),
    ("stub-zone", ClauseKind::StubZone),
    // Not Unbound clauses: ours (Unbound would reject them).
    ("api", ClauseKind::Api),
    ("audit", ClauseKind::Audit),
    ("ha", ClauseKind::Ha),
    ("tsig-key", ClauseKind::TsigKey),
    ("sync", ClauseKind::Sync),
    ("acme", ClauseKind::Acme),
    ("remote-control", ClauseKind::Unsupported),
    ("view", ClauseKind::Unsupported),
    ("python", ClauseKind::Unsupported),
    ("dynlib", ClauseKind::Unsupported),
    ("cachedb", ClauseKind::Unsupported),
    ("rpz", ClauseKind::Unsupported),
    ("dnstap", ClauseKind::Unsupported),
    ("ipset", ClauseKind::Unsupported),
    ("dnscrypt", ClauseKind::Unsupported),
];

/// The clause named `name` (without the colon), if it is one.
pub(crate) fn clause(name: &str) -> Option<ClauseKind> {
    CLAUSES.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
}

/// The implemented `server:` directives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerKey {
    Interface,
    Port,
    DoIp4,
    DoIp6,
    DoUdp,
    DoTcp,
    NumThreads,
    SoReuseport,
    IpFreebind,
    SoRcvbuf,
    SoSndbuf,
    AccessControl,
    LocalZone,
    LocalData,
    LocalDataPtr,
    Identity,
    Version,
    HideIdentity,
    HideVersion,
    Verbosity,
    EdnsBufferSize,
    TcpIdleTimeout,
    IncomingNumTcp,
    MaxUdpSize,
    MinimalResponses,
    CpuAffinity,
    Logfile,
    UseSyslog,
    Username,
    Chroot,
    Directory,
    Pidfile,
    RrlResponsesPerSecond,
    RrlNodataPerSecond,
    RrlNxdomainsPerSecond,
    RrlReferralsPerSecond,
    RrlErrorsPerSecond,
    RrlAllPerSecond,
    RrlWindow,
    RrlSlip,
    RrlIpv4PrefixLength,
    RrlIpv6PrefixLength,
    RrlExemptClients,
    RrlQpsScale,
    RrlLogOnly,
    RrlMaxTableSize,
    RrlMinTableSize,
    TlsCertBundle,
    TlsSystemCert,
    TlsServiceKey,
    TlsServicePem,
    TlsPort,
    PadResponses,
    PadResponsesBlockSize,
    HttpsPort,
    HttpEndpoint,
    HttpMaxStreams,
    HttpQueryBufferSize,
    HttpResponseBufferSize,
    HttpNotlsDownstream,
    QuicPort,
    TcpConnectionLimit,
    TcpConnectionLimitPerSource,
    MsgCacheSize,
    MsgCacheSlabs,
    RrsetCacheSize,
    RrsetCacheSlabs,
    CacheMinTtl,
    CacheMaxTtl,
    CacheMaxNegativeTtl,
    Prefetch,
    ServeExpired,
    ServeExpiredTtl,
    ServeExpiredTtlReset,
    ServeExpiredReplyTtl,
    ServeExpiredClientTimeout,
    OutgoingRange,
    OutgoingPortPermit,
    OutgoingPortAvoid,
    UseCapsForId,
    CapsExempt,
    DoNotQueryLocalhost,
    UnwantedReplyThreshold,
    TcpUpstream,
    TlsUpstream,
    InfraHostTtl,
    NumQueriesPerThread,
    JostleTimeout,
    Ede,
    EdeServeExpired,
}

impl ServerKey {
    pub(crate) fn arity(self) -> Arity {
        match self {
            ServerKey::AccessControl | ServerKey::LocalZone | ServerKey::TcpConnectionLimit => {
                Arity::Exactly(2)
            }
            ServerKey::LocalData | ServerKey::LocalDataPtr => Arity::RestOfLine,
            _ => Arity::Exactly(1),
        }
    }
}

use Support::{Implemented as I, Unsupported as U};

/// Every `server:` directive we know of.
const SERVER: &[(&str, Support<ServerKey>)] = &[
    // (a) Implemented.
    ("interface", I(ServerKey::Interface)),
    ("ip-address", I(ServerKey::Interface)),
    ("port", I(ServerKey::Port)),
    ("do-ip4", I(ServerKey::DoIp4)),
    ("do-ip6", I(ServerKey::DoIp6)),
    ("do-udp", I(ServerKey::DoUdp)),
    ("do-tcp", I(ServerKey::DoTcp)),
    ("num-threads", I(ServerKey::NumThreads)),
    ("so-reuseport", I(ServerKey::SoReuseport)),
    ("ip-freebind", I(ServerKey::IpFreebind)),
    ("so-rcvbuf", I(ServerKey::SoRcvbuf)),
    ("so-sndbuf", I(ServerKey::SoSndbuf)),
    ("access-control", I(ServerKey::AccessControl)),
    ("local-zone", I(ServerKey::LocalZone)),
    ("local-data", I(ServerKey::LocalData)),
    ("local-data-ptr", I(ServerKey::LocalDataPtr)),
    ("identity", I(ServerKey::Identity)),
    ("version", I(ServerKey::Version)),
    ("hide-identity", I(ServerKey::HideIdentity)),
    ("hide-version", I(ServerKey::HideVersion)),
    ("verbosity", I(ServerKey::Verbosity)),
    ("edns-buffer-size", I(ServerKey::EdnsBufferSize)),
    ("tcp-idle-timeout", I(ServerKey::TcpIdleTimeout)),
    ("incoming-num-tcp", I(ServerKey::IncomingNumTcp)),
    ("max-udp-size", I(ServerKey::MaxUdpSize)),
    ("minimal-responses", I(ServerKey::MinimalResponses)),
    // Not an Unbound directive: ours (Unbound would reject it).
    ("cpu-affinity", I(ServerKey::CpuAffinity)),
    ("logfile", I(ServerKey::Logfile)),
    ("use-syslog", I(ServerKey::UseSyslog)),
    ("username", I(ServerKey::Username)),
    ("chroot", I(ServerKey::Chroot)),
    ("directory", I(ServerKey::Directory)),
    ("pidfile", I(ServerKey::Pidfile)),
    // Not Unbound directives: ours, BIND 9's `rate-limit` options (Unbound would reject
    // them).
    (
        "rrl-responses-per-second",
        I(ServerKey::RrlResponsesPerSecond),
    ),
    ("rrl-nodata-per-second", I(ServerKey::RrlNodataPerSecond)),
    (
        "rrl-nxdomains-per-second",
        I(ServerKey::RrlNxdomainsPerSecond),
    ),
    (
        "rrl-referrals-per-second",
        I(ServerKey::RrlReferralsPerSecond),
    ),
    ("rrl-errors-per-second", I(ServerKey::RrlErrorsPerSecond)),
    ("rrl-all-per-second", I(ServerKey::RrlAllPerSecond)),
    ("rrl-window", I(ServerKey::RrlWindow)),
    ("rrl-slip", I(ServerKey::RrlSlip)),
    ("rrl-ipv4-prefix-length", I(ServerKey::RrlIpv4PrefixLength)),
    ("rrl-ipv6-prefix-length", I(ServerKey::RrlIpv6PrefixLength)),
    ("rrl-exempt-clients", I(ServerKey::RrlExemptClients)),
    ("rrl-qps-scale", I(ServerKey::RrlQpsScale)),
    ("rrl-log-only", I(ServerKey::RrlLogOnly)),
    ("rrl-max-table-size", I(ServerKey::RrlMaxTableSize)),
    ("rrl-min-table-size", I(ServerKey::RrlMinTableSize)),
    // For the caching forwarder: the cache, the upstream side and TLS to upstreams.
    ("tls-cert-bundle", I(ServerKey::TlsCertBundle)),
    ("ssl-cert-bundle", I(ServerKey::TlsCertBundle)),
    ("tls-system-cert", I(ServerKey::TlsSystemCert)),
    ("tls-win-cert", I(ServerKey::TlsSystemCert)),
    ("msg-cache-size", I(ServerKey::MsgCacheSize)),
    ("msg-cache-slabs", I(ServerKey::MsgCacheSlabs)),
    ("rrset-cache-size", I(ServerKey::RrsetCacheSize)),
    ("rrset-cache-slabs", I(ServerKey::RrsetCacheSlabs)),
    ("cache-min-ttl", I(ServerKey::CacheMinTtl)),
    ("cache-max-ttl", I(ServerKey::CacheMaxTtl)),
    ("cache-max-negative-ttl", I(ServerKey::CacheMaxNegativeTtl)),
    ("prefetch", I(ServerKey::Prefetch)),
    ("serve-expired", I(ServerKey::ServeExpired)),
    ("serve-expired-ttl", I(ServerKey::ServeExpiredTtl)),
    (
        "serve-expired-ttl-reset",
        I(ServerKey::ServeExpiredTtlReset),
    ),
    (
        "serve-expired-reply-ttl",
        I(ServerKey::ServeExpiredReplyTtl),
    ),
    (
        "serve-expired-client-timeout",
        I(ServerKey::ServeExpiredClientTimeout),
    ),
    ("outgoing-range", I(ServerKey::OutgoingRange)),
    ("outgoing-port-permit", I(ServerKey::OutgoingPortPermit)),
    ("outgoing-port-avoid", I(ServerKey::OutgoingPortAvoid)),
    ("use-caps-for-id", I(ServerKey::UseCapsForId)),
    ("caps-exempt", I(ServerKey::CapsExempt)),
    ("caps-whitelist", I(ServerKey::CapsExempt)),
    ("do-not-query-localhost", I(ServerKey::DoNotQueryLocalhost)),
    (
        "unwanted-reply-threshold",
        I(ServerKey::UnwantedReplyThreshold),
    ),
    ("tcp-upstream", I(ServerKey::TcpUpstream)),
    ("tls-upstream", I(ServerKey::TlsUpstream)),
    ("ssl-upstream", I(ServerKey::TlsUpstream)),
    ("infra-host-ttl", I(ServerKey::InfraHostTtl)),
    ("num-queries-per-thread", I(ServerKey::NumQueriesPerThread)),
    ("jostle-timeout", I(ServerKey::JostleTimeout)),
    ("ede", I(ServerKey::Ede)),
    ("ede-serve-expired", I(ServerKey::EdeServeExpired)),
    // (b) Known to Unbound, not supported (yet). unbound.conf(5), Unbound 1.17, in man page
    // order.
    ("statistics-interval", U(1)),
    ("statistics-cumulative", U(1)),
    ("extended-statistics", U(1)),
    ("statistics-inhibit-zero", U(1)),
    ("interface-automatic", U(1)),
    ("interface-automatic-ports", U(1)),
    ("outgoing-interface", U(1)),
    ("outgoing-num-tcp", U(1)),
    ("stream-wait-size", U(1)),
    ("msg-buffer-size", U(1)),
    ("delay-close", U(1)),
    ("udp-connect", U(1)),
    ("unknown-server-time-limit", U(1)),
    ("discard-timeout", U(1)),
    ("wait-limit", U(1)),
    ("wait-limit-netblock", U(2)),
    ("ip-transparent", U(1)),
    ("ip-dscp", U(1)),
    ("infra-cache-slabs", U(1)),
    ("infra-cache-numhosts", U(1)),
    ("infra-cache-min-rtt", U(1)),
    ("infra-cache-max-rtt", U(1)),
    ("infra-keep-probing", U(1)),
    ("define-tag", U(1)),
    ("prefer-ip4", U(1)),
    ("prefer-ip6", U(1)),
    ("tcp-mss", U(1)),
    ("outgoing-tcp-mss", U(1)),
    ("tcp-reuse-timeout", U(1)),
    ("max-reuse-tcp-queries", U(1)),
    ("tcp-auth-query-timeout", U(1)),
    ("edns-tcp-keepalive", U(1)),
    ("edns-tcp-keepalive-timeout", U(1)),
    ("udp-upstream-without-downstream", U(1)),
    ("tls-service-key", I(ServerKey::TlsServiceKey)),
    ("ssl-service-key", I(ServerKey::TlsServiceKey)),
    ("tls-service-pem", I(ServerKey::TlsServicePem)),
    ("ssl-service-pem", I(ServerKey::TlsServicePem)),
    ("tls-port", I(ServerKey::TlsPort)),
    ("ssl-port", I(ServerKey::TlsPort)),
    ("tls-additional-port", U(1)),
    ("tls-session-ticket-keys", U(1)),
    ("tls-ciphers", U(1)),
    ("tls-ciphersuites", U(1)),
    ("pad-responses", I(ServerKey::PadResponses)),
    (
        "pad-responses-block-size",
        I(ServerKey::PadResponsesBlockSize),
    ),
    ("pad-queries", U(1)),
    ("pad-queries-block-size", U(1)),
    ("tls-use-sni", U(1)),
    ("https-port", I(ServerKey::HttpsPort)),
    ("http-endpoint", I(ServerKey::HttpEndpoint)),
    ("http-max-streams", I(ServerKey::HttpMaxStreams)),
    ("http-query-buffer-size", I(ServerKey::HttpQueryBufferSize)),
    (
        "http-response-buffer-size",
        I(ServerKey::HttpResponseBufferSize),
    ),
    ("http-nodelay", U(1)),
    ("http-notls-downstream", I(ServerKey::HttpNotlsDownstream)),
    ("proxy-protocol-port", U(1)),
    ("use-systemd", U(1)),
    ("do-daemonize", U(1)),
    ("tcp-connection-limit", I(ServerKey::TcpConnectionLimit)),
    // Not an Unbound directive: ours (Unbound has no per-source default).
    (
        "tcp-connection-limit-per-source",
        I(ServerKey::TcpConnectionLimitPerSource),
    ),
    ("access-control-tag", U(2)),
    ("access-control-tag-action", U(3)),
    ("access-control-tag-data", U(3)),
    ("access-control-view", U(2)),
    ("interface-action", U(2)),
    ("interface-tag", U(2)),
    ("interface-tag-action", U(3)),
    ("interface-tag-data", U(3)),
    ("interface-view", U(2)),
    ("log-identity", U(1)),
    ("log-time-ascii", U(1)),
    ("log-queries", U(1)),
    ("log-replies", U(1)),
    ("log-tag-queryreply", U(1)),
    ("log-local-actions", U(1)),
    ("log-servfail", U(1)),
    ("root-hints", U(1)),
    ("hide-http-user-agent", U(1)),
    ("http-user-agent", U(1)),
    ("nsid", U(1)),
    ("hide-trustanchor", U(1)),
    ("target-fetch-policy", U(1)),
    ("harden-short-bufsize", U(1)),
    ("harden-large-queries", U(1)),
    ("harden-glue", U(1)),
    ("harden-dnssec-stripped", U(1)),
    ("harden-below-nxdomain", U(1)),
    ("harden-referral-path", U(1)),
    ("harden-algo-downgrade", U(1)),
    ("qname-minimisation", U(1)),
    ("qname-minimisation-strict", U(1)),
    ("aggressive-nsec", U(1)),
    ("private-address", U(1)),
    ("private-domain", U(1)),
    ("do-not-query-address", U(1)),
    ("prefetch-key", U(1)),
    ("deny-any", U(1)),
    ("rrset-roundrobin", U(1)),
    ("disable-dnssec-lame-check", U(1)),
    ("module-config", U(1)),
    ("trust-anchor-file", U(1)),
    ("auto-trust-anchor-file", U(1)),
    ("trust-anchor", U(1)),
    ("trusted-keys-file", U(1)),
    ("trust-anchor-signaling", U(1)),
    ("root-key-sentinel", U(1)),
    ("domain-insecure", U(1)),
    ("val-override-date", U(1)),
    ("val-sig-skew-min", U(1)),
    ("val-sig-skew-max", U(1)),
    ("val-max-restart", U(1)),
    ("val-bogus-ttl", U(1)),
    ("val-clean-additional", U(1)),
    ("val-log-level", U(1)),
    ("val-permissive-mode", U(1)),
    ("ignore-cd-flag", U(1)),
    ("serve-original-ttl", U(1)),
    ("val-nsec3-keysize-iterations", U(1)),
    ("zonemd-permissive-mode", U(1)),
    ("add-holddown", U(1)),
    ("del-holddown", U(1)),
    ("keep-missing", U(1)),
    ("permit-small-holddown", U(1)),
    ("key-cache-size", U(1)),
    ("key-cache-slabs", U(1)),
    ("neg-cache-size", U(1)),
    ("unblock-lan-zones", U(1)),
    ("insecure-lan-zones", U(1)),
    ("local-zone-tag", U(2)),
    ("local-zone-override", U(3)),
    ("response-ip", U(2)),
    ("response-ip-data", U(2)),
    ("response-ip-tag", U(2)),
    ("ratelimit", U(1)),
    ("ratelimit-size", U(1)),
    ("ratelimit-slabs", U(1)),
    ("ratelimit-factor", U(1)),
    ("ratelimit-backoff", U(1)),
    ("ratelimit-for-domain", U(2)),
    ("ratelimit-below-domain", U(2)),
    ("ip-ratelimit", U(1)),
    ("ip-ratelimit-size", U(1)),
    ("ip-ratelimit-slabs", U(1)),
    ("ip-ratelimit-factor", U(1)),
    ("ip-ratelimit-backoff", U(1)),
    ("outbound-msg-retry", U(1)),
    ("max-sent-count", U(1)),
    ("max-query-restarts", U(1)),
    ("iter-scrub-promiscuous", U(1)),
    ("fast-server-permil", U(1)),
    ("fast-server-num", U(1)),
    ("edns-client-string", U(2)),
    ("edns-client-string-opcode", U(1)),
    // Module options that go in server: (dns64, EDNS client subnet, ipsecmod).
    ("dns64-prefix", U(1)),
    ("dns64-synthall", U(1)),
    ("dns64-ignore-aaaa", U(1)),
    ("send-client-subnet", U(1)),
    ("client-subnet-zone", U(1)),
    ("client-subnet-always-forward", U(1)),
    ("client-subnet-opcode", U(1)),
    ("max-client-subnet-ipv6", U(1)),
    ("max-client-subnet-ipv4", U(1)),
    ("min-client-subnet-ipv6", U(1)),
    ("min-client-subnet-ipv4", U(1)),
    ("max-ecs-tree-size-ipv4", U(1)),
    ("max-ecs-tree-size-ipv6", U(1)),
    ("ipsecmod-enabled", U(1)),
    ("ipsecmod-hook", U(1)),
    ("ipsecmod-strict", U(1)),
    ("ipsecmod-max-ttl", U(1)),
    ("ipsecmod-ignore-bogus", U(1)),
    ("ipsecmod-allow", U(1)),
    ("ipsecmod-whitelist", U(1)),
    // Aliases and obsolete names Unbound's lexer still accepts.
    ("additional-ssl-port", U(1)),
    ("additional-tls-port", U(1)),
    ("tls-additional-ports", U(1)),
    ("low-rtt", U(1)),
    ("low-rtt-pct", U(1)),
    ("low-rtt-permil", U(1)),
    ("infra-lame-ttl", U(1)),
    ("infra-cache-lame-size", U(1)),
    ("dlv-anchor", U(1)),
    ("dlv-anchor-file", U(1)),
    ("fake-dsa", U(1)),
    ("fake-sha1", U(1)),
    ("shm-enable", U(1)),
    ("shm-key", U(1)),
    ("edns-client-tag", U(2)),
    ("edns-client-tag-opcode", U(1)),
    // Later Unbound releases (1.18 and up).
    ("answer-cookie", U(1)),
    ("cookie-secret", U(1)),
    ("cookie-secret-file", U(1)),
    ("ip-ratelimit-cookie", U(1)),
    ("wait-limit-cookie", U(1)),
    ("wait-limit-cookie-netblock", U(2)),
    ("harden-unknown-additional", U(1)),
    ("harden-unverified-glue", U(1)),
    ("sock-queue-timeout", U(1)),
    ("disable-edns-do", U(1)),
    ("log-destaddr", U(1)),
    ("log-time-iso", U(1)),
    ("cache-min-negative-ttl", U(1)),
    ("iter-scrub-ns", U(1)),
    ("iter-scrub-cname", U(1)),
    ("max-global-quota", U(1)),
    ("dns-error-reporting", U(1)),
    ("nat64-prefix", U(1)),
    ("quic-port", I(ServerKey::QuicPort)),
    ("quic-size", U(1)),
];

/// The `server:` directive named `name`, if known.
pub(crate) fn server(name: &str) -> Option<Support<ServerKey>> {
    SERVER.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
}

/// The implemented `auth-zone:` directives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthKey {
    Name,
    Zonefile,
    ForDownstream,
    ForUpstream,
    FallbackEnabled,
    Primary,
    /// `provide-xfr: NETBLOCK KEY` (NSD's; skuad only).
    ProvideXfr,
    /// `notify: ADDR[@PORT] KEY` (NSD's; skuad only).
    Notify,
    /// `ixfr-number:` (NSD's; skuad only).
    IxfrNumber,
    /// `ixfr-size:` (NSD's; skuad only).
    IxfrSize,
    /// `request-xfr: ADDR[@PORT] KEY` (NSD's; skuad only): `primary:` with a key.
    RequestXfr,
    /// `allow-notify: NETBLOCK [KEY]` (Unbound's, with NSD's optional key).
    AllowNotify,
    /// `size-limit-xfr:` (NSD's; skuad only): bytes one transfer may bring.
    SizeLimitXfr,
    /// `xfr-max-records:` (skuad only): records one transfer may bring.
    XfrMaxRecords,
}

impl AuthKey {
    /// How many values it needs.
    pub(crate) fn arity(self) -> usize {
        match self {
            AuthKey::ProvideXfr | AuthKey::Notify | AuthKey::RequestXfr => 2,
            _ => 1,
        }
    }

    /// How many values it may take (an optional TSIG key name after the address).
    pub(crate) fn max_arity(self) -> usize {
        match self {
            AuthKey::Primary | AuthKey::AllowNotify => 2,
            k => k.arity(),
        }
    }
}

/// Every `auth-zone:` directive of unbound.conf(5).
const AUTH_ZONE: &[(&str, Support<AuthKey>)] = &[
    ("name", I(AuthKey::Name)),
    ("zonefile", I(AuthKey::Zonefile)),
    ("for-downstream", I(AuthKey::ForDownstream)),
    ("for-upstream", I(AuthKey::ForUpstream)),
    ("fallback-enabled", I(AuthKey::FallbackEnabled)),
    ("primary", I(AuthKey::Primary)),
    ("master", I(AuthKey::Primary)),
    // Not Unbound's: zone transfers as NSD names them (docs/zone-transfer.md).
    ("provide-xfr", I(AuthKey::ProvideXfr)),
    ("notify", I(AuthKey::Notify)),
    ("ixfr-number", I(AuthKey::IxfrNumber)),
    ("ixfr-size", I(AuthKey::IxfrSize)),
    ("request-xfr", I(AuthKey::RequestXfr)),
    ("allow-notify", I(AuthKey::AllowNotify)),
    ("size-limit-xfr", I(AuthKey::SizeLimitXfr)),
    ("xfr-max-records", I(AuthKey::XfrMaxRecords)),
    ("url", U(1)),
    ("zonemd-check", U(1)),
    ("zonemd-reject-absence", U(1)),
];

/// The `auth-zone:` directive named `name`, if known.
pub(crate) fn auth_zone(name: &str) -> Option<Support<AuthKey>> {
    AUTH_ZONE.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
}

/// The implemented `forward-zone:` and `stub-zone:` directives (the same for both; the
/// names differ: `forward-addr:`, `stub-addr:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZoneKey {
    Name,
    Addr,
    Host,
    First,
    NoCache,
    TlsUpstream,
    TcpUpstream,
    /// `stub-prime:` (stub zones only).
    Prime,
}

/// Every `forward-zone:` directive of unbound.conf(5) (Unbound 1.17, unchanged since).
const FORWARD_ZONE: &[(&str, Support<ZoneKey>)] = &[
    ("name", I(ZoneKey::Name)),
    ("forward-addr", I(ZoneKey::Addr)),
    ("forward-host", I(ZoneKey::Host)),
    ("forward-first", I(ZoneKey::First)),
    ("forward-no-cache", I(ZoneKey::NoCache)),
    ("forward-tls-upstream", I(ZoneKey::TlsUpstream)),
    ("forward-ssl-upstream", I(ZoneKey::TlsUpstream)),
    ("forward-tcp-upstream", I(ZoneKey::TcpUpstream)),
];

/// Every `stub-zone:` directive of unbound.conf(5) (Unbound 1.17, unchanged since).
const STUB_ZONE: &[(&str, Support<ZoneKey>)] = &[
    ("name", I(ZoneKey::Name)),
    ("stub-addr", I(ZoneKey::Addr)),
    ("stub-host", I(ZoneKey::Host)),
    ("stub-prime", I(ZoneKey::Prime)),
    ("stub-first", I(ZoneKey::First)),
    ("stub-no-cache", I(ZoneKey::NoCache)),
    ("stub-tls-upstream", I(ZoneKey::TlsUpstream)),
    ("stub-ssl-upstream", I(ZoneKey::TlsUpstream)),
    ("stub-tcp-upstream", I(ZoneKey::TcpUpstream)),
];

/// The `forward-zone:` directive named `name`, if known.
pub(crate) fn forward_zone(name: &str) -> Option<Support<ZoneKey>> {
    FORWARD_ZONE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, s)| s)
}

/// The `stub-zone:` directive named `name`, if known.
pub(crate) fn stub_zone(name: &str) -> Option<Support<ZoneKey>> {
    STUB_ZONE.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
}

/// The `api:` directives (skuad's own clause: all implemented).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiKey {
    Enable,
    Interface,
    Port,
    Token,
    TlsCert,
    TlsKey,
    MaxBody,
    AuthFailLimit,
    StateFile,
    MaxConnections,
    MaxConnectionsPerSource,
    ControlSocket,
    ControlSocketGroup,
    ControlSocketGroupRole,
}

impl ApiKey {
    pub(crate) fn arity(self) -> Arity {
        match self {
            ApiKey::Token => Arity::RestOfLine,
            _ => Arity::Exactly(1),
        }
    }
}

/// Every `api:` directive.
const API: &[(&str, ApiKey)] = &[
    ("enable", ApiKey::Enable),
    ("interface", ApiKey::Interface),
    ("port", ApiKey::Port),
    ("token", ApiKey::Token),
    ("tls-cert", ApiKey::TlsCert),
    ("tls-key", ApiKey::TlsKey),
    ("max-body", ApiKey::MaxBody),
    ("auth-fail-limit", ApiKey::AuthFailLimit),
    ("state-file", ApiKey::StateFile),
    ("max-connections", ApiKey::MaxConnections),
    (
        "max-connections-per-source",
        ApiKey::MaxConnectionsPerSource,
    ),
    ("control-socket", ApiKey::ControlSocket),
    ("control-socket-group", ApiKey::ControlSocketGroup),
    ("control-socket-group-role", ApiKey::ControlSocketGroupRole),
];

/// The `api:` directive named `name`, if known.
pub(crate) fn api(name: &str) -> Option<ApiKey> {
    API.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
}

/// The `audit:` directives (skuad's own clause: all implemented, one value each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuditKey {
    Log,
    Key,
    CheckpointEvery,
    Fsync,
}

/// Every `audit:` directive.
const AUDIT: &[(&str, AuditKey)] = &[
    ("log", AuditKey::Log),
    ("key", AuditKey::Key),
    ("checkpoint-every", AuditKey::CheckpointEvery),
    ("fsync", AuditKey::Fsync),
];

/// The `audit:` directive named `name`, if known.
pub(crate) fn audit(name: &str) -> Option<AuditKey> {
    AUDIT.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
}

/// The `ha:` directives (skuad's own clause: all implemented, one value each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HaKey {
    Address,
    LeaseMax,
}

/// Every `ha:` directive.
const HA: &[(&str, HaKey)] = &[("address", HaKey::Address), ("lease-max", HaKey::LeaseMax)];

/// The `tsig-key:` directives (skuad's own clause: all implemented, one value each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TsigKeyKey {
    Name,
    Algorithm,
    Secret,
}

/// Every `tsig-key:` directive.
const TSIG_KEY: &[(&str, TsigKeyKey)] = &[
    ("name", TsigKeyKey::Name),
    ("algorithm", TsigKeyKey::Algorithm),
    ("secret", TsigKeyKey::Secret),
];

/// The `tsig-key:` directive named `name`, if known.
pub(crate) fn tsig_key(name: &str) -> Option<TsigKeyKey> {
    TSIG_KEY.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
}

/// The `sync:` directives (skuad's own clause: all implemented; `from:` may repeat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncKey {
    From,
    TokenFile,
    SharedConfig,
    TlsCa,
    Wait,
}

/// Every `sync:` directive.
const SYNC: &[(&str, SyncKey)] = &[
    ("from", SyncKey::From),
    ("token-file", SyncKey::TokenFile),
    ("shared-config", SyncKey::SharedConfig),
    ("tls-ca", SyncKey::TlsCa),
    ("wait", SyncKey::Wait),
];

/// The `sync:` directive named `name`, if known.
pub(crate) fn sync(name: &str) -> Option<SyncKey> {
    SYNC.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
}

/// The `acme:` directives (skuad's own clause: all implemented; `contact:` and `name:` may
/// repeat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcmeKey {
    Directory,
    Contact,
    Name,
    Challenge,
    HttpInterface,
    CaBundle,
    AccountFile,
    Profile,
}

/// Every `acme:` directive.
const ACME: &[(&str, AcmeKey)] = &[
    ("directory", AcmeKey::Directory),
    ("contact", AcmeKey::Contact),
    ("name", AcmeKey::Name),
    ("challenge", AcmeKey::Challenge),
    ("http-01-interface", AcmeKey::HttpInterface),
    ("ca-bundle", AcmeKey::CaBundle),
    ("account-file", AcmeKey::AccountFile),
    ("profile", AcmeKey::Profile),
];

/// The `acme:` directive named `name`, if known.
pub(crate) fn acme(name: &str) -> Option<AcmeKey> {
    ACME.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
}

/// The `ha:` directive named `name`, if known.
pub(crate) fn ha(name: &str) -> Option<HaKey> {
    HA.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tables_have_no_duplicates() {
        let mut seen = HashSet::new();
        for (name, _) in SERVER {
            assert!(seen.insert(*name), "duplicate server directive {name}");
        }
        let mut seen = HashSet::new();
        for (name, _) in AUTH_ZONE {
            assert!(seen.insert(*name), "duplicate auth-zone directive {name}");
        }
        for table in [FORWARD_ZONE, STUB_ZONE] {
            let mut seen = HashSet::new();
            for (name, _) in table {
                assert!(seen.insert(*name), "duplicate zone directive {name}");
            }
        }
        let mut seen = HashSet::new();
        for (name, _) in API {
            assert!(seen.insert(*name), "duplicate api directive {name}");
        }
        let mut seen = HashSet::new();
        for (name, _) in AUDIT {
            assert!(seen.insert(*name), "duplicate audit directive {name}");
        }
        let mut seen = HashSet::new();
        for (name, _) in CLAUSES {
            assert!(seen.insert(*name), "duplicate clause {name}");
            assert!(server(name).is_none() && auth_zone(name).is_none());
            assert!(api(name).is_none() && audit(name).is_none());
            assert!(forward_zone(name).is_none() && stub_zone(name).is_none());
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(server("port"), Some(I(ServerKey::Port)));
        assert_eq!(server("ip-address"), Some(I(ServerKey::Interface)));
        assert_eq!(server("rrset-roundrobin"), Some(U(1)));
        assert_eq!(server("local-zone-override"), Some(U(3)));
        assert_eq!(server("no-such-thing"), None);
        assert_eq!(
            server("Port"),
            None,
            "names are case-sensitive, as in Unbound"
        );
        assert_eq!(auth_zone("master"), Some(I(AuthKey::Primary)));
        assert_eq!(auth_zone("url"), Some(U(1)));
        assert_eq!(clause("forward-zone"), Some(ClauseKind::ForwardZone));
        assert_eq!(clause("stub-zone"), Some(ClauseKind::StubZone));
        assert_eq!(clause("view"), Some(ClauseKind::Unsupported));
        assert_eq!(server("prefetch"), Some(I(ServerKey::Prefetch)));
        assert_eq!(server("ssl-upstream"), Some(I(ServerKey::TlsUpstream)));
        assert_eq!(server("tls-win-cert"), Some(I(ServerKey::TlsSystemCert)));
        assert_eq!(server("caps-whitelist"), Some(I(ServerKey::CapsExempt)));
        assert_eq!(
            forward_zone("forward-ssl-upstream"),
            Some(I(ZoneKey::TlsUpstream))
        );
        assert_eq!(forward_zone("stub-prime"), None);
        assert_eq!(stub_zone("stub-prime"), Some(I(ZoneKey::Prime)));
        assert_eq!(stub_zone("forward-addr"), None);
        assert_eq!(clause("server"), Some(ClauseKind::Server));
        assert_eq!(clause("port"), None);
        assert_eq!(clause("api"), Some(ClauseKind::Api));
        assert_eq!(clause("audit"), Some(ClauseKind::Audit));
        assert_eq!(clause("remote-control"), Some(ClauseKind::Unsupported));
        assert_eq!(server("rrl-slip"), Some(I(ServerKey::RrlSlip)));
        assert_eq!(api("token"), Some(ApiKey::Token));
        assert_eq!(api("control-enable"), None);
        assert_eq!(audit("key"), Some(AuditKey::Key));
        assert_eq!(audit("name"), None);
    }

    #[test]
    fn every_implemented_key_is_reachable() {
        let keys: HashSet<String> = SERVER
            .iter()
            .filter_map(|(_, s)| match s {
                I(k) => Some(format!("{k:?}")),
                U(_) => None,
            })
            .collect();
        assert_eq!(keys.len(), 90, "one table entry per ServerKey variant");
        for (table, want) in [(FORWARD_ZONE, 7), (STUB_ZONE, 8)] {
            let keys: HashSet<String> = table
                .iter()
                .filter_map(|(_, s)| match s {
                    I(k) => Some(format!("{k:?}")),
                    U(_) => None,
                })
                .collect();
            assert_eq!(
                keys.len(),
                want,
                "every ZoneKey reachable (Prime: stubs only)"
            );
        }
        assert_eq!(API.len(), 14, "one table entry per ApiKey variant");
        assert_eq!(AUDIT.len(), 4, "one table entry per AuditKey variant");
    }
}
