#!/usr/bin/env bash
# The whole test suite, exactly what CI runs (README: "test").
# Installs what it needs when missing (apt packages need root; CI is root), then:
# format, lints, the no_std build, every test (including the differential tests against
# unbound and nsd in a network namespace), the appliance image built and booted in QEMU with
# DNS answered through XDP in the guest (qemu/deps.sh installs mkosi and QEMU), and bounded
# fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECS="${FUZZ_SECS:-60}"

# --- system packages -------------------------------------------------------------------
missing=()
for pair in unbound:unbound nsd:nsd knotd:knot dig:bind9-dnsutils kdig:knot-dnsutils ip:iproute2 \
    clang:clang llvm-strip:llvm dnsperf:dnsperf sha256sum:coreutils curl:curl openssl:openssl \
    ethtool:ethtool ping:iputils-ping python3:python3 nft:nftables keepalived:keepalived bird:bird2 pebble:pebble; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
# dnspython for the scripted hostile upstreams (tests/resolver/hostile.py, system python3).
/usr/bin/python3 -c 'import dns.message' >/dev/null 2>&1 || missing+=(python3-dnspython)
# cryptography: tests/resolver/dot.py makes expired and foreign-CA certificates with it.
/usr/bin/python3 -c 'import cryptography.x509' >/dev/null 2>&1 || missing+=(python3-cryptography)
# python3-venv: schemathesis (PyPI) runs in a venv.
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "tests/run.sh: missing packages: ${missing[*]} (run as root to install them)" >&2
        exit 1
    fi
    # Never let a package start its daemon (unbound would try the root servers).
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    systemctl stop unbound nsd knot keepalived 2>/dev/null || true
    # tests/ha/bgp.py runs its own BIRD instances in namespaces: never the packaged one.
    systemctl disable --now bird 2>/dev/null || true
fi

# --- pebble 2.10 from the Go module proxy --------------------------------------------------
# Debian's pebble (2.4) offers neither ACME renewal information (RFC 9773) nor profiles;
# kernel-appliance/skuad/tests/e2e/acme.rs runs those tests against this one (a missing binary
# fails them: they are never skipped).
PEBBLE_VERSION=v2.10.3
PEBBLE_BIN="$PWD/target/tools/pebble-$PEBBLE_VERSION/pebble"
if [[ ! -x $PEBBLE_BIN ]]; then
    GO=$(command -v go || true)
    [[ -z $GO && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
    [[ -z $GO && -x /usr/lib/go-1.23/bin/go ]] && GO=/usr/lib/go-1.23/bin/go
    if [[ -z $GO && $(id -u) -eq 0 ]]; then
        # No Go here: bookworm-backports' (1.23) fetches the toolchain pebble's go.mod asks
        # for (1.25) from the Go module proxy by itself (GOTOOLCHAIN=auto).
        echo "== golang-1.23-go (bookworm-backports)"
        src=/etc/apt/sources.list.d/bookworm-backports.sources
        if [[ ! -f $src ]]; then
            # The same source qemu/deps.sh writes (it runs later).
            printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$src"
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            -t bookworm-backports golang-1.23-go >/dev/null
        GO=/usr/lib/go-1.23/bin/go
    fi
    if [[ -z $GO || ! -x $GO ]]; then
        echo "tests/run.sh: Go is needed to build pebble $PEBBLE_VERSION for the ACME tests (not on PATH, not /usr/local/go/bin/go; run as root to install it)" >&2
        exit 1
    fi
    echo "== pebble $PEBBLE_VERSION (go install)"
    GOTOOLCHAIN=auto GOBIN="$(dirname "$PEBBLE_BIN")" "$GO" install "github.com/letsencrypt/pebble/v2/cmd/pebble@$PEBBLE_VERSION"
fi
export SKUA_PEBBLE="$PEBBLE_BIN"

# --- rust toolchain (rust-toolchain.toml pins it; rustup installs it on first use) ---------
rustup show active-toolchain >/dev/null
rustup target add x86_64-unknown-none >/dev/null 2>&1 || true

echo "== fmt";     cargo fmt --all -- --check
echo "== layers";  bash tests/layers.sh
echo "== clippy";  cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== bpf";     bash bpf/check.sh
echo "== no_std";  cargo build --locked -p skua-engine -p skua-fastpath -p skua-resolver -p skua-xfr -p skua-serve -p skua-vrrp --target x86_64-unknown-none
echo "== tests";   cargo test --workspace --locked
echo "== API conformance: schemathesis against docs/openapi.json"
bash tests/api/schemathesis.sh target/debug/skuad
echo "== appliance image: build, boot in QEMU (TCG), DNS through XDP in the guest"
bash qemu/deps.sh
bash image/build.sh 1
python3 qemu/vm.py test --queues 2 --disk image/mkosi.output/skua_1.raw
python3 qemu/vm.py tamper --disk image/mkosi.output/skua_1.raw
echo "== appliance A/B upgrade: 1 -> 2, then a broken 3 rolls back to 2"
bash image/build.sh --out image/mkosi.output.v2 2
bash image/build.sh --broken --out image/mkosi.output.v3 3
python3 qemu/vm.py upgrade --disk image/mkosi.output/skua_1.raw \
    --good image/mkosi.output.v2/skua_2.update --broken image/mkosi.output.v3/skua_3.update
echo "== fuzz";    bash tests/fuzz.sh "$FUZZ_SECS"
echo "== all tests passed"
