//! From an `unbound.conf`-style file to a compiled engine and listener settings.
//!
//! Every value is checked here and every error names the file and line it came from. A
//! failed load leaves nothing behind: the caller keeps serving the engine it had.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use skua_config::{Config, Loc};

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

/// Loads a configuration given as text (tests, bench).
pub fn load_str(text: &str, name: &str) -> Result<Loaded, LoadError> {
    let cfg = skua_config::parse_str(text, name).map_err(|e| LoadError(e.to_string()))?;
    load_config(cfg, None)
}

fn hostname() -> String {
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
    let start = Instant::now();
    let s = &cfg.server;
    let mut warnings: Vec<String> = cfg.warnings.iter().map(ToString::to_string).collect();
    let mut b = EngineBuilder::new();
    let ec = b.config_mut();
    ec.identity = (!s.hide_identity).then(|| s.identity.clone().unwrap_or_else(hostname));
    ec.version = (!s.hide_version).then(|| {
        s.version
            .clone()
            .unwrap_or_else(|| format!("skuad {}", env!("CARGO_PKG_VERSION")))
    });
    ec.edns_buffer_size = s.edns_buffer_size;
    ec.max_udp_size = s.max_udp_size;

    for l in &s.access_control {
        let (nb, action) = &l.value;
        let nb: Netblock = nb
            .parse()
            .map_err(|e| at(&l.loc, format!("access-control '{nb}': {e}")))?;
        let action: AclAction = action
            .parse()
            .map_err(|e| at(&l.loc, format!("access-control action '{action}': {e}")))?;
        b.acl_mut().insert(nb, action);
    }
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
            warnings.push(format!("{}: local-zone type 'noview' only matters in views, which are not supported yet; it behaves as transparent", l.loc));
        }
        b.local_zone(n, t);
    }
    // Tags index this table so that engine build errors can name the line.
    let mut locs: Vec<Loc> = Vec::new();
    let mut records = 0usize;
    for l in &s.local_data {
        let rr = text::parse_rr(&l.value, None, 3600)
            .map_err(|e| at(&l.loc, format!("local-data '{}': {e}", l.value)))?;
        b.local_data(rr, tag(&mut locs, &l.loc));
        records += 1;
    }
    for l in &s.local_data_ptr {
        let rr = text::parse_local_data_ptr(&l.value, 3600)
            .map_err(|e| at(&l.loc, format!("local-data-ptr '{}': {e}", l.value)))?;
        b.local_data(rr, tag(&mut locs, &l.loc));
        records += 1;
    }
    let mut loader = FileLoader { base };
    let mut auth_names: Vec<WireName> = Vec::new();
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
        for p in &z.primaries {
            warnings.push(format!(
                "{}: zone transfers are not supported yet; primary '{}' is ignored",
                p.loc, p.value
            ));
        }
        if !z.for_downstream {
            warnings.push(format!("{}: auth-zone '{}' has for-downstream: no; only downstream service is implemented, so it is not served", z.loc, z.name.value));
            continue;
        }
        let Some(zf) = &z.zonefile else {
            return Err(at(
                &z.loc,
                format!(
                    "auth-zone '{}' has no zonefile (zone transfers are not supported yet)",
                    z.name.value
                ),
            ));
        };
        let (display, text) = loader.load(&zf.value).map_err(|e| at(&zf.loc, e))?;
        let tag_zone = tag(&mut locs, &zf.loc);
        let mut recs = Vec::new();
        let n = zonefile::parse_zone(&text, &display, &name, &mut loader, &mut |rr| {
            recs.push((rr, tag_zone));
            Ok(())
        })
        .map_err(|e| LoadError(e.to_string()))?;
        records += n;
        b.auth_zone(AuthZoneSpec {
            name,
            records: recs,
        });
    }
    let engine = b.build().map_err(|e| build_error(&e, &locs))?;
    let rrl = rrl_config(&s.rrl)?;

    // Listener settings.
    let mut udp = Vec::new();
    let mut tcp = Vec::new();
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
    for (a, _) in ifaces {
        if (a.is_ipv4() && !s.do_ip4) || (a.is_ipv6() && !s.do_ip6) {
            continue;
        }
        if s.do_udp {
            udp.push(a);
        }
        if s.do_tcp {
            tcp.push(a);
        }
    }
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
    let settings = Settings {
        udp,
        tcp,
        threads: s.num_threads.max(1),
        reuseport: s.so_reuseport,
        rcvbuf: s.so_rcvbuf,
        sndbuf: s.so_sndbuf,
        tcp_idle: Duration::from_millis(s.tcp_idle_timeout_ms.max(1)),
        tcp_limit: s.incoming_num_tcp.max(1) * s.num_threads.max(1),
        verbosity: s.verbosity,
        cpus,
        max_udp_size: s.max_udp_size.max(512),
    };
    Ok(Loaded {
        engine,
        settings,
        warnings,
        records,
        elapsed: start.elapsed(),
        rrl,
    })
}

