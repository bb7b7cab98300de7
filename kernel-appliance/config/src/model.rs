//! The data model: what a configuration says, at string level, with locations.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A place in a configuration file: the file as it was opened and a 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Loc {
    /// The file, as opened (relative include paths stay relative), or the virtual name given
    /// to [`parse_str`](crate::parse_str).
    pub file: Arc<Path>,
    /// 1-based line number.
    pub line: usize,
}

impl Loc {
    /// A location in `file` at `line`.
    pub fn new(file: impl AsRef<Path>, line: usize) -> Self {
        Loc {
            file: Arc::from(file.as_ref()),
            line,
        }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A value together with the place where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Located<T> {
    /// The value, as written (quotes removed).
    pub value: T,
    /// Where the directive that gave it is.
    pub loc: Loc,
}

/// A clause line or a directive as written ([`parse_str_listing`](crate::parse_str_listing)):
/// what a caller that accepts only some directives checks, whatever the parser does with
/// them (an unknown or unsupported one included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The clause it is in (`server`, `auth-zone`, ..., an unsupported one such as `view`),
    /// without the colon; `""` outside any clause.
    pub clause: String,
    /// The directive, without the colon; `None` for the clause line itself.
    pub directive: Option<String>,
    /// Where it is.
    pub loc: Loc,
}

/// A `tcp-connection-limit:` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimit {
    /// The netblock as written (`192.0.2.0/24`, `2001:db8::/32`, or one address).
    pub netblock: String,
    /// Connections at once from the whole netblock.
    pub limit: u32,
}

/// A problem that does not stop the configuration from being used: a directive or clause
/// that is not supported (yet) or not known, an include pattern that matches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Where the directive is.
    pub loc: Loc,
    /// What is wrong, in one sentence without the location.
    pub msg: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.loc, self.msg)
    }
}

/// A configuration that cannot be used: a syntax error, a bad value, an include that cannot
/// be read or that loops.
///
/// Displays as `file:line: msg`. `line` is 0 when the error is about a whole file (the file
/// given to [`parse_file`](crate::parse_file) cannot be read); it then displays as
/// `file: msg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The file the error is in.
    pub file: PathBuf,
    /// 1-based line number, or 0 for the whole file.
    pub line: usize,
    /// The reason, without the location.
    pub msg: String,
}

impl Error {
    pub(crate) fn at(loc: &Loc, msg: impl Into<String>) -> Self {
        Error {
            file: loc.file.to_path_buf(),
            line: loc.line,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.msg)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.msg)
        }
    }
}

impl std::error::Error for Error {}

/// A whole configuration: every `server:` clause merged, the `auth-zone:`, `forward-zone:`
/// and `stub-zone:` clauses, every `api:` and every `audit:` clause merged, and the warnings
/// found while reading it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// All `server:` clauses, merged in file order (a later value replaces an earlier one;
    /// list directives accumulate).
    pub server: Server,
    /// The `auth-zone:` clauses, in file order.
    pub auth_zones: Vec<AuthZone>,
    /// The `forward-zone:` and `stub-zone:` clauses, both kinds in one list, in file order
    /// ([`ForwardZone::kind`] tells them apart).
    pub forward_zones: Vec<ForwardZone>,
    /// All `api:` clauses, merged in file order like `server:`. **Not an Unbound clause.**
    pub api: Api,
    /// All `audit:` clauses, merged in file order like `server:`. **Not an Unbound clause.**
    pub audit: Audit,
    /// All `ha:` clauses, merged in file order like `server:`. **Not an Unbound clause.**
    pub ha: Ha,
    /// The `tsig-key:` clauses, in file order, names distinct. **Not an Unbound clause.**
    pub tsig_keys: Vec<TsigKey>,
    /// All `sync:` clauses, merged in file order like `server:`. **Not an Unbound clause.**
    pub sync: Sync,
    /// All `acme:` clauses, merged in file order. **Not an Unbound clause.**
    pub acme: Acme,
    /// Everything that was ignored or looked wrong, in file order (includes followed).
    pub warnings: Vec<Warning>,
    /// Every file read from disk, in the order first read, each once: the file given to
    /// [`parse_file`](crate::parse_file) and every included file. The virtual name given to
    /// [`parse_str`](crate::parse_str) is not in it.
    pub files: Vec<PathBuf>,
}

