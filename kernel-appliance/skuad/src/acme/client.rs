//! The HTTP client every ACME request goes through (bodies bounded, requests timed,
//! Retry-After made safe) and the account it is made with (`account-file:`).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use instant_acme::{Account, AccountCredentials, NewAccount};

use super::AcmeSettings;
use super::failure::{Failure, classify};
use super::files::temp_beside;

/// The most an ACME response body may hold: directories, orders and problem documents are
/// a few KiB, a certificate chain a few dozen; more is refused (a hostile or broken server
/// must not fill the memory).
pub(super) const MAX_BODY: usize = 1 << 20;

/// The most one ACME request may take, connection to the last byte of the body.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest Retry-After kept (RFC 9110 §10.2.3): instant-acme 0.8.5 adds the seconds to
/// the clock unchecked (a panic, an abort in release, past the representable time), so a
/// longer delay is cut to this before it sees it.
pub(super) const MAX_RETRY_AFTER: u64 = 7 * 86_400;

/// The HTTP client instant-acme is given for every ACME request: hyper with the roots the
/// configuration says, each response's body bounded ([`MAX_BODY`]), each request timed
/// ([`REQUEST_TIMEOUT`]) and its Retry-After made safe ([`sane_retry_after`]).
pub(super) struct AcmeHttp {
    pub(super) client: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        instant_acme::BodyWrapper<hyper::body::Bytes>,
    >,
    pub(super) timeout: Duration,
    /// Where the Retry-After (seconds) of a 429 or 503 answer goes: instant-acme turns
    /// those answers into a problem document and drops the header.
    pub(super) throttle: Option<Throttle>,
}

/// The Retry-After of the last 429 or 503 answer, seconds.
pub(super) type Throttle = Arc<Mutex<Option<u64>>>;

impl AcmeHttp {
    /// A client trusting the certificates in `ca_bundle`, or (none) the platform's roots, as
    /// instant-acme's own builders do.
    pub(super) fn new(ca_bundle: Option<&Path>) -> Result<Self, String> {
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
pub(super) async fn guard_response<B>(
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
pub(super) fn retry_after_secs(h: &hyper::HeaderMap, now: SystemTime) -> Option<u64> {
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
pub(super) fn sane_retry_after(h: &mut hyper::HeaderMap, now: SystemTime) {
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
pub(super) const MAX_ACCOUNT_FILE: u64 = 64 << 10;

/// What `path` holds: nothing (`None`), or an ACME account file as skuad writes it
/// (instant-acme's credentials: an account ID and a PKCS#8 key) and the directory URL it is
/// for. Anything else is an error naming the path: a file skuad did not write is never
/// renamed or replaced, whatever a configuration line says.
pub(super) fn own_account(
    path: &Path,
) -> Result<Option<(AccountCredentials, Option<String>)>, String> {
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
pub(super) async fn account(
    s: &AcmeSettings,
    throttle: Option<Throttle>,
) -> Result<Account, Failure> {
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
