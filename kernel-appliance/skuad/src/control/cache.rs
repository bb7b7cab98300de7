//! The resolver's cache and upstreams as operators see them: look a name up, flush,
//! dump and load the cache, list the upstreams with what the forwarder knows of them.
//!
//! Everything goes through the serving handle's [`ResolverHandle`] (the cache, the
//! forwarding settings in force, the counters the resolver's task copies about once a
//! second): the control core never touches the forwarder. Without a forward or stub zone
//! there is no resolver, and every operation here is refused with
//! [`CtlError::Conflict`].
//!
//! Flushes and loads change what clients are answered, so they are audited like API
//! writes: recorded **before** they apply (`cache-flush`, `cache-load`; a load with the
//! SHA-256 of the dump and its block counts), refused when that entry cannot be written,
//! and refused requests recorded too. Lookups and dumps only read.

use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use skua_engine::name::WireName;
use skua_engine::text::{rtype_from_str, rtype_to_string};
use skua_resolver::cache::Flush;
use skua_resolver::dump::{self, Dump, Loaded};
use skua_resolver::forward::ForwardConfig;
use skua_resolver::infra::UNKNOWN_RTO;

use super::{Control, CtlError};
use crate::base::clock;
use crate::base::query::show_name;
use crate::base::resolving::ResolverHandle;

/// Audit entry kind of a flush.
pub const AUDIT_FLUSH: &str = "cache-flush";
/// Audit entry kind of a load.
pub const AUDIT_LOAD: &str = "cache-load";

/// What to flush (the API's JSON): a name (with `subtree`, or one `type`), or every
/// negative answer, or everything: exactly one of `name`, `negative`, `all`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlushRequest {
    /// A domain name.
    pub name: Option<String>,
    /// With `name`: everything at and below it.
    #[serde(default)]
    pub subtree: bool,
    /// With `name`: only this type (mnemonic or `TYPEnnn`).
    #[serde(rename = "type")]
    pub rtype: Option<String>,
    /// Every NXDOMAIN and NODATA answer.
    #[serde(default)]
    pub negative: bool,
    /// Everything.
    #[serde(default)]
    pub all: bool,
}

/// What a flush removed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Flushed {
    /// What was asked, canonical (`name www.example.net.`, `subtree example.net.`, `name
    /// www.example.net. type A`, `negative`, `all`).
    pub flushed: String,
    /// Answers removed.
    pub messages: usize,
    /// RRsets removed.
    pub rrsets: usize,
}

/// What a load did.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LoadResult {
    /// RRsets offered to the cache.
    pub rrsets: usize,
    /// Answers stored.
    pub messages: usize,
    /// Entries skipped: their TTL ran out since the dump was written.
    pub expired: usize,
    /// Entries skipped: no forward or stub zone that caches resolves their name now.
    pub outside: usize,
}

/// A cached answer, for `lookup`.
#[derive(Debug, Clone, Serialize)]
pub struct LookupMessage {
    /// QTYPE.
    #[serde(rename = "type")]
    pub rtype: String,
    /// QCLASS.
    pub class: String,
    /// RCODE.
    pub rcode: String,
    /// `positive`, `nodata` or `nxdomain`.
    pub kind: &'static str,
    /// Seconds left (0 when stale).
    pub ttl: u32,
    /// Expired, kept for `serve-expired`.
    pub stale: bool,
    /// Extended DNS Error code it carries.
    pub ede: Option<u16>,
    /// Records, presentation format, TTLs as sent now.
    pub answer: Vec<String>,
    /// Authority records.
    pub authority: Vec<String>,
    /// Additional records.
    pub additional: Vec<String>,
}

/// A cached RRset, for `lookup`.
#[derive(Debug, Clone, Serialize)]
pub struct LookupRrset {
    /// TYPE.
    #[serde(rename = "type")]
    pub rtype: String,
    /// CLASS.
    pub class: String,
    /// Its rank (RFC 2181 §5.4.1): `answer-nonauth`, `additional`...
    pub rank: &'static str,
    /// Seconds left.
    pub ttl: u32,
    /// Records, presentation format, with the TTL left.
    pub records: Vec<String>,
}