/// The `server:` directives this crate implements, with Unbound's defaults where Unbound has
/// one.
///
/// Values are kept as written where another crate interprets them (addresses, netblocks,
/// zone names, resource records); numbers, sizes and booleans are checked and converted
/// here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// `interface:` (alias `ip-address:`), in order: an IP address, `ip@port`, or an
    /// interface name, as written. Empty when none is given: the caller decides (Unbound
    /// listens on localhost).
    pub interfaces: Vec<Located<String>>,
    /// `port:`, 1-65535. Default 53.
    pub port: u16,
    /// `do-ip4:`. Default yes.
    pub do_ip4: bool,
    /// `do-ip6:`. Default yes.
    pub do_ip6: bool,
    /// `do-udp:`. Default yes.
    pub do_udp: bool,
    /// `do-tcp:`. Default yes.
    pub do_tcp: bool,
    /// `num-threads:`, at least 1. Default 1.
    pub num_threads: usize,
    /// `so-reuseport:`. Default yes.
    pub so_reuseport: bool,
    /// `ip-freebind:`: listen with `IP_FREEBIND`, so that an `interface:` address the host
    /// does not hold (yet, or at the moment) can be bound. Default no.
    pub ip_freebind: bool,
    /// `so-rcvbuf:` in bytes (a size: `4m`, `512k`, `1g`, powers of 1024, as Unbound).
    /// `None` when not given or 0 (0 means "system value" in Unbound).
    pub so_rcvbuf: Option<usize>,
    /// `so-sndbuf:` in bytes, like [`so_rcvbuf`](Self::so_rcvbuf).
    pub so_sndbuf: Option<usize>,
    /// `access-control: <netblock> <action>`, both as written, in order.
    pub access_control: Vec<Located<(String, String)>>,
    /// `local-zone: <name> <type>`, both as written, in order.
    pub local_zones: Vec<Located<(String, String)>>,
    /// `local-data:` resource records as written (one quoted string; an unquoted value is
    /// the rest of the line joined with single spaces), in order.
    pub local_data: Vec<Located<String>>,
    /// `local-data-ptr: "<address> <name>"` as written, in order.
    pub local_data_ptr: Vec<Located<String>>,
    /// `identity:` as written. `Some("")` means the default (the host name) in Unbound.
    pub identity: Option<String>,
    /// `version:` as written. `Some("")` means the default (the package version) in Unbound.
    pub version: Option<String>,
    /// `hide-identity:`. Default no.
    pub hide_identity: bool,
    /// `hide-version:`. Default no.
    pub hide_version: bool,
    /// `verbosity:`, 0-255 (Unbound uses 0-5). Default 1.
    pub verbosity: u8,
    /// `edns-buffer-size:`, 512-65535. Default 1232 (Unbound's, the DNS Flag Day 2020 value).
    pub edns_buffer_size: u16,
    /// `tcp-idle-timeout:` in milliseconds. Default 30000.
    pub tcp_idle_timeout_ms: u64,
    /// `incoming-num-tcp:`. Default 1000 (Unbound's is 10). Unbound allocates this many
    /// incoming TCP buffers per thread; skuad treats it as the number of stream connections
    /// (TCP, TLS, HTTPS, QUIC) per thread. An idle connection costs skuad 14 to 33 KiB and
    /// a descriptor, not a 64 KiB buffer; clients that keep their DNS over TLS or HTTPS
    /// connections open (as phones do) need one each.
    pub incoming_num_tcp: usize,
    /// `max-udp-size:`, 512-65535 (Unbound's `65536`, "no maximum", is stored as 65535).
    /// Default 4096, as Unbound 1.17 (the reply limit is the client's EDNS size capped by this).
    pub max_udp_size: u16,
    /// `minimal-responses:`. Default yes (as in Unbound 1.17).
    pub minimal_responses: bool,
    /// `cpu-affinity:` as written, parsed by the daemon. **Not an Unbound directive**: Unbound
    /// rejects it, so a configuration that uses it is skuad-only.
    pub cpu_affinity: Option<String>,
    /// `logfile:` as written (`Some("")` is Unbound's "stderr").
    pub logfile: Option<String>,
    /// `use-syslog:`. Default yes (Unbound's default).
    pub use_syslog: bool,
    /// `username:` as written. `Some("")` means "do not change user" in Unbound; `None`
    /// means Unbound's compiled-in default.
    pub username: Option<String>,
    /// `chroot:` as written. `Some("")` means "no chroot" in Unbound.
    pub chroot: Option<String>,
    /// `directory:` as written. Also used, as Unbound does, as the base of relative include
    /// paths that follow it (see [`parse_file`](crate::parse_file)).
    pub directory: Option<String>,
    /// `pidfile:` as written.
    pub pidfile: Option<String>,
    /// The `rrl-*:` directives: response rate limiting. **Not Unbound directives**: Unbound
    /// rejects them, so a configuration that uses them is skuad-only.
    pub rrl: Rrl,

    // The cache and the upstream side (the caching forwarder).
    /// `tls-cert-bundle:` (alias `ssl-cert-bundle:`) path as written: the PEM file of CA
    /// certificates that upstream TLS certificates are checked against. `None` (the
    /// default) and `Some("")`: no file, as in Unbound (then only the system store, with
    /// [`tls_system_cert`](Self::tls_system_cert), authenticates upstreams).
    pub tls_cert_bundle: Option<Located<String>>,
    /// `tls-system-cert:` (alias `tls-win-cert:`): also trust the system's CA store.
    /// Default no.
    pub tls_system_cert: bool,
    /// `tls-service-key:` (alias `ssl-service-key:`): the private key (PEM) of the DNS over
    /// TLS service (RFC 7858). With `tls-service-pem:`, an `interface:` on `tls-port:`
    /// serves DNS over TLS.
    pub tls_service_key: Option<Located<String>>,
    /// `tls-service-pem:` (alias `ssl-service-pem:`): its certificate chain (PEM).
    pub tls_service_pem: Option<Located<String>>,
    /// `tls-port:` (alias `ssl-port:`): an `interface:` on this port serves DNS over TLS
    /// instead of plain DNS. Default 853.
    pub tls_port: u16,
    /// `pad-responses:`: pad responses to encrypted clients that ask (EDNS padding, RFC
    /// 7830, with the block size of RFC 8467 §4.1). Default yes.
    pub pad_responses: bool,
    /// `pad-responses-block-size:`. Default 468.
    pub pad_responses_block_size: u16,
    /// `https-port:`: an `interface:` on this port serves DNS over HTTPS (RFC 8484), over
    /// TLS with the `tls-service-*` certificate, or plain with `http-notls-downstream:`.
    /// Default 443.
    pub https_port: u16,
    /// `http-endpoint:`: the path DNS over HTTPS answers on. Default `/dns-query`.
    pub http_endpoint: String,
    /// `http-max-streams:`: concurrent HTTP/2 streams per connection (the
    /// SETTINGS_MAX_CONCURRENT_STREAMS skuad announces). Default 100, as Unbound.
    pub http_max_streams: u32,
    /// `http-query-buffer-size:`: bytes of DNS over HTTPS queries held at once, all
    /// connections together (a request past it is answered 503). Default 4 MiB.
    pub http_query_buffer_size: usize,
    /// `http-response-buffer-size:`: bytes of DNS over HTTPS answers waiting to be sent,
    /// all connections together (past it, 503). Default 4 MiB.
    pub http_response_buffer_size: usize,
    /// `http-notls-downstream:`: DNS over HTTPS without TLS on `https-port:` (behind a
    /// proxy that terminates TLS). Default no.
    pub http_notls_downstream: bool,
    /// `quic-port:`: an `interface:` on this port serves DNS over QUIC (RFC 9250) over UDP
    /// when a certificate is configured. Default 853 (beside DNS over TLS on TCP, as
    /// Unbound 1.20+).
    pub quic_port: u16,
    /// Where `quic-port:` was written (the last time), for the errors and warnings about it.
    pub quic_port_loc: Option<Loc>,
    /// `tcp-connection-limit: NETBLOCK LIMIT` entries, as written: at most LIMIT
    /// connections at once from the netblock over TCP, TLS and HTTPS (further ones are
    /// closed at once), as Unbound.
    pub tcp_connection_limits: Vec<Located<ConnectionLimit>>,
    /// `tcp-connection-limit-per-source: N` (not Unbound's): at most N stream connections
    /// at once from one source (an IPv4 address, an IPv6 /56) that no
    /// `tcp-connection-limit:` netblock names. Default 100; 0: no limit.
    pub tcp_connection_limit_per_source: u32,
    /// `msg-cache-size:` in bytes (a size: `4m`, `512k`, as `so-rcvbuf:`; 0 is kept as 0).
    /// Default 4 MiB.
    pub msg_cache_size: usize,
    /// `msg-cache-slabs:`, a power of 2: the message cache's shards. Default 4.
    pub msg_cache_slabs: usize,
    /// `rrset-cache-size:` in bytes, like [`msg_cache_size`](Self::msg_cache_size). Default
    /// 4 MiB.
    pub rrset_cache_size: usize,
    /// `rrset-cache-slabs:`, a power of 2: the RRset cache's shards. Default 4.
    pub rrset_cache_slabs: usize,
    /// `cache-min-ttl:` in seconds: cached TTLs are raised to at least this. Default 0.
    pub cache_min_ttl: u32,
    /// `cache-max-ttl:` in seconds: cached TTLs are lowered to at most this. Default 86400.
    pub cache_max_ttl: u32,
    /// `cache-max-negative-ttl:` in seconds: the most a negative answer (NXDOMAIN, NODATA)
    /// is cached. Default 3600.
    pub cache_max_negative_ttl: u32,
    /// `prefetch:`: refresh a cached answer asked for in the last 10 % of its TTL. Default
    /// no.
    pub prefetch: bool,
    /// `serve-expired:`: answer from expired cache entries (RFC 8767). Default no.
    pub serve_expired: bool,
    /// `serve-expired-ttl:` in seconds: how long past expiry an entry may be served; 0 (the
    /// default) is no limit.
    pub serve_expired_ttl: u32,
    /// `serve-expired-ttl-reset:`: a failed refresh of an expired entry restarts its
    /// `serve-expired-ttl`. Default no.
    pub serve_expired_ttl_reset: bool,
    /// `serve-expired-reply-ttl:` in seconds: the TTL of an expired answer. Default 30.
    pub serve_expired_reply_ttl: u32,
    /// `serve-expired-client-timeout:` in milliseconds: how long to try the upstreams
    /// before an expired answer is sent; 0 (the default in Unbound 1.17) sends it at once.
    pub serve_expired_client_timeout_ms: u32,
    /// `outgoing-range:`, at least 1: the outgoing UDP ports open per thread. Default 4096
    /// (Unbound built with libevent, as distributions ship it; 960 without).
    pub outgoing_range: usize,
    /// `outgoing-port-permit:` and `outgoing-port-avoid:`, both kinds in one list in file
    /// order, because they apply in order, as Unbound (a later rule overrides an earlier one
    /// for the ports they share). Empty (the default): Unbound's ports, 1024-65535 without
    /// the IANA-assigned ones.
    pub outgoing_port_rules: Vec<Located<PortRule>>,
    /// `use-caps-for-id:`: random letter case in upstream questions (0x20), checked in the
    /// reply. Default no.
    pub use_caps_for_id: bool,
    /// `caps-exempt:` (alias `caps-whitelist:`) domain names as written, in order: names
    /// under them are asked without 0x20. Repeatable.
    pub caps_exempt: Vec<Located<String>>,
    /// `do-not-query-localhost:`: never send queries to 127.0.0.0/8 or ::1. Default **yes**
    /// (so a forwarder on localhost needs `do-not-query-localhost: no`, as in Unbound).
    pub do_not_query_localhost: bool,
    /// `unwanted-reply-threshold:`: after this many unwanted replies the caches are flushed
    /// (a defence against spoofing); 0 (the default) is never.
    pub unwanted_reply_threshold: u64,
    /// `tcp-upstream:`: every upstream query over TCP. Default no.
    pub tcp_upstream: bool,
    /// `tls-upstream:` (alias `ssl-upstream:`): every upstream query over TLS (RFC 7858).
    /// Default no.
    pub tls_upstream: bool,
    /// `infra-host-ttl:` in seconds: how long what is learned about an upstream (RTT,
    /// EDNS, lameness) is kept. Default 900.
    pub infra_host_ttl: u32,
    /// `num-queries-per-thread:`, at least 1: the questions one thread works on at once.
    /// Default 1024 (Unbound built with libevent; 512 without).
    pub num_queries_per_thread: usize,
    /// `jostle-timeout:` in milliseconds: when the query list is full, a query older than
    /// this may be replaced by a new one. Default 200.
    pub jostle_timeout_ms: u32,
    /// `ede:`: add Extended DNS Errors (RFC 8914) to error answers. Default no.
    pub ede: bool,
    /// `ede-serve-expired:`: add EDE 3 (Stale Answer) to expired answers. Default no.
    pub ede_serve_expired: bool,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            interfaces: Vec::new(),
            port: 53,
            do_ip4: true,
            do_ip6: true,
            do_udp: true,
            do_tcp: true,
            num_threads: 1,
            so_reuseport: true,
            ip_freebind: false,
            so_rcvbuf: None,
            so_sndbuf: None,
            access_control: Vec::new(),
            local_zones: Vec::new(),
            local_data: Vec::new(),
            local_data_ptr: Vec::new(),
            identity: None,
            version: None,
            hide_identity: false,
            hide_version: false,
            verbosity: 1,
            edns_buffer_size: 1232,
            tcp_idle_timeout_ms: 30_000,
            incoming_num_tcp: 1000,
            max_udp_size: 4096,
            minimal_responses: true,
            cpu_affinity: None,
            logfile: None,
            use_syslog: true,
            username: None,
            chroot: None,
            directory: None,
            pidfile: None,
            rrl: Rrl::default(),
            tls_cert_bundle: None,
            tls_system_cert: false,
            tls_service_key: None,
            tls_service_pem: None,
            tls_port: 853,
            pad_responses: true,
            pad_responses_block_size: 468,
            https_port: 443,
            http_endpoint: "/dns-query".into(),
            http_max_streams: 100,
            http_query_buffer_size: 4 << 20,
            http_response_buffer_size: 4 << 20,
            http_notls_downstream: false,
            quic_port: 853,
            quic_port_loc: None,
            tcp_connection_limits: Vec::new(),
            tcp_connection_limit_per_source: 100,
            msg_cache_size: 4 << 20,
            msg_cache_slabs: 4,
            rrset_cache_size: 4 << 20,
            rrset_cache_slabs: 4,
            cache_min_ttl: 0,
            cache_max_ttl: 86_400,
            cache_max_negative_ttl: 3600,
            prefetch: false,
            serve_expired: false,
            serve_expired_ttl: 0,
            serve_expired_ttl_reset: false,
            serve_expired_reply_ttl: 30,
            serve_expired_client_timeout_ms: 0,
            outgoing_range: 4096,
            outgoing_port_rules: Vec::new(),
            use_caps_for_id: false,
            caps_exempt: Vec::new(),
            do_not_query_localhost: true,
            unwanted_reply_threshold: 0,
            tcp_upstream: false,
            tls_upstream: false,
            infra_host_ttl: 900,
            num_queries_per_thread: 1024,
            jostle_timeout_ms: 200,
            ede: false,
            ede_serve_expired: false,
        }
    }
}

