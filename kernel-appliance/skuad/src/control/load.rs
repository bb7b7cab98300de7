//! From an `unbound.conf`-style file to a compiled engine and listener settings.
//!
//! Every value is checked here and every error names the file and line it came from. A
//! failed load leaves nothing behind: the caller keeps serving the engine it had.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use skua_config::{Config, Loc};

use crate::base::resolving::ResolverSettings;
use crate::base::settings::Settings;
use skua_engine::acl::{AclAction, Netblock};
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::store::{AuthZoneSpec, BuildError};
use skua_engine::zonefile::{self, IncludeLoader};
use skua_engine::{Engine, EngineBuilder, text};

/// The embedded default configuration: loopback port 5353, a demo zone.
pub const DEFAULT_CONFIG: &str = include_str!("default.conf");

/// What a load produced.
pub struct Loaded {
    /// The compiled engine.
    pub engine: Engine,
    /// Listener settings.
    pub settings: Settings,
    /// Warnings, each `file:line: message`.
    pub warnings: Vec<String>,
    /// Records loaded from local-data and zone files.
    pub records: usize,
    /// Time spent.
    pub elapsed: Duration,
    /// Response rate limiting, when configured (the daemon attaches the table to the
    /// engine, keeping the one in use when these options did not change).
    pub rrl: Option<skua_engine::rrl::RrlConfig>,
    /// Forwarding and the cache, when a `forward-zone:` or `stub-zone:` is configured.
    pub resolver: Option<ResolverSettings>,
    /// The TSIG keys and the auth zones that may be transferred (`provide-xfr:`,
    /// `notify:`), their versions with the serials the engine serves.
    pub xfr: XfrLoaded,
}

/// What a load gives zone transfers: the keys, each zone with `provide-xfr:` or
/// `notify:` (and each secondary zone with a copy), and the secondary zones.
#[derive(Debug, Default)]
pub struct XfrLoaded {
    /// `tsig-key:` keys, in configuration order.
    pub keys: Vec<skua_xfr::tsig::Key>,
    /// The zones.
    pub zones: Vec<XfrZoneLoaded>,
    /// The secondary zones (`primary:`, `request-xfr:`), by lower-cased apex.
    pub secondaries: std::collections::HashMap<Vec<u8>, crate::base::xfr::Secondary>,
}

/// One auth zone that may be transferred, as loaded.
#[derive(Debug)]
pub struct XfrZoneLoaded {
    /// Lower-cased apex, wire form.
    pub apex: Vec<u8>,
    /// The version the engine serves (its SOA serial decided by [`zone_serial`], or the
    /// primary's for a secondary zone).
    pub version: std::sync::Arc<skua_xfr::zone::Version>,
    /// The diffs that lead to it from the version served before, when a transfer brought
    /// them (its journal keeps them as they came); empty: the difference is computed.
    pub diffs: Vec<skua_xfr::zone::Diff>,
    /// `provide-xfr:` entries.
    pub allow: Vec<skua_xfr::server::Allow>,
    /// `notify:` targets.
    pub notify: Vec<crate::base::xfr::NotifyTarget>,
    /// `ixfr-number:`.
    pub ixfr_number: usize,
    /// `ixfr-size:`.
    pub ixfr_size: usize,
}

/// The serial a zone is served with (docs/zone-transfer.md, "Where new versions come
/// from"): the zone file's, unless the version served before (`prev`) has the same data
/// (then its serial, or the file's if higher: RFC 1982) or other data (then the file's if
/// higher, else the previous + 1, so secondaries see the change even when the file's serial
/// was not bumped).
pub fn zone_serial(prev: Option<&skua_xfr::zone::Version>, new: &skua_xfr::zone::Version) -> u32 {
    use skua_xfr::zone::serial_lt;
    let file = new.serial();
    match prev {
        None => file,
        Some(p) if serial_lt(p.serial(), file) => file,
        Some(p) if p.same_data(new) => p.serial(),
        Some(p) => p.serial().wrapping_add(1),
    }
}

/// A configuration that cannot be served, with its location.
#[derive(Debug)]
pub struct LoadError(pub String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

fn at(loc: &Loc, msg: impl fmt::Display) -> LoadError {
    LoadError(format!("{loc}: {msg}"))
}

/// Loads a configuration file.
pub fn load_file(path: &Path) -> Result<Loaded, LoadError> {
    let cfg = skua_config::parse_file(path).map_err(|e| LoadError(e.to_string()))?;
    let base = path.parent().map(Path::to_path_buf);
    load_config(cfg, base)
}

/// Loads the embedded default configuration.
pub fn load_default() -> Result<Loaded, LoadError> {
    let cfg = skua_config::parse_str(DEFAULT_CONFIG, "<embedded default>")
        .map_err(|e| LoadError(e.to_string()))?;
    load_config(cfg, None)
}

/// Unbound's default local zones (lower-cased) that the configuration leaves in place: a
/// `local-zone:` of the same name, of any type (`nodefault` included), replaces one
/// (unbound.conf(5); [`EngineBuilder::build`] does the same).
fn effective_default_zones(configured: &[(WireName, Loc)]) -> Vec<(WireName, LocalZoneType)> {
    skua_engine::localzone::default_zones()
        .into_iter()
        .filter_map(|dz| {
            let n = WireName::parse(&dz.name, None).ok()?.to_lowercase();
            (!configured.iter().any(|(c, _)| c.to_lowercase() == n)).then_some((n, dz.zone_type))
        })
        .collect()
}

/// The default local zone that answers for `apex` and everything under it before the
/// auth-zone can: the closest local zone enclosing the apex, when that is a default one
/// (local zones are looked up before auth zones, as in Unbound's worker, and a static or
/// redirect zone answers every name under it). A configured local zone at least as close
/// is the operator's own choice: none then.
fn shadowing_default_zone<'d>(
    apex: &WireName,
    configured: &[(WireName, Loc)],
    defaults: &'d [(WireName, LocalZoneType)],
) -> Option<(&'d WireName, LocalZoneType)> {
    let apex = apex.to_lowercase();
    let (dz, ty) = defaults
        .iter()
        .filter(|(d, _)| apex.is_subdomain_of(d))
        .max_by_key(|(d, _)| d.len())?;
    let closer = configured.iter().any(|(c, _)| {
        let c = c.to_lowercase();
        apex.is_subdomain_of(&c) && c.len() >= dz.len()
    });
    (!closer).then_some((dz, *ty))
}

/// Loads a configuration given as text (tests, bench).
pub fn load_str(text: &str, name: &str) -> Result<Loaded, LoadError> {
    let cfg = skua_config::parse_str(text, name).map_err(|e| LoadError(e.to_string()))?;
    load_config(cfg, None)
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "skuad".into())
}

