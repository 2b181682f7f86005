"""Small calls, first calls and the command line: tiinterp against PyTorch and PIL in one run.

What is measured (issue 24), all on the CPU, float32 NCHW NumPy arrays:

1. Per-call cost, warm. `tiinterp.interpolate(x, size=..., mode=...)` against
   `F.interpolate` on `torch.from_numpy(x)`, and `tiinterp.interpolate_backward(g, x.shape,
   mode=...)` against `torch.autograd.grad(yt, xt, gt, retain_graph=True)` (backward only:
   `yt` is computed once beforehand), for (1,1,8,8)->(16,16) bilinear, W4 (1,3,64,64)->
   (128,128) bilinear and bicubic, and (1,3,128,128)->(64,64) nearest; `align_corners=False`
   for bilinear and bicubic. Each figure is the median, over many blocks of calls, of a
   block's time per call, after warm-up calls. PyTorch keeps its default thread count.
2. First-call cost, each figure from a fresh `python -c` process with
   TI_OFFLINE_CACHE_FILE_PATH set to a cache folder of its own: import + `tiinterp.init("cpu")`,
   and for each 2-D mode (and lanczos3 with antialias=True, on a downscale) the first
   `interpolate` call, in a process per mode (else one mode's first call would reuse another's
   kernels). Each script runs twice on its cache folder: "cold" is the first run (empty
   cache), "warm" the second.
3. The `tiinterp resize` command against a PIL script doing the same, whole processes (wall
   time of `subprocess.run`, median of the timed runs): one 1920x1080 PNG to 640 wide,
   bicubic (the command antialiases when shrinking, as PIL's resize does); a folder of
   differently sized PNGs to 64 wide in the command's default mode, lanczos3 antialiased (PIL:
   LANCZOS). The command's first run, on an empty cache, is reported as "first run"; the
   timed runs follow on the cache it left, each into a fresh output.

Prints a Markdown table (what, tiinterp, reference, ratio, target, met?) and writes
results.json into --output. `--quick` measures fewer repeats, modes and images: it checks
the script end to end in about a minute. The PyTorch part runs last, so that its threads
cannot take cores from the processes timed before.
"""

import argparse
import datetime
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

import tiinterp
from tiinterp._rules.filters import MODE_DIMS

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # harness.py, also where the script is loaded by its path

# isort: split
import harness  # noqa: E402

# last_float too: tests/demos/test_small_calls_bench.py finds the process helpers here.
from harness import ProcessFailed, cold_and_warm, last_float, progress, run  # noqa: E402, F401

UPSCALE = harness.WORKLOADS["W4"]
DOWNSCALE = ((1, 3, 128, 128), (64, 64))
# (input shape, size, mode, target: tiinterp's time over PyTorch's at most)
PER_CALL_CASES = (
    (*harness.TINY, "bilinear", 4.0),
    (*UPSCALE, "bilinear", 1.5),
    (*UPSCALE, "bicubic", 1.5),
    (*DOWNSCALE, "nearest", 1.5),
)
# Every mode that takes 2 spatial axes, and antialiased lanczos3 (on DOWNSCALE).
FIRST_CALL_MODES = tuple((m, False) for m, dims in MODE_DIMS.items() if 2 in dims) + (
    ("lanczos3", True),
)
QUICK_FIRST_CALL_MODES = (("bilinear", False), ("lanczos3", True))
INIT_TARGET_S, WARM_TARGET_S, COLD_TARGET_S = 1.0, 0.3, 3.0
# A repeated tiny call: tiinterp's Python around Taichi's launch (issue 54).
OWN_TIME_TARGET_US = 5.0
PHOTO_SIZE, PHOTO_WIDTH = (1920, 1080), 640
FOLDER_WIDTH = 64
CLI = [sys.executable, "-m", "tiinterp", "resize"]
OUTPUT_HELP = "folder for results.json (default: benchmarks/out/small_calls)"
QUICK_HELP = "fewer repeats, modes and images: checks the script end to end in about a minute"

