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

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, CertificateIdentifier, ChallengeType,
    Identifier, NewAccount, NewOrder, OrderStatus, RetryPolicy,
};

use crate::base::log;
use crate::control::tls::{CertFacts, cert_facts};
use crate::control::{Change, Control};

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

/// Why an attempt failed, for the status, the metrics and the retry time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// `urn:ietf:params:acme:error:rateLimited` (RFC 8555 §6.7).
    RateLimited,
    /// The profile asked for is not offered (`invalidProfile`, draft-ietf-acme-profiles
    /// §4, or not in the directory's list).
    Profile,
    /// Another ACME problem document.
    AcmeServer,
    /// Anything else: the network, the files, the reload.
    Other,
}

impl FailureKind {
    /// Every kind, in the order the metrics list them.
    pub const ALL: [FailureKind; 4] = [
        FailureKind::RateLimited,
        FailureKind::Profile,
        FailureKind::AcmeServer,
        FailureKind::Other,
    ];

    /// Its name in GET /tls and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::RateLimited => "rate-limited",
            FailureKind::Profile => "profile",
            FailureKind::AcmeServer => "acme-server",
            FailureKind::Other => "other",
        }
    }
}

/// A failed attempt: its class, what to say, and (rate limits) the earliest retry the
/// server named (Unix seconds).
#[derive(Debug)]
struct Failure {
    kind: FailureKind,
    msg: String,
    not_before: Option<u64>,
    /// A certificate written whose reload failed: what it replaced, shown once in force.
    replaced: Option<String>,
}

impl From<String> for Failure {
    fn from(msg: String) -> Self {
        Failure {
            kind: FailureKind::Other,
            msg,
            not_before: None,
            replaced: None,
        }
    }
}

impl From<&str> for Failure {
    fn from(msg: &str) -> Self {
        Failure::from(msg.to_string())
    }
}

/// `what: e` classified: the problem document's type decides (RFC 8555 §6.7).
fn classify(what: &str, e: &instant_acme::Error) -> Failure {
    let (kind, not_before) = match e {
        instant_acme::Error::Api(p) => match p.r#type.as_deref() {
            Some("urn:ietf:params:acme:error:rateLimited") => (
                FailureKind::RateLimited,
                p.detail.as_deref().and_then(retry_after_in_detail),
            ),
            Some("urn:ietf:params:acme:error:invalidProfile") => (FailureKind::Profile, None),
            _ => (FailureKind::AcmeServer, None),
        },
        _ => (FailureKind::Other, None),
    };
    let msg = match kind {
        FailureKind::RateLimited => format!("rate-limited: {what}: {e}"),
        _ => format!("{what}: {e}"),
    };
    Failure {
        kind,
        msg,
        not_before,
        replaced: None,
    }
}

/// The time a rate-limit problem's detail names: Let's Encrypt writes "retry after
/// 2025-01-01 12:00:00 UTC" (instant-acme 0.8.5 keeps the problem document of an error
/// response, not its Retry-After header). None if there is no such text.
fn retry_after_in_detail(detail: &str) -> Option<u64> {
    let lower = detail.to_ascii_lowercase();
    let at = lower.find("retry after ")? + "retry after ".len();
    let t = detail.get(at..at + 19)?;
    if !detail.get(at + 19..)?.trim_start().starts_with("UTC") {
        return None;
    }
    let b = t.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = t.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b[4] != b'-' || b[7] != b'-' || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    // Days from the civil date (proleptic Gregorian), H. Hinnant's algorithm.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + mi * 60 + se).ok()
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

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The first certificate in the PEM file `path`: its DER and its facts.
fn read_cert(path: &Path) -> Option<(rustls_pki_types::CertificateDer<'static>, CertFacts)> {
    let der = rustls_pki_types::CertificateDer::from(crate::control::tls::first_cert_der(path)?);
    let facts = cert_facts(&der)?;
    Some((der, facts))
}

/// The renewal time ARI suggests, kept between checks: a new time is picked only when the
/// window changes (RFC 9773 §4.2: one uniformly random time in the window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pick {
    window: (u64, u64),
    at: u64,
}

/// A uniformly random second in `[start, end]` (RFC 9773 §4.2).
fn pick_in(start: u64, end: u64) -> u64 {
    let span = end.saturating_sub(start);
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    start + u64::from_le_bytes(b) % (span + 1)
}

/// When ARI is asked again after a Retry-After of `retry` seconds: held between 1 minute
/// and 6 hours (RFC 9773 §4.3.2 asks clients to bound it), and shown no later than the
/// renewal time `at`. At `at` the task orders on the answer it has (at most 6 hours old),
/// it does not ask again first: a check due at the same time is the order's.
fn next_check(now: u64, retry: u64, at: u64) -> u64 {
    (now + retry.clamp(60, 6 * 3600)).min(at.max(now + 60))
}

/// The least time between an ARI-planned renewal and the expiry: an hour, or a tenth of
/// the lifetime `life` if longer; but at most a third of it (a certificate of less than
/// three hours, a test CA's, would otherwise be due before it is issued).
fn ari_margin(life: u64) -> u64 {
    (life / 10).max(3600).min(life / 3)
}

/// The least time between an issuance and the next order ARI starts: an hour (at most a
/// third of the lifetime `life`). Enough that a server answering every new certificate
/// with a window in the past cannot start order after order (24 a day at most), short
/// enough that a certificate the CA revoked soon after issuance is replaced within the
/// hour, not days later as a tenth of a 90-day lifetime would have it.
fn ari_floor(life: u64) -> u64 {
    3600u64.min(life / 3)
}

/// The renewal time of the certificate `f` (issued by this task at `last_issued`, if it
/// was) from the time `at` picked in ARI's window: not before `last_issued` plus the
/// margin (a window already past for a certificate just issued, by a server's mistake or
/// a hostile one, must not start order after order), and never later than the margin
/// before `not_after` (a window that slides must not let the certificate expire; this bound
/// wins over the first). Also whether the first bound moved it (the certificate too young).
fn ari_due(at: u64, now: u64, f: &CertFacts, last_issued: Option<u64>) -> (u64, bool) {
    let life = f.not_after.saturating_sub(f.not_before);
    let latest = f.not_after.saturating_sub(ari_margin(life));
    let floor = last_issued.map_or(0, |t| t.saturating_add(ari_floor(life)));
    let wanted = at.max(now);
    let due = wanted.max(floor).min(latest).max(now);
    (due, due > wanted)
}

/// Seconds until ARI is asked again after `errors` failed checks in a row: the server's
/// Retry-After on a 429 or 503 (RFC 9773 §4.3.2; held between 1 minute and 24 hours), or
/// 1 hour doubling up to 24 hours.
fn ari_retry(errors: u32, retry_after: Option<u64>) -> u64 {
    match retry_after {
        Some(r) => r.clamp(60, 86_400),
        None => 3600u64
            .saturating_mul(1 << errors.saturating_sub(1).min(5))
            .min(86_400),
    }
}

/// The most one renewal-information check (the directory, the account, the answer) takes.
const ARI_CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// The most one order takes, account to certificate (challenges validated by the server
/// included; pebble and Let's Encrypt take seconds): a stalled server must not hold the
/// task (and POST /tls/renew) for ever.
const ISSUE_TIMEOUT: Duration = Duration::from_secs(600);

/// Asks the renewal information for `der`, directory and account included, in at most
/// [`ARI_CHECK_TIMEOUT`]. An error comes with the Retry-After (seconds) of a 429 or 503
/// answer, if there was one.
async fn ari_check(
    acme: &Acme,
    s: &AcmeSettings,
    der: &rustls_pki_types::CertificateDer<'_>,
) -> Result<Option<((u64, u64), u64)>, (String, Option<u64>)> {
    let throttle = Throttle::default();
    let r = tokio::time::timeout(ARI_CHECK_TIMEOUT, async {
        let acct = account(s, Some(throttle.clone()))
            .await
            .map_err(|f| f.msg)?;
        check_profile(acme, &acct, s);
        renewal_info(&acct, der).await
    })
    .await
    .unwrap_or_else(|_| Err(format!("no answer in {} s", ARI_CHECK_TIMEOUT.as_secs())));
    r.map_err(|e| {
        let retry = *throttle.lock().unwrap_or_else(|e| e.into_inner());
        (crate::control::ha::printable_max(&e, 256), retry)
    })
}

