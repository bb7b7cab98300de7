//! Test 3: forwarding. A seeded hierarchy of authoritative zones (served by NSD, the
//! upstream), the forward/stub configurations both forwarders get, and the query set.
//!
//! The zones hold plain data of several types and TTLs, CNAME chains of length 1-4 inside
//! one zone and across zones, dangling chains, NXDOMAIN and NODATA names, empty
//! non-terminals, wildcards (also a wildcard CNAME), DNAMEs, a delegated child zone that NSD
//! serves as well, and RRsets too large for a 1232-byte UDP reply (the forwarders retry over
//! TCP). Every zone's SOA has its own TTL and MINIMUM, so negative TTLs are checked: one
//! zone's negative TTL is capped by `cache-max-negative-ttl` (3600), one TTL by
//! `cache-max-ttl` (86400).

use std::fmt::Write as _;

use crate::querygen::{QUERY_TYPES, Rng, random_case};
use crate::wire::{EdnsQuery, Query, types};

/// How the two forwarders reach the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FwdMode {
    /// `forward-zone: name: "."` with one `forward-addr` (queries with RD=1).
    ForwardRoot,
    /// One `stub-zone:` per served zone, the child zone included (queries with RD=0; the
    /// most specific zone wins).
    Stubs,
    /// `forward-zone:` for fwd-a.example. and other-c.net., `stub-zone:` for
    /// fwd-b.example. and for the child sub.fwd-a.example. (a stub below a forward zone):
    /// chains cross from one kind of zone to the other, and each reply is believed only
    /// for its own zone.
    Mixed,
}

impl FwdMode {
    /// Both modes, in the order the suite runs them.
    pub const ALL: [FwdMode; 3] = [FwdMode::ForwardRoot, FwdMode::Stubs, FwdMode::Mixed];

    /// Short label for reports.
    pub fn label(self) -> &'static str {
        match self {
            FwdMode::ForwardRoot => "forward-zone \".\"",
            FwdMode::Stubs => "stub-zones",
            FwdMode::Mixed => "forward- and stub-zones",
        }
    }

    /// Tag for file and namespace names.
    pub fn tag(self) -> &'static str {
        match self {
            FwdMode::ForwardRoot => "fwd",
            FwdMode::Stubs => "stub",
            FwdMode::Mixed => "mixed",
        }
    }
}

/// What kind of name a probe is (statistics, allow-list matching).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Name with data (queried for its types: answers; other types: NODATA).
    Data,
    /// Zone apex (SOA, NS, data).
    Apex,
    /// Name that does not exist.
    NxDomain,
    /// Empty non-terminal.
    Ent,
    /// CNAME chain inside one zone.
    ChainInZone,
    /// CNAME chain across zones.
    ChainCrossZone,
    /// CNAME chain ending at a name that does not exist.
    ChainDangling,
    /// Wildcard expansion (also wildcard CNAME).
    Wildcard,
    /// Name below a DNAME.
    Dname,
    /// Large RRset (TC over UDP upstream, TCP retry) or reached through a chain.
    Big,
    /// Name in the delegated child zone, or the zone cut itself.
    Child,
    /// Name no served zone contains (the upstream REFUSEs), or a chain leading there.
    /// Only queried with `forward-zone: "."` (otherwise the reference would try the root
    /// servers).
    Outside,
}

