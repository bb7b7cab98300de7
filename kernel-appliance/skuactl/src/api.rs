//! A blocking client of skuad's REST API: over HTTP(S) (ureq; rustls with the ring provider
//! for `https://`), or over skuad's local control socket (HTTP/1.1 on a UNIX socket, no
//! token: skuad knows the caller by its credentials).
//!
//! Every outcome falls in one of the classes that `skuactl`'s exit codes tell apart: a
//! response the API accepted (2xx), a refusal or failure the API reported
//! (`{"error": {"code", "message"}}`), an authentication or authorization failure (401, 403,
//! 429), or no API at all (connection refused, timeout, not HTTP). The token travels only in
//! the `Authorization: Bearer` header and is never part of an error message.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

/// How long to wait for the connection to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a whole request may take unless told (a reload of a large configuration
/// compiles first).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest response body read (metrics of many queues stay far below).
const MAX_BODY: u64 = 64 << 20;
/// Largest cache dump read (`GET /cache/dump`: about as large as the cache itself).
pub const MAX_DUMP: u64 = 1 << 30;

/// Why a request did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The API answered with an error status: its code and message (for a body that is not
    /// the API's error format, `http_STATUS` and the start of the body).
    Refused {
        /// HTTP status.
        status: u16,
        /// The API's error code (`conflict`, `unauthorized`, ...).
        code: String,
        /// The API's message.
        message: String,
        /// The response body as received (printed by `--json`).
        body: String,
    },
    /// No API answered at `url`.
    Unreachable {
        /// The URL requested.
        url: String,
        /// What went wrong (connection refused, timed out, ...).
        why: String,
    },
    /// A 2xx response whose body is not what the API sends.
    BadResponse {
        /// The URL requested.
        url: String,
        /// What is wrong with it.
        why: String,
    },
}

impl ApiError {
    /// 401, 403 and 429: the token is missing, unknown, has too low a role, or this source
    /// failed too often.
    pub fn is_auth(&self) -> bool {
        matches!(
            self,
            ApiError::Refused {
                status: 401 | 403 | 429,
                ..
            }
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Refused { code, message, .. } => write!(f, "{code}: {message}"),
            ApiError::Unreachable { url, why } => write!(f, "cannot reach the API at {url}: {why}"),
            ApiError::BadResponse { url, why } => {
                write!(f, "unexpected response from {url}: {why}")
            }
        }
    }
}

/// A response that succeeded (2xx).
#[derive(Debug)]
pub struct Reply {
    /// The body.
    pub body: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self, url: &str) -> Result<Value, ApiError> {
        serde_json::from_str(&self.body).map_err(|e| ApiError::BadResponse {
            url: url.to_string(),
            why: format!("not JSON ({e})"),
        })
    }
}

/// The client: where the API is, and the token for HTTP.
pub struct Client {
    to: To,
    token: Option<String>,
}

enum To {
    /// An HTTP(S) base URL and its agent.
    Http { agent: ureq::Agent, base: String },
    /// The local control socket.
    Local { path: PathBuf, timeout: Duration },
}

impl Client {
    /// A client of the API at `base` (`http://HOST:PORT` or `https://...`, optionally with a
    /// path prefix). `ca_pem`: the certificates that sign the API's TLS certificate (PEM);
    /// without it, `https://` is verified against the Mozilla roots (webpki-roots).
    /// `timeout`: for the whole request (connecting takes at most 5 s of it).
    pub fn new(
        base: &str,
        token: Option<String>,
        ca_pem: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Self, String> {
        let base = base.trim_end_matches('/');
        let rest = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"))
            .ok_or_else(|| format!("API URL '{base}' must start with http:// or https://"))?;
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!("API URL '{base}' has no host"));
        }
        if rest.contains(['?', '#', ' ']) {
            return Err(format!(
                "API URL '{base}' must not have a query or fragment"
            ));
        }
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(pem) = ca_pem {
            let certs = ureq::tls::parse_pem(pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("CA file: {e}"))?;
            if certs.is_empty() {
                return Err("CA file: no PEM certificate in it".into());
            }
            tls = tls.root_certs(ureq::tls::RootCerts::Specific(Arc::new(certs)));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // The API is local or on a management network: never through $http_proxy.
            .proxy(None)
            .max_redirects(0)
            .timeout_connect(Some(CONNECT_TIMEOUT.min(timeout)))
            .timeout_global(Some(timeout))
            .user_agent(concat!("skuactl/", env!("CARGO_PKG_VERSION")))
            .tls_config(tls.build())
            .build()
            .new_agent();
        Ok(Self {
            to: To::Http {
                agent,
                base: base.to_string(),
            },
            token,
        })
    }

