#!/usr/bin/env bash
# In-process benchmark of the engine: `skuad bench` (no network) and callgrind.
#
# Zone 'internal.' (SOA, NS, ns glue, 10,000 A records h0 .. h9999) as unbound.conf
# local-data and as a zone file; queries: the 10,000 names plus 10 % names that do not exist
# (NXDOMAIN), shuffled. Runs, each REPS times, alternating, pinned to one CPU:
#   local-data   skuad bench --config skuad.conf -n 100 queries.txt
#   auth-zone    skuad bench --zone internal.zone --origin internal. -n 100 queries.txt
#   -s 1000      skuad bench --config skuad.conf -n 100 -s 1000 queries.txt
#   cache        skuad bench --config skuad.conf --origin internal. --cache -n 100 queries.txt
#                (cache hits: the same data as an in-process upstream, every question resolved
#                once through skuad's forwarder into the cache, then answered from it)
# then valgrind --tool=callgrind on `skuad bench -n 3` and `-n 1` (release build, line
# tables): (Ir(-n 3) - Ir(-n 1)) / (2 x queries) = instructions per query, load cost (and the
# cache's filling) cancels; target: a cache hit <= 2 x the instructions of a local-data hit.
# Exit status 1 when that target is missed (the summary's FAIL line), after every result
# is written.
#
# Usage: tests/bench/inprocess.sh [--reps N] [--cpu N] [--no-callgrind] [--out DIR] [--skuad BIN]

set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"

REPS=5 CPU=0 CALLGRIND=1 OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --reps) REPS=$2; shift ;;
        --cpu) CPU=$2; shift ;;
        --no-callgrind) CALLGRIND=0 ;;
        --out) OUT=$2; shift ;;
        --skuad) SKUAD_BIN=$2; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) sed -n '2,20p' "$0" >&2; exit 2 ;;
    esac
    shift
