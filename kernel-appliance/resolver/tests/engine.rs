//! The engine and the resolver core together, as a dataplane drives them: a name outside
//! local data goes to the forwarder, the upstream's reply is answered to every waiting
//! client through the engine, and later queries are cache hits with their TTLs counted
//! down, truncated, rate-limited and refused exactly as the engine does for local data.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;

use skua_engine::acl::{AclAction, Netblock};
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::text::parse_rr;
use skua_engine::{Engine, EngineBuilder, Outcome, Request, Transport};
use skua_resolver::cache::{Cache, CacheConfig, MsgShard, SetShard};
use skua_resolver::forward::{
    Entropy, Event, ForwardConfig, Forwarder, Question, Start, Upstream, ZoneConfig, ZoneKind,
};
use skua_resolver::msg::Message;

type TestCache = Cache<RefCell<MsgShard>, RefCell<SetShard>>;
type Fwd = Forwarder<Vec<u8>, RefCell<MsgShard>, RefCell<SetShard>>;

struct Seq(u32);
impl Entropy for Seq {
    fn u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12345);
        self.0
    }
}

const UP: &str = "198.18.0.53:53";

fn engine() -> Engine {
    let mut b = EngineBuilder::new();
    b.config_mut().resolve = true;
    let acl = b.acl_mut();
    acl.insert(
        Netblock::new("198.18.1.0".parse().unwrap(), 24).unwrap(),
        AclAction::Allow,
    );
    acl.insert(
        Netblock::new("198.18.2.0".parse().unwrap(), 24).unwrap(),
        AclAction::AllowSnoop,
    );
    b.local_zone(
        WireName::parse("local.", None).unwrap(),
        LocalZoneType::Static,
    );
    b.local_data(
        parse_rr("www.local. 60 IN A 192.0.2.10", None, 3600).unwrap(),
        0,
    );
    b.local_zone(
        WireName::parse("tp.example.", None).unwrap(),
        LocalZoneType::Transparent,
    );
    b.local_data(
        parse_rr("a.tp.example. 60 IN A 192.0.2.11", None, 3600).unwrap(),
        0,
    );
    b.build().unwrap()
}

