//! HMAC keys: loading, ids, commitments.

use std::fmt;
use std::path::Path;

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::Error;

type HmacSha256 = hmac::Hmac<Sha256>;

/// A secret HMAC-SHA256 key and the id that entries name it by.
///
/// `Debug` shows the id only. The secret is not zeroed on drop.
#[derive(Clone, PartialEq, Eq)]
pub struct AuditKey {
    id: String,
    secret: Vec<u8>,
}

impl AuditKey {
    /// The shortest secret accepted: 32 bytes, the output size of SHA-256.
    pub const MIN_SECRET_LEN: usize = 32;

    /// A key whose id is derived from the secret: the first 16 hex digits of its SHA-256.
    pub fn new(secret: Vec<u8>) -> Result<AuditKey, Error> {
        let id = hex::encode(&Sha256::digest(&secret)[..8]);
        AuditKey::with_id(id, secret)
    }

    /// A key with a given id: 1 to 64 characters of `A-Z a-z 0-9 . _ -`.
    pub fn with_id(id: impl Into<String>, secret: Vec<u8>) -> Result<AuditKey, Error> {
        let id = id.into();
        if !valid_id(&id) {
            return Err(Error::BadKey(format!(
                "key id {id:?} is not 1 to 64 characters of A-Z a-z 0-9 . _ -"
            )));
        }
        if secret.len() < Self::MIN_SECRET_LEN {
            return Err(Error::BadKey(format!(
                "the secret has {} bytes, at least {} are needed",
                secret.len(),
                Self::MIN_SECRET_LEN
            )));
        }
        Ok(AuditKey { id, secret })
    }

    /// A key from hex text (surrounding whitespace ignored), id derived.
    pub fn from_hex(text: &str) -> Result<AuditKey, Error> {
        let secret = hex::decode(text.trim())
            .map_err(|e| Error::BadKey(format!("the secret is not hex: {e}")))?;
        AuditKey::new(secret)
    }

    /// A key from a file holding the secret as hex (`openssl rand -hex 32`). The file must
    /// not be readable or writable by group or others.
    pub fn from_file(path: impl AsRef<Path>) -> Result<AuditKey, Error> {
        use std::os::unix::fs::PermissionsExt;
        let path = path.as_ref();
        let key_err = |why: String| Error::KeyFile {
            path: path.to_path_buf(),
            why,
        };
        let meta = std::fs::metadata(path).map_err(|e| key_err(e.to_string()))?;
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(key_err(format!(
                "mode {:o} lets group or others at it (chmod 600)",
                mode & 0o777
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| key_err(e.to_string()))?;
        AuditKey::from_hex(&text).map_err(|e| key_err(e.to_string()))
    }

    /// A key from an environment variable holding the secret as hex.
    pub fn from_env(var: &str) -> Result<AuditKey, Error> {
        let env_err = |why: String| Error::KeyEnv {
            var: var.to_string(),
            why,
        };
        let text = std::env::var(var).map_err(|e| env_err(e.to_string()))?;
        AuditKey::from_hex(&text).map_err(|e| env_err(e.to_string()))
    }

    /// The id entries name this key by.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key's commitment, as recorded when the log rotates to it: SHA-256 of the secret,
    /// hex. Lets a verifier check that the key it was given is the one that was announced.
    pub fn commitment(&self) -> String {
        hex::encode(Sha256::digest(&self.secret))
    }

    /// HMAC-SHA256 of `data` under this key.
    pub(crate) fn mac(&self, data: &[u8]) -> [u8; 32] {
        let mut m = self.hmac();
        m.update(data);
        m.finalize().into_bytes().into()
    }

    /// Whether `mac_hex` is the HMAC of `data` (constant-time comparison).
    pub(crate) fn verify(&self, data: &[u8], mac_hex: &str) -> bool {
        let Ok(mac) = hex::decode(mac_hex) else {
            return false;
        };
        let mut m = self.hmac();
        m.update(data);
        m.verify_slice(&mac).is_ok()
    }

    fn hmac(&self) -> HmacSha256 {
        // HMAC takes keys of any length.
        HmacSha256::new_from_slice(&self.secret).expect("HMAC accepts any key length")
    }
}

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Whether `id` may name a key.
pub(crate) fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        // RFC 4231 §4.3 uses a 4-byte key; build the key directly to check the primitive.
        let k = AuditKey {
            id: "t".into(),
            secret: b"Jefe".to_vec(),
        };
        assert_eq!(
            hex::encode(k.mac(b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(k.verify(
            b"what do ya want for nothing?",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ));
        assert!(!k.verify(
            b"what do ya want for nothing!",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ));
        assert!(!k.verify(b"what do ya want for nothing?", "zz"));
    }

    #[test]
    fn ids_are_derived_or_checked_and_short_secrets_refused() {
        let k = AuditKey::new(vec![0; 32]).unwrap();
        // SHA-256 of 32 zero bytes starts 66687aadf862bd77.
        assert_eq!(k.id(), "66687aadf862bd77");
        assert_eq!(
            k.commitment(),
            "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925"
        );
        assert!(AuditKey::new(vec![0; 31]).is_err());
        assert!(AuditKey::with_id("", vec![0; 32]).is_err());
        assert!(AuditKey::with_id("a b", vec![0; 32]).is_err());
        assert!(AuditKey::with_id("prod-2026.1_a", vec![0; 32]).is_ok());
        assert!(AuditKey::from_hex("zz").is_err());
        assert_eq!(
            AuditKey::from_hex(&format!(" {}\n", "00".repeat(32))).unwrap(),
            k
        );
        assert!(!format!("{k:?}").contains("secret"));
    }
}
