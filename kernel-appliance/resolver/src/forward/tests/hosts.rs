//! Tests of upstreams given by name (`forward-host:`/`stub-host:`).

use super::*;
use crate::rrset::RrSet;
use core::net::{IpAddr, Ipv6Addr};

// forward-host / stub-host.

const NS_NET: &[u8] = b"\x02ns\x03net\x00";

fn host(zone: &[u8], name: &[u8], port: u16) -> HostConfig {
    HostConfig {
        zone: zone.to_vec(),
        name: name.to_vec(),
        port,
        tls_name: None,
    }
}

/// "." forwards to up(1); "example." has only the host ns.net. on port 5353.
fn hosted(cache: CacheConfig) -> Fwd {
    let mut f = fwd(
        vec![
            zone(b"\x00", ZoneKind::Forward, &[1], 1),
            zone(EXAMPLE, ZoneKind::Forward, &[], 2),
        ],
        cache,
    );
    let mut cfg = f.config().clone();
    cfg.hosts = vec![host(EXAMPLE, NS_NET, 5353)];
    f.reconfigure(cfg);
    f
}

/// Every transmit queued, by question.
fn transmits(f: &mut Fwd) -> Vec<Transmit> {
    let mut out = Vec::new();
    while let Some(e) = f.poll_event() {
        match e {
            Event::Transmit(t) => out.push(t),
            Event::Cancel(_) => {}
            Event::Answer(a) => panic!("unexpected answer {a:?}"),
        }
    }
    out
}

fn take(ts: &mut Vec<Transmit>, name: &[u8], qtype: u16) -> Transmit {
    let i = ts
        .iter()
        .position(|t| question_of(t) == (name.to_vec(), qtype))
        .unwrap_or_else(|| panic!("no query for {name:?}/{qtype} in {ts:?}"));
    ts.remove(i)
}

fn v4(a: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((a, port))
}

fn nodata(t: &Transmit) -> Vec<u8> {
    reply(
        &t.bytes,
        0,
        false,
        &[],
        &[(b"\x03net\x00", 6, 60, &soa(60))],
    )
}

#[test]
fn host_resolved_through_its_zone_before_the_question_goes() {
    let mut f = hosted(CacheConfig::default());
    let mut rng = Seq(41);
    let g0 = f.generation();
    // Due at once: the daemon's next tick resolves it.
    assert_eq!(f.next_timer(), Some(0));
    // A question for example. before any tick: the host is resolved first (A and AAAA,
    // through ".", the zone that holds ns.net.) and the question waits.
    assert_eq!(f.resolve(q(WWW, 1), Some(1), 0, &mut rng), Start::Pending);
    let mut ts = transmits(&mut f);
    assert_eq!(ts.len(), 2, "{ts:?}");
    let a = take(&mut ts, NS_NET, rtype::A);
    let aaaa = take(&mut ts, NS_NET, rtype::AAAA);
    assert_eq!((a.to, aaaa.to), (up(1), up(1)));
    let st = &f.hosts()[0];
    assert!(st.resolving && st.addrs.is_empty() && st.plan == HostPlan::Via(0));
    // The parked question's budget is a timer; the hosts' next resolution is not
    // scheduled while under way.
    assert!(f.next_timer().unwrap() <= 5_000);
    // The A record arrives: the question goes to that address, on the host's port.
    let r = reply(
        &a.bytes,
        0,
        false,
        &[(NS_NET, 1, 300, &[198, 18, 0, 9])],
        &[],
    );
    f.reply(a.token, up(1), &r, 10, &mut rng);
    let t = transmit(&mut f);
    assert_eq!(t.to, v4([198, 18, 0, 9], 5353));
    assert_eq!(question_of(&t), (WWW.to_vec(), 1));
    assert_eq!(
        f.config().zones[1].upstreams,
        vec![Upstream {
            addr: v4([198, 18, 0, 9], 5353),
            tls_name: None
        }]
    );
    assert!(f.generation() > g0);
    f.reply(
        t.token,
        t.to,
        &reply(&t.bytes, 0, false, &[(WWW, 1, 60, &[192, 0, 2, 80])], &[]),
        20,
        &mut rng,
    );
    let ans = answer(&mut f);
    assert_eq!((ans.clients.clone(), rcode_of(&ans)), (vec![1], 0));
    // No AAAA: the IPv4 address stays the only one.
    f.reply(aaaa.token, up(1), &nodata(&aaaa), 30, &mut rng);
    let st = &f.hosts()[0];
    assert_eq!(st.addrs, vec![v4([198, 18, 0, 9], 5353)]);
    assert!(st.answered && !st.resolving && st.failures == 0);
    // Next resolution: the A record's TTL (300 s), the NODATA's (60 s, the SOA's).
    assert_eq!(st.next_ms, Some(60_000));
    // The host's answer went into the cache like any other.
    assert!(f.cache().rrset(NS_NET, 1, 1, 1).is_some());
    // RTT is kept for the resolved address.
    assert!(
        f.infra()
            .hosts()
            .iter()
            .any(|h| h.addr == v4([198, 18, 0, 9], 5353) && h.replies == 1)
    );
}