/// `ADDR` or `ADDR@PORT` (unbound.conf's `interface:` syntax), `port` when none is given.
pub fn parse_addr(s: &str, port: u16) -> Result<SocketAddr, String> {
    let (host, port) = match s.split_once('@') {
        Some((h, p)) => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("bad port in interface '{s}'"))?,
        ),
        None => (s, port),
    };
    let ip: IpAddr = host.parse().map_err(|_| {
        format!("interface '{s}' is not an IP address (interface names are not supported yet)")
    })?;
    Ok(SocketAddr::new(ip, port))
}

fn parse_interface(s: &str, port: u16, loc: &Loc) -> Result<SocketAddr, LoadError> {
    parse_addr(s, port).map_err(|e| at(loc, e))
}

fn parse_cpus(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
    {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

struct FileLoader {
    base: Option<PathBuf>,
}

impl FileLoader {
    fn resolve(&self, p: &str) -> PathBuf {
        let path = PathBuf::from(p);
        if path.is_absolute() || path.exists() {
            return path;
        }
        match &self.base {
            Some(b) if b.join(&path).exists() => b.join(path),
            _ => path,
        }
    }
}

impl IncludeLoader for FileLoader {
    fn load(&mut self, path: &str) -> Result<(String, String), String> {
        let p = self.resolve(path);
        std::fs::read_to_string(&p)
            .map(|t| (p.display().to_string(), t))
            .map_err(|e| format!("cannot read {}: {e}", p.display()))
    }
}

/// Converts a parsed configuration; `base` is the directory of the main file (relative
/// zone files are looked up in the working directory first, then there).
pub fn load_config(cfg: Config, base: Option<PathBuf>) -> Result<Loaded, LoadError> {
    load_config_after(cfg, base, &After::default())
}

/// New data for a secondary zone, which a load serves instead of the copy in force.
#[derive(Clone, Debug, Default)]
pub struct SecondaryData {
    /// The copy to serve; `None`: none (expired), SERVFAIL.
    pub version: Option<std::sync::Arc<skua_xfr::zone::Version>>,
    /// The diffs that lead to it from the copy in force (see [`XfrZoneLoaded::diffs`]).
    pub diffs: Vec<skua_xfr::zone::Diff>,
}

/// What a load knows besides the configuration: the transfer state in force and the API's
/// state file (docs/zone-transfer.md, "Where new versions come from").
#[derive(Clone, Copy, Debug, Default)]
pub struct After<'a> {
    /// The transfer state in force: each zone's serial follows [`zone_serial`].
    pub prev: Option<&'a crate::base::xfr::Transfers>,
    /// The state file: its `local-data:` records under an auth zone with `provide-xfr:`
    /// or `notify:` are zone data of that zone, not local data.
    pub state: Option<&'a Path>,
    /// Serials persisted with the state file: no zone is served below its own.
    pub serials: Option<&'a std::collections::BTreeMap<String, u32>>,
    /// New data for secondary zones (a transfer, an expiry), by lower-cased apex. A
    /// secondary zone not named here keeps the copy in force (`prev`), or, when it has
    /// none there (at start, or a zone new to the configuration), reads its zone file.
    pub secondary: Option<&'a std::collections::HashMap<Vec<u8>, SecondaryData>>,
}

/// As [`load_config`], after `after` (see [`After`]). One section of the configuration
/// after the other, in this order (the first error found is the one reported): the
/// server's identity and EDNS, forwarding, access control, local zones, local data, TSIG
/// keys, auth zones (then the engine is compiled), rate limiting, listeners and the
/// process settings.
pub fn load_config_after(
    cfg: Config,
    base: Option<PathBuf>,
    after: &After<'_>,
) -> Result<Loaded, LoadError> {
    let start = Instant::now();
    let mut c = Compiling {
        b: EngineBuilder::new(),
        locs: Vec::new(),
        records: 0,
        warnings: cfg.warnings.iter().map(ToString::to_string).collect(),
    };
    let resolver = server_basics(&cfg, &mut c)?;
    access_control(&cfg.server, &mut c)?;
    let zone_names = local_zones(&cfg.server, &mut c)?;
    let zone_data = local_data(&cfg, after, &mut c)?;
    let keys = tsig_keys(&cfg.tsig_keys, base.as_deref())?;
    let (zones, secondaries) =
        auth_zones(&cfg, base, after, &keys, &zone_names, zone_data, &mut c)?;
    let Compiling {
        b,
        locs,
        records,
        mut warnings,
    } = c;
    let engine = b.build().map_err(|e| build_error(&e, &locs))?;
    let rrl = rrl_config(&cfg.server.rrl)?;
    let settings = listener_settings(&cfg, &mut warnings)?;
    Ok(Loaded {
        engine,
        settings,
        warnings,
        records,
        elapsed: start.elapsed(),
        rrl,
        resolver,
        xfr: XfrLoaded {
            keys,
            zones,
            secondaries,
        },
    })
}

/// What the sections of one load build up: the engine, the line of each record (tags index
/// this table, so that engine build errors can name the line), the records counted, the
/// warnings.
struct Compiling {
    b: EngineBuilder,
    locs: Vec<Loc>,
    records: usize,
    warnings: Vec<String>,
}

/// The server's answers about itself (`identity:`, `version:`), its EDNS sizes, and
/// forwarding (see [`resolver_settings`]): the resolver's settings, when configured.
fn server_basics(cfg: &Config, c: &mut Compiling) -> Result<Option<ResolverSettings>, LoadError> {
    let s = &cfg.server;
    let ec = c.b.config_mut();
    ec.identity = (!s.hide_identity).then(|| s.identity.clone().unwrap_or_else(hostname));
    ec.version = (!s.hide_version).then(|| {
        s.version
            .clone()
            .unwrap_or_else(|| format!("skuad {}", env!("CARGO_PKG_VERSION")))
    });
    ec.edns_buffer_size = s.edns_buffer_size;
    ec.max_udp_size = s.max_udp_size;
    let resolver = resolver_settings(cfg, &mut c.warnings)?;
    c.b.config_mut().resolve = resolver.is_some();
    Ok(resolver)
}

/// `access-control:` netblocks and their actions.
fn access_control(s: &skua_config::Server, c: &mut Compiling) -> Result<(), LoadError> {
    for l in &s.access_control {
        let (nb, action) = &l.value;
        let nb: Netblock = nb
            .parse()
            .map_err(|e| at(&l.loc, format!("access-control '{nb}': {e}")))?;
        let action: AclAction = action
            .parse()
            .map_err(|e| at(&l.loc, format!("access-control action '{action}': {e}")))?;
        c.b.acl_mut().insert(nb, action);
    }
    Ok(())
}

/// `local-zone:` entries: each name once. Returns the names with their lines (auth zones
/// are checked against them and Unbound's default zones).
fn local_zones(
    s: &skua_config::Server,
    c: &mut Compiling,
) -> Result<Vec<(WireName, Loc)>, LoadError> {
    let mut zone_names: Vec<(WireName, Loc)> = Vec::new();
    for l in &s.local_zones {
        let (name, ty) = &l.value;
        let n = WireName::parse(name, None)
            .map_err(|e| at(&l.loc, format!("local-zone '{name}': {e}")))?;
        let t: LocalZoneType = ty
            .parse()
            .map_err(|e| at(&l.loc, format!("local-zone type '{ty}': {e}")))?;
        if let Some((_, first)) = zone_names
            .iter()
            .find(|(z, _)| z.to_lowercase() == n.to_lowercase())
        {
            return Err(at(
                &l.loc,
                format!("local-zone '{name}' is already defined at {first}"),
            ));
        }
        zone_names.push((n.clone(), l.loc.clone()));
        if t == LocalZoneType::NoView {
            c.warnings.push(format!("{}: local-zone type 'noview' only matters in views, which are not supported yet; it behaves as transparent", l.loc));
        }
        c.b.local_zone(n, t);
    }
    Ok(zone_names)
}

/// Records of an auth zone that came as API `local-data:`, by lower-cased apex.
type ZoneData = std::collections::HashMap<Vec<u8>, Vec<(skua_engine::rr::Rr, u32)>>;

/// `local-data:` and `local-data-ptr:` records. The state file's records under a
/// transferred auth zone (`provide-xfr:` or `notify:`) are that zone's data: returned, not
/// local data.
fn local_data(cfg: &Config, after: &After<'_>, c: &mut Compiling) -> Result<ZoneData, LoadError> {
    let s = &cfg.server;
    // Transferred auth zones (lower-cased apex): API records under one are its zone data.
    let transferred: Vec<WireName> = cfg
        .auth_zones
        .iter()
        .filter(|z| {
            z.for_downstream
                && z.primaries.is_empty()
                && (!z.provide_xfr.is_empty() || !z.notify.is_empty())
        })
        .filter_map(|z| WireName::parse(&z.name.value, None).ok())
        .map(|n| n.to_lowercase())
        .collect();
    let mut zone_data = ZoneData::new();
    for l in &s.local_data {
        let rr = text::parse_rr(&l.value, None, 3600)
            .map_err(|e| at(&l.loc, format!("local-data '{}': {e}", l.value)))?;
        let from_api = after.state.is_some_and(|p| *l.loc.file == *p);
        let zone = transferred
            .iter()
            .filter(|z| from_api && rr.owner.is_subdomain_of(z))
            .max_by_key(|z| z.len());
        match zone {
            Some(z) => {
                let t = tag(&mut c.locs, &l.loc);
                zone_data
                    .entry(z.as_bytes().to_vec())
                    .or_default()
                    .push((rr, t));
            }
            None => {
                c.b.local_data(rr, tag(&mut c.locs, &l.loc));
            }
        }
        c.records += 1;
    }
    for l in &s.local_data_ptr {
        let rr = text::parse_local_data_ptr(&l.value, 3600)
            .map_err(|e| at(&l.loc, format!("local-data-ptr '{}': {e}", l.value)))?;
        c.b.local_data(rr, tag(&mut c.locs, &l.loc));
        c.records += 1;
    }
    Ok(zone_data)
}

/// The `auth-zone:` clauses: each served zone's records (its zone file, or a secondary
/// zone's copy) and, for zones that are transferred, their versions; the secondary zones.
/// `zone_data`: the API's records of transferred zones (see [`local_data`]).
fn auth_zones(
    cfg: &Config,
    base: Option<PathBuf>,
    after: &After<'_>,
    keys: &[skua_xfr::tsig::Key],
    zone_names: &[(WireName, Loc)],
    mut zone_data: ZoneData,
    c: &mut Compiling,
) -> Result<
    (
        Vec<XfrZoneLoaded>,
        std::collections::HashMap<Vec<u8>, crate::base::xfr::Secondary>,
    ),
    LoadError,
> {
    let empty = crate::base::xfr::Transfers::default();
    let prev = after.prev.unwrap_or(&empty);
    let mut xfr_zones = Vec::new();
    let mut secondaries = std::collections::HashMap::new();
    let base_dir = base.clone();
    let mut loader = FileLoader { base };
    let mut auth_names: Vec<WireName> = Vec::new();
    let defaults = effective_default_zones(zone_names);
    for z in &cfg.auth_zones {
        let name = WireName::parse(&z.name.value, None).map_err(|e| {
            at(
                &z.name.loc,
                format!("auth-zone name '{}': {e}", z.name.value),
            )
        })?;
        if auth_names
            .iter()
            .any(|n| n.to_lowercase() == name.to_lowercase())
        {
            return Err(at(
                &z.name.loc,
                format!("auth-zone '{}' is defined twice", z.name.value),
            ));
        }
        auth_names.push(name.clone());
        if !z.for_downstream {
            c.warnings.push(format!("{}: auth-zone '{}' has for-downstream: no; only downstream service is implemented, so it is not served", z.loc, z.name.value));
            continue;
        }
        if let Some((dz, ty)) = shadowing_default_zone(&name, zone_names, &defaults) {
            c.warnings.push(format!(
                "{}: auth-zone '{}' is inside Unbound's default local zone '{dz}' ({}), which is \
                 answered first: every name in the auth-zone gets that zone's answer \
                 (NXDOMAIN), as in Unbound, while transfers and NOTIFY go on; add \
                 'local-zone: \"{dz}\" nodefault' to serve the auth-zone",
                z.name.loc,
                z.name.value,
                ty.as_str(),
            ));
        }
        if !z.primaries.is_empty() {
            let sec = secondary_zone(
                z,
                &name,
                keys,
                &mut loader,
                base_dir.as_deref(),
                prev,
                after,
                &mut c.warnings,
            )?;
            let apex = name.to_lowercase().as_bytes().to_vec();
            match &sec.version {
                Some(v) => {
                    let tag_zone = tag(&mut c.locs, &z.loc);
                    let recs: Vec<(skua_engine::rr::Rr, u32)> =
                        v.iter().map(|r| (r.clone(), tag_zone)).collect();
                    c.records += recs.len();
                    // Its own secondaries (chained), and the journal a promotion keeps.
                    let (allow, notify) = xfr_entries(z, keys)?;
                    let diffs = after
                        .secondary
                        .and_then(|m| m.get(&apex))
                        .map(|d| d.diffs.clone())
                        .unwrap_or_default();
                    xfr_zones.push(XfrZoneLoaded {
                        apex: apex.clone(),
                        version: v.clone(),
                        diffs,
                        allow,
                        notify,
                        ixfr_number: z.ixfr_number as usize,
                        ixfr_size: z.ixfr_size,
                    });
                    c.b.auth_zone(AuthZoneSpec {
                        name,
                        records: recs,
                    });
                }
                None => {
                    c.b.unavailable_auth_zone(name);
                }
            }
            secondaries.insert(apex, sec);
            continue;
        }
        let Some(zf) = &z.zonefile else {
            return Err(at(
                &z.loc,
                format!(
                    "auth-zone '{}' has no zonefile and no primary: nothing to serve",
                    z.name.value
                ),
            ));
        };
        let (display, text) = loader.load(&zf.value).map_err(|e| at(&zf.loc, e))?;
        let tag_zone = tag(&mut c.locs, &zf.loc);
        let mut recs = Vec::new();
        let n = zonefile::parse_zone(&text, &display, &name, &mut loader, &mut |rr| {
            recs.push((rr, tag_zone));
            Ok(())
        })
        .map_err(|e| LoadError(e.to_string()))?;
        c.records += n;
        if !z.provide_xfr.is_empty() || !z.notify.is_empty() {
            if let Some(api) = zone_data.remove(name.to_lowercase().as_bytes()) {
                recs.extend(api);
            }
            let floor = after
                .serials
                .and_then(|m| m.get(&name.to_lowercase().to_string()).copied());
            let x = xfr_zone(z, &name, &mut recs, keys, prev, floor)?;
            xfr_zones.push(x);
        }
        c.b.auth_zone(AuthZoneSpec {
            name,
            records: recs,
        });
    }
    Ok((xfr_zones, secondaries))
}

/// The addresses each listener kind serves.
#[derive(Default)]
struct Listeners {
    udp: Vec<SocketAddr>,
    tcp: Vec<SocketAddr>,
    tls: Vec<SocketAddr>,
    https: Vec<SocketAddr>,
    doq: Vec<SocketAddr>,
}

/// Listener and process settings: the listeners ([`interfaces`], then [`leased`]), CPU
/// affinity, the directives accepted but not applied, connection limits, socket and
/// thread settings.
fn listener_settings(cfg: &Config, warnings: &mut Vec<String>) -> Result<Settings, LoadError> {
    let s = &cfg.server;
    let mut l = interfaces(s, warnings)?;
    let leased = leased(cfg, &mut l)?;
    let cpus =
        match &s.cpu_affinity {
            Some(c) => Some(parse_cpus(c).ok_or_else(|| {
                LoadError(format!("cpu-affinity '{c}': expected a list like 0,2-3"))
            })?),
            None => None,
        };
    for (what, v) in [
        ("logfile", &s.logfile),
        ("username", &s.username),
        ("chroot", &s.chroot),
        ("pidfile", &s.pidfile),
    ] {
        if v.as_deref().is_some_and(|v| !v.is_empty()) {
            warnings.push(format!("'{what}' is accepted but not applied yet: skuad logs to stderr and keeps its user and root"));
        }
    }
    let connection_limits = s
        .tcp_connection_limits
        .iter()
        .map(|l| {
            let nb = l
                .value
                .netblock
                .parse::<skua_engine::acl::Netblock>()
                .map_err(|e| {
                    at(
                        &l.loc,
                        format!("tcp-connection-limit: '{}': {e}", l.value.netblock),
                    )
                })?;
            Ok((nb, l.value.limit))
        })
        .collect::<Result<Vec<_>, LoadError>>()?;
    Ok(Settings {
        udp: l.udp,
        tcp: l.tcp,
        tls: l.tls,
        https: l.https,
        doq: l.doq,
        https_tls: !s.http_notls_downstream,
        connection_limits,
        per_source_limit: s.tcp_connection_limit_per_source,
        threads: s.num_threads.max(1),
        reuseport: s.so_reuseport,
        freebind: s.ip_freebind,
        rcvbuf: s.so_rcvbuf,
        sndbuf: s.so_sndbuf,
        tcp_idle: Duration::from_millis(s.tcp_idle_timeout_ms.max(1)),
        tcp_limit: s.incoming_num_tcp.max(1) * s.num_threads.max(1),
        verbosity: s.verbosity,
        cpus,
        max_udp_size: s.max_udp_size.max(512),
        leased,
        lease_max: Duration::from_millis(cfg.ha.lease_max_ms.into()),
    })
}

/// What each `interface:` serves (localhost when none is given, as Unbound): plain DNS,
/// DNS over TLS on `tls-port:` and DNS over HTTPS on `https-port:` when a certificate is
/// configured (as in Unbound), DNS over QUIC on `quic-port:`.
fn interfaces(s: &skua_config::Server, warnings: &mut Vec<String>) -> Result<Listeners, LoadError> {
    // The certificate itself is read by reloads only (control::tls), not by every API
    // write or zone transfer that compiles an engine.
    let dot = s.tls_service_key.is_some() && s.tls_service_pem.is_some();
    let Listeners {
        mut udp,
        mut tcp,
        mut tls,
        mut https,
        mut doq,
    } = Listeners::default();
    let ifaces: Vec<(SocketAddr, Option<Loc>)> = if s.interfaces.is_empty() {
        // Unbound's default: localhost only.
        vec![
            (
                SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), s.port),
                None,
            ),
            (
                SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), s.port),
                None,
            ),
        ]
    } else {
        s.interfaces
            .iter()
            .map(|l| parse_interface(&l.value, s.port, &l.loc).map(|a| (a, Some(l.loc.clone()))))
            .collect::<Result<_, _>>()?
    };
    for (a, loc) in ifaces {
        if (a.is_ipv4() && !s.do_ip4) || (a.is_ipv6() && !s.do_ip6) {
            continue;
        }
        // DNS over QUIC on UDP, beside DNS over TLS on TCP when quic-port is tls-port (both
        // 853 by default, as in Unbound).
        let quic = dot && a.port() == s.quic_port;
        // Where to point at for quic-port: trouble: its line, else the interface's.
        let quic_at = || {
            s.quic_port_loc
                .as_ref()
                .or(loc.as_ref())
                .map(|l| format!("{l}: "))
                .unwrap_or_default()
        };
        if quic && a.port() == 53 {
            // RFC 9250 §4.1.1: DoQ must not use port 53, which is DNS over UDP's; Unbound
            // refuses to start with DoQ there ("strictly not allowed on port 53").
            return Err(LoadError(format!(
                "{}quic-port: {} would serve DNS over QUIC on interface {a}, taking its UDP from plain DNS: \
                 RFC 9250 forbids DNS over QUIC on port 53 (use 853)",
                quic_at(),
                s.quic_port
            )));
        }
        if quic {
            if s.do_udp {
                doq.push(a);
            } else {
                warnings.push(format!(
                    "{}interface {a}: DNS over QUIC needs UDP, and do-udp: is no: no QUIC there",
                    loc.as_ref().map(|l| format!("{l}: ")).unwrap_or_default()
                ));
            }
            if a.port() == s.port && a.port() != s.tls_port && a.port() != s.https_port {
                // quic-port: equal to port: on another port than 53: allowed (Unbound serves
                // it so), but UDP there is DNS over QUIC and no longer plain DNS; TCP stays
                // plain DNS, as in Unbound (its DoQ takes only the UDP socket).
                warnings.push(format!(
                    "{}quic-port: {} is also port: interface {a} serves DNS over QUIC on UDP and no plain DNS over UDP \
                     (plain DNS over TCP stays); give quic-port: its own port (853) to keep plain DNS on UDP",
                    quic_at(),
                    s.quic_port
                ));
                if s.do_tcp {
                    tcp.push(a);
                }
                continue;
            }
            if a.port() != s.tls_port && a.port() != s.https_port {
                continue;
            }
        }
        if a.port() == s.tls_port {
            if dot {
                if s.do_tcp {
                    tls.push(a);
                } else {
                    warnings.push(format!(
                        "{}interface {a}: DNS over TLS needs TCP, and do-tcp: is no: nothing listens there",
                        loc.as_ref().map(|l| format!("{l}: ")).unwrap_or_default()
                    ));
                }
                continue;
            }
            warnings.push(format!(
                "{}interface {a} is on tls-port {} but tls-service-key:/tls-service-pem: are not set: it serves plain DNS",
                loc.map(|l| format!("{l}: ")).unwrap_or_default(),
                s.tls_port
            ));
        } else if a.port() == s.https_port {
            // DNS over HTTPS: over TLS with the certificate, or plain HTTP behind a proxy
            // that terminates TLS (`http-notls-downstream:`), as in Unbound.
            if dot || s.http_notls_downstream {
                if s.do_tcp {
                    https.push(a);
                } else {
                    warnings.push(format!(
                        "{}interface {a}: DNS over HTTPS needs TCP, and do-tcp: is no: nothing listens there",
                        loc.as_ref().map(|l| format!("{l}: ")).unwrap_or_default()
                    ));
                }
                continue;
            }
            warnings.push(format!(
                "{}interface {a} is on https-port {} but tls-service-key:/tls-service-pem: are not set (nor http-notls-downstream:): it serves plain DNS",
                loc.map(|l| format!("{l}: ")).unwrap_or_default(),
                s.https_port
            ));
        }
        if s.do_udp {
            udp.push(a);
        }
        if s.do_tcp {
            tcp.push(a);
        }
    }
    Ok(Listeners {
        udp,
        tcp,
        tls,
        https,
        doq,
    })
}

