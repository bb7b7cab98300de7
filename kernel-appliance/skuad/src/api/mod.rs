//! The REST API (axum): bearer tokens with roles, JSON in and out, errors with stable codes.
//!
//! Every route is listed once in [`ROUTES`] with the role it needs; the router, the
//! authentication layer and the OpenAPI conformance test all read that table, and
//! `docs/openapi.json` (served at `/openapi.json`) must describe exactly those routes.
//!
//! Errors are `{"error": {"code": "...", "message": "..."}}` with these codes:
//! `unauthorized` (401: no or unknown token), `forbidden` (403: role too low),
//! `too_many_auth_failures` (429), `not_found` (404), `method_not_allowed` (405),
//! `invalid_json` (400: not JSON), `invalid_request` (400: unknown or missing field, wrong
//! type, bad name or record), `request_timeout` (408: the body did not arrive in time),
//! `body_too_large` (413), `unsupported_media_type` (415),
//! `conflict` (409), `invalid_config` (422: the change or reload does not compile; nothing
//! changed), `unavailable` (503), `internal` (500).

pub mod httpd;
pub mod local;
pub mod metrics;
pub mod sync;

use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::acme;
use crate::base::planes::DataplaneState;
use crate::control::auth::Role;
use crate::control::cache::FlushRequest;
use crate::control::ha::LeaseRequest;
use crate::control::{Change, Control, CtlError, Prepared, Reconfigure};
use httpd::{Caps, Tracker};
/// The OpenAPI document, kept in the repository.
pub const OPENAPI: &str = include_str!("../../../../docs/openapi.json");

/// Every route: method, path (axum syntax), role needed (`None`: no token).
pub const ROUTES: &[(&str, &str, Option<Role>)] = &[
    ("GET", "/health", None),
    ("GET", "/openapi.json", None),
    ("GET", "/status", Some(Role::Read)),
    ("GET", "/stats", Some(Role::Read)),
    ("GET", "/metrics", Some(Role::Read)),
    ("GET", "/acl", Some(Role::Read)),
    ("GET", "/zones", Some(Role::Read)),
    ("POST", "/zones", Some(Role::Dns)),
    ("GET", "/zones/{name}", Some(Role::Read)),
    ("DELETE", "/zones/{name}", Some(Role::Dns)),
    ("GET", "/records", Some(Role::Read)),
    ("POST", "/records", Some(Role::Dns)),
    ("DELETE", "/records", Some(Role::Dns)),
    ("GET", "/config", Some(Role::Operator)),
    ("POST", "/reload", Some(Role::Operator)),
    ("GET", "/audit", Some(Role::Operator)),
    ("POST", "/audit/verify", Some(Role::Admin)),
    // What clients asked shows in the cache: reading it is the operator's, as the
    // configuration is; a load puts records in front of clients unchecked: the admin's.
    ("GET", "/cache/lookup", Some(Role::Operator)),
    ("POST", "/cache/flush", Some(Role::Operator)),
    ("GET", "/cache/dump", Some(Role::Operator)),
    ("POST", "/cache/load", Some(Role::Admin)),
    ("GET", "/resolver/upstreams", Some(Role::Read)),
    // Leases decide which node answers the service addresses: the operator's, as reloads.
    ("GET", "/ha", Some(Role::Read)),
    ("POST", "/ha/lease", Some(Role::Operator)),
    ("POST", "/ha/release", Some(Role::Operator)),
    ("GET", "/sync", Some(Role::Sync)),
    ("GET", "/tls", Some(Role::Read)),
    // An ACME order on demand: the operator's, as a reload (it ends in one).
    ("POST", "/tls/renew", Some(Role::Operator)),
];

/// The API's own settings that a reload changes: its certificate and body limit.
struct Http {
    /// HTTPS configuration, when `tls-cert:`/`tls-key:` are set.
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// Its certificate (the file and the chain's first, DER), for the audit of a swap.
    cert: Option<(std::path::PathBuf, Vec<u8>)>,
    /// Largest request body.
    max_body: usize,
}

impl Http {
    fn from_config(cfg: &skua_config::Config) -> Result<Http, String> {
        let (tls, cert) = match (&cfg.api.tls_cert, &cfg.api.tls_key) {
            (Some(c), Some(k)) => {
                let config =
                    tls_config(&c.value, &k.value).map_err(|e| format!("{}: {e}", c.loc))?;
                let file = std::path::PathBuf::from(&c.value);
                let der = crate::control::tls::first_cert_der(&file);
                (Some(Arc::new(config)), der.map(|d| (file, d)))
            }
            _ => (None, None),
        };
        Ok(Http {
            tls,
            cert,
            max_body: cfg.api.max_body,
        })
    }
}

