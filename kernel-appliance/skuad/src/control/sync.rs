//! What a node offers its followers, and what it takes from the node it follows (`sync:`;
//! docs/ha.md, "Configuration and API data").
//!
//! **Offered**: a [`Bundle`], the text of the `sync: shared-config:` file *as loaded* (never
//! an edit not reloaded yet) and the zones and records made through the API, named by a
//! SHA-256 digest. It is refreshed after every reload, API write and sync, and followers
//! waiting on an unchanged digest are woken ([`SyncBook::subscribe`]).
//!
//! **Taken** ([`Control::sync_apply`]): a bundle must match its digest; its shared text
//! may hold only the clauses and directives of [`SHARED_DIRECTIVES`] (deny by default:
//! what belongs to one node, `include:`, unknown directives are refused, named with their
//! line), the files it names only in the configuration directory; its records are bounded
//! and canonical like API writes, and records under a zone this node receives by zone
//! transfer are left to the transfer. It is compiled with this node's own main file and
//! checked as a start checks it (the parts above the core prepare their settings from it:
//! the API's, ACME's), so a version taken can never stop the next start; then recorded in
//! the audit log (`sync-in`) before anything changes, written (the shared file and the
//! state file, atomically), then served like a reload. One that does not load changes
//! nothing.
//!
//! While this node follows a source (with `ha:` addresses: it holds no lease and the source
//! does; without: the source answers), API writes
//! are refused with the master's address: a write here would be replaced at the source's
//! next change. No HTTP or sockets here: the API layer serves `GET /sync` and runs the
//! follower's requests.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::state::{self, Overlay, ZoneEntry};
use super::{Applied, Control, CtlError, MAX_RR_CANONICAL};
use crate::base::log;

/// Largest `GET /sync` answer a follower reads.
pub const MAX_BUNDLE: usize = 64 << 20;
/// Most zones and records a version may hold (checked before any is parsed).
pub const MAX_ENTRIES: usize = 1_000_000;

/// What a source offers: its shared configuration text and its API data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    /// [`digest`] of the rest.
    pub digest: String,
    /// The shared configuration file's text, when the source has one.
    pub config: Option<String>,
    /// Zones made through the API.
    pub zones: Vec<ZoneEntry>,
    /// Records made through the API, canonical.
    pub records: Vec<String>,
}

/// SHA-256 over the bundle's parts, each length-prefixed (no two bundles share an input).
pub fn digest(config: Option<&str>, zones: &[ZoneEntry], records: &[String]) -> String {
    let mut h = sha2::Sha256::new();
    let mut put = |s: &str| {
        h.update((s.len() as u64).to_be_bytes());
        h.update(s.as_bytes());
    };
    put("skua-sync-1");
    match config {
        Some(t) => {
            put("config");
            put(t);
        }
        None => put("no-config"),
    }
    put(&zones.len().to_string());
    for z in zones {
        put(&z.name);
        put(&z.zone_type);
    }
    put(&records.len().to_string());
    for r in records {
        put(r);
    }
    hex::encode(h.finalize())
}

impl Bundle {
    fn of(shared: Option<&(PathBuf, String)>, overlay: &Overlay) -> Bundle {
        let config = shared.map(|(_, t)| t.clone());
        Bundle {
            digest: digest(config.as_deref(), &overlay.zones, &overlay.records),
            config,
            zones: overlay.zones.clone(),
            records: overlay.records.clone(),
        }
    }

    /// Whether the digest is the digest of the content.
    pub fn digest_ok(&self) -> bool {
        digest(self.config.as_deref(), &self.zones, &self.records) == self.digest
    }
}

/// A follower's settings, checked at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncSettings {
    /// The sources, in order.
    pub from: Vec<skua_config::SyncUrl>,
    /// The bearer token for them.
    pub token: String,
    /// PEM certificate authorities for `https://` sources.
    pub tls_ca: Option<Vec<u8>>,
    /// How long a source holds an unchanged request.
    pub wait: Duration,
}

