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
