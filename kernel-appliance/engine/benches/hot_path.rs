//! Criterion benches of `Engine::handle_query`: the precompiled hot path (positive answer,
//! NXDOMAIN, EDNS), the same with response rate limiting on (100,000 client netblocks ×
//! 1,024 names: nearly every query opens an account in a full table, evicting the oldest of
//! its bucket, the worst case of the table) and, for scale, the hickory general path on the
//! same queries.
//!
//! Zone: `internal.` with 10,000 A records (the setup of docs/benchmarks.md).
//! Run: `cargo bench -p skua-engine --bench hot_path`.

// criterion_group!/criterion_main! generate undocumented public items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::rrl::{Rrl, RrlConfig};
use skua_engine::text::parse_rr;
use skua_engine::{Engine, EngineBuilder, Request, Transport};

fn engine() -> Engine {
    let mut b = EngineBuilder::new();
    b.local_zone(
        WireName::parse("internal.", None).unwrap(),
        LocalZoneType::Static,
    );
    b.local_data(
        parse_rr(
            "internal. 3600 IN SOA ns.internal. h.internal. 1 3600 600 86400 300",
            None,
            3600,
        )
        .unwrap(),
        0,
    );
    for i in 0..10_000 {
        let rr = parse_rr(
            &format!("host{i}.internal. 300 IN A 198.18.{}.{}", i / 256, i % 256),
            None,
            3600,
        )
        .unwrap();
        b.local_data(rr, 0);
    }
    b.build().unwrap()
}

fn query(name: &str, edns: bool) -> Vec<u8> {
    let mut p = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns)];
    p.extend_from_slice(WireName::parse(name, None).unwrap().as_bytes());
    p.extend_from_slice(&[0, 1, 0, 1]);
    if edns {
        p.extend_from_slice(&[0, 0, 0x29, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
    }
    p
}

fn bench(c: &mut Criterion) {
    let e = engine();
    let req = Request {
        src: IpAddr::V4(Ipv4Addr::LOCALHOST),
        transport: Transport::Udp,
        now: 0,
    };
    let names: Vec<Vec<u8>> = (0..1024)
        .map(|i| query(&format!("host{}.internal.", i * 9), false))
        .collect();
    let mut out = [0u8; 1500];
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    g.bench_function("hot_a_hit", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            black_box(e.handle_query(&req, black_box(&names[i]), &mut out))
        })
    });
    let edns = query("host77.internal.", true);
    g.bench_function("hot_a_hit_edns", |b| {
        b.iter(|| black_box(e.handle_query(&req, black_box(&edns), &mut out)))
    });
    let nx = query("missing.internal.", false);
    g.bench_function("hot_nxdomain", |b| {
        b.iter(|| black_box(e.handle_query(&req, black_box(&nx), &mut out)))
    });
    let mut limited = engine();
    limited.set_rrl(Some(Arc::new(Rrl::new(
        RrlConfig {
            responses_per_second: 5,
            ..RrlConfig::default()
        },
        0x5eed,
    ))));
    let mut k = 0u32;
    g.bench_function("hot_a_hit_rrl", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            k = (k + 1) % 100_000;
            let req = Request {
                // One client per /24.
                src: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (k << 8))),
                ..req
            };
            black_box(limited.handle_query(&req, black_box(&names[i]), &mut out))
        })
    });
    let q = query("host77.internal.", false);
    g.bench_function("general_a_hit", |b| {
        b.iter(|| black_box(e.handle_query_general(&req, black_box(&q), &mut out)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