/// What the API's listeners and the control socket look like; a change needs a restart.
#[derive(PartialEq, Eq)]
struct Shape {
    enable: bool,
    interfaces: Vec<String>,
    port: u16,
    tls: bool,
    control_socket: Option<String>,
    control_socket_group: Option<String>,
    control_socket_group_role: String,
}

impl Shape {
    fn of(cfg: &skua_config::Config) -> Shape {
        let a = &cfg.api;
        Shape {
            enable: a.enable,
            interfaces: a.interfaces.iter().map(|l| l.value.clone()).collect(),
            port: a.port,
            tls: a.tls_cert.is_some(),
            control_socket: a.control_socket.as_ref().map(|l| l.value.clone()),
            control_socket_group: a.control_socket_group.as_ref().map(|l| l.value.clone()),
            control_socket_group_role: a.control_socket_group_role.clone(),
        }
    }
}

/// The REST API: the control core it serves, its own settings and its connections. Its
/// handlers reach the control core through `Deref`.
pub struct Api {
    ctl: Arc<Control>,
    http: Arc<ArcSwap<Http>>,
    /// The API's open connections and their caps.
    conns: Arc<Tracker>,
    shape: Shape,
    /// The ACME task's state, when an `acme:` clause is configured.
    pub acme: Option<Arc<acme::Acme>>,
}

impl Deref for Api {
    type Target = Control;
    fn deref(&self) -> &Control {
        &self.ctl
    }
}

/// The API's settings of a configuration, checked (its certificate and key read) before
/// anything is started.
pub struct Settings(Http);

/// Reads and checks the API's settings of `cfg`; an error names the file and line.
pub fn settings(cfg: &skua_config::Config) -> Result<Settings, String> {
    Http::from_config(cfg).map(Settings)
}

impl Api {
    /// The API over `ctl` with `settings` (from `cfg`), registered with the control core so
    /// that reloads change its certificate, limits and caps.
    pub fn new(
        ctl: Arc<Control>,
        cfg: &skua_config::Config,
        settings: Settings,
        acme: Option<Arc<acme::Acme>>,
    ) -> Arc<Api> {
        let api = Arc::new(Api {
            ctl: ctl.clone(),
            http: Arc::new(ArcSwap::from_pointee(settings.0)),
            conns: Tracker::new(Caps::of(&cfg.api)),
            shape: Shape::of(cfg),
            acme,
        });
        let hook: Arc<dyn Reconfigure> = api.clone();
        ctl.add_reconfigure(&hook);
        api
    }

    /// Whether it serves HTTPS.
    pub fn is_tls(&self) -> bool {
        self.http.load().tls.is_some()
    }
}

/// New API settings, prepared by a reload.
struct NewHttp {
    ctl: Arc<Control>,
    http: Arc<ArcSwap<Http>>,
    next: Http,
    conns: Arc<Tracker>,
    caps: Caps,
    restart_needed: bool,
}

impl Prepared for NewHttp {
    fn commit(self: Box<Self>) {
        // Another certificate for the API's HTTPS: audited before it serves, as the DNS
        // listeners' (new connections get it; those open keep theirs).
        fn pick(h: &Http) -> Option<(&std::path::Path, &[u8])> {
            h.cert.as_ref().map(|(f, d)| (f.as_path(), d.as_slice()))
        }
        if let Some(detail) =
            crate::control::tls::cert_swap_detail("api", pick(&self.http.load()), pick(&self.next))
        {
            self.ctl
                .record(skua_audit::kind::TLS_SWAPPED, "system", None, detail);
        }
        self.http.store(Arc::new(self.next));
        self.conns.set_caps(self.caps);
        if self.restart_needed {
            crate::base::log::warn(format_args!(
                "reload: the API's own listeners (api: enable/interface/port, TLS on or off) and the control socket (control-socket*) change at restart; tokens, limits and certificates changed now"
            ));
        }
    }
}

impl Reconfigure for Api {
    fn prepare(
        &self,
        cfg: &skua_config::Config,
        dir: Option<&std::path::Path>,
    ) -> Result<Box<dyn Prepared>, String> {
        // ACME is read at start only, but its checks run here too: the start refuses an
        // acme: clause that cannot work (no tls-service-pem:/-key:, a file outside the
        // configuration and data directories), so a reload or a sync source's version that
        // has one would keep this node from starting again (issue 28, finding 1).
        acme::AcmeSettings::from_config(cfg, dir)?;
        Ok(Box::new(NewHttp {
            ctl: self.ctl.clone(),
            http: self.http.clone(),
            next: Http::from_config(cfg).map_err(|e| format!("api: {e}"))?,
            conns: self.conns.clone(),
            caps: Caps::of(&cfg.api),
            restart_needed: Shape::of(cfg) != self.shape,
        }))
    }
}

