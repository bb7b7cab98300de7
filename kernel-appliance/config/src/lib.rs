//! Reader for Unbound-style configuration files (unbound.conf(5)).
//!
//! `skua-config` turns a configuration file, and the files it includes, into a **string-level,
//! located** data model: [`Config`] with the merged `server:` clauses ([`Server`], with the
//! response rate limiting directives in [`Rrl`]), the `auth-zone:` clauses ([`AuthZone`]),
//! the `forward-zone:` and `stub-zone:` clauses ([`ForwardZone`], one list for both),
//! skuad's own `api:` ([`Api`]) and `audit:` ([`Audit`]) clauses, merged like `server:`, its
//! `tsig-key:` clauses ([`TsigKey`], NSD's `key:`), and a list of [`Warning`]s. Every value that another
//! crate interprets keeps the place it was written ([`Located`], [`Loc`]), so that crate can
//! report its own errors as `file:line: ...`.
//!
//! # What it does
//!
//! - The syntax of Unbound's lexer: `name: value` attributes (`name:value` too, and several
//!   on one line: `server: port: 53`); clauses are attributes without a value (`server:`);
//!   `#` starts a comment when it starts a word outside quotes (inside a word it is kept:
//!   `primary: 192.0.2.1@853#tls.example.`); values may be quoted with `"..."` or `'...'`
//!   (quotes removed, content verbatim, `""` is an empty value); indentation does not matter.
//! - `include:` and `include-toplevel:` with glob patterns, loop detection (see
//!   [`parse_file`] for how relative paths are resolved).
//! - Booleans (`yes`/`no`, any case), decimal numbers with range checks, memory sizes
//!   (`4m`, `512k`, `1g`), slab counts (powers of 2), the number of values each directive
//!   takes.
//! - `forward-zone:` and `stub-zone:` with every directive Unbound 1.17 knows in them.
//!   Upstream addresses (`forward-addr: 9.9.9.9@853#dns.quad9.net`) are parsed into
//!   [`UpstreamAddr`] (IP address, optional port, optional TLS name); upstream host names
//!   (`forward-host:`) into [`UpstreamHost`], the name kept as written. The `server:`
//!   directives of the cache and the upstream side (`msg-cache-size:`, `cache-max-ttl:`,
//!   `prefetch:`, `serve-expired*:`, `tls-cert-bundle:`, `tls-upstream:`,
//!   `outgoing-port-permit:`/`-avoid:` as [`PortRule`]s, ...) are read with Unbound's
//!   defaults. This crate only reads them: what the daemon does with them is its own
//!   business (see docs/configuration.md).
//! - Honesty about what is not implemented: every `server:` or `auth-zone:` directive that
//!   is known to Unbound but not implemented here gives a warning, one per occurrence
//!   (`'rrset-roundrobin' is not supported yet and is ignored`); a directive unknown to
//!   Unbound too gives a warning as well (Unbound would refuse to start); a clause that is
//!   not implemented (`view:`, `remote-control:`, ...) gives one warning with the number of
//!   directives it ignores. A `forward-zone:` or `stub-zone:` without any address or host
//!   gives a warning (Unbound accepts it). Nothing is dropped silently.
//! - Errors ([`Error`], displayed as `file:line: reason`) for what Unbound would refuse too:
//!   an attribute outside any clause, a missing value, a bad boolean or number, an
//!   unterminated quote, an unknown clause, an `auth-zone:`, `forward-zone:` or `stub-zone:`
//!   without `name:` or with two, a bad upstream address or port (`forward-addr:`,
//!   `stub-addr:`, the port of `forward-host:`/`stub-host:`), a slab count that is not a power
//!   of 2, an `outgoing-port-permit:`/`-avoid:` that is not a port or a `LOW-HIGH` range, an
//!   include that names a missing file or loops; and for skuad's own directives: a value out
//!   of range, an `api:` `token:` that is not `"NAME ROLE SECRET"` with a known role and a
//!   secret given as `sha256:HEX`, `env:VAR` or `file:PATH`, `tls-cert:` without `tls-key:`
//!   (or the reverse), an `audit:` `key:` that is not `file:PATH` or `env:VAR`, an audit
//!   `log:` without any `key:`; a `tsig-key:` without `name:` or `secret:`, with a second
//!   one, with a `secret:` that is not `file:PATH` or `env:VAR` (never repeated in the
//!   error), with an algorithm other than `hmac-sha256`, or with the name of another one;
//!   an auth-zone `provide-xfr:`/`notify:`/`request-xfr:` without its two values, an
//!   `ixfr-number:` above 10000, a `size-limit-xfr:` below 1k.
//!
//! # What it does not do
//!
//! - It does not interpret zone data: resource records (`local-data:`), netblocks and
//!   actions (`access-control:`), zone names and types (`local-zone:`, `auth-zone:`,
//!   `forward-zone:`, `stub-zone:` names, `forward-host:` names, `caps-exempt:`), interface
//!   addresses and zone files are kept as written. The crates that use them convert them and
//!   report errors with the kept locations.
//! - It does not resolve anything: `forward-host:` names are not looked up, the
//!   `tls-cert-bundle:` file is not read.
//! - It does not check cross-directive consistency (duplicate auth-zone or forward-zone
//!   names, a `forward-zone:` and a `stub-zone:` for the same name, a `local-data:` outside
//!   every `local-zone:`, `rrl-min-table-size:` above `rrl-max-table-size:`,
//!   `forward-tls-upstream:` without any `tls-cert-bundle:`, ...), except
//!   `tls-cert:`/`tls-key:` in `api:` and `log:`/`key:` in `audit:`.
//! - It does not open sockets, change directory, change user or chroot; `directory:`,
//!   `chroot:`, `username:`, `pidfile:`, `logfile:` are only stored. It reads no key, token
//!   or certificate: `api:` and `audit:` paths and `env:`/`file:` references are kept as
//!   written; RRL netblocks (`rrl-exempt-clients:`) too.
//!
//! # Differences from Unbound
//!
//! - Unknown directives are warnings, not errors.
//! - `cpu-affinity:` and the `rrl-*:` directives are accepted in `server:` (skuad directives;
//!   Unbound rejects them).
//! - The `api:`, `audit:` and `tsig-key:` clauses are skuad's (Unbound rejects them as
//!   unknown clauses). A directive they do not know is a warning, as in `server:` and
//!   `auth-zone:`. In `auth-zone:`, `provide-xfr:`, `notify:`, `request-xfr:`,
//!   `ixfr-number:`, `ixfr-size:` and `size-limit-xfr:` are NSD's directives and
//!   `xfr-max-records:` skuad's own (docs/zone-transfer.md); `primary:` (`master:`) and
//!   `allow-notify:` take an optional TSIG key name after the address (NSD's syntax);
//!   netblocks, addresses and key names in them are kept as written.
//! - A directive and its values must be on one line (Unbound lets values continue on the
//!   next lines); an unquoted `local-data:`/`local-data-ptr:` value takes the rest of the
//!   line.
//! - A relative include that matches nothing relative to the working directory is also
//!   looked up relative to the including file's directory.
//! - `max-udp-size:` defaults to 4096, as Unbound 1.17.
//! - Booleans are case-insensitive.
//! - Upstream addresses and ports are checked strictly: Unbound reads a port with `atoi`
//!   (`@53x` is 53, `@70000` wraps) and accepts port 0; here a port is 1-65535 in decimal,
//!   and a `#` TLS name must not be empty. An IPv6 scope (`fe80::1%eth0`) is refused.
//! - `outgoing-port-permit:`/`-avoid:` ranges must have `LOW <= HIGH` (Unbound ignores an
//!   empty range).
//!
//! # Example
//!
//! ```
//! let config = skua_config::parse_str(
//!     "server:\n  port: 5353\n  local-data: \"www.example. A 192.0.2.1\"\n  rrset-roundrobin: yes\n\
//!      forward-zone:\n  name: \".\"\n  forward-addr: 9.9.9.9@853#dns.quad9.net\n",
//!     "example.conf",
//! )
//! .unwrap();
//! assert_eq!(config.server.port, 5353);
//! assert_eq!(config.server.local_data[0].value, "www.example. A 192.0.2.1");
//! assert_eq!(config.server.local_data[0].loc.to_string(), "example.conf:3");
//! assert_eq!(
//!     config.warnings[0].to_string(),
//!     "example.conf:4: 'rrset-roundrobin' is not supported yet and is ignored"
//! );
//! let quad9 = &config.forward_zones[0].addrs[0].value;
//! assert_eq!(quad9.socket_addr().to_string(), "9.9.9.9:853");
//! assert_eq!(quad9.tls_name.as_deref(), Some("dns.quad9.net"));
//! ```

