"""What the benchmark scripts share: the workloads, timing, the machine a run records, the
processes that time a first call, and writing the reports (JSON, Markdown tables, a block
of a page).

bench.py, small_calls.py, backends.py and gpu_check.py import it as a module beside them (they
are scripts, not a package: each puts benchmarks/ on sys.path first, so that docs/hooks.py
and the tests, which load a script by its path, find it too). Importing it imports neither
tiinterp, torch nor Taichi: tensor_calls and resize_calls import them when called.
"""

import contextlib
import dataclasses
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

# --- Workloads ---------------------------------------------------------------------------------

# (input shape, size) of the resizes the benchmarks are named by (issues 23 and 24, the
# performance page): W1 2x up, W2 2x down, W3 a non-integer ratio, W4 a small image.
WORKLOADS = {
    "W1": ((8, 16, 256, 256), (512, 512)),
    "W2": ((8, 16, 512, 512), (256, 256)),
    "W3": ((4, 3, 333, 517), (480, 640)),
    "W4": ((1, 3, 64, 64), (128, 128)),
}
# A resize with almost no work: what a call costs before its kernels do anything.
TINY = ((1, 1, 8, 8), (16, 16))


# --- Timing ------------------------------------------------------------------------------------

# Short calls are timed until they add up to MIN_TIMED_SECONDS too (at most MAX_TIMED_CALLS):
# a median of 5 sub-millisecond calls swung 2x between runs on the development machine (W3
# nearest-exact 0.7 ms in one run, 1.8 in the next, for the same kernel), while calls of
# 10 ms and more already take that long in 5.
MIN_TIMED_SECONDS = 0.1
MAX_TIMED_CALLS = 200


@dataclasses.dataclass(frozen=True)
class Timing:
    repeats: int
    # A few warm-up calls: besides compiling, the first calls that allocate large fresh
    # outputs page-fault far more than later ones on this machine (measured 5x).
    warmup: int
    # 0: exactly ``repeats`` timed calls (gpu_check.py's device timings).
    min_seconds: float = MIN_TIMED_SECONDS
    max_calls: int = MAX_TIMED_CALLS


def median_time(fn, timing, sync=None):
    """The median seconds of ``fn()`` (each followed by ``sync()``, a device's, if given): at
    least ``timing.repeats`` calls, and more while they add up to less than
    ``timing.min_seconds``, after ``timing.warmup`` untimed ones."""
    for _ in range(timing.warmup):
        fn()
        if sync is not None:
            sync()
    times = []
    while len(times) < timing.repeats or (
        sum(times) < timing.min_seconds and len(times) < timing.max_calls
    ):
        start = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def block_us(fn, calls, timing):
    """Microseconds per call of ``fn``: the median time of ``calls`` calls back to back,
    divided by their number."""
    return median_time(lambda: [fn() for _ in range(calls)], timing) / calls * 1e6


def inputs(rng, in_shape, size, dtype=np.float32):
    """A resize's input and a gradient for its output: uniform in [0, 1)."""
    x = rng.random(in_shape, dtype=dtype)
    return x, rng.random((*in_shape[:2], *size), dtype=dtype)


def tensor_calls(x, g, size, interpolate=None, device="cpu", **call):
    """{"forward" or "backward": call} of ``interpolate`` (F.interpolate, or tiinterp.torch's)
    on tensors of the NumPy arrays x and g on device: x resized to size, and
    torch.autograd.grad of a forward made once, for the gradient g."""
    import torch

    interpolate = interpolate or torch.nn.functional.interpolate
    xt, gt = torch.from_numpy(x).to(device), torch.from_numpy(g).to(device)
    xg = xt.clone().requires_grad_(True)
    yt = interpolate(xg, size=size, **call)
    return {
        "forward": lambda: interpolate(xt, size=size, **call),
        "backward": lambda: torch.autograd.grad(yt, xg, gt, retain_graph=True),
    }


def resize_calls(x, g, size, **call):
    """{"tiinterp" or "torch": {"forward" or "backward": call}}: x resized to size, and the
    backward of the gradient g, by tiinterp (its adjoint) and by PyTorch (tensor_calls), on
    the same NumPy arrays."""
    import tiinterp

    tiinterp_calls = {
        "forward": lambda: tiinterp.interpolate(x, size=size, **call),
        "backward": lambda: tiinterp.interpolate_backward(g, x.shape, **call),
    }
    return {"tiinterp": tiinterp_calls, "torch": tensor_calls(x, g, size, **call)}


