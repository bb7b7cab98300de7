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

use crate::base::tls::{
    ALPN_ACME_TLS, ALPN_DOH, ALPN_DOQ, ALPN_DOT, DohParams, TlsService, alpn_challenges,
};

/// A server configuration for the certificate chain in `cert` and the key in `key` (PEM;
/// the key file must not be readable by others), offering `alpn`.
pub fn server_config(
    cert: &Path,
    key: &Path,
    alpn: &[&[u8]],
) -> Result<rustls::ServerConfig, String> {
    let (certs, key) = read_pair(cert, key)?;
    build(certs, key, alpn, false).map_err(|e| format!("{} and its key: {e}", cert.display()))
}

/// A certificate chain and its key, read and parsed.
type Pair = (
    Vec<rustls_pki_types::CertificateDer<'static>>,
    rustls_pki_types::PrivateKeyDer<'static>,
);

/// Reads the certificate chain in `cert` and the key in `key` (PEM; the key file must not
/// be readable by others).
fn read_pair(cert: &Path, key: &Path) -> Result<Pair, String> {
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
    Ok((certs, key))
}

/// A server configuration for `certs` and `key` offering `alpn`: TLS 1.3 and 1.2, or 1.3
/// only (QUIC, RFC 9001 §4.2).
fn build(
    certs: Vec<rustls_pki_types::CertificateDer<'static>>,
    key: rustls_pki_types::PrivateKeyDer<'static>,
    alpn: &[&[u8]],
    tls13_only: bool,
) -> Result<rustls::ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = if tls13_only {
        &[&rustls::version::TLS13]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let mut c = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| format!("tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
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
///
/// With `acme` (an `acme:` clause will write them), missing files are not an error: the
/// encrypted listeners serve nothing until the first certificate is issued (with
/// TLS-ALPN-01, they serve its challenges only). With TLS-ALPN-01 the DNS over TLS and
/// HTTPS configurations also offer ALPN `acme-tls/1` and show a challenge certificate to a
/// client that asks for it (RFC 8737).
pub fn tls_service(
    s: &skua_config::Server,
    base: Option<&Path>,
    acme: Option<skua_config::AcmeChallenge>,
) -> Result<Option<Arc<TlsService>>, String> {
    let alpn01 = acme == Some(skua_config::AcmeChallenge::TlsAlpn01);
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
    if acme.is_some() && !(at(&pem.value).exists() && at(&key.value).exists()) {
        return if alpn01 {
            challenges_only(s).map(Some)
        } else {
            Ok(None)
        };
    }
    let bad = |e: String| format!("{}: tls-service-pem/tls-service-key: {e}", pem.loc);
    let (certs, pkey) = read_pair(&at(&pem.value), &at(&key.value)).map_err(bad)?;
    let certificate = certs.first().map(|c| (at(&pem.value), c.clone()));
    let mut dot = build(certs.clone(), pkey.clone_key(), &[ALPN_DOT], false)
        .map_err(|e| bad(format!("{} and its key: {e}", pem.value)))?;
    dot.ticketer = ticketer()?;
    dot.session_storage = session_cache();
    // The same certificate and session store; only the protocols differ.
    let mut doh = dot.clone();
    doh.alpn_protocols = ALPN_DOH.iter().map(|p| p.to_vec()).collect();
    let main = if alpn01 {
        let provider = rustls::crypto::ring::default_provider();
        Some(Arc::new(
            rustls::sign::CertifiedKey::from_der(certs.clone(), pkey.clone_key(), &provider)
                .map_err(|e| bad(e.to_string()))?,
        ))
    } else {
        None
    };
    let mut doq = build(certs, pkey, &[ALPN_DOQ], true).map_err(bad)?;
    doq.ticketer = ticketer()?;
    doq.session_storage = session_cache();
    let doq = doq_config(doq, s).map_err(bad)?;
    if let Some(main) = main {
        for c in [&mut dot, &mut doh] {
            c.cert_resolver = Arc::new(AcmeResolver {
                main: Some(main.clone()),
            });
            c.alpn_protocols.push(ALPN_ACME_TLS.to_vec());
        }
    }
    Ok(Some(Arc::new(TlsService {
        dot: Arc::new(dot),
        doh: Arc::new(doh),
        doq: Arc::new(doq),
        pad_block: s.pad_responses.then_some(s.pad_responses_block_size),
        certificate,
    })))
}

/// The certificate resolver of the DNS over TLS and HTTPS listeners with TLS-ALPN-01: the
/// challenge certificate for the name asked (SNI) to a client offering ALPN
/// `acme-tls/1`, the service's certificate (if any yet) to every other.
#[derive(Debug)]
struct AcmeResolver {
    main: Option<Arc<rustls::sign::CertifiedKey>>,
}

impl rustls::server::ResolvesServerCert for AcmeResolver {
    fn resolve(
        &self,
        hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        // RFC 8737 §3: a validation offers `acme-tls/1` and nothing else; a client that
        // offers it among others is an ordinary one.
        let acme = hello.alpn().is_some_and(|a| {
            let offered: Vec<&[u8]> = a.collect();
            offered == [ALPN_ACME_TLS]
        });
        if acme {
            let name = hello.server_name()?.to_ascii_lowercase();
            return alpn_challenges()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&name)
                .cloned();
        }
        self.main.clone()
    }
}

/// The listeners' configurations before ACME's first certificate, with TLS-ALPN-01: they
/// serve the challenges only (every other handshake fails: there is no certificate yet).
fn challenges_only(s: &skua_config::Server) -> Result<Arc<TlsService>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let make = |alpn: &[&[u8]], tls13_only: bool| -> Result<rustls::ServerConfig, String> {
        let versions: &[&rustls::SupportedProtocolVersion] = if tls13_only {
            &[&rustls::version::TLS13]
        } else {
            rustls::DEFAULT_VERSIONS
        };
        let mut c = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| format!("tls: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(AcmeResolver { main: None }));
        c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(c)
    };
    let dot = make(&[ALPN_DOT, ALPN_ACME_TLS], false)?;
    let doh = make(&[ALPN_DOH[0], ALPN_DOH[1], ALPN_ACME_TLS], false)?;
    let doq = doq_config(make(&[ALPN_DOQ], true)?, s)?;
    Ok(Arc::new(TlsService {
        dot: Arc::new(dot),
        doh: Arc::new(doh),
        doq: Arc::new(doq),
        pad_block: s.pad_responses.then_some(s.pad_responses_block_size),
        certificate: None,
    }))
}

/// Concurrent DNS over QUIC streams (queries) a client may have open per connection.
pub const DOQ_STREAMS: u32 = 100;

/// The QUIC server configuration of DNS over QUIC (RFC 9250): the TLS 1.3 configuration
/// `tls` (ALPN `doq`, no 0-RTT: a replayed query is harmless, but 0-RTT is not needed
/// and stays off), bidirectional streams only ([`DOQ_STREAMS`] at once), the connection's
/// idle timeout `tcp-idle-timeout:`, and windows that bound what a client can make skuad
/// hold: 64 KiB per stream (a query is at most 65535 octets and its length), 256 KiB per
/// connection each way.
fn doq_config(
    tls: rustls::ServerConfig,
    s: &skua_config::Server,
) -> Result<quinn::ServerConfig, String> {
    use quinn::crypto::rustls::QuicServerConfig;
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| format!("quic: {e}"))?;
    let mut c = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut t = quinn::TransportConfig::default();
    let idle = std::time::Duration::from_millis(s.tcp_idle_timeout_ms.max(1));
    t.max_idle_timeout(Some(
        quinn::IdleTimeout::try_from(idle).map_err(|e| format!("quic idle timeout: {e}"))?,
    ))
    .max_concurrent_bidi_streams(DOQ_STREAMS.into())
    .max_concurrent_uni_streams(0u32.into())
    .stream_receive_window((64 * 1024 + 2u32).into())
    .receive_window((256 * 1024u32).into())
    .send_window(256 * 1024);
    c.transport_config(Arc::new(t));
    Ok(c)
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

/// What skuad shows of a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFacts {
    /// Its DNS names (subjectAltName), lower case.
    pub names: Vec<String>,
    /// Its serial number, hex (lower case, no separators).
    pub serial: String,
    /// Its issuer (RFC 4514 form).
    pub issuer: String,
    /// Not before, Unix seconds.
    pub not_before: u64,
    /// Not after, Unix seconds.
    pub not_after: u64,
}