#![forbid(unsafe_code)]

mod directives;
mod lexer;
mod model;
mod parse;
pub mod state;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

pub use model::{
    Acme, AcmeChallenge, Api, Audit, AuditFsync, AuthZone, Config, ConnectionLimit,
    DEFAULT_SIZE_LIMIT_XFR, DEFAULT_XFR_MAX_RECORDS, Error, ForwardZone, Ha, Loc, Located,
    PortAction, PortRule, Rrl, Server, Sync, SyncUrl, TsigKey, UpstreamAddr, UpstreamHost, Warning,
    Written, ZoneKind,
};

/// The local control socket skuad makes when `control-socket:` is not set, and where
/// `skuactl` looks first: `/run/skua/control.sock` for root (the appliance, a system
/// service), else `$XDG_RUNTIME_DIR/skua/control.sock` (a user's own runtime directory,
/// mode 0700 by systemd-logind), else none.
pub fn default_control_socket(euid: u32, xdg_runtime_dir: Option<&str>) -> Option<PathBuf> {
    if euid == 0 {
        return Some(PathBuf::from("/run/skua/control.sock"));
    }
    xdg_runtime_dir
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join("skua/control.sock"))
}

/// Reads the configuration file at `path` and every file it includes.
///
/// # Includes
///
/// `include: <pattern>` may appear anywhere (also before the first clause, and inside a
/// clause: the included text continues that clause, as if pasted in). `include-toplevel:`
/// ends the current clause, and each file it includes starts and ends at top level, so the
/// lines after it need a clause line again.
///
/// The pattern is a file name or a glob(7) pattern (`*`, `?`, `[...]`, `{a,b}`, leading `~`;
/// `*` does not match a leading dot); matches are read in sorted order. A relative pattern
/// is looked up, like Unbound does:
///
/// 1. relative to the working directory of the process, or, once a `directory:` has been
///    read, relative to that directory (Unbound changes to it as soon as it reads it);
/// 2. **not like Unbound:** if that matches nothing, relative to the directory of the file
///    that contains the `include:`.
///
/// A file name without wildcards that exists in neither place is an error (as in Unbound);
/// a pattern with wildcards that matches nothing is only a warning. A file that includes
/// itself, directly or through other files, is an error.
///
/// # Errors
///
/// The first syntax error, bad value or include problem, with its file and line. A file
/// that cannot be read is reported at the `include:` line that names it, or, for `path`
/// itself, with line 0.
pub fn parse_file(path: &Path) -> Result<Config, Error> {
    let mut parser = parse::Parser::new();
    parser.read_file(path, None)?;
    parser.finish()
}

