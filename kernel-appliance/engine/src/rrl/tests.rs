use super::*;
use crate::engine::{DropReason, Outcome, ReplyInfo, Request, Transport};
use crate::name::WireName;
use crate::store::AuthZoneSpec;
use crate::text::parse_rr;
use crate::{Engine, EngineBuilder};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use proptest::prelude::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn wire(name: &str) -> Vec<u8> {
    WireName::parse(name, None)
        .unwrap()
        .to_lowercase()
        .as_bytes()
        .to_vec()
}

fn cfg(rate: u32) -> RrlConfig {
    RrlConfig {
        responses_per_second: rate,
        ..RrlConfig::default()
    }
}

fn answer(name: &[u8]) -> Response {
    Response {
        class: ResponseClass::Response,
        qtype: 1,
        qclass: 1,
        name_hash: crate::store::name_hash(name),
        wildcard: false,
    }
}

impl Rrl {
    /// The state of `resp`'s account for `client`, if it has one.
    fn peek(&self, client: IpAddr, resp: &Response) -> Option<Acct> {
        let prefix = self.prefix(client);
        let key = self.response_key(prefix, resp);
        self.peek_key(key)
    }

    fn peek_all(&self, client: IpAddr) -> Option<Acct> {
        let prefix = self.prefix(client);
        self.peek_key(self.key(prefix, 0, KIND_ALL, 0))
    }

    fn peek_key(&self, key: Key) -> Option<Acct> {
        self.candidates(key)
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .find(|w| w & FP_MASK == key.fp)
            .map(unpack)
    }
}

/// `n` UDP responses at `now`: the verdicts.
fn run(r: &Rrl, now: u32, client: &str, resp: &Response, n: usize) -> Vec<Option<Limit>> {
    (0..n)
        .map(|_| r.check(now, ip(client), false, resp))
        .collect()
}

fn passes(v: &[Option<Limit>]) -> usize {
    v.iter().filter(|x| x.is_none()).count()
}

#[test]
fn pack_round_trip() {
    for (balance, time, slip) in [(0, 0, 0), (-3_600_000, 0x3fff, 9), (1000, 12345, 10)] {
        let a = Acct {
            balance,
            time,
            slip,
        };
        for fp in [1, 0x2a_5a5a, FP_MASK] {
            let w = pack(a, fp);
            assert_eq!((unpack(w), w & FP_MASK), (a, fp));
        }
    }
    // Fingerprints are never 0 (a free slot).
    assert_eq!(fingerprint(0), 1);
    assert_eq!(fingerprint(u64::MAX), FP_MASK);
}

#[test]
fn per_second_limit_and_debt() {
    let r = Rrl::new(RrlConfig { slip: 0, ..cfg(5) }, 1);
    let name = wire("www.example.");
    let a = answer(&name);
    // A fresh account holds `rate` tokens: 5 pass, the rest of the second is dropped.
    let v = run(&r, 100, "198.18.0.1", &a, 10);
    assert_eq!(v[..5], [None; 5]);
    assert_eq!(v[5..], [Some(Limit::Drop); 5]);
    assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, -5);
    // Dropped responses are debited too (BIND): a client asking twice its rate every
    // second gets nothing once its first second is spent, and its debt grows by 5 a
    // second...
    for now in 101..110 {
        assert_eq!(
            passes(&run(&r, now, "198.18.0.1", &a, 10)),
            0,
            "second {now}"
        );
    }
    assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, -50);
    // ... down to window × rate, where it stays.
    for now in 110..130 {
        assert_eq!(
            passes(&run(&r, now, "198.18.0.1", &a, 10)),
            0,
            "second {now}"
        );
    }
    assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, -75);
}

#[test]
fn credit_after_idle_is_capped_at_rate() {
    let r = Rrl::new(RrlConfig { slip: 0, ..cfg(5) }, 1);
    let name = wire("www.example.");
    let a = answer(&name);
    assert_eq!(passes(&run(&r, 10, "198.18.0.1", &a, 5)), 5);
    // One second later: 5 tokens again (0 + 5, capped at 5).
    assert_eq!(passes(&run(&r, 11, "198.18.0.1", &a, 8)), 5);
    // Three idle seconds credit at most `rate`: still 5.
    assert_eq!(passes(&run(&r, 14, "198.18.0.1", &a, 8)), 5);
    // Partial credit: 2 used at 20 (3 left), next second 3 + 5 capped to 5.
    assert_eq!(passes(&run(&r, 20, "198.18.0.1", &a, 2)), 2);
    assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, 3);
    assert_eq!(passes(&run(&r, 21, "198.18.0.1", &a, 8)), 5);
}

