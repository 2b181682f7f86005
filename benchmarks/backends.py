"""taichi 1.7.4 against taichi-forge, side by side in one run: part of `make bench`.

Every configuration runs in a fresh process of its own (a process holds one Taichi backend)
with an empty Taichi offline cache: each Taichi backend on the CPU with Taichi's default
options and in tiinterp's SIMD configuration (``real_matrix_scalarize=False``), and on Vulkan;
taichi-forge under each of its ``compile_tier`` options ("fast", its default, "balanced" and
"full"). Each measures the float32 rows of `make bench` (W1-W4, every mode, forward and the
hand-written backward, medians after warm-up calls, 2 CPU threads), the first call of each
row (compiling included: the cold-cache cost a user pays once per kernel) and the per-call
cost of a tiny resize. PyTorch's and JAX's times for the same rows are measured in the same
run, in this process, after the workers.

Prints the tables; writes benchmarks/backends.json (benchmarks/out/quick/ with --quick);
``--readme docs/performance.md`` and ``--details docs/guide/backends.md`` replace the text
between ``<!-- backends:start -->`` and ``<!-- backends:end -->`` there: the summary with the
faster backend named per arch, and the per-row table.
"""

import argparse
import json
import math
import pathlib
import sys
import tempfile
import time

import bench
import harness
import numpy as np
from harness import Timing, median_time, ms, progress

HERE = pathlib.Path(__file__).resolve().parent
MODES = bench.TORCH_MODES + ("lanczos3",)
BACKEND_NAMES = {"taichi": "taichi", "taichi_forge": "taichi-forge"}
FORGE_TIERS = ("fast", "balanced", "full")
START = "<!-- backends:start -->"
END = "<!-- backends:end -->"
# A backend counts as faster on an arch when its geometric-mean time is this much lower;
# closer than that, single rows on this shared VM vary more than the difference.
CLEAR_MARGIN = 0.10
# The small workload: a call's fixed cost weighs most there.
SMALL_WORKLOADS = ("W4",)


def configurations(archs, simd):
    """(label, backend, arch, options) for every configuration to measure, taichi 1.7.4
    first on each arch: the ratios are taken against it."""
    configs = []
    for arch in archs:
        variants = [(arch, {})]
        if arch == "cpu" and simd:
            variants.append(("cpu-simd", {"real_matrix_scalarize": False}))
        for name, options in variants:
            configs.append((f"taichi {name}", "taichi", name, options))
            configs += [
                (f"forge {name} {tier}", "taichi_forge", name, {**options, "compile_tier": tier})
                for tier in FORGE_TIERS
            ]
    return configs


def rows(quick):
    workloads = bench.QUICK_WORKLOADS if quick else bench.WORKLOADS
    return [
        (name, shape, size, mode) for name, (shape, size) in workloads.items() for mode in MODES
    ]


# --- the worker: one configuration, in its own process -------------------------------------


def worker(spec):
    import tiinterp

    arch = "cpu" if spec["arch"].startswith("cpu") else spec["arch"]
    options = dict(spec["options"])
    if arch == "cpu":
        options["cpu_max_num_threads"] = bench.THREADS
    started = time.perf_counter()
    tiinterp.init(arch, **options)
    ti = tiinterp.taichi_module()
    result = {
        "backend": ti.__name__,
        "version": ".".join(map(str, ti.__version__)),
        "init_seconds": time.perf_counter() - started,
        "rows": [],
    }
    timing = Timing(spec["repeats"], spec["warmup"])
    rng = np.random.default_rng(0)
    for name, shape, size, mode in spec["rows"]:
        x, g = harness.inputs(rng, shape, size)
        result["rows"].append(
            {"workload": name, "mode": mode, **time_row(x, g, size, mode, timing)}
        )
        progress(f"{spec['label']}: {name} {mode}")
    in_shape, size, mode = bench.OVERHEAD_CASE
    x = rng.random(in_shape, dtype=np.float32)
    result["per_call_us"] = harness.block_us(
        lambda: tiinterp.interpolate(x, size=size, mode=mode),
        bench.OVERHEAD_CALLS,
        Timing(max(5, spec["repeats"]), 2),
    )
    return result


def time_row(x, g, size, mode, timing):
    """The first forward and backward calls (compiling included), then the medians."""
    import tiinterp

    size = tuple(size)
    start = time.perf_counter()
    tiinterp.interpolate(x, size=size, mode=mode)
    first_forward = time.perf_counter() - start
    start = time.perf_counter()
    tiinterp.interpolate_backward(g, x.shape, mode=mode)
    first_backward = time.perf_counter() - start
    return {
        "first_forward": first_forward,
        "first_backward": first_backward,
        "forward": median_time(lambda: tiinterp.interpolate(x, size=size, mode=mode), timing),
        "backward": median_time(
            lambda: tiinterp.interpolate_backward(g, x.shape, mode=mode), timing
        ),
    }


