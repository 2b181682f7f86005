"""tiinterp vs PyTorch (CPU) and JAX, measured in one run: `make bench`.

Workloads (float32): W1 (8,16,256,256)->(512,512), W2 (8,16,512,512)->(256,256),
W3 (4,3,333,517)->(480,640), W4 (1,3,64,64)->(128,128); plus W2 with antialias=True
(bilinear, bicubic) and T1 (2,4,32,64,64)->(64,128,128) trilinear, against PyTorch. Every
timing is the median of REPEATS calls after a warm-up call, with 2 threads for every library.
Prints a table of ratios and writes benchmarks/results.json (and benchmarks/bandwidth.png
with matplotlib).
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
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

import tiinterp  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
WORKLOADS = {
    "W1": ((8, 16, 256, 256), (512, 512)),
    "W2": ((8, 16, 512, 512), (256, 256)),
    "W3": ((4, 3, 333, 517), (480, 640)),
    "W4": ((1, 3, 64, 64), (128, 128)),
}
TORCH_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")
# Extra rows: antialiased downsampling and 3-D trilinear, both against PyTorch.
# (name, input shape, size, mode, antialias)
EXTRA = (
    ("W2-aa", (8, 16, 512, 512), (256, 256), "bilinear", True),
    ("W2-aa", (8, 16, 512, 512), (256, 256), "bicubic", True),
    ("T1", (2, 4, 32, 64, 64), (64, 128, 128), "trilinear", False),
)
AUTODIFF_MODES = ("bilinear", "bicubic")


def median_time(fn, repeats, warmup=3):
    # A few warm-up calls: besides compiling, the first calls that allocate large fresh
    # outputs page-fault far more than later ones on this machine (measured 5x).
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def progress(message):
    print(f"  .. {message}", file=sys.stderr, flush=True)


def bench_tiinterp(x, g, size, mode, repeats, with_autodiff, antialias=False):
    out = np.empty(x.shape[:2] + size, x.dtype)
    call = dict(mode=mode, antialias=antialias)
    row = {
        "forward": median_time(lambda: tiinterp.interpolate(x, size=size, **call), repeats),
        "forward_out": median_time(
            lambda: tiinterp.interpolate(x, size=size, out=out, **call), repeats
        ),
        "backward": median_time(lambda: tiinterp.interpolate_backward(g, x.shape, **call), repeats),
    }
    if with_autodiff:
        row["backward_autodiff"] = median_time(
            lambda: tiinterp.interpolate_backward(g, x.shape, method="autodiff", **call),
            max(3, repeats // 2),
        )
    tracemalloc.start()
    tiinterp.interpolate(x, size=size, **call)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    row["extra_memory_bytes"] = max(0, peak - out.nbytes)
    row["output_bytes"] = out.nbytes
    return row


def bench_torch(x, g, size, mode, repeats, antialias=False):
    import torch
    import torch.nn.functional as F

    xt = torch.from_numpy(x).requires_grad_(True)
    gt = torch.from_numpy(g)
    call = dict(mode=mode, antialias=antialias)
    forward = median_time(lambda: F.interpolate(xt.detach(), size=size, **call), repeats)
    y = F.interpolate(xt, size=size, **call)
    backward = median_time(lambda: torch.autograd.grad(y, xt, gt, retain_graph=True), repeats)
    return {"forward": forward, "backward": backward}


def bench_jax(x, g, size, repeats):
    import jax
    import jax.numpy as jnp

    shape = x.shape[:2] + size
    resize = jax.jit(lambda a: jax.image.resize(a, shape, method="lanczos3", antialias=False))
    vjp = jax.jit(
        lambda a, ct: jax.vjp(
            lambda b: jax.image.resize(b, shape, method="lanczos3", antialias=False), a
        )[1](ct)[0]
    )
    xj, gj = jnp.asarray(x), jnp.asarray(g)
    return {
        "forward": median_time(lambda: resize(xj).block_until_ready(), repeats),
        "backward": median_time(lambda: vjp(xj, gj).block_until_ready(), repeats),
    }


def copy_seconds(nbytes, repeats):
    """NumPy copy of nbytes into a preallocated buffer: the machine's copy roofline."""
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    return median_time(lambda: np.copyto(b, a), repeats)


