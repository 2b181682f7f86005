"""Forked workers at scale (Note [Taichi after fork]; tests/runtime/test_fork.py has the small
cases): after the parent has called tiinterp, a fork pool of 4 workers x 64 mixed calls
(every mode, forward and backward, grid_sample, a 16 MB image among them), 10 forks while 4
threads of the parent keep calling, and a grandchild forked by a child that has restarted
its runtime: every result bit-identical to the parent's, every worker within its deadline.
On taichi-forge, which cannot start a second runtime in a process, each forked call must
be the RuntimeError that names spawn and forkserver instead."""

import multiprocessing
import threading
import time
from functools import partial

import numpy as np
import pytest

import tiinterp
from tiinterp._rules import filters as _filters
from tiinterp._runtime.taichi import can_abandon_runtime

pytestmark = pytest.mark.stress

DEADLINE = 600  # seconds, for each worker's result


def _calls(quick):
    """(name, call) pairs: every 2-D mode forward and backward, grid_sample, a 16 MB image."""
    rng = np.random.default_rng(9)
    x = rng.random((2, 3, 37, 29), dtype=np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 5, 7, 2)).astype(np.float32)
    big = rng.random((1, 8, 256, 256) if quick else (2, 8, 512, 512), dtype=np.float32)
    calls = []
    for mode in _filters.MODE_DIMS:
        if 2 in _filters.MODE_DIMS[mode]:
            calls.append(
                (f"{mode} forward", partial(tiinterp.interpolate, x, (23, 41), None, mode))
            )
            g = np.ones((2, 3, 23, 41), np.float32)
            calls.append(
                (f"{mode} adjoint", partial(tiinterp.interpolate_backward, g, x.shape, mode=mode))
            )
    calls.append(("grid_sample", partial(tiinterp.grid_sample, x, grid, "bicubic", "reflection")))
    calls.append(
        (
            "16 MB image",
            partial(tiinterp.interpolate, big, None, 0.75, "lanczos3", None, None, True),
        )
    )
    return calls


def _results(indices, quick):
    """In a worker: the results of calls ``indices``, or the RuntimeError's message."""
    calls = _calls(quick)
    try:
        return [calls[i][1]() for i in indices]
    except RuntimeError as error:
        return str(error)


def _child_then_grandchild(quick, pipe):
    """In a forked child: compute, fork a grandchild that computes, send both."""
    own = _results([0, 1], quick)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        grandchild = pool.apply_async(_results, ([0, 1], quick)).get(DEADLINE)
    pipe.send((own, grandchild))


class _Parent:
    """The parent's calls and results, and the check of a worker's against them."""

    def __init__(self, quick):
        self.calls = _calls(quick)
        self.expected = [call() for _, call in self.calls]
        self.children_compute = can_abandon_runtime()
        self.failures = []

    def check(self, where, results, indices):
        if isinstance(results, str):
            if self.children_compute or "'spawn'" not in results:
                self.failures.append(f"{where}: {results[:300]}")
            return
        if not self.children_compute:
            self.failures.append(f"{where}: computed where a RuntimeError was expected")
            return
        for i, got in zip(indices, results, strict=True):
            if not np.array_equal(got, self.expected[i], equal_nan=True):
                self.failures.append(f"{where}: {self.calls[i][0]} differs from the parent's")


def test_a_fork_pool_of_4_workers_x_64_tasks(quick, taichi_on, record_property):
    taichi_on("cpu")
    parent = _Parent(quick)
    jobs = [list(range(len(parent.calls)))[k::4] for k in range(4)] * (1 if quick else 16)
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pending = [pool.apply_async(_results, (job, quick)) for job in jobs]
        for k, task in enumerate(pending):
            parent.check(f"pool task {k}", task.get(DEADLINE), jobs[k])
    record_property("tasks", len(jobs))
    record_property("seconds", time.perf_counter() - start)
    record_property("children_compute", parent.children_compute)
    assert parent.failures == [], "\n".join(parent.failures)


def test_forks_while_4_threads_of_the_parent_call(quick, taichi_on, record_property):
    taichi_on("cpu")
    parent = _Parent(quick)
    stop = threading.Event()

    def keep_calling():
        while not stop.is_set():
            for _, call in parent.calls[:4]:
                call()

    threads = [threading.Thread(target=keep_calling) for _ in range(4)]
    for thread in threads:
        thread.start()
    forks = 3 if quick else 10
    start = time.perf_counter()
    try:
        for k in range(forks):
            with multiprocessing.get_context("fork").Pool(1) as pool:
                results = pool.apply_async(_results, ([0, 1, 2, 3], quick)).get(DEADLINE)
            parent.check(f"fork {k} under threads", results, [0, 1, 2, 3])
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    record_property("forks", forks)
    record_property("seconds", time.perf_counter() - start)
    assert parent.failures == [], "\n".join(parent.failures)


def test_a_grandchild_forked_by_a_child_that_restarted_its_runtime(
    quick, taichi_on, record_property
):
    taichi_on("cpu")
    parent = _Parent(quick)
    context = multiprocessing.get_context("fork")
    # A Process, not a pool's daemon worker: those may not have children.
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child_then_grandchild, args=(quick, send))
    start = time.perf_counter()
    child.start()
    try:
        assert receive.poll(DEADLINE), "child and grandchild: no result within the deadline"
        own, grandchild = receive.recv()
    finally:
        if child.is_alive():
            child.join(DEADLINE)
        if child.is_alive():
            child.kill()
            child.join()
    record_property("seconds", time.perf_counter() - start)
    parent.check("child", own, [0, 1])
    parent.check("grandchild", grandchild, [0, 1])
    assert parent.failures == [], "\n".join(parent.failures)
