//! Fuzz target: skua-xfr as a secondary reads what a primary sends.
//!
//! The input is a TCP stream from a primary: messages with their 2-byte length prefix
//! (RFC 1035 §4.2.2), the answer to an IXFR from serial 1 (and, read again, to an AXFR).
//! Properties: nothing panics; the reader never accepts more records or bytes than its
//! limits; a transfer it completes builds a version whose serial is the transfer's, or an
//! error; the same bytes as a single message are read by the SOA-answer and NOTIFY readers
//! without panicking, and a NOTIFY answer is empty or at least a header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skua_engine::name::WireName;
use skua_engine::text::parse_rr;
use skua_xfr::client::{self, Incoming, Limits, Transfer};
use skua_xfr::server::{Allow, KeyRule};
use skua_xfr::tsig::{Algorithm, Key};
use skua_xfr::zone::Version;
use skua_xfr::{notify, wire};

const NOW: u64 = 1_750_000_000;

fn messages(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut p = 0;
    while p + 2 <= data.len() {
        let n = usize::from(u16::from_be_bytes([data[p], data[p + 1]]));
        let end = (p + 2 + n).min(data.len());
        out.push(&data[p + 2..end]);
        p = end;
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let apex = WireName::parse("example.", None).unwrap();
    let rr = |s: &str| parse_rr(s, None, 300).unwrap();
    let held = Version::new(
        &apex,
        vec![
            rr("example. 300 IN SOA ns.example. admin.example. 1 3600 600 86400 300"),
            rr("www.example. 300 IN A 198.18.0.1"),
        ],
    )
    .unwrap();
    let limits = Limits {
        max_bytes: 16 * 1024,
        max_records: 200,
    };
    let id = data
        .get(2..4)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    for h in [Some(&held), None] {
        let mut inc = Incoming::new(&apex, id, h.map(Version::serial), limits, None);
        for m in messages(data) {
            match inc.feed(m, NOW) {
                Ok(Some(t)) => {
                    let (bytes, records, _) = inc.counts();
                    assert!(bytes <= limits.max_bytes && records <= limits.max_records);
                    let serial = t.serial();
                    let up_to_date = matches!(t, Transfer::UpToDate(_));
                    match client::build(&apex, h, t) {
                        Ok(Some((v, _))) => assert_eq!(v.serial(), serial),
                        Ok(None) => assert!(up_to_date),
                        Err(_) => {}
                    }
                    break;
                }
                Ok(None) => {}
                Err(_) => break,
            }
        }
    }
    let _ = client::soa_answer(data, id, &apex, None, NOW);
    let key = Key::new(
        &WireName::parse("xfr.example.", None).unwrap(),
        Algorithm::HmacSha256,
        b"0123456789abcdef0123456789abcdef".to_vec(),
    );
    let allow = [Allow {
        netblock: "198.18.0.0/15".parse().unwrap(),
        rule: KeyRule::Key(0),
    }];
    let a = notify::answer(
        data,
        "198.18.0.9".parse().unwrap(),
        std::slice::from_ref(&key),
        NOW,
        |z| (z.as_bytes() == apex.as_bytes()).then_some(&allow[..]),
    );
    assert!(a.response.is_empty() || a.response.len() >= wire::HEADER_LEN);
});
