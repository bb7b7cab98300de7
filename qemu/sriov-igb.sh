#!/usr/bin/env bash
# The SR-IOV control path (crate skua-sriov, its example `sriov`) against a real kernel and
# QEMU's emulated igb (Intel 82576, 7 VFs), behind an emulated Intel IOMMU (docs/ha.md, "NIC
# passthrough (SR-IOV)"). Two boots of a Debian kernel with a busybox initramfs, under TCG:
#
#   1. IOMMU on: a VF attribute igb cannot set (link_state) stops the run at that step with
#      "driver of eth0 does not support setting VF link_state"; without it the next run
#      finishes the remaining steps; the result is checked with sysfs and `ip link`; a third
#      run does nothing; a count change is refused while a VF is on vfio-pci (naming the
#      process that holds /dev/vfio/N) and goes through with --force.
#   2. IOMMU off: vfio = true is refused with "IOMMU is off (...)" before any VF is made.
#
# The VF data path is not tested: QEMU 10.0's igb VFs carry no traffic. About 2 minutes.
# Needs QEMU >= 8 with the igb device (qemu/deps.sh installs 10.0), apt-get (downloads the
# bookworm kernel, which has igb, and busybox-static into $SKUA_SRIOV_CACHE), cargo.
# Usage: qemu/sriov-igb.sh   (exit 0: both boots passed; the consoles are kept on failure, or
# always with SKUA_SRIOV_KEEP=1)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cache=${SKUA_SRIOV_CACHE:-/var/tmp/skua-sriov-qemu}
target=${CARGO_TARGET_DIR:-$repo/target}
mkdir -p "$cache"

qemu-system-x86_64 -device help 2>/dev/null | grep -q '"igb"' ||
    { echo "sriov-igb.sh: this QEMU has no igb device (QEMU >= 8: bash qemu/deps.sh)" >&2; exit 1; }

# The kernel: bookworm's linux-image-amd64 (linux-image-cloud-amd64 has no igb).
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
[[ -n $kpkg ]] || { echo "sriov-igb.sh: apt-cache knows no linux-image-amd64" >&2; exit 1; }
kver=${kpkg#linux-image-}
kroot=$cache/$kver
if [[ ! -e $kroot/boot/vmlinuz-$kver ]]; then
    (cd "$cache" && apt-get download "$kpkg" busybox-static)
    rm -rf "$kroot" "$cache/busybox"
    dpkg-deb -x "$cache"/"$kpkg"_*.deb "$kroot"
    dpkg-deb -x "$cache"/busybox-static_*.deb "$cache/busybox"
fi

cargo build -q -p skua-sriov --example sriov
bin=$target/debug/examples/sriov

work=$(mktemp -d /tmp/skua-sriov-qemu.XXXXXX)
ok=0
trap '[[ $ok == 1 && -z ${SKUA_SRIOV_KEEP:-} ]] && rm -rf "$work" || echo "sriov-igb.sh: logs kept in $work" >&2' EXIT

# --- initramfs: busybox, the modules, the sriov example and iproute2 with their libraries ---
root=$work/root
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,lib/modules}
cp "$cache/busybox/bin/busybox" "$root/bin/busybox"
# Load order from modules.dep (depmod -b KROOT KVER shows it).
mods=(drivers/i2c/algos/i2c-algo-bit drivers/dca/dca drivers/net/ethernet/intel/igb/igb
      virt/lib/irqbypass drivers/vfio/vfio drivers/vfio/vfio_iommu_type1 drivers/vfio/vfio_virqfd
      drivers/vfio/pci/vfio-pci-core drivers/vfio/pci/vfio-pci)
for m in "${mods[@]}"; do
    cp "$kroot/lib/modules/$kver/kernel/$m.ko" "$root/lib/modules/"
done
copy_with_libs() {
    install -D -m 755 "$1" "$root$2"
    ldd "$1" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | while read -r lib; do
        install -D -m 644 "$lib" "$root$lib"
    done
}
copy_with_libs "$bin" /bin/sriov
copy_with_libs "$(command -v ip)" /sbin/ip
# The dynamic loader's path as the binaries name it.
install -D -m 755 /lib64/ld-linux-x86-64.so.2 "$root/lib64/ld-linux-x86-64.so.2"