def progress(message):
    print(f"  .. {message}", file=sys.stderr, flush=True)


# --- Fresh processes ---------------------------------------------------------------------------


class ProcessFailed(RuntimeError):
    pass


def run(args, cache, env=None, stderr=subprocess.PIPE):
    """Runs args with TI_OFFLINE_CACHE_FILE_PATH=cache and the variables env; (wall seconds,
    stdout). stderr=None leaves its stderr on this process's (its last line then goes
    unreported when it fails)."""
    env = dict(os.environ, **(env or {}), TI_OFFLINE_CACHE_FILE_PATH=str(cache))
    start = time.perf_counter()
    done = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        if done.returncode < 0:
            how = f"killed by {signal.Signals(-done.returncode).name}"
        else:
            how = f"exit status {done.returncode}"
        last = (done.stderr or "").strip().splitlines()[-1:]
        raise ProcessFailed(f"{how}{': ' + last[0] if last else ''}")
    return seconds, done.stdout


def last_float(stdout):
    """The figure a timing script prints on its last line (Taichi may print before it)."""
    lines = stdout.strip().splitlines()
    try:
        return float(lines[-1])
    except (IndexError, ValueError):
        raise ProcessFailed(f"expected a number on the last line, got {stdout[-200:]!r}") from None


def cold_and_warm(code, cache):
    """The figure of the Python script ``code`` on an empty cache folder, then again on the
    cache it left."""
    cold = last_float(run([sys.executable, "-c", code], cache)[1])
    warm = last_float(run([sys.executable, "-c", code], cache)[1])
    return cold, warm


# --- The machine ---------------------------------------------------------------------------------


def cpu_name():
    """The CPU's model name (/proc/cpuinfo), else what the platform module says."""
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_facts():
    """What every run records of its machine; each script adds its libraries."""
    return {
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_name(),
        "numpy": np.__version__,
    }


def version_text(version):
    """A version as text: Taichi's are tuples, (1, 7, 4) -> "1.7.4"."""
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def installed_version(package):
    """The installed distribution's version, or None."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


# --- Reports -----------------------------------------------------------------------------------


def clean_json(value):
    """JSON without NaN/Infinity (written as strings) and with plain Python numbers."""
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def write_json(path, data):
    pathlib.Path(path).write_text(json.dumps(clean_json(data), indent=1))


def markdown_row(cells):
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def markdown_table(header, rows=()):
    """The lines of a Markdown table: the header, the separator, a line per row of cells."""
    return [markdown_row(header), "|---" * len(header) + "|", *map(markdown_row, rows)]


def ms(seconds):
    """Seconds as milliseconds, three decimals below 1 ms, one above."""
    value = seconds * 1e3
    return f"{value:.3f}" if value < 1 else f"{value:.1f}"


def replace_block(text, block, name, start, end):
    """text with everything between the markers start and end (each there once, in that
    order) replaced by block, on lines of its own."""
    starts, ends = text.count(start), text.count(end)
    if (starts, ends) != (1, 1):
        raise ValueError(f"{name}: expected one {start!r} and one {end!r}, got {starts} and {ends}")
    head, rest = text.split(start)
    if end not in rest:
        raise ValueError(f"{name}: expected {start!r} before {end!r}")
    _, tail = rest.split(end)
    return f"{head}{start}\n{block}\n{end}{tail}"


def load_or_measure(path, render_only, measure):
    """The results in path (--render-only), or measure()'s, written to path."""
    if render_only:
        return json.loads(pathlib.Path(path).read_text())
    results = measure()
    write_json(path, results)
    print(f"wrote {path}")
    return results


def check_blocks(parser, paths, start, end):
    """Fail before a long run, not after it: each of paths (None: left out) must hold one
    block from start to end, for the report to replace."""
    for path in filter(None, paths):
        try:
            replace_block(pathlib.Path(path).read_text(), "", path, start, end)
        except (OSError, ValueError) as error:
            parser.error(str(error))


def write_block(path, block, start, end):
    """Replace the block between start and end in the file at path; whether it changed."""
    path = pathlib.Path(path)
    text = path.read_text()
    new = replace_block(text, block, str(path), start, end)
    if new != text:
        path.write_text(new)
    return new != text