#[test]
fn window_floor_keeps_a_flood_limited_for_window_seconds() {
    let name = wire("www.example.");
    let a = answer(&name);
    let flooded = || {
        let r = Rrl::new(RrlConfig { slip: 0, ..cfg(5) }, 1);
        run(&r, 1000, "198.18.0.1", &a, 1000);
        assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, -75);
        r
    };
    // 15 seconds later the credit (75) only pays the debt: still limited.
    let r = flooded();
    assert_eq!(run(&r, 1015, "198.18.0.1", &a, 1), [Some(Limit::Drop)]);
    // 16 seconds: idle longer than the window, a fresh account.
    let r = flooded();
    assert_eq!(run(&r, 1016, "198.18.0.1", &a, 1), [None]);
    assert_eq!(r.peek(ip("198.18.0.1"), &a).unwrap().balance, 4);
    // A client that keeps asking once a second after the flood pays 4 a second back:
    // -75 + 4k ≥ 0 from the 19th second on (BIND's arithmetic).
    let r = flooded();
    let firsts: Vec<u32> = (1001..1030)
        .filter(|&t| r.check(t, ip("198.18.0.1"), false, &a).is_none())
        .collect();
    assert_eq!(firsts.first(), Some(&1019));
}

fn limited_sequence(slip: u8) -> Vec<Option<Limit>> {
    let r = Rrl::new(RrlConfig { slip, ..cfg(1) }, 7);
    let name = wire("www.example.");
    let v = run(&r, 5, "198.18.0.1", &answer(&name), 10);
    assert_eq!(v[0], None);
    v[1..].to_vec()
}

#[test]
fn slip_ratios() {
    use Limit::{Drop as D, Slip as S};
    let all = |l: Limit| vec![Some(l); 9];
    assert_eq!(limited_sequence(1), all(S));
    assert_eq!(limited_sequence(0), all(D));
    let seq = |p: &[Limit]| p.iter().map(|&l| Some(l)).collect::<Vec<_>>();
    assert_eq!(limited_sequence(2), seq(&[S, D, S, D, S, D, S, D, S]));
    assert_eq!(limited_sequence(3), seq(&[S, D, D, S, D, D, S, D, D]));
    assert_eq!(limited_sequence(10), seq(&[S, D, D, D, D, D, D, D, D]));
    // Out of range: clamped to 10.
    assert_eq!(limited_sequence(200), limited_sequence(10));
}

#[test]
fn slip_counter_resets_when_the_account_recovers() {
    let r = Rrl::new(RrlConfig { slip: 3, ..cfg(1) }, 7);
    let name = wire("www.example.");
    let a = answer(&name);
    // pass, slip, drop: the counter is at 2.
    assert_eq!(
        run(&r, 5, "198.18.0.1", &a, 3),
        [None, Some(Limit::Slip), Some(Limit::Drop)]
    );
    // Four seconds later: -2 + 4 > 1, full again and the counter reset: the first
    // limited response slips again.
    assert_eq!(run(&r, 9, "198.18.0.1", &a, 2), [None, Some(Limit::Slip)]);
    // After only three (-2 + 3 = 1, not above the rate) the counter goes on (BIND).
    let other = wire("other.example.");
    let o = answer(&other);
    run(&r, 5, "198.18.0.1", &o, 3);
    assert_eq!(run(&r, 8, "198.18.0.1", &o, 2), [None, Some(Limit::Drop)]);
}

#[test]
fn all_per_second_is_checked_first_and_never_slips() {
    let r = Rrl::new(
        RrlConfig {
            all_per_second: 3,
            slip: 1,
            ..cfg(100)
        },
        3,
    );
    let names: Vec<Vec<u8>> = (0..5)
        .map(|i| wire(&std::format!("n{i}.example.")))
        .collect();
    let v: Vec<_> = names
        .iter()
        .map(|n| r.check(0, ip("198.18.0.1"), false, &answer(n)))
        .collect();
    // Every name's own account is fresh; the client's total decides, by dropping.
    assert_eq!(v, [None, None, None, Some(Limit::Drop), Some(Limit::Drop)]);
    // The limited responses were not debited from their names' accounts.
    assert_eq!(
        r.peek(ip("198.18.0.1"), &answer(&names[0]))
            .unwrap()
            .balance,
        99
    );
    assert!(r.peek(ip("198.18.0.1"), &answer(&names[3])).is_none());
    assert_eq!(r.peek_all(ip("198.18.0.1")).unwrap().balance, -2);
    // Another netblock has its own total.
    assert_eq!(
        r.check(0, ip("198.18.1.1"), false, &answer(&names[3])),
        None
    );
}

