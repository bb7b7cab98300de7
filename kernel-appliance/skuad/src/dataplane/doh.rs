//! DNS over HTTPS (RFC 8484) on a stream listener: HTTP/2 (the h2 crate) and HTTP/1.1
//! (hyper) over TLS, or over plain TCP behind a proxy that terminates TLS
//! (`http-notls-downstream:`). Which one a connection speaks is told by its first octets
//! (the HTTP/2 connection preface, RFC 9113 §3.4), with or without TLS.
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
//! progress and nothing read or written for the idle timeout (shorter as the connection
//! slots fill, [`super::slots`]) closed gracefully; so is one with no request in progress
//! asked to make room for a new connection, given [`EVICT_GRACE`] to go.
//!
//! HTTP/2 is served by the connection's own task: a request whose query is there once its
//! headers are (a GET, or a POST whose body came with them) is answered in place from
//! local data or the cache, its response queued on the connection before the next request
//! is read. Only a request that must wait (a body still on its way, a query for the
//! resolver, a client's flow-control window with no room yet) gets a task of its
//! own. Per request that saves a task, a service call and a body type's polling: hyper's
//! HTTP/2 layer above h2 took a third of the server's time (docs/benchmarks.md §8).

use std::cell::RefCell;
use std::convert::Infallible;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

use h2::RecvStream;
use h2::server::SendResponse;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use skua_engine::doh::{self, Refusal};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, mpsc};

use super::answer::{Conn, Step, answer_stream};
use super::slots::SlotHandle;
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
/// How long a connection closed to make room for a new one has to send its `GOAWAY` (and
/// anything queued) before it is dropped.
const EVICT_GRACE: Duration = Duration::from_secs(1);
/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The body of a DNS over HTTPS response over HTTP/1.1: one chunk, its bytes counted
/// against `http-response-buffer-size:` until hyper has taken them (then the share is
/// given back).
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
    /// Milliseconds since `start` at the last read or write (kept by [`Watched`] too): the
    /// connection slot's ([`SlotHandle::last_ms`]).
    last_ms: Arc<AtomicU64>,
    /// The connection's slot: the idle timeout in force, asked to make room.
    slot: SlotHandle,
    in_progress: AtomicUsize,
    /// Close now (the address's lease ended).
    close: Notify,
}