cat > "$root/etc/base.toml" <<'EOF'
[[sriov]]
pf = "eth0"
numvfs = 2

[[sriov.vf]]
index = 0
mac = "02:00:00:00:53:01"
vlan = 100
spoofchk = false
trust = true
vfio = true
qemu_id = "skua-wan"
proxmox = { vmid = 120, slot = 0 }

[[sriov.vf]]
index = 1
mac = "02:00:00:00:53:02"
EOF

cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
say() { echo "SRIOV-QEMU: $*"; }
fail() { say "FAIL: $*"; poweroff -f; sleep 10; }
has() { echo "$1" | grep -qF -- "$2" || fail "$3: no \"$2\" in: $1"; }
for m in i2c-algo-bit dca igb irqbypass vfio vfio_iommu_type1 vfio_virqfd vfio-pci-core vfio-pci; do
    insmod /lib/modules/$m.ko || fail "insmod $m"
done
for i in $(seq 100); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
pf=/sys/class/net/eth0/device
[ -e $pf/sriov_totalvfs ] || fail "eth0 has no sriov_totalvfs"
say "eth0 is $(basename "$(readlink -f $pf)"), sriov_totalvfs $(cat $pf/sriov_totalvfs), $(ls /sys/kernel/iommu_groups | wc -l) IOMMU groups"
ip link set eth0 up

if grep -q skua.expect=iommu-off /proc/cmdline; then
    out=$(sriov /etc/base.toml apply); rc=$?
    echo "$out"
    [ $rc = 1 ] || fail "apply with the IOMMU off exited $rc"
    has "$out" "eth0 ($(basename "$(readlink -f $pf)")) has no IOMMU group: IOMMU is off (boot with intel_iommu=on iommu=pt / amd_iommu=on)" "IOMMU off"
    [ "$(cat $pf/sriov_numvfs)" = 0 ] || fail "VFs were created although vfio-pci cannot take them"
    say PASS
    poweroff -f; sleep 10
fi

# 1. link_state: igb has no ndo_set_vf_link_state, the run stops at that step.
{ cat /etc/base.toml; echo 'link_state = "enable"'; } > /tmp/a.toml
# (appended to the last [[sriov.vf]], index 1)
out=$(sriov /tmp/a.toml apply); rc=$?
echo "$out"
[ $rc = 1 ] || fail "apply with link_state exited $rc"
has "$out" "step 8/9 (VF 1 link_state enable) failed after 7 done: driver of eth0 does not support setting VF link_state" "link_state"

# 2. Without it, the next run does what is left: the VF 0 binding.
out=$(sriov /etc/base.toml apply) || fail "apply: $out"
echo "$out"
has "$out" '"bind VF 0 to vfio-pci"' "resume"
[ "$(echo "$out" | grep -c '"action"')" = 1 ] || fail "resume did more than the binding: $out"

# 3. What the kernel has now, read with other tools.
vf0=$(readlink -f $pf/virtfn0); vf1=$(readlink -f $pf/virtfn1)
a0=$(basename $vf0)
[ "$(cat $pf/sriov_numvfs)" = 2 ] || fail "sriov_numvfs $(cat $pf/sriov_numvfs)"
[ "$(cat $pf/sriov_drivers_autoprobe)" = 0 ] || fail "autoprobe left on"
[ "$(basename "$(readlink $vf0/driver)")" = vfio-pci ] || fail "VF 0 driver: $(readlink $vf0/driver)"
[ ! -e $vf1/driver ] || fail "VF 1 has a driver although autoprobe is off: $(readlink $vf1/driver)"
group=$(basename "$(readlink $vf0/iommu_group)")
[ -c /dev/vfio/$group ] || fail "no /dev/vfio/$group"
links=$(/sbin/ip link show eth0); echo "$links"
has "$(echo "$links" | grep 'vf 0 ')" "link/ether 02:00:00:00:53:01" "ip link vf 0"
has "$(echo "$links" | grep 'vf 0 ')" "vlan 100" "ip link vf 0"
has "$(echo "$links" | grep 'vf 0 ')" "spoof checking off" "ip link vf 0"
has "$(echo "$links" | grep 'vf 0 ')" "trust on" "ip link vf 0"
has "$(echo "$links" | grep 'vf 1 ')" "link/ether 02:00:00:00:53:02" "ip link vf 1"
st=$(sriov /etc/base.toml status) || fail "status: $st"
has "$st" "\"qemu\": \"-device vfio-pci,host=$a0,id=skua-wan\"" "status"
has "$st" "\"proxmox\": \"qm set 120 -hostpci0 $a0\"" "status"
has "$st" '"pending": []' "status"