/// Whether a new order naming the certificate it replaces (RFC 9773 §5) was refused for
/// that: the certificate already replaced (`alreadyReplaced`, 409), or one the server does
/// not know (Boulder answers 404; pebble 2.10 a `serverInternal` "could not find an order
/// for the given certificate"), say after a change of CA or account. The renewal is still
/// wanted then, ordered without `replaces`. Anything else (the network, a rate limit,
/// instant-acme's own "replaces field mismatch") is a failure like any other.
fn refused_replaces(e: &instant_acme::Error) -> bool {
    let instant_acme::Error::Api(p) = e else {
        return false;
    };
    let detail = p.detail.as_deref().unwrap_or("").to_ascii_lowercase();
    p.r#type.as_deref() == Some("urn:ietf:params:acme:error:alreadyReplaced")
        || p.status == Some(404)
        || detail.contains("could not find an order for the given certificate")
        || detail.contains("no current certificate")
}

/// Asks the ACME server's renewal information for `der` (RFC 9773 §4.3): the suggested
/// window (Unix seconds) and the Retry-After (seconds). `Ok(None)`: the directory offers
/// no `renewalInfo`.
async fn renewal_info(
    account: &Account,
    der: &rustls_pki_types::CertificateDer<'_>,
) -> Result<Option<((u64, u64), u64)>, String> {
    let id = CertificateIdentifier::try_from(der)?;
    let r = tokio::time::timeout(Duration::from_secs(30), account.renewal_info(&id))
        .await
        .map_err(|_| "no answer in 30 s".to_string())?;
    let (info, retry) = match r {
        Ok(v) => v,
        Err(instant_acme::Error::Unsupported(_)) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let w = &info.suggested_window;
    let (start, end) = (w.start.unix_timestamp(), w.end.unix_timestamp());
    // §4.2: a window whose end is not after its start is invalid; the client decides.
    if end <= start {
        return Err(format!("an invalid suggested window ({start} .. {end})"));
    }
    Ok(Some((
        (start.max(0) as u64, end.max(0) as u64),
        retry.as_secs(),
    )))
}

/// Runs the ACME task: issues when there is no certificate for the names, renews when
/// due, until the process ends.
pub async fn run(ctl: Arc<Control>, acme: Arc<Acme>, s: AcmeSettings) {
    let mut failures: u32 = 0;
    let mut retry_at: u64 = 0;
    let mut retry_reason = "retry after a failure";
    let mut reload_pending = false;
    let mut pending_replaced: Option<String> = None;
    // The directory offered renewal information when last asked.
    let mut ari_offered = false;
    let mut pick: Option<Pick> = None;
    acme.status().profile = s.profile.clone();
    // DNS-01 records left by an order a stop cut short: taken out first.
    let stale: Vec<String> = ctl
        .view()
        .local_data
        .iter()
        .filter(|r| {
            r.origin.source == "api"
                && r.rr.split_whitespace().nth(3) == Some("TXT")
                && s.names
                    .iter()
                    .any(|n| r.rr.starts_with(&format!("_acme-challenge.{n}.")))
        })
        .map(|r| r.rr.clone())
        .collect();
    for rr in stale {
        if let Err(e) = ctl
            .write(vec![Change::RemoveRecord { rr: rr.clone() }], "acme", None)
            .await
        {
            log::warn(format_args!("acme: removing {rr}: {}", e.message()));
        }
    }
    // Renewal-information checks failed in a row (asked again after 1, 2, 4 ... hours).
    let mut ari_errors: u32 = 0;
    // When this task last issued (Unix seconds): the floor of ARI-started renewals.
    let mut last_issued: Option<u64> = None;
    // The certificate "too young to renew" was logged for (once per certificate).
    let mut young_warned: Option<Vec<u8>> = None;
    loop {
        let now = unix(SystemTime::now());
        let current = read_cert(&s.cert);
        let ours = current
            .as_ref()
            .filter(|(_, f)| s.names.iter().all(|n| f.names.contains(n)));
        let (mut due, mut reason) = base_schedule(current.as_ref().map(|c| &c.1), &s.names, now);
        // Shown at once (failures aside): renewal information, asked below, may take a
        // while to answer.
        if failures == 0 {
            show(
                &mut acme.status(),
                current.as_ref().map(|c| &c.1),
                due,
                reason,
            );
        }
        // RFC 9773 §4.2: the server's window, when it offers one, decides.
        let mut window = None;
        let mut recheck = None;
        // The certificate the order replaces (§5), when the server offers ARI.
        let mut replaces: Option<CertificateIdentifier<'static>> = None;
        let replacing = |der: &rustls_pki_types::CertificateDer<'_>| {
            CertificateIdentifier::try_from(der)
                .ok()
                .map(CertificateIdentifier::into_owned)
        };
        let mut asked = false;
        if let Some((der, _)) = ours
            && failures > 0
            && ari_offered
        {
            // A retry: its time is the back-off's; the order still names what it replaces.
            replaces = replacing(der);
        } else if let Some((der, facts)) = ours
            && !reload_pending
        {
            // An operator's request is not held up by a slow check.
            let checked = tokio::select! {
                c = ari_check(&acme, &s, der) => Some(c),
                _ = acme.renew_now.notified() => None,
            };
            match checked {
                None => {
                    asked = true;
                    if ari_offered {
                        replaces = replacing(der);
                    }
                }
                Some(Ok(Some((w, retry)))) => {
                    ari_offered = true;
                    ari_errors = 0;
                    let at = match pick {
                        Some(p) if p.window == w => p.at,
                        _ => pick_in(w.0, w.1),
                    };
                    pick = Some(Pick { window: w, at });
                    // §4.2 step 3: a time already past means now; bounded by the
                    // certificate's age and expiry (see ari_due).
                    let held;
                    (due, held) = ari_due(at, now, facts, last_issued);
                    if held && young_warned.as_deref() != Some(der.as_ref()) {
                        young_warned = Some(der.to_vec());
                        log::warn(format_args!(
                            "acme: renewal information asks to renew a certificate issued {} s ago: not before {due} (Unix; an hour after its issuance, or a third of its lifetime if shorter)",
                            now.saturating_sub(last_issued.unwrap_or(now))
                        ));
                    }
                    reason = "renewal information";
                    window = Some(w);
                    recheck = Some(next_check(now, retry, due));
                    replaces = replacing(der);
                }
                Some(Ok(None)) => {
                    ari_offered = false;
                    ari_errors = 0;
                }
                Some(Err((e, retry_after))) => {
                    // §4.2: no usable answer, the client decides: two thirds; asked again
                    // (a revocation must not wait for the two-thirds mark to be seen) after
                    // the server's Retry-After or a back-off (§4.3.2: not hammered).
                    ari_errors = ari_errors.saturating_add(1);
                    let wait = ari_retry(ari_errors, retry_after);
                    log::warn(format_args!(
                        "acme: renewal information: {e} (renewal at two thirds of the certificate's lifetime; asked again in {wait} s)"
                    ));
                    recheck = Some((now + wait).min(due.max(now + 60)));
                }
            }
        }
        if failures > 0 {
            (due, reason) = (retry_at.max(now), retry_reason);
            recheck = None;
        }
        {
            let mut st = acme.status();
            show(&mut st, current.as_ref().map(|c| &c.1), due, reason);
            st.window_start = window.map(|w| w.0);
            st.window_end = window.map(|w| w.1);
            st.renewal_info_next = recheck;
        }
        // Wakes at the renewal time, or earlier to ask ARI again; an operator's request
        // orders at once.
        let wake = recheck.map_or(due, |r| r.min(due));
        if !asked && wake > now {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(wake - now)) => {}
                _ = acme.renew_now.notified() => asked = true,
            }
            if !asked && wake < due {
                continue;
            }
        }
        // The sleep may have lasted hours: an operator who put another certificate in
        // force meanwhile gets a plan for it, not an order naming the one it replaced
        // (RFC 9773 §5 `replaces`) and timed for that one. Asked for, the order goes on,
        // naming the certificate now in force.
        let now_der = read_cert(&s.cert);
        if now_der.as_ref().map(|c| &c.0) != current.as_ref().map(|c| &c.0) {
            if !asked {
                log::info(format_args!(
                    "acme: the certificate file changed while waiting: renewal planned again"
                ));
                pick = None;
                continue;
            }
            replaces = replaces.and_then(|_| {
                now_der
                    .as_ref()
                    .filter(|(_, f)| s.names.iter().all(|n| f.names.contains(n)))
                    .and_then(|(der, _)| replacing(der))
            });
        }
        // A certificate written whose reload failed is put in force again, not ordered
        // again (a new order would count against the CA's limits for nothing).
        let r = if reload_pending {
            put_in_force(&ctl)
                .await
                .map(|()| pending_replaced.take())
                .map_err(Failure::from)
        } else {
            issue(&ctl, &acme, &s, replaces).await
        };
        if let Err(f) = &r
            && f.msg.starts_with(RELOAD_FAILED)
        {
            reload_pending = true;
            if f.replaced.is_some() {
                pending_replaced = f.replaced.clone();
            }
        } else {
            reload_pending = false;
        }
        match r {
            Ok(replaced) => {
                failures = 0;
                pick = None;
                last_issued = Some(unix(SystemTime::now()));
                young_warned = None;
                // The new certificate and its plan shown with the count, in one step.
                let c = read_cert(&s.cert).map(|c| c.1);
                let now = unix(SystemTime::now());
                let (due, reason) = base_schedule(c.as_ref(), &s.names, now);
                let mut st = acme.status();
                show(&mut st, c.as_ref(), due, reason);
                st.window_start = None;
                st.window_end = None;
                st.renewal_info_next = None;
                st.issued += 1;
                st.last_replaced = replaced;
                st.last_error = None;
                st.last_error_reason = None;
                st.last_issued = Some(unix(SystemTime::now()));
            }
            Err(f) => {
                // The reason quotes the ACME server's problem document: one bounded line
                // before it reaches the log, the audit log and GET /tls.
                let e = crate::control::ha::printable_max(&f.msg, 512);
                failures = failures.saturating_add(1);
                let now = unix(SystemTime::now());
                retry_at = now + backoff(failures);
                retry_reason = "retry after a failure";
                // A rate limit: not before the time the server named (at most a week).
                if let Some(t) = f.not_before
                    && t > retry_at
                {
                    retry_at = t.min(now + 7 * 86_400);
                    retry_reason = "retry after a rate limit";
                }
                log::warn(format_args!(
                    "acme: {e} (the certificate in force keeps serving; next try in {} s)",
                    retry_at.saturating_sub(now)
                ));
                tokio::task::block_in_place(|| {
                    ctl.record(
                        skua_audit::kind::TLS_FAILED,
                        "acme",
                        None,
                        serde_json::json!({"names": s.names, "error": e, "reason": f.kind.as_str()}),
                    )
                });
                let mut st = acme.status();
                st.failures += 1;
                *st.failures_by_reason
                    .entry(f.kind.as_str().to_string())
                    .or_default() += 1;
                st.last_error = Some(e);
                st.last_error_reason = Some(f.kind.as_str().to_string());
                // The retry shown with the failure, in one step.
                st.next_attempt = Some(retry_at);
                st.next_reason = retry_reason.into();
                st.renewal_info_next = None;
            }
        }
    }
}

