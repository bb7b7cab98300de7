#!/usr/bin/env bash
# AF_XDP benchmark: skuad's AF_XDP plane against skuad on kernel sockets, knotd in XDP mode and
# a ceiling (an XDP program answering inside the kernel with XDP_TX), over one veth pair.
#
#   server namespace 198.18.0.1 (xbs0) <--veth--> client namespace 198.18.0.2 (xbc0)
#
# Topology (as in tests/bench/veth.sh and docs of the peer figures, shared/guides/bench.md):
# the server runs pinned to CPU0, the load generator (an AF_XDP sender: kxdpgun, or
# skua-xdpgun where kxdpgun cannot start, see below) to CPU1; threaded NAPI on both veth
# ends with the kthread of xbs0 (receives the queries) pinned to CPU0 and that of xbc0
# (receives the replies) pinned to CPU1, so that the kernel receive work of the queries is
# charged to the server's core; GRO on and TX checksum offload off on both ends; IPv6 off in
# both namespaces (no ND/MLD noise in the counters); static neighbours.
# Zone 'internal.': SOA, NS, ns glue and 10,000 A records h0 .. h9999 (one zone file, served
# by skuad as an auth-zone and by knotd); queries: the 10,000 names.
#
# Servers (--servers, in this order within every round):
#   skuad-xdp    skuad --config F --xdp-mode native    (log must say "self-test passed" and
#                "answers precompiled"): the program answers the zone's names itself with
#                XDP_TX, the AF_XDP queue the rest
#   skuad-xsk    the same with --xdp-answers 0: every query through the AF_XDP queue
#   skuad-sock   skuad --no-xdp --config F              (F has so-rcvbuf: 8m)
#   skuad-xsk-rrl, skuad-sock-rrl   skuad-xsk and skuad-sock with response rate limiting on in
#                log-only mode (rrl-responses-per-second: 5, rrl-log-only: yes): every response
#                is charged to its account and sent anyway; with --sources, the cost of rate
#                limiting through a dataplane (not in the default list)
#   knotd-xdp    knotd 3.x, 'xdp: listen: xbs0@53, udp: on', 1 UDP worker
#   ceiling      bpf/bench/xdp_tx_ceiling.bpf.c (clang -target bpf), attached with
#                'ip link set dev xbs0 xdpdrv obj ... sec xdp': answers every query with a
#                fixed A record from the XDP hook (XDP_TX); no process at all
#
# Interleaving (the machine is shared and noisy: other jobs come and go within minutes, and a
# server measured ten minutes after another meets another machine). By default (--interleave
# step) every measurement is one round over all servers, A B C D E, before the next
# measurement starts: per repetition, for each fixed offered rate (--rates, increasing), each
# server in turn is started, measured for --step-secs and stopped; then a round at --cpu-rate.
# The runs of one rate of one repetition are thus seconds apart, and every ratio is taken
# between them. A server is started afresh for each measurement (about a second: skuad's
# answers are precompiled in ~0.3 s, and the script waits for that). --interleave server
# runs all of one server's measurements under one start, as before (A A A B B B per
# repetition).
#
# Per repetition (default 5):
#   (a) the answered rate at each fixed offered rate (--rates, default 25k .. 1.6M, 5 s each);
#       its maximum over the rates is the repetition's "peak"; and the headline figure,
#       "capacity": replies the server emitted per second of its own CPU time (server threads
#       + its NAPI kthread) in the steps offering >= --overload-rate (default 400k), i.e. what
#       one core of its own would answer under overload. Other jobs on the machine take CPU
#       time away from the server, which changes its answered rate from step to step, but
#       hardly its cost per reply: this ratio is several times steadier than the peak's;
#   (b) server CPU per answer at --cpu-rate (default 50k, 10 s): CPU time (schedstat, ns) of
#       the server's threads + its NAPI kthread (CPU0), divided by the answers; also CPU0's
#       total busy time (/proc/stat) per answer;
#   (c) with --ladder: generator 3 s steps at rising offered rates, highest rate answered with
#       < 1 % loss (a failed step is tried twice; then two bisection steps; all servers climb
#       in lockstep, one round per step), then a confirmation run at that rate.
# Every figure is reported as the median over the repetitions with its min-max, and the spread
# (max-min)/median per server. Ratios (skuad-xdp over each other server) are computed per
# repetition from the runs of that repetition (adjacent in time), then reported as median
# [min-max]; the verdict block prints PASS/FAIL for each target ratio (--target-*) on the
# capacity (and, for reference, on the peak), decided on the median, with UNSTABLE when the
# min-max straddles the target, and which XDP path of skuad (program or AF_XDP-only) is faster
# here. The script always exits 0 once it has measured: the verdicts are for reading.
# Answers are counted at the RECEIVER: rx_packets of the client veth (every reply that crossed
# the pair), with the generator's own count, the server's counters (skuad: SIGUSR1 dump, ceiling:
# its per-CPU map) and the veth drops in each direction alongside. Loss is against the
# queries that entered the veth (client tx_packets + tx_dropped), and a step where the
# generator could not send 95 % of the offered rate is marked generator-bound ('G').
# Every XDP program is detached after each server and at exit ('ip link set dev X xdp off').
#
# Output (OUT, default /tmp/skua-xdp-DATE): summary.txt (tables and verdicts), xdp-bench.csv
# (medians with min and max), raw.tsv (every generator run, with its repetition, round and
# start time), ratios.tsv (every per-repetition ratio), xdp-bench.png (answered vs offered
# qps, median with the min-max band), logs.
#
# The load generator (--generator, default auto): Knot's kxdpgun when it starts on this
# machine (probed once: 1 s at 1000 qps against the server address must send queries), else
# skua-xdpgun (kernel-appliance/xdp/src/bin/skua-xdpgun.rs, built with cargo): the same flags,
# the same summary lines, its own AF_XDP socket on queue 0 and a receive program assembled in
# the tool. kxdpgun 3.2.6 cannot start on kernel 6.18 ("program of this type cannot use helper
# bpf_xdp_adjust_meta"). The log and machine.txt say which one ran; the columns kx_* of
# raw.tsv hold its own counts either way. Figures of one generator are not comparable with
# another's: compare servers within one run.
#
# Usage: tests/bench/xdp.sh [--deps] [--quick] [options]     (root; see --help)
# Needs: ip (iproute2 with libbpf), ethtool, taskset, kdig and (preferably) kxdpgun (knot-dnsutils), knotd
# (knot), clang, bpftool, jq, python3, cargo; matplotlib in a venv (/tmp/skua-bench-venv) for
# the plot. `--deps` installs the missing ones (apt-get and pip, each command printed).

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
usage: tests/bench/xdp.sh [options]                 (as root)
  --deps               install what is missing first (apt-get: knot knot-dnsutils clang llvm
                       ethtool iproute2 bpftool jq python3-venv; pip: matplotlib into the venv
                       /tmp/skua-bench-venv), printing every command; then run
  --deps-only          the same, then exit
  --quick              3 repetitions of 2 s steps at 50k, 200k and 800k offered (unless
                       --reps, --rates, --step-secs are given); the step at --cpu-rate stands
                       for the CPU phase; no quiet-wait: about 5 min
  --reps N             repetitions (default 5; at least 3 for a min-max that means something)
  --servers LIST       comma-separated, measured in this order in every round (default
                       skuad-xdp,skuad-xsk,skuad-sock,knotd-xdp,ceiling; also skuad-xsk-rrl,
                       skuad-sock-rrl)
  --interleave MODE    step (default): each measurement is one round over all servers, each
                       started for it and stopped after it (A B C A B C); server: all of a
                       server's measurements of a repetition under one start (A A B B)
  --generator G        the AF_XDP load generator: kxdpgun, skua (skua-xdpgun, built from
                       the work tree) or auto (default: kxdpgun if a 1 s probe works here)
  --sources NET        the generator sends from every address of NET (e.g. 198.18.128.0/17, outside
                       198.18.0.0/24; the server routes NET via the client) instead of from
                       198.18.0.2 alone: many clients, for rate limiting
  --rates LIST         fixed offered rates, qps (default 25000,50000,100000,200000,400000,
                       800000,1600000)
  --step-secs S        seconds per fixed-rate step (default 5)
  --cpu-rate R         offered rate of the CPU-per-answer phase (default 50000)
  --cpu-secs S         its duration (default 10)
  --overload-rate R    the capacity (headline figure) is taken from the fixed steps offering
                       at least R qps (default 400000)
  --ladder             also the < 1 % loss ladder (3 s steps) and a confirmation run at its
                       result (noisiest figure; about +60 % run time)
  --confirm-secs S     duration of the confirmation run (default 10)
  --target-knotd X     verdict: skuad-xdp capacity (and peak) >= X x knotd-xdp's (default 1.3)
  --target-ceiling X   verdict: skuad-xdp capacity (and peak) >= X x the ceiling's (default 0.85)
  --target-sock X      verdict: skuad-xdp capacity (and peak) >= X x skuad-sock's (default 3)
  --target-cpu-knotd X verdict: skuad-xdp CPU per answer at --cpu-rate <= X x knotd-xdp's
                       (default 0.67)
  --wait-quiet S       before each repetition, wait up to S s for other jobs to use < 10 % of
                       the CPUs (default 30; 0 with --quick); the other jobs' share is
                       sampled for 0.5 s before every step and recorded either way
  --wait-other S       wait up to S s (polling every 30 s) for another benchmark of
                       tests/bench (veth.sh, bigzone.sh, inprocess.sh) to finish (default 2400)
  --client-napi-fifo   run the client's NAPI kthread (receives the replies, CPU1) SCHED_FIFO 50,
                       so that the generator cannot delay it: fewer replies lost in the client's veth
                       ring (off by default, as in tests/bench/veth.sh and the guide)
  --no-plot            no PNG (no matplotlib needed)
  --out DIR            results directory (default /tmp/skua-xdp-DATE)
  --skuad BIN          use this skuad binary instead of building one
  --rev REV            build skuad from this git revision (git archive REV, built in a
                       temporary tree) instead of the work tree: other people's uncommitted
                       edits stay out of the measurement
  --summarize DIR      no measurement: the summary, CSV, ratios and plot again from DIR/raw.tsv
                       (e.g. with other --target-* or --cpu-rate)
