//! Authentication: bearer tokens with roles, stored hashed, compared in constant time,
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

/// What a token may do. Each role from `read` on includes the ones before it; `sync`
/// stands apart ([`Role::may`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Only `GET /sync`: the token a follower holds (`sync:`), which lets it read this
    /// node's shared configuration and API data and nothing else (no lease, no reload).
    Sync,
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
    /// Whether a caller of this role may use a route that needs `need`: `sync` routes are
    /// open to `sync` tokens and to `operator` and above (who may read the configuration
    /// anyway); a `sync` token may use nothing else.
    pub fn may(self, need: Role) -> bool {
        match (self, need) {
            (Role::Sync, n) => n == Role::Sync,
            (r, Role::Sync) => r >= Role::Operator,
            (r, n) => r >= n,
        }
    }

    /// What a route that needs this role asks for, in words.
    pub fn needed(self) -> String {
        match self {
            Role::Sync => "sync (or operator)".into(),
            r => r.to_string(),
        }
    }

    /// Its name in the configuration and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Sync => "sync",
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
            "sync" => Role::Sync,
            "read" => Role::Read,
            "dns" => Role::Dns,
            "operator" => Role::Operator,
            "admin" => Role::Admin,
            _ => {
                return Err(format!(
                    "unknown role '{s}' (read, dns, operator, admin, or sync)"
                ));
            }
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
            let t = read_secret(std::path::Path::new(path))
                .map_err(|e| format!("token '{name}': {e}"))?;
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

