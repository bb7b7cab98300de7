#!/usr/bin/env bash
# Captures TSIG-signed messages of real peers as test vectors for tests/peers.rs, into
# tests/fixtures/peers.txt. Run as root (a network namespace):
#
#     sudo bash kernel-appliance/xfr/tests/capture-peers.sh
#
# In a namespace of its own (loopback only, 198.18.0.1-3 on it):
# - kdig's requests: a listener on 198.18.0.1:5300 records the TCP message kdig sends for
#   `kdig -y hmac-sha256:xfr.example.:SECRET +tcp example. AXFR` and `... IXFR=5`;
# - Knot (198.18.0.2) and NSD (198.18.0.3), primaries of example. (2000 TXT records, so the
#   AXFR spans several messages) with the key: an AXFR request signed by dnspython, and
#   every message of each server's answer.
# Fixture lines: `<name> <hex>`; `secret` is the key (base64), `*-request-mac` the MAC of the
# request the responses answer. Servers and the namespace are removed on exit.
set -euo pipefail
cd "$(dirname "$0")"
if [[ $(id -u) -ne 0 ]]; then
    echo "capture-peers.sh: needs root (a network namespace)" >&2
    exit 1
fi
for c in kdig knotd nsd ip /usr/bin/python3; do
    command -v "$c" >/dev/null || { echo "capture-peers.sh: $c not installed" >&2; exit 1; }
done
NS=skua-xfr-capture
work=$(mktemp -d)
cleanup() {
    ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
ip netns del "$NS" 2>/dev/null || true
ip netns add "$NS"
ip -n "$NS" link set lo up
for a in 198.18.0.1 198.18.0.2 198.18.0.3; do ip -n "$NS" addr add "$a/32" dev lo; done
chmod 755 "$work"
ip netns exec "$NS" /usr/bin/python3 capture_peers.py "$work" fixtures/peers.txt.new
mv fixtures/peers.txt.new fixtures/peers.txt
echo "wrote $(wc -l < fixtures/peers.txt) lines to $(pwd)/fixtures/peers.txt"