Builds with `cargo build --release -p skuad` (honours CARGO_TARGET_DIR) and copies the binary.
EOF2
}

DEFAULT_SERVERS="skuad-xdp,skuad-xsk,skuad-sock,knotd-xdp,ceiling"
ALL_SERVERS="$DEFAULT_SERVERS,skuad-xsk-rrl,skuad-sock-rrl"
SOURCES="" REV="" SUMMARIZE="" INTERLEAVE=step LADDER=0 GENERATOR=auto
REPS=5 SERVERS=$DEFAULT_SERVERS QUICK=0 DEPS=0 DEPS_ONLY=0 PLOT=1 OUT=""
RATES="25000,50000,100000,200000,400000,800000,1600000"
LADDER_SECS=3 STEP_SECS=5 CPU_RATE=50000 CPU_SECS=10 CONFIRM_SECS=10
WAIT_QUIET=30 QUIET_PCT=10 WAIT_OTHER=2400 RETRY=1 BISECT=2 CLIENT_FIFO=0 BG_SECS=0.5
T_KNOT=1.3 T_CEIL=0.85 T_SOCK=3 T_CPU=0.67 OVERLOAD_RATE=400000
LADDER_RATES=(25000 50000 75000 100000 150000 200000 250000 300000 400000 500000 600000 800000 1000000 1200000)
while [[ $# -gt 0 ]]; do
    case $1 in
        --deps) DEPS=1 ;;
        --deps-only) DEPS=1 DEPS_ONLY=1 ;;
        --quick) QUICK=1 ;;
        --reps) REPS=$2; REPS_GIVEN=1; shift ;;
        --servers) SERVERS=$2; shift ;;
        --interleave) INTERLEAVE=$2; shift ;;
        --sources) SOURCES=$2; shift ;;
        --generator) GENERATOR=$2; shift ;;
        --rates) RATES=$2; RATES_GIVEN=1; shift ;;
        --step-secs) STEP_SECS=$2; STEP_GIVEN=1; shift ;;
        --cpu-rate) CPU_RATE=$2; shift ;;
        --overload-rate) OVERLOAD_RATE=$2; shift ;;
        --cpu-secs) CPU_SECS=$2; CPU_GIVEN=1; shift ;;
        --ladder) LADDER=1 ;;
        --confirm-secs) CONFIRM_SECS=$2; shift ;;
        --target-knotd) T_KNOT=$2; shift ;;
        --target-ceiling) T_CEIL=$2; shift ;;
        --target-sock) T_SOCK=$2; shift ;;
        --target-cpu-knotd) T_CPU=$2; shift ;;
        --wait-quiet) WAIT_QUIET=$2; shift ;;
        --wait-other) WAIT_OTHER=$2; shift ;;
        --no-plot) PLOT=0 ;;
        --client-napi-fifo) CLIENT_FIFO=1 ;;
        --out) OUT=$2; shift ;;
        --skuad) SKUAD_BIN=$2; shift ;;
        --rev) REV=$2; shift ;;
        --summarize) SUMMARIZE=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option '$1'" ;;
    esac
    shift
done
if [[ $QUICK == 1 ]]; then
    WAIT_QUIET=0
    # --quick's defaults, unless given explicitly.
    [[ -n ${REPS_GIVEN:-} ]] || REPS=3
    [[ -n ${RATES_GIVEN:-} ]] || RATES=50000,200000,800000
    [[ -n ${STEP_GIVEN:-} ]] || STEP_SECS=2
    [[ -n ${CPU_GIVEN:-} ]] || CPU_SECS=2
fi
for v in REPS STEP_SECS CPU_RATE CPU_SECS CONFIRM_SECS WAIT_QUIET WAIT_OTHER OVERLOAD_RATE; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "--$(tr 'A-Z_' 'a-z-' <<< "$v") must be a whole number (got '${!v}')"
done
for v in T_KNOT T_CEIL T_SOCK T_CPU; do
    [[ ${!v} =~ ^[0-9]+([.][0-9]+)?$ ]] || die "the --target-* values must be positive numbers (got '${!v}')"
done
[[ $REPS -ge 1 && $STEP_SECS -ge 1 && $CPU_SECS -ge 1 && $CONFIRM_SECS -ge 1 ]] || die "--reps and durations must be >= 1"
[[ $REPS -ge 3 ]] || log "warning: --reps $REPS: with fewer than 3 repetitions the min-max says little, and no verdict is UNSTABLE-proof"
[[ $GENERATOR == auto || $GENERATOR == kxdpgun || $GENERATOR == skua ]] ||
    die "--generator must be 'auto', 'kxdpgun' or 'skua' (got '$GENERATOR')"
[[ $INTERLEAVE == step || $INTERLEAVE == server ]] || die "--interleave must be 'step' or 'server' (got '$INTERLEAVE')"
[[ -z $REV || -z ${SKUAD_BIN:-} ]] || die "--rev and --skuad exclude each other"
IFS=, read -r -a SERVER_LIST <<< "$SERVERS"
IFS=, read -r -a RATE_LIST <<< "$RATES"
for s in "${SERVER_LIST[@]}"; do
    [[ ",$ALL_SERVERS," == *",$s,"* ]] || die "unknown server '$s' (known: $ALL_SERVERS)"
done
[[ $(printf '%s\n' "${SERVER_LIST[@]}" | sort | uniq -d) == "" ]] || die "a server is listed twice in --servers"
for r in "${RATE_LIST[@]}"; do [[ $r =~ ^[0-9]+$ && $r -gt 0 ]] || die "bad rate '$r' in --rates"; done
if [[ -n $SOURCES ]]; then
    [[ $SOURCES =~ ^198\.1[89]\.[0-9]+\.[0-9]+/(1[5-9]|2[0-9]|3[0-2])$ && $SOURCES != 198.18.0.* ]] ||
        die "--sources must be a prefix inside 198.18.0.0/15 and outside 198.18.0.0/24 (got '$SOURCES')"
fi
if [[ -n $REV ]]; then
    REV_SHA=$(git -C "$BENCH_ROOT" rev-parse --verify "$REV^{commit}" 2>/dev/null) || die "--rev: no such revision '$REV'"
fi


VENV=/tmp/skua-bench-venv
SYS_PY=/usr/bin/python3
[[ -x $SYS_PY ]] || SYS_PY=$(command -v python3 || true)

