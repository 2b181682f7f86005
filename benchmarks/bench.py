"""tiinterp vs PyTorch (CPU) and JAX, measured in one run: `make bench`.

Workloads: W1 (8,16,256,256)->(512,512), W2 (8,16,512,512)->(256,256),
W3 (4,3,333,517)->(480,640), W4 (1,3,64,64)->(128,128), in every mode (lanczos3 against
JAX, the others against PyTorch); W2 with antialias=True (bilinear, bicubic) and
T1 (2,4,32,64,64)->(64,128,128) trilinear against PyTorch; all of that in float32, and
bilinear, bicubic and lanczos3 on W1-W3 in float64 too (JAX with x64 enabled). Every timing
is the median of the repeats (5, and as many more as make 0.1 s, up to 200) after warm-up
calls, with 2 threads for every library. Also
measured: the bandwidth of a forward into `out=` against a NumPy copy of the same bytes, the
fixed cost of a call (a (1,1,8,8)->(16,16) resize and an empty Taichi kernel), and the first
call's compile time. Prints a table and the targets' checklist, and writes results.json
into benchmarks/ and the plots bandwidth.png and speedup.png into docs/, beside the page
that shows them (docs/performance.md, whose tables docs/hooks.py renders from results.json
when the site is built). --quick writes all three into benchmarks/out/quick/ instead, and
--output-dir DIR into DIR.

`--readme PATH` also replaces the text between `<!-- bench:start -->` and
`<!-- bench:end -->` in PATH with the table (the README holds no such block: the docs render
the table); `--render-only` redoes the printing, plots and that block from an earlier
results.json without measuring.
"""

import os

THREADS = 2
# Set before torch / JAX load: PyTorch's OpenMP threads otherwise spin after each call and
# steal the 2 cores from whatever runs next; XLA gets the same thread budget.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
os.environ.setdefault(
    "XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={THREADS}"
)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

import tiinterp  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # harness.py, also where the script is loaded by its path

# isort: split
import harness  # noqa: E402
from harness import WORKLOADS, Timing, median_time, ms, progress  # noqa: E402

# The plots of a full run, beside the page that shows them (docs/performance.md).
PLOTS = HERE.parent / "docs"
TORCH_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")
# Extra rows: antialiased downsampling and 3-D trilinear, both against PyTorch.
# (name, input shape, size, mode, antialias)
EXTRA = (
    ("W2-aa", (8, 16, 512, 512), (256, 256), "bilinear", True),
    ("W2-aa", (8, 16, 512, 512), (256, 256), "bicubic", True),
    ("T1", (2, 4, 32, 64, 64), (64, 128, 128), "trilinear", False),
)
# float64 covers fewer rows: a float64 call moves twice the bytes and PyTorch's and JAX's
# take 2-3x longer, so the full grid would double the run.
FLOAT64_WORKLOADS = ("W1", "W2", "W3")
FLOAT64_MODES = ("bilinear", "bicubic", "lanczos3")
# `--quick`: the same rows on tiny shapes, to check the script end to end in a minute.
QUICK_WORKLOADS = {
    "W1": ((2, 3, 16, 16), (32, 32)),
    "W2": ((2, 3, 32, 32), (16, 16)),
    "W3": ((1, 3, 33, 51), (48, 64)),
    "W4": ((1, 3, 16, 16), (32, 32)),
}
QUICK_EXTRA = (
    ("W2-aa", (2, 3, 32, 32), (16, 16), "bilinear", True),
    ("W2-aa", (2, 3, 32, 32), (16, 16), "bicubic", True),
    ("T1", (1, 2, 8, 8, 8), (16, 16, 16), "trilinear", False),
)
AUTODIFF_MODES = ("bilinear", "bicubic")
# The fixed cost of a call: a resize with almost no work in it.
OVERHEAD_CASE = (*harness.TINY, "bilinear")
OVERHEAD_CALLS = 200
# tiinterp's SIMD kernels want 64-byte aligned arrays (its own results are); NumPy's large
# allocations come from glibc's mmap and sit 16 bytes past a page boundary.
SIMD_ALIGNMENT = 64
README_START = "<!-- bench:start -->"
README_END = "<!-- bench:end -->"
CONFIGURATION_HELP = (
    "Taichi's CPU configuration: simd (real_matrix_scalarize=False, tiinterp's fast path) or "
    "default (Taichi's default options, as a user's own ti.init)"
)
OUTPUT_DIR_HELP = (
    "for results.json and the plots (default: results.json in benchmarks/ and the plots in "
    "docs/, or both in benchmarks/out/quick with --quick)"
)