def run_worker(config, spec_rows, args):
    label, backend, arch, options = config
    spec = {
        "label": label,
        "arch": arch,
        "options": options,
        "rows": spec_rows,
        "repeats": args.repeats,
        "warmup": 1 if args.quick else 2,
    }
    # taichi-forge otherwise posts a version check to its metadata host.
    env = {"TIINTERP_TAICHI": backend, "TI_SKIP_VERSION_CHECK": "ON"}
    command = [sys.executable, __file__, "--worker", json.dumps(spec)]
    with tempfile.TemporaryDirectory() as cache:
        try:  # the worker's progress lines go to this process's stderr as they come
            seconds, stdout = harness.run(command, cache, env, stderr=None)
        except harness.ProcessFailed as error:
            return {"label": label, "error": str(error)}
    result = json.loads(stdout.strip().splitlines()[-1])
    result.update(label=label, arch=arch, options=options, process_seconds=seconds)
    return result


# --- references and the report -------------------------------------------------------------


def references(spec_rows, args):
    """PyTorch's (JAX's for lanczos3) forward and backward times for the same rows."""
    import torch

    torch.set_num_threads(bench.THREADS)
    timing = Timing(args.repeats, 1 if args.quick else 2)
    rng = np.random.default_rng(0)
    times = {}
    for name, shape, size, mode in spec_rows:
        size = tuple(size)
        x, g = harness.inputs(rng, shape, size)
        ref, ref_name = bench.bench_reference(x, g, size, mode, timing)
        times[f"{name} {mode}"] = {**ref, "name": ref_name}
        progress(f"reference: {name} {mode}")
    return times


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(result, baseline, refs):
    """Geometric means over the rows, forward and backward: time against the arch's taichi
    1.7.4 configuration (< 1: faster), over the large workloads and over the small one (W4,
    where the cost of a call weighs most), and speed-up against PyTorch/JAX (> 1: faster)."""
    ratios = {"large": [], "small": []}
    speedups = []
    for row, base in zip(result["rows"], baseline["rows"], strict=True):
        ref = refs[f"{row['workload']} {row['mode']}"]
        size = "small" if row["workload"] in SMALL_WORKLOADS else "large"
        for direction in ("forward", "backward"):
            ratios[size].append(row[direction] / base[direction])
            speedups.append(ref[direction] / row[direction])
    every = ratios["large"] + ratios["small"]
    return {
        "time_vs_taichi": geomean(every),
        "time_vs_taichi_large": geomean(ratios["large"]) if ratios["large"] else None,
        "time_vs_taichi_small": geomean(ratios["small"]) if ratios["small"] else None,
        "faster_figures": sum(r < 1 for r in every),
        "figures": len(every),
        "speedup_vs_reference": geomean(speedups),
        "first_calls_seconds": sum(
            r["first_forward"] + r["first_backward"] for r in result["rows"]
        ),
    }


def baseline_of(result, results):
    return next(r for r in results if r["arch"] == result["arch"] and r["backend"] == "taichi")


def _ratio(value):
    return "" if value is None else f"{value:.2f}x"


def summary_table(results):
    lines = [
        "| arch | backend, options | time vs taichi 1.7.4: W1-W3 | W4 (small) "
        "| figures faster | speed-up vs PyTorch/JAX | first calls, cold cache "
        "| per-call cost |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| | {r['label']} | failed: {r['error']} | | | | | |")
            continue
        s = r["summary"]
        options = ", ".join(f"{k}={v!r}" for k, v in r["options"].items()) or "defaults"
        lines.append(
            f"| {r['arch']} | {BACKEND_NAMES[r['backend']]} {r['version']}, {options} "
            f"| {_ratio(s['time_vs_taichi_large'])} | {_ratio(s['time_vs_taichi_small'])} "
            f"| {s['faster_figures']}/{s['figures']} "
            f"| {s['speedup_vs_reference']:.2f}x | {s['first_calls_seconds']:.1f} s "
            f"| {r['per_call_us']:.0f} us |"
        )
    return "\n".join(lines)


def _verdict(ratio, what):
    if ratio is None:
        return None
    if ratio < 1 - CLEAR_MARGIN:
        return f"{what}: **taichi-forge** is faster, {1 / ratio:.2f}x less time"
    if ratio > 1 + CLEAR_MARGIN:
        return f"{what}: **taichi 1.7.4** is faster, taichi-forge takes {ratio:.2f}x its time"
    return f"{what}: neither is clearly faster, taichi-forge takes {ratio:.2f}x taichi's time"