/// One `outgoing-port-permit:` or `outgoing-port-avoid:`: a port (`low == high`) or a
/// range `low-high`, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRule {
    /// Permit or avoid.
    pub action: PortAction,
    /// The first port of the range.
    pub low: u16,
    /// The last port of the range (`>= low`).
    pub high: u16,
}

/// What a [`PortRule`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortAction {
    /// `outgoing-port-permit:`: the ports may be used.
    Permit,
    /// `outgoing-port-avoid:`: the ports are not used.
    Avoid,
}

/// Response rate limiting: the `rrl-*:` directives of `server:`, BIND 9's `rate-limit`
/// options under unbound.conf-style names. **Not Unbound directives**: Unbound rejects them,
/// so a configuration that uses them is skuad-only.
///
/// The engine declares these settings, with BIND's defaults and meanings
/// ([`skua_engine::rrl::RrlConfig`]); the reader checks each value's range as it reads it and
/// keeps `rrl-exempt-clients:` netblocks as written, with their lines (the daemon interprets
/// them). RRL is off when every rate is 0 ([`enabled`](skua_engine::rrl::RrlConfig::enabled)).
pub type Rrl = skua_engine::rrl::RrlConfig<Located<String>>;

/// The `api:` clause: skuad's REST API. **Not an Unbound clause**: Unbound rejects it, so a
/// configuration that uses it is skuad-only. Several `api:` clauses merge like `server:` (a
/// later value replaces an earlier one; list directives accumulate).
///
/// Addresses, tokens and paths are kept as written, with their locations: the daemon
/// interprets them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Api {
    /// `enable:`. Default yes.
    pub enable: bool,
    /// `interface:`, in order: an IP address or `ip@port`, as written. Empty when none is
    /// given: the daemon listens on `127.0.0.1@8053`.
    pub interfaces: Vec<Located<String>>,
    /// `port:`, 1-65535: the port of interfaces without `@port`. Default 8053.
    pub port: u16,
    /// `token: "NAME ROLE SECRET"` as written (one quoted string, or the rest of the line
    /// joined with single spaces), in order. Checked here: three words, ROLE one of `read`,
    /// `dns`, `operator`, `admin`, SECRET `sha256:` and 64 hex digits, `env:VAR` or
    /// `file:PATH`. The daemon parses it.
    pub tokens: Vec<Located<String>>,
    /// `tls-cert:` path as written (PEM certificate chain). Given with
    /// [`tls_key`](Self::tls_key) or not at all; neither: plain HTTP.
    pub tls_cert: Option<Located<String>>,
    /// `tls-key:` path as written (PEM private key). Given with [`tls_cert`](Self::tls_cert)
    /// or not at all.
    pub tls_key: Option<Located<String>>,
    /// `max-body:` in bytes (a size: `1m`, `64k`, as `so-rcvbuf:`), at least 1k: the largest
    /// request body accepted. Default 1 MiB.
    pub max_body: usize,
    /// `auth-fail-limit:`: failed authentications per source address per minute before the
    /// API answers 429 Too Many Requests. Default 10.
    pub auth_fail_limit: u32,
    /// `state-file:` path as written: where changes made through the API to zones and
    /// records are persisted. `None` (the default): the daemon decides.
    pub state_file: Option<Located<String>>,
    /// `max-connections:`, 1-4096: API connections open at once, all sources together.
    /// Default 64.
    pub max_connections: u32,
    /// `max-connections-per-source:`, 1-4096: API connections open at once from one source
    /// (an IPv4 address, an IPv6 /64). Default 8.
    pub max_connections_per_source: u32,
    /// `control-socket:` path as written: the local control socket (UNIX, the API's routes
    /// with the caller known by its credentials, no token). `None` (the default): the
    /// daemon decides (`/run/skua/control.sock` as root, else under `$XDG_RUNTIME_DIR`);
    /// `Some("")` after `control-socket: no` or `""`: none.
    pub control_socket: Option<Located<String>>,
    /// `control-socket-group:` a group name or number: the socket is made mode 0660 with
    /// that group and its members get [`control_socket_group_role`](Self::control_socket_group_role).
    /// `None` (the default): mode 0600, the daemon's user and root only.
    pub control_socket_group: Option<Located<String>>,
    /// `control-socket-group-role:` one of `read`, `dns`, `operator`, `admin`: the role of
    /// the group's members on the control socket. Default `operator`.
    pub control_socket_group_role: String,
}

