"""8 threads x 200 mixed calls on each arch, while another thread calls ``tiinterp.init``
on it again at 25%, 50% and 75% of the calls: every result must be bit-identical to the same
call made single-threaded beforehand, with no exception."""

import threading
import time

import pytest

import tiinterp
from tests.stress.calls import thread_calls
from tests.stress.helpers import peak_rss_gib, reset_peak_rss, results_equal
from tiinterp._runtime.session import simd_configuration

pytestmark = pytest.mark.stress

WORKERS = 8


class ThreadRun:
    """Workers repeat their calls and compare each result with the single-threaded one,
    while one more thread re-initialises the arch at 25%, 50% and 75% of the calls."""

    def __init__(self, arch, options, calls_each, rng, grid_sample):
        self.arch, self.options = arch, options
        self.calls_each = calls_each
        self.lists = [thread_calls(t, rng, grid_sample) for t in range(WORKERS)]
        self.expected = [[call() for call in calls] for calls in self.lists]
        self.done = 0
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.mismatches, self.exceptions, self.init_seconds = [], [], []
        self.done_at_inits = []

    def worker(self, t, barrier):
        calls, expected = self.lists[t], self.expected[t]
        barrier.wait()
        for n in range(self.calls_each):
            k = (n * 7 + t) % len(calls)
            try:
                if not results_equal(calls[k](), expected[k]):
                    self.mismatches.append(f"thread {t} call {n}: {calls[k].label}")
            except Exception as error:  # reported with its call below
                self.exceptions.append(
                    f"thread {t} call {n}: {calls[k].label}: {type(error).__name__}: {error}"
                )
            with self.lock:
                self.done += 1

    def reinit(self, barrier):
        total = self.calls_each * len(self.lists)
        barrier.wait()
        for fraction in (0.25, 0.5, 0.75):
            while self.done < fraction * total and not self.finished.is_set():
                time.sleep(0.001)
            if self.finished.is_set():
                break
            start = time.perf_counter()
            try:
                tiinterp.init(self.arch, offline_cache=True, **self.options)
            except Exception as error:  # reported with the workers' below
                self.exceptions.append(f"init({self.arch!r}): {type(error).__name__}: {error}")
            self.init_seconds.append(time.perf_counter() - start)
            self.done_at_inits.append(self.done)

    def run(self):
        barrier = threading.Barrier(len(self.lists) + 1)
        threads = [
            threading.Thread(target=self.worker, args=(t, barrier)) for t in range(len(self.lists))
        ]
        threads.append(threading.Thread(target=self.reinit, args=(barrier,)))
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads[:-1]:
            thread.join()
        seconds = time.perf_counter() - start
        self.finished.set()
        threads[-1].join()
        return seconds


def test_threads_agree_with_one_thread_while_init_runs_again(arch, quick, rng, record_property):
    calls_each = 20 if quick else 200
    # The CPU's SIMD configuration refuses grid_sample (tested where it is refused), and
    # its re-init keeps the configuration.
    simd = simd_configuration()
    options = {"real_matrix_scalarize": False} if simd else {}
    reset_peak_rss()
    run = ThreadRun(arch, options, calls_each, rng, grid_sample=not simd)
    try:
        seconds = run.run()
    finally:
        # The last runtime was started on the re-initialising thread; Taichi's CPU backend
        # builds fields only on the thread that started its runtime, and the tests after
        # this one (test_funcs's fields) run on this one.
        tiinterp.init(arch, offline_cache=True, **options)
    total = WORKERS * calls_each
    record_property("calls", f"{WORKERS} threads x {calls_each}")
    record_property("distinct_calls", sum(map(len, run.lists)))
    record_property("calls_per_second", total / seconds)
    record_property("init_seconds", run.init_seconds)
    record_property("calls_done_when_init_returned", run.done_at_inits)
    record_property("peak_rss_gib", peak_rss_gib())
    assert run.mismatches == [], f"{len(run.mismatches)} mismatches: {run.mismatches[:20]}"
    assert run.exceptions == [], f"{len(run.exceptions)} exceptions: {run.exceptions[:20]}"
    overlapped = sum(done < total for done in run.done_at_inits)
    assert overlapped == 3, (
        f"only {overlapped} of 3 re-inits returned while calls were still running (the check "
        "did not happen as designed)"
    )