/// An API error response.
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<CtlError> for ApiError {
    fn from(e: CtlError) -> Self {
        let (status, code) = match &e {
            CtlError::BadRequest(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
            CtlError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            CtlError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            CtlError::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_config"),
            CtlError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            CtlError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            CtlError::Unaudited(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        };
        ApiError::new(status, code, e.message())
    }
}

type Ctl = State<Arc<Api>>;

/// A query string, with a JSON error (`invalid_request`) instead of axum's plain-text one.
struct Q<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Q(v))
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", e.body_text()))
    }
}

/// A path parameter, with a JSON error instead of axum's plain-text one.
struct P<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + Send> axum::extract::FromRequestParts<S> for P<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| P(v))
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", e.body_text()))
    }
}

/// The caller, as the authentication layer found it.
#[derive(Clone, Debug)]
pub struct Caller {
    /// Token name (`None` on unauthenticated routes).
    pub name: Option<String>,
    /// Source address (`None` on the local control socket).
    pub source: Option<SocketAddr>,
}

/// What a request needs, from its route and method. **Authentication is the default**: a
/// route is public only where [`ROUTES`] says so (for GET, and HEAD, which axum answers with
/// the GET handler); every other request — any method on any other route, a method the
/// route does not have, an unknown path — needs a valid token before anything else is
/// answered (a method a route does not have then gets 405, an unknown path 404).
fn required_role(method: &Method, path: Option<&str>) -> Option<Role> {
    // HEAD is GET without the body (RFC 9110 §9.3.2): the same route, the same role.
    let m = if *method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    let Some(path) = path else {
        return Some(Role::Read);
    };
    match ROUTES.iter().find(|(rm, p, _)| *rm == m && *p == path) {
        Some((_, _, role)) => *role,
        None if ROUTES.iter().any(|(_, p, r)| *p == path && r.is_none()) => {
            // Another method on a public route: 405, which tells nothing.
            None
        }
        None => Some(Role::Read),
    }
}

/// Notes a refused request for the audit log (aggregated per source and window: see
/// [`crate::control::auth::RefusalLog`]).
fn refused(
    ctl: &Api,
    source: Option<SocketAddr>,
    actor: &str,
    method: &Method,
    route: &str,
    reason: &str,
) {
    let c = ctl.ctl.clone();
    let (actor, method, route, reason) = (
        actor.to_string(),
        // A client may send any token as a method (RFC 9110 §9.1): bounded before it reaches
        // the log, the audit entry and the aggregation keys.
        method.as_str().chars().take(16).collect::<String>(),
        route.to_string(),
        reason.to_string(),
    );
    tokio::task::block_in_place(move || {
        c.note_refusal(source.map(|s| s.ip()), &actor, &method, &route, &reason);
    });
}

/// The local control socket's caller: known by its credentials (see [`local`]), no token.
async fn authorize_local(
    ctl: &Api,
    peer: local::LocalPeer,
    need: Option<Role>,
    route: &str,
    mut req: Request,
    next: Next,
) -> Response {
    if let Some(need) = need
        && peer.role.is_none_or(|r| !r.may(need))
    {
        let why = match peer.role {
            Some(r) => format!("forbidden: role {r} < {}", need.needed()),
            None => "forbidden: not root, the daemon's user or a member of control-socket-group"
                .to_string(),
        };
        refused(ctl, None, &peer.actor, req.method(), route, &why);
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{} on the control socket: {why}; {} {route} needs {}",
                peer.actor,
                req.method(),
                need.needed()
            ),
        )
        .into_response();
    }
    req.extensions_mut().insert(Caller {
        name: Some(peer.actor),
        source: None,
    });
    next.run(req).await
}