impl Activity {
    fn touch(&self) {
        self.last_ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// When the connection goes idle, if nothing happens before (with the idle timeout in
    /// force: shorter as the slots fill).
    fn idle_at(&self, idle: Duration) -> Instant {
        self.slot.deadline(idle)
    }

    /// When the connection's watchdog looks next: the end of a graceful close (`closing`,
    /// when it ends: the requests in progress get the idle timeout once more), else when
    /// the connection goes idle, but not at once when a request in progress (a slow
    /// resolution) keeps it past that (an idle time later then, or it would spin).
    fn next_look(&self, closing: Option<Instant>, idle: Duration) -> Instant {
        match closing {
            Some(end) => end,
            None => self
                .idle_at(idle)
                .max(Instant::now() + idle.min(Duration::from_secs(1))),
        }
    }

    /// Whether the connection is idle now: no request in progress, nothing read or
    /// written for the idle timeout.
    fn is_idle(&self, idle: Duration) -> bool {
        self.in_progress.load(Ordering::Relaxed) == 0 && Instant::now() >= self.idle_at(idle)
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

/// Plaintext written to an HTTP/2 connection before it goes to TLS, held while the
/// connection's task still has requests to answer. h2 flushes whenever it has read all
/// there was, which is between every two requests when the task answers them in place: a
/// TLS record and a system call per answer (10 `writev` per `recvfrom` with ten requests
/// in flight, measured with `strace -c -f -p PID` under `h2load -m 10`). Held, the answers
/// to what one read brought go out together, in records of up to 16 KiB.
struct Coalesce<S> {
    inner: S,
    buf: Vec<u8>,
    /// How much of `buf` is written.
    done: usize,
    /// Set by the connection's task while it answers what it has read: a flush waits (the
    /// task flushes before it waits for more).
    hold: Arc<AtomicBool>,
}

/// Most plaintext held: a full TLS record.
const COALESCE_MAX: usize = 16 * 1024;

impl<S: AsyncWrite + Unpin> Coalesce<S> {
    /// Writes out what is held.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.done < self.buf.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.done..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.done += n;
        }
        self.buf.clear();
        self.done = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Coalesce<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Coalesce<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.buf.len() + data.len() > COALESCE_MAX {
            std::task::ready!(self.poll_drain(cx))?;
            if data.len() >= COALESCE_MAX {
                return Pin::new(&mut self.inner).poll_write(cx, data);
            }
        }
        self.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.hold.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        std::task::ready!(self.poll_drain(cx))?;
        // Nothing kept for an idle connection.
        if self.buf.capacity() > 4096 {
            self.buf = Vec::new();
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // A GOAWAY held goes out before the close.
        std::task::ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Reads the connection's first octets, within `idle`: whether they are HTTP/2's preface,
/// and what was read. `None`: closed (or silent) before they told.
async fn sniff<S: AsyncRead + Unpin>(io: &mut S, idle: Duration) -> Option<(bool, Bytes)> {
    let mut first = Vec::with_capacity(4096);
    let read = async {
        loop {
            let n = first.len().min(PREFACE.len());
            if first[..n] != PREFACE[..n] {
                return Some(false);
            }
            if n == PREFACE.len() {
                return Some(true);
            }
            if io.read_buf(&mut first).await.ok()? == 0 {
                return None;
            }
        }
    };
    let h2 = tokio::time::timeout(idle, read).await.ok()??;
    Some((h2, Bytes::from(first)))
}

/// Serves DNS over HTTPS on one connection (after the TLS handshake, if any) until the
/// client closes it, it stays idle for the idle timeout, or an error ends it.
pub(crate) async fn serve<S>(stream: S, conn: Conn)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let idle = conn.idle;
    let slot = conn.slot.clone();
    let activity = Arc::new(Activity {
        start: slot.epoch(),
        last_ms: slot.last_ms(),
        slot: slot.clone(),
        in_progress: AtomicUsize::new(0),
        close: Notify::new(),
    });
    let mut io = Watched {
        inner: stream,
        last: activity.last_ms.clone(),
        epoch: activity.start,
        replay: Bytes::new(),
    };
    // Nothing is owed to a client that has sent nothing yet: asked to make room, it goes.
    let first = {
        let sniffing = sniff(&mut io, slot.idle_now(idle));
        tokio::pin!(sniffing);
        loop {
            tokio::select! {
                r = &mut sniffing => break r,
                () = slot.asked() => {
                    if slot.answer_ask(true) {
                        return;
                    }
                }
            }
        }
    };
    let Some((h2, first)) = first else {
        return;
    };
    io.replay = first;
    let ctx = Arc::new(Ctx { conn, activity });
    if h2 {
        serve_h2(io, ctx).await;
    } else {
        serve_h1(io, ctx).await;
    }
}

/// HTTP/1.1, by hyper.
async fn serve_h1<S>(io: S, ctx: Arc<Ctx>)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    let idle = ctx.conn.idle;
    let activity = ctx.activity.clone();
    let shared = ctx.conn.shared.clone();
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(idle)
        .max_buf_size(MAX_HEADERS)
        .keep_alive(true);
    let svc = hyper::service::service_fn(move |req| {
        let ctx = ctx.clone();
        async move { Ok::<_, Infallible>(handle_h1(req, &ctx).await) }
    });
    let conn = b.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let mut closing: Option<Instant> = None;
    let slot = activity.slot.clone();
    loop {
        let wake = activity.next_look(closing, idle);
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = activity.close.notified(), if closing.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing = Some(Instant::now() + idle);
            }
            () = slot.asked(), if closing.is_none() => {
                if slot.answer_ask(activity.in_progress.load(Ordering::Relaxed) == 0) {
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now() + idle.min(EVICT_GRACE));
                }
            }
            () = slot.rose(), if closing.is_none() => {}
            _ = tokio::time::sleep_until(wake.into()) => {
                if closing.is_some() {
                    break;
                }
                if activity.is_idle(idle) {
                    inc(&shared.tls.doh_stats.idle_closed);
                    slot.timed_out(idle);
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now() + idle);
                }
            }
        }
    }
}

