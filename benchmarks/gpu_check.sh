#!/usr/bin/env bash
# GPU check of tiinterp on a CUDA machine: bash benchmarks/gpu_check.sh [gpu_check.py options]
#
# Installs the wheels carried in .whl/ (Taichi 1.7.4 and its pure-Python dependencies, for
# a machine without network) into /tmp/site, prints the GPU and the versions, then runs
# benchmarks/gpu_check.py, which writes $OUT/gpu_check.json and $OUT/gpu_check.md (OUT
# defaults to benchmarks/out) and exits 1 if any check fails: first the test suite's device
# tests on the arch (tests/ops/test_device_agreement.py and tests/runtime/test_threads.py,
# TIINTERP_TEST_ARCHS=cuda: every resize mode on Taichi ndarrays against the oracle,
# tiinterp.torch on CUDA tensors against PyTorch CUDA, determinism at W1's scale, calls from
# other threads), then the timings: the per-call cost of small calls (tiny, W4), and W1-W3,
# G1 (grid_sample forward and backward), a 3-D trilinear case and a large batch against
# PyTorch CUDA, each ratio tiinterp's time / PyTorch's next to issue 23's target. Designed
# to end within 8 minutes on an H200; every section has its own time limit.
#
# The tests need pytest: the GPU machines' Python has it; for one without, carry its wheels
# (pytest, pluggy, iniconfig, packaging) in .whl/ with the others.
#
# Environment: PYTHON (default python3), OUT, SKIP_WHEELS=1 (use the Taichi already
# installed, for example in a venv), TI_OFFLINE_CACHE_FILE_PATH (Taichi's kernel cache;
# default a fresh folder under /tmp). Test on a machine without a GPU (the CPU, or a
# Vulkan device such as Mesa's lavapipe, stands in for the GPU; PyTorch runs on the CPU):
#   PYTHON=.venv/bin/python SKIP_WHEELS=1 bash benchmarks/gpu_check.sh --arch cpu --quick
#   PYTHON=.venv/bin/python SKIP_WHEELS=1 bash benchmarks/gpu_check.sh --arch vulkan --quick
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-benchmarks/out}
SITE=/tmp/site

if [[ "${SKIP_WHEELS:-0}" != 1 ]]; then
  shopt -s nullglob
  wheels=(.whl/*.whl)
  shopt -u nullglob
  if ((${#wheels[@]} == 0)); then
    echo "gpu_check.sh: no wheels in .whl/ (carry it, or set SKIP_WHEELS=1)" >&2
    exit 2
  fi
  echo "== installing ${#wheels[@]} wheels into $SITE"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --disable-pip-version-check --upgrade --target "$SITE" "${wheels[@]}"
  export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
# A fresh kernel cache per run: compile times are part of what this check reports.
export TI_OFFLINE_CACHE_FILE_PATH=${TI_OFFLINE_CACHE_FILE_PATH:-$(mktemp -d /tmp/gpu_check_ticache.XXXXXX)}
export PYTHONUNBUFFERED=1
# Taichi 1.7.4's sources have escape sequences that Python 3.12 warns about at each import.
export PYTHONWARNINGS=${PYTHONWARNINGS:-ignore::SyntaxWarning}

echo "== GPU"
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi -L || true
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv ||
    true
else
  echo "(no nvidia-smi)"
fi
echo "== versions"
timeout 120 "$PYTHON" - <<'EOF' || echo "(versions: failed)"
import platform
import numpy
print("python", platform.python_version(), "| numpy", numpy.__version__)
try:
    import torch
    cuda = torch.version.cuda
    print("torch", torch.__version__, "| CUDA", cuda, "| available", torch.cuda.is_available())
except ImportError:
    print("torch: not installed")
import tiinterp  # before taichi: it imports Taichi without its banner
import taichi
print("taichi", ".".join(map(str, taichi.__version__)), "from", taichi.__file__.rsplit("/", 2)[0])
print("tiinterp", tiinterp.__version__, "from", tiinterp.__file__.rsplit("/", 2)[0])
print("archs", tiinterp.available_archs())
try:
    import pytest
    print("pytest", pytest.__version__, "from", pytest.__file__.rsplit("/", 2)[0])
except ImportError:
    print("pytest: not installed (the device tests will fail: carry its wheels in .whl/)")
EOF

echo "== gpu_check.py (results in $OUT)"
exec "$PYTHON" benchmarks/gpu_check.py --out "$OUT" "$@"