impl SyncSettings {
    /// The settings of `cfg` (files relative to `dir`), `None` without `from:`, or the first
    /// problem with its location.
    pub fn from_config(
        cfg: &skua_config::Config,
        dir: Option<&Path>,
    ) -> Result<Option<SyncSettings>, String> {
        let s = &cfg.sync;
        let Some(first) = s.from.first() else {
            return Ok(None);
        };
        let at = |rel: &str| {
            let p = PathBuf::from(rel);
            match dir {
                Some(d) if p.is_relative() => d.join(p),
                _ => p,
            }
        };
        let from = s
            .from
            .iter()
            .map(|u| skua_config::SyncUrl::parse(&u.value).map_err(|e| format!("{}: {e}", u.loc)))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(tf) = &s.token_file else {
            return Err(format!(
                "{}: sync: from: needs token-file: (a token of the source's API, role operator)",
                first.loc
            ));
        };
        let token = super::auth::read_secret(&at(&tf.value))
            .map_err(|e| format!("{}: sync: token-file: {e}", tf.loc))?;
        let tls_ca = match &s.tls_ca {
            Some(ca) => {
                use rustls_pki_types::CertificateDer;
                use rustls_pki_types::pem::PemObject;
                let pem = std::fs::read(at(&ca.value))
                    .map_err(|e| format!("{}: sync: tls-ca: {}: {e}", ca.loc, ca.value))?;
                let n = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("{}: sync: tls-ca: {}: {e}", ca.loc, ca.value))?
                    .len();
                if n == 0 {
                    return Err(format!(
                        "{}: sync: tls-ca: {} holds no PEM certificate",
                        ca.loc, ca.value
                    ));
                }
                Some(pem)
            }
            None => None,
        };
        if let Some(u) = s.from.iter().find(|u| u.value.starts_with("https://"))
            && tls_ca.is_none()
        {
            return Err(format!(
                "{}: sync: an https:// source needs tls-ca: (the authority its API certificate chains to)",
                u.loc
            ));
        }
        Ok(Some(SyncSettings {
            from,
            token,
            tls_ca,
            wait: Duration::from_secs(s.wait_s.into()),
        }))
    }
}

/// What `GET /status` and the metrics show of sync.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SyncStatus {
    /// The digest this node offers.
    pub digest: String,
    /// The source followed now (this node holds no lease and the source does), if any.
    pub following: Option<String>,
    /// Bundles taken from a source.
    pub applied: u64,
    /// Bundles that could not be taken.
    pub failed: u64,
    /// Bundles sent to followers.
    pub served: u64,
    /// The last bundle taken: digest, source, seconds since.
    pub last_applied: Option<LastApplied>,
    /// The last failure (a source unreachable, refused, or a bundle that does not load).
    pub last_error: Option<String>,
    /// What the catch-up at start found (before the API opened).
    pub at_start: Option<String>,
}

/// The last bundle taken.
#[derive(Debug, Clone, Serialize)]
pub struct LastApplied {
    /// Its digest.
    pub digest: String,
    /// Its source.
    pub from: String,
    /// Seconds since.
    pub age_s: u64,
    #[serde(skip)]
    at: Option<Instant>,
}

/// The sync state of the control core.
pub struct SyncBook {
    offer: ArcSwap<Bundle>,
    changed: tokio::sync::watch::Sender<u64>,
    settings: ArcSwap<Option<SyncSettings>>,
    following: Mutex<Option<(String, Instant)>>,
    served: AtomicU64,
    applied: AtomicU64,
    failed: AtomicU64,
    last_applied: Mutex<Option<LastApplied>>,
    last_error: Mutex<Option<String>>,
    /// The last digest recorded as sent to each follower (actor, address): `sync-out` is
    /// written once per version and follower, not once per request.
    sent: Mutex<HashMap<(String, Option<IpAddr>), String>>,
    /// The last digest recorded as failed from each source: likewise.
    failed_seen: Mutex<HashMap<String, String>>,
    /// Local reloads: a follower asks its source again after one.
    local_reloads: AtomicU64,
    /// What the catch-up at start found.
    at_start: Mutex<Option<String>>,
    /// The offer serialized once (digest, JSON): a source answers many followers.
    serialized: Mutex<Option<(String, Arc<str>)>>,
}