impl Default for Api {
    fn default() -> Self {
        Api {
            enable: true,
            interfaces: Vec::new(),
            port: 8053,
            tokens: Vec::new(),
            tls_cert: None,
            tls_key: None,
            max_body: 1 << 20,
            auth_fail_limit: 10,
            state_file: None,
            max_connections: 64,
            max_connections_per_source: 8,
            control_socket: None,
            control_socket_group: None,
            control_socket_group_role: "operator".into(),
        }
    }
}

/// The `audit:` clause: skuad's signed audit log. **Not an Unbound clause**: Unbound rejects
/// it, so a configuration that uses it is skuad-only. Several `audit:` clauses merge like
/// `server:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    /// `log:` path as written. `None` (the default): no audit log. When set, at least one
    /// [`keys`](Self::keys) entry is required.
    pub log: Option<Located<String>>,
    /// `key:` as written, `file:PATH` or `env:VAR`, in order. The **last** one is the current
    /// signing key ([`current_key`](Self::current_key)); earlier ones are older keys kept to
    /// verify entries signed before a rotation.
    pub keys: Vec<Located<String>>,
    /// `checkpoint-every:`, at least 1: entries between checkpoints. Default 1000.
    pub checkpoint_every: u64,
    /// `fsync:` `entry` or `batch`. Default [`AuditFsync::Entry`].
    pub fsync: AuditFsync,
}

