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
    /// Test 3: forward-zone / stub-zone to an NSD upstream, reference Unbound.
    Forwarding,
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
    /// Both answer SERVFAIL, the reference without EDNS options, the subject with only
    /// Extended DNS Error options (RFC 8914): the EDNS option codes are not compared.
    EdeOnServfailBySubjectOnly,
    /// A CNAME in the answer whose owner lies strictly below the owner of a DNAME in the
    /// same answer (synthesised from it, RFC 6672 §3.1): its TTL is not compared when one
    /// side gives it TTL 0. Every other TTL still is.
    DnameSynthesisedCnameTtl,
    /// Both answer SERVFAIL with empty authority sections and answer sections holding at
    /// most CNAME/DNAME records (the part of a chain followed before the failure): the
    /// answer sections are not compared. Nothing else may differ.
    ServfailChainPrefix,
    /// A CNAME question whose answer (equal on both sides) holds a DNAME and the CNAME
    /// synthesised from it: the reference NXDOMAIN with only an SOA in authority, the
    /// subject NOERROR with an empty authority section (in the self-test, either way
    /// round). Only the RCODE and the authority section may differ.
    CnameQuestionBelowDnameRestarted,
    /// A UDP query with EDNS payload size 1232 (Unbound's own `edns-buffer-size`) whose
    /// reference reply was sized for another limit: larger than 1232 octets with TC=0
    /// while the subject's fits with TC=1, or TC=1 while the subject's complete reply
    /// (TC=0, same RCODE) fits in 1232 octets. Nothing is compared. In the self-test
    /// either side may be the one.
    ReplyEncodedForAnotherClient,
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
        reason: "skuad does not recurse yet and this configuration has no forward or stub zone: \
                 where Unbound falls through to resolution \
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
                 for names outside its zones; skuad sends EDE only when resolving fails or is stale",
    },
    Allowance {
        id: "skuad-ede-on-servfail",
        suite: Suite::Forwarding,
        rule: Rule::EdeOnServfailBySubjectOnly,
        reason: "skuad says why resolution failed with an Extended DNS Error on SERVFAIL (RFC 8914: \
                 22 No Reachable Authority, 23 Network Error); Unbound 1.17 sends none unless \
                 `ede: yes` (default no)",
    },
    Allowance {
        id: "unbound-dname-cname-ttl-0",
        suite: Suite::Forwarding,
        rule: Rule::DnameSynthesisedCnameTtl,
        reason: "Unbound 1.17 gives the CNAME it synthesises from a cached DNAME TTL 0 (so that it \
                 is never cached on its own); skuad gives it the DNAME's TTL as RFC 6672 §3.1 \
                 suggests; which one Unbound sends depends on its cache (it keeps the upstream's \
                 copy when the reply had one)",
    },
    Allowance {
        id: "unbound-servfail-chain-prefix",
        suite: Suite::Forwarding,
        rule: Rule::ServfailChainPrefix,
        reason: "when a CNAME chain's target fails, Unbound 1.17 answers SERVFAIL with or without \
                 the CNAMEs followed so far depending on whether they came from its cache (two \
                 Unbound instances differ); skuad's SERVFAIL carries no records",
    },
    Allowance {
        id: "unbound-restarts-cname-question-at-dname-target",
        suite: Suite::Forwarding,
        rule: Rule::CnameQuestionBelowDnameRestarted,
        reason: "for a CNAME question below a DNAME whose target does not exist, Unbound 1.17 \
                 sometimes restarts the question at the synthesised target and passes on its \
                 NXDOMAIN, and sometimes (when it synthesises the CNAME from a cached DNAME) \
                 answers the DNAME and the CNAME, NOERROR: two instances differ. skuad always \
                 answers as the authoritative server does: the DNAME and the synthesised CNAME, \
                 NOERROR (the CNAME answers a CNAME question)",
    },
    Allowance {
        id: "unbound-reply-for-another-client",
        suite: Suite::Forwarding,
        rule: Rule::ReplyEncodedForAnotherClient,
        reason: "Unbound 1.17 answers the clients waiting on one question in turn and reuses the \
                 previous client's encoded reply when flags, DO and UDP size match, but compares \
                 against the previous client's UDP size after overwriting it with its own 1232: \
                 a client asking with +bufsize=1232 can get a reply sized for another client \
                 (seen: 1641 octets without TC, or TC=1 on a 700-octet answer); skuad sizes \
                 every reply for its own client",
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
    /// TTLs may differ by this many seconds (0: compared exactly). Only the forwarding
    /// suite sets it: two caches filled a moment apart count down from different
    /// instants, and either may fetch an RRset again; the harness passes the seconds
    /// elapsed since the first query (plus two for the rounding on each side).
    pub ttl_tolerance: u32,
    /// The subject is a second instance of the reference (`SKUA_SUBJECT=unbound`): rules
    /// about the reference's own quirks apply to either side.
    pub self_test: bool,
}