INIT_SCRIPT = """
import time
start = time.perf_counter()
import tiinterp
tiinterp.init("cpu")
print(time.perf_counter() - start)
"""
FIRST_CALL_SCRIPT = """
import time
import numpy as np
import tiinterp
tiinterp.init("cpu")
x = np.random.default_rng(0).random({shape}, dtype=np.float32)
start = time.perf_counter()
tiinterp.interpolate(x, size={size}, mode={mode!r}, antialias={antialias})
print(time.perf_counter() - start)
"""
# PIL's side of part 3: argv is FILTER WIDTH IN OUT, IN and OUT both files or both folders;
# the height keeps the aspect ratio, rounded as the tiinterp command rounds it.
PIL_SCRIPT = """
import math, pathlib, sys
from PIL import Image
resample, width = getattr(Image, sys.argv[1]), int(sys.argv[2])
source, target = pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
pairs = [(source, target)]
if source.is_dir():
    target.mkdir()
    pairs = [(p, target / p.name) for p in sorted(source.glob("*.png"))]
for a, b in pairs:
    with Image.open(a) as image:
        height = max(1, math.floor(image.height * width / image.width + 0.5))
        image.resize((width, height), resample).save(b)
"""


def record(what, unit, ours, reference=None, reference_name=None, limit=None):
    """One row of the results. With a reference, the target (limit) is on tiinterp's time
    over the reference's; without, on tiinterp's time itself. limit None: no target."""
    ratio = None if reference is None or ours is None else ours / reference
    checked = ratio if reference is not None else ours
    return {
        "what": what,
        "unit": unit,
        "tiinterp": ours,
        "reference": reference,
        "reference_name": reference_name,
        "ratio": ratio,
        "limit": limit,
        "met": None if limit is None else checked <= limit,
    }


def attempt(what, measure, *args):
    """measure(*args)'s rows or, when a process it ran failed, one row saying so: the run
    goes on and its other figures are kept."""
    try:
        return measure(*args)
    except ProcessFailed as error:
        progress(f"FAILED: {what}: {error}")
        row = record(what, "s", None)
        row.update(error=str(error), met=False)
        return [row]


# --- 1. Per-call cost -----------------------------------------------------------------------


def per_call_us(fn, repeats, block_seconds):
    """Median microseconds per call over `repeats` blocks of calls, each about
    `block_seconds` long (sized from ten warm-up calls, after one to compile)."""
    fn()
    start = time.perf_counter()
    for _ in range(10):
        fn()
    once = (time.perf_counter() - start) / 10
    calls = max(1, min(10_000, round(block_seconds / max(once, 1e-7))))
    per_call = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - start) / calls)
    return statistics.median(per_call) * 1e6


def per_call_case(in_shape, size, mode, limit, rng, repeats, block_seconds):
    """Forward and backward rows of one case: tiinterp against PyTorch."""
    x, g = harness.inputs(rng, in_shape, size)
    # align_corners is for the interpolating modes only (both libraries refuse it otherwise).
    call = {"mode": mode} if mode == "nearest" else {"mode": mode, "align_corners": False}
    calls = harness.resize_calls(x, g, size, **call)
    return [
        record(
            f"{in_shape}->{size} {mode} {direction}",
            "us",
            per_call_us(ours, repeats, block_seconds),
            per_call_us(calls["torch"][direction], repeats, block_seconds),
            "PyTorch",
            limit,
        )
        for direction, ours in calls["tiinterp"].items()
    ]


def measure_per_call(repeats, block_seconds):
    tiinterp.init("cpu")
    rng = np.random.default_rng(0)
    rows = []
    for in_shape, size, mode, limit in PER_CALL_CASES:
        progress(f"per call: {in_shape}->{size} {mode}")
        rows += per_call_case(in_shape, size, mode, limit, rng, repeats, block_seconds)
    return rows


# --- 1b. Where a tiny call's time goes -------------------------------------------------------