#[test]
fn all_per_second_lets_the_class_limit_speak_when_under() {
    let r = Rrl::new(
        RrlConfig {
            all_per_second: 10,
            slip: 2,
            ..cfg(1)
        },
        3,
    );
    let name = wire("www.example.");
    assert_eq!(
        run(&r, 0, "198.18.0.1", &answer(&name), 3),
        [None, Some(Limit::Slip), Some(Limit::Drop)]
    );
    assert_eq!(r.peek_all(ip("198.18.0.1")).unwrap().balance, 7);
}

#[test]
fn prefix_aggregation() {
    let r = Rrl::new(RrlConfig { slip: 0, ..cfg(1) }, 9);
    let name = wire("www.example.");
    let a = answer(&name);
    let one = |c: &str| r.check(0, ip(c), false, &a);
    assert_eq!(one("198.18.0.1"), None);
    // Same /24: shared account.
    assert_eq!(one("198.18.0.200"), Some(Limit::Drop));
    // IPv4-mapped IPv6 (dual-stack socket) is the same IPv4 client.
    assert_eq!(one("::ffff:198.18.0.7"), Some(Limit::Drop));
    // Next /24: its own.
    assert_eq!(one("198.18.1.1"), None);
    // IPv6 /56: 2001:db8:0:0000::/56 holds 2001:db8:0:ff::/64.
    assert_eq!(one("2001:db8::1"), None);
    assert_eq!(one("2001:db8:0:ff::2"), Some(Limit::Drop));
    assert_eq!(one("2001:db8:0:100::1"), None);
    // An IPv6 netblock never shares with the IPv4 one of equal bits.
    assert_eq!(one("::c612:0"), None);
    // Prefix lengths are options.
    let r32 = Rrl::new(
        RrlConfig {
            slip: 0,
            ipv4_prefix_length: 32,
            ipv6_prefix_length: 128,
            ..cfg(1)
        },
        9,
    );
    assert_eq!(r32.check(0, ip("198.18.0.1"), false, &a), None);
    assert_eq!(r32.check(0, ip("198.18.0.2"), false, &a), None);
    assert_eq!(r32.check(0, ip("2001:db8::1"), false, &a), None);
    assert_eq!(r32.check(0, ip("2001:db8::2"), false, &a), None);
}

#[test]
fn keys_separate_names_types_and_classes() {
    let r = Rrl::new(RrlConfig { slip: 0, ..cfg(1) }, 9);
    let www = wire("www.example.");
    let mail = wire("mail.example.");
    let c = "198.18.0.1";
    assert_eq!(r.check(0, ip(c), false, &answer(&www)), None);
    assert_eq!(r.check(0, ip(c), false, &answer(&mail)), None);
    let aaaa = Response {
        qtype: 28,
        ..answer(&www)
    };
    assert_eq!(r.check(0, ip(c), false, &aaaa), None);
    let nodata = |qtype| Response {
        class: ResponseClass::Nodata,
        qtype,
        ..answer(&www)
    };
    // NODATA accounts ignore the type (BIND: nothing in the answer says which).
    assert_eq!(r.check(0, ip(c), false, &nodata(16)), None);
    assert_eq!(r.check(0, ip(c), false, &nodata(15)), Some(Limit::Drop));
    // A wildcard account differs from the exact name's.
    let w = Response {
        wildcard: true,
        ..answer(&www)
    };
    assert_eq!(r.check(0, ip(c), false, &w), None);
}

#[test]
fn per_class_rates_default_to_responses_per_second() {
    let r = Rrl::new(
        RrlConfig {
            nxdomains_per_second: Some(0),
            errors_per_second: Some(2),
            slip: 0,
            ..cfg(1)
        },
        1,
    );
    let z = wire("example.");
    let of = |class| Response {
        class,
        ..answer(&z)
    };
    // NXDOMAIN unlimited (0), errors at 2, NODATA and referrals at 1 (the default).
    assert_eq!(
        passes(&run(&r, 0, "198.18.0.1", &of(ResponseClass::Nxdomain), 50)),
        50
    );
    assert_eq!(
        passes(&run(&r, 0, "198.18.0.1", &of(ResponseClass::Error), 5)),
        2
    );
    assert_eq!(
        passes(&run(&r, 0, "198.18.0.1", &of(ResponseClass::Nodata), 5)),
        1
    );
    assert_eq!(
        passes(&run(&r, 0, "198.18.0.1", &of(ResponseClass::Referral), 5)),
        1
    );
    // responses-per-second 0 with one class set: only that class is limited.
    let only = Rrl::new(
        RrlConfig {
            nxdomains_per_second: Some(1),
            slip: 0,
            ..cfg(0)
        },
        1,
    );
    assert!(only.config().enabled());
    assert_eq!(
        passes(&run(
            &only,
            0,
            "198.18.0.1",
            &of(ResponseClass::Response),
            9
        )),
        9
    );
    assert_eq!(
        passes(&run(
            &only,
            0,
            "198.18.0.1",
            &of(ResponseClass::Nxdomain),
            9
        )),
        1
    );
    assert!(!<RrlConfig>::default().enabled());
}

