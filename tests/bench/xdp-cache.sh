#!/usr/bin/env bash
# Cache benchmark: skuad as a caching forwarder (cache hits through the XDP program, the AF_XDP
# workers and kernel sockets; misses; memory per cached RRset) side by side with Unbound, Knot
# Resolver and dnsdist, on the topology and with the method of tests/bench/xdp.sh.
#
# The full runs (root, on a quiet machine; docs/benchmarks.md, section 6):
#   tests/bench/xdp-cache.sh --deps-only                  # once: kresd, dnsdist, dnsperf, ...
#   CARGO_TARGET_DIR=/work/target-bench tests/bench/xdp-cache.sh --rev HEAD --out /tmp/xc-hits
#                                                         # hits: ~45 min (5 reps x 6 rates x 7 servers)
#   CARGO_TARGET_DIR=/work/target-bench tests/bench/xdp-cache.sh --rev HEAD --misses --out /tmp/xc-misses
#                                                         # misses: ~7 min (5 reps x 3 rates x 3 servers)
#   CARGO_TARGET_DIR=/work/target-bench tests/bench/xdp-cache.sh --rev HEAD --memory --out /tmp/xc-mem
#                                                         # memory at 1,000,000 names: ~4 min
#   (each + ~1.5 min to build; --quick: hits ~10 min, misses ~2 min, memory ~1 min)
#   (or: just bench-cache [--misses | --memory] [options]; --quick for a short run)
#
#   server ns 198.18.0.1 (xcs0) <--veth--> client ns 198.18.0.2 (xcc0): the generator / dnsperf, CPU1
#   server ns 198.18.1.1 (xcu0) <--veth--> upstream ns 198.18.1.2 (xcu1): knotd, CPU1
#
# Topology as in tests/bench/xdp.sh: the server and the threaded NAPI kthreads of its two veth
# ends (xcs0, xcu0) pinned to CPU0; the generator, the client end's NAPI kthread, and the
# upstream (knotd, one UDP worker) with its end's kthread pinned to CPU1; GRO on and TX
# checksum offload off on every end, IPv6 off, static neighbours on the client link. The
# upstream is reachable from the server namespace only, and serves zone 'internal.': SOA, NS,
# glue, h0 .. h9999 A (TTL 86400: nothing expires during a run) and a wildcard
# '*.miss.internal. A' for any number of distinct names (misses, cache filling).
#
# Mode 1, cache hits (default). Servers (--servers; each on CPU0, forwarding 'internal.' to
# the upstream, started afresh for every measurement):
#   skuad-xdp-cache  skuad --xdp-mode native, forward-zone: the XDP program answers the hottest
#                    cached names itself where skuad can (--xdp-cache-answers, program counter
#                    'answered_cached'), the AF_XDP workers the rest
#   skuad-xsk-cache  the same with --xdp-cache-answers 0 (passed only when skuad --help lists
#                    it; before that, the same as skuad-xdp-cache): the AF_XDP workers answer
#   skuad-sock-cache skuad --no-xdp: kernel sockets
#   skuad-xdp-local  the zone as local data (auth-zone, xdp.sh's skuad-xdp): the reference
#   unbound          Unbound 1.17, num-threads 1, msg/rrset-cache-size 64m/128m, so-rcvbuf 8m,
#                    prefetch no, module-config iterator (a forwarder, no validation)
#   kresd            Knot Resolver 5, one process, cache.size 100 MB, policy.FORWARD(upstream)
#                    without trust anchors (policy.STUB's answers left its cache after ~5 s)
#   dnsdist          dnsdist 1.7, newPacketCache(100000) on the default pool, one setLocal,
#                    8 MiB socket buffers; the CPU of all its threads is counted
# (kresd 5 has no socket-buffer option: it gets net.core.rmem_default, 208 KiB here, which is
# global, not per namespace, and which the script leaves alone.)
# Every measurement: start the server; warm its cache (dnsperf, --warm-passes passes over the
# 10,000 names, each twice in a row, at <= --warm-rate qps); --settle-secs (skuad-xdp-cache:
# then until its program holds the names, at most 15 s); then the generator at the offered rate for
# --step-secs from the same names; stop the server. The warm-up is checked on every step: the
# upstream's UDP InDatagrams must not move during the measured step (column 'up_q'), and the
# server's own counters are kept (skuad: /metrics over its control socket: cache hits and
# misses, answers by the XDP program (local data and cached), the AF_XDP workers, the kernel
# sockets; unbound-control stats_noreset; kresd's stats module over its control socket;
# dnsdist's /jsonstat). Headline: capacity = replies emitted per second of the server's own CPU
# (its threads + its NAPI kthread) in the steps offering >= --overload-rate. Verdicts on
# ratios taken per repetition (runs seconds apart), median [min-max], UNSTABLE when the min-max
# straddles the target:
#   capacity(skuad-xdp-cache) / capacity(skuad-xdp-local)          >= --target-local (0.90)
#   capacity(skuad-xdp-cache) / max(unbound, kresd, dnsdist)        >= --target-peers (2.0)
#   capacity(skuad-xsk-cache) / max(unbound, kresd, dnsdist)        >= --target-xsk-peers (1.5)
#
# Mode 2, --misses: every measurement asks names nobody asked before (TAG-I.miss.internal.,
# answered by the upstream's wildcard), with dnsperf (closed loop: it keeps --miss-window
# queries outstanding and times every query; kxdpgun is open-loop and times nothing) at each
# rate of --miss-rates (0 = as fast as the window allows): resolved (NOERROR) queries per
# second, p50 / p99 / p99.9 latency (-v: each query's time), loss, server CPU (threads + the
# NAPI kthreads of both its links) per resolved query, upstream queries per resolved query.
# Default servers skuad-sock-cache, skuad-xdp-cache, unbound.
#
# Mode 3, --memory: each server (skuad-sock-cache, unbound) with --mem-cache-size for both
# stores is filled with --mem-names distinct names through the upstream (dnsperf), then:
# skuad's skua_cache_entries / skua_cache_bytes per store, Unbound's rrset.cache.count,
# msg.cache.count, mem.cache.rrset and mem.cache.message (extended-statistics), and both
# processes' RSS growth (VmRSS after the fill minus after the start): bytes per cached RRset.
#
# The AF_XDP load generator of mode 1 (--generator, default auto), as in xdp.sh: Knot's kxdpgun
# when a 1 s probe works on this machine, else skua-xdpgun (kernel-appliance/xdp/src/bin/,
# built with cargo; kxdpgun's flags and summary lines). kxdpgun 3.2.6 cannot start on kernel
# 6.18 (its XDP program is refused for bpf_xdp_adjust_meta). The log and machine.txt say which
# one ran; compare servers within one run, not figures of two generators.
#
# Output (--out, default /tmp/skua-xdp-cache-DATE): summary.txt, raw.tsv (hits: every generator
# run), misses.tsv, memory.tsv, ratios.tsv, xdp-cache.png, machine.txt, logs/.
# Usage: tests/bench/xdp-cache.sh [--deps] [--quick] [--misses | --memory] [options] (root; --help)

# The whole script is one { ... } block: bash parses all of it before running any, so an edit of
# this file during a run (the work tree is shared) cannot change or break that run.
{
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"

usage() {
    cat <<'EOF2'
usage: tests/bench/xdp-cache.sh [options]            (as root)
  --misses             mode 2: cache misses (resolved qps and latency with dnsperf)
  --memory             mode 3: memory per cached RRset at --mem-names names
  --deps               install what is missing first (apt-get: knot knot-dnsutils knot-resolver
                       dnsdist dnsperf unbound ethtool iproute2 jq curl; pip: matplotlib into
                       the venv /tmp/skua-bench-venv), printing every command; then run
  --deps-only          the same, then exit
  --quick              hits: 3 repetitions of 2 s steps at 50k, 400k, 1M; misses: 2
                       repetitions of 3 s steps; memory: 200,000 names (unless given)
  --reps N             repetitions (default 5 for hits and misses, 1 for memory)
  --servers LIST       comma-separated, measured in this order in every round (hits default:
                       skuad-xdp-cache,skuad-xsk-cache,skuad-sock-cache,skuad-xdp-local,unbound,
                       kresd,dnsdist; misses: skuad-sock-cache,skuad-xdp-cache,unbound (kresd,
                       dnsdist also possible); memory: skuad-sock-cache,unbound)
  --rates LIST         hits: offered rates, qps (default 50000,100000,200000,400000,700000,
                       1000000)
  --step-secs S        seconds per measured step (default 5)
  --cpu-rate R         hits: CPU per answer is taken from the step at this rate (default 50000)
  --overload-rate R    hits: capacity from the steps offering >= R qps (default 400000)
  --warm-passes N      hits: passes over the 10,000 names before each step, each name twice
                       in a row (default 3)
  --warm-rate R        hits: their rate limit, qps (default 20000)
  --settle-secs S      pause between the warm-up and the measured step (default 1)
  --target-local X     verdict: skuad-xdp-cache capacity >= X x skuad-xdp-local's (default 0.9)
  --target-peers X     verdict: skuad-xdp-cache capacity >= X x the best peer's (default 2)
  --target-xsk-peers X verdict: skuad-xsk-cache capacity >= X x the best peer's (default 1.5)
  --miss-rates LIST    misses: dnsperf rate limits, qps; 0 = unlimited (default 5000,20000,0)
  --miss-window N      misses: dnsperf's queries outstanding (-q, default 500)
  --mem-names N        memory: distinct names to cache (default 1000000)
  --mem-cache-size S   memory: msg-cache-size and rrset-cache-size of both servers (default 1g)
  --wait-quiet S       before each repetition, wait up to S s for other jobs to use < 10 % of
                       the CPUs (default 30; 0 with --quick)
  --wait-other S       wait up to S s for another benchmark of tests/bench to finish (2400)
  --generator G        hits: the AF_XDP load generator: kxdpgun, skua (skua-xdpgun, built
                       from the work tree) or auto (default: kxdpgun if a 1 s probe works)
  --no-plot            no PNG (without matplotlib in the venv there is none anyway)
  --out DIR            results directory (default /tmp/skua-xdp-cache-DATE)
  --skuad BIN          use this skuad binary instead of building one
  --rev REV            build skuad from this git revision (git archive REV) instead of the
                       work tree: other people's uncommitted edits stay out
  --summarize DIR      no measurement: the summary again from DIR's raw.tsv / misses.tsv /
                       memory.tsv (e.g. with other --target-*)
Builds with `cargo build --release -p skuad` (honours CARGO_TARGET_DIR) and copies the binary.
EOF2
}

HITS_SERVERS="skuad-xdp-cache,skuad-xsk-cache,skuad-sock-cache,skuad-xdp-local,unbound,kresd,dnsdist"
MISS_SERVERS="skuad-sock-cache,skuad-xdp-cache,unbound"
MEM_SERVERS="skuad-sock-cache,unbound"
MODE=hits REV="" SUMMARIZE="" QUICK=0 DEPS=0 DEPS_ONLY=0 PLOT=1 OUT="" SERVERS=""
REPS="" RATES="50000,100000,200000,400000,700000,1000000" STEP_SECS=5 CPU_RATE=50000
OVERLOAD_RATE=400000 WARM_PASSES=3 WARM_RATE=20000 SETTLE_SECS=1
T_LOCAL=0.9 T_PEERS=2 T_XSK=1.5
MISS_RATES="5000,20000,0" MISS_WINDOW=500 MEM_NAMES=1000000 MEM_CACHE=1g
WAIT_QUIET=30 QUIET_PCT=10 WAIT_OTHER=2400 BG_SECS=0.5 GENERATOR=auto
while [[ $# -gt 0 ]]; do
    case $1 in
        --misses) MODE=misses ;;
        --memory) MODE=memory ;;
        --deps) DEPS=1 ;;
        --deps-only) DEPS=1 DEPS_ONLY=1 ;;
        --quick) QUICK=1 ;;
        --reps) REPS=$2; REPS_GIVEN=1; shift ;;
        --servers) SERVERS=$2; shift ;;
        --rates) RATES=$2; RATES_GIVEN=1; shift ;;
        --step-secs) STEP_SECS=$2; STEP_GIVEN=1; shift ;;
        --cpu-rate) CPU_RATE=$2; shift ;;
        --overload-rate) OVERLOAD_RATE=$2; shift ;;
        --warm-passes) WARM_PASSES=$2; shift ;;
        --warm-rate) WARM_RATE=$2; shift ;;
        --settle-secs) SETTLE_SECS=$2; shift ;;
        --target-local) T_LOCAL=$2; shift ;;
        --target-peers) T_PEERS=$2; shift ;;
        --target-xsk-peers) T_XSK=$2; shift ;;
        --miss-rates) MISS_RATES=$2; shift ;;
        --miss-window) MISS_WINDOW=$2; shift ;;
        --mem-names) MEM_NAMES=$2; MEM_GIVEN=1; shift ;;
        --mem-cache-size) MEM_CACHE=$2; shift ;;
        --wait-quiet) WAIT_QUIET=$2; shift ;;
        --wait-other) WAIT_OTHER=$2; shift ;;
        --no-plot) PLOT=0 ;;
        --generator) GENERATOR=$2; shift ;;
        --out) OUT=$2; shift ;;
        --skuad) SKUAD_BIN=$2; shift ;;
        --rev) REV=$2; shift ;;
        --summarize) SUMMARIZE=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option '$1'" ;;
    esac
    shift