impl Default for SyncBook {
    fn default() -> Self {
        SyncBook {
            offer: ArcSwap::from_pointee(Bundle::of(None, &Overlay::default())),
            changed: tokio::sync::watch::channel(0).0,
            settings: ArcSwap::from_pointee(None),
            following: Mutex::new(None),
            served: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            last_applied: Mutex::new(None),
            last_error: Mutex::new(None),
            sent: Mutex::new(HashMap::new()),
            failed_seen: Mutex::new(HashMap::new()),
            local_reloads: AtomicU64::new(0),
            at_start: Mutex::new(None),
            serialized: Mutex::new(None),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// At most this many followers (or sources) remembered for the once-per-version audit
/// entries; past it the memory starts over (an entry may then repeat, never be lost).
const REMEMBERED: usize = 1024;

impl SyncBook {
    /// Offers what `shared` and `overlay` hold, waking waiting followers when it changed.
    pub fn offer(&self, shared: Option<&(PathBuf, String)>, overlay: &Overlay) {
        let b = Bundle::of(shared, overlay);
        if b.digest != self.offer.load().digest {
            self.offer.store(Arc::new(b));
            self.changed.send_modify(|g| *g += 1);
        }
    }

    /// What this node offers now.
    pub fn current(&self) -> Arc<Bundle> {
        self.offer.load_full()
    }

    /// A receiver that sees every change of the offer.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Puts follower settings in force (checked by [`SyncSettings::from_config`]).
    pub fn set_settings(&self, s: Option<SyncSettings>) {
        if s.is_none() {
            *lock(&self.following) = None;
        }
        self.settings.store(Arc::new(s));
    }

    /// The follower settings in force.
    pub fn settings(&self) -> Arc<Option<SyncSettings>> {
        self.settings.load_full()
    }

    /// The source this node follows now, if any: set by the follower at each answer of a
    /// source holding the lease while this node holds none, and good for a little longer
    /// than one request (a follower that stopped asking stops refusing writes).
    pub fn following(&self) -> Option<String> {
        let wait = self
            .settings
            .load()
            .as_ref()
            .as_ref()
            .map_or(Duration::ZERO, |s| s.wait);
        lock(&self.following)
            .as_ref()
            .filter(|(_, at)| at.elapsed() < wait + Duration::from_secs(10))
            .map(|(f, _)| f.clone())
    }

    /// Notes whom this node follows now (`None`: nobody).
    pub fn set_following(&self, from: Option<&str>) {
        *lock(&self.following) = from.map(|f| (f.to_owned(), Instant::now()));
    }

    /// Notes a reload of this node's own configuration.
    pub fn local_reloaded(&self) {
        self.local_reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// Local reloads so far.
    pub fn local_reloads(&self) -> u64 {
        self.local_reloads.load(Ordering::Relaxed)
    }

    /// Notes what the catch-up at start found (for `/status`).
    pub fn note_start(&self, what: &str) {
        *lock(&self.at_start) = Some(what.to_owned());
    }

    /// `bundle` as JSON, serialized once per version.
    pub fn serialized(&self, bundle: &Bundle) -> Arc<str> {
        let mut g = lock(&self.serialized);
        if let Some((d, j)) = g.as_ref()
            && *d == bundle.digest
        {
            return j.clone();
        }
        let j: Arc<str> = serde_json::to_string(bundle)
            .unwrap_or_else(|_| "null".into())
            .into();
        *g = Some((bundle.digest.clone(), j.clone()));
        j
    }

    /// Notes a failure to reach or read a source (for `/status`).
    pub fn note_error(&self, e: &str) {
        *lock(&self.last_error) = Some(e.to_owned());
    }

    /// What `/status` shows.
    pub fn status(&self) -> SyncStatus {
        SyncStatus {
            digest: self.offer.load().digest.clone(),
            following: self.following(),
            applied: self.applied.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            served: self.served.load(Ordering::Relaxed),
            last_applied: lock(&self.last_applied).as_ref().map(|l| LastApplied {
                age_s: l.at.map_or(0, |t| t.elapsed().as_secs()),
                ..l.clone()
            }),
            last_error: lock(&self.last_error).clone(),
            at_start: lock(&self.at_start).clone(),
        }
    }
}

/// The clauses a shared file may hold. Everything else (`api:`, `audit:`, `ha:`, `sync:`,
/// `acme:`, Unbound clauses skuad does not implement) belongs to one node or is not served:
/// refused, so a source cannot make a follower listen, log, sign, order certificates or
/// write anywhere (docs/ha.md, "What a shared file may hold").
const SHARED_CLAUSES: &[&str] = &[
    "server",
    "auth-zone",
    "forward-zone",
    "stub-zone",
    "tsig-key",
];

/// The directives a shared file may hold, by clause: what the fleet answers and how it
/// resolves (local data, access control, rate limiting, caching and upstream policy,
/// forwarders, primary zones). A directive not listed is refused, with its name and line:
/// what belongs to one node (its listeners, threads, buffers and memory, identity, logging,
/// user, files it writes, secondary zones, TLS service keys), unknown and unsupported
/// directives alike (deny by default: a directive added later is refused until it is
/// judged here). The ones that name a file are checked by [`shared_paths`].
const SHARED_DIRECTIVES: &[(&str, &[&str])] = &[
    (
        "server",
        &[
            // Answers and access.
            "access-control",
            "local-zone",
            "local-data",
            "local-data-ptr",
            "hide-identity",
            "hide-version",
            "version",
            "minimal-responses",
            "edns-buffer-size",
            "max-udp-size",
            "pad-responses",
            "pad-responses-block-size",
            "tcp-connection-limit",
            "ede",
            "ede-serve-expired",
            // Response rate limiting.
            "rrl-responses-per-second",
            "rrl-nodata-per-second",
            "rrl-nxdomains-per-second",
            "rrl-referrals-per-second",
            "rrl-errors-per-second",
            "rrl-all-per-second",
            "rrl-window",
            "rrl-slip",
            "rrl-ipv4-prefix-length",
            "rrl-ipv6-prefix-length",
            "rrl-exempt-clients",
            "rrl-qps-scale",
            "rrl-log-only",
            "rrl-max-table-size",
            "rrl-min-table-size",
            // Caching and the upstream side.
            "cache-min-ttl",
            "cache-max-ttl",
            "cache-max-negative-ttl",
            "prefetch",
            "serve-expired",
            "serve-expired-ttl",
            "serve-expired-ttl-reset",
            "serve-expired-reply-ttl",
            "serve-expired-client-timeout",
            "use-caps-for-id",
            "caps-exempt",
            "caps-whitelist",
            "do-not-query-localhost",
            "unwanted-reply-threshold",
            "infra-host-ttl",
            "tcp-upstream",
            "tls-upstream",
            "ssl-upstream",
            "tls-system-cert",
            "tls-win-cert",
            // A file: relative to the configuration directory ([`shared_paths`]).
            "tls-cert-bundle",
            "ssl-cert-bundle",
        ],
    ),
    (
        // Primary zones only: `primary:`/`master:`, `allow-notify:` and `request-xfr:` make
        // a secondary, one node's role (its main file says it), whose transfers write the
        // zone file.
        "auth-zone",
        &[
            "name",
            "zonefile",
            "for-downstream",
            "for-upstream",
            "fallback-enabled",
            "provide-xfr",
            "notify",
            "ixfr-number",
            "ixfr-size",
            "size-limit-xfr",
            "xfr-max-records",
        ],
    ),
    (
        "forward-zone",
        &[
            "name",
            "forward-addr",
            "forward-host",
            "forward-first",
            "forward-no-cache",
            "forward-tls-upstream",
            "forward-ssl-upstream",
            "forward-tcp-upstream",
        ],
    ),
    (
        "stub-zone",
        &[
            "name",
            "stub-addr",
            "stub-host",
            "stub-prime",
            "stub-first",
            "stub-no-cache",
            "stub-tls-upstream",
            "stub-ssl-upstream",
            "stub-tcp-upstream",
        ],
    ),
    // The secret as a reference (`file:` checked, `env:`), never the secret itself.
    ("tsig-key", &["name", "algorithm", "secret"]),
];

/// Whether a shared file may hold `directive` in `clause` (see [`SHARED_DIRECTIVES`]).
pub fn shared_allows(clause: &str, directive: &str) -> bool {
    SHARED_DIRECTIVES
        .iter()
        .any(|(c, ds)| *c == clause && ds.contains(&directive))
}

/// The first clause or directive of `listing` a shared file may not hold, with its line.
fn not_shareable(listing: &[skua_config::Written]) -> Option<String> {
    for w in listing {
        match &w.directive {
            None if !SHARED_CLAUSES.contains(&w.clause.as_str()) => {
                return Some(format!(
                    "{}: clause '{}:' (a shared file holds only {} clauses; the others belong to each node's main file)",
                    w.loc,
                    w.clause,
                    SHARED_CLAUSES
                        .iter()
                        .map(|c| format!("{c}:"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            None => {}
            Some(d) if w.clause.is_empty() => {
                // The parser refuses it too; said here in case it ever does not.
                return Some(format!("{}: '{d}:' outside any clause", w.loc));
            }
            Some(d) if !shared_allows(&w.clause, d) => {
                return Some(format!(
                    "{}: '{d}:' in {}: (not a directive a shared file may hold: it belongs to each node's main file, names a file this node writes, or is not served; docs/ha.md lists what may be shared)",
                    w.loc, w.clause
                ));
            }
            Some(_) => {}
        }
    }
    None
}

/// The files a shared configuration names, each only in this node's configuration
/// directory (a relative path without `..`): a source can make a follower read nothing
/// else (and no transfer writes there: secondary zones are refused).
fn shared_paths(c: &skua_config::Config) -> Option<String> {
    let paths = c
        .auth_zones
        .iter()
        .filter_map(|z| z.zonefile.as_ref().map(|f| ("zonefile:", f)))
        .chain(
            c.server
                .tls_cert_bundle
                .iter()
                .map(|f| ("tls-cert-bundle:", f)),
        );
    let secrets = c.tsig_keys.iter().filter_map(|k| {
        k.secret
            .value
            .strip_prefix("file:")
            .map(|f| ("tsig-key secret: file:", f, &k.secret.loc))
    });
    for (what, p, loc) in paths
        .map(|(w, f)| (w, f.value.as_str(), &f.loc))
        .chain(secrets)
    {
        let path = Path::new(p);
        if p.is_empty()
            || path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Some(format!(
                "{loc}: {what} {p} (a shared file names files relative to the configuration directory, without '..')"
            ));
        }
    }
    None
}

/// Checks a shared text before it is compiled: it parses alone, reading no file (an
/// `include:` anywhere is an error), holds only what [`SHARED_DIRECTIVES`] lists, and the
/// files it names are in the configuration directory.
fn check_shared(text: &str, path: &Path) -> Result<(), CtlError> {
    let (c, listing) = skua_config::parse_str_listing(text, &path.display().to_string())
        .map_err(|e| CtlError::Invalid(format!("the shared configuration: {e}")))?;
    match not_shareable(&listing).or_else(|| shared_paths(&c)) {
        Some(what) => Err(CtlError::Invalid(format!(
            "the shared configuration is refused at {what}"
        ))),
        None => Ok(()),
    }
}

/// The overlay a bundle asks for, canonical and bounded like API writes; records under a
/// zone this node receives by zone transfer are left out (their count returned): the
/// transfer brings them.
fn incoming_overlay(base: &skua_config::Config, b: &Bundle) -> Result<(Overlay, usize), CtlError> {
    let bad = |e: String| CtlError::Invalid(format!("the source's API data: {e}"));
    let secondaries: Vec<skua_engine::name::WireName> = base
        .auth_zones
        .iter()
        .filter(|z| !z.primaries.is_empty())
        .filter_map(|z| skua_engine::name::WireName::parse(&z.name.value, None).ok())
        .collect();
    if b.zones.len() + b.records.len() > MAX_ENTRIES {
        return Err(bad(format!(
            "{} zones and {} records: at most {MAX_ENTRIES} in all",
            b.zones.len(),
            b.records.len()
        )));
    }
    let mut o = Overlay::default();
    let mut names = HashSet::new();
    for z in &b.zones {
        state::check_zone_type(&z.zone_type).map_err(bad)?;
        let name = state::canonical_zone(&z.name).map_err(bad)?;
        if !names.insert(name.clone()) {
            return Err(bad(format!("zone {name} twice")));
        }
        o.zones.push(ZoneEntry {
            name,
            zone_type: z.zone_type.clone(),
        });
    }
    let mut skipped = 0;
    let mut seen = HashSet::new();
    for r in &b.records {
        if r.len() > MAX_RR_CANONICAL {
            return Err(bad(format!(
                "a record of {} bytes (at most {MAX_RR_CANONICAL})",
                r.len()
            )));
        }
        let c = state::canonical_rr(r).map_err(bad)?;
        let under_secondary = skua_engine::name::WireName::parse(state::rr_owner(&c), None)
            .is_ok_and(|n| secondaries.iter().any(|apex| n.is_subdomain_of(apex)));
        if under_secondary {
            skipped += 1;
        } else if seen.insert(c.clone()) {
            o.records.push(c);
        }
    }
    Ok((o, skipped))
}

/// How many of `new` are not in `old`, and of `old` not in `new`.
fn delta<T: Eq + std::hash::Hash>(old: &[T], new: &[T]) -> (usize, usize) {
    let (o, n): (HashSet<&T>, HashSet<&T>) = (old.iter().collect(), new.iter().collect());
    (n.difference(&o).count(), o.difference(&n).count())
}

impl Control {
    /// What `/status` shows of sync (a node holding a lease follows nobody).
    pub fn sync_status(&self) -> SyncStatus {
        let mut s = self.sync.status();
        if self.holds_lease() {
            s.following = None;
        }
        s
    }

    /// Records that `b` was sent to a follower (`sync-out`), once per version and follower.
    pub fn sync_served(&self, actor: &str, source: Option<IpAddr>, b: &Bundle) {
        self.sync.served.fetch_add(1, Ordering::Relaxed);
        {
            let mut sent = lock(&self.sync.sent);
            let key = (actor.to_owned(), source);
            if sent.get(&key) == Some(&b.digest) {
                return;
            }
            if sent.len() >= REMEMBERED {
                sent.clear();
            }
            sent.insert(key, b.digest.clone());
        }
        let detail = serde_json::json!({
            "digest": b.digest,
            "config_sha256": b.config.as_ref().map(|t| hex::encode(sha2::Sha256::digest(t.as_bytes()))),
            "zones": b.zones.len(),
            "records": b.records.len(),
        });
        log::info(format_args!(
            "sync: sent version {} to {actor}{}",
            &b.digest[..12],
            source.map(|s| format!(" at {s}")).unwrap_or_default()
        ));
        self.record(skua_audit::kind::SYNC_OUT, actor, source, detail);
    }

    /// Records a failure to take a source's version (`sync-in-failed`), once per version
    /// and source; the old configuration and data keep serving.
    pub fn sync_failed(&self, from: &str, digest: &str, error: &str) {
        // The reason may quote the source's text (a parse error): one line, bounded.
        let error = &super::ha::printable_max(error, 1000);
        self.sync.failed.fetch_add(1, Ordering::Relaxed);
        self.sync.note_error(&format!("{from}: {error}"));
        {
            let mut seen = lock(&self.sync.failed_seen);
            if seen.get(from).map(String::as_str) == Some(digest) {
                return;
            }
            if seen.len() >= REMEMBERED {
                seen.clear();
            }
            seen.insert(from.to_owned(), digest.to_owned());
        }
        log::error(format_args!(
            "sync: version {} from {from} not taken: {error}; the configuration in force keeps serving",
            digest.get(..12).unwrap_or(digest)
        ));
        self.record(
            skua_audit::kind::SYNC_IN_FAILED,
            "sync",
            None,
            serde_json::json!({"from": from, "digest": digest, "error": error}),
        );
    }

    /// Takes a source's bundle (see the module documentation). `Ok(None)`: this node
    /// serves it already.
    pub async fn sync_apply(
        &self,
        b: &Bundle,
        from: &str,
        node: &str,
    ) -> Result<Option<Applied>, CtlError> {
        if !b.digest_ok() {
            return Err(CtlError::Invalid(
                "the bundle does not match its digest".into(),
            ));
        }
        let t0 = Instant::now();
        let mut inner = self.inner.lock().await;
        if b.digest == self.sync.current().digest {
            return Ok(None);
        }
        let swap = match (&b.config, &inner.shared) {
            (Some(t), Some((p, cur))) => {
                check_shared(t, p)?;
                (t != cur).then(|| (p.clone(), t.clone()))
            }
            (Some(_), None) => {
                return Err(CtlError::Invalid(
                    "the source shares a configuration file, but sync: shared-config: is not set on this node".into(),
                ));
            }
            (None, _) => None,
        };
        let (overlay, skipped) = tokio::task::block_in_place(|| incoming_overlay(&inner.base, b))?;
        if swap.is_none() && overlay == inner.overlay {
            // Nothing this node serves would change (records left to zone transfer make
            // the digests differ).
            return Ok(None);
        }
        if inner.state_path.is_none() && overlay != Overlay::default() {
            return Err(CtlError::Unavailable(
                "no state file on this node (api: state-file:): API data cannot be kept".into(),
            ));
        }
        let staged = self.stage(swap.clone(), Some(overlay.clone())).await?;
        let (za, zr) = delta(&inner.overlay.zones, &overlay.zones);
        let (ra, rr) = delta(&inner.overlay.records, &overlay.records);
        let mut detail = serde_json::json!({
            "from": from,
            "node": super::ha::printable(node),
            "digest": b.digest,
            "config_changed": swap.is_some(),
            "zones": overlay.zones.len(),
            "records": overlay.records.len(),
            "zones_added": za,
            "zones_removed": zr,
            "records_added": ra,
            "records_removed": rr,
            "generation": self.generation() + 1,
        });
        if let Some((_, t)) = &swap {
            detail["config_sha256"] = hex::encode(sha2::Sha256::digest(t.as_bytes())).into();
        }
        if skipped > 0 {
            detail["records_left_to_zone_transfer"] = skipped.into();
        }
        tokio::task::block_in_place(|| {
            self.append_required(skua_audit::kind::SYNC_IN, "sync", None, detail)
        })?;
        let state_path = staged.state_path.clone();
        let written = tokio::task::block_in_place(|| -> Result<(), String> {
            if let Some(p) = &state_path {
                overlay
                    .save(p)
                    .map_err(|e| format!("cannot write the state file {}: {e}", p.display()))?;
            }
            if let Some((p, t)) = &swap {
                use std::os::unix::fs::PermissionsExt as _;
                let mode = std::fs::metadata(p).map_or(0o644, |m| m.permissions().mode() & 0o7777);
                state::write_atomic(p, t, mode)
                    .map_err(|e| format!("cannot write the shared file {}: {e}", p.display()))?;
            }
            Ok(())
        });
        if let Err(e) = written {
            // The entry above said what would change; this one says it did not. The old
            // state file stays if the shared file failed after it: rewritten now.
            if let Some(p) = &state_path {
                let _ = inner.overlay.save(p);
            }
            self.record(
                skua_audit::kind::SYNC_IN,
                "sync",
                None,
                serde_json::json!({"from": from, "digest": b.digest, "result": "failed", "error": e}),
            );
            return Err(CtlError::Internal(e));
        }
        let (applied, not_applied) = self.commit(&mut inner, staged, t0);
        drop(inner);
        if let Some(e) = not_applied {
            // The version serves; what it names could not all be put in force.
            log::warn(format_args!("sync: version from {from} serves, but: {e}"));
        }
        self.sync.applied.fetch_add(1, Ordering::Relaxed);
        *lock(&self.sync.last_applied) = Some(LastApplied {
            digest: b.digest.clone(),
            from: from.to_owned(),
            age_s: 0,
            at: Some(Instant::now()),
        });
        *lock(&self.sync.last_error) = None;
        log::info(format_args!(
            "sync: version {} from {from} ({}) serves: {} zones, {} records{}",
            &b.digest[..12],
            super::ha::printable(node),
            overlay.zones.len(),
            overlay.records.len(),
            if swap.is_some() {
                ", shared configuration changed"
            } else {
                ""
            }
        ));
        Ok(Some(applied))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay(zones: &[(&str, &str)], records: &[&str]) -> Overlay {
        Overlay {
            zones: zones
                .iter()
                .map(|(n, t)| ZoneEntry {
                    name: (*n).into(),
                    zone_type: (*t).into(),
                })
                .collect(),
            records: records.iter().map(|r| (*r).to_string()).collect(),
        }
    }

    #[test]
    fn digest_names_the_content_and_nothing_else() {
        let a = Bundle::of(
            None,
            &overlay(&[("a.", "static")], &["a. 60 IN A 198.18.0.1"]),
        );
        assert!(a.digest_ok());
        let mut b = a.clone();
        b.records[0] = "a. 60 IN A 198.18.0.2".into();
        assert!(!b.digest_ok());
        // No config and an empty config differ; a zone's type counts; moving text between
        // fields changes the digest (lengths are part of the input).
        let shared = (PathBuf::from("/x"), String::new());
        assert_ne!(
            Bundle::of(Some(&shared), &Overlay::default()).digest,
            Bundle::default().digest
        );
        let c = Bundle::of(
            None,
            &overlay(&[("a.", "redirect")], &["a. 60 IN A 198.18.0.1"]),
        );
        assert_ne!(a.digest, c.digest);
        let d = Bundle::of(
            None,
            &overlay(&[("a.static", "")], &["a. 60 IN A 198.18.0.1"]),
        );
        assert_ne!(a.digest, d.digest);
    }

    #[test]
    fn shared_text_refuses_what_belongs_to_one_node() {
        let p = Path::new("/etc/skua/shared.conf");
        assert!(check_shared("server:\n  local-zone: \"x.\" static\n", p).is_ok());
        // Files in the configuration directory are fine.
        assert!(
            check_shared(
                "auth-zone:\n  name: x.\n  zonefile: zones/x.zone\ntsig-key:\n  name: k.\n  secret: file:k.key\n",
                p
            )
            .is_ok()
        );
        for (text, want) in [
            ("api:\n  port: 8953\n", "shared.conf:1: clause 'api:'"),
            ("ha:\n  address: 198.18.0.53\n", "clause 'ha:'"),
            ("sync:\n  wait: 3\n", "clause 'sync:'"),
            (
                "server:\n  interface: 198.18.0.1\n",
                "'interface:' in server:",
            ),
            (
                "server:\n  port: 5300\n",
                "shared.conf:2: 'port:' in server:",
            ),
            ("server:\n  include: /etc/passwd\n", "include:"),
            ("server: include: /etc/passwd\n", "include:"),
            ("\u{feff}include: /etc/passwd\n", "include:"),
            ("server:\n  local-data: \"broken\n", "shared.conf:2"),
            ("server:\n  directory: /\n", "'directory:' in server:"),
            (
                "auth-zone:\n  name: x.\n  primary: 198.18.0.9\n  zonefile: x.zone\n",
                "'primary:' in auth-zone:",
            ),
            (
                "auth-zone:\n  name: x.\n  zonefile: /var/lib/skua/skuad.conf\n",
                "zonefile: /var/lib/skua/skuad.conf",
            ),
            (
                "auth-zone:\n  name: x.\n  zonefile: ../x.zone\n",
                "shared.conf:3: zonefile: ../x.zone",
            ),
            (
                "tsig-key:\n  name: k.\n  secret: file:/etc/skua/api.key\n",
                "secret: file: /etc/skua/api.key",
            ),
            (
                "server:\n  tls-cert-bundle: /etc/ssl/x.pem\n",
                "tls-cert-bundle:",
            ),
        ] {
            let e = check_shared(text, p).unwrap_err();
            assert!(e.message().contains(want), "{text:?}: {}", e.message());
        }
    }

    /// A shared file holds only what the allow-list names (issue 28, finding 1: `acme:` and
    /// the TLS service files were taken, and the follower then renamed a file outside its
    /// configuration directory, or could not start).
    #[test]
    fn a_shared_file_holds_only_the_allow_list() {
        let p = Path::new("/etc/skua/shared.conf");
        // What a fleet shares is taken.
        let fleet = "server:\n  access-control: 10.0.0.0/8 allow\n  local-zone: \"corp.\" static\n  \
             local-data: \"www.corp. 300 IN A 198.18.0.1\"\n  local-data-ptr: \"198.18.0.1 www.corp.\"\n  \
             rrl-responses-per-second: 20\n  rrl-slip: 2\n  cache-max-ttl: 3600\n  prefetch: yes\n  \
             serve-expired: yes\n  hide-version: yes\n  minimal-responses: yes\n  tls-cert-bundle: ca.pem\n\
             forward-zone:\n  name: \".\"\n  forward-addr: 9.9.9.9@853#dns.quad9.net\n  forward-tls-upstream: yes\n\
             stub-zone:\n  name: lab.\n  stub-addr: 198.18.0.9\n\
             auth-zone:\n  name: x.\n  zonefile: x.zone\n  provide-xfr: 198.18.0.0/24 k.\n  notify: 198.18.0.2 k.\n\
             tsig-key:\n  name: k.\n  secret: env:SKUA_TSIG\n";
        if let Err(e) = check_shared(fleet, p) {
            panic!("{}", e.message());
        }
        // Everything else is refused, named with its line: one node's clauses, its
        // listeners, TLS service files, ACME, files, identity, resources, secondary roles,
        // unsupported and unknown directives.
        for (text, want) in [
            (
                "server:\n  local-zone: \"x.\" static\nacme:\n  directory: https://acme.example/dir\n  \
                 name: x.example\n  account-file: /etc/passwd\n",
                "shared.conf:3: clause 'acme:'",
            ),
            (
                "server:\n  tls-service-key: /etc/passwd\n",
                "shared.conf:2: 'tls-service-key:' in server:",
            ),
            ("server:\n  tls-service-pem: x.pem\n", "'tls-service-pem:'"),
            ("server:\n  ssl-service-key: x.key\n", "'ssl-service-key:'"),
            ("server:\n  tls-port: 853\n", "'tls-port:'"),
            ("server:\n  https-port: 443\n", "'https-port:'"),
            ("server:\n  quic-port: 853\n", "'quic-port:'"),
            ("server:\n  ip-address: 198.18.0.1\n", "'ip-address:'"),
            ("server:\n  logfile: /tmp/x\n", "'logfile:'"),
            ("server:\n  pidfile: /tmp/x\n", "'pidfile:'"),
            ("server:\n  username: nobody\n", "'username:'"),
            ("server:\n  chroot: /\n", "'chroot:'"),
            ("server:\n  identity: n1\n", "'identity:'"),
            ("server:\n  num-threads: 64\n", "'num-threads:'"),
            ("server:\n  msg-cache-size: 4g\n", "'msg-cache-size:'"),
            ("server:\n  root-hints: /etc/passwd\n", "'root-hints:'"),
            ("server:\n  no-such-thing: 1\n", "'no-such-thing:'"),
            ("view:\n  name: v\n", "clause 'view:'"),
            ("audit:\n  fsync: batch\n", "clause 'audit:'"),
            (
                "auth-zone:\n  name: x.\n  master: 198.18.0.9\n",
                "'master:' in auth-zone:",
            ),
            (
                "auth-zone:\n  name: x.\n  allow-notify: 198.18.0.9\n",
                "'allow-notify:'",
            ),
            ("auth-zone:\n  name: x.\n  url: https://x/zone\n", "'url:'"),
        ] {
            let e = check_shared(text, p).unwrap_err();
            assert!(e.message().contains(want), "{text:?}: {}", e.message());
        }
        // Every clause the allow-list names is one a shared file may open, and the
        // directives it names are checked per clause (a forward-zone directive is not a
        // stub-zone one).
        for (c, _) in SHARED_DIRECTIVES {
            assert!(SHARED_CLAUSES.contains(c), "{c}");
        }
        assert!(shared_allows("forward-zone", "forward-addr"));
        assert!(!shared_allows("stub-zone", "forward-addr"));
        assert!(!shared_allows("server", "name"));
    }

    #[test]
    fn incoming_records_are_canonical_bounded_and_leave_secondary_zones_alone() {
        let base = skua_config::parse_str(
            "auth-zone:\n  name: sec.example.\n  primary: 198.18.0.9\n",
            "t.conf",
        )
        .unwrap();
        let b = Bundle {
            digest: String::new(),
            config: None,
            zones: vec![ZoneEntry {
                name: "Lab.Example".into(),
                zone_type: "static".into(),
            }],
            records: vec![
                "WWW.lab.example. 60 IN A 198.18.0.1".into(),
                "www.lab.example. 60 IN A 198.18.0.1".into(),
                "h.sec.example. 60 IN A 198.18.0.2".into(),
            ],
        };
        let (o, skipped) = incoming_overlay(&base, &b).unwrap();
        assert_eq!(o.zones[0].name, "lab.example.");
        assert_eq!(o.records, ["www.lab.example. 60 IN A 198.18.0.1"]);
        assert_eq!(skipped, 1);
        let mut bad = b.clone();
        bad.zones[0].zone_type = "nonsense".into();
        assert!(incoming_overlay(&base, &bad).is_err());
        let mut long = b;
        long.records = vec![format!(
            "x.lab.example. 60 IN TXT \"{}\"",
            "a".repeat(MAX_RR_CANONICAL)
        )];
        assert!(incoming_overlay(&base, &long).is_err());
    }
}
