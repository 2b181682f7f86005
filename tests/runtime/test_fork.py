"""tiinterp in worker processes: forked (the Linux default of ``multiprocessing`` and of
PyTorch's ``DataLoader``), forkserver and spawn, after the parent has called tiinterp.

Note [Taichi after fork] in tiinterp/_runtime/session.py explains what a forked child does. On
taichi 1.7.4 every worker computes what the parent computes, bit for bit; on taichi-forge,
which cannot start a second runtime in a process, a forked child's call is a RuntimeError
that names the start methods that work (spawn and forkserver, which work there too).
Every wait here has a deadline: a hang is a failure, not a stuck suite.
"""

import concurrent.futures
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch

import tiinterp
import tiinterp.torch as titorch
from tiinterp._runtime.taichi import can_abandon_runtime, ti

DEADLINE = 300  # seconds; a cold Taichi cache compiles in the worker


def _work(arch, everything=False):
    """What a worker computes on ``arch``: a forward, and if ``everything``, an adjoint and a
    grid_sample too (each is a kernel that the child's new runtime loads)."""
    if tiinterp.current_arch() != arch:
        tiinterp.init(arch)
    rng = np.random.default_rng(7)
    x = rng.random((2, 3, 9, 7), dtype=np.float32)
    results = [tiinterp.interpolate(x, size=(13, 5), mode="bicubic")]
    if everything:
        grid = rng.uniform(-1.1, 1.1, (2, 4, 5, 2)).astype(np.float32)
        results.append(
            tiinterp.interpolate_backward(results[0], x.shape, mode="lanczos3", antialias=True)
        )
        results.append(tiinterp.grid_sample(x, grid, mode="bilinear", padding_mode="border"))
    return results


def _work_or_error(arch, everything=False):
    try:
        return _work(arch, everything)
    except RuntimeError as error:
        return str(error)


def _forked_child_can_compute(arch):
    """Taichi 1.7.4 restarts its runtime in a forked child on every arch but CUDA."""
    return can_abandon_runtime() and arch != "cuda"


def _check_worker_results(results, expected, arch):
    for result in results:
        if _forked_child_can_compute(arch):
            assert not isinstance(result, str), result
            for got, want in zip(result, expected, strict=True):
                np.testing.assert_array_equal(got, want)
        else:
            assert isinstance(result, str)
            assert "forked" in result
            assert "'spawn'" in result
            assert "'forkserver'" in result


def _run_forked(function, *args):
    """``function(*args)`` in a child made by ``os.fork()`` of this process; its result (or
    its exception's text) comes back through a pipe, within DEADLINE."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        try:
            os.close(read_end)
            try:
                payload = pickle.dumps(function(*args))
            except BaseException as error:
                payload = pickle.dumps(f"{type(error).__name__}: {error}")
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        finally:
            os._exit(0)
    os.close(write_end)
    start = time.monotonic()
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() - start > DEADLINE:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child did not finish within {DEADLINE} s")
        time.sleep(0.05)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    if not data:
        pytest.fail("the forked child died without a result")
    return pickle.loads(data)


def test_a_forked_child_computes_what_its_parent_computes(arch):
    expected = _work(arch, everything=True)  # the parent has started its runtime
    _check_worker_results([_run_forked(_work_or_error, arch, True)], expected, arch)
    # The parent's own runtime is untouched by the child.
    for got, want in zip(_work(arch, everything=True), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_taichi_data_of_the_parent_is_refused_in_a_forked_child(arch):
    # Both made in the parent: in the child, Taichi itself cannot make a field on the
    # inherited runtime before tiinterp has replaced it.
    src, dst = ti.field(ti.f32, (1, 1, 4, 4)), ti.field(ti.f32, (1, 1, 2, 2))
    tiinterp.interpolate_into(src, dst, mode="bilinear")

    def resize_parents_field():
        tiinterp.interpolate_into(src, dst, mode="bilinear")

    assert "made before this process was forked" in _run_forked(
        _work_or_error_of, resize_parents_field
    )


def _work_or_error_of(function):
    try:
        function()
    except RuntimeError as error:
        return str(error)
    return "no error"


def test_a_fork_while_another_thread_calls_tiinterp(arch):
    """tiinterp's lock is held across fork(): the child never inherits a call half-done."""
    expected = _work(arch)
    stop = threading.Event()

    def keep_calling():
        while not stop.is_set():
            _work(arch)

    caller = threading.Thread(target=keep_calling)
    caller.start()
    try:
        results = [_run_forked(_work_or_error, arch)]
    finally:
        stop.set()
        caller.join()
    _check_worker_results(results, expected, arch)