done
case $MODE in
    hits) SERVERS=${SERVERS:-$HITS_SERVERS} REPS=${REPS:-5} KNOWN=$HITS_SERVERS ;;
    misses) SERVERS=${SERVERS:-$MISS_SERVERS} REPS=${REPS:-5} KNOWN="$MISS_SERVERS,kresd,dnsdist" ;;
    memory) SERVERS=${SERVERS:-$MEM_SERVERS} REPS=${REPS:-1} KNOWN=$MEM_SERVERS ;;
esac
if [[ $QUICK == 1 ]]; then
    WAIT_QUIET=0
    case $MODE in
        hits) [[ -n ${REPS_GIVEN:-} ]] || REPS=3; [[ -n ${RATES_GIVEN:-} ]] || RATES=50000,400000,1000000
              [[ -n ${STEP_GIVEN:-} ]] || STEP_SECS=2 ;;
        misses) [[ -n ${REPS_GIVEN:-} ]] || REPS=2; [[ -n ${STEP_GIVEN:-} ]] || STEP_SECS=3 ;;
        memory) [[ -n ${MEM_GIVEN:-} ]] || MEM_NAMES=200000 ;;
    esac
fi
for v in REPS STEP_SECS CPU_RATE OVERLOAD_RATE WARM_PASSES WARM_RATE SETTLE_SECS MISS_WINDOW MEM_NAMES WAIT_QUIET WAIT_OTHER; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "--$(tr 'A-Z_' 'a-z-' <<< "$v") must be a whole number (got '${!v}')"
done
for v in T_LOCAL T_PEERS T_XSK; do
    [[ ${!v} =~ ^[0-9]+([.][0-9]+)?$ ]] || die "the --target-* values must be positive numbers (got '${!v}')"
done
[[ $MEM_CACHE =~ ^[0-9]+[kmgKMG]?$ ]] || die "--mem-cache-size: a size such as 1g or 512m (got '$MEM_CACHE')"
[[ $REPS -ge 1 && $STEP_SECS -ge 1 && $WARM_PASSES -ge 1 && $WARM_RATE -ge 1 && $MISS_WINDOW -ge 1 && $MEM_NAMES -ge 1 ]] ||
    die "--reps, --step-secs, --warm-*, --miss-window and --mem-names must be >= 1"
[[ $MODE != hits || $REPS -ge 3 ]] || log "warning: --reps $REPS: with fewer than 3 repetitions the min-max says little"
[[ -z $REV || -z ${SKUAD_BIN:-} ]] || die "--rev and --skuad exclude each other"
[[ $GENERATOR == auto || $GENERATOR == kxdpgun || $GENERATOR == skua ]] ||
    die "--generator must be 'auto', 'kxdpgun' or 'skua' (got '$GENERATOR')"
IFS=, read -r -a SERVER_LIST <<< "$SERVERS"
IFS=, read -r -a RATE_LIST <<< "$RATES"
IFS=, read -r -a MISS_RATE_LIST <<< "$MISS_RATES"
for s in "${SERVER_LIST[@]}"; do
    [[ ",$KNOWN," == *",$s,"* ]] || die "unknown server '$s' for mode $MODE (known: $KNOWN)"
done
[[ $(printf '%s\n' "${SERVER_LIST[@]}" | sort | uniq -d) == "" ]] || die "a server is listed twice in --servers"
for r in "${RATE_LIST[@]}"; do [[ $r =~ ^[0-9]+$ && $r -gt 0 ]] || die "bad rate '$r' in --rates"; done
for r in "${MISS_RATE_LIST[@]}"; do [[ $r =~ ^[0-9]+$ ]] || die "bad rate '$r' in --miss-rates"; done
if [[ -n $REV ]]; then
    REV_SHA=$(git -C "$BENCH_ROOT" rev-parse --verify "$REV^{commit}" 2>/dev/null) || die "--rev: no such revision '$REV'"
fi

VENV=/tmp/skua-bench-venv
SYS_PY=/usr/bin/python3
[[ -x $SYS_PY ]] || SYS_PY=$(command -v python3 || true)

