use super::*;
use alloc::vec;

fn origin() -> WireName {
    WireName::parse("example.com.", None).unwrap()
}

fn rd(t: u16, s: &str) -> Vec<u8> {
    match parse_rdata(t, s, Some(&origin())) {
        Ok(v) => v,
        Err(e) => panic!("{} {s:?}: {e}", rtype_to_string(t)),
    }
}

fn rd_err(t: u16, s: &str) -> String {
    match parse_rdata(t, s, Some(&origin())) {
        Ok(v) => panic!("{} {s:?} parsed as {v:02x?}", rtype_to_string(t)),
        Err(e) => e.0,
    }
}

const EX: &[u8] = b"\x07example\x03com\x00";

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn types_and_classes() {
    assert_eq!(rtype_from_str("A"), Some(1));
    assert_eq!(rtype_from_str("aaaa"), Some(28));
    assert_eq!(rtype_from_str("nsap-ptr"), Some(23));
    assert_eq!(rtype_from_str("TYPE65534"), Some(65534));
    assert_eq!(rtype_from_str("type1"), Some(1));
    assert_eq!(rtype_from_str("TYPE65536"), None);
    assert_eq!(rtype_from_str("TYPE"), None);
    assert_eq!(rtype_from_str("TYPE+1"), None);
    assert_eq!(rtype_from_str("AX"), None);
    assert_eq!(rtype_from_str(""), None);
    assert_eq!(rtype_to_string(1), "A");
    assert_eq!(rtype_to_string(65), "HTTPS");
    assert_eq!(rtype_to_string(65280), "TYPE65280");
    for &(code, name) in TYPE_NAMES {
        assert_eq!(rtype_from_str(name), Some(code));
        assert_eq!(rtype_to_string(code), name);
    }
    assert_eq!(class_from_str("IN"), Some(1));
    assert_eq!(class_from_str("in"), Some(1));
    assert_eq!(class_from_str("CH"), Some(3));
    assert_eq!(class_from_str("HS"), Some(4));
    assert_eq!(class_from_str("CLASS255"), Some(255));
    assert_eq!(class_from_str("class1"), Some(1));
    assert_eq!(class_from_str("ANY"), None);
    assert_eq!(class_from_str("IX"), None);
    assert_eq!(class_from_str("CLASS70000"), None);
}

#[test]
fn ttls() {
    assert_eq!(parse_ttl("0"), Some(0));
    assert_eq!(parse_ttl("3600"), Some(3600));
    assert_eq!(parse_ttl("1h"), Some(3600));
    assert_eq!(parse_ttl("1h30m"), Some(5400));
    assert_eq!(parse_ttl("1W"), Some(604_800));
    assert_eq!(parse_ttl("1d2h3m4s"), Some(93_784));
    assert_eq!(parse_ttl("2147483647"), Some(2_147_483_647));
    assert_eq!(parse_ttl("2147483648"), None);
    assert_eq!(parse_ttl("99999999999"), None);
    assert_eq!(parse_ttl("10000w"), None);
    assert_eq!(parse_ttl("1h30"), None);
    assert_eq!(parse_ttl("h"), None);
    assert_eq!(parse_ttl(""), None);
    assert_eq!(parse_ttl("-1"), None);
    assert_eq!(parse_ttl("+1"), None);
    assert_eq!(parse_ttl("1x"), None);
    assert_eq!(parse_duration("4294967295"), Some(u32::MAX));
}

