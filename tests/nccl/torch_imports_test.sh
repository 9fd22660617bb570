#!/usr/bin/env bash
# Every NCCL function PyTorch's CUDA libraries import (libtorch_cuda.so and the rest of
# torch/lib, built against NVIDIA's newest nccl.h) is one our libnccl.so.2 exports, so
# torch finds all of them when our library replaces NVIDIA's (site-packages/nvidia/nccl/lib,
# LD_PRELOAD). Reads symbol tables only: no GPU needed. Exit 77 (skipped) where the
# interpreter has no torch.
# Usage: torch_imports_test.sh PYTHON LIBNCCL
set -uo pipefail
py=$1 lib=$2
# torch's lib folder without importing torch (seconds saved): its spec's location.
tl=$("$py" -c 'import importlib.util as u, os; print(os.path.join(os.path.dirname(u.find_spec("torch").origin), "lib"))' \
  2>/dev/null) || { echo "skipped: $py has no torch"; exit 77; }
imports=$(for f in "$tl"/*.so*; do nm -D --undefined-only "$f" 2>/dev/null; done | awk '$2 ~ /^p?nccl/ {print $2}' | sort -u)
[ -n "$imports" ] || { echo "skipped: torch in $tl imports no nccl* function (a build without NCCL)"; exit 77; }
exports=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sort -u)
missing=$(comm -23 <(echo "$imports") <(echo "$exports"))
echo "torch ($tl) imports $(echo "$imports" | wc -l) nccl functions; $lib exports $(echo "$exports" | wc -l)"
if [ -n "$missing" ]; then
  echo "missing from $lib:"
  echo "$missing"
  exit 1
fi
echo "every one is exported"
