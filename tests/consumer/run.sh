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
# libcollectives (which it does not need: it holds the library), our nccl.h, and a C99
# program built with -lnccl only.
libs=$(dirname "$libdir")
test -e "$libs/libnccl.so" && test -e "$libs/libnccl.so.2"
readelf -d "$libs/libnccl.so.2" | grep -q 'SONAME.*\[libnccl.so.2\]'
if readelf -d "$libs/libnccl.so.2" | grep -E 'NEEDED.*(libcollectives|libhwloc)'; then
  echo "FAIL: the installed libnccl.so.2 needs libcollectives or libhwloc" >&2; exit 1
fi
cc -std=c99 -Wall -Wextra -pedantic -Werror "$src/tests/consumer/nccl_main.c" -o "$prefix/nccl_pc" \
   -I"$prefix/include/collectives/nccl" -L"$libs" -lnccl
COLL_SOCKET_IFNAME=lo LD_LIBRARY_PATH="$libs" "$prefix/nccl_pc"

# torch_collectives as installed (when built): it loads libcollectives from the prefix
# with no LD_LIBRARY_PATH, registers its backend, and installed with the prefix of the
# Python environment it was built for (cmake --install build --prefix .venv) its folder
# is on that environment's path (so no PYTHONPATH is needed there).
if [ -d "$build/python/torch_collectives" ]; then
  pydir=$(sed -n 's/^COLL_PYTHON_INSTALL_DIR:STRING=//p' "$build/CMakeCache.txt")
  python=$(sed -n 's/^COLL_TORCH_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt")
  test -n "$pydir" && test -f "$prefix/$pydir/torch_collectives/__init__.py"
  env -u LD_LIBRARY_PATH PYTHONPATH="$prefix/$pydir" "$python" -c "
import torch.distributed as dist, torch_collectives
assert torch_collectives.__file__.startswith('$prefix'), torch_collectives.__file__
assert 'COLLECTIVES' in dist.Backend._plugins
print('torch_collectives installed: library version', torch_collectives.library_version())"
  "$python" -c "import os, sys; d=os.path.join(sys.prefix, '$pydir'); assert d in sys.path, d + ' is not on ' + str(sys.path)"
fi
