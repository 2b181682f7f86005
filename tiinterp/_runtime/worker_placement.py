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

Taichi names none of its threads, and the program may start threads of its own while
Taichi starts (a pool growing in another thread), which must keep every CPU: a thread
pinned once stays confined, and so does every thread it starts later. So Taichi's threads
are recognised by their name: Linux gives a new thread the name of the thread that starts
it, and for the time of ``ti.init`` the calling thread carries :data:`MARKER`, a name no
other thread has. The threads born meanwhile with that name are the ones ``ti.init``
started (seen on taichi 1.7.4 and taichi-forge: its pool's workers, last, and its
compiler's threads, which sleep but while a kernel compiles); each gets the caller's own
name back, the name it would have had. They are given the CPUs in the order they were
started, so any run of consecutive ones, the workers too, lands on distinct CPUs. Nothing
is pinned when the pool is smaller or larger than the CPUs the process may use (a worker
process with ``cpu_max_num_threads=1`` among several keeps its freedom, and the machine
is shared anyway), where a thread's name cannot be set (off Linux, no ``/proc``), or with
``TIINTERP_PIN_THREADS=0``; Taichi started by the caller keeps its threads as they are.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

TASKS = "/proc/self/task"
# Linux keeps 15 bytes of a thread's name; this one is no name a library gives its threads.
MARKER = "tiinterp:start"


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


def _name_file(thread: int) -> str:
    return f"{TASKS}/{thread}/comm"


def _read_name(thread: int) -> str | None:
    try:
        with open(_name_file(thread)) as name:
            return name.read().rstrip("\n")
    except OSError:
        return None


def _write_name(thread: int, name: str) -> bool:
    try:
        with open(_name_file(thread), "w") as file:
            file.write(name)
        return True
    except OSError:
        return False


@dataclass
class Births:
    """The threads that the calling thread started inside :func:`marking_births`."""

    before: frozenset[int]
    own_name: str | None = None
    marked: bool = False
    threads: list[int] = field(default_factory=list)


@contextmanager
def marking_births() -> Iterator[Births]:
    """Mark the threads the calling thread starts in the block (the Note): afterwards the
    result lists them in start order (empty where no mark could be set), each with the
    calling thread's name again, as is the calling thread itself."""
    births = Births(thread_ids())
    if not sys.platform.startswith("linux"):
        yield births
        return
    me = threading.get_native_id()
    births.own_name = _read_name(me)
    births.marked = births.own_name is not None and _write_name(me, MARKER)
    try:
        yield births
    finally:
        if births.marked and births.own_name is not None:
            _write_name(me, births.own_name)
            for thread in _in_start_order(thread_ids() - births.before):
                if _read_name(thread) == MARKER:
                    _write_name(thread, births.own_name)
                    births.threads.append(thread)


def pin_started_workers(births: Births, workers: int) -> int:
    """Give each thread of ``births`` a CPU of its own in turn, where the pool's ``workers``
    are as many as the CPUs this process may use (the Note). Returns how many threads were
    pinned."""
    if os.environ.get("TIINTERP_PIN_THREADS", "1") == "0" or not sys.platform.startswith("linux"):
        return 0
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except OSError:
        return 0
    started = births.threads
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
