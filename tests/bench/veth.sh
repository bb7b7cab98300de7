#!/usr/bin/env bash
# Network benchmark: skuad against knotd over a veth pair between two network namespaces.
#
#   server namespace 198.18.0.1 (vsrv) <--veth--> client namespace 198.18.0.2 (vcli)
#
# The server runs pinned to CPU0 (taskset -c 0), the load generators pinned to CPU1.
# Zone 'internal.': SOA, NS, ns glue and 10,000 A records h0 .. h9999, served by skuad from
# unbound.conf local-data and by knotd from a zone file. Queries: the 10,000 names.
#
# Per repetition and server (servers alternate, their order rotates each repetition):
#   1. dnsperf -c 20 -q 200 -l DURATION (closed loop: a latency-bound figure);
#   2. kxdpgun ladder (3 s steps, open loop, AF_XDP sender): the highest offered rate with
#      < 1 % loss, then a DURATION run at that rate;
#   3. kxdpgun overload (1 M qps offered, DURATION): replies per second.
# With every phase: Udp RcvbufErrors / SndbufErrors of the server namespace (/proc/net/snmp),
# the veth drops in each direction, how busy CPU0 and CPU1 were, and (before each run) how much
# CPU other jobs on the machine were using. skuad runs with --no-xdp (UDP sockets) unless the
# server is skuad-xdp. Results: OUT/results.tsv (every phase), OUT/summary.txt (medians).
#
# Usage: tests/bench/veth.sh [--quick] [options]        (root; see --help)
# Needs: ip, ethtool, taskset, dnsperf, kxdpgun and kdig (knot-dnsutils), knotd (knot), cargo.
# Nothing persists: namespaces, processes and XDP programs are removed on exit (trap).

set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"

usage() {
    cat <<'EOF'
usage: tests/bench/veth.sh [options]
  --quick              1 repetition, 3 s phases, no ladder (one kxdpgun overload run): < 1 min
  --reps N             repetitions (default 3)
  --duration S         seconds of each dnsperf / confirmation / overload phase (default 10)
  --servers LIST       comma-separated, run in this order, rotated each repetition
                       (default skuad,knotd); known: skuad, knotd, skuad-rcvbuf, knotd-xdp,
                       skuad-xdp
  --with-xdp           add knotd-xdp and skuad-xdp (both servers in their AF_XDP mode on vsrv)
                       for reference; skuad and skuad-rcvbuf always run with --no-xdp
  --skuad-rcvbuf SIZE  so-rcvbuf of the skuad-rcvbuf variant (default 4m; knotd and plain
                       skuad use the kernel default, net.core.rmem_default)
  --no-kxdpgun         dnsperf only (no open-loop phases)
  --generator G        open-loop sender: auto (kxdpgun when a 1 s probe works here, else
                       skua-xdpgun, the project's own: kxdpgun 3.2.6 cannot start on kernel
                       6.18), kxdpgun or skua
  --no-ladder          kxdpgun overload run only
  --no-threaded-napi   leave veth NAPI in softirq context (then the receive work of the
                       queries is charged to the generator's CPU)
  --napi-fifo          run the NAPI kthreads SCHED_FIFO 50 (they then preempt the server as
                       softirqs do: fewer drops from scheduling latency at moderate rates,
                       receive livelock under overload); default: normal priority
  --wait-quiet S       before each run, wait up to S s for other jobs to use < 10 % of the
                       CPUs (default 60; 0 with --quick); the figure is recorded either way
  --out DIR            keep raw logs and results.tsv here (default /tmp/skua-veth-DATE)
  --skuad BIN          use this skuad binary instead of building target/release/skuad
EOF
}

REPS=3 DUR=10 SERVERS="skuad,knotd" KX=1 GENERATOR=auto LADDER=1 THREADED=1 NAPI_FIFO=0 QUICK=0 XDP_REF=0
WAIT_QUIET=60 QUIET_PCT=10
SKUAD_RCVBUF=4m OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) QUICK=1 REPS=1 DUR=3 LADDER=0 WAIT_QUIET=0 ;;
        --wait-quiet) WAIT_QUIET=$2; shift ;;
        --reps) REPS=$2; shift ;;
        --duration) DUR=$2; shift ;;
        --servers) SERVERS=$2; shift ;;
        --with-xdp|--with-knot-xdp) XDP_REF=1 ;;
        --skuad-rcvbuf) SKUAD_RCVBUF=$2; shift ;;
        --no-kxdpgun) KX=0 ;;
        --generator) GENERATOR=$2; shift ;;
        --no-ladder) LADDER=0 ;;
        --no-threaded-napi) THREADED=0 ;;
        --napi-fifo) NAPI_FIFO=1 ;;
        --out) OUT=$2; shift ;;
        --skuad) SKUAD_BIN=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