/// The renewal time without renewal information: two thirds of the lifetime of the
/// certificate `c` when it has all `names`, else now.
fn base_schedule(c: Option<&CertFacts>, names: &[String], now: u64) -> (u64, &'static str) {
    match c {
        Some(f) if names.iter().all(|n| f.names.contains(n)) => (
            f.not_before + (f.not_after.saturating_sub(f.not_before)) * 2 / 3,
            "two thirds of its lifetime",
        ),
        Some(_) => (now, "the names changed"),
        None => (now, "no certificate"),
    }
}

/// The certificate `c` and the next attempt put in the status.
fn show(st: &mut AcmeStatus, c: Option<&CertFacts>, due: u64, reason: &str) {
    if let Some(f) = c {
        st.not_before = Some(f.not_before);
        st.not_after = Some(f.not_after);
        st.names = f.names.clone();
    }
    st.next_attempt = Some(due);
    st.next_reason = reason.into();
}

/// The profile asked for must be one the directory lists (draft-ietf-acme-profiles §3):
/// an error naming it and the ones offered otherwise.
fn profile_offered(acct: &Account, profile: &str) -> Result<(), Failure> {
    let mut offered: Vec<&str> = acct.profiles().map(|p| p.name).collect();
    if offered.contains(&profile) {
        return Ok(());
    }
    offered.sort_unstable();
    Err(Failure {
        kind: FailureKind::Profile,
        msg: if offered.is_empty() {
            format!("profile '{profile}': the ACME server offers no profiles (remove profile:)")
        } else {
            format!(
                "profile '{profile}': the ACME server does not offer it (it offers: {})",
                offered.join(", ")
            )
        },
        not_before: None,
        replaced: None,
    })
}

/// Shows at once, before any order, that `profile:` names a profile the directory does
/// not list (the order would fail: the operator learns it now, not at renewal time).
fn check_profile(acme: &Acme, acct: &Account, s: &AcmeSettings) {
    let Some(p) = &s.profile else { return };
    if let Err(f) = profile_offered(acct, p) {
        let mut st = acme.status();
        if st.last_error.is_none() {
            // The profile names come from the server: one bounded line, as its other text.
            let msg = crate::control::ha::printable_max(&f.msg, 512);
            log::warn(format_args!("acme: {msg}"));
            st.last_error = Some(msg);
            st.last_error_reason = Some(f.kind.as_str().to_string());
        }
    }
}

/// Seconds to wait after `n` failures in a row: 60, 120, 240 ... up to 6 hours, with up to
/// a tenth more of jitter (so nodes that failed together do not retry together).
fn backoff(n: u32) -> u64 {
    let base = 60u64
        .saturating_mul(1 << n.saturating_sub(1).min(9))
        .min(6 * 3600);
    let mut b = [0u8; 2];
    let _ = getrandom::fill(&mut b);
    base + base * u64::from(u16::from_le_bytes(b)) / 65535 / 10
}

