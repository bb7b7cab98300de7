#!/usr/bin/env bash
# Large-zone load benchmark: a 1,000,000-record zone (SOA, NS, ns glue and A records
# h0 .. h999999, distinct names) loaded by `skuad bench --zone ... -n 1`.
#
# Reports what skuad bench prints (load time, answer-table size, RSS growth per record), the
# peak RSS from /usr/bin/time -v (minus that of the same command on a 10-record zone: the
# binary's own footprint), and checks the targets: load in seconds, <= 200 bytes/record.
# --knot also loads the zone into knotd (in a network namespace of its own, 198.18.0.1,
# nothing sent) and reports the zone size knotd logs and its RSS, as a reference.
#
# --massif runs the load under valgrind --tool=massif (about 40 s for 1 M records) and prints
# what the heap held at its peak, by allocation site in skua's code.
#
# Usage: tests/bench/bigzone.sh [--records N] [--knot] [--massif] [--out DIR] [--skuad BIN]

set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"

N=1000000 KNOT=0 MASSIF=0 OUT="" TARGET_BYTES=200 TARGET_LOAD_S=10
while [[ $# -gt 0 ]]; do
    case $1 in
        --records) N=$2; shift ;;
        --knot) KNOT=1 ;;
        --massif) MASSIF=1 ;;
        --out) OUT=$2; shift ;;
        --skuad) SKUAD_BIN=$2; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) sed -n '2,14p' "$0" >&2; exit 2 ;;
    esac
    shift
done
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (apt-get install time)"
OUT=${OUT:-/tmp/skua-bigzone-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/skua-bigzone-work.XXXXXX)
NS="" KNOT_PID=""
cleanup() {
    if [[ -n "$KNOT_PID" ]]; then
        kill -TERM "$KNOT_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$KNOT_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$KNOT_PID" 2>/dev/null || true
    fi
    [[ -z "$NS" ]] || ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build_skuad "$WORK/skuad"
log "generating $N records"
gen_zonefile internal. "$N" "$WORK/big.zone"
gen_zonefile internal. 10 "$WORK/small.zone"
# Queries: every 100th name, plus 10 % of that count that do not exist.
awk -v n="$N" 'BEGIN { for (i = 0; i < n; i += 100) print "h" i ".internal. A"
                       for (i = 0; i < n / 1000; i++) print "nx" i ".internal. A" }' > "$WORK/queries.txt"
log "zone file $(du -h "$WORK/big.zone" | cut -f1), $(wc -l < "$WORK/queries.txt") queries"

# run ZONE TAG: skuad bench under /usr/bin/time -v.
run() {
    timeout 600 /usr/bin/time -v "$WORK/skuad" bench --zone "$1" --origin internal. -n 1 "$WORK/queries.txt" \
        > "$OUT/$2.log" 2>&1 || { cat "$OUT/$2.log" >&2; die "skuad bench failed on $1"; }
}
run "$WORK/small.zone" small
run "$WORK/big.zone" big
cat "$OUT/big.log" >&2

awk -v target="$TARGET_BYTES" -v tload="$TARGET_LOAD_S" '
    FNR == 1 { f++ }
    /Maximum resident set size/ { rss[f] = $NF * 1024 }
    /Elapsed \(wall clock\)/ { wall[f] = $NF }
    f == 2 && /^Loaded/ {
        recs = $2; load = $7
        for (i = 1; i <= NF; i++) {
            if ($i == "tables") { tab = $(i + 1) * 1024 }
            if ($i == "RSS") { grow = $(i + 1); gsub(/[+]/, "", grow); grow *= 1024 }
        }
    }
    f == 2 && /^Processed/ { for (i = 1; i <= NF; i++) if ($i == "ns/query") ns = $(i - 1) }
    END {
        peak = rss[2] - rss[1]
        printf "== %d records (skuad bench --zone, -n 1)\n", recs
        printf "load time                 %.2f s  (wall clock of the whole run %s)\n", load, wall[2]
        printf "answer tables             %.1f MiB  = %.0f bytes/record\n", tab / 1048576, tab / recs
        printf "RSS growth over the load  %.1f MiB  = %.0f bytes/record   (skuad bench, after the load)\n", grow / 1048576, grow / recs
        printf "peak RSS (time -v)        %.1f MiB; minus a 10-record run (%.1f MiB): %.0f bytes/record\n", rss[2] / 1048576, rss[1] / 1048576, peak / recs
        printf "query time                %s ns/query (1 pass, %s)\n", ns, "every 100th name + NXDOMAIN"
        printf "target: load in seconds (< %d s): %s; <= %d bytes/record resident after load: %s; peak: %s\n",
            tload, (load < tload ? "met" : "NOT met"), target, (grow / recs <= target ? "met" : "NOT met"),
            (peak / recs <= target ? "met" : "NOT met (" int(peak / recs) " bytes/record at the peak)")
    }' "$OUT/small.log" "$OUT/big.log" | tee "$OUT/summary.txt"

