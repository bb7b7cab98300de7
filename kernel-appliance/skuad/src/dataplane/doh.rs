//! DNS over HTTPS (RFC 8484) on a stream listener: HTTP/2 and HTTP/1.1 (hyper) over TLS,
//! or over plain TCP behind a proxy that terminates TLS (`http-notls-downstream:`).
//!
//! What DNS over HTTPS means is the engine's (`skua_engine::doh`: the endpoint, GET's
//! `dns` parameter, POST's media type, the answer's freshness); this module is the I/O
//! around it. Each query goes through the same path as one over TCP
//! ([`super::answer::answer_stream`]): access list, local data, cache, resolver, padding.
//!
//! Bounds, so that one client cannot disturb the others: `http-max-streams:` concurrent
//! HTTP/2 streams per connection, streams reset before they are answered limited (HTTP/2
//! "rapid reset"), 64 KiB of request headers, request bodies read to 65535 octets at most
//! and within the idle timeout, the bytes of queries held and of answers waiting counted
//! against `http-query-buffer-size:` and `http-response-buffer-size:` (a request past them
//! gets 503), HTTP/1.1 headers within the idle timeout, and a connection with no request in
//! progress and nothing read or written for the idle timeout closed gracefully.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use skua_engine::doh::{self, Refusal};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, mpsc};

use super::answer::{Conn, Step, answer_stream};
use crate::base::tls::{Reserved, inc, reserve};
use crate::base::watched::Watched;

/// Largest request header block (HTTP/2 header list, HTTP/1.1 read buffer): a GET carries
/// a query of up to about 48 KiB in it (longer ones go by POST).
const MAX_HEADERS: usize = 64 * 1024;
/// Concurrent HTTP/2 streams a client may reset before skuad answers them, per connection
/// (hyper's default is 20; this keeps it explicit): past it the connection is closed.
const MAX_PENDING_RESETS: usize = 20;
/// The longest a query waits for the resolver, at least (the idle timeout when longer).
const RESOLVE_WAIT: Duration = Duration::from_secs(10);

/// The body of a DNS over HTTPS response: one chunk, its bytes counted against
/// `http-response-buffer-size:` until hyper has taken them (then the share is given back).
pub struct DohBody {
    data: Option<Bytes>,
    _held: Option<Reserved>,
}

impl Body for DohBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let frame = this.data.take().map(|d| Ok(Frame::data(d)));
        // Handed to the connection: no longer ours to count.
        this._held = None;
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

/// What the connection's requests share: its context and its activity.
struct Ctx {
    conn: Conn,
    activity: Arc<Activity>,
}

/// When the connection last read or wrote, and how many requests are in progress: the
/// idle timeout closes only a connection with none.
struct Activity {
    start: Instant,
    /// Milliseconds since `start` at the last read or write (kept by [`Watched`] too).
    last_ms: Arc<AtomicU64>,
    in_progress: AtomicUsize,
    /// Close now (the address's lease ended).
    close: Notify,
}

impl Activity {
    fn touch(&self) {
        self.last_ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// When the connection goes idle, if nothing happens before.
    fn idle_at(&self, idle: Duration) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)) + idle
    }
}

/// A request in progress (counted while it lives).
struct InProgress(Arc<Activity>);