impl Kind {
    /// Category label for a mode.
    pub fn category(self, mode: FwdMode) -> &'static str {
        use FwdMode::*;
        use Kind::*;
        match (mode, self) {
            (ForwardRoot, Data) => "fwd:data",
            (ForwardRoot, Apex) => "fwd:apex",
            (ForwardRoot, NxDomain) => "fwd:nxdomain",
            (ForwardRoot, Ent) => "fwd:ent",
            (ForwardRoot, ChainInZone) => "fwd:cname-in-zone",
            (ForwardRoot, ChainCrossZone) => "fwd:cname-cross-zone",
            (ForwardRoot, ChainDangling) => "fwd:cname-dangling",
            (ForwardRoot, Wildcard) => "fwd:wildcard",
            (ForwardRoot, Dname) => "fwd:dname",
            (ForwardRoot, Big) => "fwd:big/tc",
            (ForwardRoot, Child) => "fwd:child-zone",
            (ForwardRoot, Outside) => "fwd:outside-zones",
            (Stubs, Data) => "stub:data",
            (Stubs, Apex) => "stub:apex",
            (Stubs, NxDomain) => "stub:nxdomain",
            (Stubs, Ent) => "stub:ent",
            (Stubs, ChainInZone) => "stub:cname-in-zone",
            (Stubs, ChainCrossZone) => "stub:cname-cross-zone",
            (Stubs, ChainDangling) => "stub:cname-dangling",
            (Stubs, Wildcard) => "stub:wildcard",
            (Stubs, Dname) => "stub:dname",
            (Stubs, Big) => "stub:big/tc",
            (Stubs, Child) => "stub:child-zone",
            (Stubs, Outside) => "stub:outside-zones",
            (Mixed, Data) => "mix:data",
            (Mixed, Apex) => "mix:apex",
            (Mixed, NxDomain) => "mix:nxdomain",
            (Mixed, Ent) => "mix:ent",
            (Mixed, ChainInZone) => "mix:cname-in-zone",
            (Mixed, ChainCrossZone) => "mix:cname-cross-zone",
            (Mixed, ChainDangling) => "mix:cname-dangling",
            (Mixed, Wildcard) => "mix:wildcard",
            (Mixed, Dname) => "mix:dname",
            (Mixed, Big) => "mix:big/tc",
            (Mixed, Child) => "mix:child-zone",
            (Mixed, Outside) => "mix:outside-zones",
        }
    }
}

/// One record of a generated zone.
#[derive(Debug, Clone)]
pub struct ZoneRr {
    /// Absolute owner, lower case.
    pub owner: String,
    /// TTL.
    pub ttl: u32,
    /// Type mnemonic.
    pub rtype: &'static str,
    /// RDATA in master-file form (absolute names).
    pub rdata: String,
}

/// One generated zone.
#[derive(Debug, Clone)]
pub struct FwdZone {
    /// Origin, lower case, absolute.
    pub origin: String,
    /// SOA TTL.
    pub soa_ttl: u32,
    /// SOA MINIMUM.
    pub soa_minimum: u32,
    /// Records besides SOA.
    pub records: Vec<ZoneRr>,
}

impl FwdZone {
    fn new(origin: &str, soa_ttl: u32, soa_minimum: u32) -> Self {
        FwdZone {
            origin: origin.to_string(),
            soa_ttl,
            soa_minimum,
            records: Vec::new(),
        }
    }

    fn add(&mut self, rel: &str, ttl: u32, rtype: &'static str, rdata: impl Into<String>) {
        let owner = if rel == "@" {
            self.origin.clone()
        } else {
            format!("{rel}.{}", self.origin)
        };
        self.records.push(ZoneRr {
            owner,
            ttl,
            rtype,
            rdata: rdata.into(),
        });
    }

    /// File name of the zone file.
    pub fn file_name(&self) -> String {
        format!("{}zone", self.origin)
    }

    /// RFC 1035 master file.
    pub fn zone_file(&self) -> String {
        let o = &self.origin;
        let mut s = format!(
            "; Generated by skua-conformance (tests/conformance/src/fwdgen.rs).\n\
             $ORIGIN {o}\n\
             $TTL 3600\n\
             @ {} IN SOA ns1.{o} hostmaster.{o} 2024010101 7200 900 1209600 {}\n",
            self.soa_ttl, self.soa_minimum
        );
        for r in &self.records {
            let _ = writeln!(s, "{} {} IN {} {}", r.owner, r.ttl, r.rtype, r.rdata);
        }
        s
    }
}

/// A name the generator queries, with the types to ask.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Absolute name, lower case.
    pub name: String,
    /// Types asked.
    pub qtypes: Vec<u16>,
    /// What it is.
    pub kind: Kind,
}