# 4. Converged: nothing to do.
out=$(sriov /etc/base.toml apply) || fail "apply: $out"
has "$out" '"applied": []' "second run"

# 5. A count change while VF 0 is on vfio-pci and its group is open: refused, then forced.
sed 's/^numvfs = 2/numvfs = 3/' /etc/base.toml > /tmp/c.toml
sleep 600 3</dev/vfio/$group &
holder=$!
sleep 0.2
out=$(sriov /tmp/c.toml apply); rc=$?
echo "$out"
[ $rc = 1 ] || fail "count change with a VF on vfio-pci exited $rc"
has "$out" "refusing to change sriov_numvfs of eth0" "refusal"
has "$out" "VF 0 ($a0) is bound to vfio-pci (IOMMU group $group, /dev/vfio/$group open by pid $holder (sleep))" "refusal"
[ "$(cat $pf/sriov_numvfs)" = 2 ] || fail "the refused change changed sriov_numvfs"
kill $holder; wait $holder 2>/dev/null
out=$(sriov /tmp/c.toml apply --force) || fail "forced apply: $out"
echo "$out"
has "$out" '"sriov_numvfs 2 -> 0"' "forced"
has "$out" '"sriov_numvfs 0 -> 3"' "forced"
[ "$(cat $pf/sriov_numvfs)" = 3 ] || fail "sriov_numvfs after the forced change: $(cat $pf/sriov_numvfs)"
[ "$(basename "$(readlink $pf/virtfn0/driver)")" = vfio-pci ] || fail "new VF 0 not on vfio-pci"
has "$(/sbin/ip link show eth0 | grep 'vf 0 ')" "link/ether 02:00:00:00:53:01" "new VF 0"
out=$(sriov /tmp/c.toml apply) || fail "apply: $out"
has "$out" '"applied": []' "after the forced change"
say PASS
poweroff -f; sleep 10
EOF
chmod 755 "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"

boot() { # boot NAME QEMU-ARGS... -- KERNEL-ARGS
    local name=$1; shift
    local qargs=() kargs=()
    while [[ $1 != -- ]]; do qargs+=("$1"); shift; done
    shift
    kargs=("$@")
    echo "== sriov-igb: $name (TCG, about a minute)"
    local t0=$SECONDS
    timeout 600 qemu-system-x86_64 -machine q35 -accel tcg -cpu max -m 1024 -smp 2 \
        "${qargs[@]}" \
        -device pcie-root-port,id=rp1,slot=1,chassis=1 \
        -netdev hubport,id=n0,hubid=0 -device igb,bus=rp1,netdev=n0 \
        -kernel "$kroot/boot/vmlinuz-$kver" -initrd "$work/initrd.gz" \
        -append "console=ttyS0 panic=-1 loglevel=4 ${kargs[*]}" \
        -display none -monitor none -serial "file:$work/$name.log" -no-reboot || true
    grep 'SRIOV-QEMU' "$work/$name.log" || true
    if ! grep -q 'SRIOV-QEMU: PASS' "$work/$name.log"; then
        echo "sriov-igb: $name FAILED after $((SECONDS - t0)) s; the console's end:" >&2
        tail -40 "$work/$name.log" >&2
        exit 1
    fi
    echo "sriov-igb: $name passed in $((SECONDS - t0)) s"
}
boot iommu -device intel-iommu,intremap=on -- intel_iommu=on iommu=pt
boot iommu-off -- intel_iommu=off skua.expect=iommu-off
ok=1
echo "sriov-igb: PASS (kernel $kver, $(qemu-system-x86_64 --version | head -1))"
