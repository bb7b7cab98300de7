#!/usr/bin/env bash
# Builds the appliance image: skuad (release) staged into an extra tree, then mkosi.
#   image/build.sh [--broken] [--profile NAME] [--out DIR] [VERSION]     default: the version in image/mkosi.version
# Outputs in DIR (default image/mkosi.output): skua_VERSION.raw (disk), skua_VERSION.qcow2,
# the split artifacts (skua_VERSION.root.UUID.raw, skua_VERSION.root-verity.UUID.raw,
# skua_VERSION.efi) and the update bundle skua_VERSION.update (what `skuactl upgrade` takes).
# --broken: a deliberately bad release for the rollback test: its built-in skuad.conf serves an
# address the appliance does not have, so skuad never becomes ready and the health gate fails.
# --profile NAME: mkosi's profile image/mkosi.profiles/NAME.conf on top (`bench`: knotd and the
# bench zone for `just bench`; build it into its own --out).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
broken=0
profile=()
out=$here/mkosi.output
while [[ $# -gt 0 ]]; do
    case $1 in
        --broken) broken=1 ;;
        --profile) profile=(--profile="$2"); shift ;;
        --out) out=$(mkdir -p "$2" && cd "$2" && pwd); shift ;;
        -*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
version=${1:-$(cat "$here/mkosi.version")}
[[ $version =~ ^[0-9]+$ ]] || { echo "build.sh: version must be a number, got '$version'" >&2; exit 2; }
stage=$out/stage
rm -rf "$stage"
mkdir -p "$stage/usr/bin" "$stage/usr/share/skua"
(cd "$root" && cargo build --release --locked -p skuad -p skuactl)
for b in skuad skuactl; do
    install -m 0755 "$root/target/release/$b" "$stage/usr/bin/$b"
    strip --strip-unneeded "$stage/usr/bin/$b"
done
cp "$root/README.md" "$stage/usr/share/skua/README"
if [[ $broken == 1 ]]; then
    mkdir -p "$stage/usr/lib/skua"
    sed 's/^    interface: 198.18.1.2$/    interface: 198.18.1.99/' "$here/mkosi.extra/usr/lib/skua/skuad.conf" \
        > "$stage/usr/lib/skua/skuad.conf"
    grep -q "interface: 198.18.1.99" "$stage/usr/lib/skua/skuad.conf"
fi
# mkosi -f does not remove split files whose names changed (image.md pitfall 7).
rm -f "$out"/skua_*
cd "$here"
mkosi -f "${profile[@]}" --image-version="$version" --extra-tree="$stage" --output-dir="$out" build
raw=$out/skua_$version.raw
qemu-img convert -O qcow2 "$raw" "$out/skua_$version.qcow2"
"$here/bundle.sh" "$out" "$version"
bundle=$out/skua_$version.update
echo "image: $raw ($(du -h --apparent-size "$raw" | cut -f1) apparent, $(du -h "$raw" | cut -f1) allocated);" \
    "update bundle $bundle: $(( $(stat -c %s "$bundle") / 1000000 )) MB"