def test_a_fork_pool_and_a_process_pool_executor(arch):
    expected = _work(arch)
    context = multiprocessing.get_context("fork")
    with context.Pool(2) as pool:
        from_pool = pool.map_async(_work_or_error, [arch] * 2).get(timeout=DEADLINE)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as executor:
        futures = [executor.submit(_work_or_error, arch) for _ in range(2)]
        from_executor = [future.result(timeout=DEADLINE) for future in futures]
    _check_worker_results(from_pool + from_executor, expected, arch)


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_forkserver_and_spawn_workers(method):
    """Fresh interpreters: they start their own runtime on both backends."""
    expected = _work("cpu")
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as executor:
        futures = [executor.submit(_work, "cpu") for _ in range(2)]
        results = [future.result(timeout=DEADLINE) for future in futures]
    for result in results:
        for got, want in zip(result, expected, strict=True):
            np.testing.assert_array_equal(got, want)


class _Resized(torch.utils.data.Dataset):
    """A Dataset whose transform is a tiinterp resize, as users write them."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        image = torch.arange(48, dtype=torch.float32).reshape(1, 3, 4, 4) + index
        return titorch.interpolate(image, size=(6, 5), mode="bilinear")[0]


def test_a_dataloader_with_forked_workers_after_a_call_in_the_parent():
    """The case of the report: a model (or a preview) ran tiinterp, then a DataLoader with
    workers (forked, the Linux default) resizes in its Dataset."""
    tiinterp.init("cpu")
    dataset = _Resized()
    expected = torch.stack([dataset[i] for i in range(len(dataset))])
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=2, timeout=DEADLINE)
    if not _forked_child_can_compute("cpu"):
        with pytest.raises(RuntimeError, match="'spawn'"):
            list(loader)
        return
    torch.testing.assert_close(torch.cat(list(loader)), expected, rtol=0, atol=0)


def test_a_forked_child_of_a_taichi_program_exits():
    """Without tiinterp's at-fork handling, a forked child of a program that started Taichi
    hangs in sys.exit (the runtime's destructor waits for threads the child lacks), whether
    or not the child called tiinterp."""
    code = textwrap.dedent(
        """
        import os, sys
        import numpy as np
        import tiinterp
        x = np.ones((1, 1, 4, 4), np.float32)
        y = tiinterp.interpolate(x, size=(3, 3), mode="bilinear")
        for call in (False, True):
            pid = os.fork()
            if pid == 0:
                if call:
                    tiinterp.interpolate(x, size=(3, 3), mode="bilinear")
                sys.exit(0)
            _, status = os.waitpid(pid, 0)
            print(call, os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE
    )
    assert done.returncode == 0, done.stderr
    statuses = dict(line.split() for line in done.stdout.splitlines())
    assert statuses["False"] == "0"
    # On taichi-forge the call is the RuntimeError (exit status 1), not a hang.
    assert statuses["True"] == ("0" if can_abandon_runtime() else "1")


def test_a_platform_without_fork_imports_and_runs_tiinterp():
    """Windows has neither ``os.fork`` nor ``os.register_at_fork``: the fork guard is left
    out there, and the package imports and computes as anywhere else (issue 42)."""
    code = textwrap.dedent(
        """
        import os
        del os.fork, os.register_at_fork
        import numpy as np
        import tiinterp
        y = tiinterp.interpolate(np.ones((1, 1, 4, 4), np.float32), size=(3, 3), mode="bilinear")
        print("ok", float(y.sum()))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "9.0"]