/// Service addresses under the host agent's lease (`ha:`): listened on like interfaces (an
/// address both in interface: and ha: is one listener, under the lease). Returns the
/// leased addresses.
fn leased(cfg: &Config, lst: &mut Listeners) -> Result<Vec<IpAddr>, LoadError> {
    let s = &cfg.server;
    let mut leased = Vec::new();
    for l in &cfg.ha.addresses {
        let a = parse_interface(&l.value, s.port, &l.loc)?;
        if a.ip().is_unspecified() || a.ip().is_multicast() {
            return Err(at(
                &l.loc,
                format!(
                    "ha address '{}' must be one unicast address (the service address VRRP moves)",
                    l.value
                ),
            ));
        }
        if (a.is_ipv4() && !s.do_ip4) || (a.is_ipv6() && !s.do_ip6) {
            continue;
        }
        leased.push(a.ip().to_canonical());
        if s.do_udp && !lst.udp.contains(&a) {
            lst.udp.push(a);
        }
        if s.do_tcp && !lst.tcp.contains(&a) {
            lst.tcp.push(a);
        }
    }
    Ok(leased)
}

/// The `tsig-key:` keys, their secrets read (`file:PATH`, relative to `base`, a file others
/// cannot read; or `env:VAR`), base64-decoded, at least 16 bytes. Errors name the line and
/// never show the secret.
fn tsig_keys(
    keys: &[skua_config::TsigKey],
    base: Option<&Path>,
) -> Result<Vec<skua_xfr::tsig::Key>, LoadError> {
    use skua_xfr::tsig::{Algorithm, Key};
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let name = WireName::parse(&k.name.value, None).map_err(|e| {
            at(
                &k.name.loc,
                format!("tsig-key name '{}': {e}", k.name.value),
            )
        })?;
        let s = &k.secret;
        let text = if let Some(p) = s.value.strip_prefix("file:") {
            let p = PathBuf::from(p);
            let p = match base {
                Some(b) if p.is_relative() => b.join(p),
                _ => p,
            };
            super::auth::read_secret(&p).map_err(|e| at(&s.loc, format!("tsig-key secret: {e}")))?
        } else if let Some(v) = s.value.strip_prefix("env:") {
            std::env::var(v).map_err(|_| {
                at(
                    &s.loc,
                    format!("tsig-key secret: environment variable {v} is not set"),
                )
            })?
        } else {
            return Err(at(&s.loc, "tsig-key secret: must be file:PATH or env:VAR"));
        };
        let secret = data_encoding::BASE64
            .decode(text.trim().as_bytes())
            .map_err(|_| {
                at(
                    &s.loc,
                    format!(
                        "tsig-key '{}': the secret is not base64 (as tsig-keygen or keymgr -t print it)",
                        k.name.value
                    ),
                )
            })?;
        if secret.len() < 16 {
            return Err(at(
                &s.loc,
                format!(
                    "tsig-key '{}': the secret has {} bytes; at least 16 (32 from tsig-keygen or keymgr -t)",
                    k.name.value,
                    secret.len()
                ),
            ));
        }
        let alg = Algorithm::parse(&k.algorithm).ok_or_else(|| {
            at(
                &k.loc,
                format!("tsig-key algorithm '{}' is not implemented", k.algorithm),
            )
        })?;
        out.push(Key::new(&name, alg, secret));
    }
    Ok(out)
}

