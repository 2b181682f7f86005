"""``tiinterp.warmup``: after it, resizes of its modes on the CPU with results of at most
2^16 elements compile no kernel, whatever their size and scale (Note [Bounded kernel
variants] in tiinterp/_kernels/simd.py); bad arguments are refused."""

import json
import subprocess
import sys

import pytest

import tiinterp

# A fresh process: the test process has compiled kernels of its own, which would hide a form
# that warmup misses. Counts the kernels Taichi compiles (materializes) after warmup, for 20
# photo-like sizes resized to 64 columns, with and without antialias.
_AFTER_WARMUP = """
import json, sys
import numpy as np
import tiinterp
from tiinterp._runtime.taichi import submodule

arch, mode = sys.argv[1:3]
tiinterp.init(arch)
tiinterp.warmup(mode)
kernel_impl = submodule("lang.kernel_impl")
compiled = []
materialize = kernel_impl.Kernel.materialize

def counting(self, key=None, *args, **kwargs):  # taichi-forge passes more keywords
    if key is not None and key not in self.compiled_kernels:
        compiled.append(self.func.__qualname__)
    return materialize(self, key, *args, **kwargs)

kernel_impl.Kernel.materialize = counting
rng = np.random.default_rng(7)
for h, w in zip(rng.integers(90, 224, 20), rng.integers(120, 330, 20)):
    x = rng.random((1, 3, int(h), int(w))).astype(np.float32)
    size = (max(1, round(h * 64 / w)), 64)
    for antialias in (False, True):
        y = tiinterp.interpolate(x, size=size, mode=mode, antialias=antialias)
        assert y.shape == (1, 3, *size)
print("COMPILED" + json.dumps(compiled))
"""


@pytest.mark.cpu_kernels  # the device path's kernels are not bounded so yet (issue 46)
@pytest.mark.parametrize("mode", ["bicubic", "lanczos3"])
def test_no_kernel_compiles_after_warmup_for_new_image_sizes(arch, mode):
    run = subprocess.run(
        [sys.executable, "-c", _AFTER_WARMUP, arch, mode],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("COMPILED"))
    assert json.loads(line[len("COMPILED") :]) == []


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"modes": "bilinearr"}, ValueError, "modes: expected names from"),
        ({"modes": ["bilinear", 3]}, TypeError, "modes: expected a str or a sequence of str"),
        ({"modes": []}, ValueError, "modes: expected names from"),
        ({"modes": "bilinear", "dtypes": "float16"}, ValueError, "dtypes: expected names"),
        ({"modes": "bilinear", "antialias": 1}, TypeError, "antialias: expected True, False"),
        ({"modes": "bilinear", "backward": None}, TypeError, "backward: expected a bool"),
    ],
)
def test_warmup_refuses_bad_arguments(arguments, error, message):
    with pytest.raises(error, match=message):
        tiinterp.warmup(**arguments)
