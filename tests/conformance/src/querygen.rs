//! Deterministic test data and query sets: the local-zone configuration
//! (one unbound.conf text for both servers) and the authoritative zone file,
//! each with a seeded query generator.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::wire::{EdnsQuery, Query, types};

/// Small deterministic PRNG (SplitMix64): the query set must not change
/// when a dependency's RNG does.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Uniform in `lo..=hi`.
    pub fn range_u16(&mut self, lo: u16, hi: u16) -> u16 {
        let span = u64::from(hi - lo) + 1;
        lo + u16::try_from(self.below(span)).unwrap_or(0)
    }
}

/// Every RR type the generators query (no ANY: RFC 8482 differs by design).
pub const QUERY_TYPES: &[u16] = &[
    types::A,
    types::AAAA,
    types::CNAME,
    types::MX,
    types::TXT,
    types::SRV,
    types::PTR,
    types::NS,
    types::SOA,
    types::CAA,
    types::SSHFP,
    types::TLSA,
    types::NAPTR,
    types::SVCB,
    types::HTTPS,
    types::DS,
    types::DNSKEY,
];

fn type_code(name: &str) -> u16 {
    match name {
        "A" => types::A,
        "NS" => types::NS,
        "CNAME" => types::CNAME,
        "SOA" => types::SOA,
        "PTR" => types::PTR,
        "MX" => types::MX,
        "TXT" => types::TXT,
        "AAAA" => types::AAAA,
        "SRV" => types::SRV,
        "NAPTR" => types::NAPTR,
        "SSHFP" => types::SSHFP,
        "TLSA" => types::TLSA,
        "SVCB" => types::SVCB,
        "HTTPS" => types::HTTPS,
        "CAA" => types::CAA,
        _ => 0,
    }
}