    /// A client of the local control socket at `path` (no token: skuad takes the caller's
    /// credentials from the socket).
    pub fn local(path: &Path, timeout: Duration) -> Self {
        Self {
            to: To::Local {
                path: path.to_path_buf(),
                timeout,
            },
            token: None,
        }
    }

    /// Whether a token is set.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether requests go through the local control socket.
    pub fn is_local(&self) -> bool {
        matches!(self.to, To::Local { .. })
    }

    /// The full URL of `path` (which starts with `/`); `unix:SOCKET` + `path` for the
    /// control socket (for messages).
    pub fn url(&self, path: &str) -> String {
        match &self.to {
            To::Http { base, .. } => format!("{base}{path}"),
            To::Local { path: p, .. } => format!("unix:{}{path}", p.display()),
        }
    }

    fn agent(&self) -> &ureq::Agent {
        match &self.to {
            To::Http { agent, .. } => agent,
            To::Local { .. } => unreachable!("HTTP requests only on an HTTP client"),
        }
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Reply, ApiError> {
        self.get_up_to(path, MAX_BODY)
    }

    /// `GET path`, a response body of up to `limit` bytes.
    pub fn get_up_to(&self, path: &str, limit: u64) -> Result<Reply, ApiError> {
        if let To::Local {
            path: sock,
            timeout,
        } = &self.to
        {
            return local_up_to(sock, *timeout, "GET", path, None, limit);
        }
        let url = self.url(path);
        let mut req = self.agent().get(&url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        finish_up_to(&url, req.call(), limit)
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> Result<Reply, ApiError> {
        if let To::Local {
            path: sock,
            timeout,
        } = &self.to
        {
            return local(sock, *timeout, "DELETE", path, None);
        }
        let url = self.url(path);
        let mut req = self.agent().delete(&url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        finish(&url, req.call())
    }

    /// `POST path` with a JSON body, or none.
    pub fn post(&self, path: &str, body: Option<&Value>) -> Result<Reply, ApiError> {
        if let To::Local {
            path: sock,
            timeout,
        } = &self.to
        {
            let body = body.map(Value::to_string);
            let body = body.as_deref().map(|b| ("application/json", b));
            return local(sock, *timeout, "POST", path, body);
        }
        let url = self.url(path);
        let mut req = self.agent().post(&url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        let r = match body {
            Some(b) => req
                .content_type("application/json")
                .send(b.to_string().as_bytes()),
            None => req.send_empty(),
        };
        finish(&url, r)
    }

    /// `POST path` with a `text/plain` body (a cache dump).
    pub fn post_text(&self, path: &str, body: &str) -> Result<Reply, ApiError> {
        if let To::Local {
            path: sock,
            timeout,
        } = &self.to
        {
            let body = Some(("text/plain; charset=utf-8", body));
            return local(sock, *timeout, "POST", path, body);
        }
        let url = self.url(path);
        let mut req = self.agent().post(&url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        let r = req
            .content_type("text/plain; charset=utf-8")
            .send(body.as_bytes());
        finish(&url, r)
    }
}

fn finish(
    url: &str,
    r: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Reply, ApiError> {
    finish_up_to(url, r, MAX_BODY)
}

fn finish_up_to(
    url: &str,
    r: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    limit: u64,
) -> Result<Reply, ApiError> {
    let mut resp = r.map_err(|e| ApiError::Unreachable {
        url: url.to_string(),
        why: transport_error(&e),
    })?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(limit)
        .read_to_string()
        .map_err(|e| ApiError::Unreachable {
            url: url.to_string(),
            why: format!("reading the response: {}", transport_error(&e)),
        })?;
    if (200..300).contains(&status) {
        return Ok(Reply { body });
    }
    Err(refusal(status, body))
}

/// One request over the control socket at `sock`: HTTP/1.1, `Connection: close`, the whole
/// response read (at most [`MAX_BODY`]) within `timeout`. `body`: its media type and text.
fn local(
    sock: &Path,
    timeout: Duration,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> Result<Reply, ApiError> {
    local_up_to(sock, timeout, method, path, body, MAX_BODY)
}

/// [`local`] with a response body of up to `limit` bytes.
fn local_up_to(
    sock: &Path,
    timeout: Duration,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
    limit: u64,
) -> Result<Reply, ApiError> {
    let url = format!("unix:{}{path}", sock.display());
    let unreachable = |why: String| ApiError::Unreachable {
        url: url.clone(),
        why,
    };
    let mut s = UnixStream::connect(sock).map_err(|e| unreachable(socket_error(sock, &e)))?;
    let io = |e: std::io::Error| {
        unreachable(
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) {
                "timed out".into()
            } else {
                e.to_string()
            },
        )
    };
    // One deadline for the whole request (`--timeout`), not per read.
    let deadline = std::time::Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(std::time::Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))
    };
    s.set_write_timeout(Some(left().map_err(io)?)).map_err(io)?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: skuad\r\nUser-Agent: skuactl/{}\r\nConnection: close\r\n",
        env!("CARGO_PKG_VERSION")
    );
    match body {
        Some((media, b)) => req.push_str(&format!(
            "Content-Type: {media}\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        )),
        None if method == "POST" => req.push_str("Content-Length: 0\r\n\r\n"),
        None => req.push_str("\r\n"),
    }
    s.write_all(req.as_bytes()).map_err(io)?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        s.set_read_timeout(Some(left().map_err(io)?)).map_err(io)?;
        let n = s.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if raw.len() as u64 > limit + 65536 {
            return Err(ApiError::BadResponse {
                url,
                why: format!("response over {limit} bytes"),
            });
        }
    }
    let (status, body) = parse_response(&raw).map_err(|why| ApiError::BadResponse {
        url: url.clone(),
        why,
    })?;
    if (200..300).contains(&status) {
        return Ok(Reply { body });
    }
    Err(refusal(status, body))
}

/// What a failed connect to the control socket means to an operator.
fn socket_error(sock: &Path, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no control socket there (is skuad running?)".into(),
        std::io::ErrorKind::ConnectionRefused => {
            "connection refused (nothing listens: skuad stopped and left the socket)".into()
        }
        std::io::ErrorKind::PermissionDenied => format!(
            "permission denied: {} is for root, skuad's user and the group of \
             api: control-socket-group: (or use the HTTP API with a token: --api URL)",
            sock.display()
        ),
        _ => e.to_string(),
    }
}

/// Status and body of a whole HTTP/1.1 response (`Content-Length`, chunked, or to the end).
fn parse_response(raw: &[u8]) -> Result<(u16, String), String> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut headers);
    let head = match r.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("the response ended in its head".into()),
        Err(e) => return Err(format!("not an HTTP response ({e})")),
    };
    let status = r.code.ok_or("no status")?;
    let header = |name: &str| {
        r.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let rest = &raw[head..];
    let body: Vec<u8> =
        if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            dechunk(rest)?
        } else if let Some(len) = header("content-length") {
            let n: usize = len
                .parse()
                .map_err(|_| format!("bad Content-Length '{len}'"))?;
            rest.get(..n)
                .ok_or("the response ended in its body")?
                .to_vec()
        } else {
            rest.to_vec()
        };
    String::from_utf8(body)
        .map(|b| (status, b))
        .map_err(|_| "the body is not UTF-8".into())
}

/// The body of a chunked response (RFC 9112 §7.1; extensions and trailers ignored).
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk size line is cut short")?;
        let line = std::str::from_utf8(&rest[..eol]).map_err(|_| "bad chunk size")?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size '{line}'"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest.get(..size).ok_or("a chunk is cut short")?;
        out.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("a chunk is cut short")?;
    }
}