/// HTTP/2, by h2, requests answered by the connection's task where they can be.
async fn serve_h2<S>(io: S, ctx: Arc<Ctx>)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let idle = ctx.conn.idle;
    let params = ctx.conn.shared.tls.doh.load_full();
    let mut b = h2::server::Builder::new();
    b.max_concurrent_streams(params.max_streams)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_local_error_reset_streams(Some(MAX_PENDING_RESETS))
        .max_header_list_size(MAX_HEADERS as u32)
        // A query is at most 65535 octets: no stream needs a larger window, and the
        // connection's bounds what a client can make skuad hold before it reads.
        .initial_window_size(65_535)
        .initial_connection_window_size(512 * 1024)
        .max_send_buffer_size(64 * 1024);
    let hold = Arc::new(AtomicBool::new(false));
    let io = Coalesce {
        inner: io,
        buf: Vec::new(),
        done: 0,
        hold: hold.clone(),
    };
    let Ok(Ok(mut conn)) = tokio::time::timeout(idle, b.handshake::<_, Bytes>(io)).await else {
        return;
    };
    let activity = &ctx.activity;
    let slot = &activity.slot;
    let mut closing: Option<Instant> = None;
    loop {
        let wake = activity.next_look(closing, idle);
        // Every request there is, answered (or handed to a task) as it comes, the
        // answers held; when there is none to take now, the connection is polled once
        // more without holding: what was queued goes out in one write. Ready at the end
        // of the connection, or a connection error (h2 has sent its GOAWAY). Requests are
        // taken inside one poll, not one per turn of this loop: a turn makes a timer and
        // a notification anew.
        let serving = std::future::poll_fn(|cx| {
            let mut take = |cx: &mut Context<'_>| loop {
                match std::pin::pin!(conn.accept()).poll(cx) {
                    Poll::Ready(Some(Ok((req, respond)))) => request_h2(req, respond, &ctx),
                    Poll::Ready(_) => return Poll::Ready(()),
                    Poll::Pending => return Poll::Pending,
                }
            };
            hold.store(true, Ordering::Relaxed);
            if take(cx).is_ready() {
                return Poll::Ready(());
            }
            hold.store(false, Ordering::Relaxed);
            take(cx)
        });
        tokio::select! {
            () = serving => break,
            _ = activity.close.notified(), if closing.is_none() => {
                conn.graceful_shutdown();
                closing = Some(Instant::now() + idle);
            }
            () = slot.asked(), if closing.is_none() => {
                if slot.answer_ask(activity.in_progress.load(Ordering::Relaxed) == 0) {
                    conn.graceful_shutdown();
                    closing = Some(Instant::now() + idle.min(EVICT_GRACE));
                }
            }
            () = slot.rose(), if closing.is_none() => {}
            _ = tokio::time::sleep_until(wake.into()) => {
                if closing.is_some() {
                    break;
                }
                if activity.is_idle(idle) {
                    inc(&ctx.conn.shared.tls.doh_stats.idle_closed);
                    slot.timed_out(idle);
                    conn.graceful_shutdown();
                    closing = Some(Instant::now() + idle);
                }
            }
        }
    }
}

/// A response, before it goes out over HTTP/2 or HTTP/1.1.
struct Reply {
    status: StatusCode,
    body: Bytes,
    /// A DNS answer and its freshness lifetime in seconds (RFC 8484 §5.1); else plain
    /// text, not to be kept.
    max_age: Option<u32>,
    /// The answer's share of `http-response-buffer-size:`, until the connection takes it.
    held: Option<Reserved>,
}

