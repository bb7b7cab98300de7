//! skua-xfr against messages captured from real peers (tests/capture-peers.sh): kdig's
//! signed AXFR and IXFR requests, and the signed multi-message AXFR answers of Knot 3.2
//! and NSD 4.6 to a request dnspython signed.

use skua_engine::name::WireName;
use skua_xfr::server::parse_request;
use skua_xfr::tsig::{self, Algorithm, Checked, Key, StreamVerifier, VerifyError};
use skua_xfr::wire;
use skua_xfr::zone::Version;

fn fixture(name: &str) -> Vec<u8> {
    let text = include_str!("fixtures/peers.txt");
    let hex = text
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no fixture {name}"));
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn responses(tag: &str) -> Vec<Vec<u8>> {
    (0..)
        .map(|i| format!("{tag}-response-{i} "))
        .take_while(|p| include_str!("fixtures/peers.txt").contains(p.as_str()))
        .map(|p| fixture(p.trim_end()))
        .collect()
}

fn key(secret: &[u8]) -> Key {
    Key::new(
        &WireName::parse("xfr.example.", None).unwrap(),
        Algorithm::HmacSha256,
        secret.to_vec(),
    )
}

/// The key of the capture: bytes 0..32 (base64 in the fixture's `secret` line).
fn the_key() -> Key {
    key(&(0u8..32).collect::<Vec<u8>>())
}

fn signed_at(msg: &[u8]) -> u64 {
    tsig::find(msg).unwrap().unwrap().time_signed
}

#[test]
fn kdig_requests_verify_and_parse() {
    let keys = [the_key()];
    for (name, serial) in [("kdig-axfr", None), ("kdig-ixfr", Some(5))] {
        let q = fixture(name);
        let t = signed_at(&q);
        assert_eq!(
            tsig::check_request(&q, &keys, t + 10).unwrap(),
            Checked::Signed(tsig::Signed {
                key: 0,
                mac: tsig::find(&q).unwrap().unwrap().mac
            }),
            "{name}"
        );
        let r = parse_request(&q).unwrap();
        assert_eq!(r.client_serial, serial, "{name}");
        assert_eq!(r.question.name.to_string(), "example.");
        // The wrong secret: BADSIG; too late: BADTIME.
        let Checked::Rejected(bad) =
            tsig::check_request(&q, &[key(b"wrong secret 16 bytes")], t).unwrap()
        else {
            panic!("{name}: verified with the wrong secret")
        };
        assert_eq!(bad.error, tsig::error::BADSIG);
        let Checked::Rejected(late) = tsig::check_request(&q, &keys, t + 301).unwrap() else {
            panic!("{name}: accepted 301 s late")
        };
        assert_eq!(late.error, tsig::error::BADTIME);
    }
}

#[test]
fn dnspython_request_verifies_with_the_mac_it_computed() {
    let keys = [the_key()];
    for tag in ["knot", "nsd"] {
        let q = fixture(&format!("{tag}-request"));
        let Checked::Signed(s) = tsig::check_request(&q, &keys, signed_at(&q)).unwrap() else {
            panic!("{tag}: request does not verify")
        };
        assert_eq!(s.mac, fixture(&format!("{tag}-request-mac")));
    }
}

#[test]
fn knot_and_nsd_axfr_streams_verify_message_by_message() {
    let k = the_key();
    for tag in ["knot", "nsd"] {
        let msgs = responses(tag);
        assert!(msgs.len() > 3, "{tag}: {} messages", msgs.len());
        let mac = fixture(&format!("{tag}-request-mac"));
        let mut v = StreamVerifier::new(&k, &mac);
        let mut records = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(v.verify(m, signed_at(m)), Ok(true), "{tag} message {i}");
            let [qd, an, _, _] = wire::counts(m).unwrap();
            let mut off = wire::HEADER_LEN;
            for _ in 0..qd {
                off = wire::read_question(m, off).unwrap().3;
            }
            for _ in 0..an {
                let (r, o) = wire::read_owned_rr(m, off).unwrap();
                records.push(r);
                off = o;
            }
        }
        // SOA first and last (RFC 5936 §2.2), the whole zone between.
        assert_eq!(records.first(), records.last());
        records.pop();
        let z = Version::new(&WireName::parse("example.", None).unwrap(), records).unwrap();
        assert_eq!((z.serial(), z.records().len()), (7, 2002), "{tag}");
        // A flipped byte, or messages out of order, do not verify.
        let mut v = StreamVerifier::new(&k, &mac);
        assert_eq!(v.verify(&msgs[0], signed_at(&msgs[0])), Ok(true));
        let mut bad = msgs[1].clone();
        bad[40] ^= 1;
        assert_eq!(
            v.verify(&bad, signed_at(&bad)),
            Err(VerifyError::BadMac),
            "{tag}"
        );
        let mut v = StreamVerifier::new(&k, &mac);
        assert!(v.verify(&msgs[1], signed_at(&msgs[1])).is_err(), "{tag}");
    }
}

#[test]
fn knot_and_nsd_axfr_streams_read_as_a_secondary_reads_them() {
    use skua_xfr::client::{Incoming, Limits, Transfer, build};
    let k = the_key();
    let apex = WireName::parse("example.", None).unwrap();
    for tag in ["knot", "nsd"] {
        let msgs = responses(tag);
        let mac = fixture(&format!("{tag}-request-mac"));
        let id = u16::from_be_bytes([msgs[0][0], msgs[0][1]]);
        let mut inc = Incoming::new(
            &apex,
            id,
            None,
            Limits::default(),
            Some(StreamVerifier::new(&k, &mac)),
        );
        let mut done = None;
        for (i, m) in msgs.iter().enumerate() {
            done = inc
                .feed(m, signed_at(m))
                .unwrap_or_else(|e| panic!("{tag} message {i}: {e}"));
            assert_eq!(
                done.is_some(),
                i + 1 == msgs.len(),
                "{tag}: complete at the last message only"
            );
        }
        let Some(t @ Transfer::Full { .. }) = done else {
            panic!("{tag}: not a whole zone")
        };
        let (v, diffs) = build(&apex, None, t).unwrap().unwrap();
        assert_eq!(
            (v.serial(), v.records().len(), diffs.len()),
            (7, 2002, 0),
            "{tag}"
        );
        // Over the byte limit half-way: an error, not a partial zone.
        let total: usize = msgs.iter().map(Vec::len).sum();
        let limits = Limits {
            max_bytes: total / 2,
            max_records: usize::MAX,
        };
        let mut inc = Incoming::new(&apex, id, None, limits, Some(StreamVerifier::new(&k, &mac)));
        let r: Result<Vec<_>, _> = msgs.iter().map(|m| inc.feed(m, signed_at(m))).collect();
        assert!(r.is_err(), "{tag}");
    }
}
