#!/usr/bin/env bash
# Installs what the build and tests need, only what is missing: Debian 12 packages with
# apt-get, then the project's Python environment .venv (torch and the test tools, pinned
# in python/requirements.txt) with pip from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
# ninja-build: the generator of fresh build folders (scripts/build.sh); openmpi-bin: the mpirun launch test; iproute2: the network-namespace test; python3: JSON checks;
# python3-matplotlib: perf_tests/plot; python3-venv, python3-dev: the .venv and the PyTorch backend's
# headers (python/); clang-format: the format test; clang: the libFuzzer targets (scripts/fuzz.sh, run
# briefly by scripts/test.sh).
pkgs=(cmake g++ make ninja-build pkg-config libhwloc-dev catch2 libcli11-dev libibverbs-dev openmpi-bin python3 iproute2
      python3-matplotlib python3-venv python3-dev clang-format clang)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Python environment: Debian's python3 (3.11) with the pinned requirements. A stamp
# holding the requirements' checksum skips pip when nothing changed (about 1 minute
# from PyPI, seconds from pip's cache, when it runs).
# NVIDIA's NCCL release the drop-in implements (python/nccl_reference.txt) goes into its
# own folder, $VENV/nccl-reference, not into the environment (torch pins another NCCL):
# its nccl.h is what tests/nccl compares the drop-in's symbols, layouts and calls with.
VENV=${COLL_VENV:-.venv}
stamp="$VENV/.requirements.sha256"
want=$(cat python/requirements.txt python/nccl_reference.txt | sha256sum | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up $VENV (python/requirements.txt, python/nccl_reference.txt)"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r python/requirements.txt
  rm -rf "$VENV/nccl-reference"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --target "$VENV/nccl-reference" \
    -r python/nccl_reference.txt
  echo "$want" > "$stamp"
fi
