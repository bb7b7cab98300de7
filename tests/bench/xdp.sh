#!/usr/bin/env bash
# AF_XDP benchmark: skuad's AF_XDP plane against skuad on kernel sockets, knotd in XDP mode and
# a ceiling (an XDP program answering inside the kernel with XDP_TX), over one veth pair.
#
#   server namespace 198.18.0.1 (xbs0) <--veth--> client namespace 198.18.0.2 (xbc0)
#
# Topology (as in tests/bench/veth.sh and docs of the peer figures, shared/guides/bench.md):
# the server runs pinned to CPU0, kxdpgun (AF_XDP sender) to CPU1; threaded NAPI on both veth
# ends with the kthread of xbs0 (receives the queries) pinned to CPU0 and that of xbc0
# (receives the replies) pinned to CPU1, so that the kernel receive work of the queries is
# charged to the server's core; GRO on and TX checksum offload off on both ends; IPv6 off in
# both namespaces (no ND/MLD noise in the counters); static neighbours.
# Zone 'internal.': SOA, NS, ns glue and 10,000 A records h0 .. h9999 (one zone file, served
# by skuad as an auth-zone and by knotd); queries: the 10,000 names.
#
# Servers (--servers; they alternate, the order rotates each repetition):
#   skuad-xdp    skuad --config F --xdp-mode native    (log must say "self-test passed"): the
#                program answers the zone's names itself, the AF_XDP queue the rest
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
# Per repetition and server:
#   (a) ladder: kxdpgun 3 s steps at rising offered rates, highest rate answered with < 1 %
#       loss (a failed step is tried twice; then two bisection steps), then a 10 s
#       confirmation run at that rate;
#   (b) the answered rate at fixed offered rates (--rates, default 25k .. 1.6M, 5 s each);
#   (c) server CPU per answer at --cpu-rate (default 50k, 10 s): CPU time (schedstat, ns) of
#       the server's threads + its NAPI kthread (CPU0), divided by the answers; also CPU0's
#       total busy time (/proc/stat) per answer.
# Answers are counted at the RECEIVER: rx_packets of the client veth (every reply that crossed
# the pair), with kxdpgun's own count, the server's counters (skuad: SIGUSR1 dump, ceiling:
# its per-CPU map) and the veth drops in each direction alongside. Loss is against the
# queries that entered the veth (client tx_packets + tx_dropped), and a step where the
# generator could not send 95 % of the offered rate is marked generator-bound ('G').
# Every XDP program is detached after each server and at exit ('ip link set dev X xdp off').
#
# Output (OUT, default /tmp/skua-xdp-DATE): summary.txt (the table), xdp-bench.csv (medians),
# raw.tsv (every run), xdp-bench.png (answered vs offered qps), logs.
#
# Usage: tests/bench/xdp.sh [--deps] [--quick] [options]     (root; see --help)
# Needs: ip (iproute2 with libbpf), ethtool, taskset, kxdpgun and kdig (knot-dnsutils), knotd
# (knot), clang, bpftool, jq, python3, cargo; matplotlib in a venv (/tmp/skua-bench-venv) for
# the plot. `--deps` installs the missing ones (apt-get and pip, each command printed).

set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"

usage() {
    cat <<'EOF'
usage: tests/bench/xdp.sh [options]                 (as root)
  --deps               install what is missing first (apt-get: knot knot-dnsutils clang llvm
                       ethtool iproute2 bpftool jq python3-venv; pip: matplotlib into the venv
                       /tmp/skua-bench-venv), printing every command; then run
  --deps-only          the same, then exit
  --quick              1 repetition, 1 s fixed-rate steps (or --step-secs) only: they stand for the ladder
                       (highest rate before the first with >= 1 % loss) and, at --cpu-rate,
                       for the CPU phase; no confirmation run: < 2 min
  --reps N             repetitions (default 3)
  --servers LIST       comma-separated (default skuad-xdp,skuad-xsk,skuad-sock,knotd-xdp,ceiling;
                       also skuad-xsk-rrl, skuad-sock-rrl)
  --sources NET        kxdpgun sends from every address of NET (e.g. 198.18.128.0/17, outside
                       198.18.0.0/24; the server routes NET via the client) instead of from
                       198.18.0.2 alone: many clients, for rate limiting
  --rates LIST         fixed offered rates, qps (default 25000,50000,100000,200000,400000,
                       800000,1600000)
  --step-secs S        seconds per fixed-rate step (default 5)
  --cpu-rate R         offered rate of the CPU-per-answer phase (default 50000)
  --cpu-secs S         its duration (default 10)
  --confirm-secs S     duration of the confirmation run (default 10)
  --wait-quiet S       before each server, wait up to S s for other jobs to use < 10 % of
                       the CPUs (default 30; 0 with --quick); recorded either way
  --wait-other S       wait up to S s (polling every 30 s) for another benchmark of
                       tests/bench (veth.sh, bigzone.sh, inprocess.sh) to finish (default 2400)
  --client-napi-fifo   run the client's NAPI kthread (receives the replies, CPU1) SCHED_FIFO 50,
                       so that kxdpgun cannot delay it: fewer replies lost in the client's veth
                       ring (off by default, as in tests/bench/veth.sh and the guide)
  --no-plot            no PNG (no matplotlib needed)
  --out DIR            results directory (default /tmp/skua-xdp-DATE)
  --skuad BIN          use this skuad binary instead of `cargo build --release -p skuad`
EOF
}

