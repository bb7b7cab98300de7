//! The state machine of RFC 9568 §6.4, transition by transition, on a fake clock (`now`
//! is whatever the test says it is).

use super::*;
use alloc::string::ToString;
use alloc::vec;
use core::net::{Ipv4Addr, Ipv6Addr};

const S: u64 = 1_000_000_000;

fn v4(d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, d))
}
fn ll(d: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, d))
}
const VIP4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 53, 53));
const VIP6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0x53, 0x53));
const GRP4: IpAddr = IpAddr::V4(packet::MCAST_V4);
const GRP6: IpAddr = IpAddr::V6(packet::MCAST_V6);

fn cfg(priority: u8, primary: IpAddr) -> Config {
    Config {
        vrid: 51,
        priority,
        advert_interval_cs: 100,
        preempt: true,
        preempt_delay_ms: 0,
        accept_mode: false,
        primary,
        addresses: vec![if primary.is_ipv4() { VIP4 } else { VIP6 }],
        unicast_peers: vec![],
        checksum: ChecksumMode::Rfc,
    }
}

fn router(c: Config) -> Router {
    Router::new(c).expect("valid config")
}

/// A started router, its startup outputs drained.
fn started(c: Config, now: u64) -> Router {
    let mut r = router(c);
    r.startup(now);
    drain(&mut r);
    r
}

/// A router that became Master by its timer, outputs drained.
fn master(c: Config) -> Router {
    let mut r = started(c, 0);
    let t = r.poll_timeout().unwrap();
    r.handle_timeout(t);
    assert_eq!(r.state(), State::Master);
    drain(&mut r);
    r
}

fn drain(r: &mut Router) -> Vec<Output> {
    core::iter::from_fn(|| r.poll_output()).collect()
}

/// The advertisement bytes another router at `src` sends to `dst`.
fn advert_to(src: IpAddr, dst: IpAddr, priority: u8, interval_cs: u16) -> Vec<u8> {
    Advert {
        vrid: 51,
        priority,
        max_advert_int_cs: interval_cs,
        addrs: vec![if src.is_ipv4() { VIP4 } else { VIP6 }],
    }
    .encode(src, dst, ChecksumMode::Rfc)
}

fn advert(src: IpAddr, priority: u8, interval_cs: u16) -> Vec<u8> {
    let dst = if src.is_ipv4() { GRP4 } else { GRP6 };
    advert_to(src, dst, priority, interval_cs)
}

/// Delivers an advertisement from `src` over the multicast group with TTL 255.
fn rx(r: &mut Router, now: u64, src: IpAddr, priority: u8, interval_cs: u16) -> Result<(), Drop> {
    let dst = if src.is_ipv4() { GRP4 } else { GRP6 };
    r.handle_advert(now, src, dst, 255, &advert(src, priority, interval_cs))
}

/// The priorities of the advertisements in `out`, with their destinations.
fn sent(out: &[Output], src: IpAddr) -> Vec<(IpAddr, u8)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { dst, bytes } => {
                let a = packet::parse(bytes, src, *dst, ChecksumMode::Rfc)
                    .expect("our adverts parse with the RFC checksum");
                Some((*dst, a.priority))
            }
            _ => None,
        })
        .collect()
}

fn transitions(out: &[Output]) -> Vec<(State, State, Reason)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Transition { from, to, reason } => Some((*from, *to, *reason)),
            _ => None,
        })
        .collect()
}

// --- timers (§6.1) ------------------------------------------------------------------------

#[test]
fn exact_timer_values() {
    // (priority, interval cs, Skew_Time ns, Master_Down_Interval ns)
    for (p, i, skew, mdi) in [
        (100, 100, 609_375_000, 3_609_375_000),
        (200, 100, 218_750_000, 3_218_750_000),
        (100, 10, 60_937_500, 360_937_500),
        (200, 10, 21_875_000, 321_875_000),
        (254, 1, 78_125, 30_078_125),
        (1, 4095, 40_790_039_062, 163_640_039_062),
    ] {
        let mut c = cfg(p, v4(1));
        c.advert_interval_cs = i;
        let r = router(c);
        assert_eq!(r.skew_ns(), skew, "skew p{p} {i}cs");
        assert_eq!(r.master_down_interval_ns(), mdi, "MDI p{p} {i}cs");
    }
}

