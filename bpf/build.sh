#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Builds bpf/skua_xdp.bpf.o from bpf/skua_xdp.bpf.c, byte for byte reproducibly.
#
#   bpf/build.sh            rebuild the committed object in place
#   bpf/build.sh OUT.o      build into OUT.o (bpf/check.sh uses this)
#
# Needs: clang and llvm (llvm-strip, llvm-readelf), plus linux-libc-dev for the UAPI headers.
# Debian: apt-get install clang llvm linux-libc-dev. No libbpf-dev: the program declares the
# few libbpf macros it uses itself.
#
# Reproducibility:
#   - compiled from inside bpf/ with a relative source path, and -fdebug-prefix-map maps the
#     absolute directory to "." so no checkout path lands in DWARF or in .BTF.ext;
#   - llvm-strip -g then drops DWARF (the kernel reads BTF, not DWARF) but keeps .BTF and
#     .BTF.ext (checked below: without them aya cannot resolve the BTF-defined maps and the
#     kernel loses line info in verifier logs and `bpftool prog dump`);
#   - -fno-ident leaves out the .comment section, so the object does not record the exact
#     clang build string. Codegen still depends on the clang major version: the committed
#     object is built with Debian 12's clang 14.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/skua_xdp.bpf.o}
case $out in /*) ;; *) out=$(pwd)/$out ;; esac

CLANG=${CLANG:-clang}
LLVM_STRIP=${LLVM_STRIP:-llvm-strip}
LLVM_READELF=${LLVM_READELF:-llvm-readelf}
# Debian's multiarch asm/ headers (asm/types.h); harmless where they do not exist.
MULTIARCH=${MULTIARCH:-/usr/include/$(uname -m)-linux-gnu}

tmp=$(mktemp "${TMPDIR:-/tmp}/skua_xdp.XXXXXX")
trap 'rm -f "$tmp"' EXIT INT TERM

cd "$here"
"$CLANG" -O2 -g -target bpf -mcpu=v3 \
	-Wall -Wextra -Werror \
	-fno-ident \
	-fdebug-prefix-map="$here"=. \
	-I. -I"$MULTIARCH" \
	-c skua_xdp.bpf.c -o "$tmp"
"$LLVM_STRIP" -g "$tmp"

sections=$("$LLVM_READELF" -S --wide "$tmp")
for s in .BTF .BTF.ext .maps xdp license; do
	if ! printf '%s\n' "$sections" | awk -v s="$s" '$2 == s || $3 == s { f = 1 } END { exit !f }'; then
		echo "build.sh: section $s missing from the object" >&2
		exit 1
	fi
done
if grep -a -q -F "$here" "$tmp"; then
	echo "build.sh: the object embeds the build path $here" >&2
	exit 1
fi

cp "$tmp" "$out"
