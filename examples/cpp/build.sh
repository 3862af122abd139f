#!/bin/sh
# Builds da3_depth against the libLiteRt.so of the ai-edge-litert wheel:
#   examples/cpp/build.sh [LIBDIR] [OUT]
# LIBDIR: the folder holding libLiteRt.so (default: the ai_edge_litert package of ./.venv);
# OUT: the binary to write (default: build/da3_depth). The rpath lets it find the library where it is.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
libdir=${1:-$(cd "$here/../.." && pwd)/.venv/lib/python3.11/site-packages/ai_edge_litert}
out=${2:-build/da3_depth}
[ -f "$libdir/libLiteRt.so" ] || { echo "no libLiteRt.so in $libdir" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
${CXX:-g++} -std=c++17 -O2 -Wall -Wextra -Werror "$here/da3_depth.cc" -o "$out" \
  -L"$libdir" -lLiteRt -Wl,-rpath,"$libdir"
echo "$out"