done
OUT=${OUT:-/tmp/skua-inprocess-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/skua-inprocess-work.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

build_skuad "$WORK/skuad"
gen_zonefile internal. 10000 "$WORK/internal.zone"
gen_queries internal. 10000 10 "$WORK/queries.txt"
printf '    access-control: 198.18.0.0/15 allow\n' > "$WORK/opts.txt"
gen_localdata internal. 10000 "$WORK/skuad.conf" "$WORK/opts.txt"
NQ=$(wc -l < "$WORK/queries.txt")
log "$NQ queries ($(grep -c '^nx' "$WORK/queries.txt") NXDOMAIN); results in $OUT"

declare -A ARGS=(
    [local-data]="--config $WORK/skuad.conf"
    [auth-zone]="--zone $WORK/internal.zone --origin internal."
    [s1000]="--config $WORK/skuad.conf -s 1000"
    [cache]="--config $WORK/skuad.conf --origin internal. --cache"
)
ORDER=(local-data auth-zone s1000 cache)
RES="$OUT/results.tsv"
printf 'rep\tcase\tqps\tns_per_query\tload_s\trss_bytes_per_record\treplies\thot_pct\n' > "$RES"
for rep in $(seq "$REPS"); do
    for k in "${!ORDER[@]}"; do
        c=${ORDER[$(( (k + rep - 1) % ${#ORDER[@]} ))]}
        f="$OUT/r$rep-$c.log"
        # shellcheck disable=SC2086
        timeout 300 taskset -c "$CPU" "$WORK/skuad" bench ${ARGS[$c]} -n 100 "$WORK/queries.txt" > "$f" 2>&1 ||
            { cat "$f" >&2; die "skuad bench ($c) failed"; }
        awk -v r="$rep" -v c="$c" '
            /^Loaded/ { load = $7; for (i = 1; i <= NF; i++) if ($i == "bytes/record)") { b = $(i - 1); gsub(/\(/, "", b) } }
            /^Processed/ { for (i = 1; i <= NF; i++) { if ($i == "qps),") { q = $(i - 1); gsub(/\(/, "", q) } if ($i == "ns/query") ns = $(i - 1) } }
            /^Replies:/ { rp = $2; h = $5; gsub(/\(/, "", h) }
            END { printf "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\n", r, c, q, ns, load, b, rp, h }' "$f" >> "$RES"
        log "rep $rep $c: $(tail -1 "$RES" | cut -f3,4 | sed 's/\t/ qps, /') ns/query"
    done
done

{
    echo "== skuad bench -n 100, $NQ queries (10 % NXDOMAIN), pinned to CPU$CPU; medians of $REPS"
    awk -F'\t' '
    function median(s,   a, n, i, j, t) {
        n = split(s, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR == 1 { next }
    { if (!($2 in q)) o[++n] = $2; q[$2] = q[$2] " " $3; ns[$2] = ns[$2] " " $4; ld[$2] = ld[$2] " " $5; rss[$2] = rss[$2] " " $6; all[$2] = all[$2] " " $4; hot[$2] = $8 }
    END {
        printf "%-11s %10s %8s %8s %9s %6s  %s\n", "case", "qps", "ns/q", "load s", "RSS B/rec", "hot %", "ns/query of each run"
        for (i = 1; i <= n; i++) { c = o[i]
            printf "%-11s %10.0f %8.1f %8.3f %9s %6s  %s\n", c, median(q[c]), median(ns[c]), median(ld[c]), median(rss[c]), hot[c], all[c] }
    }' "$RES"
} | tee "$OUT/summary.txt"

if [[ $CALLGRIND == 1 ]]; then
    command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
    # ir CASE N: total instructions (Ir) of `skuad bench ... -n N` under callgrind.
    ir() {
        local out="$OUT/callgrind.$1.n$2.out"
        # shellcheck disable=SC2086
        timeout 600 valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$WORK/skuad" bench ${ARGS[$1]} -n "$2" "$WORK/queries.txt" > "$OUT/callgrind.$1.n$2.log" 2>&1 ||
            { cat "$OUT/callgrind.$1.n$2.log" >&2; die "valgrind failed"; }
        awk '/^(summary|totals):/ {print $2; exit}' "$out"
    }
    # engine_ir CASE N: inclusive Ir of Engine::handle_query in that profile.
    engine_ir() {
        # (awk reads to the end: an early exit would kill callgrind_annotate with SIGPIPE.)
        { callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$OUT/callgrind.$1.n$2.out" 2>/dev/null || true; } |
            awk '/Engine::handle_query/ && !done {gsub(/,/, "", $1); print $1; done = 1}'
    }
    declare -A IPQ
    {
        echo
        echo "== callgrind: instructions per query = (Ir(-n 3) - Ir(-n 1)) / (2 x $NQ)"
        for c in local-data auth-zone cache; do
            i1=$(ir "$c" 1); i3=$(ir "$c" 3)
            e1=$(engine_ir "$c" 1); e3=$(engine_ir "$c" 3)
            IPQ[$c]=$(awk -v a="$i1" -v b="$i3" -v q="$NQ" 'BEGIN {printf "%.0f", (b - a) / (2 * q)}')
            awk -v c="$c" -v a="$i1" -v b="$i3" -v e="$e1" -v f="$e3" -v q="$NQ" 'BEGIN {
                printf "%-11s Ir(-n 1) = %d, Ir(-n 3) = %d: %.0f instructions/query", c, a, b, (b - a) / (2 * q)
                if (f > 0) printf " (%.0f in Engine::handle_query%s, the rest is the bench loop)", (f - e) / (2 * q), (c == "cache" ? "_with and the cache" : "")
                printf "\n" }'
        done
        # The target: a cache hit costs at most twice the instructions of a local-data hit.
        awk -v c="${IPQ[cache]}" -v l="${IPQ[local-data]}" 'BEGIN {
            r = c / l
            printf "%s cache hit / local-data hit: %.0f / %.0f = %.2f instructions per query (target <= 2)\n", (r <= 2 ? "PASS" : "FAIL"), c, l, r }'
        echo "(profiles: $OUT/callgrind.*.out; callgrind_annotate --inclusive=yes FILE for the breakdown)"
    } | tee -a "$OUT/summary.txt"
    # The functions that cost most on the -n 3 run, for the record.
    callgrind_annotate "$OUT/callgrind.local-data.n3.out" 2>/dev/null | head -40 > "$OUT/callgrind.local-data.n3.top.txt" || true
fi
log "raw logs: $OUT"
# The verdict is printed inside a pipeline (tee), so it is read back from the summary.
if grep -q '^FAIL ' "$OUT/summary.txt"; then
    die "target missed: $(grep '^FAIL ' "$OUT/summary.txt")"
fi
