//! The door in virtual time, as quinn-proto's `Pair`: a client, the door and a scripted
//! upstream behind the real forwarder, in one thread; the clock is a number the test moves.

extern crate std;

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::net::{IpAddr, SocketAddr};

use skua_engine::acl::{AclAction, Netblock};
use skua_engine::engine::DropReason;
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::text::parse_rr;
use skua_engine::{Engine, EngineBuilder};
use skua_resolver::cache::{Cache, CacheConfig, MsgShard, SetShard};
use skua_resolver::forward::{
    Entropy, Event as FwdEvent, ForwardConfig, Forwarder, Limits, Start, Upstream, ZoneConfig,
    ZoneKind,
};
use skua_xfr::server::KeyRule;
use skua_xfr::tsig::{self, Algorithm};

use super::*;

type TestCache = Cache<RefCell<MsgShard>, RefCell<SetShard>>;
/// The forwarder's client: where the answer goes back (the transport, the peer, the query).
type Fwd = Forwarder<Waiting, RefCell<MsgShard>, RefCell<SetShard>>;

const ALL: [Kind; 5] = [Kind::Udp, Kind::Tcp, Kind::Tls, Kind::Https, Kind::Quic];
const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
const UPSTREAM: [u8; 4] = [198, 18, 0, 9];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn peer() -> SocketAddr {
    SocketAddr::new(ip("198.18.0.2"), 40000)
}

fn name(s: &str) -> WireName {
    WireName::parse(s, None).unwrap()
}

fn engine() -> Engine {
    let mut b = EngineBuilder::new();
    b.config_mut().resolve = true;
    // `max-udp-size: 65535`: UDP answers as large as the client accepts.
    b.config_mut().max_udp_size = 65535;
    b.acl_mut().insert(
        Netblock::new(ip("198.18.0.0"), 15).unwrap(),
        AclAction::Allow,
    );
    b.acl_mut().insert(
        Netblock::new(ip("198.19.99.0"), 24).unwrap(),
        AclAction::Deny,
    );
    b.local_zone(name("example."), LocalZoneType::Static);
    b.local_data(
        parse_rr("www.example. 300 IN A 198.18.1.1", None, 300).unwrap(),
        0,
    );
    b.build().unwrap()
}

/// Keys and one secondary zone, `example.org.`, that the key may NOTIFY.
struct TestZones {
    keys: Vec<Key>,
    allow: Vec<Allow>,
    secondary: bool,
}

impl TestZones {
    fn new(secondary: bool) -> Self {
        TestZones {
            keys: vec![key()],
            allow: vec![Allow {
                netblock: Netblock::new(ip("198.18.0.0"), 15).unwrap(),
                rule: KeyRule::Key(0),
            }],
            secondary,
        }
    }
}

impl Zones for TestZones {
    fn keys(&self) -> &[Key] {
        &self.keys
    }
    fn has_secondaries(&self) -> bool {
        self.secondary
    }
    fn allow_notify(&self, apex: &[u8]) -> Option<&[Allow]> {
        (self.secondary && apex == name("example.org.").as_bytes()).then_some(&self.allow[..])
    }
}

fn key() -> Key {
    Key::new(
        &name("xfr.example."),
        Algorithm::HmacSha256,
        SECRET.to_vec(),
    )
}

/// A query: `id`, RD, one question; with `edns` an OPT (1232 octets), with `pad` a
/// Padding option in it (RFC 7830).
fn query(id: u16, qname: &str, qtype: u16, edns: bool, pad: bool) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(edns)]);
    m.extend_from_slice(name(qname).as_bytes());
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    if edns {
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
        if pad {
            m.extend_from_slice(&[0, 4, 0, 12, 0, 0]);
        } else {
            m.extend_from_slice(&[0, 0]);
        }
    }
    m
}

fn rcode(m: &[u8]) -> u8 {
    m[3] & 0xf
}

fn ancount(m: &[u8]) -> u16 {
    u16::from_be_bytes([m[6], m[7]])
}

/// A reply's message, its length prefix checked and taken off for framed kinds.
fn message(kind: Kind, out: &[u8], len: usize) -> Vec<u8> {
    if kind.framed() {
        assert_eq!(usize::from(u16::from_be_bytes([out[0], out[1]])), len - 2);
        out[2..len].to_vec()
    } else {
        out[..len].to_vec()
    }
}

/// Predictable randomness: every ID differs.
struct Seq(u32);
impl Entropy for Seq {
    fn u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12345);
        self.0
    }
}