def alignment(array):
    return array.ctypes.data % SIMD_ALIGNMENT


def unaligned_empty(shape, dtype):
    """np.empty(shape, dtype), moved 16 bytes off a 64-byte boundary in the rare case that
    it lands on one, so that the column always measures the unaligned path."""
    out = np.empty(shape, dtype)
    if alignment(out) != 0:
        return out
    nbytes = out.nbytes
    raw = np.empty(nbytes + SIMD_ALIGNMENT, np.uint8)
    start = (16 - alignment(raw)) % SIMD_ALIGNMENT
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def bench_tiinterp(x, g, size, mode, timing, with_autodiff, antialias=False):
    call = dict(mode=mode, antialias=antialias)
    # tiinterp's own result is allocated for its SIMD kernels: reuse one as the out= buffer.
    out = tiinterp.interpolate(x, size=size, **call)
    out_unaligned = unaligned_empty(out.shape, out.dtype)
    row = {
        "forward": median_time(lambda: tiinterp.interpolate(x, size=size, **call), timing),
        "forward_out": median_time(
            lambda: tiinterp.interpolate(x, size=size, out=out, **call), timing
        ),
        "forward_out_unaligned": median_time(
            lambda: tiinterp.interpolate(x, size=size, out=out_unaligned, **call), timing
        ),
        "backward": median_time(lambda: tiinterp.interpolate_backward(g, x.shape, **call), timing),
        "out_alignment": {"out": alignment(out), "out_unaligned": alignment(out_unaligned)},
    }
    if with_autodiff:
        row["backward_autodiff"] = median_time(
            lambda: tiinterp.interpolate_backward(g, x.shape, method="autodiff", **call),
            Timing(max(3, timing.repeats // 2), timing.warmup),
        )
    tracemalloc.start()
    tiinterp.interpolate(x, size=size, **call)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    row["extra_memory_bytes"] = max(0, peak - out.nbytes)
    row["output_bytes"] = out.nbytes
    return row


def bench_torch(x, g, size, mode, timing, antialias=False):
    calls = harness.resize_calls(x, g, size, mode=mode, antialias=antialias)["torch"]
    return {direction: median_time(call, timing) for direction, call in calls.items()}


def bench_jax(x, g, size, timing):
    import jax
    import jax.numpy as jnp

    if x.dtype == np.float64:
        # Without it JAX silently computes float64 input in float32. The float32 rows run
        # first, before this is switched on.
        jax.config.update("jax_enable_x64", True)
    shape = x.shape[:2] + size

    def resize(a):
        return jax.image.resize(a, shape, method="lanczos3", antialias=False)

    forward = jax.jit(resize)
    vjp = jax.jit(lambda a, ct: jax.vjp(resize, a)[1](ct)[0])
    xj, gj = jnp.asarray(x), jnp.asarray(g)
    computed = (forward(xj).dtype, vjp(xj, gj).dtype)
    if computed != (x.dtype, x.dtype):
        raise RuntimeError(f"JAX computed in {computed}, expected {x.dtype}")
    return {
        "forward": median_time(lambda: forward(xj).block_until_ready(), timing),
        "backward": median_time(lambda: vjp(xj, gj).block_until_ready(), timing),
    }


def bench_reference(x, g, size, mode, timing, antialias=False):
    """The reference's times and name: JAX for lanczos3 (PyTorch has none), else PyTorch."""
    if mode == "lanczos3":
        return bench_jax(x, g, size, timing), "JAX"
    return bench_torch(x, g, size, mode, timing, antialias), "PyTorch"


def copy_seconds(nbytes, timing):
    """NumPy copy of nbytes into a preallocated buffer: the machine's copy roofline."""
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    return median_time(lambda: np.copyto(b, a), timing)


def empty_launch_seconds(timing):
    ti = tiinterp.taichi_module()

    @ti.kernel
    def empty():
        pass

    return median_time(lambda: [empty() for _ in range(100)], timing) / 100


def per_call_overhead_us(timing, rng):
    """Microseconds per call of a resize with almost no work in it: what every call costs
    before its kernels do anything."""
    in_shape, size, mode = OVERHEAD_CASE
    x, g = harness.inputs(rng, in_shape, size)
    out = tiinterp.interpolate(x, size=size, mode=mode)
    calls = harness.resize_calls(x, g, size, mode=mode)
    calls["tiinterp"]["forward_out"] = lambda: tiinterp.interpolate(
        x, size=size, mode=mode, out=out
    )
    return {
        f"{library}_{direction}": harness.block_us(call, OVERHEAD_CALLS, timing)
        for library, library_calls in calls.items()
        for direction, call in library_calls.items()
    }


FIRST_CALL = """
import time, numpy as np, tiinterp
tiinterp.init("cpu", cpu_max_num_threads={threads}, real_matrix_scalarize={scalarize})
x = np.random.rand(1, 3, 64, 64).astype(np.float32)
start = time.perf_counter()
tiinterp.interpolate(x, size=(128, 128), mode="bicubic")
print(time.perf_counter() - start)
"""


def first_call_seconds(scalarize):
    """First interpolate call in a fresh process: cold offline cache, then warm."""
    with tempfile.TemporaryDirectory() as cache:
        code = FIRST_CALL.format(threads=THREADS, scalarize=scalarize)
        cold, warm = harness.cold_and_warm(code, cache)
    return {"cold_cache": cold, "warm_cache": warm}


def machine_facts():
    import torch

    facts = {**harness.machine_facts(), "torch": torch.__version__, "threads": THREADS}
    for name in ("taichi", "jax"):
        with contextlib.suppress(ImportError):
            facts[name] = harness.version_text(__import__(name).__version__)
    return facts


def row_record(name, dtype, mode, ours, ref, ref_name, moved, copy):
    copy_gbps = moved / copy / 1e9
    gbps = moved / ours["forward_out"] / 1e9
    unaligned_gbps = moved / ours["forward_out_unaligned"] / 1e9
    return {
        "workload": name,
        "dtype": dtype,
        "mode": mode,
        "tiinterp": ours,
        "reference": ref,
        "reference_name": ref_name,
        "forward_out_gbps": gbps,
        "forward_out_unaligned_gbps": unaligned_gbps,
        "copy_gbps": copy_gbps,
        "roofline_fraction": gbps / copy_gbps,
        "unaligned_roofline_fraction": unaligned_gbps / copy_gbps,
    }


def measure(args):
    import torch

    start = time.perf_counter()
    workloads = QUICK_WORKLOADS if args.quick else WORKLOADS
    extra = QUICK_EXTRA if args.quick else EXTRA
    timing = Timing(args.repeats, 1 if args.quick else 3)
    # float64 calls move twice the bytes and the references' take longer still: fewer calls
    # keep the run short.
    float64_timing = Timing(min(args.repeats, args.float64_repeats), 1 if args.quick else 2)
    names = args.workloads.split(",")
    modes = args.modes.split(",")
    unknown = sorted(set(names) - set(workloads))
    if unknown:
        raise SystemExit(f"--workloads: expected names from {list(workloads)}, got {unknown}")
    dtypes = args.dtypes.split(",")
    if not set(dtypes) <= {"float32", "float64"}:
        raise SystemExit(f"--dtypes: expected float32 and/or float64, got {args.dtypes!r}")
    # float32 first: JAX's x64 mode, switched on for the float64 rows, stays on.
    dtypes = [d for d in ("float32", "float64") if d in dtypes]

    torch.set_num_threads(THREADS)
    simd = args.configuration == "simd"
    tiinterp.init("cpu", cpu_max_num_threads=THREADS, real_matrix_scalarize=not simd)
    rng = np.random.default_rng(0)
    results = {
        "machine": machine_facts(),
        "configuration": args.configuration,
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "rows": [],
    }
    progress("per-call overhead")
    overhead_timing = Timing(max(5, args.repeats), 2)
    results["empty_launch_seconds"] = empty_launch_seconds(overhead_timing)
    results["overhead_us"] = per_call_overhead_us(overhead_timing, rng)
    results["overhead_us"]["empty_launch"] = results["empty_launch_seconds"] * 1e6
    # One untimed round first: in a fresh process the first large backward calls of the run
    # measured ~3x slower than later ones for several repeats (whichever mode came first).
    first_shape, first_size = workloads[names[0]]
    x, g = harness.inputs(rng, first_shape, first_size)
    bench_tiinterp(x, g, first_size, modes[0], Timing(1, 1), False)
    for dtype in dtypes:
        # (name, input shape, size, [(mode, antialias)]): a workload's rows share its arrays.
        float32 = dtype == "float32"
        groups = [
            (name, *workloads[name], [(m, False) for m in modes if float32 or m in FLOAT64_MODES])
            for name in names
            if float32 or name in FLOAT64_WORKLOADS
        ]
        if float32 and not args.no_extra:
            groups += [(name, s, size, [(m, aa)]) for name, s, size, m, aa in extra]
        for name, in_shape, size, row_modes in groups:
            x, g = harness.inputs(rng, in_shape, size, dtype)
            moved = x.nbytes + g.nbytes
            copy = copy_seconds(moved, timing)
            for mode, antialias in row_modes:
                progress(f"{name} {dtype} {mode}" + (" antialias=True" if antialias else ""))
                row_timing = timing if float32 else float64_timing
                with_autodiff = float32 and mode in AUTODIFF_MODES and name in ("W1", "W2")
                ours = bench_tiinterp(x, g, size, mode, row_timing, with_autodiff, antialias)
                ref, ref_name = bench_reference(x, g, size, mode, row_timing, antialias)
                label = mode + (" aa" if antialias else "")
                results["rows"].append(
                    row_record(name, dtype, label, ours, ref, ref_name, moved, copy)
                )
    results["copy_gbps"] = max(r["copy_gbps"] for r in results["rows"])
    progress("first-call compile time (fresh processes)")
    results["first_call_seconds"] = first_call_seconds(not simd)
    results["elapsed_seconds"] = time.perf_counter() - start
    return results


# Targets from the issue. Each selects (row, direction) pairs and checks one figure:
# "speedup" is the reference's time over tiinterp's, "time_ratio" tiinterp's over the
# reference's, "copy_fraction" the forward into out='s bandwidth over a NumPy copy's.
@dataclasses.dataclass(frozen=True)
class Target:
    label: str
    metric: str
    threshold: float
    dtype: str
    workloads: tuple
    modes: tuple = ()  # empty: every mode
    directions: tuple = ("forward", "backward")

    def covers(self, row):
        return (
            row["dtype"] == self.dtype
            and row["workload"] in self.workloads
            and (not self.modes or row["mode"] in self.modes)
        )


BIG = ("W1", "W2", "W3")
LINEAR, NEAREST = ("bilinear", "bicubic"), ("nearest", "nearest-exact")
# A table, one target per two lines: Target's fields in order.
# fmt: off
TARGETS = tuple(Target(*target) for target in (
    ("float32 W1-W3 bilinear, bicubic: fwd and bwd >= 3x PyTorch",
     "speedup", 3.0, "float32", BIG, LINEAR),
    ("float32 W1-W3 nearest, nearest-exact: fwd and bwd >= 2x PyTorch",
     "speedup", 2.0, "float32", BIG, NEAREST),
    ("float32 W1-W3 nearest, nearest-exact: bwd >= 2x PyTorch",
     "speedup", 2.0, "float32", BIG, NEAREST, ("backward",)),
    ("float32 W1-W3 lanczos3: fwd and bwd >= 10x JAX",
     "speedup", 10.0, "float32", BIG, ("lanczos3",)),
    ("float32 W2-aa and T1: fwd and bwd >= 3x PyTorch",
     "speedup", 3.0, "float32", ("W2-aa", "T1")),
    ("float64 W1-W3: fwd and bwd >= 2x the reference (PyTorch; JAX x64 for lanczos3)",
     "speedup", 2.0, "float64", BIG),
    ("float32 W1 bilinear fwd into out= >= 60% of the copy bandwidth",
     "copy_fraction", 0.6, "float32", ("W1",), ("bilinear",), ("forward_out",)),
    ("float32 W4: tiinterp's time <= 2x PyTorch's, fwd and bwd",
     "time_ratio", 2.0, "float32", ("W4",), TORCH_MODES),
))
# fmt: on


DIRECTION_NAMES = {"forward": "fwd", "backward": "bwd", "forward_out": "fwd into out"}


def figure(row, direction, metric):
    if metric == "copy_fraction":
        return row["roofline_fraction"]
    ours, ref = row["tiinterp"][direction], row["reference"][direction]
    return ref / ours if metric == "speedup" else ours / ref


def target_figures(target, rows):
    """(figure, "workload mode direction") for every pair the target covers."""
    return [
        (figure(r, d, target.metric), f"{r['workload']} {r['mode']} {DIRECTION_NAMES[d]}")
        for r in rows
        if target.covers(r)
        for d in target.directions
    ]


def met(target, value):
    return value <= target.threshold if target.metric == "time_ratio" else value >= target.threshold


def format_figure(metric, value):
    return f"{100 * value:.0f}%" if metric == "copy_fraction" else f"{value:.2f}x"


def check_targets(results):
    checks = []
    for target in TARGETS:
        figures = target_figures(target, results["rows"])
        check = {"label": target.label, "status": "not measured"}
        if figures:
            key = max if target.metric == "time_ratio" else min
            worst_value, worst_where = key(figures)
            misses = [(v, where) for v, where in figures if not met(target, v)]
            check = {
                "label": target.label,
                "status": "MISS" if misses else "PASS",
                "worst": worst_value,
                "worst_where": worst_where,
                "met": len(figures) - len(misses),
                "total": len(figures),
                "misses": [
                    f"{where} {format_figure(target.metric, v)}" for v, where in sorted(misses)
                ],
            }
        checks.append(check)
    return checks


def checklist(results):
    lines = ["Targets:"]
    for target, check in zip(TARGETS, check_targets(results), strict=True):
        if check["status"] == "not measured":
            lines.append(f"  [ -- ] {target.label}: not measured in this run")
            continue
        line = (
            f"  [{check['status']}] {target.label}: "
            f"worst {format_figure(target.metric, check['worst'])} ({check['worst_where']}), "
            f"{check['met']}/{check['total']} met"
        )
        if check["misses"] and check["total"] > 1:
            line += "; misses: " + ", ".join(check["misses"])
        lines.append(line)
    return "\n".join(lines)


def _bandwidth(row, key):
    """GB/s of a forward into out= (key: forward_out or forward_out_unaligned) and its share
    of the copy bandwidth."""
    fraction = "roofline_fraction" if key == "forward_out" else "unaligned_roofline_fraction"
    return f"{row[f'{key}_gbps']:.1f} ({100 * row[fraction]:.0f}%)"


def table(results):
    """The results as a Markdown table: what `make bench` prints, the docs' performance page
    shows (docs/hooks.py) and `--readme` writes."""
    lines = [
        "| workload | dtype | mode | tiinterp fwd ms | ref fwd ms | fwd speed-up "
        "| tiinterp bwd ms | ref bwd ms | bwd speed-up | fwd into out: GB/s (% of copy) "
        "| fwd into np.empty out: GB/s (% of copy) | adjoint vs autodiff |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        t, ref = r["tiinterp"], r["reference"]
        ad = f"{t['backward_autodiff'] / t['backward']:.1f}x" if "backward_autodiff" in t else ""
        lines.append(
            f"| {r['workload']} | {r['dtype']} | {r['mode']} | {ms(t['forward'])} "
            f"| {ms(ref['forward'])} ({r['reference_name']}) "
            f"| {ref['forward'] / t['forward']:.2f}x | {ms(t['backward'])} "
            f"| {ms(ref['backward'])} | {ref['backward'] / t['backward']:.2f}x "
            f"| {_bandwidth(r, 'forward_out')} | {_bandwidth(r, 'forward_out_unaligned')} | {ad} |"
        )
    return "\n".join(lines)


def overhead_line(results):
    us = results["overhead_us"]
    in_shape, size, mode = OVERHEAD_CASE
    return (
        f"Per-call cost of a {in_shape}->{size} {mode} resize (almost no work): "
        f"tiinterp.interpolate {us['tiinterp_forward']:.0f} us "
        f"(into out= {us['tiinterp_forward_out']:.0f} us, "
        f"backward {us['tiinterp_backward']:.0f} us), "
        f"PyTorch F.interpolate {us['torch_forward']:.0f} us "
        f"(backward {us['torch_backward']:.0f} us); "
        f"an empty Taichi kernel launch {us['empty_launch']:.0f} us."
    )


def memory_copy_gbps(results):
    """The copy bandwidth measured with the most bytes: W4's fit in the caches."""
    biggest = max(results["rows"], key=lambda r: r["tiinterp"]["output_bytes"])
    return biggest["copy_gbps"]


def machine_line(results):
    m = results["machine"]
    labels = dict(python="Python", numpy="NumPy", taichi="Taichi", torch="PyTorch", jax="JAX")
    versions = ", ".join(f"{label} {m[key]}" for key, label in labels.items() if key in m)
    return (
        f"Measured on {results['date']} on {m['cpu']}, {m['cpu_count']} cores, "
        f"{m['threads']} threads for every "
        f"library; {versions}; NumPy copy bandwidth {memory_copy_gbps(results):.1f} GB/s "
        "(out of cache)."
    )


def w4_line(results):
    w4 = [r for r in results["rows"] if r["workload"] == "W4"]
    if not w4:
        return None
    parts = []
    for r in w4:
        against = "" if r["reference_name"] == "PyTorch" else f" (vs {r['reference_name']})"
        parts.append(
            f"{r['mode']}{against} fwd {figure(r, 'forward', 'time_ratio'):.2f}x "
            f"bwd {figure(r, 'backward', 'time_ratio'):.2f}x"
        )
    return "W4 time / PyTorch's time (target <= 2): " + ", ".join(parts)


def readme_block(results):
    return "\n\n".join([table(results), machine_line(results), overhead_line(results)])


def write_readme(path, results):
    return harness.write_block(path, readme_block(results), README_START, README_END)


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot_bandwidth(results, path):
    plt = _plt()
    if plt is None:
        return None
    rows = [r for r in results["rows"] if r["dtype"] == "float32" and r["workload"] in WORKLOADS]
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    workloads = [w for w in WORKLOADS if any(r["workload"] == w for r in rows)]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(workloads)
    for i, w in enumerate(workloads):
        by_mode = {r["mode"]: r for r in rows if r["workload"] == w}
        values = [100 * by_mode[m]["roofline_fraction"] if m in by_mode else 0 for m in modes]
        gbps = [by_mode[m]["forward_out_gbps"] if m in by_mode else 0 for m in modes]
        bars = ax.bar(np.arange(len(modes)) + i * width, values, width, label=w)
        ax.bar_label(bars, [f"{g:.0f}" for g in gbps], fontsize=7)
    ax.axhline(100, color="black", linestyle="--", label="NumPy copy of the same bytes")
    ax.axhline(60, color="tab:red", linestyle=":", label="target for W1 bilinear (60%)")
    ax.set_xticks(np.arange(len(modes)) + width * (len(workloads) - 1) / 2, modes)
    ax.set_ylabel("% of copy bandwidth (labels: GB/s)")
    ax.set_title(
        "tiinterp forward into out=: effective bandwidth (input + output bytes / time)\n"
        f"float32, {THREADS} threads"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def speedup_target(row, direction):
    """The speed-up the targets ask of this row in this direction (a time ratio target of
    2 is a speed-up of 0.5), or None."""
    wanted = []
    for target in TARGETS:
        if target.metric == "copy_fraction" or direction not in target.directions:
            continue
        if target.covers(row):
            wanted.append(target.threshold if target.metric == "speedup" else 1 / target.threshold)
    return max(wanted, default=None)


def plot_speedup(results, path):
    plt = _plt()
    if plt is None:
        return None
    dtypes = [d for d in ("float32", "float64") if any(r["dtype"] == d for r in results["rows"])]
    panels = [(d, direction) for d in dtypes for direction in ("forward", "backward")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 3.6 * len(panels)), squeeze=False)
    colors = {"PyTorch": "tab:orange", "JAX": "tab:purple"}
    widest = max(sum(r["dtype"] == d for r in results["rows"]) for d in dtypes)
    for ax, (dtype, direction) in zip(axes[:, 0], panels, strict=True):
        rows = [r for r in results["rows"] if r["dtype"] == dtype]
        xs = np.arange(len(rows))
        speedups = [figure(r, direction, "speedup") for r in rows]
        bars = ax.bar(
            xs, speedups, 0.7, color=[colors.get(r["reference_name"], "gray") for r in rows]
        )
        ax.bar_label(bars, [f"{s:.2g}" for s in speedups], fontsize=6)
        top = max(speedups)
        for x, r in zip(xs, rows, strict=True):
            wanted = speedup_target(r, direction)
            if wanted is not None:
                ax.hlines(wanted, x - 0.45, x + 0.45, color="tab:red", linewidth=2)
                top = max(top, wanted)
        ax.axhline(1, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_yticks(
            [t for t in (0.01, 0.03, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 50) if t <= 1.5 * top]
        )
        ax.yaxis.set_major_formatter(lambda value, _: f"{value:g}")
        ax.yaxis.set_minor_formatter(lambda value, _: "")
        labels = [f"{r['workload']} {r['mode']}" for r in rows]
        ax.set_xticks(xs, labels, fontsize=7, rotation=35, ha="right", rotation_mode="anchor")
        # One bar width in every panel: float64 has fewer rows.
        ax.set_xlim(-0.6, widest - 0.4)
        ax.set_ylabel("speed-up (x)")
        ax.set_title(f"{dtype} {direction}: reference time / tiinterp time", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    handles.append(plt.Line2D([], [], color="tab:red", linewidth=2))
    fig.legend(
        handles,
        [f"vs {name}" for name in colors] + ["target"],
        loc="upper right",
        ncol=3,
        fontsize=8,
    )
    fig.suptitle(
        f"tiinterp speed-up over PyTorch (CPU) and JAX, {THREADS} threads", fontsize=10, x=0.3
    )
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(results, plot_dir, readme):
    print(table(results))
    print()
    print(machine_line(results))
    print(overhead_line(results))
    w4 = w4_line(results)
    if w4:
        print(w4)
    worst_extra = max(
        r["tiinterp"]["extra_memory_bytes"] / r["tiinterp"]["output_bytes"] for r in results["rows"]
    )
    print(f"peak extra memory per forward call: <= {worst_extra:.2f} x the output size")
    fc = results["first_call_seconds"]
    print(
        f"first call in a fresh process: cold cache {fc['cold_cache']:.2f} s, "
        f"warm cache {fc['warm_cache']:.2f} s"
    )
    print(f"measured in {results['elapsed_seconds'] / 60:.1f} min")
    print()
    print(checklist(results))
    written = [
        p
        for p in (
            plot_bandwidth(results, plot_dir / "bandwidth.png"),
            plot_speedup(results, plot_dir / "speedup.png"),
        )
        if p
    ]
    print(f"wrote {', '.join(str(p) for p in written) or 'no plots (no matplotlib)'}")
    if readme:
        changed = write_readme(readme, results)
        print(f"{readme}: {'table updated' if changed else 'already up to date'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--repeats", type=int, help="timed calls per figure, at least (5; more for short calls)")
    add("--float64-repeats", type=int, default=3, help="timed calls per float64 figure (3)")
    add("--workloads", default=",".join(WORKLOADS))
    add("--modes", default=",".join((*TORCH_MODES, "lanczos3")))
    add("--dtypes", default="float32,float64")
    add("--configuration", choices=("simd", "default"), default="simd", help=CONFIGURATION_HELP)
    add("--no-extra", action="store_true", help="skip the antialias and 3-D rows")
    add("--quick", action="store_true", help="tiny shapes, 2 repeats: checks the script end to end")
    add("--output-dir", type=pathlib.Path, help=OUTPUT_DIR_HELP)
    add(
        "--readme",
        metavar="PATH",
        help=f"replace the text between {README_START} and {README_END} in PATH with the table",
    )
    add(
        "--render-only",
        action="store_true",
        help="measure nothing: print, plot and write --readme from OUTPUT_DIR/results.json",
    )
    args = parser.parse_args()
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    output_dir = args.output_dir or (HERE / "out" / "quick" if args.quick else HERE)
    output_dir.mkdir(parents=True, exist_ok=True)
    plot_dir = output_dir if args.output_dir or args.quick else PLOTS
    harness.check_blocks(parser, [args.readme], README_START, README_END)

    def measure_and_check():
        results = measure(args)
        return {**results, "targets": check_targets(results)}

    results_path = output_dir / "results.json"
    results = harness.load_or_measure(results_path, args.render_only, measure_and_check)
    report(results, plot_dir, args.readme)


if __name__ == "__main__":
    main()
