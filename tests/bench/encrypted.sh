#!/usr/bin/env bash
# Encrypted DNS: skuad vs Unbound 1.17 vs dnsdist 1.7 over DNS over TLS and DNS over HTTPS,
# one server core each, same data, same client, interleaved.
#
# For each transport (DoT on 853, DoH on 443 with HTTP/2) and each server:
#   1. throughput and latency on established connections, 20 connections kept open and 200
#      queries in flight, DURATION seconds, REPS times per server, servers interleaved;
#      medians with min and max. DoT: dnsperf -m dot -c 20 -q 200 over the 10,000 names.
#      DoH: h2load (nghttp2's HTTP/2 load generator) -c 20 -m 10, POST of one query
#      (h1.bench.test A, ID 0): bookworm's dnsperf 2.10 DoH client manages ~12 queries per
#      second with one in flight against any server (Unbound as skuad), so it measures
#      itself, not the server;
#   2. new handshakes: full TLS handshakes (no resumption) in a loop for DURATION seconds by
#      one python3 ssl client (ALPN dot or h2): handshakes per second (a client-bound
#      figure: compare the servers with each other, not with other machines);
#   3. memory per idle connection (first repetition): IDLE connections opened, one query
#      answered on each (DoH: a minimal HTTP/2 client), then left idle; the server's RSS
#      before and after, divided by IDLE.
#
# dnsdist is a proxy: it answers from its packet cache (filled by a warm-up over the
# transport measured, see warm_up) in front of a skuad on UDP (on the same core), with
# maxInFlight=200 on its DoT listener (pipelined queries answered out of order). Unbound and skuad answer from
# local data. Everything runs in a network namespace with only loopback. Servers on CPU 1,
# the client on CPU 0. Needs root, dnsperf, h2load (nghttp2-client), unbound, dnsdist,
# openssl, python3, taskset.
#
# Usage: tests/bench/encrypted.sh [--transports "dot doh"] [--servers "skuad unbound dnsdist"]
#        (server skuad-b: a second skuad binary, SKUAD_B_BIN, measured beside the first)
#            [--duration S] [--reps N] [--idle N] [--out FILE.json]
set -euo pipefail
source "$(dirname "$0")/lib.sh"

DURATION=10 REPS=3 IDLE=2000 OUT="" TRANSPORTS="dot doh" SERVERS="skuad unbound dnsdist"
while [[ $# -gt 0 ]]; do
    case $1 in
        --duration) DURATION=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --idle) IDLE=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --transports) TRANSPORTS=$2; shift 2 ;;
        --servers) SERVERS=$2; shift 2 ;;
        *) die "unknown option $1" ;;
    esac
done
[[ $EUID -eq 0 ]] || die "needs root (a network namespace)"
for t in dnsperf h2load openssl python3 taskset ip; do
    command -v "$t" >/dev/null || die "'$t' not found"
done
for s in $SERVERS; do
    [[ $s == skuad* ]] || command -v "$s" >/dev/null || die "'$s' not found"
done

NS=skencbench
WORK=$(mktemp -d /tmp/skua-enc-bench.XXXXXX)
cleanup() {
    # Only the script itself cleans up (a $(...) subshell running the trap would take the
    # namespace away mid-run).
    [[ $BASHPID == "$$" ]] || return 0
    ip netns pids "$NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
ulimit -Hn 65536 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
ip netns del "$NS" 2>/dev/null || true
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
in_ns() { ip netns exec "$NS" "$@"; }

build_skuad "$WORK/skuad"
# A second skuad binary to compare with the first, side by side (server name skuad-b).
if [[ " $SERVERS " == *" skuad-b "* ]]; then
    [[ -n "${SKUAD_B_BIN:-}" ]] || die "server skuad-b needs SKUAD_B_BIN"
    cp "$SKUAD_B_BIN" "$WORK/skuad-b" && chmod +x "$WORK/skuad-b"
fi
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
    # dnsdist runs as _dnsdist when started as root.
    cp srv.key dnsdist.key && chown _dnsdist dnsdist.key 2>/dev/null || true
)

N=10000
CONNS=$((IDLE + 1000))
printf '    interface: 127.0.0.1@853\n    interface: 127.0.0.1@443\n    tls-port: 853\n    https-port: 443\n    tls-service-pem: "%s/srv.pem"\n    tls-service-key: "%s/srv.key"\n    num-threads: 1\n    access-control: 127.0.0.0/8 allow\n    incoming-num-tcp: %d\n    tcp-idle-timeout: 120000\n    http-max-streams: 1000\n' \
    "$WORK" "$WORK" "$CONNS" > "$WORK/common.conf"
