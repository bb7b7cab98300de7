//! Fuzz target: upstream replies into the resolver core (skua-resolver).
//!
//! 1. Any bytes read as a message and scrubbed against a question asked in the zone
//!    `fwd.example.`: no panic, and every RRset the scrubber keeps is in that zone (or is a
//!    chain's synthesised CNAME at an in-zone name).
//! 2. The same bytes as the reply to a real upstream query of a forwarder for
//!    `fwd.example.` (its ID, QR and question patched in, so the bytes get past the
//!    matching): no panic; every answer it gives reads back as a DNS message; and nothing
//!    outside `fwd.example.` is ever in the cache (no out-of-bailiwick record cached).
#![no_main]

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use skua_engine::name::is_subdomain;
use skua_resolver::cache::{Cache, CacheConfig, MsgShard, SetShard};
use skua_resolver::forward::{
    Entropy, Event, ForwardConfig, Forwarder, Question, Upstream, ZoneConfig, ZoneKind,
};
use skua_resolver::msg::Message;
use skua_resolver::scrub::{Asked, Verdict, scrub};

const ZONE: &[u8] = b"\x03fwd\x07example\x00";
const QNAME: &[u8] = b"\x03www\x03fwd\x07example\x00";

struct Seq(u32);
impl Entropy for Seq {
    fn u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12345);
        self.0
    }
}

fn in_zone(owner: &[u8]) -> bool {
    is_subdomain(&owner.to_ascii_lowercase(), ZONE)
}

fuzz_target!(|data: &[u8]| {
    let qtype = data.first().map_or(1, |&b| u16::from(b % 20) + 1);
    // 1. Reader and scrubber.
    if let Ok(m) = Message::parse(data) {
        let asked = Asked {
            name: QNAME,
            qtype,
            qclass: 1,
        };
        let sets = match scrub(&m, asked, ZONE) {
            Verdict::Answer { answer } | Verdict::Chain { answer, .. } => answer,
            Verdict::NoData { answer, soa } | Verdict::NxDomain { answer, soa } => {
                answer.into_iter().chain(soa).collect()
            }
            Verdict::Lame => Vec::new(),
        };
        for s in &sets {
            assert!(in_zone(&s.owner), "scrub kept {:?} outside the zone", s.owner);
        }
    }

    // 2. Through the forwarder.
    let up: SocketAddr = "198.18.0.1:53".parse().unwrap();
    let cfg = ForwardConfig {
        zones: vec![ZoneConfig {
            name: ZONE.to_vec(),
            kind: ZoneKind::Forward,
            upstreams: vec![Upstream {
                addr: up,
                tls_name: None,
            }],
            no_cache: false,
            first: false,
            tls: false,
            tcp: false,
            id: 1,
        }],
        ..ForwardConfig::default()
    };
    let cache = Arc::new(Cache::<RefCell<MsgShard>, RefCell<SetShard>>::new(CacheConfig {
        serve_expired: true,
        ..CacheConfig::default()
    }));
    let mut f: Forwarder<u8, _, _> = Forwarder::new(cfg, cache.clone());
    let mut rng = Seq(1);
    let q = Question {
        name: QNAME.to_vec(),
        qtype,
        qclass: 1,
    };
    let _ = f.resolve(q, Some(0), 0, &mut rng);
    let mut now = 0u64;
    for _ in 0..8 {
        let mut sent = None;
        while let Some(ev) = f.poll_event() {
            match ev {
                Event::Transmit(t) => sent = Some(t),
                Event::Answer(a) => {
                    let r = &a.rendered;
                    let mut msg = vec![0, 0];
                    msg.extend_from_slice(&r.flags.to_be_bytes());
                    msg.extend_from_slice(&[0, 1]);
                    msg.extend_from_slice(&r.body.counts);
                    msg.extend_from_slice(QNAME);
                    msg.extend_from_slice(&qtype.to_be_bytes());
                    msg.extend_from_slice(&[0, 1]);
                    msg.extend_from_slice(&r.body.tail);
                    Message::parse(&msg).expect("an answer the forwarder gives reads back");
                }
                Event::Cancel(_) => {}
            }
        }
        let Some(t) = sent else { break };
        // The fuzz input as the reply: its header with the query's ID and QR, the query's
        // question, then the input's records.
        let mut reply = t.bytes[..2].to_vec();
        let flags = data.get(2..4).map_or(0x8180, |b| u16::from_be_bytes([b[0], b[1]]));
        reply.extend_from_slice(&((flags | 0x8000) & !0x7800).to_be_bytes());
        reply.extend_from_slice(&[0, 1]);
        reply.extend_from_slice(data.get(6..12).unwrap_or(&[0; 6]));
        let qlen = t.bytes.len() - 12 - if t.bytes[11] == 1 { 11 } else { 0 };
        reply.extend_from_slice(&t.bytes[12..12 + qlen]);
        reply.extend_from_slice(data.get(12..).unwrap_or(&[]));
        now += 10;
        f.reply(t.token, up, &reply, now, &mut rng);
    }
    cache.for_each_rrset(0, |set, _| {
        assert!(in_zone(&set.owner), "cached {:?} outside the zone", set.owner);
    });
});
