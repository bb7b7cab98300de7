//! Response rate limiting on loopback: a flood of queries "from" one address (what a
//! reflection attack sends with the victim's address spoofed) is cut to the configured rate,
//! half of the excess slipped (TC=1, no records: a real client retries over TCP) and the
//! rest dropped; another client keeps getting full answers; TCP is never limited; the
//! counters show it in /metrics.

use crate::common::*;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

const TXT: u16 = 16;

#[test]
fn flood_is_slipped_and_dropped_while_others_are_answered() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("rrl");
    let (p, a) = (free_port(), free_port());
    let mut text = config(p, a, &dir.0, "");
    text.push_str(
        "server:\n  local-data: 'big.example. 300 IN TXT \"amplification amplification amplification amplification\"'\n  \
         rrl-responses-per-second: 5\n  rrl-window: 5\n  rrl-slip: 2\n  rrl-ipv4-prefix-length: 32\n",
    );
    let d = start(&dir.0, &text, p, a);
    let victim: IpAddr = Ipv4Addr::new(127, 0, 0, 2).into();
    let other: IpAddr = Ipv4Addr::new(127, 0, 0, 3).into();

    // The other client: 4 queries a second for 2 s, under the limit of its own account.
    let server = d.dns;
    let bystander = std::thread::spawn(move || {
        let s = UdpSocket::bind(SocketAddr::new(other, 0)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut full = 0;
        for i in 0..8u16 {
            let q = query(0x1000 + i, "big.example.", TXT);
            s.send_to(&q, server).unwrap();
            let mut b = [0u8; 1500];
            if let Ok((n, _)) = s.recv_from(&mut b)
                && n > 12
                && b[2] & 0x02 == 0
                && u16::from_be_bytes([b[6], b[7]]) == 1
            {
                full += 1;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        full
    });

    // The flood: 1,000 queries in about a second from the victim's address.
    let s = UdpSocket::bind(SocketAddr::new(victim, 0)).unwrap();
    s.set_nonblocking(true).unwrap();
    let (mut full, mut slipped, mut sent) = (0u32, 0u32, 0u32);
    let mut b = [0u8; 1500];
    let mut drain = |s: &UdpSocket, full: &mut u32, slipped: &mut u32| {
        while let Ok((n, _)) = s.recv_from(&mut b) {
            if n < 12 {
                continue;
            }
            let tc = b[2] & 0x02 != 0;
            let an = u16::from_be_bytes([b[6], b[7]]);
            match (tc, an) {
                (true, 0) => *slipped += 1,
                (false, 1) => *full += 1,
                other => panic!("unexpected reply {other:?}"),
            }
        }
    };
    let start_t = Instant::now();
    for i in 0..1000u16 {
        let q = query(i, "big.example.", TXT);
        s.send_to(&q, d.dns).unwrap();
        sent += 1;
        if i % 50 == 49 {
            std::thread::sleep(Duration::from_millis(50));
            drain(&s, &mut full, &mut slipped);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    drain(&s, &mut full, &mut slipped);
    let secs = start_t.elapsed().as_secs_f64().ceil() as u32;
    let dropped = sent - full - slipped;
    eprintln!(
        "flood: {sent} sent in {secs} s: {full} answered, {slipped} slipped, {dropped} dropped"
    );
    // 5 a second (plus the first second's full bucket), BIND arithmetic: never more.
    assert!(full <= 5 * (secs + 1), "{full} full answers in {secs} s");
    assert!(full >= 5, "{full}");
    // slip 2: every other limited response slips.
    let limited = sent - full;
    assert!(
        slipped.abs_diff(limited / 2) <= 2,
        "{slipped} slipped of {limited} limited"
    );
    assert!(dropped > 400, "{dropped}");
    assert_eq!(
        bystander.join().unwrap(),
        8,
        "the other client lost answers"
    );

    // TCP from the flooded address is exempt.
    let mut t = TcpStream::connect(d.dns).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let q = query(77, "big.example.", TXT);
    let mut msg = (q.len() as u16).to_be_bytes().to_vec();
    msg.extend_from_slice(&q);
    t.write_all(&msg).unwrap();
    let mut len = [0u8; 2];
    t.read_exact(&mut len).unwrap();
    let mut r = vec![0u8; usize::from(u16::from_be_bytes(len))];
    t.read_exact(&mut r).unwrap();
    assert_eq!(u16::from_be_bytes([r[6], r[7]]), 1, "TCP answer");

    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    let value = |key: &str| -> u64 {
        m.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} not in metrics"))
    };
    assert_eq!(
        value("skua_rrl_responses_total{path=\"socket\",action=\"slip\"}"),
        u64::from(slipped)
    );
    assert!(
        value("skua_rrl_responses_total{path=\"socket\",action=\"drop\"}") >= u64::from(dropped)
    );
}

/// `rrl-log-only: yes` decides and counts but answers everything.
#[test]
fn log_only_answers_everything_and_counts() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("rrl-log");
    let (p, a) = (free_port(), free_port());
    let mut text = config(p, a, &dir.0, "");
    text.push_str("server:\n  rrl-responses-per-second: 2\n  rrl-log-only: yes\n");
    let d = start(&dir.0, &text, p, a);
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    for i in 0..50u16 {
        s.send_to(&query(i, "a.example.", 1), d.dns).unwrap();
        let mut b = [0u8; 512];
        let (n, _) = s.recv_from(&mut b).expect("every query answered");
        assert!(n > 12 && b[2] & 0x02 == 0 && u16::from_be_bytes([b[6], b[7]]) == 1);
    }
    let m = http(&d, "GET", "/metrics", Some(tok("read")), None)
        .unwrap()
        .body;
    let would: u64 = m
        .lines()
        .filter(|l| l.starts_with("skua_rrl_responses_total{path=\"socket\",action=\"would_"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(would >= 40, "{would}\n{m}");
}
