"""kornia's own resize/warp/affine/crop/pyramid tests, as they are and with tiinterp's drop-ins.

Runs kornia 0.8.3's tests (TESTS below) twice on the CPU, float32 and float64, each run a
`python -m pytest` process of its own: as they are ("torch"), then with
`torch.nn.functional.interpolate` / `grid_sample` set to `tiinterp.torch.interpolate` /
`grid_sample` ("tiinterp"; kornia's modules that import them by name are patched too). Prints
each run's passed/failed/skipped/error counts (read from its JUnit XML) and time side by side,
what was patched, and the tests that fail only with the swap, grouped by the first line of
their error; `--json PATH` writes the same as JSON. kornia's conftest deselects its
dynamo/compile tests unless KORNIA_TEST_OPTIMIZER is set, and puts the checkout first on
sys.path, so the tests import kornia from it (the installed kornia brings its dependencies).

    git clone --branch v0.8.3 https://github.com/kornia/kornia /tmp/kornia
    pip install torch==2.13.0 kornia==0.8.3 pytest && pip install -e .
    python benchmarks/kornia_swap.py --kornia-src /tmp/kornia [--json out.json] [--work DIR]

Measured (2026-12-06, this 2-core machine, torch 2.13.0, taichi 1.7.4): both runs 775
passed, 0 failed, 28 skipped of 803; before tiinterp.torch's functions scripted, the swapped
run had 12 failures, every one a torch.jit.script of a module calling them.

Logs, JUnit XML and Taichi's offline cache go to --work (default: a new temporary folder,
kept; given again, the swapped run starts with tiinterp's kernels compiled). A manual check:
CI does not run it (it needs kornia's tests, from GitHub).
"""

import argparse
import collections
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

# All of kornia 0.8.3's tests/geometry/transform/ (it has no resize file of its own: resize
# and rescale are TestResize and TestRescale in test_affine.py): affine, crops, warps (affine,
# perspective, remap, 3-D, homography, elastic, thin plate spline, image registration),
# pyramids; test_flip.py resamples nothing (a control).
FILES = ("affine", "crop2d", "crop3d", "elastic_transform", "flip", "homography_warper",
         "image_registrator", "imgwarp", "imgwarp3d", "pyramid", "thin_plate_spline")  # fmt: skip
TESTS = [f"tests/geometry/transform/test_{name}.py" for name in FILES]
OUTCOMES = ("passed", "failed", "skipped", "errors")

# The swap, a pytest plugin (`-p`); it writes what it patched to $KORNIA_SWAP_LOG.
PLUGIN = """
import json, os, sys


def pytest_configure(config):
    import kornia
    import torch.nn.functional as F
    import tiinterp.torch as titorch

    patched = []
    for name in ("interpolate", "grid_sample"):
        original = getattr(F, name)
        for module_name, module in sorted(sys.modules.items()):
            ours = module is F or module_name.split(".")[0] == "kornia"
            if ours and getattr(module, name, None) is original:
                setattr(module, name, getattr(titorch, name))
                patched.append(f"{module_name}.{name}")
    with open(os.environ["KORNIA_SWAP_LOG"], "w") as log:
        json.dump({"patched": patched, "kornia": kornia.__file__}, log)


def pytest_unconfigure(config):
    from tiinterp._runtime.taichi import ti  # Taichi or taichi-forge, as tiinterp chose

    ti.reset()  # writes Taichi's offline cache: exiting pytest's process does not
"""


