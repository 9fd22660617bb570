#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
# Ranks are threads and processes competing for 2 cores: run test programs one at a time.
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900
# The fuzz smoke: the libFuzzer targets built (build-fuzz) and run 10 s each from their
# seed corpora, failing on any crash (about 2 minutes on 2 cores, build included).
bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