#[test]
fn a_host_contributes_a_bounded_sorted_set_of_addresses() {
    let mut f = hosted(CacheConfig::default());
    f.config.do_ip6 = false;
    let mut rng = Seq(43);
    f.tick(0, &mut rng);
    let mut ts = transmits(&mut f);
    let a = take(&mut ts, NS_NET, rtype::A);
    // 300 addresses, in descending order (a hostile or rotating upstream).
    let addrs: Vec<[u8; 4]> = (0..300u16)
        .rev()
        .map(|i| [198, 18, (i >> 8) as u8, i as u8])
        .collect();
    let rrs: Vec<(&[u8], u16, u32, &[u8])> = addrs
        .iter()
        .map(|x| (NS_NET, 1u16, 300u32, &x[..]))
        .collect();
    let r = reply(&a.bytes, 0, false, &rrs, &[]);
    f.reply(a.token, up(1), &r, 10, &mut rng);
    let ups: Vec<SocketAddr> = f.config().zones[1]
        .upstreams
        .iter()
        .map(|u| u.addr)
        .collect();
    let want: Vec<SocketAddr> = (0..MAX_HOST_ADDRS as u16)
        .map(|i| v4([198, 18, 0, i as u8], 5353))
        .collect();
    assert_eq!(ups, want);
}

#[test]
fn host_re_resolved_at_ttl_keeping_its_addresses_meanwhile() {
    let mut f = hosted(CacheConfig::default());
    f.config.do_ip6 = false;
    let cfg = f.config().clone();
    f.reconfigure(cfg);
    let mut rng = Seq(43);
    f.tick(0, &mut rng);
    let t = transmit(&mut f);
    assert_eq!(question_of(&t), (NS_NET.to_vec(), rtype::A));
    assert!(next(&mut f).is_none(), "do-ip6: no: no AAAA query");
    let r = reply(
        &t.bytes,
        0,
        false,
        &[(NS_NET, 1, 10, &[198, 18, 0, 9])],
        &[],
    );
    f.reply(t.token, up(1), &r, 0, &mut rng);
    assert_eq!(f.hosts()[0].next_ms, Some(10_000));
    assert_eq!(f.next_timer(), Some(10_000));
    // Nothing before the TTL runs out.
    f.tick(9_999, &mut rng);
    assert!(next(&mut f).is_none());
    f.tick(10_000, &mut rng);
    let t = transmit(&mut f);
    assert_eq!(
        (question_of(&t), t.to),
        ((NS_NET.to_vec(), rtype::A), up(1))
    );
    assert!(f.hosts()[0].resolving);
    // Meanwhile questions still go to the old address.
    let _ = f.resolve(q(WWW, 1), Some(1), 10_001, &mut rng);
    let w = transmit(&mut f);
    assert_eq!(w.to, v4([198, 18, 0, 9], 5353));
    let r = reply(&w.bytes, 0, false, &[(WWW, 1, 60, &[192, 0, 2, 80])], &[]);
    f.reply(w.token, w.to, &r, 10_002, &mut rng);
    assert_eq!(rcode_of(&answer(&mut f)), 0);
    // The new address replaces the old one.
    let r = reply(
        &t.bytes,
        0,
        false,
        &[(NS_NET, 1, 10, &[198, 18, 0, 10])],
        &[],
    );
    f.reply(t.token, up(1), &r, 10_010, &mut rng);
    assert_eq!(
        f.config().zones[1]
            .upstreams
            .iter()
            .map(|u| u.addr)
            .collect::<Vec<_>>(),
        vec![v4([198, 18, 0, 10], 5353)]
    );
    // The old address's RTT record goes with it.
    assert!(
        !f.infra()
            .hosts()
            .iter()
            .any(|h| h.addr == v4([198, 18, 0, 9], 5353))
    );
    // A TTL below the floor: the next resolution after HOST_MIN_REFRESH_MS.
    f.tick(20_010, &mut rng);
    let t = transmit(&mut f);
    let r = reply(
        &t.bytes,
        0,
        false,
        &[(NS_NET, 1, 0, &[198, 18, 0, 10])],
        &[],
    );
    f.reply(t.token, up(1), &r, 20_020, &mut rng);
    assert_eq!(f.hosts()[0].next_ms, Some(20_020 + HOST_MIN_REFRESH_MS));
    // A failed resolution (the upstream silent) keeps the address, retried after 1 s,
    // then 2 s.
    f.tick(25_020, &mut rng);
    let mut now = 25_020;
    while f.hosts()[0].resolving {
        let _ = transmits(&mut f);
        now = f.next_timer().unwrap();
        f.tick(now, &mut rng);
    }
    let _ = transmits(&mut f);
    let st = &f.hosts()[0];
    assert_eq!(st.failures, 1);
    assert_eq!(st.addrs, vec![v4([198, 18, 0, 10], 5353)]);
    assert_eq!(st.next_ms, Some(now + 1_000));
    assert!(now - 25_020 <= 5_000);
    // The name stops resolving (NXDOMAIN): its address is dropped.
    f.tick(now + 1_000, &mut rng);
    let t = transmit(&mut f);
    let r = reply(
        &t.bytes,
        3,
        false,
        &[],
        &[(b"\x03net\x00", 6, 30, &soa(30))],
    );
    f.reply(t.token, up(1), &r, now + 1_001, &mut rng);
    let st = &f.hosts()[0];
    assert!(st.addrs.is_empty() && st.answered && st.failures == 0);
    assert!(f.config().zones[1].upstreams.is_empty());
    // Now a question for the zone fails at once: SERVFAIL, EDE 22, nothing sent.
    let _ = f.resolve(
        q(b"\x01x\x07example\x00", 1),
        Some(7),
        now + 1_002,
        &mut rng,
    );
    let a = answer(&mut f);
    assert_eq!(
        (a.clients.clone(), rcode_of(&a), a.rendered.ede),
        (vec![7], 2, Some(ede::NO_REACHABLE_AUTHORITY))
    );
}

