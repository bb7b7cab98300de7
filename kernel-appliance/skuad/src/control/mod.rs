//! The control core: reloads and API writes, one at a time.
//!
//! Both end the same way: a configuration (the main file, plus the API's [`Overlay`]) is
//! compiled into a new engine **off the hot path** (a blocking thread), and only a
//! complete, valid engine is swapped in (one atomic pointer store that workers see at their
//! next batch). A failure changes nothing: the old engine keeps serving and the caller
//! gets the reason. A write is persisted to the state file *before* it is served, so a
//! change the API acknowledged survives a restart.
//!
//! Reads (`GET` endpoints) use a [`View`] snapshot swapped in with the engine; they never
//! wait for a reload.
//!
//! It knows nothing of HTTP or sockets: the dataplanes are handed to it as a
//! [`Dataplanes`] (engine swap, listener settings, state, counters), and the parts above it
//! whose settings a reload changes (the API) register a [`Reconfigure`]. Callers (the API,
//! the supervisor's signal handler) name the actor and source of each operation for the
//! audit log ([`audit`]); who may do what is [`auth`].

pub mod audit;
pub mod auth;
pub mod cache;
pub mod ha;
pub mod load;
pub mod source;
pub mod state;
pub mod sync;
pub mod tls;
pub mod xfr;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use arc_swap::ArcSwap;
use serde::Serialize;
use skua_engine::Engine;
use skua_engine::rrl::{Rrl, RrlConfig};

use crate::base::log;
use crate::base::planes::{DataplaneState, Dataplanes};
use crate::base::resolving::ResolverSettings;
use crate::base::serving::Serving;
use crate::base::settings::Settings;
use audit::Audit;
use auth::{Access, RefusalLog};
use load::Loaded;
use source::Source;
use state::{Overlay, ZoneEntry};

/// A rate-limiting table and the options it was made for.
pub struct RrlTable {
    /// Options.
    pub config: RrlConfig,
    /// The table (shared by every engine generation that uses these options).
    pub table: Arc<Rrl>,
}

/// The table for `cfg`: `prev` when its options are the same, else a new one.
pub fn rrl_table(prev: Option<RrlTable>, cfg: Option<RrlConfig>) -> Option<RrlTable> {
    let cfg = cfg?;
    match prev {
        Some(p) if p.config == cfg => Some(p),
        _ => {
            log::info(format_args!(
                "rrl: on ({} responses/s, window {} s, slip {}, table {} accounts{})",
                cfg.responses_per_second,
                cfg.window,
                cfg.slip,
                cfg.max_table_size,
                if cfg.log_only { ", log only" } else { "" }
            ));
            Some(RrlTable {
                table: Arc::new(Rrl::new(cfg.clone(), load::rrl_seed())),
                config: cfg,
            })
        }
    }
}

/// Why a control operation failed; each maps to one HTTP status and a stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CtlError {
    /// The request itself is wrong (400).
    BadRequest(String),
    /// What it names does not exist (404).
    NotFound(String),
    /// It conflicts with the configuration or exists already (409).
    Conflict(String),
    /// The resulting configuration does not compile (422); nothing changed.
    Invalid(String),
    /// A needed resource is missing, e.g. no state file (503); nothing changed.
    Unavailable(String),
    /// An I/O error (500); nothing changed.
    Internal(String),
    /// The audit log could not record the change (503); nothing changed.
    Unaudited(String),
}

impl CtlError {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            CtlError::BadRequest(m)
            | CtlError::NotFound(m)
            | CtlError::Conflict(m)
            | CtlError::Invalid(m)
            | CtlError::Unavailable(m)
            | CtlError::Internal(m)
            | CtlError::Unaudited(m) => m,
        }
    }
}

/// A change requested through the API.
#[derive(Debug, Clone)]
pub enum Change {
    /// `local-zone: NAME TYPE`.
    AddZone {
        /// Zone name.
        name: String,
        /// Zone type.
        zone_type: String,
    },
    /// Removes an API zone (and its records: they would otherwise be served under an
    /// implicit transparent zone, which is not what removing a zone means).
    RemoveZone {
        /// Zone name.
        name: String,
    },
    /// `local-data: RR`.
    AddRecord {
        /// The record in presentation form.
        rr: String,
    },
    /// Removes an API record.
    RemoveRecord {
        /// The record in presentation form.
        rr: String,
    },
}

/// Longest record text an API change may carry (checked before it is parsed): far above
/// real records (a 4096-bit DKIM key is ~800 characters), far below the audit log's line
/// limit even in canonical form with every byte escaped.
pub const MAX_RR_TEXT: usize = 8 * 1024;
/// Longest canonical record the API stores (a short `\#` text can expand 4× when its bytes
/// need `\DDD` escapes): the audit entry of any accepted change fits its line.
pub const MAX_RR_CANONICAL: usize = 16 * 1024;

impl Change {
    /// The text the caller sent in its fields, for the SHA-256 kept in the audit log.
    fn raw(&self) -> String {
        match self {
            Change::AddZone { name, zone_type } => format!("{name} {zone_type}"),
            Change::RemoveZone { name } => name.clone(),
            Change::AddRecord { rr } | Change::RemoveRecord { rr } => rr.clone(),
        }
    }

    /// Refuses fields too long to be a zone name, zone type or record, before parsing them.
    fn check_bounds(&self) -> Result<(), CtlError> {
        let long = |what: &str, len: usize, max: usize| {
            Err(CtlError::BadRequest(format!(
                "{what} of {len} bytes: at most {max} through the API"
            )))
        };
        match self {
            Change::AddZone { name, zone_type } => {
                if name.len() > 1024 {
                    return long("zone name", name.len(), 1024);
                }
                if zone_type.len() > 64 {
                    return long("zone type", zone_type.len(), 64);
                }
            }
            Change::RemoveZone { name } if name.len() > 1024 => {
                return long("zone name", name.len(), 1024);
            }
            Change::AddRecord { rr } | Change::RemoveRecord { rr } if rr.len() > MAX_RR_TEXT => {
                return long("record text", rr.len(), MAX_RR_TEXT);
            }
            _ => {}
        }
        Ok(())
    }

