#!/usr/bin/env bash
# Sets up, builds and runs TileMega from a fresh clone.
#
#   scripts/tilemega.sh main    set up, build, compile the example kernels and
#                               the mega-kernels (MLP chain, 16-layer decode
#                               step) to PTX/cubin artifacts in out/, run them
#                               on a GPU when one is present
#   scripts/tilemega.sh test    set up, build, run every test (lit + pytest)
#   scripts/tilemega.sh setup   only the virtual environment (.venv)
#   scripts/tilemega.sh build   setup + incremental build (build/)
#   scripts/tilemega.sh docs    regenerate docs/reference/ from ODS
#
# The pinned toolchain is read from pyproject.toml. Environment:
# TILEMEGA_VENV (.venv), TILEMEGA_BUILD (build), TILEMEGA_JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${TILEMEGA_VENV:-$ROOT/.venv}
BUILD=${TILEMEGA_BUILD:-$ROOT/build}
JOBS=${TILEMEGA_JOBS:-2}
PY=$VENV/bin/python

setup() {
  if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
  fi
  local pins
  pins=$("$PY" - <<'PYEOF'
import tomllib
cfg = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(cfg["build-system"]["requires"] + cfg["project"]["optional-dependencies"]["dev"]))
PYEOF
)
  # Skip pip entirely when every pin is already installed (fast reruns).
  if ! "$PY" - "$pins" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
for line in sys.argv[1].split():
    name, want = line.split("==")
    if version(name) != want:
        sys.exit(1)
PYEOF
  then
    "$PY" -m pip install --quiet --disable-pip-version-check $pins
  fi
}

build() {
  setup
  local site
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [ ! -f "$BUILD/build.ninja" ]; then
    cmake -G Ninja -S "$ROOT" -B "$BUILD" \
      -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR="$site/mlir/lib/cmake/mlir" \
      -DLLVM_DIR="$site/llvm/lib/cmake/llvm" \
      -DPython3_EXECUTABLE="$PY" \
      -Dnanobind_DIR="$("$PY" -m nanobind --cmake_dir)" \
      -DLLVM_EXTERNAL_LIT="$VENV/bin/lit"
  fi
  ninja -C "$BUILD" -j"$JOBS" tilemega-opt TileMegaPythonModules
}

env_for_python() {
  export PYTHONPATH="$BUILD/python_packages${PYTHONPATH:+:$PYTHONPATH}"
  export PATH="$BUILD/bin:$PATH"
}

case "${1:-}" in
  setup) setup ;;
  build) build ;;
  main)
    build
    env_for_python
    "$PY" examples/run_examples.py --out "$ROOT/out"
    "$PY" examples/run_mega.py --out "$ROOT/out"
    ;;
  test)
    build
    env_for_python
    "$VENV/bin/lit" "$BUILD/test" -v
    "$PY" -m pytest "$ROOT/test/pytest" -q -rs
    ;;
  docs)
    build
    ninja -C "$BUILD" mlir-doc
    mkdir -p "$ROOT/docs/reference"
    find "$BUILD/docs" -name '*.md' -exec cp {} "$ROOT/docs/reference/" \;
    ls "$ROOT/docs/reference"
    ;;
  *)
    sed -n '2,15p' "$0"
    exit 2
    ;;
esac
