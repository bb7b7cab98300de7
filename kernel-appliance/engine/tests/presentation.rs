//! Presentation format round trip: every record `parse_rr` accepts is rendered by
//! `rr_to_string` as text that `parse_rr` reads back as the same record, for names and
//! character-strings of any bytes and RDATA of any type. skuad's API state file relies on
//! it (a record written there must come back as exactly that record).

use proptest::prelude::*;
use skua_engine::name::WireName;
use skua_engine::rr::Rr;
use skua_engine::text::{parse_rr, rdata_to_string, rr_to_string};

/// A wire name of 1 to 4 labels of arbitrary bytes (1 to 20 each).
fn name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 1..20), 1..4).prop_map(|labels| {
        let mut w = Vec::new();
        for l in labels {
            w.push(l.len() as u8);
            w.extend(l);
        }
        w.push(0);
        w
    })
}

fn char_string() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..40).prop_map(|s| {
        let mut w = vec![s.len() as u8];
        w.extend(s);
        w
    })
}

/// (type, RDATA) pairs: structured RDATA for the types with names or character-strings,
/// arbitrary bytes for any type (most are not valid for their type and come out as `\#`).
fn rdata() -> impl Strategy<Value = (u16, Vec<u8>)> {
    let be = |v: u16| v.to_be_bytes().to_vec();
    prop_oneof![
        (
            prop::sample::select(vec![2u16, 5, 12, 39, 3, 4, 7, 8, 9]),
            name()
        ),
        (any::<u16>(), name()).prop_map(move |(p, n)| (15, [be(p), n].concat())),
        (name(), name()).prop_map(|(a, b)| (17, [a, b].concat())),
        (
            prop::sample::select(vec![16u16, 99, 258, 261, 262]),
            prop::collection::vec(char_string(), 1..4)
        )
            .prop_map(|(t, v)| (t, v.concat())),
        (char_string(), char_string()).prop_map(|(a, b)| (13, [a, b].concat())),
        (any::<[u16; 3]>(), name())
            .prop_map(move |(p, n)| (33, [be(p[0]), be(p[1]), be(p[2]), n].concat())),
        (
            any::<[u16; 2]>(),
            char_string(),
            char_string(),
            char_string(),
            name()
        )
            .prop_map(move |(p, a, b, c, n)| (35, [be(p[0]), be(p[1]), a, b, c, n].concat())),
        (
            any::<u8>(),
            "[a-z0-9]{1,15}",
            prop::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(f, tag, v)| {
                let mut w = vec![f, tag.len() as u8];
                w.extend(tag.bytes());
                w.extend(v);
                (257, w)
            }),
        (name(), name(), any::<[u32; 5]>()).prop_map(|(a, b, n)| {
            let mut w = [a, b].concat();
            for x in n {
                w.extend(x.to_be_bytes());
            }
            (6, w)
        }),
        (any::<u16>(), prop::collection::vec(any::<u8>(), 0..48)),
        (
            prop::sample::select(vec![1u16, 28, 44, 52, 53, 43, 59, 32769]),
            prop::collection::vec(any::<u8>(), 0..40)
        ),
    ]
}

/// A record that `parse_rr` accepts: built as RFC 3597 text (`\# len hex`), which the
/// parser checks against the type's wire format like any other text.
fn accepted(owner: &[u8], class: u16, ttl: u32, rtype: u16, rdata: &[u8]) -> Option<Rr> {
    let owner = WireName::from_wire(owner).ok()?;
    let mut text = format!("{owner} {ttl} CLASS{class} TYPE{rtype} \\# {}", rdata.len());
    if !rdata.is_empty() {
        text.push(' ');
        for b in rdata {
            text.push_str(&format!("{b:02x}"));
        }
    }
    parse_rr(&text, None, 0).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn every_accepted_record_round_trips(
        owner in name(),
        class in prop::sample::select(vec![1u16, 3, 2, 4, 254, 65280]),
        ttl in any::<u32>(),
        (rtype, rdata) in rdata(),
    ) {
        let Some(rr) = accepted(&owner, class, ttl, rtype, &rdata) else {
            return Ok(());
        };
        let text = rr_to_string(&rr);
        prop_assert!(text.bytes().all(|b| (0x20..0x7f).contains(&b)), "{text:?}");
        let back = parse_rr(&text, None, 0)
            .map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(&back, &rr, "{}", text);
        // And the canonical text is a fixed point.
        prop_assert_eq!(rr_to_string(&back), text);
    }
}

#[test]
fn quotes_and_escapes_in_names_and_strings() {
    for text in [
        "t.ex.test. 300 IN TXT \"it's\"",
        "a\\'b.ex.test. 300 IN TXT \"\\\"\" \"\\\\\" \"\\000\\255\"",
        "x\\032y.ex.test. 300 IN HINFO \"a b\" \"c;d\"",
        "x.ex.test. 300 IN CAA 0 issue \"ca'x\"",
    ] {
        let rr = parse_rr(text, None, 0).unwrap();
        let out = rr_to_string(&rr);
        assert_eq!(parse_rr(&out, None, 0).unwrap(), rr, "{text} -> {out}");
    }
    assert_eq!(rdata_to_string(16, b"\x04it's"), "\"it's\"");
}
