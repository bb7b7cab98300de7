#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Fails if bpf/skua_xdp.bpf.o is not exactly what bpf/build.sh makes from the sources, i.e.
# someone edited skua_xdp.bpf.c or skua_xdp_abi.h without rebuilding (or rebuilt with another
# clang). CI runs it after `apt-get install -y clang llvm` (linux-libc-dev comes with
# libc6-dev / build-essential).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp "${TMPDIR:-/tmp}/skua_xdp_check.XXXXXX")
trap 'rm -f "$tmp"' EXIT INT TERM

"$here/build.sh" "$tmp"
clang_version=$(${CLANG:-clang} --version | head -n 1)
if cmp -s "$tmp" "$here/skua_xdp.bpf.o"; then
	echo "bpf/check.sh: skua_xdp.bpf.o is up to date ($clang_version)"
	exit 0
fi
echo "bpf/check.sh: skua_xdp.bpf.o differs from a fresh build;" \
	"run bpf/build.sh and commit the object" >&2
echo "bpf/check.sh: (it is built with Debian 12's clang 14; this is $clang_version)" >&2
exit 1