#[test]
fn backup_learns_the_master_interval() {
    let mut r = started(cfg(100, v4(1)), 0);
    assert_eq!(r.master_adver_interval_cs(), 100);
    rx(&mut r, S, v4(2), 150, 10).unwrap();
    assert_eq!(r.master_adver_interval_cs(), 10);
    assert_eq!(r.master_down_interval_ns(), 360_937_500);
    assert_eq!(r.poll_timeout(), Some(S + 360_937_500));
    // Becoming Master, we advertise at our own interval again.
    r.handle_timeout(S + 360_937_500);
    assert_eq!(r.state(), State::Master);
    assert_eq!(r.master_adver_interval_cs(), 100);
    assert_eq!(r.poll_timeout(), Some(S + 360_937_500 + S));
}

// --- Initialize (§6.4.1) --------------------------------------------------------------------

#[test]
fn initialize_to_backup() {
    let mut r = router(cfg(100, v4(1)));
    assert_eq!(r.state(), State::Initialize);
    assert_eq!(r.poll_timeout(), None);
    r.startup(5 * S);
    let out = drain(&mut r);
    assert_eq!(
        out,
        vec![Output::Transition {
            from: State::Initialize,
            to: State::Backup,
            reason: Reason::Startup
        }]
    );
    assert_eq!(r.poll_timeout(), Some(5 * S + 3_609_375_000));
    // A second startup changes nothing.
    r.startup(6 * S);
    assert!(drain(&mut r).is_empty());
}

#[test]
fn initialize_to_master_as_owner() {
    let mut r = router(cfg(255, v4(1)));
    r.startup(S);
    let out = drain(&mut r);
    assert_eq!(sent(&out, v4(1)), vec![(GRP4, 255)]);
    assert_eq!(out[1], Output::Announce);
    assert_eq!(
        out[2],
        Output::Transition {
            from: State::Initialize,
            to: State::Master,
            reason: Reason::Owner
        }
    );
    assert_eq!(out.len(), 3);
    assert_eq!(r.poll_timeout(), Some(2 * S));
    assert_eq!(r.stats().became_master, 1);
    // The owner's priority does not move.
    r.set_priority(S, 10);
    assert_eq!(r.priority(), 255);
    assert!(drain(&mut r).is_empty());
}

// --- Backup (§6.4.2) ------------------------------------------------------------------------

#[test]
fn backup_to_master_when_the_timer_fires() {
    let mut r = started(cfg(100, v4(1)), 0);
    let t = r.poll_timeout().unwrap();
    r.handle_timeout(t - 1);
    assert_eq!(r.state(), State::Backup);
    assert!(drain(&mut r).is_empty());
    r.handle_timeout(t);
    let out = drain(&mut r);
    assert_eq!(sent(&out, v4(1)), vec![(GRP4, 100)]);
    assert_eq!(
        out[1..],
        [
            Output::Announce,
            Output::Transition {
                from: State::Backup,
                to: State::Master,
                reason: Reason::MasterDown
            }
        ]
    );
    // Then one advertisement per Advertisement_Interval.
    assert_eq!(r.poll_timeout(), Some(t + S));
    r.handle_timeout(t + S);
    assert_eq!(sent(&drain(&mut r), v4(1)), vec![(GRP4, 100)]);
    assert_eq!(r.poll_timeout(), Some(t + 2 * S));
    assert_eq!(r.stats().adverts_sent, 2);
}

#[test]
fn backup_accepting_adverts_resets_the_timer() {
    let mut r = started(cfg(100, v4(1)), 0);
    for k in 1..10 {
        rx(&mut r, k * S, v4(2), 150, 100).unwrap();
        assert_eq!(r.poll_timeout(), Some(k * S + 3_609_375_000));
        r.handle_timeout(k * S + S);
    }
    assert_eq!(r.state(), State::Backup);
}

#[test]
fn backup_priority_zero_sets_the_timer_to_skew() {
    let mut r = started(cfg(100, v4(1)), 0);
    rx(&mut r, S, v4(2), 150, 100).unwrap();
    rx(&mut r, 2 * S, v4(2), 0, 100).unwrap();
    assert_eq!(r.poll_timeout(), Some(2 * S + 609_375_000));
    assert_eq!(r.stats().priority_zero_received, 1);
    let fm = r.foreign_master().unwrap();
    assert!(fm.released);
    assert_eq!((fm.addr, fm.priority, fm.last_advert_ns), (v4(2), 0, 2 * S));
    r.handle_timeout(2 * S + 609_375_000);
    let out = drain(&mut r);
    assert_eq!(
        transitions(&out),
        vec![(State::Backup, State::Master, Reason::PriorityZero)]
    );
}