#[test]
fn exempt_clients_are_never_limited() {
    let r = Rrl::new(
        RrlConfig {
            exempt_clients: vec![
                "198.18.0.0/24".parse().unwrap(),
                "2001:db8::/32".parse().unwrap(),
            ],
            slip: 0,
            ..cfg(1)
        },
        1,
    );
    let name = wire("www.example.");
    let a = answer(&name);
    assert_eq!(passes(&run(&r, 0, "198.18.0.9", &a, 20)), 20);
    assert_eq!(passes(&run(&r, 0, "::ffff:198.18.0.9", &a, 20)), 20);
    assert_eq!(passes(&run(&r, 0, "2001:db8:1::1", &a, 20)), 20);
    assert_eq!(passes(&run(&r, 0, "198.18.1.9", &a, 20)), 1);
    assert_eq!(r.accounts(), 1, "exempt clients create no account");
}

#[test]
fn tcp_is_never_limited() {
    let r = Rrl::new(RrlConfig { slip: 0, ..cfg(1) }, 1);
    let name = wire("www.example.");
    let a = answer(&name);
    for _ in 0..100 {
        assert_eq!(r.check(0, ip("198.18.0.1"), true, &a), None);
    }
    // Nor does it use up the UDP account.
    assert_eq!(r.check(0, ip("198.18.0.1"), false, &a), None);
    assert_eq!(r.accounts(), 1);
}

#[test]
fn qps_scale_scales_rates_and_spares_tcp_clients() {
    let r = Rrl::new(
        RrlConfig {
            qps_scale: 10,
            slip: 0,
            ..cfg(20)
        },
        1,
    );
    let name = wire("www.example.");
    let a = answer(&name);
    // Second 0: 99 UDP responses to 99 netblocks and one TCP response: 100 qps.
    for i in 0..99u32 {
        let c = IpAddr::from(core::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)));
        assert_eq!(r.check(0, c, false, &a), None);
    }
    assert_eq!(r.check(0, ip("198.18.7.1"), true, &a), None);
    // Second 1: 100 measured > 10: rate 20 × 10 / 100 = 2.
    assert_eq!(passes(&run(&r, 1, "198.18.0.1", &a, 5)), 2);
    // The client that used TCP keeps its 20.
    assert_eq!(passes(&run(&r, 1, "198.18.7.200", &a, 25)), 20);
    // Second 2 measures second 1's 30 responses: 20 × 10 / 30 = 6.
    assert_eq!(passes(&run(&r, 2, "198.18.9.1", &a, 10)), 6);
    // Second 4 (second 3 silent): 10 responses over 2 seconds = 5 ≤ 10, no scaling.
    assert_eq!(passes(&run(&r, 4, "198.18.10.1", &a, 25)), 20);
}

#[test]
fn qps_scale_scales_slip_above_two_and_keeps_rate_at_least_one() {
    let r = Rrl::new(
        RrlConfig {
            qps_scale: 50,
            slip: 10,
            ..cfg(1)
        },
        1,
    );
    let name = wire("www.example.");
    let a = answer(&name);
    for i in 0..100u32 {
        let c = IpAddr::from(core::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)));
        r.check(0, c, false, &a);
    }
    // 100 > 50: rate 1 × 50 / 100 rounds to 0, kept at 1; slip 10 × 50 / 100 = 5.
    use Limit::{Drop as D, Slip as S};
    assert_eq!(
        run(&r, 1, "198.18.0.1", &a, 7),
        [None, Some(S), Some(D), Some(D), Some(D), Some(D), Some(S)]
    );
    // slip 2 is never scaled, slip 4 not below 2.
    let r2 = Rrl::new(
        RrlConfig {
            qps_scale: 1,
            slip: 4,
            ..cfg(1)
        },
        1,
    );
    for i in 0..100u32 {
        let c = IpAddr::from(core::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)));
        r2.check(0, c, false, &a);
    }
    assert_eq!(
        run(&r2, 1, "198.18.0.1", &a, 5),
        [None, Some(S), Some(D), Some(S), Some(D)]
    );
}