/// `w{i}.example.` in wire form.
fn numbered(i: usize) -> Vec<u8> {
    let label = alloc::format!("w{i}");
    let mut n = vec![label.len() as u8];
    n.extend_from_slice(label.as_bytes());
    n.extend_from_slice(EXAMPLE);
    n
}

#[test]
fn many_parked_questions_cost_linear_work() {
    // 2,000 questions parked on example., whose only upstream is a host being
    // resolved: a tick, then the host's address, look at each of them a bounded number
    // of times (once per zone, not once per parked question).
    const N: usize = 2_000;
    let mut f = hosted(CacheConfig::default());
    let mut cfg = f.config().clone();
    cfg.do_ip6 = false;
    f.reconfigure(cfg);
    let mut rng = Seq(67);
    for i in 0..N {
        assert_eq!(
            f.resolve(q(&numbered(i), 1), Some(i as u32), 0, &mut rng),
            Start::Pending
        );
    }
    let t = transmit(&mut f);
    assert_eq!(question_of(&t), (NS_NET.to_vec(), rtype::A));
    assert!(next(&mut f).is_none(), "every question parked");
    assert_eq!(f.in_flight(), N + 1);
    f.unpark_visits = 0;
    f.tick(100, &mut rng);
    assert!(next(&mut f).is_none());
    assert!(
        f.unpark_visits <= N as u64,
        "a tick looked at parked questions {} times",
        f.unpark_visits
    );
    let r = reply(
        &t.bytes,
        0,
        false,
        &[(NS_NET, 1, 300, &[198, 18, 0, 9])],
        &[],
    );
    f.reply(t.token, up(1), &r, 110, &mut rng);
    let ts = transmits(&mut f);
    assert_eq!(ts.len(), N);
    assert!(ts.iter().all(|t| t.to == v4([198, 18, 0, 9], 5353)));
    assert!(f.unpark_visits <= 2 * N as u64, "{}", f.unpark_visits);
    // None is parked any more: the next tick looks at none.
    f.unpark_visits = 0;
    f.tick(120, &mut rng);
    assert_eq!(f.unpark_visits, 0);
}

/// `"."` forwards to up(1); zones `z0.` .. `z{n-1}.` have a host each and no address:
/// `z0.`'s is ns.net. (in "."), `z{j}.`'s is `ns.z{j-1}.`, inside the zone before it.
fn chain(n: usize) -> Fwd {
    let mut zones = vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)];
    let mut hosts = Vec::new();
    for j in 0..n {
        zones.push(zone(&chain_zone(j), ZoneKind::Forward, &[], j as u32 + 2));
        hosts.push(host(&chain_zone(j), &chain_host(j), 53));
    }
    let mut f = fwd(zones, CacheConfig::default());
    let mut cfg = f.config().clone();
    cfg.hosts = hosts;
    cfg.do_ip6 = false;
    f.reconfigure(cfg);
    f
}

/// `z{j}.` in wire form.
fn chain_zone(j: usize) -> Vec<u8> {
    let label = alloc::format!("z{j}");
    let mut n = vec![label.len() as u8];
    n.extend_from_slice(label.as_bytes());
    n.push(0);
    n
}

/// The host of `z{j}.`: ns.net., or `ns.z{j-1}.`.
fn chain_host(j: usize) -> Vec<u8> {
    if j == 0 {
        return NS_NET.to_vec();
    }
    let mut n = b"\x02ns".to_vec();
    n.extend_from_slice(&chain_zone(j - 1));
    n
}

/// The address the host of `z{j}.` resolves to.
fn chain_addr(j: usize) -> SocketAddr {
    v4([198, 18, 1 + (j / 256) as u8, (j % 256) as u8], 53)
}

