#!/usr/bin/env bash
# Host side of the appliance's network: a namespace with a tap for QEMU's virtio-net.
#   qemu/netns.sh up NS TAP [QUEUES]   namespace NS, tap TAP at 198.18.1.1/24 (multi-queue if
#                                      QUEUES > 1), loopback up; nothing else (no route out)
#   qemu/netns.sh down NS
set -euo pipefail
cmd=${1:?usage: netns.sh up NS TAP [QUEUES] | down NS}
ns=${2:?namespace}
case $cmd in
    up)
        tap=${3:?tap name}
        queues=${4:-1}
        ip netns del "$ns" 2>/dev/null || true
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        # A multi-queue tap refuses QEMU's queues=1 (image.md, XDP pitfall 1): only when > 1.
        if [[ $queues -gt 1 ]]; then
            ip netns exec "$ns" ip tuntap add dev "$tap" mode tap multi_queue
        else
            ip netns exec "$ns" ip tuntap add dev "$tap" mode tap
        fi
        ip -n "$ns" addr add 198.18.1.1/24 dev "$tap"
        ip -n "$ns" link set "$tap" up
        ;;
    down)
        ip netns del "$ns" 2>/dev/null || true
        ;;
    *) echo "netns.sh: unknown command $cmd" >&2; exit 2 ;;
esac