impl Reply {
    /// `status` and a short plain-text reason.
    fn plain(status: StatusCode, reason: &'static str) -> Self {
        Self {
            status,
            body: Bytes::from_static(reason.as_bytes()),
            max_age: None,
            held: None,
        }
    }

    /// The status and the header fields.
    fn head(&self) -> Response<()> {
        let mut r = Response::new(());
        *r.status_mut() = self.status;
        let h = r.headers_mut();
        match self.max_age {
            Some(age) => {
                h.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(doh::MEDIA_TYPE),
                );
                if let Ok(v) = HeaderValue::from_str(&format!("max-age={age}")) {
                    h.insert(header::CACHE_CONTROL, v);
                }
            }
            None => {
                h.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            }
        }
        if self.status == StatusCode::METHOD_NOT_ALLOWED {
            // RFC 9110 §15.5.6: a 405 lists the methods that are allowed.
            h.insert(header::ALLOW, HeaderValue::from_static("GET, POST"));
        }
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(self.body.len()));
        // RFC 9110 §6.6.1: an origin server with a clock sends Date.
        h.insert(header::DATE, date());
        r
    }

    fn into_h1(self) -> Response<DohBody> {
        let (parts, ()) = self.head().into_parts();
        Response::from_parts(
            parts,
            DohBody {
                data: Some(self.body),
                _held: self.held,
            },
        )
    }
}

/// The `Date` field's value now (formatted once a second per thread).
fn date() -> HeaderValue {
    thread_local! {
        static DATE: RefCell<(u64, HeaderValue)> =
            const { RefCell::new((u64::MAX, HeaderValue::from_static(""))) };
    }
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs
            && let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(now))
        {
            *d = (secs, v);
        }
        d.1.clone()
    })
}

/// The response to a request that is not a DNS query.
fn refused(ctx: &Ctx, r: Refusal) -> Reply {
    inc(&ctx.conn.shared.tls.doh_stats.refused);
    let status = StatusCode::from_u16(r.status()).unwrap_or(StatusCode::BAD_REQUEST);
    Reply::plain(status, r.reason())
}

/// 503: no room (a buffer limit) or no answer (the resolver's queue, its time).
fn unavailable(ctx: &Ctx, reason: &'static str) -> Reply {
    inc(&ctx.conn.shared.tls.doh_stats.unavailable);
    Reply::plain(StatusCode::SERVICE_UNAVAILABLE, reason)
}

/// The 200 response carrying the DNS answer `msg` (RFC 8484 §4.2: HTTP gives its length), with its
/// freshness lifetime (§5.1).
fn answer(ctx: &Ctx, msg: Vec<u8>) -> Reply {
    let shared = &ctx.conn.shared;
    let params = shared.tls.doh.load();
    let msg = Bytes::from(msg);
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
    Reply {
        status: StatusCode::OK,
        body: msg,
        max_age: Some(age),
        held: Some(held),
    }
}

/// What a request asks, from its method, target and header fields.
enum Start {
    /// Answered as it is: a refusal, or no room.
    Reply(Reply),
    /// GET: the query (from the `dns` parameter), with its share of
    /// `http-query-buffer-size:`.
    Query(Vec<u8>, Reserved),
    /// POST: the query is the body, held as it is read; or, with a refusal, the body is
    /// read and dropped before the refusal is answered (a client still sending it when
    /// the answer came would see its stream reset rather than the status).
    Body(Result<Reserved, Refusal>),
}