/// An error response: the API's `{"error": {"code", "message"}}`, or (from something else
/// in front of it, e.g. a proxy) the status and the start of the body.
pub fn refusal(status: u16, body: String) -> ApiError {
    let parsed: Option<(String, String)> =
        serde_json::from_str::<Value>(&body).ok().and_then(|v| {
            let e = v.get("error")?;
            Some((
                e.get("code")?.as_str()?.to_string(),
                e.get("message")?.as_str()?.to_string(),
            ))
        });
    let (code, message) = parsed.unwrap_or_else(|| {
        let text: String = body.trim().chars().take(200).collect();
        let message = if text.is_empty() {
            format!("HTTP status {status}")
        } else {
            format!("HTTP status {status}: {text}")
        };
        (format!("http_{status}"), message)
    });
    ApiError::Refused {
        status,
        code,
        message,
        body,
    }
}

/// What a transport error means to an operator.
fn transport_error(e: &ureq::Error) -> String {
    let text = match e {
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused (is skuad running, \
                 and is its api: interface this address?)"
                .into(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timed out".into(),
            _ => io.to_string(),
        },
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::Protocol(p) => format!("not an HTTP server? ({p})"),
        other => other.to_string(),
    };
    // rustls' certificate errors (they may come wrapped in an I/O error).
    if text.contains("CaUsedAsEndEntity") {
        format!(
            "{text} (the API's certificate is a CA certificate; it must be an end-entity one, \
             e.g. openssl req -x509 ... -addext basicConstraints=critical,CA:FALSE)"
        )
    } else if text.contains("UnknownIssuer") {
        format!("{text} (--ca-file F: the certificate(s) that sign the API's)")
    } else {
        text
    }
}