/// A client who waits on the resolver: enough to answer it later.
#[derive(Clone, Debug)]
struct Waiting {
    kind: Kind,
    peer: SocketAddr,
    pad: Option<u16>,
    query: Vec<u8>,
}

/// The scripted upstream's records: A for every name under `net.` with TTL 60; `big.net.`
/// has 40 TXT records of 100 octets (about 4.5 KiB: more than a 4 KiB frame holds).
fn upstream_reply(q: &[u8]) -> Vec<u8> {
    let miss = Miss::of(q).unwrap();
    let mut m = q[..12].to_vec();
    m[2] |= 0x80;
    m[3] = 0x80;
    m[4..12].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    let qn = &q[12..12 + miss.question.name.len() + 4];
    m.extend_from_slice(qn);
    let mut answers = 0u16;
    if miss.question.name == name("big.net.").as_bytes() && miss.question.qtype == 16 {
        for i in 0..40u8 {
            m.extend_from_slice(&[0xc0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, 101, 100]);
            // Distinct records (a set holds each RDATA once, RFC 2181 §5).
            m.push(b'0' + i);
            m.extend(core::iter::repeat_n(b'a' + i % 26, 99));
            answers += 1;
        }
    } else if miss.question.qtype == 1 {
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 198, 18, 2, 2]);
        answers = 1;
    }
    m[6..8].copy_from_slice(&answers.to_be_bytes());
    m
}

/// Client, door and upstream in one thread. `now` is the virtual clock in seconds.
struct Pair {
    engine: Engine,
    cache: Arc<TestCache>,
    fwd: Fwd,
    zones: TestZones,
    rng: Seq,
    now: u32,
    events: Vec<Event>,
    /// Answers the resolver sent to waiting clients (kind, message).
    delivered: VecDeque<(Kind, Vec<u8>)>,
    /// Queries the upstream received.
    upstream_queries: usize,
}

