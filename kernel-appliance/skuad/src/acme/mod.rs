//! ACME (RFC 8555): skuad obtains and renews the certificate of its encrypted listeners
//! itself, with instant-acme as the client.
//!
//! The certificate and key are written where `tls-service-pem:` and `tls-service-key:`
//! say (atomically, the key mode 0600), then put in force by a reload, the same path an
//! operator's renewal takes: new handshakes get the new certificate, connections in
//! progress keep theirs, nothing restarts. The account (its key and URL) is kept in
//! `account-file:` (0600), so a restart or an A/B upgrade reuses it.
//!
//! Challenges: HTTP-01 (RFC 8555 §8.3: the token served on `http-01-interface:` while the
//! order is validated), DNS-01 (§8.4: the TXT record put into skuad's own data through
//! the audited API write path, and taken out after; skuad must answer for the name) and
//! TLS-ALPN-01 (RFC 8737: a self-signed certificate carrying the key authorization's
//! digest, shown by the DNS over TLS and HTTPS listeners to a client asking for ALPN
//! `acme-tls/1`, see `control::tls`).
//!
//! Renewal: when the directory offers ACME Renewal Information (ARI, RFC 9773), skuad asks
//! it for the certificate in force and renews at a time picked uniformly at random inside
//! the `suggestedWindow` (§4.2; a window already past means now), asks again when the
//! server's Retry-After says (§4.3.2, held between 1 minute and 6 hours), and the renewal order names the certificate it replaces
//! (`replaces`, §5). The time is kept between the last issuance plus a margin (an hour or a
//! tenth of the lifetime) and `not_after` minus it (see `ari_due`). A CA revoking a
//! certificate moves its window into the past: the next check renews. Without ARI, or when
//! asking fails (logged, never fatal; asked again after 1 hour doubling to 24, or a 429's or
//! 503's Retry-After), the renewal is at two thirds of the certificate's lifetime. Every
//! request goes through our HTTP client (`AcmeHttp`: bodies bounded, requests timed,
//! Retry-After made safe). `profile:` asks for a certificate profile
//! (draft-ietf-acme-profiles) in every order, checked first against the profiles the
//! directory lists.
//!
//! Failures: an attempt that failed is retried after 1, 2, 4 ... minutes (at most 6 hours,
//! with up to a tenth of jitter), while the certificate in force keeps serving. A failure
//! is classified (`rate-limited`, `profile`, `acme-server`, `other`): a `rateLimited`
//! problem (RFC 8555 §6.7) waits at least until the time the problem's detail names
//! (instant-acme 0.8.5 does not hand the Retry-After header of an error response over, so
//! the "retry after <date> UTC" that Let's Encrypt writes in the detail is the only hint
//! there is; the later of it and the back-off is taken, at most 7 days). Every issuance
//! and failure is audited (`tls-issued`, `tls-failed`), counted, and shown in `GET /tls`
//! and `skuactl tls status`.
//!
//! Where: `task` runs the loop, its state between attempts a `Phase` (planned from the
//! certificate in force, or failing: the retry time, its reason, and a certificate written
//! but not yet in force); `schedule` decides when (`Due`: why the next attempt is when it
//! is); `order` is one order; `responder` (HTTP-01), `dns01` and `alpn` (TLS-ALPN-01) its
//! challenges; `client` the HTTP client and the account; `files` what is read and written;
//! `failure` how a failure is classified. In skuad's layers ACME sits above the control core
//! (audited writes, reloads, certificates) and below the API, which shows its status.

mod alpn;
mod client;
mod dns01;
mod failure;
mod files;
mod order;
mod responder;
mod schedule;
mod task;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::base::log;

pub use failure::FailureKind;
pub use order::csr;
pub use task::run;