if [[ $XDP_REF == 1 ]]; then
    [[ ",$SERVERS," == *,knotd-xdp,* ]] || SERVERS="$SERVERS,knotd-xdp"
    [[ ",$SERVERS," == *,skuad-xdp,* ]] || SERVERS="$SERVERS,skuad-xdp"
fi
IFS=, read -r -a SERVER_LIST <<< "$SERVERS"
for s in "${SERVER_LIST[@]}"; do
    case $s in skuad|knotd|knotd-xdp|skuad-rcvbuf|skuad-xdp) ;; *) die "unknown server '$s'" ;; esac
done
[[ $(id -u) == 0 ]] || die "run as root (network namespaces)"
for t in ip ethtool taskset dnsperf kdig knotd timeout; do
    command -v "$t" >/dev/null || die "'$t' not found (apt-get install iproute2 ethtool dnsperf knot knot-dnsutils)"
done
# The open-loop phases send with kxdpgun where it starts, else with skua-xdpgun (lib.sh,
# choose_generator, after the pair is up).
[[ $(nproc) -ge 2 ]] || die "needs 2 CPUs (server on CPU0, generator on CPU1)"

SRV_CPU=0 GEN_CPU=1
NS_S="skua-bench-srv-$$" NS_C="skua-bench-cli-$$"
IF_S=vsrv IF_C=vcli
IP_S=198.18.0.1 IP_C=198.18.0.2
WORK=$(mktemp -d /tmp/skua-veth-work.XXXXXX)
OUT=${OUT:-/tmp/skua-veth-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
SERVER_PID=""

in_s() { ip netns exec "$NS_S" "$@"; }
in_c() { ip netns exec "$NS_C" "$@"; }

stop_server() {
    [[ -n "$SERVER_PID" ]] || return 0
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
    # knotd leaves its XDP program on the server's interface.
    in_s ip link set dev "$IF_S" xdp off 2>/dev/null || true
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_server
    if ip netns list | grep -qw "$NS_C"; then
        in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true
        local p
        for p in $(ip netns pids "$NS_C" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$NS_C" 2>/dev/null || true
    fi
    if ip netns list | grep -qw "$NS_S"; then
        local p
        for p in $(ip netns pids "$NS_S" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$NS_S" 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- data and configurations
build_skuad "$WORK/skuad"
gen_zonefile internal. 10000 "$WORK/internal.zone"
gen_queries internal. 10000 0 "$WORK/queries.txt"          # dnsperf and kxdpgun: 'name A'
cat > "$WORK/skuad-opts.txt" <<EOF
    interface: $IP_S
    port: 53
    num-threads: 1
    access-control: 198.18.0.0/15 allow
EOF
gen_localdata internal. 10000 "$WORK/skuad.conf" "$WORK/skuad-opts.txt"
{ cat "$WORK/skuad-opts.txt"; echo "    so-rcvbuf: $SKUAD_RCVBUF"; } > "$WORK/skuad-rb-opts.txt"
gen_localdata internal. 10000 "$WORK/skuad-rcvbuf.conf" "$WORK/skuad-rb-opts.txt"

knot_conf() { # knot_conf FILE XDP(0|1)
    mkdir -p "$WORK/knot"
    {
        cat <<EOF
server:
    listen: $IP_S@53
    rundir: $WORK/knot
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
EOF
        if [[ $2 == 1 ]]; then
            cat <<EOF
xdp:
    listen: $IF_S@53
    udp: on
EOF
        fi
        cat <<EOF
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
    } > "$1"
}
knot_conf "$WORK/knot.conf" 0
knot_conf "$WORK/knot-xdp.conf" 1

# ---------------------------------------------------------------- namespaces and veth
log "namespaces $NS_S / $NS_C"
ip netns add "$NS_S"
ip netns add "$NS_C"
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
# Static neighbours: kxdpgun builds its own frames, and nobody should wait for ARP.
ip -n "$NS_S" neigh replace "$IP_C" lladdr "$MAC_C" dev "$IF_S" nud permanent
ip -n "$NS_C" neigh replace "$IP_S" lladdr "$MAC_S" dev "$IF_C" nud permanent

napi_pids() { ps -eo pid=,comm= | awk '$2 ~ /^napi\// {print $1}' | sort; }
# set_threaded NS IF CPU: threaded NAPI for IF, its kthread pinned to CPU. The kthread of
# vsrv receives the queries (server work: CPU0), that of vcli the replies (client: CPU1).
set_threaded() {
    local before after p
    before=$(napi_pids)
    ip netns exec "$1" sh -c "echo 1 > /sys/class/net/$2/threaded"
    after=$(napi_pids)
    for p in $(comm -13 <(echo "$before") <(echo "$after")); do
        taskset -pc "$3" "$p" >/dev/null
        if [[ $NAPI_FIFO == 1 ]]; then chrt -f -p 50 "$p"; fi
        log "NAPI thread $(ps -o comm= -p "$p") (pid $p) pinned to CPU$3$([[ $NAPI_FIFO == 1 ]] && echo ', SCHED_FIFO 50')"
    done
}
if [[ $THREADED == 1 ]]; then
    set_threaded "$NS_S" "$IF_S" "$SRV_CPU" || { log "threaded NAPI unavailable"; THREADED=0; }
    set_threaded "$NS_C" "$IF_C" "$GEN_CPU" || true
fi

# ---------------------------------------------------------------- measurement helpers
# udp_counters: 'InDatagrams OutDatagrams RcvbufErrors SndbufErrors' of the server namespace
# (/proc/net/snmp), then the veth drops towards the server (queries lost before the server's
# stack: vcli tx_dropped + vsrv rx_dropped) and towards the client (replies lost in the veth
# ring before the generator: vsrv tx_dropped + vcli rx_dropped).
udp_counters() {
    local snmp qd rd
    snmp=$(in_s awk '/^Udp:/ { if (!h) { for (i = 2; i <= NF; i++) c[$i] = i; h = 1 }
                        else print $c["InDatagrams"], $c["OutDatagrams"], $c["RcvbufErrors"], $c["SndbufErrors"] }' /proc/net/snmp)
    qd=$(( $(in_c cat /sys/class/net/$IF_C/statistics/tx_dropped) + $(in_s cat /sys/class/net/$IF_S/statistics/rx_dropped) ))
    rd=$(( $(in_s cat /sys/class/net/$IF_S/statistics/tx_dropped) + $(in_c cat /sys/class/net/$IF_C/statistics/rx_dropped) ))
    echo "$snmp $qd $rd"
}
# cpu_ticks: 'busy total' jiffies of CPU0, of CPU1 and of all CPUs, from /proc/stat.
cpu_ticks() {
    awk '$1 ~ /^cpu[01]?$/ { t = 0; for (i = 2; i <= NF; i++) t += $i; b[$1] = t - $5 - $6; T[$1] = t }
         END { print b["cpu0"], T["cpu0"], b["cpu1"], T["cpu1"], b["cpu"], T["cpu"] }' /proc/stat
}
# pct BUSY TOTAL
pct() { awk -v b="$1" -v t="$2" 'BEGIN {printf "%.0f", (t > 0 ? 100 * b / t : 0)}'; }
# background_busy: % of both CPUs busy over 1 s while no benchmark traffic flows (other jobs).
background_busy() {
    local a b
    a=$(cpu_ticks); sleep 1; b=$(cpu_ticks)
    local d=($(delta "$a" "$b"))
    pct "${d[4]}" "${d[5]}"
}
# wait_quiet: waits (at most WAIT_QUIET s) for the other jobs on the machine to use less than
# QUIET_PCT % of the CPUs; prints the last figure, which goes with the run's results.
wait_quiet() {
    local b t0=$SECONDS
    while :; do
        b=$(background_busy)
        if [[ $b -lt $QUIET_PCT || $((SECONDS - t0)) -ge $WAIT_QUIET ]]; then break; fi
    done
    [[ $b -lt $QUIET_PCT ]] || log "machine busy: other jobs use $b % of the CPUs (waited $((SECONDS - t0)) s)"
    echo "$b"
}
# delta "A B C" "D E F" -> "D-A E-B F-C"
delta() { paste -d' ' <(tr ' ' '\n' <<< "$1") <(tr ' ' '\n' <<< "$2") | awk '{printf "%s%d", (NR > 1 ? " " : ""), $2 - $1} END {print ""}'; }

start_server() { # start_server NAME
    local name=$1 log="$OUT/$2.server.log"
    if in_s ss -Hlun "sport = :53" | grep -q .; then die "port 53 still bound in $NS_S"; fi
    case $name in
        skuad) ip netns exec "$NS_S" taskset -c "$SRV_CPU" "$WORK/skuad" --no-xdp --config "$WORK/skuad.conf" > "$log" 2>&1 & ;;
        skuad-rcvbuf) ip netns exec "$NS_S" taskset -c "$SRV_CPU" "$WORK/skuad" --no-xdp --config "$WORK/skuad-rcvbuf.conf" > "$log" 2>&1 & ;;
        skuad-xdp) ip netns exec "$NS_S" taskset -c "$SRV_CPU" "$WORK/skuad" --xdp-required --config "$WORK/skuad.conf" > "$log" 2>&1 & ;;
        knotd) ip netns exec "$NS_S" taskset -c "$SRV_CPU" knotd -c "$WORK/knot.conf" > "$log" 2>&1 & ;;
        knotd-xdp) ip netns exec "$NS_S" taskset -c "$SRV_CPU" knotd -c "$WORK/knot-xdp.conf" > "$log" 2>&1 & ;;
    esac
    SERVER_PID=$!   # ip netns exec and taskset exec: this is the server's own pid
    local i
    for i in $(seq 100); do
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then cat "$log" >&2; die "$name exited"; fi
        if [[ $(in_c kdig @"$IP_S" h42.internal. A +short +timeout=1 +retry=0 2>/dev/null) == 198.18.0.42 ]]; then
            return 0
        fi
        sleep 0.1
    done
    cat "$log" >&2
    die "$name does not answer after 10 s"
}