# skuad limits connections per source by default (100 per address): the bench's idle
# connections all come from 127.0.0.1.
{ cat "$WORK/common.conf"; printf '    tcp-connection-limit-per-source: 0\n'; } > "$WORK/skuad-opts.conf"
gen_localdata bench.test. "$N" "$WORK/skuad.conf" "$WORK/skuad-opts.conf"
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
EOF
} > "$WORK/unbound-opts.conf"
gen_localdata bench.test. "$N" "$WORK/unbound.conf" "$WORK/unbound-opts.conf"
# Unbound reserves descriptors for incoming-num-tcp on every TCP interface at start (two
# here: 22,100 for 10,000 idle connections, over a 20,000 limit root may not raise in a
# container): it listens only on the port measured.
grep -v 'interface: 127.0.0.1@443' "$WORK/unbound.conf" > "$WORK/unbound-dot.conf"
grep -v 'interface: 127.0.0.1@853' "$WORK/unbound.conf" > "$WORK/unbound-doh.conf"
# dnsdist's backend: skuad with the same data on UDP 127.0.0.1:5301.
printf '    interface: 127.0.0.1@5301\n    num-threads: 1\n    access-control: 127.0.0.0/8 allow\n' \
    > "$WORK/backend-opts.conf"
gen_localdata bench.test. "$N" "$WORK/backend.conf" "$WORK/backend-opts.conf"
cat > "$WORK/dnsdist.conf" <<EOF
setSecurityPollSuffix('')
setACL({'127.0.0.0/8'})
setLocal('127.0.0.1:5300')
setMaxTCPConnectionsPerClient(0)
setMaxTCPClientThreads(1)
newServer({address='127.0.0.1:5301', checkName='h1.bench.test.', mustResolve=true})
pc = newPacketCache(100000, {maxTTL=86400})
getPool(''):setCache(pc)
addTLSLocal('127.0.0.1:853', '$WORK/srv.pem', '$WORK/dnsdist.key', {provider='openssl', maxConcurrentTCPConnections=$CONNS, maxInFlight=200})
addDOHLocal('127.0.0.1:443', '$WORK/srv.pem', '$WORK/dnsdist.key', '/dns-query', {maxConcurrentTCPConnections=$CONNS})
EOF
awk -v n="$N" 'BEGIN { for (i = 0; i < 100000; i++) printf "h%d.bench.test. A\n", i % n }' \
    > "$WORK/queries.txt"
head -n "$N" "$WORK/queries.txt" > "$WORK/names.txt"
# The DoH request body: h1.bench.test A, ID 0 (RFC 8484 §4.1).
printf '\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x02h1\x05bench\x04test\x00\x00\x01\x00\x01' \
    > "$WORK/query.bin"

port_of() { if [[ $1 == dot ]]; then echo 853; else echo 443; fi; }
alpn_of() { if [[ $1 == dot ]]; then echo dot; else echo h2; fi; }

BACKEND=""
start_server() {
    local srv=$1 transport=$2
    case $srv in
        # `ip netns exec` and taskset exec the server: $! is the server's pid.
        skuad|skuad-b) ip netns exec "$NS" taskset -c 1 "$WORK/$srv" --no-xdp \
                   --config "$WORK/skuad.conf" >"$WORK/$srv.log" 2>&1 & ;;
        unbound) ip netns exec "$NS" taskset -c 1 unbound -d -c "$WORK/unbound-$transport.conf" \
                   >"$WORK/unbound.log" 2>&1 & ;;
        dnsdist)
            ip netns exec "$NS" taskset -c 1 "$WORK/skuad" --no-xdp \
                --config "$WORK/backend.conf" >"$WORK/backend.log" 2>&1 &
            BACKEND=$!
            ip netns exec "$NS" taskset -c 1 dnsdist --supervised --disable-syslog \
                -C "$WORK/dnsdist.conf" >"$WORK/dnsdist.log" 2>&1 & ;;
    esac
    PID=$!
    local port
    port=$(port_of "$transport")
    for _ in $(seq 100); do
        if in_ns openssl s_client -connect "127.0.0.1:$port" -alpn "$(alpn_of "$transport")" \
            -CAfile "$WORK/ca.pem" </dev/null >/dev/null 2>&1; then
            # dnsdist: once its backend is up (its plain listener answers), one pass over
            # the names fills its packet cache.
            if [[ $srv == dnsdist ]]; then
                for _ in $(seq 100); do
                    [[ $(in_ns dig +short +tries=1 +time=1 @127.0.0.1 -p 5300 h1.bench.test A) \
                        == 198.18.0.1 ]] && break
                    sleep 0.2
                done
                in_ns taskset -c 0 dnsperf -s 127.0.0.1 -p 5300 -d "$WORK/queries.txt" -n 1 \
                    -t 1 -S 0 >/dev/null 2>&1 || true
            fi
            return
        fi
        if ! kill -0 "$PID" 2>/dev/null; then
            tail -5 "$WORK/$srv.log" >&2 || true
            die "$srv exited at start (its log above)"
        fi
        sleep 0.1
    done
    tail -5 "$WORK/$srv.log" >&2 || true
    die "$srv does not answer $transport (its log above)"
}
stop_server() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    if [[ -n "$BACKEND" ]]; then
        kill "$BACKEND" 2>/dev/null || true
        wait "$BACKEND" 2>/dev/null || true
        BACKEND=""
    fi
}