/// The key named `text` in `provide-xfr:`/`notify:`: `None` for `NOKEY`.
fn key_ref(
    text: &str,
    keys: &[skua_xfr::tsig::Key],
    what: &str,
    loc: &Loc,
) -> Result<Option<usize>, LoadError> {
    if text.eq_ignore_ascii_case("NOKEY") {
        return Ok(None);
    }
    let name = WireName::parse(text, None)
        .map_err(|e| at(loc, format!("{what}: key '{text}': {e}")))?
        .to_lowercase();
    keys.iter()
        .position(|k| *k.name() == name)
        .map(Some)
        .ok_or_else(|| {
            at(
                loc,
                format!("{what}: no tsig-key: clause is named '{text}' (or write NOKEY)"),
            )
        })
}

/// One auth zone with `provide-xfr:` or `notify:`: its entries checked, its version made
/// from `recs`, whose SOA gets the serial [`zone_serial`] decides (so the engine serves the
/// serial that transfers send).
fn xfr_zone(
    z: &skua_config::AuthZone,
    name: &WireName,
    recs: &mut [(skua_engine::rr::Rr, u32)],
    keys: &[skua_xfr::tsig::Key],
    prev: &crate::base::xfr::Transfers,
    floor: Option<u32>,
) -> Result<XfrZoneLoaded, LoadError> {
    let (allow, notify) = xfr_entries(z, keys)?;
    let version = skua_xfr::zone::Version::new(name, recs.iter().map(|(r, _)| r.clone()).collect())
        .map_err(|e| at(&z.loc, format!("auth-zone '{}': {e}", z.name.value)))?;
    let apex = name.to_lowercase().as_bytes().to_vec();
    let mut serial = zone_serial(prev.zones.get(&apex).map(|p| &*p.version), &version);
    if let Some(f) = floor
        && skua_xfr::zone::serial_lt(serial, f)
    {
        // Served before (with API data) at this serial: never go back.
        serial = f;
    }
    let version = if serial == version.serial() {
        version
    } else {
        for (r, _) in recs.iter_mut() {
            if r.rtype == skua_engine::rr::rtype::SOA {
                *r = skua_xfr::zone::with_serial(r, serial);
            }
        }
        version.with_serial(serial)
    };
    Ok(XfrZoneLoaded {
        apex,
        version: std::sync::Arc::new(version),
        diffs: Vec::new(),
        allow,
        notify,
        ixfr_number: z.ixfr_number as usize,
        ixfr_size: z.ixfr_size,
    })
}