    /// The same change in canonical form (zone names and records as they will be stored),
    /// or why it cannot be one.
    fn canonical(&self) -> Result<Change, CtlError> {
        Ok(match self {
            Change::AddZone { name, zone_type } => {
                state::check_zone_type(zone_type).map_err(CtlError::BadRequest)?;
                Change::AddZone {
                    name: state::canonical_zone(name).map_err(CtlError::BadRequest)?,
                    zone_type: zone_type.clone(),
                }
            }
            Change::RemoveZone { name } => Change::RemoveZone {
                name: state::canonical_zone(name).map_err(CtlError::BadRequest)?,
            },
            Change::AddRecord { rr } | Change::RemoveRecord { rr } => {
                let c = state::canonical_rr(rr).map_err(CtlError::BadRequest)?;
                if c.len() > MAX_RR_CANONICAL {
                    return Err(CtlError::BadRequest(format!(
                        "record of {} bytes in presentation form: at most {MAX_RR_CANONICAL} through the API (use a zone file)",
                        c.len()
                    )));
                }
                match self {
                    Change::AddRecord { .. } => Change::AddRecord { rr: c },
                    _ => Change::RemoveRecord { rr: c },
                }
            }
        })
    }

    /// What kind of change it is, without its fields.
    fn kind(&self) -> &'static str {
        match self {
            Change::AddZone { .. } => "add zone",
            Change::RemoveZone { .. } => "remove zone",
            Change::AddRecord { .. } => "add record",
            Change::RemoveRecord { .. } => "remove record",
        }
    }

    /// One line for logs and the audit log.
    pub fn describe(&self) -> String {
        match self {
            Change::AddZone { name, zone_type } => format!("add zone {name} {zone_type}"),
            Change::RemoveZone { name } => format!("remove zone {name}"),
            Change::AddRecord { rr } => format!("add record {rr}"),
            Change::RemoveRecord { rr } => format!("remove record {rr}"),
        }
    }
}

/// Where a zone or record comes from.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Origin {
    /// `config` (the main configuration: read-only through the API) or `api`.
    pub source: &'static str,
    /// `file:line`.
    pub at: String,
}

/// A served local zone.
#[derive(Debug, Clone, Serialize)]
pub struct ZoneView {
    /// Canonical name.
    pub name: String,
    /// Type.
    #[serde(rename = "type")]
    pub zone_type: String,
    /// Where it is defined.
    #[serde(flatten)]
    pub origin: Origin,
}

/// A served `local-data` record.
#[derive(Debug, Clone, Serialize)]
pub struct RecordView {
    /// Canonical presentation form.
    pub rr: String,
    /// Where it is defined.
    #[serde(flatten)]
    pub origin: Origin,
}

/// What the read endpoints show, swapped in with each engine.
#[derive(Debug, Clone, Serialize)]
pub struct View {
    /// Seconds since the UNIX epoch of this configuration's load.
    pub loaded_at: u64,
    /// Milliseconds its compilation took.
    pub compile_ms: f64,
    /// Records loaded (local-data and zone files).
    pub records: usize,
    /// Names in the answer tables.
    pub names: usize,
    /// Local zones.
    pub zones: Vec<ZoneView>,
    /// `local-data` records (zone-file records of auth-zones are not listed one by one).
    pub local_data: Vec<RecordView>,
    /// Warnings of the load.
    pub warnings: Vec<String>,
    /// Files read.
    pub files: Vec<String>,
    /// The effective configuration, as JSON.
    pub effective: serde_json::Value,
}

/// Result of a successful reload or write.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    /// Engine generation now serving.
    pub generation: u64,
    /// Records.
    pub records: usize,
    /// Milliseconds from request to the new engine serving.
    pub elapsed_ms: f64,
    /// Warnings of the load.
    pub warnings: Vec<String>,
}

struct Inner {
    /// The main configuration as last loaded successfully (writes are compiled on it, so a
    /// write never picks up an unreviewed edit of the main file: that is what reload is for).
    base: skua_config::Config,
    base_dir: Option<PathBuf>,
    overlay: Overlay,
    state_path: Option<PathBuf>,
    settings: Settings,
    /// Serials persisted next to the state file (`state::load_serials`).
    serials: std::collections::BTreeMap<String, u32>,
    /// The `sync: shared-config:` file and the text in force.
    shared: Option<(PathBuf, String)>,
}

/// A configuration compiled aside, not in force yet ([`Control::stage`]).
struct Staged {
    cfg: skua_config::Config,
    dir: Option<PathBuf>,
    state_path: Option<PathBuf>,
    overlay: Overlay,
    merged: skua_config::Config,
    loaded: Loaded,
    access: Access,
    prepared: Vec<Box<dyn Prepared>>,
    serials: std::collections::BTreeMap<String, u32>,
    shared: Option<(PathBuf, String)>,
    sync: Option<sync::SyncSettings>,
    tls: Option<Arc<crate::base::tls::TlsService>>,
}

/// A part of the process above the control core whose settings come from the
/// configuration (the API: its certificate, limits, listeners; later the encrypted
/// listeners). A reload asks each to [`prepare`](Self::prepare) its new settings before
/// anything changes (an error rejects the whole reload, the old configuration keeps
/// serving) and commits them once the new engine serves.
pub trait Reconfigure: Send + Sync {
    /// Checks and builds the settings for `cfg`, whose relative paths are relative to `dir`
    /// (blocking: may read files), with every check the start makes of them: a
    /// configuration taken by a reload or from a sync source must not stop the next start.
    /// Nothing changes until the returned value is committed.
    fn prepare(
        &self,
        cfg: &skua_config::Config,
        dir: Option<&Path>,
    ) -> Result<Box<dyn Prepared>, String>;
}

/// Settings prepared by a [`Reconfigure`], put in force by [`Prepared::commit`].
pub trait Prepared: Send {
    /// Puts them in force.
    fn commit(self: Box<Self>);
}

