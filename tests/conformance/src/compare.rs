//! Response comparison and the allow-list of intended differences.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::wire::{Query, Response};

/// Which differential suite a comparison belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Suite {
    /// Test 1: unbound.conf local zones, reference Unbound.
    LocalZones,
    /// Test 2: auth-zone, reference NSD.
    AuthZone,
}

/// How an allow-list entry relaxes the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The RA flag is not compared (every query of the suite).
    IgnoreRaFlag,
    /// The reference answers SERVFAIL and the subject REFUSED, nothing else
    /// differs, both without AA and with empty answer and authority
    /// sections, and the generator's model says the reference had to
    /// resolve the query (qname/qtype outside local data).
    ServfailVsRefusedOutsideLocalData,
    /// The query had CD=1, the reference cleared it and the subject echoed
    /// it: the CD bit is not compared for that query.
    CdEchoedBySubjectOnly,
    /// Both answer REFUSED for a name outside every zone, and the reference adds an
    /// Extended DNS Error option (RFC 8914, code 20 "Not Authoritative"): the EDNS option
    /// codes are not compared for that query.
    EdeOnRefusedByReferenceOnly,
}

/// One documented intended difference (see docs/conformance.md,
/// "Intended differences").
#[derive(Debug, Clone, Copy)]
pub struct Allowance {
    /// Stable identifier, printed in reports.
    pub id: &'static str,
    /// Suite it applies to (never both).
    pub suite: Suite,
    /// What is relaxed.
    pub rule: Rule,
    /// Why the difference is intended.
    pub reason: &'static str,
}

/// The allow-list. Keep it short; every entry is explained in
/// docs/conformance.md.
pub const ALLOW_LIST: &[Allowance] = &[
    Allowance {
        id: "no-forwarding-yet",
        suite: Suite::LocalZones,
        rule: Rule::ServfailVsRefusedOutsideLocalData,
        reason: "skuad does not recurse/forward yet: where Unbound falls through to resolution \
                 (SERVFAIL in the isolated namespace) skuad answers REFUSED",
    },
    Allowance {
        id: "resolver-sets-ra",
        suite: Suite::AuthZone,
        rule: Rule::IgnoreRaFlag,
        reason: "NSD is authoritative-only (RA=0); skuad is a resolver serving an auth-zone \
                 (like Unbound's auth-zone for-downstream) and sets RA=1",
    },
    Allowance {
        id: "nsd-clears-cd",
        suite: Suite::AuthZone,
        rule: Rule::CdEchoedBySubjectOnly,
        reason: "NSD 4.6 does not copy CD into responses; skuad copies it as Unbound does \
                 (RFC 4035 section 3.1.6: the CD bit is copied from query to response)",
    },
    Allowance {
        id: "nsd-ede-not-authoritative",
        suite: Suite::AuthZone,
        rule: Rule::EdeOnRefusedByReferenceOnly,
        reason: "NSD 4.6 adds Extended DNS Error 20 (Not Authoritative, RFC 8914) to REFUSED \
                 for names outside its zones; skuad does not send EDE yet (it will with forwarding)",
    },
];

/// The allow-list entries of `suite`, printable.
pub fn describe_allow_list(suite: Suite) -> String {
    let mut s = format!("allow-list for {suite:?}:\n");
    let mut any = false;
    for a in ALLOW_LIST.iter().filter(|a| a.suite == suite) {
        any = true;
        let _ = writeln!(s, "  - {} ({:?}): {}", a.id, a.rule, a.reason);
    }
    if !any {
        s.push_str("  (none)\n");
    }
    s
}

/// Comparison switches derived from the allow-list.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Do not compare RA.
    pub ignore_ra: bool,
}

impl Options {
    /// Options for `suite` (from [`ALLOW_LIST`]).
    pub fn for_suite(suite: Suite) -> Self {
        Options {
            ignore_ra: ALLOW_LIST
                .iter()
                .any(|a| a.suite == suite && a.rule == Rule::IgnoreRaFlag),
        }
    }
}