impl InProgress {
    fn new(a: &Arc<Activity>) -> Self {
        a.in_progress.fetch_add(1, Ordering::Relaxed);
        a.touch();
        Self(a.clone())
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_progress.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves DNS over HTTPS on one connection (after the TLS handshake, if any) until the
/// client closes it, it stays idle for the idle timeout, or an error ends it.
pub(crate) async fn serve<S>(stream: S, conn: Conn)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let params = conn.shared.tls.doh.load_full();
    let idle = conn.idle;
    let activity = Arc::new(Activity {
        start: Instant::now(),
        last_ms: Arc::new(AtomicU64::new(0)),
        in_progress: AtomicUsize::new(0),
        close: Notify::new(),
    });
    let shared = conn.shared.clone();
    let ctx = Arc::new(Ctx {
        conn,
        activity: activity.clone(),
    });
    let io = TokioIo::new(Watched {
        inner: stream,
        last: activity.last_ms.clone(),
        epoch: activity.start,
    });
    let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(idle)
        .max_buf_size(MAX_HEADERS)
        .keep_alive(true);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(params.max_streams)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_local_error_reset_streams(MAX_PENDING_RESETS)
        .max_header_list_size(MAX_HEADERS as u32)
        // A query is at most 65535 octets: no stream needs a larger window, and the
        // connection's bounds what a client can make skuad hold before it reads.
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(512 * 1024)
        .max_send_buf_size(64 * 1024);
    let svc = hyper::service::service_fn(move |req| {
        let ctx = ctx.clone();
        async move { Ok::<_, Infallible>(handle(req, &ctx).await) }
    });
    let conn = b.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut closing: Option<Instant> = None;
    loop {
        let wake = match closing {
            // A graceful close lets the requests in progress finish, within the idle
            // timeout once more.
            Some(t) => t + idle,
            // Past the idle time with a request in progress (a slow resolution): look
            // again an idle time later, not at once (that would spin).
            None => activity
                .idle_at(idle)
                .max(Instant::now() + idle.min(Duration::from_secs(1))),
        };
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = activity.close.notified(), if closing.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing = Some(Instant::now());
            }
            _ = tokio::time::sleep_until(wake.into()) => {
                if closing.is_some() {
                    break;
                }
                if activity.in_progress.load(Ordering::Relaxed) == 0
                    && Instant::now() >= activity.idle_at(idle)
                {
                    inc(&shared.tls.doh_stats.idle_closed);
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now());
                }
            }
        }
    }
}

