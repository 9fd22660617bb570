#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds the consumer against it twice:
# with find_package(Collectives) and with pkg-config. Args: build dir, source dir.
set -euo pipefail
build=$1; src=$2
prefix=$(mktemp -d); trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$prefix/cb" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cb" >/dev/null
COLL_SOCKET_IFNAME=lo LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64:${LD_LIBRARY_PATH:-}" "$prefix/cb/consumer"
libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -1)
cc -std=c99 -Wall -Wextra -pedantic -Werror "$src/tests/consumer/main.c" -o "$prefix/pc" \
   $(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs collectives)
COLL_SOCKET_IFNAME=lo LD_LIBRARY_PATH="$(dirname "$libdir")" "$prefix/pc"

# The NCCL drop-in as installed: libnccl.so.2 (soname) and libnccl.so beside
# libcollectives, our nccl.h, and a C99 program built with -lnccl only.
libs=$(dirname "$libdir")
test -e "$libs/libnccl.so" && test -e "$libs/libnccl.so.2"
readelf -d "$libs/libnccl.so.2" | grep -q 'SONAME.*\[libnccl.so.2\]'
cc -std=c99 -Wall -Wextra -pedantic -Werror "$src/tests/consumer/nccl_main.c" -o "$prefix/nccl_pc" \
   -I"$prefix/include/collectives/nccl" -L"$libs" -lnccl
COLL_SOCKET_IFNAME=lo LD_LIBRARY_PATH="$libs" "$prefix/nccl_pc"
