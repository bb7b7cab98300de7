extern crate std;

use super::*;
use alloc::vec;

fn ex() -> WireName {
    WireName::parse("example.com.", None).unwrap()
}

fn load(text: &str) -> Result<Vec<Rr>, ZoneFileError> {
    load_with(text, &mut NoIncludes)
}

fn load_with(text: &str, loader: &mut dyn IncludeLoader) -> Result<Vec<Rr>, ZoneFileError> {
    let mut out = Vec::new();
    let n = parse_zone(text, "db.example", &ex(), loader, &mut |rr| {
        out.push(rr);
        Ok(())
    })?;
    assert_eq!(n, out.len());
    Ok(out)
}

fn load_err(text: &str) -> String {
    match load(text) {
        Ok(v) => panic!("{text:?} loaded: {v:?}"),
        Err(e) => e.to_string(),
    }
}

fn name(s: &str) -> WireName {
    WireName::parse(s, None).unwrap()
}

const SOA: &str = "@ IN SOA ns1 hostmaster 1 7200 900 1209600 300\n";

#[test]
fn basic_zone() {
    let z = "$TTL 3600\n\
             @ IN SOA ns1.example.com. hostmaster ( 2024010101 ; serial\n\
             \t7200 ; refresh\n\
             \t900 1209600 300 )\n\
             \tIN NS ns1\n\
             ns1 A 192.0.2.1\n\
             www 300 CNAME @\n\
             \n\
             ; comment line\n\
             txt TXT \"a;b (c)\" d ; trailing\n\
             \tAAAA 2001:db8::1\n";
    let rrs = load(z).unwrap();
    assert_eq!(rrs.len(), 6);
    assert_eq!(
        (rrs[0].owner.clone(), rrs[0].rtype, rrs[0].ttl),
        (ex(), rtype::SOA, 3600)
    );
    assert_eq!((rrs[1].owner.clone(), rrs[1].rtype), (ex(), rtype::NS));
    assert_eq!(rrs[1].rdata, name("ns1.example.com.").as_bytes());
    assert_eq!(rrs[2].owner, name("ns1.example.com."));
    assert_eq!(
        (rrs[3].ttl, rrs[3].rdata.as_slice()),
        (300, ex().as_bytes())
    );
    assert_eq!(rrs[4].rdata, b"\x07a;b (c)\x01d");
    assert_eq!(
        (rrs[5].owner.clone(), rrs[5].rtype, rrs[5].ttl),
        (name("txt.example.com."), rtype::AAAA, 3600)
    );
    assert!(rrs.iter().all(|r| r.class == class::IN));
}

#[test]
fn origin_directive_and_relative_names() {
    let z = "$TTL 60\n$ORIGIN sub\nhost A 10.0.0.1\n$origin other.net.\n@ MX 10 mail\nx.y. A 10.0.0.2\n";
    let rrs = load(z).unwrap();
    assert_eq!(rrs[0].owner, name("host.sub.example.com."));
    assert_eq!(rrs[1].owner, name("other.net."));
    assert_eq!(
        rrs[1].rdata,
        [&[0u8, 10][..], name("mail.other.net.").as_bytes()].concat()
    );
    assert_eq!(rrs[2].owner, name("x.y."));
    assert!(load_err("$ORIGIN\n").ends_with(":1: $ORIGIN takes exactly one domain name"));
    assert!(
        load_err("$ORIGIN a..b\n").ends_with(":1: bad origin 'a..b': empty label in domain name")
    );
}

#[test]
fn ttl_rules() {
    // $TTL wins over the previous record's TTL.
    let rrs = load("$TTL 1h\na 5 A 10.0.0.1\nb A 10.0.0.2\n").unwrap();
    assert_eq!((rrs[0].ttl, rrs[1].ttl), (5, 3600));
    // No $TTL: previous record's TTL (RFC 1035).
    let rrs = load("a 5 A 10.0.0.1\nb A 10.0.0.2\n").unwrap();
    assert_eq!(rrs[1].ttl, 5);
    // No $TTL and no TTL at all: SOA MINIMUM for the SOA (BIND), then carried on.
    let rrs = load(&format!("{SOA}b A 10.0.0.2\n")).unwrap();
    assert_eq!((rrs[0].ttl, rrs[1].ttl), (300, 300));
    assert_eq!(
        load_err("a A 10.0.0.1\n"),
        "db.example:1: no TTL given, no $TTL in effect and no previous record to take it from"
    );
    assert_eq!(
        load_err("$TTL\n"),
        "db.example:1: $TTL takes exactly one TTL"
    );
    assert_eq!(load_err("$TTL 1x\n"), "db.example:1: bad $TTL '1x'");
    assert_eq!(
        load_err("$TTL 1 2\n"),
        "db.example:1: $TTL takes exactly one TTL"
    );
    // TTL and class in either order.
    let rrs =
        load("a IN 7 A 10.0.0.1\nb 8 IN A 10.0.0.1\nc 9 A 10.0.0.1\nd in A 10.0.0.1\n").unwrap();
    assert_eq!(rrs.iter().map(|r| r.ttl).collect::<Vec<_>>(), [7, 8, 9, 9]);
}

