"""One CPU per worker of Taichi's CPU thread pool.

Note [Workers on their own CPUs]
--------------------------------
Taichi's CPU backend runs a parallel loop on its pool's workers while the launching thread
sleeps until they are done. Linux wakes each worker on a CPU of its choosing, and a worker
that ran a moment ago counts as cache-hot, so an idle CPU does not take it from a busy one
for about half a millisecond (the scheduler's migration cost). With as many workers as
CPUs, both workers of a 2-CPU machine often woke on one CPU and the whole loop ran on one
of them, in runs of tens of calls (measured on this project's 2-core machine: a
(4, 3, 333, 517) -> (480, 640) nearest resize took 1.33-1.45 ms in those runs and
0.77-0.85 between them, 1.37 with a one-thread pool; PyTorch's OpenMP workers, which
spin a while before they sleep and share the loop with the launching thread, took
0.83-0.90 throughout). So when tiinterp starts Taichi on the CPU with one worker per CPU
the process may use, it gives each worker a CPU of its own (``sched_setaffinity``), as
``OMP_PROC_BIND`` does for OpenMP: the same call then took 0.77-0.90 ms on every one of
80 calls. A loop's iterations are handed out one block at a time, so a worker whose CPU is
busy with other work takes fewer blocks and the others more.

Taichi names none of its threads, so the workers are found as the threads that
``ti.init`` started: its pool starts its workers one after another, last (seen on taichi
1.7.4 and taichi-forge), and the threads are given the CPUs in the order they were
started, so any run of consecutive ones, the workers too, lands on distinct CPUs. The
others started there (the compiler's) sleep but while a kernel compiles. Nothing is
pinned when the pool is smaller or larger than the CPUs the process may use (a worker
process with ``cpu_max_num_threads=1`` among several keeps its freedom, and the machine
is shared anyway), off Linux, or with ``TIINTERP_PIN_THREADS=0``; Taichi started by the
caller keeps its threads as they are.
"""

from __future__ import annotations

import itertools
import os
import sys

TASKS = "/proc/self/task"


def thread_ids() -> frozenset[int]:
    """The ids of this process's threads (empty where ``/proc`` does not list them)."""
    try:
        return frozenset(int(name) for name in os.listdir(TASKS))
    except OSError:
        return frozenset()


def _in_start_order(threads: frozenset[int]) -> list[int]:
    """``threads`` in the order they were started: ids ascend, unless they wrapped past the
    largest id (``pid_max``) meanwhile."""
    ordered = sorted(threads)
    if len(ordered) > 1:
        gaps = [b - a for a, b in itertools.pairwise(ordered)]
        widest = max(range(len(gaps)), key=gaps.__getitem__)
        if gaps[widest] > 2**14:  # the ids wrapped: the larger ones came first
            ordered = ordered[widest + 1 :] + ordered[: widest + 1]
    return ordered


def pin_started_workers(before: frozenset[int], workers: int) -> int:
    """Give each thread started since ``before`` was taken a CPU of its own in turn, where
    the pool's ``workers`` are as many as the CPUs this process may use (the Note). Returns
    how many threads were pinned."""
    if os.environ.get("TIINTERP_PIN_THREADS", "1") == "0" or not sys.platform.startswith("linux"):
        return 0
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except OSError:
        return 0
    started = _in_start_order(thread_ids() - before)
    if workers < 2 or workers != len(cpus) or len(started) < workers:
        return 0
    pinned = 0
    for turn, thread in enumerate(started):
        try:
            os.sched_setaffinity(thread, {cpus[turn % len(cpus)]})
            pinned += 1
        except OSError:  # the thread has ended meanwhile
            continue
    return pinned