impl Default for Audit {
    fn default() -> Self {
        Audit {
            log: None,
            keys: Vec::new(),
            checkpoint_every: 1000,
            fsync: AuditFsync::Entry,
        }
    }
}

impl Audit {
    /// The current signing key: the last `key:`.
    pub fn current_key(&self) -> Option<&Located<String>> {
        self.keys.last()
    }
}

/// The `ha:` clause: service addresses that skuad answers only while the host agent
/// (`skua-agent`, VRRP) holds a lease on them for this node. **Not an Unbound clause.**
/// Several `ha:` clauses merge like `server:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ha {
    /// `address:` an IP address, or `ip@port`, as written, in order: listened on (UDP and
    /// TCP, bound even while the host does not hold the address) and answered only under
    /// a lease.
    pub addresses: Vec<Located<String>>,
    /// `lease-max:` in milliseconds, 10-60000: the longest lease skuad grants, whatever the
    /// agent asks (a bound on how long a node can answer after its agent stopped renewing).
    /// Default 1000.
    pub lease_max_ms: u32,
}

impl Default for Ha {
    fn default() -> Self {
        Ha {
            addresses: Vec::new(),
            lease_max_ms: 1000,
        }
    }
}

/// The `sync:` clause: this node follows another skuad (the master of an HA pair, or the
/// source of a group), pulling through that node's API its API-made zones and records and
/// the text of one shared configuration file. **Not an Unbound clause.** Several `sync:`
/// clauses merge like `server:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sync {
    /// `from:` the source's API, `http://HOST:PORT` or `https://HOST:PORT`, as written, in
    /// order (with `ha:` addresses, the one holding the lease is followed).
    pub from: Vec<Located<String>>,
    /// `token-file:` a file holding the bearer token for the sources' APIs (role `operator`
    /// there). Required with `from:`.
    pub token_file: Option<Located<String>>,
    /// `shared-config:` the configuration file that is replicated: served by a source,
    /// replaced (and reloaded) on a follower. It must be included by the configuration.
    pub shared_config: Option<Located<String>>,
    /// `tls-ca:` a PEM file of the certificate authorities an `https://` source's
    /// certificate must chain to (default: refuse `https://` without it).
    pub tls_ca: Option<Located<String>>,
    /// `wait:` seconds a source holds a request while nothing changed (1-25, default 20):
    /// changes reach the follower at once, and an idle follower asks once per `wait:`.
    pub wait_s: u32,
}

