"""Calls from threads other than the one that started Taichi (Note [Taichi's CUDA context
in every thread] in tiinterp/_runtime/cuda_threads.py).

The decision to make Taichi's CUDA context current runs here against a stub driver; the
calls themselves run on every arch of the suite, CUDA included where the machine has it
(``TIINTERP_TEST_ARCHS=cuda``): a new signature's first call in a bare thread, the first
backward of a signature through ``torch.autograd.grad`` with a contiguous gradient, and
four threads making new signatures at once.
"""

import threading
from typing import ClassVar

import numpy as np
import pytest

import tiinterp
from tiinterp._runtime import session as _runtime
from tiinterp._runtime.cuda_threads import ThreadContexts

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
    assert stub.made_current == 4


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
