//! The forwarder's tests: the helpers every part's tests share, and the core (coalescing,
//! matching replies, retries, caching, stale answers, reloads).

use super::*;
use crate::cache::{CacheConfig, Lookup};
use crate::msg::Message;
use alloc::vec;
use core::cell::RefCell;
use skua_engine::wire::flags;

type TestCache = Cache<RefCell<MsgShard>, RefCell<SetShard>>;
type Fwd = Forwarder<u32, RefCell<MsgShard>, RefCell<SetShard>>;

/// A counter as randomness: predictable, and every ID differs.
struct Seq(u32);
impl Entropy for Seq {
    fn u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12345);
        self.0
    }
}

fn up(n: u8) -> SocketAddr {
    SocketAddr::from(([198, 18, 0, n], 53))
}

fn zone(name: &[u8], kind: ZoneKind, ups: &[u8], id: u32) -> ZoneConfig {
    ZoneConfig {
        name: name.to_vec(),
        kind,
        upstreams: ups
            .iter()
            .map(|&n| Upstream {
                addr: up(n),
                tls_name: None,
            })
            .collect(),
        no_cache: false,
        first: false,
        tls: false,
        tcp: false,
        id,
    }
}

fn fwd(zones: Vec<ZoneConfig>, cache: CacheConfig) -> Fwd {
    let cfg = ForwardConfig {
        zones,
        ..ForwardConfig::default()
    };
    // One thread: the RefCell shards make the cache !Sync, which is the point.
    #[allow(clippy::arc_with_non_send_sync)]
    let cache = Arc::new(TestCache::new(cache));
    Forwarder::new(cfg, cache)
}

const WWW: &[u8] = b"\x03www\x07example\x00";
const EXAMPLE: &[u8] = b"\x07example\x00";

fn q(name: &[u8], qtype: u16) -> Question {
    Question {
        name: name.to_vec(),
        qtype,
        qclass: 1,
    }
}

/// A reply to `query` (the transmitted bytes): same ID and question, `rcode`, the
/// records given as (owner, type, ttl, rdata) in answer and authority.
fn reply(
    query: &[u8],
    rcode: u16,
    tc: bool,
    answer: &[(&[u8], u16, u32, &[u8])],
    auth: &[(&[u8], u16, u32, &[u8])],
) -> Vec<u8> {
    let qm = Message::parse(query).unwrap();
    let qq = qm.question.unwrap();
    let mut m = Vec::new();
    m.extend_from_slice(&qm.id.to_be_bytes());
    let f = 0x8000 | (qm.flags & flags::RD) | flags::RA | rcode | if tc { flags::TC } else { 0 };
    m.extend_from_slice(&f.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    m.extend_from_slice(&(answer.len() as u16).to_be_bytes());
    m.extend_from_slice(&(auth.len() as u16).to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&qq.name);
    m.extend_from_slice(&qq.qtype.to_be_bytes());
    m.extend_from_slice(&qq.qclass.to_be_bytes());
    for (o, t, ttl, rd) in answer.iter().chain(auth) {
        m.extend_from_slice(o);
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&[0, 1]);
        m.extend_from_slice(&ttl.to_be_bytes());
        m.extend_from_slice(&(rd.len() as u16).to_be_bytes());
        m.extend_from_slice(rd);
    }
    m
}

/// The question of a transmitted query: lower-cased name, type.
fn question_of(t: &Transmit) -> (Vec<u8>, u16) {
    let q = Message::parse(&t.bytes).unwrap().question.unwrap();
    (q.name.to_ascii_lowercase(), q.qtype)
}

/// The next event that is not a cancellation.
fn next(f: &mut Fwd) -> Option<Event<u32>> {
    loop {
        match f.poll_event() {
            Some(Event::Cancel(_)) => continue,
            e => return e,
        }
    }
}

fn transmit(f: &mut Fwd) -> Transmit {
    match next(f) {
        Some(Event::Transmit(t)) => t,
        other => panic!("expected a transmit, got {other:?}"),
    }
}

