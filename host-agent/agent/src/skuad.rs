//! The agent's client of skuad's lease routes (`POST /ha/lease`, `POST /ha/release`,
//! `GET /health`): HTTP/1.1 with a kept-alive connection over skuad's local control socket
//! (the caller known by its credentials) or its REST API (with an operator token).
//!
//! Hand-written on purpose: three small JSON requests ten times a second on a connection
//! that must never block the VRRP loop for long; every call has a short deadline
//! ([`DEADLINE`]) and a broken connection is simply opened again on the next call.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// How long one call may take (connect, write, read): a fraction of an advert interval.
pub const DEADLINE: Duration = Duration::from_millis(50);

/// Where skuad is.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// Its control socket.
    Unix(std::path::PathBuf),
    /// Its REST API (plain HTTP on the host's own link to the appliance).
    Http(SocketAddr),
}

impl Endpoint {
    /// `unix:PATH` or `http://ADDR:PORT`.
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            return Ok(Endpoint::Unix(p.into()));
        }
        if let Some(a) = s.strip_prefix("http://") {
            let a = a.trim_end_matches('/');
            return a
                .parse()
                .map(Endpoint::Http)
                .map_err(|_| format!("skuad = '{s}': http://ADDR:PORT with an IP address"));
        }
        Err(format!(
            "skuad = '{s}': must be unix:PATH or http://ADDR:PORT"
        ))
    }
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// An answer: status and body.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The body (JSON).
    pub body: String,
}

/// A connection to skuad, reopened as needed.
pub struct Client {
    endpoint: Endpoint,
    token: Option<String>,
    conn: Option<BufReader<Box<dyn Stream>>>,
}

impl Client {
    /// A client of `endpoint` (`token` for HTTP).
    pub fn new(endpoint: Endpoint, token: Option<String>) -> Self {
        Client {
            endpoint,
            token,
            conn: None,
        }
    }

    fn connect(&self) -> io::Result<Box<dyn Stream>> {
        match &self.endpoint {
            Endpoint::Unix(p) => {
                let s = UnixStream::connect(p)?;
                s.set_read_timeout(Some(DEADLINE))?;
                s.set_write_timeout(Some(DEADLINE))?;
                Ok(Box::new(s))
            }
            Endpoint::Http(a) => {
                let s = TcpStream::connect_timeout(a, DEADLINE)?;
                s.set_read_timeout(Some(DEADLINE))?;
                s.set_write_timeout(Some(DEADLINE))?;
                s.set_nodelay(true)?;
                Ok(Box::new(s))
            }
        }
    }

    /// One request; a failure closes the connection (the next call opens another).
    pub fn call(&mut self, method: &str, path: &str, body: Option<&str>) -> io::Result<Reply> {
        let r = self.call_once(method, path, body);
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    fn call_once(&mut self, method: &str, path: &str, body: Option<&str>) -> io::Result<Reply> {
        if self.conn.is_none() {
            self.conn = Some(BufReader::new(self.connect()?));
        }
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: skuad\r\n");
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        let body = body.unwrap_or("");
        if method == "POST" {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        let conn = self.conn.as_mut().expect("connected above");
        conn.get_mut().write_all(req.as_bytes())?;
        // Status line, headers (Content-Length only: skuad never chunks these), body.
        let mut line = String::new();
        conn.read_line(&mut line)?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad status line"))?;
        let mut len = 0usize;
        let mut close = false;
        loop {
            line.clear();
            if conn.read_line(&mut line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    len = v.trim().parse().unwrap_or(0);
                } else if k == "connection" && v.trim().eq_ignore_ascii_case("close") {
                    close = true;
                }
            }
        }
        if len > 1 << 20 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply too large",
            ));
        }
        let mut b = vec![0u8; len];
        conn.read_exact(&mut b)?;
        if close {
            self.conn = None;
        }
        Ok(Reply {
            status,
            body: String::from_utf8_lossy(&b).into_owned(),
        })
    }
}

/// Reads a token given as `env:VAR` or `file:PATH`.
pub fn read_token(spec: &str) -> Result<String, String> {
    if let Some(v) = spec.strip_prefix("env:") {
        return std::env::var(v).map_err(|_| format!("token: environment variable {v} is not set"));
    }
    if let Some(p) = spec.strip_prefix("file:") {
        return std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("token: {p}: {e}"));
    }
    Err("token: must be env:VAR or file:PATH".into())
}