#[test]
fn backup_discards_lower_priority_then_preempts() {
    let mut r = started(cfg(200, v4(1)), 0);
    let deadline = r.poll_timeout().unwrap();
    assert_eq!(deadline, 3_218_750_000);
    for k in 1..=3 {
        rx(&mut r, k * S, v4(2), 100, 100).unwrap();
        // Discarded: the timer set at startup runs on.
        assert_eq!(r.poll_timeout(), Some(deadline));
    }
    assert_eq!(r.stats().discarded, 3);
    // Still recorded as the router out there.
    assert_eq!(r.foreign_master().unwrap().priority, 100);
    r.handle_timeout(deadline);
    assert_eq!(
        transitions(&drain(&mut r)),
        vec![(State::Backup, State::Master, Reason::MasterDown)]
    );
}

#[test]
fn nopreempt_stays_backup() {
    let mut c = cfg(200, v4(1));
    c.preempt = false;
    let mut r = started(c, 0);
    for k in 1..=20 {
        rx(&mut r, k * S, v4(2), 100, 100).unwrap();
        r.handle_timeout(k * S + S - 1);
        assert_eq!(r.state(), State::Backup);
        // The lower-priority master's adverts are accepted: MDI at our priority.
        assert_eq!(r.poll_timeout(), Some(k * S + 3_218_750_000));
    }
    assert_eq!(r.stats().discarded, 0);
}

#[test]
fn equal_priority_backup_accepts() {
    // §6.4.2: a Backup accepts ">= local Priority", whatever the addresses.
    let mut r = started(cfg(100, v4(9)), 0);
    rx(&mut r, S, v4(2), 100, 100).unwrap();
    assert_eq!(r.poll_timeout(), Some(S + 3_609_375_000));
    assert_eq!(r.stats().discarded, 0);
}

#[test]
fn preempt_delay_holds_preemption_back() {
    let mut c = cfg(200, v4(1));
    c.preempt_delay_ms = 5_000;
    let mut r = started(c, 0);
    // A lower-priority master advertises every second from t = 0.5 s: the delay starts
    // with its first advert and ends at 5.5 s; until then each advert resets the timer.
    let mut t = S / 2;
    while t < 5 * S + S / 2 {
        rx(&mut r, t, v4(2), 100, 100).unwrap();
        assert_eq!(r.poll_timeout(), Some(t + 3_218_750_000), "at {t}");
        r.handle_timeout(t + S - 1);
        assert_eq!(r.state(), State::Backup);
        t += S;
    }
    assert_eq!(r.stats().discarded, 0);
    // From 5.5 s on they are discarded; the timer set at 4.5 s fires at 7.71875 s.
    rx(&mut r, t, v4(2), 100, 100).unwrap();
    assert_eq!(r.stats().discarded, 1);
    assert_eq!(r.poll_timeout(), Some(4 * S + S / 2 + 3_218_750_000));
    r.handle_timeout(4 * S + S / 2 + 3_218_750_000);
    assert_eq!(
        transitions(&drain(&mut r)),
        vec![(State::Backup, State::Master, Reason::MasterDown)]
    );
}

#[test]
fn preempt_delay_restarts_after_a_higher_master() {
    let mut c = cfg(200, v4(1));
    c.preempt_delay_ms = 2_000;
    let mut r = started(c, 0);
    rx(&mut r, S, v4(2), 100, 100).unwrap(); // delay runs to 3 s
    rx(&mut r, 2 * S, v4(3), 250, 100).unwrap(); // a higher master: delay stopped
    rx(&mut r, 4 * S, v4(2), 100, 100).unwrap(); // new delay, to 6 s: accepted
    assert_eq!(r.stats().discarded, 0);
    assert_eq!(r.poll_timeout(), Some(4 * S + 3_218_750_000));
    rx(&mut r, 6 * S, v4(2), 100, 100).unwrap();
    assert_eq!(r.stats().discarded, 1);
}

#[test]
fn backup_shutdown() {
    let mut r = started(cfg(100, v4(1)), 0);
    r.shutdown(S);
    let out = drain(&mut r);
    assert_eq!(
        out,
        vec![Output::Transition {
            from: State::Backup,
            to: State::Initialize,
            reason: Reason::Shutdown
        }]
    );
    assert_eq!(r.poll_timeout(), None);
    // Started again, it is a Backup with a fresh timer.
    r.startup(10 * S);
    assert_eq!(r.state(), State::Backup);
    assert_eq!(r.poll_timeout(), Some(10 * S + 3_609_375_000));
}

// --- Master (§6.4.3) ------------------------------------------------------------------------

