"""Cold cache: in fresh processes with an empty Taichi offline cache, 6 threads each call
``interpolate`` with a different mode right after ``tiinterp.init("cpu")``; each result
must equal a serial call's, bit for bit (tests/ops/test_robustness.py runs one such process
at a small size)."""

import json
import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.stress

COLD_CACHE = r"""
import json, threading, time, traceback
import numpy as np
import tiinterp

MODES = ("nearest", "nearest-exact", "area", "bilinear", "bicubic", "lanczos3")
x = np.random.default_rng(5).random((2, 3, 33, 29), dtype=np.float32)
tiinterp.init("cpu")
barrier = threading.Barrier(len(MODES))
results, outputs = {}, {}

def work(mode):
    barrier.wait()
    start = time.perf_counter()
    try:
        outputs[mode] = tiinterp.interpolate(x, size=(41, 17), mode=mode)
        results[mode] = {"ok": True}
    except BaseException as error:
        results[mode] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:500],
                         "traceback": traceback.format_exc()[-1500:]}
    results[mode]["seconds"] = time.perf_counter() - start

threads = [threading.Thread(target=work, args=(m,)) for m in MODES]
for t in threads:
    t.start()
for t in threads:
    t.join()
for mode, y in outputs.items():
    again = tiinterp.interpolate(x, size=(41, 17), mode=mode)
    results[mode]["same_as_serial"] = bool(np.array_equal(y.view(np.uint32), again.view(np.uint32)))
print("STRESS-RESULT " + json.dumps(results))
"""
TIMEOUT = 600


def test_six_threads_compile_six_modes_on_an_empty_cache(quick, tmp_path, record_property):
    processes = 1 if quick else 3
    seconds, failures = [], []
    for run in range(processes):
        cache = tmp_path / f"cache-{run}"
        env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=str(cache))
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", COLD_CACHE],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        seconds.append(time.perf_counter() - start)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("STRESS-RESULT ")]
        assert done.returncode == 0 and lines, (
            f"process {run}: exit status {done.returncode}: {done.stderr[-3000:]}"
        )
        modes = json.loads(lines[-1].split(" ", 1)[1])
        assert len(modes) == 6, f"process {run}: results of {sorted(modes)} only"
        failures += [
            f"process {run}, {mode}: {result['error']}\n{result['traceback']}"
            for mode, result in modes.items()
            if not result["ok"]
        ]
        failures += [
            f"process {run}, {mode}: threaded result differs from a serial call"
            for mode, result in modes.items()
            if result["ok"] and not result["same_as_serial"]
        ]
    record_property("process_seconds", seconds)
    assert failures == [], "\n".join(failures)