fn start(method: &Method, uri: &Uri, headers: &HeaderMap, ctx: &Ctx) -> Start {
    let shared = &ctx.conn.shared;
    let params = shared.tls.doh.load();
    let method = match *method {
        Method::GET => doh::Method::Get,
        Method::POST => doh::Method::Post,
        _ => doh::Method::Other,
    };
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    match doh::check_target(method, target, &params.endpoint) {
        Err(r) => Start::Reply(refused(ctx, r)),
        // The query's bytes count against http-query-buffer-size until it is answered.
        Ok(Some(q)) => match reserve(&shared.tls.query_bytes, q.len(), params.query_buffer) {
            Some(h) => Start::Query(q, h),
            None => Start::Reply(unavailable(
                ctx,
                "queries held exceed http-query-buffer-size",
            )),
        },
        Ok(None) => {
            let ct = headers.get(header::CONTENT_TYPE).map(HeaderValue::as_bytes);
            let len = headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            if let Err(r) = doh::check_post(ct, len) {
                return Start::Body(Err(r));
            }
            // What the body may take, held while it is read and answered.
            let room = len.map_or(65_535, |n| n as usize);
            match reserve(&shared.tls.query_bytes, room, params.query_buffer) {
                Some(h) => Start::Body(Ok(h)),
                None => Start::Reply(unavailable(
                    ctx,
                    "queries held exceed http-query-buffer-size",
                )),
            }
        }
    }
}

/// A query's answer: now (local data, the cache, a refusal) or from the resolver.
enum Resolved {
    Now(Reply),
    Later(mpsc::Receiver<Vec<u8>>),
}

/// Answers `query` through the same path as one over TCP.
fn resolve(query: &[u8], ctx: &Ctx) -> Resolved {
    let shared = &ctx.conn.shared;
    if let Err(r) = doh::check_query(query) {
        return Resolved::Now(refused(ctx, r));
    }
    if let Some(l) = &ctx.conn.gate
        && !l.serving()
    {
        // Another node may answer this address now: this connection closes and the
        // client reconnects (to whoever holds it).
        l.count_unleased(1);
        ctx.activity.close.notify_one();
        return Resolved::Now(unavailable(ctx, "this address is not served here now"));
    }
    inc(&shared.tls.doh_queries);
    let pad = shared.tls.doh.load().pad_block;
    let mut rx = None;
    let kind = skua_serve::Kind::Https;
    let step = answer_stream(
        shared,
        &ctx.conn.stats,
        kind,
        ctx.conn.peer,
        query,
        pad,
        || {
            // The resolver holds the only sender: when it gives the query up, the channel
            // closes.
            let (tx, r) = mpsc::channel(1);
            rx = Some(r);
            tx
        },
    );
    Resolved::Now(match step {
        Step::Reply(msg) => answer(ctx, msg),
        Step::Resolving => match rx {
            Some(rx) => return Resolved::Later(rx),
            None => unavailable(ctx, "no answer from the resolver in time"),
        },
        Step::Dropped(reason) => {
            use skua_engine::engine::DropReason;
            match reason {
                DropReason::Malformed => refused(ctx, Refusal::NotAQuery),
                DropReason::Acl | DropReason::Zone | DropReason::NonLocal => {
                    inc(&shared.tls.doh_stats.refused);
                    Reply::plain(StatusCode::FORBIDDEN, "not answered for this client")
                }
                // Rate limited, or no room for an answer (and any reason added later).
                _ => unavailable(ctx, "not answered now"),
            }
        }
        Step::Close => {
            ctx.activity.close.notify_one();
            inc(&shared.tls.doh_stats.refused);
            Reply::plain(StatusCode::FORBIDDEN, "not answered for this client")
        }
    })
}

/// The resolver's answer, within its time.
async fn wait(mut rx: mpsc::Receiver<Vec<u8>>, ctx: &Ctx) -> Reply {
    let wait = ctx.conn.idle.max(RESOLVE_WAIT);
    match tokio::time::timeout(wait, rx.recv()).await {
        Ok(Some(msg)) if !msg.is_empty() => answer(ctx, msg),
        _ => unavailable(ctx, "no answer from the resolver in time"),
    }
}

