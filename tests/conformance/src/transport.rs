//! Sending queries with bounded waits. Call these from a thread that is
//! inside the test namespace ([`crate::netns::NetNs::run_in`]).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// What came back for one query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Nothing within the timeout (dropped, or the connection was closed).
    None,
    /// The message received.
    Message(Vec<u8>),
}

/// Sends every `(id, wire)` over UDP to `server`, keeping at most `window`
/// queries in flight; each query waits at most `timeout` for its reply
/// (matched by ID). The whole call is bounded by
/// `timeout * (2 + len / window) + 10 s`.
pub fn udp_exchange(
    server: SocketAddr,
    items: &[(u16, Vec<u8>)],
    window: usize,
    timeout: Duration,
) -> Result<Vec<Reply>, String> {
    let sock = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("udp bind: {e}"))?;
    sock.connect(server)
        .map_err(|e| format!("udp connect {server}: {e}"))?;
    sock.set_read_timeout(Some(Duration::from_millis(2)))
        .map_err(|e| format!("udp timeout: {e}"))?;
    let mut results = vec![Reply::None; items.len()];
    let mut inflight: HashMap<u16, (usize, Instant)> = HashMap::new();
    let mut next = 0;
    let batches = u32::try_from(items.len() / window.max(1)).unwrap_or(u32::MAX);
    let hard_deadline =
        Instant::now() + timeout * batches.saturating_add(2) + Duration::from_secs(10);
    let mut buf = vec![0u8; 65535];
    loop {
        while inflight.len() < window && next < items.len() {
            let (id, wire) = &items[next];
            match sock.send(wire) {
                Ok(_) => {
                    inflight.insert(*id, (next, Instant::now()));
                    next += 1;
                }
                // Full socket buffer: let replies drain first.
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // ICMP port unreachable from an earlier send: retry this one
                // on the next round (after the deadline check).
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
                Err(e) => return Err(format!("udp send: {e}")),
            }
        }
        if inflight.is_empty() && next >= items.len() {
            break;
        }
        match sock.recv(&mut buf) {
            Ok(n) if n >= 2 => {
                let id = u16::from_be_bytes([buf[0], buf[1]]);
                if let Some((idx, _)) = inflight.remove(&id) {
                    results[idx] = Reply::Message(buf[..n].to_vec());
                }
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => return Err(format!("udp recv: {e}")),
        }
        let now = Instant::now();
        inflight.retain(|_, (_, sent)| now.duration_since(*sent) < timeout);
        if now >= hard_deadline {
            break;
        }
    }
    Ok(results)
}

/// One query over a fresh TCP connection; connect, write and every read are
/// bounded by `timeout`.
pub fn tcp_exchange(server: SocketAddr, wire: &[u8], timeout: Duration) -> Result<Reply, String> {
    let mut s = match TcpStream::connect_timeout(&server, timeout) {
        Ok(s) => s,
        Err(e) => return Err(format!("tcp connect {server}: {e}")),
    };
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    let len = u16::try_from(wire.len()).map_err(|_| "query too long")?;
    let mut framed = len.to_be_bytes().to_vec();
    framed.extend_from_slice(wire);
    if s.write_all(&framed).is_err() {
        return Ok(Reply::None);
    }
    let mut lenbuf = [0u8; 2];
    if s.read_exact(&mut lenbuf).is_err() {
        return Ok(Reply::None);
    }
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(lenbuf))];
    if s.read_exact(&mut msg).is_err() {
        return Ok(Reply::None);
    }
    Ok(Reply::Message(msg))
}