def verdicts(results):
    """One line per arch: which backend is faster at its default options, on the large
    workloads and on the small one; and taichi-forge's fastest compile_tier there."""
    lines = []
    for arch in dict.fromkeys(r["arch"] for r in results if "error" not in r):
        mine = [r for r in results if r["arch"] == arch and "error" not in r]
        forge = [r for r in mine if r["backend"] == "taichi_forge"]
        default = next((r for r in forge if r["options"].get("compile_tier") == "fast"), None)
        if default is None or not any(r["backend"] == "taichi" for r in mine):
            continue
        s = default["summary"]
        parts = [
            _verdict(s["time_vs_taichi_large"], "W1-W3"),
            _verdict(s["time_vs_taichi_small"], "W4"),
        ]
        best = min(forge, key=lambda r: r["summary"]["time_vs_taichi"])
        b = best["summary"]
        lines.append(
            f'- **{arch}**, taichi-forge at its default `compile_tier` ("fast"): '
            + "; ".join(p for p in parts if p)
            + f'. taichi-forge\'s fastest `compile_tier` here: "{best["options"]["compile_tier"]}"'
            f" ({_ratio(b['time_vs_taichi_large'])} taichi's time on W1-W3, "
            f"first calls {b['first_calls_seconds']:.1f} s against "
            f'{s["first_calls_seconds"]:.1f} s at "fast").'
        )
    return "\n".join(lines)


def rows_table(results, refs):
    ok = [r for r in results if "error" not in r]
    rows = []
    for i, row in enumerate(ok[0]["rows"]):
        ref = refs[f"{row['workload']} {row['mode']}"]
        for direction in ("forward", "backward"):
            reference = f"{ms(ref[direction])} ({ref['name']})"
            times = [ms(r["rows"][i][direction]) for r in ok]
            rows.append((row["workload"], row["mode"], direction, reference, *times))
    header = ("workload", "mode", "direction", "PyTorch/JAX ms", *(r["label"] for r in ok))
    return "\n".join(harness.markdown_table(header, rows))


def machine_line(meta):
    return (
        f"Measured on {meta['date']} on {meta['cpu']}, {meta['cpu_count']} cores, "
        f"{bench.THREADS} CPU threads; Vulkan is Mesa's lavapipe, a software device running on "
        f"the same CPU cores (a real GPU's ranking may differ); run time {meta['seconds']:.0f} s."
    )


def report(data):
    results, refs = data["results"], data["references"]
    for result in results:
        if "error" not in result:
            result["summary"] = summarize(result, baseline_of(result, results), refs)
    summary = summary_table(results)
    verdict = verdicts(results)
    print(summary, verdict, machine_line(data["meta"]), sep="\n\n")
    return (
        "\n\n".join([summary, verdict, machine_line(data["meta"])]),
        "\n\n".join([rows_table(results, refs), machine_line(data["meta"])]),
    )


def measure(args):
    start = time.perf_counter()
    spec_rows = rows(args.quick)
    if args.workloads:
        spec_rows = [r for r in spec_rows if r[0] in args.workloads.split(",")]
    results = []
    for config in configurations(args.archs.split(","), not args.no_simd):
        progress(f"configuration {config[0]}")
        results.append(run_worker(config, spec_rows, args))
    refs = references(spec_rows, args)
    machine = bench.machine_facts()
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "cpu": machine.get("cpu", "unknown CPU"),
        "cpu_count": machine["cpu_count"],
        "seconds": time.perf_counter() - start,
        "quick": args.quick,
    }
    return {"meta": meta, "machine": machine, "results": results, "references": refs}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--archs", default="cpu,vulkan", help="archs to compare (cpu,vulkan)")
    parser.add_argument("--workloads", default="", help="a subset of W1,W2,W3,W4")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per figure (5)")
    parser.add_argument("--no-simd", action="store_true", help="leave the SIMD configuration out")
    parser.add_argument("--quick", action="store_true", help="tiny shapes: checks the script")
    parser.add_argument("--readme", metavar="PATH", help="write the summary into PATH's block")
    parser.add_argument(
        "--details", metavar="PATH", help="write the per-row table into PATH's block"
    )
    parser.add_argument(
        "--render-only", action="store_true", help="measure nothing: report backends.json"
    )
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    output_dir = HERE / "out" / "quick" if args.quick else HERE
    output_dir.mkdir(parents=True, exist_ok=True)
    harness.check_blocks(parser, [args.readme, args.details], START, END)
    data = harness.load_or_measure(
        output_dir / "backends.json", args.render_only, lambda: measure(args)
    )
    blocks = report(data)
    for target, block in zip((args.readme, args.details), blocks, strict=True):
        if target:
            harness.write_block(target, block, START, END)
            print(f"wrote {target}")


if __name__ == "__main__":
    main()
