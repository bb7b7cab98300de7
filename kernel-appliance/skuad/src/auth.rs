//! API authentication: bearer tokens with roles, stored hashed, compared in constant time,
//! and a per-source limit on failed attempts.
//!
//! A token is configured as `token: "NAME ROLE SECRET"` in the `api:` clause, where SECRET
//! is `sha256:HEX` (the SHA-256 of the token: the token itself never appears in the file),
//! `env:VAR` or `file:PATH` (read once at load, hashed at once; the plain token is not kept).
//! A presented token is hashed and compared with **every** configured hash with
//! [`subtle::ConstantTimeEq`], so neither the match position nor the length of a common
//! prefix shows in the response time.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// What a token may do. Each role includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read state: status, stats, metrics, zones, records, ACL.
    Read,
    /// Read + change local zones and records.
    Dns,
    /// Dns + reload, effective configuration, audit tail.
    Operator,
    /// Everything: audit verification.
    Admin,
}

impl Role {
    /// Its name in the configuration and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Dns => "dns",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "read" => Role::Read,
            "dns" => Role::Dns,
            "operator" => Role::Operator,
            "admin" => Role::Admin,
            _ => return Err(format!("unknown role '{s}' (read, dns, operator, admin)")),
        })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One configured token: its name (for logs and the audit log), role and SHA-256.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// Name, as configured.
    pub name: String,
    /// Role.
    pub role: Role,
    hash: [u8; 32],
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the hash: it is enough to mount an offline guess.
        write!(f, "Token({}, {})", self.name, self.role)
    }
}