def first_line(text: str) -> str:
    """The error's first line ("RuntimeError:" joined to the next line that says something)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()] or [""]
    return (" ".join(lines[:2]) if lines[0].endswith(":") else lines[0])[:160]


def run(label: str, src: Path, work: Path, swap: bool) -> dict[str, tuple[str, str]]:
    """One pytest run of TESTS: each test's (outcome, first error line), by test name."""
    junit, log = work / f"{label}.xml", work / f"{label}.log"
    env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=str(work / "ti-cache"))
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    args += ["--device", "cpu", "--dtype", "float32,float64", f"--junitxml={junit}"]
    if swap:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work), env.get("PYTHONPATH")]))
        env["KORNIA_SWAP_LOG"] = str(work / "patched.json")
        args += ["-p", "kornia_swap_plugin"]
    print(f"[{label}] running {len(TESTS)} test files (log: {log}) ...", flush=True)
    with log.open("w") as out:
        tests = [str(src / test) for test in TESTS]
        code = subprocess.call(args + tests, cwd=work, env=env, stdout=out, stderr=out)
    if code not in (0, 1) or not junit.exists():
        sys.exit(f"kornia_swap: [{label}] pytest exited {code} without a test report: see {log}")
    results = {}
    for case in ET.parse(junit).iter("testcase"):
        outcome, line = "passed", ""
        for tag, name in (("skipped", "skipped"), ("failure", "failed"), ("error", "errors")):
            if (found := case.find(tag)) is not None:
                outcome, line = name, first_line(found.get("message") or found.text or "")
        results[f"{case.get('classname')}::{case.get('name')}"] = (outcome, line)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = os.environ.get("KORNIA_SRC")
    parser.add_argument("--kornia-src", type=Path, default=source, help="default: $KORNIA_SRC")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--work", type=Path, help="folder for logs, JUnit XML, Taichi's cache")
    opts = parser.parse_args()
    if opts.kornia_src is None or not (opts.kornia_src / "tests").is_dir():
        where = f"{opts.kornia_src} has no tests/" if opts.kornia_src else "none given"
        sys.stderr.write(
            f"kornia_swap: needs a kornia source checkout for its tests ({where}).\n"
            "Get one with: git clone --branch v0.8.3 https://github.com/kornia/kornia\n"
            "and pass it as --kornia-src PATH or $KORNIA_SRC.\n"
        )
        sys.exit(2)
    needs = {"kornia": "kornia==0.8.3", "torch": "torch", "pytest": "pytest", "tiinterp": "-e ."}
    missing = [module for module in needs if importlib.util.find_spec(module) is None]
    if missing:
        install = " ".join(needs[module] for module in missing)
        sys.stderr.write(f"kornia_swap: {sys.executable} lacks {missing}: pip install {install}\n")
        sys.exit(2)
    src = opts.kornia_src.resolve()
    work = (opts.work or Path(tempfile.mkdtemp(prefix="kornia_swap-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "kornia_swap_plugin.py").write_text(PLUGIN)
    runs, seconds = {}, {}
    for label, swap in (("torch", False), ("tiinterp", True)):
        start = time.perf_counter()
        runs[label] = run(label, src, work, swap)
        seconds[label] = round(time.perf_counter() - start, 1)
    swapped = json.loads((work / "patched.json").read_text())
    counts = {
        label: {o: sum(outcome == o for outcome, _ in results.values()) for o in OUTCOMES}
        for label, results in runs.items()
    }
    bad = ("failed", "errors")
    only_swap: dict[str, list[str]] = collections.defaultdict(list)
    for name, (outcome, line) in runs["tiinterp"].items():
        if outcome in bad and runs["torch"].get(name, ("",))[0] not in bad:
            only_swap[line].append(name)
    print(f"\nkornia's tests: {src}; kornia imported from {swapped['kornia']}")
    print("patched: " + ", ".join(swapped["patched"]))
    print(f"\n{'run':<10}" + "".join(f"{o:>9}" for o in OUTCOMES) + f"{'seconds':>9}")
    for label, count in counts.items():
        print(f"{label:<10}" + "".join(f"{count[o]:>9}" for o in OUTCOMES) + f"{seconds[label]:>9}")
    total = sum(map(len, only_swap.values()))
    print(f"\n{total} tests fail only with tiinterp's drop-ins, by first error line:")
    for line, names in sorted(only_swap.items(), key=lambda item: -len(item[1])):
        print(f"\n  [{len(names)}] {line}", *sorted(names), sep="\n    ")
    if opts.json:
        report = {"kornia_src": str(src), "tests": TESTS, **swapped, "counts": counts}
        report |= {"seconds": seconds, "fail_only_with_swap": only_swap, "work": str(work)}
        opts.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
