//! A blocking client of skuad's REST API (ureq; rustls with the ring provider for `https://`).
//!
//! Every outcome falls in one of the classes that `skuactl`'s exit codes tell apart: a
//! response the API accepted (2xx), a refusal or failure the API reported
//! (`{"error": {"code", "message"}}`), an authentication or authorization failure (401, 403,
//! 429), or no API at all (connection refused, timeout, not HTTP). The token travels only in
//! the `Authorization: Bearer` header and is never part of an error message.

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

/// The client: base URL, token, HTTP agent.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
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
            agent,
            base: base.to_string(),
            token,
        })
    }

    /// Whether a token is set.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The full URL of `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Reply, ApiError> {
        let url = self.url(path);
        let mut req = self.agent.get(&url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        finish(&url, req.call())
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> Result<Reply, ApiError> {
        let url = self.url(path);
        let mut req = self.agent.delete(&url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        finish(&url, req.call())
    }

    /// `POST path` with a JSON body, or none.
    pub fn post(&self, path: &str, body: Option<&Value>) -> Result<Reply, ApiError> {
        let url = self.url(path);
        let mut req = self.agent.post(&url);
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
}

fn finish(
    url: &str,
    r: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Reply, ApiError> {
    let mut resp = r.map_err(|e| ApiError::Unreachable {
        url: url.to_string(),
        why: transport_error(&e),
    })?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
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
