"""Calls from threads other than the one that started Taichi (Note [Taichi's CUDA context
in every thread] in tiinterp/_runtime/cuda_threads.py), and from threads that end (Note
[taichi-forge's streams and threads that end] in tiinterp/_runtime/launch_thread.py).

The decision to make Taichi's CUDA context current runs here against a stub driver; the
calls themselves run on every arch of the suite, CUDA included where the machine has it
(``TIINTERP_TEST_ARCHS=cuda``): a new signature's first call in a bare thread, the first
backward of a signature through ``torch.autograd.grad`` with a contiguous gradient, and
four threads making new signatures at once.
"""

import multiprocessing
import threading
from typing import ClassVar

import numpy as np
import pytest

import tiinterp
from tiinterp._runtime import session as _runtime
from tiinterp._runtime.capabilities import capabilities
from tiinterp._runtime.cuda_threads import ThreadContexts
from tiinterp._runtime.launch_thread import LaunchThread
from tiinterp._runtime.taichi import BACKEND

PRIMARY = 0xC0FFEE
OTHER = 0xBEEF


class StubDriver:
    """The CUDA driver's per-thread current context (a new thread has none, even where it
    reuses the identifier of one that ended)."""

    instances: ClassVar[list["StubDriver"]] = []

    def __init__(self):
        self.local = threading.local()
        self.retained = 0
        self.set_calls = []
        self.lock = threading.Lock()
        StubDriver.instances.append(self)

    def current_context(self):
        return getattr(self.local, "context", None)

    def primary_context(self):
        with self.lock:
            self.retained += 1
        return PRIMARY

    def set_current(self, context):
        with self.lock:
            self.local.context = context
            self.set_calls.append((threading.current_thread(), context))


@pytest.fixture
def stub():
    StubDriver.instances.clear()
    contexts = ThreadContexts(StubDriver)
    contexts.activate()
    return contexts


def in_thread(function, *args):
    """``function(*args)`` in a new bare thread; its result, or its exception re-raised."""
    outcome = {}

    def run():
        try:
            outcome["value"] = function(*args)
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=600)
    assert not thread.is_alive(), "the thread did not finish"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def handed_over(arch):
    """Whether calls from other threads than the main one run on the launch thread."""
    return capabilities(BACKEND, arch).streams_end_with_threads


# --- The decision, against the stub -------------------------------------------------------------


def test_inactive_contexts_never_load_the_driver():
    contexts = ThreadContexts(StubDriver)
    StubDriver.instances.clear()
    contexts.ensure_current()
    in_thread(contexts.ensure_current)
    assert StubDriver.instances == []


def test_a_thread_without_a_context_gets_the_primary_one_once(stub):
    def twice():
        stub.ensure_current()
        stub.ensure_current()
        driver = StubDriver.instances[0]
        return driver.current_context()

    assert in_thread(twice) == PRIMARY
    driver = StubDriver.instances[0]
    assert len(driver.set_calls) == 1
    assert stub.made_current == 1


def test_a_thread_with_a_context_is_left_alone(stub):
    stub.ensure_current()  # loads the driver
    driver = StubDriver.instances[0]
    driver.set_calls.clear()

    def with_context(context):
        driver.local.context = context
        stub.ensure_current()
        return driver.current_context()

    assert in_thread(with_context, PRIMARY) == PRIMARY
    assert in_thread(with_context, OTHER) == OTHER  # another context: not ours to replace
    assert driver.set_calls == []