impl Default for Sync {
    fn default() -> Self {
        Sync {
            from: Vec::new(),
            token_file: None,
            shared_config: None,
            tls_ca: None,
            wait_s: 20,
        }
    }
}

/// How an ACME server is shown that skuad controls a name (RFC 8555 §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AcmeChallenge {
    /// HTTP-01 (RFC 8555 §8.3): a token served on port 80 (`http-01-interface:`).
    #[default]
    Http01,
    /// TLS-ALPN-01 (RFC 8737): a certificate shown on the DNS over TLS or HTTPS port to
    /// clients asking for ALPN `acme-tls/1`.
    TlsAlpn01,
    /// DNS-01 (RFC 8555 §8.4): a TXT record at `_acme-challenge.NAME` in skuad's own data
    /// (skuad must answer for the name's zone).
    Dns01,
}

/// The `acme:` clause: skuad obtains and renews the certificate of `tls-service-pem:` and
/// `tls-service-key:` itself over ACME (RFC 8555). **Not an Unbound clause.**
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acme {
    /// `directory:` the ACME server's directory URL (`https://...`). Required for the
    /// clause to do anything.
    pub directory: Option<Located<String>>,
    /// `contact:` URLs for the account (`mailto:ops@example.net`), in order.
    pub contacts: Vec<Located<String>>,
    /// `name:` the DNS names the certificate is for, in order (the first is its subject).
    pub names: Vec<Located<String>>,
    /// `challenge:` `http-01` (default), `tls-alpn-01` or `dns-01`.
    pub challenge: AcmeChallenge,
    /// `http-01-interface:` where HTTP-01 tokens are served, `ADDR@PORT` (default
    /// `0.0.0.0@80`), during validations only.
    pub http_interface: Option<Located<String>>,
    /// `ca-bundle:` PEM certificate authorities the ACME server's HTTPS must chain to
    /// (default: the public web roots).
    pub ca_bundle: Option<Located<String>>,
    /// `account-file:` where the account's key and URL are kept (mode 0600; default
    /// `acme-account.json` beside `tls-service-key:`).
    pub account_file: Option<Located<String>>,
    /// `profile:` the certificate profile asked for in each order (draft-ietf-acme-profiles,
    /// e.g. Let's Encrypt's `shortlived`); none: the server's default. It must be one the
    /// directory lists (checked against the directory before each order).
    pub profile: Option<Located<String>>,
}

/// `fsync:` in `audit:`: when the audit log is flushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuditFsync {
    /// `entry`: after every entry (the default).
    #[default]
    Entry,
    /// `batch`: once per batch of entries written together.
    Batch,
}