#[test]
fn a_long_chain_of_host_only_zones_resolves_in_little_stack() {
    // 1,000 zones, each with only a host whose name is inside the zone before it. A
    // question for the last one starts every host; each host's name can be asked only
    // once the zone before has its address. Starting, resolving and failing them all
    // must not nest one call per zone: this runs on a 256 KiB stack.
    const N: usize = 1_000;
    let run = || {
        let mut f = chain(N);
        let mut rng = Seq(73);
        let mut www = b"\x03www".to_vec();
        www.extend_from_slice(&chain_zone(N - 1));
        assert_eq!(f.resolve(q(&www, 1), Some(1), 0, &mut rng), Start::Pending);
        let mut ts = transmits(&mut f);
        assert_eq!(ts.len(), 1, "only ns.net. can be asked yet");
        assert!(f.hosts().iter().all(|h| h.resolving));
        let mut now = 0;
        for j in 0..N {
            let t = ts.pop().unwrap();
            assert_eq!(question_of(&t), (chain_host(j), rtype::A));
            assert_eq!(t.to, if j == 0 { up(1) } else { chain_addr(j - 1) });
            let IpAddr::V4(ip) = chain_addr(j).ip() else {
                unreachable!()
            };
            let r = reply(
                &t.bytes,
                0,
                false,
                &[(&t_name(&t), 1, 300, &ip.octets())],
                &[],
            );
            now += 1;
            f.reply(t.token, t.to, &r, now, &mut rng);
            ts = transmits(&mut f);
            assert_eq!(ts.len(), 1, "step {j}: {ts:?}");
        }
        // The question goes to the last zone's address.
        let t = ts.pop().unwrap();
        assert_eq!(
            (question_of(&t), t.to),
            ((www.clone(), 1), chain_addr(N - 1))
        );
        let r = reply(&t.bytes, 0, false, &[(&www, 1, 60, &[192, 0, 2, 1])], &[]);
        f.reply(t.token, t.to, &r, now + 1, &mut rng);
        let a = answer(&mut f);
        assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![1], 0));

        // The same chain when ns.net. has no address: every zone's host fails in turn,
        // and the question gets SERVFAIL at once.
        let mut f = chain(N);
        assert_eq!(f.resolve(q(&www, 1), Some(2), 0, &mut rng), Start::Pending);
        let t = transmit(&mut f);
        assert_eq!(question_of(&t), (NS_NET.to_vec(), rtype::A));
        let r = reply(
            &t.bytes,
            3,
            false,
            &[],
            &[(b"\x03net\x00", 6, 30, &soa(30))],
        );
        f.reply(t.token, t.to, &r, 1, &mut rng);
        let a = answer(&mut f);
        assert_eq!(
            (a.clients.clone(), rcode_of(&a), a.rendered.ede),
            (vec![2], 2, Some(ede::NO_REACHABLE_AUTHORITY))
        );
        assert_eq!(f.in_flight(), 0);
        let hs = f.hosts();
        assert!(hs[0].answered && hs[0].addrs.is_empty());
        assert!(hs[1..].iter().all(|h| h.failures == 1 && !h.resolving));
    };
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}

/// The question name of a transmitted query, as sent.
fn t_name(t: &Transmit) -> Vec<u8> {
    Message::parse(&t.bytes).unwrap().question.unwrap().name
}

#[test]
fn a_host_resolved_again_to_the_same_addresses_changes_no_generation() {
    let mut f = hosted(CacheConfig::default());
    let mut cfg = f.config().clone();
    cfg.do_ip6 = false;
    f.reconfigure(cfg);
    let mut rng = Seq(89);
    f.tick(0, &mut rng);
    let t = transmit(&mut f);
    let answer_with = |t: &Transmit, ips: &[[u8; 4]]| {
        let rrs: Vec<(&[u8], u16, u32, &[u8])> =
            ips.iter().map(|x| (NS_NET, 1u16, 10u32, &x[..])).collect();
        reply(&t.bytes, 0, false, &rrs, &[])
    };
    let g0 = f.generation();
    f.reply(
        t.token,
        up(1),
        &answer_with(&t, &[[198, 18, 0, 9], [198, 18, 0, 10]]),
        5,
        &mut rng,
    );
    let g = f.generation();
    assert!(g > g0, "the first addresses are a change");
    // At the TTL: asked again, answered with the same addresses in another order.
    // Nothing the caller publishes changed (the zones' upstreams, the hosts' addresses,
    // failures): the generation stays, and the caller republishes nothing.
    f.tick(10_000, &mut rng);
    let t = transmit(&mut f);
    assert_eq!(f.generation(), g, "starting a resolution is no change");
    f.reply(
        t.token,
        up(1),
        &answer_with(&t, &[[198, 18, 0, 10], [198, 18, 0, 9]]),
        10_005,
        &mut rng,
    );
    assert_eq!(f.generation(), g, "the same addresses are no change");
    assert_eq!(f.hosts()[0].next_ms, Some(20_000));
    // Another address is.
    f.tick(20_005, &mut rng);
    let t = transmit(&mut f);
    f.reply(
        t.token,
        up(1),
        &answer_with(&t, &[[198, 18, 0, 9]]),
        20_010,
        &mut rng,
    );
    let g2 = f.generation();
    assert!(g2 > g);
    // So is a failure (the caller logs it, and shows the failures in a row).
    f.tick(30_010, &mut rng);
    let t = transmit(&mut f);
    f.reply(
        t.token,
        up(1),
        &reply(&t.bytes, 2, false, &[], &[]),
        30_011,
        &mut rng,
    );
    while f.hosts()[0].resolving {
        let _ = transmits(&mut f);
        let now = f.next_timer().unwrap();
        f.tick(now, &mut rng);
    }
    assert_eq!(f.hosts()[0].failures, 1);
    assert!(f.generation() > g2);
}