# summarize DIR: summary.txt (and ratios.tsv, the plot) from DIR's raw.tsv (hits), misses.tsv
# and memory.tsv, whichever exist; also alone: --summarize DIR.
summarize() {
    local dir=$1 py rc=0
    py=$(mktemp /tmp/skua-xdp-cache-summary.XXXXXX.py)
    cat > "$py" <<'PYEOF'
# Summary of tests/bench/xdp-cache.sh: medians with min-max over the repetitions, ratios of
# runs adjacent in time (per repetition), verdicts. argv: OUT CPU_RATE OVERLOAD PLOT T_LOCAL T_PEERS T_XSK
import csv, os, statistics, sys

out, cpu_rate, overload, plot = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
T_LOCAL, T_PEERS, T_XSK = (float(x) for x in sys.argv[5:8])
PEERS = ("unbound", "kresd", "dnsdist")
L = []
p = L.append
ratio_rows = [("a", "b", "metric", "rep", "ratio")]

def f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None

def stats(v):
    v = [x for x in v if x is not None]
    if not v:
        return None
    m = statistics.median(v)
    return {"med": m, "min": min(v), "max": max(v), "n": len(v), "spread": (max(v) - min(v)) / m if m else None}

def k(x, nd=1):
    return "-" if x is None else f"{x / 1000:.{nd}f}k"

def kr(st, nd=1):
    if st is None:
        return "-"
    return f"{st['med'] / 1000:.{nd}f}k [{st['min'] / 1000:.{nd}f}-{st['max'] / 1000:.{nd}f}]"

def nr(st, fmt="{:.2f}"):
    if st is None:
        return "-"
    return f"{fmt.format(st['med'])} [{fmt.format(st['min'])}-{fmt.format(st['max'])}]"

def pct(st):
    return "-" if st is None or st["spread"] is None else f"{100 * st['spread']:.0f}%"

def read(name):
    path = os.path.join(out, name)
    return list(csv.DictReader(open(path), delimiter="\t")) if os.path.exists(path) else []

def verdict(name, st, target, le=False, invalid=""):
    if st is None:
        p(f"SKIP          {name}: not measured (--servers) or no figure")
        return
    if invalid:
        p(f"INVALID       {name:<52} {nr(st):<20} ({invalid})")
        return
    ok = st["med"] <= target if le else st["med"] >= target
    straddle = (st["min"] <= target < st["max"]) if le else (st["min"] < target <= st["max"])
    word = ("PASS" if ok else "FAIL") + (" UNSTABLE" if straddle else "")
    p(f"{word:<13} {name:<52} {nr(st):<20} target {'<=' if le else '>='} {target:g}")

# ------------------------------------------------------------------ mode 1: hits
rows = read("raw.tsv")
plot_data = None
if rows:
    servers = list(dict.fromkeys(r["server"] for r in rows))
    reps = sorted({int(r["rep"]) for r in rows})
    rates = sorted({int(r["offered"]) for r in rows})
    over = [r for r in rates if r >= overload]
    P = {s: {} for s in servers}
    for s in servers:
        for rep in reps:
            d = P[s][rep] = {}
            mine = [r for r in rows if r["server"] == s and int(r["rep"]) == rep]
            for r in mine:
                rate = int(r["offered"])
                em = f(r["answers"]) + f(r["s_txdrop"])
                cpu = (f(r["srv_ms"]) + f(r["napi_s_ms"])) / 1000
                d[("ans", rate)] = f(r["ans_rate"])
                d[("sent", rate)] = f(r["sent_rate"])
                d[("cap", rate)] = em / cpu if cpu > 0 else None
                d[("cpu", rate)] = f(r["cpu_us_per_ans"])
                d[("gen", rate)] = r["gen_bound"] == "1"
                d[("upq", rate)] = f(r["up_q"])
            caps = [d.get(("cap", r)) for r in over if d.get(("cap", r)) is not None]
            d["capacity"] = statistics.median(caps) if caps else None
            ans = [d[("ans", r)] for r in rates if d.get(("ans", r)) is not None]
            d["peak"] = max(ans) if ans else None
            d["cpu"] = d.get(("cpu", cpu_rate))
            d["upq"] = sum(f(r["up_q"]) or 0 for r in mine)
            d["bg"] = statistics.median([f(r["background_pct"]) for r in mine]) if mine else None
            for key in ("srv_hits", "srv_misses", "prog_answered", "prog_cached", "xsk_answered", "sock_answered", "warm_lost"):
                v = [f(r[key]) for r in mine if f(r[key]) is not None]
                d[key] = sum(v) if v else None
            v = [f(r.get("prog_resident")) for r in mine if f(r.get("prog_resident")) is not None]
            d["resident"] = statistics.median(v) if v else None
            # Not a cache-hit measurement: the upstream was asked during a measured step, the
            # warm-up lost queries, or skuad-xdp-cache's program held < 99 % of the names.
            bad = []
            if d["upq"]:
                bad.append(f"upstream asked {d['upq']:.0f} times")
            if d.get("warm_lost"):
                bad.append(f"warm-up lost {d['warm_lost']:.0f}")
            low = [f(r.get("prog_resident")) for r in mine
                   if s == "skuad-xdp-cache" and (f(r.get("prog_resident")) or 0) < 9900]
            if low:
                bad.append(f"program held < 9900 names in {len(low)} step(s)")
            d["invalid"] = "; ".join(bad)
    def vals(s, key):
        return [P[s][rep].get(key) for rep in reps if P[s][rep].get(key) is not None]
    nreps = len(reps)
    p(f"== cache hits: {nreps} repetition(s); median [min-max] over the repetitions; spread = (max-min)/median")
    p("")
    p(f"{'server':<17} {'capacity/CPU-s':>21} {'spread':>6} {'peak answered/s':>24} {'CPU us/ans @' + k(cpu_rate, 0):>22} "
      f"{'upstream q':>10} {'other%':>6}")
    for s in servers:
        cap, pk, cp = stats(vals(s, "capacity")), stats(vals(s, "peak")), stats(vals(s, "cpu"))
        upq = sum(vals(s, "upq"))
        bg = stats(vals(s, "bg"))
        bgs = "-" if bg is None else f"{bg['med']:.0f}"
        p(f"{s:<17} {kr(cap, 0):>21} {pct(cap):>6} {kr(pk):>24} {nr(cp, '{:.3f}'):>22} {upq:>10.0f} {bgs:>6}")
    p(f"   capacity = replies emitted (received by the client + refused by the veth on the way) per second of the server's")
    p(f"   own CPU time (its threads + the NAPI kthread of its client link), median of the steps offering >= {k(overload, 0)}.")
    p("   upstream q = queries the upstream received during the measured steps (all repetitions): 0 = every answer came")
    p("   from the cache (the warm-up worked and nothing expired or was evicted).")
    p("")
    p("who answered, totals over the measured steps (the server's own counters; '-': the server has none):")
    p(f"  {'server':<17} {'cache hits':>12} {'misses':>9} {'XDP program: cached':>20} {'local':>12} {'AF_XDP workers':>15} {'sockets':>12} {'warm-up lost':>12} {'in program':>10}")
    for s in servers:
        def t(key):
            v = vals(s, key)
            return "-" if not v else f"{sum(v):.0f}"
        res = stats(vals(s, "resident"))
        ress = "-" if res is None else f"{res['med']:.0f}"
        p(f"  {s:<17} {t('srv_hits'):>12} {t('srv_misses'):>9} {t('prog_cached'):>20} {t('prog_answered'):>12} {t('xsk_answered'):>15} {t('sock_answered'):>12} {t('warm_lost'):>12} {ress:>10}")
    p("  (skuad: its cache hits, which include the XDP program's cached answers since they are credited to it, once a second;")
    p("   in program: skuad-xdp-cache's cached answers in the XDP program after the warm-up, median of the steps;")
    p("   unbound: total.num.cachehits/cachemiss; kresd: answer.cached, answer.total - answer.cached; dnsdist: cache-hits/-misses)")
    p("")
    p("per repetition (in order): capacity | peak answered/s | other jobs' CPU %")
    for s in servers:
        ca = " ".join(k(P[s][r].get("capacity"), 0) for r in reps)
        pk = " ".join(k(P[s][r].get("peak"), 0) for r in reps)
        bg = " ".join("-" if P[s][r].get("bg") is None else f"{P[s][r]['bg']:.0f}" for r in reps)
        p(f"  {s:<17} {ca} | {pk} | {bg}")
    p("")
    def grid(title, key, fmt):
        p(title)
        p(f"{'server':<17}" + "".join(f"{k(r, 0):>16}" for r in rates))
        for s in servers:
            line, rng = f"{s:<17}", f"{'':<17}"
            for r in rates:
                st = stats(vals(s, (key, r)))
                g = sum(1 for rep in reps if P[s][rep].get(("gen", r)))
                line += f"{(fmt(st['med']) if st else '-') + ('G' * (g > 0) + (str(g) if 0 < g < nreps else '')):>16}"
                rng += f"{('[' + fmt(st['min']) + '-' + fmt(st['max']) + ']') if st else '':>16}"
            p(line)
            p(rng)
    grid("answered/s at the offered rates (client veth rx; G = the generator sent < 95 % of the offered rate, Gn: in n repetitions)",
         "ans", lambda x: f"{x / 1000:.1f}k")
    grid("replies emitted per second of server CPU", "cap", lambda x: f"{x / 1000:.0f}k")
    grid("CPU us per answer (server threads + its NAPI kthread)", "cpu", lambda x: f"{x:.2f}")
    p("")

    def ratio_list(a, b, key="capacity"):
        res = []
        for rep in reps:
            x = P.get(a, {}).get(rep, {}).get(key)
            y = P.get(b, {}).get(rep, {}).get(key) if b in P else None
            if x is not None and y:
                res.append(x / y)
        return res
    def best_peer(rep, key="capacity"):
        c = [(P[s][rep].get(key), s) for s in PEERS if s in P and P[s].get(rep, {}).get(key) is not None]
        return max(c) if c else (None, None)
    def ratio_peer(a, key="capacity"):
        res = []
        for rep in reps:
            x = P.get(a, {}).get(rep, {}).get(key)
            y, _ = best_peer(rep, key)
            if x is not None and y:
                res.append(x / y)
        return res
    p("ratios, per repetition from the runs of that repetition (adjacent in time), then median [min-max]:")
    peers_here = [s for s in PEERS if s in P]
    if peers_here:
        p("  best peer per repetition (capacity): " + ", ".join(f"{best_peer(r)[1]} {k(best_peer(r)[0], 0)}" for r in reps))
    pairs = [("skuad-xdp-cache", "skuad-xdp-local"), ("skuad-xsk-cache", "skuad-xdp-local"), ("skuad-sock-cache", "skuad-xdp-local"),
             ("skuad-xdp-cache", "skuad-xsk-cache"), ("skuad-xsk-cache", "skuad-sock-cache")]
    pairs += [(a, b) for a in ("skuad-xdp-cache", "skuad-xsk-cache", "skuad-sock-cache") for b in PEERS]
    for a, b in pairs:
        if a in P and b in P:
            for key in ("capacity", "peak"):
                v = ratio_list(a, b, key)
                ratio_rows.extend((a, b, key, i + 1, f"{x:.4f}") for i, x in enumerate(v))
            p(f"  {a} / {b}: capacity {nr(stats(ratio_list(a, b)))}; peak answered {nr(stats(ratio_list(a, b, 'peak')))}")
    for a in ("skuad-xdp-cache", "skuad-xsk-cache", "skuad-sock-cache"):
        if a in P and peers_here:
            for key in ("capacity", "peak"):
                v = ratio_peer(a, key)
                ratio_rows.extend((a, "best-peer", key, i + 1, f"{x:.4f}") for i, x in enumerate(v))
            p(f"  {a} / best peer: capacity {nr(stats(ratio_peer(a)))}; peak answered {nr(stats(ratio_peer(a, 'peak')))}")
    p("")
    p(f"== verdicts (cache hits): {nreps} repetitions; ratios of the capacity per repetition, median [min-max]; PASS/FAIL on the")
    p("   median; UNSTABLE: the min-max straddles the target (some repetitions pass, some fail)")
    def both(a, b):
        return stats(ratio_list(a, b)) if a in P and b in P else None
    def invalid(*names):
        # Why a verdict over these servers is no cache-hit figure ("" when it is one).
        why = [f"{s} rep {rep}: {P[s][rep]['invalid']}" for s in names if s in P
               for rep in reps if P[s][rep].get("invalid")]
        return "; ".join(why)
    verdict("skuad-xdp-cache / skuad-xdp-local (capacity)", both("skuad-xdp-cache", "skuad-xdp-local"), T_LOCAL,
            invalid=invalid("skuad-xdp-cache"))
    verdict("skuad-xdp-cache / max(unbound, kresd, dnsdist) (capacity)",
            stats(ratio_peer("skuad-xdp-cache")) if "skuad-xdp-cache" in P and peers_here else None, T_PEERS,
            invalid=invalid("skuad-xdp-cache", *peers_here))
    verdict("skuad-xsk-cache / max(unbound, kresd, dnsdist) (capacity)",
            stats(ratio_peer("skuad-xsk-cache")) if "skuad-xsk-cache" in P and peers_here else None, T_XSK,
            invalid=invalid("skuad-xsk-cache", *peers_here))
    if peers_here and len(peers_here) < 3:
        p(f"   (best peer among {', '.join(peers_here)} only: the others were not measured)")
    warm = sum(sum(vals(s, "upq")) for s in servers)
    if warm:
        p(f"   warning: the upstream received {warm:.0f} queries during measured steps (see 'upstream q'): not every answer was a cache hit")
    p("")
    plot_data = (servers, rates, vals, stats, reps)

# ------------------------------------------------------------------ mode 2: misses
mrows = read("misses.tsv")
if mrows:
    servers = list(dict.fromkeys(r["server"] for r in mrows))
    reps = sorted({int(r["rep"]) for r in mrows})
    offered = list(dict.fromkeys(int(r["offered"]) for r in mrows))
    M = {}
    for r in mrows:
        M[(r["server"], int(r["rep"]), int(r["offered"]))] = r
    def mv(s, o, key):
        return [f(M[(s, rep, o)][key]) for rep in reps if (s, rep, o) in M and f(M[(s, rep, o)][key]) is not None]
    name = lambda o: "unlimited" if o == 0 else f"{o / 1000:g}k"
    p(f"== cache misses: {len(reps)} repetition(s), dnsperf closed loop (every name asked for the first time); median [min-max]")
    p("")
    p(f"{'server':<17} {'offered':>9} {'resolved/s':>24} {'p50 ms':>18} {'p99 ms':>22} {'p99.9 ms':>10} {'lost %':>7} {'CPU us/resolved':>20} {'upstream q/resolved':>19}")
    for s in servers:
        for o in offered:
            def m(key, fmt="{:.2f}"):
                st = stats(mv(s, o, key))
                return nr(st, fmt)
            p99 = stats(mv(s, o, "p99_ms"))
            p999 = stats(mv(s, o, "p999_ms"))
            upr = [u / c for u, c in zip(mv(s, o, "up_q"), mv(s, o, "resolved")) if c]
            p999s = "-" if p999 is None else f"{p999['med']:.1f}"
            lost = stats(mv(s, o, "lost_pct"))
            losts = "-" if lost is None else f"{lost['med']:.1f}"
            uprs = "-" if not upr else f"{statistics.median(upr):.3f}"
            p(f"{s:<17} {name(o):>9} {kr(stats(mv(s, o, 'resolved_qps'))):>24} {m('p50_ms', '{:.2f}'):>18} {nr(p99, '{:.2f}'):>22} "
              f"{p999s:>10} {losts:>7} {m('cpu_us', '{:.1f}'):>20} {uprs:>19}")
    p("   resolved/s = NOERROR answers per second of dnsperf's run; latency: each answered query's time (dnsperf -v);")
    p("   a query lost (no answer within dnsperf's timeout) is not in the percentiles: see lost %.")
    p("   CPU = the server's threads + the NAPI kthreads of both its links (client and upstream), per resolved query.")
    p("")
    p("ratios per repetition, median [min-max]:")
    for a in servers:
        if not a.startswith("skuad"):
            continue
        for b in [x for x in servers if not x.startswith("skuad")]:
            for o in offered:
                parts = []
                for key, what in (("resolved_qps", "resolved/s"), ("p99_ms", "p99 latency"), ("cpu_us", "CPU per resolved")):
                    v = []
                    for rep in reps:
                        x, y = M.get((a, rep, o)), M.get((b, rep, o))
                        if x and y and f(x[key]) is not None and f(y[key]):
                            v.append(f(x[key]) / f(y[key]))
                    ratio_rows.extend((a, b, f"miss-{key}@{o}", i + 1, f"{x:.4f}") for i, x in enumerate(v))
                    if v:
                        parts.append(f"{what} {nr(stats(v))}")
                if parts:
                    p(f"  {a} / {b} at {name(o)}: " + "; ".join(parts))
    p("")

# ------------------------------------------------------------------ mode 3: memory
mem = read("memory.tsv")
if mem:
    p(f"== memory: caches filled with distinct names through the upstream (dnsperf)")
    p("")
    p(f"{'server':<17} {'names asked':>11} {'answered':>9} {'RRsets':>9} {'messages':>9} {'RRset store':>12} {'msg store':>12} "
      f"{'B/RRset (stores)':>17} {'RSS growth':>11} {'B/RRset (RSS)':>14} {'fill s':>7} {'evictions':>9}")
    per = {}
    for r in mem:
        sets, msgs = f(r["rrsets"]) or 0, f(r["msgs"]) or 0
        sb, mb = f(r["rrset_bytes"]) or 0, f(r["msg_bytes"]) or 0
        rss = ((f(r["rss1_kib"]) or 0) - (f(r["rss0_kib"]) or 0)) * 1024
        per[r["server"]] = ((sb + mb) / sets if sets else None, rss / sets if sets else None)
        p(f"{r['server']:<17} {r['names']:>11} {r['noerror']:>9} {sets:>9.0f} {msgs:>9.0f} {sb / 2**20:>9.1f} MiB {mb / 2**20:>8.1f} MiB "
          f"{('-' if not sets else f'{(sb + mb) / sets:.0f}'):>17} {rss / 2**20:>7.1f} MiB {('-' if not sets else f'{rss / sets:.0f}'):>14} {f(r['fill_secs']):>7.1f} {r['evictions']:>9}")
    p("   stores: skuad skua_cache_bytes{store=rrset|message}; Unbound mem.cache.rrset / mem.cache.message (its own")
    p("   accounting of rrset-cache-size and msg-cache-size); B/RRset (stores) = both stores / RRsets cached (one A RRset")
    p("   and one answer per name); RSS growth = VmRSS after the fill minus VmRSS after the start.")
    if "skuad-sock-cache" in per and "unbound" in per:
        a, b = per["skuad-sock-cache"], per["unbound"]
        if a[0] and b[0]:
            p(f"   skuad / unbound, bytes per RRset: stores {a[0] / b[0]:.2f}, RSS {a[1] / b[1]:.2f}" if b[1] else
              f"   skuad / unbound, bytes per RRset: stores {a[0] / b[0]:.2f}")
    p("")

if not (rows or mrows or mem):
    sys.exit("no raw.tsv, misses.tsv or memory.tsv in " + out)
with open(os.path.join(out, "ratios.tsv"), "w") as fh:
    fh.write("".join("\t".join(str(c) for c in t) + "\n" for t in ratio_rows))
text = "\n".join(L) + "\n"
open(os.path.join(out, "summary.txt"), "w").write(text)
print(text, end="")

if plot and plot_data:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    servers, rates, vals, stats, reps = plot_data
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(14, 6.5), dpi=100, gridspec_kw={"width_ratios": [3, 2]})
    colors = {}
    for s in servers:
        xs = [r for r in rates if stats(vals(s, ("ans", r)))]
        st = [stats(vals(s, ("ans", r))) for r in xs]
        line, = ax.plot(xs, [x["med"] for x in st], marker="o", label=s)
        colors[s] = line.get_color()
        ax.fill_between(xs, [x["min"] for x in st], [x["max"] for x in st], color=line.get_color(), alpha=0.15)
    ax.plot(rates, rates, color="grey", lw=0.8, ls="--", label="answered = offered")
    ax.set_xscale("log"); ax.set_yscale("log")
    fmt = FuncFormatter(lambda v, _: f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k")
    ax.set_xticks(rates); ax.xaxis.set_major_formatter(fmt); ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.yaxis.set_major_formatter(fmt)
    ax.set_xlabel("offered qps (generator -Q)"); ax.set_ylabel("answered qps (client veth rx)")
    ax.set_title(f"cache hits: answered vs offered ({len(reps)} interleaved repetitions, median, min-max)")
    ax.grid(True, which="both", alpha=0.3); ax.legend(fontsize=8)
    names = [s for s in servers if stats(vals(s, "capacity"))]
    st = [stats(vals(s, "capacity")) for s in names]
    ys = range(len(names))
    ax2.barh(ys, [x["med"] for x in st], xerr=[[x["med"] - x["min"] for x in st], [x["max"] - x["med"] for x in st]],
             color=[colors[s] for s in names], capsize=4)
    ax2.set_yticks(list(ys)); ax2.set_yticklabels(names); ax2.invert_yaxis()
    ax2.xaxis.set_major_formatter(fmt)
    ax2.set_xlabel(f"replies per second of server CPU, offered >= {overload / 1000:g}k")
    ax2.set_title("capacity: what one core of its own would answer")
    ax2.grid(True, axis="x", alpha=0.3)
    fig.suptitle("a caching forwarder over one veth pair: server on CPU0, the AF_XDP generator and the upstream on CPU1")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "xdp-cache.png"))
    print(f"plot: {os.path.join(out, 'xdp-cache.png')}")