#[test]
fn master_to_backup_on_higher_priority() {
    let mut r = master(cfg(100, v4(1)));
    rx(&mut r, 10 * S, v4(2), 101, 50).unwrap();
    let out = drain(&mut r);
    assert_eq!(
        out,
        vec![Output::Transition {
            from: State::Master,
            to: State::Backup,
            reason: Reason::Preempted
        }]
    );
    // Master_Adver_Interval learnt from the advert: 3 × 50 cs + (156 × 50 / 256) cs.
    assert_eq!(r.master_adver_interval_cs(), 50);
    assert_eq!(r.poll_timeout(), Some(10 * S + 1_500_000_000 + 304_687_500));
}

#[test]
fn master_discards_lower_priority() {
    let mut r = master(cfg(100, v4(1)));
    let t = r.poll_timeout();
    rx(&mut r, 4 * S, v4(2), 99, 100).unwrap();
    assert_eq!(r.state(), State::Master);
    assert!(drain(&mut r).is_empty());
    assert_eq!(r.poll_timeout(), t);
    assert_eq!(r.stats().discarded, 1);
}

fn equal_priority_tie(ours: IpAddr, lower: IpAddr, higher: IpAddr) {
    let mut r = master(cfg(100, ours));
    rx(&mut r, 4 * S, lower, 100, 100).unwrap();
    assert_eq!(r.state(), State::Master, "{lower} < {ours}: we stay Master");
    assert!(drain(&mut r).is_empty());
    rx(&mut r, 5 * S, higher, 100, 100).unwrap();
    assert_eq!(r.state(), State::Backup, "{higher} > {ours}: we yield");
    assert_eq!(
        transitions(&drain(&mut r)),
        vec![(State::Master, State::Backup, Reason::Preempted)]
    );
}

#[test]
fn equal_priority_decided_by_primary_address_v4() {
    equal_priority_tie(v4(100), v4(99), v4(101));
    // Compared as unsigned integers: 198.18.0.200 > 198.18.0.100 (not as signed bytes).
    equal_priority_tie(v4(100), v4(2), v4(200));
}

#[test]
fn equal_priority_decided_by_primary_address_v6() {
    equal_priority_tie(ll(0x100), ll(0xff), ll(0x101));
    // fe80::8000:0:0:0 > fe80::1:0:0:0 in network order (the whole 128 bits count).
    equal_priority_tie(
        IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 1, 0, 0, 0)),
        ll(0xffff),
        IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0x8000, 0, 0, 0)),
    );
}

#[test]
fn master_answers_priority_zero_with_an_advert() {
    let mut r = master(cfg(100, v4(1)));
    let before = r.poll_timeout().unwrap();
    rx(&mut r, before - S / 2, v4(2), 0, 100).unwrap();
    let out = drain(&mut r);
    assert_eq!(sent(&out, v4(1)), vec![(GRP4, 100)]);
    assert_eq!(out.len(), 1);
    assert_eq!(r.state(), State::Master);
    // The Adver_Timer restarts from now.
    assert_eq!(r.poll_timeout(), Some(before - S / 2 + S));
}

#[test]
fn master_shutdown_sends_priority_zero() {
    let mut r = master(cfg(100, v4(1)));
    r.shutdown(9 * S);
    let out = drain(&mut r);
    assert_eq!(sent(&out, v4(1)), vec![(GRP4, 0)]);
    assert_eq!(
        out[1],
        Output::Transition {
            from: State::Master,
            to: State::Initialize,
            reason: Reason::Shutdown
        }
    );
    assert_eq!(out.len(), 2);
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(r.stats().priority_zero_sent, 1);
    // Once down, nothing more.
    r.handle_timeout(20 * S);
    r.shutdown(20 * S);
    assert!(drain(&mut r).is_empty());
}

// --- Fault (keepalived's, not in the RFC) ---------------------------------------------------

#[test]
fn link_down_and_up() {
    let mut r = master(cfg(100, v4(1)));
    r.link_down(5 * S);
    let out = drain(&mut r);
    assert_eq!(
        out,
        vec![Output::Transition {
            from: State::Master,
            to: State::Fault,
            reason: Reason::LinkDown
        }]
    );
    assert_eq!(r.poll_timeout(), None);
    r.handle_timeout(100 * S);
    assert!(drain(&mut r).is_empty(), "no advert while the link is down");
    assert_eq!(rx(&mut r, 6 * S, v4(2), 50, 100), Err(Drop::Inactive));
    r.link_up(10 * S);
    assert_eq!(
        transitions(&drain(&mut r)),
        vec![(State::Fault, State::Backup, Reason::LinkUp)]
    );
    assert_eq!(r.poll_timeout(), Some(10 * S + 3_609_375_000));
    // Backup → Fault too, and a Fault router shuts down to Initialize.
    r.link_down(11 * S);
    r.shutdown(12 * S);
    assert_eq!(
        transitions(&drain(&mut r)),
        vec![
            (State::Backup, State::Fault, Reason::LinkDown),
            (State::Fault, State::Initialize, Reason::Shutdown)
        ]
    );
}

