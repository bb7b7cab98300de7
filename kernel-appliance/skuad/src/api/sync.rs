//! Sync over the API (`sync:`; docs/ha.md, "Configuration and API data"): the source's
//! `GET /sync` and the follower that asks it.
//!
//! **Source.** `GET /sync?known=DIGEST&wait=S` answers at once when the node offers another
//! version than `known` (with the bundle: the shared configuration text and the API data,
//! recorded as `sync-out` once per version and follower), else holds the request until the
//! offer changes or `wait` seconds (at most 25, under the API's stall limit) pass and
//! answers without a bundle. Every answer says whether this node holds an HA lease (it is
//! the master) and its name.
//!
//! **Follower.** One task asks its sources in order (`sync: from:`), with the token of
//! `token-file:`, over HTTP or HTTPS (rustls, the authorities of `tls-ca:`). With `ha:`
//! addresses it follows only a source that holds the lease, and only while it holds none
//! itself: the direction of the data follows the VIP, so the same configuration on both
//! nodes of a pair works, and after a failover the new master is followed by the old one.
//! Without `ha:` it follows the first source that answers. A bundle is handed to the
//! control core ([`Control::sync_apply`]); one that does not load is recorded once
//! (`sync-in-failed`) and not asked for again until the source changes. At start, skuad
//! asks once before its API opens ([`catch_up`]), so a node coming back takes the master's
//! data before its agent can take a lease.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt as _;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};

use super::{ApiError, Ctl, Q, Who, who};
use crate::base::log;
use crate::control::sync::{Bundle, MAX_BUNDLE, SyncSettings};
use crate::control::{Control, CtlError};

/// The longest a source holds a request (below the API's 30 s stall limit).
const MAX_WAIT: Duration = Duration::from_secs(25);
/// Time to connect (and finish TLS) to a source.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest pause between rounds while every source fails.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Budget of the first round at start.
const CATCH_UP: Duration = Duration::from_secs(3);

/// `GET /sync` query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SyncQuery {
    #[serde(default)]
    known: Option<String>,
    #[serde(default)]
    wait: Option<u64>,
}

/// `GET /sync` answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncAnswer {
    /// The source's name (its `identity:` or host name).
    pub node: String,
    /// Whether the source holds an HA lease now (it is the master).
    pub leased: bool,
    /// The version it offers.
    pub digest: String,
    /// The version, when it is not `known`.
    pub bundle: Option<Bundle>,
}

fn node_name(ctl: &Control) -> String {
    ctl.view().effective["server"]["identity"]
        .as_str()
        .map_or_else(crate::control::load::hostname, str::to_owned)
}

pub(super) async fn serve(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    Q(q): Q<SyncQuery>,
) -> Result<Response, ApiError> {
    let wait = Duration::from_secs(q.wait.unwrap_or(0)).min(MAX_WAIT);
    let mut rx = ctl.sync.subscribe();
    rx.mark_unchanged();
    let deadline = tokio::time::Instant::now() + wait;
    let mut cur = ctl.sync.current();
    while q.known.as_deref() == Some(cur.digest.as_str()) && !wait.is_zero() {
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => cur = ctl.sync.current(),
            _ => break,
        }
    }
    let changed = q.known.as_deref() != Some(cur.digest.as_str());
    let bundle = if changed {
        let (actor, src) = who(&caller);
        let (actor, b) = (actor.to_owned(), cur.clone());
        let c = ctl.ctl.clone();
        // Serialized once per version, whatever the number of followers.
        tokio::task::spawn_blocking(move || {
            c.sync_served(&actor, src, &b);
            c.sync.serialized(&b)
        })
        .await
        .map_err(|e| ApiError::from(crate::control::CtlError::Internal(e.to_string())))?
    } else {
        Arc::from("null")
    };
    let head = serde_json::json!({
        "node": node_name(&ctl),
        "leased": ctl.holds_lease(),
        "digest": cur.digest,
    })
    .to_string();
    // `{"node":…,"leased":…,"digest":…` + `,"bundle":…}`: the bundle's JSON as cached.
    let body = format!("{},\"bundle\":{bundle}}}", &head[..head.len() - 1]);
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// Asks each source once, each request bounded by [`CATCH_UP`] (taking a version is not:
/// it completes): called at start, before the API opens. Returns the follower, for
/// [`follow`].
pub async fn catch_up(ctl: &Arc<Control>) -> Follower {
    let mut f = Follower::new(ctl.clone());
    if ctl.sync.settings().is_none() {
        return f;
    }
    let what = match f.round(Some(CATCH_UP)).await {
        Round::Followed(name, true) => format!("took the version of {name}"),
        Round::Followed(name, false) => format!("up to date with {name}"),
        Round::Master => "master (holds a lease): follows nobody".into(),
        Round::Nobody => {
            log::warn(format_args!(
                "sync: no source to follow at start (see sync.last_error); serving what this node has"
            ));
            "no source to follow: served what it had".into()
        }
    };
    ctl.sync.note_start(&what);
    f
}