#[test]
fn a_full_bucket_keeps_the_accounts_that_matter() {
    // One bucket of eight slots; every account has two of them.
    let r = Rrl::new(
        RrlConfig {
            max_table_size: 1,
            slip: 0,
            ..cfg(1)
        },
        1,
    );
    assert_eq!(r.capacity(), 8);
    let name = wire("www.example.");
    let a = answer(&name);
    let flooder = ip("198.18.0.1");
    assert_eq!(passes(&run(&r, 0, "198.18.0.1", &a, 20)), 1);
    assert_eq!(r.peek(flooder, &a).unwrap().balance, -15);
    // A thousand other netblocks, one response each, in the same second: free slots go
    // first, then accounts with more tokens than the flooder's debt.
    for i in 1..=1000u32 {
        let c = IpAddr::from(core::net::Ipv4Addr::from(0xc612_0000 + (i << 8)));
        assert_eq!(r.check(0, c, false, &a), None);
    }
    assert_eq!(r.accounts(), 8);
    assert_eq!(r.peek(flooder, &a).unwrap().balance, -15);
    assert_eq!(r.check(1, flooder, false, &a), Some(Limit::Drop));
    // An account charged longer ago goes before one charged this second, whatever its
    // balance: at 40, every account of seconds 0 and 1 is older than the window and
    // goes before the new ones, the flooder too once it is the last old one.
    for i in 1001..=3000u32 {
        let c = IpAddr::from(core::net::Ipv4Addr::from(0xc612_0000 + (i << 8)));
        assert_eq!(r.check(40, c, false, &a), None);
    }
    assert!(r.peek(flooder, &a).is_none());
    // Evicted, it starts afresh (BIND would too after `window` seconds).
    assert_eq!(r.check(40, flooder, false, &a), None);
    assert_eq!(r.accounts(), 8);
    // Many more accounts than slots over time: no panic, the table stays at its size.
    for i in 0..10_000u32 {
        let c = IpAddr::from(core::net::Ipv4Addr::from(i << 8));
        r.check(50 + i / 100, c, false, &a);
    }
    assert_eq!(r.accounts(), 8);
    // The default size: 20,000 rounded up to 32,768 slots of 8 bytes.
    let d = Rrl::new(cfg(1), 1);
    assert_eq!((d.capacity(), d.heap_bytes()), (32_768, 256 * 1024));
}

#[test]
fn out_of_range_options_are_reported_and_clamped() {
    assert_eq!(RrlConfig::default().check(), Ok(()));
    let bad = [
        (cfg(1001), RrlConfigError::Rate),
        (
            RrlConfig {
                window: 0,
                ..cfg(1)
            },
            RrlConfigError::Window,
        ),
        (RrlConfig { slip: 11, ..cfg(1) }, RrlConfigError::Slip),
        (
            RrlConfig {
                ipv4_prefix_length: 33,
                ..cfg(1)
            },
            RrlConfigError::Ipv4Prefix,
        ),
        (
            RrlConfig {
                ipv6_prefix_length: 129,
                ..cfg(1)
            },
            RrlConfigError::Ipv6Prefix,
        ),
        (
            RrlConfig {
                max_table_size: 0,
                ..cfg(1)
            },
            RrlConfigError::TableSize,
        ),
    ];
    for (c, e) in bad {
        assert_eq!(c.check(), Err(e));
        // Rrl::new takes it anyway, clamped, and works.
        let r = Rrl::new(c, 1);
        let name = wire("x.");
        r.check(0, ip("198.18.0.1"), false, &answer(&name));
    }
}

#[test]
fn concurrent_debits_are_never_lost() {
    const THREADS: usize = 8;
    const EACH: usize = 10_000;
    for slip in [0u8, 2] {
        let r = Arc::new(Rrl::new(
            RrlConfig {
                window: 3600,
                slip,
                ..cfg(1000)
            },
            42,
        ));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let name = wire("www.example.");
                    let a = answer(&name);
                    let (mut pass, mut slips, mut drops) = (0usize, 0usize, 0usize);
                    for i in 0..EACH {
                        // Workers in one /24 with different hosts.
                        let c = IpAddr::from([198, 18, 0, (t * 16 + i % 16) as u8]);
                        match r.check(7, c, false, &a) {
                            None => pass += 1,
                            Some(Limit::Slip) => slips += 1,
                            Some(Limit::Drop) => drops += 1,
                        }
                    }
                    (pass, slips, drops)
                })
            })
            .collect();
        let (mut pass, mut slips, mut drops) = (0, 0, 0);
        for h in handles {
            let (p, s, d) = h.join().unwrap();
            pass += p;
            slips += s;
            drops += d;
        }
        let total = THREADS * EACH;
        assert_eq!(pass, 1000, "exactly `rate` responses pass");
        let limited = total - 1000;
        if slip == 0 {
            assert_eq!((slips, drops), (0, limited));
        } else {
            assert_eq!((slips, drops), (limited / 2, limited / 2));
        }
        let name = wire("www.example.");
        let acct = r.peek(ip("198.18.0.1"), &answer(&name)).unwrap();
        assert_eq!(acct.balance, 1000 - total as i32, "every debit counted");
    }
}

// --- Through the engine -------------------------------------------------------------