#[test]
fn startup_with_the_link_down_is_fault() {
    let mut r = router(cfg(255, v4(1)));
    r.link_down(0);
    assert!(drain(&mut r).is_empty());
    r.startup(S);
    assert_eq!(
        transitions(&drain(&mut r)),
        vec![(State::Initialize, State::Fault, Reason::LinkDown)]
    );
    // The owner comes up as Master directly.
    r.link_up(2 * S);
    let out = drain(&mut r);
    assert_eq!(sent(&out, v4(1)), vec![(GRP4, 255)]);
    assert_eq!(out[1], Output::Announce);
    assert_eq!(
        transitions(&out),
        vec![(State::Fault, State::Master, Reason::LinkUp)]
    );
}

// --- priority changes (health checks) -------------------------------------------------------

/// Two routers on one simulated link: every Send of one is delivered to the other.
struct Link {
    a: Router,
    b: Router,
    log: Vec<(char, State, State, Reason)>,
}

impl Link {
    fn deliver(&mut self, now: u64) {
        loop {
            let mut moved = false;
            for (from_a, name) in [(true, 'a'), (false, 'b')] {
                let (src, dst_r) = if from_a {
                    (&mut self.a, &mut self.b)
                } else {
                    (&mut self.b, &mut self.a)
                };
                let primary = src.config().primary;
                while let Some(o) = src.poll_output() {
                    moved = true;
                    match o {
                        Output::Send { dst, bytes } => {
                            let _ = dst_r.handle_advert(now, primary, dst, 255, &bytes);
                        }
                        Output::Transition { from, to, reason } => {
                            self.log.push((name, from, to, reason))
                        }
                        Output::Announce => {}
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }

    /// Runs both routers' timers up to `until`.
    fn run(&mut self, mut now: u64, until: u64) -> u64 {
        while let Some(t) = [self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .filter(|t| *t <= until)
        {
            now = t.max(now);
            self.a.handle_timeout(now);
            self.b.handle_timeout(now);
            self.deliver(now);
        }
        until.max(now)
    }
}

fn pair(pa: u8, pb: u8) -> Link {
    let mut l = Link {
        a: router(cfg(pa, v4(1))),
        b: router(cfg(pb, v4(2))),
        log: vec![],
    };
    l.a.startup(0);
    l.b.startup(0);
    l.deliver(0);
    l
}

#[test]
fn two_routers_elect_the_higher_priority() {
    let mut l = pair(100, 90);
    l.run(0, 30 * S);
    assert_eq!((l.a.state(), l.b.state()), (State::Master, State::Backup));
    assert_eq!(l.a.stats().became_master, 1);
    assert_eq!(l.b.stats().became_master, 0);
}

#[test]
fn set_priority_lets_a_backup_preempt() {
    let mut l = pair(100, 90);
    let now = l.run(0, 30 * S);
    l.log.clear();
    // b's health improves above a's: it discards a's adverts and takes over within one
    // Master_Down_Interval; a yields to b's first advert.
    l.b.set_priority(now, 110);
    assert!(drain(&mut l.b).is_empty(), "a Backup sends nothing");
    let now = l.run(now, now + 4 * S);
    assert_eq!((l.a.state(), l.b.state()), (State::Backup, State::Master));
    assert_eq!(
        l.log,
        vec![
            ('b', State::Backup, State::Master, Reason::MasterDown),
            ('a', State::Master, State::Backup, Reason::Preempted)
        ]
    );
    // b's health falls below a's: as Master it advertises at once; a discards it and
    // preempts one Master_Down_Interval later.
    l.log.clear();
    l.b.set_priority(now, 50);
    let out = drain(&mut l.b);
    assert_eq!(sent(&out, v4(2)), vec![(GRP4, 50)]);
    for o in out {
        if let Output::Send { dst, bytes } = o {
            l.a.handle_advert(now, v4(2), dst, 255, &bytes).unwrap();
        }
    }
    assert_eq!(l.a.stats().discarded, 1);
    l.run(now, now + 4 * S);
    assert_eq!((l.a.state(), l.b.state()), (State::Master, State::Backup));
}

#[test]
fn set_priority_clamps() {
    let mut r = router(cfg(100, v4(1)));
    r.set_priority(0, 255);
    assert_eq!(r.priority(), 254);
    r.set_priority(0, 0);
    assert_eq!(r.priority(), 1);
    assert_eq!(r.skew_ns(), 255 * 100 * 10_000_000 / 256);
}

#[test]
fn shutdown_hands_over_after_the_skew_only() {
    let mut l = pair(100, 90);
    let now = l.run(0, 30 * S);
    l.a.shutdown(now);
    l.deliver(now);
    // b got priority 0: its timer is its Skew_Time, (256 − 90) × 100 / 256 cs.
    assert_eq!(l.b.poll_timeout(), Some(now + 648_437_500));
    l.run(now, now + S);
    assert_eq!(l.b.state(), State::Master);
    assert_eq!(l.a.state(), State::Initialize);
    assert!(l.b.foreign_master().unwrap().released);
}

// --- receive checks (§7.1) ------------------------------------------------------------------

#[test]
fn bad_ttl_dropped() {
    let mut r = started(cfg(100, v4(1)), 0);
    let b = advert(v4(2), 150, 100);
    assert_eq!(r.handle_advert(S, v4(2), GRP4, 254, &b), Err(Drop::BadTtl));
    assert_eq!(r.handle_advert(S, v4(2), GRP4, 1, &b), Err(Drop::BadTtl));
    assert_eq!(r.stats().dropped.bad_ttl, 2);
    assert_eq!(r.foreign_master(), None);
    // The timer was not reset.
    assert_eq!(r.poll_timeout(), Some(3_609_375_000));
}

#[test]
fn bad_checksum_dropped() {
    let mut r = started(cfg(100, v4(1)), 0);
    let mut b = advert(v4(2), 150, 100);
    b[2] = 151; // priority changed, checksum not
    assert_eq!(
        r.handle_advert(S, v4(2), GRP4, 255, &b),
        Err(Drop::Parse(ParseError::Checksum))
    );
    // Delivered as if sent to another destination: the pseudo-header differs.
    let b = advert_to(v4(2), v4(1), 150, 100);
    assert_eq!(
        r.handle_advert(S, v4(2), GRP4, 255, &b),
        Err(Drop::Parse(ParseError::Checksum))
    );
    assert_eq!(r.stats().dropped.checksum, 2);
    assert_eq!(r.poll_timeout(), Some(3_609_375_000));
    let mut b = advert(v4(2), 150, 100);
    b[0] = 0x21;
    assert_eq!(
        r.handle_advert(S, v4(2), GRP4, 255, &b),
        Err(Drop::Parse(ParseError::Version(2)))
    );
    assert_eq!(r.stats().dropped.parse, 1);
}

#[test]
fn other_vrid_family_and_own_dropped() {
    let mut r = started(cfg(100, v4(1)), 0);
    let other = Advert {
        vrid: 52,
        priority: 150,
        max_advert_int_cs: 100,
        addrs: vec![VIP4],
    }
    .encode(v4(2), GRP4, ChecksumMode::Rfc);
    assert_eq!(
        r.handle_advert(S, v4(2), GRP4, 255, &other),
        Err(Drop::OtherVrid)
    );
    let b6 = advert(ll(2), 150, 100);
    assert_eq!(
        r.handle_advert(S, ll(2), GRP6, 255, &b6),
        Err(Drop::WrongFamily)
    );
    assert_eq!(rx(&mut r, S, v4(1), 150, 100), Err(Drop::OwnAdvert));
    let d = r.stats().dropped;
    assert_eq!((d.other_vrid, d.wrong_family, d.own_advert), (1, 1, 1));
    assert_eq!(d.total(), 3);
    assert_eq!(r.stats().adverts_received, 3);
    assert_eq!(r.foreign_master(), None);
}

#[test]
fn unicast_sends_to_each_peer_and_drops_strangers() {
    let mut c = cfg(100, v4(1));
    c.unicast_peers = vec![v4(2), v4(3)];
    let mut r = master(c);
    r.handle_timeout(r.poll_timeout().unwrap());
    let out = drain(&mut r);
    assert_eq!(sent(&out, v4(1)), vec![(v4(2), 100), (v4(3), 100)]);
    assert_eq!(r.stats().adverts_sent, 4);
    let b = advert_to(v4(4), v4(1), 150, 100);
    assert_eq!(
        r.handle_advert(10 * S, v4(4), v4(1), 255, &b),
        Err(Drop::NotAPeer)
    );
    assert_eq!(r.state(), State::Master);
    assert_eq!(r.foreign_master(), None);
    let b = advert_to(v4(3), v4(1), 150, 100);
    r.handle_advert(10 * S, v4(3), v4(1), 255, &b).unwrap();
    assert_eq!(r.state(), State::Backup);
}

/// RFC 9568 §7.1 requires TTL 255 of unicast adverts too: one forged from off the link
/// (here TTL 64, a peer's address and a higher priority) is dropped and does not move a
/// Master to Backup, unless the check is relaxed for routed peers.
#[test]
fn unicast_ttl_255_required_unless_relaxed() {
    let mut c = cfg(100, v4(1));
    c.unicast_peers = vec![v4(2)];
    let mut r = master(c.clone());
    let b = advert_to(v4(2), v4(1), 150, 100);
    assert_eq!(
        r.handle_advert(10 * S, v4(2), v4(1), 64, &b),
        Err(Drop::BadTtl)
    );
    assert_eq!(r.stats().dropped.bad_ttl, 1);
    assert_eq!(r.state(), State::Master);
    assert_eq!(r.foreign_master(), None);
    r.handle_advert(10 * S, v4(2), v4(1), 255, &b).unwrap();
    assert_eq!(r.state(), State::Backup);

    // Relaxed (peers across routers, keepalived's IPv6 unicast hop limit 64): accepted.
    let mut r = started(c, 0);
    r.set_strict_unicast_ttl(false);
    r.handle_advert(S, v4(2), v4(1), 64, &b).unwrap();
    assert_eq!(r.poll_timeout(), Some(S + 3_609_375_000));
    assert_eq!(r.stats().dropped.total(), 0);
    // Multicast mode requires 255 whatever the setting.
    let mut r = started(cfg(100, v4(1)), 0);
    r.set_strict_unicast_ttl(false);
    let b = advert(v4(2), 150, 100);
    assert_eq!(r.handle_advert(S, v4(2), GRP4, 64, &b), Err(Drop::BadTtl));
}

#[test]
fn old_unicast_checksum_mode() {
    let mut c = cfg(100, v4(1));
    c.unicast_peers = vec![v4(2)];
    c.checksum = ChecksumMode::OldUnicast;
    let mut r = master(c.clone());
    r.handle_timeout(r.poll_timeout().unwrap());
    let out = drain(&mut r);
    let Output::Send { dst, bytes } = &out[0] else {
        panic!("{out:?}")
    };
    // Sent with 224.0.0.18 in the pseudo-header: an RFC receiver refuses it.
    assert_eq!(
        packet::parse(bytes, v4(1), *dst, ChecksumMode::Rfc),
        Err(ParseError::Checksum)
    );
    assert!(packet::parse(bytes, v4(1), *dst, ChecksumMode::OldUnicast).is_ok());
    // Both forms accepted.
    let mut b = started(c, 0);
    let old = Advert {
        vrid: 51,
        priority: 150,
        max_advert_int_cs: 100,
        addrs: vec![VIP4],
    }
    .encode(v4(2), v4(1), ChecksumMode::OldUnicast);
    b.handle_advert(S, v4(2), v4(1), 255, &old).unwrap();
    let new = advert_to(v4(2), v4(1), 150, 100);
    b.handle_advert(S, v4(2), v4(1), 255, &new).unwrap();
    assert_eq!(b.stats().dropped.total(), 0);
}

#[test]
fn address_mismatch_counted_and_processed() {
    let mut r = started(cfg(100, v4(1)), 0);
    let b = Advert {
        vrid: 51,
        priority: 150,
        max_advert_int_cs: 20,
        addrs: vec![VIP4, IpAddr::V4(Ipv4Addr::new(198, 18, 53, 54))],
    }
    .encode(v4(2), GRP4, ChecksumMode::Rfc);
    r.handle_advert(S, v4(2), GRP4, 255, &b).unwrap();
    assert_eq!(r.address_mismatches(), 1);
    assert_eq!(r.master_adver_interval_cs(), 20);
    rx(&mut r, 2 * S, v4(2), 150, 20).unwrap();
    assert_eq!(r.address_mismatches(), 1);
}

#[test]
fn owner_discards_adverts() {
    let mut r = router(cfg(255, v4(1)));
    r.startup(0);
    drain(&mut r);
    assert_eq!(rx(&mut r, S, v4(2), 255, 100), Err(Drop::Owner));
    assert_eq!(rx(&mut r, S, v4(2), 0, 100), Err(Drop::Owner));
    assert_eq!(r.state(), State::Master);
    assert!(drain(&mut r).is_empty());
    // Seen all the same.
    assert_eq!(r.foreign_master().unwrap().addr, v4(2));
    assert_eq!(r.stats().dropped.owner, 2);
}

#[test]
fn not_running_drops_but_records() {
    let mut r = router(cfg(100, v4(1)));
    assert_eq!(rx(&mut r, S, v4(2), 120, 100), Err(Drop::Inactive));
    assert_eq!(
        r.foreign_master(),
        Some(ForeignMaster {
            addr: v4(2),
            priority: 120,
            last_advert_ns: S,
            released: false
        })
    );
}

#[test]
fn ipv6_router() {
    let mut r = started(cfg(100, ll(1)), 0);
    rx(&mut r, S, ll(2), 150, 100).unwrap();
    assert_eq!(r.poll_timeout(), Some(S + 3_609_375_000));
    r.handle_timeout(S + 3_609_375_000);
    let out = drain(&mut r);
    assert_eq!(sent(&out, ll(1)), vec![(GRP6, 100)]);
    let Output::Send { bytes, .. } = &out[0] else {
        panic!()
    };
    assert_eq!(bytes.len(), 8 + 16);
    assert_eq!(rx(&mut r, 6 * S, v4(2), 150, 100), Err(Drop::WrongFamily));
}

#[test]
fn huge_clock_values_saturate() {
    let mut r = started(cfg(100, v4(1)), u64::MAX - 5);
    assert_eq!(r.poll_timeout(), Some(u64::MAX));
    r.handle_timeout(u64::MAX);
    assert_eq!(r.state(), State::Master);
    assert_eq!(r.poll_timeout(), Some(u64::MAX));
}

// --- configuration ----------------------------------------------------------------------

#[test]
fn config_errors_name_the_field() {
    let good = cfg(100, v4(1));
    assert_eq!(good.validate(), Ok(()));
    assert_eq!(cfg(100, ll(1)).validate(), Ok(()));
    let bad = |f: &dyn Fn(&mut Config)| {
        let mut c = good.clone();
        f(&mut c);
        let e = Router::new(c).unwrap_err();
        (e, e.to_string())
    };
    let (e, m) = bad(&|c| c.vrid = 0);
    assert_eq!(e, ConfigError::Vrid);
    assert!(m.starts_with("vrid:"), "{m}");
    let (e, m) = bad(&|c| c.priority = 0);
    assert_eq!(e, ConfigError::Priority);
    assert!(m.starts_with("priority:"), "{m}");
    for i in [0, 4096, u16::MAX] {
        let (e, m) = bad(&|c| c.advert_interval_cs = i);
        assert_eq!(e, ConfigError::AdvertInterval(i));
        assert!(m.starts_with("advert_interval_cs:"), "{m}");
    }
    let (e, m) = bad(&|c| c.addresses.clear());
    assert_eq!(e, ConfigError::NoAddresses);
    assert!(m.starts_with("addresses:"), "{m}");
    let (e, _) = bad(&|c| c.addresses = vec![VIP4; 256]);
    assert_eq!(e, ConfigError::TooManyAddresses(256));
    let (e, m) = bad(&|c| c.addresses.push(VIP6));
    assert_eq!(e, ConfigError::AddressFamily(VIP6));
    assert!(m.starts_with("addresses:"), "{m}");
    let (e, m) = bad(&|c| {
        c.primary = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
        c.addresses = vec![VIP6];
    });
    assert!(matches!(e, ConfigError::PrimaryNotLinkLocal(_)));
    assert!(m.starts_with("primary:"), "{m}");
    // A global IPv6 primary is fine with unicast peers (keepalived's unicast_src_ip).
    let mut c6 = cfg(100, IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)));
    c6.unicast_peers = vec![IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2))];
    assert_eq!(c6.validate(), Ok(()));
    let (e, _) = bad(&|c| c.primary = GRP4);
    assert_eq!(e, ConfigError::Primary(GRP4));
    let (e, _) = bad(&|c| c.primary = IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    assert!(matches!(e, ConfigError::Primary(_)));
    let (e, m) = bad(&|c| c.unicast_peers = vec![v4(2), ll(2)]);
    assert_eq!(e, ConfigError::UnicastPeer(ll(2)));
    assert!(m.starts_with("unicast_peers:"), "{m}");
    let (e, _) = bad(&|c| c.unicast_peers = vec![v4(1)]);
    assert_eq!(e, ConfigError::UnicastPeer(v4(1)));
    // The extremes are valid.
    let mut c = good.clone();
    c.vrid = 255;
    c.priority = 255;
    c.advert_interval_cs = 4095;
    c.addresses = vec![VIP4; 255];
    assert_eq!(c.validate(), Ok(()));
}