# run_dnsperf TAG -> prints 'qps lost'
run_dnsperf() {
    timeout $((DUR + 30)) ip netns exec "$NS_C" taskset -c "$GEN_CPU" \
        dnsperf -s "$IP_S" -d "$WORK/queries.txt" -c 20 -q 200 -l "$DUR" > "$OUT/$1.dnsperf.log" 2>&1 || true
    awk '/Queries per second:/ {q = $4} /Queries lost:/ {l = $3} END {printf "%.0f %d\n", q, l}' "$OUT/$1.dnsperf.log"
}

# run_kx TAG RATE SECONDS -> prints 'sent_pps replies_pps loss_percent'
run_kx() {
    local f="$OUT/$1.kx-$2-$3s.log"
    timeout $((${3%.*} + 20)) ip netns exec "$NS_C" "$GEN_BIN" -t "$3" -Q "$2" -i "$WORK/queries.txt" \
        -I "$IF_C" -l "$IP_C" -L "$MAC_C" -R "$MAC_S" -F "$GEN_CPU" "$IP_S" > "$f" 2>&1 || true
    # kxdpgun leaves its XDP program on the generator's interface.
    in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true
    awk '/^total queries:/ {s = $3; sp = $4} /^total replies:/ {r = $3; rp = $4}
         END { gsub(/\(/, "", sp); gsub(/\(/, "", rp);
               if (s > 0) printf "%d %d %.2f\n", sp, rp, 100 * (s - r) / s; else print "0 0 100" }' "$f"
}

# ladder TAG -> prints the highest offered rate with < 1 % loss (0 if none). A step that
# fails is run once more before it counts as failed (the machine is shared and noisy).
LADDER_RATES=(5000 10000 20000 30000 50000 75000 100000 150000 200000 250000 300000 400000 500000 700000 1000000)
step_ok() { # step_ok TAG RATE: true if one of at most two 3 s runs loses < 1 %
    local res loss try
    for try in 1 2; do
        res=$(run_kx "$1" "$2" 3); loss=${res##* }
        echo "ladder $1 $2 (try $try): $res" >> "$OUT/ladder.log"
        if awk -v l="$loss" 'BEGIN {exit !(l < 1)}'; then return 0; fi
    done
    return 1
}
ladder() {
    local tag=$1 best=0 fail=0 r
    for r in "${LADDER_RATES[@]}"; do
        if step_ok "$tag" "$r"; then best=$r; else fail=$r; break; fi
    done
    # Two bisection steps between the last rate that passed and the first that failed.
    local k mid
    for k in 1 2; do
        [[ $fail -gt 0 && $best -gt 0 ]] || break
        mid=$(( (best + fail) / 2 ))
        if step_ok "$tag" "$mid"; then best=$mid; else fail=$mid; fi
    done
    echo "$best"
}

# ---------------------------------------------------------------- the runs
RES="$OUT/results.tsv"
printf 'rep\tserver\tphase\tqps\tloss\trcvbuf_errors\tsndbuf_errors\tudp_in\tcpu0_pct\tcpu1_pct\tbackground_pct\textra\tveth_query_drops\tveth_reply_drops\n' > "$RES"

# phase REP SERVER PHASE CMD...: runs CMD (prints 'qps loss [extra]'), records the Udp
# counters of the server namespace and how busy each CPU was around it.
phase() {
    local rep=$1 srv=$2 ph=$3; shift 3
    local u0 u1 c0 c1 out d c o
    u0=$(udp_counters); c0=$(cpu_ticks)
    out=$("$@")
    u1=$(udp_counters); c1=$(cpu_ticks)
    d=($(delta "$u0" "$u1")); c=($(delta "$c0" "$c1")); o=($out)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$srv" "$ph" "${o[0]}" "${o[1]}" \
        "${d[2]}" "${d[3]}" "${d[0]}" "$(pct "${c[0]}" "${c[1]}")" "$(pct "${c[2]}" "${c[3]}")" "$BG" "${o[*]:2}" "${d[4]}" "${d[5]}" >> "$RES"
    log "  $srv $ph: ${o[0]} qps, loss ${o[1]}, udp in ${d[0]} out ${d[1]} rcvbuf-errors ${d[2]} sndbuf-errors ${d[3]}, veth drops queries ${d[4]} replies ${d[5]}, CPU0 $(pct "${c[0]}" "${c[1]}") %, CPU1 $(pct "${c[2]}" "${c[3]}") %"
}

dnsperf_phase() { run_dnsperf "$1"; }
kx_phase() { local r; r=$(run_kx "$1" "$2" "$DUR"); set -- $r; echo "$2 $3 sent_pps=$1"; }
ladder_phase() { echo "$(ladder "$1") <1% (3 s steps)"; }

GEN=none GEN_DESC=none
if [[ $KX == 1 ]]; then
    choose_generator "$GENERATOR" "$WORK" "$NS_C" "$IF_C" "$IP_C" "$MAC_C" "$MAC_S" "$IP_S" "$WORK/queries.txt"
fi
log "results in $OUT (servers: ${SERVER_LIST[*]}; reps $REPS; ${DUR} s phases; open loop $KX ($GEN), ladder $LADDER, threaded NAPI $THREADED, NAPI FIFO $NAPI_FIFO)"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) x $(nproc)"
    echo "knotd: $(knotd --version 2>&1 | head -1)"
    echo "dnsperf: $(dpkg-query -W -f '${Version}' dnsperf 2>/dev/null || echo ?)"
    echo "skuad: $(cd "$BENCH_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo ?)$(cd "$BENCH_ROOT" && git diff --quiet HEAD -- kernel-appliance 2>/dev/null || echo ' (work tree modified)')"
    echo "net.core.rmem_default: $(sysctl -n net.core.rmem_default)  rmem_max: $(sysctl -n net.core.rmem_max)"
    echo "generator: $GEN_DESC"
    echo "args: reps=$REPS duration=$DUR servers=$SERVERS kxdpgun=$KX ladder=$LADDER threaded_napi=$THREADED napi_fifo=$NAPI_FIFO skuad_rcvbuf=$SKUAD_RCVBUF"
} > "$OUT/machine.txt"

