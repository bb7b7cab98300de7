# shellcheck shell=bash
# Helpers shared by tests/bench/*.sh: zone and query-file generators, the skuad binary.
# Sourced, not run.

BENCH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# build_skuad DEST: builds the release skuad and copies it to DEST, so that a concurrent
# rebuild of target/ cannot swap the binary in the middle of a measurement.
build_skuad() {
    local dest=$1
    if [[ -n "${SKUAD_BIN:-}" ]]; then
        cp "$SKUAD_BIN" "$dest"
        chmod +x "$dest"
    else
        build_skuad_from "$BENCH_ROOT" "$dest"
    fi
}

# addr_of I: a distinct IPv4 address in 198.18.0.0/15 for record I (wraps after 131072).
# (awk version inline below; this one is for documentation/tests)

# gen_zonefile ORIGIN COUNT FILE: an RFC 1035 zone file with SOA, NS, ns glue and COUNT
# A records h0 .. h(COUNT-1).
gen_zonefile() {
    local origin=$1 count=$2 file=$3
    awk -v o="$origin" -v n="$count" 'BEGIN {
        printf "$ORIGIN %s\n$TTL 300\n", o
        printf "@ 3600 IN SOA ns.%s hostmaster.%s 1 3600 900 604800 300\n", o, o
        printf "@ 3600 IN NS ns.%s\n", o
        printf "ns 3600 IN A 198.18.0.1\n"
        for (i = 0; i < n; i++) {
            a = i % 131072
            printf "h%d IN A 198.%d.%d.%d\n", i, 18 + int(a / 65536), int(a / 256) % 256, a % 256
        }
    }' > "$file"
}

# gen_localdata ORIGIN COUNT FILE [SERVER-OPTIONS-FILE]: the same data as an unbound.conf
# 'server:' section with local-zone static and local-data lines. The first lines of the
# section come from SERVER-OPTIONS-FILE when given.
gen_localdata() {
    local origin=$1 count=$2 file=$3 opts=${4:-}
    {
        echo "server:"
        if [[ -n "$opts" ]]; then cat "$opts"; fi
        awk -v o="$origin" -v n="$count" 'BEGIN {
            printf "    local-zone: \"%s\" static\n", o
            printf "    local-data: \"%s 3600 IN SOA ns.%s hostmaster.%s 1 3600 900 604800 300\"\n", o, o, o
            printf "    local-data: \"%s 3600 IN NS ns.%s\"\n", o, o
            printf "    local-data: \"ns.%s 3600 IN A 198.18.0.1\"\n", o
            for (i = 0; i < n; i++) {
                a = i % 131072
                printf "    local-data: \"h%d.%s 300 IN A 198.%d.%d.%d\"\n", i, o, 18 + int(a / 65536), int(a / 256) % 256, a % 256
            }
        }'
    } > "$file"
}

# gen_queries ORIGIN COUNT NXPERCENT FILE: 'qname A' for every h-name, plus NXPERCENT % more
# names that do not exist (nxN), shuffled with a fixed seed (same file every time).
gen_queries() {
    local origin=$1 count=$2 nx=$3 file=$4
    awk -v o="$origin" -v n="$count" -v nx="$nx" 'BEGIN {
        for (i = 0; i < n; i++) printf "h%d.%s A\n", i, o
        m = int(n * nx / 100)
        for (i = 0; i < m; i++) printf "nx%d.%s A\n", i, o
    }' | shuf --random-source=<(yes skua) > "$file"
}

# build_skuad_from SRC DEST: `cargo build --release -p skuad` in the source tree SRC (the
# repository, or an unpacked `git archive` of one revision) and copies the binary to DEST.
# It copies from the directory cargo built into (`cargo metadata`'s
# target_directory: CARGO_TARGET_DIR when set), not from SRC/target.
build_skuad_from() {
    local src=$1 dest=$2 tdir
    tdir=$(cd "$src" && cargo metadata --format-version 1 --no-deps 2>/dev/null | jq -r .target_directory) ||
        die "cargo metadata failed in $src"
    [[ -n $tdir && $tdir != null ]] || die "cargo metadata: no target_directory in $src"
    log "cargo build --release -p skuad (in $src; target directory $tdir)"
    (cd "$src" && cargo build --release -q -p skuad) || die "cargo build failed"
    cp "$tdir/release/skuad" "$dest"
    chmod +x "$dest"
}

# gen_cache_zonefile ORIGIN COUNT TTL FILE [NS_ADDR]: the upstream's zone of the cache
# benchmark (tests/bench/xdp-cache.sh): SOA, NS, ns glue (NS_ADDR, default 198.18.1.2),
# COUNT A records h0 .. h(COUNT-1) with the same addresses as gen_zonefile, every record
# with TTL TTL (the SOA's MINIMUM too), and a wildcard *.miss.ORIGIN A 198.18.0.99 that
# answers any number of distinct names (cache misses, cache filling).
gen_cache_zonefile() {
    local origin=$1 count=$2 ttl=$3 file=$4 ns=${5:-198.18.1.2}
    awk -v o="$origin" -v n="$count" -v t="$ttl" -v ns="$ns" 'BEGIN {
        printf "$ORIGIN %s\n$TTL %d\n", o, t
        printf "@ %d IN SOA ns.%s hostmaster.%s 1 3600 900 604800 %d\n", t, o, o, t
        printf "@ %d IN NS ns.%s\n", t, o
        printf "ns %d IN A %s\n", t, ns
        for (i = 0; i < n; i++) {
            a = i % 131072
            printf "h%d %d IN A 198.%d.%d.%d\n", i, t, 18 + int(a / 65536), int(a / 256) % 256, a % 256
        }
        printf "*.miss %d IN A 198.18.0.99\n", t
    }' > "$file"
}

