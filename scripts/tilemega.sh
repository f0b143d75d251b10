#!/usr/bin/env bash
# Sets up, builds and runs TileMega from a fresh clone.
#
#   scripts/tilemega.sh main       set up, build, compile every shipped artifact
#                                  (examples/shipped.py: example kernels,
#                                  benchmark GEMMs, mega-kernels) to PTX/cubin
#                                  in out/, check them against float64 on a
#                                  GPU when one is present
#   scripts/tilemega.sh test       set up, build, run every test (lit + pytest)
#   scripts/tilemega.sh setup      only the virtual environment (.venv)
#   scripts/tilemega.sh build      setup + incremental build (build/)
#   scripts/tilemega.sh docs       regenerate docs/reference/ from ODS
#   scripts/tilemega.sh gpu-check  GPU machine, runtime only: every artifact in
#                                  out/ against float64; verdicts + PTX hashes
#                                  into test/gpu/results.json
#   scripts/tilemega.sh sanitize   GPU machine: compute-sanitizer memcheck,
#                                  racecheck, synccheck, initcheck over the
#                                  examples and mega workloads, into the same file
#
# The pinned toolchain is read from pyproject.toml. Environment:
# TILEMEGA_VENV (.venv), TILEMEGA_BUILD (build), TILEMEGA_JOBS (2),
# TILEMEGA_ARTIFACTS (out; gpu-check and sanitize), PYTHON (python3; the
# GPU machine's interpreter with torch and cuda-python).
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
    "$PY" examples/shipped.py "$ROOT/out"
    if "$PY" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
      "$PY" examples/gpu_check.py --artifacts "$ROOT/out" --no-write
    else
      echo "not running the kernels: no torch with a CUDA GPU here"
    fi
    ;;
  gpu-check)
    PYTHONPATH="$ROOT/python" "${PYTHON:-python3}" examples/gpu_check.py \
      --artifacts "${TILEMEGA_ARTIFACTS:-$ROOT/out}"
    ;;
  sanitize)
    PYTHONPATH="$ROOT/python" "${PYTHON:-python3}" examples/gpu_sanitize.py \
      --artifacts "${TILEMEGA_ARTIFACTS:-$ROOT/out}"
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
    sed -n '2,26p' "$0"
    exit 2
    ;;
esac