/// The control core.
pub struct Control {
    /// Where the configuration comes from.
    pub source: Source,
    /// The serving handle (engine, counters).
    pub serving: Arc<Serving>,
    /// The dataplanes.
    planes: Arc<dyn Dataplanes>,
    /// Parts above the core reconfigured by reloads (weak: they hold the core, not the
    /// reverse, so the core and its audit log are dropped, and closed, at stop).
    reconfigure: Mutex<Vec<std::sync::Weak<dyn Reconfigure>>>,
    /// Start of the process.
    pub started: Instant,
    inner: tokio::sync::Mutex<Inner>,
    view: ArcSwap<View>,
    /// Tokens and the failed-authentication limit, for every way in (API, control socket).
    pub access: ArcSwap<Access>,
    /// The audit log, when configured.
    pub audit: Mutex<Option<Audit>>,
    /// The rate-limiting table in use and its options.
    pub rrl: Mutex<Option<RrlTable>>,
    /// Reloads that succeeded.
    pub reloads_ok: AtomicU64,
    /// Reloads rejected.
    pub reloads_failed: AtomicU64,
    /// API writes applied.
    pub writes_ok: AtomicU64,
    /// API writes rejected.
    pub writes_failed: AtomicU64,
    /// Refused API requests waiting to be summarised in the audit log.
    refusals: RefusalLog,
    /// Refused zone transfer requests, likewise (`xfr-refused`).
    xfr_refusals: RefusalLog,
    /// Refused zone transfer and NOTIFY requests handled (logged or counted in
    /// `xfr_refusals`), for `skua_xfr_refused_total`: the audit log aggregates them.
    pub xfr_refused: AtomicU64,
    /// Failed refreshes and transfers of secondary zones, likewise (`xfr-in-failed`), per
    /// primary.
    xfr_in_failures: RefusalLog,
    /// The host agent's leases: counters and what the expiry watcher reports.
    leases: ha::LeaseBook,
    /// What this node offers to followers, and what it follows (`sync:`).
    pub sync: sync::SyncBook,
}

/// Refusals on the local control socket are counted under this address (no TCP source can
/// have it) and recorded without a source.
const LOCAL_SOURCE: std::net::IpAddr = std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED);

