//! A stream that notes when bytes last moved on it: the idle timeouts of the HTTP servers
//! (the REST API, DNS over HTTPS) close a connection by what it did, not by a timer
//! reset on every request.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::body::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner`, noting in `last` the milliseconds since `epoch` at each read or write that
/// moves bytes.
pub struct Watched<T> {
    /// The stream.
    pub inner: T,
    /// Milliseconds since `epoch` at the last read or write.
    pub last: Arc<AtomicU64>,
    /// Where `last` counts from.
    pub epoch: Instant,
    /// Octets read already, read again before the stream's next ones (DNS over HTTPS reads
    /// a connection's first octets to tell HTTP/2 from HTTP/1.1).
    pub replay: Bytes,
}

impl<T> Watched<T> {
    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.replay.is_empty() {
            let n = self.replay.len().min(buf.remaining());
            buf.put_slice(&self.replay.split_to(n));
            if self.replay.is_empty() {
                // The buffer it was read into is not kept for the connection's life.
                self.replay = Bytes::new();
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