if [[ $MASSIF == 1 ]]; then
    command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
    echo 'h0.internal. A' > "$WORK/one.txt"
    timeout 900 valgrind --tool=massif --massif-out-file="$OUT/massif.out" \
        "$WORK/skuad" bench --zone "$WORK/big.zone" --origin internal. -n 1 "$WORK/one.txt" > "$OUT/massif.log" 2>&1 ||
        { cat "$OUT/massif.log" >&2; die "massif failed"; }
    ms_print --threshold=1 "$OUT/massif.out" > "$OUT/massif.txt"
    {
        echo "== heap at its peak (massif), by allocation site"
        # The peak snapshot's header line: ' N time total useful extra stacks'.
        peak=$(awk '/Detailed snapshots:/ { if (match($0, /[0-9]+ \(peak\)/)) { print substr($0, RSTART, RLENGTH - 7); exit } }' "$OUT/massif.txt")
        awk -v p="$peak" '$1 == p && NF == 6 && $3 ~ /,/ { printf "total %s B (useful %s B, allocator overhead %s B)\n", $3, $4, $5 }' "$OUT/massif.txt"
        awk -v p="$peak" '$1 == p && NF == 6 && $3 ~ /,/ { on = 1; next }
            on && /^ *[0-9]+ +[0-9,]+ +[0-9,]+/ { exit }
            on && /^->/ { if (cur) print cur "  " site; cur = $1 " " $2; site = "" ; next }
            on && site == "" && /skua_engine::|skuad::|skua_config::/ {
                site = $0; sub(/^[| ]*->[0-9.]+% \([0-9,]+B\) 0x[0-9A-Fa-f]+: /, "", site) }
            END { if (cur) print cur "  " site }' "$OUT/massif.txt" | cut -c1-160
    } | tee -a "$OUT/summary.txt"
fi

if [[ $KNOT == 1 ]]; then
    command -v knotd >/dev/null || die "knotd not found"
    [[ $(id -u) == 0 ]] || die "--knot needs root (network namespace)"
    NS="skua-bigzone-$$"
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    ip -n "$NS" addr add 198.18.0.1/32 dev lo
    mkdir -p "$WORK/knot"
    cat > "$WORK/knot.conf" <<EOF
server:
    listen: 198.18.0.1@53
    rundir: $WORK/knot
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: $WORK/knot
template:
  - id: default
    storage: $WORK/knot
    journal-content: none
    zonefile-sync: -1
    semantic-checks: off
zone:
  - domain: internal.
    file: $WORK/big.zone
EOF
    t0=$(date +%s.%N)
    ip netns exec "$NS" knotd -c "$WORK/knot.conf" > "$OUT/knotd.log" 2>&1 &
    KNOT_PID=$!
    for _ in $(seq 1200); do
        grep -q "loaded, serial" "$OUT/knotd.log" && break
        kill -0 "$KNOT_PID" 2>/dev/null || { cat "$OUT/knotd.log" >&2; die "knotd exited"; }
        sleep 0.1
    done
    t1=$(date +%s.%N)
    sleep 1
    rss=$(awk '/VmRSS/ {print $2 * 1024}' "/proc/$KNOT_PID/status")
    hwm=$(awk '/VmHWM/ {print $2 * 1024}' "/proc/$KNOT_PID/status")
    zb=$(grep -o 'serial none -> [0-9]*, [0-9]* bytes' "$OUT/knotd.log" | awk '{print $5}')
    awk -v n="$N" -v zb="${zb:-0}" -v rss="$rss" -v hwm="$hwm" -v t="$(echo "$t1 - $t0" | bc)" 'BEGIN {
        printf "knotd 3.2 reference: loaded in %.1f s (start to \"loaded\"); zone %.1f MiB = %.0f bytes/record (knotd log);\n", t, zb / 1048576, zb / n
        printf "                     VmRSS %.1f MiB = %.0f bytes/record, VmHWM %.1f MiB\n", rss / 1048576, rss / n, hwm / 1048576 }' | tee -a "$OUT/summary.txt"
fi
log "raw logs: $OUT"