async fn authenticate(
    State(ctl): Ctl,
    matched: Option<MatchedPath>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = matched.as_ref().map(|m| m.as_str().to_string());
    let route = path.clone().unwrap_or_else(|| "(no route)".to_string());
    let need = required_role(req.method(), path.as_deref());
    if let Some(peer) = req.extensions().get::<local::LocalPeer>().cloned() {
        return authorize_local(&ctl, peer, need, &route, req, next).await;
    }
    let Some(ConnectInfo(source)) = req.extensions().get::<ConnectInfo<SocketAddr>>().copied()
    else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "request without a peer",
        )
        .into_response();
    };
    let Some(need) = need else {
        req.extensions_mut().insert(Caller {
            name: None,
            source: Some(source),
        });
        return next.run(req).await;
    };
    let access = ctl.access.load();
    let now = Instant::now();
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let token = presented.and_then(|p| access.tokens.check(p));
    let Some(token) = token else {
        // Only failures are throttled: a valid token passes whatever this source did.
        if access.fail_limiter.blocked(source.ip(), now) {
            access.fail_limiter.fail(source.ip(), now);
            refused(
                &ctl,
                Some(source),
                "anonymous",
                req.method(),
                &route,
                "too many failed authentications",
            );
            return ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_auth_failures",
                "too many failed authentications from this address; wait a minute",
            )
            .into_response();
        }
        access.fail_limiter.fail(source.ip(), now);
        let why = if presented.is_some() {
            "unknown token"
        } else {
            "missing bearer token (Authorization: Bearer TOKEN)"
        };
        refused(&ctl, Some(source), "anonymous", req.method(), &route, why);
        let mut r = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", why).into_response();
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"skuad\""),
        );
        return r;
    };
    if !token.role.may(need) {
        let why = format!("forbidden: role {} < {}", token.role, need.needed());
        refused(&ctl, Some(source), &token.name, req.method(), &route, &why);
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "token '{}' has role {}; {} {route} needs {}",
                token.name,
                token.role,
                req.method(),
                need.needed()
            ),
        )
        .into_response();
    }
    req.extensions_mut().insert(Caller {
        name: Some(token.name.clone()),
        source: Some(source),
    });
    next.run(req).await
}

/// Reads a JSON body within the configured limit into `T` (unknown fields rejected).
async fn json_body<T: DeserializeOwned>(
    ctl: &Api,
    headers: &HeaderMap,
    body: Body,
) -> Result<T, ApiError> {
    let bytes = body_of(ctl, headers, body, "application/json").await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        let code = if e.is_syntax() || e.is_eof() {
            "invalid_json"
        } else {
            "invalid_request"
        };
        ApiError::new(StatusCode::BAD_REQUEST, code, e.to_string())
    })
}

/// Reads a body of media type `media` (or none given) within the configured limit.
async fn body_of(
    ctl: &Api,
    headers: &HeaderMap,
    body: Body,
    media: &str,
) -> Result<Bytes, ApiError> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("");
        if !ct.starts_with(media) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!("content-type must be {media}, not '{ct}'"),
            ));
        }
    }
    let limit = ctl.http.load().max_body;
    let read = tokio::time::timeout(httpd::BODY_TIMEOUT, axum::body::to_bytes(body, limit));
    let bytes: Bytes = read
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!(
                    "the request body did not arrive within {} s",
                    httpd::BODY_TIMEOUT.as_secs()
                ),
            )
        })?
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("request body over {limit} bytes (api: max-body:)"),
            )
        })?;
    Ok(bytes)
}

async fn health(State(ctl): Ctl) -> Response {
    let dp = ctl.dataplane_state();
    let ok = !matches!(dp, DataplaneState::Degraded(_));
    let body = json!({
        "status": if ok { "ok" } else { "degraded" },
        "dataplane": dp,
        "generation": ctl.generation(),
        "uptime_seconds": ctl.started.elapsed().as_secs(),
    });
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn status(State(ctl): Ctl) -> Response {
    let v = ctl.view();
    let dp = ctl.dataplane_state();
    axum::Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": ctl.started.elapsed().as_secs(),
        "config": ctl.source.describe(),
        "dataplane": dp,
        "generation": ctl.generation(),
        "loaded_at": v.loaded_at,
        "compile_ms": v.compile_ms,
        "records": v.records,
        "names": v.names,
        "zones": v.zones.len(),
        "reloads": {"ok": ctl.reloads_ok.load(std::sync::atomic::Ordering::Relaxed),
                    "failed": ctl.reloads_failed.load(std::sync::atomic::Ordering::Relaxed)},
        "writes": {"ok": ctl.writes_ok.load(std::sync::atomic::Ordering::Relaxed),
                   "failed": ctl.writes_failed.load(std::sync::atomic::Ordering::Relaxed)},
        "warnings": v.warnings.len(),
        "sync": ctl.sync_status(),
    }))
    .into_response()
}

async fn stats(State(ctl): Ctl) -> Response {
    axum::Json(metrics::stats_json(&ctl)).into_response()
}

async fn metrics(State(ctl): Ctl) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics::prometheus(&ctl) + &acme_prometheus(&ctl) + &connections_prometheus(&ctl),
    )
        .into_response()
}

/// The API's own connections: open, admitted and refused at the caps, evicted to make
/// room (docs/api.md, "Connections").
fn connections_prometheus(api: &Api) -> String {
    let t = &api.conns;
    let (refused, evicted) = t.counts();
    format!(
        "# HELP skua_api_connections_open API connections open now.\n\
         # TYPE skua_api_connections_open gauge\n\
         skua_api_connections_open {}\n\
         # HELP skua_api_connections_total API connections accepted, by result (admitted; refused: at a cap with every connection busy).\n\
         # TYPE skua_api_connections_total counter\n\
         skua_api_connections_total{{result=\"admitted\"}} {}\n\
         skua_api_connections_total{{result=\"refused\"}} {refused}\n\
         # HELP skua_api_connections_evicted_total Idle API connections closed to make room for a new one at a cap.\n\
         # TYPE skua_api_connections_evicted_total counter\n\
         skua_api_connections_evicted_total {evicted}\n",
        t.open(),
        t.admitted(),
    )
}