/// A response with `status` and a short plain-text reason.
fn plain(status: StatusCode, reason: &'static str) -> Response<DohBody> {
    let mut r = Response::new(DohBody {
        data: Some(Bytes::from_static(reason.as_bytes())),
        _held: None,
    });
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The response to a request that is not a DNS query.
fn refused(ctx: &Ctx, r: Refusal) -> Response<DohBody> {
    inc(&ctx.conn.shared.tls.doh_stats.refused);
    let status = StatusCode::from_u16(r.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut resp = plain(status, r.reason());
    if r == Refusal::MethodNotAllowed {
        // RFC 9110 §15.5.6: a 405 lists the methods that are allowed.
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, POST"));
    }
    resp
}

/// 503: no room (a buffer limit) or no answer (the resolver's queue, its time).
fn unavailable(ctx: &Ctx, reason: &'static str) -> Response<DohBody> {
    inc(&ctx.conn.shared.tls.doh_stats.unavailable);
    plain(StatusCode::SERVICE_UNAVAILABLE, reason)
}

/// The 200 response carrying the framed DNS answer `framed` (RFC 8484 §4.2), with its
/// freshness lifetime (§5.1).
fn answer(ctx: &Ctx, framed: Vec<u8>) -> Response<DohBody> {
    let shared = &ctx.conn.shared;
    let params = shared.tls.doh.load();
    let msg = Bytes::from(framed).slice(2..);
    let Some(held) = reserve(
        &shared.tls.response_bytes,
        msg.len(),
        params.response_buffer,
    ) else {
        return unavailable(ctx, "answers waiting exceed http-response-buffer-size");
    };
    inc(&shared.tls.doh_stats.answered);
    // An answer without a TTL to go by (an error, say) is not to be kept.
    let age = doh::max_age(&msg).unwrap_or(0);
    let mut r = Response::new(DohBody {
        data: Some(msg),
        _held: Some(held),
    });
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(doh::MEDIA_TYPE),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("max-age={age}")) {
        r.headers_mut().insert(header::CACHE_CONTROL, v);
    }
    r
}

/// Answers one HTTP request.
async fn handle(req: Request<Incoming>, ctx: &Ctx) -> Response<DohBody> {
    let _busy = InProgress::new(&ctx.activity);
    let shared = &ctx.conn.shared;
    let params = shared.tls.doh.load_full();
    let method = match *req.method() {
        Method::GET => doh::Method::Get,
        Method::POST => doh::Method::Post,
        _ => doh::Method::Other,
    };
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    // The query's bytes count against http-query-buffer-size until it is answered.
    let mut _held = None;
    let query = match doh::check_target(method, target, &params.endpoint) {
        Err(r) => return refused(ctx, r),
        Ok(Some(q)) => {
            let Some(h) = reserve(&shared.tls.query_bytes, q.len(), params.query_buffer) else {
                return unavailable(ctx, "queries held exceed http-query-buffer-size");
            };
            _held = Some(h);
            q
        }
        Ok(None) => {
            let h = req.headers();
            let ct = h.get(header::CONTENT_TYPE).map(HeaderValue::as_bytes);
            let len = h
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            if let Err(r) = doh::check_post(ct, len) {
                // The body read first (and dropped): a client still sending it when the
                // answer came would see its stream reset rather than the status.
                let _ = read_body(req.into_body(), ctx.conn.idle, 0).await;
                return refused(ctx, r);
            }
            // What the body may take, held while it is read and answered.
            let room = len.map_or(65_535, |n| n as usize);
            let Some(h) = reserve(&shared.tls.query_bytes, room, params.query_buffer) else {
                return unavailable(ctx, "queries held exceed http-query-buffer-size");
            };
            _held = Some(h);
            match read_body(req.into_body(), ctx.conn.idle, 65_535).await {
                Ok(b) => b,
                Err(r) => return refused(ctx, r),
            }
        }
    };
    if let Err(r) = doh::check_query(&query) {
        return refused(ctx, r);
    }
    if let Some(l) = &ctx.conn.gate
        && !l.serving()
    {
        // Another node may answer this address now: this connection closes and the
        // client reconnects (to whoever holds it).
        l.count_unleased(1);
        ctx.activity.close.notify_one();
        return unavailable(ctx, "this address is not served here now");
    }
    inc(&shared.tls.doh_queries);
    let (tx, mut rx) = mpsc::channel(1);
    let step = answer_stream(
        shared,
        &ctx.conn.stats,
        ctx.conn.peer,
        &query,
        params.pad_block,
        &tx,
    );
    // The resolver holds its own sender: when it gives the query up, the channel closes.
    drop(tx);
    match step {
        Step::Reply(framed) => answer(ctx, framed),
        Step::Resolving => {
            let wait = ctx.conn.idle.max(RESOLVE_WAIT);
            match tokio::time::timeout(wait, rx.recv()).await {
                Ok(Some(framed)) if framed.len() > 2 => answer(ctx, framed),
                _ => unavailable(ctx, "no answer from the resolver in time"),
            }
        }
        Step::Dropped(reason) => {
            use skua_engine::engine::DropReason;
            match reason {
                DropReason::Malformed => refused(ctx, Refusal::NotAQuery),
                DropReason::Acl | DropReason::Zone | DropReason::NonLocal => {
                    inc(&shared.tls.doh_stats.refused);
                    plain(StatusCode::FORBIDDEN, "not answered for this client")
                }
                // Rate limited, or no room for an answer (and any reason added later).
                _ => unavailable(ctx, "not answered now"),
            }
        }
        Step::Close => {
            ctx.activity.close.notify_one();
            inc(&shared.tls.doh_stats.refused);
            plain(StatusCode::FORBIDDEN, "not answered for this client")
        }
    }
}

/// Bytes of a body read and dropped, at most, before a refusal is answered (beyond it,
/// the stream is reset).
const DRAIN_MAX: usize = 256 * 1024;

/// A POST's body: at most `keep` octets kept (a longer body is read on to
/// [`DRAIN_MAX`] and dropped, then refused), read within `idle`.
async fn read_body(mut body: Incoming, idle: Duration, keep: usize) -> Result<Vec<u8>, Refusal> {
    use http_body_util::BodyExt as _;
    let mut out = Vec::new();
    let mut seen = 0usize;
    let read = async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(Refusal::Incomplete);
            };
            if let Ok(data) = frame.into_data() {
                seen += data.len();
                if seen > DRAIN_MAX {
                    break;
                }
                if seen <= keep {
                    out.extend_from_slice(&data);
                }
            }
        }
        if seen > keep {
            Err(Refusal::TooLarge)
        } else {
            Ok(())
        }
    };
    match tokio::time::timeout(idle, read).await {
        Ok(Ok(())) => Ok(out),
        Ok(Err(r)) => Err(r),
        Err(_) => Err(Refusal::Incomplete),
    }
}