/// SHA-256 of a token, as `sha256:` specs hold it.
pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Token {
    /// Parses `NAME ROLE SECRET`; `env:` and `file:` secrets are read now (`env` is the
    /// process environment, passed in for tests).
    pub fn parse(spec: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Token, String> {
        let words: Vec<&str> = spec.split_whitespace().collect();
        let [name, role, secret] = words[..] else {
            return Err(format!(
                "token '{}' must be \"NAME ROLE SECRET\"",
                redact(spec)
            ));
        };
        let role: Role = role.parse()?;
        let hash = if let Some(h) = secret.strip_prefix("sha256:") {
            let v = hex::decode(h)
                .map_err(|_| format!("token '{name}': sha256: needs 64 hex digits"))?;
            <[u8; 32]>::try_from(v.as_slice())
                .map_err(|_| format!("token '{name}': sha256: needs 64 hex digits"))?
        } else if let Some(var) = secret.strip_prefix("env:") {
            let t = env(var)
                .ok_or_else(|| format!("token '{name}': environment variable {var} is not set"))?;
            plain(name, t.trim())?
        } else if let Some(path) = secret.strip_prefix("file:") {
            let t = std::fs::read_to_string(path)
                .map_err(|e| format!("token '{name}': cannot read {path}: {e}"))?;
            plain(name, t.trim())?
        } else {
            return Err(format!(
                "token '{name}': the secret must be sha256:HEX, env:VAR or file:PATH (a token is never written in the configuration)"
            ));
        };
        Ok(Token {
            name: name.to_string(),
            role,
            hash,
        })
    }
}

/// Shortest token accepted, configured or presented.
pub const MIN_TOKEN_LEN: usize = 16;

fn plain(name: &str, t: &str) -> Result<[u8; 32], String> {
    // Short tokens can be guessed offline from a leaked hash; 16 characters of a random
    // token (e.g. `openssl rand -hex 16`) are the minimum.
    if t.len() < MIN_TOKEN_LEN {
        return Err(format!(
            "token '{name}' is shorter than 16 characters (use e.g. openssl rand -hex 32)"
        ));
    }
    Ok(hash_token(t))
}

fn redact(spec: &str) -> String {
    spec.split_whitespace().next().unwrap_or("").to_string() + " ..."
}

/// The configured tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tokens(pub Vec<Token>);

impl Tokens {
    /// The token matching `presented`, compared with every configured hash in constant time.
    pub fn check(&self, presented: &str) -> Option<&Token> {
        // Tokens from env:/file: must have 16 characters; a sha256: hash could be that of a
        // short or empty string (the SHA-256 of "" is a well-known value): never accept one.
        if presented.len() < MIN_TOKEN_LEN {
            return None;
        }
        let h = hash_token(presented);
        let mut found: Option<&Token> = None;
        for t in &self.0 {
            // Keep looping after a match: the time taken must not depend on where it is.
            if bool::from(t.hash.ct_eq(&h)) {
                found = Some(t);
            }
        }
        found
    }
}

/// Failed authentications per source address over a sliding minute; past the limit the
/// source gets 429 until its window ends, whatever it presents.
#[derive(Debug)]
pub struct FailLimiter {
    limit: u32,
    window: Duration,
    map: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

/// Sources tracked at most (a flood of spoofed... TCP sources cannot be spoofed, but many
/// real ones can exist): beyond it, expired entries are pruned, then the oldest.
const MAX_SOURCES: usize = 65536;

impl FailLimiter {
    /// `limit` failures per `window`.
    pub fn new(limit: u32, window: Duration) -> Self {
        Self {
            limit,
            window,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `src` is blocked now.
    pub fn blocked(&self, src: IpAddr, now: Instant) -> bool {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&src)
            .is_some_and(|&(start, n)| n >= self.limit && now.duration_since(start) < self.window)
    }

    /// Records a failure; returns whether the source is now blocked.
    pub fn fail(&self, src: IpAddr, now: Instant) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_SOURCES && !map.contains_key(&src) {
            let w = self.window;
            map.retain(|_, (start, _)| now.duration_since(*start) < w);
            if map.len() >= MAX_SOURCES
                && let Some(oldest) = map.iter().min_by_key(|(_, (s, _))| *s).map(|(k, _)| *k)
            {
                map.remove(&oldest);
            }
        }
        let e = map.entry(src).or_insert((now, 0));
        if now.duration_since(e.0) >= self.window {
            *e = (now, 0);
        }
        e.1 = e.1.saturating_add(1);
        e.1 >= self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(v: &str) -> Option<String> {
        (v == "SKUA_T").then(|| "0123456789abcdef0123".to_string())
    }

    #[test]
    fn specs() {
        let h = hex::encode(hash_token("0123456789abcdef0123"));
        let a = Token::parse(&format!("ops admin sha256:{h}"), &env).unwrap();
        let b = Token::parse("ops admin env:SKUA_T", &env).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.role, Role::Admin);
        assert!(Token::parse("ops admin env:NOPE", &env).is_err());
        assert!(
            Token::parse("ops root sha256:00", &env)
                .unwrap_err()
                .contains("role")
        );
        assert!(
            Token::parse("ops admin sha256:00", &env)
                .unwrap_err()
                .contains("64 hex")
        );
        let e = Token::parse("ops admin s3cret-token-in-clear", &env).unwrap_err();
        assert!(e.contains("sha256:HEX"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
        assert!(Token::parse("ops admin", &env).is_err());
        let dir = std::env::temp_dir().join(format!("skuad-auth-{}", std::process::id()));
        std::fs::write(&dir, "short\n").unwrap();
        let e = Token::parse(&format!("x read file:{}", dir.display()), &env).unwrap_err();
        assert!(e.contains("shorter than 16"), "{e}");
        std::fs::write(&dir, "0123456789abcdef0123\n").unwrap();
        assert_eq!(
            Token::parse(&format!("ops admin file:{}", dir.display()), &env).unwrap(),
            a
        );
        let _ = std::fs::remove_file(dir);
    }

    #[test]
    fn check_finds_the_right_token() {
        let t = Tokens(vec![
            Token::parse(
                &format!(
                    "r read sha256:{}",
                    hex::encode(hash_token("read-token-0000000"))
                ),
                &env,
            )
            .unwrap(),
            Token::parse(
                &format!(
                    "a admin sha256:{}",
                    hex::encode(hash_token("admin-token-00000"))
                ),
                &env,
            )
            .unwrap(),
        ]);
        assert_eq!(t.check("admin-token-00000").unwrap().name, "a");
        assert_eq!(t.check("read-token-0000000").unwrap().role, Role::Read);
        assert!(t.check("admin-token-0000").is_none());
        assert!(t.check("").is_none());
        // A hash of the empty string (or of any short string) never authenticates.
        let empty = Tokens(vec![
            Token::parse(
                &format!("e read sha256:{}", hex::encode(hash_token(""))),
                &env,
            )
            .unwrap(),
        ]);
        assert!(empty.check("").is_none());
        assert!(Role::Admin > Role::Operator && Role::Dns > Role::Read);
    }

    #[test]
    fn fail_limit_per_source_and_window() {
        let l = FailLimiter::new(3, Duration::from_secs(60));
        let a: IpAddr = "198.18.0.1".parse().unwrap();
        let b: IpAddr = "198.18.0.2".parse().unwrap();
        let t0 = Instant::now();
        assert!(!l.fail(a, t0));
        assert!(!l.fail(a, t0));
        assert!(!l.blocked(a, t0));
        assert!(l.fail(a, t0));
        assert!(l.blocked(a, t0 + Duration::from_secs(59)));
        assert!(!l.blocked(b, t0));
        assert!(!l.blocked(a, t0 + Duration::from_secs(60)));
        // A new window starts from scratch.
        assert!(!l.fail(a, t0 + Duration::from_secs(61)));
    }
}