/// What the cache holds for a name.
#[derive(Debug, Clone, Serialize)]
pub struct Lookup {
    /// The name, canonical (lower case, final dot).
    pub name: String,
    /// Answers to questions for it, by type.
    pub messages: Vec<LookupMessage>,
    /// RRsets it owns, by type.
    pub rrsets: Vec<LookupRrset>,
}

/// The forwarder's counters.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ForwarderCounters {
    /// Upstream queries sent.
    pub queries: u64,
    /// Replies that matched no query (wrong ID, question or address).
    pub unwanted: u64,
    /// Questions answered SERVFAIL.
    pub servfail: u64,
    /// Retries over TCP after TC=1.
    pub tcp_retries: u64,
    /// Questions that joined one in flight.
    pub coalesced: u64,
    /// Cache flushes after `unwanted-reply-threshold`.
    pub defences: u64,
    /// Questions in flight.
    pub in_flight: usize,
}

/// One upstream of one zone.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamView {
    /// The forward or stub zone.
    pub zone: String,
    /// `forward` or `stub`.
    pub kind: &'static str,
    /// Address and port.
    pub address: String,
    /// `udp` (with TCP after TC=1), `tcp` or `tls`.
    pub transport: &'static str,
    /// The name its TLS certificate must carry.
    pub tls_name: Option<String>,
    /// The `forward-host:`/`stub-host:` name it was resolved from; `None` for a
    /// `forward-addr:`/`stub-addr:`.
    pub host: Option<String>,
    /// `up`, `down` (its timeout backed off to the maximum, 120 s, after timeouts in a
    /// row: only probes go to it, once a minute) or `unknown` (not asked yet).
    pub state: &'static str,
    /// Smoothed round-trip time, ms.
    pub srtt_ms: Option<u32>,
    /// Retransmission timeout, ms.
    pub rto_ms: u32,
    /// Replies received.
    pub replies: u64,
    /// Queries that timed out.
    pub timeouts: u64,
    /// Error replies (SERVFAIL, REFUSED, FORMERR, NOTIMP) and connection failures.
    pub errors: u64,
}

/// The forwarder and its upstreams.
#[derive(Debug, Clone, Serialize)]
pub struct Upstreams {
    /// Counters of the forwarder.
    pub forwarder: ForwarderCounters,
    /// One row per zone and upstream, in configuration order.
    pub upstreams: Vec<UpstreamView>,
}

fn wall_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A domain name from the API, lower-cased wire format; absolute with or without the
/// final dot.
fn name_arg(name: &str) -> Result<Vec<u8>, CtlError> {
    if name.is_empty() || name.len() > 1024 {
        return Err(CtlError::BadRequest(
            "name: 1 to 1024 characters, e.g. www.example.net.".into(),
        ));
    }
    WireName::parse(name, None)
        .map(|n| n.to_lowercase().as_bytes().to_vec())
        .map_err(|e| CtlError::BadRequest(format!("name '{name}': {e}")))
}

/// The id of the zone that resolves `lower` with `fwd`, `None` when none does or its
/// answers are not cached (the forwarder's most-specific-zone rule).
pub fn zone_of(fwd: &ForwardConfig, lower: &[u8]) -> Option<u32> {
    fwd.zones
        .iter()
        .filter(|z| skua_engine::name::is_subdomain(lower, &z.name))
        .max_by_key(|z| z.name.len())
        .filter(|z| !z.no_cache)
        .map(|z| z.id)
}

/// A flush, checked: what goes, and its canonical text.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// Every type of a name (lower-cased wire form).
    Name(Vec<u8>),
    /// One type of a name.
    Type(Vec<u8>, u16),
    /// A name and everything below it.
    Subtree(Vec<u8>),
    /// Negative answers.
    Negative,
    /// Everything.
    All,
}

