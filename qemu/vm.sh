#!/usr/bin/env bash
# Boots the appliance in QEMU (TCG: this host's KVM cannot run ordinary guests) with its
# virtio-net on a tap in the namespace skua-vm (host side 198.18.1.1, guest 198.18.1.2),
# console on this terminal (Ctrl-A X quits). The disk is used with snapshot=on: unchanged.
#   qemu/vm.sh [DISK] [QUEUES]     default: the newest image/mkosi.output/skua_*.raw, 1 queue
# From another terminal: ip netns exec skua-vm kdig @198.18.1.2 www.skua.test A
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
disk=${1:-$(ls -1v "$here"/../image/mkosi.output/skua_*.raw 2>/dev/null | tail -1)}
queues=${2:-1}
[[ -n $disk && -f $disk ]] || { echo "vm.sh: no image: run 'just image' first" >&2; exit 2; }
ns=skua-vm tap=skuatap0
"$here/netns.sh" up "$ns" "$tap" "$queues"
trap '"$here/netns.sh" down "$ns"' EXIT
vars=$(mktemp /tmp/skua-vars.XXXXXX.fd)
cp /usr/share/OVMF/OVMF_VARS_4M.fd "$vars"
mq=()
if [[ $queues -gt 1 ]]; then mq=(,mq=on,vectors=$((2 * queues + 2))); fi
ip netns exec "$ns" qemu-system-x86_64 -accel tcg -machine q35 -cpu max -m 1G -smp 2 \
    -nodefaults -display none -serial mon:stdio \
    -drive if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd \
    -drive if=pflash,format=raw,file="$vars" \
    -drive if=virtio,format=raw,file="$disk",snapshot=on \
    -netdev tap,id=n0,ifname="$tap",script=no,downscript=no,vhost=off,queues="$queues" \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:5c:0a:02"${mq[*]}"
rm -f "$vars"