/// One order: account, authorizations, challenges, finalization, the files written, a
/// reload to serve them.
async fn issue(
    ctl: &Arc<Control>,
    acme: &Arc<Acme>,
    s: &AcmeSettings,
    replaces: Option<CertificateIdentifier<'static>>,
) -> Result<Option<String>, Failure> {
    // One deadline for the whole order; the challenges are taken down whatever comes of it.
    let deadline = tokio::time::Instant::now() + ISSUE_TIMEOUT;
    let late = || {
        Failure::from(format!(
            "no certificate after {} minutes (the ACME server stalled?)",
            ISSUE_TIMEOUT.as_secs() / 60
        ))
    };
    let account = tokio::time::timeout_at(deadline, account(s, None))
        .await
        .map_err(|_| late())??;
    if let Some(p) = &s.profile {
        profile_offered(&account, p)?;
    }
    let ids: Vec<Identifier> = s.names.iter().map(|n| Identifier::Dns(n.clone())).collect();
    let new_order = |replaces: Option<CertificateIdentifier<'static>>| {
        let mut o = NewOrder::new(&ids);
        if let Some(p) = &s.profile {
            o = o.profile(p);
        }
        if let Some(r) = replaces {
            o = o.replaces(r);
        }
        o
    };
    let first = tokio::time::timeout_at(deadline, account.new_order(&new_order(replaces.clone())))
        .await
        .map_err(|_| late())?;
    let mut order = match first {
        Ok(o) => o,
        // RFC 9773 §5: a server refuses `replaces` for a certificate already replaced, or
        // one it does not know (after a change of CA, say): the renewal is still wanted, so
        // it is ordered once more without it. Any other refusal is not one of `replaces`.
        Err(e) if replaces.is_some() && refused_replaces(&e) => {
            let f = classify("new order", &e);
            log::warn(format_args!(
                "acme: the order replacing the certificate in force was refused ({}); ordering without 'replaces'",
                crate::control::ha::printable_max(&f.msg, 256)
            ));
            tokio::time::timeout_at(deadline, account.new_order(&new_order(None)))
                .await
                .map_err(|_| late())?
                .map_err(|e| classify("new order", &e))?
        }
        Err(e) => return Err(classify("new order", &e)),
    };
    // What the server's order object says it replaces (shown once the order succeeds).
    let replaced = order.state().replaces.as_ref().map(|r| r.to_string());
    // HTTP-01: the tokens are served while the order is validated.
    let server = if s.challenge == skua_config::AcmeChallenge::Http01 {
        Some(http_server(s.http_interface, acme.clone()).await?)
    } else {
        None
    };
    let mut added: Vec<String> = Vec::new();
    let mut alpn_names: Vec<String> = Vec::new();
    let result = tokio::time::timeout_at(deadline, async {
        let mut auths = order.authorizations();
        while let Some(a) = auths.next().await {
            let mut a = a.map_err(|e| classify("authorization", &e))?;
            match a.status {
                AuthorizationStatus::Pending => {}
                AuthorizationStatus::Valid => continue,
                other => return Err(Failure::from(format!("authorization {other:?}"))),
            }
            let kind = match s.challenge {
                skua_config::AcmeChallenge::Dns01 => ChallengeType::Dns01,
                skua_config::AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
                skua_config::AcmeChallenge::Http01 => ChallengeType::Http01,
            };
            let mut ch = a
                .challenge(kind.clone())
                .ok_or_else(|| Failure::from(format!("the server offers no {kind:?} challenge")))?;
            let ka = ch.key_authorization();
            match kind {
                ChallengeType::Dns01 => {
                    let name = ours(&ch.identifier().to_string(), &s.names)?;
                    let rr = format!("_acme-challenge.{name}. 60 IN TXT \"{}\"", ka.dns_value());
                    ctl.write(vec![Change::AddRecord { rr: rr.clone() }], "acme", None)
                        .await
                        .map_err(|e| {
                            Failure::from(format!("dns-01 record for {name}: {}", e.message()))
                        })?;
                    added.push(rr);
                }
                ChallengeType::TlsAlpn01 => {
                    let name = ours(&ch.identifier().to_string(), &s.names)?;
                    let cert = alpn_certificate(&name, ka.digest().as_ref())?;
                    crate::base::tls::alpn_challenges()
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(name.clone(), cert);
                    alpn_names.push(name);
                }
                _ => acme
                    .http_tokens
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((ch.token.clone(), ka.as_str().to_string())),
            }
            ch.set_ready()
                .await
                .map_err(|e| classify("challenge", &e))?;
        }
        let status = order
            .poll_ready(&RetryPolicy::default())
            .await
            .map_err(|e| classify("validation", &e))?;
        if status != OrderStatus::Ready {
            return Err(Failure::from(format!("the order is {status:?}, not ready")));
        }
        // Our own CSR, the first name in its subject (instant-acme's leaves it empty).
        let (csr_der, key_pem) = csr(&s.names)?;
        order
            .finalize_csr(&csr_der)
            .await
            .map_err(|e| classify("finalize", &e))?;
        let cert_pem = order
            .poll_certificate(&RetryPolicy::default())
            .await
            .map_err(|e| classify("certificate", &e))?;
        Ok::<_, Failure>((cert_pem, key_pem))
    })
    .await
    .unwrap_or_else(|_| Err(late()));
    // Challenges taken down whatever came of it.
    acme.http_tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    if let Some(server) = server {
        server.abort();
    }
    {
        let mut m = crate::base::tls::alpn_challenges()
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for n in &alpn_names {
            m.remove(n);
        }
    }
    for rr in added {
        if let Err(e) = ctl
            .write(vec![Change::RemoveRecord { rr: rr.clone() }], "acme", None)
            .await
        {
            log::warn(format_args!("acme: removing {rr}: {}", e.message()));
        }
    }
    let (cert_pem, key_pem) = result?;
    install(s, &cert_pem, &key_pem)?;
    let (_, f) = read_cert(&s.cert).ok_or("the certificate received does not parse")?;
    let (nb, na) = (f.not_before, f.not_after);
    tokio::task::block_in_place(|| {
        ctl.record(
            skua_audit::kind::TLS_ISSUED,
            "acme",
            None,
            serde_json::json!({"names": s.names, "not_before": nb, "not_after": na, "serial": f.serial}),
        )
    });
    put_in_force(ctl).await.map_err(|e| Failure {
        replaced: replaced.clone(),
        ..Failure::from(e)
    })?;
    log::info(format_args!(
        "acme: certificate for {} issued, valid until {na} (Unix), in force",
        s.names.join(", ")
    ));
    Ok(replaced)
}

/// The reload that serves the certificate written (a failure names why: another part of
/// the configuration, say; the next attempt reloads again, without a new order).
async fn put_in_force(ctl: &Arc<Control>) -> Result<(), String> {
    ctl.reload("acme", None)
        .await
        .map(|_| ())
        .map_err(|e| format!("{RELOAD_FAILED}{}", e.message()))
}

/// How a failure of [`put_in_force`] begins.
const RELOAD_FAILED: &str = "the new certificate is written but did not load: ";

/// Longest common name (RFC 5280, appendix A.1: `ub-common-name` is 64).
const MAX_COMMON_NAME: usize = 64;

/// A certificate signing request (PKCS #10, RFC 2986) for `names` with a new ECDSA P-256
/// key: DER, and the key as PEM. Every name is a subjectAltName, and the first that fits
/// in a common name (64 octets) is the subject's CN too: a CA that copies the request's
/// subject (step-ca) otherwise issues a certificate with an empty subject, which some
/// clients refuse (kdig 3.2 with GnuTLS: "handshake failed"). Let's Encrypt does the same
/// with the names it is given (its `classic` profile's CN is the first name that fits).
pub fn csr(names: &[String]) -> Result<(Vec<u8>, String), String> {
    let mut params = rcgen::CertificateParams::new(names.to_vec())
        .map_err(|e| format!("the certificate request: {e}"))?;
    let mut dn = rcgen::DistinguishedName::new();
    if let Some(cn) = names.iter().find(|n| n.len() <= MAX_COMMON_NAME) {
        dn.push(rcgen::DnType::CommonName, cn.as_str());
    }
    params.distinguished_name = dn;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| format!("the certificate key: {e}"))?;
    let req = params
        .serialize_request(&key)
        .map_err(|e| format!("the certificate request: {e}"))?;
    Ok((req.der().to_vec(), key.serialize_pem()))
}

/// The configured name an authorization is for: the server's identifier must be one of
/// `names` (it goes into a record and a certificate: nothing the server sends is taken
/// as it is).
fn ours(identifier: &str, names: &[String]) -> Result<String, String> {
    let id = identifier.trim_end_matches('.').to_ascii_lowercase();
    names
        .iter()
        .find(|n| **n == id)
        .cloned()
        .ok_or_else(|| "the server asked to validate a name that was not ordered".to_string())
}

/// The TLS-ALPN-01 certificate for `name` (RFC 8737 §3): self-signed, the name as its only
/// SAN, the critical acmeIdentifier extension holding `digest` (SHA-256 of the key
/// authorization).
fn alpn_certificate(
    name: &str,
    digest: &[u8],
) -> Result<Arc<tokio_rustls::rustls::sign::CertifiedKey>, String> {
    let bad = |e: rcgen::Error| format!("tls-alpn-01 certificate: {e}");
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).map_err(bad)?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate().map_err(bad)?;
    let cert = params.self_signed(&key).map_err(bad)?;
    let provider = tokio_rustls::rustls::crypto::ring::default_provider();
    let der = rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    // Not CertifiedKey::from_der: its check parses the certificate, and refuses the
    // critical acmeIdentifier extension it does not know.
    let signer = provider
        .key_provider
        .load_private_key(der)
        .map_err(|e| format!("tls-alpn-01 certificate: {e}"))?;
    Ok(Arc::new(tokio_rustls::rustls::sign::CertifiedKey::new(
        vec![cert.der().clone()],
        signer,
    )))
}

/// The most an ACME response body may hold: directories, orders and problem documents are
/// a few KiB, a certificate chain a few dozen; more is refused (a hostile or broken server
/// must not fill the memory).
const MAX_BODY: usize = 1 << 20;
/// The most one ACME request may take, connection to the last byte of the body.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest Retry-After kept (RFC 9110 §10.2.3): instant-acme 0.8.5 adds the seconds to
/// the clock unchecked (a panic, an abort in release, past the representable time), so a
/// longer delay is cut to this before it sees it.
const MAX_RETRY_AFTER: u64 = 7 * 86_400;