DEFAULT_SERVERS="skuad-xdp,skuad-xsk,skuad-sock,knotd-xdp,ceiling"
ALL_SERVERS="$DEFAULT_SERVERS,skuad-xsk-rrl,skuad-sock-rrl"
SOURCES=""
REPS=3 SERVERS=$DEFAULT_SERVERS QUICK=0 DEPS=0 DEPS_ONLY=0 PLOT=1 OUT=""
RATES="25000,50000,100000,200000,400000,800000,1600000"
LADDER_SECS=3 STEP_SECS=5 CPU_RATE=50000 CPU_SECS=10 CONFIRM_SECS=10
WAIT_QUIET=30 QUIET_PCT=10 WAIT_OTHER=2400 RETRY=1 BISECT=2 CLIENT_FIFO=0
LADDER_RATES=(25000 50000 75000 100000 150000 200000 250000 300000 400000 500000 600000 800000 1000000 1200000)
while [[ $# -gt 0 ]]; do
    case $1 in
        --deps) DEPS=1 ;;
        --deps-only) DEPS=1 DEPS_ONLY=1 ;;
        --quick) QUICK=1 ;;
        --reps) REPS=$2; shift ;;
        --servers) SERVERS=$2; shift ;;
        --sources) SOURCES=$2; shift ;;
        --rates) RATES=$2; shift ;;
        --step-secs) STEP_SECS=$2; STEP_GIVEN=1; shift ;;
        --cpu-rate) CPU_RATE=$2; shift ;;
        --cpu-secs) CPU_SECS=$2; CPU_GIVEN=1; shift ;;
        --confirm-secs) CONFIRM_SECS=$2; shift ;;
        --wait-quiet) WAIT_QUIET=$2; shift ;;
        --wait-other) WAIT_OTHER=$2; shift ;;
        --no-plot) PLOT=0 ;;
        --client-napi-fifo) CLIENT_FIFO=1 ;;
        --out) OUT=$2; shift ;;
        --skuad) SKUAD_BIN=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option '$1'" ;;
    esac
    shift
done
if [[ $QUICK == 1 ]]; then
    REPS=1 WAIT_QUIET=0
    # --quick's 1 s steps, unless given explicitly.
    [[ -n ${STEP_GIVEN:-} ]] || STEP_SECS=1
    [[ -n ${CPU_GIVEN:-} ]] || CPU_SECS=1
fi
for v in REPS STEP_SECS CPU_RATE CPU_SECS CONFIRM_SECS WAIT_QUIET WAIT_OTHER; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "--$(tr 'A-Z_' 'a-z-' <<< "$v") must be a whole number (got '${!v}')"
done
[[ $REPS -ge 1 && $STEP_SECS -ge 1 && $CPU_SECS -ge 1 && $CONFIRM_SECS -ge 1 ]] || die "--reps and durations must be >= 1"
IFS=, read -r -a SERVER_LIST <<< "$SERVERS"
IFS=, read -r -a RATE_LIST <<< "$RATES"
for s in "${SERVER_LIST[@]}"; do
    [[ ",$ALL_SERVERS," == *",$s,"* ]] || die "unknown server '$s' (known: $ALL_SERVERS)"
done
for r in "${RATE_LIST[@]}"; do [[ $r =~ ^[0-9]+$ && $r -gt 0 ]] || die "bad rate '$r' in --rates"; done
if [[ -n $SOURCES ]]; then
    [[ $SOURCES =~ ^198\.1[89]\.[0-9]+\.[0-9]+/(1[5-9]|2[0-9]|3[0-2])$ && $SOURCES != 198.18.0.* ]] ||
        die "--sources must be a prefix inside 198.18.0.0/15 and outside 198.18.0.0/24 (got '$SOURCES')"
