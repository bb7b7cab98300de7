//! The XDP program's own cost per frame, measured by the kernel (`BPF_PROG_TEST_RUN` with
//! `repeat`), for the frame shapes that matter: a query answered in the program from local
//! data, one answered from a cached answer (1, 4 and 16 records, each TTL written by the
//! program), the same query redirected to the AF_XDP socket (answers off), and a frame
//! passed to the kernel.
//!
//! Run as root: `cargo run --release -p skua-xdp --example prog_cost [RUNS]`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use skua_engine::EngineBuilder;
use skua_engine::name::WireName;
use skua_engine::rrl::ResponseClass;
use skua_engine::text::parse_rr;
use skua_xdp::abi::{F_ANSWER, F_CACHE, F_TX_REDIRECT, XdpConfig};
use skua_xdp::answers::{compile, query};
use skua_xdp::bpf::XdpProgram;

fn main() {
    let repeat: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let mut b = EngineBuilder::new();
    b.acl_mut().insert(
        "198.18.0.0/15".parse().unwrap(),
        skua_engine::acl::AclAction::Allow,
    );
    for i in 0..10_000 {
        let rr = parse_rr(
            &format!("h{i}.internal. 300 IN A 198.18.{}.{}", i / 250, i % 250 + 1),
            None,
            300,
        );
        b.local_data(rr.unwrap(), 0);
    }
    b.config_mut().resolve = true;
    let engine = b.build().unwrap();
    // SKUA_XDP_OBJECT: measure another build of bpf/skua_xdp.bpf.c (same names).
    let mut p = match std::env::var_os("SKUA_XDP_OBJECT") {
        Some(path) => {
            let bytes = std::fs::read(&path).expect("read SKUA_XDP_OBJECT");
            // aya wants the ELF 8-byte aligned.
            let mut buf = vec![0u8; bytes.len() + 8];
            let off = buf.as_ptr().align_offset(8);
            buf[off..off + bytes.len()].copy_from_slice(&bytes);
            XdpProgram::load_object(&buf[off..off + bytes.len()], 65536).expect("load (root?)")
        }
        None => XdpProgram::load().expect("load (root?)"),
    };
    let c = compile(&engine, 65536);
    p.add_dest(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)))
        .unwrap();
    p.set_acl(&c.acl).unwrap();
    p.set_answers(&c.answers).unwrap();
    eprintln!("{} answers, skipped {:?}", c.answers.len(), c.skipped);
    let name = WireName::parse("h4242.internal.", None).unwrap();
    let mut frame = vec![0u8; 512];
    let len = skua_fastpath::build_udp_frame(
        &mut frame,
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        None,
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), 5353),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 53),
        &query(7, 0x0100, name.as_bytes(), 1, None),
    )
    .unwrap();
    frame.truncate(len);
    // Cached answers: n A records each, as the resolver's cache renders them (owner a
    // pointer to the question, TTL zero, one TTL patch per record), valid for 300 s from
    // second 1000 of the program's clock.
    let clients = skua_xdp::cached::Clients::of(&engine);
    let mut cached_frames = Vec::new();
    for (slot, n) in [1u16, 4, 16].into_iter().enumerate() {
        let qname = WireName::parse(&format!("c{n}.cache.example."), None).unwrap();
        let (mut tail, mut ttls) = (Vec::new(), Vec::new());
        for i in 0..n {
            ttls.extend_from_slice(&(tail.len() as u16 + 6).to_le_bytes());
            ttls.extend_from_slice(&1300u32.to_le_bytes());
            tail.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 198, 18, 9]);
            tail.push(i as u8);
        }
        // ANCOUNT n (at most 16), NSCOUNT and ARCOUNT 0, big-endian.
        let counts = [0, n as u8, 0, 0, 0, 0];
        let cached = skua_engine::Cached {
            flags: 0x8180,
            counts: &counts,
            bounds: &[],
            tail: &tail,
            ttls: &ttls,
            fixed_ttl: None,
            ede: None,
            refresh: false,
            class: ResponseClass::Response,
        };
        let v =
            skua_xdp::cached::compile(&engine, &clients, qname.as_bytes(), 1, &cached, 1300, 1000)
                .expect("cached recipe");
        p.set_cache_slot(slot as u32, &v).unwrap();
        p.set_cache_ref(
            &skua_xdp::answers::key(qname.as_bytes(), 1).unwrap(),
            slot as u32,
        )
        .unwrap();
        let mut f = vec![0u8; 512];
        let len = skua_fastpath::build_udp_frame(
            &mut f,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            None,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), 5353),
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 53),
            &query(7, 0x0100, qname.as_bytes(), 1, None),
        )
        .unwrap();
        f.truncate(len);
        cached_frames.push((n, f));
    }
    let mut arp = frame.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the one passed.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let mono = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    // The program's clock reads second 1000 now: every cached answer is valid for 300 s.
    let base = XdpConfig {
        clock_origin_ns: mono - 1000 * 1_000_000_000,
        ..XdpConfig::enabled(53)
    };
    let cached_1 = format!("cached, {} record (XDP_TX)", cached_frames[0].0);
    let cached_4 = format!("cached, {} records", cached_frames[1].0);
    let cached_16 = format!("cached, {} records", cached_frames[2].0);
    for (what, cfg, f) in [
        ("answered (XDP_TX)", base.with_flags(F_ANSWER), &frame),
        (
            cached_1.as_str(),
            base.with_flags(F_ANSWER | F_CACHE),
            &cached_frames[0].1,
        ),
        (
            cached_4.as_str(),
            base.with_flags(F_ANSWER | F_CACHE),
            &cached_frames[1].1,
        ),
        (
            cached_16.as_str(),
            base.with_flags(F_ANSWER | F_CACHE),
            &cached_frames[2].1,
        ),
        (
            "answered (redirect)",
            base.with_flags(F_ANSWER | F_TX_REDIRECT),
            &frame,
        ),
        ("to the AF_XDP socket", base, &frame),
        ("ARP, passed", base, &arp),
    ] {
        p.set_config(cfg).unwrap();
        // One run per call: with `repeat` the kernel reruns the program on the frame it has
        // already turned into a reply. The kernel times each run itself (ktime), so the
        // syscall is not in the figure; the median of the runs is printed.
        let mut ns: Vec<u128> = Vec::with_capacity(repeat as usize);
        let mut action = 0;
        for _ in 0..repeat {
            let (a, t) = p.time_run(f, 1).unwrap();
            action = a;
            ns.push(t.as_nanos());
        }
        ns.sort_unstable();
        let mean = ns.iter().sum::<u128>() as f64 / ns.len() as f64;
        println!(
            "{what:<28} action {action}: median {:>5} ns, mean {mean:>7.1} ns per frame",
            ns[ns.len() / 2]
        );
    }
}
