//! Certificates for the encrypted listeners and the REST API: read, checked and turned
//! into rustls server configurations at load, so a bad certificate or key fails the load
//! (or the reload, and the old one keeps serving) with the file and the reason.
//!
//! DNS over TLS (RFC 7858) and DNS over HTTPS (RFC 8484): TLS 1.3 and 1.2 only (rustls
//! has nothing older), ALPN `dot`, or `h2` and `http/1.1` (a client that offers ALPN
//! without one of them is refused, RFC 7301 §3.2; one that offers none is served: DNS over
//! TLS, or HTTP/1.1), session resumption by tickets from one process-wide rotating
//! ticketer (so a certificate swap does not invalidate the clients' tickets) and a session
//! cache.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tokio_rustls::rustls;

use crate::base::tls::{ALPN_DOH, ALPN_DOT, DohParams, TlsService};

/// A server configuration for the certificate chain in `cert` and the key in `key` (PEM;
/// the key file must not be readable by others), offering `alpn`.
pub fn server_config(
    cert: &Path,
    key: &Path,
    alpn: &[&[u8]],
) -> Result<rustls::ServerConfig, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let shown = cert.display();
    let pem = read_bounded(cert)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{shown}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{shown}: no certificate in the file"));
    }
    let pem = super::auth::read_secret(key)?;
    let key = PrivateKeyDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| format!("{}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("{shown} and its key: {e}"))?;
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(c)
}

/// Largest certificate chain file read.
const MAX_CERT_FILE: u64 = 1 << 20;

/// A regular file's contents, at most [`MAX_CERT_FILE`] bytes: opened without blocking (a
/// FIFO put in place of a certificate must not hang a reload), its type checked on the
/// file opened.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let shown = path.display();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{shown}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    if meta.len() > MAX_CERT_FILE {
        return Err(format!(
            "{shown}: {} bytes, more than a certificate chain ({MAX_CERT_FILE} at most)",
            meta.len()
        ));
    }
    let mut out = Vec::new();
    f.take(MAX_CERT_FILE)
        .read_to_end(&mut out)
        .map_err(|e| format!("{shown}: {e}"))?;
    Ok(out)
}

/// The process's TLS session cache (resumption by session ID, TLS 1.2): one for every
/// configuration, so that a reload keeps the clients' sessions.
fn session_cache() -> Arc<dyn rustls::server::StoresServerSessions> {
    static C: OnceLock<Arc<dyn rustls::server::StoresServerSessions>> = OnceLock::new();
    C.get_or_init(|| rustls::server::ServerSessionMemoryCache::new(4096))
        .clone()
}

/// The process's session-ticket issuer: one for every configuration, so that a swapped
/// certificate keeps the clients' tickets good (its keys rotate on their own).
fn ticketer() -> Result<Arc<dyn rustls::server::ProducesTickets>, String> {
    static T: OnceLock<Result<Arc<dyn rustls::server::ProducesTickets>, String>> = OnceLock::new();
    T.get_or_init(|| rustls::crypto::ring::Ticketer::new().map_err(|e| format!("tls tickets: {e}")))
        .clone()
}

/// The TLS configurations of the encrypted listeners of `s` (paths relative to `base`),
/// or none without `tls-service-key:` and `tls-service-pem:`. An error names the
/// directive's line.
pub fn tls_service(
    s: &skua_config::Server,
    base: Option<&Path>,
) -> Result<Option<Arc<TlsService>>, String> {
    let (key, pem) = match (&s.tls_service_key, &s.tls_service_pem) {
        (None, None) => return Ok(None),
        (Some(k), None) => {
            return Err(format!(
                "{}: tls-service-key: without tls-service-pem: (give both)",
                k.loc
            ));
        }
        (None, Some(p)) => {
            return Err(format!(
                "{}: tls-service-pem: without tls-service-key: (give both)",
                p.loc
            ));
        }
        (Some(k), Some(p)) => (k, p),
    };
    let at = |v: &str| {
        let p = PathBuf::from(v);
        match base {
            Some(b) if p.is_relative() => b.join(p),
            _ => p,
        }
    };
    let mut dot = server_config(&at(&pem.value), &at(&key.value), &[ALPN_DOT])
        .map_err(|e| format!("{}: tls-service-pem/tls-service-key: {e}", pem.loc))?;
    dot.ticketer = ticketer()?;
    dot.session_storage = session_cache();
    // The same certificate and session store; only the protocols differ.
    let mut doh = dot.clone();
    doh.alpn_protocols = ALPN_DOH.iter().map(|p| p.to_vec()).collect();
    Ok(Some(Arc::new(TlsService {
        dot: Arc::new(dot),
        doh: Arc::new(doh),
        pad_block: s.pad_responses.then_some(s.pad_responses_block_size),
    })))
}

/// The DNS over HTTPS parameters of `s`.
pub fn doh_params(s: &skua_config::Server) -> DohParams {
    DohParams {
        endpoint: s.http_endpoint.clone(),
        max_streams: s.http_max_streams,
        query_buffer: s.http_query_buffer_size,
        response_buffer: s.http_response_buffer_size,
        pad_block: s.pad_responses.then_some(s.pad_responses_block_size),
    }
}
