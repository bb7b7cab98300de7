//! The files ACME reads and writes: the certificate in force, the new pair written beside
//! its place and renamed, never over a file of another kind.

use std::path::Path;

use super::AcmeSettings;
use crate::control::tls::{CertFacts, cert_facts};

/// The first certificate in the PEM file `path`: its DER and its facts.
pub(super) fn read_cert(
    path: &Path,
) -> Option<(rustls_pki_types::CertificateDer<'static>, CertFacts)> {
    let der = rustls_pki_types::CertificateDer::from(crate::control::tls::first_cert_der(path)?);
    let facts = cert_facts(&der)?;
    Some((der, facts))
}

/// Puts the certificate and key where they go: both written beside their places first,
/// checked as a pair (the certificate parses, the key is its key), then renamed, key then
/// certificate (a failure before the renames leaves the pair in force as it was).
pub(super) fn install(s: &AcmeSettings, cert_pem: &str, key_pem: &str) -> Result<(), String> {
    replaceable(&s.key, Pem::Key)?;
    replaceable(&s.cert, Pem::Certificates)?;
    let key_tmp = temp_beside(&s.key, key_pem.as_bytes())?;
    let cert_tmp = temp_beside(&s.cert, cert_pem.as_bytes())?;
    crate::control::tls::server_config(cert_tmp.path(), key_tmp.path(), &[])
        .map_err(|e| format!("the certificate received: {e}"))?;
    key_tmp
        .persist(&s.key)
        .map_err(|e| format!("{}: {e}", s.key.display()))?;
    cert_tmp
        .persist(&s.cert)
        .map_err(|e| format!("{}: {e}", s.cert.display()))?;
    Ok(())
}

/// What a file ACME replaces holds.
#[derive(Clone, Copy)]
pub(super) enum Pem {
    Certificates,
    Key,
}

/// Whether ACME may replace `path`: nothing is there, or a PEM file of the kind it writes
/// (a certificate chain, a private key: its own, or the operator's before ACME). Anything
/// else is an error naming the path, and nothing is written.
pub(super) fn replaceable(path: &Path, kind: Pem) -> Result<(), String> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let what = match kind {
        Pem::Certificates => "a PEM certificate chain",
        Pem::Key => "a PEM private key",
    };
    let refused = || {
        format!(
            "{} is not {what}: acme: replaces no other file (move it away or name another place)",
            path.display()
        )
    };
    if !meta.is_file() || meta.len() > 1 << 20 {
        return Err(refused());
    }
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let ok = match kind {
        Pem::Certificates => CertificateDer::pem_slice_iter(&data)
            .collect::<Result<Vec<_>, _>>()
            .is_ok_and(|c| !c.is_empty()),
        Pem::Key => PrivateKeyDer::from_pem_slice(&data).is_ok(),
    };
    if ok { Ok(()) } else { Err(refused()) }
}

/// A temporary file (mode 0600) beside `path` holding `data`, synced.
pub(super) fn temp_beside(path: &Path, data: &[u8]) -> Result<tempfile::NamedTempFile, String> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    tmp.write_all(data)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(tmp)
}