#[test]
fn zone_with_only_hosts_fails_fast_and_never_hangs() {
    let mut f = hosted(CacheConfig::default());
    let mut rng = Seq(47);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let _ = transmits(&mut f);
    // The upstream that should resolve ns.net. never answers: the waiting question
    // gets SERVFAIL with EDE 22 within the resolver's budget.
    let mut now = 0;
    let a = loop {
        match next(&mut f) {
            Some(Event::Answer(a)) => break a,
            Some(_) => {}
            None => {
                now = f.next_timer().expect("a timer while the question waits");
                assert!(now <= 5_000, "{now}");
                f.tick(now, &mut rng);
            }
        }
    };
    assert_eq!(
        (a.clients.clone(), rcode_of(&a), a.rendered.ede),
        (vec![1], 2, Some(ede::NO_REACHABLE_AUTHORITY))
    );
    assert_eq!(f.in_flight(), 0);
    let st = &f.hosts()[0];
    assert!(!st.resolving && st.failures >= 1 && st.addrs.is_empty());
    // While the host waits for its retry, a question fails at once, without a query.
    let _ = f.resolve(q(WWW, 28), Some(2), now + 1, &mut rng);
    let a = answer(&mut f);
    assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![2], 2));
    assert_eq!(a.rendered.ede, Some(ede::NO_REACHABLE_AUTHORITY));
    assert!(next(&mut f).is_none());
    // The retry comes (1 s later) and succeeds: the zone works.
    let retry = f.next_timer().unwrap();
    assert_eq!(retry, st.next_ms.unwrap());
    f.tick(retry, &mut rng);
    let mut ts = transmits(&mut f);
    let t = take(&mut ts, NS_NET, rtype::A);
    let r = reply(
        &t.bytes,
        0,
        false,
        &[(NS_NET, 1, 300, &[198, 18, 0, 9])],
        &[],
    );
    f.reply(t.token, up(1), &r, retry + 5, &mut rng);
    let _ = f.resolve(q(WWW, 16), Some(3), retry + 6, &mut rng);
    assert_eq!(transmit(&mut f).to, v4([198, 18, 0, 9], 5353));
}

#[test]
fn hosts_that_depend_on_themselves_are_loops() {
    let zones = vec![
        zone(b"\x00", ZoneKind::Forward, &[1], 1),
        // 1: its host is inside it, no other address.
        zone(b"\x04self\x00", ZoneKind::Forward, &[], 2),
        // 2 and 3: each one's host is in the other.
        zone(b"\x01a\x00", ZoneKind::Stub, &[], 3),
        zone(b"\x01b\x00", ZoneKind::Stub, &[], 4),
        // 4: a host inside it, and an address of its own.
        zone(b"\x04glue\x00", ZoneKind::Forward, &[5], 5),
        // 5: a host inside it and one outside: the outside one brings the first
        // address, through which the inside one is resolved.
        zone(b"\x04boot\x00", ZoneKind::Forward, &[], 6),
        // 6: no zone holds its host (there is no "." here, see below).
    ];
    let hosts = vec![
        host(b"\x04self\x00", b"\x02ns\x04self\x00", 53),
        host(b"\x01a\x00", b"\x02ns\x01b\x00", 53),
        host(b"\x01b\x00", b"\x02ns\x01a\x00", 53),
        host(b"\x04glue\x00", b"\x02ns\x04glue\x00", 53),
        host(b"\x04boot\x00", b"\x02ns\x04boot\x00", 53),
        host(b"\x04boot\x00", NS_NET, 53),
        host(b"\x07missing\x00", NS_NET, 53),
    ];
    let cfg = ForwardConfig {
        zones: zones.clone(),
        hosts: hosts.clone(),
        ..ForwardConfig::default()
    };
    assert_eq!(
        plan_hosts(&cfg),
        vec![
            HostPlan::Loop(1),
            HostPlan::Loop(3),
            HostPlan::Loop(2),
            HostPlan::Via(4),
            HostPlan::Via(5),
            HostPlan::Via(0),
            HostPlan::NoZone,
        ]
    );
    let mut no_root = cfg.clone();
    no_root.zones.remove(0);
    no_root.hosts = vec![host(b"\x04boot\x00", NS_NET, 53)];
    assert_eq!(plan_hosts(&no_root), vec![HostPlan::Outside]);

    // At work: a loop is never resolved, and its zone fails at once.
    #[allow(clippy::arc_with_non_send_sync)]
    let cache = Arc::new(TestCache::new(CacheConfig::default()));
    let mut f: Fwd = Forwarder::new(cfg, cache);
    let mut rng = Seq(53);
    let _ = f.resolve(q(b"\x01x\x04self\x00", 1), Some(1), 0, &mut rng);
    let mut ts = Vec::new();
    let a = loop {
        match f.poll_event() {
            Some(Event::Answer(a)) => break a,
            Some(Event::Transmit(t)) => ts.push(t),
            Some(Event::Cancel(_)) => {}
            None => panic!("no answer"),
        }
    };
    assert_eq!(
        (rcode_of(&a), a.rendered.ede),
        (2, Some(ede::NO_REACHABLE_AUTHORITY))
    );
    // What was due was started in the same call (the resolvable hosts), never a loop's
    // name.
    ts.extend(transmits(&mut f));
    assert!(
        ts.iter()
            .all(|t| question_of(t).0 != b"\x02ns\x04self\x00"
                && question_of(t).0 != b"\x02ns\x01a\x00"),
        "{ts:?}"
    );
    let st = f.hosts();
    assert_eq!(st[0].next_ms, None);
    assert!(!st[0].resolving && !st[1].resolving);

    // The bootstrap: boot.'s outside host first, then its inside one through it.
    let t = take(&mut ts, NS_NET, rtype::A);
    assert_eq!(t.to, up(1));
    assert!(
        ts.iter().all(|t| question_of(t).0 != b"\x02ns\x04boot\x00"),
        "the inside host waits for boot.'s first address: {ts:?}"
    );
    // ns.glue. is asked of glue.'s own address.
    let g = take(&mut ts, b"\x02ns\x04glue\x00", rtype::A);
    assert_eq!(g.to, up(5));
    let r = reply(
        &t.bytes,
        0,
        false,
        &[(NS_NET, 1, 300, &[198, 18, 0, 9])],
        &[],
    );
    f.reply(t.token, up(1), &r, 10, &mut rng);
    let mut ts = transmits(&mut f);
    let inside = take(&mut ts, b"\x02ns\x04boot\x00", rtype::A);
    assert_eq!(inside.to, v4([198, 18, 0, 9], 53));
}