fn answer(f: &mut Fwd) -> Answer<u32> {
    match next(f) {
        Some(Event::Answer(a)) => a,
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn rcode_of(a: &Answer<u32>) -> u16 {
    a.rendered.flags & 0xf
}

fn soa(minimum: u32) -> Vec<u8> {
    let mut v = b"\x02ns\x07example\x00\x05admin\x07example\x00".to_vec();
    for x in [1u32, 2, 3, 4, minimum] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    v
}

#[test]
fn forwards_coalesces_and_caches() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(1);
    assert_eq!(
        f.resolve(q(WWW, 1), Some(10), 1000, &mut rng),
        Start::Pending
    );
    let t = transmit(&mut f);
    assert_eq!(t.to, up(1));
    assert_eq!(t.transport, Transport::Udp);
    let sent = Message::parse(&t.bytes).unwrap();
    assert_eq!(sent.flags & flags::RD, flags::RD);
    assert_eq!(sent.opt.unwrap().udp_size, 1232);
    // Same question while in flight: no second upstream query.
    assert_eq!(
        f.resolve(q(WWW, 1), Some(11), 1001, &mut rng),
        Start::Pending
    );
    assert!(next(&mut f).is_none());
    let r = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
    f.reply(t.token, up(1), &r, 1020, &mut rng);
    let a = answer(&mut f);
    assert_eq!(a.clients, vec![10, 11]);
    assert_eq!(rcode_of(&a), 0);
    assert_eq!(a.rendered.body.counts, [0, 1, 0, 0, 0, 0]);
    assert_eq!(f.stats.coalesced, 1);
    // Cached: a hit 100 s later has TTL 200.
    let key = Key::new(WWW, 1, 1);
    let ttl = f.cache().lookup(&key, 101, |h| {
        let mut tail = h.tail.to_vec();
        crate::render::patch_ttls(&mut tail, h.ttls, 101, None);
        u32::from_be_bytes([tail[6], tail[7], tail[8], tail[9]])
    });
    assert_eq!(ttl, Ok(200));
    // The upstream's RTT was learnt.
    assert_eq!(f.infra().hosts()[0].replies, 1);
}

#[test]
fn spoofed_replies_are_ignored() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
        CacheConfig::default(),
    );
    f.config.use_caps_for_id = true;
    let mut rng = Seq(7);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    let sent = Message::parse(&t.bytes).unwrap();
    // 0x20: the name went out in mixed case.
    let sent_name = sent.question.unwrap().name;
    assert!(sent_name.eq_ignore_ascii_case(WWW) && sent_name != WWW);
    let good = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
    let poison = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[6, 6, 6, 6])], &[]);
    // Wrong source address.
    f.reply(t.token, up(9), &poison, 5, &mut rng);
    // Wrong ID.
    let mut bad_id = poison.clone();
    bad_id[0] ^= 0xff;
    f.reply(t.token, up(1), &bad_id, 5, &mut rng);
    // Question in the wrong case (the attacker doesn't know the 0x20 bits).
    let mut bad_case = poison.clone();
    bad_case[13..16].copy_from_slice(b"www");
    assert_ne!(
        bad_case[13..16],
        t.bytes[13..16],
        "this seed mixes the case of www"
    );
    f.reply(t.token, up(1), &bad_case, 5, &mut rng);
    // Unknown token.
    f.reply(999, up(1), &poison, 5, &mut rng);
    assert_eq!(f.stats.unwanted, 4);
    assert!(next(&mut f).is_none());
    f.reply(t.token, up(1), &good, 6, &mut rng);
    let a = answer(&mut f);
    assert_eq!(a.rendered.body.tail[12..16], [192, 0, 2, 1]);
}

#[test]
fn out_of_bailiwick_is_not_cached_and_chain_crosses_zones() {
    let mut f = fwd(
        vec![
            zone(b"\x07example\x00", ZoneKind::Forward, &[1], 1),
            zone(b"\x05other\x00", ZoneKind::Forward, &[2], 2),
        ],
        CacheConfig::default(),
    );
    let mut rng = Seq(3);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    // example.'s upstream answers with a CNAME into other. and (poison) an address for
    // the target and for an unrelated name of other.
    let target: &[u8] = b"\x03cdn\x05other\x00";
    let r = reply(
        &t.bytes,
        0,
        false,
        &[
            (WWW, 5, 300, target),
            (target, 1, 300, &[6, 6, 6, 6]),
            (b"\x01x\x05other\x00", 1, 300, &[6, 6, 6, 7]),
        ],
        &[],
    );
    f.reply(t.token, up(1), &r, 10, &mut rng);
    // The target is asked of other.'s upstream.
    let t2 = transmit(&mut f);
    assert_eq!(t2.to, up(2));
    assert_eq!(
        Message::parse(&t2.bytes).unwrap().question.unwrap().name,
        target
    );
    // Nothing of other. was cached from example.'s reply.
    assert!(f.cache().rrset(target, 1, 1, 0).is_none());
    assert!(f.cache().rrset(b"\x01x\x05other\x00", 1, 1, 0).is_none());
    let r2 = reply(
        &t2.bytes,
        0,
        false,
        &[(target, 1, 60, &[192, 0, 2, 7])],
        &[],
    );
    f.reply(t2.token, up(2), &r2, 20, &mut rng);
    let a = answer(&mut f);
    assert_eq!(a.clients, vec![1]);
    assert_eq!(a.rendered.body.counts, [0, 2, 0, 0, 0, 0]);
    assert!(a.rendered.body.tail.ends_with(&[192, 0, 2, 7]));
    // Both questions are cached.
    assert!(f.cache().lookup(&Key::new(WWW, 1, 1), 0, |_| ()).is_ok());
    assert!(f.cache().lookup(&Key::new(target, 1, 1), 0, |_| ()).is_ok());
}