# CPU time (user + system, clock ticks) of a process and all its threads so far: the
# server core's share during a load tells whether the server or the client was the limit.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# Before each measurement, every server gets the same warm-up over the transport measured:
# one pass over the names (DoT: 20 connections, 20 queries in flight) or one second of the
# DoH load. dnsdist needs it: its packet cache keeps answers to TCP (and so DoT and DoH)
# queries apart from UDP ones, and its first pass forwards each name to the backend over
# TCP, where 200 pipelined queries stalled it (1.7.3: all in flight lost, ~100 qps, until
# the names were cached).
warm_up() {
    local transport=$1
    if [[ $transport == doh ]]; then
        in_ns taskset -c 0 h2load -c 20 -m 10 -D 1 -d "$WORK/query.bin" \
            -H 'content-type: application/dns-message' https://127.0.0.1:443/dns-query \
            >/dev/null 2>&1 || true
    else
        in_ns taskset -c 0 dnsperf -m dot -s 127.0.0.1 -p 853 -c 20 -q 20 -n 1 \
            -d "$WORK/names.txt" -S 0 >/dev/null 2>&1 || true
    fi
}

# Load on established connections: prints 'qps p99_ms lost'.
run_load() {
    local transport=$1 out
    if [[ $transport == doh ]]; then
        out=$(in_ns taskset -c 0 h2load -c 20 -m 10 -D "$DURATION" -d "$WORK/query.bin" \
            -H 'content-type: application/dns-message' https://127.0.0.1:443/dns-query 2>&1 || true)
        # 'finished in 5.00s, 93507.93 req/s, ...'; 'time for request: min max mean sd ...'
        local qps mean sd failed
        qps=$(awk '/^finished in/ { print $4 }' <<<"$out")
        failed=$(awk '/^requests:/ { print $10 }' <<<"$out")
        read -r mean sd < <(awk '/time for request:/ {
            m = $6; s = $7
            if (m ~ /ms$/) { sub(/ms$/, "", m); m = m * 1000 } else if (m ~ /us$/) { sub(/us$/, "", m) } else { sub(/s$/, "", m); m = m * 1e6 }
            if (s ~ /ms$/) { sub(/ms$/, "", s); s = s * 1000 } else if (s ~ /us$/) { sub(/us$/, "", s) } else { sub(/s$/, "", s); s = s * 1e6 }
            print m, s }' <<<"$out")
        awk -v q="${qps:-0}" -v l="${failed:-?}" -v a="${mean:-0}" -v s="${sd:-0}" \
            'BEGIN { printf "%.0f %.3f %s\n", q, (a + 2.33 * s) / 1000, l }'
        return
    fi
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
    local transport=$1
    in_ns taskset -c 0 python3 - "$DURATION" "$WORK/ca.pem" "$(port_of "$transport")" \
        "$(alpn_of "$transport")" <<'PY'
import socket, ssl, sys, time
dur, ca, port, alpn = float(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols([alpn])
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < dur:
    s = socket.create_connection(("127.0.0.1", port))
    t = ctx.wrap_socket(s, server_hostname="dot.test")
    t.close()
    n += 1
print(round(n / (time.monotonic() - t0)))
PY
}

# KiB of RSS per idle connection: IDLE connections held open by python3, each having asked
# one question first (a used connection gone idle, not one that never spoke). dnsdist's
# figure includes nothing of its backend (another process).
run_idle() {
    local transport=$1 before after
    before=$(awk '/VmRSS/ { print $2 }' "/proc/$PID/status")
    ip netns exec "$NS" python3 - "$IDLE" "$WORK/ca.pem" "$WORK/idle.ready" \
        "$(port_of "$transport")" "$transport" <<'PY' &
import socket, ssl, sys, time
n, ca, ready, port, transport = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["dot" if transport == "dot" else "h2"])
q = bytes.fromhex("0000" + "01000001000000000000") + b"\x02h1\x05bench\x04test\x00\x00\x01\x00\x01"

def frame(ty, flags, sid, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ty, flags]) + sid.to_bytes(4, "big") + payload

def lit(name, value):
    # HPACK literal without indexing, new name, no Huffman (RFC 7541 6.2.2); short strings.
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value

def recv_exact(t, k):
    b = b""
    while len(b) < k:
        c = t.recv(k - len(b))
        if not c:
            raise EOFError
        b += c
    return b

def ask_doh(t):
    block = (lit(b":method", b"POST") + lit(b":scheme", b"https") + lit(b":path", b"/dns-query")
             + lit(b":authority", b"dot.test") + lit(b"content-type", b"application/dns-message")
             + lit(b"content-length", str(len(q)).encode()))
    t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0) + frame(1, 4, 1, block)
              + frame(0, 1, 1, q))
    while True:
        h = recv_exact(t, 9)
        ln, ty, fl = int.from_bytes(h[:3], "big"), h[3], h[4]
        recv_exact(t, ln)
        if ty == 4 and not fl & 1:
            t.sendall(frame(4, 1, 0))
        if ty == 0 and fl & 1:
            return