#[test]
fn resolved_addresses_obey_do_not_query_localhost_and_are_deduplicated() {
    let mut f = fwd(
        vec![
            zone(b"\x00", ZoneKind::Forward, &[1], 1),
            zone(EXAMPLE, ZoneKind::Forward, &[7], 2),
        ],
        CacheConfig::default(),
    );
    let mut cfg = f.config().clone();
    cfg.do_ip6 = false;
    cfg.hosts = vec![host(EXAMPLE, NS_NET, 53)];
    f.reconfigure(cfg);
    let mut rng = Seq(59);
    f.tick(0, &mut rng);
    let t = transmit(&mut f);
    // The host resolves to the loopback, the zone's own address, a new one and the
    // unspecified address (four records of one RRset, built by hand).
    let mut m = reply(&t.bytes, 0, false, &[], &[]);
    m[7] = 4;
    for a in [
        [127, 0, 0, 1],
        [198, 18, 0, 7],
        [198, 18, 0, 9],
        [0, 0, 0, 0],
    ] {
        m.extend_from_slice(NS_NET);
        m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 1, 44, 0, 4]);
        m.extend_from_slice(&a);
    }
    f.reply(t.token, up(1), &m, 5, &mut rng);
    let st = &f.hosts()[0];
    // Sorted: the order of the answer does not matter.
    assert_eq!(
        st.refused,
        vec![
            (IpAddr::from([0, 0, 0, 0]), Refused::Unspecified),
            (IpAddr::from([127, 0, 0, 1]), Refused::Loopback)
        ]
    );
    assert_eq!(f.stats.host_addrs_refused, 2);
    assert_eq!(
        f.config().zones[1]
            .upstreams
            .iter()
            .map(|u| u.addr)
            .collect::<Vec<_>>(),
        vec![up(7), v4([198, 18, 0, 9], 53)],
        "the zone's own address first, the resolved one once, no loopback"
    );
    // With do-not-query-localhost: no, a reload re-resolves (from the cache) and
    // the loopback address is used.
    let mut cfg = f.config().clone();
    cfg.zones[1].upstreams = vec![Upstream {
        addr: up(7),
        tls_name: None,
    }];
    cfg.do_not_query_localhost = false;
    f.reconfigure(cfg);
    f.tick(10, &mut rng);
    assert!(next(&mut f).is_none(), "answered from the cache");
    let ups: Vec<SocketAddr> = f.config().zones[1]
        .upstreams
        .iter()
        .map(|u| u.addr)
        .collect();
    assert!(ups.contains(&v4([127, 0, 0, 1], 53)), "{ups:?}");
    assert!(f.hosts()[0].refused.is_empty());
}