#[test]
fn timeouts_retry_then_servfail_with_ede() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1, 2], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(5);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t1 = transmit(&mut f);
    let due = f.next_timer().unwrap();
    assert_eq!(due, 376);
    f.tick(due, &mut rng);
    let t2 = transmit(&mut f);
    assert_ne!(t1.to, t2.to, "the other upstream next");
    // Nobody answers: SERVFAIL with EDE 22 within the budget.
    let a = loop {
        let now = f.next_timer().unwrap();
        assert!(now <= 5_000);
        f.tick(now, &mut rng);
        match next(&mut f) {
            Some(Event::Transmit(_)) => continue,
            Some(Event::Answer(a)) => break a,
            Some(Event::Cancel(_)) | None => panic!("nothing at {now}"),
        }
    };
    assert_eq!(rcode_of(&a), 2);
    assert_eq!(a.rendered.ede, Some(ede::NO_REACHABLE_AUTHORITY));
    assert_eq!(f.in_flight(), 0);
    assert_eq!(f.next_timer(), None);
    // Every query of the question is over: a reply now is unwanted.
    let late = reply(&t1.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
    f.reply(t1.token, t1.to, &late, 6_000, &mut rng);
    assert_eq!(f.stats.unwanted, 1);
}

#[test]
fn a_late_reply_to_a_timed_out_query_still_answers() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1, 2], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(5);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t1 = transmit(&mut f);
    f.tick(f.next_timer().unwrap(), &mut rng);
    let t2 = transmit(&mut f);
    // The first query's reply arrives after its timeout, while the retry is out.
    let late = reply(&t1.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
    f.reply(t1.token, t1.to, &late, 400, &mut rng);
    let mut cancelled = Vec::new();
    let a = loop {
        match f.poll_event() {
            Some(Event::Cancel(t)) => cancelled.push(t),
            Some(Event::Answer(a)) => break a,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(rcode_of(&a), 0);
    assert!(
        cancelled.contains(&t1.token) && cancelled.contains(&t2.token),
        "{cancelled:?}"
    );
    assert_eq!(f.stats.unwanted, 0);
    assert_eq!(f.next_timer(), None);
}

#[test]
fn truncation_goes_to_tcp_and_errors_to_the_next_upstream() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1, 2], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(9);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    f.reply(
        t.token,
        t.to,
        &reply(&t.bytes, 0, true, &[], &[]),
        5,
        &mut rng,
    );
    let tcp = transmit(&mut f);
    assert_eq!((tcp.to, tcp.transport.clone()), (t.to, Transport::Tcp));
    // SERVFAIL from it: the other upstream, over UDP again.
    f.reply(
        tcp.token,
        tcp.to,
        &reply(&tcp.bytes, 2, false, &[], &[]),
        9,
        &mut rng,
    );
    let other = transmit(&mut f);
    assert_ne!(other.to, t.to);
    // Garbage under the query's ID (a header, then a question cut short): an error
    // too; then both are tried and a second round begins.
    let mut garbage = other.bytes[..16].to_vec();
    garbage[2] |= 0x80;
    assert!(Message::parse(&garbage).is_err());
    f.reply(other.token, other.to, &garbage, 12, &mut rng);
    let again = transmit(&mut f);
    f.reply(
        again.token,
        again.to,
        &reply(
            &again.bytes,
            0,
            false,
            &[(WWW, 1, 30, &[192, 0, 2, 3])],
            &[],
        ),
        15,
        &mut rng,
    );
    assert_eq!(rcode_of(&answer(&mut f)), 0);
}

