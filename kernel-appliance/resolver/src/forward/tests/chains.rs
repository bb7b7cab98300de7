//! Tests of CNAME/DNAME chains across zones (issue 28).

use super::*;

// Issue 28: CNAME chains, per-link bailiwick, unwanted replies.

/// `a{k}.example.` in wire form.
fn link(k: usize) -> Vec<u8> {
    let label = alloc::format!("a{k}");
    let mut n = vec![label.len() as u8];
    n.extend_from_slice(label.as_bytes());
    n.extend_from_slice(EXAMPLE);
    n
}

/// The k of `a{k}.example.`.
fn link_index(name: &[u8]) -> usize {
    let len = usize::from(name[0]);
    core::str::from_utf8(&name[2..1 + len])
        .unwrap()
        .parse()
        .unwrap()
}

/// Drives `f` against an upstream that answers every `aK.example.` with
/// `aK CNAME aK+1` and nothing else (NOERROR, no SOA: it "did not follow"), each
/// `delay` ms after the query, until nothing is left to do or 60 s have passed: the
/// upstream queries sent, and the answers (client, rcode, when).
fn endless_chain(f: &mut Fwd, delay: u64, rng: &mut Seq) -> (u64, Vec<(u32, u16, u64)>) {
    let mut now = 0u64;
    let mut queries = 0u64;
    let mut answers = Vec::new();
    // Replies not yet due: (when, token, to, bytes).
    let mut pending: Vec<(u64, u64, SocketAddr, Vec<u8>)> = Vec::new();
    while now <= 60_000 {
        while let Some(e) = f.poll_event() {
            match e {
                Event::Transmit(t) => {
                    queries += 1;
                    let (name, _) = question_of(&t);
                    let target = link(link_index(&name) + 1);
                    let r = reply(&t.bytes, 0, false, &[(&name, 5, 300, &target)], &[]);
                    pending.push((now + delay, t.token, t.to, r));
                }
                Event::Answer(a) => {
                    for c in &a.clients {
                        answers.push((*c, rcode_of(&a), now));
                    }
                }
                Event::Cancel(_) => {}
            }
        }
        let reply_at = pending.iter().map(|p| p.0).min();
        let Some(at) = [reply_at, f.next_timer()].into_iter().flatten().min() else {
            break;
        };
        now = now.max(at);
        if reply_at == Some(at) {
            let i = pending.iter().position(|p| p.0 == at).unwrap();
            let (_, token, to, r) = pending.remove(i);
            if f.is_outstanding(token) {
                f.reply(token, to, &r, now, rng);
            }
        } else {
            f.tick(now, rng);
        }
    }
    (queries, answers)
}

#[test]
fn an_endless_cname_chain_ends_after_max_restarts() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(71);
    assert_eq!(
        f.resolve(q(&link(0), 1), Some(1), 0, &mut rng),
        Start::Pending
    );
    let (queries, answers) = endless_chain(&mut f, 1, &mut rng);
    // The question and MAX_RESTARTS targets, one query each (the upstream answers at
    // once), then SERVFAIL: as Unbound's max-query-restarts.
    assert_eq!(queries, u64::from(MAX_RESTARTS) + 1);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!((answers[0].0, answers[0].1), (1, 2));
    assert_eq!(f.in_flight(), 0);
    assert_eq!(f.next_timer(), None);
}

#[test]
fn a_slow_cname_chain_ends_at_the_question_s_deadline() {
    let mut f = fwd(
        vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
        CacheConfig::default(),
    );
    let mut rng = Seq(72);
    f.config.limits.budget_ms = 2_000;
    let _ = f.resolve(q(&link(0), 1), Some(1), 0, &mut rng);
    // Each link takes 300 ms: the restarts would allow 3.6 s of them, the question's
    // budget (2 s) ends the chain first, targets and all: a query at 0, 300, ...,
    // 1,800 ms.
    let (queries, answers) = endless_chain(&mut f, 300, &mut rng);
    assert_eq!(answers.len(), 1, "{answers:?}");
    let (client, rc, at) = answers[0];
    assert_eq!((client, rc), (1, 2));
    assert!(at <= 2_000, "SERVFAIL at {at} ms");
    assert_eq!(queries, 7);
    assert_eq!(f.in_flight(), 0);
    assert_eq!(f.next_timer(), None);
}

#[test]
fn a_chain_target_nobody_waits_for_is_dropped() {
    let other: &[u8] = b"\x05other\x00";
    let target: &[u8] = b"\x01x\x05other\x00";
    let mut f = fwd(
        vec![
            zone(EXAMPLE, ZoneKind::Forward, &[1], 1),
            zone(other, ZoneKind::Forward, &[2], 2),
        ],
        CacheConfig::default(),
    );
    let mut rng = Seq(73);
    let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    let r = reply(&t.bytes, 0, false, &[(WWW, 5, 300, target)], &[]);
    f.reply(t.token, up(1), &r, 10, &mut rng);
    let t2 = transmit(&mut f);
    assert_eq!(question_of(&t2).0, target);
    assert_eq!(f.in_flight(), 2);
    // A reload removes example.: its question fails; the target's flight, which only
    // it waited for, ends with it (its query cancelled), though other. is still there.
    let mut cfg = f.config().clone();
    cfg.zones.remove(0);
    f.reconfigure(cfg);
    f.tick(20, &mut rng);
    let mut cancelled = Vec::new();
    let mut answered = Vec::new();
    while let Some(e) = f.poll_event() {
        match e {
            Event::Cancel(c) => cancelled.push(c),
            Event::Answer(a) => answered.push((a.clients.clone(), rcode_of(&a))),
            Event::Transmit(t) => panic!("unexpected {t:?}"),
        }
    }
    assert_eq!(answered, vec![(vec![1], 2)]);
    assert!(cancelled.contains(&t2.token), "{cancelled:?}");
    assert_eq!(f.in_flight(), 0);
    assert!(!f.is_outstanding(t2.token));
}