/// Origins of the generated zones (NSD serves all of them).
pub const ZONE_A: &str = "fwd-a.example.";
/// Second zone.
pub const ZONE_B: &str = "fwd-b.example.";
/// Third zone, under another TLD.
pub const ZONE_C: &str = "other-c.net.";
/// Child zone delegated from [`ZONE_A`] (NSD serves parent and child).
pub const ZONE_CHILD: &str = "sub.fwd-a.example.";

/// The name the readiness probe asks (not in the query set).
pub const PROBE_NAME: &str = "ready.fwd-a.example.";

/// TTLs of generated data, weighted towards ordinary values. 604800 is above
/// `cache-max-ttl` (86400); 0 and 1 expire before the second pass.
const TTLS: &[u32] = &[
    300, 300, 300, 3600, 3600, 86400, 60, 30, 7200, 604_800, 1, 0,
];

/// Types a generated host may have.
const HOST_TYPES: &[&str] = &["A", "AAAA", "MX", "TXT", "CAA", "SSHFP", "HTTPS", "NAPTR"];

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

/// The forwarding scenario: zones, configurations and query model.
#[derive(Debug, Clone)]
pub struct ForwardScenario {
    /// Zones NSD serves.
    pub zones: Vec<FwdZone>,
    /// Names queried.
    pub probes: Vec<Probe>,
}

fn pick<'a, T>(rng: &mut Rng, items: &'a [T]) -> &'a T {
    &items[usize::try_from(rng.below(items.len() as u64)).unwrap_or(0)]
}

fn hex(rng: &mut Rng, bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rng.below(256)))
        .collect()
}

impl ForwardScenario {
    /// Hosts per zone.
    const HOSTS: usize = 22;
    /// Chains per class (in-zone, cross-zone).
    const CHAINS: usize = 14;