def empty_launch_seconds(repeats):
    import taichi as ti

    @ti.kernel
    def empty():
        pass

    return median_time(lambda: [empty() for _ in range(100)], repeats) / 100


FIRST_CALL = """
import time, numpy as np, tiinterp
tiinterp.init("cpu", cpu_max_num_threads={threads})
x = np.random.rand(1, 3, 64, 64).astype(np.float32)
start = time.perf_counter()
tiinterp.interpolate(x, size=(128, 128), mode="bicubic")
print(time.perf_counter() - start)
"""


def first_call_seconds():
    """First interpolate call in a fresh process: cold offline cache, then warm."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache)
        code = FIRST_CALL.format(threads=THREADS)
        runs = [
            subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            )
            for _ in range(2)
        ]
    cold, warm = (float(r.stdout.strip().splitlines()[-1]) for r in runs)
    return {"cold_cache": cold, "warm_cache": warm}


def table(results):
    lines = [
        "| workload | mode | tiinterp fwd ms | ref fwd ms | fwd speed-up | tiinterp bwd ms "
        "| ref bwd ms | bwd speed-up | fwd into out: GB/s (% of copy) | adjoint vs autodiff |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        t, ref = r["tiinterp"], r["reference"]
        ad = f"{t['backward_autodiff'] / t['backward']:.1f}x" if "backward_autodiff" in t else ""
        lines.append(
            f"| {r['workload']} | {r['mode']} | {t['forward'] * 1e3:.1f} "
            f"| {ref['forward'] * 1e3:.1f} ({r['reference_name']}) "
            f"| {ref['forward'] / t['forward']:.2f}x | {t['backward'] * 1e3:.1f} "
            f"| {ref['backward'] * 1e3:.1f} | {ref['backward'] / t['backward']:.2f}x "
            f"| {r['forward_out_gbps']:.1f} ({100 * r['roofline_fraction']:.0f}%) | {ad} |"
        )
    return "\n".join(lines)


def plot(results, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    modes = list(dict.fromkeys(r["mode"] for r in results["rows"] if r["workload"] in WORKLOADS))
    workloads = [w for w in WORKLOADS if any(r["workload"] == w for r in results["rows"])]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(workloads)
    for i, w in enumerate(workloads):
        values = [
            next(
                (
                    100 * r["roofline_fraction"]
                    for r in results["rows"]
                    if r["workload"] == w and r["mode"] == m
                ),
                0,
            )
            for m in modes
        ]
        gbps = [
            next(
                (
                    r["forward_out_gbps"]
                    for r in results["rows"]
                    if r["workload"] == w and r["mode"] == m
                ),
                0,
            )
            for m in modes
        ]
        bars = ax.bar(np.arange(len(modes)) + i * width, values, width, label=w)
        ax.bar_label(bars, [f"{g:.0f}" for g in gbps], fontsize=7)
    ax.axhline(100, color="black", linestyle="--", label="NumPy copy of the same bytes")
    ax.set_xticks(np.arange(len(modes)) + width * (len(workloads) - 1) / 2, modes)
    ax.set_ylabel("% of copy bandwidth (labels: GB/s)")
    ax.set_title(
        "tiinterp forward into out=: effective bandwidth (input + output bytes / time)\n"
        "float32, 2 threads"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--modes", default=",".join(TORCH_MODES + ("lanczos3",)))
    parser.add_argument("--no-extra", action="store_true", help="skip the antialias and 3-D rows")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(THREADS)
    tiinterp.init("cpu", cpu_max_num_threads=THREADS)
    rng = np.random.default_rng(0)
    results = {
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "threads": THREADS,
        },
        "rows": [],
    }
    results["empty_launch_seconds"] = empty_launch_seconds(args.repeats)
    copies = {}
    # One untimed round first: in a fresh process the first large backward calls of the run
    # measured ~3x slower than later ones for several repeats (whichever mode came first).
    first_shape, first_size = WORKLOADS[args.workloads.split(",")[0]]
    bench_tiinterp(
        rng.random(first_shape, dtype=np.float32),
        rng.random(first_shape[:2] + first_size, dtype=np.float32),
        first_size,
        args.modes.split(",")[0],
        1,
        False,
    )
    for name in args.workloads.split(","):
        in_shape, size = WORKLOADS[name]
        x = rng.random(in_shape, dtype=np.float32)
        g = rng.random(in_shape[:2] + size, dtype=np.float32)
        moved = x.nbytes + g.nbytes
        copies[name] = copy_seconds(moved, args.repeats)
        for mode in args.modes.split(","):
            progress(f"{name} {mode}")
            with_autodiff = mode in AUTODIFF_MODES and name in ("W1", "W2")
            ours = bench_tiinterp(x, g, size, mode, args.repeats, with_autodiff)
            if mode == "lanczos3":
                ref, ref_name = bench_jax(x, g, size, args.repeats), "JAX"
            else:
                ref, ref_name = bench_torch(x, g, size, mode, args.repeats), "PyTorch"
            gbps = moved / ours["forward_out"] / 1e9
            results["rows"].append(
                {
                    "workload": name,
                    "mode": mode,
                    "tiinterp": ours,
                    "reference": ref,
                    "reference_name": ref_name,
                    "forward_out_gbps": gbps,
                    "copy_gbps": moved / copies[name] / 1e9,
                    "roofline_fraction": gbps / (moved / copies[name] / 1e9),
                }
            )
    for name, in_shape, size, mode, antialias in () if args.no_extra else EXTRA:
        progress(f"{name} {mode} antialias={antialias}")
        x = rng.random(in_shape, dtype=np.float32)
        g = rng.random(in_shape[:2] + size, dtype=np.float32)
        moved = x.nbytes + g.nbytes
        copy = copy_seconds(moved, args.repeats)
        ours = bench_tiinterp(x, g, size, mode, args.repeats, False, antialias)
        ref = bench_torch(x, g, size, mode, args.repeats, antialias)
        gbps = moved / ours["forward_out"] / 1e9
        label = mode + (" aa" if antialias else "")
        results["rows"].append(
            {
                "workload": name,
                "mode": label,
                "tiinterp": ours,
                "reference": ref,
                "reference_name": "PyTorch",
                "forward_out_gbps": gbps,
                "copy_gbps": moved / copy / 1e9,
                "roofline_fraction": gbps / (moved / copy / 1e9),
            }
        )
    results["copy_gbps"] = max(r["copy_gbps"] for r in results["rows"])
    progress("first-call compile time (fresh processes)")
    results["first_call_seconds"] = first_call_seconds()
    (HERE / "results.json").write_text(json.dumps(results, indent=1))
    print(table(results))
    w4 = [r for r in results["rows"] if r["workload"] == "W4"]
    if w4:
        launch = results["empty_launch_seconds"]
        print(
            f"\nW4 latency vs an empty Taichi kernel launch ({launch * 1e6:.0f} us): "
            + ", ".join(f"{r['mode']} {r['tiinterp']['forward'] / launch:.1f}x" for r in w4)
        )
    worst_extra = max(
        r["tiinterp"]["extra_memory_bytes"] / r["tiinterp"]["output_bytes"] for r in results["rows"]
    )
    print(f"peak extra memory per forward call: <= {worst_extra:.2f} x the output size")
    fc = results["first_call_seconds"]
    print(
        f"first call in a fresh process: cold cache {fc['cold_cache']:.2f} s, "
        f"warm cache {fc['warm_cache']:.2f} s"
    )
    png = plot(results, HERE / "bandwidth.png")
    print(f"wrote {HERE / 'results.json'}" + (f" and {png}" if png else ""))


if __name__ == "__main__":
    main()
