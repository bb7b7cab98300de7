//! Test vectors from keepalived 2.2.7: what it actually sent on a veth pair, captured with
//! tcpdump by `tests/capture-keepalived.sh` (as root: `bash
//! host-agent/vrrp/tests/capture-keepalived.sh`; the script holds the exact keepalived
//! configurations and commands) into `tests/fixtures/keepalived.txt`.
//!
//! For every scenario: our parser reads keepalived's adverts with the fields it was
//! configured with, our encoder writes the same bytes for the same parameters, our router
//! follows them, and our announcements match keepalived's (where they differ, the test
//! says how and why).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use skua_vrrp::announce::{self, Arp, Na};
use skua_vrrp::packet::{self, Advert, ChecksumMode, ParseError};
use skua_vrrp::router::{Config, Drop, Output, Reason, Router, State};

const FIXTURE: &str = include_str!("fixtures/keepalived.txt");
/// keepalived's interface MAC in the capture (veth-ka).
const KA_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const S: u64 = 1_000_000_000;

#[derive(Debug)]
struct Line {
    scenario: String,
    kind: String,
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    ttl: Option<u8>,
    bytes: Vec<u8>,
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn lines() -> Vec<Line> {
    FIXTURE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 6, "fixture line {l}");
            Line {
                scenario: f[0].to_string(),
                kind: f[1].to_string(),
                src: f[2].parse().ok(),
                dst: f[3].parse().ok(),
                ttl: f[4].parse().ok(),
                bytes: hex(f[5]),
            }
        })
        .collect()
}

fn of<'a>(all: &'a [Line], scenario: &str, kind: &str) -> Vec<&'a Line> {
    let v: Vec<&Line> = all
        .iter()
        .filter(|l| l.scenario == scenario && l.kind == kind)
        .collect();
    assert!(!v.is_empty(), "no {kind} in scenario {scenario}");
    v
}

/// What each scenario's keepalived was configured with (capture-keepalived.sh).
struct Expect {
    scenario: &'static str,
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    priority: u8,
    interval_cs: u16,
    addrs: Vec<IpAddr>,
    mode: ChecksumMode,
}

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}
fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
}

fn expectations() -> Vec<Expect> {
    let vip4 = v4([198, 18, 53, 53]);
    let vip6 = v6("fd00::53:53");
    let ka4 = v4([198, 18, 0, 1]);
    let peer4 = v4([198, 18, 0, 2]);
    // veth-ka's link-local, from its MAC 02:00:00:00:00:01 (modified EUI-64).
    let ka_ll = v6("fe80::ff:fe00:1");
    let e = |scenario, src, dst, ttl, priority, interval_cs, addrs, mode| Expect {
        scenario,
        src,
        dst,
        ttl,
        priority,
        interval_cs,
        addrs,
        mode,
    };
    vec![
        e(
            "v4_mcast",
            ka4,
            IpAddr::V4(packet::MCAST_V4),
            255,
            100,
            100,
            vec![vip4],
            ChecksumMode::Rfc,
        ),
        e(
            "v4_mcast_fast",
            ka4,
            IpAddr::V4(packet::MCAST_V4),
            255,
            200,
            10,
            vec![vip4, v4([198, 18, 53, 54])],
            ChecksumMode::Rfc,
        ),
        e(
            "v6_mcast",
            ka_ll,
            IpAddr::V6(packet::MCAST_V6),
            255,
            100,
            100,
            vec![vip6],
            ChecksumMode::Rfc,
        ),
        e(
            "v4_unicast",
            ka4,
            peer4,
            255,
            100,
            100,
            vec![vip4],
            ChecksumMode::Rfc,
        ),
        e(
            "v4_unicast_old",
            ka4,
            peer4,
            255,
            100,
            100,
            vec![vip4],
            ChecksumMode::OldUnicast,
        ),
        // keepalived sends IPv6 unicast with the kernel's default hop limit, 64.
        e(
            "v6_unicast",
            v6("fd00::1"),
            v6("fd00::2"),
            64,
            100,
            100,
            vec![vip6],
            ChecksumMode::Rfc,
        ),
    ]
}