/// The aspects in which two outcomes differ (empty: equal).
pub fn differing_aspects(
    reference: Option<&Response>,
    subject: Option<&Response>,
    opts: Options,
) -> Vec<&'static str> {
    let (a, b) = match (reference, subject) {
        (None, None) => return Vec::new(),
        (Some(a), Some(b)) => (a, b),
        _ => return vec!["reply presence"],
    };
    let mut d = Vec::new();
    if a.parse_error.is_some() || b.parse_error.is_some() {
        // Fall back to the bytes, ID masked.
        if a.raw.get(2..) != b.raw.get(2..) {
            d.push("unparsed bytes");
        }
        return d;
    }
    let (ha, hb) = (&a.header, &b.header);
    let checks: [(&'static str, bool); 10] = [
        ("id", ha.id == hb.id),
        ("QR", ha.qr == hb.qr),
        ("opcode", ha.opcode == hb.opcode),
        ("AA", ha.aa == hb.aa),
        ("TC", ha.tc == hb.tc),
        ("RD", ha.rd == hb.rd),
        ("RA", opts.ignore_ra || ha.ra == hb.ra),
        ("Z", ha.z == hb.z),
        ("AD", ha.ad == hb.ad),
        ("CD", ha.cd == hb.cd),
    ];
    d.extend(checks.iter().filter(|(_, ok)| !ok).map(|(n, _)| *n));
    if a.rcode() != b.rcode() {
        d.push("rcode");
    }
    if a.question != b.question {
        d.push("question (incl. case)");
    }
    for (i, name) in ["answer", "authority", "additional"].iter().enumerate() {
        let ka: Vec<_> = a.sections[i].iter().map(|r| &r.key).collect();
        let kb: Vec<_> = b.sections[i].iter().map(|r| &r.key).collect();
        if ka != kb {
            d.push(name);
        }
    }
    match (a.opt(), b.opt()) {
        (None, None) => {}
        (Some(oa), Some(ob)) => {
            if oa.version != ob.version {
                d.push("EDNS version");
            }
            if oa.dnssec_ok != ob.dnssec_ok {
                d.push("DO bit");
            }
            if oa.udp_size != ob.udp_size {
                d.push("EDNS UDP size");
            }
            if oa.other_flags != ob.other_flags {
                d.push("EDNS flags");
            }
            let ca: Vec<u16> = oa.options.iter().map(|o| o.0).collect();
            let cb: Vec<u16> = ob.options.iter().map(|o| o.0).collect();
            if ca != cb {
                d.push("EDNS option codes");
            }
        }
        _ => d.push("EDNS presence"),
    }
    if a.opts.len() != b.opts.len() {
        d.push("OPT count");
    }
    d
}

/// Removes from `aspects` what per-query masking entries of `suite` excuse
/// (e.g. the CD bit); returns the ids of the entries applied.
pub fn apply_masks(
    suite: Suite,
    query: &Query,
    reference: Option<&Response>,
    subject: Option<&Response>,
    aspects: &mut Vec<&'static str>,
) -> Vec<&'static str> {
    let mut applied = Vec::new();
    let (Some(r), Some(s)) = (reference, subject) else {
        return applied;
    };
    for a in ALLOW_LIST.iter().filter(|a| a.suite == suite) {
        if a.rule == Rule::CdEchoedBySubjectOnly
            && query.cd
            && !r.header.cd
            && s.header.cd
            && aspects.contains(&"CD")
        {
            aspects.retain(|x| *x != "CD");
            applied.push(a.id);
        }
        if a.rule == Rule::EdeOnRefusedByReferenceOnly
            && r.rcode() == 5
            && s.rcode() == 5
            && aspects.contains(&"EDNS option codes")
            && s.opt().is_some_and(|o| o.options.is_empty())
            && r.opt()
                .is_some_and(|o| !o.options.is_empty() && o.options.iter().all(|x| x.0 == 15))
        {
            aspects.retain(|x| *x != "EDNS option codes");
            applied.push(a.id);
        }
    }
    applied
}