conns = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    t = ctx.wrap_socket(s, server_hostname="dot.test")
    if transport == "dot":
        t.sendall(len(q).to_bytes(2, "big") + q)
        need = int.from_bytes(recv_exact(t, 2), "big")
        recv_exact(t, need)
    else:
        ask_doh(t)
    conns.append(t)
time.sleep(2)
open(ready, "w").close()
time.sleep(600)
PY
    local holder=$!
    for _ in $(seq 1200); do [[ -e "$WORK/idle.ready" ]] && break; sleep 0.1; done
    sleep 1
    after=$(awk '/VmRSS/ { print $2 }' "/proc/$PID/status")
    kill "$holder" 2>/dev/null || true
    wait "$holder" 2>/dev/null || true
    rm -f "$WORK/idle.ready"
    awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN { printf "%.1f\n", (a - b) / n }'
}

declare -A QPS P99 HS IDLEK BUSY
for transport in $TRANSPORTS; do
    for rep in $(seq "$REPS"); do
        for srv in $SERVERS; do
            k="$transport/$srv"
            log "$transport rep $rep: $srv"
            start_server "$srv" "$transport"
            warm_up "$transport"
            t0=$(cpu_ticks "$PID")
            read -r qps p99 lost < <(run_load "$transport")
            busy=$(awk -v a="$t0" -v b="$(cpu_ticks "$PID")" -v hz="$(getconf CLK_TCK)" \
                -v d="$DURATION" 'BEGIN { printf "%.0f", (b - a) / hz / d * 100 }')
            hs=$(run_handshakes "$transport")
            QPS[$k]+="$qps "; P99[$k]+="$p99 "; HS[$k]+="$hs "; BUSY[$k]+="$busy "
            if [[ $rep -eq 1 ]]; then IDLEK[$k]=$(run_idle "$transport"); fi
            log "  $srv: $qps qps (server core $busy% busy), p99 ~$p99 ms, lost $lost; $hs handshakes/s"
            stop_server
        done
    done
done

stats() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END {
    printf "%s (min %s, max %s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
echo
echo "$REPS interleaved repetitions of ${DURATION} s, one server core (CPU 1), client on CPU 0: DoT dnsperf -c 20 -q 200, DoH h2load -c 20 -m 10 (HTTP/2 POST)"
printf '%-14s %-32s %-22s %-32s %-32s %s\n' server "qps (median)" "server core busy %" "p99 ms (mean+2.33sd)" "new handshakes/s" "KiB/idle conn ($IDLE)"
for transport in $TRANSPORTS; do
    for srv in $SERVERS; do
        k="$transport/$srv"
        printf '%-14s %-32s %-22s %-32s %-32s %s\n' "$k" "$(stats "${QPS[$k]}")" \
            "$(stats "${BUSY[$k]}")" "$(stats "${P99[$k]}")" "$(stats "${HS[$k]}")" "${IDLEK[$k]}"
    done
done
if [[ -n "$OUT" ]]; then
    {
        for transport in $TRANSPORTS; do
            for srv in $SERVERS; do
                k="$transport/$srv"
                printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$k" "${QPS[$k]}" "${HS[$k]}" "${IDLEK[$k]}" "${P99[$k]}" "${BUSY[$k]}"
            done
        done
    } | python3 -c '
import json, sys
f = lambda s: [float(x) for x in s.split()]
out = {}
for line in sys.stdin:
    k, q, h, i, p, b = line.rstrip("\n").split("\t")
    out[k] = {"qps": f(q), "handshakes": f(h), "idle_kib": float(i), "p99_ms": f(p),
              "server_busy_pct": f(b)}
json.dump(out, open(sys.argv[1], "w"), indent=1)
' "$OUT"
fi