/// One `auth-zone:` clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthZone {
    /// `name:`, the zone's apex, as written. Required.
    pub name: Located<String>,
    /// `zonefile:` as written (relative to the working directory in Unbound).
    pub zonefile: Option<Located<String>>,
    /// `for-downstream:`. Default yes.
    pub for_downstream: bool,
    /// `for-upstream:`. Default yes.
    pub for_upstream: bool,
    /// `fallback-enabled:`. Default no.
    pub fallback_enabled: bool,
    /// The primaries to transfer the zone from (skuad as a secondary), in order, as
    /// (ADDR[@PORT], KEY) written: Unbound's `primary:` (alias `master:`) with an optional
    /// `tsig-key:` name after the address (`NOKEY` when absent), and NSD's
    /// `request-xfr: ADDR KEY`.
    pub primaries: Vec<Located<(String, String)>>,
    /// `provide-xfr:` (NETBLOCK, KEY) as written, in order: who may transfer the zone, with
    /// a `tsig-key:` name, `NOKEY` or `BLOCKED`. **skuad only** (NSD's directive).
    pub provide_xfr: Vec<Located<(String, String)>>,
    /// `notify:` (ADDR[@PORT], KEY) as written, in order: secondaries to NOTIFY, with a
    /// `tsig-key:` name or `NOKEY`. **skuad only** (NSD's directive).
    pub notify: Vec<Located<(String, String)>>,
    /// `ixfr-number:` 0-10000: diffs kept for IXFR. Default 100.
    pub ixfr_number: u32,
    /// `ixfr-size:` bytes of records kept for IXFR. Default 1 MiB.
    pub ixfr_size: usize,
    /// `allow-notify:` (NETBLOCK, KEY) as written: who may NOTIFY the zone's secondary
    /// (Unbound's directive, with NSD's key; `NOKEY` when absent).
    pub allow_notify: Vec<Located<(String, String)>>,
    /// `size-limit-xfr:` (NSD's): bytes one incoming transfer may bring. Default
    /// [`DEFAULT_SIZE_LIMIT_XFR`].
    pub size_limit_xfr: usize,
    /// `xfr-max-records:` (skuad's): records one incoming transfer may bring. Default
    /// [`DEFAULT_XFR_MAX_RECORDS`].
    pub xfr_max_records: usize,
    /// Where the `auth-zone:` line is.
    pub loc: Loc,
}

impl AuthZone {
    /// An auth zone with Unbound's defaults, named `name`, opened at `loc`.
    pub fn new(name: Located<String>, loc: Loc) -> Self {
        AuthZone {
            name,
            zonefile: None,
            for_downstream: true,
            for_upstream: true,
            fallback_enabled: false,
            primaries: Vec::new(),
            provide_xfr: Vec::new(),
            notify: Vec::new(),
            ixfr_number: 100,
            ixfr_size: 1 << 20,
            allow_notify: Vec::new(),
            size_limit_xfr: DEFAULT_SIZE_LIMIT_XFR,
            xfr_max_records: DEFAULT_XFR_MAX_RECORDS,
            loc,
        }
    }
}

/// `size-limit-xfr:`'s default: 100 MiB.
pub const DEFAULT_SIZE_LIMIT_XFR: usize = 100 << 20;
/// `xfr-max-records:`'s default: one million.
pub const DEFAULT_XFR_MAX_RECORDS: usize = 1_000_000;

/// One `tsig-key:` clause: a shared key for TSIG (RFC 8945). **Not an Unbound clause**
/// (NSD's `key:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsigKey {
    /// `name:` as written (a domain name). Required; no two clauses share one (compared
    /// case-insensitively, trailing dot optional).
    pub name: Located<String>,
    /// `algorithm:`, lower case without a trailing dot: `hmac-sha256` (the default and the
    /// only one accepted).
    pub algorithm: String,
    /// `secret:` as written, `file:PATH` or `env:VAR` (never the secret itself). Required.
    pub secret: Located<String>,
    /// Where the `tsig-key:` line is.
    pub loc: Loc,
}

/// Whether a [`ForwardZone`] came from `forward-zone:` or `stub-zone:`: the resolver core's
/// type, declared once.
pub use skua_resolver::forward::ZoneKind;

/// One `forward-zone:` or `stub-zone:` clause. The directive names below are the forward
/// ones; a stub zone has the same with `stub-` (`stub-addr:`, `stub-first:`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardZone {
    /// Which clause this is.
    pub kind: ZoneKind,
    /// `name:`, the zone, as written (`"."` forwards everything). Required. The daemon
    /// converts it to a wire name and reports errors at its location.
    pub name: Located<String>,
    /// `forward-addr:` / `stub-addr:`, in order: `IP`, `IP@PORT`, `IP#TLS-NAME` or
    /// `IP@PORT#TLS-NAME`, checked and parsed here.
    pub addrs: Vec<Located<UpstreamAddr>>,
    /// `forward-host:` / `stub-host:`, in order: `NAME`, `NAME@PORT`, `NAME#TLS-NAME` or
    /// `NAME@PORT#TLS-NAME`; the port is checked here, the name is kept as written.
    pub hosts: Vec<Located<UpstreamHost>>,
    /// `forward-first:` / `stub-first:`: if the upstreams fail, resolve the name by
    /// recursion instead. Default no.
    pub first: bool,
    /// `forward-no-cache:` / `stub-no-cache:`: answers from this zone are not cached.
    /// Default no.
    pub no_cache: bool,
    /// `forward-tls-upstream:` / `stub-tls-upstream:` (aliases `forward-ssl-upstream:`,
    /// `stub-ssl-upstream:`): queries to this zone's upstreams over TLS. Default no.
    pub tls_upstream: bool,
    /// `forward-tcp-upstream:` / `stub-tcp-upstream:`: queries to this zone's upstreams
    /// over TCP. Default no.
    pub tcp_upstream: bool,
    /// `stub-prime:` (stub zones only; always `false` for forward zones): ask the stub
    /// servers for the zone's NS set and use that. Default no.
    pub prime: bool,
    /// Where the `forward-zone:` or `stub-zone:` line is.
    pub loc: Loc,
}