/// A fresh key for the rate-limiting hash, as a daemon would pick (no RNG dependency: the
/// process's randomly keyed std hasher).
pub fn rrl_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id())
}

/// The `rrl-*:` directives as the engine's options (`None`: rate limiting off).
fn rrl_config(r: &skua_config::Rrl) -> Result<Option<skua_engine::rrl::RrlConfig>, LoadError> {
    if !r.enabled() {
        return Ok(None);
    }
    let mut exempt = Vec::new();
    for l in &r.exempt_clients {
        exempt.push(
            l.value
                .parse::<Netblock>()
                .map_err(|e| at(&l.loc, format!("rrl-exempt-clients '{}': {e}", l.value)))?,
        );
    }
    Ok(Some(skua_engine::rrl::RrlConfig {
        responses_per_second: r.responses_per_second,
        nodata_per_second: r.nodata_per_second,
        nxdomains_per_second: r.nxdomains_per_second,
        referrals_per_second: r.referrals_per_second,
        errors_per_second: r.errors_per_second,
        all_per_second: r.all_per_second,
        window: r.window,
        slip: r.slip,
        ipv4_prefix_length: r.ipv4_prefix_length,
        ipv6_prefix_length: r.ipv6_prefix_length,
        exempt_clients: exempt,
        qps_scale: r.qps_scale,
        log_only: r.log_only,
        max_table_size: r.max_table_size,
        min_table_size: r.min_table_size,
    }))
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
mod tests {
    use super::*;

    #[test]
    fn default_config_loads() {
        let l = load_default().unwrap();
        assert_eq!(l.settings.udp, vec!["127.0.0.1:5353".parse().unwrap()]);
        assert_eq!(l.settings.tcp, l.settings.udp);
        assert!(l.records >= 5);
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = load_str("server:\n  local-data: \"a.example. A 1.2.3\"\n", "t.conf")
            .err()
            .unwrap();
        assert!(e.0.starts_with("t.conf:2: local-data"), "{e}");
        let e = load_str("server:\n\n  access-control: 10.0.0.0/8 permit\n", "t.conf")
            .err()
            .unwrap();
        assert!(e.0.starts_with("t.conf:3: access-control action"), "{e}");
        let e = load_str("server:\n  local-zone: example. bogus\n", "t.conf")
            .err()
            .unwrap();
        assert!(e.0.starts_with("t.conf:2: local-zone type"), "{e}");
        let e = load_str(
            "server:\n local-data: \"a.example. A 198.18.0.1\"\n local-data: \"a.example. CNAME b.example.\"\n",
            "t.conf",
        )
        .err()
        .unwrap();
        assert!(e.0.starts_with("t.conf:3: "), "{e}");
    }

    #[test]
    fn addresses() {
        assert_eq!(
            parse_addr("127.0.0.1", 8053).unwrap().to_string(),
            "127.0.0.1:8053"
        );
        assert_eq!(
            parse_addr("::1@9000", 8053).unwrap().to_string(),
            "[::1]:9000"
        );
        assert!(parse_addr("localhost", 8053).is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0,2-3"), Some(vec![0, 2, 3]));
        assert_eq!(parse_cpus("3-1"), None);
        assert_eq!(parse_cpus(""), None);
    }
}