fn forwarder(cache: CacheConfig) -> Fwd {
    let cfg = ForwardConfig {
        zones: vec![ZoneConfig {
            name: vec![0],
            kind: ZoneKind::Forward,
            upstreams: vec![Upstream {
                addr: UP.parse().unwrap(),
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
    #[allow(clippy::arc_with_non_send_sync)]
    let cache = Arc::new(TestCache::new(cache));
    Forwarder::new(cfg, cache)
}

fn query(id: u16, name: &str, qtype: u16, rd: bool, edns: bool) -> Vec<u8> {
    let mut p = id.to_be_bytes().to_vec();
    p.extend_from_slice(&[
        if rd { 1 } else { 0 },
        0,
        0,
        1,
        0,
        0,
        0,
        0,
        0,
        u8::from(edns),
    ]);
    p.extend_from_slice(WireName::parse(name, None).unwrap().as_bytes());
    p.extend_from_slice(&qtype.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    if edns {
        p.extend_from_slice(&[0, 0, 0x29, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
    }
    p
}

fn req(src: &str, now: u32) -> Request {
    Request {
        src: src.parse().unwrap(),
        transport: Transport::Udp,
        now,
    }
}

/// The upstream's reply to a transmitted query: `n` A records of TTL `ttl` for its name.
fn upstream_reply(sent: &[u8], n: u8, ttl: u32) -> Vec<u8> {
    let m = Message::parse(sent).unwrap();
    let q = m.question.unwrap();
    let mut r = sent[..2].to_vec();
    r.extend_from_slice(&[0x81, 0x80, 0, 1, 0, n, 0, 0, 0, 0]);
    r.extend_from_slice(&q.name);
    r.extend_from_slice(&q.qtype.to_be_bytes());
    r.extend_from_slice(&[0, 1]);
    for i in 0..n {
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        r.extend_from_slice(&ttl.to_be_bytes());
        r.extend_from_slice(&[0, 4, 192, 0, 2, i]);
    }
    r
}

/// The next event that is not a cancellation.
fn next(f: &mut Fwd) -> Option<Event<Vec<u8>>> {
    loop {
        match f.poll_event() {
            Some(Event::Cancel(_)) => continue,
            e => return e,
        }
    }
}

/// Resolves `name` A through the forwarder for a client whose query was `q`, as a daemon
/// does, and returns the engine's reply to that client.
fn resolve_through(
    e: &Engine,
    f: &mut Fwd,
    client: &str,
    q: &[u8],
    n: u8,
    ttl: u32,
    now_s: u32,
) -> Vec<u8> {
    let m = Message::parse(q).unwrap();
    let qq = m.question.unwrap();
    let question = Question {
        name: qq.name.to_ascii_lowercase(),
        qtype: qq.qtype,
        qclass: qq.qclass,
    };
    let mut rng = Seq(1);
    let now_ms = u64::from(now_s) * 1000;
    assert_eq!(
        f.resolve(question, Some(q.to_vec()), now_ms, &mut rng),
        Start::Pending
    );
    let Some(Event::Transmit(t)) = next(f) else {
        panic!("no transmit")
    };
    let up: SocketAddr = UP.parse().unwrap();
    f.reply(
        t.token,
        up,
        &upstream_reply(&t.bytes, n, ttl),
        now_ms + 5,
        &mut rng,
    );
    let Some(Event::Answer(a)) = next(f) else {
        panic!("no answer")
    };
    assert_eq!(a.clients, vec![q.to_vec()]);
    let mut out = vec![0u8; 65535];
    match e.answer_cached(
        &req(client, now_s),
        q,
        &mut out,
        &a.rendered.as_cached(a.fixed_ttl),
    ) {
        Outcome::Reply { len, .. } => out[..len].to_vec(),
        o => panic!("{o:?}"),
    }
}

fn ask(e: &Engine, f: &Fwd, client: &str, q: &[u8], now: u32) -> (Outcome, Vec<u8>) {
    let mut out = vec![0u8; 65535];
    let o = e.handle_query_with(&req(client, now), q, &mut out, f.cache().as_ref());
    let len = match o {
        Outcome::Reply { len, .. } => len,
        _ => 0,
    };
    (o, out[..len].to_vec())
}

fn ttls(reply: &[u8]) -> Vec<u32> {
    Message::parse(reply)
        .unwrap()
        .answer
        .iter()
        .map(|r| r.ttl)
        .collect()
}

#[test]
fn miss_resolve_then_hits_count_down() {
    let e = engine();
    let mut f = forwarder(CacheConfig::default());
    // Local data is answered locally, even with a resolver.
    let (o, _) = ask(
        &e,
        &f,
        "198.18.1.1",
        &query(1, "www.local.", 1, true, false),
        100,
    );
    assert!(matches!(o, Outcome::Reply { info, .. } if !info.cached));
    // A transparent zone's name without data: resolved; with data: local.
    let (o, _) = ask(
        &e,
        &f,
        "198.18.1.1",
        &query(1, "b.tp.example.", 1, true, false),
        100,
    );
    assert_eq!(o, Outcome::Resolve);
    let (o, _) = ask(
        &e,
        &f,
        "198.18.1.1",
        &query(1, "a.tp.example.", 1, true, false),
        100,
    );
    assert!(matches!(o, Outcome::Reply { .. }));
    // Outside local data: the resolver.
    let q = query(0x1234, "WwW.Example.", 1, true, true);
    let (o, _) = ask(&e, &f, "198.18.1.1", &q, 100);
    assert_eq!(o, Outcome::Resolve);
    let first = resolve_through(&e, &mut f, "198.18.1.1", &q, 2, 300, 100);
    // The client's ID and letter case, RD and RA, two answers, our OPT.
    assert_eq!(&first[..4], &[0x12, 0x34, 0x81, 0x80]);
    assert_eq!(&first[12..12 + 13], &q[12..12 + 13]);
    assert_eq!(ttls(&first), vec![300, 300]);
    assert!(Message::parse(&first).unwrap().opt.is_some());
    // 120 s later: a hit with TTL 180, another client's ID and case.
    let q2 = query(0x0707, "www.EXAMPLE.", 1, true, false);
    let (o, hit) = ask(&e, &f, "198.18.1.2", &q2, 220);
    assert!(matches!(o, Outcome::Reply { info, .. } if info.cached));
    assert_eq!(&hit[..2], &[0x07, 0x07]);
    assert_eq!(&hit[12..25], &q2[12..25]);
    assert_eq!(ttls(&hit), vec![180, 180]);
    // RD=0: refused for `allow`, answered from the cache for `allow_snoop`.
    let norec = query(9, "www.example.", 1, false, false);
    let (_, r) = ask(&e, &f, "198.18.1.2", &norec, 220);
    assert_eq!(r[3] & 0xf, 5);
    let (o, r) = ask(&e, &f, "198.18.2.2", &norec, 220);
    assert!(matches!(o, Outcome::Reply { info, .. } if info.cached));
    assert_eq!(ttls(&r), vec![180, 180]);
    // Expired: back to the resolver.
    let (o, _) = ask(&e, &f, "198.18.1.2", &q2, 400);
    assert_eq!(o, Outcome::Resolve);
}

#[test]
fn large_cached_answer_truncates_for_small_clients() {
    let e = engine();
    let mut f = forwarder(CacheConfig::default());
    let q = query(1, "big.example.", 1, true, true);
    let full = resolve_through(&e, &mut f, "198.18.1.1", &q, 100, 60, 0);
    // 100 A records are 1,600 octets: over the client's 1,232, so TC=1 for it too.
    assert_eq!(full[2] & 0x02, 0x02);
    assert!(full.len() <= 1232);
    // Without EDNS: 512 octets, TC=1, no RRset split (so no answers at all).
    let (o, r) = ask(
        &e,
        &f,
        "198.18.1.1",
        &query(2, "big.example.", 1, true, false),
        10,
    );
    assert!(matches!(o, Outcome::Reply { info, .. } if info.truncated && info.cached));
    assert!(r.len() <= 512);
    assert_eq!(r[2] & 0x02, 0x02);
    assert!(Message::parse(&r).unwrap().answer.is_empty());
    // Over TCP: all of it, TTLs counted down.
    let mut out = vec![0u8; 65535];
    let tcp = Request {
        transport: Transport::Tcp,
        ..req("198.18.1.1", 10)
    };
    let Outcome::Reply { len, .. } = e.handle_query_with(
        &tcp,
        &query(3, "big.example.", 1, true, false),
        &mut out,
        f.cache().as_ref(),
    ) else {
        panic!()
    };
    let t = ttls(&out[..len]);
    assert_eq!(t.len(), 100);
    assert!(t.iter().all(|&x| x == 50));
}

#[test]
fn stale_answers_carry_ede_3() {
    let e = engine();
    let mut f = forwarder(CacheConfig {
        serve_expired: true,
        ..CacheConfig::default()
    });
    let q = query(1, "old.example.", 1, true, true);
    resolve_through(&e, &mut f, "198.18.1.1", &q, 1, 10, 0);
    let (o, r) = ask(&e, &f, "198.18.1.1", &q, 100);
    let Outcome::Reply { info, .. } = o else {
        panic!("{o:?}")
    };
    assert!(
        info.cached && info.refresh,
        "the first stale hit asks for a refresh"
    );
    assert_eq!(ttls(&r), vec![30]);
    // OPT with one option: EDE (15), length 2, INFO-CODE 3.
    assert!(
        r.ends_with(&[0, 6, 0, 15, 0, 2, 0, 3]),
        "{:02x?}",
        &r[r.len() - 12..]
    );
    // Without EDNS the client gets the answer without an OPT.
    let (_, r) = ask(
        &e,
        &f,
        "198.18.1.1",
        &query(2, "old.example.", 1, true, false),
        100,
    );
    assert_eq!(&r[10..12], &[0, 0]);
    assert_eq!(ttls(&r), vec![30]);
}
