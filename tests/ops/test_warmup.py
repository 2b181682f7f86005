"""``tiinterp.warmup``: after it, resizes of its modes with results of at most 2^16 elements
compile no kernel, whatever their size and scale (Note [Bounded kernel variants] in
tiinterp/_kernels/simd.py, Note [What warmup runs] in tiinterp/_ops/warmup.py); bad
arguments are refused."""

import json
import subprocess
import sys

import pytest

import tiinterp

# A fresh process: the test process has compiled kernels of its own, which would hide a form
# that warmup misses. Counts the kernels Taichi compiles (materializes) after warmup, for
# resizes with results of at most 2^16 elements: 20 photo-like sizes resized to 64 columns,
# with and without antialias; 40 random sizes, each axis kept, enlarged or reduced by its
# own random factor; and the command line's two one-axis passes of 10 photos.
# Counts into ``compiled`` the kernels Taichi compiles (materializes) from there on, each
# with the call that made it (``call[0]``, set by the script).
_COUNTING = """
from tiinterp._runtime.taichi import submodule

kernel_impl = submodule("lang.kernel_impl")
compiled = []
materialize = kernel_impl.Kernel.materialize
call = [""]

def counting(self, key=None, *args, **kwargs):  # taichi-forge passes more keywords
    if key is not None and key not in self.compiled_kernels:
        compiled.append(f"{self.func.__qualname__} for {call[0]}")
    return materialize(self, key, *args, **kwargs)

kernel_impl.Kernel.materialize = counting
"""
_AFTER_WARMUP = (
    """
import json, sys
import numpy as np
import tiinterp
from tiinterp.cli.raster import Planes, resample_planes

arch, mode = sys.argv[1:3]
tiinterp.init(arch)
tiinterp.warmup(mode)
"""
    + _COUNTING
    + """rng = np.random.default_rng(7)

def resize(shape, size, antialias):
    call[0] = f"{shape} -> {size}, antialias={antialias}"
    x = rng.random(shape).astype(np.float32)
    y = tiinterp.interpolate(x, size=size, mode=mode, antialias=antialias)
    assert y.shape == (*shape[:2], *size)

for h, w in zip(rng.integers(90, 224, 20), rng.integers(120, 330, 20)):
    for antialias in (False, True):
        resize((1, 3, int(h), int(w)), (max(1, round(h * 64 / w)), 64), antialias)
done = 0
while done < 40:
    shape = (1, 3, int(rng.integers(1, 300)), int(rng.integers(1, 300)))
    factors = [rng.choice([1.0, rng.uniform(0.03, 1.0), rng.uniform(1.0, 4.0)]) for _ in "hw"]
    size = tuple(max(1, round(n * f)) for n, f in zip(shape[2:], factors))
    if 3 * size[0] * size[1] <= 2**16:
        resize(shape, size, bool(rng.integers(2)))
        done += 1
for h, w in zip(rng.integers(90, 224, 10), rng.integers(120, 330, 10)):
    call[0] = f"the command line's passes of a {w}x{h} photo"
    planes = Planes(rng.uniform(0, 255, (1, 3, h, w)).astype(np.float32), "RGB", None, np.uint8)
    resample_planes(planes, 64, max(1, round(64 * h / w)), mode, True)
print("COMPILED" + json.dumps(compiled))
"""
)


def compiled_after_warmup(script, *arguments):
    """The kernels that ``script``, run in a fresh process, reports compiled after warmup."""
    run = subprocess.run(
        [sys.executable, "-c", script, *arguments],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("COMPILED"))
    return json.loads(line[len("COMPILED") :])


@pytest.mark.parametrize("mode", ["lanczos3"])  # its classes: narrow, WIDE and generic
def test_no_kernel_compiles_after_warmup_for_new_image_sizes(arch, mode):
    assert compiled_after_warmup(_AFTER_WARMUP, arch, mode) == []


# Small results of many lines (their middle-axis loops not serialised), on both store forms:
# the call the issue found compiling ((1, 3, 250, 60) -> (200, 60) with antialias) and 60
# random small-result resizes with antialias, many of them tall and narrow.
_TALL_AFTER_WARMUP = (
    """
import json, sys
import numpy as np
import tiinterp

tiinterp.init(sys.argv[1])
tiinterp.warmup("bilinear", antialias=True)
"""
    + _COUNTING
    + """rng = np.random.default_rng(11)
calls = [((1, 3, 250, 60), (200, 60))]
while len(calls) < 61:
    shape = (1, 3, int(rng.integers(1, 700)), int(rng.integers(1, 130)))
    factors = [rng.choice([1.0, rng.uniform(0.05, 1.0), rng.uniform(1.0, 3.0)]) for _ in "hw"]
    size = tuple(max(1, round(n * f)) for n, f in zip(shape[2:], factors))
    if 3 * size[0] * size[1] <= 2**16:
        calls.append((shape, size))
for shape, size in calls:
    call[0] = f"{shape} -> {size}"
    x = rng.random(shape).astype(np.float32)
    tiinterp.interpolate(x, size=size, mode="bilinear", antialias=True)
print("COMPILED" + json.dumps(compiled))
"""
)


def test_no_kernel_compiles_after_warmup_for_tall_small_results(arch):
    """Before, warmup's small images all had loops of at most 512 lines, run serially: a
    small result of more lines compiled the parallel form on its first call."""
    assert compiled_after_warmup(_TALL_AFTER_WARMUP, arch) == []


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