    /// The scenario for `seed` (names, record sets, TTLs and chains depend on it).
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0xf0f0_5eed);
        // SOA TTL / MINIMUM: negative TTL = min of both (RFC 2308 §5): 300, 60, and for
        // other-c.net 7200 capped to 3600 by cache-max-negative-ttl; the child 120.
        let mut zones = vec![
            FwdZone::new(ZONE_A, 3600, 300),
            FwdZone::new(ZONE_B, 60, 600),
            FwdZone::new(ZONE_C, 86400, 7200),
            FwdZone::new(ZONE_CHILD, 1800, 120),
        ];
        let mut probes: Vec<Probe> = Vec::new();
        let mut probe = |name: String, qtypes: Vec<u16>, kind: Kind| {
            probes.push(Probe { name, qtypes, kind });
        };
        // Types asked in addition to those present (mostly NODATA).
        let extra_types = |rng: &mut Rng, have: &[u16], n: usize| -> Vec<u16> {
            let mut v: Vec<u16> = have.to_vec();
            let mut tries = 0;
            while v.len() < have.len() + n && tries < 64 {
                tries += 1;
                let t = *pick(rng, QUERY_TYPES);
                if !v.contains(&t) {
                    v.push(t);
                }
            }
            v
        };

        // Apex data, name servers (addresses in TEST-NET: never reachable here).
        for (zi, z) in zones.iter_mut().enumerate() {
            z.add("@", 3600, "NS", format!("ns1.{}", z.origin));
            z.add("@", 3600, "NS", format!("ns2.{}", z.origin));
            z.add("ns1", 3600, "A", format!("192.0.2.{}", 10 + zi));
            z.add("ns2", 3600, "A", format!("198.51.100.{}", 10 + zi));
            z.add("ns2", 3600, "AAAA", format!("2001:db8::{}", 10 + zi));
            z.add("@", 300, "A", format!("192.0.2.{}", 100 + zi));
            z.add("@", 300, "MX", format!("10 mail.{}", z.origin));
            z.add("@", 300, "TXT", format!("\"v=spf1 -all zone{zi}\""));
            z.add("mail", 300, "A", format!("192.0.2.{}", 120 + zi));
            z.add(
                "_sip._tcp",
                600,
                "SRV",
                format!("10 60 5060 mail.{}", z.origin),
            );
            z.add(
                "_sip._udp",
                600,
                "SRV",
                format!("20 0 5060 mail.{}", z.origin),
            );
        }
        // The readiness probe's name.
        zones[0].add("ready", 60, "A", "192.0.2.250");
        // Delegation of the child zone in its parent (NSD serves the child too).
        zones[0].add("sub", 3600, "NS", format!("ns1.{ZONE_CHILD}"));
        zones[0].add("ns1.sub", 3600, "A", "192.0.2.13");

        for z in &zones {
            let kind = if z.origin == ZONE_CHILD {
                Kind::Child
            } else {
                Kind::Apex
            };
            let o = &z.origin;
            probe(
                o.clone(),
                vec![
                    types::SOA,
                    types::NS,
                    types::A,
                    types::MX,
                    types::TXT,
                    types::AAAA,
                    types::CNAME,
                    types::DNSKEY,
                ],
                kind,
            );
            let data = if kind == Kind::Child {
                Kind::Child
            } else {
                Kind::Data
            };
            probe(
                format!("ns1.{o}"),
                vec![types::A, types::AAAA, types::TXT],
                data,
            );
            probe(
                format!("ns2.{o}"),
                vec![types::A, types::AAAA, types::MX],
                data,
            );
            probe(
                format!("_sip._tcp.{o}"),
                vec![types::SRV, types::TXT, types::A],
                data,
            );
            probe(format!("_sip._udp.{o}"), vec![types::SRV], data);
            probe(format!("mail.{o}"), vec![types::A, types::AAAA], data);
            // `_tcp` is an empty non-terminal.
            let ent = if kind == Kind::Child {
                Kind::Child
            } else {
                Kind::Ent
            };
            probe(
                format!("_tcp.{o}"),
                vec![types::A, types::SRV, types::TXT],
                ent,
            );
            let nx = if kind == Kind::Child {
                Kind::Child
            } else {
                Kind::NxDomain
            };
            probe(
                format!("nx.{o}"),
                vec![types::A, types::AAAA, types::MX],
                nx,
            );
            probe(format!("nx.nx.{o}"), vec![types::A, types::TXT], nx);
            probe(format!("x.mail.{o}"), vec![types::A, types::SRV], nx);
        }
        // The zone cut: DS lives in the parent (NODATA with the parent's SOA), the rest in
        // the child.
        probe(
            ZONE_CHILD.to_string(),
            vec![types::DS, types::DS],
            Kind::Child,
        );
        probe(
            format!("ns1.{ZONE_CHILD}"),
            vec![types::A, types::DS],
            Kind::Child,
        );

        // Hosts with random data.
        let mut hosts: Vec<(String, Vec<u16>)> = Vec::new();
        for (zi, zone) in zones.iter_mut().enumerate() {
            let n = if zone.origin == ZONE_CHILD {
                Self::HOSTS / 2
            } else {
                Self::HOSTS
            };
            for h in 0..n {
                let rel = format!("h{h}");
                let mut have: Vec<u16> = Vec::new();
                let ntypes = 1 + usize::try_from(rng.below(4)).unwrap_or(0);
                let mut chosen: Vec<&'static str> = Vec::new();
                while chosen.len() < ntypes {
                    let t = *pick(&mut rng, HOST_TYPES);
                    if !chosen.contains(&t) {
                        chosen.push(t);
                    }
                }
                for t in chosen {
                    let ttl = *pick(&mut rng, TTLS);
                    let count = 1 + rng.below(if t == "A" || t == "AAAA" { 4 } else { 2 });
                    for k in 0..count {
                        let rdata = match t {
                            "A" => format!("10.{zi}.{h}.{}", 1 + k),
                            "AAAA" => format!("2001:db8:{zi}:{h}::{:x}", 1 + k),
                            "MX" => format!("{} mail.{}", 10 * (k + 1), zone.origin),
                            "TXT" => format!("\"h{h} z{zi} {}\" \"{k}\"", hex(&mut rng, 4)),
                            "CAA" if k == 0 => "0 issue \"ca.example.net\"".to_string(),
                            "CAA" => "0 iodef \"mailto:security@example.net\"".to_string(),
                            "SSHFP" => format!("{} 2 {}", 1 + k, hex(&mut rng, 32)),
                            "HTTPS" => format!("{} . alpn=h2 port={}", 1 + k, 8443 + k),
                            "NAPTR" => format!(
                                "100 {} \"S\" \"SIP+D2U\" \"\" _sip._udp.{}",
                                10 + k,
                                zone.origin
                            ),
                            _ => unreachable!(),
                        };
                        zone.add(&rel, ttl, t, rdata);
                    }
                    have.push(type_code(t));
                }
                let name = format!("{rel}.{}", zone.origin);
                let kind = if zone.origin == ZONE_CHILD {
                    Kind::Child
                } else {
                    Kind::Data
                };
                let qtypes = extra_types(&mut rng, &have, 2);
                probe(name.clone(), qtypes, kind);
                if rng.chance(40) {
                    probe(format!("x.{name}"), vec![types::A], Kind::NxDomain);
                }
                hosts.push((name, have));
            }
        }

        // Wildcards: A and TXT in fwd-a, a wildcard CNAME (cross zone) in other-c.
        zones[0].add("*.wild", 300, "A", "192.0.2.99");
        zones[0].add("*.wild", 300, "TXT", "\"wild\"");
        zones[0].add("exists.wild", 300, "A", "192.0.2.98");
        let wild_target = hosts[1].0.clone();
        zones[2].add("*.wc", 600, "CNAME", wild_target.clone());
        for n in [
            "x.wild.fwd-a.example.",
            "a.b.wild.fwd-a.example.",
            "*.wild.fwd-a.example.",
            "wild.fwd-a.example.",
            "exists.wild.fwd-a.example.",
            "y.exists.wild.fwd-a.example.",
            "x.wc.other-c.net.",
            "deep.x.wc.other-c.net.",
            "wc.other-c.net.",
        ] {
            probe(
                n.to_string(),
                vec![types::A, types::TXT, types::AAAA, types::CNAME],
                Kind::Wildcard,
            );
        }

        // DNAMEs: across zones (fwd-b -> other-c) and inside fwd-a.
        zones[1].add("dn", 3600, "DNAME", ZONE_C);
        zones[0].add("alias-tree", 300, "DNAME", ZONE_CHILD);
        for (i, (h, have)) in hosts.iter().enumerate() {
            let under = if h.ends_with(ZONE_CHILD) {
                Some(format!(
                    "{}alias-tree.{ZONE_A}",
                    &h[..h.len() - ZONE_CHILD.len()]
                ))
            } else if h.ends_with(ZONE_C) && i % 2 == 0 {
                Some(format!("{}dn.{ZONE_B}", &h[..h.len() - ZONE_C.len()]))
            } else {
                None
            };
            if let Some(n) = under {
                let mut qt = have.clone();
                qt.push(types::CNAME);
                probe(n, qt, Kind::Dname);
            }
        }
        for n in [
            format!("dn.{ZONE_B}"),
            format!("nx.dn.{ZONE_B}"),
            format!("alias-tree.{ZONE_A}"),
            format!("nx.alias-tree.{ZONE_A}"),
        ] {
            probe(n, vec![types::A, types::DNAME, types::CNAME], Kind::Dname);
        }

        // Large RRsets: 40 A fit in 1232 (client TC only), 100 A and 60 AAAA and a long TXT
        // do not (the upstream answers TC=1 over UDP; the forwarders retry over TCP).
        for i in 1..=40 {
            zones[0].add("big", 300, "A", format!("10.40.0.{i}"));
        }
        for i in 1..=100 {
            zones[1].add("huge", 600, "A", format!("10.100.0.{i}"));
        }
        for i in 1..=60 {
            zones[2].add("huge6", 900, "AAAA", format!("2001:db8:60::{i:x}"));
        }
        let long = |c: char| std::iter::repeat_n(c, 250).collect::<String>();
        zones[2].add(
            "longtxt",
            300,
            "TXT",
            format!(
                "\"{}\" \"{}\" \"{}\" \"{}\" \"{}\"",
                long('a'),
                long('b'),
                long('c'),
                long('d'),
                long('e')
            ),
        );
        // Reached through chains.
        zones[2].add("to-huge", 300, "CNAME", format!("huge.{ZONE_B}"));
        zones[1].add("to-big", 300, "CNAME", format!("big.{ZONE_A}"));
        for (n, t) in [
            (format!("big.{ZONE_A}"), types::A),
            (format!("huge.{ZONE_B}"), types::A),
            (format!("huge6.{ZONE_C}"), types::AAAA),
            (format!("longtxt.{ZONE_C}"), types::TXT),
            (format!("to-huge.{ZONE_C}"), types::A),
            (format!("to-big.{ZONE_B}"), types::A),
        ] {
            probe(n.clone(), vec![t, t, t, types::MX], Kind::Big);
        }

        // CNAME chains of length 1-4 ending at a host, inside one zone and across zones;
        // some end at a name that does not exist.
        let top = [0usize, 1, 2, 3];
        for cross in [false, true] {
            for c in 0..Self::CHAINS {
                let len = 1 + usize::try_from(rng.below(4)).unwrap_or(0);
                let dangling = rng.chance(20);
                let home = *pick(&mut rng, &top);
                let zone_of = |rng: &mut Rng| if cross { *pick(rng, &top) } else { home };
                let mut link_zones: Vec<usize> = (0..len).map(|_| zone_of(&mut rng)).collect();
                if cross && link_zones.iter().all(|&z| z == link_zones[0]) {
                    link_zones[0] = (link_zones[0] + 1) % top.len();
                }
                let tag = if cross { "x" } else { "i" };
                let names: Vec<String> = (0..len)
                    .map(|j| format!("c{tag}{c}-{j}.{}", zones[link_zones[j]].origin))
                    .collect();
                let end_zone = zone_of(&mut rng);
                let (target, have) = if dangling {
                    (
                        format!("gone{tag}{c}.{}", zones[end_zone].origin),
                        Vec::new(),
                    )
                } else {
                    let in_zone: Vec<&(String, Vec<u16>)> = hosts
                        .iter()
                        .filter(|(h, _)| {
                            h.ends_with(&zones[end_zone].origin)
                                && (end_zone == 3 || !h.ends_with(ZONE_CHILD))
                        })
                        .collect();
                    let (h, have) = *pick(&mut rng, &in_zone);
                    (h.clone(), have.clone())
                };
                for j in 0..len {
                    let next = names.get(j + 1).unwrap_or(&target).clone();
                    let ttl = *pick(&mut rng, &[300, 3600, 60, 86400, 600]);
                    let z = link_zones[j];
                    let rel = names[j].trim_end_matches(&format!(".{}", zones[z].origin));
                    let rel = rel.to_string();
                    zones[z].add(&rel, ttl, "CNAME", next);
                }
                let kind = match (dangling, cross) {
                    (true, _) => Kind::ChainDangling,
                    (false, false) => Kind::ChainInZone,
                    (false, true) => Kind::ChainCrossZone,
                };
                let mut qt = extra_types(&mut rng, &have, 1);
                qt.push(types::CNAME);
                probe(names[0].clone(), qt.clone(), kind);
                if len > 1 {
                    probe(names[len - 1].clone(), qt, kind);
                }
            }
        }
        // Chains into the wildcard and into the DNAME.
        zones[1].add("to-wild", 300, "CNAME", format!("foo.wild.{ZONE_A}"));
        zones[0].add("to-dname", 300, "CNAME", format!("h0.dn.{ZONE_B}"));
        probe(
            format!("to-wild.{ZONE_B}"),
            vec![types::A, types::TXT, types::MX],
            Kind::Wildcard,
        );
        probe(
            format!("to-dname.{ZONE_A}"),
            vec![types::A, types::AAAA, types::TXT, types::CNAME],
            Kind::Dname,
        );

        // Outside every served zone (forward "." only): the upstream REFUSEs.
        zones[0].add("out", 300, "CNAME", "www.nowhere.example.");
        zones[2].add("out2", 300, "CNAME", format!("h1.{ZONE_A}"));
        zones[0].add("h-out", 300, "CNAME", format!("out2.{ZONE_C}"));
        for n in [
            "www.nowhere.example.".to_string(),
            "nothere.org.".to_string(),
            "example.".to_string(),
            format!("out.{ZONE_A}"),
        ] {
            probe(n, vec![types::A, types::AAAA, types::TXT], Kind::Outside);
        }
        // A chain that goes C -> A, both served: in every mode.
        probe(
            format!("h-out.{ZONE_A}"),
            vec![types::A, types::TXT, types::CNAME],
            Kind::ChainCrossZone,
        );
        // TTL with the most significant bit set: 0 (RFC 2181 §8).
        zones[1].add("msb-ttl", 2_147_483_648, "A", "192.0.2.77");
        zones[1].add("msb-ttl", 300, "TXT", "\"normal\"");
        probe(
            format!("msb-ttl.{ZONE_B}"),
            vec![types::A, types::TXT],
            Kind::Data,
        );

        ForwardScenario { zones, probes }
    }

    /// The configuration both forwarders get in `mode` (identical text but for `port`).
    pub fn conf(&self, mode: FwdMode, port: u16, upstream_port: u16, directory: &str) -> String {
        let mut s = format!(
            "# Generated by skua-conformance (tests/conformance/src/fwdgen.rs).\n\
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
             \x20 num-threads: 1\n\
             \x20 # No validator: skuad does not validate yet.\n\
             \x20 module-config: \"iterator\"\n\
             \x20 # The upstream listens on loopback.\n\
             \x20 do-not-query-localhost: no\n\
             \x20 access-control: 127.0.0.0/8 allow\n"
        );
        match mode {
            FwdMode::ForwardRoot => {
                let _ = write!(
                    s,
                    "\nforward-zone:\n\
                     \x20 name: \".\"\n\
                     \x20 forward-addr: 127.0.0.1@{upstream_port}\n"
                );
            }
            FwdMode::Stubs | FwdMode::Mixed => {
                for z in &self.zones {
                    let stub = mode == FwdMode::Stubs || [ZONE_B, ZONE_CHILD].contains(&&*z.origin);
                    let (clause, addr) = if stub {
                        ("stub-zone", "stub-addr")
                    } else {
                        ("forward-zone", "forward-addr")
                    };
                    let _ = write!(
                        s,
                        "\n{clause}:\n\
                         \x20 name: \"{}\"\n\
                         \x20 {addr}: 127.0.0.1@{upstream_port}\n",
                        z.origin
                    );
                }
            }
        }
        s
    }

    /// Whether `(name, qtype)` is asked in `mode`. Without `forward-zone: "."`, nothing
    /// outside the configured zones is asked (the reference would try the root servers),
    /// DS at a top zone's apex included (it belongs to the parent, which no zone covers).
    fn asked_in(&self, mode: FwdMode, probe: &Probe, qtype: u16) -> bool {
        match mode {
            FwdMode::ForwardRoot => true,
            FwdMode::Stubs | FwdMode::Mixed => {
                probe.kind != Kind::Outside
                    && !(qtype == types::DS
                        && self
                            .zones
                            .iter()
                            .any(|z| z.origin == probe.name && z.origin != ZONE_CHILD))
            }
        }
    }

    /// The query set for `mode`: every probe × each of its types, `VARIANTS` times with
    /// different knobs (case, EDNS, DO, RD, CD, TCP), shuffled.
    pub fn queries(&self, mode: FwdMode, seed: u64) -> Vec<Query> {
        const VARIANTS: usize = 3;
        let mut rng = Rng::new(
            seed ^ match mode {
                FwdMode::ForwardRoot => 0xf0f0,
                FwdMode::Stubs => 0x5757,
                FwdMode::Mixed => 0x3c3c,
            },
        );
        let mut out = Vec::new();
        for p in &self.probes {
            for &qtype in &p.qtypes {
                if !self.asked_in(mode, p, qtype) {
                    continue;
                }
                for _ in 0..VARIANTS {
                    out.push(vary(&mut rng, &p.name, qtype, p.kind.category(mode)));
                }
            }
        }
        // Truncation sweep on the large answers (client side).
        for (name, qtype) in [
            (format!("big.{ZONE_A}"), types::A),
            (format!("huge.{ZONE_B}"), types::A),
            (format!("to-huge.{ZONE_C}"), types::A),
            (format!("longtxt.{ZONE_C}"), types::TXT),
        ] {
            for size in [0u16, 512, 700, 1232, 1400, 1700, 4096] {
                for tcp in [false, true] {
                    let mut q = vary(&mut rng, &name, qtype, Kind::Big.category(mode));
                    q.rd = true;
                    q.tcp = tcp;
                    q.edns = (size != 0).then_some(EdnsQuery {
                        udp_size: size,
                        dnssec_ok: rng.chance(30),
                    });
                    out.push(q);
                }
            }
        }
        // Fisher-Yates: chains and their targets come in any order.
        for i in (1..out.len()).rev() {
            let j = usize::try_from(rng.below(i as u64 + 1)).unwrap_or(0);
            out.swap(i, j);
        }
        out
    }
}