/// Percent-encodes `s` for a path segment or a query value: everything but RFC 3986's
/// unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_over_the_control_socket() {
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n{\"a\":1}",
        )
        .unwrap();
        assert_eq!(r, (200, "{\"a\":1}".to_string()));
        let r = parse_response(
            b"HTTP/1.1 403 Forbidden\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r, (403, "abcde".to_string()));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nabc").is_err());
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n").is_err());
    }

    #[test]
    fn percent_encoding() {
        assert_eq!(encode("example.org."), "example.org.");
        assert_eq!(
            encode("a.b. 60 IN TXT \"x y\""),
            "a.b.%2060%20IN%20TXT%20%22x%20y%22"
        );
        assert_eq!(encode("é/?&="), "%C3%A9%2F%3F%26%3D");
    }

    #[test]
    fn error_bodies() {
        let e = refusal(
            409,
            r#"{"error":{"code":"conflict","message":"zone x. exists"}}"#.into(),
        );
        assert_eq!(e.to_string(), "conflict: zone x. exists");
        assert!(!e.is_auth());
        let e = refusal(502, "<html>Bad Gateway</html>".into());
        assert_eq!(
            e.to_string(),
            "http_502: HTTP status 502: <html>Bad Gateway</html>"
        );
        let e = refusal(403, String::new());
        assert!(e.is_auth());
        assert_eq!(e.to_string(), "http_403: HTTP status 403");
        assert!(refusal(429, "{}".into()).is_auth());
        assert!(refusal(401, "{}".into()).is_auth());
    }

    #[test]
    fn urls() {
        let c = Client::new("http://127.0.0.1:8053/", None, None, REQUEST_TIMEOUT).unwrap();
        assert_eq!(c.url("/status"), "http://127.0.0.1:8053/status");
        let c = Client::new("https://mgmt.example/skua", None, None, REQUEST_TIMEOUT).unwrap();
        assert_eq!(c.url("/zones"), "https://mgmt.example/skua/zones");
        for bad in [
            "127.0.0.1:8053",
            "ftp://x",
            "http://",
            "http:///x",
            "http://x/?a",
        ] {
            assert!(
                Client::new(bad, None, None, REQUEST_TIMEOUT).is_err(),
                "{bad}"
            );
        }
        assert!(Client::new("http://x", None, Some(b"not pem"), REQUEST_TIMEOUT).is_err());
    }
}
