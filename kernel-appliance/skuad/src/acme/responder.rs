//! HTTP-01 (RFC 8555 §8.3): the tokens served on `http-01-interface:` while an order is
//! validated.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::Acme;

/// Serves HTTP-01 tokens (`GET /.well-known/acme-challenge/TOKEN`) on `addr` until aborted.
pub(super) async fn http_server(
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