def test_many_threads_at_once_each_get_the_context_and_retain_it_once(stub):
    barrier = threading.Barrier(8)

    def call():
        barrier.wait()
        stub.ensure_current()
        return StubDriver.instances[0].current_context()

    results = []
    threads = [threading.Thread(target=lambda: results.append(call())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [PRIMARY] * 8
    (driver,) = StubDriver.instances
    assert len(driver.set_calls) == 8
    assert len({thread for thread, _ in driver.set_calls}) == 8
    assert driver.retained == 1


def test_a_deactivated_tracker_stops_checking(stub):
    stub.deactivate()
    in_thread(stub.ensure_current)
    assert StubDriver.instances == []


def test_every_entry_point_checks_the_calling_thread(stub, monkeypatch, arch):
    """The public functions (first call of a signature and its remembered repeats alike)
    run the check before anything else, in the thread that calls them."""
    monkeypatch.setattr(_runtime, "THREAD_CONTEXTS", stub)
    x = np.ones((1, 1, 5, 7), np.float32)
    for _ in range(2):  # the second call is a remembered repeat
        in_thread(lambda: tiinterp.interpolate(x, size=(3, 4), mode="bilinear"))
    in_thread(tiinterp.current_arch)
    grid = np.zeros((1, 2, 2, 2), np.float32)
    in_thread(lambda: tiinterp.grid_sample(x, grid))
    # Handed over, the calls run in one thread, the launch thread: it is checked once.
    assert stub.made_current == (1 if handed_over(arch) else 4)


def test_taichi_on_cuda_turns_the_check_on_and_another_arch_off(monkeypatch):
    contexts = ThreadContexts(StubDriver)
    StubDriver.instances.clear()
    monkeypatch.setattr(_runtime, "THREAD_CONTEXTS", contexts)
    _runtime._track_cuda_contexts("cuda")  # what init("cuda") does once Taichi started
    assert contexts.active
    assert StubDriver.instances[0].current_context() == PRIMARY  # the calling thread's
    _runtime._track_cuda_contexts("vulkan")
    assert not contexts.active


# --- The calls, on every arch -------------------------------------------------------------------


def test_a_new_signature_in_a_bare_thread(arch, rng):
    x = rng.standard_normal((1, 2, 9, 11)).astype(np.float32)
    in_thread_result = in_thread(lambda: tiinterp.interpolate(x, size=(21, 19), mode="bicubic"))
    here = tiinterp.interpolate(x, size=(21, 19), mode="bicubic")
    np.testing.assert_array_equal(in_thread_result, here)
    g = rng.standard_normal(here.shape).astype(np.float32)
    grad = in_thread(lambda: tiinterp.interpolate_backward(g, x.shape, mode="bicubic"))
    np.testing.assert_array_equal(grad, tiinterp.interpolate_backward(g, x.shape, mode="bicubic"))
    grid = rng.uniform(-1.1, 1.1, (1, 5, 3, 2)).astype(np.float32)
    sampled = in_thread(lambda: tiinterp.grid_sample(x, grid, mode="bicubic"))
    np.testing.assert_array_equal(sampled, tiinterp.grid_sample(x, grid, mode="bicubic"))


def test_four_threads_making_new_signatures_at_once(arch, rng):
    x = rng.standard_normal((2, 3, 13, 17)).astype(np.float32)
    sizes = [(23, 29), (7, 31), (26, 5), (19, 19)]
    barrier = threading.Barrier(len(sizes))

    def call(size):
        barrier.wait()
        forward = tiinterp.interpolate(x, size=size, mode="lanczos3")
        backward = tiinterp.interpolate_backward(forward, x.shape, mode="lanczos3")
        return forward, backward

    results = [None] * len(sizes)

    def worker(index):
        results[index] = call(sizes[index])

    barrier_free = [threading.Thread(target=worker, args=(i,)) for i in range(len(sizes))]
    for thread in barrier_free:
        thread.start()
    for thread in barrier_free:
        thread.join(timeout=600)
    for size, result in zip(sizes, results, strict=True):
        assert result is not None, f"the thread for size {size} failed"
        forward = tiinterp.interpolate(x, size=size, mode="lanczos3")
        np.testing.assert_array_equal(result[0], forward)
        np.testing.assert_array_equal(
            result[1], tiinterp.interpolate_backward(forward, x.shape, mode="lanczos3")
        )


def _torch_device(arch):
    return "cuda" if arch == "cuda" else "cpu"


def test_torch_first_backward_through_autograd_grad(arch, rng):
    """``torch.autograd.grad(y, x, g)`` with a contiguous ``g``: on CUDA, PyTorch runs it
    in its device thread, where no torch op made a context current first (the failure of
    issue 42); on the CPU the backward below runs in a bare thread to the same end."""
    torch = pytest.importorskip("torch")
    import tiinterp.torch as titorch

    device = _torch_device(arch)
    x = torch.from_numpy(rng.standard_normal((1, 2, 6, 7))).float().to(device)
    x.requires_grad_(True)
    y = titorch.interpolate(x, size=(17, 15), mode="bilinear")
    g = torch.from_numpy(rng.standard_normal(tuple(y.shape))).float().to(device)
    (grad,) = in_thread(lambda: torch.autograd.grad(y, x, g, retain_graph=True))
    expected = tiinterp.interpolate_backward(g.cpu().numpy(), tuple(x.shape), mode="bilinear")
    np.testing.assert_array_equal(grad.cpu().numpy(), expected)

    grid = torch.from_numpy(rng.uniform(-1, 1, (1, 4, 5, 2))).float().to(device)
    grid.requires_grad_(True)
    sampled = titorch.grid_sample(x, grid, mode="bilinear", align_corners=False)
    g2 = torch.from_numpy(rng.standard_normal(tuple(sampled.shape))).float().to(device)
    grads = in_thread(lambda: torch.autograd.grad(sampled, (x, grid), g2))
    expected_input, expected_grid = tiinterp.grid_sample_backward(
        g2.cpu().numpy(), x.detach().cpu().numpy(), grid.detach().cpu().numpy(), mode="bilinear"
    )
    np.testing.assert_array_equal(grads[0].cpu().numpy(), expected_input)
    np.testing.assert_array_equal(grads[1].cpu().numpy(), expected_grid)


# --- Threads that end (Note [taichi-forge's streams and threads that end]) ---------------------


def test_threads_that_end_hand_their_calls_over_where_the_backend_needs_it(arch, rng):
    """Rounds of four new threads, each calling ``grid_sample_backward`` (a launch with host
    arrays, which waits for every stream) and ending: on taichi-forge's Vulkan, CI's crash
    (1 run in 5 to 8 of 300 rounds, before the launch thread); every call runs on the launch
    thread there and on its own thread elsewhere, with the main thread's bits."""
    x = rng.standard_normal((1, 3, 9, 11)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (1, 7, 5, 2)).astype(np.float32)
    g = rng.standard_normal((1, 3, 7, 5)).astype(np.float32)
    options = dict(mode="bicubic", padding_mode="reflection")
    expected = tiinterp.grid_sample_backward(g, x, grid, **options)
    before = _runtime.LAUNCH_THREAD.calls
    results = []
    for _ in range(40):
        threads = [
            threading.Thread(
                target=lambda: results.append(tiinterp.grid_sample_backward(g, x, grid, **options))
            )
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
    assert len(results) == 160
    for result in results:
        np.testing.assert_array_equal(result[0], expected[0])
        np.testing.assert_array_equal(result[1], expected[1])
    assert _runtime.LAUNCH_THREAD.calls - before == (160 if handed_over(arch) else 0)


@pytest.fixture
def launch_thread(monkeypatch, arch):
    """A launch thread that takes every call from other threads than the main one, on
    whatever arch the suite runs: the mechanism, tested on every backend and arch."""
    every = LaunchThread(("cpu", "cuda", "vulkan", "metal"))
    monkeypatch.setattr(_runtime, "LAUNCH_THREAD", every)
    return every


def test_a_handed_over_call_returns_its_result_and_raises_its_error(launch_thread, rng):
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    result = in_thread(lambda: tiinterp.interpolate(x, size=(9, 4), mode="bicubic"))
    np.testing.assert_array_equal(result, tiinterp.interpolate(x, size=(9, 4), mode="bicubic"))
    with pytest.raises(ValueError, match="mode") as raised:
        in_thread(lambda: tiinterp.interpolate(x, size=(9, 4), mode="cubic-ish"))
    # The message is the one the call raises in the caller's own thread.
    with pytest.raises(ValueError) as here:
        tiinterp.interpolate(x, size=(9, 4), mode="cubic-ish")
    assert str(raised.value) == str(here.value)
    assert launch_thread.calls == 2
    assert x.flags.writeable  # nothing of the caller's is taken over


def test_a_handed_over_call_keeps_the_callers_torch_modes(launch_thread, rng):
    """PyTorch's inference and grad modes are thread-local: a call handed over from a
    thread under ``torch.inference_mode()`` returns an inference tensor, as it does on the
    caller's own thread (on taichi-forge's Vulkan it came back an ordinary tensor), and one
    under ``torch.no_grad()`` records no graph."""
    torch = pytest.importorskip("torch")
    import tiinterp.torch as titorch

    x = torch.from_numpy(rng.standard_normal((1, 2, 5, 6))).float().requires_grad_()

    def under(mode):
        with mode():
            y = titorch.interpolate(x, size=(9, 4), mode="bicubic")
        return y.is_inference(), y.requires_grad

    assert in_thread(under, torch.inference_mode) == (True, False)
    assert in_thread(under, torch.no_grad) == (False, False)
    assert in_thread(under, torch.enable_grad) == (False, True)
    assert launch_thread.calls >= 3


def test_the_main_thread_and_the_launch_thread_run_their_own_calls(launch_thread):
    """The main thread never hands over (its signals stay its own), and a call the launch
    thread makes runs there directly (a nested entry point does not wait on itself)."""
    tiinterp.current_arch()
    assert launch_thread.calls == 0
    names = in_thread(lambda: launch_thread.run(lambda: _nested_entry_point(launch_thread)))
    assert names == ("tiinterp-launch", "tiinterp-launch")
    assert launch_thread.calls == 1


def _nested_entry_point(launch_thread):
    outer = threading.current_thread().name
    assert not launch_thread.wanted()
    tiinterp.current_arch()  # an entry point, called on the launch thread
    return outer, threading.current_thread().name


def _name_of_the_thread_that_runs(queue):
    fresh = LaunchThread(())
    queue.put(in_thread(lambda: fresh.run(lambda: threading.current_thread().name)))
    queue.put(in_thread(lambda: _INHERITED.run(lambda: threading.current_thread().name)))


_INHERITED = LaunchThread(())


def test_a_forked_child_starts_its_own_launch_thread():
    """The parent's launch thread is not copied into a forked child: the child's first
    handed-over call starts one there instead of waiting on a queue nobody serves."""
    assert in_thread(lambda: _INHERITED.run(threading.get_native_id)) != threading.get_native_id()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_name_of_the_thread_that_runs, args=(queue,))
    child.start()
    names = [queue.get(timeout=120) for _ in range(2)]
    child.join(timeout=120)
    assert child.exitcode == 0
    assert names == ["tiinterp-launch", "tiinterp-launch"]
