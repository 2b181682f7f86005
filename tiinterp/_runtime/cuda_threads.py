"""Taichi's CUDA context, made current in every thread that calls tiinterp on CUDA.

Note [Taichi's CUDA context in every thread]
-------------------------------------------
A CUDA driver context is current per thread. Taichi (1.7.4 and taichi-forge) retains the
primary context of device 0 and makes it current in the thread that started it
(``CUDAContext``'s constructor, ``taichi/rhi/cuda/cuda_context.cpp``); its kernel launches
push that context for themselves, but its memory allocations (``cuMemAllocAsync``, behind
every ``ti.ndarray`` and so behind a new signature's tap tables, grid_sample's scratch and
``method="autodiff"``'s buffers) use whatever context is current. In any other thread none
is, so the allocation fails with ``CUDA_ERROR_INVALID_CONTEXT``. Measured on an H200 with
torch 2.11 (``../shared/gpu/thread_context.py``): a bare ``threading.Thread``, and
PyTorch's autograd device thread, where ``torch.autograd.grad(y, x, g)`` runs a CUDA
backward (``y.sum().backward()`` only worked because a torch op had made the same primary
context current there first).

So every tiinterp entry point, on CUDA, checks once per thread whether a context is
current, and where none is makes the primary context of device 0 current: the one Taichi
uses, and the one PyTorch's runtime API uses, so nothing else in the thread changes. A
thread whose current context is another one (a context the program created itself) is left
as it is: tiinterp does not take over a context it did not find missing.
"""

import ctypes
import sys
import threading
from typing import Protocol


class Driver(Protocol):
    """The three CUDA driver calls the check needs (a stub in the tests)."""

    def current_context(self) -> int | None: ...

    def primary_context(self) -> int: ...

    def set_current(self, context: int) -> None: ...


class CudaDriver:
    """The CUDA driver library, through ctypes (loaded in a process where Taichi has
    already initialised CUDA, so ``cuInit`` has run)."""

    def __init__(self) -> None:
        name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        self._lib = ctypes.CDLL(name)

    def _call(self, function: str, *args: object) -> None:
        status = getattr(self._lib, function)(*args)
        if status != 0:
            raise RuntimeError(
                f"tiinterp: the CUDA driver's {function} failed with error {status} while "
                "making Taichi's CUDA context current in this thread"
            )

    def current_context(self) -> int | None:
        context = ctypes.c_void_p()
        self._call("cuCtxGetCurrent", ctypes.byref(context))
        return context.value

    def primary_context(self) -> int:
        device = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(device), 0)
        context = ctypes.c_void_p()
        # Retained once per process and never released: Taichi holds it for the process's
        # lifetime too, so the extra reference changes nothing.
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        if not context.value:
            raise RuntimeError("tiinterp: the CUDA driver gave no primary context for device 0")
        return context.value

    def set_current(self, context: int) -> None:
        self._call("cuCtxSetCurrent", ctypes.c_void_p(context))


class ThreadContexts:
    """Note [Taichi's CUDA context in every thread]: :meth:`ensure_current` makes the
    primary context current in the calling thread where none is, once per thread, while
    ``active`` (tiinterp runs on CUDA)."""

    def __init__(self, driver_factory: type[Driver] | None = None) -> None:
        self._driver_factory = driver_factory or CudaDriver
        self._driver: Driver | None = None
        self._primary: int | None = None
        self._checked = threading.local()
        self._setup = threading.Lock()
        self.active = False
        self.made_current = 0  # threads where a context was set: for the tests

    def activate(self) -> None:
        self.active = True

    def deactivate(self) -> None:
        self.active = False

    def ensure_current(self) -> None:
        if not self.active or getattr(self._checked, "done", False):
            return
        driver = self._loaded_driver()
        if driver.current_context() is None:
            if self._primary is None:
                with self._setup:
                    if self._primary is None:
                        self._primary = driver.primary_context()
            driver.set_current(self._primary)
            self.made_current += 1
        self._checked.done = True

    def _loaded_driver(self) -> Driver:
        if self._driver is None:
            with self._setup:
                if self._driver is None:
                    self._driver = self._driver_factory()
        return self._driver


# The process's one instance: tiinterp's entry points call its ensure_current.
THREAD_CONTEXTS = ThreadContexts()