#[test]
fn what_can_be_an_upstream() {
    let a = |s: &str| s.parse::<SocketAddr>().unwrap();
    for (addr, dnql, want) in [
        ("198.18.0.1:53", true, Ok(a("198.18.0.1:53"))),
        ("[2001:db8::1]:853", true, Ok(a("[2001:db8::1]:853"))),
        ("[::ffff:198.18.0.1]:53", true, Ok(a("198.18.0.1:53"))),
        ("127.0.0.1:53", true, Err(Refused::Loopback)),
        ("127.1.2.3:53", true, Err(Refused::Loopback)),
        ("[::1]:53", true, Err(Refused::Loopback)),
        ("[::ffff:127.0.0.1]:53", true, Err(Refused::Loopback)),
        ("0.0.0.0:53", true, Err(Refused::Unspecified)),
        ("[::]:53", true, Err(Refused::Unspecified)),
        ("[::ffff:0.0.0.0]:53", true, Err(Refused::Unspecified)),
        ("[::ffff:127.0.0.1]:53", false, Ok(a("127.0.0.1:53"))),
        ("[::]:53", false, Ok(a("[::]:53"))),
        ("224.0.0.251:53", false, Err(Refused::Multicast)),
        ("[ff02::fb]:53", false, Err(Refused::Multicast)),
        ("[::ffff:239.0.0.1]:53", false, Err(Refused::Multicast)),
        ("255.255.255.255:53", false, Err(Refused::Broadcast)),
        (
            "[::ffff:255.255.255.255]:53",
            false,
            Err(Refused::Broadcast),
        ),
        ("[fe80::1]:53", false, Err(Refused::LinkLocalWithoutScope)),
        ("[fe80::1%2]:53", true, Ok(a("[fe80::1%2]:53"))),
        // Not the limited broadcast: a directed broadcast cannot be told from a
        // unicast address without the netmask.
        ("198.18.255.255:53", true, Ok(a("198.18.255.255:53"))),
    ] {
        assert_eq!(upstream_addr(a(addr), dnql), want, "{addr} dnql {dnql}");
    }
    assert!(Refused::Loopback.is_localhost() && Refused::Unspecified.is_localhost());
    assert!(!Refused::Multicast.is_localhost() && !Refused::Broadcast.is_localhost());
}

#[test]
fn resolved_addresses_that_cannot_be_upstreams_are_left_out() {
    // Even with do-not-query-localhost: no, a host's multicast, broadcast and
    // link-local (no interface to send it on) addresses are no upstreams; an
    // IPv4-mapped address is the IPv4 address.
    let mut f = fwd(
        vec![
            zone(b"\x00", ZoneKind::Forward, &[1], 1),
            zone(EXAMPLE, ZoneKind::Forward, &[], 2),
        ],
        CacheConfig::default(),
    );
    let mut cfg = f.config().clone();
    cfg.hosts = vec![host(EXAMPLE, NS_NET, 53)];
    cfg.do_not_query_localhost = false;
    f.reconfigure(cfg);
    let mut rng = Seq(83);
    f.tick(0, &mut rng);
    let mut ts = transmits(&mut f);
    let a = take(&mut ts, NS_NET, rtype::A);
    let aaaa = take(&mut ts, NS_NET, rtype::AAAA);
    let v4s: [[u8; 4]; 3] = [[224, 0, 0, 1], [255, 255, 255, 255], [198, 18, 0, 9]];
    let rrs: Vec<(&[u8], u16, u32, &[u8])> =
        v4s.iter().map(|x| (NS_NET, 1u16, 300u32, &x[..])).collect();
    f.reply(
        a.token,
        up(1),
        &reply(&a.bytes, 0, false, &rrs, &[]),
        5,
        &mut rng,
    );
    let v6s: Vec<[u8; 16]> = [
        "fe80::1",
        "ff02::1",
        "::ffff:198.18.0.9",
        "::ffff:224.0.0.2",
        "2001:db8::9",
    ]
    .iter()
    .map(|s| s.parse::<Ipv6Addr>().unwrap().octets())
    .collect();
    let rrs: Vec<(&[u8], u16, u32, &[u8])> = v6s
        .iter()
        .map(|x| (NS_NET, 28u16, 300u32, &x[..]))
        .collect();
    f.reply(
        aaaa.token,
        up(1),
        &reply(&aaaa.bytes, 0, false, &rrs, &[]),
        6,
        &mut rng,
    );
    let ups: Vec<SocketAddr> = f.config().zones[1]
        .upstreams
        .iter()
        .map(|u| u.addr)
        .collect();
    assert_eq!(
        ups,
        vec![
            v4([198, 18, 0, 9], 53),
            SocketAddr::new("2001:db8::9".parse().unwrap(), 53)
        ]
    );
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(
        f.hosts()[0].refused,
        vec![
            (ip("224.0.0.1"), Refused::Multicast),
            (ip("255.255.255.255"), Refused::Broadcast),
            (ip("224.0.0.2"), Refused::Multicast),
            (ip("fe80::1"), Refused::LinkLocalWithoutScope),
            (ip("ff02::1"), Refused::Multicast),
        ]
    );
    assert_eq!(f.stats.host_addrs_refused, 5);
    assert_eq!(f.hosts()[0].addrs, ups);
}