/// A zone's `provide-xfr:` entries and `notify:` targets, checked.
#[allow(clippy::type_complexity)]
fn xfr_entries(
    z: &skua_config::AuthZone,
    keys: &[skua_xfr::tsig::Key],
) -> Result<
    (
        Vec<skua_xfr::server::Allow>,
        Vec<crate::base::xfr::NotifyTarget>,
    ),
    LoadError,
> {
    use skua_xfr::server::{Allow, KeyRule};
    let mut allow = Vec::new();
    for l in &z.provide_xfr {
        let (nb, key) = &l.value;
        let netblock: Netblock = nb
            .parse()
            .map_err(|e| at(&l.loc, format!("provide-xfr: '{nb}': {e}")))?;
        let rule = if key.eq_ignore_ascii_case("BLOCKED") {
            KeyRule::Blocked
        } else {
            match key_ref(key, keys, "provide-xfr", &l.loc)? {
                Some(i) => KeyRule::Key(i),
                None => KeyRule::NoKey,
            }
        };
        allow.push(Allow { netblock, rule });
    }
    let mut notify = Vec::new();
    for l in &z.notify {
        let (addr, key) = &l.value;
        let a = parse_addr(addr, 53).map_err(|e| at(&l.loc, format!("notify: {e}")))?;
        notify.push(crate::base::xfr::NotifyTarget {
            addr: a,
            key: key_ref(key, keys, "notify", &l.loc)?,
        });
    }
    Ok((allow, notify))
}

