#!/usr/bin/env bash
# Installs the package (the library and the PyTorch backend torch_collectives) into the
# project's .venv with pip, reusing the build folder scripts/build.sh configured, so
# nothing is compiled twice: `pip install .` with scikit-build-core (pyproject.toml).
# Afterwards `.venv/bin/python -c "import torch_collectives"` works from any folder.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
VENV=${COLL_VENV:-.venv}
"$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --config-settings=build-dir="$BUILD_DIR" --config-settings=cmake.define.COLL_BUILD_TESTS=ON .
# pip's configure left its own settings (SKBUILD_*: the wheel's layout) in the folder's
# cache; without them the folder installs with `cmake --install` as before.
cmake -S . -B "$BUILD_DIR" -U 'SKBUILD*' > /dev/null
"$VENV/bin/python" -c "import torch, torch_collectives as t; print('torch_collectives installed in $VENV: torch', torch.__version__, '- library', t.library_version())"
