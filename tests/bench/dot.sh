#!/usr/bin/env bash
# DNS over TLS: skuad vs Unbound 1.17, one core each, same data, same client, interleaved.
#
#   1. throughput and latency on established connections: dnsperf -m dot -c 20 -q 200
#      (20 TLS connections kept open, 200 queries in flight), DURATION seconds, REPS times
#      per server, servers interleaved; medians with min and max;
#   2. new handshakes: full handshakes (no resumption) in a loop for DURATION seconds by
#      one python3 ssl client: handshakes per second (a client-bound figure: compare the
#      servers with each other, not with other machines);
#   3. memory per idle connection: N TLS connections opened, one query answered on each,
#      then left idle (python3 ssl); the server's RSS before and after, divided by N.
#
# Everything runs in a network namespace with only loopback (Unbound answers from local
# data, but a namespace makes sure nothing reaches the Internet). Servers on CPU 1, the
# client on CPU 0. Needs root, dnsperf, unbound, openssl, python3, taskset.
#
# Usage: tests/bench/dot.sh [--duration S] [--reps N] [--idle N] [--out FILE.json]
set -euo pipefail
source "$(dirname "$0")/lib.sh"

DURATION=10 REPS=3 IDLE=2000 OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --duration) DURATION=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --idle) IDLE=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) die "unknown option $1" ;;
    esac
done
[[ $EUID -eq 0 ]] || die "needs root (a network namespace)"
for t in dnsperf unbound openssl python3 taskset ip; do
    command -v "$t" >/dev/null || die "'$t' not found"
done

NS=skdotbench
WORK=$(mktemp -d /tmp/skua-dot-bench.XXXXXX)
cleanup() {
    # Only the script itself cleans up (a $(...) subshell running the trap would take the
    # namespace away mid-run).
    [[ $BASHPID == "$$" ]] || return 0
    ip netns pids "$NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
ip netns del "$NS" 2>/dev/null || true
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
in_ns() { ip netns exec "$NS" "$@"; }

build_skuad "$WORK/skuad"
log "certificates"
(
    cd "$WORK"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
        -out ca.pem -days 2 -subj '/CN=Skua bench CA' 2>/dev/null
    printf 'subjectAltName=DNS:dot.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > ext.cnf
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key \
        -out srv.csr -subj '/CN=dot.test' 2>/dev/null
    openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem \
        -days 2 -extfile ext.cnf 2>/dev/null
    chmod 600 srv.key
    chown unbound srv.key 2>/dev/null || true
)

N=10000
printf '    interface: 127.0.0.1@853\n    tls-port: 853\n    tls-service-pem: "%s/srv.pem"\n    tls-service-key: "%s/srv.key"\n    num-threads: 1\n    access-control: 127.0.0.0/8 allow\n    incoming-num-tcp: 8000\n    tcp-idle-timeout: 120000\n' \
    "$WORK" "$WORK" > "$WORK/common.conf"
gen_localdata bench.test. "$N" "$WORK/skuad.conf" "$WORK/common.conf"
{
    cat "$WORK/common.conf"
    cat <<EOF
    username: ""
    chroot: ""
    directory: "$WORK"
    pidfile: ""
    do-not-query-localhost: no
    so-reuseport: no
    outgoing-range: 64
    msg-cache-size: 64m
    rrset-cache-size: 64m
    incoming-num-tcp: 8000
EOF
} > "$WORK/unbound-opts.conf"
gen_localdata bench.test. "$N" "$WORK/unbound.conf" "$WORK/unbound-opts.conf"
awk -v n="$N" 'BEGIN { for (i = 0; i < 100000; i++) printf "h%d.bench.test. A\n", i % n }' \
    > "$WORK/queries.txt"

start_server() {
    case $1 in
        # `ip netns exec` and taskset exec the server: $! is the server's pid.
        skuad) ip netns exec "$NS" taskset -c 1 "$WORK/skuad" --no-xdp \
                   --config "$WORK/skuad.conf" >"$WORK/skuad.log" 2>&1 & ;;
        unbound) ip netns exec "$NS" taskset -c 1 unbound -d -c "$WORK/unbound.conf" \
                   >"$WORK/unbound.log" 2>&1 & ;;
    esac
    PID=$!
    for _ in $(seq 100); do
        if in_ns openssl s_client -connect 127.0.0.1:853 -CAfile "$WORK/ca.pem" </dev/null \
            >/dev/null 2>&1; then
            return
        fi
        sleep 0.1
    done
    die "$1 does not answer DoT (see $WORK/$1.log)"
}
stop_server() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }

