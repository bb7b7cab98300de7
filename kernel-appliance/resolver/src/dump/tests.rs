use super::*;
use crate::cache::CacheConfig;
use alloc::vec;
use core::cell::RefCell;

type TestCache = Cache<RefCell<MsgShard>, RefCell<SetShard>>;

fn wire(name: &str) -> Vec<u8> {
    WireName::parse(name, None).unwrap().as_bytes().to_vec()
}

fn set(owner: &str, rtype: u16, ttl: u32, rdatas: &[&[u8]], rank: Rank) -> RrSet {
    RrSet {
        owner: wire(owner),
        rtype,
        class: 1,
        ttl,
        rdatas: rdatas.iter().map(|r| r.to_vec()).collect(),
        rank,
    }
}

fn soa() -> Vec<u8> {
    let mut s = wire("ns.example.net.");
    s.extend_from_slice(&wire("admin.example.net."));
    for v in [1u32, 2, 3, 4, 120] {
        s.extend_from_slice(&v.to_be_bytes());
    }
    s
}

/// Stores an answer as the forwarder does: RRsets offered, the message rendered from
/// them, expiring with the first of them.
fn store(
    c: &TestCache,
    q: &str,
    qtype: u16,
    rcode: u16,
    kind: Kind,
    sets: &[(RrSet, Section)],
    now: u32,
) {
    let qname = wire(q);
    let with: Vec<(RrSet, Section, u32)> = sets
        .iter()
        .map(|(s, sec)| {
            let (s, e) = c.offer(s.clone(), now);
            (s, *sec, e)
        })
        .collect();
    let expires = with.iter().map(|(_, _, e)| *e).min().unwrap();
    let body = render(&qname, with.iter().map(|(s, sec, e)| (s, *sec, *e)));
    c.insert(
        &Key::new(&qname, qtype, 1),
        Rendered {
            flags: flags::QR | flags::RA | rcode,
            kind,
            body,
            expires,
            ttl: expires - now,
            zone: 7,
            ede: None,
        },
        now,
    );
}

/// A cache with a CNAME chain, an address set of two records, a NODATA and an
/// NXDOMAIN answer, and a name with an escaped blank.
fn filled(now: u32) -> TestCache {
    let c = TestCache::new(CacheConfig::default());
    let www = set(
        "www.example.net.",
        1,
        300,
        &[&[198, 18, 5, 1], &[198, 18, 5, 2]],
        Rank::AnswerNonAuth,
    );
    let alias = set(
        "Alias.example.net.",
        5,
        600,
        &[&wire("www.example.net.")],
        Rank::AnswerNonAuth,
    );
    let soa = set("example.net.", 6, 120, &[&soa()], Rank::AuthorityNonAuth);
    store(
        &c,
        "www.example.net.",
        1,
        0,
        Kind::Positive,
        &[(www.clone(), Section::Answer)],
        now,
    );
    store(
        &c,
        "alias.example.net.",
        1,
        0,
        Kind::Positive,
        &[(alias, Section::Answer), (www, Section::Answer)],
        now,
    );
    store(
        &c,
        "www.example.net.",
        28,
        0,
        Kind::NoData,
        &[(soa.clone(), Section::Authority)],
        now,
    );
    store(
        &c,
        "nx.example.net.",
        1,
        3,
        Kind::NxDomain,
        &[(soa, Section::Authority)],
        now,
    );
    let odd = set(
        "a\\ b.example.net.",
        16,
        60,
        &[b"\x05hello"],
        Rank::AnswerAuth,
    );
    store(
        &c,
        "a\\ b.example.net.",
        16,
        0,
        Kind::Positive,
        &[(odd, Section::Answer)],
        now,
    );
    c
}

/// Every answer of `c` for the questions used here, as (records with TTLs) at `now`.
/// (question name, type, records by section in presentation format).
type Answers = Vec<(String, u16, Vec<(Section, String)>)>;