/// Applies 0x20-style case randomisation to a lower-case name.
pub fn random_case(name: &str, rng: &mut Rng) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() && rng.chance(50) {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

/// Wire length of a presentation name.
pub fn wire_name_len(name: &str) -> usize {
    let n = name.trim_end_matches('.');
    if n.is_empty() { 1 } else { n.len() + 2 }
}

/// Randomises the per-query knobs: case, EDNS/UDP size/DO, RD, CD,
/// transport. `tcp_percent` of the queries go over TCP.
fn vary(
    rng: &mut Rng,
    qname: &str,
    qtype: u16,
    category: &'static str,
    needs_resolution: bool,
    tcp_percent: u64,
) -> Query {
    let case_roll = rng.below(100);
    let qname = if case_roll < 50 {
        random_case(qname, rng)
    } else if case_roll < 55 {
        qname.to_ascii_uppercase()
    } else {
        qname.to_string()
    };
    let edns = if rng.chance(15) {
        None
    } else {
        let size_roll = rng.below(100);
        let udp_size = match size_roll {
            0..=24 => 1232,
            25..=39 => 512,
            40..=54 => 4096,
            55..=94 => rng.range_u16(512, 4096),
            _ => rng.range_u16(0, 511),
        };
        Some(EdnsQuery {
            udp_size,
            dnssec_ok: rng.chance(30),
        })
    };
    Query {
        qname,
        qtype,
        qclass: 1,
        rd: rng.chance(75),
        cd: rng.chance(5),
        edns,
        tcp: rng.chance(tcp_percent),
        category,
        needs_resolution,
    }
}

/// Queries around the truncation limits for a name whose answer holds
/// `n_a` A records: no EDNS, sizes just below/at/above the exact fit, TCP.
fn tc_sweep(rng: &mut Rng, qname: &str, n_a: usize, category: &'static str, out: &mut Vec<Query>) {
    // header + question + n * (compressed owner, type, class, ttl, rdlen, IPv4) + OPT
    let fit = 12 + wire_name_len(qname) + 4 + n_a * 16 + 11;
    let fit = u16::try_from(fit).unwrap_or(u16::MAX);
    let mut sizes = vec![0, 511, 512, 513, 1232, 1400, 4096];
    for d in [-2i32, -1, 0, 1, 2] {
        sizes.push(u16::try_from(i32::from(fit) + d).unwrap_or(512));
    }
    for &size in &sizes {
        for dnssec_ok in [false, true] {
            let mut q = vary(rng, qname, types::A, category, false, 0);
            q.edns = Some(EdnsQuery {
                udp_size: size,
                dnssec_ok,
            });
            out.push(q);
        }
    }
    for tcp in [false, false, false, true] {
        let mut q = vary(rng, qname, types::A, category, false, 0);
        q.edns = None;
        q.tcp = tcp;
        out.push(q);
        let mut q = vary(rng, qname, types::A, category, false, 0);
        q.tcp = true;
        out.push(q);
    }
}

// ---------------------------------------------------------------------------
// Test 1: local zones
// ---------------------------------------------------------------------------

/// One `local-data` record.
#[derive(Debug, Clone)]
struct LocalRr {
    owner: String,
    ttl: u32,
    rtype: &'static str,
    rdata: String,
}

/// One `local-zone` with its data.
#[derive(Debug, Clone)]
struct LocalZone {
    name: String,
    ztype: &'static str,
    data: Vec<LocalRr>,
    /// Extra (relative) names to query besides the data owners.
    probe: Vec<String>,
}

/// The local-zone scenario: configuration and query model.
#[derive(Debug, Clone)]
pub struct LocalScenario {
    zones: Vec<LocalZone>,
    /// `local-data` outside every configured zone (Unbound makes a
    /// transparent zone at the owner, or uses a default zone above it).
    free_data: Vec<LocalRr>,
    /// `local-data-ptr` entries (address, name).
    ptrs: Vec<(String, String)>,
    /// Names to query in Unbound's default zones.
    default_names: Vec<String>,
    /// Names outside all local data.
    outside_names: Vec<String>,
}

const HEX40: &str = "0123456789abcdef0123456789abcdef01234567";
const HEX64: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn soa_rr(zone: &str, ttl: u32, minimum: u32) -> LocalRr {
    LocalRr {
        owner: zone.to_string(),
        ttl,
        rtype: "SOA",
        rdata: format!("ns1.{zone} hostmaster.{zone} 2024010101 3600 900 86400 {minimum}"),
    }
}

fn lrr(owner: &str, zone: &str, ttl: u32, rtype: &'static str, rdata: &str) -> LocalRr {
    let owner = if owner == "@" {
        zone.to_string()
    } else {
        format!("{owner}.{zone}")
    };
    LocalRr {
        owner,
        ttl,
        rtype,
        rdata: rdata.replace("$Z", zone),
    }
}

/// Default local zones of Unbound 1.17 that the query set touches, with
/// their type (`localhost.` is a redirect zone, the others static).
const DEFAULT_ZONES: &[(&str, &str)] = &[
    ("localhost.", "redirect"),
    ("127.in-addr.arpa.", "static"),
    (
        "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa.",
        "static",
    ),
    ("onion.", "static"),
    ("test.", "static"),
    ("invalid.", "static"),
    ("home.arpa.", "static"),
    ("10.in-addr.arpa.", "static"),
    ("16.172.in-addr.arpa.", "static"),
    ("168.192.in-addr.arpa.", "static"),
    ("254.169.in-addr.arpa.", "static"),
    ("0.in-addr.arpa.", "static"),
    ("2.0.192.in-addr.arpa.", "static"),
    ("100.51.198.in-addr.arpa.", "static"),
    ("255.255.255.255.in-addr.arpa.", "static"),
    ("8.b.d.0.1.0.0.2.ip6.arpa.", "static"),
];

impl LocalScenario {
    /// The fixed scenario.
    pub fn new() -> Self {
        let mut zones = Vec::new();

        // static, with SOA (TTL 3600 > MINIMUM 300) and most RR types.
        let z = "static.skua.";
        let mut d = vec![
            soa_rr(z, 3600, 300),
            lrr("@", z, 3600, "NS", "ns1.$Z"),
            lrr("@", z, 300, "A", "192.0.2.10"),
            lrr("@", z, 300, "MX", "10 mail.$Z"),
            lrr("@", z, 300, "TXT", "\"v=spf1 -all\""),
            lrr("ns1", z, 3600, "A", "192.0.2.53"),
            lrr("ns1", z, 3600, "AAAA", "2001:db8::53"),
            lrr("www", z, 300, "A", "192.0.2.80"),
            lrr("www", z, 300, "AAAA", "2001:db8::80"),
            lrr("www", z, 60, "TXT", "\"web\""),
            lrr("mail", z, 300, "A", "192.0.2.25"),
            lrr("txt", z, 300, "TXT", "\"hello world\""),
            lrr("multi", z, 300, "TXT", "\"one\" \"two\" \"three\""),
            lrr("_sip._tcp", z, 300, "SRV", "10 60 5060 sip.$Z"),
            lrr("sip", z, 300, "A", "192.0.2.60"),
            lrr("caa", z, 300, "CAA", "0 issue \"ca.example.net\""),
            lrr(
                "caa",
                z,
                300,
                "CAA",
                "128 iodef \"mailto:security@example.net\"",
            ),
            lrr("ssh", z, 300, "SSHFP", &format!("1 1 {HEX40}")),
            lrr("ssh", z, 300, "SSHFP", &format!("4 2 {HEX64}")),
            lrr("_443._tcp.www", z, 300, "TLSA", &format!("3 1 1 {HEX64}")),
            lrr(
                "naptr",
                z,
                300,
                "NAPTR",
                "100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.$Z",
            ),
            lrr(
                "svc",
                z,
                300,
                "SVCB",
                "1 svc-target.$Z alpn=\"h2,h3\" port=8443 ipv4hint=192.0.2.1",
            ),
            lrr("svc0", z, 300, "SVCB", "0 www.$Z"),
            lrr("https", z, 300, "HTTPS", "1 . alpn=h2"),
            lrr("ptr", z, 300, "PTR", "www.$Z"),
            lrr("deleg", z, 300, "NS", "ns1.$Z"),
            lrr("cname-same", z, 300, "CNAME", "www.$Z"),
            lrr("cname-chain", z, 300, "CNAME", "cname-same.$Z"),
            lrr("cname-other", z, 300, "CNAME", "www.trans.skua."),
            lrr("cname-static", z, 300, "CNAME", "www.static-nosoa.skua."),
            lrr("cname-out", z, 300, "CNAME", "www.example.com."),
            lrr("cname-missing", z, 300, "CNAME", "missing.$Z"),
            lrr("zero", z, 0, "A", "192.0.2.201"),
            lrr("week", z, 604_800, "A", "192.0.2.202"),
            lrr("deep.ent", z, 300, "A", "192.0.2.7"),
            lrr("*.wild", z, 300, "A", "192.0.2.99"),
        ];
        let long = |c: char| std::iter::repeat_n(c, 200).collect::<String>();
        d.push(lrr(
            "longtxt",
            z,
            300,
            "TXT",
            &format!("\"{}\" \"{}\" \"{}\"", long('a'), long('b'), long('c')),
        ));
        for i in 1..=40 {
            d.push(lrr("big", z, 300, "A", &format!("10.0.0.{i}")));
        }
        for i in 1..=100 {
            d.push(lrr("huge", z, 300, "A", &format!("10.0.1.{i}")));
        }
        zones.push(LocalZone {
            name: z.into(),
            ztype: "static",
            data: d,
            probe: vec![
                "nx".into(),
                "x.www".into(),
                "ent".into(),
                "x.wild".into(),
                "wild".into(),
            ],
        });

        let mut simple =
            |name: &str, ztype: &'static str, soa: Option<(u32, u32)>, extra: Vec<LocalRr>| {
                let mut data = Vec::new();
                if let Some((ttl, min)) = soa {
                    data.push(soa_rr(name, ttl, min));
                }
                let redirect = ztype.contains("redirect");
                if redirect {
                    data.push(lrr("@", name, 300, "A", "192.0.2.100"));
                } else {
                    data.push(lrr("www", name, 300, "A", "192.0.2.101"));
                    data.push(lrr("www", name, 300, "TXT", "\"www\""));
                }
                data.extend(extra);
                zones.push(LocalZone {
                    name: name.into(),
                    ztype,
                    data,
                    probe: vec!["nx".into(), "x.www".into()],
                });
            };
        simple(
            "static-nosoa.skua.",
            "static",
            None,
            vec![lrr(
                "cname",
                "static-nosoa.skua.",
                300,
                "CNAME",
                "www.static-nosoa.skua.",
            )],
        );
        // SOA TTL (60) below SOA MINIMUM (600): negative answers use min(TTL, MINIMUM).
        simple("lowttl.skua.", "static", Some((60, 600)), vec![]);
        simple(
            "trans.skua.",
            "transparent",
            Some((3600, 300)),
            vec![
                lrr("mx", "trans.skua.", 300, "MX", "10 www.trans.skua."),
                lrr("deep.ent", "trans.skua.", 300, "A", "192.0.2.7"),
            ],
        );
        // A static zone nested in the transparent one.
        simple("inner.trans.skua.", "static", Some((3600, 300)), vec![]);
        simple("trans-nosoa.skua.", "transparent", None, vec![]);
        simple(
            "tt.skua.",
            "typetransparent",
            Some((3600, 300)),
            vec![lrr("cname", "tt.skua.", 300, "CNAME", "www.static.skua.")],
        );
        simple("deny.skua.", "deny", Some((3600, 300)), vec![]);
        simple("refuse.skua.", "refuse", None, vec![]);
        simple(
            "redirect.skua.",
            "redirect",
            Some((3600, 300)),
            vec![lrr("@", "redirect.skua.", 300, "AAAA", "2001:db8::100")],
        );
        simple("redirect-nosoa.skua.", "redirect", None, vec![]);
        simple("inform.skua.", "inform", Some((3600, 300)), vec![]);
        simple("inform-deny.skua.", "inform_deny", None, vec![]);
        simple(
            "inform-redirect.skua.",
            "inform_redirect",
            Some((3600, 300)),
            vec![],
        );
        simple(
            "always-transparent.skua.",
            "always_transparent",
            Some((3600, 300)),
            vec![],
        );
        simple(
            "always-refuse.skua.",
            "always_refuse",
            Some((3600, 300)),
            vec![],
        );
        simple(
            "always-nxdomain.skua.",
            "always_nxdomain",
            Some((3600, 300)),
            vec![],
        );
        simple(
            "always-nxdomain-nosoa.skua.",
            "always_nxdomain",
            None,
            vec![],
        );
        simple(
            "always-nodata.skua.",
            "always_nodata",
            Some((3600, 300)),
            vec![],
        );
        simple("always-nodata-nosoa.skua.", "always_nodata", None, vec![]);
        simple("always-deny.skua.", "always_deny", None, vec![]);
        simple("always-null.skua.", "always_null", None, vec![]);
        simple("noview.skua.", "noview", Some((3600, 300)), vec![]);
        simple("nodefault.skua.", "nodefault", Some((3600, 300)), vec![]);
        // A transparent zone below the default static zone test.
        simple("lab.test.", "transparent", None, vec![]);
        // Redirect zone whose apex is a CNAME: a "local alias" Unbound resolves.
        zones.push(LocalZone {
            name: "alias.skua.".into(),
            ztype: "redirect",
            data: vec![lrr("@", "alias.skua.", 300, "CNAME", "www.static.skua.")],
            probe: vec!["x".into()],
        });

        let free_data = vec![
            lrr("a", "nozone.skub.", 300, "A", "192.0.2.6"),
            lrr("a", "nozone.skub.", 300, "TXT", "\"no zone\""),
            lrr("cn", "nozone.skub.", 300, "CNAME", "www.static.skua."),
            // Falls into the default static zone home.arpa.
            lrr("printer", "home.arpa.", 300, "A", "192.0.2.203"),
        ];
        let ptrs = vec![
            ("198.18.0.1".to_string(), "www.static.skua.".to_string()),
            ("198.18.0.2".to_string(), "mail.static.skua.".to_string()),
            ("192.0.2.80".to_string(), "www.static.skua.".to_string()),
            ("2001:db8::80".to_string(), "www.static.skua.".to_string()),
        ];
        let default_names = [
            "localhost.",
            "foo.localhost.",
            "1.0.0.127.in-addr.arpa.",
            "2.0.0.127.in-addr.arpa.",
            "127.in-addr.arpa.",
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa.",
            "onion.",
            "foo.onion.",
            "test.",
            "foo.test.",
            "invalid.",
            "foo.invalid.",
            "home.arpa.",
            "nx.home.arpa.",
            "10.in-addr.arpa.",
            "1.0.0.10.in-addr.arpa.",
            "1.1.168.192.in-addr.arpa.",
            "1.16.172.in-addr.arpa.",
            "1.1.254.169.in-addr.arpa.",
            "0.in-addr.arpa.",
            "2.0.192.in-addr.arpa.",
            "81.2.0.192.in-addr.arpa.",
            "100.51.198.in-addr.arpa.",
            "255.255.255.255.in-addr.arpa.",
            "8.b.d.0.1.0.0.2.ip6.arpa.",
            "1.8.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let outside_names = [
            "www.example.com.",
            "example.",
            "skua.",
            "foo.skua.",
            "skub.",
            "nozone.skub.",
            "x.a.nozone.skub.",
            "0.18.198.in-addr.arpa.",
            "3.0.18.198.in-addr.arpa.",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        LocalScenario {
            zones,
            free_data,
            ptrs,
            default_names,
            outside_names,
        }
    }

    /// The unbound.conf text (identical for both servers but for `port`).
    pub fn unbound_conf(&self, port: u16, directory: &str) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "# Generated by skua-conformance (tests/conformance/src/querygen.rs).\n\
             server:\n\
             \x20 interface: 127.0.0.1\n\
             \x20 port: {port}\n\
             \x20 do-ip6: no\n\
             \x20 chroot: \"\"\n\
             \x20 username: \"\"\n\
             \x20 pidfile: \"\"\n\
             \x20 directory: \"{directory}\"\n\
             \x20 use-syslog: no\n\
             \x20 logfile: \"\"\n\
             \x20 verbosity: 0\n\
             \x20 module-config: \"iterator\"\n\
             \x20 do-not-query-localhost: yes\n\
             \x20 qname-minimisation: no\n\
             \x20 edns-buffer-size: 1232\n\
             \x20 access-control: 127.0.0.0/8 allow\n"
        );
        for z in &self.zones {
            let _ = writeln!(s, "\n  local-zone: \"{}\" {}", z.name, z.ztype);
            for r in &z.data {
                let _ = writeln!(
                    s,
                    "  local-data: '{} {} IN {} {}'",
                    r.owner, r.ttl, r.rtype, r.rdata
                );
            }
        }
        s.push('\n');
        for r in &self.free_data {
            let _ = writeln!(
                s,
                "  local-data: '{} {} IN {} {}'",
                r.owner, r.ttl, r.rtype, r.rdata
            );
        }
        for (addr, name) in &self.ptrs {
            let _ = writeln!(s, "  local-data-ptr: \"{addr} {name}\"");
        }
        s
    }

    fn all_data(&self) -> impl Iterator<Item = &LocalRr> {
        self.zones
            .iter()
            .flat_map(|z| z.data.iter())
            .chain(self.free_data.iter())
    }

    fn ptr_owner(addr: &str) -> String {
        if let Ok(v4) = addr.parse::<std::net::Ipv4Addr>() {
            let o = v4.octets();
            format!("{}.{}.{}.{}.in-addr.arpa.", o[3], o[2], o[1], o[0])
        } else if let Ok(v6) = addr.parse::<std::net::Ipv6Addr>() {
            let mut s = String::new();
            for b in v6.octets().iter().rev() {
                let _ = write!(s, "{:x}.{:x}.", b & 0xf, b >> 4);
            }
            s + "ip6.arpa."
        } else {
            String::new()
        }
    }

    /// Model of Unbound's local-zone tree for this configuration: the
    /// configured zones (`nodefault` creates none), the default zones not
    /// overridden, and the single implicit transparent zone Unbound creates
    /// at the closest common ancestor of all local-data outside any zone;
    /// each record placed in the zone Unbound's lookup finds for it.
    pub fn model(&self) -> ZoneTree {
        let mut zones: Vec<ZoneModel> = self
            .zones
            .iter()
            .filter(|z| z.ztype != "nodefault")
            .map(|z| ZoneModel {
                apex: z.name.clone(),
                ztype: z.ztype.to_string(),
                rrs: BTreeSet::new(),
            })
            .collect();
        for (name, t) in DEFAULT_ZONES {
            if !self.zones.iter().any(|z| z.name == *name) {
                zones.push(ZoneModel {
                    apex: name.to_string(),
                    ztype: t.to_string(),
                    rrs: BTreeSet::new(),
                });
            }
        }
        for d in &zones {
            debug_assert!(d.apex.ends_with('.'));
        }
        let mut records: Vec<(String, u16)> = self
            .all_data()
            .map(|r| (r.owner.to_ascii_lowercase(), type_code(r.rtype)))
            .collect();
        for (addr, _) in &self.ptrs {
            records.push((Self::ptr_owner(addr), types::PTR));
        }
        let mut tree = ZoneTree { zones };
        // Implicit transparent zone over all zone-less data.
        let orphans: Vec<&String> = records
            .iter()
            .filter(|(o, t)| tree.lookup(o, *t).is_none())
            .map(|(o, _)| o)
            .collect();
        if let Some(first) = orphans.first() {
            let mut common: Vec<&str> = labels(first);
            for o in &orphans[1..] {
                let l = labels(o);
                let n = common
                    .iter()
                    .zip(l.iter())
                    .take_while(|(a, b)| a == b)
                    .count();
                common.truncate(n);
            }
            let apex = if common.is_empty() {
                ".".to_string()
            } else {
                common
                    .iter()
                    .rev()
                    .map(|l| format!("{l}."))
                    .collect::<String>()
            };
            tree.zones.push(ZoneModel {
                apex,
                ztype: "implicit".into(),
                rrs: BTreeSet::new(),
            });
        }
        for (o, t) in records {
            if let Some(i) = tree.lookup(&o, t) {
                tree.zones[i].rrs.insert((o, t));
            }
        }
        tree
    }

    /// Category of a query for statistics.
    fn category(tree: &ZoneTree, qname: &str, qtype: u16) -> &'static str {
        match tree.lookup(qname, qtype).map(|i| &tree.zones[i]) {
            None => "outside-local-data",
            Some(z) if DEFAULT_ZONES.iter().any(|(n, _)| *n == z.apex) => "default-zone",
            Some(z) => match z.ztype.as_str() {
                "implicit" => "implicit-transparent",
                "deny" => "zone:deny",
                "refuse" => "zone:refuse",
                "static" => "zone:static",
                "transparent" => "zone:transparent",
                "typetransparent" => "zone:typetransparent",
                "redirect" => "zone:redirect",
                "inform" => "zone:inform",
                "inform_deny" => "zone:inform_deny",
                "inform_redirect" => "zone:inform_redirect",
                "always_transparent" => "zone:always_transparent",
                "always_refuse" => "zone:always_refuse",
                "always_nxdomain" => "zone:always_nxdomain",
                "always_nodata" => "zone:always_nodata",
                "always_deny" => "zone:always_deny",
                "always_null" => "zone:always_null",
                "noview" => "zone:noview",
                _ => "zone:other",
            },
        }
    }

    /// Every name the generator queries (lower case).
    pub fn names(&self) -> Vec<String> {
        let mut names: BTreeSet<String> = BTreeSet::new();
        for z in &self.zones {
            names.insert(z.name.clone());
            for r in &z.data {
                names.insert(r.owner.clone());
            }
            for p in &z.probe {
                names.insert(format!("{p}.{}", z.name));
            }
        }
        for r in &self.free_data {
            names.insert(r.owner.clone());
        }
        for (addr, _) in &self.ptrs {
            names.insert(Self::ptr_owner(addr));
        }
        names.extend(self.default_names.iter().cloned());
        names.extend(self.outside_names.iter().cloned());
        names.into_iter().collect()
    }

    /// The generated query set: every name × every type, twice with
    /// different random knobs, plus truncation sweeps.
    pub fn queries(&self, seed: u64) -> Vec<Query> {
        let mut rng = Rng::new(seed);
        let tree = self.model();
        let names = self.names();
        let mut out = Vec::new();
        for _pass in 0..2 {
            for name in &names {
                for &qtype in QUERY_TYPES {
                    let lc = name.to_ascii_lowercase();
                    let res = tree.needs_resolution(&lc, qtype);
                    let cat = Self::category(&tree, &lc, qtype);
                    out.push(vary(&mut rng, name, qtype, cat, res, 6));
                }
            }
        }
        tc_sweep(&mut rng, "big.static.skua.", 40, "tc-sweep", &mut out);
        tc_sweep(&mut rng, "huge.static.skua.", 100, "tc-sweep", &mut out);
        for name in [
            "longtxt.static.skua.",
            "www.static.skua.",
            "localhost.",
            "nx.static.skua.",
        ] {
            for size in [0, 512, 700, 1232, 4096] {
                let mut q = vary(&mut rng, name, types::TXT, "tc-sweep", false, 0);
                q.edns = if size == 0 {
                    None
                } else {
                    Some(EdnsQuery {
                        udp_size: size,
                        dnssec_ok: false,
                    })
                };
                out.push(q);
            }
        }
        out
    }
}