/// Answers one HTTP/1.1 request.
async fn handle_h1(req: Request<Incoming>, ctx: &Ctx) -> Response<DohBody> {
    let _busy = InProgress::new(&ctx.activity);
    let (query, _held) = match start(req.method(), req.uri(), req.headers(), ctx) {
        Start::Reply(r) => return r.into_h1(),
        Start::Query(q, h) => (q, h),
        Start::Body(held) => {
            let keep = if held.is_ok() { 65_535 } else { 0 };
            let read = read_body(req.into_body(), ctx.conn.idle, keep).await;
            match (held, read) {
                (Err(r), _) | (_, Err(r)) => return refused(ctx, r).into_h1(),
                (Ok(h), Ok(b)) => (b, h),
            }
        }
    };
    match resolve(&query, ctx) {
        Resolved::Now(r) => r,
        Resolved::Later(rx) => wait(rx, ctx).await,
    }
    .into_h1()
}

/// Answers one HTTP/2 request: in place when its query is complete and the answer ready,
/// else from a task of its own.
fn request_h2(req: Request<RecvStream>, respond: SendResponse<Bytes>, ctx: &Arc<Ctx>) {
    let (parts, mut body) = req.into_parts();
    let (query, held) = match start(&parts.method, &parts.uri, &parts.headers, ctx) {
        Start::Reply(r) => return send_h2(respond, r, ctx.conn.idle),
        Start::Query(q, h) => (q, h),
        Start::Body(held) => {
            let mut read = BodyRead::new(if held.is_ok() { 65_535 } else { 0 });
            // What came with the headers is read now (h2 has taken in all the
            // connection had to read); only a body still on its way needs a task.
            let now = read.poll_h2(&mut body, &mut Context::from_waker(Waker::noop()));
            if let Poll::Ready(r) = now {
                match (held, r) {
                    (Err(r), _) | (_, Err(r)) => {
                        return send_h2(respond, refused(ctx, r), ctx.conn.idle);
                    }
                    (Ok(h), Ok(())) => (read.out, h),
                }
            } else {
                let ctx = ctx.clone();
                // In progress (the idle timeout waits for it) until answered. One answered
                // in place needs no count: it is answered before the connection's task
                // looks at the time again.
                let busy = InProgress::new(&ctx.activity);
                tokio::spawn(async move {
                    let idle = ctx.conn.idle;
                    let r = tokio::time::timeout(
                        idle,
                        std::future::poll_fn(|cx| read.poll_h2(&mut body, cx)),
                    )
                    .await
                    .unwrap_or(Err(Refusal::Incomplete));
                    match (held, r) {
                        (Err(r), _) | (_, Err(r)) => send_h2(respond, refused(&ctx, r), idle),
                        (Ok(h), Ok(())) => settle_h2(read.out, h, respond, &ctx),
                    }
                    drop(busy);
                });
                return;
            }
        }
    };
    settle_h2(query, held, respond, ctx);
}

/// Answers `query` on an HTTP/2 stream, now if the answer is ready, else from a task that
/// waits for the resolver (holding the query's share of the buffer, counted in progress).
fn settle_h2(query: Vec<u8>, held: Reserved, mut respond: SendResponse<Bytes>, ctx: &Arc<Ctx>) {
    match resolve(&query, ctx) {
        Resolved::Now(r) => send_h2(respond, r, ctx.conn.idle),
        Resolved::Later(rx) => {
            let ctx = ctx.clone();
            let busy = InProgress::new(&ctx.activity);
            tokio::spawn(async move {
                // A stream the client resets meanwhile (RST_STREAM) is given up at once:
                // h2 frees its place among http-max-streams then, and so is its share of
                // the buffer and its count in progress (else a client could keep more
                // queries waiting than http-max-streams, resetting each).
                let r = {
                    let reset = std::future::poll_fn(|cx| respond.poll_reset(cx));
                    tokio::select! {
                        r = wait(rx, &ctx) => Some(r),
                        _ = reset => None,
                    }
                };
                if let Some(r) = r {
                    send_h2(respond, r, ctx.conn.idle);
                }
                drop((held, busy));
            });
        }
    }
}