impl Target {
    fn flush(&self) -> Flush<'_> {
        match self {
            Target::Name(n) => Flush::Name(n),
            Target::Type(n, t) => Flush::Type(n, *t),
            Target::Subtree(n) => Flush::Subtree(n),
            Target::Negative => Flush::Negative,
            Target::All => Flush::All,
        }
    }

    /// `name www.example.net.`, `name www.example.net. type A`, `subtree example.net.`,
    /// `negative`, `all`.
    fn describe(&self) -> String {
        match self {
            Target::Name(n) => format!("name {}", show_name(n)),
            Target::Type(n, t) => format!("name {} type {}", show_name(n), rtype_to_string(*t)),
            Target::Subtree(n) => format!("subtree {}", show_name(n)),
            Target::Negative => "negative".into(),
            Target::All => "all".into(),
        }
    }
}

impl FlushRequest {
    /// The flush it asks for, checked.
    fn check(&self) -> Result<Target, CtlError> {
        let bad = |m: &str| Err(CtlError::BadRequest(m.into()));
        let picked = [self.name.is_some(), self.negative, self.all]
            .iter()
            .filter(|b| **b)
            .count();
        if picked != 1 {
            return bad("give exactly one of name, \"negative\": true, \"all\": true");
        }
        if self.name.is_none() && (self.subtree || self.rtype.is_some()) {
            return bad("subtree and type go with a name");
        }
        if self.subtree && self.rtype.is_some() {
            return bad("subtree or type, not both (a subtree flush takes every type)");
        }
        let Some(name) = &self.name else {
            return Ok(if self.negative {
                Target::Negative
            } else {
                Target::All
            });
        };
        let name = name_arg(name)?;
        Ok(match &self.rtype {
            _ if self.subtree => Target::Subtree(name),
            Some(t) => Target::Type(
                name,
                rtype_from_str(t).ok_or_else(|| {
                    CtlError::BadRequest(format!("type '{t}': not a record type"))
                })?,
            ),
            None => Target::Name(name),
        })
    }
}

impl Control {
    /// The resolver, or why there is none.
    fn resolving(&self) -> Result<Arc<ResolverHandle>, CtlError> {
        self.serving.resolver().ok_or_else(|| {
            CtlError::Conflict(
                "no resolver: skuad forwards and caches only with a forward-zone: or stub-zone: in its configuration".into(),
            )
        })
    }

    /// What the cache holds for `name`: its answers (every type, stale ones marked) and
    /// its RRsets, with the TTLs they have left. Counts no hit.
    pub fn cache_lookup(&self, name: &str) -> Result<Lookup, CtlError> {
        let r = self.resolving()?;
        let lower = name_arg(name)?;
        let now = clock::now_secs();
        let found = r.cache.lookup_name(&lower, now);
        let text = |owner: &[u8], rtype, class, ttl, rd: &[u8]| {
            dump::record_text(owner, rtype, class, ttl, rd).unwrap_or_default()
        };
        let messages = found
            .messages
            .iter()
            .map(|m| {
                let mut sections: [Vec<String>; 3] = Default::default();
                for (sec, rec) in &m.records {
                    sections[*sec as usize]
                        .push(text(&rec.owner, rec.rtype, rec.class, rec.ttl, &rec.rdata));
                }
                let [answer, authority, additional] = sections;
                LookupMessage {
                    rtype: rtype_to_string(m.qtype),
                    class: dump::class_name(m.qclass),
                    rcode: dump::rcode_name(m.rcode),
                    kind: dump::kind_name(m.kind),
                    ttl: m.ttl,
                    stale: m.stale,
                    ede: m.ede,
                    answer,
                    authority,
                    additional,
                }
            })
            .collect();
        let rrsets = found
            .rrsets
            .iter()
            .map(|e| {
                let s = &e.set;
                LookupRrset {
                    rtype: rtype_to_string(s.rtype),
                    class: dump::class_name(s.class),
                    rank: dump::rank_name(s.rank),
                    ttl: e.ttl,
                    records: s
                        .rdatas
                        .iter()
                        .map(|rd| text(&s.owner, s.rtype, s.class, e.ttl, rd))
                        .collect(),
                }
            })
            .collect();
        Ok(Lookup {
            name: show_name(&lower),
            messages,
            rrsets,
        })
    }