#[test]
fn address_types() {
    assert_eq!(rd(rtype::A, "192.0.2.1"), [192, 0, 2, 1]);
    assert_eq!(
        rd(rtype::AAAA, "2001:db8::1"),
        [0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    );
    assert_eq!(rd(rtype::AAAA, "::ffff:192.0.2.1")[12..], [192, 0, 2, 1]);
    assert_eq!(rd_err(rtype::A, "1.2.3"), "bad IPv4 address '1.2.3'");
    assert_eq!(
        rd_err(rtype::A, "256.1.1.1"),
        "bad IPv4 address '256.1.1.1'"
    );
    assert_eq!(rd_err(rtype::A, "::1"), "bad IPv4 address '::1'");
    assert_eq!(rd_err(rtype::AAAA, "1.2.3.4"), "bad IPv6 address '1.2.3.4'");
    assert_eq!(
        rd_err(rtype::A, "1.2.3.4 5.6.7.8"),
        "A record: unexpected '5.6.7.8' after the RDATA"
    );
    assert_eq!(
        rd_err(rtype::A, "\"1.2.3.4\""),
        "A record: IPv4 address must not be quoted (got \"1.2.3.4\")"
    );
}

#[test]
fn name_types_relative_and_absolute() {
    assert_eq!(rd(rtype::CNAME, "www"), cat(&[b"\x03www", EX]));
    assert_eq!(
        rd(rtype::CNAME, "www.example.net."),
        b"\x03www\x07example\x03net\x00"
    );
    assert_eq!(rd(rtype::NS, "@"), EX);
    assert_eq!(rd(rtype::PTR, "."), b"\x00");
    assert_eq!(rd(rtype::DNAME, "Other"), cat(&[b"\x05Other", EX]));
    // No origin: relative is absolute (Unbound local-data).
    assert_eq!(
        parse_rdata(rtype::CNAME, "a.b", None).unwrap(),
        b"\x01a\x01b\x00"
    );
    assert!(rd_err(rtype::CNAME, "a..b").starts_with("CNAME record: bad target name 'a..b'"));
    assert!(rd_err(rtype::NS, "\\999").contains("bad escape"));
    assert_eq!(rd_err(rtype::DNAME, ""), "missing RDATA for DNAME record");
    // Escapes inside names.
    assert_eq!(rd(rtype::PTR, "a\\.b\\065."), b"\x04a.bA\x00");
}

#[test]
fn mx_srv_soa_naptr() {
    assert_eq!(rd(rtype::MX, "10 mail"), cat(&[b"\x00\x0a\x04mail", EX]));
    assert_eq!(
        rd_err(rtype::MX, "mail"),
        "MX record: bad preference 'mail'"
    );
    assert_eq!(rd_err(rtype::MX, "10"), "MX record: missing host name");
    assert_eq!(
        rd_err(rtype::MX, "65536 a."),
        "MX record: bad preference '65536'"
    );
    assert_eq!(
        rd(rtype::SRV, "0 5 5060 sip.example.com."),
        cat(&[b"\x00\x00\x00\x05\x13\xc4\x03sip", EX])
    );
    let soa = rd(
        rtype::SOA,
        "ns1 hostmaster ( 2024010101 1h 15m 1w 3600 ) ; comment",
    );
    assert_eq!(
        soa,
        cat(&[
            b"\x03ns1",
            EX,
            b"\x0ahostmaster",
            EX,
            &2_024_010_101u32.to_be_bytes(),
            &3600u32.to_be_bytes(),
            &900u32.to_be_bytes(),
            &604_800u32.to_be_bytes(),
            &3600u32.to_be_bytes(),
        ])
    );
    assert_eq!(
        rd_err(rtype::SOA, "ns1 hm 1 2 3 4"),
        "SOA record: missing minimum"
    );
    assert_eq!(
        rd_err(rtype::SOA, "ns1 hm 1h 2 3 4 5"),
        "SOA record: bad serial '1h'"
    );
    assert_eq!(
        rd(
            rtype::NAPTR,
            r#"100 10 "S" "SIP+D2U" "!^.*$!sip:info@example.com!" _sip._udp"#
        ),
        cat(&[
            b"\x00\x64\x00\x0a\x01S\x07SIP+D2U\x1b!^.*$!sip:info@example.com!",
            b"\x04_sip\x04_udp",
            EX
        ])
    );
    assert_eq!(
        rd(rtype::NAPTR, r#"1 1 "" "" "" ."#),
        b"\x00\x01\x00\x01\x00\x00\x00\x00"
    );
}

#[test]
fn txt_strings_and_escapes() {
    assert_eq!(rd(rtype::TXT, r#""a b" "c""#), b"\x03a b\x01c");
    assert_eq!(rd(rtype::TXT, r#""\065\"x\\""#), b"\x04A\"x\\");
    assert_eq!(rd(rtype::TXT, "unquoted; comment"), b"\x08unquoted");
    assert_eq!(
        rd(rtype::TXT, r#""semi;colon (paren)""#),
        b"\x12semi;colon (paren)"
    );
    assert_eq!(rd(rtype::TXT, r#""""#), b"\x00");
    assert_eq!(rd(rtype::TXT, r#""\255\000""#), b"\x02\xff\x00");
    assert_eq!(rd(rtype::TXT, "\"é\""), "\x02é".as_bytes());
    assert_eq!(rd(rtype::TXT, "( \"a\"\n \"b\" )"), b"\x01a\x01b");
    let long = "x".repeat(255);
    assert_eq!(rd(rtype::TXT, &format!("\"{long}\"")).len(), 256);
    assert_eq!(
        rd_err(rtype::TXT, &format!("\"{long}x\"")),
        "TXT record: text: character-string of 256 octets is longer than 255"
    );
    assert!(rd_err(rtype::TXT, r#""\256""#).contains("bad escape"));
    assert!(rd_err(rtype::TXT, r#""\12""#).contains("bad escape"));
    assert!(rd_err(rtype::TXT, r#""abc"#).contains("unterminated quoted string"));
    assert!(rd_err(rtype::TXT, r#"abc\"#).contains("bad escape"));
    assert_eq!(
        rd(rtype::HINFO, r#""INTEL-386" Unix"#),
        b"\x09INTEL-386\x04Unix"
    );
    assert_eq!(rd_err(rtype::HINFO, "x"), "HINFO record: missing OS");
}

#[test]
fn caa_sshfp_tlsa_ds() {
    assert_eq!(
        rd(rtype::CAA, r#"0 issue "ca.example.net; account=1""#),
        b"\x00\x05issueca.example.net; account=1"
    );
    assert_eq!(rd(rtype::CAA, "128 tbs Unknown"), b"\x80\x03tbsUnknown");
    assert_eq!(rd(rtype::CAA, r#"0 issue ";""#), b"\x00\x05issue;");
    assert_eq!(
        rd_err(rtype::CAA, r#"0 is-sue "x""#),
        "CAA record: bad tag 'is-sue' (letters and digits only)"
    );
    assert_eq!(rd_err(rtype::CAA, "0 issue"), "CAA record: missing value");
    assert_eq!(
        rd(rtype::SSHFP, "2 1 123456789abcdef67890123456789abcdef67890")[..4],
        [2, 1, 0x12, 0x34]
    );
    assert_eq!(
        rd(rtype::SSHFP, "1 1 dead beef"),
        [1, 1, 0xde, 0xad, 0xbe, 0xef]
    );
    assert_eq!(
        rd_err(rtype::SSHFP, "1 1 abc"),
        "SSHFP record: bad hex in fingerprint"
    );
    assert_eq!(
        rd_err(rtype::SSHFP, "1 1"),
        "SSHFP record: missing fingerprint"
    );
    assert_eq!(
        rd(rtype::TLSA, "3 1 1 ( 0d6f ab )"),
        [3, 1, 1, 0x0d, 0x6f, 0xab]
    );
    assert_eq!(
        rd_err(rtype::TLSA, "3 1 x 00"),
        "TLSA record: bad matching type 'x'"
    );
    assert_eq!(
        rd(rtype::DS, "60485 RSASHA1 1 2BB183AF"),
        [0xec, 0x45, 5, 1, 0x2b, 0xb1, 0x83, 0xaf]
    );
    assert_eq!(rd(rtype::DS, "1 13 2 00"), [0, 1, 13, 2, 0]);
}

#[test]
fn svcb_and_https() {
    // RFC 9460 Appendix D.1 / D.2 test vectors.
    assert_eq!(
        rd(rtype::SVCB, "0 foo.example.com."),
        b"\x00\x00\x03foo\x07example\x03com\x00"
    );
    assert_eq!(rd(rtype::SVCB, "1 ."), b"\x00\x01\x00");
    assert_eq!(
        rd(rtype::SVCB, "16 foo.example.com. port=53"),
        b"\x00\x10\x03foo\x07example\x03com\x00\x00\x03\x00\x02\x00\x35"
    );
    assert_eq!(
        rd(rtype::SVCB, "1 foo.example.com. key667=hello"),
        b"\x00\x01\x03foo\x07example\x03com\x00\x02\x9b\x00\x05hello"
    );
    assert_eq!(
        rd(rtype::SVCB, r#"1 foo.example.com. key667="hello\210qoo""#),
        b"\x00\x01\x03foo\x07example\x03com\x00\x02\x9b\x00\x09hello\xd2qoo"
    );
    assert_eq!(
        rd(
            rtype::SVCB,
            r#"1 foo.example.com. ipv6hint="2001:db8::1,2001:db8::53:1""#
        ),
        cat(&[
            b"\x00\x01\x03foo\x07example\x03com\x00\x00\x06\x00\x20",
            b"\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01",
            b"\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x53\x00\x01",
        ])
    );
    // Out-of-order keys come out sorted; mandatory is sorted too.
    assert_eq!(
        rd(
            rtype::SVCB,
            r#"16 foo.example.org. alpn=h2,h3-19 mandatory=ipv4hint,alpn ipv4hint=192.0.2.1"#
        ),
        cat(&[
            b"\x00\x10\x03foo\x07example\x03org\x00",
            b"\x00\x00\x00\x04\x00\x01\x00\x04",
            b"\x00\x01\x00\x09\x02h2\x05h3-19",
            b"\x00\x04\x00\x04\xc0\x00\x02\x01",
        ])
    );
    assert_eq!(
        rd(
            rtype::SVCB,
            r#"16 foo.example.org. alpn="f\\\\oo\\,bar,h2""#
        ),
        b"\x00\x10\x03foo\x07example\x03org\x00\x00\x01\x00\x0c\x08f\\oo,bar\x02h2"
    );
    // Relative target takes the origin.
    assert_eq!(
        rd(
            rtype::HTTPS,
            r#"1 svc alpn="h2,a b" no-default-alpn port=443"#
        ),
        cat(&[
            b"\x00\x01\x03svc",
            EX,
            b"\x00\x01\x00\x07\x02h2\x03a b\x00\x02\x00\x00\x00\x03\x00\x02\x01\xbb"
        ])
    );
    assert_eq!(
        rd(rtype::HTTPS, "1 . dohpath=/dns-query{?dns} ech=AQI="),
        b"\x00\x01\x00\x00\x05\x00\x02\x01\x02\x00\x07\x00\x10/dns-query{?dns}"
    );
    // RFC 9460 Appendix D.3 failure cases.
    assert!(
        rd_err(rtype::SVCB, "1 foo.example.com. key123=abc key123=def").contains("appears twice")
    );
    assert!(rd_err(rtype::SVCB, "1 foo.example.com. mandatory").contains("bad mandatory value"));
    assert!(rd_err(rtype::SVCB, "1 foo.example.com. alpn").contains("bad alpn value"));
    assert!(rd_err(rtype::SVCB, "1 foo.example.com. port").contains("bad port value"));
    assert!(rd_err(rtype::SVCB, "1 foo.example.com. ipv4hint").contains("bad ipv4hint value"));
    assert!(rd_err(rtype::SVCB, "1 foo.example.com. ipv6hint").contains("bad ipv6hint value"));
    assert!(
        rd_err(rtype::SVCB, "1 foo.example.com. no-default-alpn=abc").contains("takes no value")
    );
    assert!(
        rd_err(rtype::SVCB, "1 foo.example.com. mandatory=key123")
            .contains("mandatory but missing")
    );
    assert!(rd_err(rtype::SVCB, "1 foo.example.com. mandatory=mandatory").contains("itself"));
    assert!(rd_err(rtype::SVCB, "1 foo.example.com. ipv6hint=192.0.2.1").contains("bad address"));
    assert!(rd_err(rtype::SVCB, "1 foo.example.com. key65535=x").contains("unknown SvcParamKey"));
    assert!(
        rd_err(rtype::SVCB, "1 foo.example.com. bogus=x").contains("unknown SvcParamKey 'bogus'")
    );
    assert_eq!(
        rd_err(rtype::SVCB, "x ."),
        "SVCB record: bad SvcPriority 'x'"
    );
}

#[test]
fn dnssec_types() {
    let dnskey = rd(rtype::DNSKEY, "257 3 ECDSAP256SHA256 ( AQID\n BA== )");
    assert_eq!(dnskey, [1, 1, 3, 13, 1, 2, 3, 4]);
    assert_eq!(
        rd_err(rtype::DNSKEY, "257 3 13 AQI"),
        "DNSKEY record: bad base64 in public key"
    );
    assert_eq!(
        rd_err(rtype::DNSKEY, "257 3 13 A=QI"),
        "DNSKEY record: bad base64 in public key"
    );
    // RFC 4034 §4.3 example.
    assert_eq!(
        rd(rtype::NSEC, "host.example.com. A MX RRSIG NSEC TYPE1234"),
        cat(&[
            b"\x04host",
            EX,
            b"\x00\x06\x40\x01\x00\x00\x00\x03",
            b"\x04\x1b",
            &[0; 26],
            b"\x20",
        ])
    );
    assert!(rd_err(rtype::NSEC, "a. A BOGUS").contains("unknown type 'BOGUS'"));
    let sig = rd(
        rtype::RRSIG,
        "A 5 3 86400 20030322173103 20030220173103 2642 example.com. AQID",
    );
    assert_eq!(
        &sig[..18],
        b"\x00\x01\x05\x03\x00\x01\x51\x80\x3e\x7c\x9d\xd7\x3e\x55\x10\xd7\x0a\x52"
    );
    assert_eq!(&sig[18..], cat(&[EX, &[1, 2, 3]]));
    assert!(
        rd_err(rtype::RRSIG, "A 5 3 86400 20031322173103 1 2 a. AQID")
            .contains("signature expiration")
    );
    assert_eq!(
        rd(NSEC3PARAM, "1 0 12 aabbccdd"),
        [1, 0, 0, 12, 4, 0xaa, 0xbb, 0xcc, 0xdd]
    );
    assert_eq!(rd(NSEC3PARAM, "1 0 0 -"), [1, 0, 0, 0, 0]);
    let n3 = rd(
        NSEC3,
        "1 1 12 aabbccdd 2t7b4g4vsa5smi47k61mv5bv1a22bojr A RRSIG",
    );
    assert_eq!(&n3[..10], [1, 1, 0, 12, 4, 0xaa, 0xbb, 0xcc, 0xdd, 20]);
    assert_eq!(&n3[10..13], [0x17, 0x4e, 0xb2]);
    assert_eq!(&n3[30..], [0, 6, 0x40, 0, 0, 0, 0, 2]);
    assert!(rd_err(NSEC3, "1 1 12 - 2t7b4g4vsa5smi47k61mv5bv1a22bojW A").contains("base32hex"));
    assert_eq!(
        rd(CSYNC, "66 3 A NS AAAA"),
        [0, 0, 0, 66, 0, 3, 0, 4, 0x60, 0, 0, 8]
    );
    assert_eq!(rd(CERT, "PGP 0 0 AQID"), [0, 3, 0, 0, 0, 1, 2, 3]);
    assert_eq!(
        rd(ZONEMD, "2018031500 1 1 ab"),
        [0x78, 0x48, 0xb7, 0x8c, 1, 1, 0xab]
    );
}

#[test]
fn misc_types() {
    assert_eq!(rd(EUI48, "00-00-5e-00-53-2a"), [0, 0, 0x5e, 0, 0x53, 0x2a]);
    assert!(rd_err(EUI48, "00-00-5e-00-53").contains("bad address"));
    assert_eq!(rd(EUI64, "00-00-5e-ef-10-00-00-2a").len(), 8);
    assert_eq!(
        rd(URI, r#"10 1 "ftp://ftp1.example.com/public""#)[..5],
        *b"\x00\x0a\x00\x01f"
    );
    assert_eq!(rd(RP, "mbox txt"), cat(&[b"\x04mbox", EX, b"\x03txt", EX]));
    assert_eq!(rd(OPENPGPKEY, "AQID"), [1, 2, 3]);
    assert!(rd_err(29, "52 22 23.000 N").contains("write the RDATA as \\# <length> <hex>"));
}

#[test]
fn generic_rfc3597() {
    assert_eq!(rd(65534, r"\# 4 0a000001"), [10, 0, 0, 1]);
    assert_eq!(rd(65534, r"\# 4 0a 00 0001"), [10, 0, 0, 1]);
    assert_eq!(rd(65534, r"\# 0"), b"");
    assert_eq!(rd(rtype::A, r"\# 4 C0000201"), [192, 0, 2, 1]);
    assert_eq!(rd(rtype::CNAME, r"\# 3 016100"), b"\x01a\x00");
    assert_eq!(rd(rtype::MX, r"\# 5 000a016100"), b"\x00\x0a\x01a\x00");
    assert_eq!(rd(rtype::TXT, r"\# 3 026869"), b"\x02hi");
    assert_eq!(
        rd_err(65534, r"\# 3 0a000001"),
        "\\# RDATA: length 3 does not match the 4 octets of data"
    );
    assert_eq!(rd_err(65534, r"\# 4 0a00000"), "\\# RDATA: bad hex data");
    assert_eq!(
        rd_err(65534, r"\# x 00"),
        "\\# RDATA: bad length 'x' (0 to 65535)"
    );
    assert_eq!(
        rd_err(65534, r"\# 65536"),
        "\\# RDATA: bad length '65536' (0 to 65535)"
    );
    assert_eq!(rd_err(65534, r"\#"), "\\# RDATA: missing length");
    assert_eq!(
        rd_err(rtype::A, r"\# 3 000000"),
        "\\# RDATA is not valid A RDATA: wrong length"
    );
    assert_eq!(
        rd_err(rtype::CNAME, r"\# 2 c00c"),
        "\\# RDATA is not valid CNAME RDATA: malformed domain name"
    );
    assert_eq!(
        rd_err(rtype::SOA, r"\# 1 00"),
        "\\# RDATA is not valid SOA RDATA: malformed domain name"
    );
    assert!(rd_err(rtype::OPT, r"\# 0").contains("query or meta type"));
}

#[test]
fn records_local_data() {
    let rr = parse_rr("www.example.com. 300 IN A 192.0.2.1", None, 3600).unwrap();
    assert_eq!(rr.owner.as_bytes(), cat(&[b"\x03www", EX]));
    assert_eq!((rr.rtype, rr.class, rr.ttl), (rtype::A, class::IN, 300));
    assert_eq!(rr.rdata, [192, 0, 2, 1]);
    for text in [
        "www.example.com. IN 300 A 192.0.2.1",
        "www.example.com 300 A 192.0.2.1",
        "www.example.com. in 5m a 192.0.2.1",
        "  www.example.com. 300 IN A 192.0.2.1 ; comment",
    ] {
        let r = parse_rr(text, None, 3600).unwrap();
        assert_eq!(
            (r.owner.clone(), r.ttl, r.rdata.clone()),
            (rr.owner.clone(), 300, rr.rdata.clone()),
            "{text}"
        );
    }
    let r = parse_rr("www.example.com A 192.0.2.1", None, 3600).unwrap();
    assert_eq!((r.ttl, r.class), (3600, class::IN));
    let r = parse_rr("version.bind. CH TXT \"skua\"", None, 3600).unwrap();
    assert_eq!((r.class, r.rdata.as_slice()), (class::CH, &b"\x04skua"[..]));
    // Multi-line, as in unbound.conf(5).
    let r = parse_rr(
        "invalid. 10800 IN\n    SOA localhost. nobody.invalid. 1 3600 1200 604800 10800",
        None,
        3600,
    )
    .unwrap();
    assert_eq!(r.rtype, rtype::SOA);
    // Relative names with an origin.
    let r = parse_rr("mail MX 10 mx1", Some(&origin()), 3600).unwrap();
    assert_eq!(r.owner.as_bytes(), cat(&[b"\x04mail", EX]));
    assert_eq!(r.rdata, cat(&[b"\x00\x0a\x03mx1", EX]));
    let r = parse_rr("@ TYPE65534 \\# 2 abcd", Some(&origin()), 60).unwrap();
    assert_eq!(
        (r.owner, r.rtype, r.rdata),
        (origin(), 65534, vec![0xab, 0xcd])
    );
}

#[test]
fn record_errors() {
    let e = |s: &str| parse_rr(s, None, 3600).unwrap_err().0;
    assert_eq!(e("www.example.com. AX 1.2.3.4"), "unknown RR type 'AX'");
    assert_eq!(
        e("www.example.com. 300 IN A 1.2.3"),
        "bad IPv4 address '1.2.3'"
    );
    assert_eq!(e("www.example.com. A"), "missing RDATA for A record");
    assert_eq!(e("www.example.com. 300 IN"), "missing RR type");
    assert_eq!(e("www.example.com."), "missing RR type");
    assert_eq!(e(""), "empty record");
    assert_eq!(e("  ; only a comment"), "empty record");
    assert_eq!(
        e("a. 300 300 A 1.2.3.4"),
        "unexpected '300': the TTL is already given"
    );
    assert_eq!(
        e("a. IN CH A 1.2.3.4"),
        "unexpected 'CH': the class is already given"
    );
    assert_eq!(e("a. 1x A 1.2.3.4"), "bad TTL '1x'");
    assert_eq!(
        e("a. ANY 1.2.3.4"),
        "ANY is a query or meta type and cannot be used in a record"
    );
    assert_eq!(
        e("a. A \"1.2.3.4\""),
        "A record: IPv4 address must not be quoted (got \"1.2.3.4\")"
    );
    assert_eq!(
        e("a. \"A\" 1.2.3.4"),
        "unexpected quoted string \"A\" where a TTL, class or type belongs"
    );
    assert_eq!(
        e("\"a\" A 1.2.3.4"),
        "owner name must not be quoted (got \"a\")"
    );
    assert_eq!(
        e("a..b A 1.2.3.4"),
        "bad owner name 'a..b': empty label in domain name"
    );
    assert_eq!(e("a. A 1.2.3.4 )"), "')' without a matching '('");
    assert_eq!(e("a. A ( 1.2.3.4"), "'(' opened on line 1 is never closed");
    assert_eq!(
        e("a. A ( ( 1.2.3.4 ) )"),
        "nested '(' (the one on line 1 is still open)"
    );
    assert_eq!(
        e("a. TXT \"x"),
        "unterminated quoted string (quotes must close on the same line)"
    );
    assert_eq!(e("garbage"), "missing RR type");
    assert_eq!(e("a. b c d"), "unknown RR type 'b'");
    assert_eq!(
        e(&format!("{}. A 1.2.3.4", "x".repeat(100))),
        format!(
            "bad owner name '{}...': label longer than 63 octets",
            "x".repeat(60)
        )
    );
}

#[test]
fn local_data_ptr() {
    let r = parse_local_data_ptr("192.0.2.4 www.example.com", 3600).unwrap();
    assert_eq!(
        r.owner.as_bytes(),
        b"\x014\x012\x010\x03192\x07in-addr\x04arpa\x00"
    );
    assert_eq!((r.rtype, r.class, r.ttl), (rtype::PTR, class::IN, 3600));
    assert_eq!(r.rdata, cat(&[b"\x03www", EX]));
    let r = parse_local_data_ptr("2001:DB8::4 7200 www.example.com.", 3600).unwrap();
    assert_eq!(r.ttl, 7200);
    let mut want = Vec::new();
    for nib in "4.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2".split('.') {
        want.push(1);
        want.extend_from_slice(nib.as_bytes());
    }
    want.extend_from_slice(b"\x03ip6\x04arpa\x00");
    assert_eq!(r.owner.as_bytes(), want);
    let r = parse_local_data_ptr("10.0.0.255 h.", 1).unwrap();
    assert_eq!(r.owner.to_string(), "255.0.0.10.in-addr.arpa.");
    let e = |s: &str| parse_local_data_ptr(s, 3600).unwrap_err().0;
    assert_eq!(e("192.0.2 www.example.com"), "bad IP address '192.0.2'");
    assert_eq!(e("192.0.2.1 1x www.example.com"), "bad TTL '1x'");
    assert_eq!(
        e("192.0.2.1"),
        "local-data-ptr wants \"IP name\" or \"IP TTL name\", got '192.0.2.1'"
    );
    assert_eq!(
        e("192.0.2.1 a..b"),
        "bad PTR target 'a..b': empty label in domain name"
    );
    assert!(e("192.0.2.1 \"x\"").starts_with("unexpected quoted string"));
}

#[test]
fn render_round_trips() {
    let cases: &[(u16, &str)] = &[
        (rtype::A, "192.0.2.1"),
        (rtype::AAAA, "2001:db8::1"),
        (rtype::CNAME, "www.example.com."),
        (rtype::MX, "10 mail.example.com."),
        (
            rtype::SOA,
            "ns.example.com. hm.example.com. 1 7200 900 1209600 3600",
        ),
        (rtype::SRV, "0 5 5060 sip.example.com."),
        (rtype::TXT, "\"a b\" \"c\\\"\\\\\\255\""),
        (rtype::HINFO, "\"x86\" \"Linux\""),
        (
            rtype::NAPTR,
            "100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.example.com.",
        ),
        (rtype::CAA, "0 issue \"ca.example.net\""),
        (rtype::SSHFP, "1 1 deadbeef"),
        (rtype::TLSA, "3 1 1 0d6fab"),
        (rtype::DS, "60485 5 1 2bb183af"),
        (65534, "\\# 3 abcdef"),
        (65534, "\\# 0"),
    ];
    for &(t, text) in cases {
        let wire = parse_rdata(t, text, None).unwrap();
        assert_eq!(rdata_to_string(t, &wire), text);
    }
    // Malformed wire falls back to the generic form.
    assert_eq!(rdata_to_string(rtype::A, &[1, 2, 3]), "\\# 3 010203");
    assert_eq!(rdata_to_string(rtype::CNAME, &[1, b'a']), "\\# 2 0161");
    assert_eq!(rdata_to_string(rtype::TXT, &[]), "\\# 0");
}

#[test]
fn push_name_matches_wirename_parse() {
    let o = origin();
    for s in [
        "a", "a.", "@", ".", "", "a..b", "\\.", "a\\", "\\256", "\\25", "\\0651", "a.b.c", "é.x",
        "a\\ b", ".a", "..",
    ] {
        for org in [None, Some(&o)] {
            let mut v = vec![9];
            let mine = push_name(s, org, &mut v).map(|()| v[1..].to_vec());
            let theirs = WireName::parse(s, org).map(|n| n.as_bytes().to_vec());
            assert_eq!(mine, theirs, "{s:?}");
            if mine.is_err() {
                assert_eq!(v, [9]);
            }
        }
    }
    let long = "a".repeat(64);
    let mut v = Vec::new();
    assert_eq!(push_name(&long, None, &mut v), Err(NameError::LabelTooLong));
    let many = "abcdefghi.".repeat(26);
    assert_eq!(push_name(&many, None, &mut v), Err(NameError::NameTooLong));
    let max = format!(
        "{}{}",
        "a".repeat(63),
        ".aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".repeat(3)
    );
    assert_eq!(
        push_name(&max, None, &mut v).map(|()| v.len()),
        WireName::parse(&max, None).map(|n| n.len())
    );
}

/// Tiny deterministic generator (no std needed).
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn garbage_never_panics() {
    const ALPHABET: &[u8] = b" \t\n\r;()\"\\@$.#0123456789abcdefxyzAINMXTS=,-:/";
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let o = origin();
    let types = [
        rtype::A,
        rtype::AAAA,
        rtype::NS,
        rtype::MX,
        rtype::SOA,
        rtype::TXT,
        rtype::SRV,
        rtype::NAPTR,
        rtype::CAA,
        rtype::SSHFP,
        rtype::TLSA,
        rtype::SVCB,
        rtype::HTTPS,
        rtype::DS,
        rtype::DNSKEY,
        rtype::RRSIG,
        rtype::NSEC,
        NSEC3,
        NSEC3PARAM,
        CSYNC,
        CERT,
        EUI48,
        URI,
        65534,
    ];
    for round in 0..20_000 {
        let len = (xorshift(&mut seed) % 48) as usize;
        let mut s = String::new();
        for _ in 0..len {
            let r = xorshift(&mut seed);
            let c = if r.is_multiple_of(17) {
                'é'
            } else {
                char::from(ALPHABET[(r as usize >> 8) % ALPHABET.len()])
            };
            s.push(c);
        }
        let t = types[round % types.len()];
        let _ = parse_rdata(t, &s, Some(&o));
        let _ = parse_rdata(t, &format!("\\# {s}"), None);
        let _ = parse_rr(&s, None, 3600);
        let _ = parse_rr(&format!("a {} {s}", rtype_to_string(t)), Some(&o), 3600);
        let _ = parse_local_data_ptr(&s, 3600);
        let _ = parse_ttl(&s);
        let bytes: Vec<u8> = s.bytes().collect();
        let _ = rdata_to_string(t, &bytes);
    }
}

proptest::proptest! {
    #[test]
    fn prop_push_name_equals_wirename_parse(s in "[a-zA-Z0-9.\\\\@-]{0,300}") {
        let o = origin();
        for org in [None, Some(&o)] {
            let mut v = Vec::new();
            let mine = push_name(&s, org, &mut v).map(|()| v);
            let theirs = WireName::parse(&s, org).map(|n| n.as_bytes().to_vec());
            proptest::prop_assert_eq!(mine, theirs);
        }
    }

    #[test]
    fn prop_no_panic_on_any_text(s in "\\PC{0,120}", t in 0u16..300) {
        let o = origin();
        let _ = parse_rr(&s, None, 3600);
        let _ = parse_rr(&s, Some(&o), 3600);
        let _ = parse_rdata(t, &s, Some(&o));
        let _ = parse_local_data_ptr(&s, 3600);
        let _ = rdata_to_string(t, s.as_bytes());
    }

    #[test]
    fn prop_rendered_rdata_parses_back(
        bytes in proptest::collection::vec(
            proptest::prop_oneof![0u8..=3, b'a'..=b'c', proptest::num::u8::ANY], 0..40),
        t in proptest::prop_oneof![
            0u16..300,
            proptest::sample::select(alloc::vec![
                1, 2, 5, 6, 12, 13, 14, 15, 16, 17, 18, 28, 33, 35, 36, 39, 43, 44, 52, 53,
                59, 99, 257, 65534,
            ]),
        ],
    ) {
        // Whatever the renderer prints, the parser reads back to the same octets.
        let text = rdata_to_string(t, &bytes);
        if is_data_type(t) && check_wire(t, &bytes).is_ok() {
            proptest::prop_assert_eq!(parse_rdata(t, &text, None).map_err(|e| (e, text.clone())), Ok(bytes));
        }
    }
}