# summarize DIR: summary.txt, xdp-bench.csv, ratios.tsv (and the plot) from DIR/raw.tsv
# (and ladder.tsv); also alone: --summarize DIR.
summarize() {
    local dir=$1 py rc=0
    py=$(mktemp /tmp/skua-xdp-summary.XXXXXX.py)
    cat > "$py" <<'PYEOF'
# Summary of tests/bench/xdp.sh: medians with min-max over the repetitions, spreads, ratios of
# runs adjacent in time (per repetition), verdicts against the targets, CSV, plot.
# argv: OUT CPU_RATE OVERLOAD_RATE PLOT T_KNOT T_CEIL T_SOCK T_CPU
import csv, os, statistics, sys

out, cpu_rate, overload, plot = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
T = {"knotd": float(sys.argv[5]), "ceiling": float(sys.argv[6]), "sock": float(sys.argv[7]), "cpu": float(sys.argv[8])}
rows = list(csv.DictReader(open(os.path.join(out, "raw.tsv")), delimiter="\t"))
lad_path = os.path.join(out, "ladder.tsv")
ladders = list(csv.DictReader(open(lad_path), delimiter="\t")) if os.path.exists(lad_path) else []
if not rows:
    sys.exit("raw.tsv has no measurement")

servers = list(dict.fromkeys(r["server"] for r in rows))          # in the order measured
reps = sorted({int(r["rep"]) for r in rows})
rates = sorted({int(r["offered"]) for r in rows if r["phase"] == "fixed"})
over_rates = [r for r in rates if r >= overload]
has_ladder = bool(ladders)
nreps = len(reps)

def f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None

def one(server, rep, phase, offered=None):
    m = [r for r in rows if r["server"] == server and int(r["rep"]) == rep and r["phase"] == phase
         and (offered is None or int(r["offered"]) == offered)]
    return m[-1] if m else None

def emitted_n(r):
    """Replies the server put on the wire: received by the client + refused by the veth on
    their way (server tx_dropped: the client's ring was full). It matches skuad's and the
    ceiling's own counts; the client's rx_dropped counts the same XDP_TX drops again."""
    if r is None or f(r.get("s_txdrop")) is None:
        return None
    return f(r["answers"]) + f(r["s_txdrop"])

def per_cpu_second(r):
    """Capacity of one step: replies emitted per second of the server's own CPU time (its
    threads + its NAPI kthread, schedstat): what one core would answer if it had it all."""
    n = emitted_n(r)
    if n is None or f(r.get("srv_ms")) is None or f(r.get("napi_s_ms")) is None:
        return None
    cpu = (f(r["srv_ms"]) + f(r["napi_s_ms"])) / 1000
    return n / cpu if cpu > 0 else None

# ---- per server and repetition: every figure
P = {s: {} for s in servers}     # P[s][rep][figure] = value
for s in servers:
    for rep in reps:
        d = P[s][rep] = {}
        for rate in rates:
            r = one(s, rep, "fixed", rate)
            d[("ans", rate)] = f(r["ans_rate"]) if r else None
            n = emitted_n(r)
            d[("emit", rate)] = n / f(r["dur"]) if n is not None else None
            d[("cap", rate)] = per_cpu_second(r)
            d[("loss", rate)] = f(r["loss_pct"]) if r else None
            d[("cpu", rate)] = f(r["cpu_us_per_ans"]) if r else None
            d[("sent", rate)] = f(r["sent_rate"]) if r else None
            d[("gen", rate)] = r is not None and r["gen_bound"] == "1"
            d[("srv", rate)] = (f(r["srv_answers"]) / f(r["dur"])) if r and f(r["srv_answers"]) is not None else None
        cap = [v for rate in over_rates if (v := d[("cap", rate)]) is not None]
        d["capacity"] = statistics.median(cap) if cap else None
        ans = [(v, rate) for rate in rates if (v := d[("ans", rate)]) is not None]
        d["peak"], d["peak_at"] = max(ans) if ans else (None, None)
        em = [v for rate in rates if (v := d[("emit", rate)]) is not None]
        d["peak_emit"] = max(em) if em else None
        best = 0
        for rate in rates:   # highest fixed rate answered with < 1 % loss, before the first that is not
            if d[("loss", rate)] is not None and d[("loss", rate)] < 1:
                best = rate
            else:
                break
        d["lossfree"] = best if any(d[("loss", rate)] is not None for rate in rates) else None
        c = one(s, rep, "cpu") or one(s, rep, "fixed", cpu_rate)
        d["cpu"] = f(c["cpu_us_per_ans"]) if c else None
        d["cpu0"] = f(c["cpu0_us_per_ans"]) if c else None
        d["cpu_loss"] = f(c["loss_pct"]) if c else None
        l = [x for x in ladders if x["server"] == s and int(x["rep"]) == rep]
        d["ladder"] = f(l[-1]["best_offered"]) if l else None
        d["ladder_gen"] = bool(l) and l[-1]["gen_bound"] == "1"
        cf = one(s, rep, "confirm")
        d["confirm"] = f(cf["ans_rate"]) if cf else None
        mine = [r for r in rows if r["server"] == s and int(r["rep"]) == rep]
        d["bg"] = statistics.median([f(r["background_pct"]) for r in mine]) if mine else None

def vals(s, key):
    return [P[s][rep].get(key) for rep in reps if P[s][rep].get(key) is not None]

def stats(v):
    v = [x for x in v if x is not None]
    if not v:
        return None
    m = statistics.median(v)
    return {"med": m, "min": min(v), "max": max(v), "n": len(v), "spread": (max(v) - min(v)) / m if m else None}

def k(x, nd=1):
    return "-" if x is None else f"{x / 1000:.{nd}f}k"

def kr(st, nd=1):   # 365.3k [310.2-380.1]
    if st is None:
        return "-"
    return f"{st['med'] / 1000:.{nd}f}k [{st['min'] / 1000:.{nd}f}-{st['max'] / 1000:.{nd}f}]"

def nr(st, fmt="{:.2f}"):
    if st is None:
        return "-"
    return f"{fmt.format(st['med'])} [{fmt.format(st['min'])}-{fmt.format(st['max'])}]"

def pct(st):
    return "-" if st is None or st["spread"] is None else f"{100 * st['spread']:.0f}%"

def med_only(st, fmt="{:.0f}"):
    return "-" if st is None else fmt.format(st["med"])

L = []
p = L.append
p(f"== AF_XDP benchmark: {nreps} repetition(s); every figure: median [min-max] over the repetitions; spread = (max-min)/median")
p("")
cpu_hdr = f"CPU us/answer @{k(cpu_rate, 0)}"
hdr = (f"{'server':<11} {'capacity/CPU-s':>21} {'spread':>6} {'peak answered/s':>24} {'spread':>6} {'at':>6} {'emitted peak':>12} "
       f"{'<1% loss (grid)':>16} {cpu_hdr:>22} {'spread':>6} {'loss%':>5} {'other%':>6}")
if has_ladder:
    hdr += f" {'ladder < 1 %':>22} {'spread':>6} {'confirm':>24}"
p(hdr)
for s in servers:
    cap, pk, cp = stats(vals(s, "capacity")), stats(vals(s, "peak")), stats(vals(s, "cpu"))
    at = stats(vals(s, "peak_at"))
    line = (f"{s:<11} {kr(cap, 0):>21} {pct(cap):>6} {kr(pk):>24} {pct(pk):>6} {k(at and at['med'], 0):>6} {kr(stats(vals(s, 'peak_emit')), 0):>12} "
            f"{kr(stats(vals(s, 'lossfree')), 0):>16} {nr(cp, '{:.3f}'):>22} {pct(cp):>6} "
            f"{med_only(stats(vals(s, 'cpu_loss')), '{:.1f}'):>5} {med_only(stats(vals(s, 'bg'))):>6}")
    if has_ladder:
        ld = stats(vals(s, "ladder"))
        line += f" {kr(ld, 0) + (' G' if any(P[s][r]['ladder_gen'] for r in reps) else ''):>22} {pct(ld):>6} {kr(stats(vals(s, 'confirm'))):>24}"
    p(line)
p(f"   capacity = replies the server emitted per second of its own CPU time (its threads + its NAPI kthread, schedstat;")
p(f"   the ceiling: the NAPI kthread, which runs the program), median of the steps at offered >= {k(overload, 0)}: what a core")
p("   of its own would answer under overload. Other jobs take CPU time from the server, not (much) cost per answer: the")
p("   headline figure, and the one whose ratios the verdicts use.")
p("   peak = the highest answered/s at the receiver over the fixed offered rates (at = the offered rate where it was); it")
p("   depends on the CPU share the server and the generator got during that step. emitted peak = the same for the replies")
p("   the server put on the wire (received + refused by the veth on the way, when CPU1 cannot take them all).")
p("   <1% loss (grid) = highest fixed offered rate answered with < 1 % loss, below the first that is not.")
p("   CPU = CPU time of the server's threads + its NAPI kthread per answer at the CPU rate, loss% its loss;")
p("   other% = CPU share of other jobs on both CPUs, sampled for 0.5 s before each step (median).")
if has_ladder:
    p("   ladder = highest offered rate with < 1 % loss (3 s steps, G: generator-bound in a repetition); confirm = answered/s")
    p("   in the confirmation run at that rate.")
p("")
p("per repetition (in order): capacity | peak answered/s | CPU us/answer at the CPU rate | other jobs' CPU %")
for s in servers:
    ca = " ".join(k(P[s][r]["capacity"], 0) for r in reps)
    pk = " ".join(k(P[s][r]["peak"], 0) for r in reps)
    cp = " ".join("-" if P[s][r]["cpu"] is None else f"{P[s][r]['cpu']:.2f}" for r in reps)
    bg = " ".join("-" if P[s][r]["bg"] is None else f"{P[s][r]['bg']:.0f}" for r in reps)
    p(f"  {s:<11} {ca} | {pk} | {cp} | {bg}")
p("")

def grid(title, key, fmt):
    p(title)
    p(f"{'server':<11}" + "".join(f"{k(r, 0):>16}" for r in rates))
    for s in servers:
        line, rng = f"{s:<11}", f"{'':<11}"
        for r in rates:
            st = stats(vals(s, (key, r)))
            g = sum(1 for rep in reps if P[s][rep].get(("gen", r)))
            line += f"{(fmt(st['med']) if st else '-') + ('G' * (g > 0) + (str(g) if 0 < g < nreps else '')):>16}"
            rng += f"{('[' + fmt(st['min']) + '-' + fmt(st['max']) + ']') if st else '':>16}"
        p(line)
        p(rng)

grid("answered/s at the fixed offered rates, median and [min-max] (receiver side; G = the generator sent < 95 % of the offered\n"
     "rate, Gn: in n repetitions)", "ans", lambda x: f"{x / 1000:.1f}k")
grid("the generator's actual send rate", "sent", lambda x: f"{x / 1000:.1f}k")
grid("replies emitted by the server per second (received + refused by the veth on the way)", "emit", lambda x: f"{x / 1000:.1f}k")
grid("replies emitted per second of server CPU", "cap", lambda x: f"{x / 1000:.0f}k")
grid("CPU us per answer at the fixed offered rates (server threads + its NAPI kthread, per received answer)", "cpu", lambda x: f"{x:.2f}")
p("")
p("per fixed rate, medians: loss % | veth drops queries/replies | the generator's own replies/s | server-counted answers/s | cpu us/answer")
for s in servers:
    for r in rates:
        sel = [x for x in rows if x["server"] == s and x["phase"] == "fixed" and int(x["offered"]) == r]
        def m(key, fmt="{:.0f}"):
            v = [f(x[key]) for x in sel if f(x[key]) is not None]
            return "-" if not v else fmt.format(statistics.median(v))
        extra = ""
        if s in ("skuad-xdp", "skuad-xsk", "skuad-xsk-rrl"):
            extra = f" | xdp tx full {m('xdp_tx_full')}, xsk rx_dropped {m('xsk_rx_dropped')}, fill empty {m('xsk_fill_empty')}, socket queries {m('sock_queries')}"
        if s in ("skuad-sock", "skuad-sock-rrl"):
            extra = f" | rcvbuf errors {m('rcvbuf')}"
        if s in ("skuad-xdp", "skuad-xsk", "skuad-xsk-rrl", "knotd-xdp", "ceiling"):
            extra += f" | UdpInDatagrams {m('udp_in')}"
        sa = stats(vals(s, ("srv", r)))
        kx = m("kx_replies_pps")
        p(f"  {s:<10} {k(r, 0):>6}: loss {m('loss_pct', '{:.2f}'):>6} | {m('q_drops'):>8}/{m('r_drops'):<8} | kx {k(f(kx)):>7} | srv {k(sa and sa['med']):>7} | {m('cpu_us_per_ans', '{:.3f}')}{extra}")
p("")

# ---- ratios per repetition
def ratio_list(a, b, key, need_lossless=None):
    res = []
    for rep in reps:
        x, y = P[a][rep].get(key), P[b][rep].get(key)
        if need_lossless is not None:
            la, lb = P[a][rep].get(("loss", need_lossless)), P[b][rep].get(("loss", need_lossless))
            if la is None or lb is None or la >= 1 or lb >= 1:
                continue
        if x is not None and y:
            res.append(x / y)
    return res

pairs = [("skuad-xdp", o) for o in ("knotd-xdp", "ceiling", "skuad-sock", "skuad-xsk")]
pairs += [("skuad-xsk-rrl", "skuad-xsk"), ("skuad-sock-rrl", "skuad-sock")]
pairs = [(a, b) for a, b in pairs if a in P and b in P]
p("ratios, per repetition from the runs of that repetition (adjacent in time), then median [min-max] over the repetitions:")
tsv = [("a", "b", "metric", "rep", "ratio")]
for a, b in pairs:
    mets = [("capacity", "capacity"), ("peak", "peak answered"), ("peak_emit", "emitted peak"), ("cpu", f"CPU/answer @{k(cpu_rate, 0)}")]
    if has_ladder:
        mets += [("ladder", "ladder"), ("confirm", "confirm")]
    parts = []
    for key, name in mets:
        v = ratio_list(a, b, key)
        tsv += [(a, b, key, i + 1, f"{x:.4f}") for i, x in enumerate(v)]
        parts.append(f"{name} {nr(stats(v))}")
    p(f"  {a} / {b}: " + "; ".join(parts))
    for key, name, lossless in (("ans", "answered at each offered rate", False), ("cap", "capacity at each offered rate", False),
                                ("cpu", "CPU per answer at the rates both answer with < 1 % loss", True)):
        cells = []
        for r in rates:
            v = ratio_list(a, b, (key, r), need_lossless=r if lossless else None)
            tsv += [(a, b, f"{key}@{r}", i + 1, f"{x:.4f}") for i, x in enumerate(v)]
            if v:
                cells.append(f"{k(r, 0)} {nr(stats(v))}" + (f" (n={len(v)})" if lossless and len(v) < nreps else ""))
        if cells:
            p(f"      {name}: " + ", ".join(cells))
with open(os.path.join(out, "ratios.tsv"), "w") as fh:
    fh.write("".join("\t".join(str(c) for c in t) + "\n" for t in tsv))
p("")

# ---- verdicts
p(f"== verdicts: {nreps} repetitions; ratios per repetition of runs adjacent in time, median [min-max]; PASS/FAIL on the median;")
p("   UNSTABLE: the min-max straddles the target (some repetitions pass, some fail)")
def verdict(a, b, key, name, target, le=False):
    if a not in P or b not in P:
        p(f"SKIP          {a} / {b}: {name}: not measured (--servers)")
        return
    st = stats(ratio_list(a, b, key))
    if st is None:
        p(f"SKIP          {a} / {b}: {name}: no figure")
        return
    ok = st["med"] <= target if le else st["med"] >= target
    straddle = (st["min"] <= target < st["max"]) if le else (st["min"] < target <= st["max"])
    word = ("PASS" if ok else "FAIL") + (" UNSTABLE" if straddle else "")
    p(f"{word:<13} {a + ' / ' + b:<24} {name:<22} {nr(st):<18} target {'<=' if le else '>='} {target:g}")
cap_name = f"capacity (>= {k(overload, 0)})"
verdict("skuad-xdp", "knotd-xdp", "capacity", cap_name, T["knotd"])
verdict("skuad-xdp", "ceiling", "capacity", cap_name, T["ceiling"])
verdict("skuad-xdp", "skuad-sock", "capacity", cap_name, T["sock"])
verdict("skuad-xdp", "knotd-xdp", "cpu", f"CPU/answer @{k(cpu_rate, 0)}", T["cpu"], le=True)
p("   the same targets on the receiver's peak answered/s (as first measured; generator-bound above ~400k here):")
verdict("skuad-xdp", "knotd-xdp", "peak", "peak answered", T["knotd"])
verdict("skuad-xdp", "ceiling", "peak", "peak answered", T["ceiling"])
verdict("skuad-xdp", "skuad-sock", "peak", "peak answered", T["sock"])
if "skuad-xdp" in P and "skuad-xsk" in P:
    ca = stats(ratio_list("skuad-xdp", "skuad-xsk", "capacity"))
    pk = stats(ratio_list("skuad-xdp", "skuad-xsk", "peak"))
    cp = stats(ratio_list("skuad-xdp", "skuad-xsk", "cpu"))
    if ca:
        which = "program" if ca["med"] > 1 else "AF_XDP-only"
        sure = "" if (ca["min"] > 1 or ca["max"] < 1) else ", UNSTABLE: the min-max straddles 1"
        more = "".join(f"; {n} {nr(x)}" for n, x in (("peak answered", pk), (f"CPU per answer at {k(cpu_rate, 0)} (lower = cheaper)", cp)) if x)
        p(f"faster XDP path on this machine: {which} (skuad-xdp / skuad-xsk capacity: median ratio {ca['med']:.2f} [{ca['min']:.2f}-{ca['max']:.2f}]{sure}{more})")
text = "\n".join(L) + "\n"
open(os.path.join(out, "summary.txt"), "w").write(text)
print(text, end="")

# ---- CSV: medians with min and max
with open(os.path.join(out, "xdp-bench.csv"), "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["server", "figure", "offered_qps", "median", "min", "max", "repetitions", "generator_bound_repetitions"])
    def g(x, fmt="{:.0f}"):
        return "" if x is None else fmt.format(x)
    for s in servers:
        for key, name, fmt, off in (("capacity", "capacity_per_cpu_second", "{:.0f}", f">={overload}"),
                                    ("peak", "peak_answered_qps", "{:.0f}", ""), ("peak_emit", "peak_emitted_qps", "{:.0f}", ""),
                                    ("lossfree", "max_fixed_rate_lt1pct", "{:.0f}", ""), ("cpu", "cpu_us_per_answer", "{:.4f}", cpu_rate),
                                    ("cpu0", "cpu0_us_per_answer", "{:.4f}", cpu_rate), ("ladder", "ladder_lt1pct", "{:.0f}", ""),
                                    ("confirm", "confirm_answered_qps", "{:.0f}", "")):
            st = stats(vals(s, key))
            if st:
                w.writerow([s, name, off, g(st["med"], fmt), g(st["min"], fmt), g(st["max"], fmt), st["n"], ""])
        for r in rates:
            gb = sum(1 for rep in reps if P[s][rep].get(("gen", r)))
            for key, name, fmt in (("ans", "answered_qps", "{:.0f}"), ("sent", "sent_qps", "{:.0f}"), ("emit", "emitted_qps", "{:.0f}"),
                                   ("cap", "emitted_per_cpu_second", "{:.0f}"), ("loss", "loss_pct", "{:.2f}"), ("cpu", "cpu_us_per_answer", "{:.4f}")):
                st = stats(vals(s, (key, r)))
                if st:
                    w.writerow([s, name, r, g(st["med"], fmt), g(st["min"], fmt), g(st["max"], fmt), st["n"], gb])

if plot:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(14, 6.5), dpi=100, gridspec_kw={"width_ratios": [3, 2]})
    marks = {"skuad-xdp": "o", "skuad-xsk": "v", "skuad-sock": "s", "knotd-xdp": "^", "ceiling": "D",
             "skuad-xsk-rrl": "<", "skuad-sock-rrl": "p"}
    for s in servers:
        xs = [r for r in rates if stats(vals(s, ("ans", r)))]
        st = [stats(vals(s, ("ans", r))) for r in xs]
        line, = ax.plot(xs, [x["med"] for x in st], marker=marks.get(s, "x"), label=f"{s} (median; band: min-max)")
        ax.fill_between(xs, [x["min"] for x in st], [x["max"] for x in st], color=line.get_color(), alpha=0.15)
    sent = [statistics.median(v) if (v := [x for s in servers for x in vals(s, ("sent", r))]) else None for r in rates]
    ax.plot(rates, sent, "k:", label="generator's actual send rate (median)")
    ax.plot(rates, rates, color="grey", lw=0.8, ls="--", label="answered = offered")
    ax.set_xscale("log"); ax.set_yscale("log")
    fmt = FuncFormatter(lambda v, _: f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k")
    ax.set_xticks(rates); ax.xaxis.set_major_formatter(fmt); ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.yaxis.set_major_formatter(fmt)
    ax.set_xlabel("offered qps (generator -Q)"); ax.set_ylabel("answered qps (client veth rx)")
    ax.set_title(f"answered vs offered ({nreps} interleaved repetitions)")
    ax.grid(True, which="both", alpha=0.3); ax.legend(fontsize=8)
    names = [s for s in servers if stats(vals(s, "capacity"))]
    st = [stats(vals(s, "capacity")) for s in names]
    ys = range(len(names))
    ax2.barh(ys, [x["med"] for x in st], xerr=[[x["med"] - x["min"] for x in st], [x["max"] - x["med"] for x in st]],
             color=[ax.get_lines()[servers.index(s)].get_color() for s in names], capsize=4)
    ax2.set_yticks(list(ys)); ax2.set_yticklabels(names); ax2.invert_yaxis()
    ax2.xaxis.set_major_formatter(fmt)
    ax2.set_xlabel(f"replies per second of server CPU, offered >= {k(overload, 0)} (median, min-max)")
    ax2.set_title("capacity: what one core of its own would answer")
    ax2.grid(True, axis="x", alpha=0.3)
    fig.suptitle("DNS over one veth pair, server on CPU0, the AF_XDP generator on CPU1")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "xdp-bench.png"))
    print(f"plot: {os.path.join(out, 'xdp-bench.png')}")