def _taichi_launches(recording, addresses=None):
    """A call to the launch of each recorded kernel, Taichi's own or the kernel set's
    native one; with ``addresses``, each per-call array set first (what a replay asks of
    Taichi or of the set, without tiinterp's Python)."""
    from tiinterp._runtime.taichi import impl

    launches = recording._launches

    def call():
        prog = impl.get_runtime().prog
        for compiled, context, per_call, _ in launches:
            if context is None:  # a kernel of the kernel set: ``compiled`` is its binding
                for argument in per_call if addresses else ():
                    compiled.set_address(argument[0], addresses[argument[1]] + argument[2])
                compiled()
                continue
            for argument in per_call if addresses else ():
                context.set_arg_external_array_with_shape(
                    argument[0], addresses[argument[1]] + argument[2], *argument[3:5], 0
                )
            prog.launch_kernel(compiled, context)

    return call


def measure_stages(repeats, block_seconds):
    """Rows for the stages of the tiny forward call, NumPy and torch (Note [Recorded
    launches] in tiinterp/_runtime/taichi.py): the kernel's launch (Taichi's, or the kernel
    set's native one), then each layer above it. "Own time" is the whole call less that
    launch (with the arrays' addresses set where they changed: counted as tiinterp's, an
    upper bound) and, for torch, less PyTorch's dispatch of the op."""
    import torch

    import tiinterp.torch as titorch
    from tiinterp._ops import resize
    from tiinterp._runtime.arrays import host_address

    tiinterp.init("cpu")
    (in_shape, size), mode = harness.TINY, "bilinear"
    x = np.random.default_rng(0).random(in_shape, dtype=np.float32)
    xt = torch.from_numpy(x)
    whole = lambda: tiinterp.interpolate(x, size=size, mode=mode)  # noqa: E731
    whole()
    _, repeat = resize._REPEATS.lookup(x, ("forward", size, None, mode, None, None, False))
    result = whole()
    repeat(x, result)
    addresses = (host_address(x), host_address(result))
    recording = repeat._recordings[tuple(a % 32 for a in addresses)]
    timed = lambda fn: per_call_us(fn, repeats, block_seconds)  # noqa: E731
    launch = timed(_taichi_launches(recording))
    numpy_whole = timed(whole)
    op_arguments = (list(size), None, mode, None, False)
    torch_whole = timed(lambda: titorch.interpolate(xt, size=size, mode=mode))
    op = timed(lambda: titorch._interpolate_op(xt, *op_arguments))
    kernel = timed(lambda: titorch._interpolate_kernel(xt, *op_arguments))
    by = "the kernel set's" if recording._launches[0][1] is None else "Taichi's"
    stages = [
        (f"the kernel's launch ({by})", launch),
        (
            "the launch, both arrays' addresses set",
            timed(_taichi_launches(recording, addresses)),
        ),
        ("the replay of the recorded launch, same arrays", timed(lambda: recording(addresses))),
        ("+ the repeat: a new result, addresses, lookup", timed(lambda: repeat(x))),
        ("+ interpolate: lock, signature (the NumPy call)", numpy_whole),
        (
            "torch: tiinterp.interpolate on the tensor",
            timed(lambda: tiinterp.interpolate(xt, size=size, mode=mode)),
        ),
        ("torch: the op's CPU kernel (bridge)", kernel),
        ("torch: the op through PyTorch's dispatcher", op),
        ("torch: tiinterp.torch.interpolate (the call)", torch_whole),
    ]
    label = f"tiny {in_shape}->{size} {mode} forward, stage: "
    rows = [record(label + what, "us", value) for what, value in stages]
    own = {"NumPy": numpy_whole - launch, "torch": torch_whole - launch - (op - kernel)}
    own_rows = [
        record(f"tiny call, tiinterp's own time, {k}", "us", v, limit=OWN_TIME_TARGET_US)
        for k, v in own.items()
    ]
    return rows + own_rows


# --- 2. First calls in fresh processes --------------------------------------------------------