#[test]
fn negative_answers_cached_for_soa_minimum() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(11);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    let s = soa(120);
    f.reply(
        t.token,
        up(1),
        &reply(
            &t.bytes,
            3,
            false,
            &[],
            &[(b"\x07example\x00", 6, 3600, &s)],
        ),
        0,
        &mut rng,
    );
    let a = answer(&mut f);
    assert_eq!(rcode_of(&a), 3);
    assert_eq!(a.rendered.body.counts, [0, 0, 0, 1, 0, 0]);
    let key = Key::new(WWW, 1, 1);
    assert!(
        f.cache()
            .lookup(&key, 119, |h| h.flags & 0xf)
            .is_ok_and(|r| r == 3)
    );
    assert_eq!(f.cache().lookup(&key, 120, |_| ()), Err(Lookup::Miss));
}

#[test]
fn negative_ttl_is_not_the_cached_soa_ttl() {
    // The zone's SOA is cached from an SOA query (TTL 3600, MINIMUM 120); a NODATA
    // later carries the same SOA: the negative answer still goes out, and is cached,
    // with min(TTL, MINIMUM) = 120 (RFC 2308 §5), and the SOA query keeps its 3600.
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(19);
    let ex: &[u8] = b"\x07example\x00";
    let s = soa(120);
    let _ = f.resolve(q(ex, 6), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    f.reply(
        t.token,
        up(1),
        &reply(&t.bytes, 0, false, &[(ex, 6, 3600, &s)], &[]),
        0,
        &mut rng,
    );
    assert_eq!(answer(&mut f).rendered.ttl, 3600);
    let _ = f.resolve(q(WWW, 16), Some(2), 1000, &mut rng);
    let t = transmit(&mut f);
    f.reply(
        t.token,
        up(1),
        &reply(&t.bytes, 0, false, &[], &[(ex, 6, 3600, &s)]),
        1000,
        &mut rng,
    );
    let a = answer(&mut f);
    assert_eq!(a.rendered.ttl, 120);
    // The SOA's TTL as sent at 1 s, the time of the answer.
    let mut tail = a.rendered.body.tail.clone();
    crate::render::patch_ttls(&mut tail, &a.rendered.body.ttls, 1, None);
    let at = usize::from(u16::from_le_bytes([
        a.rendered.body.ttls[0],
        a.rendered.body.ttls[1],
    ]));
    assert_eq!(
        u32::from_be_bytes([tail[at], tail[at + 1], tail[at + 2], tail[at + 3]]),
        120
    );
    assert_eq!(
        f.cache().lookup(&Key::new(WWW, 16, 1), 121, |_| ()),
        Err(Lookup::Miss)
    );
    // The SOA question is still answered from the cache with its own TTL.
    assert_eq!(
        f.cache().rrset(ex, 6, 1, 2).map(|(set, _)| set.ttl),
        Some(3600)
    );
}

#[test]
fn ns_answer_carries_the_addresses_of_its_servers() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(29);
    let ex: &[u8] = b"\x07example\x00";
    let ns1: &[u8] = b"\x03ns1\x07example\x00";
    let _ = f.resolve(q(ex, 2), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    let mut r = reply(&t.bytes, 0, false, &[(ex, 2, 3600, ns1)], &[]);
    // One additional record: ns1's address.
    r[11] = 1;
    r.extend_from_slice(ns1);
    r.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 53]);
    f.reply(t.token, up(1), &r, 0, &mut rng);
    let a = answer(&mut f);
    assert_eq!(a.rendered.body.counts, [0, 1, 0, 0, 0, 1]);
    assert!(a.rendered.body.tail.ends_with(&[192, 0, 2, 53]));
    // The message lives as long as its shortest RRset, the address's 60 s.
    assert_eq!(a.rendered.ttl, 60);
    // Additional data answers no question.
    assert!(f.cache().rrset(ns1, 1, 1, 0).is_none());
}

#[test]
fn ds_is_asked_in_the_parent_zone() {
    // sub.example. and example. are stub zones on different servers: the DS of
    // sub.example. lives in example. (RFC 4035 §2.4), the rest of sub.example. in it.
    let sub: &[u8] = b"\x03sub\x07example\x00";
    let mut f = fwd(
        vec![
            zone(b"\x07example\x00", ZoneKind::Stub, &[1], 1),
            zone(sub, ZoneKind::Stub, &[2], 2),
        ],
        CacheConfig::default(),
    );
    let mut rng = Seq(23);
    let _ = f.resolve(q(sub, 43), Some(1), 0, &mut rng);
    assert_eq!(transmit(&mut f).to, up(1));
    let _ = f.resolve(q(sub, 48), Some(2), 0, &mut rng);
    assert_eq!(transmit(&mut f).to, up(2));
    assert_eq!(f.zone_for_question(b"\x00", 43), None);
    assert_eq!(
        f.zone_for_question(b"\x01x\x03sub\x07example\x00", 43),
        Some(1)
    );
}

