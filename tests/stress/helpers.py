"""What the stress tests share besides the float64 reference (tests/stress/reference.py):
their bounds, memory figures and the skip for a case the machine has no memory for, fills
and scans of arrays of billions of elements, prompt refusals, and bit-for-bit equality."""

import contextlib
import gc
import math
import time

import numpy as np
import pytest

from tiinterp._rules import validate as _validate

GIB = 2**30
MIB = 2**20
LIMIT = 2**31
# Sampled rows of a forward or an adjoint against the float64 reference: relative to the
# largest reference value of the row.
ROW_RTOL = 1e-5
# A refusal (a size past 2^31, an array past taichi-forge's limit) comes before any
# allocation or kernel, so well within this.
REFUSAL_SECONDS = 1.0
# Besides a case's arrays: the reference rows, tiinterp's scratch lines and the rest of
# the process.
MEMORY_MARGIN = 2 * GIB


# --- memory -------------------------------------------------------------------------------------


def _status_kib(key):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_mib():
    return _status_kib("VmRSS") / 1024


def reset_peak_rss():
    """Restart VmHWM from the current RSS (Linux: clear_refs "5"), so that ``peak_rss_gib``
    is this case's peak."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def peak_rss_gib():
    return _status_kib("VmHWM") / 1024 / 1024


def available_bytes():
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def release():
    gc.collect()


def require_memory(needed):
    """Skip the test, with the figures, if this machine has not ``needed`` bytes (and the
    margin) available: the one reason a stress test skips."""
    available = available_bytes()
    if needed + MEMORY_MARGIN > available:
        pytest.skip(
            f"needs {needed / GIB:.1f} GiB + {MEMORY_MARGIN / GIB:.0f} GiB margin, "
            f"{available / GIB:.1f} GiB available"
        )


@contextlib.contextmanager
def skip_on_memory_error():
    """A MemoryError (NumPy's or tiinterp's, from an allocation) skips the test with it."""
    try:
        yield
    except MemoryError as error:
        pytest.skip(f"MemoryError: {error}")


def past_array_bytes(*shapes, itemsize=4):
    """Whether an array of one of ``shapes`` passes taichi-forge's limit on what its kernels
    take (taichi 1.7.4 has none: always False there)."""
    largest = max(math.prod(shape) for shape in shapes)
    return _validate.MAX_BYTES is not None and itemsize * largest > _validate.MAX_BYTES


# --- fills and scans ----------------------------------------------------------------------------


def fill_uniform(rng, array, low=1.0, chunk=2**26):
    """Fill in place with uniform values in [low, low + 1), a chunk at a time."""
    flat = array.reshape(-1)
    for begin in range(0, flat.size, chunk):
        part = flat[begin : begin + chunk]
        rng.random(out=part, dtype=np.float32)
        part += np.float32(low)


def scan_range(array, low=0.0, high=3.0, chunk=2**26):
    """The first chunk of ``array`` holding a value outside (low, high) or non-finite (an
    unwritten output reads 0), as a message, else None."""
    flat = array.reshape(-1)
    for begin in range(0, flat.size, chunk):
        part = flat[begin : begin + chunk]
        lo, hi = float(part.min()), float(part.max())
        if not (low < lo and hi < high):
            bad = np.flatnonzero(~((part > low) & (part < high)))
            first = begin + int(bad[0])
            return (
                f"{bad.size} values outside ({low}, {high}) in flat elements "
                f"{begin}..{begin + part.size - 1}, first at {first} = {flat[first]!r}"
            )
    return None


# --- refusals and equality ----------------------------------------------------------------------


def refused_at_once(call):
    """Run ``call``, which must raise a ValueError within REFUSAL_SECONDS; returns the
    seconds it took and the message."""
    start = time.perf_counter()
    with pytest.raises(ValueError) as refusal:
        call()
    seconds = time.perf_counter() - start
    assert seconds < REFUSAL_SECONDS, f"refused after {seconds:.3f} s: {refusal.value}"
    return seconds, str(refusal.value)


def results_equal(a, b):
    """Bit-for-bit equality of two results (arrays, or tuples of them)."""
    if isinstance(a, tuple):
        return len(a) == len(b) and all(results_equal(x, y) for x, y in zip(a, b, strict=True))
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    bits = np.uint32 if a.dtype == np.float32 else np.uint64
    return np.array_equal(np.ascontiguousarray(a).view(bits), np.ascontiguousarray(b).view(bits))