fn answers(c: &TestCache, now: u32) -> Answers {
    let mut out = Vec::new();
    for (q, t) in [
        ("www.example.net.", 1),
        ("alias.example.net.", 1),
        ("www.example.net.", 28),
        ("nx.example.net.", 1),
        ("a\\ b.example.net.", 16),
    ] {
        let n = lookup_text(c, q, now);
        let m = n.messages.iter().find(|m| m.qtype == t).cloned();
        let recs = m
            .map(|m| {
                m.records
                    .iter()
                    .map(|(s, r)| {
                        (
                            *s,
                            record_text(&r.owner, r.rtype, r.class, r.ttl, &r.rdata).unwrap(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push((q.to_string(), t, recs));
    }
    out
}

fn lookup_text(c: &TestCache, q: &str, now: u32) -> NameEntries {
    c.lookup_name(&wire(q).to_ascii_lowercase(), now)
}

#[test]
fn lookup_shows_sets_and_answers_of_a_name() {
    let c = filled(1000);
    let n = lookup_text(&c, "WWW.example.net.", 1010);
    assert_eq!(n.rrsets.len(), 1);
    assert_eq!((n.rrsets[0].set.rtype, n.rrsets[0].ttl), (1, 290));
    assert_eq!(n.messages.len(), 2);
    let a = &n.messages[0];
    assert_eq!(
        (a.qtype, a.kind, a.ttl, a.stale, a.rcode),
        (1, Kind::Positive, 290, false, 0)
    );
    assert_eq!(a.records.len(), 2);
    assert_eq!(a.records[1].1.rdata, [198, 18, 5, 2]);
    let nodata = &n.messages[1];
    assert_eq!(
        (nodata.qtype, nodata.kind, nodata.ttl),
        (28, Kind::NoData, 110)
    );
    assert_eq!(nodata.records[0].0, Section::Authority);
    // The CNAME chain: the alias's own RRset, and its answer with both sets.
    let n = lookup_text(&c, "alias.example.net.", 1010);
    assert_eq!(n.rrsets[0].set.owner, wire("Alias.example.net."));
    assert_eq!(n.messages[0].records.len(), 3);
    assert_eq!(n.messages[0].ttl, 290);
    // Nothing for an unknown name, and nothing once expired (no serve-expired).
    assert_eq!(
        lookup_text(&c, "other.example.net.", 1010),
        NameEntries::default()
    );
    let n = lookup_text(&c, "nx.example.net.", 1120);
    assert!(n.messages.is_empty() && n.rrsets.is_empty(), "{n:?}");
    // Looking up counts no hit.
    assert_eq!(c.stats.hits.load(core::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn stale_answers_are_shown_as_stale() {
    let c = TestCache::new(CacheConfig {
        serve_expired: true,
        ..CacheConfig::default()
    });
    let www = set(
        "www.example.net.",
        1,
        10,
        &[&[198, 18, 5, 1]],
        Rank::AnswerNonAuth,
    );
    store(
        &c,
        "www.example.net.",
        1,
        0,
        Kind::Positive,
        &[(www, Section::Answer)],
        100,
    );
    let n = lookup_text(&c, "www.example.net.", 200);
    assert_eq!(n.messages.len(), 1);
    assert!(n.messages[0].stale);
    assert_eq!(n.messages[0].ttl, 0);
    assert!(n.rrsets.is_empty());
    // Stale entries are not dumped.
    assert!(!c.dump(200, 0).contains("msg "));
}

#[test]
fn dump_then_load_gives_the_same_answers() {
    let c = filled(1000);
    let text = c.dump(1010, 1_700_000_000);
    assert!(
        text.starts_with("skua-cache-dump 1 written=1700000000\n"),
        "{text}"
    );
    assert!(
        text.contains("msg nx.example.net. IN A NXDOMAIN nxdomain 110\n"),
        "{text}"
    );
    assert!(
        text.contains("  answer www.example.net. 290 IN A 198.18.5.2\n"),
        "{text}"
    );
    assert!(
        text.contains("rrset authority-nonauth\n  example.net. 110 IN SOA"),
        "{text}"
    );
    assert!(text.ends_with("eof rrsets=4 messages=5\n"), "{text}");
    let p = Dump::parse(&text).unwrap();
    assert_eq!(
        (p.rrsets(), p.messages(), p.written()),
        (4, 5, 1_700_000_000)
    );
    // Another process, another clock: loaded at its second 5, the same wall second.
    let d = TestCache::new(CacheConfig::default());
    let l = d.load(&text, 5, 1_700_000_000, |_| Some(1)).unwrap();
    assert_eq!(
        l,
        Loaded {
            rrsets: 4,
            messages: 5,
            expired: 0,
            outside: 0
        }
    );
    assert_eq!(answers(&d, 5), answers(&c, 1010));
    assert!(!answers(&d, 5)[0].2.is_empty());
    // The answers count down and expire as the originals do.
    assert_eq!(answers(&d, 100), answers(&c, 1105));
    assert_eq!(answers(&d, 115)[3].2, vec![]);
    // Served through the engine's interface, with TTLs from the new expiries.
    let key_name = wire("www.example.net.");
    let ttl = d
        .lookup(&Key::new(&key_name, 1, 1), 5, |h| {
            let mut tail = h.tail.to_vec();
            patch_ttls(&mut tail, h.ttls, 5, h.fixed_ttl);
            let off = usize::from(u16::from_le_bytes([h.ttls[0], h.ttls[1]]));
            u32::from_be_bytes(tail[off..off + 4].try_into().unwrap())
        })
        .unwrap();
    assert_eq!(ttl, 290);
    // The RRset store is back too, with its ranks.
    let n = lookup_text(&d, "a\\ b.example.net.", 5);
    assert_eq!(n.rrsets[0].set.rank, Rank::AnswerAuth);
    assert_eq!(n.rrsets[0].set.rdatas, vec![b"\x05hello".to_vec()]);
    // The zone comes from the caller.
    d.for_each_msg(5, None, |m| assert_eq!(m.rendered.zone, 1));
    // A dump of the loaded cache is the same text.
    assert_eq!(d.dump(5, 1_700_000_000), text);
}

#[test]
fn load_ages_caps_and_skips() {
    let c = filled(0);
    let text = c.dump(0, 1_000_000);
    // 200 s later by the wall clock: the SOA (120 s) and what uses it are gone, the
    // addresses have 100 s left.
    let d = TestCache::new(CacheConfig {
        max_ttl: 250,
        ..CacheConfig::default()
    });
    let l = d.load(&text, 50, 1_000_200, |_| Some(3)).unwrap();
    // Expired: the SOA RRset, the NODATA and NXDOMAIN answers, and the a\ b entries
    // (60 s); outside: none left to skip.
    assert_eq!(
        l,
        Loaded {
            rrsets: 2,
            messages: 2,
            expired: 5,
            outside: 0
        }
    );
    assert_eq!(lookup_text(&d, "www.example.net.", 50).messages[0].ttl, 100);
    // Capped at cache-max-ttl: the alias (600 s) has 250 s left, not 400.
    assert_eq!(lookup_text(&d, "alias.example.net.", 50).rrsets[0].ttl, 250);
    // A name outside every zone is skipped.
    let e = TestCache::new(CacheConfig::default());
    let l = e
        .load(&text, 0, 1_000_000, |n| {
            (!n.starts_with(b"\x02nx")).then_some(3)
        })
        .unwrap();
    assert_eq!((l.messages, l.outside), (4, 1));
    // A wall clock that went back ages nothing.
    let f = TestCache::new(CacheConfig::default());
    let l = f.load(&text, 0, 10, |_| Some(3)).unwrap();
    assert_eq!((l.messages, l.expired), (5, 0));
}

#[test]
fn malformed_dumps_load_nothing() {
    let good = filled(0).dump(0, 1_000);
    let lines: Vec<&str> = good.lines().collect();
    let with = |i: usize, repl: &str| {
        let mut l = lines.clone();
        l[i] = repl;
        l.join("\n")
    };
    let at = |s: &str| lines.iter().position(|l| l.starts_with(s)).unwrap();
    let msg = at("msg www.example.net. IN A ");
    let rec = msg + 1;
    for (text, line, why) in [
        (String::new(), 1, "empty"),
        ("hello\n".into(), 1, "not a cache dump"),
        (
            "skua-cache-dump 2 written=1\neof rrsets=0 messages=0\n".into(),
            1,
            "version 2",
        ),
        ("skua-cache-dump 1\n".into(), 1, "written="),
        (
            with(msg, "msg www.example.net. IN A NOERROR positive"),
            msg + 1,
            "expected msg",
        ),
        (
            with(msg, "msg www.example.net. IN A NOERROR nxdomain 5"),
            msg + 1,
            "does not go with",
        ),
        (
            with(msg, "msg www.example.net. IN BOGUS NOERROR positive 5"),
            msg + 1,
            "bad type",
        ),
        (
            with(msg, "msg www..example.net. IN A NOERROR positive 5"),
            msg + 1,
            "bad name",
        ),
        (
            with(rec, "  answer www.example.net. IN A 198.18.5.1"),
            rec + 1,
            "needs its TTL",
        ),
        (
            with(rec, "  answer www.example.net. 290 IN A 198.18.5"),
            rec + 1,
            "bad record",
        ),
        (
            with(rec, "  question www.example.net. 290 IN A 198.18.5.1"),
            rec + 1,
            "a section",
        ),
        (
            with(rec, "  additional www.example.net. 290 IN A 198.18.5.1"),
            rec + 2,
            "out of order",
        ),
        (
            with(at("rrset answer-auth"), "rrset best"),
            at("rrset answer-auth") + 1,
            "expected rrset RANK",
        ),
        (
            with(at("eof"), "eof rrsets=3 messages=5"),
            at("eof") + 1,
            "says 3 rrsets",
        ),
        (
            with(at("eof"), "end"),
            at("eof") + 1,
            "expected rrset, msg or eof",
        ),
        (
            lines[..lines.len() - 1].join("\n"),
            lines.len(),
            "without its eof",
        ),
        (lines[..rec + 1].join("\n"), rec + 2, "inside a block"),
        (
            format!("{good}msg x. IN A NOERROR positive 5\n"),
            lines.len() + 1,
            "after the eof",
        ),
    ] {
        let c = TestCache::new(CacheConfig::default());
        let e = c.load(&text, 0, 1_000, |_| Some(1)).unwrap_err();
        assert_eq!(e.line, line, "{e} in\n{text}");
        assert!(e.to_string().contains(why), "{e}, wanted {why}");
        // Nothing half-loaded: the good blocks before the bad line are not in.
        assert_eq!(c.size().0 + c.size().1, 0, "{e}");
    }
    // An rrset block with two owners.
    let text = "skua-cache-dump 1 written=0\nrrset additional\n a. 5 IN A 1.2.3.4\n b. 5 IN A 1.2.3.5\nend\neof rrsets=1 messages=0\n";
    let e = TestCache::new(CacheConfig::default())
        .load(text, 0, 0, |_| Some(1))
        .unwrap_err();
    assert_eq!(
        (e.line, e.reason.as_str()),
        (4, "an rrset block holds one owner, type and class")
    );
    // Comments and blanks anywhere, CRLF line ends.
    let text = "; hi\r\n\r\nskua-cache-dump 1 written=0\r\n  ; x\r\nrrset additional\r\n a. 5 IN A 1.2.3.4\r\nend\r\neof rrsets=1 messages=0\r\n; bye\r\n";
    let l = TestCache::new(CacheConfig::default())
        .load(text, 0, 0, |_| Some(1))
        .unwrap();
    assert_eq!(l.rrsets, 1);
}

proptest::proptest! {
    /// A dump with a few bytes changed, cut or repeated never panics the loader, and
    /// either loads or leaves the cache empty.
    #[test]
    fn damaged_dumps_load_whole_or_not_at_all(
        edits in proptest::collection::vec((0usize..4096, 0u8..4, proptest::num::u8::ANY), 1..6)
    ) {
        let mut text = filled(0).dump(0, 1_000).into_bytes();
        for (at, op, byte) in edits {
            let at = at % text.len();
            match op {
                0 => text[at] = byte,
                1 => { text.remove(at); }
                2 => text.truncate(at),
                _ => { let l = text[at..].to_vec(); text.extend_from_slice(&l); }
            }
            if text.is_empty() { text.push(b'x'); }
        }
        let text = String::from_utf8_lossy(&text);
        let c = TestCache::new(CacheConfig::default());
        if c.load(&text, 0, 1_000, |_| Some(1)).is_err() {
            proptest::prop_assert_eq!(c.size().0 + c.size().1, 0);
        }
    }
}

#[test]
fn header_words_keep_escaped_blanks() {
    assert_eq!(
        words("msg a\\ b.x. IN  A"),
        vec!["msg", "a\\ b.x.", "IN", "A"]
    );
    assert_eq!(words(" x\\\\ y "), vec!["x\\\\", "y"]);
    assert_eq!(rcode_from("RCODE15"), Some(15));
    assert_eq!(rcode_from("RCODE16"), None);
    assert_eq!(rcode_from("nxdomain"), Some(3));
    assert_eq!(rcode_name(3), "NXDOMAIN");
    assert_eq!(rcode_name(12), "RCODE12");
}
