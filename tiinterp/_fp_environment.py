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

tiinterp's own CPU kernels run on Taichi's workers, which keep the mode: arithmetic on a
subnormal input or result (magnitudes below 2.2e-308 in float64, 1.2e-38 in float32) gives
zero, where PyTorch keeps subnormals; a pure copy (some nearest paths) keeps them. Where
the C library offers no ``fegetenv`` (Windows), nothing is saved.
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
