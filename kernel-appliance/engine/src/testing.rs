//! Test support shared by the unit tests, the property tests and the fuzz targets: an engine
//! with every zone type, and a semantic comparison of two replies. Not for production use.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use hickory_proto::op::Message;
use hickory_proto::rr::Record;
use hickory_proto::serialize::binary::BinEncodable;

use crate::localzone::LocalZoneType;
use crate::name::WireName;
use crate::store::AuthZoneSpec;
use crate::text::parse_rr;
use crate::{Engine, EngineBuilder};

/// Local data of [`fuzz_engine`]: (zone, type, records).
pub const LOCAL_ZONES: &[(&str, &str)] = &[
    ("static.example.", "static"),
    ("deny.example.", "deny"),
    ("refuse.example.", "refuse"),
    ("transparent.example.", "transparent"),
    ("typetransparent.example.", "typetransparent"),
    ("redirect.example.", "redirect"),
    ("inform.example.", "inform"),
    ("inform-deny.example.", "inform_deny"),
    ("inform-redirect.example.", "inform_redirect"),
    ("always-transparent.example.", "always_transparent"),
    ("always-refuse.example.", "always_refuse"),
    ("always-nxdomain.example.", "always_nxdomain"),
    ("always-nodata.example.", "always_nodata"),
    ("always-deny.example.", "always_deny"),
    ("always-null.example.", "always_null"),
    ("noview.example.", "noview"),
];

/// An engine with a zone of every type, varied local data (CNAMEs, large RRsets, many
/// types) and an authoritative zone with a delegation and a wildcard.
pub fn fuzz_engine() -> Engine {
    let mut b = EngineBuilder::new();
    for (zone, t) in LOCAL_ZONES {
        let (Ok(name), Ok(t)) = (WireName::parse(zone, None), t.parse::<LocalZoneType>()) else {
            continue;
        };
        b.local_zone(name, t);
        let mut lines: Vec<String> = Vec::new();
        lines.push(format!(
            "{zone} 3600 IN SOA ns.{zone} host.{zone} 1 3600 900 86400 300"
        ));
        lines.push(format!("{zone} 300 IN A 198.18.0.100"));
        lines.push(format!("a.{zone} 300 IN A 198.18.0.1"));
        lines.push(format!("a.{zone} 300 IN AAAA fd00::1"));
        lines.push(format!("c.{zone} 300 IN CNAME a.{zone}"));
        lines.push(format!("mx.{zone} 300 IN MX 10 a.{zone}"));
        lines.push(format!("txt.{zone} 300 IN TXT \"hello\" \"world\""));
        lines.push(format!("deep.ent.{zone} 300 IN A 198.18.0.2"));
        for i in 0..120 {
            lines.push(format!("big.{zone} 300 IN A 198.18.1.{i}"));
        }
        for l in &lines {
            if let Ok(rr) = parse_rr(l, None, 3600) {
                b.local_data(rr, 0);
            }
        }
    }
    let auth = [
        "auth.example. 3600 IN SOA ns.auth.example. h.auth.example. 1 3600 900 86400 300",
        "auth.example. 3600 IN NS ns.auth.example.",
        "ns.auth.example. 3600 IN A 198.18.0.53",
        "www.auth.example. 3600 IN A 198.18.0.80",
        "alias.auth.example. 3600 IN CNAME www.auth.example.",
        "*.wild.auth.example. 3600 IN TXT \"wild\"",
        "sub.auth.example. 3600 IN NS ns.sub.auth.example.",
        "ns.sub.auth.example. 3600 IN A 198.18.0.54",
    ];
    if let Ok(apex) = WireName::parse("auth.example.", None) {
        b.auth_zone(AuthZoneSpec {
            name: apex,
            records: auth
                .iter()
                .filter_map(|l| parse_rr(l, None, 3600).ok())
                .map(|r| (r, 0))
                .collect(),
        });
    }
    if let Ok(n) = "198.19.0.0/16".parse() {
        b.acl_mut().insert(n, crate::acl::AclAction::Deny);
    }
    b.config_mut().identity = Some("fuzz".into());
    b.config_mut().version = Some("skuad test".into());
    // Built from constants: cannot fail unless the engine is broken, which tests must see.
    b.build().unwrap_or_else(|e| panic!("test engine: {e}"))
}

fn rr_key(r: &Record) -> String {
    use hickory_proto::rr::RecordType as T;
    // Names inside RDATA may legitimately differ in case (compression against the 0x20
    // question): compare those types case-insensitively, everything else byte for byte.
    let data = match r.record_type() {
        T::CNAME | T::NS | T::PTR | T::MX | T::SOA | T::SRV | T::NAPTR => {
            r.data.to_string().to_ascii_lowercase()
        }
        _ => format!("{:02x?}", r.data.to_bytes().unwrap_or_default()),
    };
    format!(
        "{} {} {} {} {}",
        r.name.to_lowercase(),
        u16::from(r.dns_class),
        r.ttl,
        u16::from(r.record_type()),
        data
    )
}

fn section(rs: &[Record]) -> Vec<String> {
    let mut v: Vec<String> = rs.iter().map(rr_key).collect();
    v.sort();
    v
}

/// Compares two replies semantically: header, question (byte-exact name case), EDNS, and
/// each section as a set of records. When either is truncated, only the header, question
/// and EDNS are compared (the two encoders compress differently, so the exact size at
/// which truncation starts may differ by a few bytes).
pub fn compare_replies(a: &[u8], b: &[u8]) -> Result<(), String> {
    let ma = Message::from_vec(a).map_err(|e| format!("first reply does not parse: {e}"))?;
    let mb = Message::from_vec(b).map_err(|e| format!("second reply does not parse: {e}"))?;
    let (ha, hb) = (&ma.metadata, &mb.metadata);
    let hdr = |m: &hickory_proto::op::Metadata| {
        (
            m.id,
            m.message_type,
            m.op_code,
            m.authoritative,
            m.recursion_desired,
            m.recursion_available,
            m.checking_disabled,
            m.response_code,
        )
    };
    if hdr(ha) != hdr(hb) {
        return Err(format!("header {:?} != {:?}", hdr(ha), hdr(hb)));
    }
    let qa: Vec<String> = ma
        .queries
        .iter()
        .map(|q| format!("{} {:?} {:?}", q.name(), q.query_type(), q.query_class()))
        .collect();
    let qb: Vec<String> = mb
        .queries
        .iter()
        .map(|q| format!("{} {:?} {:?}", q.name(), q.query_type(), q.query_class()))
        .collect();
    if qa != qb {
        return Err(format!("question {qa:?} != {qb:?}"));
    }
    let ea = ma
        .edns
        .as_ref()
        .map(|e| (e.version(), e.flags().dnssec_ok, e.max_payload()));
    let eb = mb
        .edns
        .as_ref()
        .map(|e| (e.version(), e.flags().dnssec_ok, e.max_payload()));
    if ea != eb {
        return Err(format!("edns {ea:?} != {eb:?}"));
    }
    if ha.truncation || hb.truncation {
        return Ok(());
    }
    for (name, x, y) in [
        ("answer", &ma.answers, &mb.answers),
        ("authority", &ma.authorities, &mb.authorities),
        ("additional", &ma.additionals, &mb.additionals),
    ] {
        let (sx, sy) = (section(x), section(y));
        if sx != sy {
            return Err(format!("{name} section {sx:?} != {sy:?}"));
        }
    }
    Ok(())
}