/// Where a secondary zone's `zonefile:` is: as written when absolute, else relative to
/// the configuration file's directory (the working directory without one).
fn secondary_zonefile(zf: &str, base: Option<&Path>) -> PathBuf {
    let p = PathBuf::from(zf);
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p,
    }
}

/// A secondary zone (`primary:`, `request-xfr:`): its primaries, `allow-notify:`
/// entries and limits checked, and its copy: new data from `after.secondary`, else the
/// copy in force (`prev`), else its zone file when it exists and holds the zone (a file
/// that does not is a warning: the zone is transferred anew), else none.
#[allow(clippy::too_many_arguments)]
fn secondary_zone(
    z: &skua_config::AuthZone,
    name: &WireName,
    keys: &[skua_xfr::tsig::Key],
    loader: &mut FileLoader,
    base: Option<&Path>,
    prev: &crate::base::xfr::Transfers,
    after: &After<'_>,
    warnings: &mut Vec<String>,
) -> Result<crate::base::xfr::Secondary, LoadError> {
    use crate::base::xfr::{Primary, Secondary};
    use skua_xfr::server::{Allow, KeyRule};
    let mut primaries = Vec::new();
    for l in &z.primaries {
        let (addr, key) = &l.value;
        if addr.contains('#') {
            return Err(at(
                &l.loc,
                format!("primary '{addr}': transfers over TLS are not supported"),
            ));
        }
        let a = parse_addr(addr, 53).map_err(|_| {
            at(
                &l.loc,
                format!(
                    "primary '{addr}': not an IP address with an optional @PORT (host names are not supported)"
                ),
            )
        })?;
        primaries.push(Primary {
            addr: a,
            key: key_ref(key, keys, "primary", &l.loc)?,
        });
    }
    let mut allow_notify = Vec::new();
    for l in &z.allow_notify {
        let (nb, key) = &l.value;
        let netblock: Netblock = nb
            .parse()
            .map_err(|e| at(&l.loc, format!("allow-notify: '{nb}': {e}")))?;
        let rule = if key.eq_ignore_ascii_case("BLOCKED") {
            KeyRule::Blocked
        } else {
            match key_ref(key, keys, "allow-notify", &l.loc)? {
                Some(i) => KeyRule::Key(i),
                None => KeyRule::NoKey,
            }
        };
        allow_notify.push(Allow { netblock, rule });
    }
    // A primary may NOTIFY its zone, signed with the key it transfers with (Unbound
    // allows its primaries by default too).
    for p in &primaries {
        if let Ok(netblock) = p.addr.ip().to_canonical().to_string().parse::<Netblock>() {
            allow_notify.push(Allow {
                netblock,
                rule: p.key.map_or(KeyRule::NoKey, KeyRule::Key),
            });
        }
    }
    let apex = name.to_lowercase().as_bytes().to_vec();
    let zonefile = z
        .zonefile
        .as_ref()
        .map(|zf| secondary_zonefile(&zf.value, base));
    let (version, confirmed) = match after.secondary.and_then(|m| m.get(&apex)) {
        Some(d) => (
            d.version.clone(),
            d.version.as_ref().map(|_| crate::base::clock::unix_secs()),
        ),
        None => match prev.secondaries.get(&apex) {
            Some(s) => (s.version.clone(), s.confirmed),
            None => match &zonefile {
                Some(path) if path.exists() => match read_secondary_copy(name, path, loader) {
                    Ok((v, mtime)) => (Some(std::sync::Arc::new(v)), Some(mtime)),
                    Err(e) => {
                        warnings.push(format!(
                                "{}: auth-zone '{}': the copy in {} is not usable ({e}); the zone is transferred anew",
                                z.loc,
                                z.name.value,
                                path.display()
                            ));
                        (None, None)
                    }
                },
                _ => (None, None),
            },
        },
    };
    Ok(Secondary {
        apex: name.clone(),
        primaries,
        allow_notify,
        version,
        confirmed,
        limits: skua_xfr::client::Limits {
            max_bytes: z.size_limit_xfr,
            max_records: z.xfr_max_records,
        },
        zonefile,
    })
}