/// What the ACME task does, from the configuration.
#[derive(Clone, Debug)]
pub struct AcmeSettings {
    /// The directory URL.
    pub directory: String,
    /// Account contacts.
    pub contacts: Vec<String>,
    /// The certificate's names.
    pub names: Vec<String>,
    /// The challenge.
    pub challenge: skua_config::AcmeChallenge,
    /// Where HTTP-01 tokens are served.
    pub http_interface: SocketAddr,
    /// The ACME server's certificate authorities (none: the public web roots).
    pub ca_bundle: Option<PathBuf>,
    /// The account file.
    pub account_file: PathBuf,
    /// Where the certificate chain goes (`tls-service-pem:`).
    pub cert: PathBuf,
    /// Where its key goes (`tls-service-key:`).
    pub key: PathBuf,
    /// The certificate profile asked for (`profile:`), if any.
    pub profile: Option<String>,
}

impl AcmeSettings {
    /// The settings of `cfg` (paths relative to `base`), or none without an `acme:`
    /// `directory:`. An error names the line.
    pub fn from_config(
        cfg: &skua_config::Config,
        base: Option<&Path>,
    ) -> Result<Option<Self>, String> {
        let a = &cfg.acme;
        let Some(dir) = &a.directory else {
            return Ok(None);
        };
        let at = |v: &str| {
            let p = PathBuf::from(v);
            match base {
                Some(b) if p.is_relative() => b.join(p),
                _ => p,
            }
        };
        if a.names.is_empty() {
            return Err(format!("{}: acme: needs at least one 'name:'", dir.loc));
        }
        let (Some(pem), Some(key)) = (&cfg.server.tls_service_pem, &cfg.server.tls_service_key)
        else {
            return Err(format!(
                "{}: acme: writes the certificate where tls-service-pem: and tls-service-key: say: set both",
                dir.loc
            ));
        };
        let http_interface = match &a.http_interface {
            None => SocketAddr::from(([0, 0, 0, 0], 80)),
            Some(v) => parse_addr(&v.value).ok_or_else(|| {
                format!(
                    "{}: acme: 'http-01-interface:' must be ADDR@PORT, not '{}'",
                    v.loc, v.value
                )
            })?,
        };
        let key_path = at(&key.value);
        let account_file = match &a.account_file {
            Some(f) => at(&f.value),
            None => key_path
                .parent()
                .unwrap_or(Path::new("."))
                .join("acme-account.json"),
        };
        // The files ACME writes stay in the configuration directory or the data directory
        // (the state file's): wherever else a line of configuration points, nothing is
        // written (issue 28: a synced acme: clause renamed a file of the operator's).
        let roots: Vec<PathBuf> = base
            .into_iter()
            .map(Path::to_path_buf)
            .chain(
                crate::control::state_path(cfg, base)
                    .and_then(|p| p.parent().map(Path::to_path_buf)),
            )
            .filter_map(|d| std::path::absolute(d).ok())
            .collect();
        let account_loc = a.account_file.as_ref().map_or(&key.loc, |f| &f.loc);
        for (what, path, loc) in [
            ("tls-service-pem:", at(&pem.value), &pem.loc),
            ("tls-service-key:", key_path.clone(), &key.loc),
            ("acme: account-file:", account_file.clone(), account_loc),
        ] {
            if !inside(&path, &roots) {
                return Err(format!(
                    "{loc}: {what} {} is outside the configuration and data directories ({}): acme: writes its files only there",
                    path.display(),
                    if roots.is_empty() {
                        "none known".to_string()
                    } else {
                        roots
                            .iter()
                            .map(|r| r.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ));
            }
        }
        Ok(Some(Self {
            directory: dir.value.clone(),
            contacts: a.contacts.iter().map(|c| c.value.clone()).collect(),
            names: a
                .names
                .iter()
                .map(|n| n.value.trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            challenge: a.challenge,
            http_interface,
            ca_bundle: a.ca_bundle.as_ref().map(|c| at(&c.value)),
            account_file,
            cert: at(&pem.value),
            key: key_path,
            profile: a.profile.as_ref().map(|p| p.value.clone()),
        }))
    }
}

/// Warns, at start, about what an `acme:` clause of `cfg` cannot do (not an error: a
/// private CA may validate elsewhere).
pub fn warn_at_start(cfg: &skua_config::Config) {
    let a = &cfg.acme;
    let Some(dir) = &a.directory else {
        return;
    };
    if a.challenge == skua_config::AcmeChallenge::TlsAlpn01 {
        // RFC 8737 §3: the CA connects to port 443 only.
        let srv = &cfg.server;
        let tls_on_443 =
            (srv.tls_port == 443) || (srv.https_port == 443 && !srv.http_notls_downstream);
        let listens_443 = srv
            .interfaces
            .iter()
            .any(|i| i.value.ends_with("@443") || (srv.port == 443 && !i.value.contains('@')));
        if !(tls_on_443 && listens_443) {
            log::warn(format_args!(
                "{}: acme: challenge: tls-alpn-01 is validated on TCP port 443 (RFC 8737 §3), and no interface serves TLS there: a public CA cannot validate it",
                dir.loc
            ));
        }
    }
}

/// Whether `path` (absolute, or relative to the working directory) is under one of `roots`
/// (absolute), read lexically: a `..` anywhere is outside.
fn inside(path: &Path, roots: &[PathBuf]) -> bool {
    let Ok(p) = std::path::absolute(path) else {
        return false;
    };
    !p.components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
        && roots.iter().any(|r| p.starts_with(r) && p != *r)
}

/// `ADDR@PORT` (IPv6 without brackets, as `interface:`).
fn parse_addr(v: &str) -> Option<SocketAddr> {
    let (a, p) = v.rsplit_once('@')?;
    Some(SocketAddr::new(a.parse().ok()?, p.parse().ok()?))
}

/// What `GET /tls` shows of the ACME task.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct AcmeStatus {
    /// The certificate in force: its names, not-before and not-after (Unix seconds).
    pub names: Vec<String>,
    /// Not before (Unix seconds) of the certificate in force.
    pub not_before: Option<u64>,
    /// Not after (Unix seconds) of the certificate in force.
    pub not_after: Option<u64>,
    /// When the next attempt is due (Unix seconds).
    pub next_attempt: Option<u64>,
    /// Why (`no certificate`, `the names changed`, `two thirds of its lifetime`,
    /// `renewal information`, `retry after a failure`, `retry after a rate limit`).
    pub next_reason: String,
    /// The ACME server's suggested renewal window (RFC 9773 §4.2) for the certificate in
    /// force, Unix seconds, when it was asked and answered.
    pub window_start: Option<u64>,
    /// End of that window.
    pub window_end: Option<u64>,
    /// When renewal information is asked again (Unix seconds), if the server offers it.
    pub renewal_info_next: Option<u64>,
    /// The profile asked for (`profile:`), if any.
    pub profile: Option<String>,
    /// The certificate the last certificate issued replaced, as the ACME server's order
    /// object names it (RFC 9773 §5: base64url(AKI).base64url(serial)), if it named one.
    pub last_replaced: Option<String>,
    /// Certificates issued since start.
    pub issued: u64,
    /// Failed attempts since start.
    pub failures: u64,
    /// Failed attempts since start by reason: `rate-limited`, `profile`, `acme-server`
    /// (another problem document), `other` (network, files, reload).
    pub failures_by_reason: std::collections::BTreeMap<String, u64>,
    /// The last failure's reason, until an attempt succeeds.
    pub last_error: Option<String>,
    /// Its class (one of the `failures_by_reason` keys).
    pub last_error_reason: Option<String>,
    /// When the last certificate was issued (Unix seconds).
    pub last_issued: Option<u64>,
}

/// The ACME task's state, shared with the API.
#[derive(Default)]
pub struct Acme {
    /// Its status.
    pub status: Mutex<AcmeStatus>,
    /// HTTP-01 tokens being validated: token → key authorization.
    http_tokens: Mutex<Vec<(String, String)>>,
    /// Asks for an attempt now (`POST /tls/renew`).
    pub renew_now: tokio::sync::Notify,
}

impl Acme {
    fn status(&self) -> std::sync::MutexGuard<'_, AcmeStatus> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key authorization for an HTTP-01 token being validated.
    fn http_token(&self, token: &str) -> Option<String> {
        self.http_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(t, _)| t == token)
            .map(|(_, k)| k.clone())
    }
}