/// Reads a secret (a token, a private key): a regular file that others cannot read or
/// write. The mode is checked on the file that was opened (no race with a `chmod` or a
/// rename between check and read); a symbolic link to it is fine (systemd credentials and
/// Kubernetes secrets are links). Group access is allowed, for the `ssl-cert` style of
/// sharing a key with a service group.
pub fn read_secret(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let shown = path.display();
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        // A FIFO must not hang the load.
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o007 != 0 {
        return Err(format!(
            "{shown} has mode {mode:o}: others can read or change a secret (chmod o-rwx, e.g. 600 or 640)"
        ));
    }
    let mut text = String::new();
    (&mut f)
        .take(1 << 20)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    Ok(text)
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

/// Who may get in, for every way into the control core: the tokens and the limit on failed
/// attempts. Swapped whole by a reload.
pub struct Access {
    /// Tokens.
    pub tokens: Tokens,
    /// Failed authentications per source per minute before 429.
    pub fail_limiter: FailLimiter,
}

impl Access {
    /// From the `api:` clause: tokens (with `env:`/`file:` secrets read and hashed now) and
    /// the failed-authentication limit. An error names the file and line.
    pub fn from_config(cfg: &skua_config::Config) -> Result<Access, String> {
        let env = |v: &str| std::env::var(v).ok();
        let mut tokens = Vec::new();
        for t in &cfg.api.tokens {
            tokens.push(Token::parse(&t.value, &env).map_err(|e| format!("{}: {e}", t.loc))?);
        }
        let mut names = std::collections::HashSet::new();
        for (t, l) in tokens.iter().zip(&cfg.api.tokens) {
            if !names.insert(t.name.clone()) {
                return Err(format!("{}: token name '{}' is used twice", l.loc, t.name));
            }
        }
        Ok(Access {
            tokens: Tokens(tokens),
            fail_limiter: FailLimiter::new(cfg.api.auth_fail_limit.max(1), Duration::from_secs(60)),
        })
    }
}

/// The key a source is counted under: an IPv4 address (also when it arrives IPv4-mapped),
/// or the /64 of an IPv6 address — one end site holds a whole /64 (RFC 6177 §2; a host can
/// pick a new address in it for every request, RFC 8981), so a smaller key counts nothing.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

/// Failed authentications per source (see [`source_key`]) over a fixed window; past the
/// limit, the source's *failures* get 429 until its window ends. A valid token always
/// passes: the limit slows down guessing, it must not let anyone lock out the operator.
#[derive(Debug)]
pub struct FailLimiter {
    limit: u32,
    window: Duration,
    map: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

/// Sources tracked at most (TCP sources cannot be spoofed, but many real ones can exist):
/// beyond it, expired entries are pruned, then the oldest.
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

    /// Whether failures from `src` are refused now.
    pub fn blocked(&self, src: IpAddr, now: Instant) -> bool {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&source_key(src))
            .is_some_and(|&(start, n)| n >= self.limit && now.duration_since(start) < self.window)
    }

    /// Records a failure; returns whether the source is now blocked.
    pub fn fail(&self, src: IpAddr, now: Instant) -> bool {
        let src = source_key(src);
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

/// One audit entry for refused requests, as [`RefusalLog`] hands it out.
#[derive(Debug, Clone, PartialEq)]
pub struct RefusalRecord {
    /// Token name, or `anonymous`.
    pub actor: String,
    /// The address of the first refusal it covers.
    pub source: IpAddr,
    /// The entry's detail: a single refusal, or `"aggregated": true` with a count.
    pub detail: serde_json::Value,
}

/// Refused API requests (no or unknown token, role too low, too many failures) for the
/// audit log, so that a flood cannot fill it: per source (see [`source_key`]), actor (token
/// name or `anonymous`) and window,
/// the **first** refusal is recorded at once, the following ones are counted, and one
/// aggregated entry with their count, reasons and routes is recorded when the window ends
/// ([`RefusalLog::due`], called periodically) or at stop ([`RefusalLog::drain`]). Every
/// refusal is in exactly one entry: the counts of a source's entries add up to its
/// refusals. Sans-IO: the caller passes the time and writes the records.
#[derive(Debug)]
pub struct RefusalLog {
    window: Duration,
    map: Mutex<HashMap<(IpAddr, String), Pending>>,
}

#[derive(Debug)]
struct Pending {
    start: Instant,
    source: IpAddr,
    actor: String,
    count: u64,
    reasons: std::collections::BTreeMap<String, u64>,
    routes: std::collections::BTreeMap<String, u64>,
}

/// Distinct reasons or routes listed in one aggregated entry; the rest are `other`.
const MAX_KEYS: usize = 16;

fn bump(m: &mut std::collections::BTreeMap<String, u64>, k: &str) {
    if let Some(n) = m.get_mut(k) {
        *n += 1;
    } else if m.len() < MAX_KEYS {
        m.insert(k.to_string(), 1);
    } else {
        *m.entry("other".to_string()).or_insert(0) += 1;
    }
}

impl Pending {
    fn summary(&self, window: Duration) -> RefusalRecord {
        RefusalRecord {
            actor: self.actor.clone(),
            source: self.source,
            detail: serde_json::json!({
                "aggregated": true,
                "count": self.count,
                "window_seconds": window.as_secs(),
                "reasons": self.reasons,
                "routes": self.routes,
            }),
        }
    }
}

impl RefusalLog {
    /// Aggregates per `window`.
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Notes one refusal; returns the entries to record now (the refusal itself when it
    /// opens a window, preceded by the summary of an expired window of the same source).
    pub fn note(
        &self,
        source: IpAddr,
        actor: &str,
        method: &str,
        route: &str,
        reason: &str,
        now: Instant,
    ) -> Vec<RefusalRecord> {
        let key = (source_key(source), actor.to_string());
        let mut out = Vec::new();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = map.get_mut(&key)
            && now.duration_since(p.start) < self.window
        {
            p.count += 1;
            bump(&mut p.reasons, reason);
            bump(&mut p.routes, &format!("{method} {route}"));
            return out;
        }
        if let Some(p) = map.remove(&key)
            && p.count > 0
        {
            out.push(p.summary(self.window));
        }
        if map.len() >= MAX_SOURCES {
            // Make room: windows that ended, else the oldest, each summarised first.
            let w = self.window;
            let old: Vec<(IpAddr, String)> = map
                .iter()
                .filter(|(_, p)| now.duration_since(p.start) >= w)
                .map(|(k, _)| k.clone())
                .collect();
            for k in old {
                if let Some(p) = map.remove(&k).filter(|p| p.count > 0) {
                    out.push(p.summary(w));
                }
            }
            if map.len() >= MAX_SOURCES
                && let Some(k) = map
                    .iter()
                    .min_by_key(|(_, p)| p.start)
                    .map(|(k, _)| k.clone())
                && let Some(p) = map.remove(&k).filter(|p| p.count > 0)
            {
                out.push(p.summary(w));
            }
        }
        map.insert(
            key,
            Pending {
                start: now,
                source,
                actor: actor.to_string(),
                count: 0,
                reasons: Default::default(),
                routes: Default::default(),
            },
        );
        out.push(RefusalRecord {
            actor: actor.to_string(),
            source,
            detail: serde_json::json!({
                "method": method,
                "route": route,
                "reason": reason,
                "count": 1,
            }),
        });
        out
    }

    /// Summaries of the windows that ended by `now` (windows without further refusals end
    /// silently: their one refusal is already recorded).
    pub fn due(&self, now: Instant) -> Vec<RefusalRecord> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let w = self.window;
        let mut out = Vec::new();
        map.retain(|_, p| {
            if now.duration_since(p.start) < w {
                return true;
            }
            if p.count > 0 {
                out.push(p.summary(w));
            }
            false
        });
        out
    }

    /// Summaries of every open window (at stop).
    pub fn drain(&self) -> Vec<RefusalRecord> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let w = self.window;
        map.drain()
            .filter(|(_, p)| p.count > 0)
            .map(|(_, p)| p.summary(w))
            .collect()
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
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("skuad-auth-{}", std::process::id()));
        std::fs::write(&dir, "0123456789abcdef0123\n").unwrap();
        // World-readable: refused, whatever it holds.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::parse(&format!("x read file:{}", dir.display()), &env).unwrap_err();
        assert!(e.contains("mode 644"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o640)).unwrap();
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
        // sync stands apart: its own route only; that route also for operator and admin.
        assert!(Role::Sync.may(Role::Sync) && !Role::Sync.may(Role::Read));
        assert!(Role::Operator.may(Role::Sync) && Role::Admin.may(Role::Sync));
        assert!(!Role::Read.may(Role::Sync) && !Role::Dns.may(Role::Sync));
        assert!(Role::Dns.may(Role::Read) && !Role::Read.may(Role::Dns));
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

    #[test]
    fn ipv6_sources_count_per_64_and_mapped_ipv4_as_ipv4() {
        let l = FailLimiter::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        // Three addresses of one /64: one source.
        for (i, a) in ["fd00:1:2:3::1", "fd00:1:2:3::2", "fd00:1:2:3:ffff::9"]
            .iter()
            .enumerate()
        {
            assert_eq!(l.fail(a.parse().unwrap(), t0), i == 2, "{a}");
        }
        assert!(l.blocked("fd00:1:2:3:abcd::1".parse().unwrap(), t0));
        assert!(!l.blocked("fd00:1:2:4::1".parse().unwrap(), t0));
        assert_eq!(
            source_key("::ffff:198.18.0.1".parse().unwrap()),
            "198.18.0.1".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            source_key("fd00:1:2:3:4:5:6:7".parse().unwrap()),
            "fd00:1:2:3::".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn refusals_aggregate_per_source_and_window_and_add_up() {
        let log = RefusalLog::new(Duration::from_secs(60));
        let a: IpAddr = "198.18.0.1".parse().unwrap();
        let b: IpAddr = "fd00::1".parse().unwrap();
        let t0 = Instant::now();
        let mut recs = Vec::new();
        // 1,000 refusals from a, 3 from b (two addresses of its /64).
        for i in 0..1000u64 {
            let t = t0 + Duration::from_millis(i);
            recs.extend(log.note(a, "anonymous", "GET", "/config", "unknown token", t));
        }
        recs.extend(log.note(b, "anonymous", "GET", "/zones", "missing bearer token", t0));
        recs.extend(log.note(
            "fd00::2".parse().unwrap(),
            "anonymous",
            "POST",
            "/reload",
            "x",
            t0,
        ));
        // Another actor from the same source has an entry of its own.
        let r = log.note(b, "read-tok", "POST", "/reload", "forbidden", t0);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].actor, "read-tok");
        recs.extend(log.note(b, "anonymous", "HEAD", "/config", "unknown token", t0));
        // One entry each so far: the first refusal of each source.
        assert_eq!(recs.len(), 2);
        assert!(log.due(t0 + Duration::from_secs(59)).is_empty());
        recs.extend(log.due(t0 + Duration::from_secs(60)));
        assert_eq!(recs.len(), 4);
        let count = |src: IpAddr| -> u64 {
            recs.iter()
                .filter(|r| source_key(r.source) == source_key(src))
                .map(|r| r.detail["count"].as_u64().unwrap())
                .sum()
        };
        assert_eq!(count(a), 1000);
        assert_eq!(count(b), 3);
        let agg = recs
            .iter()
            .find(|r| r.source == a && r.detail["aggregated"] == true)
            .unwrap();
        assert_eq!(agg.detail["reasons"]["unknown token"], 999);
        assert_eq!(agg.detail["routes"]["GET /config"], 999);
        // A new window opens with an entry of its own; drain summarises open windows.
        let t1 = t0 + Duration::from_secs(120);
        assert_eq!(log.note(a, "anonymous", "GET", "/", "x", t1).len(), 1);
        assert!(log.note(a, "anonymous", "GET", "/", "x", t1).is_empty());
        let d = log.drain();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].detail["count"], 1);
        assert!(log.drain().is_empty());
    }
}