/// The certificate in force (whoever renews it): its remaining lifetime; with ACME, the
/// task's attempts and failures by reason.
fn acme_prometheus(ctl: &Api) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let mut out = String::new();
    if let Some(c) = certificate_in_force(ctl) {
        out.push_str(&format!(
            "# HELP skua_tls_certificate_expiry_seconds Seconds until the certificate in force expires (negative: expired).\n\
             # TYPE skua_tls_certificate_expiry_seconds gauge\n\
             skua_tls_certificate_expiry_seconds {}\n",
            c.not_after as i64 - now
        ));
    }
    let Some(a) = ctl.acme.as_deref() else {
        return out;
    };
    let st = a.status.lock().unwrap_or_else(|e| e.into_inner()).clone();
    out.push_str(&format!(
        "# HELP skua_acme_attempts_total ACME orders by result since start.\n\
         # TYPE skua_acme_attempts_total counter\n\
         skua_acme_attempts_total{{result=\"issued\"}} {}\n\
         skua_acme_attempts_total{{result=\"failed\"}} {}\n",
        st.issued, st.failures
    ));
    out.push_str(
        "# HELP skua_acme_failures_total Failed ACME attempts by reason since start.\n\
         # TYPE skua_acme_failures_total counter\n",
    );
    for k in acme::FailureKind::ALL {
        out.push_str(&format!(
            "skua_acme_failures_total{{reason=\"{}\"}} {}\n",
            k.as_str(),
            st.failures_by_reason.get(k.as_str()).copied().unwrap_or(0)
        ));
    }
    out
}

/// The certificate the encrypted listeners serve now (as last loaded), if any.
fn certificate_in_force(ctl: &Control) -> Option<crate::control::tls::CertFacts> {
    let svc = ctl.serving.tls.service.load_full()?;
    let (_, der) = svc.certificate.as_ref()?;
    crate::control::tls::cert_facts(der)
}

async fn config(State(ctl): Ctl) -> Response {
    let v = ctl.view();
    let tokens: Vec<_> = ctl
        .access
        .load()
        .tokens
        .0
        .iter()
        .map(|t| json!({"name": t.name, "role": t.role}))
        .collect();
    axum::Json(json!({
        "source": ctl.source.describe(),
        "files": v.files,
        "effective": v.effective,
        "api": {"tokens": tokens, "max_body": ctl.http.load().max_body},
        "warnings": v.warnings,
    }))
    .into_response()
}

async fn acl(State(ctl): Ctl) -> Response {
    let e = ctl.engine();
    let rules: Vec<_> = e
        .acl()
        .rules()
        .map(|(addr, prefix, action)| {
            json!({"netblock": netblock_text(addr, prefix), "action": action.as_str()})
        })
        .collect();
    axum::Json(json!({ "rules": rules })).into_response()
}

/// An ACL rule's netblock (IPv4 rules are held as IPv4-mapped IPv6 in 128 bits).
fn netblock_text(addr: u128, prefix: u8) -> String {
    let v6 = std::net::Ipv6Addr::from(addr);
    match v6.to_ipv4_mapped() {
        Some(v4) if prefix >= 96 => format!("{v4}/{}", prefix - 96),
        _ => format!("{v6}/{prefix}"),
    }
}

async fn zones(State(ctl): Ctl) -> Response {
    axum::Json(json!({ "zones": ctl.view().zones })).into_response()
}

/// Zone names through the API: labels of letters, digits, `-` and `_` (what
/// docs/openapi.json says; zones with other bytes go in the configuration file).
fn check_zone_name(name: &str) -> Result<(), ApiError> {
    let bad = |why: &str| {
        Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("zone name '{name}': {why}"),
        ))
    };
    let body = name.strip_suffix('.').unwrap_or(name);
    if body.is_empty() || name.len() > 253 {
        return bad("must be 1 to 253 characters");
    }
    for l in body.split('.') {
        if l.is_empty() || l.len() > 63 {
            return bad("labels are 1 to 63 characters");
        }
        if !l
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            return bad("labels hold letters, digits, '-' and '_' only");
        }
    }
    Ok(())
}