/// The follower's task: runs until the process stops.
pub async fn follow(mut f: Follower) {
    loop {
        if f.ctl.sync.settings().is_none() {
            f.ctl.sync.set_following(None);
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let t0 = tokio::time::Instant::now();
        match f.round(None).await {
            Round::Master => tokio::time::sleep(Duration::from_millis(200)).await,
            Round::Followed(_, took) => {
                // A source holds an unchanged request for `wait:`; one that answers at
                // once without a version (not a skuad, a proxy) is not asked in a loop.
                let wait = f.ctl.sync.settings().as_ref().as_ref().map(|s| s.wait);
                if !took && wait.is_some_and(|w| t0.elapsed() + Duration::from_secs(1) < w) {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            Round::Nobody => {
                // Nobody to follow now: ask again in a second, or, while every source
                // fails (down, refusing the token, an unverified certificate, a version
                // this node cannot store), back off to 30 s.
                let backoff = Duration::from_secs(1 << f.failures.min(5)).min(MAX_BACKOFF);
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

/// What a round found.
enum Round {
    /// This node holds a lease: it follows nobody.
    Master,
    /// It follows this source; `true` when it took a version from it.
    Followed(String, bool),
    /// No source to follow (none answered, none holds the lease, or a version could not
    /// be stored here).
    Nobody,
}

/// What a follower last had from a source.
struct Seen {
    /// The source's digest, taken (or refused as invalid).
    source: String,
    /// This node's own digest right after (a change since means this node diverged: its
    /// source's version is asked for again).
    local: String,
    /// Local reloads then (one since may make a refused version load).
    reloads: u64,
}

/// The follower's state, from the catch-up at start to the stop.
pub struct Follower {
    ctl: Arc<Control>,
    /// Per source: what this node last had from it.
    seen: HashMap<String, Seen>,
    /// The source followed at the last round (asked with waiting).
    current: Option<String>,
    tls: Option<(Vec<u8>, Arc<tokio_rustls::rustls::ClientConfig>)>,
    /// Last error logged, to log a repeated one once a minute only.
    logged: Option<(String, std::time::Instant)>,
    /// Rounds in a row in which every source failed.
    failures: u32,
}

impl Follower {
    fn new(ctl: Arc<Control>) -> Self {
        Follower {
            ctl,
            seen: HashMap::new(),
            current: None,
            tls: None,
            logged: None,
            failures: 0,
        }
    }

    fn log_error(&mut self, e: &str) {
        // The reason may quote what the source sent (a JSON error): one line, bounded.
        let e = &crate::control::ha::printable_max(e, 1000);
        self.ctl.sync.note_error(e);
        let again = self
            .logged
            .as_ref()
            .is_none_or(|(m, at)| m != e || at.elapsed() > Duration::from_secs(60));
        if again {
            log::warn(format_args!("sync: {e}"));
            self.logged = Some((e.to_owned(), std::time::Instant::now()));
        }
    }

    fn client_tls(
        &mut self,
        s: &SyncSettings,
    ) -> Result<Option<Arc<tokio_rustls::rustls::ClientConfig>>, String> {
        let Some(pem) = &s.tls_ca else {
            return Ok(None);
        };
        if let Some((p, c)) = &self.tls
            && p == pem
        {
            return Ok(Some(c.clone()));
        }
        use rustls_pki_types::CertificateDer;
        use rustls_pki_types::pem::PemObject;
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(pem) {
            let c = c.map_err(|e| format!("tls-ca: {e}"))?;
            roots.add(c).map_err(|e| format!("tls-ca: {e}"))?;
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let cfg = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("tls: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let cfg = Arc::new(cfg);
        self.tls = Some((pem.clone(), cfg.clone()));
        Ok(Some(cfg))
    }

    /// The digest to send as `known` to `name`: what this node last had from it, unless
    /// this node changed since (then none: the source's version is asked for again).
    fn known(&self, name: &str) -> String {
        let local = self.ctl.sync.current().digest.clone();
        match self.seen.get(name) {
            Some(s) if s.local == local && s.reloads == self.ctl.sync.local_reloads() => {
                s.source.clone()
            }
            Some(_) => String::new(),
            // First contact: this node's own version (the same when it already serves it).
            None => local,
        }
    }

    fn forget_current(&mut self, name: &str) {
        if self.current.as_deref() == Some(name) {
            self.current = None;
            self.ctl.sync.set_following(None);
        }
    }

    /// One round: the sources in order (the one followed last first) until one is
    /// followed. `budget`: a bound on each request, and no waiting (the catch-up).
    async fn round(&mut self, budget: Option<Duration>) -> Round {
        let Some(s) = (*self.ctl.sync.settings()).clone() else {
            return Round::Nobody;
        };
        if self.ctl.holds_lease() {
            // The master follows nobody.
            self.ctl.sync.set_following(None);
            self.current = None;
            return Round::Master;
        }
        let tls = match self.client_tls(&s) {
            Ok(t) => t,
            Err(e) => {
                self.log_error(&e);
                return Round::Nobody;
            }
        };
        let mut order: Vec<&skua_config::SyncUrl> = s.from.iter().collect();
        if let Some(c) = &self.current
            && let Some(i) = order.iter().position(|u| u.to_string() == *c)
        {
            let u = order.remove(i);
            order.insert(0, u);
        }
        let with_ha = self.ctl.has_leases();
        let sources = order.len();
        let mut failed = 0;
        for url in order {
            let name = url.to_string();
            // Wait for a change only on the source followed last (never at start).
            let wait = if budget.is_none() && self.current.as_deref() == Some(name.as_str()) {
                s.wait
            } else {
                Duration::ZERO
            };
            let known = self.known(&name);
            let limit = budget.unwrap_or(wait + Duration::from_secs(5));
            let answer = match ask(url, &s.token, tls.clone(), &known, wait, limit).await {
                Ok(a) => a,
                Err(e) => {
                    failed += 1;
                    self.log_error(&format!("{name}: {e}"));
                    self.forget_current(&name);
                    continue;
                }
            };
            if with_ha && !answer.leased {
                // Not the master: not followed (the data flow from the VIP's holder).
                self.forget_current(&name);
                continue;
            }
            if self.ctl.holds_lease() {
                // Became master while asking.
                return Round::Master;
            }
            self.failures = 0;
            self.current = Some(name.clone());
            self.ctl.sync.set_following(Some(&name));
            let Some(b) = answer.bundle else {
                return Round::Followed(name, false);
            };
            if !b.digest_ok() {
                self.log_error(&format!(
                    "{name}: the answer does not match its digest; ignored"
                ));
                self.failures = self.failures.saturating_add(1);
                return Round::Nobody;
            }
            let reloads = self.ctl.sync.local_reloads();
            let r = self.ctl.sync_apply(&b, &name, &answer.node).await;
            let took = matches!(r, Ok(Some(_)));
            if let Err(e) = &r {
                let c = self.ctl.clone();
                let (n, d, m) = (name.clone(), b.digest.clone(), e.message().to_owned());
                let _ = tokio::task::spawn_blocking(move || c.sync_failed(&n, &d, &m)).await;
                if !matches!(e, CtlError::Invalid(_) | CtlError::BadRequest(_)) {
                    // This node could not store or record it (disk, audit log): asked
                    // again, with back-off, rather than marked as seen.
                    self.failures = self.failures.saturating_add(1);
                    return Round::Nobody;
                }
            }
            self.seen.insert(
                name.clone(),
                Seen {
                    source: b.digest,
                    local: self.ctl.sync.current().digest.clone(),
                    reloads,
                },
            );
            return Round::Followed(name, took);
        }
        if failed == sources {
            self.failures = self.failures.saturating_add(1);
        }
        Round::Nobody
    }
}

/// One `GET /sync` to `url`.
async fn ask(
    url: &skua_config::SyncUrl,
    token: &str,
    tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    known: &str,
    wait: Duration,
    total: Duration,
) -> Result<SyncAnswer, String> {
    let path = format!("/sync?known={known}&wait={}", wait.as_secs());
    let connect = async {
        let tcp = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        Ok::<_, String>(tcp)
    };
    let connect_limit = CONNECT_TIMEOUT.min(total);
    let tcp = tokio::time::timeout(connect_limit, connect)
        .await
        .map_err(|_| format!("no connection within {connect_limit:?}"))??;
    let host = if url.host.contains(':') {
        format!("[{}]", url.host)
    } else {
        url.host.clone()
    };
    let fut = async {
        match tls {
            Some(cfg) => {
                let name = rustls_pki_types::ServerName::try_from(url.host.clone())
                    .map_err(|e| format!("tls name {}: {e}", url.host))?;
                let io = tokio::time::timeout(
                    CONNECT_TIMEOUT,
                    tokio_rustls::TlsConnector::from(cfg).connect(name, tcp),
                )
                .await
                .map_err(|_| "TLS handshake timed out".to_string())?
                .map_err(|e| format!("TLS: {e}"))?;
                request(io, &host, url.port, &path, token).await
            }
            None => request(tcp, &host, url.port, &path, token).await,
        }
    };
    tokio::time::timeout(total, fut)
        .await
        .map_err(|_| format!("no answer within {total:?}"))?
}

async fn request<IO>(
    io: IO,
    host: &str,
    port: u16,
    path: &str,
    token: &str,
) -> Result<SyncAnswer, String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
        .await
        .map_err(|e| format!("http: {e}"))?;
    let driver = tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(http_body_util::Empty::<axum::body::Bytes>::new())
        .map_err(|e| format!("request: {e}"))?;
    let resp = send
        .send_request(req)
        .await
        .map_err(|e| format!("http: {e}"));
    let out = async {
        let resp = resp?;
        let status = resp.status();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_BUNDLE)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            return Err(format!(
                "{status}: {}",
                crate::control::ha::printable(&text)
            ));
        }
        serde_json::from_slice::<SyncAnswer>(&body).map_err(|e| format!("answer: {e}"))
    }
    .await;
    driver.abort();
    out
}
