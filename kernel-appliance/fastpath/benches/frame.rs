//! Criterion bench of the AF_XDP fast path: a whole Ethernet frame in, the reply frame out
//! (parse, checksum verification, engine, in-place rewrite, checksums).
//! Run: `cargo bench -p skua-fastpath --bench frame`.

// criterion_group!/criterion_main! generate undocumented public items.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use skua_engine::localzone::LocalZoneType;
use skua_engine::name::WireName;
use skua_engine::text::parse_rr;
use skua_engine::{Engine, EngineBuilder};
use skua_fastpath::{build_udp_frame, handle_frame};

fn engine() -> Engine {
    let mut b = EngineBuilder::new();
    b.local_zone(
        WireName::parse("internal.", None).unwrap(),
        LocalZoneType::Static,
    );
    b.acl_mut().insert(
        "198.18.0.0/15".parse().unwrap(),
        skua_engine::acl::AclAction::Allow,
    );
    for i in 0..10_000 {
        let rr = format!("host{i}.internal. 300 IN A 198.18.{}.{}", i / 256, i % 256);
        b.local_data(parse_rr(&rr, None, 3600).unwrap(), 0);
    }
    b.build().unwrap()
}

fn bench(c: &mut Criterion) {
    let e = engine();
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(
        WireName::parse("host77.internal.", None)
            .unwrap()
            .as_bytes(),
    );
    q.extend_from_slice(&[0, 1, 0, 1]);
    let mut template = vec![0u8; 4096];
    let len = build_udp_frame(
        &mut template,
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        None,
        "198.18.0.2:40000".parse().unwrap(),
        "198.18.0.1:53".parse().unwrap(),
        &q,
    )
    .unwrap();
    let mut frame = vec![0u8; 4096];
    let mut scratch = vec![0u8; 4096];
    let mut g = c.benchmark_group("fastpath");
    g.throughput(Throughput::Elements(1));
    g.bench_function("ipv4_a_hit_in_frame", |b| {
        b.iter(|| {
            frame[..len].copy_from_slice(&template[..len]);
            black_box(handle_frame(&e, 0, &mut frame, len, &mut scratch))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