/// Labels of a lower-case absolute name, root first (`a.b.` -> `[b, a]`).
fn labels(name: &str) -> Vec<&str> {
    name.trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
        .rev()
        .collect()
}

/// One local zone in the model.
#[derive(Debug, Clone)]
pub struct ZoneModel {
    /// Apex, lower case, absolute (`.` for the root).
    pub apex: String,
    /// Unbound zone type (`implicit` for the implicit transparent zone).
    pub ztype: String,
    /// (owner, type) of the records Unbound stores in this zone.
    pub rrs: BTreeSet<(String, u16)>,
}

/// Unbound's local-zone tree as modelled by the generator.
#[derive(Debug, Clone)]
pub struct ZoneTree {
    /// All zones.
    pub zones: Vec<ZoneModel>,
}

impl ZoneTree {
    /// `local_zones_lookup`: closest enclosing zone; for DS the lookup
    /// starts one label up (DS lives on the parent side of a cut).
    pub fn lookup(&self, qname: &str, qtype: u16) -> Option<usize> {
        let name = if qtype == types::DS && qname != "." {
            qname
                .split_once('.')
                .map_or(".", |(_, rest)| if rest.is_empty() { "." } else { rest })
        } else {
            qname
        };
        let enclosed =
            |zone: &str| zone == "." || name == zone || name.ends_with(&format!(".{zone}"));
        self.zones
            .iter()
            .enumerate()
            .filter(|(_, z)| enclosed(&z.apex))
            .max_by_key(|(_, z)| if z.apex == "." { 0 } else { z.apex.len() })
            .map(|(i, _)| i)
    }