/// If the differences are covered by an allow-list entry of `suite`,
/// returns its id.
pub fn allowed_by(
    suite: Suite,
    query: &Query,
    reference: Option<&Response>,
    subject: Option<&Response>,
    aspects: &[&'static str],
) -> Option<&'static str> {
    for a in ALLOW_LIST.iter().filter(|a| a.suite == suite) {
        if a.rule == Rule::ServfailVsRefusedOutsideLocalData {
            let (Some(r), Some(s)) = (reference, subject) else {
                continue;
            };
            let quiet =
                |x: &Response| !x.header.aa && x.sections[0].is_empty() && x.sections[1].is_empty();
            if query.needs_resolution
                && aspects == ["rcode"]
                && r.rcode() == 2
                && s.rcode() == 5
                && quiet(r)
                && quiet(s)
            {
                return Some(a.id);
            }
        }
    }
    None
}

/// One unexpected difference, ready to print.
#[derive(Debug, Clone)]
pub struct Difference {
    /// Index of the query in the generated set.
    pub index: usize,
    /// The query.
    pub query: Query,
    /// What differs.
    pub aspects: Vec<&'static str>,
    /// Reference response, dig-like (or "no reply").
    pub reference: String,
    /// Subject response, dig-like (or "no reply").
    pub subject: String,
}

impl Difference {
    /// Multi-line report of this difference.
    pub fn render(&self, reference_name: &str, subject_name: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "#{} {}", self.index, self.query.describe());
        let _ = writeln!(s, "   differs in: {}", self.aspects.join(", "));
        let _ = writeln!(s, "   --- {reference_name}:");
        for l in self.reference.lines() {
            let _ = writeln!(s, "   | {l}");
        }
        let _ = writeln!(s, "   --- {subject_name}:");
        for l in self.subject.lines() {
            let _ = writeln!(s, "   | {l}");
        }
        s
    }
}

/// Result of one suite.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Suite name for messages.
    pub title: String,
    /// Reference server description.
    pub reference: String,
    /// Subject server description.
    pub subject: String,
    /// Queries sent.
    pub total: usize,
    /// Over TCP.
    pub tcp: usize,
    /// Unexpected differences.
    pub differences: Vec<Difference>,
    /// Allow-list entry id -> number of queries it excused.
    pub allowed: BTreeMap<&'static str, usize>,
    /// Queries whose RA differed but RA is not compared in this suite.
    pub ra_masked: usize,
    /// Per category: (queries, differences).
    pub per_category: BTreeMap<&'static str, (usize, usize)>,
    /// Reference outcomes by rcode name ("no reply" included).
    pub reference_rcodes: BTreeMap<String, usize>,
    /// Model check: queries where the reference's SERVFAIL/no-SERVFAIL
    /// disagrees with the generator's resolution model (RD=1 only).
    pub model_mismatches: Vec<String>,
    /// Wall-clock seconds for sending and comparing.
    pub seconds: f64,
}

impl Report {
    /// Human-readable summary (always printed).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} vs {}: {} queries ({} over TCP) in {:.1} s, {} unexpected difference(s)",
            self.title,
            self.reference,
            self.subject,
            self.total,
            self.tcp,
            self.seconds,
            self.differences.len()
        );
        let _ = writeln!(s, "  reference rcodes: {:?}", self.reference_rcodes);
        for (cat, (n, d)) in &self.per_category {
            let _ = writeln!(s, "  {cat:<28} {n:>5} queries {d:>5} differences");
        }
        for (id, n) in &self.allowed {
            let _ = writeln!(s, "  allowed by {id}: {n}");
        }
        if self.ra_masked > 0 {
            let _ = writeln!(
                s,
                "  RA differed (not compared in this suite): {}",
                self.ra_masked
            );
        }
        if !self.model_mismatches.is_empty() {
            let _ = writeln!(
                s,
                "  resolution-model mismatches: {} (first: {:?})",
                self.model_mismatches.len(),
                self.model_mismatches.iter().take(5).collect::<Vec<_>>()
            );
        }
        s
    }

    /// The failure message: first `limit` differences and the count.
    pub fn failure_message(&self, limit: usize) -> String {
        let mut s = self.summary();
        let _ = writeln!(
            s,
            "{} unexpected difference(s); the first {}:",
            self.differences.len(),
            limit.min(self.differences.len())
        );
        for d in self.differences.iter().take(limit) {
            s.push_str(&d.render(&self.reference, &self.subject));
        }
        s
    }
}