n=${#SERVER_LIST[@]}
for rep in $(seq "$REPS"); do
    for k in $(seq 0 $((n - 1))); do
        srv=${SERVER_LIST[$(( (k + rep - 1) % n ))]}
        tag="r$rep-$srv"
        BG=$(wait_quiet)
        log "rep $rep: $srv (other jobs: $BG % CPU)"
        start_server "$srv" "$tag"
        phase "$rep" "$srv" dnsperf dnsperf_phase "$tag"
        if [[ $KX == 1 ]]; then
            if [[ $LADDER == 1 ]]; then
                phase "$rep" "$srv" ladder ladder_phase "$tag"
                best=$(awk -F'\t' -v r="$rep" -v s="$srv" '$1 == r && $2 == s && $3 == "ladder" {print $4}' "$RES")
                if [[ $best -gt 0 ]]; then
                    phase "$rep" "$srv" "kx@$best" kx_phase "$tag" "$best"
                fi
            fi
            phase "$rep" "$srv" "kx@1M" kx_phase "$tag" 1000000
        fi
        stop_server
    done
done

# ---------------------------------------------------------------- summary
summary() {
    awk -F'\t' -v servers="${SERVER_LIST[*]}" '
    function median(s,   a, n, i, j, t) {
        n = split(s, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        if (n == 0) return "-"
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR == 1 { next }
    {
        ph = $3; if (ph ~ /^kx@[0-9]+$/) ph = "kx@ladder"
        key = $2 SUBSEP ph
        q[key] = q[key] " " $4; rb[key] = rb[key] " " $6; sb[key] = sb[key] " " $7
        c0[key] = c0[key] " " $9; c1[key] = c1[key] " " $10; bg[key] = bg[key] " " $11
        vq[key] = vq[key] " " ($13 == "" ? 0 : $13); vr[key] = vr[key] " " ($14 == "" ? 0 : $14)
        runs[key] = runs[key] (runs[key] == "" ? "" : " ") $4 "(" $6 ")"
        if (!(ph in seen)) { seen[ph] = 1; phases[++np] = ph }
    }
    END {
        ns = split(servers, S, " ")
        printf "%-13s %-10s %9s %9s %8s %8s %8s %5s %5s %5s  %s\n", "server", "phase", "median", "rcvbuf", "sndbuf", "veth-q", "veth-r", "cpu0", "cpu1", "other", "each run: qps(rcvbuf drops)"
        for (p = 1; p <= np; p++) for (s = 1; s <= ns; s++) {
            key = S[s] SUBSEP phases[p]
            if (!(key in q)) continue
            printf "%-13s %-10s %9s %9s %8s %8s %8s %4s%% %4s%% %4s%%  %s\n", S[s], phases[p], median(q[key]), median(rb[key]), median(sb[key]), median(vq[key]), median(vr[key]), median(c0[key]), median(c1[key]), median(bg[key]), runs[key]
        }
        for (p = 1; p <= np; p++) {
            kd = "knotd" SUBSEP phases[p]
            if (!(kd in q) || median(q[kd]) == 0) continue
            for (s = 1; s <= ns; s++) {
                key = S[s] SUBSEP phases[p]
                if (S[s] == "knotd" || !(key in q)) continue
                printf "ratio %s/knotd %s: %.2f\n", S[s], phases[p], median(q[key]) / median(q[kd])
            }
        }
    }' "$RES"
}
{
    echo
    echo "== medians over $REPS repetition(s). qps: dnsperf = completed queries/s; ladder = highest offered"
    echo "   kxdpgun rate with < 1 % loss (3 s steps); kx@ladder = replies/s over $DUR s at that rate;"
    echo "   kx@1M = replies/s with 1 M qps offered. rcvbuf/sndbuf = Udp RcvbufErrors/SndbufErrors of the"
    echo "   server namespace during the phase; veth-q/veth-r = veth drops of queries (before the server)"
    echo "   and of replies (before the generator); cpu0 (server) / cpu1 (generator) busy during the phase;"
    echo "   other = CPU use of other jobs on the machine just before the run."
    summary
    echo
    cat "$OUT/machine.txt"
} | tee "$OUT/summary.txt"
log "raw logs: $OUT"