/// The facts of the DER certificate `der`, none if it does not parse.
pub fn cert_facts(der: &[u8]) -> Option<CertFacts> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let v = cert.validity();
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|g| match g {
                    x509_parser::extensions::GeneralName::DNSName(n) => {
                        Some(n.to_ascii_lowercase())
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(CertFacts {
        names,
        serial: serial_hex(cert.tbs_certificate.raw_serial()),
        issuer: cert.issuer().to_string(),
        not_before: v.not_before.timestamp().max(0) as u64,
        not_after: v.not_after.timestamp().max(0) as u64,
    })
}

/// The serial's DER content octets as hex, lower case, as `openssl x509 -serial` prints it:
/// without the leading 00 octet DER adds to keep a positive INTEGER's high bit clear (X.690
/// §8.3.2; RFC 5280 §4.1.2.2 serials are positive), which is no part of the number.
fn serial_hex(raw: &[u8]) -> String {
    let mut raw = raw;
    while let [0, rest @ ..] = raw
        && !rest.is_empty()
    {
        raw = rest;
    }
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the audit log says of a swap of the encrypted listeners' certificate (`tls-swapped`,
/// listener `dns`); none when it does not change (see [`cert_swap_detail`]).
pub fn swap_detail(
    old: Option<&crate::base::tls::TlsService>,
    new: Option<&crate::base::tls::TlsService>,
) -> Option<serde_json::Value> {
    fn pick(t: Option<&crate::base::tls::TlsService>) -> Option<(&Path, &[u8])> {
        t.and_then(|t| t.certificate.as_ref())
            .map(|(f, d)| (f.as_path(), d.as_ref()))
    }
    cert_swap_detail("dns", pick(old), pick(new))
}

/// What the audit log says (`tls-swapped`) when `listener` (`dns`: DNS over TLS, HTTPS and
/// QUIC; `api`: the REST API's HTTPS) goes from the certificate `old` to `new` (file, DER):
/// the file, the serial in force before and the new certificate's facts; none when the
/// certificate does not change (a reload with the same files) or there is none before or
/// after (a first certificate is `tls-issued`'s or the start's).
pub fn cert_swap_detail(
    listener: &str,
    old: Option<(&Path, &[u8])>,
    new: Option<(&Path, &[u8])>,
) -> Option<serde_json::Value> {
    let (old_file, old_der) = old?;
    let (file, der) = new?;
    if old_der == der {
        return None;
    }
    let before = cert_facts(old_der);
    let after = cert_facts(der);
    Some(serde_json::json!({
        "listener": listener,
        "file": file.display().to_string(),
        "previous_file": (old_file != file).then(|| old_file.display().to_string()),
        "previous_serial": before.map(|f| f.serial),
        "serial": after.as_ref().map(|f| f.serial.clone()),
        "names": after.as_ref().map(|f| f.names.clone()),
        "not_after": after.as_ref().map(|f| f.not_after),
    }))
}

/// The first certificate of the PEM file `path`, DER.
pub fn first_cert_der(path: &Path) -> Option<Vec<u8>> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::pem_file_iter(path)
        .ok()?
        .next()?
        .ok()
        .map(|c| c.to_vec())
}

#[cfg(test)]
mod tests {
    use super::serial_hex;

    #[test]
    fn the_serial_as_openssl_prints_it() {
        // DER's sign octet (X.690 §8.3.2) is no part of the number.
        assert_eq!(serial_hex(&[0x00, 0x8f, 0x01]), "8f01");
        assert_eq!(serial_hex(&[0x7f, 0x00]), "7f00");
        // Zero is one octet, kept.
        assert_eq!(serial_hex(&[0x00]), "00");
        assert_eq!(serial_hex(&[]), "");
    }
}