/// The HTTP client instant-acme is given for every ACME request: hyper with the roots the
/// configuration says, each response's body bounded ([`MAX_BODY`]), each request timed
/// ([`REQUEST_TIMEOUT`]) and its Retry-After made safe ([`sane_retry_after`]).
struct AcmeHttp {
    client: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        instant_acme::BodyWrapper<hyper::body::Bytes>,
    >,
    timeout: Duration,
    /// Where the Retry-After (seconds) of a 429 or 503 answer goes: instant-acme turns
    /// those answers into a problem document and drops the header.
    throttle: Option<Throttle>,
}

/// The Retry-After of the last 429 or 503 answer, seconds.
type Throttle = Arc<Mutex<Option<u64>>>;

impl AcmeHttp {
    /// A client trusting the certificates in `ca_bundle`, or (none) the platform's roots, as
    /// instant-acme's own builders do.
    fn new(ca_bundle: Option<&Path>) -> Result<Self, String> {
        let b = hyper_rustls::HttpsConnectorBuilder::new();
        let b = match ca_bundle {
            Some(ca) => {
                use rustls_pki_types::pem::PemObject;
                let mut roots = tokio_rustls::rustls::RootCertStore::empty();
                for c in rustls_pki_types::CertificateDer::pem_file_iter(ca)
                    .map_err(|e| format!("ca-bundle: {e}"))?
                {
                    roots
                        .add(c.map_err(|e| format!("ca-bundle: {e}"))?)
                        .map_err(|e| format!("ca-bundle: {e}"))?;
                }
                if roots.is_empty() {
                    return Err(format!("ca-bundle: {}: no certificate", ca.display()));
                }
                b.with_tls_config(
                    tokio_rustls::rustls::ClientConfig::builder()
                        .with_root_certificates(roots)
                        .with_no_client_auth(),
                )
            }
            None => b
                .try_with_platform_verifier()
                .map_err(|e| format!("acme client: {e}"))?,
        };
        let conn = b.https_only().enable_http1().enable_http2().build();
        Ok(Self {
            client: hyper_util::client::legacy::Client::builder(
                hyper_util::rt::TokioExecutor::new(),
            )
            .build(conn),
            timeout: REQUEST_TIMEOUT,
            throttle: None,
        })
    }
}

impl instant_acme::HttpClient for AcmeHttp {
    fn request(
        &self,
        req: hyper::Request<instant_acme::BodyWrapper<hyper::body::Bytes>>,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<instant_acme::BytesResponse, instant_acme::Error>,
                > + Send,
        >,
    > {
        let fut = self.client.request(req);
        let (timeout, throttle) = (self.timeout, self.throttle.clone());
        Box::pin(async move {
            let rsp = tokio::time::timeout(timeout, async {
                let rsp = fut
                    .await
                    .map_err(|e| instant_acme::Error::Other(Box::new(e)))?;
                guard_response(rsp).await
            })
            .await
            .unwrap_or_else(|_| {
                Err(instant_acme::Error::Other(
                    format!("the ACME server did not answer in {} s", timeout.as_secs()).into(),
                ))
            })?;
            let status = rsp.parts.status.as_u16();
            if let Some(t) = throttle
                && (status == 429 || status == 503)
            {
                *t.lock().unwrap_or_else(|e| e.into_inner()) =
                    retry_after_secs(&rsp.parts.headers, SystemTime::now());
            }
            Ok(rsp)
        })
    }
}

/// A response made safe for instant-acme: Retry-After sanitised, the body read whole but
/// no more than [`MAX_BODY`] (more: an error).
async fn guard_response<B>(
    rsp: hyper::Response<B>,
) -> Result<instant_acme::BytesResponse, instant_acme::Error>
where
    B: hyper::body::Body + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use http_body_util::BodyExt as _;
    let (mut parts, body) = rsp.into_parts();
    sane_retry_after(&mut parts.headers, SystemTime::now());
    let body = http_body_util::Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                instant_acme::Error::Str("the ACME server's response is larger than 1 MiB")
            } else {
                instant_acme::Error::Other(e)
            }
        })?
        .to_bytes();
    Ok(instant_acme::BytesResponse {
        parts,
        body: Box::new(body),
    })
}

/// The seconds from `now` the one Retry-After in `h` says (RFC 9110 §10.2.3), u64::MAX for
/// a number too long; none without one, with several, or with a value that is neither.
fn retry_after_secs(h: &hyper::HeaderMap, now: SystemTime) -> Option<u64> {
    let mut values = h.get_all(hyper::header::RETRY_AFTER).iter();
    let (Some(v), None) = (values.next(), values.next()) else {
        return None;
    };
    let v = v.to_str().ok()?.trim();
    if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) {
        Some(v.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let d = httpdate::parse_http_date(v).ok()?;
        Some(d.duration_since(now).map_or(0, |d| d.as_secs()))
    }
}

/// Makes the Retry-After in `h` (RFC 9110 §10.2.3: delay-seconds or an HTTP-date) one
/// instant-acme can use without overflowing the clock: a delay or a date further than
/// [`MAX_RETRY_AFTER`] from `now` becomes that many seconds; a value that is neither (or
/// several) is removed (instant-acme then waits its own way, and renewal information without
/// it is an error, asked again later).
fn sane_retry_after(h: &mut hyper::HeaderMap, now: SystemTime) {
    use hyper::header::RETRY_AFTER;
    match retry_after_secs(h, now) {
        Some(s) if s > MAX_RETRY_AFTER => {
            h.insert(
                RETRY_AFTER,
                hyper::header::HeaderValue::from(MAX_RETRY_AFTER),
            );
        }
        Some(_) => {}
        None => {
            h.remove(RETRY_AFTER);
        }
    }
}

/// Largest account file read (one is a few hundred octets).
const MAX_ACCOUNT_FILE: u64 = 64 << 10;

/// What `path` holds: nothing (`None`), or an ACME account file as skuad writes it
/// (instant-acme's credentials: an account ID and a PKCS#8 key) and the directory URL it is
/// for. Anything else is an error naming the path: a file skuad did not write is never
/// renamed or replaced, whatever a configuration line says.
fn own_account(path: &Path) -> Result<Option<(AccountCredentials, Option<String>)>, String> {
    use std::io::Read as _;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let foreign = || {
        format!(
            "{} is not an ACME account file skuad wrote: left as it is (move it away or name another account-file:)",
            path.display()
        )
    };
    // A FIFO or a device would block or never end: only a regular file is read.
    if !meta.is_file() || meta.len() > MAX_ACCOUNT_FILE {
        return Err(foreign());
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_ACCOUNT_FILE).read_to_string(&mut text))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|_| foreign())?;
    let directory = v["directory"].as_str().map(str::to_owned);
    let creds: AccountCredentials = serde_json::from_value(v).map_err(|_| foreign())?;
    Ok(Some((creds, directory)))
}

