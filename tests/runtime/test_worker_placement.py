"""Note [Workers on their own CPUs] (tiinterp/_runtime/worker_placement.py): when tiinterp starts
Taichi on the CPU with one pool worker per CPU the process may use, each worker runs on a
CPU of its own; with fewer workers, with ``TIINTERP_PIN_THREADS=0``, or for the launching
thread, nothing changes.

Each case runs in a fresh interpreter (it starts Taichi its own way) and finds the pool's
workers by what they do, not by the rule tiinterp pins by: the threads other than the
main one whose CPU time grows while parallel resizes run.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tiinterp._runtime.taichi import can_abandon_runtime
from tiinterp._runtime.worker_placement import _in_start_order

# Where a forked child cannot start a runtime of its own (taichi-forge: Note [Taichi after
# fork]), only the parent's placement is checked.
STARTS = ["here", "fork"] if can_abandon_runtime() else ["here"]

PROBE = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import tiinterp

    def cpu_ticks():
        ticks = {}
        for name in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{name}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks[int(name)] = int(fields[11]) + int(fields[12])
        return ticks

    def placement():
        if os.fork() == 0:  # a forked child starts its own runtime (Note [Taichi after fork])
            os._exit(0)
        os.wait()
        threads = int(sys.argv[1]) if len(sys.argv) > 1 else None
        options = {"cpu_max_num_threads": threads} if threads else {}
        tiinterp.init("cpu", **options)
        x = np.random.default_rng(0).standard_normal((8, 16, 256, 256)).astype(np.float32)
        tiinterp.interpolate(x, size=(300, 300), mode="bilinear")
        before = cpu_ticks()
        for _ in range(40):
            tiinterp.interpolate(x, size=(300, 300), mode="bilinear")
        after = cpu_ticks()
        main = os.getpid()
        workers = [t for t in after if t != main and after[t] - before.get(t, 0) >= 2]
        return {
            "cpus": sorted(os.sched_getaffinity(0)),
            "main": sorted(os.sched_getaffinity(main)),
            "workers": [sorted(os.sched_getaffinity(t)) for t in workers],
            "pinned": sum(len(os.sched_getaffinity(t)) == 1 for t in after if t != main),
        }

    if sys.argv[-1] == "fork":
        sys.argv.pop()
        tiinterp.interpolate(np.ones((1, 1, 4, 4), np.float32), size=(3, 3))
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read)
            os.write(write, json.dumps(placement()).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            print(pipe.read())
        os.waitpid(child, 0)
    else:
        print(json.dumps(placement()))
    """
)


def _placement(*args, environment=None):
    env = {**os.environ, **(environment or {})}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cpus():
    return sorted(os.sched_getaffinity(0))


needs_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="thread placement is Linux's"
)


@needs_linux
@pytest.mark.parametrize("started", STARTS)
def test_each_pool_worker_runs_on_a_cpu_of_its_own(started):
    """The default pool (one worker per CPU): every thread that worked during the resizes
    is pinned to one CPU, no two to the same, and the launching thread keeps every CPU;
    a forked child's new runtime is placed the same way."""
    placement = _placement(*(["fork"] if started == "fork" else []))
    assert placement["main"] == placement["cpus"] == _cpus()
    workers = placement["workers"]
    if len(_cpus()) == 1:  # one CPU: nothing to place
        assert placement["pinned"] == 0
        return
    assert len(workers) >= 2, placement
    assert all(len(cpus) == 1 for cpus in workers), placement
    assert len({cpus[0] for cpus in workers}) == len(workers), placement


@needs_linux
@pytest.mark.parametrize(
    "args, environment",
    [(["1"], None), ([], {"TIINTERP_PIN_THREADS": "0"})],
    ids=["one-worker-pool", "TIINTERP_PIN_THREADS=0"],
)
def test_no_thread_pinned(args, environment):
    """A pool smaller than the CPUs (a worker process among several), or pinning turned off:
    every thread keeps every CPU."""
    placement = _placement(*args, environment=environment)
    assert placement["pinned"] == 0, placement
    assert all(cpus == _cpus() for cpus in placement["workers"]), placement


def test_threads_in_start_order_across_an_id_wrap():
    """Thread ids ascend as threads start, until they pass the largest id and start again
    low: the high ids are then the older threads."""
    assert _in_start_order(frozenset({7, 5, 6})) == [5, 6, 7]
    assert _in_start_order(frozenset({32760, 32765, 301, 300})) == [32760, 32765, 300, 301]
    assert _in_start_order(frozenset()) == []


GROWING_POOL = textwrap.dedent(
    """
    import json, os, threading
    import numpy as np
    import tiinterp
    from tiinterp._runtime.session import ti

    # The program's own threads, started by another thread of the program while Taichi
    # starts (a pool growing while its first task initialises tiinterp): one just before
    # and one just after ti.init's own work, so that both are surely born meanwhile.
    import queue
    release, theirs, requests = threading.Event(), [], queue.Queue()

    def pool():  # started before tiinterp: a thread of the program that starts threads
        while (done := requests.get()) is not None:
            thread = threading.Thread(target=release.wait)
            thread.start()
            theirs.append(thread)
            done.set()

    threading.Thread(target=pool, daemon=True).start()

    def from_another_thread():
        done = threading.Event()
        requests.put(done)
        done.wait()

    taichis_init = ti.init

    def init(*args, **options):
        from_another_thread()
        result = taichis_init(*args, **options)
        from_another_thread()
        return result

    ti.init = init
    tiinterp.init("cpu")
    ti.init = taichis_init
    x = np.ones((4, 8, 64, 64), np.float32)
    tiinterp.interpolate(x, size=(96, 96), mode="bilinear")

    def threads():
        for name in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{name}/comm") as comm:
                    yield comm.read().strip(), len(os.sched_getaffinity(int(name)))
            except OSError:  # ended meanwhile
                continue

    every = len(os.sched_getaffinity(0))
    print(json.dumps({
        "theirs": [len(os.sched_getaffinity(t.native_id)) == every for t in theirs],
        "pinned": sum(cpus == 1 for _, cpus in threads()),
        "names": sorted({name for name, _ in threads()}),
    }))
    release.set()
    requests.put(None)
    for thread in theirs:
        thread.join()
    """
)


@needs_linux
@pytest.mark.skipif(len(_cpus()) < 2, reason="one CPU: nothing is pinned")
def test_the_programs_threads_started_meanwhile_keep_every_cpu():
    """Threads the program starts while tiinterp starts Taichi are not Taichi's: none is
    pinned (before, every one started during ti.init was), while Taichi's workers are;
    and no thread keeps the name that marked Taichi's (Note [Workers on their own CPUs])."""
    done = subprocess.run(
        [sys.executable, "-c", GROWING_POOL], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["theirs"] == [True, True], result  # both keep every CPU
    assert result["pinned"] >= len(_cpus()), result
    assert "tiinterp:start" not in result["names"], result