async fn zone(State(ctl): Ctl, P(name): P<String>) -> Result<Response, ApiError> {
    check_zone_name(&name)?;
    let canon = crate::control::state::canonical_zone(&name)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", e))?;
    let v = ctl.view();
    let Some(z) = v.zones.iter().find(|z| z.name == canon) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no local zone {canon}"),
        ));
    };
    let apex = skua_engine::name::WireName::parse(&canon, None)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", e.to_string()))?;
    let records: Vec<_> = v
        .local_data
        .iter()
        .filter(|r| {
            skua_engine::name::WireName::parse(crate::control::state::rr_owner(&r.rr), None)
                .is_ok_and(|n| n.is_subdomain_of(&apex))
        })
        .collect();
    Ok(axum::Json(json!({ "zone": z, "records": records })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewZone {
    name: String,
    #[serde(rename = "type")]
    zone_type: String,
}

/// Who made a request, for the audit log.
fn who(c: &Caller) -> (&str, Option<std::net::IpAddr>) {
    (
        c.name.as_deref().unwrap_or("anonymous"),
        c.source.map(|s| s.ip()),
    )
}

type Who = axum::Extension<Caller>;

async fn add_zone(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let z: NewZone = json_body(&ctl, &headers, body).await?;
    check_zone_name(&z.name)?;
    let (actor, src) = who(&caller);
    let change = Change::AddZone {
        name: z.name,
        zone_type: z.zone_type,
    };
    let a = ctl.write(vec![change], actor, src).await?;
    Ok((StatusCode::CREATED, axum::Json(a)).into_response())
}

async fn remove_zone(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    P(name): P<String>,
) -> Result<Response, ApiError> {
    check_zone_name(&name)?;
    let (actor, src) = who(&caller);
    let a = ctl
        .write(vec![Change::RemoveZone { name }], actor, src)
        .await?;
    Ok(axum::Json(a).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordQuery {
    zone: Option<String>,
    rr: Option<String>,
}

async fn records(State(ctl): Ctl, Q(q): Q<RecordQuery>) -> Result<Response, ApiError> {
    let v = ctl.view();
    if let Some(z) = &q.zone {
        check_zone_name(z)?;
    }
    let zone = match &q.zone {
        Some(z) => Some(skua_engine::name::WireName::parse(z, None).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                format!("zone '{z}': {e}"),
            )
        })?),
        None => None,
    };
    let list: Vec<_> = v
        .local_data
        .iter()
        .filter(|r| match &zone {
            Some(z) => {
                skua_engine::name::WireName::parse(crate::control::state::rr_owner(&r.rr), None)
                    .is_ok_and(|n| n.is_subdomain_of(z))
            }
            None => true,
        })
        .collect();
    Ok(axum::Json(json!({ "records": list })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewRecord {
    rr: String,
}

async fn add_record(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let r: NewRecord = json_body(&ctl, &headers, body).await?;
    let (actor, src) = who(&caller);
    let a = ctl
        .write(vec![Change::AddRecord { rr: r.rr }], actor, src)
        .await?;
    Ok((StatusCode::CREATED, axum::Json(a)).into_response())
}

async fn remove_record(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    Q(q): Q<RecordQuery>,
) -> Result<Response, ApiError> {
    let Some(rr) = q.rr else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "DELETE /records needs ?rr=RECORD",
        ));
    };
    let (actor, src) = who(&caller);
    let a = ctl
        .write(vec![Change::RemoveRecord { rr }], actor, src)
        .await?;
    Ok(axum::Json(a).into_response())
}

async fn reload(State(ctl): Ctl, axum::Extension(caller): Who) -> Result<Response, ApiError> {
    let (actor, src) = who(&caller);
    let a = ctl.reload(actor, src).await?;
    crate::base::log::info(format_args!(
        "reloaded through the API: {} records in {:.1} ms",
        a.records, a.elapsed_ms
    ));
    Ok(axum::Json(a).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TailQuery {
    n: Option<usize>,
}

fn no_audit() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "no audit log configured (audit: log:)",
    )
}

async fn audit_tail(State(ctl): Ctl, Q(q): Q<TailQuery>) -> Result<Response, ApiError> {
    let n = q.n.unwrap_or(100);
    if !(1..=10_000).contains(&n) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "n must be between 1 and 10000",
        ));
    }
    let entries = tokio::task::block_in_place(|| {
        let a = ctl.audit.lock().unwrap_or_else(|e| e.into_inner());
        a.as_ref().map(|a| a.tail(n))
    })
    .ok_or_else(no_audit)?
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e))?;
    Ok(axum::Json(json!({ "entries": entries })).into_response())
}