PYEOF
    "$PY" "$py" "$dir" "$CPU_RATE" "$OVERLOAD_RATE" "$PLOT" "$T_LOCAL" "$T_PEERS" "$T_XSK" || rc=$?
    rm -f "$py"
    return "$rc"
}
pick_python() {
    PY=${SYS_PY:-python3}
    if [[ $PLOT == 1 ]]; then
        if "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then PY=$VENV/bin/python; else PLOT=0; fi
    fi
}
if [[ -n $SUMMARIZE ]]; then
    [[ -d $SUMMARIZE ]] || die "--summarize: no directory $SUMMARIZE"
    pick_python
    summarize "$SUMMARIZE"
    exit
fi

[[ $(id -u) == 0 ]] || die "run as root (network namespaces, XDP)"

# ---------------------------------------------------------------- dependencies (--deps)
run_shown() { log "+ $*"; "$@"; }
install_deps() {
    local need=() cmd
    declare -A want=([knotd]=knot [kxdpgun]=knot-dnsutils [kdig]=knot-dnsutils [kresd]=knot-resolver
        [dnsdist]=dnsdist [dnsperf]=dnsperf [unbound]=unbound [unbound-control]=unbound
        [ethtool]=ethtool [ip]=iproute2 [jq]=jq [curl]=curl [taskset]=util-linux [python3]=python3)
    for cmd in "${!want[@]}"; do
        command -v "$cmd" >/dev/null || need+=("${want[$cmd]}")
    done
    if [[ $PLOT == 1 ]]; then /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv); fi
    if [[ ${#need[@]} -gt 0 ]]; then
        mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
        log "--deps: installing ${need[*]} (apt-get)"
        # The packages' postinst would start their services: forbid it for the duration.
        local made_policy=0 rc=0
        if [[ ! -e /usr/sbin/policy-rc.d ]]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
            chmod +x /usr/sbin/policy-rc.d
            made_policy=1
        fi
        run_shown apt-get update || rc=$?
        [[ $rc == 0 ]] && { DEBIAN_FRONTEND=noninteractive run_shown apt-get install -y --no-install-recommends "${need[@]}" || rc=$?; }
        if [[ $made_policy == 1 ]]; then rm -f /usr/sbin/policy-rc.d; fi
        [[ $rc == 0 ]] || die "apt-get failed (rc $rc)"
        SYS_PY=/usr/bin/python3
    else
        log "--deps: system packages present"
    fi
    if [[ $PLOT == 1 ]]; then
        if ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
            log "--deps: matplotlib into the venv $VENV (PyPI)"
            run_shown "$SYS_PY" -m venv "$VENV"
            run_shown "$VENV/bin/pip" install --quiet matplotlib
        else
            log "--deps: matplotlib present in $VENV"
        fi
    fi
}
if [[ $DEPS == 1 ]]; then
    install_deps
    if [[ $DEPS_ONLY == 1 ]]; then log "--deps-only: done"; exit 0; fi
fi

for t in ip ethtool taskset kdig knotd dnsperf jq curl timeout flock ss; do
    command -v "$t" >/dev/null || die "'$t' not found: run 'just bench-cache --deps' (or tests/bench/xdp-cache.sh --deps)"
done
[[ $MODE != hits || $GENERATOR != kxdpgun ]] || command -v kxdpgun >/dev/null || die "kxdpgun not found: run with --deps (knot-dnsutils)"
[[ $(knotd --version 2>&1) == *"version 3."* ]] || die "knotd 3.x needed (the upstream), found: $(knotd --version 2>&1 | head -1)"
for s in "${SERVER_LIST[@]}"; do
    case $s in
        unbound) { command -v unbound && command -v unbound-control; } >/dev/null || die "unbound not found: run with --deps" ;;
        kresd) command -v kresd >/dev/null || die "kresd not found: run with --deps (apt package knot-resolver)" ;;
        dnsdist) command -v dnsdist >/dev/null || die "dnsdist not found: run with --deps" ;;
    esac
done
[[ -n $SYS_PY ]] || die "python3 not found: run with --deps"
PLOT_WANTED=$PLOT
pick_python
[[ $PLOT == 1 || $PLOT_WANTED == 0 || $MODE != hits ]] || log "no matplotlib in $VENV: no plot ('--deps' installs it)"
[[ $(nproc) -ge 2 ]] || die "needs 2 CPUs (server on CPU0, generator and upstream on CPU1)"

