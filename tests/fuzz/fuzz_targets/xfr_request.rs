//! Fuzz target: skua-xfr's readers of untrusted messages.
//!
//! The input is a message as a transfer client, a NOTIFY sender or a primary's answer
//! would send it. Properties: nothing panics; [`server::answer`] returns a refusal that is
//! empty or at least a header, or a transfer whose messages each fit 65535 bytes and
//! verify as a stream with the key the request was signed with; a message `tsig::find`
//! accepts keeps its TSIG record inside the message; every reader of records and names
//! ends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skua_engine::name::WireName;
use skua_engine::text::parse_rr;
use skua_xfr::server::{self, Allow, KeyRule, ZoneRef};
use skua_xfr::tsig::{self, Algorithm, Key, StreamVerifier};
use skua_xfr::zone::{Diff, Journal, Version};
use skua_xfr::{notify, wire};

const NOW: u64 = 1_750_000_000;

fuzz_target!(|data: &[u8]| {
    let apex = WireName::parse("example.", None).unwrap();
    let key = Key::new(
        &WireName::parse("xfr.example.", None).unwrap(),
        Algorithm::HmacSha256,
        b"0123456789abcdef0123456789abcdef".to_vec(),
    );
    let keys = [key];
    let rr = |s: &str| parse_rr(s, None, 300).unwrap();
    let v1 = Version::new(
        &apex,
        vec![
            rr("example. 300 IN SOA ns.example. admin.example. 1 3600 600 86400 300"),
            rr("www.example. 300 IN A 198.18.0.1"),
        ],
    )
    .unwrap();
    let v2 = Version::new(
        &apex,
        vec![
            rr("example. 300 IN SOA ns.example. admin.example. 2 3600 600 86400 300"),
            rr("www.example. 300 IN A 198.18.0.2"),
        ],
    )
    .unwrap();
    let mut journal = Journal::new(10, 1 << 16);
    journal.push(Diff::between(&v1, &v2));
    let allow = [
        Allow {
            netblock: "198.18.0.0/15".parse().unwrap(),
            rule: KeyRule::Key(0),
        },
        Allow {
            netblock: "0.0.0.0/0".parse().unwrap(),
            rule: KeyRule::NoKey,
        },
    ];

    let _ = server::is_transfer_request(data);
    let signed = tsig::find(data);
    if let Ok(Some(t)) = &signed {
        assert!(t.start < data.len());
    }
    let src = "198.18.0.9".parse().unwrap();
    match server::answer(data, src, &keys, NOW, |a| {
        (a.as_bytes() == apex.as_bytes()).then_some(ZoneRef {
            version: &v2,
            journal: &journal,
            allow: &allow,
        })
    }) {
        server::Answer::Refused { message, .. } => {
            assert!(message.is_empty() || message.len() >= wire::HEADER_LEN);
        }
        server::Answer::Transfer(t) => {
            let mac = match tsig::check_request(data, &keys, NOW) {
                Ok(tsig::Checked::Signed(s)) => Some(s.mac),
                _ => None,
            };
            let mut v = mac.as_ref().map(|m| StreamVerifier::new(&keys[0], m));
            for m in t.messages {
                assert!(m.len() <= wire::MAX_MESSAGE_LEN);
                if let Some(v) = &mut v {
                    assert_eq!(v.verify(&m, NOW), Ok(true));
                }
            }
        }
    }
    let _ = notify::parse(data);
    let _ = notify::reply_rcode(data, 1, &apex);
    let mut v = StreamVerifier::new(&keys[0], &[0u8; 32]);
    let _ = v.verify(data, NOW);
    if let Ok([qd, an, ns, ar]) = wire::counts(data) {
        let mut off = wire::HEADER_LEN;
        let mut ok = true;
        for _ in 0..qd {
            match wire::read_question(data, off) {
                Ok(q) => off = q.3,
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        let total = usize::from(an) + usize::from(ns) + usize::from(ar);
        for _ in 0..total {
            if !ok {
                break;
            }
            match wire::read_owned_rr(data, off) {
                Ok((_, o)) => {
                    assert!(o <= data.len());
                    off = o;
                }
                Err(_) => ok = false,
            }
        }
    }
});