# gen_miss_queries ORIGIN TAG COUNT FILE: COUNT distinct names under the wildcard of
# gen_cache_zonefile, 'TAG-I.miss.ORIGIN A' for I = 0 .. COUNT-1, in order: a TAG of its
# own per measurement gives names no server has been asked before.
gen_miss_queries() {
    local origin=$1 tag=$2 count=$3 file=$4
    awk -v o="$origin" -v t="$tag" -v n="$count" 'BEGIN {
        for (i = 0; i < n; i++) printf "%s-%d.miss.%s A\n", t, i, o
    }' > "$file"
}

# prom_sum FILE NAME [LABEL-SUBSTRING]: the sum of the values of metric NAME in the
# Prometheus text FILE, over the series whose labels contain LABEL-SUBSTRING (all of them
# when empty); 0 when there is none.
prom_sum() {
    local file=$1 name=$2 sub=${3:-}
    awk -v n="$name" -v s="$sub" '
        /^#/ { next }
        { key = $1; i = index(key, "{"); base = i ? substr(key, 1, i - 1) : key
          if (base == n && (s == "" || index(key, s))) t += $NF }
        END { printf "%.0f\n", t }' "$file"
}

# rss_kib PID: resident set size (VmRSS) of a process in KiB.
rss_kib() {
    awk '/^VmRSS:/ {print $2; f = 1} END {if (!f) print 0}' "/proc/$1/status" 2>/dev/null || echo 0
}

# ---------------------------------------------------------------- the AF_XDP load generator
# The XDP benchmarks (xdp.sh, xdp-cache.sh) send with Knot's kxdpgun when it starts on this
# machine, else with the project's own skua-xdpgun (kernel-appliance/xdp/src/bin/): kxdpgun
# 3.2.6 cannot start on kernel 6.18 (its XDP program is refused: "program of this type cannot
# use helper bpf_xdp_adjust_meta"). skua-xdpgun takes kxdpgun's flags (-t -Q -i -I -l -L -R -F)
# and prints its summary lines ('total queries: N (P pps)', 'total replies: N (P pps)'), so the
# scripts run and parse either alike.

# build_xdpgun DEST: `cargo build --release -p skua-xdp --bin skua-xdpgun` in the work tree
# (even with --rev: the generator is not what is measured) and copies the binary to DEST.
build_xdpgun() {
    local dest=$1 tdir
    tdir=$(cd "$BENCH_ROOT" && cargo metadata --format-version 1 --no-deps 2>/dev/null | jq -r .target_directory) ||
        die "cargo metadata failed in $BENCH_ROOT"
    log "cargo build --release -p skua-xdp --bin skua-xdpgun (in $BENCH_ROOT; target directory $tdir)"
    (cd "$BENCH_ROOT" && cargo build --release -q -p skua-xdp --bin skua-xdpgun) || die "cargo build of skua-xdpgun failed"
    cp "$tdir/release/skua-xdpgun" "$dest"
    chmod +x "$dest"
}

# choose_generator WANT WORKDIR NS IF LOCAL_IP LOCAL_MAC REMOTE_MAC TARGET QUERYFILE: sets GEN
# (kxdpgun or skua-xdpgun), GEN_BIN (what to run) and GEN_DESC (for machine.txt). WANT is
# kxdpgun, skua or auto: auto probes kxdpgun once (1 s at 1000 qps from namespace NS against
# TARGET; it must exit 0 and print 'total queries: N' with N > 0; no server needs to answer)
# and takes skua-xdpgun if that fails. Whatever the probe attached to IF is detached.
choose_generator() {
    local want=$1 work=$2 ns=$3 ifc=$4 lip=$5 lmac=$6 rmac=$7 target=$8 qfile=$9 out rc=0
    if [[ $want != skua ]]; then
        if ! command -v kxdpgun >/dev/null; then
            [[ $want == auto ]] || die "--generator kxdpgun: kxdpgun not found (knot-dnsutils; --deps)"
            log "generator: kxdpgun not installed: skua-xdpgun"
        else
            out=$(timeout 15 ip netns exec "$ns" kxdpgun -t 1 -Q 1000 -i "$qfile" -I "$ifc" -l "$lip" \
                -L "$lmac" -R "$rmac" "$target" 2>&1) || rc=$?
            ip netns exec "$ns" ip link set dev "$ifc" xdp off 2>/dev/null || true
            if [[ $rc == 0 ]] && awk '/^total queries:/ && $3 > 0 {ok = 1} END {exit !ok}' <<< "$out"; then
                GEN=kxdpgun GEN_BIN=kxdpgun
                GEN_DESC="kxdpgun $(dpkg-query -W -f '${Version}' knot-dnsutils 2>/dev/null || echo ?) (probe passed)"
                log "generator: kxdpgun (a 1 s probe sent queries)"
                return 0
            fi
            [[ $want == auto ]] ||
                die "--generator kxdpgun: kxdpgun does not work here (rc $rc): $(grep -v '^$' <<< "$out" | head -3 | tr '\n' ' ')"
            log "generator: kxdpgun does not start here (rc $rc: $(grep -iE 'error|fail|cannot' <<< "$out" | head -1 | cut -c1-160)): skua-xdpgun"
        fi
    fi
    build_xdpgun "$work/skua-xdpgun"
    GEN=skua-xdpgun GEN_BIN=$work/skua-xdpgun
    GEN_DESC="skua-xdpgun $(cd "$BENCH_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo ?), sha256 $(sha256sum "$GEN_BIN" | cut -c1-12)$([[ $want == skua ]] && echo ' (--generator skua)' || echo ' (kxdpgun failed its probe)')"
    log "generator: skua-xdpgun ($GEN_BIN)"
}
