//! The data model: what a configuration says, at string level, with locations.

use std::fmt;
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

/// A whole configuration: every `server:` clause merged, the `auth-zone:` clauses, every
/// `api:` and every `audit:` clause merged, and the warnings found while reading it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// All `server:` clauses, merged in file order (a later value replaces an earlier one;
    /// list directives accumulate).
    pub server: Server,
    /// The `auth-zone:` clauses, in file order.
    pub auth_zones: Vec<AuthZone>,
    /// All `api:` clauses, merged in file order like `server:`. **Not an Unbound clause.**
    pub api: Api,
    /// All `audit:` clauses, merged in file order like `server:`. **Not an Unbound clause.**
    pub audit: Audit,
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
    /// `incoming-num-tcp:`. Default 10 (Unbound's). Unbound allocates this many incoming TCP
    /// buffers per thread; skuad treats it as the number of TCP connections per thread.
    /// 0 means no TCP service.
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
            incoming_num_tcp: 10,
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
        }
    }
}

/// Response rate limiting: the `rrl-*:` directives of `server:`, BIND 9's `rate-limit`
/// options under unbound.conf-style names. **Not Unbound directives**: Unbound rejects them,
/// so a configuration that uses them is skuad-only.
///
/// Rates are responses per second to one client netblock (see
/// [`ipv4_prefix_length`](Self::ipv4_prefix_length)) for one name and response kind, as in
/// BIND. The defaults are BIND's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rrl {
    /// `rrl-responses-per-second:`, answers (and, unless set on their own, NODATA,
    /// NXDOMAIN, referral and error responses). Default 0: no limit; RRL is off when every
    /// rate is 0 (see [`enabled`](Self::enabled)).
    pub responses_per_second: u32,
    /// `rrl-nodata-per-second:`, NODATA responses. `None` (the default): as
    /// [`responses_per_second`](Self::responses_per_second), as BIND.
    pub nodata_per_second: Option<u32>,
    /// `rrl-nxdomains-per-second:`, NXDOMAIN responses. `None` (the default): as
    /// [`responses_per_second`](Self::responses_per_second), as BIND.
    pub nxdomains_per_second: Option<u32>,
    /// `rrl-referrals-per-second:`, referrals (delegations). `None` (the default): as
    /// [`responses_per_second`](Self::responses_per_second), as BIND.
    pub referrals_per_second: Option<u32>,
    /// `rrl-errors-per-second:`, error responses (REFUSED, FORMERR, SERVFAIL). `None` (the
    /// default): as [`responses_per_second`](Self::responses_per_second), as BIND.
    pub errors_per_second: Option<u32>,
    /// `rrl-all-per-second:`, all responses to one netblock whatever the name. Default 0: no
    /// limit.
    pub all_per_second: u32,
    /// `rrl-window:` in seconds, 1-3600: the period over which rates are averaged. Default
    /// 15.
    pub window: u32,
    /// `rrl-slip:`, 0-10: every `slip`-th limited UDP response is sent truncated (TC=1)
    /// instead of dropped; 0 drops them all, 1 truncates them all. Default 2.
    pub slip: u8,
    /// `rrl-ipv4-prefix-length:`, 0-32: IPv4 clients are counted per netblock of this
    /// length. Default 24.
    pub ipv4_prefix_length: u8,
    /// `rrl-ipv6-prefix-length:`, 0-128: IPv6 clients are counted per netblock of this
    /// length. Default 56.
    pub ipv6_prefix_length: u8,
    /// `rrl-exempt-clients:` netblocks as written, in order (interpreted by the daemon):
    /// clients never rate limited. Repeatable.
    pub exempt_clients: Vec<Located<String>>,
    /// `rrl-qps-scale:`: when the total query rate exceeds this many queries per second,
    /// the rates are scaled down in proportion, as BIND. Default 0: no scaling.
    pub qps_scale: u32,
    /// `rrl-log-only:`. Default no; with yes, limited responses are logged and counted but
    /// still sent.
    pub log_only: bool,
    /// `rrl-max-table-size:`, at least 1: the most client/name entries tracked. Default
    /// 20000.
    pub max_table_size: usize,
    /// `rrl-min-table-size:`: the number of entries allocated at start. Default 500.
    pub min_table_size: usize,
}

impl Default for Rrl {
    fn default() -> Self {
        Rrl {
            responses_per_second: 0,
            nodata_per_second: None,
            nxdomains_per_second: None,
            referrals_per_second: None,
            errors_per_second: None,
            all_per_second: 0,
            window: 15,
            slip: 2,
            ipv4_prefix_length: 24,
            ipv6_prefix_length: 56,
            exempt_clients: Vec::new(),
            qps_scale: 0,
            log_only: false,
            max_table_size: 20_000,
            min_table_size: 500,
        }
    }
}

impl Rrl {
    /// Whether rate limiting is on: some rate is not 0 (`responses`, `nodata`, `nxdomains`,
    /// `referrals`, `errors` or `all` per second).
    pub fn enabled(&self) -> bool {
        self.responses_per_second != 0
            || self.all_per_second != 0
            || [
                self.nodata_per_second,
                self.nxdomains_per_second,
                self.referrals_per_second,
                self.errors_per_second,
            ]
            .iter()
            .any(|r| r.is_some_and(|r| r != 0))
    }
}

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
    /// `primary:` (alias `master:`) as written, in order. Kept so that the daemon can say
    /// that zone transfers are not supported.
    pub primaries: Vec<Located<String>>,
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
            loc,
        }
    }
}