PYEOF
    "$PY" "$py" "$dir" "$CPU_RATE" "$OVERLOAD_RATE" "$PLOT" "$T_KNOT" "$T_CEIL" "$T_SOCK" "$T_CPU" || rc=$?
    rm -f "$py"
    return "$rc"
}
if [[ -n $SUMMARIZE ]]; then
    [[ -f $SUMMARIZE/raw.tsv ]] || die "--summarize: no $SUMMARIZE/raw.tsv"
    PY=${SYS_PY:-python3}
    if [[ $PLOT == 1 ]]; then
        if "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then PY=$VENV/bin/python; else PLOT=0; fi
    fi
    summarize "$SUMMARIZE"
    exit
fi

[[ $(id -u) == 0 ]] || die "run as root (network namespaces, XDP)"

# ---------------------------------------------------------------- dependencies (--deps)
run_shown() { log "+ $*"; "$@"; }
install_deps() {
    local need=() cmd
    declare -A want=([knotd]=knot [kxdpgun]=knot-dnsutils [kdig]=knot-dnsutils [clang]=clang
        [llvm-readelf]=llvm [ethtool]=ethtool [ip]=iproute2 [bpftool]=bpftool [jq]=jq
        [taskset]=util-linux [python3]=python3)
    for cmd in "${!want[@]}"; do
        command -v "$cmd" >/dev/null || need+=("${want[$cmd]}")
    done
    /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
    if [[ ${#need[@]} -gt 0 ]]; then
        mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
        log "--deps: installing ${need[*]} (apt-get)"
        # knot's postinst would start the service: forbid it for the duration (policy-rc.d).
        local made_policy=0
        if [[ ! -e /usr/sbin/policy-rc.d ]]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
            chmod +x /usr/sbin/policy-rc.d
            made_policy=1
        fi
        local rc=0
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

for t in ip ethtool taskset kdig jq bpftool timeout flock; do
    command -v "$t" >/dev/null || die "'$t' not found: run 'just bench-xdp --deps' (or tests/bench/xdp.sh --deps)"
done
[[ -n $SYS_PY ]] || die "python3 not found: run with --deps"
if [[ ",$SERVERS," == *,knotd-xdp,* ]]; then
    command -v knotd >/dev/null || die "knotd not found: run with --deps (apt package knot)"
    [[ $(knotd --version 2>&1) == *"version 3."* ]] || die "knotd 3.x needed, found: $(knotd --version 2>&1 | head -1)"
fi
if [[ ",$SERVERS," == *,ceiling,* ]]; then
    command -v clang >/dev/null || die "clang not found: run with --deps"
fi
if [[ $PLOT == 1 ]]; then
    "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null ||
        die "matplotlib missing in $VENV: run 'just bench-xdp --deps' (pip install matplotlib into that venv) or pass --no-plot"
    PY=$VENV/bin/python
else
    PY=$SYS_PY
fi
[[ $(nproc) -ge 2 ]] || die "needs 2 CPUs (server on CPU0, generator on CPU1)"

# One run of this script at a time; and never alongside another benchmark of tests/bench.
LOCK=/run/lock/skua-bench-xdp.lock
[[ -d /run/lock ]] || LOCK=/tmp/skua-bench-xdp.lock
exec 9> "$LOCK"
flock -n 9 || die "another tests/bench/xdp.sh is running (lock $LOCK)"
other_benchmarks() { pgrep -f 'tests/bench/(veth|bigzone|inprocess)\.sh' | tr '\n' ' ' || true; }
# wait_other: while another benchmark of tests/bench runs, wait (poll every 30 s, at most
# WAIT_OTHER s in all); checked at start and again before each server.
WAITED_OTHER=0
wait_other() {
    local others t0=$SECONDS
    while others=$(other_benchmarks); [[ -n ${others// /} ]]; do
        if (( WAITED_OTHER + SECONDS - t0 >= WAIT_OTHER )); then
            die "another benchmark is still running after $WAIT_OTHER s (pids $others): two benchmarks on 2 CPUs corrupt each other"
        fi
        log "another benchmark is running (pids $others: $(ps -o args= -p "${others%% *}" | cut -c1-80)): waiting (every 30 s, at most $WAIT_OTHER s)"
        sleep 30
    done
    WAITED_OTHER=$((WAITED_OTHER + SECONDS - t0))
}
wait_other

# ---------------------------------------------------------------- layout
SRV_CPU=0 GEN_CPU=1
NS_S="skua-xdpb-srv-$$" NS_C="skua-xdpb-cli-$$"
IF_S=xbs0 IF_C=xbc0
IP_S=198.18.0.1 IP_C=198.18.0.2
WORK=$(mktemp -d /tmp/skua-xdp-work.XXXXXX)
OUT=${OUT:-/tmp/skua-xdp-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/logs"
SERVER_PID="" SERVER="" CEIL_MAP=""

in_s() { ip netns exec "$NS_S" "$@"; }
in_c() { ip netns exec "$NS_C" "$@"; }
ns_exists() { [[ -e /run/netns/$1 ]]; }

xdp_off() { # detach whatever XDP program is on both ends (kxdpgun's, knotd's, the ceiling)
    if ns_exists "$NS_S"; then in_s ip link set dev "$IF_S" xdp off 2>/dev/null || true; fi
    if ns_exists "$NS_C"; then in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true; fi
}

stop_server() {
    if [[ -n "$SERVER_PID" ]]; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        local i
        for i in $(seq 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$SERVER_PID" 2>/dev/null; then
            log "server $SERVER_PID did not stop in 10 s: SIGKILL"
            kill -KILL "$SERVER_PID" 2>/dev/null || true
        fi
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
    xdp_off
    CEIL_MAP="" SERVER=""
    # Nothing may stay attached (skuad's bpf_link goes with the process; netlink ones: off).
    if ns_exists "$NS_S" && [[ $(in_s ip -d link show dev "$IF_S") == *prog/xdp* ]]; then
        log "warning: an XDP program is still attached to $IF_S: $(in_s ip -d link show dev "$IF_S" | grep -o 'prog/xdp.*')"
    fi
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_server
    xdp_off
    local ns p
    for ns in "$NS_C" "$NS_S"; do
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
SKUAD_DESC=""
if [[ ",$SERVERS," == *,skuad-* ]]; then
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
fi
if [[ ",$SERVERS," == *,ceiling,* ]]; then
    CEIL_SRC="$BENCH_ROOT/bpf/bench/xdp_tx_ceiling.bpf.c"
    [[ -f $CEIL_SRC ]] || die "$CEIL_SRC missing"
    log "clang -target bpf $CEIL_SRC"
    clang -O2 -g -target bpf -mcpu=v3 -Wall -Wextra -Werror -I"/usr/include/$(uname -m)-linux-gnu" \
        -c "$CEIL_SRC" -o "$WORK/xdp_tx_ceiling.bpf.o" || die "cannot build the ceiling program"
fi
gen_zonefile internal. 10000 "$WORK/internal.zone"
gen_queries internal. 10000 0 "$WORK/queries.txt"

cat > "$WORK/skuad.conf" <<EOF
server:
    interface: $IP_S
    port: 53
    num-threads: 1
    so-rcvbuf: 8m
    access-control: 198.18.0.0/15 allow
auth-zone:
    name: "internal."
    zonefile: "$WORK/internal.zone"
EOF
# The same with response rate limiting on, log-only: every response charged, none withheld.
sed 's/^    so-rcvbuf: 8m$/&\n    rrl-responses-per-second: 5\n    rrl-log-only: yes/' "$WORK/skuad.conf" > "$WORK/skuad-rrl.conf"
grep -q rrl-log-only "$WORK/skuad-rrl.conf" || die "cannot write $WORK/skuad-rrl.conf"
mkdir -p "$WORK/knot"
cat > "$WORK/knot-xdp.conf" <<EOF
server:
    listen: $IP_S@53
    rundir: $WORK/knot
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
xdp:
    listen: $IF_S@53
    udp: on
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

# ---------------------------------------------------------------- namespaces and veth
log "namespaces $NS_S / $NS_C, veth $IF_S <-> $IF_C"
ip netns add "$NS_S"
ip netns add "$NS_C"
for ns in "$NS_S" "$NS_C"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n "$NS_S" link add "$IF_S" type veth peer name "$IF_C" netns "$NS_C"
ip -n "$NS_S" addr add "$IP_S/24" dev "$IF_S"
ip -n "$NS_C" addr add "$IP_C/24" dev "$IF_C"
for ns in "$NS_S" "$NS_C"; do ip -n "$ns" link set lo up; done
ip -n "$NS_S" link set "$IF_S" up
ip -n "$NS_C" link set "$IF_C" up
# GRO on both ends turns on veth NAPI (needed to receive XDP_TX/REDIRECT frames from the
# peer); TX checksum offload off so that XDP consumers see complete checksums.
in_s ethtool -K "$IF_S" gro on tx off >/dev/null
in_c ethtool -K "$IF_C" gro on tx off >/dev/null
MAC_S=$(ip -n "$NS_S" -br link show "$IF_S" | awk '{print $3}')
MAC_C=$(ip -n "$NS_C" -br link show "$IF_C" | awk '{print $3}')
ip -n "$NS_S" neigh replace "$IP_C" lladdr "$MAC_C" dev "$IF_S" nud permanent
ip -n "$NS_C" neigh replace "$IP_S" lladdr "$MAC_S" dev "$IF_C" nud permanent
# --sources: the kernel-socket servers answer those clients through the client end.
if [[ -n $SOURCES ]]; then ip -n "$NS_S" route replace "$SOURCES" via "$IP_C" dev "$IF_S"; fi
in_s sh -c "echo 1 > /sys/class/net/$IF_S/threaded" || die "threaded NAPI unavailable on $IF_S"
in_c sh -c "echo 1 > /sys/class/net/$IF_C/threaded" || die "threaded NAPI unavailable on $IF_C"

# napi_pids IF: pids of the NAPI kthreads of IF (named napi/IF-ID).
napi_pids() { ps -eo pid=,comm= | awk -v p="napi/$1-" 'index($2, p) == 1 {print $1}' | sort -n | tr '\n' ' '; }
NAPI_S="" NAPI_C=""
# pin_napi: (re)pins the NAPI kthreads (xbs0's to CPU0, xbc0's to CPU1); they can be
# recreated when an XDP program comes or goes, so this runs before every server.
pin_napi() {
    local s c p
    s=$(napi_pids "$IF_S"); c=$(napi_pids "$IF_C")
    [[ -n ${s// /} && -n ${c// /} ]] || die "no NAPI kthreads for $IF_S/$IF_C (threaded NAPI off?)"
    for p in $s; do taskset -pc "$SRV_CPU" "$p" >/dev/null || die "cannot pin NAPI kthread $p to CPU$SRV_CPU"; done
    for p in $c; do
        taskset -pc "$GEN_CPU" "$p" >/dev/null || die "cannot pin NAPI kthread $p to CPU$GEN_CPU"
        if [[ $CLIENT_FIFO == 1 ]]; then chrt -f -p 50 "$p" || die "cannot make NAPI kthread $p SCHED_FIFO"; fi
    done
    if [[ "$s $c" != "$NAPI_S $NAPI_C" ]]; then
        log "NAPI kthreads: $IF_S pid(s) ${s% } -> CPU$SRV_CPU; $IF_C pid(s) ${c% } -> CPU$GEN_CPU$([[ $CLIENT_FIFO == 1 ]] && echo ', SCHED_FIFO 50')"
    fi
    NAPI_S=$s NAPI_C=$c
}
pin_napi
# The load generator: kxdpgun if it works here, else skua-xdpgun (lib.sh, choose_generator).
choose_generator "$GENERATOR" "$WORK" "$NS_C" "$IF_C" "$IP_C" "$MAC_C" "$MAC_S" "$IP_S" "$WORK/queries.txt"

# ---------------------------------------------------------------- counters
# sum_runtime PIDS...: ns on CPU (schedstat) of every thread of these processes.
sum_runtime() {
    local p files=()
    if [[ $# == 0 ]]; then echo 0; return; fi
    for p in "$@"; do files+=(/proc/"$p"/task/*/schedstat); done
    cat "${files[@]}" 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'  # not %d: mawk clamps it to 2^31
}
cpu_ticks() { # busy/total jiffies of CPU0 and CPU1; busy = user nice system irq softirq (not steal)
    awk '$1 == "cpu0" || $1 == "cpu1" { t = 0; for (i = 2; i <= NF; i++) t += $i; b[$1] = $2 + $3 + $4 + $7 + $8; T[$1] = t }
         END { print b["cpu0"], T["cpu0"], b["cpu1"], T["cpu1"] }' /proc/stat
}
veth_stats() { # client tx_pk tx_drop rx_pk rx_drop, server rx_pk rx_drop tx_pk tx_drop
    local d=statistics
    in_c sh -c "cd /sys/class/net/$IF_C/$d && cat tx_packets tx_dropped rx_packets rx_dropped" | tr '\n' ' '
    in_s sh -c "cd /sys/class/net/$IF_S/$d && cat rx_packets rx_dropped tx_packets tx_dropped" | tr '\n' ' '
}
udp_snmp() { # InDatagrams OutDatagrams RcvbufErrors SndbufErrors of the server namespace
    # shellcheck disable=SC2016 # awk's own \$i
    in_s awk '/^Udp:/ { if (!h) { for (i = 2; i <= NF; i++) c[$i] = i; h = 1 }
              else print $c["InDatagrams"], $c["OutDatagrams"], $c["RcvbufErrors"], $c["SndbufErrors"] }' /proc/net/snmp
}
# skuad_counters: SIGUSR1, then the dump's figures:
# 'answered received tx_full xsk_rx_dropped fill_empty rx_ring_full sock_queries sock_replies
#  xdp_dropped hot prog_redirected' (xdp figures summed over queues; answered = XDP answers +
# slow path + kernel-socket replies + answers sent by the XDP program itself).
skuad_counters() {
    local log=$OUT/logs/$SERVER_TAG.server.log off i want
    off=$(stat -c %s "$log")
    kill -USR1 "$SERVER_PID" || die "cannot signal skuad ($SERVER_PID)"
    if [[ $SERVER == skuad-x* ]]; then want="skuad info: xdp program on $IF_S: .*drop_malformed=[0-9]"; else want="skuad info: stats: .* dropped"; fi
    for i in $(seq 250); do
        if grep -q "$want" <(tail -c +"$((off + 1))" "$log"); then break; fi
        [[ $i -lt 250 ]] || die "skuad wrote no counters within 5 s of SIGUSR1 (log $log)"
        sleep 0.02
    done
    tail -c +"$((off + 1))" "$log" | awk '
        # the patterns hold no digit: the digits of the match are the number
        function num(s, pat,   t) { if (!match(s, pat "[0-9]+")) return 0; t = substr(s, RSTART, RLENGTH); gsub(/[^0-9]/, "", t); return t + 0 }
        /skuad info: stats: / { if (match($0, /stats: [0-9]+ queries/)) { t = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", t); sq = t + 0 }
                                if (match($0, /, [0-9]+ replies/)) { t = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", t); sr = t + 0 } }
        / skuad info: xdp [^ ]+ queue [0-9]+: / {
            rx += num($0, ": rx "); an += num($0, ", answered "); sp += num($0, ", slow path ")
            tf += num($0, ", tx full "); dr += num($0, ", dropped "); kd += num($0, "rx_dropped=")
            fe += num($0, "fill_empty="); rf += num($0, "rx_ring_full=")
            if (match($0, /[(][0-9]+ hot/)) { t = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", t); hot += t }
        }
        / skuad info: xdp program on / { pr += num($0, " redirected="); pa += num($0, " answered=") }
        END { printf "%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f\n", an + sp + sr + pa, rx + sq + pa, tf, kd, fe, rf, sq, sr, dr, hot, pr }'
}
ceiling_counters() { # 'answered received 0 ... bare': from the program's per-CPU map
    local a b p
    read -r a b p < <(bpftool -j map dump id "$CEIL_MAP" | jq -r '[.[] | .formatted | ([.values[].value] | add)] | @tsv') ||
        die "cannot read the ceiling's map $CEIL_MAP"
    echo "$((a + b)) $((a + b + p)) 0 0 0 0 0 0 0 0 0 $b"
}
server_counters() { # 12 fields: see skuad_counters (+ ceiling 'bare'); NA when the server has none
    case $SERVER in
        skuad-*) local c; c=$(skuad_counters); echo "$c 0" ;;
        ceiling) ceiling_counters ;;
        *) echo "NA NA NA NA NA NA NA NA NA NA NA NA" ;;
    esac
}
server_runtime() {
    local n=0 s c
    if [[ -n $SERVER_PID ]]; then n=$(sum_runtime "$SERVER_PID"); fi
    # shellcheck disable=SC2086 # lists of pids
    s=$(sum_runtime $NAPI_S)
    # shellcheck disable=SC2086
    c=$(sum_runtime $NAPI_C)
    echo "$n $s $c"
}
# snapshot: every counter, one line (fields listed in SNAP_FIELDS).
SNAP_FIELDS="c_tx c_txdrop c_rx c_rxdrop s_rx s_rxdrop s_tx s_txdrop udp_in udp_out rcvbuf sndbuf cpu0_busy cpu0_tot cpu1_busy cpu1_tot srv_ns napi_s_ns napi_c_ns srv_answered srv_received xdp_tx_full xsk_rx_dropped xsk_fill_empty xsk_rx_ring_full sock_queries sock_replies xdp_dropped xdp_hot prog_redirected ceil_bare"
# Each part in its own assignment, so that a failure (die) in one of them stops the script.
snapshot() {
    local v u c r s
    v=$(veth_stats); u=$(udp_snmp); c=$(cpu_ticks); r=$(server_runtime); s=$(server_counters)
    echo "$v $u $c $r $s"
}

# background_busy [S]: % of both CPUs busy over S s (default 1): other jobs, when no benchmark
# traffic flows and no server runs.
background_busy() {
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
handlers_ready() { # SIGUSR1 and SIGTERM caught (SigCgt): signalling cannot kill it by default
    local m
    m=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [[ -n $m ]] && (( (16#$m >> 9) & 1 )) && (( (16#$m >> 14) & 1 ))
}
start_server() { # start_server NAME TAG
    local name=$1 i want=198.18.0.7 log
    SERVER=$name SERVER_TAG=$2
    log=$OUT/logs/$2.server.log
    : > "$log"
    xdp_off
    if [[ -n $(in_s ss -Hlun "sport = :53") ]]; then die "port 53 still bound in $NS_S"; fi
    case $name in
        skuad-xdp) ip netns exec "$NS_S" taskset -c "$SRV_CPU" "$WORK/skuad" --config "$WORK/skuad.conf" --xdp-mode native > "$log" 2>&1 & SERVER_PID=$! ;;
        skuad-xsk) ip netns exec "$NS_S" taskset -c "$SRV_CPU" "$WORK/skuad" --config "$WORK/skuad.conf" --xdp-mode native --xdp-answers 0 > "$log" 2>&1 & SERVER_PID=$! ;;
        skuad-sock) ip netns exec "$NS_S" taskset -c "$SRV_CPU" "$WORK/skuad" --no-xdp --config "$WORK/skuad.conf" > "$log" 2>&1 & SERVER_PID=$! ;;
        skuad-xsk-rrl) ip netns exec "$NS_S" taskset -c "$SRV_CPU" "$WORK/skuad" --config "$WORK/skuad-rrl.conf" --xdp-mode native --xdp-answers 0 > "$log" 2>&1 & SERVER_PID=$! ;;
        skuad-sock-rrl) ip netns exec "$NS_S" taskset -c "$SRV_CPU" "$WORK/skuad" --no-xdp --config "$WORK/skuad-rrl.conf" > "$log" 2>&1 & SERVER_PID=$! ;;
        knotd-xdp) ip netns exec "$NS_S" taskset -c "$SRV_CPU" knotd -c "$WORK/knot-xdp.conf" > "$log" 2>&1 & SERVER_PID=$! ;;
        ceiling)
            in_s ip link set dev "$IF_S" xdpdrv obj "$WORK/xdp_tx_ceiling.bpf.o" sec xdp > "$log" 2>&1 ||
                { cat "$log" >&2; die "cannot attach the ceiling program to $IF_S"; }
            local prog
            prog=$(in_s ip -j link show dev "$IF_S" | jq -r '.[0].xdp.prog.id // empty')
            [[ -n $prog ]] || die "ceiling: no XDP program on $IF_S after attach"
            CEIL_MAP=$(bpftool -j prog show id "$prog" | jq -r '.map_ids[0] // empty')
            [[ -n $CEIL_MAP ]] || die "ceiling: program $prog has no map"
            in_s ip -d link show dev "$IF_S" | grep -o 'xdp.*prog/xdp id [0-9]* name [^ ]*' >> "$log" || true
            # veth wakes the client's NAPI after XDP_TX only if the client end runs an XDP
            # program (the generator's, during the runs): a pass-all one for the kdig check.
            in_c ip link set dev "$IF_C" xdpdrv obj "$WORK/xdp_tx_ceiling.bpf.o" sec xdp_pass >> "$log" 2>&1 ||
                { cat "$log" >&2; die "cannot attach the pass-all program to $IF_C"; }
            SERVER_PID="" want=198.18.0.42 ;;   # the ceiling answers 198.18.0.42 to every name
    esac
    pin_napi   # after the attach: the NAPI kthreads may have been recreated
    local ready=0 t_end=$((SECONDS + 15))
    while (( SECONDS < t_end )); do
        if [[ -n $SERVER_PID ]] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
            cat "$log" >&2; SERVER_PID=""
            # knotd's XDP program is libknot's, the one kxdpgun loads: refused the same way.
            if [[ $name == knotd-xdp ]] && grep -q "cannot use helper bpf_xdp_adjust_meta" "$log"; then
                die "knotd-xdp: this kernel refuses knotd's XDP program (bpf_xdp_adjust_meta, as kxdpgun's): leave knotd-xdp out of --servers here"
            fi
            die "$name exited during start-up (log above)"
        fi
        if [[ $name == skuad-x* ]] && grep -q "xdp: not used\|xdp: disabled" "$log"; then
            cat "$log" >&2; die "skuad did not start its XDP plane (log above)"
        fi
        # skuad-xdp: measured only once the answers are in the program (~0.3 s after the
        # self-test), or its first second would go through the AF_XDP queue.
        if { [[ $name != skuad-x* ]] || grep -q "xdp: self-test passed on $IF_S " "$log"; } &&
            { [[ $name != skuad-xdp ]] || grep -q "xdp: [0-9]* answers precompiled into the program" "$log"; } &&
            { [[ $name != skuad-* ]] || handlers_ready "$SERVER_PID"; } &&
            [[ $(in_c kdig @"$IP_S" h7.internal. A +short +timeout=1 +retry=0 2>/dev/null) == "$want" ]]; then
            ready=1; break
        fi
        sleep 0.1
    done
    in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true
    if [[ $ready == 0 ]]; then
        cat "$log" >&2
        die "$name not ready after 15 s (skuad-x*: log must say 'xdp: self-test passed on $IF_S', skuad-xdp also 'answers precompiled'; every server: h7.internal. A -> $want)"
    fi
    case $name in
        skuad-xdp|skuad-xsk|skuad-xsk-rrl|knotd-xdp)
            [[ $(in_s ip -d link show dev "$IF_S") == *prog/xdp* ]] || die "$name: no XDP program on $IF_S" ;;
    esac
    pin_napi
}

# ---------------------------------------------------------------- one measurement
# raw.tsv: one row per generator run. dur = the generator's sending time; sent/answers = client veth
# (tx_packets + tx_dropped) / rx_packets deltas; cpu_us_per_ans = (server threads + server
# NAPI kthread) CPU time / answers; cpu0_us_per_ans = CPU0 busy time / answers; cpu0_pct /
# cpu1_pct = busy time of the CPU over the whole window (generator start-up included) / dur;
# round = the measurement round of the whole run (one per server and measurement with
# --interleave step: the rows of one round ran seconds apart), t_start = its Unix time;
# s_tx, s_txdrop, c_rxdrop = veth counters of the replies' direction (server tx_packets and
# tx_dropped, client rx_dropped).
RAW=$OUT/raw.tsv
RAW_FIELDS="rep server phase offered secs dur kx_sent kx_sent_pps kx_replies kx_replies_pps sent answers sent_rate ans_rate loss_pct gen_bound q_drops r_drops udp_in rcvbuf srv_answers srv_received cpu_us_per_ans cpu0_us_per_ans srv_ms napi_s_ms napi_c_ms cpu0_pct cpu1_pct xdp_tx_full xsk_rx_dropped xsk_fill_empty xsk_rx_ring_full sock_queries xdp_hot xdp_dropped ceil_bare background_pct round t_start s_tx s_txdrop c_rxdrop"
tr ' ' '\t' <<< "$RAW_FIELDS" > "$RAW"

# measure PHASE RATE SECS: one generator run (GEN_BIN: kxdpgun or skua-xdpgun, same flags); appends a raw row and sets M_* (ok, rates, loss).
M_LOSS=100 M_GEN=0
measure() {
    local phase=$1 rate=$2 secs=$3 f a b row t0
    t0=$(date +%s)
    f="$OUT/logs/$SERVER_TAG.$phase-$rate-${secs}s.$((++MEASURE_N)).kx.log"
    a=$(snapshot)
    timeout $((secs + 30)) ip netns exec "$NS_C" taskset -c "$GEN_CPU" "$GEN_BIN" -t "$secs" -Q "$rate" \
        -i "$WORK/queries.txt" -I "$IF_C" -l "${SOURCES:-$IP_C}" -L "$MAC_C" -R "$MAC_S" -F "$GEN_CPU" "$IP_S" > "$f" 2>&1 ||
        log "warning: $GEN exited with an error (log $f)"
    sleep 0.2   # late replies
    b=$(snapshot)
    # kxdpgun leaves its XDP program on the generator's interface (skua-xdpgun's leaves with it).
    in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true
    local kx
    kx=$(awk '/^total queries:/ {s = $3; sp = $4} /^total replies:/ {r = $3; rp = $4}
              END { gsub(/[(]/, "", sp); gsub(/[(]/, "", rp); printf "%.0f %.0f %.0f %.0f\n", s, sp, r, rp }' "$f")
    row=$(awk -v a="$a" -v b="$b" -v kx="$kx" -v names="$SNAP_FIELDS" -v secs="$secs" -v rate="$rate" \
              -v pre="$REP	$SERVER	$phase" -v bg="$BG" -v round="$ROUND" -v t0="$t0" '
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
            cpu0 = ans > 0 ? d["cpu0_busy"] * 10000 / ans : "NA"
            printf "%s\t%d\t%d\t%.3f\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.3f\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n",
                pre, rate, secs, dur, K[1], K[2], K[3], K[4], sent, ans, sent / dur, ans / dur, loss, gen,
                d["c_txdrop"] + d["s_rxdrop"], d["s_txdrop"] + d["c_rxdrop"], d["udp_in"], d["rcvbuf"],
                d["srv_answered"], d["srv_received"], cpu, cpu0,
                d["srv_ns"] / 1e6, d["napi_s_ns"] / 1e6, d["napi_c_ns"] / 1e6,
                d["cpu0_busy"] / dur, d["cpu1_busy"] / dur,
                d["xdp_tx_full"], d["xsk_rx_dropped"], d["xsk_fill_empty"], d["xsk_rx_ring_full"],
                d["sock_queries"], d["xdp_hot"], d["xdp_dropped"], d["ceil_bare"], bg,
                round, t0, d["s_tx"], d["s_txdrop"], d["c_rxdrop"]
        }')
    local -a R
    IFS=$'\t' read -r -a R <<< "$row"
    [[ ${#R[@]} == 43 ]] || die "internal error: a raw row has ${#R[@]} fields, not 43: '$row'"
    printf '%s\n' "$row" >> "$RAW"
    # fields (0-based): 12 sent_rate 13 ans_rate 14 loss 15 gen 16 qdrop 17 rdrop 19 rcvbuf 20 srv_answers 22 cpu_us 23 cpu0_us
    M_LOSS=${R[14]} M_GEN=${R[15]}
    local srv="" extra=""
    [[ ${R[20]} != NA ]] && srv=", server answered $(awk -v x="${R[20]}" -v d="${R[5]}" 'BEGIN {printf "%.1fk/s", x / d / 1000}')"
    [[ ${R[19]} != 0 ]] && extra+=", rcvbuf errors ${R[19]}"
    [[ $SERVER == skuad-x* && ${R[29]} != 0 ]] && extra+=", xdp tx full ${R[29]}"
    [[ $SERVER == skuad-x* && ${R[30]} != 0 ]] && extra+=", xsk drops ${R[30]}"
    log "$(printf 'rep %s/%s %-10s %-7s %5s k offered %2ss: sent %7.1fk/s answered %7.1fk/s (loss %5.2f %%%s) kx %.1fk/s, veth drops q %s r %s%s, cpu %s us/ans (cpu0 %s), CPU0 %s%% CPU1 %s%%%s' \
        "$REP" "$REPS" "$SERVER" "$phase" "$((rate / 1000))" "$secs" "$(awk -v x="${R[12]}" 'BEGIN{print x/1000}')" \
        "$(awk -v x="${R[13]}" 'BEGIN{print x/1000}')" "${R[14]}" "$([[ ${R[15]} == 1 ]] && echo ', GENERATOR-BOUND')" \
        "$(awk -v x="${R[9]}" 'BEGIN{print x/1000}')" "${R[16]}" "${R[17]}" "$srv" "${R[22]}" "${R[23]}" "${R[27]}" "${R[28]}" "$extra")"
}
MEASURE_N=0

# ---------------------------------------------------------------- steps and rounds
# do_step SERVER PHASE RATE SECS: one measurement of SERVER (sets M_*). With --interleave step
# the server is started for it and stopped after it; with --interleave server it is already
# running (started by the caller). Before the start: the other jobs' CPU share (BG_SECS).
ROUND=0 STEP_N=0
do_step() {
    local srv=$1 phase=$2 rate=$3 secs=$4
    ROUND=$((ROUND + 1))
    if [[ $INTERLEAVE == step ]]; then
        wait_other
        BG=$(background_busy "$BG_SECS")
        start_server "$srv" "$(printf 'r%s-%04d-%s' "$REP" "$((++STEP_N))" "$srv")"
        measure "$phase" "$rate" "$secs"
        check_xdp_path
        stop_server
    else
        measure "$phase" "$rate" "$secs"
    fi
}
# check_xdp_path: a skuad-x* server must have answered through XDP (program + AF_XDP queues),
# its kernel sockets idle; logs the totals of the SIGUSR1 dump.
check_xdp_path() {
    [[ $SERVER == skuad-x* ]] || return 0
    local xa xq xr
    read -r xa _ _ _ _ _ xq xr _ <<< "$(skuad_counters)"
    log "rep $REP/$REPS $SERVER: totals since its start: answered $((xa - xr)) through XDP (program + AF_XDP queues), $xr by the kernel sockets (which received $xq queries)"
    [[ $((xa - xr)) -gt 0 ]] || die "$SERVER: the XDP path answered nothing (log $OUT/logs/$SERVER_TAG.server.log)"
    [[ $xq -le 100 ]] || log "warning: $SERVER: the kernel sockets received $xq queries: part of the load bypassed XDP"
    grep "skuad info: xdp $IF_S queue\|skuad info: xdp program on" "$OUT/logs/$SERVER_TAG.server.log" | tail -2 | cut -c1-240 | sed 's/^/    /' >&2
}
is_ok() { awk -v l="$M_LOSS" 'BEGIN {exit !(l < 1)}'; }   # the last step lost < 1 %

# ladder SERVER...: highest offered rate answered with < 1 % loss, for all the servers in
# lockstep (one round = one step of each server still climbing). Per server: the rates of
# LADDER_RATES in turn until one fails twice in a row (RETRY: a failed step is tried again in
# the next round) or the generator cannot send the rate; then BISECT bisection steps between
# the last success and the failure. Results in L_BEST[i] / L_GEN[i] (i: index in the
# arguments) and ladder.tsv.
declare -a L_BEST L_GEN
ladder() {
    local -a srv=("$@") idx fail try bis fin rate
    local i n=$# active r
    for ((i = 0; i < n; i++)); do
        L_BEST[i]=0 L_GEN[i]=0 idx[i]=0 fail[i]=0 try[i]=0 bis[i]=0 fin[i]=0 rate[i]=${LADDER_RATES[0]}
    done
    active=1
    while [[ $active == 1 ]]; do
        active=0
        for ((i = 0; i < n; i++)); do
            [[ ${fin[i]} == 0 ]] || continue
            active=1
            r=${rate[i]}
            do_step "${srv[i]}" ladder "$r" "$LADDER_SECS"
            if is_ok; then
                try[i]=0 L_BEST[i]=$r
                if [[ ${fail[i]} == 0 ]]; then            # climbing
                    if [[ $M_GEN == 1 ]]; then L_GEN[i]=1 fin[i]=1; continue; fi   # the generator cannot go higher
                    idx[i]=$((idx[i] + 1))
                    if [[ ${idx[i]} -ge ${#LADDER_RATES[@]} ]]; then fin[i]=1; else rate[i]=${LADDER_RATES[idx[i]]}; fi
                    continue
                fi
                bis[i]=$((bis[i] + 1))
            elif [[ ${try[i]} -lt $RETRY ]]; then
                try[i]=$((try[i] + 1)); continue                 # the same rate once more
            else
                try[i]=0
                if [[ ${fail[i]} == 0 ]]; then
                    fail[i]=$r
                    if [[ $M_GEN == 1 || ${L_BEST[i]} == 0 ]]; then
                        [[ $M_GEN == 1 ]] && L_GEN[i]=1
                        fin[i]=1; continue
                    fi
                else
                    fail[i]=$r bis[i]=$((bis[i] + 1))
                fi
            fi
            if [[ ${bis[i]} -ge $BISECT ]]; then fin[i]=1; else rate[i]=$(( (L_BEST[i] + fail[i]) / 2 )); fi
        done
    done
    for ((i = 0; i < n; i++)); do
        log "rep $REP/$REPS ${srv[i]}: ladder: ${L_BEST[i]} qps with < 1 % loss$([[ ${L_GEN[i]} == 1 ]] && echo ' (generator-bound)')"
        printf '%s\t%s\t%s\t%s\n' "$REP" "${srv[i]}" "${L_BEST[i]}" "${L_GEN[i]}" >> "$LADDERS"
    done
}
LADDERS=$OUT/ladder.tsv
printf 'rep\tserver\tbest_offered\tgen_bound\n' > "$LADDERS"

# measurements SERVER...: one repetition's measurements, each a round over the given servers
# (all of them with --interleave step; the one running with --interleave server).
measurements() {
    local -a srv=("$@")
    local i r
    if [[ $LADDER == 1 ]]; then
        ladder "${srv[@]}"
        for i in "${!srv[@]}"; do
            if [[ ${L_BEST[i]} -gt 0 ]]; then do_step "${srv[i]}" confirm "${L_BEST[i]}" "$CONFIRM_SECS"; fi
        done
    fi
    for r in "${RATE_LIST[@]}"; do
        for i in "${!srv[@]}"; do do_step "${srv[i]}" fixed "$r" "$STEP_SECS"; done
    done
    # --quick: the fixed step at --cpu-rate stands for the CPU phase.
    if [[ $QUICK == 0 || " ${RATE_LIST[*]} " != *" $CPU_RATE "* ]]; then
        for i in "${!srv[@]}"; do do_step "${srv[i]}" cpu "$CPU_RATE" "$CPU_SECS"; done
    fi
}

# ---------------------------------------------------------------- run
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) x $(nproc)"
    echo "knotd: $(knotd --version 2>&1 | head -1)"
    echo "generator: $GEN_DESC"
    echo "clang: $(clang --version 2>/dev/null | head -1)"
    echo "skuad: ${SKUAD_DESC:-not measured}"
    echo "args: reps=$REPS servers=$SERVERS interleave=$INTERLEAVE rates=$RATES step_secs=$STEP_SECS cpu_rate=$CPU_RATE cpu_secs=$CPU_SECS overload_rate=$OVERLOAD_RATE ladder=$LADDER$([[ $LADDER == 1 ]] && echo " ladder_rates=${LADDER_RATES[*]} ladder_secs=$LADDER_SECS confirm_secs=$CONFIRM_SECS") quick=$QUICK client_napi_fifo=$CLIENT_FIFO sources=${SOURCES:-$IP_C} targets: knotd>=$T_KNOT ceiling>=$T_CEIL sock>=$T_SOCK cpu/knotd<=$T_CPU"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); top processes: $(ps -eo pcpu=,comm= --sort=-pcpu | head -4 | awk '{printf "%s %s%%; ", $2, $1}')"
} > "$OUT/machine.txt"
log "results in $OUT (servers ${SERVER_LIST[*]}; $REPS repetition(s), interleave $INTERLEAVE)"

T_RUN0=$SECONDS
for REP in $(seq "$REPS"); do
    wait_other
    BG=$(wait_quiet)
    log "== rep $REP/$REPS (other jobs: $BG % CPU; $(( (SECONDS - T_RUN0) / 60 )) min so far)"
    if [[ $INTERLEAVE == step ]]; then
        measurements "${SERVER_LIST[@]}"
    else
        for srv in "${SERVER_LIST[@]}"; do
            wait_other
            BG=$(background_busy "$BG_SECS")
            start_server "$srv" "r$REP-$srv"
            measurements "$srv"
            check_xdp_path
            stop_server
        done
    fi
done
log "measurements took $(( (SECONDS - T_RUN0) / 60 )) min $(( (SECONDS - T_RUN0) % 60 )) s"
echo "measurements: $(( (SECONDS - T_RUN0) / 60 )) min $(( (SECONDS - T_RUN0) % 60 )) s; load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"

# ---------------------------------------------------------------- summary, CSV, plot
summarize "$OUT" || die "summary failed (raw data in $OUT/raw.tsv)"
{ echo; cat "$OUT/machine.txt"; } | tee -a "$OUT/summary.txt"
log "summary: $OUT/summary.txt, CSV: $OUT/xdp-bench.csv, ratios: $OUT/ratios.tsv, raw: $OUT/raw.tsv$([[ $PLOT == 1 ]] && echo ", plot: $OUT/xdp-bench.png")"
exit
}
