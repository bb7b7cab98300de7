//! The REST API's HTTP/1.1 server: accept loop, connection caps, deadlines.
//!
//! The API is reachable before authentication, so nothing a client can do without a token
//! may hold resources for long or take them from DNS:
//!
//! - **Caps**: at most `api: max-connections:` connections at once (default 64) and
//!   `max-connections-per-source:` from one source (an IPv4 address or an IPv6 /64,
//!   default 8). At a cap, a new connection takes the place of the **idle** connection
//!   (no request in progress: half a request line, or keep-alive between requests) that
//!   made progress longest ago; when every connection has a request in progress, the new
//!   one is closed at once. So a flood of half-open connections cannot keep out a client
//!   that sends its request at once (skuactl), and the API's descriptors stay far below the
//!   process limit (`LimitNOFILE=` of the unit) that DNS over TCP needs too.
//! - **Deadlines**: the request head must arrive within [`HEADER_TIMEOUT`] of the connection
//!   becoming idle (hyper's header-read timer, which also ends idle keep-alive); a request
//!   body within [`BODY_TIMEOUT`] (the handlers read it with a deadline); a connection on
//!   which nothing moves in either direction for [`STALL_TIMEOUT`] while no handler is at
//!   work on it (a client that stops reading its response) is closed; a TLS handshake must end within [`HANDSHAKE_TIMEOUT`].
//! - **Accept errors** (`EMFILE` when the process is out of descriptors) are logged once per
//!   [`ERROR_LOG_INTERVAL`](crate::base::log::ERROR_LOG_INTERVAL) with their count, and the loop backs off, instead of a line every
//!   few milliseconds.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use crate::base::log;
use crate::base::watched::Watched;
use crate::control::auth::source_key;

/// Time for a request head, counted from when the connection is idle (accepted, or done
/// with its previous request).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time for a request body, from the end of its head.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection on which no byte moves either way for this long is closed.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Time for a TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connection caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// All sources together.
    pub total: usize,
    /// One source ([`source_key`]).
    pub per_source: usize,
}

impl Caps {
    /// The caps of an `api:` clause.
    pub fn of(cfg: &skua_config::Api) -> Caps {
        Caps {
            total: cfg.max_connections as usize,
            per_source: cfg.max_connections_per_source as usize,
        }
    }
}

/// One tracked connection.
struct Entry {
    key: IpAddr,
    /// Requests in progress on it.
    busy: Arc<AtomicUsize>,
    /// Milliseconds (since the tracker's epoch) of its last byte read or written.
    last: Arc<AtomicU64>,
    /// Told when the connection must close (evicted).
    close: Arc<Notify>,
}

/// The open connections, for the caps.
pub struct Tracker {
    caps: Mutex<Caps>,
    epoch: Instant,
    conns: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
    /// Connections refused (every one busy) and evicted, for the log.
    refused: AtomicU64,
    evicted: AtomicU64,
}

/// What [`Tracker::admit`] gives a connection: its handles; dropping it forgets the
/// connection.
pub struct Admitted {
    tracker: Arc<Tracker>,
    id: u64,
    busy: Arc<AtomicUsize>,
    last: Arc<AtomicU64>,
    close: Arc<Notify>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.tracker
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

impl Tracker {
    /// A tracker with these caps.
    pub fn new(caps: Caps) -> Arc<Tracker> {
        Arc::new(Tracker {
            caps: Mutex::new(caps),
            epoch: Instant::now(),
            conns: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        })
    }