def init_rows(what, cache):
    cold, warm = cold_and_warm(INIT_SCRIPT, cache)
    return [
        record(f"{what}, warm cache", "s", warm, limit=INIT_TARGET_S),
        record(f"{what}, cold cache", "s", cold),
    ]


def first_call_rows(what, mode, antialias, cache):
    shape, size = DOWNSCALE if antialias else UPSCALE
    code = FIRST_CALL_SCRIPT.format(shape=shape, size=size, mode=mode, antialias=antialias)
    cold, warm = cold_and_warm(code, cache)
    return [
        record(f"{what}, warm cache", "s", warm, limit=WARM_TARGET_S),
        record(f"{what}, cold cache", "s", cold, limit=COLD_TARGET_S),
    ]


def measure_first_calls(modes, tmp):
    progress("first call: import + init")
    what = 'import tiinterp + init("cpu")'
    rows = attempt(what, init_rows, what, tmp / "cache-init")
    for mode, antialias in modes:
        shape, size = DOWNSCALE if antialias else UPSCALE
        what = f"first call {mode}{' antialias' if antialias else ''} {shape}->{size}"
        progress(what)
        rows += attempt(
            what, first_call_rows, what, mode, antialias, tmp / f"cache-{mode}-{antialias}"
        )
    return rows


# --- 3. The command line against PIL -----------------------------------------------------------


def write_image(path, width, height, rng):
    """A deterministic RGB PNG: smooth gradients and waves plus noise (so that the PNG
    encoder and the filters see photo-like content, neither flat nor pure noise)."""
    yy, xx = np.meshgrid(np.linspace(0, 1, height), np.linspace(0, 1, width), indexing="ij")
    smooth = np.stack(
        [
            128 + 100 * np.sin(6 * xx + 3 * yy),
            128 + 100 * np.cos(4 * yy - 2 * xx * yy),
            255 * xx * (1 - yy),
        ],
        axis=-1,
    )
    noisy = smooth + rng.normal(0, 8, smooth.shape)
    from PIL import Image

    Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8), "RGB").save(path)


