# Skua task runner. `just --list` shows every recipe. CI runs `bash .ci/run` (= `just ci`).

# Run the daemon on the embedded demo configuration (127.0.0.1:5353).
run:
    cargo run --release -p skuad

# Everything CI runs: fmt, clippy, no_std build, all tests, 60 s of fuzzing per target.
ci:
    bash tests/run.sh

# Unit, integration and differential tests (differential ones need root: netns, unbound, nsd).
test:
    cargo test --workspace

# Lints as CI runs them.
clippy:
    cargo clippy --workspace --all-targets -- -D warnings

# Format the code.
fmt:
    cargo fmt --all

# The sans-IO cores must build for bare metal (the unikernel target; skua-vrrp is no_std too).
# sha2 (skua-xfr's TSIG) takes its portable backend there: see .cargo/config.toml.
nostd:
    cargo build -p skua-engine -p skua-fastpath -p skua-resolver -p skua-xfr -p skua-serve -p skua-vrrp --target x86_64-unknown-none

# Fuzz every target for SECS seconds each.
fuzz secs="60":
    bash tests/fuzz.sh {{secs}}

# Differential tests only: skuad vs Unbound (local zones) and NSD (auth zone).
conformance:
    cargo test -p skua-conformance

# Criterion benches of the engine hot path.
bench-engine:
    cargo bench -p skua-engine --bench hot_path

# In-process engine throughput and callgrind instructions/query (tests/bench/inprocess.sh).
bench-inprocess:
    bash tests/bench/inprocess.sh

# skuad vs knotd over UDP on a veth pair between two namespaces (root).
bench-veth:
    bash tests/bench/veth.sh

# Zone file parser alone: 1,000,000 A records parsed in release mode, time printed.
bench-zoneparse:
    cargo test --release -p skua-engine --lib zonefile::tests::million_a_records -- --nocapture

# Load time and RSS per record of a 1,000,000-record zone.
bench-bigzone:
    bash tests/bench/bigzone.sh

# skuad AF_XDP (program and AF_XDP-only) vs skuad sockets vs knotd XDP vs an XDP_TX ceiling on a veth pair (root): 5 interleaved repetitions, medians [min-max], PASS/FAIL verdicts, ~35 min; --quick 3 repetitions ~5 min; --deps installs; --help.
bench-xdp *args:
    bash tests/bench/xdp.sh {{args}}

# Install what the image and VM recipes need (root): QEMU, OVMF, mkosi 24 from bookworm-backports.
deps:
    bash qemu/deps.sh

# Build the appliance image (image/mkosi.output/skua_VERSION.raw and .qcow2; default version: image/mkosi.version).
image version="":
    bash image/build.sh {{version}}

# Boot the newest image in QEMU (TCG) with virtio-net on a tap in netns skua-vm; console here (Ctrl-A X quits).
vm disk="" queues="1":
    bash qemu/vm.sh {{disk}} {{queues}}

# Boot the newest image, query DNS from the host side, prove the guest answered through XDP, power off.
vm-test *args:
    python3 qemu/vm.py test {{args}}

# A byte flipped in the root partition of a copy of the newest image: dm-verity must refuse it.
vm-tamper *args:
    python3 qemu/vm.py tamper {{args}}

# A/B upgrade test: builds versions 1, 2 and a broken 3, boots 1, upgrades to 2 (blessed), then
# to 3, which fails its health gate: the VM must come back on 2 by itself.
vm-upgrade:
    bash image/build.sh 1
    bash image/build.sh --out image/mkosi.output.v2 2
    bash image/build.sh --broken --out image/mkosi.output.v3 3
    python3 qemu/vm.py upgrade --disk image/mkosi.output/skua_1.raw --good image/mkosi.output.v2/skua_2.update --broken image/mkosi.output.v3/skua_3.update

# The A/B upgrade test RUNS times in a row (3 guest reboots each), for hangs that come one run in
# N: per-stage pass/fail/hang counts with their causes (docs/upgrades.md). Builds versions 1, 2
# and a broken 3 only when missing (delete image/mkosi.output*/ to rebuild).
vm-upgrade-loop runs="10":
    [ -f image/mkosi.output/skua_1.raw ] || bash image/build.sh 1
    [ -f image/mkosi.output.v2/skua_2.update ] || bash image/build.sh --out image/mkosi.output.v2 2
    [ -f image/mkosi.output.v3/skua_3.update ] || bash image/build.sh --broken --out image/mkosi.output.v3 3
    python3 qemu/vm.py upgrade-loop --runs {{runs}} --disk image/mkosi.output/skua_1.raw --good image/mkosi.output.v2/skua_2.update --broken image/mkosi.output.v3/skua_3.update

# The appliance in QEMU: builds the image's bench profile, boots it, measures skuad-XDP, skuad --no-xdp and knotd-XDP in the same VM with load from the host (kxdpgun, dnsperf); table, plot, boot time, image size (root; --quick < 8 min; qemu/bench.py --help).
bench *args:
    python3 qemu/bench.py {{args}}

# skuad as a caching forwarder (cache hits through the XDP program, the AF_XDP workers and sockets, against its own local-data figure, Unbound, kresd and dnsdist) on xdp.sh's veth topology with an authoritative upstream in a third namespace (root): 5 interleaved repetitions, capacity medians [min-max], PASS/FAIL verdicts, ~40 min; --misses (names never asked: resolved qps and p99, ~8 min), --memory (bytes per cached RRset at 1 M names vs Unbound), --quick, --deps, --rev REV, --help (tests/bench/xdp-cache.sh; docs/benchmarks.md section 6).
bench-cache *args:
    bash tests/bench/xdp-cache.sh {{args}}

# SR-IOV control path (skua-sriov) on QEMU's emulated igb behind an emulated IOMMU, two boots under TCG (~2 min; downloads a Debian kernel): qemu/sriov-igb.sh.
sriov-qemu:
    bash qemu/sriov-igb.sh

# Two nodes (skuad + skua-agent) in network namespaces on a bridge, a client asking the VIP every 10 ms: the master's agent killed, then its link, then a failback; skuactl ha status shown (root, ~1 min; tests/ha/ha.py, docs/ha.md).
ha-demo:
    cargo build --release -p skuad -p skua-agent -p skuactl
    python3 tests/ha/ha.py target/release "${TMPDIR:-/tmp}/skua-ha-demo" kill-agent link-down failback sync

# Failover benchmark (root): N kills (kill -9) of the master's agent for skua-agent and for keepalived + Unbound, interleaved on the same topology, then each one's CPU at 10 adverts/s; failover p50/p99/max, queries lost, intervals where both nodes answer (docs/ha.md, docs/benchmarks.md section 7). Default 50 kills each with priorities 200/190 (the backup's priority sets the master-down interval), ~10 min.
bench-ha n="50" priorities="200,190":
    cargo build --release -p skuad -p skua-agent -p skuactl
    mkdir -p docs/bench-results
    python3 tests/ha/ha.py target/release "${TMPDIR:-/tmp}/skua-bench-ha" --bench {{n}} --priorities {{priorities}} --json docs/bench-results/ha-$(date +%Y-%m-%d)-$(echo {{priorities}} | tr , -).json

# Encrypted DNS: DoT and DoH, skuad vs Unbound vs dnsdist (tests/bench/encrypted.sh; root).
bench-encrypted *args:
    bash tests/bench/encrypted.sh {{args}}
