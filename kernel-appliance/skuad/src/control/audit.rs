//! The daemon's audit trail: the `audit:` clause opened as a [`skua_audit::AuditLog`], and
//! what skuad records in it.
//!
//! Recorded: `start` and `stop`; every `reload` (API, SIGHUP) with its result; every API
//! write (`api-write`: the change, the token's name, the client, the result, refused ones
//! included); every cache flush and load (`cache-flush`, `cache-load`: see
//! [`super::cache`]); every refused API request (`auth-failure`: route, reason, client; aggregated
//! per source, actor and minute after the first, see `auth::RefusalLog`).
//!
//! An API write is recorded **before** it is applied, with its canonical form: if that entry
//! cannot be written, the write is refused and nothing changes — a change is never served
//! unaudited. Other entries are appended after the event they record; if appending fails
//! (disk full, file removed) the error is logged at error level and serving goes on — an
//! audit outage does not stop DNS.
//!
//! Keys: the last `key:` signs; earlier ones are kept for verification. A reload whose
//! last key differs rotates the chain to it (a `key-rotation` entry under the old key).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use skua_audit::{AuditKey, AuditLog, FsyncPolicy, OpenOptions};

use crate::base::log;

/// An open audit log and the keys that verify it.
pub struct Audit {
    log: AuditLog,
    keys: Vec<AuditKey>,
    path: PathBuf,
}

fn key(spec: &str) -> Result<AuditKey, String> {
    if let Some(p) = spec.strip_prefix("file:") {
        AuditKey::from_file(p).map_err(|e| e.to_string())
    } else if let Some(v) = spec.strip_prefix("env:") {
        AuditKey::from_env(v).map_err(|e| e.to_string())
    } else {
        Err(format!("key '{spec}': expected file:PATH or env:VAR"))
    }
}

/// The keys of an `audit:` clause, in order (the last signs).
fn keys(cfg: &skua_config::Audit) -> Result<Vec<AuditKey>, String> {
    cfg.keys
        .iter()
        .map(|k| key(&k.value).map_err(|e| format!("{}: {e}", k.loc)))
        .collect()
}

impl Audit {
    /// Opens the log of `cfg` (`None` when no `log:` is set). A partial last line left by a
    /// crash is cut off and recorded; a tail that does not verify under any configured key
    /// is refused (the operator must look before skuad writes after it).
    pub fn open(cfg: &skua_config::Audit, base: Option<&Path>) -> Result<Option<Audit>, String> {
        let Some(l) = &cfg.log else { return Ok(None) };
        let mut path = PathBuf::from(&l.value);
        if let (Some(b), true) = (base, path.is_relative()) {
            path = b.join(path);
        }
        let keys = keys(cfg)?;
        let Some(current) = keys.last().cloned() else {
            return Err(format!("{}: audit: log: needs a key:", l.loc));
        };
        let mut opts = OpenOptions::new().checkpoint_every(cfg.checkpoint_every);
        if cfg.fsync == skua_config::AuditFsync::Batch {
            // Documented bound: an entry reaches the disk within 64 entries or 100 ms.
            opts = opts.fsync(FsyncPolicy::Batch {
                max_entries: 64,
                max_delay: std::time::Duration::from_millis(100),
            });
        }
        for k in &keys[..keys.len() - 1] {
            opts = opts.previous_key(k.clone());
        }
        let log = AuditLog::open(&path, current, opts)
            .map_err(|e| format!("{}: audit log {}: {e}", l.loc, path.display()))?;
        let o = log.opened();
        if let Some(r) = &o.recovered {
            log::warn(format_args!(
                "audit: {}: cut off {} bytes of an interrupted write ({})",
                path.display(),
                r.dropped_bytes,
                r.reason
            ));
        }
        if let Some(m) = o.tightened_from {
            log::warn(format_args!(
                "audit: {} had mode {m:o}; made it 0600 (the log names clients and changes)",
                path.display()
            ));
        }
        if let Some(from) = &o.rotated_from {
            log::info(format_args!("audit: rotated from key {from}"));
        }
        Ok(Some(Audit { log, keys, path }))
    }

    /// Applies a reloaded `audit:` clause: same file → rotate when the signing key
    /// changed; another file (or none) → `None` returned, the caller reopens.
    pub fn reconfigure(
        &mut self,
        cfg: &skua_config::Audit,
        base: Option<&Path>,
    ) -> Result<bool, String> {
        let Some(l) = &cfg.log else { return Ok(false) };
        let mut path = PathBuf::from(&l.value);
        if let (Some(b), true) = (base, path.is_relative()) {
            path = b.join(path);
        }
        if path != self.path {
            return Ok(false);
        }
        let keys = keys(cfg)?;
        let Some(current) = keys.last().cloned() else {
            return Err(format!("{}: audit: log: needs a key:", l.loc));
        };
        if self.log.key_id().map_err(|e| e.to_string())? != current.id() {
            self.log
                .rotate(current.clone())
                .map_err(|e| e.to_string())?;
            log::info(format_args!("audit: rotated to key {}", current.id()));
        }
        // Keep every key ever used in this process so older entries stay verifiable.
        for k in keys {
            if !self.keys.iter().any(|o| o.id() == k.id()) {
                self.keys.push(k);
            }
        }
        Ok(true)
    }

    /// Appends an entry, or says why it could not be (for changes that must not happen
    /// unaudited).
    pub fn append(
        &self,
        kind: &str,
        actor: &str,
        source: Option<IpAddr>,
        detail: serde_json::Value,
    ) -> Result<(), String> {
        self.log
            .append(kind, actor, source, detail)
            .map(|_| ())
            .map_err(|e| {
                format!(
                    "cannot append a '{kind}' entry to {}: {e}",
                    self.path.display()
                )
            })
    }

    /// Appends an entry; failures are logged, never fatal.
    pub fn record(
        &self,
        kind: &str,
        actor: &str,
        source: Option<IpAddr>,
        detail: serde_json::Value,
    ) {
        if let Err(e) = self.log.append(kind, actor, source, detail) {
            log::error(format_args!(
                "audit: cannot append a '{kind}' entry to {}: {e}",
                self.path.display()
            ));
        }
    }

    /// The last `n` entries.
    pub fn tail(&self, n: usize) -> Result<Vec<skua_audit::Entry>, String> {
        skua_audit::tail(&self.path, n).map_err(|e| e.to_string())
    }

    /// Verifies the whole log with every known key and the checkpoint file.
    pub fn verify(&self) -> Result<skua_audit::Report, String> {
        let mut cp = self.path.as_os_str().to_owned();
        cp.push(".checkpoint");
        let cp = PathBuf::from(cp);
        skua_audit::verify(&self.path, &self.keys, cp.exists().then_some(cp.as_path()))
            .map_err(|e| e.to_string())
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