    /// Does Unbound fall through to resolution for this query (in the test
    /// namespace: SERVFAIL)?
    pub fn needs_resolution(&self, qname: &str, qtype: u16) -> bool {
        let Some(i) = self.lookup(qname, qtype) else {
            return true;
        };
        let z = &self.zones[i];
        let has = |t: u16| z.rrs.contains(&(qname.to_string(), t));
        let has_name = z
            .rrs
            .range((qname.to_string(), 0)..=(qname.to_string(), u16::MAX))
            .next()
            .is_some();
        match z.ztype.as_str() {
            "transparent" | "inform" | "noview" | "implicit" => !has_name,
            "typetransparent" => !(has(qtype) || has(types::CNAME)),
            "always_transparent" => true,
            "redirect" | "inform_redirect" => {
                qtype != types::CNAME && z.rrs.contains(&(z.apex.clone(), types::CNAME))
            }
            _ => false,
        }
    }
}

impl Default for LocalScenario {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------
// Test 2: authoritative zone
// ---------------------------------------------------------------------------

/// Origin of the authoritative test zone.
pub const AUTH_ORIGIN: &str = "auth.skua.";

/// The authoritative scenario: zone file and query set.
#[derive(Debug, Clone, Default)]
pub struct AuthScenario;

impl AuthScenario {
    /// RFC 1035 master file for [`AUTH_ORIGIN`].
    pub fn zone_file(&self) -> String {
        let long = |c: char| std::iter::repeat_n(c, 200).collect::<String>();
        let mut s = format!(
            "; Generated by skua-conformance (tests/conformance/src/querygen.rs).\n\
             $ORIGIN {AUTH_ORIGIN}\n\
             $TTL 3600\n\
             @           IN SOA   ns1.{AUTH_ORIGIN} hostmaster.{AUTH_ORIGIN} 2024010101 7200 3600 1209600 300\n\
             @           IN NS    ns1\n\
             @           IN NS    ns2.elsewhere.skua.\n\
             @           IN A     192.0.2.1\n\
             @           IN AAAA  2001:db8::1\n\
             @           IN MX    10 mail\n\
             @           IN TXT   \"v=spf1 mx -all\"\n\
             ns1         IN A     192.0.2.53\n\
             ns1         IN AAAA  2001:db8::53\n\
             mail        IN A     192.0.2.25\n\
             mail        IN MX    0 .\n\
             www         IN A     192.0.2.80\n\
             www         IN AAAA  2001:db8::80\n\
             www      60 IN TXT   \"short ttl\"\n\
             txt         IN TXT   \"one\" \"two\" \"three\"\n\
             longtxt     IN TXT   \"{}\" \"{}\" \"{}\"\n\
             _sip._tcp   IN SRV   10 60 5060 sip\n\
             sip         IN A     192.0.2.60\n\
             caa         IN CAA   0 issue \"ca.example.net\"\n\
             ssh         IN SSHFP 1 1 {HEX40}\n\
             _443._tcp.www IN TLSA 3 1 1 {HEX64}\n\
             naptr       IN NAPTR 100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp\n\
             svc         IN SVCB  1 svc-target alpn=\"h2,h3\" port=8443 ipv4hint=192.0.2.1\n\
             https       IN HTTPS 1 . alpn=h2\n\
             ptr         IN PTR   www\n\
             alias       IN CNAME www\n\
             chain       IN CNAME alias\n\
             ext         IN CNAME www.example.com.\n\
             dangling    IN CNAME nothere\n\
             wcname      IN CNAME x.wild\n\
             *.wild      IN A     192.0.2.99\n\
             *.wild      IN TXT   \"wild\"\n\
             deep.a.ent  IN A     192.0.2.7\n\
             sub         IN NS    ns.sub\n\
             sub         IN NS    ns.elsewhere.skua.\n\
             ns.sub      IN A     192.0.2.153\n\
             ns.sub      IN AAAA  2001:db8::153\n\
             zero      0 IN A     192.0.2.200\n",
            long('a'),
            long('b'),
            long('c')
        );
        for i in 1..=40 {
            let _ = writeln!(s, "big         IN A     10.0.0.{i}");
        }
        for i in 1..=100 {
            let _ = writeln!(s, "huge        IN A     10.0.1.{i}");
        }
        s
    }

