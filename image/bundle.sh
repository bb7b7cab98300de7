#!/usr/bin/env bash
# Packs a built version's split artifacts into its update bundle, the file `skuactl upgrade`
# installs (format: kernel-appliance/skuactl/src/bundle.rs):
#   image/bundle.sh OUTDIR VERSION   ->  OUTDIR/skua_VERSION.update
# A zstd-compressed tar: manifest (sizes, SHA-256, partition UUIDs = roothash halves), root,
# root-verity, UKI. The root partition's zero tail compresses away.
set -euo pipefail
out=$1 version=$2
cd "$out"
shopt -s nullglob
roots=(skua_"$version".root.*.raw) verities=(skua_"$version".root-verity.*.raw)
[[ ${#roots[@]} == 1 && ${#verities[@]} == 1 && -f skua_$version.efi ]] ||
    { echo "bundle.sh: need exactly one root, one root-verity and the UKI of version $version in $out" >&2; exit 1; }
uuid() { # skua_2.root.7e2395c6ced160482748a39f678be6f7.raw -> 7e2395c6-ced1-6048-2748-a39f678be6f7
    local h=${1%.raw}; h=${h##*.}
    echo "${h:0:8}-${h:8:4}-${h:12:4}-${h:16:4}-${h:20:12}"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$PWD/${roots[0]}" "$tmp/skua_$version.root.raw"
ln -s "$PWD/${verities[0]}" "$tmp/skua_$version.root-verity.raw"
ln -s "$PWD/skua_$version.efi" "$tmp/skua_$version.efi"
line() { # kind member [uuid]
    echo "$1 $2 $(stat -L -c %s "$tmp/$2") $(sha256sum < "$tmp/$2" | cut -d' ' -f1)${3:+ $3}"
}
{
    echo "skua-update 1"
    echo "version $version"
    line root "skua_$version.root.raw" "$(uuid "${roots[0]}")"
    line verity "skua_$version.root-verity.raw" "$(uuid "${verities[0]}")"
    line uki "skua_$version.efi"
} > "$tmp/manifest"
# The manifest first (skuactl reads it before anything else), then the manifest's order.
tar -C "$tmp" --dereference --owner=0 --group=0 --numeric-owner --format=gnu -cf - \
    manifest "skua_$version.root.raw" "skua_$version.root-verity.raw" "skua_$version.efi" |
    zstd -q -T0 -6 -o "skua_$version.update.tmp" -f
mv "skua_$version.update.tmp" "skua_$version.update"