#[test]
fn classes() {
    assert_eq!(
        load_err("$TTL 1\na CH TXT x\n"),
        "db.example:2: class CH is not supported (only IN)"
    );
    assert_eq!(
        load_err("$TTL 1\na CLASS9 TXT x\n"),
        "db.example:2: class CLASS9 is not supported (only IN)"
    );
    let rrs = load("$TTL 1\na CLASS1 A 10.0.0.1\nb A 10.0.0.1\n").unwrap();
    assert_eq!(rrs[1].class, class::IN);
}

#[test]
fn blank_owner() {
    let rrs = load("$TTL 1\nhost A 10.0.0.1\n  A 10.0.0.2\n\t; comment\n\tTXT \"t\"\n").unwrap();
    assert!(rrs.iter().all(|r| r.owner == name("host.example.com.")));
    assert_eq!(
        load_err("$TTL 1\n  A 10.0.0.1\n"),
        "db.example:2: the first record has no owner name (the line starts with a blank)"
    );
    // A blank line or a failed record does not change the owner.
    let rrs = load("$TTL 1\nhost A 10.0.0.1\n\n  A 10.0.0.2\n").unwrap();
    assert_eq!(rrs[1].owner, name("host.example.com."));
}

#[test]
fn parentheses_and_lines() {
    let z = "$TTL 1\na TXT ( \"x\"\n\n ; c\n \"y\" )\nb A 10.0.0.1\nc A 1.2.3\n";
    assert_eq!(load_err(z), "db.example:7: bad IPv4 address '1.2.3'");
    let rrs = load(&z[..z.len() - 10]).unwrap();
    assert_eq!(rrs[0].rdata, b"\x01x\x01y");
    assert_eq!(
        load_err("$TTL 1\n\na TXT ( x\n\n"),
        "db.example:3: '(' opened on line 3 is never closed"
    );
    assert_eq!(
        load_err("$TTL 1\na TXT x )\n"),
        "db.example:2: ')' without a matching '('"
    );
    assert_eq!(
        load_err("$TTL 1\na TXT \"x\nb A 1.2.3.4\n"),
        "db.example:2: unterminated quoted string (quotes must close on the same line)"
    );
    // Record starting on line 2 whose error lies on line 4: reported at line 2.
    assert_eq!(
        load_err("$TTL 1\na MX (\n10\nbad..name )\n"),
        "db.example:2: MX record: bad host name 'bad..name': empty label in domain name"
    );
    // CRLF line ends.
    let rrs = load("$TTL 1\r\na A 10.0.0.1\r\n\tA 10.0.0.2\r\n").unwrap();
    assert_eq!(rrs.len(), 2);
    assert_eq!(load("").unwrap().len(), 0);
    assert_eq!(load("; nothing\n\n   \n").unwrap().len(), 0);
}

#[test]
fn record_errors() {
    assert_eq!(
        load_err("$TTL 1\na AX 10.0.0.1\n"),
        "db.example:2: unknown RR type 'AX'"
    );
    assert_eq!(
        load_err("$TTL 1\na A\n"),
        "db.example:2: missing RDATA for A record"
    );
    assert_eq!(load_err("$TTL 1\na\n"), "db.example:2: missing RR type");
    assert_eq!(
        load_err("$TTL 1\na TYPE9 \\# 2 00\n"),
        "db.example:2: \\# RDATA: length 2 does not match the 1 octets of data"
    );
    assert_eq!(
        load_err("$TTL 1\n\"a\" A 10.0.0.1\n"),
        "db.example:2: owner name must not be quoted (got \"a\")"
    );
    assert_eq!(
        load_err("$TTL 1\na..b A 10.0.0.1\n"),
        "db.example:2: bad owner name 'a..b': empty label in domain name"
    );
    assert_eq!(
        load_err("$BOGUS x\n"),
        "db.example:1: unknown directive '$BOGUS'"
    );
    assert_eq!(
        load_err("$GENERATE 1-2 a A 10.0.0.$\n"),
        "db.example:1: $GENERATE is not supported"
    );
    assert_eq!(
        load_err("$TTL \"1\"\n"),
        "db.example:1: unexpected quoted string \"1\" in $TTL"
    );
    // A blank-owner `$TTL` is a record line, not a directive.
    assert_eq!(
        load_err("$TTL 1\na A 10.0.0.1\n $TTL 5\n"),
        "db.example:3: unknown RR type '$TTL'"
    );
}