async fn audit_verify(State(ctl): Ctl) -> Result<Response, ApiError> {
    let report = tokio::task::block_in_place(|| {
        let a = ctl.audit.lock().unwrap_or_else(|e| e.into_inner());
        a.as_ref().map(|a| a.verify())
    })
    .ok_or_else(no_audit)?
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e))?;
    let mut v: serde_json::Value = serde_json::from_str(&report.to_json())
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    v["ok"] = json!(report.is_ok());
    Ok(axum::Json(v).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LookupQuery {
    name: Option<String>,
}

async fn cache_lookup(State(ctl): Ctl, Q(q): Q<LookupQuery>) -> Result<Response, ApiError> {
    let Some(name) = q.name else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "GET /cache/lookup needs ?name=NAME",
        ));
    };
    let found = tokio::task::block_in_place(|| ctl.cache_lookup(&name))?;
    Ok(axum::Json(found).into_response())
}

async fn cache_flush(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let req: FlushRequest = json_body(&ctl, &headers, body).await?;
    let (actor, src) = who(&caller);
    let done = tokio::task::block_in_place(|| ctl.cache_flush(&req, actor, src))?;
    Ok(axum::Json(done).into_response())
}

async fn cache_dump(State(ctl): Ctl) -> Result<Response, ApiError> {
    let text = tokio::task::block_in_place(|| ctl.cache_dump())?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

async fn cache_load(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = body_of(&ctl, &headers, body, "text/plain").await?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("a cache dump is UTF-8 text ({e}); nothing loaded"),
        )
    })?;
    let (actor, src) = who(&caller);
    let done = tokio::task::block_in_place(|| ctl.cache_load(text, actor, src))?;
    Ok(axum::Json(done).into_response())
}

async fn upstreams(State(ctl): Ctl) -> Result<Response, ApiError> {
    Ok(axum::Json(ctl.upstreams()?).into_response())
}

/// `GET /tls`: the certificate in force (`certificate: null` without one), whoever renews
/// it, and the ACME task's status (`acme: null` without an `acme:` clause).
async fn tls_status(State(ctl): Ctl) -> Result<Response, ApiError> {
    let st = ctl
        .acme
        .as_ref()
        .map(|a| a.status.lock().unwrap_or_else(|e| e.into_inner()).clone());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let svc = ctl.serving.tls.service.load_full();
    let cert = svc
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .and_then(|(file, der)| {
            let c = crate::control::tls::cert_facts(der)?;
            Some(json!({
                "file": file.display().to_string(),
                "names": c.names,
                "serial": c.serial,
                "issuer": c.issuer,
                "not_before": c.not_before,
                "not_after": c.not_after,
                // Whole days left, rounded down (negative once expired).
                "days_left": (c.not_after as i64 - now).div_euclid(86_400),
            }))
        });
    Ok(axum::Json(json!({ "certificate": cert, "acme": st })).into_response())
}

/// `POST /tls/renew`: an ACME order now (202; the result shows in `GET /tls`).
async fn tls_renew(State(ctl): Ctl, axum::Extension(caller): Who) -> Result<Response, ApiError> {
    let Some(a) = &ctl.acme else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            "no acme: clause: the certificate is the operator's to renew (then POST /reload)",
        ));
    };
    let (actor, src) = who(&caller);
    tokio::task::block_in_place(|| {
        ctl.record(
            skua_audit::kind::TLS_RENEW_REQUESTED,
            actor,
            src,
            serde_json::json!({}),
        )
    });
    a.renew_now.notify_one();
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({ "requested": true })),
    )
        .into_response())
}

async fn ha_state(State(ctl): Ctl) -> Result<Response, ApiError> {
    Ok(axum::Json(ctl.leases()).into_response())
}

async fn ha_lease(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let req: LeaseRequest = json_body(&ctl, &headers, body).await?;
    let (actor, src) = who(&caller);
    let done = tokio::task::block_in_place(|| ctl.lease(actor, src, &req))?;
    Ok(axum::Json(done).into_response())
}

/// `POST /ha/release`: optional addresses and reason.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseRequest {
    #[serde(default)]
    addresses: Option<Vec<std::net::IpAddr>>,
    #[serde(default)]
    reason: Option<String>,
}

async fn ha_release(
    State(ctl): Ctl,
    axum::Extension(caller): Who,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let req: ReleaseRequest = json_body(&ctl, &headers, body).await?;
    let (actor, src) = who(&caller);
    let reason = req.reason.as_deref().unwrap_or("released by the agent");
    let done =
        tokio::task::block_in_place(|| ctl.release(actor, src, req.addresses.as_deref(), reason))?;
    Ok(axum::Json(done).into_response())
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route {method} {} (see /openapi.json)", uri.path()),
    )
}