    /// Names queried, with their category.
    pub fn names(&self) -> Vec<(String, &'static str)> {
        let inzone = [
            "@",
            "ns1",
            "mail",
            "www",
            "txt",
            "longtxt",
            "_sip._tcp",
            "sip",
            "caa",
            "ssh",
            "_443._tcp.www",
            "naptr",
            "svc",
            "https",
            "ptr",
            "big",
            "huge",
            "zero",
        ];
        let mut v: Vec<(String, &'static str)> = Vec::new();
        let abs = |r: &str| {
            if r == "@" {
                AUTH_ORIGIN.to_string()
            } else {
                format!("{r}.{AUTH_ORIGIN}")
            }
        };
        for r in inzone {
            v.push((abs(r), "auth:data"));
        }
        for r in ["nx", "x.www", "nx.nx", "_tcp", "_443._tcp", "nothere"] {
            v.push((abs(r), "auth:nxdomain"));
        }
        for r in ["alias", "chain", "ext", "dangling", "wcname"] {
            v.push((abs(r), "auth:cname"));
        }
        for r in ["x.wild", "a.b.wild", "*.wild", "wild"] {
            v.push((abs(r), "auth:wildcard"));
        }
        for r in ["ent", "a.ent", "deep.a.ent", "x.deep.a.ent"] {
            v.push((abs(r), "auth:ent"));
        }
        for r in ["sub", "ns.sub", "x.sub", "a.b.sub"] {
            v.push((abs(r), "auth:delegation"));
        }
        for n in ["www.example.com.", "skua.", "other.skua.", "xauth.skua."] {
            v.push((n.to_string(), "auth:outside"));
        }
        v
    }

    /// The generated query set (every name × every type, three passes with
    /// different knobs, plus truncation sweeps).
    pub fn queries(&self, seed: u64) -> Vec<Query> {
        let mut rng = Rng::new(seed);
        let mut out = Vec::new();
        for _pass in 0..3 {
            for (name, cat) in self.names() {
                for &qtype in QUERY_TYPES {
                    out.push(vary(&mut rng, &name, qtype, cat, false, 6));
                }
            }
        }
        let big = format!("big.{AUTH_ORIGIN}");
        let huge = format!("huge.{AUTH_ORIGIN}");
        tc_sweep(&mut rng, &big, 40, "tc-sweep", &mut out);
        tc_sweep(&mut rng, &huge, 100, "tc-sweep", &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_sets_are_deterministic_and_large_enough() {
        let l = LocalScenario::new();
        let a = l.queries(7);
        assert_eq!(a, l.queries(7));
        assert!(a.len() >= 5000, "{}", a.len());
        assert!(a.iter().filter(|q| q.tcp).count() >= 200);
        assert!(a.iter().all(|q| q.qtype != 255));
        let auth = AuthScenario.queries(7);
        assert!(auth.len() >= 1000, "{}", auth.len());
    }

    #[test]
    fn resolution_model() {
        let l = LocalScenario::new();
        let t = l.model();
        assert!(
            t.zones
                .iter()
                .any(|z| z.apex == "." && z.ztype == "implicit")
        );
        assert!(!t.needs_resolution("www.static.skua.", types::A));
        assert!(!t.needs_resolution("nx.static.skua.", types::A));
        assert!(t.needs_resolution("nx.trans.skua.", types::A));
        assert!(!t.needs_resolution("www.trans.skua.", types::AAAA));
        assert!(t.needs_resolution("www.tt.skua.", types::AAAA));
        assert!(!t.needs_resolution("cname.tt.skua.", types::AAAA));
        assert!(t.needs_resolution("static.skua.", types::DS));
        assert!(t.needs_resolution("www.always-transparent.skua.", types::A));
        assert!(t.needs_resolution("x.alias.skua.", types::A));
        assert!(!t.needs_resolution("a.nozone.skub.", types::AAAA));
        assert!(t.needs_resolution("nozone.skub.", types::A));
        assert!(!t.needs_resolution("printer.home.arpa.", types::A));
        assert!(t.needs_resolution("nx.lab.test.", types::A));
        assert!(!t.needs_resolution("1.0.18.198.in-addr.arpa.", types::PTR));
        assert!(!t.needs_resolution("1.0.18.198.in-addr.arpa.", types::DS));
        assert!(t.needs_resolution("inner.trans.skua.", types::DS));
        assert!(!t.needs_resolution("alias.skua.", types::CNAME));
        assert!(!t.needs_resolution("nodefault.skua.", types::DS));
        assert!(t.needs_resolution("nx.nodefault.skua.", types::A));
        assert_eq!(
            LocalScenario::ptr_owner("2001:db8::80"),
            "0.8.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
        );
    }
}