/// The window over which refused API requests from one source are summarised in one audit
/// entry (the first one of a window is recorded at once).
pub const REFUSAL_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// The state file: `api: state-file:` when set (relative paths are relative to the main
/// file's directory), else the default when its directory exists, else none (API writes
/// are refused with the reason).
pub fn state_path(cfg: &skua_config::Config, base: Option<&Path>) -> Option<PathBuf> {
    if let Some(f) = &cfg.api.state_file {
        let p = PathBuf::from(&f.value);
        return Some(match base {
            Some(b) if p.is_relative() => b.join(p),
            _ => p,
        });
    }
    let p = PathBuf::from(state::DEFAULT_STATE_FILE);
    p.parent().is_some_and(Path::is_dir).then_some(p)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Builds the read-only view of a loaded configuration.
pub fn make_view(merged: &skua_config::Config, l: &Loaded, state: Option<&Path>) -> View {
    let is_state = |loc: &skua_config::Loc| state.is_some_and(|s| *loc.file == *s);
    let origin = |loc: &skua_config::Loc| Origin {
        source: if is_state(loc) { "api" } else { "config" },
        at: loc.to_string(),
    };
    let s = &merged.server;
    let zones = s
        .local_zones
        .iter()
        .map(|z| ZoneView {
            name: state::canonical_zone(&z.value.0).unwrap_or_else(|_| z.value.0.clone()),
            zone_type: z.value.1.clone(),
            origin: origin(&z.loc),
        })
        .collect();
    let local_data = s
        .local_data
        .iter()
        .chain(&s.local_data_ptr)
        .map(|r| RecordView {
            rr: state::canonical_rr(&r.value).unwrap_or_else(|_| r.value.clone()),
            origin: origin(&r.loc),
        })
        .collect();
    View {
        loaded_at: unix_now(),
        compile_ms: l.elapsed.as_secs_f64() * 1e3,
        records: l.records,
        names: l.engine.name_count(),
        zones,
        local_data,
        warnings: l.warnings.clone(),
        files: merged
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect(),
        effective: effective_config(merged, l),
    }
}

/// The configuration in force, as JSON (no secrets: token names and roles only).
fn effective_config(cfg: &skua_config::Config, l: &Loaded) -> serde_json::Value {
    let st = &l.settings;
    let s = &cfg.server;
    serde_json::json!({
        "server": {
            "udp": st.udp.iter().map(SocketAddr::to_string).collect::<Vec<_>>(),
            "tcp": st.tcp.iter().map(SocketAddr::to_string).collect::<Vec<_>>(),
            // The encrypted listeners (docs/encrypted-dns.md): DNS over TLS (RFC 7858),
            // HTTPS (RFC 8484; `https-tls` false: plain HTTP behind a proxy) and QUIC (RFC
            // 9250), with the ports that make an interface one of them and the certificate's
            // files (paths only).
            "tls": st.tls.iter().map(SocketAddr::to_string).collect::<Vec<_>>(),
            "https": st.https.iter().map(SocketAddr::to_string).collect::<Vec<_>>(),
            "https-tls": st.https_tls,
            "doq": st.doq.iter().map(SocketAddr::to_string).collect::<Vec<_>>(),
            "tls-port": s.tls_port,
            "https-port": s.https_port,
            "quic-port": s.quic_port,
            "http-endpoint": s.http_endpoint,
            "tls-service-pem": s.tls_service_pem.as_ref().map(|p| p.value.clone()),
            "tls-service-key": s.tls_service_key.as_ref().map(|p| p.value.clone()),
            "num-threads": st.threads,
            "so-reuseport": st.reuseport,
            "ip-freebind": st.freebind,
            "so-rcvbuf": st.rcvbuf,
            "so-sndbuf": st.sndbuf,
            "tcp-idle-timeout": st.tcp_idle.as_millis() as u64,
            "incoming-num-tcp": s.incoming_num_tcp,
            "tcp-connection-limit-per-source": st.per_source_limit,
            "verbosity": st.verbosity,
            "cpu-affinity": st.cpus,
            "max-udp-size": st.max_udp_size,
            "edns-buffer-size": s.edns_buffer_size,
            "identity": l.engine.config().identity,
            "version": l.engine.config().version,
            "access-control": s.access_control.iter().map(|a| serde_json::json!({
                "netblock": a.value.0, "action": a.value.1, "at": a.loc.to_string()
            })).collect::<Vec<_>>(),
            "local-zones": s.local_zones.len(),
            "local-data": s.local_data.len() + s.local_data_ptr.len(),
        },
        "auth-zones": cfg.auth_zones.iter().map(|z| serde_json::json!({
            "name": z.name.value,
            "zonefile": z.zonefile.as_ref().map(|f| f.value.clone()),
            "for-downstream": z.for_downstream,
        })).collect::<Vec<_>>(),
    })
}

/// A configuration loaded at start, before anything serves: the main file, the state
/// file merged in, compiled, with its tokens, audit log and rate-limiting table.
pub struct Boot {
    /// The main configuration (the API reads its `api:` clause).
    pub config: skua_config::Config,
    /// What the dataplanes serve.
    pub settings: Settings,
    engine: Option<Engine>,
    dir: Option<PathBuf>,
    overlay: Overlay,
    state_path: Option<PathBuf>,
    view: View,
    access: Access,
    rrl: Option<RrlTable>,
    audit: Option<Audit>,
    resolver: Option<ResolverSettings>,
    xfr: Option<load::XfrLoaded>,
    serials: std::collections::BTreeMap<String, u32>,
    shared: Option<(PathBuf, String)>,
    sync: Option<sync::SyncSettings>,
    tls: Option<Arc<crate::base::tls::TlsService>>,
}

impl Boot {
    /// Loads `source` and the state file it names, compiles them, and logs the warnings
    /// and a summary. An error says what could not be loaded.
    pub fn load(source: &Source) -> Result<Boot, String> {
        let parsed = source
            .parse_with(None)
            .map_err(|e| format!("cannot load configuration: {e}"))?;
        let (cfg, dir, shared) = (parsed.config, parsed.dir, parsed.shared);
        let state_path = state_path(&cfg, dir.as_deref());
        let overlay = match &state_path {
            Some(p) => {
                Overlay::load(p).map_err(|e| format!("cannot load the API state file: {e}"))?
            }
            None => Overlay::default(),
        };
        let serials = match &state_path {
            Some(p) => state::load_serials(p)?,
            None => Default::default(),
        };
        let mut merged = cfg.clone();
        if let Some(p) = &state_path {
            overlay.merge_into(&mut merged.server, p);
        }
        let after = load::After {
            prev: None,
            state: state_path.as_deref(),
            serials: Some(&serials),
            secondary: None,
        };
        let loaded = load::load_config_after(merged.clone(), dir.clone(), &after)
            .map_err(|e| format!("cannot load configuration: {e}"))?;
        let serials =
            xfr::keep_serials(&loaded.xfr, &serials, state_path.as_deref()).unwrap_or(serials);
        let access = Access::from_config(&cfg).map_err(|e| format!("api: {e}"))?;
        let sync = sync::SyncSettings::from_config(&cfg, dir.as_deref())?;
        let tls = tls::tls_service(
            &cfg.server,
            dir.as_deref(),
            cfg.acme.directory.as_ref().map(|_| cfg.acme.challenge),
        )?;
        let audit = Audit::open(&cfg.audit, dir.as_deref())?;
        log::set_verbosity(loaded.settings.verbosity);
        for w in &loaded.warnings {
            log::warn(format_args!("{w}"));
        }
        log::info(format_args!(
            "loaded {} records, {} names in {:.1} ms ({} KiB of answer tables)",
            loaded.records,
            loaded.engine.name_count(),
            loaded.elapsed.as_secs_f64() * 1e3,
            loaded.engine.heap_bytes() / 1024
        ));
        let view = make_view(&merged, &loaded, state_path.as_deref());
        drop(merged);
        let Loaded {
            mut engine,
            settings,
            rrl,
            resolver,
            xfr,
            ..
        } = loaded;
        let rrl = rrl_table(None, rrl);
        engine.set_rrl(rrl.as_ref().map(|t| t.table.clone()));
        Ok(Boot {
            config: cfg,
            settings,
            engine: Some(engine),
            dir,
            overlay,
            state_path,
            view,
            access,
            rrl,
            audit,
            resolver,
            xfr: Some(xfr),
            serials,
            shared,
            sync,
            tls,
        })
    }

    /// The directory relative paths of the configuration are read from.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The TLS configurations of the encrypted listeners, for the serving handle (once,
    /// before listeners start).
    pub fn take_tls(&mut self) -> Option<Arc<crate::base::tls::TlsService>> {
        self.tls.take()
    }

    /// The compiled engine, for the serving handle (once).
    pub fn take_engine(&mut self) -> Option<Engine> {
        self.engine.take()
    }
}

impl Control {
    /// The control core of a daemon that just loaded `boot` from `source` and serves its
    /// engine through `planes`.
    pub fn new(
        source: Source,
        serving: Arc<Serving>,
        planes: Arc<dyn Dataplanes>,
        mut boot: Boot,
        started: Instant,
    ) -> Self {
        let xfr = boot.xfr.take();
        // The resolver starts with the control core: the engine in force already sends
        // names outside local data to it.
        if let Err(e) = planes.resolver(&serving, boot.resolver.as_ref()) {
            log::error(format_args!("resolver: {e}"));
        }
        let sync = sync::SyncBook::default();
        sync.set_settings(boot.sync.take());
        sync.offer(boot.shared.as_ref(), &boot.overlay);
        let ctl = Control {
            source,
            serving,
            planes,
            reconfigure: Mutex::new(Vec::new()),
            started,
            inner: tokio::sync::Mutex::new(Inner {
                base: boot.config,
                base_dir: boot.dir,
                overlay: boot.overlay,
                state_path: boot.state_path,
                settings: boot.settings,
                serials: std::mem::take(&mut boot.serials),
                shared: boot.shared.take(),
            }),
            view: ArcSwap::from_pointee(boot.view),
            access: ArcSwap::from_pointee(boot.access),
            audit: Mutex::new(boot.audit),
            rrl: Mutex::new(boot.rrl),
            reloads_ok: AtomicU64::new(0),
            reloads_failed: AtomicU64::new(0),
            writes_ok: AtomicU64::new(0),
            writes_failed: AtomicU64::new(0),
            refusals: RefusalLog::new(REFUSAL_WINDOW),
            xfr_refusals: RefusalLog::new(REFUSAL_WINDOW),
            xfr_refused: AtomicU64::new(0),
            xfr_in_failures: RefusalLog::new(REFUSAL_WINDOW),
            leases: ha::LeaseBook::default(),
            sync,
        };
        if let Some(x) = xfr {
            ctl.install_xfr(x);
        }
        ctl
    }

    /// Registers a part whose settings reloads change (see [`Reconfigure`]).
    pub fn add_reconfigure(&self, r: &Arc<dyn Reconfigure>) {
        self.reconfigure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(r));
    }

    /// The state of the dataplanes, for `/health`.
    pub fn dataplane_state(&self) -> DataplaneState {
        self.planes.state()
    }

    /// The dataplanes (counters for metrics).
    pub fn planes(&self) -> &dyn Dataplanes {
        &*self.planes
    }

    /// Notes a refused API request (no or bad token, role too low, throttled) and records
    /// what is due in the audit log (see [`RefusalLog`]). `source`: `None` for a caller on
    /// the local control socket (counted under the unspecified address, recorded without a
    /// source). Blocking: call off async workers.
    pub fn note_refusal(
        &self,
        source: Option<std::net::IpAddr>,
        actor: &str,
        method: &str,
        route: &str,
        reason: &str,
    ) {
        let due = self.refusals.note(
            source.unwrap_or(LOCAL_SOURCE),
            actor,
            method,
            route,
            reason,
            Instant::now(),
        );
        self.record_refusals(due);
    }

    /// Logs and audits refusal records: like the audit log, the daemon's log gets one line
    /// per source, actor and window, not one per refused request.
    fn record_refusals(&self, records: Vec<auth::RefusalRecord>) {
        for r in records {
            let d = &r.detail;
            let (source, from) = if r.source == LOCAL_SOURCE {
                (None, "control socket".to_string())
            } else {
                (Some(r.source), r.source.to_string())
            };
            if d["aggregated"] == true {
                log::warn(format_args!(
                    "api: {} ({}): {} more refused requests in the last {} s: {}",
                    from, r.actor, d["count"], d["window_seconds"], d["reasons"]
                ));
            } else {
                log::warn(format_args!(
                    "api: {} ({}): {} {}: {} (more refusals this minute are counted, not logged one by one)",
                    from,
                    r.actor,
                    d["method"].as_str().unwrap_or(""),
                    d["route"].as_str().unwrap_or(""),
                    d["reason"].as_str().unwrap_or("")
                ));
            }
            self.record(skua_audit::kind::AUTH_FAILURE, &r.actor, source, r.detail);
        }
    }

    /// Records the summaries of refusal windows that ended (all of them with `all`, at
    /// stop). Blocking.
    pub fn flush_refusals(&self, all: bool) {
        let due = if all {
            self.refusals.drain()
        } else {
            self.refusals.due(Instant::now())
        };
        self.record_refusals(due);
        let due = if all {
            self.xfr_refusals.drain()
        } else {
            self.xfr_refusals.due(Instant::now())
        };
        self.record_xfr_refusals(due);
        let due = if all {
            self.xfr_in_failures.drain()
        } else {
            self.xfr_in_failures.due(Instant::now())
        };
        self.record_xfr_in_failures(due);
    }

    /// The current view.
    pub fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// The engine serving now.
    pub fn engine(&self) -> Arc<Engine> {
        self.serving.engine()
    }

    /// Engine generation.
    pub fn generation(&self) -> u64 {
        self.serving.generation()
    }

    /// Gives `engine` the rate-limiting table of `cfg`: the one in use when the options did
    /// not change (so a reload or an API write does not forgive a flood in progress), a
    /// new one otherwise, none when rate limiting is off.
    fn attach_rrl(&self, engine: &mut Engine, cfg: Option<RrlConfig>) {
        let mut cur = self.rrl.lock().unwrap_or_else(|e| e.into_inner());
        let next = rrl_table(cur.take(), cfg);
        engine.set_rrl(next.as_ref().map(|t| t.table.clone()));
        *cur = next;
    }

    /// Appends to the audit log, if there is one (never fails: see [`Audit::record`]).
    pub fn record(
        &self,
        kind: &str,
        actor: &str,
        source: Option<std::net::IpAddr>,
        detail: serde_json::Value,
    ) {
        if let Some(a) = self
            .audit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            a.record(kind, actor, source, detail);
        }
    }

    /// Reopens or re-keys the audit log after a reload.
    fn reconfigure_audit(
        &self,
        cfg: &skua_config::Audit,
        base: Option<&Path>,
    ) -> Result<(), String> {
        let mut guard = self.audit.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = guard.as_mut()
            && a.reconfigure(cfg, base)?
        {
            return Ok(());
        }
        // Another file, a new log, or none: close the old one (after recording why), open
        // the new one.
        if let Some(old) = guard.take() {
            old.record(
                "audit-closed",
                "system",
                None,
                serde_json::json!({"reason": "reload: the audit log moved or was switched off"}),
            );
        }
        *guard = Audit::open(cfg, base)?;
        Ok(())
    }

    /// Swaps `engine` in, with the XDP plane's answers suspended around the swap (so no
    /// client gets an old answer from the program after a new one from a worker).
    fn swap_engine(&self, engine: Engine) {
        self.planes.swap(&self.serving, Arc::new(engine));
        skua_netio::release_free_memory();
    }

    /// Puts a loaded configuration in force: its engine (with the rate-limiting table in
    /// use) on every dataplane, then its view. Returns its record count and warnings.
    fn install(&self, loaded: Loaded, view: View) -> (usize, Vec<String>) {
        let Loaded {
            mut engine,
            records,
            warnings,
            rrl,
            xfr,
            ..
        } = loaded;
        self.attach_rrl(&mut engine, rrl);
        self.swap_engine(engine);
        // After the engine: a transfer never sends a serial the engine does not serve yet.
        self.install_xfr(xfr);
        self.view.store(Arc::new(view));
        (records, warnings)
    }

    /// Re-reads the configuration source and the state file and applies them. On error the
    /// old configuration keeps serving.
    pub async fn reload(
        &self,
        actor: &str,
        source: Option<std::net::IpAddr>,
    ) -> Result<Applied, CtlError> {
        let r = self.reload_inner().await;
        let detail = match &r {
            Ok(a) => {
                serde_json::json!({"result": "ok", "generation": a.generation, "records": a.records})
            }
            Err(e) => serde_json::json!({"result": "failed", "error": e.message()}),
        };
        self.record(skua_audit::kind::RELOAD, actor, source, detail);
        r
    }

    async fn reload_inner(&self) -> Result<Applied, CtlError> {
        let t0 = Instant::now();
        let mut inner = self.inner.lock().await;
        let staged = self.stage(None, None).await.inspect_err(|_| {
            self.reloads_failed.fetch_add(1, Ordering::Relaxed);
        })?;
        let (applied, listener_error) = self.commit(&mut inner, staged, t0);
        // A follower asks its source again after a local reload: a version that failed
        // here may load now (a zone file copied in, the main file fixed).
        self.sync.local_reloaded();
        if let Some(e) = listener_error {
            // The configuration serves; a listener it names could not be bound.
            self.reloads_failed.fetch_add(1, Ordering::Relaxed);
            return Err(CtlError::Internal(format!(
                "reloaded, but a listener could not be bound: {e} (the other listeners changed; that address keeps its previous sockets, if any)"
            )));
        }
        self.reloads_ok.fetch_add(1, Ordering::Relaxed);
        Ok(applied)
    }

    /// Reads the configuration source (with `swap`: one file read as given text) and the
    /// state file (or takes `overlay` instead), compiles them and prepares the parts above
    /// the core, off the async workers. Nothing changes.
    async fn stage(
        &self,
        swap: Option<(PathBuf, String)>,
        given: Option<Overlay>,
    ) -> Result<Staged, CtlError> {
        let source = self.source.clone();
        let hooks: Vec<Arc<dyn Reconfigure>> = self
            .reconfigure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        let prev_xfr = self.serving.zones();
        let res = tokio::task::spawn_blocking(move || -> Result<Staged, String> {
            let swap_ref = swap.as_ref().map(|(p, t)| (p.as_path(), t.as_str()));
            let parsed = source.parse_with(swap_ref).map_err(|e| e.to_string())?;
            let (cfg, dir) = (parsed.config, parsed.dir);
            let state_path = state_path(&cfg, dir.as_deref());
            let overlay = match (given, &state_path) {
                (Some(o), _) => o,
                (None, Some(p)) => Overlay::load(p)?,
                (None, None) => Overlay::default(),
            };
            let serials = match &state_path {
                Some(p) => state::load_serials(p)?,
                None => Default::default(),
            };
            let mut merged = cfg.clone();
            if let Some(p) = &state_path {
                overlay.merge_into(&mut merged.server, p);
            }
            let after = load::After {
                prev: Some(&prev_xfr),
                state: state_path.as_deref(),
                serials: Some(&serials),
                secondary: None,
            };
            let loaded =
                load::load_config_after(merged.clone(), dir.clone(), &after).map_err(|e| e.0)?;
            // Serials a reload raised (a changed zone file without a higher serial) are
            // kept before they serve, so a restart does not go back (best effort here:
            // the zone file is the operator's to fix).
            let serials =
                xfr::keep_serials(&loaded.xfr, &serials, state_path.as_deref()).unwrap_or(serials);
            let access = Access::from_config(&cfg)?;
            let sync = sync::SyncSettings::from_config(&cfg, dir.as_deref())?;
            let tls = tls::tls_service(
                &cfg.server,
                dir.as_deref(),
                cfg.acme.directory.as_ref().map(|_| cfg.acme.challenge),
            )?;
            let prepared = hooks
                .iter()
                .map(|h| h.prepare(&cfg, dir.as_deref()))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Staged {
                cfg,
                dir,
                state_path,
                overlay,
                merged,
                loaded,
                access,
                prepared,
                serials,
                shared: parsed.shared,
                sync,
                tls,
            })
        })
        .await
        .map_err(|e| CtlError::Internal(format!("reload task: {e}")))?;
        res.map_err(CtlError::Invalid)
    }

    /// Puts a staged configuration in force (see [`Self::stage`]). The configuration serves
    /// in any case; the second value says what could not be applied with it (a listener
    /// that could not be bound, the resolver, the audit log).
    fn commit(&self, inner: &mut Inner, st: Staged, t0: Instant) -> (Applied, Option<String>) {
        let Staged {
            cfg,
            dir,
            state_path,
            overlay,
            merged,
            loaded,
            access,
            prepared,
            serials,
            shared,
            sync,
            tls: tls_service,
        } = st;
        for w in &loaded.warnings {
            log::warn(format_args!("{w}"));
        }
        log::set_verbosity(loaded.settings.verbosity);
        let new_settings = loaded.settings.clone();
        let view = make_view(&merged, &loaded, state_path.as_deref());
        // The resolver before the engine that may send it names: started, reconfigured
        // (its cache kept but for the zones that changed) or stopped.
        let mut listener_error = None;
        if let Err(e) = self
            .planes
            .resolver(&self.serving, loaded.resolver.as_ref())
        {
            log::error(format_args!("resolver: {e}"));
            listener_error = Some(format!("resolver: {e}"));
        }
        let (records, warnings) = self.install(loaded, view);
        // New handshakes take the new certificate; connections in progress keep theirs.
        // Another certificate than the one in force is audited before it serves.
        if let Some(detail) = tls::swap_detail(
            self.serving.tls.service.load().as_deref(),
            tls_service.as_deref(),
        ) {
            self.record(skua_audit::kind::TLS_SWAPPED, "system", None, detail);
        }
        self.serving.tls.service.store(tls_service);
        self.serving
            .tls
            .doh
            .store(Arc::new(tls::doh_params(&cfg.server)));
        self.access.store(Arc::new(access));
        for p in prepared {
            p.commit();
        }
        if new_settings != inner.settings {
            // Blocking work (binding, draining retired sockets for a few hundred ms, joining
            // threads, XDP attach and self-test) off the async workers.
            let r = tokio::task::block_in_place(|| self.apply_settings(&new_settings));
            if let Err(e) = r {
                listener_error = Some(e);
            }
            inner.settings = new_settings;
        }
        let audit_cfg = cfg.audit.clone();
        let audit_dir = dir.clone();
        if let Err(e) =
            tokio::task::block_in_place(|| self.reconfigure_audit(&audit_cfg, audit_dir.as_deref()))
        {
            log::error(format_args!("audit: {e}"));
            listener_error.get_or_insert(format!("audit log: {e}"));
        }
        self.sync.set_settings(sync);
        inner.base = cfg;
        inner.base_dir = dir;
        inner.overlay = overlay;
        inner.state_path = state_path;
        inner.serials = serials;
        inner.shared = shared;
        self.sync.offer(inner.shared.as_ref(), &inner.overlay);
        let applied = Applied {
            generation: self.generation(),
            records,
            elapsed_ms: t0.elapsed().as_secs_f64() * 1e3,
            warnings,
        };
        (applied, listener_error)
    }

    /// Makes the dataplanes match new settings.
    fn apply_settings(&self, s: &Settings) -> Result<(), String> {
        self.planes.apply(s)
    }

    /// Applies API changes: all or nothing, audited and persisted before served.
    ///
    /// Each change is bounded, then put in canonical form; the audit entry names the
    /// canonical changes (what is stored and served, not the request's spelling) and the
    /// SHA-256 of each request field. A write is recorded in the audit log **before** it is
    /// applied; when that entry cannot be written the write is refused and nothing
    /// changes. Refused writes are recorded too (best effort: nothing changed).
    pub async fn write(
        &self,
        changes: Vec<Change>,
        actor: &str,
        source: Option<std::net::IpAddr>,
    ) -> Result<Applied, CtlError> {
        let requests: Vec<String> = changes
            .iter()
            .map(|c| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(c.raw().as_bytes())))
            .collect();
        let prepared: Result<Vec<Change>, CtlError> = changes
            .iter()
            .map(|c| c.check_bounds().and_then(|()| c.canonical()))
            .collect();
        let (described, r) = match prepared {
            Ok(canon) => {
                let described: Vec<String> = canon.iter().map(Change::describe).collect();
                let pre = Audited {
                    actor,
                    source,
                    changes: &described,
                    requests: &requests,
                };
                (described.clone(), self.write_inner(canon, &pre).await)
            }
            Err(e) => {
                let e = (e, false);
                // Not canonical: named by kind and hash only (the field may be anything).
                let described = changes
                    .iter()
                    .zip(&requests)
                    .map(|(c, h)| format!("{} (sha256 {h})", c.kind()))
                    .collect();
                (described, Err(e))
            }
        };
        match &r {
            Ok(_) => self.writes_ok.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.writes_failed.fetch_add(1, Ordering::Relaxed),
        };
        if let Err((e, false)) = &r {
            let detail = serde_json::json!({
                "changes": described,
                "request_sha256": requests,
                "result": "refused",
                "error": e.message(),
            });
            tokio::task::block_in_place(|| {
                self.record(skua_audit::kind::API_WRITE, actor, source, detail)
            });
        }
        r.map_err(|(e, _)| e)
    }

    /// The write itself; an error comes with whether it is already in the audit log.
    async fn write_inner(
        &self,
        changes: Vec<Change>,
        pre: &Audited<'_>,
    ) -> Result<Applied, (CtlError, bool)> {
        self.write_checked(changes, pre).await
    }

    async fn write_checked(
        &self,
        changes: Vec<Change>,
        pre: &Audited<'_>,
    ) -> Result<Applied, (CtlError, bool)> {
        let unrecorded = |e: CtlError| (e, false);
        let t0 = Instant::now();
        if !self.holds_lease() {
            // Written here, it would be replaced by the source's data at its next change:
            // refused, so that nothing acknowledged is lost (docs/ha.md). A node of an HA
            // pair that follows the other takes writes only as master, even while it
            // follows nobody (both without a lease: two nodes taking writes would diverge).
            if let Some(from) = self.sync.following() {
                return Err(unrecorded(CtlError::Conflict(format!(
                    "this node follows {from} (sync:): change zones and records there, the master"
                ))));
            }
            if self.has_leases() && self.sync.settings().is_some() {
                return Err(unrecorded(CtlError::Conflict(
                    "this node holds no lease (ha:) and follows the node that does (sync:): change zones and records on the master".into(),
                )));
            }
        }
        let mut inner = self.inner.lock().await;
        let Some(path) = inner.state_path.clone() else {
            return Err(unrecorded(CtlError::Unavailable(
                "no state file: set api: state-file: to allow changes through the API".into(),
            )));
        };
        let mut overlay = inner.overlay.clone();
        for c in &changes {
            apply_change(&inner.base, &mut overlay, c).map_err(unrecorded)?;
        }
        let mut merged = inner.base.clone();
        overlay.merge_into(&mut merged.server, &path);
        let dir = inner.base_dir.clone();
        let m2 = merged.clone();
        let prev_xfr = self.serving.zones();
        let (p3, s3) = (path.clone(), inner.serials.clone());
        let loaded = tokio::task::spawn_blocking(move || {
            let after = load::After {
                prev: Some(&prev_xfr),
                state: Some(&p3),
                serials: Some(&s3),
                secondary: None,
            };
            load::load_config_after(m2, dir, &after)
        })
        .await
        .map_err(|e| unrecorded(CtlError::Internal(format!("compile task: {e}"))))?
        .map_err(|e| unrecorded(CtlError::Invalid(e.0)))?;
        // Audited before anything changes (the engine swaps happen under `inner`, so the
        // generation this write will serve is known).
        let generation = self.generation() + 1;
        // Transferred zones whose serial this write moves (their secondaries follow by IXFR).
        let moved = xfr::moved_serials(&self.serving.zones(), &loaded.xfr);
        let mut detail = serde_json::json!({
            "changes": pre.changes,
            "request_sha256": pre.requests,
            "result": "ok",
            "generation": generation,
        });
        if !moved.is_empty() {
            detail["zone_serials"] = serde_json::json!(moved);
        }
        tokio::task::block_in_place(|| {
            self.append_required(skua_audit::kind::API_WRITE, pre.actor, pre.source, detail)
        })
        // Nothing could be recorded, nothing more is tried.
        .map_err(|e| (e, true))?;
        let o2 = overlay.clone();
        let p2 = path.clone();
        // The serials first: a crash between the two files leaves a serial too high, which
        // only makes the next change's serial jump.
        let serials = xfr::keep_serials(&loaded.xfr, &inner.serials, None);
        let s2 = serials.clone();
        let saved = tokio::task::spawn_blocking(move || {
            if let Some(s) = &s2 {
                state::save_serials(&p2, s)?;
            }
            o2.save(&p2)
        })
        .await
        .map_err(|e| CtlError::Internal(format!("save task: {e}")))
        .and_then(|r| {
            r.map_err(|e| {
                CtlError::Internal(format!(
                    "cannot write the state file {}: {e}; nothing changed",
                    path.display()
                ))
            })
        });
        if let Err(e) = saved {
            // The entry above said "ok"; this one says it did not happen.
            let detail = serde_json::json!({
                "changes": pre.changes,
                "request_sha256": pre.requests,
                "result": "failed",
                "error": e.message(),
            });
            tokio::task::block_in_place(|| {
                self.record(skua_audit::kind::API_WRITE, pre.actor, pre.source, detail)
            });
            return Err((e, true));
        }
        let view = make_view(&merged, &loaded, Some(&path));
        let (records, warnings) = self.install(loaded, view);
        inner.overlay = overlay;
        if let Some(s) = serials {
            inner.serials = s;
        }
        self.sync.offer(inner.shared.as_ref(), &inner.overlay);
        Ok(Applied {
            generation: self.generation(),
            records,
            elapsed_ms: t0.elapsed().as_secs_f64() * 1e3,
            warnings,
        })
    }

    /// Appends an entry that must be written: `Ok` when it was (or no audit log is
    /// configured), else the reason as [`CtlError::Unaudited`].
    fn append_required(
        &self,
        kind: &str,
        actor: &str,
        source: Option<std::net::IpAddr>,
        detail: serde_json::Value,
    ) -> Result<(), CtlError> {
        let guard = self.audit.lock().unwrap_or_else(|e| e.into_inner());
        let Some(a) = guard.as_ref() else {
            return Ok(());
        };
        a.append(kind, actor, source, detail).map_err(|e| {
            log::error(format_args!("audit: {e}; the change was refused"));
            CtlError::Unaudited(format!(
                "the audit log cannot record this change ({e}); nothing changed"
            ))
        })
    }
}

