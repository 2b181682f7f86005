"""benchmarks/small_calls.py's bookkeeping: rows, targets, the table, failed processes.

Arch-independent and without timings: the measurements themselves are `make bench`'s.
"""

import importlib.util
import json
import pathlib
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "small_calls.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("small_calls_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fail(bench, message):
    raise bench.ProcessFailed(message)


def test_table_and_summary_show_each_target_and_failure(bench):
    rows = [
        bench.record("small fwd", "us", 29.7, 4.1, "PyTorch", 4.0),
        bench.record("small bwd", "us", 27.9, 16.5, "PyTorch", 4.0),
        bench.record("init, warm cache", "s", 0.335, limit=1.0),
        bench.record("init, cold cache", "s", 0.338),
        bench.record("folder, first run", "s", 9.0, 0.5, "PIL"),
        *bench.attempt("folder", _fail, bench, "killed by SIGSEGV | twice"),
    ]
    # What results.json holds is what the table is made from.
    results = json.loads(json.dumps({"rows": rows}))
    lines = bench.table(results).splitlines()
    assert lines[0] == "| what | tiinterp | reference | ratio | target | met? |"
    assert lines[2:] == [
        "| small fwd | 29.7 us | 4.1 us (PyTorch) | 7.24x | <= 4x | **no** |",
        "| small bwd | 27.9 us | 16.5 us (PyTorch) | 1.69x | <= 4x | yes |",
        "| init, warm cache | 0.335 s | - | - | <= 1 s | yes |",
        "| init, cold cache | 0.338 s | - | - | - | - |",
        "| folder, first run | 9.000 s | 0.500 s (PIL) | 18.00x | - | - |",
        "| folder | failed: killed by SIGSEGV / twice | - | - | - | **no** |",
    ]
    assert bench.summary(results) == ("targets met: 2/4; missed: small fwd; FAILED to run: folder")


def test_run_reports_how_a_process_failed(bench, tmp_path):
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    with pytest.raises(bench.ProcessFailed, match=r"^killed by SIGTERM$"):
        bench.run([sys.executable, "-c", killed], tmp_path)
    with pytest.raises(bench.ProcessFailed, match=r"^exit status 1: no input$"):
        bench.run([sys.executable, "-c", "import sys; sys.exit('no input')"], tmp_path)


def test_run_sets_the_cache_and_the_figure_is_the_last_line(bench, tmp_path):
    code = "import os; print('[Taichi] a banner'); print(os.environ['TI_OFFLINE_CACHE_FILE_PATH'])"
    seconds, stdout = bench.run([sys.executable, "-c", code], tmp_path)
    assert seconds > 0
    assert stdout.splitlines()[-1] == str(tmp_path)
    assert bench.last_float("[Taichi] version 1.7.4\n0.25\n") == 0.25
    with pytest.raises(bench.ProcessFailed, match="expected a number on the last line"):
        bench.last_float("[Taichi] version 1.7.4\n")


def test_folder_images_have_distinct_sizes_over_the_asked_widths(bench):
    sizes = bench.folder_sizes(20)
    assert len(set(sizes)) == 20
    assert min(w for w, _ in sizes) == 200 and max(w for w, _ in sizes) == 1100
    assert len({round(w / h, 2) for w, h in sizes}) > 4