    /// Removes what `req` names from the cache; audited first (see the module's
    /// documentation). Blocking (the audit log's write): call off async workers.
    pub fn cache_flush(
        &self,
        req: &FlushRequest,
        actor: &str,
        source: Option<std::net::IpAddr>,
    ) -> Result<Flushed, CtlError> {
        let checked = self.resolving().and_then(|r| req.check().map(|t| (r, t)));
        let (r, target) = match checked {
            Ok(v) => v,
            Err(e) => {
                // Not canonical: named by its hash only (the name may be anything).
                let sha = <sha2::Sha256 as sha2::Digest>::digest(format!("{req:?}").as_bytes());
                let detail = serde_json::json!({
                    "request_sha256": hex::encode(sha),
                    "result": "refused",
                    "error": e.message(),
                });
                self.record(AUDIT_FLUSH, actor, source, detail);
                return Err(e);
            }
        };
        let what = target.describe();
        self.append_required(
            AUDIT_FLUSH,
            actor,
            source,
            serde_json::json!({"flush": what, "result": "ok"}),
        )?;
        // The XDP programs' copies go first: when this returns, nothing flushed is answered.
        let (messages, rrsets) = self
            .serving
            .mirrors
            .without(|| r.cache.flush(target.flush()));
        crate::base::log::info(format_args!(
            "cache: {actor} flushed {what}: {messages} answers, {rrsets} RRsets"
        ));
        Ok(Flushed {
            flushed: what,
            messages,
            rrsets,
        })
    }

    /// The cache as text ([`skua_resolver::dump`]). Blocking for as long as it takes to
    /// format (a shard's read lock at a time): call off async workers.
    pub fn cache_dump(&self) -> Result<String, CtlError> {
        let r = self.resolving()?;
        Ok(r.cache.dump(clock::now_secs(), wall_now()))
    }