# One benchmark at a time: the lock of tests/bench/xdp.sh (the two use the same CPUs the same
# way), and no other benchmark of tests/bench alongside.
LOCK=/run/lock/skua-bench-xdp.lock
[[ -d /run/lock ]] || LOCK=/tmp/skua-bench-xdp.lock
exec 9> "$LOCK"
flock -n 9 || die "another tests/bench/xdp.sh or xdp-cache.sh is running (lock $LOCK)"
other_benchmarks() { pgrep -f 'tests/bench/(veth|bigzone|inprocess)\.sh' | tr '\n' ' ' || true; }
WAITED_OTHER=0
wait_other() {
    local others t0=$SECONDS
    while others=$(other_benchmarks); [[ -n ${others// /} ]]; do
        if (( WAITED_OTHER + SECONDS - t0 >= WAIT_OTHER )); then
            die "another benchmark is still running after $WAIT_OTHER s (pids $others): two benchmarks on 2 CPUs corrupt each other"
        fi
        log "another benchmark is running (pids $others): waiting (every 30 s, at most $WAIT_OTHER s)"
        sleep 30
    done
    WAITED_OTHER=$((WAITED_OTHER + SECONDS - t0))
}
wait_other

# ---------------------------------------------------------------- layout
SRV_CPU=0 GEN_CPU=1 UP_CPU=1
NS_S="skua-xcb-srv-$$" NS_C="skua-xcb-cli-$$" NS_U="skua-xcb-up-$$"
IF_S=xcs0 IF_C=xcc0 IF_SU=xcu0 IF_U=xcu1
IP_S=198.18.0.1 IP_C=198.18.0.2 IP_SU=198.18.1.1 IP_U=198.18.1.2
WORK=$(mktemp -d /tmp/skua-xdp-cache-work.XXXXXX)
OUT=${OUT:-/tmp/skua-xdp-cache-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/logs"
SERVER_PID="" SERVER="" SERVER_TAG="" UP_PID=""

in_s() { ip netns exec "$NS_S" "$@"; }
in_c() { ip netns exec "$NS_C" "$@"; }
in_u() { ip netns exec "$NS_U" "$@"; }
ns_exists() { [[ -e /run/netns/$1 ]]; }

xdp_off() { # detach whatever XDP program is on the client link (kxdpgun's, skuad's)
    if ns_exists "$NS_S"; then in_s ip link set dev "$IF_S" xdp off 2>/dev/null || true; fi
    if ns_exists "$NS_C"; then in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true; fi
}

# stop_pid PID NAME: TERM, then KILL after 10 s; waits for it.
stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$2 ($pid) did not stop in 10 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}
stop_server() {
    if [[ -n "$SERVER_PID" ]]; then stop_pid "$SERVER_PID" "$SERVER"; SERVER_PID=""; fi
    xdp_off
    SERVER=""
    if ns_exists "$NS_S" && [[ $(in_s ip -d link show dev "$IF_S") == *prog/xdp* ]]; then
        log "warning: an XDP program is still attached to $IF_S"
    fi
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_server
    if [[ -n $UP_PID ]]; then stop_pid "$UP_PID" knotd; UP_PID=""; fi
    local ns p
    for ns in "$NS_C" "$NS_S" "$NS_U"; do
        if ns_exists "$ns"; then
            for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
            ip netns del "$ns" 2>/dev/null || true
        fi
    done
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- binaries, data, configs
if [[ -n ${SKUAD_BIN:-} ]]; then
    build_skuad "$WORK/skuad"   # copies --skuad BIN
    SKUAD_DESC="--skuad $SKUAD_BIN"
elif [[ -n $REV ]]; then
    mkdir -p "$WORK/src"
    log "git archive $REV_SHA (--rev $REV) into $WORK/src"
    git -C "$BENCH_ROOT" archive "$REV_SHA" | tar -x -C "$WORK/src" || die "git archive $REV failed"
    build_skuad_from "$WORK/src" "$WORK/skuad"
    SKUAD_DESC="$(git -C "$BENCH_ROOT" rev-parse --short "$REV_SHA") (--rev $REV: built from git archive)"
else
    build_skuad_from "$BENCH_ROOT" "$WORK/skuad"
    SKUAD_DESC="$(cd "$BENCH_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo ?)$(cd "$BENCH_ROOT" && git diff --quiet HEAD -- kernel-appliance bpf 2>/dev/null || echo ' (work tree modified)')"
fi
SKUAD_DESC+=", sha256 $(sha256sum "$WORK/skuad" | cut -c1-12)"
# skuad-xsk-cache: the workers answer the cache hits. --xdp-cache-answers (0 = the program
# answers no cached name) only where this skuad has it; before it, the two servers are alike.
XSK_ARGS=()
# The whole help first: `grep -q` in a pipe closes it at the first match, and skuad, writing
# the rest into the closed pipe, aborted (SIGPIPE) now and then; with pipefail the test
# failed and skuad-xsk-cache silently measured the program's cached answers instead.
SKUAD_HELP=$("$WORK/skuad" --help 2>&1 || true)
if grep -q -- '--xdp-cache-answers' <<<"$SKUAD_HELP"; then
    XSK_ARGS=(--xdp-cache-answers 0)
    XSK_NOTE="skuad-xsk-cache: --xdp-cache-answers 0"
else
    XSK_NOTE="skuad-xsk-cache: this skuad has no --xdp-cache-answers (cache hits are the AF_XDP workers' in both skuad-x*-cache servers)"
fi
log "$XSK_NOTE"

gen_cache_zonefile internal. 10000 86400 "$WORK/internal.zone" "$IP_U"
gen_queries internal. 10000 0 "$WORK/queries.txt"
awk '{print; print}' "$WORK/queries.txt" > "$WORK/warm-pairs.txt"   # the warm-up's: each name twice

# skuad_conf FILE MSG RRSET: skuad forwarding internal. to the upstream, its control socket
# in WORK (metrics without a token).
skuad_conf() {
    cat > "$1" <<EOF
server:
    interface: $IP_S
    port: 53
    num-threads: 1
    so-rcvbuf: 8m
    access-control: 198.18.0.0/15 allow
    msg-cache-size: $2
    rrset-cache-size: $3
    prefetch: no
api:
    control-socket: $WORK/skuad-ctl.sock
forward-zone:
    name: "internal."
    forward-addr: $IP_U
EOF
}
skuad_conf "$WORK/skuad-cache.conf" 64m 128m
skuad_conf "$WORK/skuad-mem.conf" "$MEM_CACHE" "$MEM_CACHE"
cat > "$WORK/skuad-local.conf" <<EOF
server:
    interface: $IP_S
    port: 53
    num-threads: 1
    so-rcvbuf: 8m
    access-control: 198.18.0.0/15 allow
api:
    control-socket: $WORK/skuad-ctl.sock
auth-zone:
    name: "internal."
    zonefile: "$WORK/internal.zone"
EOF
# unbound_conf FILE MSG RRSET EXTENDED
unbound_conf() {
    cat > "$1" <<EOF
server:
    interface: $IP_S
    port: 53
    num-threads: 1
    msg-cache-size: $2
    rrset-cache-size: $3
    so-rcvbuf: 8m
    prefetch: no
    access-control: 198.18.0.0/15 allow
    do-ip6: no
    do-daemonize: no
    use-syslog: no
    logfile: ""
    verbosity: 1
    chroot: ""
    username: ""
    directory: "$WORK"
    pidfile: "$WORK/unbound.pid"
    module-config: "iterator"
    statistics-cumulative: yes
    extended-statistics: $4
remote-control:
    control-enable: yes
    control-interface: $WORK/unbound.ctl
    control-use-cert: no
forward-zone:
    name: "internal."
    forward-addr: $IP_U
EOF
    unbound-checkconf "$1" > /dev/null || die "unbound-checkconf refuses $1"
}
unbound_conf "$WORK/unbound.conf" 64m 128m no
unbound_conf "$WORK/unbound-mem.conf" "$MEM_CACHE" "$MEM_CACHE" yes
cat > "$WORK/kresd.lua" <<EOF
-- one process, a forwarder: every name to the upstream with RD=1; no trust anchor, so no
-- validation. (policy.STUB answers stopped being served from the cache about 5 s after
-- they were stored here, each name was asked again: FORWARD, which caches as expected.)
net.ipv6 = false
net.listen('$IP_S', 53, { kind = 'dns' })
cache.open(100 * MB, 'lmdb://$WORK/kres/cache')
trust_anchors.remove('.')
-- no queries of its own towards the upstream (root priming, time-skew check)
pcall(modules.unload, 'priming')
pcall(modules.unload, 'detect_time_skew')
modules.load('stats')
policy.add(policy.all(policy.FORWARD('$IP_U')))
EOF
cat > "$WORK/dnsdist.conf" <<EOF
setSecurityPollSuffix("")
setUDPSocketBufferSizes(8388608, 8388608)  -- as so-rcvbuf: 8m of skuad and Unbound
setLocal("$IP_S:53")
setACL({"198.18.0.0/15"})
srv = newServer({address = "$IP_U:53"})
srv:setUp()  -- always up: no health-check queries to the upstream
pc = newPacketCache(100000, {maxTTL = 86400})
getPool(""):setCache(pc)
webserver("127.0.0.1:8083")
setWebserverConfig({apiKey = "skua-bench-not-a-secret", acl = "127.0.0.0/8"})
EOF
mkdir -p "$WORK/knot"
cat > "$WORK/knot-up.conf" <<EOF
server:
    listen: $IP_U@53
    rundir: $WORK/knot
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: notice
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
    file: $WORK/internal.zone
EOF

# ---------------------------------------------------------------- namespaces and veths
log "namespaces $NS_S / $NS_C / $NS_U; veth $IF_S <-> $IF_C (clients), $IF_SU <-> $IF_U (upstream)"
for ns in "$NS_S" "$NS_C" "$NS_U"; do
    ip netns add "$ns"
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$ns" link set lo up
done
ip -n "$NS_S" link add "$IF_S" type veth peer name "$IF_C" netns "$NS_C"
ip -n "$NS_S" link add "$IF_SU" type veth peer name "$IF_U" netns "$NS_U"
ip -n "$NS_S" addr add "$IP_S/24" dev "$IF_S"
ip -n "$NS_C" addr add "$IP_C/24" dev "$IF_C"
ip -n "$NS_S" addr add "$IP_SU/24" dev "$IF_SU"
ip -n "$NS_U" addr add "$IP_U/24" dev "$IF_U"
ip -n "$NS_S" link set "$IF_S" up
ip -n "$NS_C" link set "$IF_C" up
ip -n "$NS_S" link set "$IF_SU" up
ip -n "$NS_U" link set "$IF_U" up
# GRO on (veth NAPI, needed to receive XDP_REDIRECT frames), TX checksum offload off (XDP sees
# complete checksums); threaded NAPI so that each side pays its own receive path.
in_s ethtool -K "$IF_S" gro on tx off >/dev/null
in_c ethtool -K "$IF_C" gro on tx off >/dev/null
in_s ethtool -K "$IF_SU" gro on tx off >/dev/null
in_u ethtool -K "$IF_U" gro on tx off >/dev/null
MAC_S=$(ip -n "$NS_S" -br link show "$IF_S" | awk '{print $3}')
MAC_C=$(ip -n "$NS_C" -br link show "$IF_C" | awk '{print $3}')
ip -n "$NS_S" neigh replace "$IP_C" lladdr "$MAC_C" dev "$IF_S" nud permanent
ip -n "$NS_C" neigh replace "$IP_S" lladdr "$MAC_S" dev "$IF_C" nud permanent
in_s sh -c "echo 1 > /sys/class/net/$IF_S/threaded" || die "threaded NAPI unavailable on $IF_S"
in_c sh -c "echo 1 > /sys/class/net/$IF_C/threaded" || die "threaded NAPI unavailable on $IF_C"
in_s sh -c "echo 1 > /sys/class/net/$IF_SU/threaded" || die "threaded NAPI unavailable on $IF_SU"
in_u sh -c "echo 1 > /sys/class/net/$IF_U/threaded" || die "threaded NAPI unavailable on $IF_U"

napi_pids() { ps -eo pid=,comm= | awk -v p="napi/$1-" 'index($2, p) == 1 {print $1}' | sort -n | tr '\n' ' '; }
NAPI_S="" NAPI_SU="" NAPI_PINNED=""
# pin_napi: the NAPI kthreads of the server's ends (xcs0, xcu0) to CPU0, the client's and the
# upstream's to CPU1; again before every server (an XDP attach can recreate them).
pin_napi() {
    local s su c u p
    s=$(napi_pids "$IF_S"); su=$(napi_pids "$IF_SU"); c=$(napi_pids "$IF_C"); u=$(napi_pids "$IF_U")
    [[ -n ${s// /} && -n ${c// /} && -n ${su// /} && -n ${u// /} ]] || die "no NAPI kthreads for the veth ends (threaded NAPI off?)"
    for p in $s $su; do taskset -pc "$SRV_CPU" "$p" >/dev/null || die "cannot pin NAPI kthread $p to CPU$SRV_CPU"; done
    for p in $c $u; do taskset -pc "$GEN_CPU" "$p" >/dev/null || die "cannot pin NAPI kthread $p to CPU$GEN_CPU"; done
    if [[ "$s $su $c $u" != "$NAPI_PINNED" ]]; then
        log "NAPI kthreads: $IF_S ${s% } and $IF_SU ${su% } -> CPU$SRV_CPU; $IF_C ${c% } and $IF_U ${u% } -> CPU$GEN_CPU"
    fi
    NAPI_S=$s NAPI_SU=$su NAPI_PINNED="$s $su $c $u"
}
pin_napi
# Mode 1's load generator: kxdpgun if it works here, else skua-xdpgun (lib.sh, choose_generator).
GEN=none GEN_BIN="" GEN_DESC="none (mode $MODE)"
if [[ $MODE == hits ]]; then
    choose_generator "$GENERATOR" "$WORK" "$NS_C" "$IF_C" "$IP_C" "$MAC_C" "$MAC_S" "$IP_S" "$WORK/queries.txt"
fi

# The upstream, for the whole run: knotd on CPU1.
ip netns exec "$NS_U" taskset -c "$UP_CPU" knotd -c "$WORK/knot-up.conf" > "$OUT/logs/upstream-knotd.log" 2>&1 &
UP_PID=$!
for i in $(seq 100); do
    [[ $(in_s kdig @"$IP_U" h7.internal. A +short +timeout=1 +retry=0 2>/dev/null) == 198.18.0.7 ]] && break
    kill -0 "$UP_PID" 2>/dev/null || { cat "$OUT/logs/upstream-knotd.log" >&2; die "the upstream knotd exited"; }
    [[ $i -lt 100 ]] || die "the upstream knotd does not answer h7.internal. A"
    sleep 0.1
done
[[ $(in_s kdig @"$IP_U" x.miss.internal. A +short +timeout=1 2>/dev/null) == 198.18.0.99 ]] || die "the upstream does not answer the wildcard"
# Only the server namespace reaches the upstream.
if in_c kdig @"$IP_U" h7.internal. A +short +timeout=1 +retry=0 >/dev/null 2>&1 &&
    [[ -n $(in_c kdig @"$IP_U" h7.internal. A +short +timeout=1 +retry=0 2>/dev/null) ]]; then
    die "the client namespace reaches the upstream"
fi
log "upstream: knotd (pid $UP_PID) on $IP_U, CPU$UP_CPU; zone internal. (10,000 names, TTL 86400, *.miss wildcard)"

# ---------------------------------------------------------------- counters
sum_runtime() { # ns on CPU (schedstat) of every thread of these processes
    local p files=()
    if [[ $# == 0 ]]; then echo 0; return; fi
    for p in "$@"; do files+=(/proc/"$p"/task/*/schedstat); done
    cat "${files[@]}" 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'
}
cpu_ticks() { # busy/total jiffies of CPU0 and CPU1
    awk '$1 == "cpu0" || $1 == "cpu1" { t = 0; for (i = 2; i <= NF; i++) t += $i; b[$1] = $2 + $3 + $4 + $7 + $8; T[$1] = t }
         END { print b["cpu0"], T["cpu0"], b["cpu1"], T["cpu1"] }' /proc/stat
}
veth_stats() { # client tx_pk tx_drop rx_pk rx_drop, server rx_pk rx_drop tx_pk tx_drop
    in_c sh -c "cd /sys/class/net/$IF_C/statistics && cat tx_packets tx_dropped rx_packets rx_dropped" | tr '\n' ' '
    in_s sh -c "cd /sys/class/net/$IF_S/statistics && cat rx_packets rx_dropped tx_packets tx_dropped" | tr '\n' ' '
}
udp_snmp() { # NS: InDatagrams OutDatagrams RcvbufErrors SndbufErrors
    # shellcheck disable=SC2016 # awk's own $i
    ip netns exec "$1" awk '/^Udp:/ { if (!h) { for (i = 2; i <= NF; i++) c[$i] = i; h = 1 }
              else print $c["InDatagrams"], $c["OutDatagrams"], $c["RcvbufErrors"], $c["SndbufErrors"] }' /proc/net/snmp
}
up_in() { udp_snmp "$NS_U" | awk '{print $1}'; }   # queries that reached the upstream
# server_stats: 'answered hits misses prog_answered prog_cached xsk_answered sock_answered'
# from the server's own counters (NA where it has none).
server_stats() {
    local m=$WORK/metrics.txt
    case $SERVER in
        skuad-*)
            curl -s -m 5 --unix-socket "$WORK/skuad-ctl.sock" http://localhost/metrics > "$m" ||
                die "cannot read skuad's /metrics over $WORK/skuad-ctl.sock"
            local pa pc xa sa
            pa=$(prom_sum "$m" skua_xdp_program_packets_total 'counter="answered"')
            pc=$(prom_sum "$m" skua_xdp_program_packets_total 'counter="answered_cached"')
            xa=$(prom_sum "$m" skua_xdp_queue_packets_total 'counter="answered"')
            sa=$(prom_sum "$m" skua_responses_total 'path="socket"')
            echo "$((pa + pc + xa + sa)) $(prom_sum "$m" skua_cache_hits_total) $(prom_sum "$m" skua_cache_misses_total) $pa $pc $xa $sa" ;;
        unbound)
            timeout 10 unbound-control -c "$SERVER_CONF" stats_noreset 2>/dev/null | awk -F= '
                $1 == "total.num.queries" { q = $2 } $1 == "total.num.cachehits" { h = $2 } $1 == "total.num.cachemiss" { m = $2 }
                END { if (q == "") print "NA NA NA NA NA NA NA"; else print q, h, m, "NA NA NA", q }' ;;
        kresd)
            "$SYS_PY" - "$WORK/kres/control/$SERVER_PID" <<'PYEOF' || echo "NA NA NA NA NA NA NA"
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"stats.get('answer.total') .. ' ' .. stats.get('answer.cached')\n")
buf, t0 = b"", time.time()
while b"'" not in buf or buf.count(b"'") < 2:
    buf += s.recv(4096)
    if time.time() - t0 > 2:
        break
a, c = (int(x) for x in buf.split(b"'")[1].split())
print(a, c, a - c, "NA NA NA", a)
PYEOF
            ;;
        dnsdist)
            in_s curl -s -m 5 -H 'X-API-Key: skua-bench-not-a-secret' 'http://127.0.0.1:8083/jsonstat?command=stats' |
                jq -r '"\(.["cache-hits"] + .responses) \(.["cache-hits"]) \(.["cache-misses"]) NA NA NA \(.["cache-hits"] + .responses)"' 2>/dev/null ||
                echo "NA NA NA NA NA NA NA" ;;
        *) echo "NA NA NA NA NA NA NA" ;;
    esac
}
server_runtime() { # server threads, the NAPI kthreads of its client link, of its upstream link (ns)
    local n=0 s su
    if [[ -n $SERVER_PID ]]; then n=$(sum_runtime "$SERVER_PID"); fi
    # shellcheck disable=SC2086 # lists of pids
    s=$(sum_runtime $NAPI_S)
    # shellcheck disable=SC2086
    su=$(sum_runtime $NAPI_SU)
    echo "$n $s $su"
}
SNAP_FIELDS="c_tx c_txdrop c_rx c_rxdrop s_rx s_rxdrop s_tx s_txdrop udp_in udp_out rcvbuf sndbuf up_in cpu0_busy cpu0_tot cpu1_busy cpu1_tot srv_ns napi_s_ns napi_su_ns st_answered st_hits st_misses st_prog st_progc st_xsk st_sock"
snapshot() {
    local v u w c r s
    v=$(veth_stats); u=$(udp_snmp "$NS_S"); w=$(up_in); c=$(cpu_ticks); r=$(server_runtime); s=$(server_stats)
    echo "$v $u $w $c $r $s"
}
background_busy() { # % of both CPUs busy over S s: other jobs (the upstream is idle)
    local a b
    a=$(cpu_ticks); sleep "${1:-1}"; b=$(cpu_ticks)
    awk -v a="$a" -v b="$b" 'BEGIN { split(a, x); split(b, y); t = (y[2] - x[2]) + (y[4] - x[4]);
        printf "%d\n", (t > 0 ? 100 * ((y[1] - x[1]) + (y[3] - x[3])) / t : 0) }'
}
wait_quiet() {
    local b t0=$SECONDS
    while :; do
        b=$(background_busy)
        if [[ $b -lt $QUIET_PCT || $((SECONDS - t0)) -ge $WAIT_QUIET ]]; then break; fi
    done
    [[ $b -lt $QUIET_PCT ]] || log "machine busy: other jobs use $b % of the CPUs (waited $((SECONDS - t0)) s)"
    echo "$b"
}

# ---------------------------------------------------------------- servers
handlers_ready() { # SIGUSR1 and SIGTERM caught: signalling cannot kill it by default
    local m
    m=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [[ -n $m ]] && (( (16#$m >> 9) & 1 )) && (( (16#$m >> 14) & 1 ))
}
# start_server NAME TAG: starts NAME on CPU0 in the server namespace, waits until it answers
# h7.internal. (through the upstream, for the forwarders) and, for skuad's XDP servers, until
# its XDP plane runs (and the local zone is in the program for skuad-xdp-local).
start_server() {
    local name=$1 log i
    SERVER=$name SERVER_TAG=$2 SERVER_CONF=""
    log=$OUT/logs/$2.server.log
    : > "$log"
    xdp_off
    if [[ -n $(in_s ss -Hlun "sport = :53") ]]; then die "port 53 still bound in $NS_S"; fi
    local -a cmd
    case $name in
        skuad-xdp-cache) SERVER_CONF=$WORK/skuad-cache.conf; cmd=("$WORK/skuad" --config "$SERVER_CONF" --xdp-mode native) ;;
        skuad-xsk-cache) SERVER_CONF=$WORK/skuad-cache.conf; cmd=("$WORK/skuad" --config "$SERVER_CONF" --xdp-mode native "${XSK_ARGS[@]}") ;;
        skuad-sock-cache) SERVER_CONF=$WORK/skuad-cache.conf; cmd=("$WORK/skuad" --config "$SERVER_CONF" --no-xdp) ;;
        skuad-xdp-local) SERVER_CONF=$WORK/skuad-local.conf; cmd=("$WORK/skuad" --config "$SERVER_CONF" --xdp-mode native) ;;
        unbound) SERVER_CONF=$WORK/unbound.conf; cmd=(unbound -d -c "$SERVER_CONF") ;;
        kresd) rm -rf "$WORK/kres"; mkdir -p "$WORK/kres"; SERVER_CONF=$WORK/kresd.lua; cmd=(kresd -n -c "$SERVER_CONF" "$WORK/kres") ;;
        dnsdist) SERVER_CONF=$WORK/dnsdist.conf; cmd=(dnsdist --supervised --disable-syslog -C "$SERVER_CONF") ;;
        *) die "internal error: no server '$name'" ;;
    esac
    if [[ $MODE == memory ]]; then
        case $name in
            skuad-sock-cache) SERVER_CONF=$WORK/skuad-mem.conf; cmd=("$WORK/skuad" --config "$SERVER_CONF" --no-xdp) ;;
            unbound) SERVER_CONF=$WORK/unbound-mem.conf; cmd=(unbound -d -c "$SERVER_CONF") ;;
        esac
    fi
    echo "+ ${cmd[*]}" >> "$log"
    ip netns exec "$NS_S" taskset -c "$SRV_CPU" "${cmd[@]}" >> "$log" 2>&1 &
    SERVER_PID=$!
    pin_napi
    local ready=0 t_end=$((SECONDS + 20))
    while (( SECONDS < t_end )); do
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            cat "$log" >&2; SERVER_PID=""; die "$name exited during start-up (log above)"
        fi
        if [[ $name == skuad-xdp-* || $name == skuad-xsk-* ]] && grep -q "xdp: not used\|xdp: disabled" "$log"; then
            cat "$log" >&2; die "skuad did not start its XDP plane (log above)"
        fi
        if { [[ $name != skuad-x* ]] || grep -q "xdp: self-test passed on $IF_S " "$log"; } &&
            { [[ $name != skuad-xdp-local ]] || grep -q "xdp: [0-9]* answers precompiled into the program" "$log"; } &&
            { [[ $name != skuad-* ]] || { handlers_ready "$SERVER_PID" && [[ -S $WORK/skuad-ctl.sock ]]; }; } &&
            { [[ $name != kresd ]] || [[ -S $WORK/kres/control/$SERVER_PID ]]; } &&
            [[ $(in_c kdig @"$IP_S" h7.internal. A +short +timeout=1 +retry=0 2>/dev/null) == 198.18.0.7 ]]; then
            ready=1; break
        fi
        sleep 0.1
    done
    if [[ $ready == 0 ]]; then
        cat "$log" >&2
        die "$name not ready after 20 s (every server: h7.internal. A -> 198.18.0.7 from the client; skuad-x*: 'xdp: self-test passed on $IF_S')"
    fi
    case $name in
        skuad-xdp-*|skuad-xsk-*) [[ $(in_s ip -d link show dev "$IF_S") == *prog/xdp* ]] || die "$name: no XDP program on $IF_S" ;;
    esac
    pin_napi
}

# dnsperf_run LOG ARGS...: dnsperf from the client namespace on CPU1 against the server.
dnsperf_run() {
    local f=$1; shift
    timeout 900 ip netns exec "$NS_C" taskset -c "$GEN_CPU" dnsperf -s "$IP_S" "$@" > "$f" 2>&1 ||
        log "warning: dnsperf exited with an error (log $f)"
}
# dnsperf_counts LOG: 'completed lost runtime_s'
dnsperf_counts() {
    awk '/Queries completed:/ {c = $3} /Queries lost:/ {l = $3} /Run time \(s\):/ {t = $4}
         END {printf "%d %d %s\n", c, l, (t == "" ? 0 : t)}' "$1"
}

# warm_up: WARM_PASSES passes over the 10,000 names at <= WARM_RATE qps (the first pass asks
# the upstream), each name twice in a row: skuad's AF_XDP workers propose a name to the XDP
# program when they answer it from the cache twice within 10 s, from a small direct-mapped
# table; with the names in a fixed cycle of 10,000, three plain passes got 823 of them proposed
# (in a trial), the pairs get every one. Then SETTLE_SECS. Sets W_* (completed, lost, seconds).
W_DONE=0 W_LOST=0 W_SECS=0
warm_up() {
    local f=$OUT/logs/$SERVER_TAG.warmup.dnsperf.log
    dnsperf_run "$f" -d "$WORK/warm-pairs.txt" -n "$WARM_PASSES" -c 4 -q 200 -Q "$WARM_RATE" -t 2
    read -r W_DONE W_LOST W_SECS < <(dnsperf_counts "$f")
    sleep "$SETTLE_SECS"
}

# prog_cached_entries: cached answers in skuad's XDP program(s), from its SIGUSR1 dump ('xdp
# cached answers: N in the programs, ...'); NA when it logs none (--xdp-cache-answers 0, or a
# skuad before cached answers in the program).
prog_cached_entries() {
    local log=$OUT/logs/$SERVER_TAG.server.log off i tailtext
    off=$(stat -c %s "$log")
    kill -USR1 "$SERVER_PID" || die "cannot signal skuad ($SERVER_PID)"
    for i in $(seq 250); do
        tailtext=$(tail -c +"$((off + 1))" "$log")
        if [[ $tailtext == *"xdp program on $IF_S: "*drop_malformed=* ]]; then
            if [[ $tailtext =~ xdp\ cached\ answers:\ ([0-9]+)\ in\ the\ programs ]]; then
                echo "${BASH_REMATCH[1]}"
            else
                echo NA
            fi
            return 0
        fi
        sleep 0.02
    done
    die "skuad wrote no counters within 5 s of SIGUSR1 (log $log)"
}
# wait_prog_cache: skuad-xdp-cache only: after the warm-up, until the names the workers proposed
# are in the program (>= 99 % of the 10,000, or no growth for 1 s, at most 15 s). Sets P_RES.
P_RES=NA
wait_prog_cache() {
    P_RES=NA
    [[ $SERVER == skuad-xdp-cache ]] || return 0
    local n last=-1 same=0 t0=$SECONDS
    while :; do
        n=$(prog_cached_entries)
        [[ $n != NA ]] || { P_RES=NA; return 0; }
        if [[ $n -ge 9900 ]]; then break; fi
        if [[ $n -gt 0 && $n == "$last" ]]; then same=$((same + 1)); else same=0; fi
        [[ $same -lt 2 ]] || break
        (( SECONDS - t0 < 15 )) || break
        last=$n
        sleep 0.5
    done
    P_RES=$n
    log "$SERVER: $n cached answers in the XDP program after the warm-up ($((SECONDS - t0)) s)"
}

# ---------------------------------------------------------------- mode 1: one hits step
# raw.tsv: one row per generator run (as in xdp.sh). dur = the generator's sending time; sent/answers =
# client veth (tx_packets + tx_dropped) / rx_packets; up_q = UDP datagrams the upstream received
# during the step; cpu_us_per_ans = (server threads + its client link's NAPI kthread) CPU time /
# answers; cpu0_pct / cpu1_pct = share of the CPU busy over the snapshot window (the generator's
# start-up included); srv_* / prog_* / xsk_* / sock_* = the server's own counters (NA: none);
# warm_* = the warm-up's dnsperf (completed, lost, seconds); prog_resident = cached answers in
# skuad-xdp-cache's XDP program before the step (NA: none logged).
RAW=$OUT/raw.tsv
RAW_FIELDS="rep server phase offered secs dur kx_sent kx_sent_pps kx_replies kx_replies_pps sent answers sent_rate ans_rate loss_pct gen_bound q_drops r_drops udp_in rcvbuf up_q cpu_us_per_ans srv_ms napi_s_ms cpu0_pct cpu1_pct srv_answered srv_hits srv_misses prog_answered prog_cached xsk_answered sock_answered warm_completed warm_lost warm_secs background_pct round t_start s_txdrop prog_resident"
measure_hits() {
    local rate=$1 secs=$2 f a b row t0 kx
    t0=$(date +%s)
    f="$OUT/logs/$SERVER_TAG.kx.log"
    a=$(snapshot)
    timeout $((secs + 30)) ip netns exec "$NS_C" taskset -c "$GEN_CPU" "$GEN_BIN" -t "$secs" -Q "$rate" \
        -i "$WORK/queries.txt" -I "$IF_C" -l "$IP_C" -L "$MAC_C" -R "$MAC_S" -F "$GEN_CPU" "$IP_S" > "$f" 2>&1 ||
        log "warning: $GEN exited with an error (log $f)"
    sleep 0.2   # late replies
    b=$(snapshot)
    in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true
    kx=$(awk '/^total queries:/ {s = $3; sp = $4} /^total replies:/ {r = $3; rp = $4}
              END { gsub(/[(]/, "", sp); gsub(/[(]/, "", rp); printf "%.0f %.0f %.0f %.0f\n", s, sp, r, rp }' "$f")
    row=$(awk -v a="$a" -v b="$b" -v kx="$kx" -v names="$SNAP_FIELDS" -v secs="$secs" -v rate="$rate" \
              -v pre="$REP	$SERVER	fixed" -v bg="$BG" -v round="$ROUND" -v t0="$t0" \
              -v w="$W_DONE	$W_LOST	$W_SECS" -v pres="$P_RES" '
        BEGIN {
            n = split(names, N, " "); split(a, A, " "); split(b, B, " ")
            for (i = 1; i <= n; i++) d[N[i]] = (A[i] == "NA" || B[i] == "NA") ? "NA" : B[i] - A[i]
            split(kx, K, " ")
            dur = (K[1] > 0 && K[2] > 0) ? K[1] / K[2] : secs
            sent = d["c_tx"] + d["c_txdrop"]; ans = d["c_rx"]
            loss = sent > 0 ? 100 * (sent - ans) / sent : 100
            if (loss < 0) loss = 0
            gen = (sent / dur < 0.95 * rate) ? 1 : 0
            cpu = ans > 0 ? (d["srv_ns"] + d["napi_s_ns"]) / 1000 / ans : "NA"
            printf "%s\t%d\t%d\t%.3f\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.3f\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n",
                pre, rate, secs, dur, K[1], K[2], K[3], K[4], sent, ans, sent / dur, ans / dur, loss, gen,
                d["c_txdrop"] + d["s_rxdrop"], d["s_txdrop"] + d["c_rxdrop"], d["udp_in"], d["rcvbuf"], d["up_in"],
                cpu, d["srv_ns"] / 1e6, d["napi_s_ns"] / 1e6,
                (d["cpu0_tot"] > 0 ? 100 * d["cpu0_busy"] / d["cpu0_tot"] : 0), (d["cpu1_tot"] > 0 ? 100 * d["cpu1_busy"] / d["cpu1_tot"] : 0),
                d["st_answered"], d["st_hits"], d["st_misses"], d["st_prog"], d["st_progc"], d["st_xsk"], d["st_sock"],
                w, bg, round, t0, d["s_txdrop"], pres
        }')
    local -a R
    IFS=$'\t' read -r -a R <<< "$row"
    [[ ${#R[@]} == 41 ]] || die "internal error: a raw row has ${#R[@]} fields, not 41: '$row'"
    printf '%s\n' "$row" >> "$RAW"
    # 0-based: 12 sent_rate 13 ans_rate 14 loss 15 gen 16 qdrop 17 rdrop 18 udp_in 19 rcvbuf 20 up_q 21 cpu_us
    #          26 answered 27 hits 28 misses 29 prog 30 prog_cached 31 xsk 32 sock 33 warm done 34 warm lost
    local who=""
    case $SERVER in
        skuad-*) who="; server: hits ${R[27]}, misses ${R[28]}, answered by the XDP program ${R[30]} cached + ${R[29]} local, AF_XDP workers ${R[31]}, sockets ${R[32]}" ;;
        *) [[ ${R[27]} == NA ]] || who="; server: hits ${R[27]}, misses ${R[28]}" ;;
    esac
    log "$(printf 'rep %s/%s %-16s %5s k offered %2ss: sent %7.1fk/s answered %7.1fk/s (loss %5.2f %%%s), veth drops q %s r %s, rcvbuf %s, cpu %s us/ans, CPU0 %s%% CPU1 %s%%; upstream q %s; warm-up %s done %s lost%s' \
        "$REP" "$REPS" "$SERVER" "$((rate / 1000))" "$secs" "$(awk -v x="${R[12]}" 'BEGIN{print x/1000}')" \
        "$(awk -v x="${R[13]}" 'BEGIN{print x/1000}')" "${R[14]}" "$([[ ${R[15]} == 1 ]] && echo ', GENERATOR-BOUND')" \
        "${R[16]}" "${R[17]}" "${R[19]}" "${R[21]}" "${R[24]}" "${R[25]}" "${R[20]}" "${R[33]}" "${R[34]}" "$who")"
    if [[ ${R[20]} != 0 ]]; then
        log "warning: $SERVER: the upstream received ${R[20]} queries during the measured step: not every answer came from the cache"
    fi
    if [[ $SERVER == skuad-x* && ${R[18]} -gt 100 ]]; then
        log "warning: $SERVER: the kernel sockets received ${R[18]} datagrams during the step: part of the load bypassed XDP"
    fi
}

# ---------------------------------------------------------------- mode 2: one misses step
MISSES=$OUT/misses.tsv
MISS_FIELDS="rep server offered secs runtime sent completed lost lost_pct resolved resolved_qps p50_ms p99_ms p999_ms avg_ms up_q srv_ms napi_ms cpu_us udp_in rcvbuf background_pct round t_start"
MISS_N=0
measure_miss() {
    local rate=$1 secs=$2 f names a b t0 count lat qargs=()
    t0=$(date +%s)
    MISS_N=$((MISS_N + 1))
    names=$WORK/miss-names.txt
    # Names nobody asked before: a tag of their own per step; enough for the whole step.
    if [[ $rate -gt 0 ]]; then count=$((rate * secs * 12 / 10 + 1000)); qargs=(-Q "$rate"); else count=$((200000 * secs)); fi
    gen_miss_queries internal. "m$$-r$REP-s$MISS_N" "$count" "$names"
    f="$OUT/logs/$SERVER_TAG.miss-$rate.dnsperf.log"
    lat=$WORK/latencies.txt
    a=$(snapshot)
    timeout $((secs + 60)) ip netns exec "$NS_C" taskset -c "$GEN_CPU" dnsperf -s "$IP_S" -d "$names" -n 1 -l "$secs" \
        -c 8 -q "$MISS_WINDOW" "${qargs[@]}" -t 2 -v > "$WORK/dnsperf-v.txt" 2> "$f" ||
        log "warning: dnsperf exited with an error (log $f)"
    sleep 0.2
    b=$(snapshot)
    # -v prints '> RCODE name type seconds' per answered query; the statistics at the end.
    grep -v '^>' "$WORK/dnsperf-v.txt" >> "$f" || true
    awk '$1 == ">" && NF >= 5 && $NF ~ /^[0-9.]+$/ {print $NF * 1000}' "$WORK/dnsperf-v.txt" | sort -g > "$lat"
    local nl noerr
    nl=$(wc -l < "$lat")
    noerr=$(awk '$1 == ">" && $2 == "NOERROR"' "$WORK/dnsperf-v.txt" | wc -l)
    local row
    row=$(awk -v a="$a" -v b="$b" -v names="$SNAP_FIELDS" -v secs="$secs" -v rate="$rate" \
              -v pre="$REP	$SERVER" -v bg="$BG" -v round="$ROUND" -v t0="$t0" -v lat="$lat" -v nl="$nl" -v noerr="$noerr" \
              -v cnt="$(dnsperf_counts "$WORK/dnsperf-v.txt")" '
        function q(x,   i) { if (nl == 0) return "NA"; i = int(x * nl); if (i < 1) i = 1; if (i > nl) i = nl; return L[i] }
        BEGIN {
            n = split(names, N, " "); split(a, A, " "); split(b, B, " ")
            for (i = 1; i <= n; i++) d[N[i]] = (A[i] == "NA" || B[i] == "NA") ? "NA" : B[i] - A[i]
            split(cnt, C, " ")
            i = 0; s = 0; while ((getline v < lat) > 0) { L[++i] = v; s += v }
            run = C[3] > 0 ? C[3] : secs
            sentq = C[1] + C[2]
            cpu = noerr > 0 ? (d["srv_ns"] + d["napi_s_ns"] + d["napi_su_ns"]) / 1000 / noerr : "NA"
            printf "%s\t%d\t%d\t%.3f\t%d\t%d\t%d\t%.2f\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%d\t%d\n",
                pre, rate, secs, run, sentq, C[1], C[2], (sentq > 0 ? 100 * C[2] / sentq : 0), noerr, noerr / run,
                q(0.5), q(0.99), q(0.999), (nl > 0 ? s / nl : "NA"), d["up_in"],
                d["srv_ns"] / 1e6, (d["napi_s_ns"] + d["napi_su_ns"]) / 1e6, cpu, d["udp_in"], d["rcvbuf"], bg, round, t0
        }')
    printf '%s\n' "$row" >> "$MISSES"
    local -a R
    IFS=$'\t' read -r -a R <<< "$row"
    log "$(printf 'rep %s/%s %-16s misses at %s: %s resolved/s (%s of %s answered NOERROR, lost %s %%), latency p50 %s ms p99 %s ms p99.9 %s ms, cpu %s us/resolved, upstream q %s' \
        "$REP" "$REPS" "$SERVER" "$([[ $rate == 0 ]] && echo unlimited || echo "$rate qps")" "${R[10]}" "${R[9]}" "${R[5]}" "${R[8]}" \
        "${R[11]}" "${R[12]}" "${R[13]}" "${R[18]}" "${R[15]}")"
    rm -f "$names" "$WORK/dnsperf-v.txt" "$lat"
}

# ---------------------------------------------------------------- mode 3: memory
MEMORY=$OUT/memory.tsv
memory_run() {
    local names=$WORK/mem-names.txt f t0 rss0 rss1 up0 up1 ndone nlost secs
    gen_miss_queries internal. "mem$$" "$MEM_NAMES" "$names"
    start_server "$SERVER_NAME" "mem-$SERVER_NAME"
    sleep 1
    kill -0 "$SERVER_PID" 2>/dev/null || die "$SERVER exited before the fill"
    rss0=$(rss_kib "$SERVER_PID"); up0=$(up_in)
    f=$OUT/logs/$SERVER_TAG.fill.dnsperf.log
    t0=$(date +%s.%N)
    log "$SERVER: filling the cache with $MEM_NAMES names (dnsperf -q $MISS_WINDOW)"
    dnsperf_run "$f" -d "$names" -n 1 -c 8 -q "$MISS_WINDOW" -t 5
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    read -r ndone nlost _ < <(dnsperf_counts "$f")
    sleep 2
    kill -0 "$SERVER_PID" 2>/dev/null || die "$SERVER exited during the fill"
    rss1=$(rss_kib "$SERVER_PID"); up1=$(up_in)
    local sets msgs sb mb ev
    case $SERVER in
        skuad-*)
            local m=$WORK/metrics.txt
            curl -s -m 10 --unix-socket "$WORK/skuad-ctl.sock" http://localhost/metrics > "$m" || die "cannot read skuad's /metrics"
            cp "$m" "$OUT/logs/$SERVER_TAG.metrics.txt"
            sets=$(prom_sum "$m" skua_cache_entries 'store="rrset"'); msgs=$(prom_sum "$m" skua_cache_entries 'store="message"')
            sb=$(prom_sum "$m" skua_cache_bytes 'store="rrset"'); mb=$(prom_sum "$m" skua_cache_bytes 'store="message"')
            ev=$(prom_sum "$m" skua_cache_evictions_total) ;;
        unbound)
            timeout 10 unbound-control -c "$SERVER_CONF" stats_noreset > "$OUT/logs/$SERVER_TAG.stats.txt" || die "unbound-control stats_noreset failed"
            read -r sets msgs sb mb < <(awk -F= '$1 == "rrset.cache.count" {a = $2} $1 == "msg.cache.count" {b = $2}
                $1 == "mem.cache.rrset" {c = $2} $1 == "mem.cache.message" {d = $2} END {print a + 0, b + 0, c + 0, d + 0}' "$OUT/logs/$SERVER_TAG.stats.txt")
            ev=NA ;;
    esac
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$SERVER" "$MEM_NAMES" "$ndone" "$nlost" "$secs" \
        "$sets" "$msgs" "$sb" "$mb" "$rss0" "$rss1" "$ev" "$((up1 - up0))" >> "$MEMORY"
    log "$SERVER: $ndone of $MEM_NAMES answered ($nlost lost) in $secs s; cached RRsets $sets, answers $msgs; stores: RRsets $sb B, answers $mb B; RSS $rss0 -> $rss1 KiB; upstream queries $((up1 - up0)); evictions $ev"
    stop_server
}

# ---------------------------------------------------------------- run
ROUND=0 STEP_N=0 BG=0
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "mode: $MODE"
    echo "kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) x $(nproc)"
    echo "skuad: $SKUAD_DESC; $XSK_NOTE"
    echo "upstream: $(knotd --version 2>&1 | head -1), one UDP worker, CPU$UP_CPU"
    echo "unbound: $(unbound -V 2>/dev/null | head -1 || echo -); kresd: $(kresd --version 2>/dev/null | head -1 || echo -); dnsdist: $(dnsdist --version 2>/dev/null | head -1 || echo -)"
    echo "generator: $GEN_DESC; dnsperf: $(dnsperf -h 2>&1 | awk '/^Version/ {print $2}')"
    echo "args: reps=$REPS servers=$SERVERS rates=$RATES step_secs=$STEP_SECS cpu_rate=$CPU_RATE overload_rate=$OVERLOAD_RATE warm_passes=$WARM_PASSES warm_rate=$WARM_RATE settle_secs=$SETTLE_SECS miss_rates=$MISS_RATES miss_window=$MISS_WINDOW mem_names=$MEM_NAMES mem_cache_size=$MEM_CACHE quick=$QUICK targets: local>=$T_LOCAL peers>=$T_PEERS xsk-peers>=$T_XSK"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); top processes: $(ps -eo pcpu=,comm= --sort=-pcpu | head -4 | awk '{printf "%s %s%%; ", $2, $1}')"
} > "$OUT/machine.txt"
log "results in $OUT (mode $MODE; servers ${SERVER_LIST[*]}; $REPS repetition(s))"

T_RUN0=$SECONDS
case $MODE in
    hits)
        tr ' ' '\t' <<< "$RAW_FIELDS" > "$RAW"
        for REP in $(seq "$REPS"); do
            wait_other
            BG=$(wait_quiet)
            log "== rep $REP/$REPS (other jobs: $BG % CPU; $(( (SECONDS - T_RUN0) / 60 )) min so far)"
            for rate in "${RATE_LIST[@]}"; do
                for srv in "${SERVER_LIST[@]}"; do
                    ROUND=$((ROUND + 1))
                    wait_other
                    BG=$(background_busy "$BG_SECS")
                    STEP_N=$((STEP_N + 1))
                    start_server "$srv" "$(printf 'r%s-%04d-%s' "$REP" "$STEP_N" "$srv")"
                    warm_up
                    wait_prog_cache
                    measure_hits "$rate" "$STEP_SECS"
                    stop_server
                done
            done
        done ;;
    misses)
        tr ' ' '\t' <<< "$MISS_FIELDS" > "$MISSES"
        for REP in $(seq "$REPS"); do
            wait_other
            BG=$(wait_quiet)
            log "== rep $REP/$REPS (other jobs: $BG % CPU; $(( (SECONDS - T_RUN0) / 60 )) min so far)"
            for rate in "${MISS_RATE_LIST[@]}"; do
                for srv in "${SERVER_LIST[@]}"; do
                    ROUND=$((ROUND + 1))
                    wait_other
                    BG=$(background_busy "$BG_SECS")
                    STEP_N=$((STEP_N + 1))
                    start_server "$srv" "$(printf 'r%s-%04d-%s' "$REP" "$STEP_N" "$srv")"
                    # A first touch of the resolving path (sockets, timers), names of their own.
                    gen_miss_queries internal. "w$$-$STEP_N" 1000 "$WORK/warm-names.txt"
                    dnsperf_run "$OUT/logs/$SERVER_TAG.warmup.dnsperf.log" -d "$WORK/warm-names.txt" -n 1 -c 4 -q 100 -Q 5000 -t 2
                    sleep "$SETTLE_SECS"
                    measure_miss "$rate" "$STEP_SECS"
                    stop_server
                done
            done
        done ;;
    memory)
        printf 'server\tnames\tnoerror\tlost\tfill_secs\trrsets\tmsgs\trrset_bytes\tmsg_bytes\trss0_kib\trss1_kib\tevictions\tup_q\n' > "$MEMORY"
        for REP in $(seq "$REPS"); do
            for SERVER_NAME in "${SERVER_LIST[@]}"; do
                wait_other
                memory_run
            done
        done ;;
esac
log "measurements took $(( (SECONDS - T_RUN0) / 60 )) min $(( (SECONDS - T_RUN0) % 60 )) s"
echo "measurements: $(( (SECONDS - T_RUN0) / 60 )) min $(( (SECONDS - T_RUN0) % 60 )) s; load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"

summarize "$OUT" || die "summary failed (raw data in $OUT)"
{ echo; cat "$OUT/machine.txt"; } | tee -a "$OUT/summary.txt"
log "summary: $OUT/summary.txt; raw: $OUT/{raw,misses,memory}.tsv; ratios: $OUT/ratios.tsv$([[ $PLOT == 1 && $MODE == hits ]] && echo ", plot: $OUT/xdp-cache.png")"
exit
}
