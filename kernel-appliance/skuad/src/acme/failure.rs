//! Why an attempt failed: the class of an ACME problem document (RFC 8555 §6.7) and the
//! earliest retry a rate limit names.

/// Why an attempt failed, for the status, the metrics and the retry time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// `urn:ietf:params:acme:error:rateLimited` (RFC 8555 §6.7).
    RateLimited,
    /// The profile asked for is not offered (`invalidProfile`, draft-ietf-acme-profiles
    /// §4, or not in the directory's list).
    Profile,
    /// Another ACME problem document.
    AcmeServer,
    /// Anything else: the network, the files, the reload.
    Other,
}

impl FailureKind {
    /// Every kind, in the order the metrics list them.
    pub const ALL: [FailureKind; 4] = [
        FailureKind::RateLimited,
        FailureKind::Profile,
        FailureKind::AcmeServer,
        FailureKind::Other,
    ];

    /// Its name in GET /tls and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::RateLimited => "rate-limited",
            FailureKind::Profile => "profile",
            FailureKind::AcmeServer => "acme-server",
            FailureKind::Other => "other",
        }
    }
}

/// A failed attempt: its class, what to say, and (rate limits) the earliest retry the
/// server named (Unix seconds).
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) kind: FailureKind,
    pub(super) msg: String,
    pub(super) not_before: Option<u64>,
    /// Set when a certificate was written and its reload failed: the next attempt puts it
    /// in force, it does not order again.
    pub(super) written: Option<Written>,
}

/// A certificate written to its files whose reload failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Written {
    /// The certificate its order replaced, as the ACME server's order object names it
    /// (RFC 9773 §5), shown once it is in force.
    pub(super) replaced: Option<String>,
}

impl From<String> for Failure {
    fn from(msg: String) -> Self {
        Failure {
            kind: FailureKind::Other,
            msg,
            not_before: None,
            written: None,
        }
    }
}

impl From<&str> for Failure {
    fn from(msg: &str) -> Self {
        Failure::from(msg.to_string())
    }
}

/// `what: e` classified: the problem document's type decides (RFC 8555 §6.7).
pub(super) fn classify(what: &str, e: &instant_acme::Error) -> Failure {
    let (kind, not_before) = match e {
        instant_acme::Error::Api(p) => match p.r#type.as_deref() {
            Some("urn:ietf:params:acme:error:rateLimited") => (
                FailureKind::RateLimited,
                p.detail.as_deref().and_then(retry_after_in_detail),
            ),
            Some("urn:ietf:params:acme:error:invalidProfile") => (FailureKind::Profile, None),
            _ => (FailureKind::AcmeServer, None),
        },
        _ => (FailureKind::Other, None),
    };
    let msg = match kind {
        FailureKind::RateLimited => format!("rate-limited: {what}: {e}"),
        _ => format!("{what}: {e}"),
    };
    Failure {
        kind,
        msg,
        not_before,
        written: None,
    }
}

/// The time a rate-limit problem's detail names: Let's Encrypt writes "retry after
/// 2025-01-01 12:00:00 UTC" (instant-acme 0.8.5 keeps the problem document of an error
/// response, not its Retry-After header). None if there is no such text.
pub(super) fn retry_after_in_detail(detail: &str) -> Option<u64> {
    let lower = detail.to_ascii_lowercase();
    let at = lower.find("retry after ")? + "retry after ".len();
    let t = detail.get(at..at + 19)?;
    if !detail.get(at + 19..)?.trim_start().starts_with("UTC") {
        return None;
    }
    let b = t.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = t.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b[4] != b'-' || b[7] != b'-' || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    // Days from the civil date (proleptic Gregorian), H. Hinnant's algorithm.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + mi * 60 + se).ok()
}

/// Whether a new order naming the certificate it replaces (RFC 9773 §5) was refused for
/// that: the certificate already replaced (`alreadyReplaced`, 409), or one the server does
/// not know (Boulder answers 404; pebble 2.10 a `serverInternal` "could not find an order
/// for the given certificate"), say after a change of CA or account. The renewal is still
/// wanted then, ordered without `replaces`. Anything else (the network, a rate limit,
/// instant-acme's own "replaces field mismatch") is a failure like any other.
pub(super) fn refused_replaces(e: &instant_acme::Error) -> bool {
    let instant_acme::Error::Api(p) = e else {
        return false;
    };
    let detail = p.detail.as_deref().unwrap_or("").to_ascii_lowercase();
    p.r#type.as_deref() == Some("urn:ietf:params:acme:error:alreadyReplaced")
        || p.status == Some(404)
        || detail.contains("could not find an order for the given certificate")
        || detail.contains("no current certificate")
}