fn engine(rrl: RrlConfig) -> Engine {
    let mut b = EngineBuilder::new();
    b.acl_mut()
        .insert("0.0.0.0/0".parse().unwrap(), crate::acl::AclAction::Allow);
    b.local_zone(
        WireName::parse("local.", None).unwrap(),
        crate::localzone::LocalZoneType::Static,
    );
    for l in [
        "local. 3600 IN SOA ns.local. h.local. 1 3600 600 86400 300",
        "www.local. 300 IN A 198.18.0.1",
        "mail.local. 300 IN A 198.18.0.2",
    ] {
        b.local_data(parse_rr(l, None, 3600).unwrap(), 0);
    }
    let recs = [
        "ex. 3600 IN SOA ns.ex. h.ex. 1 2 3 4 300",
        "ex. 3600 IN NS ns.ex.",
        "ns.ex. 3600 IN A 198.18.0.53",
        "www.ex. 3600 IN A 198.18.0.80",
        "*.wild.ex. 3600 IN TXT \"w\"",
        "sub.ex. 3600 IN NS ns.sub.ex.",
        "ns.sub.ex. 3600 IN A 198.18.0.54",
    ];
    b.auth_zone(AuthZoneSpec {
        name: WireName::parse("ex.", None).unwrap(),
        records: recs
            .iter()
            .map(|s| (parse_rr(s, None, 3600).unwrap(), 0))
            .collect(),
    });
    b.rrl(Arc::new(Rrl::new(rrl, 0x1234)));
    b.build().unwrap()
}

fn query(name: &str, qtype: u16, edns: Option<bool>) -> Vec<u8> {
    let mut p = vec![
        0xab,
        0xcd,
        1,
        0,
        0,
        1,
        0,
        0,
        0,
        0,
        0,
        u8::from(edns.is_some()),
    ];
    p.extend_from_slice(WireName::parse(name, None).unwrap().as_bytes());
    p.extend_from_slice(&qtype.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    if let Some(d) = edns {
        p.extend_from_slice(&[0, 0, 0x29, 0x10, 0, 0, 0, if d { 0x80 } else { 0 }, 0, 0, 0]);
    }
    p
}

fn ask(e: &Engine, src: &str, t: Transport, q: &[u8]) -> (Outcome, Vec<u8>) {
    let mut out = vec![0u8; 4096];
    let req = Request {
        src: ip(src),
        transport: t,
        now: 50,
    };
    let o = e.handle_query(&req, q, &mut out);
    if let Outcome::Reply { len, .. } = o {
        out.truncate(len);
    }
    (o, out)
}

fn kinds(e: &Engine, src: &str, names: &[String], qtype: u16) -> String {
    names
        .iter()
        .map(
            |n| match ask(e, src, Transport::Udp, &query(n, qtype, None)).0 {
                Outcome::Reply { info, .. } if info.slipped => 'S',
                Outcome::Reply { .. } => '.',
                Outcome::Drop {
                    reason: DropReason::RateLimited,
                    ..
                } => 'D',
                Outcome::Drop { .. } | Outcome::Resolve => '?',
            },
        )
        .collect()
}

fn names(f: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| f.replace("{}", &std::format!("{i}")))
        .collect()
}