/// Who asks for a write and what it is, for its audit entry.
struct Audited<'a> {
    actor: &'a str,
    source: Option<std::net::IpAddr>,
    changes: &'a [String],
    requests: &'a [String],
}

/// Checks one change against the main configuration and applies it to `o`.
fn apply_change(cfg: &skua_config::Config, o: &mut Overlay, c: &Change) -> Result<(), CtlError> {
    let base = &cfg.server;
    // A secondary zone's data is its primary's (docs/zone-transfer.md): records under it
    // are refused, not served beside the transferred copy.
    if let Change::AddRecord { rr } = c
        && let Ok(owner) = skua_engine::name::WireName::parse(
            state::rr_owner(&state::canonical_rr(rr).map_err(CtlError::BadRequest)?),
            None,
        )
        && let Some(z) = cfg.auth_zones.iter().find(|z| {
            !z.primaries.is_empty()
                && skua_engine::name::WireName::parse(&z.name.value, None)
                    .is_ok_and(|apex| owner.is_subdomain_of(&apex))
        })
    {
        return Err(CtlError::Conflict(format!(
            "{} is in auth-zone {}, a secondary zone (defined at {}): its primary owns its data",
            owner, z.name.value, z.loc
        )));
    }
    let in_config_zone = |name: &str| {
        base.local_zones
            .iter()
            .find(|z| state::canonical_zone(&z.value.0).as_deref() == Ok(name))
    };
    match c {
        Change::AddZone { name, zone_type } => {
            let name = state::canonical_zone(name).map_err(CtlError::BadRequest)?;
            state::check_zone_type(zone_type).map_err(CtlError::BadRequest)?;
            if let Some(z) = in_config_zone(&name) {
                return Err(CtlError::Conflict(format!(
                    "zone {name} is defined in the configuration at {} (change it there)",
                    z.loc
                )));
            }
            if o.zones.iter().any(|z| z.name == name) {
                return Err(CtlError::Conflict(format!("zone {name} exists already")));
            }
            o.zones.push(ZoneEntry {
                name,
                zone_type: zone_type.clone(),
            });
        }
        Change::RemoveZone { name } => {
            let name = state::canonical_zone(name).map_err(CtlError::BadRequest)?;
            if let Some(z) = in_config_zone(&name) {
                return Err(CtlError::Conflict(format!(
                    "zone {name} is defined in the configuration at {} (remove it there)",
                    z.loc
                )));
            }
            let before = o.zones.len();
            o.zones.retain(|z| z.name != name);
            if o.zones.len() == before {
                return Err(CtlError::NotFound(format!("no API zone {name}")));
            }
            let apex = skua_engine::name::WireName::parse(&name, None)
                .map_err(|e| CtlError::BadRequest(e.to_string()))?;
            o.records.retain(|r| {
                skua_engine::name::WireName::parse(state::rr_owner(r), None)
                    .map(|n| !n.is_subdomain_of(&apex))
                    .unwrap_or(true)
            });
        }
        Change::AddRecord { rr } => {
            let rr = state::canonical_rr(rr).map_err(CtlError::BadRequest)?;
            let dup = base
                .local_data
                .iter()
                .find(|l| state::canonical_rr(&l.value).as_deref() == Ok(rr.as_str()));
            if let Some(l) = dup {
                return Err(CtlError::Conflict(format!(
                    "record is defined in the configuration at {}",
                    l.loc
                )));
            }
            if o.records.contains(&rr) {
                return Err(CtlError::Conflict(format!("record exists already: {rr}")));
            }
            o.records.push(rr);
        }
        Change::RemoveRecord { rr } => {
            let rr = state::canonical_rr(rr).map_err(CtlError::BadRequest)?;
            let before = o.records.len();
            o.records.retain(|r| *r != rr);
            if o.records.len() == before {
                let in_cfg = base
                    .local_data
                    .iter()
                    .find(|l| state::canonical_rr(&l.value).as_deref() == Ok(rr.as_str()));
                return Err(match in_cfg {
                    Some(l) => CtlError::Conflict(format!(
                        "record is defined in the configuration at {} (remove it there)",
                        l.loc
                    )),
                    None => CtlError::NotFound(format!("no API record {rr}")),
                });
            }
        }
    }
    Ok(())
}