#[test]
fn parser_reads_keepalived_adverts() {
    let all = lines();
    for x in expectations() {
        let adverts = of(&all, x.scenario, "vrrp");
        // Its running advert and its priority-0 goodbye on SIGTERM, nothing else.
        assert_eq!(adverts.len(), 2, "{}", x.scenario);
        let mut prios = vec![];
        for l in adverts {
            assert_eq!(
                (l.src, l.dst, l.ttl),
                (Some(x.src), Some(x.dst), Some(x.ttl)),
                "{}",
                x.scenario
            );
            let a = packet::parse(&l.bytes, x.src, x.dst, x.mode)
                .unwrap_or_else(|e| panic!("{}: {e}", x.scenario));
            assert_eq!(a.vrid, 51, "{}", x.scenario);
            assert_eq!(a.max_advert_int_cs, x.interval_cs, "{}", x.scenario);
            assert_eq!(a.addrs, x.addrs, "{}", x.scenario);
            prios.push(a.priority);
        }
        prios.sort();
        assert_eq!(prios, [0, x.priority], "{}", x.scenario);
    }
}

#[test]
fn encoder_writes_keepalived_bytes() {
    let all = lines();
    for x in expectations() {
        for l in of(&all, x.scenario, "vrrp") {
            let priority = l.bytes[2];
            let ours = Advert {
                vrid: 51,
                priority,
                max_advert_int_cs: x.interval_cs,
                addrs: x.addrs.clone(),
            }
            .encode(x.src, x.dst, x.mode);
            assert_eq!(
                ours, l.bytes,
                "{} priority {priority}: ours {ours:02x?}",
                x.scenario
            );
        }
    }
}

#[test]
fn old_unicast_checksum_is_keepalived_s() {
    let all = lines();
    let (ka, peer) = (v4([198, 18, 0, 1]), v4([198, 18, 0, 2]));
    for l in of(&all, "v4_unicast_old", "vrrp") {
        // An RFC receiver refuses it; the old-checksum mode accepts it; and it is exactly
        // the multicast advert's checksum (224.0.0.18 in the pseudo-header).
        assert_eq!(
            packet::parse(&l.bytes, ka, peer, ChecksumMode::Rfc),
            Err(ParseError::Checksum)
        );
        assert!(packet::parse(&l.bytes, ka, peer, ChecksumMode::OldUnicast).is_ok());
    }
    let old: Vec<_> = of(&all, "v4_unicast_old", "vrrp")
        .iter()
        .map(|l| l.bytes.clone())
        .collect();
    let mcast: Vec<_> = of(&all, "v4_mcast", "vrrp")
        .iter()
        .map(|l| l.bytes.clone())
        .collect();
    assert_eq!(old, mcast);
    // And keepalived's RFC unicast checksum is accepted in both modes.
    for l in of(&all, "v4_unicast", "vrrp") {
        assert!(packet::parse(&l.bytes, ka, peer, ChecksumMode::Rfc).is_ok());
        assert!(packet::parse(&l.bytes, ka, peer, ChecksumMode::OldUnicast).is_ok());
    }
}

fn backup_config(x: &Expect) -> Config {
    let unicast = !x.dst.is_multicast();
    Config {
        vrid: 51,
        priority: 50,
        advert_interval_cs: 100,
        preempt: true,
        preempt_delay_ms: 0,
        accept_mode: false,
        primary: match x.src {
            IpAddr::V4(_) if unicast => x.dst,
            IpAddr::V4(_) => v4([198, 18, 0, 2]),
            IpAddr::V6(_) if unicast => x.dst,
            IpAddr::V6(_) => v6("fe80::ff:fe00:2"),
        },
        addresses: x.addrs.clone(),
        unicast_peers: if unicast { vec![x.src] } else { vec![] },
        checksum: x.mode,
    }
}