fi

[[ $(id -u) == 0 ]] || die "run as root (network namespaces, XDP)"

VENV=/tmp/skua-bench-venv
SYS_PY=/usr/bin/python3
[[ -x $SYS_PY ]] || SYS_PY=$(command -v python3 || true)

# ---------------------------------------------------------------- dependencies (--deps)
run_shown() { log "+ $*"; "$@"; }
install_deps() {
    local need=() pkg cmd
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

for t in ip ethtool taskset kdig kxdpgun jq bpftool timeout flock; do
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
if [[ ",$SERVERS," == *,skuad-* ]]; then build_skuad "$WORK/skuad"; fi
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
    # shellcheck disable=SC2086
    s=$(sum_runtime $NAPI_S); c=$(sum_runtime $NAPI_C)
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

# cpu_busy_pct: % of both CPUs busy over 1 s (other jobs, when no benchmark traffic flows).
background_busy() {
    local a b
    a=$(cpu_ticks); sleep 1; b=$(cpu_ticks)
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
            # program (kxdpgun's, during the runs): a pass-all one for the kdig check.
            in_c ip link set dev "$IF_C" xdpdrv obj "$WORK/xdp_tx_ceiling.bpf.o" sec xdp_pass >> "$log" 2>&1 ||
                { cat "$log" >&2; die "cannot attach the pass-all program to $IF_C"; }
            SERVER_PID="" want=198.18.0.42 ;;   # the ceiling answers 198.18.0.42 to every name
    esac
    pin_napi   # after the attach: the NAPI kthreads may have been recreated
    local ready=0 t_end=$((SECONDS + 15))
    while (( SECONDS < t_end )); do
        if [[ -n $SERVER_PID ]] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
            cat "$log" >&2; SERVER_PID=""; die "$name exited during start-up (log above)"
        fi
        if [[ $name == skuad-x* ]] && grep -q "xdp: not used\|xdp: disabled" "$log"; then
            cat "$log" >&2; die "skuad did not start its XDP plane (log above)"
        fi
        if { [[ $name != skuad-x* ]] || grep -q "xdp: self-test passed on $IF_S " "$log"; } &&
            { [[ $name != skuad-* ]] || handlers_ready "$SERVER_PID"; } &&
            [[ $(in_c kdig @"$IP_S" h7.internal. A +short +timeout=1 +retry=0 2>/dev/null) == "$want" ]]; then
            ready=1; break
        fi
        sleep 0.1
    done
    in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true
    if [[ $ready == 0 ]]; then
        cat "$log" >&2
        die "$name not ready after 15 s (skuad-xdp: log must say 'xdp: self-test passed on $IF_S'; every server: h7.internal. A -> $want)"
    fi
    case $name in
        skuad-xdp|skuad-xsk|skuad-xsk-rrl|knotd-xdp)
            [[ $(in_s ip -d link show dev "$IF_S") == *prog/xdp* ]] || die "$name: no XDP program on $IF_S" ;;
    esac
    pin_napi
}

# ---------------------------------------------------------------- one measurement
# raw.tsv: one row per kxdpgun run. dur = kxdpgun's sending time; sent/answers = client veth
# (tx_packets + tx_dropped) / rx_packets deltas; cpu_us_per_ans = (server threads + server
# NAPI kthread) CPU time / answers; cpu0_us_per_ans = CPU0 busy time / answers; cpu0_pct /
# cpu1_pct = busy time of the CPU over the whole window (kxdpgun start-up included) / dur.
RAW=$OUT/raw.tsv
RAW_FIELDS="rep server phase offered secs dur kx_sent kx_sent_pps kx_replies kx_replies_pps sent answers sent_rate ans_rate loss_pct gen_bound q_drops r_drops udp_in rcvbuf srv_answers srv_received cpu_us_per_ans cpu0_us_per_ans srv_ms napi_s_ms napi_c_ms cpu0_pct cpu1_pct xdp_tx_full xsk_rx_dropped xsk_fill_empty xsk_rx_ring_full sock_queries xdp_hot xdp_dropped ceil_bare background_pct"
tr ' ' '\t' <<< "$RAW_FIELDS" > "$RAW"

