//! Fuzz target: the whole engine on arbitrary datagrams, over UDP and TCP, from allowed,
//! refused and denied clients. It must never panic; every reply must fit the buffer and the
//! transport limit and parse as a DNS response echoing the query ID; and where the hot path
//! answers, the general (hickory) path must give the same answer (differential oracle).
//! The same query also goes through an engine that rate-limits every client to one response
//! a second, slipping the rest: its replies (slips included) must hold the same invariants.
#![no_main]

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use skua_engine::rrl::{Rrl, RrlConfig};
use skua_engine::testing::{compare_replies, fuzz_engine};
use skua_engine::{Engine, Outcome, Request, Transport};

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(fuzz_engine)
}

fn limited() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let mut e = fuzz_engine();
        let cfg = RrlConfig {
            responses_per_second: 1,
            slip: 1,
            max_table_size: 64,
            ..RrlConfig::default()
        };
        e.set_rrl(Some(Arc::new(Rrl::new(cfg, 0x5eed))));
        e
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, query)) = data.split_first() else {
        return;
    };
    let src: IpAddr = match sel & 3 {
        0 => "127.0.0.1".parse().unwrap(),
        1 => "198.18.0.1".parse().unwrap(), // refused (default ACL)
        2 => "198.19.0.1".parse().unwrap(), // denied
        _ => "::1".parse().unwrap(),
    };
    let transport = if sel & 4 != 0 {
        Transport::Tcp
    } else {
        Transport::Udp
    };
    let req = Request {
        src,
        transport,
        now: u32::from(sel >> 3),
    };
    let e = engine();
    let mut hot = vec![0u8; 65535];
    let mut gen_out = vec![0u8; 65535];
    let a = e.handle_query(&req, query, &mut hot);
    let b = e.handle_query_general(&req, query, &mut gen_out);
    if let Outcome::Reply { len, info } = a {
        assert!(len >= 12 && len <= 65535);
        if transport == Transport::Udp {
            assert!(len <= 4096, "UDP reply of {len} bytes");
        }
        assert_eq!(&hot[..2], &query[..2], "ID not echoed");
        assert!(hot[2] & 0x80 != 0, "QR not set");
        if info.hot {
            let Outcome::Reply { len: glen, .. } = b else {
                panic!("hot path replied, general path dropped");
            };
            if let Err(d) = compare_replies(&hot[..len], &gen_out[..glen]) {
                panic!("hot and general paths differ: {d}");
            }
        }
    }
    let mut out = vec![0u8; 65535];
    if let Outcome::Reply { len, info } = limited().handle_query(&req, query, &mut out) {
        assert!(len >= 12 && len <= 65535);
        assert_eq!(&out[..2], &query[..2], "ID not echoed");
        assert!(out[2] & 0x80 != 0, "QR not set");
        if info.slipped && info.truncated {
            assert!(out[2] & 0x02 != 0, "slip without TC");
            assert_eq!(&out[6..10], &[0, 0, 0, 0], "slip with records");
            assert!(
                len <= 12 + 255 + 4 + 11,
                "slip longer than header, question and OPT"
            );
        }
    }
});