#[test]
fn router_follows_a_keepalived_master() {
    let all = lines();
    for x in expectations() {
        let ads = of(&all, x.scenario, "vrrp");
        let running = ads.iter().find(|l| l.bytes[2] != 0).unwrap();
        let goodbye = ads.iter().find(|l| l.bytes[2] == 0).unwrap();
        let mut r = Router::new(backup_config(&x)).unwrap();
        if x.ttl != 255 {
            // keepalived's IPv6 unicast adverts carry hop limit 64 (its `unicast_ttl` unset):
            // refused as RFC 9568 §7.1 says, unless the check is relaxed for such peers.
            assert_eq!(
                r.handle_advert(0, x.src, x.dst, x.ttl, &running.bytes),
                Err(Drop::BadTtl),
                "{}",
                x.scenario
            );
            r = Router::new(backup_config(&x)).unwrap();
            r.set_strict_unicast_ttl(false);
        }
        r.startup(0);
        r.handle_advert(S, x.src, x.dst, x.ttl, &running.bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", x.scenario));
        assert_eq!(r.state(), State::Backup);
        assert_eq!(
            r.master_adver_interval_cs(),
            x.interval_cs,
            "{}",
            x.scenario
        );
        assert_eq!(r.address_mismatches(), 0, "{}", x.scenario);
        assert_eq!(r.poll_timeout(), Some(S + r.master_down_interval_ns()));
        let fm = r.foreign_master().unwrap();
        assert_eq!(
            (fm.addr, fm.priority, fm.released),
            (x.src, x.priority, false)
        );
        // keepalived stops: we take over after our Skew_Time.
        r.handle_advert(2 * S, x.src, x.dst, x.ttl, &goodbye.bytes)
            .unwrap();
        assert!(r.foreign_master().unwrap().released);
        assert_eq!(r.poll_timeout(), Some(2 * S + r.skew_ns()));
        r.handle_timeout(2 * S + r.skew_ns());
        let out: Vec<Output> = std::iter::from_fn(|| r.poll_output()).collect();
        assert!(out.contains(&Output::Transition {
            from: State::Backup,
            to: State::Master,
            reason: Reason::PriorityZero
        }));
    }
}

#[test]
fn rfc_router_refuses_the_old_checksum() {
    let all = lines();
    let x = expectations()
        .into_iter()
        .find(|x| x.scenario == "v4_unicast_old")
        .unwrap();
    let mut c = backup_config(&x);
    c.checksum = ChecksumMode::Rfc;
    let mut r = Router::new(c).unwrap();
    r.startup(0);
    let l = of(&all, "v4_unicast_old", "vrrp")[0];
    assert_eq!(
        r.handle_advert(S, x.src, x.dst, x.ttl, &l.bytes),
        Err(Drop::Parse(ParseError::Checksum))
    );
}

#[test]
fn gratuitous_arp_matches_keepalived_but_for_the_target_mac() {
    let all = lines();
    let mut n = 0;
    for scenario in ["v4_mcast", "v4_mcast_fast", "v4_unicast", "v4_unicast_old"] {
        for l in of(&all, scenario, "arp") {
            let a = announce::parse_arp(&l.bytes).expect("keepalived's GARP parses");
            assert_eq!(a.op, announce::ARP_REQUEST);
            assert_eq!(a.sender_mac, KA_MAC);
            assert_eq!(a.sender_ip, a.target_ip);
            let ours = announce::garp_frame(KA_MAC, a.sender_ip);
            // keepalived puts the broadcast address in the target hardware address; RFC 5227
            // §3 says zero, as we do. Every other byte is the same.
            assert_eq!(&l.bytes[32..38], &[0xff; 6]);
            assert_eq!(&ours[32..38], &[0; 6]);
            assert_eq!(ours[..32], l.bytes[..32], "{scenario}");
            assert_eq!(ours[38..], l.bytes[38..], "{scenario}");
            assert_eq!(
                announce::parse_arp(&ours),
                Some(Arp {
                    op: 1,
                    sender_mac: KA_MAC,
                    sender_ip: a.sender_ip,
                    target_ip: a.sender_ip
                })
            );
            n += 1;
        }
    }
    assert_eq!(n, 5, "one GARP per VIP per scenario");
}

#[test]
fn unsolicited_na_matches_keepalived() {
    let all = lines();
    for scenario in ["v6_mcast", "v6_unicast"] {
        for l in of(&all, scenario, "na") {
            let (Some(IpAddr::V6(src)), Some(dst), Some(ttl)) = (l.src, l.dst, l.ttl) else {
                panic!("{l:?}")
            };
            assert_eq!(dst, IpAddr::V6(announce::ALL_NODES));
            assert_eq!(ttl, 255);
            let na = announce::parse_na(&l.bytes).expect("keepalived's NA parses");
            assert_eq!(
                na,
                Na {
                    target: "fd00::53:53".parse().unwrap(),
                    mac: Some(KA_MAC),
                    override_flag: true
                }
            );
            // Router flag clear in the capture (no forwarding in the namespace), so ours is
            // byte for byte keepalived's, given its source (keepalived sends from the
            // virtual address itself; skua-agent passes its link-local address).
            assert_eq!(announce::na_flags(&l.bytes), Some((false, false)));
            assert_eq!(
                announce::unsolicited_na(src, na.target, KA_MAC),
                l.bytes,
                "{scenario}"
            );
        }
    }
}
