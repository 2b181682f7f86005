"""One long-lived thread that runs tiinterp's calls from other threads, where the backend
needs it (Note [taichi-forge's streams and threads that end]).

Note [taichi-forge's streams and threads that end]
--------------------------------------------------
Taichi's Vulkan device gives every thread that uses it a stream of its own (a command
pool, its fences), made on the thread's first launch or copy (``VulkanDevice``'s
``ThreadLocalStreams``); a launch with host (NumPy) arguments then waits for every
stream (``wait_idle``). taichi-forge 0.7.0, by all that was measured, also destroys a
thread's stream when the thread ends (its library registers C++ ``thread_local``
destructors; the crash below needs threads that end). Such a destructor runs after
Python's ``Thread.join`` has returned and outside any lock tiinterp holds, so it can run
while another thread's launch waits on that stream: lavapipe's queue thread then crashes
the process (a segmentation fault, seen under gdb). Measured here (lavapipe, taichi-forge
0.7.0): 300 rounds of 4 new threads each calling ``grid_sample_backward`` 3 times crashed
1 run in 5 to 8; with the same threads kept alive, or the same calls from 4 threads that
never end, 0 runs in 8; taichi 1.7.4, 0 in 8. CI's first failure was
``test_bit_identical_across_runs_and_threads``.

So where the backend's row says ``streams_end_with_threads`` for the arch Taichi runs on
(taichi-forge's Vulkan; Metal taken to be the same), or for any arch before Taichi is
started, a call from any thread but the main one runs on one daemon thread that tiinterp
starts and never ends: no user thread gets a stream, so none is destroyed. The caller
waits for the result, and gets its exception as raised. The main thread (which ends only
with the process) runs its calls itself, so its signals, such as Ctrl-C, reach it as
before. Elsewhere (the CPU and CUDA archs, taichi 1.7.4) every call runs on its own thread,
as before. A handed-over call runs under the caller's PyTorch inference and grad modes,
which are thread-local: its tensors come back as they would from the caller's thread.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from .capabilities import archs_with
from .taichi import BACKEND, current_config, program_started, ti


class LaunchThread:
    """The thread of Note [taichi-forge's streams and threads that end]: :meth:`wanted` says
    whether the calling thread should hand its call over, :meth:`run` hands it over and
    waits."""

    def __init__(self, archs: tuple[str, ...]) -> None:
        # Taichi's arch objects, by the names of the capability table (the same words).
        self.archs = tuple(getattr(ti, name) for name in archs)
        self._thread: threading.Thread | None = None
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._start = threading.Lock()
        self.calls = 0  # calls handed over: for the tests
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.forget_after_fork)

    def wanted(self) -> bool:
        if not self.archs:
            return False
        current = threading.current_thread()
        if current is threading.main_thread() or current is self._thread:
            return False
        return not program_started() or current_config().arch in self.archs

    def run(self, call: Callable[[], Any]) -> Any:
        future: Future[Any] = Future()
        self._started().put((_in_callers_modes(call), future))
        self.calls += 1
        return future.result()

    def _started(self) -> queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]:
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="tiinterp-launch", daemon=True
                )
                self._thread.start()
        return self._requests

    def _serve(self) -> None:
        while True:
            call, future = self._requests.get()
            try:
                result = call()
            except BaseException as error:  # the caller's to handle, as if it had run there
                future.set_exception(error)
            else:
                future.set_result(result)
            del call, future

    def forget_after_fork(self) -> None:
        """In a forked child: the thread was not copied, so the next call starts one."""
        self._thread = None
        self._requests = queue.SimpleQueue()
        self._start = threading.Lock()


def _in_callers_modes(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call``, to run on the launch thread under the calling thread's own thread-local
    modes that change what a call returns: PyTorch's inference mode and grad mode (a
    result made under ``torch.inference_mode()`` is an inference tensor; under
    ``torch.no_grad()`` it records no graph). Read here, on the calling thread."""
    torch = sys.modules.get("torch")
    if torch is None:
        return call
    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    def in_modes() -> Any:
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            return call()

    return in_modes


LAUNCH_THREAD = LaunchThread(archs_with(BACKEND, "streams_end_with_threads"))
