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

mod forward;
mod xfr;

use forward::resolver_settings;
use xfr::{secondary_zone, tsig_keys, xfr_entries, xfr_zone};

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

/// The secondary zones of a load, by lower-cased apex (see [`XfrLoaded::secondaries`]).
type Secondaries = std::collections::HashMap<Vec<u8>, crate::base::xfr::Secondary>;

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
) -> Result<(Vec<XfrZoneLoaded>, Secondaries), LoadError> {
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