#[test]
fn a_chain_joining_a_full_question_fails_and_so_does_a_loop() {
    let other: &[u8] = b"\x05other\x00";
    let target: &[u8] = b"\x01x\x05other\x00";
    let mut f = fwd(
        vec![
            zone(EXAMPLE, ZoneKind::Forward, &[1], 1),
            zone(other, ZoneKind::Forward, &[2], 2),
        ],
        CacheConfig::default(),
    );
    f.config.limits.waiters = 2;
    let mut rng = Seq(74);
    // Two clients wait on x.other.: its waiters are full.
    let _ = f.resolve(q(target, 1), Some(1), 0, &mut rng);
    let tx = transmit(&mut f);
    let _ = f.resolve(q(target, 1), Some(2), 0, &mut rng);
    // A third question's chain leads there: it may not wait on it as a third waiter.
    let _ = f.resolve(q(WWW, 1), Some(3), 0, &mut rng);
    let t = transmit(&mut f);
    let r = reply(&t.bytes, 0, false, &[(WWW, 5, 300, target)], &[]);
    f.reply(t.token, up(1), &r, 10, &mut rng);
    let a = answer(&mut f);
    assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![3], 2));
    assert_eq!(f.in_flight(), 1);
    // x.other. answers: its two clients.
    let r = reply(
        &tx.bytes,
        0,
        false,
        &[(target, 1, 300, &[192, 0, 2, 9])],
        &[],
    );
    f.reply(tx.token, up(2), &r, 20, &mut rng);
    let a = answer(&mut f);
    assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![1, 2], 0));

    // A loop through two zones: y.example. -> y.other. -> y.example. is SERVFAIL at
    // once, not when the budget runs out.
    let ye: &[u8] = b"\x01y\x07example\x00";
    let yo: &[u8] = b"\x01y\x05other\x00";
    let _ = f.resolve(q(ye, 1), Some(4), 100, &mut rng);
    let t = transmit(&mut f);
    let r = reply(&t.bytes, 0, false, &[(ye, 5, 300, yo)], &[]);
    f.reply(t.token, up(1), &r, 110, &mut rng);
    let t = transmit(&mut f);
    assert_eq!(question_of(&t).0, yo);
    let r = reply(&t.bytes, 0, false, &[(yo, 5, 300, ye)], &[]);
    f.reply(t.token, up(2), &r, 120, &mut rng);
    let a = answer(&mut f);
    assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![4], 2));
    assert_eq!(f.in_flight(), 0);
}

#[test]
fn a_chain_link_into_a_more_specific_zone_is_asked_there() {
    let corp: &[u8] = b"\x04corp\x00";
    let www_corp: &[u8] = b"\x03www\x04corp\x00";
    let evil: &[u8] = b"\x04evil\x03com\x00";
    let mut f = fwd(
        vec![
            zone(b"\x00", ZoneKind::Forward, &[1], 1),
            zone(corp, ZoneKind::Forward, &[2], 2),
        ],
        CacheConfig::default(),
    );
    let mut rng = Seq(75);
    let _ = f.resolve(q(evil, 1), Some(1), 0, &mut rng);
    let t = transmit(&mut f);
    assert_eq!(t.to, up(1));
    // ".": evil.com CNAME www.corp., and an address for www.corp. that is corp.'s to
    // give.
    let r = reply(
        &t.bytes,
        0,
        false,
        &[(evil, 5, 300, www_corp), (www_corp, 1, 300, &[6, 6, 6, 6])],
        &[],
    );
    f.reply(t.token, up(1), &r, 10, &mut rng);
    assert!(f.cache().rrset(www_corp, 1, 1, 0).is_none());
    // The target is asked of corp.'s own upstream.
    let t2 = transmit(&mut f);
    assert_eq!((question_of(&t2).0, t2.to), (www_corp.to_vec(), up(2)));
    let r = reply(
        &t2.bytes,
        0,
        false,
        &[(www_corp, 1, 300, &[10, 0, 0, 1])],
        &[],
    );
    f.reply(t2.token, up(2), &r, 20, &mut rng);
    let a = answer(&mut f);
    assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![1], 0));
    assert_eq!(a.rendered.body.counts, [0, 2, 0, 0, 0, 0]);
    assert!(a.rendered.body.tail.ends_with(&[10, 0, 0, 1]));
    let (set, _) = f.cache().rrset(www_corp, 1, 1, 0).unwrap();
    assert_eq!(set.rdatas, vec![vec![10, 0, 0, 1]]);
}