impl Pair {
    fn new(limits: Option<Limits>) -> Self {
        let mut cfg = ForwardConfig {
            zones: vec![ZoneConfig {
                name: name("net.").as_bytes().to_vec(),
                kind: ZoneKind::Forward,
                upstreams: vec![Upstream {
                    addr: SocketAddr::from((UPSTREAM, 53)),
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
        if let Some(l) = limits {
            cfg.limits = l;
        }
        // One thread: the RefCell shards make the cache !Sync, which is the point.
        #[allow(clippy::arc_with_non_send_sync)]
        let cache = Arc::new(TestCache::new(CacheConfig::default()));
        Pair {
            engine: engine(),
            fwd: Forwarder::new(cfg, cache.clone()),
            cache,
            zones: TestZones::new(true),
            rng: Seq(7),
            now: 1000,
            events: Vec::new(),
            delivered: VecDeque::new(),
            upstream_queries: 0,
        }
    }

    fn door(&self) -> Door<'_, TestCache, TestZones> {
        Door {
            engine: &self.engine,
            cache: Some(&*self.cache),
            zones: &self.zones,
        }
    }

    /// One query through the door into a buffer of `room` octets; a miss goes to the
    /// forwarder (as the dataplanes hand it over) and the loop runs until it is quiet.
    fn ask(&mut self, kind: Kind, q: &[u8], pad: Option<u16>, room: usize) -> (Step, Vec<u8>) {
        let mut out = vec![0u8; room];
        let ask = Ask {
            kind,
            peer: peer(),
            now: self.now,
            unix: 1_700_000_000,
            pad,
            query: q,
        };
        let mut events = Vec::new();
        let step = self.door().handle(&ask, &mut out, &mut |e| events.push(e));
        self.events.extend(events);
        if let Step::Resolve(m) = &step {
            let w = Waiting {
                kind,
                peer: peer(),
                pad,
                query: q.to_vec(),
            };
            match self.fwd.resolve(
                m.question.clone(),
                Some(w),
                u64::from(self.now) * 1000,
                &mut self.rng,
            ) {
                Start::Pending => {}
                Start::NoZone(w) => self.deliver(&w, &bare_error(5)),
                Start::Busy(w) => self.deliver(&w, &bare_error(2)),
            }
            self.run();
        }
        (step, out)
    }

    /// The forwarder's events: transmissions answered by the scripted upstream at once,
    /// answers delivered through the door.
    fn run(&mut self) {
        while let Some(ev) = self.fwd.poll_event() {
            match ev {
                FwdEvent::Transmit(t) => {
                    self.upstream_queries += 1;
                    let r = upstream_reply(&t.bytes);
                    self.fwd
                        .reply(t.token, t.to, &r, u64::from(self.now) * 1000, &mut self.rng);
                }
                FwdEvent::Answer(a) => {
                    let cached = a.rendered.as_cached(a.fixed_ttl);
                    for w in &a.clients {
                        self.deliver(w, &cached);
                    }
                }
                FwdEvent::Cancel(_) => {}
            }
        }
    }

    fn deliver(&mut self, w: &Waiting, cached: &Cached<'_>) {
        let mut out = vec![0u8; 65537];
        let ask = Ask {
            kind: w.kind,
            peer: w.peer,
            now: self.now,
            unix: 0,
            pad: w.pad,
            query: &w.query,
        };
        if let Some(len) = self.door().answer_waiting(&ask, cached, &mut out) {
            self.delivered
                .push_back((w.kind, message(w.kind, &out, len)));
        }
    }
}

#[test]
fn local_data_on_every_transport_framed_and_padded_as_the_transport_wants() {
    let mut p = Pair::new(None);
    for kind in ALL {
        let pad = kind.stream().then_some(128);
        let q = query(0x1111, "www.example.", 1, true, kind != Kind::Tcp);
        let (step, out) = p.ask(kind, &q, pad.filter(|_| kind != Kind::Tcp), 65537);
        let Step::Reply { len, info } = step else {
            panic!("{kind:?}: {step:?}");
        };
        let m = message(kind, &out, len);
        assert_eq!((&m[..2], rcode(&m), ancount(&m)), (&[0x11, 0x11][..], 0, 1));
        assert!(info.unwrap().hot, "{kind:?}");
        match kind {
            Kind::Udp | Kind::Tcp => assert!(m.len() < 128, "{kind:?} not padded"),
            _ => assert_eq!(m.len() % 128, 0, "{kind:?} padded to the block"),
        }
    }
    assert_eq!(p.upstream_queries, 0);
}

#[test]
fn miss_then_hit_counting_down_in_virtual_time_on_every_transport() {
    let mut p = Pair::new(None);
    for (i, kind) in ALL.into_iter().enumerate() {
        let qname = alloc::format!("H{i}.Net.");
        let q = query(0x2200 + i as u16, &qname, 1, true, false);
        let (step, _) = p.ask(kind, &q, None, 65537);
        let Step::Resolve(m) = step else {
            panic!("{kind:?}: a miss, got {step:?}");
        };
        // The question read once, lower-cased; the client's EDNS facts with it.
        assert_eq!(m.question.name, name(&qname.to_lowercase()).as_bytes());
        assert_eq!((m.question.qtype, m.flags & 0x0100), (1, 0x0100));
        assert_eq!(m.edns.map(|e| e.udp_size), Some(1232));
        // The waiting client got the upstream's answer, its own ID and letter case.
        let (k, a) = p
            .delivered
            .pop_front()
            .expect("answered after the upstream");
        assert_eq!((k, &a[..2], rcode(&a), ancount(&a)), (kind, &q[..2], 0, 1));
        assert_eq!(&a[12..12 + qname.len() + 1], &q[12..12 + qname.len() + 1]);
        // Ten seconds later: a hit, TTL 50, no upstream query.
        p.now += 10;
        let asked = p.upstream_queries;
        let (step, out) = p.ask(kind, &q, None, 65537);
        let Step::Reply { len, info } = step else {
            panic!("{kind:?}: a hit, got {step:?}");
        };
        assert!(info.unwrap().cached);
        let m = message(kind, &out, len);
        let ttl = &m[m.len() - 4 - 11 - 6..m.len() - 11 - 6];
        assert_eq!(u32::from_be_bytes(ttl.try_into().unwrap()), 50, "{kind:?}");
        assert_eq!(p.upstream_queries, asked);
    }
}

/// The AF_XDP defect: a hit too large for the frame must be answered by the slow path
/// through the door (with the cache), not handed to the resolver as a miss.
#[test]
fn oversized_hit_is_answered_with_room_and_never_resolved_again() {
    let mut p = Pair::new(None);
    let mut q = query(0x3333, "big.net.", 16, true, false);
    // A client that accepts 65000 octets over UDP.
    let n = q.len();
    q[n - 8..n - 6].copy_from_slice(&65000u16.to_be_bytes());
    let (step, _) = p.ask(Kind::Udp, &q, None, 65535);
    assert!(matches!(step, Step::Resolve(_)), "{step:?}");
    let (_, first) = p.delivered.pop_front().unwrap();
    assert_eq!(ancount(&first), 40);
    assert!(first.len() > 4096);
    // In a frame of 4 KiB: the engine truncates to fit, and says the client's limit is
    // larger than the room (the fast path then hands the query to its slow path).
    let room = 4096 - 42;
    let (step, _) = p.ask(Kind::Udp, &q, None, room);
    let Step::Reply {
        info: Some(info), ..
    } = step
    else {
        panic!("{step:?}");
    };
    assert!(info.truncated && info.cached);
    assert!(p.engine.reply_limit(&q, Transport::Udp) > room);
    // The slow path's buffer: the hit, whole.
    let asked = p.upstream_queries;
    let (step, out) = p.ask(Kind::Udp, &q, None, 65535);
    let Step::Reply { len, info } = step else {
        panic!("{step:?}");
    };
    assert!(info.unwrap().cached && len > 4096 && ancount(&out) == 40);
    assert_eq!(p.upstream_queries, asked);
}

#[test]
fn notify_for_a_secondary_zone_is_answered_and_reported_on_every_transport() {
    let mut p = Pair::new(None);
    for kind in ALL {
        p.events.clear();
        let mut n = skua_xfr::notify::message(0x4444, &name("example.org."), None);
        tsig::sign_request(&mut n, &key(), 1_700_000_000);
        let (step, out) = p.ask(kind, &n, None, 65537);
        let Step::Reply { len, info: None } = step else {
            panic!("{kind:?}: {step:?}");
        };
        let m = message(kind, &out, len);
        assert_eq!(((m[2] >> 3) & 0xf, rcode(&m)), (4, 0), "{kind:?}: NOERROR");
        assert!(matches!(
            &p.events[..],
            [Event::Notified { zone, serial: None }] if zone.as_bytes() == name("example.org.").as_bytes()
        ));
        // Unsigned: the zone wants the key. Refused and reported.
        p.events.clear();
        let n = skua_xfr::notify::message(0x4445, &name("example.org."), None);
        let (step, out) = p.ask(kind, &n, None, 65537);
        let Step::Reply { len, .. } = step else {
            panic!("{kind:?}: {step:?}");
        };
        assert_ne!(rcode(&message(kind, &out, len)), 0);
        assert!(matches!(&p.events[..], [Event::NotifyRefused(_)]));
    }
    // Not a secondary: the engine answers the opcode (REFUSED), nothing is reported.
    p.zones.secondary = false;
    p.events.clear();
    let n = skua_xfr::notify::message(0x4446, &name("example.org."), None);
    let (step, out) = p.ask(Kind::Udp, &n, None, 512);
    assert!(matches!(step, Step::Reply { info: Some(_), .. }));
    assert_eq!(rcode(&out), 5);
    assert!(p.events.is_empty());
}

#[test]
fn tsig_signed_query_gets_a_signed_answer_and_a_wrong_key_its_error() {
    let mut p = Pair::new(None);
    for kind in ALL {
        let mut q = query(0x5555, "www.example.", 1, false, false);
        let mac = tsig::sign_request(&mut q, &key(), 1_700_000_000);
        let (step, out) = p.ask(kind, &q, Some(128), 65537);
        let Step::Reply { len, info: None } = step else {
            panic!("{kind:?}: {step:?}");
        };
        let m = message(kind, &out, len);
        assert_eq!((rcode(&m), ancount(&m)), (0, 1), "{kind:?}");
        let k = key();
        let mut v = tsig::StreamVerifier::new(&k, &mac);
        assert_eq!(v.verify(&m, 1_700_000_000), Ok(true), "{kind:?}: signed");
    }
    let stranger = Key::new(&name("stranger."), Algorithm::HmacSha256, SECRET.to_vec());
    let mut q = query(0x5556, "www.example.", 1, false, false);
    tsig::sign_request(&mut q, &stranger, 1_700_000_000);
    let (step, out) = p.ask(Kind::Udp, &q, None, 512);
    let Step::Reply { len, .. } = step else {
        panic!("{step:?}");
    };
    assert_eq!(rcode(&out), 9, "NOTAUTH");
    assert_eq!(
        tsig::find(&out[..len]).unwrap().unwrap().error,
        tsig::error::BADKEY
    );
    assert!(matches!(&p.events[..], [Event::Refused(_)]));
}

#[test]
fn no_zone_is_refused_and_over_the_limit_is_servfail_framed_for_the_transport() {
    let mut p = Pair::new(None);
    for kind in ALL {
        // Outside every forward zone: the forwarder says NoZone, the door answers REFUSED.
        let q = query(0x6666, "x.org.", 1, true, false);
        let (step, _) = p.ask(kind, &q, None, 65537);
        assert!(matches!(step, Step::Resolve(_)));
        let (k, a) = p.delivered.pop_front().expect("REFUSED");
        assert_eq!(
            (k, &a[..2], rcode(&a), a[2] & 0x80),
            (kind, &q[..2], 5, 0x80)
        );
    }
    // No waiter allowed: Busy, SERVFAIL.
    let mut p = Pair::new(Some(Limits {
        waiters: 0,
        flights: 0,
        ..Limits::default()
    }));
    for kind in ALL {
        let q = query(0x6667, "busy.net.", 1, true, false);
        let (step, _) = p.ask(kind, &q, None, 65537);
        assert!(matches!(step, Step::Resolve(_)));
        let (k, a) = p.delivered.pop_front().expect("SERVFAIL");
        assert_eq!((k, rcode(&a)), (kind, 2));
    }
}

#[test]
fn a_denied_client_is_dropped_and_its_stream_closed() {
    let p = Pair::new(None);
    for kind in ALL {
        let q = query(0x7777, "www.example.", 1, false, false);
        let ask = Ask {
            kind,
            peer: SocketAddr::new(ip("198.19.99.5"), 5353),
            now: 1,
            unix: 0,
            pad: None,
            query: &q,
        };
        let step = p.door().handle(&ask, &mut [0u8; 600], &mut |_| {});
        assert_eq!(
            step,
            Step::Drop {
                reason: DropReason::Acl,
                inform: false,
                close: kind.stream()
            }
        );
        assert_eq!(
            step.outcome(),
            Some(Outcome::Drop {
                reason: DropReason::Acl,
                inform: false
            })
        );
    }
}

#[test]
fn hostile_bytes_never_panic_on_any_transport() {
    let p = Pair::new(None);
    let mut rng = Seq(99);
    let seeds = [
        query(1, "www.example.", 1, true, true),
        skua_xfr::notify::message(2, &name("example.org."), None),
        {
            let mut q = query(3, "www.example.", 1, false, false);
            tsig::sign_request(&mut q, &key(), 5);
            q
        },
    ];
    for i in 0..6000 {
        let mut m = seeds[i % 3].clone();
        let cut = rng.u32() as usize % (m.len() + 1);
        m.truncate(cut.max(i % 13));
        for _ in 0..(rng.u32() % 4) {
            if !m.is_empty() {
                let at = rng.u32() as usize % m.len();
                m[at] = rng.u32() as u8;
            }
        }
        for kind in ALL {
            for room in [0, 1, 2, 13, 300, 4096] {
                let ask = Ask {
                    kind,
                    peer: peer(),
                    now: 1,
                    unix: 5,
                    pad: Some(128),
                    query: &m,
                };
                let mut out = vec![0u8; room];
                let _ = p.door().handle(&ask, &mut out, &mut |_| {});
                let _ = Miss::of(&m);
            }
        }
    }
}

/// The fast path sends a reply truncated only for want of room to its slow path when the
/// client's limit is larger than the frame: that limit must be read from queries with EDNS
/// options too (a cookie, RFC 7873, as dig and most resolvers send), not only from the hot
/// path's form (which read as 512: the client got TC over AF_XDP, the whole answer over
/// the kernel sockets).
#[test]
fn reply_limit_reads_the_edns_size_of_a_query_with_a_cookie() {
    let p = Pair::new(None);
    let mut q = query(0x8888, "big.net.", 16, true, false);
    let n = q.len();
    q[n - 8..n - 6].copy_from_slice(&65000u16.to_be_bytes());
    assert_eq!(p.engine.reply_limit(&q, Transport::Udp), 65000);
    // The same with a client cookie: OPT RDLEN 12, COOKIE (10) of 8 octets.
    q.truncate(n - 2);
    q.extend_from_slice(&[0, 12, 0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(p.engine.reply_limit(&q, Transport::Udp), 65000);
    assert_eq!(p.engine.reply_limit(&q, Transport::Tcp), 65535);
    // Without EDNS: 512 (RFC 1035 §4.2.1).
    let plain = query(0x8889, "big.net.", 16, false, false);
    assert_eq!(p.engine.reply_limit(&plain, Transport::Udp), 512);
}
