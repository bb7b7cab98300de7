#!/usr/bin/env bash
# Installs what building the appliance image and booting it need (Debian 12 host, root):
# OVMF from bookworm; QEMU 10, mkosi 24 and its tools from bookworm-backports (docs/image.md;
# QEMU 7.2's TCG now and then leaves OVMF hung after a guest reset: docs/upgrades.md).
# Prints every command it runs; does nothing when everything is there.
set -euo pipefail
need=()
for pair in mkosi:mkosi qemu-system-x86_64:qemu-system-x86 mcopy:mtools mkfs.erofs:erofs-utils \
    mkfs.vfat:dosfstools veritysetup:cryptsetup-bin zstd:zstd depmod:kmod cpio:cpio kdig:knot-dnsutils \
    sfdisk:fdisk strip:binutils qemu-img:qemu-utils; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
[[ -f /usr/share/OVMF/OVMF_CODE_4M.fd ]] || need+=(ovmf)
# QEMU older than 10 (bookworm's 7.2): replaced by backports' 10.
if command -v qemu-system-x86_64 >/dev/null 2>&1; then
    qv=$(qemu-system-x86_64 --version | sed -n '1s/.*version \([0-9]*\).*/\1/p')
    ((${qv:-0} >= 10)) || need+=(qemu-system-x86)
fi
[[ -f /usr/lib/systemd/boot/efi/systemd-bootx64.efi ]] || need+=(systemd-boot-efi)
if ((${#need[@]} == 0)); then
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "qemu/deps.sh: missing: ${need[*]} (run as root to install them)" >&2
    exit 1
fi
run() { echo "+ $*"; "$@"; }
src=/etc/apt/sources.list.d/bookworm-backports.sources
if [[ ! -f $src ]]; then
    echo "+ write $src"
    cat > "$src" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
export DEBIAN_FRONTEND=noninteractive
run apt-get update -qq
run apt-get install -y -qq --no-install-recommends ovmf kmod cpio knot-dnsutils fdisk binutils
run apt-get install -y -qq -t bookworm-backports --no-install-recommends qemu-system-x86 qemu-utils
# mkosi 24 needs systemd >= 254 (repart, ukify): from backports as well. On a host whose PID 1
# is not systemd (containers, CI VMs) the upgrade is harmless.
run apt-get install -y -qq -t bookworm-backports --no-install-recommends mkosi systemd-boot \
    systemd-boot-efi python3-pefile dosfstools mtools squashfs-tools erofs-utils cryptsetup-bin \
    debian-archive-keyring zstd xz-utils e2fsprogs uidmap
