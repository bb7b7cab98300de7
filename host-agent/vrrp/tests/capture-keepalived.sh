#!/usr/bin/env bash
# Captures keepalived's VRRPv3 advertisements, gratuitous ARPs and unsolicited Neighbor
# Advertisements as test vectors for tests/keepalived.rs, into
# tests/fixtures/keepalived.txt. Run as root (network namespaces):
#
#     sudo bash host-agent/vrrp/tests/capture-keepalived.sh
#
# Topology: namespace skua-vrrp-ka (keepalived, veth-ka 02:00:00:00:00:01, 198.18.0.1/24,
# fd00::1/64) -- veth pair -- namespace skua-vrrp-peer (tcpdump, veth-peer
# 02:00:00:00:00:02, 198.18.0.2/24, fd00::2/64). Each scenario runs keepalived with one
# vrrp_instance (virtual_router_id 51, `state BACKUP`, alone on the link, so it becomes
# Master after its Master_Down_Interval), lets it advertise, then stops it with SIGTERM (a
# Master then sends priority 0). tcpdump on the peer side records what crossed the link.
# Only packets keepalived's side sent are kept (ARP: gratuitous only; NA: to all-nodes
# only), each distinct packet once. Fixture lines:
#
#     <scenario> <vrrp|arp|na> <ip src> <ip dst> <ttl or hop limit> <hex>
#
# vrrp: the VRRP payload; arp: the whole Ethernet frame; na: the ICMPv6 message.
# keepalived and the namespaces are removed on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")"

if [[ $(id -u) -ne 0 ]]; then
    echo "capture-keepalived.sh: needs root (network namespaces)" >&2
    exit 1
fi
for c in keepalived tcpdump ip python3; do
    command -v "$c" >/dev/null || { echo "capture-keepalived.sh: $c not installed" >&2; exit 1; }
done

NK=skua-vrrp-ka
NP=skua-vrrp-peer
work=$(mktemp -d)
ka_pid=""
td_pid=""

cleanup() {
    [[ -n $ka_pid ]] && kill "$ka_pid" 2>/dev/null && wait "$ka_pid" 2>/dev/null
    [[ -n $td_pid ]] && kill "$td_pid" 2>/dev/null && wait "$td_pid" 2>/dev/null
    ip netns del "$NK" 2>/dev/null || true
    ip netns del "$NP" 2>/dev/null || true
    rm -rf "$work"
    rm -f fixtures/keepalived.txt.new
}
trap cleanup EXIT INT TERM

# Leftovers of an interrupted run.
ip netns del "$NK" 2>/dev/null || true
ip netns del "$NP" 2>/dev/null || true

ip netns add "$NK"
ip netns add "$NP"
for ns in "$NK" "$NP"; do
    # No duplicate address detection: addresses usable at once, no DAD probes captured.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
    ip -n "$ns" link set lo up
done
ip link add veth-ka netns "$NK" address 02:00:00:00:00:01 type veth \
    peer name veth-peer netns "$NP" address 02:00:00:00:00:02
ip -n "$NK" addr add 198.18.0.1/24 dev veth-ka
ip -n "$NP" addr add 198.18.0.2/24 dev veth-peer
ip -n "$NK" addr add fd00::1/64 dev veth-ka nodad
ip -n "$NP" addr add fd00::2/64 dev veth-peer nodad
ip -n "$NK" link set veth-ka up
ip -n "$NP" link set veth-peer up
sleep 1

version=$(keepalived --version 2>&1 | head -1)
out=fixtures/keepalived.txt
mkdir -p fixtures
{
    echo "# $version, captured by tests/capture-keepalived.sh (run it again as root to refresh)."
    echo "# <scenario> <vrrp|arp|na> <ip src> <ip dst> <ttl> <hex: VRRP payload | Ethernet frame | ICMPv6 message>"
} >"$out.new"