#[test]
fn stub_queries_go_without_rd_and_no_cache_zones_are_not_cached() {
    let mut nc = zone(b"\x07example\x00", ZoneKind::Stub, &[1], 1);
    nc.no_cache = true;
    let mut f = fwd(vec![nc], CacheConfig::default());
    let mut rng = Seq(13);
    assert_eq!(
        f.resolve(q(b"\x01x\x05other\x00", 1), Some(4), 0, &mut rng),
        Start::NoZone(4)
    );
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    assert_eq!(Message::parse(&t.bytes).unwrap().flags & flags::RD, 0);
    f.reply(
        t.token,
        up(1),
        &reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]),
        1000,
        &mut rng,
    );
    assert_eq!(rcode_of(&answer(&mut f)), 0);
    assert_eq!(
        f.cache().lookup(&Key::new(WWW, 1, 1), 1, |_| ()),
        Err(Lookup::Miss)
    );
    assert!(f.cache().rrset(WWW, 1, 1, 1).is_none());
}

#[test]
fn stale_answer_when_upstream_is_down() {
    let cache = CacheConfig {
        serve_expired: true,
        ..CacheConfig::default()
    };
    let mut f = fwd(vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)], cache);
    let mut rng = Seq(17);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    f.reply(
        t.token,
        up(1),
        &reply(&t.bytes, 0, false, &[(WWW, 1, 10, &[192, 0, 2, 1])], &[]),
        0,
        &mut rng,
    );
    let _ = answer(&mut f);
    // Expired at 10 s; the upstream is down now.
    let _ = f.resolve(q(WWW, 1), Some(2), 20_000, &mut rng);
    let mut now = 20_000;
    let a = loop {
        match next(&mut f) {
            Some(Event::Transmit(_)) | Some(Event::Cancel(_)) => {}
            Some(Event::Answer(a)) => break a,
            None => {
                now = f.next_timer().unwrap();
                f.tick(now, &mut rng);
            }
        }
    };
    assert_eq!(a.clients, vec![2]);
    assert_eq!(a.fixed_ttl, Some(30));
    assert_eq!(a.rendered.ede, Some(ede::STALE_ANSWER));
    assert_eq!(rcode_of(&a), 0);
    assert!(now <= 25_000);
}

#[test]
fn a_reload_ends_the_queries_of_a_zone_that_changed() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(79);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    // "." gets another upstream: the question asked of the old one fails, and its
    // reply, if one comes, is not taken (it would be judged as the new zone's).
    let mut cfg = f.config().clone();
    cfg.zones[0] = zone(b"\x00", ZoneKind::Forward, &[2], 2);
    f.reconfigure(cfg);
    assert!(matches!(f.poll_event(), Some(Event::Cancel(c)) if c == t.token));
    assert!(!f.is_outstanding(t.token));
    f.tick(10, &mut rng);
    let a = answer(&mut f);
    assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![1], 2));
    let r = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
    f.reply(t.token, t.to, &r, 11, &mut rng);
    assert_eq!(f.stats.unwanted, 1);
    assert!(f.cache().lookup(&Key::new(WWW, 1, 1), 0, |_| ()).is_err());
}

#[test]
fn short_or_other_id_datagrams_leave_the_query_waiting() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1, 2], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(76);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    // From the upstream's own address and port (an off-path sender guessed the port):
    // shorter than a header, and garbage under another ID.
    f.reply(t.token, t.to, b"\x00\x01garbage", 5, &mut rng);
    let mut other_id = vec![0u8; 40];
    other_id[0] = t.bytes[0] ^ 0x5a;
    other_id[1] = t.bytes[1];
    other_id[2] = 0xff;
    f.reply(t.token, t.to, &other_id, 6, &mut rng);
    assert_eq!(f.stats.unwanted, 2);
    assert!(next(&mut f).is_none(), "nothing sent, nothing answered");
    assert!(f.is_outstanding(t.token));
    assert!(f.infra().hosts().iter().all(|h| h.errors == 0));
    let good = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
    f.reply(t.token, t.to, &good, 7, &mut rng);
    let a = answer(&mut f);
    assert_eq!(rcode_of(&a), 0);
    assert!(a.rendered.body.tail.ends_with(&[192, 0, 2, 1]));
}

mod chains;
mod hosts;