# dnsperf on established connections: prints 'qps p99_ms lost'.
run_dnsperf() {
    local out
    out=$(in_ns taskset -c 0 dnsperf -m dot -s 127.0.0.1 -p 853 -c 20 -q 200 \
        -l "$DURATION" -d "$WORK/queries.txt" -S 0 2>&1 || true)
    local qps lost lat_sd lat_avg
    qps=$(awk '/Queries per second/ { print $4 }' <<<"$out")
    lost=$(awk '/Queries lost/ { print $3 }' <<<"$out")
    lat_avg=$(awk '/Average Latency/ { print $4 }' <<<"$out")
    lat_sd=$(awk '/Latency StdDev/ { print $4 }' <<<"$out")
    # dnsperf prints mean and standard deviation only: p99 estimated as mean + 2.33 sd.
    awk -v q="${qps:-0}" -v l="${lost:-?}" -v a="${lat_avg:-0}" -v s="${lat_sd:-0}" \
        'BEGIN { printf "%.0f %.3f %s\n", q, (a + 2.33 * s) * 1000, l }'
}

# New handshakes per second: full TLS handshakes (no resumption) in a loop for DURATION
# seconds, one client (python3 ssl) on CPU 0, each connection closed after its handshake.
run_handshakes() {
    in_ns taskset -c 0 python3 - "$DURATION" "$WORK/ca.pem" <<'PY'
import socket, ssl, sys, time
dur, ca = float(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["dot"])
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < dur:
    s = socket.create_connection(("127.0.0.1", 853))
    t = ctx.wrap_socket(s, server_hostname="dot.test")
    t.close()
    n += 1
print(round(n / (time.monotonic() - t0)))
PY
}

# KiB of RSS per idle TLS connection: IDLE connections held open by python3.
run_idle() {
    local before after
    before=$(awk '/VmRSS/ { print $2 }' "/proc/$PID/status")
    ip netns exec "$NS" python3 - "$IDLE" "$WORK/ca.pem" "$WORK/idle.ready" <<'PY' &
import socket, ssl, sys, time
n, ca, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["dot"])
# Each connection asks one question first (so it is a used connection gone idle, not one
# that never spoke), then stays open without a word.
q = bytes.fromhex("abcd01000001000000000000") + b"\x02h1\x05bench\x04test\x00\x00\x01\x00\x01"
conns = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", 853))
    t = ctx.wrap_socket(s, server_hostname="dot.test")
    t.sendall(len(q).to_bytes(2, "big") + q)
    m = t.recv(2)
    need = int.from_bytes(m, "big")
    got = b""
    while len(got) < need:
        got += t.recv(need - len(got))
    conns.append(t)
time.sleep(2)
open(ready, "w").close()
time.sleep(600)
PY
    local holder=$!
    for _ in $(seq 600); do [[ -e "$WORK/idle.ready" ]] && break; sleep 0.1; done
    sleep 1
    after=$(awk '/VmRSS/ { print $2 }' "/proc/$PID/status")
    kill "$holder" 2>/dev/null || true
    wait "$holder" 2>/dev/null || true
    rm -f "$WORK/idle.ready"
    awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN { printf "%.1f\n", (a - b) / n }'
}

declare -A QPS P99 HS IDLEK
for rep in $(seq "$REPS"); do
    for srv in skuad unbound; do
        log "rep $rep: $srv"
        start_server "$srv"
        read -r qps p99 lost < <(run_dnsperf)
        hs=$(run_handshakes)
        QPS[$srv]+="$qps "; P99[$srv]+="$p99 "; HS[$srv]+="$hs "
        if [[ $rep -eq 1 ]]; then IDLEK[$srv]=$(run_idle); fi
        log "  $srv: $qps qps, p99 ~$p99 ms, lost $lost; $hs handshakes/s"
        stop_server
    done
done

stats() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END {
    printf "%s (min %s, max %s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
echo
echo "DNS over TLS, $REPS interleaved repetitions of ${DURATION} s, one server core (CPU 1), dnsperf -c 20 -q 200 on CPU 0"
printf '%-8s %-32s %-32s %-32s %s\n' server "qps (median)" "p99 ms (mean+2.33sd)" "new handshakes/s" "KiB/idle conn"
for srv in skuad unbound; do
    printf '%-8s %-32s %-32s %-32s %s\n' "$srv" "$(stats "${QPS[$srv]}")" \
        "$(stats "${P99[$srv]}")" "$(stats "${HS[$srv]}")" "${IDLEK[$srv]}"
done
if [[ -n "$OUT" ]]; then
    python3 - "$OUT" "${QPS[skuad]}" "${QPS[unbound]}" "${HS[skuad]}" "${HS[unbound]}" \
        "${IDLEK[skuad]}" "${IDLEK[unbound]}" "${P99[skuad]}" "${P99[unbound]}" <<'PY'
import json, sys
o, qs, qu, hs, hu, ik, iu, ps, pu = sys.argv[1:]
f = lambda s: [float(x) for x in s.split()]
json.dump({"skuad": {"qps": f(qs), "handshakes": f(hs), "idle_kib": float(ik), "p99_ms": f(ps)},
           "unbound": {"qps": f(qu), "handshakes": f(hu), "idle_kib": float(iu), "p99_ms": f(pu)}},
          open(o, "w"), indent=1)
PY
fi