#[test]
fn sink_errors_stop_the_parse() {
    let mut seen = 0;
    let r = parse_zone(
        "$TTL 1\na A 10.0.0.1\nb A 10.0.0.2\nc A 10.0.0.3\n",
        "z",
        &ex(),
        &mut NoIncludes,
        &mut |rr| {
            seen += 1;
            if rr.owner == name("b.example.com.") {
                Err("duplicate record".to_string())
            } else {
                Ok(())
            }
        },
    );
    assert_eq!(r.unwrap_err().to_string(), "z:3: duplicate record");
    assert_eq!(seen, 2);
}

struct MapLoader(Vec<(&'static str, &'static str)>, usize);

impl IncludeLoader for MapLoader {
    fn load(&mut self, path: &str) -> Result<(String, String), String> {
        self.1 += 1;
        self.0
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(p, c)| (format!("/etc/zones/{p}"), c.to_string()))
            .ok_or_else(|| "no such file".to_string())
    }
}

#[test]
fn includes() {
    let mut l = MapLoader(
        vec![
            ("hosts.inc", "h1 A 10.0.0.1\n$ORIGIN deep\nh2 A 10.0.0.2\n"),
            ("sub.inc", "@ TXT \"in sub\"\n  A 10.0.0.3\n"),
            ("bad.inc", "\n\nok A 10.0.0.1\nbroken A 300.0.0.1\n"),
            ("loop.inc", "$INCLUDE loop.inc\n"),
            ("my file.inc", "f A 10.0.0.9\n"),
        ],
        0,
    );
    let z = "$TTL 1\n$INCLUDE hosts.inc\nafter A 10.0.0.4\n$INCLUDE sub.inc sub\n  A 10.0.0.5\n$INCLUDE \"my file.inc\"\n$INCLUDE my\\ file.inc\n";
    let rrs = load_with(z, &mut l).unwrap();
    let owners: Vec<String> = rrs.iter().map(|r| r.owner.to_string()).collect();
    assert_eq!(
        owners,
        [
            "h1.example.com.",
            "h2.deep.example.com.",
            // $ORIGIN inside the include does not leak back.
            "after.example.com.",
            "sub.example.com.",
            "sub.example.com.",
            // ... nor does the owner.
            "after.example.com.",
            "f.example.com.",
            "f.example.com.",
        ]
    );
    assert_eq!(
        load_with("$TTL 1\n$INCLUDE bad.inc\n", &mut l)
            .unwrap_err()
            .to_string(),
        "/etc/zones/bad.inc:4: bad IPv4 address '300.0.0.1'"
    );
    assert_eq!(
        load_with("$TTL 1\n\n$INCLUDE nope.inc\n", &mut l)
            .unwrap_err()
            .to_string(),
        "db.example:3: cannot include 'nope.inc': no such file"
    );
    l.1 = 0;
    assert_eq!(
        load_with("$INCLUDE loop.inc\n", &mut l)
            .unwrap_err()
            .to_string(),
        "/etc/zones/loop.inc:1: $INCLUDE nested more than 16 levels deep"
    );
    assert_eq!(l.1, MAX_INCLUDE_DEPTH);
    assert_eq!(
        load("$INCLUDE x\n").unwrap_err().to_string(),
        "db.example:1: cannot include 'x': $INCLUDE is not allowed here"
    );
    assert_eq!(
        load_with("$INCLUDE\n", &mut l).unwrap_err().to_string(),
        "db.example:1: $INCLUDE takes a file name and an optional origin"
    );
    assert_eq!(
        load_with("$INCLUDE a b c\n", &mut l)
            .unwrap_err()
            .to_string(),
        "db.example:1: $INCLUDE takes a file name and an optional origin"
    );
}