/// A secondary zone's copy from its zone file, and the file's modification time (when the
/// copy was last known current), seconds since the epoch.
fn read_secondary_copy(
    name: &WireName,
    path: &Path,
    loader: &mut FileLoader,
) -> Result<(skua_xfr::zone::Version, u64), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mtime = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let mut recs = Vec::new();
    zonefile::parse_zone(
        &text,
        &path.display().to_string(),
        name,
        loader,
        &mut |rr| {
            recs.push(rr);
            Ok(())
        },
    )
    .map_err(|e| e.to_string())?;
    let v = skua_xfr::zone::Version::new(name, recs).map_err(|e| e.to_string())?;
    Ok((v, mtime))
}

/// The resolver's settings from `forward-zone:`, `stub-zone:` and the cache and upstream
/// directives of `server:`; `None` without any zone (names outside local data are then
/// REFUSED, as before). Errors name the line: a zone or host name that is not a domain
/// name, a zone defined twice, an address that can never be an upstream (multicast,
/// broadcast, link-local: `skua_resolver::forward::upstream_addr`), a `tls-cert-bundle:`
/// that cannot be read or holds no certificate. `forward-host:`/`stub-host:` names are resolved by the forwarder itself
/// (`skua_resolver::forward::HostConfig`); a warning names each one that cannot be (a
/// loop, or no zone holds its name).
fn resolver_settings(
    cfg: &Config,
    warnings: &mut Vec<String>,
) -> Result<Option<ResolverSettings>, LoadError> {
    use skua_resolver::forward::{
        HostConfig, HostPlan, Limits, Upstream, ZoneConfig, ZoneKind, plan_hosts, upstream_addr,
    };
    let s = &cfg.server;
    if cfg.forward_zones.is_empty() {
        return Ok(None);
    }
    let mut zones: Vec<ZoneConfig> = Vec::new();
    // Each host, with the line it came from, as written, and the index of its zone.
    let mut hosts: Vec<(HostConfig, Loc, String, usize)> = Vec::new();
    let mut seen: Vec<(Vec<u8>, Loc)> = Vec::new();
    for fz in &cfg.forward_zones {
        let clause = fz.kind.clause();
        let name = WireName::parse(&fz.name.value, None)
            .map_err(|e| {
                at(
                    &fz.name.loc,
                    format!("{clause} name '{}': {e}", fz.name.value),
                )
            })?
            .to_lowercase();
        if let Some((_, first)) = seen.iter().find(|(n, _)| n == name.as_bytes()) {
            return Err(at(
                &fz.name.loc,
                format!("{clause} '{}' is already defined at {first}", fz.name.value),
            ));
        }
        seen.push((name.as_bytes().to_vec(), fz.name.loc.clone()));
        let tls = fz.tls_upstream || s.tls_upstream;
        let mut upstreams = Vec::new();
        for a in &fz.addrs {
            // The same check as for the addresses hosts resolve to, and the same form
            // (an IPv4-mapped address as IPv4).
            let addr = match upstream_addr(a.value.socket_addr(), s.do_not_query_localhost) {
                Ok(addr) => addr,
                // Unbound's default: never query the host itself (a loop when it
                // forwards to itself); Unbound says nothing, we say which line lost its
                // address.
                Err(why) if why.is_localhost() => {
                    warnings.push(format!(
                        "{}: {clause} address {} is not used: {why}; set do-not-query-localhost to no to forward to this host",
                        a.loc, a.value
                    ));
                    continue;
                }
                Err(why) => {
                    return Err(at(
                        &a.loc,
                        format!(
                            "{clause} address {}: {why}, which cannot be an upstream",
                            a.value
                        ),
                    ));
                }
            };
            upstreams.push(Upstream {
                addr,
                tls_name: if tls {
                    Some(a.value.tls_name.as_deref().unwrap_or("").into())
                } else {
                    None
                },
            });
        }
        for h in &fz.hosts {
            let host = WireName::parse(&h.value.name, None)
                .map_err(|e| {
                    at(
                        &h.loc,
                        format!("{clause} host name '{}': {e}", h.value.name),
                    )
                })?
                .to_lowercase();
            let hc = HostConfig {
                zone: name.as_bytes().to_vec(),
                name: host.as_bytes().to_vec(),
                port: h.value.port_or_default(),
                // With TLS the certificate must carry `#NAME`, or else the host's name
                // (what the configuration trusts, rather than the address it resolved to),
                // in lower case like the host's name: `NS.example` and `ns.example` are one
                // host (names compare without case, RFC 4343 §3).
                tls_name: tls.then(|| match h.value.tls_name.as_deref() {
                    Some(name) => name.into(),
                    None => h
                        .value
                        .name
                        .trim_end_matches('.')
                        .to_ascii_lowercase()
                        .into(),
                }),
            };
            if !hosts.iter().any(|(o, _, _, _)| *o == hc) {
                hosts.push((hc, h.loc.clone(), h.value.to_string(), zones.len()));
            }
        }
        if fz.first {
            warnings.push(format!(
                "{}: {clause} '{}': {}-first has no effect yet (recursion is not built): when its upstreams fail, names get SERVFAIL",
                fz.loc,
                fz.name.value,
                if fz.kind == skua_config::ZoneKind::Forward { "forward" } else { "stub" }
            ));
        }
        if fz.prime {
            warnings.push(format!(
                "{}: stub-prime is accepted but not applied yet: the stub addresses are asked directly",
                fz.loc
            ));
        }
        let mut z = ZoneConfig {
            name: name.as_bytes().to_vec(),
            kind: match fz.kind {
                skua_config::ZoneKind::Forward => ZoneKind::Forward,
                skua_config::ZoneKind::Stub => ZoneKind::Stub,
            },
            upstreams,
            no_cache: fz.no_cache,
            first: fz.first,
            tls,
            tcp: fz.tcp_upstream,
            id: 0,
        };
        let own: Vec<&HostConfig> = hosts
            .iter()
            .filter(|h| h.3 == zones.len())
            .map(|h| &h.0)
            .collect();
        z.id = zone_id(&z, &own);
        zones.push(z);
    }
    // Which hosts can be resolved, and which zones have an address at all.
    let host_configs: Vec<HostConfig> = hosts.iter().map(|h| h.0.clone()).collect();
    let plans = plan_hosts(&skua_resolver::forward::ForwardConfig {
        zones: zones.clone(),
        hosts: host_configs.clone(),
        ..Default::default()
    });
    for ((_, loc, written, zi), plan) in hosts.iter().zip(&plans) {
        let fz = &cfg.forward_zones[*zi];
        let clause = fz.kind.clause();
        let addr = match fz.kind {
            skua_config::ZoneKind::Forward => "forward-addr",
            skua_config::ZoneKind::Stub => "stub-addr",
        };
        match plan {
            HostPlan::Via(_) | HostPlan::NoZone => {}
            HostPlan::Loop(v) => {
                let inner = &cfg.forward_zones[*v];
                warnings.push(format!(
                    "{loc}: {clause} host '{written}' cannot be resolved: its name is inside {} '{}', which has no address that does not depend on this host (a loop); give its address with {addr}",
                    inner.kind.clause(),
                    inner.name.value
                ));
            }
            HostPlan::Outside => warnings.push(format!(
                "{loc}: {clause} host '{written}' cannot be resolved: no forward-zone or stub-zone contains its name (recursion is not built); add one that does, or give its address with {addr}"
            )),
        }
    }
    for (i, z) in zones.iter().enumerate() {
        let resolvable = hosts
            .iter()
            .zip(&plans)
            .any(|(h, p)| h.3 == i && matches!(p, HostPlan::Via(_)));
        if z.upstreams.is_empty() && !resolvable {
            let fz = &cfg.forward_zones[i];
            warnings.push(format!(
                "{}: {} '{}' has no usable address: its names get SERVFAIL",
                fz.loc,
                fz.kind.clause(),
                fz.name.value
            ));
        }
    }
    for (what, set) in [
        ("caps-exempt", !s.caps_exempt.is_empty()),
        ("infra-host-ttl", s.infra_host_ttl != 900),
        ("jostle-timeout", s.jostle_timeout_ms != 200),
        ("serve-expired-ttl-reset", s.serve_expired_ttl_reset),
    ] {
        if set {
            warnings.push(format!("'{what}' is accepted but not applied yet"));
        }
    }
    if let Some(b) = &s.tls_cert_bundle {
        check_bundle(&b.value).map_err(|e| at(&b.loc, e))?;
    }
    let forward = skua_resolver::forward::ForwardConfig {
        zones,
        hosts: host_configs,
        do_not_query_localhost: s.do_not_query_localhost,
        do_ip4: s.do_ip4,
        do_ip6: s.do_ip6,
        edns_buffer_size: s.edns_buffer_size,
        use_caps_for_id: s.use_caps_for_id,
        tcp_upstream: s.tcp_upstream,
        unwanted_reply_threshold: s.unwanted_reply_threshold,
        limits: Limits {
            // outgoing-range bounds Unbound's sockets in flight per thread; here it
            // bounds the questions in flight.
            flights: s.outgoing_range.max(1) * s.num_threads.max(1),
            ..Limits::default()
        },
    };
    let cache = skua_resolver::cache::CacheConfig {
        msg_bytes: s.msg_cache_size,
        rrset_bytes: s.rrset_cache_size,
        shards: s.msg_cache_slabs.max(s.rrset_cache_slabs).max(64),
        min_ttl: s.cache_min_ttl,
        max_ttl: s.cache_max_ttl,
        max_negative_ttl: s.cache_max_negative_ttl,
        prefetch: s.prefetch,
        serve_expired: s.serve_expired,
        serve_expired_ttl: s.serve_expired_ttl,
        serve_expired_reply_ttl: s.serve_expired_reply_ttl,
        serve_expired_client_timeout: s.serve_expired_client_timeout_ms,
    };
    Ok(Some(ResolverSettings {
        forward,
        cache,
        ports: port_ranges(&s.outgoing_port_rules),
        tls_cert_bundle: s.tls_cert_bundle.as_ref().map(|b| b.value.clone()),
        tls_system_cert: s.tls_system_cert,
    }))
}