#[test]
fn host_from_cache_tls_name_and_what_a_reload_keeps() {
    let mut f = fwd(
        vec![
            zone(b"\x00", ZoneKind::Forward, &[1], 1),
            zone(EXAMPLE, ZoneKind::Forward, &[], 2),
        ],
        CacheConfig::default(),
    );
    let mut rng = Seq(61);
    // ns.net.'s A and AAAA are in the cache already (a client asked).
    for (t, rd) in [
        (1u16, vec![198, 18, 0, 9]),
        (
            28,
            vec![0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9],
        ),
    ] {
        f.cache().offer(
            RrSet {
                owner: NS_NET.to_vec(),
                rtype: t,
                class: 1,
                ttl: 600,
                rdatas: vec![rd],
                rank: crate::rrset::Rank::AnswerNonAuth,
            },
            0,
        );
    }
    let mut cfg = f.config().clone();
    cfg.zones[1].tls = true;
    cfg.hosts = vec![HostConfig {
        tls_name: Some(Arc::from("ns.net")),
        ..host(EXAMPLE, NS_NET, 853)
    }];
    f.reconfigure(cfg.clone());
    f.tick(1_000, &mut rng);
    assert!(next(&mut f).is_none(), "both from the cache: nothing sent");
    let st = &f.hosts()[0];
    assert_eq!(st.addrs.len(), 2);
    assert_eq!(st.next_ms, Some(600_000));
    let _ = f.resolve(q(WWW, 1), Some(1), 1_001, &mut rng);
    let t = transmit(&mut f);
    assert_eq!(t.transport, Transport::Tls(Arc::from("ns.net")));
    assert_eq!(t.to.port(), 853);
    let r = reply(&t.bytes, 0, false, &[(WWW, 1, 60, &[192, 0, 2, 80])], &[]);
    f.reply(t.token, t.to, &r, 1_001, &mut rng);
    assert_eq!(answer(&mut f).clients, vec![1]);
    // A reload that leaves the host and the zone that resolved it (".") as they were
    // keeps its addresses (no new resolution) and their RTT records, whatever else
    // changes: the zone it serves, a new zone.
    let g = f.generation();
    cfg.zones[1].id = 12;
    cfg.zones
        .push(zone(b"\x05other\x00", ZoneKind::Forward, &[3], 13));
    f.reconfigure(cfg.clone());
    assert!(f.generation() > g);
    assert_eq!(f.next_timer(), Some(0));
    f.tick(1_002, &mut rng);
    assert!(f.poll_event().is_none(), "nothing to resolve, nothing sent");
    assert_eq!(f.hosts()[0].addrs.len(), 2);
    assert!(f.infra().hosts().iter().any(|h| h.addr == t.to));
    // A host given another port is a new host: resolved again (from the cache).
    cfg.hosts[0].port = 8853;
    f.reconfigure(cfg.clone());
    f.tick(1_003, &mut rng);
    assert!(f.poll_event().is_none(), "from the cache");
    let ups = &f.config().zones[1].upstreams;
    assert!(
        ups.len() == 2 && ups.iter().all(|u| u.addr.port() == 8853),
        "{ups:?}"
    );
    // A reload that changes the zone that resolved the host (another upstream for
    // "."): what it said is not trusted any more (its cache is dropped too), so the
    // host's addresses go at once and its name is asked again, of the new upstream.
    cfg.zones[0] = zone(b"\x00", ZoneKind::Forward, &[2], 9);
    f.reconfigure(cfg.clone());
    let st = &f.hosts()[0];
    assert!(st.addrs.is_empty() && !st.answered, "{st:?}");
    assert!(f.config().zones[1].upstreams.is_empty());
    f.tick(1_004, &mut rng);
    let mut ts = transmits(&mut f);
    let a = take(&mut ts, NS_NET, rtype::A);
    let aaaa = take(&mut ts, NS_NET, rtype::AAAA);
    assert_eq!((a.to, aaaa.to), (up(2), up(2)));
    let r = reply(
        &a.bytes,
        0,
        false,
        &[(NS_NET, 1, 300, &[198, 18, 0, 10])],
        &[],
    );
    f.reply(a.token, up(2), &r, 1_005, &mut rng);
    assert_eq!(
        f.config().zones[1]
            .upstreams
            .iter()
            .map(|u| u.addr)
            .collect::<Vec<_>>(),
        vec![v4([198, 18, 0, 10], 8853)]
    );
    // The same again: nothing changes, nothing is asked.
    f.reconfigure(cfg);
    f.tick(1_006, &mut rng);
    assert!(next(&mut f).is_none());
    assert_eq!(f.hosts()[0].addrs, vec![v4([198, 18, 0, 10], 8853)]);
}

#[test]
fn a_host_s_refresh_is_bounded_under_hostile_ttls() {
    let mut f = hosted(CacheConfig::default());
    f.config.do_ip6 = false;
    let cfg = f.config().clone();
    f.reconfigure(cfg);
    let mut rng = Seq(77);
    let max_ms = u64::from(CacheConfig::default().max_ttl) * 1000;
    let mut now = 0u64;
    // (TTL the upstream gives, when the host is asked again): the largest TTL is
    // capped by cache-max-ttl; one with the top bit set reads as 0 (RFC 2181 §8) and,
    // as 0 itself, gives the 5 s floor.
    for (ttl, after) in [
        (0x7fff_ffffu32, max_ms),
        (0x8000_0000, HOST_MIN_REFRESH_MS),
        (u32::MAX, HOST_MIN_REFRESH_MS),
        (0, HOST_MIN_REFRESH_MS),
    ] {
        f.tick(now, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(question_of(&t), (NS_NET.to_vec(), rtype::A));
        let r = reply(
            &t.bytes,
            0,
            false,
            &[(NS_NET, 1, ttl, &[198, 18, 0, 9])],
            &[],
        );
        f.reply(t.token, up(1), &r, now, &mut rng);
        assert_eq!(f.hosts()[0].next_ms, Some(now + after), "TTL {ttl:#x}");
        assert_eq!(f.next_timer(), Some(now + after));
        now += after;
    }
}