#[test]
fn many_types_in_a_zone() {
    let z = "$TTL 300\n\
        @ SOA ns1 hm 1 2 3 4 5\n\
        @ NS ns1\n\
        @ MX 10 mail\n\
        @ TXT \"v=spf1 -all\"\n\
        @ CAA 0 issue \"ca.example\"\n\
        _sip._udp SRV 0 5 5060 sip\n\
        sip NAPTR 100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp\n\
        @ HTTPS 1 . alpn=h2\n\
        d DNAME other.net.\n\
        k SSHFP 1 1 abcd\n\
        _443._tcp TLSA 3 1 1 abcd\n\
        p PTR host\n\
        u TYPE65534 \\# 1 ff\n";
    let rrs = load(z).unwrap();
    assert_eq!(rrs.len(), 13);
    assert_eq!(
        rrs[5].rdata,
        [&b"\x00\x00\x00\x05\x13\xc4\x03sip"[..], ex().as_bytes()].concat()
    );
    assert_eq!(rrs[12].rdata, [0xff]);
}

#[test]
fn garbage_never_panics() {
    const ALPHABET: &[u8] = b" \t\n\n;()\"\\@$.#0123456789abcAINMXTS$ORIGINTLUDE";
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    struct Echo;
    impl IncludeLoader for Echo {
        fn load(&mut self, path: &str) -> Result<(String, String), String> {
            Ok((
                path.to_string(),
                format!("$INCLUDE {path}\n{path} A 1.2.3.4\n"),
            ))
        }
    }
    for _ in 0..20_000 {
        let len = (next() % 64) as usize;
        let s: String = (0..len)
            .map(|_| char::from(ALPHABET[(next() as usize >> 8) % ALPHABET.len()]))
            .collect();
        let _ = parse_zone(&s, "g", &ex(), &mut Echo, &mut |_| Ok(()));
        let _ = parse_zone(
            &format!("$TTL 1\n{s}"),
            "g",
            &ex(),
            &mut NoIncludes,
            &mut |_| Ok(()),
        );
    }
}

/// 1,000,000 A records generated in memory (28 MB of text; about 5 s in a debug build
/// on a 2-core machine): each one parsed, in order, with its own address, and nothing
/// else. The parse time is printed, not asserted (`just bench-zoneparse` runs it in
/// release mode; `just bench-bigzone` measures a whole skuad load and its memory).
#[test]
fn million_a_records() {
    use core::fmt::Write as _;
    const N: u32 = 1_000_000;
    let mut z = String::with_capacity(40_000_000);
    z.push_str("$TTL 3600\n@ SOA ns1 hm 1 7200 900 1209600 300\n");
    for i in 0..N {
        let [_, a, b, c] = i.to_be_bytes();
        let _ = writeln!(z, "host{i} IN A 10.{a}.{b}.{c}");
    }
    let start = std::time::Instant::now();
    let (mut n, mut bytes, mut wrong) = (0u32, 0usize, Vec::new());
    let mut label = String::new();
    let mut owner = Vec::new();
    let count = parse_zone(&z, "gen", &ex(), &mut NoIncludes, &mut |rr| {
        bytes += rr.rdata.len();
        if n > 0 {
            // Record n is host{n-1}, 10.a.b.c from n-1's last three octets.
            let i = n - 1;
            let [_, a, b, c] = i.to_be_bytes();
            label.clear();
            let _ = write!(label, "host{i}");
            owner.clear();
            owner.push(label.len() as u8);
            owner.extend_from_slice(label.as_bytes());
            owner.extend_from_slice(b"\x07example\x03com\x00");
            if rr.rtype != 1
                || rr.ttl != 3600
                || rr.rdata != [10, a, b, c]
                || rr.owner.as_bytes() != owner.as_slice()
            {
                wrong.push(i);
            }
        }
        n += 1;
        Ok(())
    })
    .unwrap();
    std::println!(
        "parsed {count} records ({} MB of text) in {:?}",
        z.len() / 1_000_000,
        start.elapsed()
    );
    // 1 M A records of 4 octets plus the SOA (17 + 16 + 20 octets).
    assert_eq!((count, n), (N as usize + 1, N + 1));
    assert_eq!(bytes, 4 * N as usize + 53);
    assert_eq!(
        wrong.len(),
        0,
        "records not as written: {:?}",
        &wrong[..wrong.len().min(5)]
    );
}

proptest::proptest! {
    #[test]
    fn prop_no_panic_on_any_zone(s in "(\\PC|\n|\t){0,200}") {
        let _ = parse_zone(&s, "p", &ex(), &mut NoIncludes, &mut |_| Ok(()));
    }
}