# measure PHASE RATE SECS: one kxdpgun run; appends a raw row and sets M_* (ok, rates, loss).
M_LOSS=100 M_GEN=0 M_ANS_RATE=0 M_SENT_RATE=0
measure() {
    local phase=$1 rate=$2 secs=$3 f a b row
    f="$OUT/logs/$SERVER_TAG.$phase-$rate-${secs}s.$((++MEASURE_N)).kx.log"
    a=$(snapshot)
    timeout $((secs + 30)) ip netns exec "$NS_C" taskset -c "$GEN_CPU" kxdpgun -t "$secs" -Q "$rate" \
        -i "$WORK/queries.txt" -I "$IF_C" -l "${SOURCES:-$IP_C}" -L "$MAC_C" -R "$MAC_S" -F "$GEN_CPU" "$IP_S" > "$f" 2>&1 ||
        log "warning: kxdpgun exited with an error (log $f)"
    sleep 0.2   # late replies
    b=$(snapshot)
    # kxdpgun leaves its XDP program on the generator's interface.
    in_c ip link set dev "$IF_C" xdp off 2>/dev/null || true
    local kx
    kx=$(awk '/^total queries:/ {s = $3; sp = $4} /^total replies:/ {r = $3; rp = $4}
              END { gsub(/[(]/, "", sp); gsub(/[(]/, "", rp); printf "%.0f %.0f %.0f %.0f\n", s, sp, r, rp }' "$f")
    row=$(awk -v a="$a" -v b="$b" -v kx="$kx" -v names="$SNAP_FIELDS" -v secs="$secs" -v rate="$rate" \
              -v pre="$REP	$SERVER	$phase" -v bg="$BG" '
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
            printf "%s\t%d\t%d\t%.3f\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.3f\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
                pre, rate, secs, dur, K[1], K[2], K[3], K[4], sent, ans, sent / dur, ans / dur, loss, gen,
                d["c_txdrop"] + d["s_rxdrop"], d["s_txdrop"] + d["c_rxdrop"], d["udp_in"], d["rcvbuf"],
                d["srv_answered"], d["srv_received"], cpu, cpu0,
                d["srv_ns"] / 1e6, d["napi_s_ns"] / 1e6, d["napi_c_ns"] / 1e6,
                d["cpu0_busy"] / dur, d["cpu1_busy"] / dur,
                d["xdp_tx_full"], d["xsk_rx_dropped"], d["xsk_fill_empty"], d["xsk_rx_ring_full"],
                d["sock_queries"], d["xdp_hot"], d["xdp_dropped"], d["ceil_bare"], bg
        }')
    local -a R
    IFS=$'\t' read -r -a R <<< "$row"
    [[ ${#R[@]} == 38 ]] || die "internal error: a raw row has ${#R[@]} fields, not 38: '$row'"
    printf '%s\n' "$row" >> "$RAW"
    # fields (0-based): 12 sent_rate 13 ans_rate 14 loss 15 gen 16 qdrop 17 rdrop 19 rcvbuf 20 srv_answers 22 cpu_us 23 cpu0_us
    M_SENT_RATE=${R[12]} M_ANS_RATE=${R[13]} M_LOSS=${R[14]} M_GEN=${R[15]}
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

# ladder: highest offered rate answered with < 1 % loss; prints 'RATE GENBOUND'.
# step RATE: one run, once more on failure (full mode); sets STEP_OK. (Never called as an
# 'if' condition: that would turn off errexit inside measure.)
STEP_OK=0
step() {
    local try
    STEP_OK=0
    for try in $(seq 0 "$RETRY"); do
        measure ladder "$1" "$LADDER_SECS"
        if awk -v l="$M_LOSS" 'BEGIN {exit !(l < 1)}'; then STEP_OK=1; return 0; fi
    done
}
LADDER_BEST=0 LADDER_GEN=0
ladder() {
    local best=0 fail=0 gen=0 r k mid
    for r in "${LADDER_RATES[@]}"; do
        step "$r"
        if [[ $STEP_OK == 1 ]]; then
            best=$r
            if [[ $M_GEN == 1 ]]; then gen=1; break; fi   # the generator cannot go higher
        else
            fail=$r
            [[ $M_GEN == 1 ]] && gen=1
            break
        fi
    done
    for k in $(seq 1 "$BISECT"); do
        [[ $fail -gt 0 && $best -gt 0 && $gen == 0 ]] || break
        mid=$(( (best + fail) / 2 ))
        step "$mid"
        if [[ $STEP_OK == 1 ]]; then best=$mid; else fail=$mid; fi
    done
    LADDER_BEST=$best LADDER_GEN=$gen
}
LADDERS=$OUT/ladder.tsv
printf 'rep\tserver\tbest_offered\tgen_bound\n' > "$LADDERS"

# ---------------------------------------------------------------- run
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) x $(nproc)"
    echo "knotd: $(knotd --version 2>&1 | head -1)"
    echo "kxdpgun: $(dpkg-query -W -f '${Version}' knot-dnsutils 2>/dev/null || echo ?)"
    echo "clang: $(clang --version 2>/dev/null | head -1)"
    echo "skuad: $(cd "$BENCH_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo ?)$(cd "$BENCH_ROOT" && git diff --quiet HEAD -- kernel-appliance 2>/dev/null || echo ' (work tree modified)')"
    echo "args: reps=$REPS servers=$SERVERS rates=$RATES ladder=${LADDER_RATES[*]} ladder_secs=$LADDER_SECS step_secs=$STEP_SECS cpu_rate=$CPU_RATE cpu_secs=$CPU_SECS confirm_secs=$CONFIRM_SECS quick=$QUICK client_napi_fifo=$CLIENT_FIFO"
} > "$OUT/machine.txt"
log "results in $OUT (servers ${SERVER_LIST[*]}; $REPS repetition(s))"

n=${#SERVER_LIST[@]}
for REP in $(seq "$REPS"); do
    for k in $(seq 0 $((n - 1))); do
        srv=${SERVER_LIST[$(( (k + REP - 1) % n ))]}
        wait_other
        BG=$(wait_quiet)
        log "== rep $REP/$REPS: $srv (other jobs: $BG % CPU)"
        start_server "$srv" "r$REP-$srv"
        if [[ $QUICK == 0 ]]; then
            ladder
            log "rep $REP/$REPS $srv: ladder: ${LADDER_BEST} qps with < 1 % loss$([[ $LADDER_GEN == 1 ]] && echo ' (generator-bound)')"
            if [[ $LADDER_BEST -gt 0 ]]; then measure confirm "$LADDER_BEST" "$CONFIRM_SECS"; fi
        fi
        # --quick: the fixed rates double as the ladder (highest rate before the first one
        # with >= 1 % loss) and the CPU phase (the step at --cpu-rate).
        q_best=0 q_gen=0 q_fail=0
        for r in "${RATE_LIST[@]}"; do
            measure fixed "$r" "$STEP_SECS"
            if [[ $q_fail == 0 ]] && awk -v l="$M_LOSS" 'BEGIN {exit !(l < 1)}'; then
                q_best=$r
                if [[ $M_GEN == 1 ]]; then q_gen=1; fi
            else
                q_fail=1
            fi
        done
        if [[ $QUICK == 1 ]]; then
            LADDER_BEST=$q_best LADDER_GEN=$q_gen
            log "rep $REP/$REPS $srv: highest fixed rate with < 1 % loss: $q_best qps (stands for the ladder in --quick)"
        fi
        printf '%s\t%s\t%s\t%s\n' "$REP" "$srv" "$LADDER_BEST" "$LADDER_GEN" >> "$LADDERS"
        if [[ $QUICK == 0 || " ${RATE_LIST[*]} " != *" $CPU_RATE "* ]]; then measure cpu "$CPU_RATE" "$CPU_SECS"; fi
        if [[ $srv == skuad-x* ]]; then
            # The XSK path must have answered: XDP answers counted by skuad, the kernel sockets idle.
            read -r xa _ _ _ _ _ xq xr _ <<< "$(skuad_counters)"
            log "rep $REP/$REPS $srv: totals from SIGUSR1: answered $((xa - xr)) through XDP (program + AF_XDP queues), $xr by the kernel sockets (which received $xq queries)"
            [[ $((xa - xr)) -gt 0 ]] || die "$srv: the XDP path answered nothing (log $OUT/logs/r$REP-$srv.server.log)"
            [[ $xq -le 100 ]] || log "warning: $srv: the kernel sockets received $xq queries: part of the load bypassed XDP"
            grep "skuad info: xdp $IF_S queue\|skuad info: xdp program on" "$OUT/logs/r$REP-$srv.server.log" | tail -2 | sed 's/^/    /' >&2
        fi
        stop_server
    done
done

# ---------------------------------------------------------------- summary, CSV, plot
cat > "$WORK/summary.py" <<'PYEOF'
import csv, statistics, sys, os
out, servers, cpu_rate, rates, reps, plot = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), [int(r) for r in sys.argv[4].split(",")], int(sys.argv[5]), sys.argv[6] == "1"
rows = list(csv.DictReader(open(os.path.join(out, "raw.tsv")), delimiter="\t"))
ladders = list(csv.DictReader(open(os.path.join(out, "ladder.tsv")), delimiter="\t"))

def f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None

def med(vals):
    v = [x for x in vals if x is not None]
    return statistics.median(v) if v else None

def sel(server, phase, offered=None):
    return [r for r in rows if r["server"] == server and r["phase"] == phase and (offered is None or int(r["offered"]) == offered)]

def k(x, nd=1):
    return "-" if x is None else f"{x / 1000:.{nd}f}k"

def num(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)

S = {}
for s in servers:
    d = S[s] = {}
    lad = [l for l in ladders if l["server"] == s]
    d["ladder"] = med([f(l["best_offered"]) for l in lad])
    d["ladder_runs"] = " ".join(l["best_offered"] + ("G" if l["gen_bound"] == "1" else "") for l in lad)
    d["ladder_gen"] = any(l["gen_bound"] == "1" for l in lad)
    c = sel(s, "confirm")
    for key in ("ans_rate", "loss_pct", "q_drops", "r_drops", "rcvbuf", "kx_replies_pps", "sent_rate", "cpu0_pct"):
        d["confirm_" + key] = med([f(r[key]) for r in c])
    d["confirm_runs"] = " ".join(f"{float(r['ans_rate'])/1000:.0f}k" for r in c)
    cp = sel(s, "cpu") or sel(s, "fixed", cpu_rate)   # --quick: the fixed step at the CPU rate
    for key in ("cpu_us_per_ans", "cpu0_us_per_ans", "loss_pct", "ans_rate", "srv_ms", "napi_s_ms"):
        d["cpu_" + key] = med([f(r[key]) for r in cp])
    d["cpu_runs"] = " ".join(r["cpu_us_per_ans"] for r in cp)
    d["fixed"] = {}
    for rate in rates:
        fx = sel(s, "fixed", rate)
        d["fixed"][rate] = {key: med([f(r[key]) for r in fx]) for key in
            ("sent_rate", "ans_rate", "loss_pct", "kx_replies_pps", "q_drops", "r_drops", "cpu_us_per_ans", "cpu0_us_per_ans",
             "srv_answers", "dur", "xdp_tx_full", "xsk_rx_dropped", "xsk_fill_empty", "rcvbuf", "udp_in", "sock_queries")}
        d["fixed"][rate]["gen_bound"] = sum(1 for r in fx if r["gen_bound"] == "1")
        d["fixed"][rate]["n"] = len(fx)
    d["peak"] = max((v["ans_rate"] for v in d["fixed"].values() if v["ans_rate"] is not None), default=None)

L = []
p = L.append
p(f"== AF_XDP benchmark: medians of {reps} repetition(s). Answers counted at the receiver (client veth rx_packets);")
p("   loss against the queries that entered the veth; G = the generator sent < 95 % of the offered rate.")
p("")
p(f"{'server':<11} {'ladder <1%':>11} {'confirm':>9} {'loss%':>6} {'vethq':>7} {'vethr':>7} {'rcvbuf':>7} {'peak':>8} {'cpu@' + k(cpu_rate, 0) + ' us/ans':>16} {'cpu0 us/ans':>11} {'loss%':>6}   runs: ladder | confirm | cpu")
for s in servers:
    d = S[s]
    lad = "-" if d["ladder"] is None else f"{d['ladder']/1000:.0f}k" + (" G" if d["ladder_gen"] else "")
    p(f"{s:<11} {lad:>11} {k(d['confirm_ans_rate']):>9} {num(d['confirm_loss_pct']):>6} {num(d['confirm_q_drops'], '{:.0f}'):>7} "
      f"{num(d['confirm_r_drops'], '{:.0f}'):>7} {num(d['confirm_rcvbuf'], '{:.0f}'):>7} {k(d['peak']):>8} {num(d['cpu_cpu_us_per_ans'], '{:.3f}'):>16} "
      f"{num(d['cpu_cpu0_us_per_ans'], '{:.3f}'):>11} {num(d['cpu_loss_pct']):>6}   {d['ladder_runs']} | {d['confirm_runs']} | {d['cpu_runs']}")
p("   ladder = highest offered rate with < 1 % loss (3 s steps in full mode); confirm = answered/s in the confirmation run at")
p("   that rate; vethq/vethr = veth drops of queries / replies during it; rcvbuf = Udp RcvbufErrors (server namespace);")
p("   peak = highest answered/s over the fixed offered rates; cpu = CPU time of the server's threads + its NAPI kthread")
p("   (schedstat, ns) per answer at the CPU rate (ceiling: the NAPI kthread alone, which runs the program); cpu0 = CPU0 busy")
p("   time per answer from /proc/stat: 100 Hz tick sampling, includes other jobs on CPU0 and misses short wake-ups, so")
p("   only a cross-check of cpu; last loss% = loss in that CPU phase.")
p("")
p("answered qps (receiver side) at fixed offered rates; [generator's actual send rate]; G = generator-bound in n runs")
hdr = f"{'server':<11}" + "".join(f"{k(r, 0):>12}" for r in rates)
p(hdr)
for s in servers:
    line = f"{s:<11}"
    for r in rates:
        v = S[s]["fixed"][r]
        cell = k(v["ans_rate"]) + ("G" if v["gen_bound"] else "")
        line += f"{cell:>12}"
    p(line)
for s in servers:
    line = f"{'[' + s[:9] + ']':<11}"
    for r in rates:
        line += f"{'[' + k(S[s]['fixed'][r]['sent_rate']) + ']':>12}"
    p(line)
p("server-counted answers/s at the same rates (skuad: SIGUSR1 answered; ceiling: its map; knotd: none) -- higher than")
p("the receiver's count when replies are dropped in the veth on their way to the client (the 'vethr' drops)")
p(hdr)
for s in servers:
    line = f"{s:<11}"
    for r in rates:
        v = S[s]["fixed"][r]
        sa = None if v["srv_answers"] is None or not v["dur"] else v["srv_answers"] / v["dur"]
        line += f"{k(sa):>12}"
    p(line)
p("")
p("per fixed rate: loss % | veth drops queries/replies | kxdpgun's own replies/s | server-counted answers/s | cpu us/answer")
for s in servers:
    for r in rates:
        v = S[s]["fixed"][r]
        sa = None if v["srv_answers"] is None or not v["dur"] else v["srv_answers"] / v["dur"]
        extra = ""
        if s in ("skuad-xdp", "skuad-xsk", "skuad-xsk-rrl"):
            extra = f" | xdp tx full {num(v['xdp_tx_full'], '{:.0f}')}, xsk rx_dropped {num(v['xsk_rx_dropped'], '{:.0f}')}, fill empty {num(v['xsk_fill_empty'], '{:.0f}')}, socket queries {num(v['sock_queries'], '{:.0f}')}"
        if s in ("skuad-sock", "skuad-sock-rrl"):
            extra = f" | rcvbuf errors {num(v['rcvbuf'], '{:.0f}')}"
        if s in ("skuad-xdp", "skuad-xsk", "skuad-xsk-rrl", "knotd-xdp", "ceiling"):
            extra += f" | UdpInDatagrams {num(v['udp_in'], '{:.0f}')}"
        p(f"  {s:<10} {k(r, 0):>6}: loss {num(v['loss_pct']):>6} | {num(v['q_drops'], '{:.0f}'):>8}/{num(v['r_drops'], '{:.0f}'):<8} | kx {k(v['kx_replies_pps']):>7} | srv {k(sa):>7} | {num(v['cpu_us_per_ans'], '{:.3f}')}{extra}")
p("")

def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"

p("ratios (medians):")
pairs = [("skuad-xdp", o) for o in ("knotd-xdp", "ceiling", "skuad-sock", "skuad-xsk")]
# The cost of rate limiting through each dataplane: with it (log-only) over without.
pairs += [("skuad-xsk-rrl", "skuad-xsk"), ("skuad-sock-rrl", "skuad-sock")]
for base, other in pairs:
    if base in S and other in S:
        a, b = S[base], S[other]
        p(f"  {base} / {other:<10}: ladder {ratio(a['ladder'], b['ladder'])}, confirm {ratio(a['confirm_ans_rate'], b['confirm_ans_rate'])}, "
          f"peak answered {ratio(a['peak'], b['peak'])}, CPU per answer {ratio(a['cpu_cpu_us_per_ans'], b['cpu_cpu_us_per_ans'])} "
          f"(tick-sampled CPU0 per answer {ratio(a['cpu_cpu0_us_per_ans'], b['cpu_cpu0_us_per_ans'])})")
        ok = [r for r in rates if all(x["fixed"][r]["loss_pct"] is not None and x["fixed"][r]["loss_pct"] < 1 for x in (a, b))]
        if ok:
            p("      CPU per answer at the fixed rates both answer with < 1 % loss: " +
              ", ".join(f"{k(r, 0)} {ratio(a['fixed'][r]['cpu_us_per_ans'], b['fixed'][r]['cpu_us_per_ans'])}" for r in ok))
        hi = [r for r in rates if a["fixed"][r]["ans_rate"] and b["fixed"][r]["ans_rate"]]
        p("      answered at each offered rate: " + ", ".join(f"{k(r, 0)} {ratio(a['fixed'][r]['ans_rate'], b['fixed'][r]['ans_rate'])}" for r in hi))
open(os.path.join(out, "summary.txt"), "w").write("\n".join(L) + "\n")
print("\n".join(L))

with open(os.path.join(out, "xdp-bench.csv"), "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["server", "phase", "offered_qps", "sent_qps", "answered_qps", "loss_pct", "kxdpgun_replies_qps",
                "veth_query_drops", "veth_reply_drops", "cpu_us_per_answer", "cpu0_us_per_answer", "generator_bound_runs", "runs"])
    def g(x, fmt="{:.0f}"):
        return "" if x is None else fmt.format(x)
    for s in servers:
        d = S[s]
        w.writerow([s, "ladder_max_lt1pct", g(d["ladder"]), "", "", "", "", "", "", "", "", int(d["ladder_gen"]), len([l for l in ladders if l["server"] == s])])
        w.writerow([s, "confirm", "", g(d["confirm_sent_rate"]), g(d["confirm_ans_rate"]), g(d["confirm_loss_pct"], "{:.2f}"),
                    g(d["confirm_kx_replies_pps"]), g(d["confirm_q_drops"]), g(d["confirm_r_drops"]), "", "", "", len(sel(s, "confirm"))])
        w.writerow([s, "cpu", cpu_rate, "", g(d["cpu_ans_rate"]), g(d["cpu_loss_pct"], "{:.2f}"), "", "", "",
                    g(d["cpu_cpu_us_per_ans"], "{:.4f}"), g(d["cpu_cpu0_us_per_ans"], "{:.4f}"), "", len(sel(s, "cpu"))])
        for r in rates:
            v = d["fixed"][r]
            w.writerow([s, "fixed", r, g(v["sent_rate"]), g(v["ans_rate"]), g(v["loss_pct"], "{:.2f}"), g(v["kx_replies_pps"]),
                        g(v["q_drops"]), g(v["r_drops"]), g(v["cpu_us_per_ans"], "{:.4f}"), g(v["cpu0_us_per_ans"], "{:.4f}"), v["gen_bound"], v["n"]])

if plot:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=110)
    marks = {"skuad-xdp": "o", "skuad-xsk": "v", "skuad-sock": "s", "knotd-xdp": "^", "ceiling": "D",
             "skuad-xsk-rrl": "<", "skuad-sock-rrl": "p"}
    for s in servers:
        xs = [r for r in rates if S[s]["fixed"][r]["ans_rate"] is not None]
        ax.plot(xs, [S[s]["fixed"][r]["ans_rate"] for r in xs], marker=marks.get(s, "x"), label=s)
    sent = [med([S[s]["fixed"][r]["sent_rate"] for s in servers]) for r in rates]
    ax.plot(rates, sent, "k:", label="generator's actual send rate (median)")
    ax.plot(rates, rates, color="grey", lw=0.8, ls="--", label="answered = offered")
    colors = {s: l.get_color() for s, l in zip(servers, ax.get_lines())}
    for s in servers:
        xs, ys = [], []
        for r in rates:
            v = S[s]["fixed"][r]
            if v["srv_answers"] is not None and v["dur"]:
                xs.append(r); ys.append(v["srv_answers"] / v["dur"])
        if xs:
            ax.plot(xs, ys, color=colors.get(s), ls="--", lw=0.9, alpha=0.7, label=f"{s} (server's own count)")
    ax.set_xscale("log"); ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter
    fmt = FuncFormatter(lambda v, _: f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k")
    ax.set_xticks(rates); ax.xaxis.set_major_formatter(fmt); ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.yaxis.set_major_formatter(fmt)
    ax.set_xlabel("offered qps (kxdpgun -Q)"); ax.set_ylabel("answered qps (solid: client veth rx; dashed: server's count)")
    ax.set_title(f"DNS over one veth pair, server on CPU0, kxdpgun on CPU1 (medians of {reps})")
    ax.grid(True, which="both", alpha=0.3); ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "xdp-bench.png"))
    print(f"plot: {os.path.join(out, 'xdp-bench.png')}")
PYEOF
"$PY" "$WORK/summary.py" "$OUT" "$SERVERS" "$CPU_RATE" "$RATES" "$REPS" "$PLOT" || die "summary failed (raw data in $OUT/raw.tsv)"
{ echo; cat "$OUT/machine.txt"; } | tee -a "$OUT/summary.txt"
log "summary: $OUT/summary.txt, CSV: $OUT/xdp-bench.csv, raw: $OUT/raw.tsv$([[ $PLOT == 1 ]] && echo ", plot: $OUT/xdp-bench.png")"