/// The account: the one in `account-file:` when it is for this `directory:`, or a new one
/// (written there, mode 0600, only where no file is; an account file of skuad's for
/// another directory is kept beside it as `.previous`, unless that name holds a file skuad
/// did not write). A file at `account-file:` that is not an account file is an error and
/// is left untouched. An account file that cannot be used now (the server unreachable) is
/// an error, never a reason to make another account.
async fn account(s: &AcmeSettings, throttle: Option<Throttle>) -> Result<Account, Failure> {
    // Our HTTP client for every request of the account and its orders (see AcmeHttp).
    let builder = || -> Result<_, String> {
        let mut http = AcmeHttp::new(s.ca_bundle.as_deref())?;
        http.throttle = throttle.clone();
        Ok(Account::builder_with_http(Box::new(http)))
    };
    match own_account(&s.account_file)? {
        Some((creds, dir)) if dir.as_deref() == Some(s.directory.as_str()) => {
            return builder()?
                .from_credentials(creds)
                .await
                .map_err(|e| classify("account", &e));
        }
        Some(_) => {
            // Ours, for another directory: kept, and a new account made.
            let mut prev = s.account_file.clone().into_os_string();
            prev.push(".previous");
            own_account(Path::new(&prev))?;
            std::fs::rename(&s.account_file, &prev)
                .map_err(|e| format!("{}: {e}", s.account_file.display()))?;
        }
        None => {}
    }
    let contacts: Vec<&str> = s.contacts.iter().map(String::as_str).collect();
    let (a, creds) = builder()?
        .create(
            &NewAccount {
                contact: &contacts,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            s.directory.clone(),
            None,
        )
        .await
        .map_err(|e| classify("account", &e))?;
    let text = serde_json::to_string(&creds).map_err(|e| e.to_string())?;
    // Where no file is: one that appeared meanwhile is not replaced.
    temp_beside(&s.account_file, text.as_bytes())?
        .persist_noclobber(&s.account_file)
        .map_err(|e| format!("{}: {}", s.account_file.display(), e.error))?;
    Ok(a)
}

/// Puts the certificate and key where they go: both written beside their places first,
/// checked as a pair (the certificate parses, the key is its key), then renamed, key then
/// certificate (a failure before the renames leaves the pair in force as it was).
fn install(s: &AcmeSettings, cert_pem: &str, key_pem: &str) -> Result<(), String> {
    replaceable(&s.key, Pem::Key)?;
    replaceable(&s.cert, Pem::Certificates)?;
    let key_tmp = temp_beside(&s.key, key_pem.as_bytes())?;
    let cert_tmp = temp_beside(&s.cert, cert_pem.as_bytes())?;
    crate::control::tls::server_config(cert_tmp.path(), key_tmp.path(), &[])
        .map_err(|e| format!("the certificate received: {e}"))?;
    key_tmp
        .persist(&s.key)
        .map_err(|e| format!("{}: {e}", s.key.display()))?;
    cert_tmp
        .persist(&s.cert)
        .map_err(|e| format!("{}: {e}", s.cert.display()))?;
    Ok(())
}

/// What a file ACME replaces holds.
#[derive(Clone, Copy)]
enum Pem {
    Certificates,
    Key,
}

/// Whether ACME may replace `path`: nothing is there, or a PEM file of the kind it writes
/// (a certificate chain, a private key: its own, or the operator's before ACME). Anything
/// else is an error naming the path, and nothing is written.
fn replaceable(path: &Path, kind: Pem) -> Result<(), String> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let what = match kind {
        Pem::Certificates => "a PEM certificate chain",
        Pem::Key => "a PEM private key",
    };
    let refused = || {
        format!(
            "{} is not {what}: acme: replaces no other file (move it away or name another place)",
            path.display()
        )
    };
    if !meta.is_file() || meta.len() > 1 << 20 {
        return Err(refused());
    }
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let ok = match kind {
        Pem::Certificates => CertificateDer::pem_slice_iter(&data)
            .collect::<Result<Vec<_>, _>>()
            .is_ok_and(|c| !c.is_empty()),
        Pem::Key => PrivateKeyDer::from_pem_slice(&data).is_ok(),
    };
    if ok { Ok(()) } else { Err(refused()) }
}

/// A temporary file (mode 0600) beside `path` holding `data`, synced.
fn temp_beside(path: &Path, data: &[u8]) -> Result<tempfile::NamedTempFile, String> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    tmp.write_all(data)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(tmp)
}