impl ForwardZone {
    /// A zone of `kind` with Unbound's defaults, named `name`, opened at `loc`, with no
    /// upstreams.
    pub fn new(kind: ZoneKind, name: Located<String>, loc: Loc) -> Self {
        ForwardZone {
            kind,
            name,
            addrs: Vec::new(),
            hosts: Vec::new(),
            first: false,
            no_cache: false,
            tls_upstream: false,
            tcp_upstream: false,
            prime: false,
            loc,
        }
    }
}

/// A `forward-addr:` or `stub-addr:` value: `IP[@PORT][#TLS-NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamAddr {
    /// The address.
    pub ip: IpAddr,
    /// `@PORT`, 1-65535, if given (see [`port_or_default`](Self::port_or_default)).
    pub port: Option<u16>,
    /// `#TLS-NAME`, if given: the name the upstream's TLS certificate must carry.
    pub tls_name: Option<String>,
}

impl UpstreamAddr {
    /// The port to use: `@PORT` if given, else 853 when a `#TLS-NAME` is given (Unbound's
    /// rule for `IP#NAME`), else 53. Note that, as in Unbound, `forward-tls-upstream: yes`
    /// alone does not change the port of an address written without `@` or `#`.
    pub fn port_or_default(&self) -> u16 {
        self.port
            .unwrap_or(if self.tls_name.is_some() { 853 } else { 53 })
    }

    /// The address and [`port_or_default`](Self::port_or_default).
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port_or_default())
    }
}

impl fmt::Display for UpstreamAddr {
    /// As written in the configuration (`IP[@PORT][#TLS-NAME]`), without brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.ip)?;
        if let Some(port) = self.port {
            write!(f, "@{port}")?;
        }
        if let Some(name) = &self.tls_name {
            write!(f, "#{name}")?;
        }
        Ok(())
    }
}

/// A `forward-host:` or `stub-host:` value: `NAME[@PORT][#TLS-NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamHost {
    /// The host name, as written (the daemon converts and resolves it).
    pub name: String,
    /// `@PORT`, 1-65535, if given (without it: 853 when a `#TLS-NAME` is given, else 53,
    /// as for [`UpstreamAddr::port_or_default`]).
    pub port: Option<u16>,
    /// `#TLS-NAME`, if given: the name the upstream's TLS certificate must carry.
    pub tls_name: Option<String>,
}

impl UpstreamHost {
    /// The port to use, as [`UpstreamAddr::port_or_default`].
    pub fn port_or_default(&self) -> u16 {
        self.port
            .unwrap_or(if self.tls_name.is_some() { 853 } else { 53 })
    }
}

impl fmt::Display for UpstreamHost {
    /// As written in the configuration (`NAME[@PORT][#TLS-NAME]`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(port) = self.port {
            write!(f, "@{port}")?;
        }
        if let Some(name) = &self.tls_name {
            write!(f, "#{name}")?;
        }
        Ok(())
    }
}

/// A `sync: from:` source: `http://HOST:PORT` or `https://HOST:PORT` (HOST a name, an IPv4
/// address or a bracketed IPv6 address; no path, user or query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncUrl {
    /// `https://`.
    pub tls: bool,
    /// The host, without brackets.
    pub host: String,
    /// The port (default 443 for https, 80 for http).
    pub port: u16,
}

impl SyncUrl {
    /// Parses a `from:` value.
    ///
    /// # Errors
    ///
    /// What is wrong with it.
    pub fn parse(s: &str) -> Result<SyncUrl, String> {
        let (tls, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(format!(
                "'{s}': a sync source is http://HOST:PORT or https://HOST:PORT"
            ));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return Err(format!(
                "'{s}': only a scheme, a host and a port (no path, user or query)"
            ));
        }
        let default = if tls { 443 } else { 80 };
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, after) = r
                .split_once(']')
                .ok_or_else(|| format!("'{s}': unclosed '['"))?;
            h.parse::<std::net::Ipv6Addr>()
                .map_err(|_| format!("'{s}': '{h}' is not an IPv6 address"))?;
            let port = match after {
                "" => default,
                p => p
                    .strip_prefix(':')
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| format!("'{s}': bad port"))?,
            };
            (h.to_owned(), port)
        } else {
            match rest.split_once(':') {
                Some((h, p)) => (
                    h.to_owned(),
                    p.parse().map_err(|_| format!("'{s}': bad port '{p}'"))?,
                ),
                None => (rest.to_owned(), default),
            }
        };
        let name_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b':');
        if !name_ok || port == 0 {
            return Err(format!("'{s}': bad host or port"));
        }
        Ok(SyncUrl { tls, host, port })
    }
}

impl core::fmt::Display for SyncUrl {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}