    /// Changes the caps (reload); connections over a lowered cap are closed as they go
    /// idle and new ones arrive, not at once.
    pub fn set_caps(&self, caps: Caps) {
        *self.caps.lock().unwrap_or_else(|e| e.into_inner()) = caps;
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Connections open now (tests, metrics).
    pub fn open(&self) -> usize {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Takes a place for a connection from `peer`, making room by closing the idle
    /// connection that made progress longest ago (of the same source when that source is
    /// at its cap); `None` when no place can be made.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Admitted> {
        let caps = *self.caps.lock().unwrap_or_else(|e| e.into_inner());
        let key = source_key(peer);
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let oldest_idle = |conns: &HashMap<u64, Entry>, same: bool| {
            conns
                .iter()
                .filter(|(_, e)| (!same || e.key == key) && e.busy.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, e)| e.last.load(Ordering::Relaxed))
                .map(|(id, _)| *id)
        };
        let evict = |conns: &mut HashMap<u64, Entry>, same: bool| -> bool {
            match oldest_idle(conns, same) {
                Some(id) => {
                    if let Some(e) = conns.remove(&id) {
                        e.close.notify_one();
                    }
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                    true
                }
                None => false,
            }
        };
        while conns.values().filter(|e| e.key == key).count() >= caps.per_source.max(1) {
            if !evict(&mut conns, true) {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        while conns.len() >= caps.total.max(1) {
            if !evict(&mut conns, false) {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let busy = Arc::new(AtomicUsize::new(0));
        let last = Arc::new(AtomicU64::new(self.now_ms()));
        let close = Arc::new(Notify::new());
        conns.insert(
            id,
            Entry {
                key,
                busy: busy.clone(),
                last: last.clone(),
                close: close.clone(),
            },
        );
        Some(Admitted {
            tracker: self.clone(),
            id,
            busy,
            last,
            close,
        })
    }

    /// Connections admitted since start.
    pub fn admitted(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// (refused, evicted) since start.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.refused.load(Ordering::Relaxed),
            self.evicted.load(Ordering::Relaxed),
        )
    }
}

/// Decrements a connection's busy count when a request ends (or its future is dropped).
struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where TLS comes from for a listener: `None` for plain HTTP; else called at each
/// connection (a reload after a renewal takes effect for the next connection). The call
/// returning `None` means TLS was switched off by a reload: the listener stays HTTPS until
/// restart, so the connection is closed.
pub type TlsSource =
    Option<Arc<dyn Fn() -> Option<Arc<tokio_rustls::rustls::ServerConfig>> + Send + Sync>>;

/// Serves `router` on `listener` until `stop` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tracker: Arc<Tracker>,
    tls: TlsSource,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    tokio::pin!(stop);
    let mut errors = 0u64;
    let mut last_log: Option<Instant> = None;
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(v) => v,
                Err(e) => {
                    errors += 1;
                    if last_log.is_none_or(|t| t.elapsed() >= crate::base::log::ERROR_LOG_INTERVAL) {
                        log::warn(format_args!(
                            "api: accept: {e} ({errors} accept errors since the last report; the API's connections are capped at {})",
                            tracker.caps.lock().unwrap_or_else(|e| e.into_inner()).total
                        ));
                        last_log = Some(Instant::now());
                        errors = 0;
                    }
                    // Out of descriptors: let connections close before trying again.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut stop => return Ok(()),
        };
        let Some(admitted) = tracker.admit(peer.ip()) else {
            // Every connection has a request in progress: this one waits its turn outside.
            drop(tcp);
            continue;
        };
        let tls = match &tls {
            None => None,
            Some(f) => match f() {
                Some(c) => Some(c),
                None => continue,
            },
        };
        let router = router.clone();
        tokio::spawn(connection(tcp, peer, router, admitted, tls));
    }
}

async fn connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    router: axum::Router,
    admitted: Admitted,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
) {
    let io = Watched {
        inner: tcp,
        last: admitted.last.clone(),
        epoch: admitted.tracker.epoch,
        replay: Default::default(),
    };
    let close = admitted.close.clone();
    let work = async {
        match tls {
            None => serve_http(io, ConnectInfo(peer), router, admitted.busy.clone()).await,
            Some(cfg) => {
                let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
                    Ok(Ok(t)) => {
                        serve_http(t, ConnectInfo(peer), router, admitted.busy.clone()).await
                    }
                    Ok(Err(e)) => log::warn(format_args!("api: {peer}: TLS handshake: {e}")),
                    Err(_) => {}
                }
            }
        }
    };
    let watchdog = async {
        let epoch = admitted.tracker.epoch;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
            let last = admitted.last.load(Ordering::Relaxed);
            // A handler at work (a reload of a large configuration, an audit
            // verification) moves no bytes and is not a stall.
            if admitted.busy.load(Ordering::Acquire) == 0
                && now.saturating_sub(last) >= STALL_TIMEOUT.as_millis() as u64
            {
                return;
            }
        }
    };
    tokio::select! {
        () = work => {}
        () = close.notified() => {}
        () = watchdog => {}
    }
    drop(admitted);
}

/// Serves HTTP/1.1 on one connection; every request carries `peer` (who is calling: the
/// TCP source address, or the local socket's credentials) in its extensions.
pub(crate) async fn serve_http<I, P>(io: I, peer: P, router: axum::Router, busy: Arc<AtomicUsize>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    P: Clone + Send + Sync + 'static,
{
    let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        busy.fetch_add(1, Ordering::AcqRel);
        let guard = Busy(busy.clone());
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(peer.clone());
        let router = router.clone();
        async move {
            let r = tower::ServiceExt::oneshot(router, req).await;
            drop(guard);
            r
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn caps_evict_the_oldest_idle_connection_and_spare_busy_ones() {
        let t = Tracker::new(Caps {
            total: 3,
            per_source: 2,
        });
        let a1 = t.admit(ip("198.18.0.1")).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let a2 = t.admit(ip("198.18.0.1")).unwrap();
        // a1 has a request in progress: a third from the same source evicts a2.
        a1.busy.fetch_add(1, Ordering::AcqRel);
        let a3 = t.admit(ip("198.18.0.1")).unwrap();
        assert_eq!(t.open(), 2);
        assert!(!t.conns.lock().unwrap().contains_key(&a2.id));
        // Both of that source's connections busy: the next one from it is refused.
        a3.busy.fetch_add(1, Ordering::AcqRel);
        assert!(t.admit(ip("198.18.0.1")).is_none());
        // Another source still gets in; at the total cap, with every connection busy,
        // nobody does.
        let b = t.admit(ip("198.18.0.2")).unwrap();
        b.busy.fetch_add(1, Ordering::AcqRel);
        assert!(t.admit(ip("198.18.0.3")).is_none());
        // One goes idle: it makes room.
        b.busy.fetch_sub(1, Ordering::AcqRel);
        let c = t.admit(ip("198.18.0.3")).unwrap();
        assert!(!t.conns.lock().unwrap().contains_key(&b.id));
        assert_eq!(t.counts(), (2, 2));
        drop((a1, a2, a3, b, c));
        assert_eq!(t.open(), 0);
    }

    #[test]
    fn ipv6_sources_share_their_64() {
        let t = Tracker::new(Caps {
            total: 100,
            per_source: 2,
        });
        let x = t.admit(ip("fd00:0:0:1::1")).unwrap();
        let y = t.admit(ip("fd00:0:0:1::2")).unwrap();
        x.busy.fetch_add(1, Ordering::AcqRel);
        y.busy.fetch_add(1, Ordering::AcqRel);
        assert!(t.admit(ip("fd00:0:0:1:ffff::3")).is_none());
        assert!(t.admit(ip("fd00:0:0:2::1")).is_some());
    }
}
