//! Engine behaviour on byte arrays: malformed input, every local-zone type, every ACL
//! action, truncation, and a property test that the hot path and the general (hickory)
//! path give the same answer.

use std::net::IpAddr;

use proptest::prelude::*;
use skua_engine::acl::{AclAction, Netblock};
use skua_engine::engine::DropReason;
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::testing::{LOCAL_ZONES, compare_replies, fuzz_engine};
use skua_engine::text::parse_rr;
use skua_engine::{Engine, EngineBuilder, Outcome, Request, Transport};

const LO: &str = "127.0.0.1";

fn req(src: &str, transport: Transport) -> Request {
    Request {
        src: src.parse().unwrap(),
        transport,
        now: 0,
    }
}

fn query(name: &str, qtype: u16, rd: bool, edns: Option<(u16, bool)>) -> Vec<u8> {
    let mut p = vec![
        0x4a,
        0x11,
        if rd { 1 } else { 0 },
        0,
        0,
        1,
        0,
        0,
        0,
        0,
        0,
        u8::from(edns.is_some()),
    ];
    p.extend_from_slice(WireName::parse(name, None).unwrap().as_bytes());
    p.extend_from_slice(&qtype.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    if let Some((size, d)) = edns {
        p.extend_from_slice(&[0, 0, 0x29]);
        p.extend_from_slice(&size.to_be_bytes());
        p.extend_from_slice(&[0, 0, if d { 0x80 } else { 0 }, 0, 0, 0]);
    }
    p
}

/// (rcode, ancount, nscount, aa) of a reply, or None for a drop.
fn ask(e: &Engine, src: &str, q: &[u8]) -> Option<(u8, u16, u16, bool)> {
    let mut out = vec![0u8; 65535];
    match e.handle_query(&req(src, Transport::Udp), q, &mut out) {
        Outcome::Reply { len, .. } => {
            let r = &out[..len];
            assert_eq!(&r[..2], &q[..2], "ID echoed");
            Some((
                r[3] & 0x0f,
                u16::from_be_bytes([r[6], r[7]]),
                u16::from_be_bytes([r[8], r[9]]),
                r[2] & 0x04 != 0,
            ))
        }
        Outcome::Drop { .. } | Outcome::Resolve => None,
    }
}

#[test]
fn malformed_input_is_formerr_or_dropped() {
    let e = fuzz_engine();
    let good = query("a.static.example.", 1, true, None);
    let mut cases: Vec<(&str, Vec<u8>, Option<u8>)> = vec![
        ("empty", vec![], None),
        ("one byte", vec![0x12], None),
        ("11 bytes", good[..11].to_vec(), None),
        ("header only, qdcount 1", good[..12].to_vec(), Some(1)),
        ("cut in the name", good[..20].to_vec(), Some(1)),
        ("cut in qtype", good[..good.len() - 3].to_vec(), Some(1)),
    ];
    let mut resp = good.clone();
    resp[2] |= 0x80;
    cases.push(("a response (QR=1)", resp, None));
    let mut loop_self = good[..12].to_vec();
    loop_self.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
    cases.push(("pointer to itself", loop_self, Some(1)));
    let mut loop_two = good[..12].to_vec();
    loop_two.extend_from_slice(&[0x01, b'a', 0xc0, 0x0c, 0, 1, 0, 1]);
    cases.push(("label then pointer back (loop)", loop_two, Some(1)));
    let mut fwd = good[..12].to_vec();
    fwd.extend_from_slice(&[0xc0, 0x20, 0, 1, 0, 1]);
    cases.push(("pointer past the end", fwd, Some(1)));
    let mut long_label = good[..12].to_vec();
    long_label.push(64);
    long_label.extend_from_slice(&[b'a'; 64]);
    long_label.extend_from_slice(&[0, 0, 1, 0, 1]);
    cases.push(("64-octet label", long_label, Some(1)));
    let mut long_name = good[..12].to_vec();
    for _ in 0..5 {
        long_name.push(63);
        long_name.extend_from_slice(&[b'b'; 63]);
    }
    long_name.extend_from_slice(&[0, 0, 1, 0, 1]);
    cases.push(("name over 255 octets", long_name, Some(1)));
    let mut qd0 = good[..12].to_vec();
    qd0[5] = 0;
    cases.push(("qdcount 0", qd0, Some(1)));
    let mut qd2 = good.clone();
    qd2[5] = 2;
    qd2.extend_from_slice(&good[12..]);
    cases.push(("qdcount 2", qd2, Some(1)));
    let mut an1 = good.clone();
    an1[7] = 1;
    cases.push(("ancount 1 without records", an1, Some(1)));
    let mut tc = good.clone();
    tc[2] |= 0x02;
    cases.push(("TC set in a query", tc, Some(1)));
    let mut badopt = query("a.static.example.", 1, true, Some((1232, false)));
    let n = badopt.len();
    badopt[n - 1] = 8; // RDLENGTH 8 with no RDATA
    cases.push(("OPT RDLENGTH overrun", badopt, Some(1)));
    for (what, q, want) in cases {
        let got = ask(&e, LO, &q).map(|r| r.0);
        assert_eq!(got, want, "{what}");
        // The general path alone must agree on drop vs FORMERR.
        let mut out = vec![0u8; 65535];
        let g = match e.handle_query_general(&req(LO, Transport::Udp), &q, &mut out) {
            Outcome::Reply { len, .. } => Some(out[3] & 0x0f).filter(|_| len >= 12),
            Outcome::Drop { .. } | Outcome::Resolve => None,
        };
        assert_eq!(g, want, "{what} (general path)");
    }
    // Unknown opcode: NOTIMP; EDNS version 1: BADVERS (16 = ext 1, header 0).
    let mut op = good.clone();
    op[2] |= 0x10; // opcode 2 (STATUS)
    assert_eq!(ask(&e, LO, &op).map(|r| r.0), Some(4));
    let mut v1 = query("a.static.example.", 1, true, Some((1232, false)));
    let n = v1.len();
    v1[n - 5] = 1;
    let mut out = vec![0u8; 512];
    let Outcome::Reply { len, info } = e.handle_query(&req(LO, Transport::Udp), &v1, &mut out)
    else {
        panic!("BADVERS expected");
    };
    assert_eq!(info.rcode, 16);
    assert_eq!(out[len - 6], 1, "extended RCODE 1 in the OPT TTL");
}

/// An expected RCODE, or `None` for a dropped query.
type Rcode = Option<u8>;

#[test]
fn every_local_zone_type() {
    let e = fuzz_engine();
    // (zone type, existing A, existing name other type, missing name): Some(rcode) or None = drop.
    let table: &[(&str, Rcode, Rcode, Rcode)] = &[
        ("static", Some(0), Some(0), Some(3)),
        ("deny", Some(0), None, None),
        ("refuse", Some(0), Some(5), Some(5)),
        ("transparent", Some(0), Some(0), Some(5)),
        ("typetransparent", Some(0), Some(5), Some(5)),
        ("redirect", Some(0), Some(0), Some(0)),
        ("inform", Some(0), Some(0), Some(5)),
        ("inform_deny", Some(0), None, None),
        ("inform_redirect", Some(0), Some(0), Some(0)),
        ("always_transparent", Some(5), Some(5), Some(5)),
        ("always_refuse", Some(5), Some(5), Some(5)),
        ("always_nxdomain", Some(3), Some(3), Some(3)),
        ("always_nodata", Some(0), Some(0), Some(0)),
        ("always_deny", None, None, None),
        ("always_null", Some(0), Some(0), Some(0)),
        ("noview", Some(0), Some(0), Some(5)),
    ];
    for (t, exist, other, missing) in table {
        let zone = LOCAL_ZONES.iter().find(|(_, zt)| zt == t).unwrap().0;
        let a = ask(&e, LO, &query(&format!("a.{zone}"), 1, true, None));
        let o = ask(&e, LO, &query(&format!("a.{zone}"), 15, true, None));
        let m = ask(&e, LO, &query(&format!("missing.{zone}"), 1, true, None));
        assert_eq!(a.map(|r| r.0), *exist, "{t}: existing A");
        assert_eq!(o.map(|r| r.0), *other, "{t}: existing name, MX");
        assert_eq!(m.map(|r| r.0), *missing, "{t}: missing name");
    }
    // Answers carry data; negative answers carry the SOA; refusals do not; AA on local answers.
    assert_eq!(
        ask(&e, LO, &query("a.static.example.", 1, true, None)),
        Some((0, 1, 0, true))
    );
    assert_eq!(
        ask(&e, LO, &query("missing.static.example.", 1, true, None)),
        Some((3, 0, 1, true))
    );
    assert_eq!(
        ask(&e, LO, &query("x.refuse.example.", 1, true, None)),
        Some((5, 0, 0, true))
    );
    // always_null: 0.0.0.0 for missing names, data for existing ones.
    assert_eq!(
        ask(
            &e,
            LO,
            &query("missing.always-null.example.", 28, true, None)
        ),
        Some((0, 1, 0, true))
    );
    // Redirect: any name below gets the apex data.
    assert_eq!(
        ask(&e, LO, &query("x.y.redirect.example.", 1, true, None)),
        Some((0, 1, 0, true))
    );
    // Empty non-terminal in a static zone: NODATA.
    assert_eq!(
        ask(&e, LO, &query("ent.static.example.", 1, true, None)),
        Some((0, 0, 1, true))
    );
    // Authoritative zone: referral below the cut (no AA), wildcard, CNAME chain.
    assert_eq!(
        ask(&e, LO, &query("x.sub.auth.example.", 1, true, None)),
        Some((0, 0, 1, false))
    );
    assert_eq!(
        ask(&e, LO, &query("q.wild.auth.example.", 16, true, None)),
        Some((0, 1, 0, true))
    );
    assert_eq!(
        ask(&e, LO, &query("alias.auth.example.", 1, true, None)),
        Some((0, 2, 0, true))
    );
}

fn engine_with_acl(rules: &[(&str, AclAction)]) -> Engine {
    let mut b = EngineBuilder::new();
    b.local_zone(
        WireName::parse("example.", None).unwrap(),
        LocalZoneType::Static,
    );
    b.local_data(
        parse_rr("www.example. 300 IN A 198.18.0.1", None, 3600).unwrap(),
        0,
    );
    for (nb, a) in rules {
        b.acl_mut().insert(nb.parse::<Netblock>().unwrap(), *a);
    }
    b.build().unwrap()
}

#[test]
fn every_acl_action() {
    let e = engine_with_acl(&[
        ("198.18.1.0/24", AclAction::Allow),
        ("198.18.2.0/24", AclAction::Deny),
        ("198.18.3.0/24", AclAction::Refuse),
        ("198.18.4.0/24", AclAction::DenyNonLocal),
        ("198.18.5.0/24", AclAction::RefuseNonLocal),
        ("198.18.6.0/24", AclAction::AllowSnoop),
        ("198.18.7.0/24", AclAction::AllowSetRd),
        ("198.18.2.9/32", AclAction::Allow),
    ]);
    let local = query("www.example.", 1, false, Some((1232, false)));
    let remote = query("www.elsewhere.", 1, true, None);
    let mut out = vec![0u8; 512];
    // allow / allow_snoop: local answered, the rest REFUSED (no forwarding yet).
    for src in ["198.18.1.1", "198.18.6.1"] {
        assert_eq!(ask(&e, src, &local).map(|r| r.0), Some(0), "{src}");
        assert_eq!(ask(&e, src, &remote).map(|r| r.0), Some(5), "{src}");
    }
    // deny drops everything; the most specific /32 inside it allows.
    let o = e.handle_query(&req("198.18.2.1", Transport::Udp), &local, &mut out);
    assert_eq!(
        o,
        Outcome::Drop {
            reason: DropReason::Acl,
            inform: false
        }
    );
    assert_eq!(ask(&e, "198.18.2.9", &local).map(|r| r.0), Some(0));
    // refuse: a bare 12-byte REFUSED, no question, no OPT (Unbound's shape).
    let Outcome::Reply { len, .. } =
        e.handle_query(&req("198.18.3.1", Transport::Udp), &local, &mut out)
    else {
        panic!("refuse must reply");
    };
    assert_eq!(len, 12);
    assert_eq!(out[3] & 0x0f, 5);
    assert_eq!(&out[4..12], &[0; 8]);
    // *_non_local: local data answered; the rest dropped / refused.
    assert_eq!(ask(&e, "198.18.4.1", &local).map(|r| r.0), Some(0));
    assert_eq!(ask(&e, "198.18.4.1", &remote), None);
    assert_eq!(ask(&e, "198.18.5.1", &local).map(|r| r.0), Some(0));
    assert_eq!(ask(&e, "198.18.5.1", &remote).map(|r| r.0), Some(5));
    // allow_setrd: RD set in the reply although the query had RD=0.
    let Outcome::Reply { .. } =
        e.handle_query(&req("198.18.7.1", Transport::Udp), &local, &mut out)
    else {
        panic!()
    };
    assert_eq!(out[2] & 0x01, 1);
    // Unmatched clients: refused (Unbound's default); IPv6 localhost allowed.
    assert_eq!(ask(&e, "203.0.113.1", &local).map(|r| r.0), Some(5));
    assert_eq!(ask(&e, "::1", &local).map(|r| r.0), Some(0));
}

#[test]
fn truncation_by_transport_and_edns_size() {
    let e = fuzz_engine();
    let big = |edns| query("big.static.example.", 1, true, edns);
    let mut out = vec![0u8; 65535];
    let run = |q: &[u8], t: Transport, out: &mut Vec<u8>| match e.handle_query(&req(LO, t), q, out)
    {
        Outcome::Reply { len, info } => (len, info.truncated, u16::from_be_bytes([out[6], out[7]])),
        Outcome::Drop { .. } | Outcome::Resolve => panic!("not answered"),
    };
    // 120 A records = 1920 bytes of answers.
    let (len, tc, an) = run(&big(None), Transport::Udp, &mut out);
    assert!(tc && len <= 512 && an == 0);
    let (len, tc, an) = run(&big(Some((100, false))), Transport::Udp, &mut out);
    assert!(tc && len <= 512 && an == 0, "sizes below 512 count as 512");
    let (len, tc, _) = run(&big(Some((1232, true))), Transport::Udp, &mut out);
    assert!(tc && len <= 1232);
    assert_eq!(
        &out[len - 11..len - 8],
        &[0, 0, 0x29],
        "OPT kept in a TC reply"
    );
    let (len, tc, an) = run(&big(Some((4096, false))), Transport::Udp, &mut out);
    assert!(!tc && an == 120 && len <= 4096);
    let (_, tc, an) = run(&big(None), Transport::Tcp, &mut out);
    assert!(!tc && an == 120);
}

#[test]
fn case_is_echoed_and_any_gets_one_rrset() {
    let e = fuzz_engine();
    let q = query("A.StAtIc.ExAmPlE.", 1, true, None);
    let mut out = vec![0u8; 512];
    let Outcome::Reply { len, .. } = e.handle_query(&req(LO, Transport::Udp), &q, &mut out) else {
        panic!()
    };
    assert_eq!(&out[12..12 + 19], &q[12..12 + 19]);
    assert!(len > q.len());
    // ANY (RFC 8482): one RRset, not everything at the name.
    assert_eq!(
        ask(&e, LO, &query("a.static.example.", 255, true, None)),
        Some((0, 1, 0, true))
    );
    // CHAOS version.bind.
    let mut ch = query("version.bind.", 16, true, None);
    let n = ch.len();
    ch[n - 1] = 3;
    assert_eq!(ask(&e, LO, &ch).map(|r| (r.0, r.1)), Some((0, 1)));
}

fn arb_query() -> impl Strategy<Value = (Vec<u8>, Transport)> {
    let zones: Vec<&'static str> = LOCAL_ZONES
        .iter()
        .map(|z| z.0)
        .chain([
            "auth.example.",
            "sub.auth.example.",
            "wild.auth.example.",
            "localhost.",
            "10.in-addr.arpa.",
            "elsewhere.",
        ])
        .collect();
    let labels = [
        "",
        "a.",
        "c.",
        "mx.",
        "txt.",
        "big.",
        "ent.",
        "deep.ent.",
        "missing.",
        "x.y.",
        "www.",
        "alias.",
        "ns.",
        "*.",
    ];
    let types: [u16; 14] = [1, 28, 5, 15, 16, 6, 2, 12, 33, 43, 48, 65, 255, 99];
    (
        prop::sample::select(zones),
        prop::sample::select(labels.to_vec()),
        prop::sample::select(types.to_vec()),
        any::<u64>(),
        prop::option::of((0u16..5000, any::<bool>())),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(zone, label, qtype, case, edns, rd, cd, tcp)| {
            let name = format!("{label}{zone}");
            let mut q = query(&name, qtype, rd, edns);
            if cd {
                q[3] |= 0x10;
            }
            // Random 0x20 case on the name bytes.
            let end = 12 + WireName::parse(&name, None).unwrap().len();
            for (i, b) in q[12..end].iter_mut().enumerate() {
                if b.is_ascii_lowercase() && case >> (i % 64) & 1 == 1 {
                    *b = b.to_ascii_uppercase();
                }
            }
            (q, if tcp { Transport::Tcp } else { Transport::Udp })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    /// The hot path and the general path (hickory-proto, no shared encoding code) answer
    /// every generated query the same way.
    #[test]
    fn hot_path_equals_general_path((q, transport) in arb_query()) {
        let e = engine();
        let r = Request { src: IpAddr::from([127, 0, 0, 1]), transport, now: 0 };
        let mut a = vec![0u8; 65535];
        let mut b = vec![0u8; 65535];
        let ha = e.handle_query(&r, &q, &mut a);
        let hb = e.handle_query_general(&r, &q, &mut b);
        match (ha, hb) {
            (Outcome::Reply { len: la, .. }, Outcome::Reply { len: lb, .. }) => {
                if let Err(d) = compare_replies(&a[..la], &b[..lb]) {
                    prop_assert!(false, "query {:02x?}: {}", q, d);
                }
            }
            (Outcome::Drop { reason: ra, .. }, Outcome::Drop { reason: rb, .. }) => prop_assert_eq!(ra, rb),
            (x, y) => prop_assert!(false, "query {:02x?}: {:?} vs {:?}", q, x, y),
        }
    }
}

fn engine() -> &'static Engine {
    static E: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    E.get_or_init(fuzz_engine)
}