/// Queues a response on its HTTP/2 stream. The answer goes to h2 as soon as the client's
/// flow-control window (RFC 9113 §5.2) has room for any of it (h2 sends the rest as the
/// window opens), and its share of `http-response-buffer-size:` is given back then. Only
/// one octet is asked of the window, as hyper does: capacity reserved for a whole answer
/// the window cannot take would be held from the connection's other streams, and a client
/// that opens its window only as data comes would never see any. An answer the client has
/// no window for waits counted, in a task, for the idle timeout at most; then the stream
/// is reset (CANCEL) and the share given back.
fn send_h2(mut respond: SendResponse<Bytes>, r: Reply, idle: Duration) {
    let Ok(mut s) = respond.send_response(r.head(), false) else {
        return;
    };
    let Reply { body, held, .. } = r;
    s.reserve_capacity(1);
    if held.is_none() || s.capacity() > 0 {
        let _ = s.send_data(body, true);
        return;
    }
    tokio::spawn(async move {
        let _held = held;
        let room = std::future::poll_fn(|cx| s.poll_capacity(cx));
        match tokio::time::timeout(idle, room).await {
            Ok(Some(Ok(_))) => {
                let _ = s.send_data(body, true);
            }
            // No room within the idle timeout.
            Err(_) => s.send_reset(h2::Reason::CANCEL),
            // The stream or the connection ended.
            Ok(_) => {}
        }
    });
}

/// A POST body being read: at most `keep` octets kept; a longer body is read on to
/// [`DRAIN_MAX`] and dropped, then refused.
struct BodyRead {
    out: Vec<u8>,
    seen: usize,
    keep: usize,
}

impl BodyRead {
    fn new(keep: usize) -> Self {
        Self {
            out: Vec::new(),
            seen: 0,
            keep,
        }
    }

    /// Takes a chunk; false once past [`DRAIN_MAX`] (read no more).
    fn take(&mut self, data: &[u8]) -> bool {
        self.seen += data.len();
        if self.seen > DRAIN_MAX {
            return false;
        }
        if self.seen <= self.keep {
            self.out.extend_from_slice(data);
        }
        true
    }

    /// The verdict once the body has ended (or reading stopped).
    fn end(&self) -> Result<(), Refusal> {
        if self.seen > self.keep {
            Err(Refusal::TooLarge)
        } else {
            Ok(())
        }
    }

    /// Reads an HTTP/2 body on, giving what it read back to the client's flow-control
    /// windows (RFC 9113 §6.9).
    fn poll_h2(
        &mut self,
        body: &mut RecvStream,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), Refusal>> {
        loop {
            match body.poll_data(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => break,
                Poll::Ready(Some(Err(_))) => return Poll::Ready(Err(Refusal::Incomplete)),
                Poll::Ready(Some(Ok(d))) => {
                    let _ = body.flow_control().release_capacity(d.len());
                    if !self.take(&d) {
                        break;
                    }
                }
            }
        }
        Poll::Ready(self.end())
    }
}

/// Bytes of a body read and dropped, at most, before a refusal is answered (beyond it,
/// the stream is reset).
const DRAIN_MAX: usize = 256 * 1024;

/// An HTTP/1.1 POST's body ([`BodyRead`]), read within `idle`.
async fn read_body(mut body: Incoming, idle: Duration, keep: usize) -> Result<Vec<u8>, Refusal> {
    use http_body_util::BodyExt as _;
    let mut b = BodyRead::new(keep);
    let read = async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(Refusal::Incomplete);
            };
            if let Ok(data) = frame.into_data()
                && !b.take(&data)
            {
                break;
            }
        }
        b.end()
    };
    match tokio::time::timeout(idle, read).await {
        Ok(Ok(())) => Ok(b.out),
        Ok(Err(r)) => Err(r),
        Err(_) => Err(Refusal::Incomplete),
    }
}