    /// Reads a dump into the cache: the whole text first (a malformed line is the error,
    /// and nothing is loaded), then audited (the dump's SHA-256 and block counts), then
    /// loaded. Blocking: call off async workers.
    pub fn cache_load(
        &self,
        text: &str,
        actor: &str,
        source: Option<std::net::IpAddr>,
    ) -> Result<LoadResult, CtlError> {
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()));
        let parsed = self.resolving().and_then(|r| {
            Dump::parse(text)
                .map(|d| (r, d))
                .map_err(|e| CtlError::BadRequest(format!("cache dump: {e}; nothing loaded")))
        });
        let (r, parsed) = match parsed {
            Ok(v) => v,
            Err(e) => {
                let detail = serde_json::json!({
                    "sha256": sha,
                    "bytes": text.len(),
                    "result": "refused",
                    "error": e.message(),
                });
                self.record(AUDIT_LOAD, actor, source, detail);
                return Err(e);
            }
        };
        self.append_required(
            AUDIT_LOAD,
            actor,
            source,
            serde_json::json!({
                "sha256": sha,
                "bytes": text.len(),
                "written": parsed.written(),
                "rrsets": parsed.rrsets(),
                "messages": parsed.messages(),
                "result": "ok",
            }),
        )?;
        let fwd = r.forward.load_full();
        let Loaded {
            rrsets,
            messages,
            expired,
            outside,
        } = self.serving.mirrors.without(|| {
            r.cache
                .load_parsed(parsed, clock::now_secs(), wall_now(), |n| zone_of(&fwd, n))
        });
        crate::base::log::info(format_args!(
            "cache: {actor} loaded a dump: {messages} answers, {rrsets} RRsets ({expired} expired, {outside} outside every caching zone skipped)"
        ));
        Ok(LoadResult {
            rrsets,
            messages,
            expired,
            outside,
        })
    }

    /// The forwarder's counters and every configured upstream with what it knows of it
    /// (as copied by the resolver's task within the last second or so).
    pub fn upstreams(&self) -> Result<Upstreams, CtlError> {
        let r = self.resolving()?;
        let snap = r.snapshot.load_full();
        let fwd = r.forward.load_full();
        let f = &snap.forward;
        let forwarder = ForwarderCounters {
            queries: f.queries,
            unwanted: f.unwanted,
            servfail: f.servfail,
            tcp_retries: f.tcp_retries,
            coalesced: f.coalesced,
            defences: f.defences,
            in_flight: snap.in_flight,
        };
        let mut upstreams = Vec::new();
        for z in &fwd.zones {
            for u in &z.upstreams {
                let host = snap.upstreams.iter().find(|h| h.addr == u.addr);
                upstreams.push(UpstreamView {
                    zone: show_name(&z.name),
                    kind: match z.kind {
                        skua_resolver::forward::ZoneKind::Forward => "forward",
                        skua_resolver::forward::ZoneKind::Stub => "stub",
                    },
                    address: u.addr.to_string(),
                    transport: if z.tls {
                        "tls"
                    } else if z.tcp || fwd.tcp_upstream {
                        "tcp"
                    } else {
                        "udp"
                    },
                    tls_name: u.tls_name.as_deref().map(str::to_string),
                    host: snap
                        .hosts
                        .iter()
                        .find(|h| h.zone == z.name && h.addrs.contains(&u.addr))
                        .map(|h| show_name(&h.name)),
                    state: match host {
                        None => "unknown",
                        Some(h) if h.is_down() => "down",
                        Some(_) => "up",
                    },
                    srtt_ms: host.filter(|h| h.replies > 0).map(|h| h.rtt.srtt),
                    rto_ms: host.map_or(UNKNOWN_RTO, |h| h.rtt.rto),
                    replies: host.map_or(0, |h| h.replies),
                    timeouts: host.map_or(0, |h| h.lost),
                    errors: host.map_or(0, |h| h.errors),
                });
            }
        }
        Ok(Upstreams {
            forwarder,
            upstreams,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skua_resolver::forward::{ZoneConfig, ZoneKind};

    fn zone(name: &str, id: u32, no_cache: bool) -> ZoneConfig {
        ZoneConfig {
            name: name_arg(name).unwrap(),
            kind: ZoneKind::Forward,
            upstreams: Vec::new(),
            no_cache,
            first: false,
            tls: false,
            tcp: false,
            id,
        }
    }

    #[test]
    fn the_most_specific_zone_caches_or_not() {
        let fwd = ForwardConfig {
            zones: vec![
                zone(".", 1, false),
                zone("example.net.", 2, false),
                zone("private.example.net.", 3, true),
            ],
            ..ForwardConfig::default()
        };
        let z = |n: &str| zone_of(&fwd, &name_arg(n).unwrap());
        assert_eq!(z("www.example.org."), Some(1));
        assert_eq!(z("WWW.Example.NET"), Some(2));
        assert_eq!(z("example.net."), Some(2));
        assert_eq!(z("a.private.example.net."), None);
        let none = ForwardConfig::default();
        assert_eq!(zone_of(&none, &name_arg("x.").unwrap()), None);
    }

    #[test]
    fn flush_requests() {
        let name = |n: &str| FlushRequest {
            name: Some(n.into()),
            ..FlushRequest::default()
        };
        let text = |r: FlushRequest| r.check().unwrap().describe();
        assert_eq!(text(name("WWW.example.net")), "name www.example.net.");
        assert_eq!(
            name("WWW.example.net").check().unwrap(),
            Target::Name(b"\x03www\x07example\x03net\x00".to_vec())
        );
        assert_eq!(
            text(FlushRequest {
                subtree: true,
                ..name("example.net.")
            }),
            "subtree example.net."
        );
        assert_eq!(
            text(FlushRequest {
                rtype: Some("aaaa".into()),
                ..name("a.example.")
            }),
            "name a.example. type AAAA"
        );
        assert_eq!(
            text(FlushRequest {
                negative: true,
                ..FlushRequest::default()
            }),
            "negative"
        );
        for bad in [
            FlushRequest::default(),
            FlushRequest {
                all: true,
                negative: true,
                ..FlushRequest::default()
            },
            FlushRequest {
                all: true,
                ..name("x.")
            },
            FlushRequest {
                all: true,
                subtree: true,
                ..FlushRequest::default()
            },
            FlushRequest {
                subtree: true,
                rtype: Some("A".into()),
                ..name("x.")
            },
            FlushRequest {
                rtype: Some("BOGUS".into()),
                ..name("x.")
            },
            name("a..b."),
            name(""),
        ] {
            assert!(
                matches!(bad.check(), Err(CtlError::BadRequest(_))),
                "{bad:?}"
            );
        }
    }
}