/// A route that exists without this method (`/zones/{name}` included, which a comparison
/// of the URI with the route table would miss).
async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// The API's router.
pub fn router(ctl: Arc<Api>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/openapi.json", get(openapi))
        .route("/status", get(status))
        .route("/stats", get(stats))
        .route("/metrics", get(metrics))
        .route("/acl", get(acl))
        .route("/zones", get(zones).post(add_zone))
        .route("/zones/{name}", get(zone).delete(remove_zone))
        .route(
            "/records",
            get(records).post(add_record).delete(remove_record),
        )
        .route("/config", get(config))
        .route("/reload", post(reload))
        .route("/audit", get(audit_tail))
        .route("/audit/verify", post(audit_verify))
        .route("/cache/lookup", get(cache_lookup))
        .route("/cache/flush", post(cache_flush))
        .route("/cache/dump", get(cache_dump))
        .route("/cache/load", post(cache_load))
        .route("/resolver/upstreams", get(upstreams))
        .route("/ha", get(ha_state))
        .route("/ha/lease", post(ha_lease))
        .route("/ha/release", post(ha_release))
        .route("/sync", get(sync::serve))
        .route("/tls", get(tls_status))
        .route("/tls/renew", post(tls_renew))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(ctl.clone(), authenticate))
        .with_state(ctl)
}

/// Binds the API's listeners. The default address is optional (a second skuad on the same
/// host, or a test, just runs without an API, with a warning); an address configured in
/// `api: interface:` must bind.
pub async fn bind(cfg: &skua_config::Config) -> Result<Vec<tokio::net::TcpListener>, String> {
    let a = &cfg.api;
    if !a.enable {
        crate::base::log::info(format_args!("api: disabled (api: enable: no)"));
        return Ok(Vec::new());
    }
    if a.interfaces.is_empty() {
        let addr = SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), a.port);
        return match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => Ok(vec![l]),
            Err(e) => {
                crate::base::log::warn(format_args!(
                    "api: cannot listen on {addr} (the default): {e}; the REST API is off (set api: interface:)"
                ));
                Ok(Vec::new())
            }
        };
    }
    let mut out = Vec::new();
    for i in &a.interfaces {
        let addr = crate::control::load::parse_addr(&i.value, a.port)
            .map_err(|e| format!("{}: {e}", i.loc))?;
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("{}: cannot listen on {addr}: {e}", i.loc))?;
        out.push(l);
    }
    Ok(out)
}

/// A TLS server configuration from PEM files (certificate chain, private key). Only
/// TLS 1.2 and 1.3 with rustls' safe defaults; HTTP/1.1 announced through ALPN.
pub fn tls_config(cert: &str, key: &str) -> Result<tokio_rustls::rustls::ServerConfig, String> {
    crate::control::tls::server_config(
        std::path::Path::new(cert),
        std::path::Path::new(key),
        &[b"http/1.1"],
    )
    .map_err(|e| format!("tls-cert/tls-key: {e}"))
}

/// Serves the API on `listener` until `stop` resolves: HTTPS when the configuration in
/// force at start has a certificate (the certificate of the configuration in force when a
/// connection arrives is used, so a reload after a renewal switches to the new certificate
/// without a restart), else HTTP.
pub async fn serve(
    listener: tokio::net::TcpListener,
    api: Arc<Api>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let tls: httpd::TlsSource = if api.is_tls() {
        let h = api.http.clone();
        Some(Arc::new(move || h.load().tls.clone()))
    } else {
        None
    };
    let (router, conns) = (router(api.clone()), api.conns.clone());
    httpd::serve(listener, router, conns, tls, stop).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/openapi.json describes exactly the routes of [`ROUTES`], with the same
    /// authentication (none, or the bearer scheme and the role in the description).
    #[test]
    fn openapi_matches_the_routes() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        let mut documented = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let open = op
                    .get("security")
                    .is_some_and(|s| s.as_array().is_some_and(Vec::is_empty));
                let role = op["description"].as_str().and_then(|d| {
                    d.strip_prefix("Role needed: ")
                        .and_then(|r| r.split(' ').next())
                        .map(str::to_string)
                });
                documented.push((method.to_uppercase(), path.clone(), open, role));
            }
        }
        documented.sort();
        let mut routes: Vec<_> = ROUTES
            .iter()
            .map(|(m, p, r)| {
                (
                    m.to_string(),
                    p.to_string(),
                    r.is_none(),
                    r.map(|r| r.as_str().to_string()),
                )
            })
            .collect();
        routes.sort();
        assert_eq!(documented, routes);
    }

    #[test]
    fn netblocks() {
        let v4: u128 = u128::from(std::net::Ipv4Addr::new(198, 18, 0, 0).to_ipv6_mapped());
        assert_eq!(netblock_text(v4, 96 + 15), "198.18.0.0/15");
        assert_eq!(netblock_text(0xfd00 << 112, 8), "fd00::/8");
    }
}
