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
//! Renewal: at two thirds of the certificate's lifetime (ACME renewal information, RFC
//! 9773, is not asked yet); a failed attempt is retried after 1, 2, 4 ... minutes (at most
//! 6 hours, with up to a tenth of jitter), while the certificate in force keeps serving. Every
//! issuance and failure is audited (`tls-issued`, `tls-failed`), counted, and shown in
//! `GET /tls` and `skuactl tls status`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, OrderStatus, RetryPolicy,
};

use crate::base::log;
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
        let key_path = at(&key.value);
        let account_file = match &a.account_file {
            Some(f) => at(&f.value),
            None => key_path
                .parent()
                .unwrap_or(Path::new("."))
                .join("acme-account.json"),
        };
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
        }))
    }
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
    /// Why (`no certificate`, `two thirds of its lifetime`, `renewal information`,
    /// `retry after a failure`).
    pub next_reason: String,
    /// Certificates issued since start.
    pub issued: u64,
    /// Failed attempts since start.
    pub failures: u64,
    /// The last failure's reason, until an attempt succeeds.
    pub last_error: Option<String>,
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

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// (not-before, not-after, names) of the first certificate in the PEM file `path`.
fn read_cert(path: &Path) -> Option<(u64, u64, Vec<String>)> {
    use rustls_pki_types::pem::PemObject;
    let der = rustls_pki_types::CertificateDer::pem_file_iter(path)
        .ok()?
        .next()?
        .ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    let v = cert.validity();
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|g| match g {
                    x509_parser::extensions::GeneralName::DNSName(n) => {
                        Some(n.to_ascii_lowercase())
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some((
        v.not_before.timestamp().max(0) as u64,
        v.not_after.timestamp().max(0) as u64,
        names,
    ))
}

/// Runs the ACME task: issues when there is no certificate for the names, renews when
/// due, until the process ends.
pub async fn run(ctl: Arc<Control>, acme: Arc<Acme>, s: AcmeSettings) {
    let mut failures: u32 = 0;
    let mut reload_pending = false;
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
    loop {
        let now = unix(SystemTime::now());
        let current = read_cert(&s.cert);
        let (due, reason) = match &current {
            Some((nb, na, names)) if s.names.iter().all(|n| names.contains(n)) => {
                let at = nb + (na.saturating_sub(*nb)) * 2 / 3;
                (at, "two thirds of its lifetime")
            }
            Some(_) => (now, "the names changed"),
            None => (now, "no certificate"),
        };
        let (due, reason) = if failures > 0 {
            (now + backoff(failures), "retry after a failure")
        } else {
            (due, reason)
        };
        {
            let mut st = acme.status();
            if let Some((nb, na, names)) = &current {
                st.not_before = Some(*nb);
                st.not_after = Some(*na);
                st.names = names.clone();
            }
            st.next_attempt = Some(due);
            st.next_reason = reason.into();
        }
        if due > now {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(due - now)) => {}
                _ = acme.renew_now.notified() => {}
            }
        }
        // A certificate written whose reload failed is put in force again, not ordered
        // again (a new order would count against the CA's limits for nothing).
        let r = if reload_pending {
            put_in_force(&ctl).await
        } else {
            issue(&ctl, &acme, &s).await
        };
        reload_pending = r.as_ref().is_err_and(|e| e.starts_with(RELOAD_FAILED));
        match r {
            Ok(()) => {
                failures = 0;
                let mut st = acme.status();
                st.issued += 1;
                st.last_error = None;
                st.last_issued = Some(unix(SystemTime::now()));
            }
            Err(e) => {
                // The reason quotes the ACME server's problem document: one bounded line
                // before it reaches the log, the audit log and GET /tls.
                let e = crate::control::ha::printable_max(&e, 512);
                failures = failures.saturating_add(1);
                log::warn(format_args!(
                    "acme: {e} (the certificate in force keeps serving; next try in {} s)",
                    backoff(failures)
                ));
                tokio::task::block_in_place(|| {
                    ctl.record(
                        skua_audit::kind::TLS_FAILED,
                        "acme",
                        None,
                        serde_json::json!({"names": s.names, "error": e}),
                    )
                });
                let mut st = acme.status();
                st.failures += 1;
                st.last_error = Some(e);
            }
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
async fn issue(ctl: &Arc<Control>, acme: &Arc<Acme>, s: &AcmeSettings) -> Result<(), String> {
    let account = account(s).await?;
    let ids: Vec<Identifier> = s.names.iter().map(|n| Identifier::Dns(n.clone())).collect();
    let mut order = account
        .new_order(&NewOrder::new(&ids))
        .await
        .map_err(|e| format!("new order: {e}"))?;
    // HTTP-01: the tokens are served while the order is validated.
    let server = if s.challenge == skua_config::AcmeChallenge::Http01 {
        Some(http_server(s.http_interface, acme.clone()).await?)
    } else {
        None
    };
    let mut added: Vec<String> = Vec::new();
    let mut alpn_names: Vec<String> = Vec::new();
    let result = async {
        let mut auths = order.authorizations();
        while let Some(a) = auths.next().await {
            let mut a = a.map_err(|e| format!("authorization: {e}"))?;
            match a.status {
                AuthorizationStatus::Pending => {}
                AuthorizationStatus::Valid => continue,
                other => return Err(format!("authorization {other:?}")),
            }
            let kind = match s.challenge {
                skua_config::AcmeChallenge::Dns01 => ChallengeType::Dns01,
                skua_config::AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
                skua_config::AcmeChallenge::Http01 => ChallengeType::Http01,
            };
            let mut ch = a
                .challenge(kind.clone())
                .ok_or_else(|| format!("the server offers no {kind:?} challenge"))?;
            let ka = ch.key_authorization();
            match kind {
                ChallengeType::Dns01 => {
                    let name = ours(&ch.identifier().to_string(), &s.names)?;
                    let rr = format!("_acme-challenge.{name}. 60 IN TXT \"{}\"", ka.dns_value());
                    ctl.write(vec![Change::AddRecord { rr: rr.clone() }], "acme", None)
                        .await
                        .map_err(|e| format!("dns-01 record for {name}: {}", e.message()))?;
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
                .map_err(|e| format!("challenge: {e}"))?;
        }
        let status = order
            .poll_ready(&RetryPolicy::default())
            .await
            .map_err(|e| format!("validation: {e}"))?;
        if status != OrderStatus::Ready {
            return Err(format!("the order is {status:?}, not ready"));
        }
        let key_pem = order
            .finalize()
            .await
            .map_err(|e| format!("finalize: {e}"))?;
        let cert_pem = order
            .poll_certificate(&RetryPolicy::default())
            .await
            .map_err(|e| format!("certificate: {e}"))?;
        Ok((cert_pem, key_pem))
    }
    .await;
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
    let (nb, na, _) = read_cert(&s.cert).ok_or("the certificate received does not parse")?;
    tokio::task::block_in_place(|| {
        ctl.record(
            skua_audit::kind::TLS_ISSUED,
            "acme",
            None,
            serde_json::json!({"names": s.names, "not_before": nb, "not_after": na}),
        )
    });
    put_in_force(ctl).await?;
    log::info(format_args!(
        "acme: certificate for {} issued, valid until {na} (Unix), in force",
        s.names.join(", ")
    ));
    Ok(())
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

/// The account: the one in `account-file:` when it is for this `directory:`, or a new one
/// (written there, mode 0600; an account file for another directory is kept beside it as
/// `.previous`). An account file that cannot be used now (the server unreachable) is an
/// error, never a reason to make another account.
async fn account(s: &AcmeSettings) -> Result<Account, String> {
    let builder = || match &s.ca_bundle {
        Some(ca) => Account::builder_with_root(ca).map_err(|e| format!("ca-bundle: {e}")),
        None => Account::builder().map_err(|e| format!("acme client: {e}")),
    };
    if let Ok(text) = std::fs::read_to_string(&s.account_file) {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if v["directory"].as_str() == Some(s.directory.as_str()) {
            let creds: AccountCredentials = serde_json::from_value(v)
                .map_err(|e| format!("{}: {e}", s.account_file.display()))?;
            return builder()?
                .from_credentials(creds)
                .await
                .map_err(|e| format!("account: {e}"));
        }
        // Another directory (or not an account file): kept, and a new account made.
        let mut prev = s.account_file.clone().into_os_string();
        prev.push(".previous");
        std::fs::rename(&s.account_file, &prev)
            .map_err(|e| format!("{}: {e}", s.account_file.display()))?;
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
        .map_err(|e| format!("account: {e}"))?;
    let text = serde_json::to_string(&creds).map_err(|e| e.to_string())?;
    write_private(&s.account_file, text.as_bytes())?;
    Ok(a)
}

/// Puts the certificate and key where they go: both written beside their places first,
/// checked as a pair (the certificate parses, the key is its key), then renamed, key then
/// certificate (a failure before the renames leaves the pair in force as it was).
fn install(s: &AcmeSettings, cert_pem: &str, key_pem: &str) -> Result<(), String> {
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

/// Writes `data` to `path` atomically (a temporary beside it, mode 0600, renamed).
fn write_private(path: &Path, data: &[u8]) -> Result<(), String> {
    temp_beside(path, data)?
        .persist(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
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
