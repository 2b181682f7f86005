"""The caller's floating-point environment, kept as it was across Taichi's start.

Note [Subnormals and the caller's floating-point state]
------------------------------------------------------
Taichi 1.7.4 starting on the CPU (``ti.init``) switches the calling thread to
flush-to-zero / denormals-are-zero (MXCSR's FTZ and DAZ bits on x86-64), and its worker
threads, created during the start, inherit that mode. Left so, every later NumPy or torch
computation in the caller's thread, and in the threads it starts afterwards, loses its
subnormal numbers (``np.float64(1e-310) * 0.5`` gave 0; issue 44). tiinterp therefore
saves the thread's environment (``fegetenv``) before Taichi starts and puts it back
(``fesetenv``) right after, so the caller's thread is as it was.

What tiinterp's own kernels do with subnormals is decided by Taichi, not here: ``ti.init``
sets flush-to-zero (FTZ, without denormals-are-zero: MXCSR 0x9fa0 on x86-64) in the
calling thread before it starts its workers, which inherit it, and no API reaches another
thread's mode. So a product or partial sum below the smallest normal number (2.2e-308 in
float64, 1.2e-38 in float32) becomes 0 on a worker, and stays subnormal where a kernel
runs on the calling thread, which depends on the call's size (measured on taichi 1.7.4:
2x3 and (4, 8, 96, 128) inputs flushed, (1, 1, 40, 48) kept). tiinterp promises the bound
that follows: a result differs from the exact one (and from PyTorch, which keeps
subnormals) by less than 8 smallest normals (measured at most 4.8, every mode, forward and
backward: tests/ops/test_robustness.py), and numbers above that range are untouched.
Where the C library offers no ``fegetenv`` (Windows), nothing is saved.
"""

import contextlib
import ctypes
import ctypes.util
from collections.abc import Iterator

# Larger than any platform's fenv_t (28 bytes on x86-64 glibc, 8 on aarch64).
_ENV_BYTES = 256


def _libm() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    try:
        library = ctypes.CDLL(name)
        library.fegetenv  # noqa: B018 - present, or AttributeError
        library.fesetenv  # noqa: B018
    except (OSError, AttributeError):
        return None
    return library


_LIBM = _libm()


@contextlib.contextmanager
def preserved() -> Iterator[None]:
    """Run the body, then restore the calling thread's floating-point environment."""
    if _LIBM is None:
        yield
        return
    saved = ctypes.create_string_buffer(_ENV_BYTES)
    if _LIBM.fegetenv(saved) != 0:
        yield
        return
    try:
        yield
    finally:
        _LIBM.fesetenv(saved)