def folder_sizes(count):
    """count (width, height) pairs, widths from 200 to 1100, aspect ratios taking turns."""
    aspects = (4 / 3, 16 / 9, 1.0, 3 / 4, 3 / 2, 9 / 16, 5 / 4, 2 / 3)
    widths = [200 + 900 * i // max(1, count - 1) for i in range(count)]
    return [(w, round(w / aspects[i % len(aspects)])) for i, w in enumerate(widths)]


def timed_runs(make_args, cache, repeats):
    """Median wall seconds of `repeats` runs; make_args(i) gives run i's command line (a
    fresh output each time)."""
    return statistics.median(run(make_args(i), cache)[0] for i in range(repeats))


def command_rows(what, source, width, options, pil_filter, limit, tmp, repeats):
    """`tiinterp resize` on source (a file or a folder) against the PIL script: one first
    run on an empty cache, then the median of `repeats` runs of each."""
    cache = tmp / f"cache-{source.name}"

    def ours(i):
        out = tmp / f"ours-{i}-{source.name}"
        return [*CLI, str(source), "-o", str(out), "--size", f"{width}x", *options, "-q"]

    def pil(i):
        out = tmp / f"pil-{i}-{source.name}"
        return [sys.executable, "-c", PIL_SCRIPT, pil_filter, str(width), str(source), str(out)]

    first = run(ours("first"), cache)[0]
    ours_s, pil_s = timed_runs(ours, cache, repeats), timed_runs(pil, cache, repeats)
    return [
        record(what, "s", ours_s, pil_s, "PIL", limit),
        record(f"{what}, first run (empty cache)", "s", first, pil_s, "PIL"),
    ]


def measure_command_line(images, repeats, tmp, rng):
    photo, folder = tmp / "photo.png", tmp / "folder"
    write_image(photo, *PHOTO_SIZE, rng)
    folder.mkdir()
    for i, (width, height) in enumerate(folder_sizes(images)):
        write_image(folder / f"image{i:02d}_{width}x{height}.png", width, height, rng)
    what = f"tiinterp resize: 1 PNG {PHOTO_SIZE[0]}x{PHOTO_SIZE[1]} -> {PHOTO_WIDTH}x, bicubic"
    progress(what)
    options = ["--mode", "bicubic"]
    rows = attempt(
        what, command_rows, what, photo, PHOTO_WIDTH, options, "BICUBIC", 2.0, tmp, repeats
    )
    # The command's default mode, lanczos3 antialiased: PIL's LANCZOS.
    what = f"tiinterp resize: folder of {images} PNGs -> {FOLDER_WIDTH}x, lanczos3 antialias"
    progress(what)
    rows += attempt(
        what, command_rows, what, folder, FOLDER_WIDTH, [], "LANCZOS", 3.0, tmp, repeats
    )
    return rows


# --- Results ------------------------------------------------------------------------------------


def machine_facts():
    import PIL
    import torch

    ti = tiinterp.taichi_module()
    return {
        **harness.machine_facts(),
        "taichi_backend": ti.__name__,
        "taichi": harness.version_text(ti.__version__),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "pillow": PIL.__version__,
    }


def _value(value, unit):
    if value is None:
        return "-"
    return f"{value:.1f} us" if unit == "us" else f"{value:.3f} s"


def table(results):
    """The results as a Markdown table, one row per figure."""
    rows = []
    for row in results["rows"]:
        unit, limit = row["unit"], row["limit"]
        reference = _value(row["reference"], unit)
        if row["reference_name"]:
            reference += f" ({row['reference_name']})"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        if limit is None:
            target = "-"
        elif row["reference"] is not None:
            target = f"<= {limit:g}x"
        else:
            target = f"<= {limit:g} {unit}"
        met = {None: "-", True: "yes", False: "**no**"}[row["met"]]
        ours = _value(row["tiinterp"], unit)
        if "error" in row:
            ours = "failed: " + row["error"].replace("|", "/")
        rows.append((row["what"], ours, reference, ratio, target, met))
    header = ("what", "tiinterp", "reference", "ratio", "target", "met?")
    return "\n".join(harness.markdown_table(header, rows))


def summary(results):
    checked = [row for row in results["rows"] if row["met"] is not None]
    missed = [row["what"] for row in checked if not row["met"] and "error" not in row]
    failed = [row["what"] for row in results["rows"] if "error" in row]
    line = f"targets met: {len(checked) - len(missed) - len(failed)}/{len(checked)}"
    if missed:
        line += f"; missed: {'; '.join(missed)}"
    if failed:
        line += f"; FAILED to run: {'; '.join(failed)}"
    return line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = HERE / "out" / "small_calls"
    parser.add_argument("--output", type=pathlib.Path, default=default, help=OUTPUT_HELP)
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results = {
        "machine": machine_facts(),
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="tiinterp-small-calls-") as name:
        tmp = pathlib.Path(name)
        modes = QUICK_FIRST_CALL_MODES if args.quick else FIRST_CALL_MODES
        first_calls = measure_first_calls(modes, tmp)
        command_line = measure_command_line(
            4 if args.quick else 20, 1 if args.quick else 5, tmp, np.random.default_rng(0)
        )
    timing = (3, 0.005) if args.quick else (21, 0.04)
    per_call = measure_per_call(*timing) + measure_stages(*timing)
    results["rows"] = per_call + first_calls + command_line
    results["elapsed_seconds"] = time.perf_counter() - start
    path = args.output / "results.json"
    harness.write_json(path, results)
    print(table(results))
    print()
    print(summary(results))
    m = results["machine"]
    print(
        f"{m['cpu']}, {m['cpu_count']} cores; Python {m['python']}, {m['taichi_backend']} "
        f"{m['taichi']}, PyTorch {m['torch']} ({m['torch_threads']} threads), "
        f"Pillow {m['pillow']}; measured in {results['elapsed_seconds']:.0f} s"
    )
    print(f"wrote {path}")
    return 1 if any("error" in row for row in results["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