/// A `tls-cert-bundle:` must be readable and hold at least one PEM certificate: checked
/// at load, so a reload with a bad bundle keeps the old configuration serving.
fn check_bundle(path: &str) -> Result<(), String> {
    use rustls_pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|e| format!("tls-cert-bundle '{path}': {e}"))?;
    let n = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
        .filter(Result::is_ok)
        .count();
    if n == 0 {
        return Err(format!(
            "tls-cert-bundle '{path}': no PEM certificate in it"
        ));
    }
    Ok(())
}

/// A zone's identity for the cache: equal while its configuration (its hosts included)
/// is (FNV-1a over its fields), so a reload keeps what was resolved through unchanged
/// zones.
fn zone_id(
    z: &skua_resolver::forward::ZoneConfig,
    hosts: &[&skua_resolver::forward::HostConfig],
) -> u32 {
    let text = format!(
        "{:?}|{:?}|{:?}|{}|{}|{}|{}|{:?}",
        z.name, z.kind, z.upstreams, z.no_cache, z.first, z.tls, z.tcp, hosts
    );
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The source ports UDP queries may use: 1024-65535 (Unbound's default), then each
/// `outgoing-port-permit:`/`-avoid:` in order; empty means the default range.
fn port_ranges(rules: &[skua_config::Located<skua_config::PortRule>]) -> Vec<(u16, u16)> {
    if rules.is_empty() {
        return Vec::new();
    }
    let mut ok = vec![false; 65536];
    for p in ok.iter_mut().skip(1024) {
        *p = true;
    }
    for r in rules {
        let allow = r.value.action == skua_config::PortAction::Permit;
        for p in &mut ok[usize::from(r.value.low)..=usize::from(r.value.high)] {
            *p = allow;
        }
    }
    ok[0] = false;
    let mut ranges = Vec::new();
    let mut start = None;
    for (port, &allowed) in ok.iter().enumerate() {
        match (allowed, start) {
            (true, None) => start = Some(port),
            (false, Some(a)) => {
                ranges.push((a as u16, (port - 1) as u16));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(a) = start {
        ranges.push((a as u16, 65535));
    }
    ranges
}

/// A fresh key for the rate-limiting hash, as a daemon would pick (no RNG dependency: the
/// process's randomly keyed std hasher).
pub fn rrl_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id())
}

/// The `rrl-*:` directives as the engine's options (`None`: rate limiting off): the same
/// settings, the exempt netblocks parsed.
fn rrl_config(r: &skua_config::Rrl) -> Result<Option<skua_engine::rrl::RrlConfig>, LoadError> {
    if !r.enabled() {
        return Ok(None);
    }
    r.clone()
        .try_map_exempt(|l| {
            l.value
                .parse::<Netblock>()
                .map_err(|e| at(&l.loc, format!("rrl-exempt-clients '{}': {e}", l.value)))
        })
        .map(Some)
}

fn tag(locs: &mut Vec<Loc>, loc: &Loc) -> u32 {
    locs.push(loc.clone());
    // Cannot truncate in practice: one tag per config line.
    (locs.len() - 1) as u32
}

fn build_error(e: &BuildError, locs: &[Loc]) -> LoadError {
    let loc = match e {
        BuildError::CnameAndOtherData { tag, .. }
        | BuildError::MultipleCnames { tag, .. }
        | BuildError::OutOfZone { tag, .. } => locs.get(*tag as usize),
        _ => None,
    };
    match loc {
        Some(l) => at(l, e),
        None => LoadError(e.to_string()),
    }
}

#[cfg(test)]
mod tests;