/// Parses the configuration at `path` as [`parse_file`] does, except that the file whose
/// canonical path is `swap.0` is read as the text `swap.1` (a replacement checked before it
/// is written: `sync:`), and returns beside it the text parsed for each configuration file,
/// by canonical path, so a caller can keep exactly the text it loaded (a source never
/// offers a shared file it has not loaded, however the file changed since).
///
/// # Errors
///
/// As [`parse_file`].
pub fn parse_file_with(
    path: &Path,
    swap: Option<(&Path, &str)>,
) -> Result<(Config, Vec<(PathBuf, String)>), Error> {
    let mut parser = parse::Parser::new();
    parser.swap = swap.map(|(p, t)| (p.to_path_buf(), t.to_owned()));
    parser.texts = Some(Vec::new());
    parser.read_file(path, None)?;
    let texts = parser.texts.take().unwrap_or_default();
    Ok((parser.finish()?, texts))
}

/// Parses configuration text as [`parse_str`] does, except that `include:` and
/// `include-toplevel:` are errors: no file is read (text from another node, checked before
/// it is used).
///
/// # Errors
///
/// As [`parse_str`], and an `include:` line.
pub fn parse_str_without_includes(text: &str, virtual_name: &str) -> Result<Config, Error> {
    let mut parser = parse::Parser::new();
    parser.no_include = true;
    parser.read_virtual(text, virtual_name)?;
    parser.finish()
}

/// Parses configuration text as [`parse_str_without_includes`] does, and returns beside it
/// every clause line and directive as written, in order (a directive with an alias under
/// the name it was written with; unknown and unsupported ones too, though the
/// configuration only warns about them): text from another node is checked against what
/// it may hold.
///
/// # Errors
///
/// As [`parse_str_without_includes`].
pub fn parse_str_listing(text: &str, virtual_name: &str) -> Result<(Config, Vec<Written>), Error> {
    let mut parser = parse::Parser::new();
    parser.no_include = true;
    parser.listing = Some(Vec::new());
    parser.read_virtual(text, virtual_name)?;
    let listing = parser.listing.take().unwrap_or_default();
    Ok((parser.finish()?, listing))
}

/// Parses configuration text that is not read from a file; `virtual_name` is the file name
/// used in locations, warnings and errors.
///
/// Includes are read as with [`parse_file`], relative to the working directory (or to the
/// last `directory:`); there is no including-file fallback, since the text has no directory.
/// [`Config::files`] lists only the included files.
///
/// # Errors
///
/// As [`parse_file`].
pub fn parse_str(text: &str, virtual_name: &str) -> Result<Config, Error> {
    let mut parser = parse::Parser::new();
    parser.read_virtual(text, virtual_name)?;
    parser.finish()
}
