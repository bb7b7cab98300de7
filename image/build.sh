#!/usr/bin/env bash
# Builds the appliance image: skuad (release) staged into an extra tree, then mkosi.
#   image/build.sh [VERSION]        default: the version in image/mkosi.version
# Outputs in image/mkosi.output: skua_VERSION.raw (disk), the split artifacts of an upgrade
# (skua_VERSION.root.UUID.raw, skua_VERSION.root-verity.UUID.raw, skua_VERSION.efi) and
# skua_VERSION.qcow2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
version=${1:-$(cat "$here/mkosi.version")}
[[ $version =~ ^[0-9]+$ ]] || { echo "build.sh: version must be a number, got '$version'" >&2; exit 2; }
stage=$here/mkosi.output/stage
rm -rf "$stage"
mkdir -p "$stage/usr/bin" "$stage/usr/share/skua"
(cd "$root" && cargo build --release --locked -p skuad)
install -m 0755 "$root/target/release/skuad" "$stage/usr/bin/skuad"
strip --strip-unneeded "$stage/usr/bin/skuad"
cp "$root/README.md" "$stage/usr/share/skua/README"
# mkosi -f does not remove split files whose names changed (image.md pitfall 7).
rm -f "$here"/mkosi.output/skua_*
cd "$here"
mkosi -f --image-version="$version" --extra-tree="$stage" build
raw=$here/mkosi.output/skua_$version.raw
qemu-img convert -O qcow2 "$raw" "$here/mkosi.output/skua_$version.qcow2"
payload=$(du -cb "$here"/mkosi.output/skua_"$version".root.*.raw "$here"/mkosi.output/skua_"$version".root-verity.*.raw \
    "$here/mkosi.output/skua_$version.efi" | tail -1 | cut -f1)
echo "image: $raw ($(du -h --apparent-size "$raw" | cut -f1) apparent, $(du -h "$raw" | cut -f1) allocated);" \
    "update payload (root + verity + UKI): $((payload / 1000000)) MB"