#[test]
fn engine_slip_is_a_truncated_empty_reply() {
    let e = engine(RrlConfig { slip: 1, ..cfg(1) });
    let q = query("WWW.local.", 1, Some(true));
    let (o, full) = ask(&e, "198.18.0.1", Transport::Udp, &q);
    assert!(matches!(o, Outcome::Reply { info, .. } if !info.slipped && info.qtype == 1));
    assert_eq!(&full[6..8], &[0, 1]);
    let (o, r) = ask(&e, "198.18.0.1", Transport::Udp, &q);
    let Outcome::Reply { info, len } = o else {
        panic!("{o:?}")
    };
    assert_eq!(
        info,
        ReplyInfo {
            rcode: 0,
            hot: true,
            truncated: true,
            inform: false,
            qtype: 1,
            slipped: true,
            rrl_would: None,
            cached: false,
            refresh: false,
        }
    );
    let question = &q[12..q.len() - 11];
    assert_eq!(len, 12 + question.len() + 11);
    // ID, QR AA TC RD RA, QD 1, AN 0, NS 0, AR 1 (OPT), the question as asked.
    assert_eq!(&r[..12], &[0xab, 0xcd, 0x87, 0x80, 0, 1, 0, 0, 0, 0, 0, 1]);
    assert_eq!(&r[12..12 + question.len()], question);
    assert_eq!(
        &r[len - 11..],
        b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00"
    );
    // Without EDNS: no OPT.
    let (o, r) = ask(
        &e,
        "198.18.0.1",
        Transport::Udp,
        &query("www.local.", 1, None),
    );
    assert!(matches!(o, Outcome::Reply { info, .. } if info.slipped));
    assert_eq!(&r[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(r.len(), 12 + 15);
    // Over TCP: never limited.
    let (o, _) = ask(&e, "198.18.0.1", Transport::Tcp, &q);
    assert!(matches!(o, Outcome::Reply { info, .. } if !info.slipped && !info.truncated));
}

#[test]
fn engine_errors_leak_instead_of_truncating() {
    let e = engine(RrlConfig { slip: 2, ..cfg(1) });
    let q = query("elsewhere.", 1, None);
    let (o, first) = ask(&e, "198.18.0.1", Transport::Udp, &q);
    assert!(matches!(o, Outcome::Reply { info, .. } if info.rcode == 5 && !info.slipped));
    let (o, leaked) = ask(&e, "198.18.0.1", Transport::Udp, &q);
    let Outcome::Reply { info, .. } = o else {
        panic!("{o:?}")
    };
    assert!(info.slipped && !info.truncated);
    assert_eq!(leaked, first, "sent as it is");
    let (o, _) = ask(&e, "198.18.0.1", Transport::Udp, &q);
    assert_eq!(
        o,
        Outcome::Drop {
            reason: DropReason::RateLimited,
            inform: false
        }
    );
    // General-path errors too (NOTIMP to another opcode).
    let mut notify = query("www.local.", 1, None);
    notify[2] = 0x20; // opcode 4
    let got: String = (0..4)
        .map(|_| match ask(&e, "198.18.9.1", Transport::Udp, &notify).0 {
            Outcome::Reply { info, .. } if info.slipped => 'S',
            Outcome::Reply { .. } => '.',
            _ => 'D',
        })
        .collect();
    assert_eq!(got, ".SDS");
}

#[test]
fn engine_nxdomain_is_counted_per_zone() {
    let e = engine(RrlConfig {
        slip: 0,
        nxdomains_per_second: Some(2),
        ..cfg(100)
    });
    // Random names in one zone share the zone's account (local and authoritative).
    assert_eq!(kinds(&e, "198.18.0.1", &names("r{}.local.", 4), 1), "..DD");
    assert_eq!(kinds(&e, "198.18.0.1", &names("x.r{}.ex.", 4), 1), "..DD");
    // Answers are counted per name.
    assert_eq!(kinds(&e, "198.18.0.1", &names("www.local.", 4), 1), "....");
}

#[test]
fn engine_wildcard_and_referral_accounts() {
    let e = engine(RrlConfig { slip: 0, ..cfg(2) });
    // Names synthesised from *.wild.ex. share one account, NODATA there too.
    assert_eq!(
        kinds(&e, "198.18.0.1", &names("h{}.wild.ex.", 4), 16),
        "..DD"
    );
    assert_eq!(
        kinds(&e, "198.18.1.1", &names("h{}.wild.ex.", 4), 1),
        "..DD"
    );
    // Referrals are counted per delegation point.
    assert_eq!(kinds(&e, "198.18.2.1", &names("h{}.sub.ex.", 4), 1), "..DD");
    // NODATA in the zone proper: per name.
    assert_eq!(kinds(&e, "198.18.3.1", &names("www.ex.", 1), 16), ".");
    assert_eq!(kinds(&e, "198.18.3.1", &names("ns.ex.", 1), 16), ".");
}

#[test]
fn engine_log_only_sends_everything_and_says_what_it_would_do() {
    let e = engine(RrlConfig {
        log_only: true,
        ..cfg(1)
    });
    let q = query("www.local.", 1, None);
    let (_, first) = ask(&e, "198.18.0.1", Transport::Udp, &q);
    let would: Vec<Option<Limit>> = (0..3)
        .map(|_| {
            let (o, r) = ask(&e, "198.18.0.1", Transport::Udp, &q);
            assert_eq!(r, first, "sent unchanged");
            match o {
                Outcome::Reply { info, .. } => {
                    assert!(!info.slipped);
                    info.rrl_would
                }
                d => panic!("{d:?}"),
            }
        })
        .collect();
    assert_eq!(
        would,
        [Some(Limit::Slip), Some(Limit::Drop), Some(Limit::Slip)]
    );
}

#[test]
fn engine_without_rrl_is_unlimited() {
    let mut e = engine(cfg(1));
    assert!(e.rrl().is_some());
    e.set_rrl(None);
    assert_eq!(
        kinds(&e, "198.18.0.1", &names("www.local.", 50), 1)
            .matches('.')
            .count(),
        50
    );
}

fn arb_response() -> impl Strategy<Value = (u8, u16, u16, Vec<u8>, bool)> {
    (
        0u8..5,
        any::<u16>(),
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..300),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// One account through any sequence of seconds (forward, repeated, a little
    /// backward as a slower worker's clock would be) gives, response by response, the
    /// verdicts of a plain model of BIND's `debit_rrl_entry`, written here without the
    /// packed word, the in-place debit or the table.
    #[test]
    fn one_account_follows_a_model_of_bind(
        steps in proptest::collection::vec((0u32..5, any::<bool>(), 1usize..25), 1..30),
        rate in 1u32..30,
        window in 1u32..20,
        slip in 0u8..5,
        start in 0u32..100_000,
    ) {
        let r = Rrl::new(
            RrlConfig {
                responses_per_second: rate,
                window,
                slip,
                ..RrlConfig::default()
            },
            11,
        );
        let name = wire("www.example.");
        let a = answer(&name);
        // The model: balance, last second charged, slip counter.
        let mut acct: Option<(i64, u32, u32)> = None;
        let (rate_l, window_l) = (i64::from(rate), i64::from(window));
        let mut now = start;
        for (dt, back, n) in steps {
            // A step back of up to 2 s (within MAX_TIME_TRAVEL) counts as "now".
            now = if back { now.wrapping_sub(dt.min(2)) } else { now.wrapping_add(dt) };
            for _ in 0..n {
                let (mut bal, mut sc, time) = match acct {
                    None => (rate_l, 0, now),
                    Some((b, t, c)) => {
                        let el = now.wrapping_sub(t) & 0x3fff;
                        let el = if el > 0x3fff - 5 { 0 } else { i64::from(el) };
                        let time = if el == 0 { t } else { now };
                        if el > window_l || b + rate_l * el > rate_l {
                            (rate_l, 0, time)
                        } else {
                            (b + rate_l * el, c, time)
                        }
                    }
                };
                bal -= 1;
                let want = if bal >= 0 {
                    None
                } else {
                    bal = bal.max(-window_l * rate_l);
                    let mut v = Limit::Drop;
                    if slip != 0 {
                        if sc == 0 {
                            v = Limit::Slip;
                        }
                        sc += 1;
                        if sc >= u32::from(slip) {
                            sc = 0;
                        }
                    }
                    Some(v)
                };
                acct = Some((bal, time & 0x3fff, sc));
                prop_assert_eq!(r.check(now, ip("198.18.0.1"), false, &a), want);
            }
        }
    }

    /// Any response, client, time and option set: no panic, the table stays in bounds.
    #[test]
    fn never_panics(
        (class, qtype, qclass, name, wildcard) in arb_response(),
        client in any::<u128>(),
        v4 in any::<bool>(),
        tcp in any::<bool>(),
        now in any::<u32>(),
        rates in proptest::array::uniform6(0u32..2000),
        window in 0u32..5000,
        slip in any::<u8>(),
        prefixes in (any::<u8>(), any::<u8>()),
        qps_scale in 0u32..200,
        max_table_size in 0usize..64,
    ) {
        let r = Rrl::new(
            RrlConfig {
                responses_per_second: rates[0],
                nodata_per_second: Some(rates[1]),
                nxdomains_per_second: Some(rates[2]),
                referrals_per_second: (rates[3] % 2 == 0).then_some(rates[3]),
                errors_per_second: Some(rates[4]),
                all_per_second: rates[5],
                window,
                slip,
                ipv4_prefix_length: prefixes.0,
                ipv6_prefix_length: prefixes.1,
                exempt_clients: Vec::new(),
                qps_scale,
                log_only: false,
                max_table_size,
                min_table_size: 0,
            },
            client as u64,
        );
        let src = if v4 {
            IpAddr::from(core::net::Ipv4Addr::from(client as u32))
        } else {
            IpAddr::from(core::net::Ipv6Addr::from(client))
        };
        let resp = Response {
            class: ResponseClass::from_bits(class),
            qtype,
            qclass,
            name_hash: crate::store::name_hash(&name),
            wildcard,
        };
        for i in 0..20u32 {
            r.check(now.wrapping_add(i / 4), src, tcp, &resp);
        }
        prop_assert!(r.accounts() <= r.capacity());
    }

    /// Arbitrary datagrams through an engine whose every reply is limited: no panic,
    /// and every slipped reply is a well-formed header with TC and no records.
    #[test]
    fn engine_never_panics_and_slips_are_well_formed(
        q in proptest::collection::vec(any::<u8>(), 0..600),
        tcp in any::<bool>(),
    ) {
        let e = engine(RrlConfig { slip: 1, ..cfg(1) });
        let transport = if tcp { Transport::Tcp } else { Transport::Udp };
        for _ in 0..3 {
            let (o, r) = ask(&e, "198.18.0.1", transport, &q);
            if let Outcome::Reply { info, .. } = o
                && info.slipped
                && info.truncated
            {
                prop_assert!(r.len() >= 12);
                prop_assert!(r[2] & 0x02 != 0, "TC");
                prop_assert_eq!(&r[6..10], &[0, 0, 0, 0]);
            }
        }
    }
}