/// Per-query knobs for forwarding: RD=0 rarer than in the local suites (under
/// `access-control: allow` both refuse those), so most queries are resolved.
fn vary(rng: &mut Rng, qname: &str, qtype: u16, category: &'static str) -> Query {
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
        let udp_size = match rng.below(100) {
            0..=29 => 1232,
            30..=44 => 512,
            45..=59 => 4096,
            60..=94 => rng.range_u16(512, 4096),
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
        rd: !rng.chance(8),
        cd: rng.chance(5),
        edns,
        tcp: rng.chance(8),
        category,
        needs_resolution: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_is_deterministic_and_large_enough() {
        let a = ForwardScenario::new(7);
        let b = ForwardScenario::new(7);
        for mode in FwdMode::ALL {
            let qa = a.queries(mode, 7);
            assert_eq!(qa, b.queries(mode, 7));
            assert!(qa.len() >= 2500, "{mode:?}: {}", qa.len());
            assert!(qa.iter().filter(|q| q.tcp).count() >= 100);
        }
        let total: usize = FwdMode::ALL.iter().map(|&m| a.queries(m, 7).len()).sum();
        assert!(total >= 5000, "{total}");
        // Only forward-zone "." asks outside the served zones.
        for mode in [FwdMode::Stubs, FwdMode::Mixed] {
            assert!(
                a.queries(mode, 7)
                    .iter()
                    .all(|q| !q.category.contains("outside"))
            );
        }
        let mixed = a.conf(FwdMode::Mixed, 1, 2, "/x");
        assert!(mixed.contains("stub-zone:\n  name: \"sub.fwd-a.example.\""));
        assert!(mixed.contains("forward-zone:\n  name: \"fwd-a.example.\""));
        let files: Vec<String> = a.zones.iter().map(FwdZone::zone_file).collect();
        assert!(files[0].contains("*.wild.fwd-a.example. 300 IN A 192.0.2.99"));
        assert!(files.iter().any(|f| f.contains("DNAME other-c.net.")));
        assert_ne!(
            ForwardScenario::new(8).zones[0].zone_file(),
            a.zones[0].zone_file()
        );
    }
}