/// Serves HTTP-01 tokens (`GET /.well-known/acme-challenge/TOKEN`) on `addr` until aborted.
async fn http_server(
    addr: SocketAddr,
    acme: Arc<Acme>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let l = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("http-01-interface {addr}: {e}"))?;
    let slots = Arc::new(tokio::sync::Semaphore::new(64));
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = l.accept().await else {
                // Out of descriptors, say: not a reason to spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            // A validation takes a few connections: past 64 at once, the rest are closed.
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let acme = acme.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let acme = acme.clone();
                        async move {
                            let token = req
                                .uri()
                                .path()
                                .strip_prefix("/.well-known/acme-challenge/")
                                .and_then(|t| acme.http_token(t));
                            let (status, body) = match token {
                                Some(k) if req.method() == hyper::Method::GET => (200, k),
                                _ => (404, String::new()),
                            };
                            let mut r = hyper::Response::new(http_body_util::Full::new(
                                hyper::body::Bytes::from(body),
                            ));
                            *r.status_mut() =
                                hyper::StatusCode::from_u16(status).unwrap_or_default();
                            Ok::<_, std::convert::Infallible>(r)
                        }
                    },
                );
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = tokio::time::timeout(
                    Duration::from_secs(10),
                    hyper::server::conn::http1::Builder::new().serve_connection(io, svc),
                )
                .await;
            });
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(kind: &str, detail: &str) -> instant_acme::Error {
        let p: instant_acme::Problem = serde_json::from_value(
            serde_json::json!({"type": kind, "detail": detail, "status": 429}),
        )
        .unwrap();
        instant_acme::Error::Api(p)
    }

    #[test]
    fn failures_are_classified_by_problem_type() {
        // Let's Encrypt's wording of a rate limit (RFC 8555 §6.7 type).
        let f = classify(
            "new order",
            &problem(
                "urn:ietf:params:acme:error:rateLimited",
                "too many certificates (5) already issued for this exact set of identifiers in the last 168h0m0s, retry after 2025-01-02 03:04:05 UTC: see https://letsencrypt.org/docs/rate-limits/",
            ),
        );
        assert_eq!(f.kind, FailureKind::RateLimited);
        assert!(f.msg.starts_with("rate-limited: new order: "), "{}", f.msg);
        // 2025-01-02T03:04:05Z
        assert_eq!(f.not_before, Some(1_735_787_045));
        // Without a time in the detail: the back-off alone.
        let f = classify(
            "new order",
            &problem("urn:ietf:params:acme:error:rateLimited", "slow down"),
        );
        assert_eq!((f.kind, f.not_before), (FailureKind::RateLimited, None));
        let f = classify(
            "new order",
            &problem(
                "urn:ietf:params:acme:error:invalidProfile",
                "unrecognized profile",
            ),
        );
        assert_eq!(f.kind, FailureKind::Profile);
        let f = classify(
            "validation",
            &problem("urn:ietf:params:acme:error:unauthorized", "no"),
        );
        assert_eq!(f.kind, FailureKind::AcmeServer);
        assert!(f.msg.starts_with("validation: "), "{}", f.msg);
        let f = classify("account", &instant_acme::Error::Str("network"));
        assert_eq!(f.kind, FailureKind::Other);
        assert_eq!(Failure::from("x").kind, FailureKind::Other);
    }

    #[test]
    fn retry_after_in_a_problem_detail() {
        assert_eq!(
            retry_after_in_detail("retry after 1970-01-01 00:00:00 UTC"),
            Some(0)
        );
        assert_eq!(
            retry_after_in_detail("Retry after 2000-03-01 00:00:01 UTC: see"),
            Some(951_868_801)
        );
        // Malformed or absent: no time, never a panic.
        for d in [
            "",
            "retry after",
            "retry after 2025-13-01 00:00:00 UTC",
            "retry after 2025-01-01T00:00:00 UTC",
            "retry after 2025-01-01 00:00:00 CET",
            "retry after 2025-01-01 00:00:0",
            "retry after 2025-01-01 0x:00:00 UTC",
            "retry after +025-01-01 00:00:00 UTC",
            "retry after ĳĳĳĳĳĳĳĳĳĳ UTC",
        ] {
            assert_eq!(retry_after_in_detail(d), None, "{d}");
        }
    }

    #[test]
    fn a_time_inside_the_window_and_the_next_check() {
        for _ in 0..1000 {
            let t = pick_in(100, 160);
            assert!((100..=160).contains(&t));
        }
        // A one-second window, and one reversed (never a panic; the caller refuses it).
        assert_eq!(pick_in(5, 5), 5);
        assert_eq!(pick_in(9, 5), 9);
        // Retry-After held between 1 minute and 6 hours, never after the renewal time.
        assert_eq!(next_check(1000, 0, 1_000_000), 1060);
        assert_eq!(next_check(1000, 600, 1_000_000), 1600);
        assert_eq!(next_check(1000, 86_400, 1_000_000), 1000 + 6 * 3600);
        assert_eq!(next_check(1000, 86_400, 5000), 5000);
        assert_eq!(next_check(1000, 86_400, 1010), 1060);
    }

    /// A local HTTP server answering every request with `retry_after` and `body_len` bytes:
    /// its address.
    async fn hostile_server(retry_after: &'static str, body_len: usize) -> SocketAddr {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = l.accept().await {
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |_req| async move {
                        let mut r = hyper::Response::new(http_body_util::Full::new(
                            hyper::body::Bytes::from(vec![b'x'; body_len]),
                        ));
                        r.headers_mut().insert(
                            hyper::header::RETRY_AFTER,
                            hyper::header::HeaderValue::from_static(retry_after),
                        );
                        Ok::<_, std::convert::Infallible>(r)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        addr
    }

    async fn fetch(addr: SocketAddr) -> Result<instant_acme::BytesResponse, instant_acme::Error> {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Empty<hyper::body::Bytes>>();
        let rsp = client
            .get(format!("http://{addr}/").parse().unwrap())
            .await
            .unwrap();
        guard_response(rsp).await
    }

    #[tokio::test]
    async fn a_hostile_retry_after_and_a_huge_body_over_http() {
        // u64::MAX seconds: instant-acme would add it to the clock and panic; it is cut to
        // a week before instant-acme sees it.
        let addr = hostile_server("18446744073709551615", 100).await;
        let mut r = fetch(addr).await.unwrap();
        assert_eq!(r.parts.headers[hyper::header::RETRY_AFTER], "604800");
        assert_eq!(r.body.into_bytes().await.unwrap().len(), 100);
        // A body of 1 MiB passes; one byte more is an error, not read on.
        let addr = hostile_server("5", MAX_BODY).await;
        let mut r = fetch(addr).await.unwrap();
        assert_eq!(r.parts.headers[hyper::header::RETRY_AFTER], "5");
        assert_eq!(r.body.into_bytes().await.unwrap().len(), MAX_BODY);
        let addr = hostile_server("5", 8 * MAX_BODY).await;
        let e = fetch(addr)
            .await
            .err()
            .expect("a body above 1 MiB is refused");
        assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
        // Neither a number nor a date: removed.
        let addr = hostile_server("soon", 10).await;
        let r = fetch(addr).await.unwrap();
        assert!(r.parts.headers.get(hyper::header::RETRY_AFTER).is_none());
    }

    #[test]
    fn retry_after_values_made_safe() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let run = |vals: &[&str]| {
            let mut h = hyper::HeaderMap::new();
            for v in vals {
                h.append(
                    hyper::header::RETRY_AFTER,
                    hyper::header::HeaderValue::from_str(v).unwrap(),
                );
            }
            sane_retry_after(&mut h, now);
            h.get(hyper::header::RETRY_AFTER)
                .map(|v| v.to_str().unwrap().to_string())
        };
        let week = Some("604800".to_string());
        assert_eq!(run(&["3600"]), Some("3600".into()));
        assert_eq!(run(&["604800"]), week);
        assert_eq!(run(&["604801"]), week);
        assert_eq!(run(&["18446744073709551615"]), week);
        assert_eq!(run(&["99999999999999999999999999"]), week);
        // Dates: near ones kept, far ones cut to a week, past ones kept (instant-acme
        // treats them as now).
        assert_eq!(
            run(&["Wed, 15 Nov 2023 00:00:00 GMT"]),
            Some("Wed, 15 Nov 2023 00:00:00 GMT".into())
        );
        assert_eq!(run(&["Fri, 31 Dec 9999 23:59:59 GMT"]), week);
        assert_eq!(
            run(&["Thu, 01 Jan 1970 00:00:00 GMT"]),
            Some("Thu, 01 Jan 1970 00:00:00 GMT".into())
        );
        // Not a value of RFC 9110 §10.2.3, or two of them: removed.
        for v in ["", "-1", "+5", "1.5", "soon", "5 s"] {
            assert_eq!(run(&[v]), None, "{v:?}");
        }
        assert_eq!(run(&["5", "6"]), None);
        assert_eq!(run(&[]), None);
    }

    fn facts(not_before: u64, not_after: u64) -> CertFacts {
        CertFacts {
            names: vec!["a.example".into()],
            serial: "01".into(),
            issuer: String::new(),
            not_before,
            not_after,
        }
    }

    #[test]
    fn an_ari_time_is_bounded_by_the_age_and_the_expiry() {
        let day = 86_400;
        // A 90-day certificate issued by this task at 1000: a window already past asks for
        // now, held until an hour after the issuance (a revoked one is replaced soon, a
        // server's mistake cannot start order after order), and that is said.
        let f = facts(1000, 1000 + 90 * day);
        assert_eq!(ari_due(0, 1010, &f, Some(1000)), (1000 + 3600, true));
        // Not issued by this task (found at start, or an operator's): no floor.
        assert_eq!(ari_due(0, 1010, &f, None), (1010, false));
        // Past the floor, the pick as it is.
        assert_eq!(
            ari_due(1000 + 60 * day, 1010, &f, Some(1000)),
            (1000 + 60 * day, false)
        );
        // A window sliding past the expiry: at most 9 days (a tenth) before it.
        assert_eq!(
            ari_due(1000 + 95 * day, 1010, &f, None),
            (1000 + 81 * day, false)
        );
        // A short certificate: the floor is an hour, the expiry bound an hour too.
        let f = facts(0, 10 * 3600);
        assert_eq!(ari_due(0, 10, &f, Some(0)), (3600, true));
        assert_eq!(ari_due(10 * 3600, 10, &f, Some(0)), (9 * 3600, false));
        // Shorter than three hours (pebble's 60 s): a third of the lifetime each side.
        let f = facts(100, 160);
        assert_eq!(ari_due(130, 110, &f, Some(100)), (130, false));
        assert_eq!(ari_due(100, 110, &f, Some(100)), (120, true));
        assert_eq!(ari_due(155, 110, &f, None), (140, false));
        // Never in the past.
        assert_eq!(ari_due(100, 150, &f, Some(100)), (150, false));
    }

    #[test]
    fn renewal_information_errors_back_off() {
        let h = 3600;
        let waits: Vec<u64> = (1..=8).map(|n| ari_retry(n, None)).collect();
        assert_eq!(
            waits,
            [h, 2 * h, 4 * h, 8 * h, 16 * h, 24 * h, 24 * h, 24 * h]
        );
        assert_eq!(ari_retry(u32::MAX, None), 24 * h);
        // A 429's or 503's Retry-After, held between a minute and a day.
        assert_eq!(ari_retry(1, Some(300)), 300);
        assert_eq!(ari_retry(5, Some(300)), 300);
        assert_eq!(ari_retry(1, Some(0)), 60);
        assert_eq!(ari_retry(1, Some(u64::MAX)), 24 * h);
    }

    #[test]
    fn only_a_refusal_of_replaces_orders_without_it() {
        let p = |kind: &str, status: u16, detail: &str| {
            instant_acme::Error::Api(
                serde_json::from_value(
                    serde_json::json!({"type": kind, "detail": detail, "status": status}),
                )
                .unwrap(),
            )
        };
        // RFC 9773 §5.
        assert!(refused_replaces(&p(
            "urn:ietf:params:acme:error:alreadyReplaced",
            409,
            "certificate with serial 01 already has a replacement order"
        )));
        // pebble 2.10, a certificate it does not know.
        assert!(refused_replaces(&p(
            "urn:ietf:params:acme:error:serverInternal",
            500,
            "could not find an order for the given certificate: not found"
        )));
        // Not found (Boulder).
        assert!(refused_replaces(&p(
            "urn:ietf:params:acme:error:malformed",
            404,
            "request included `replaces` field, but no current certificate with serial \"01\" exists"
        )));
        // Anything else is a failure like any other.
        for e in [
            p("urn:ietf:params:acme:error:rateLimited", 429, "slow down"),
            p("urn:ietf:params:acme:error:invalidProfile", 400, "no"),
            p("urn:ietf:params:acme:error:serverInternal", 500, "oops"),
            instant_acme::Error::Str("network"),
            instant_acme::Error::Other("replaces field mismatch: expected a, found b".into()),
        ] {
            assert!(!refused_replaces(&e), "{e}");
        }
    }

    /// An AcmeHttp for `addr` (a test server) trusting a throw-away certificate: what
    /// matters is what happens before any TLS.
    fn client_for_tests(timeout: Duration) -> (AcmeHttp, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, cert.pem()).unwrap();
        let mut c = AcmeHttp::new(Some(&ca)).unwrap();
        c.timeout = timeout;
        (c, dir)
    }

    #[tokio::test]
    async fn a_stalled_acme_server_times_out() {
        use instant_acme::HttpClient as _;
        // Accepts, and says nothing (not even the TLS handshake).
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut conns = Vec::new();
            while let Ok((c, _)) = l.accept().await {
                conns.push(c);
            }
        });
        let (c, _dir) = client_for_tests(Duration::from_secs(1));
        let req = hyper::Request::get(format!("https://{addr}/dir"))
            .body(instant_acme::BodyWrapper::default())
            .unwrap();
        let t = std::time::Instant::now();
        let e = c.request(req).await.err().expect("no answer is an error");
        assert!(e.to_string().contains("did not answer in 1 s"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
        held.abort();
    }

    fn settings_of(text: &str, base: &Path) -> Result<Option<AcmeSettings>, String> {
        let cfg = skua_config::parse_str(text, "t.conf").map_err(|e| e.to_string())?;
        AcmeSettings::from_config(&cfg, Some(base))
    }

    /// The files ACME writes are in the configuration or the data directory, and a clause
    /// without the TLS service files is refused (checked at start, at reloads and on a sync
    /// source's version alike: `Reconfigure::prepare`).
    #[test]
    fn acme_writes_only_in_the_configuration_and_data_directories() {
        let d = tempfile::tempdir().unwrap();
        let (conf, data) = (d.path().join("conf"), d.path().join("data"));
        let text = |server: &str, acme: &str| {
            format!(
                "server:\n{server}api:\n  state-file: \"{}\"\nacme:\n  directory: https://acme.example/dir\n  name: dns.example\n{acme}",
                data.join("state.conf").display()
            )
        };
        let both = "  tls-service-pem: tls/cert.pem\n  tls-service-key: tls/key.pem\n";
        let s = settings_of(&text(both, ""), &conf).unwrap().unwrap();
        assert_eq!(s.account_file, conf.join("tls/acme-account.json"));
        let in_data = format!("  account-file: \"{}\"\n", data.join("a.json").display());
        assert!(settings_of(&text(both, &in_data), &conf).is_ok());
        for (server, acme, want) in [
            (
                both,
                "  account-file: /etc/passwd\n",
                "t.conf:9: acme: account-file: /etc/passwd is outside",
            ),
            (both, "  account-file: ../x.json\n", "account-file:"),
            (both, "  account-file: tls/../../x.json\n", "account-file:"),
            (
                "  tls-service-pem: tls/cert.pem\n  tls-service-key: /etc/ssl/x.key\n",
                "",
                "t.conf:3: tls-service-key: /etc/ssl/x.key is outside",
            ),
            ("", "", "set both"),
            ("  tls-service-pem: tls/cert.pem\n", "", "set both"),
        ] {
            let e = settings_of(&text(server, acme), &conf)
                .map(|_| ())
                .unwrap_err();
            assert!(e.contains(want), "{server:?} {acme:?}: {e}");
        }
    }

    fn settings_with_account(account_file: PathBuf) -> AcmeSettings {
        AcmeSettings {
            // Nothing listens there: an attempt to reach the server fails at once.
            directory: "https://127.0.0.1:9/dir".into(),
            contacts: vec![],
            names: vec!["dns.example".into()],
            challenge: skua_config::AcmeChallenge::Http01,
            http_interface: SocketAddr::from(([127, 0, 0, 1], 0)),
            ca_bundle: None,
            cert: account_file.with_file_name("cert.pem"),
            key: account_file.with_file_name("key.pem"),
            account_file,
            profile: None,
        }
    }

    /// An account file as skuad writes it (instant-acme's credentials) for `directory`.
    fn account_json(directory: &str) -> String {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        serde_json::json!({
            "id": "https://acme.example/acct/1",
            "key_pkcs8": data_encoding::BASE64URL_NOPAD.encode(&key.serialize_der()),
            "directory": directory,
        })
        .to_string()
    }

    /// Issue 28, finding 1: the account code renamed whatever was at `account-file:` to
    /// `NAME.previous` before it reached the ACME server. A file it did not write is now
    /// an error naming it, and stays as it was; so does a foreign file at `.previous`.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_file_acme_did_not_write_is_never_renamed_or_replaced() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim.conf");
        std::fs::write(&victim, "precious\n").unwrap();
        let e = account(&settings_with_account(victim.clone()), None)
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(e.msg.contains("is not an ACME account file"), "{}", e.msg);
        assert!(e.msg.contains(&victim.display().to_string()), "{}", e.msg);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(!d.path().join("victim.conf.previous").exists());
        // JSON that is not an account (no key) is not one either.
        let json = d.path().join("other.json");
        std::fs::write(&json, "{\"directory\": \"https://other.example/dir\"}").unwrap();
        let e = account(&settings_with_account(json.clone()), None)
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(e.msg.contains("is not an ACME account file"), "{}", e.msg);
        assert!(!d.path().join("other.json.previous").exists());
        // Not a regular file: refused without reading it (a FIFO would block).
        let e = account(&settings_with_account(d.path().to_path_buf()), None)
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(e.msg.contains("is not an ACME account file"), "{}", e.msg);
        // skuad's own account for another directory is kept as .previous, but not over
        // a file skuad did not write.
        let acct = d.path().join("acct.json");
        let ours = account_json("https://other.example/dir");
        std::fs::write(&acct, &ours).unwrap();
        std::fs::write(d.path().join("acct.json.previous"), "precious\n").unwrap();
        let e = account(&settings_with_account(acct.clone()), None)
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.msg
                .contains("acct.json.previous is not an ACME account file"),
            "{}",
            e.msg
        );
        assert_eq!(std::fs::read_to_string(&acct).unwrap(), ours);
        assert_eq!(
            std::fs::read_to_string(d.path().join("acct.json.previous")).unwrap(),
            "precious\n"
        );
        // Without that file it is moved aside (then the unreachable server fails the
        // attempt, and no account file is written).
        std::fs::remove_file(d.path().join("acct.json.previous")).unwrap();
        assert!(
            account(&settings_with_account(acct.clone()), None)
                .await
                .is_err()
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("acct.json.previous")).unwrap(),
            ours
        );
        assert!(!acct.exists());
    }

    /// The certificate and key replace only PEM files of their kind.
    #[test]
    fn a_certificate_or_key_replaces_only_its_own_kind() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        assert!(replaceable(&p, Pem::Key).is_ok(), "nothing there");
        std::fs::write(&p, "precious\n").unwrap();
        for kind in [Pem::Key, Pem::Certificates] {
            let e = replaceable(&p, kind).unwrap_err();
            assert!(e.contains("is not a PEM"), "{e}");
        }
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        std::fs::write(&p, key.serialize_pem()).unwrap();
        assert!(replaceable(&p, Pem::Key).is_ok());
        assert!(replaceable(&p, Pem::Certificates).is_err());
        let cert = rcgen::CertificateParams::new(vec!["dns.example".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(&p, cert.pem()).unwrap();
        assert!(replaceable(&p, Pem::Certificates).is_ok());
    }

    /// Issue 28, finding 11(a): the CSR carries the first name as its subject's CN (a CA
    /// that copies the subject issues a certificate kdig accepts) and every name as a SAN.
    #[test]
    fn the_request_names_the_first_name_in_its_subject() {
        use x509_parser::prelude::*;
        let cn_of = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            let (der, key_pem) = csr(&names).unwrap();
            assert!(key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
            let (_, req) = X509CertificationRequest::from_der(&der).unwrap();
            let info = &req.certification_request_info;
            let cn: Vec<String> = info
                .subject
                .iter_common_name()
                .map(|c| c.as_str().unwrap().to_string())
                .collect();
            let mut sans = Vec::new();
            for ext in req.requested_extensions().into_iter().flatten() {
                if let ParsedExtension::SubjectAlternativeName(san) = ext {
                    for g in &san.general_names {
                        if let GeneralName::DNSName(n) = g {
                            sans.push(n.to_string());
                        }
                    }
                }
            }
            assert_eq!(sans, names);
            cn
        };
        assert_eq!(
            cn_of(&["dns.example.net", "doh.example.net"]),
            ["dns.example.net"]
        );
        // A name longer than a CN may be (64 octets) is a SAN only; the next that fits is CN.
        let long = format!("{}.example.net", "a".repeat(60));
        assert_eq!(cn_of(&[&long, "dns.example.net"]), ["dns.example.net"]);
        assert!(cn_of(&[&long]).is_empty());
    }
}
