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

/// A whole configuration: every `server:` clause merged, the `auth-zone:` clauses, and the
/// warnings found while reading it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// All `server:` clauses, merged in file order (a later value replaces an earlier one;
    /// list directives accumulate).
    pub server: Server,
    /// The `auth-zone:` clauses, in file order.
    pub auth_zones: Vec<AuthZone>,
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
        }
    }
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