impl Options {
    /// Options for `suite` (from [`ALLOW_LIST`]); TTLs exact.
    pub fn for_suite(suite: Suite) -> Self {
        Options {
            ignore_ra: ALLOW_LIST
                .iter()
                .any(|a| a.suite == suite && a.rule == Rule::IgnoreRaFlag),
            ttl_tolerance: 0,
            self_test: false,
        }
    }

    /// The same options with TTLs compared within `seconds`.
    pub fn with_ttl_tolerance(self, seconds: u32) -> Self {
        Options {
            ttl_tolerance: seconds,
            ..self
        }
    }
}

/// A record without its TTL (owner, type, class, canonical RDATA), and the TTL.
type TtlFree<'a> = ((&'a String, u16, u16, &'a Vec<u8>), u32);

/// The records of a section sorted without their TTLs, so that records whose TTLs differ
/// pair up.
fn without_ttl(s: &[crate::wire::Rr]) -> Vec<TtlFree<'_>> {
    let mut v: Vec<_> = s
        .iter()
        .map(|r| ((&r.key.0, r.key.1, r.key.2, &r.key.4), r.key.3))
        .collect();
    v.sort();
    v
}

/// Compares one section: `None` when equal, `Some(false)` when the records differ,
/// `Some(true)` when only TTLs differ by more than `tolerance` (never with tolerance 0:
/// then the TTL is part of the record).
fn section_differs(a: &[crate::wire::Rr], b: &[crate::wire::Rr], tolerance: u32) -> Option<bool> {
    if tolerance == 0 {
        let ka: Vec<_> = a.iter().map(|r| &r.key).collect();
        let kb: Vec<_> = b.iter().map(|r| &r.key).collect();
        return (ka != kb).then_some(false);
    }
    if a.len() != b.len() {
        return Some(false);
    }
    // Sorted without the TTL, so records with different TTLs pair up.
    let (sa, sb) = (without_ttl(a), without_ttl(b));
    if sa.iter().zip(&sb).any(|(x, y)| x.0 != y.0) {
        return Some(false);
    }
    sa.iter()
        .zip(&sb)
        .any(|(x, y)| x.1.abs_diff(y.1) > tolerance)
        .then_some(true)
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
    for (i, (name, ttl_name)) in [
        ("answer", "answer TTL"),
        ("authority", "authority TTL"),
        ("additional", "additional TTL"),
    ]
    .iter()
    .enumerate()
    {
        match section_differs(&a.sections[i], &b.sections[i], opts.ttl_tolerance) {
            None => {}
            Some(false) => d.push(name),
            Some(true) => d.push(ttl_name),
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
    opts: Options,
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
        let only_ede = |x: &Response| {
            x.opt()
                .is_some_and(|o| !o.options.is_empty() && o.options.iter().all(|x| x.0 == 15))
        };
        if a.rule == Rule::EdeOnServfailBySubjectOnly
            && r.rcode() == 2
            && s.rcode() == 2
            && aspects.contains(&"EDNS option codes")
            && r.opt().is_some_and(|o| o.options.is_empty())
            && only_ede(s)
        {
            aspects.retain(|x| *x != "EDNS option codes");
            applied.push(a.id);
        }
        if a.rule == Rule::DnameSynthesisedCnameTtl
            && aspects.contains(&"answer TTL")
            && answer_ttls_match_but_dname_cnames(r, s, opts.ttl_tolerance)
        {
            aspects.retain(|x| *x != "answer TTL");
            applied.push(a.id);
        }
    }
    applied
}

/// Whether the answer sections (already equal but for TTLs) have TTLs within `tolerance`
/// once CNAMEs synthesised from a DNAME of the same answer, with TTL 0 on one side, are
/// left out.
fn answer_ttls_match_but_dname_cnames(r: &Response, s: &Response, tolerance: u32) -> bool {
    use crate::wire::types;
    let (a, b) = (&r.sections[0], &s.sections[0]);
    if a.len() != b.len() {
        return false;
    }
    let dnames: Vec<&String> = a
        .iter()
        .filter(|x| x.key.1 == types::DNAME)
        .map(|x| &x.key.0)
        .collect();
    let synthesised = |owner: &String| {
        dnames
            .iter()
            .any(|d| owner.len() > d.len() && owner.ends_with(&format!(".{d}")))
    };
    without_ttl(a)
        .iter()
        .zip(without_ttl(b).iter())
        .all(|(x, y)| {
            x.0 == y.0
                && (x.1.abs_diff(y.1) <= tolerance
                    || (x.0.1 == types::CNAME && synthesised(x.0.0) && (x.1 == 0 || y.1 == 0)))
        })
}

/// If the differences are covered by an allow-list entry of `suite`,
/// returns its id.
pub fn allowed_by(
    suite: Suite,
    query: &Query,
    reference: Option<&Response>,
    subject: Option<&Response>,
    opts: Options,
    aspects: &[&'static str],
) -> Option<&'static str> {
    for a in ALLOW_LIST.iter().filter(|a| a.suite == suite) {
        if a.rule == Rule::ServfailChainPrefix {
            let (Some(r), Some(s)) = (reference, subject) else {
                continue;
            };
            let prefix = |x: &Response| {
                x.rcode() == 2
                    && x.sections[1].is_empty()
                    && x.sections[0].iter().all(|rr| {
                        rr.key.1 == crate::wire::types::CNAME
                            || rr.key.1 == crate::wire::types::DNAME
                    })
            };
            if prefix(r) && prefix(s) && aspects.iter().all(|x| x.starts_with("answer")) {
                return Some(a.id);
            }
        }
        if a.rule == Rule::CnameQuestionBelowDnameRestarted {
            let (Some(r), Some(s)) = (reference, subject) else {
                continue;
            };
            use crate::wire::types;
            // `restarted` passed on the target's NXDOMAIN, `direct` did not.
            let shapes = |restarted: &Response, direct: &Response| {
                restarted.rcode() == 3
                    && direct.rcode() == 0
                    && restarted.sections[0]
                        .iter()
                        .any(|x| x.key.1 == types::DNAME)
                    && restarted.sections[1].iter().all(|x| x.key.1 == types::SOA)
                    && direct.sections[1].is_empty()
            };
            if query.qtype == types::CNAME
                && (shapes(r, s) || (opts.self_test && shapes(s, r)))
                && aspects
                    .iter()
                    .all(|x| ["rcode", "authority", "authority TTL"].contains(x))
            {
                return Some(a.id);
            }
        }
        if a.rule == Rule::ReplyEncodedForAnotherClient {
            let (Some(r), Some(s)) = (reference, subject) else {
                continue;
            };
            const LIMIT: usize = 1232;
            // `bad` was sized for another limit than 1232; `good` is right for 1232.
            let other_size = |bad: &Response, good: &Response| {
                let too_large = bad.raw.len() > LIMIT && !bad.header.tc && good.header.tc;
                let needless_tc = bad.header.tc && !good.header.tc && bad.rcode() == good.rcode();
                good.raw.len() <= LIMIT && (too_large || needless_tc)
            };
            if !query.tcp
                && query.edns.is_some_and(|e| usize::from(e.udp_size) == LIMIT)
                && (other_size(r, s) || (opts.self_test && other_size(s, r)))
            {
                return Some(a.id);
            }
        }
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
    /// Context (configuration, pass), empty when there is none.
    pub note: String,
}

impl Difference {
    /// Multi-line report of this difference.
    pub fn render(&self, reference_name: &str, subject_name: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "#{} {}", self.index, self.query.describe());
        if !self.note.is_empty() {
            let _ = writeln!(s, "   in: {}", self.note);
        }
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
    /// Multi-pass suites: (configuration and pass, queries, differences, TTL
    /// tolerance in seconds).
    pub per_pass: Vec<(String, usize, usize, u32)>,
    /// Wall-clock seconds for sending and comparing.
    pub seconds: f64,
    /// Per category: queries neither server answered (after the retry of one-sided
    /// silence). Agreement in form, but a harness that counted every timeout as agreement
    /// would pass two servers that answer nothing: [`Report::unexpected_silence`] bounds it.
    pub silent: BTreeMap<&'static str, usize>,
}

impl Report {
    /// Adds `other` (another configuration of the same suite) to this report.
    pub fn merge(&mut self, other: Report) {
        self.total += other.total;
        self.tcp += other.tcp;
        self.differences.extend(other.differences);
        for (k, v) in other.allowed {
            *self.allowed.entry(k).or_default() += v;
        }
        self.ra_masked += other.ra_masked;
        for (k, (n, d)) in other.per_category {
            let e = self.per_category.entry(k).or_default();
            e.0 += n;
            e.1 += d;
        }
        for (k, v) in other.reference_rcodes {
            *self.reference_rcodes.entry(k).or_default() += v;
        }
        self.model_mismatches.extend(other.model_mismatches);
        self.per_pass.extend(other.per_pass);
        self.seconds += other.seconds;
        for (k, v) in other.silent {
            *self.silent.entry(k).or_default() += v;
        }
    }

    /// Queries neither server answered outside the categories whose answer is silence
    /// (Unbound's `deny`, `inform_deny` and `always_deny` local zones drop the query):
    /// each should have had a reply from both, so each is a failure.
    pub fn unexpected_silence(&self) -> Vec<(&'static str, usize)> {
        const DROPPED: [&str; 3] = ["zone:deny", "zone:inform_deny", "zone:always_deny"];
        self.silent
            .iter()
            .filter(|(c, _)| !DROPPED.contains(c))
            .map(|(c, n)| (*c, *n))
            .collect()
    }

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
        for (pass, n, d, tol) in &self.per_pass {
            let _ = writeln!(
                s,
                "  {pass:<44} {n:>5} queries {d:>5} differences (TTL tolerance {tol} s)"
            );
        }
        for (cat, (n, d)) in &self.per_category {
            let _ = writeln!(s, "  {cat:<28} {n:>5} queries {d:>5} differences");
        }
        for (id, n) in &self.allowed {
            let _ = writeln!(s, "  allowed by {id}: {n}");
        }
        for (cat, n) in &self.silent {
            let _ = writeln!(s, "  answered by neither server, {cat}: {n}");
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
