//! Fuzz target: the front door (skua-serve) on arbitrary messages over every transport
//! kind, with a TSIG key and a secondary zone configured (so NOTIFYs and signed queries
//! take their own branches), into buffers of every size. It must never panic; a reply must
//! fit the buffer, carry the stream transports' length prefix, echo the query's ID and have
//! QR set; a miss must name a question the message really carries.
#![no_main]

use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use skua_engine::acl::Netblock;
use skua_engine::name::WireName;
use skua_engine::testing::fuzz_engine;
use skua_engine::Engine;
use skua_serve::{Ask, Door, Kind, Miss, Step, Zones};
use skua_xfr::server::{Allow, KeyRule};
use skua_xfr::tsig::{Algorithm, Key};

struct Z {
    keys: Vec<Key>,
    allow: Vec<Allow>,
}

impl Zones for Z {
    fn keys(&self) -> &[Key] {
        &self.keys
    }
    fn has_secondaries(&self) -> bool {
        true
    }
    fn allow_notify(&self, apex: &[u8]) -> Option<&[Allow]> {
        (apex == b"\x07example\x03org\x00").then_some(&self.allow[..])
    }
}

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(fuzz_engine)
}

fn zones() -> &'static Z {
    static Z_: OnceLock<Z> = OnceLock::new();
    Z_.get_or_init(|| Z {
        keys: vec![Key::new(
            &WireName::parse("xfr.example.", None).unwrap(),
            Algorithm::HmacSha256,
            b"0123456789abcdef0123456789abcdef".to_vec(),
        )],
        allow: vec![Allow {
            netblock: Netblock::new("0.0.0.0".parse().unwrap(), 0).unwrap(),
            rule: KeyRule::NoKey,
        }],
    })
}

const KINDS: [Kind; 5] = [Kind::Udp, Kind::Tcp, Kind::Tls, Kind::Https, Kind::Quic];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, query)) = data.split_first() else {
        return;
    };
    let kind = KINDS[usize::from(sel % 5)];
    let room = [0usize, 2, 12, 100, 512, 1232, 4096, 65537][usize::from(sel >> 5)];
    let pad = (sel & 0x10 != 0).then_some(128);
    let door = Door {
        engine: engine(),
        cache: None::<&skua_engine::NoCache>,
        zones: zones(),
    };
    let ask = Ask {
        kind,
        peer: SocketAddr::new(IpAddr::from([127, 0, 0, 1]), 5353),
        now: 1,
        unix: 1_700_000_000,
        pad,
        query,
    };
    let mut out = vec![0u8; room];
    match door.handle(&ask, &mut out, &mut |_| {}) {
        Step::Reply { len, .. } => {
            assert!(len <= room, "{len} > {room}");
            let m = if kind.framed() {
                assert!(len >= 2);
                assert_eq!(usize::from(u16::from_be_bytes([out[0], out[1]])), len - 2);
                &out[2..len]
            } else {
                &out[..len]
            };
            assert!(m.len() >= 12, "a reply has a header");
            assert_eq!(&m[..2], &query[..2], "the query's ID");
            assert_ne!(m[2] & 0x80, 0, "QR");
        }
        Step::Resolve(miss) => {
            // The fuzz engine resolves nothing; a miss would still have to be a question.
            assert_eq!(Miss::of(query), Some(miss));
        }
        Step::Drop { .. } => {}
    }
});