# run NAME SECONDS INSTANCE-BODY: one keepalived run with one vrrp_instance, captured.
run() {
    local name=$1 secs=$2 body=$3
    cat >"$work/$name.conf" <<EOF
global_defs {
    vrrp_version 3
    router_id skua-vrrp-capture
}
vrrp_instance $name {
    state BACKUP
    interface veth-ka
    virtual_router_id 51
$body
}
EOF
    ip netns exec "$NP" tcpdump -i veth-peer -U -n -w "$work/$name.pcap" \
        'ip proto 112 or ip6 proto 112 or arp or (icmp6 and ip6[40] == 136)' \
        2>"$work/$name.tcpdump" &
    td_pid=$!
    for _ in $(seq 50); do
        grep -q "listening on" "$work/$name.tcpdump" 2>/dev/null && break
        sleep 0.1
    done
    ip netns exec "$NK" keepalived -n -l -P -G -f "$work/$name.conf" \
        -p "$work/$name.pid" -r "$work/$name.vrrp.pid" >"$work/$name.log" 2>&1 &
    ka_pid=$!
    sleep "$secs"
    if ! grep -q "Entering MASTER STATE" "$work/$name.log"; then
        cat "$work/$name.log" >&2
        echo "capture-keepalived.sh: $name: keepalived did not become master" >&2
        exit 1
    fi
    # SIGTERM: the Master sends its priority-0 advertisement, then exits.
    kill -TERM "$ka_pid"
    wait "$ka_pid" || true
    ka_pid=""
    sleep 0.5
    kill "$td_pid"
    wait "$td_pid" || true
    td_pid=""
    python3 - "$name" "$work/$name.pcap" >>"$out.new" <<'PY'
import ipaddress, struct, sys
name, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
magic = struct.unpack("<I", data[:4])[0]
assert magic in (0xA1B2C3D4, 0xA1B23C4D), "little-endian pcap expected"
assert struct.unpack("<I", data[20:24])[0] == 1, "Ethernet link type expected"
off, seen = 24, set()
while off + 16 <= len(data):
    incl = struct.unpack("<I", data[off + 8:off + 12])[0]
    frame = data[off + 16:off + 16 + incl]
    off += 16 + incl
    # Only what keepalived's side sent (not the peer's kernel answering it).
    if frame[6:12] != bytes.fromhex("020000000001"):
        continue
    ethertype = struct.unpack("!H", frame[12:14])[0]
    if ethertype == 0x0806:
        # Gratuitous ARP only (sender IP = target IP), not the kernel resolving the peer.
        if frame[28:32] != frame[38:42]:
            continue
        rec = ("arp", "-", "-", "-", frame[:42])
    elif ethertype == 0x0800:
        ip = frame[14:]
        ihl, total = (ip[0] & 15) * 4, struct.unpack("!H", ip[2:4])[0]
        rec = ("vrrp", str(ipaddress.IPv4Address(ip[12:16])),
               str(ipaddress.IPv4Address(ip[16:20])), str(ip[8]), ip[ihl:total])
    elif ethertype == 0x86DD:
        ip = frame[14:]
        plen = struct.unpack("!H", ip[4:6])[0]
        kind = {112: "vrrp", 58: "na"}[ip[6]]
        if kind == "na" and ip[24:40] != bytes.fromhex("ff020000000000000000000000000001"):
            continue  # only unsolicited NAs (to all-nodes), not answers to solicitations
        rec = (kind, str(ipaddress.IPv6Address(ip[8:24])),
               str(ipaddress.IPv6Address(ip[24:40])), str(ip[7]), ip[40:40 + plen])
    else:
        continue
    if rec not in seen:
        seen.add(rec)
        print(name, *rec[:4], rec[4].hex())
PY
}

run v4_mcast 6 '    priority 100
    advert_int 1
    virtual_ipaddress {
        198.18.53.53/32
    }'
run v4_mcast_fast 2 '    priority 200
    advert_int 0.1
    virtual_ipaddress {
        198.18.53.53/32
        198.18.53.54/32
    }'
run v6_mcast 6 '    priority 100
    advert_int 1
    virtual_ipaddress {
        fd00::53:53/128
    }'
run v4_unicast 6 '    priority 100
    advert_int 1
    unicast_src_ip 198.18.0.1
    unicast_peer {
        198.18.0.2
    }
    virtual_ipaddress {
        198.18.53.53/32
    }'
run v4_unicast_old 6 '    priority 100
    advert_int 1
    unicast_src_ip 198.18.0.1
    unicast_peer {
        198.18.0.2
    }
    old_unicast_checksum
    virtual_ipaddress {
        198.18.53.53/32
    }'
run v6_unicast 6 '    priority 100
    advert_int 1
    unicast_src_ip fd00::1
    unicast_peer {
        fd00::2
    }
    virtual_ipaddress {
        fd00::53:53/128
    }'

mv "$out.new" "$out"
echo "capture-keepalived.sh: wrote $(grep -vc '^#' "$out") packets to host-agent/vrrp/tests/$out"
