#!/usr/bin/env bash
# Installs the Debian 12 packages the build and tests need, only those missing.
set -euo pipefail
# ninja-build: the generator of fresh build folders (scripts/build.sh); openmpi-bin: the mpirun launch test; iproute2: the network-namespace test; python3: JSON checks;
# python3-matplotlib: perf_tests/plot; python3-torch, libtorch-dev, pybind11-dev, python3-dev: the PyTorch
# backend (python/), built and tested when they are present; clang-format: the format test; clang: the
# libFuzzer targets (scripts/fuzz.sh, run briefly by scripts/test.sh).
pkgs=(cmake g++ make ninja-build pkg-config libhwloc-dev catch2 libcli11-dev libibverbs-dev openmpi-bin python3 iproute2
      python3-matplotlib python3-torch libtorch-dev pybind11-dev python3-dev clang-format clang)
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
