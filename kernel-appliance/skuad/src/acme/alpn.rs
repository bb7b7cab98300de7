//! TLS-ALPN-01 (RFC 8737): the self-signed certificate the DNS over TLS and HTTPS listeners
//! show to a validation asking for ALPN `acme-tls/1`.

use std::sync::Arc;

/// The TLS-ALPN-01 certificate for `name` (RFC 8737 §3): self-signed, the name as its only
/// SAN, the critical acmeIdentifier extension holding `digest` (SHA-256 of the key
/// authorization).
pub(super) fn alpn_certificate(
    name: &str,
    digest: &[u8],
) -> Result<Arc<tokio_rustls::rustls::sign::CertifiedKey>, String> {
    let bad = |e: rcgen::Error| format!("tls-alpn-01 certificate: {e}");
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).map_err(bad)?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate().map_err(bad)?;
    let cert = params.self_signed(&key).map_err(bad)?;
    let provider = tokio_rustls::rustls::crypto::ring::default_provider();
    let der = rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    // Not CertifiedKey::from_der: its check parses the certificate, and refuses the
    // critical acmeIdentifier extension it does not know.
    let signer = provider
        .key_provider
        .load_private_key(der)
        .map_err(|e| format!("tls-alpn-01 certificate: {e}"))?;
    Ok(Arc::new(tokio_rustls::rustls::sign::CertifiedKey::new(
        vec![cert.der().clone()],
        signer,
    )))
}
