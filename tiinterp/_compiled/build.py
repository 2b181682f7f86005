"""``python -m tiinterp._compiled.build``: build the kernel set for this machine (Note [A
kernel set's ties] in ``__init__.py``).

    python -m tiinterp._compiled.build [--modes bilinear bicubic ...]
        [--dtypes float32 float64] [--backward] [--out DIR]

Stages, a line each: (1) start Taichi on the CPU and run ``tiinterp.warmup``'s calls for
the modes, capturing every SIMD kernel launch (``native.capture``), and add the other store
forms their shapes allow; (2) export each distinct kernel instance with Taichi's AOT;
(3) compile each one's IR for this CPU (``-O3 -mcpu=native``) with llvmlite, else with
``llc`` ($TIINTERP_LLC, else llc-14/15/16 on PATH);
(4) compile the runtime shim and link one library with ``cc -fopenmp`` ($CC); (5) write
manifest.json. All in a temporary folder beside ``--out`` (default: this machine's set
folder, ``library.default_folder``), renamed into place at the end. Taichi 1.7.4 on x86-64
or arm64 Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from . import library

TAICHI_VERSION = "1.7.4"
MACHINES = ("x86_64", "aarch64", "arm64")
LLC_NAMES = ("llc-14", "llc-15", "llc-16")
LLC_VARIABLE = "TIINTERP_LLC"
LIBRARY = "libtiinterp_kernels.so"

# Taichi 1.7.4's PrimitiveTypeID (taichi/inc/data_type.inc.h), by number.
_PRIMITIVE = ("f16", "f32", "f64", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64")


class BuildError(RuntimeError):
    """The build cannot run here, or a stage failed; the message says why."""


def refusal(backend: str, version: str) -> str | None:
    """Why a set cannot be built here, or None."""
    if backend != "taichi" or version != TAICHI_VERSION:
        return (
            f"kernel sets need taichi {TAICHI_VERSION} (its runtime layout is compiled into "
            f"them); this process runs {backend} {version}: the JIT compiles instead"
        )
    if platform.system() != "Linux" or platform.machine() not in MACHINES:
        return (
            "kernel sets are built on x86-64 or arm64 Linux only, not "
            f"{platform.system()} {platform.machine()}: the JIT compiles instead"
        )
    return None


class Llvmlite:
    """The code generator of llvmlite (LLVM 15, Taichi 1.7.4's own LLVM: a dependency of
    the ``demo`` extra and the test group, so that a set needs no system LLVM): each IR file
    to an object, as ``llc -O3 -mcpu=... -relocation-model=pic`` does."""

    def __init__(self, binding: Any) -> None:
        self._llvm = binding
        binding.initialize()
        binding.initialize_native_target()
        binding.initialize_native_asmprinter()
        self.name = "llvmlite " + ".".join(map(str, binding.llvm_version_info))

    def compile(self, source: pathlib.Path, target: pathlib.Path, mcpu: str) -> None:
        llvm = self._llvm
        module = llvm.parse_assembly(source.read_text())
        module.verify()
        native = mcpu == "native"
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name() if native else mcpu,
            features=llvm.get_host_cpu_features().flatten() if native else "",
            opt=3,
            reloc="pic",
            codemodel="default",
        )
        target.write_bytes(machine.emit_object(module))


class Llc:
    """LLVM's ``llc`` (LLVM 14-16), where llvmlite is not installed."""

    def __init__(self, program: str) -> None:
        self.program = program
        self.name = f"{program} {tool_version(program)}"

    def compile(self, source: pathlib.Path, target: pathlib.Path, mcpu: str) -> None:
        _run(
            [
                self.program,
                "-O3",
                f"-mcpu={mcpu}",
                "-filetype=obj",
                "-relocation-model=pic",
                str(source),
                "-o",
                str(target),
            ]
        )


def find_code_generator() -> Llvmlite | Llc:
    """llvmlite where it is installed and on LLVM 14-16 (IR of Taichi 1.7.4's LLVM 15),
    unless $TIINTERP_LLC names an ``llc``; else ``llc`` (:func:`find_llc`)."""
    if not os.environ.get(LLC_VARIABLE, "").strip():
        try:
            import llvmlite.binding as binding
        except ImportError:
            binding = None
        if binding is not None and 14 <= binding.llvm_version_info[0] <= 16:
            return Llvmlite(binding)
    return Llc(find_llc())


def find_llc() -> str:
    """``llc``: $TIINTERP_LLC, else the first of LLC_NAMES on PATH."""
    named = os.environ.get(LLC_VARIABLE, "").strip()
    if named:
        found = shutil.which(named)
        if found is None:
            raise BuildError(f"{LLC_VARIABLE}={named}: no such program")
        return found
    for name in LLC_NAMES:
        found = shutil.which(name)
        if found is not None:
            return found
    raise BuildError(
        f"no LLVM code generator: neither llvmlite (pip install 'llvmlite>=0.41,<0.45') nor "
        f"llc ({', '.join(LLC_NAMES)} on PATH, or {LLC_VARIABLE}; Debian/Ubuntu: apt-get "
        "install llvm-14); or let the JIT compile instead"
    )


def find_cc() -> str:
    name = os.environ.get("CC", "").strip() or "cc"
    found = shutil.which(name)
    if found is None:
        raise BuildError(f"no C compiler ({name}) found: install one (apt-get install gcc)")
    return found


SHIM_C = r"""
/* tiinterp's kernel set: the parts of Taichi 1.7.4's CPU runtime that its kernels read
   (Note [A kernel set's ties] in tiinterp/_compiled/__init__.py). Generated by
   tiinterp/_compiled/build.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <omp.h>

#define OFF_THREAD_POOL  @OFF_THREAD_POOL@
#define OFF_PARALLEL_FOR @OFF_PARALLEL_FOR@
#define OFF_TEMPORARIES  @OFF_TEMPORARIES@
#define RUNTIME_SIZE     @RUNTIME_SIZE@
#define THREADS          @THREADS@         /* the Taichi runtime's thread count */
#define TEMPORARIES_SIZE (1 << 20)        /* taichi_global_tmp_buffer_size */

typedef void (*task_fn)(void *context, int thread_id, int task_id);

static pid_t owner_; /* the process that loaded the library */

/* ThreadPool::run: tasks 0..splits-1 taken in turn by at most min(desired, THREADS)
   threads, each with its id below that count (the kernels index scratch lines by it). In
   a forked child the tasks run in turn on the calling thread: GNU OpenMP's threads are the
   parent's, and libgomp is not fork-safe. Each task fills the scratch line it reads, so
   the bits are the same. */
static void tiinterp_parallel_for(void *pool, int splits, int desired, void *context,
                                  task_fn f) {
  int threads = desired < THREADS ? desired : THREADS;
  (void)pool;
  if (threads <= 1 || splits <= 1 || getpid() != owner_) {
    for (int i = 0; i < splits; i++) f(context, 0, i);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int i = 0; i < splits; i++) f(context, omp_get_thread_num(), i);
}

static char *runtime_;

__attribute__((constructor)) static void tiinterp_make_runtime(void) {
  owner_ = getpid();
  runtime_ = aligned_alloc(64, (RUNTIME_SIZE + 63) / 64 * 64);
  memset(runtime_, 0, RUNTIME_SIZE);
  void *temporaries = aligned_alloc(4096, TEMPORARIES_SIZE);
  memset(temporaries, 0, TEMPORARIES_SIZE);
  *(void **)(runtime_ + OFF_THREAD_POOL) = runtime_; /* a non-null handle, unused */
  *(void **)(runtime_ + OFF_PARALLEL_FOR) = (void *)tiinterp_parallel_for;
  *(void **)(runtime_ + OFF_TEMPORARIES) = temporaries;
}

typedef void (*kernel_task)(void *context);
struct context {
  void *arg_buffer;
  void *runtime;
  int32_t cpu_thread_id;
  int64_t *result_buffer;
};
static int64_t result_buffer_[64];

/* One launch: the kernel's offloaded tasks in order, as cpu::KernelLauncher does. Not
   reentrant: one temporaries buffer, as in Taichi's runtime. */
void tiinterp_launch(void *arg_buffer, kernel_task *tasks, int n_tasks) {
  struct context ctx = {arg_buffer, runtime_, 0, result_buffer_};
  for (int i = 0; i < n_tasks; i++) tasks[i](&ctx);
}
"""


def taichi_json(text: str) -> Any:
    """Taichi's TextSerializer output (the AOT metadata.json) as JSON: ``{1, 7, 4}`` lists,
    ``ptr {`` objects and the commas it leaves out between fields."""
    text = re.sub(r"\{(\s*\d+(?:\s*,\s*\d+)*\s*)\}", r"[\1]", text)
    text = re.sub(r"\bptr\s*\{", "{", text)
    text = re.sub(r'([0-9"\]\}e])(\s*\n\s*")', r"\1,\2", text)
    return json.loads(text)


def capture_warmup(
    modes: Sequence[str], dtypes: Sequence[str], backward: bool
) -> list[tuple[Any, tuple[Any, ...]]]:
    """The SIMD launches of ``tiinterp.warmup(modes, dtypes=dtypes, backward=backward)``,
    and of each mode's 2x enlargement and halving of a 256 x 256 image."""
    from .._ops.resize import interpolate, interpolate_backward
    from .._ops.warmup import warmup

    def calls() -> None:
        warmup(list(modes), dtypes=list(dtypes), backward=backward)
        # The class warmup leaves out: a large result's compile-time widths (3 to 8 taps),
        # here those of each mode's 2x enlargement and halving.
        for mode in modes:
            for dtype in dtypes:
                x = np.zeros((1, 3, 256, 256), dtype)
                for size in (512, 128):
                    try:
                        y = interpolate(x, size=size, mode=mode)
                    except (TypeError, ValueError):  # a mode without 2-D resizes
                        continue
                    if backward:
                        interpolate_backward(y, x.shape, mode=mode)

    return capture_calls(calls)


def capture_calls(calls: Callable[[], None]) -> list[tuple[Any, tuple[Any, ...]]]:
    """The SIMD launches that ``calls()`` makes, each once per kernel form and template
    values (the JIT runs them meanwhile)."""
    from .native import capture, launch_key

    with capture() as launches:
        calls()
    seen: dict[tuple[Any, ...], tuple[Any, tuple[Any, ...]]] = {}
    for kernel, args in launches:
        key = launch_key(kernel, args)
        if key is not None and key not in seen:
            seen[key] = (kernel, args)
    return list(seen.values())


def _target_shape(name: str, args: tuple[Any, ...], lanes: int) -> tuple[int, int, int]:
    """The 3-D shape of a SIMD launch's result."""
    source = args[0]
    if name == "plane":
        return source.shape[0], int(args[6]), int(args[9])
    if name == "gather":
        return int(args[4]), int(args[7]), int(args[8])
    width = source.shape[2] * (source.shape[3] if source.ndim == 4 else 1)
    return source.shape[0], args[2].shape[0], width


def with_store_forms(
    launches: list[tuple[Any, tuple[Any, ...]]],
) -> list[tuple[Any, tuple[Any, ...]]]:
    """Each launch, and the same launch in the other store forms its result's shape allows
    (the form follows the result's address at run time: Note [Store forms] in
    ``_kernels/simd.py``)."""
    from .._kernels.simd import (
        HALVES_FROM,
        kernel_form,
        lanes_for,
        other_store_form,
        result_view,
    )
    from .native import launch_key

    out = list(launches)
    seen = {launch_key(k, a) for k, a in launches}
    for kernel, args in launches:
        found = kernel_form(kernel)
        assert found is not None  # capture_calls keeps SIMD kernels only
        name, dtype, stores, _, _ = found
        lanes = lanes_for(np.dtype(dtype))
        target = _target_shape(name, args, lanes)
        outputs = int(np.prod(target))
        for form in ("vectors", "halves", "scalars"):
            if form == stores or (form != "scalars" and target[-1] % lanes):
                continue
            if form == "halves" and outputs <= HALVES_FROM:
                continue
            other = other_store_form(kernel, form)
            view = result_view(np.empty(outputs, dtype), form, target, lanes)
            other_args = (args[0], view, *args[2:])
            key = launch_key(other, other_args)
            if key not in seen:
                seen.add(key)
                out.append((other, other_args))
    return out


def kernel_name(key: tuple[Any, ...]) -> str:
    return "k_" + "_".join(str(v) for v in key)


def describe_args(kernel: Any, meta: dict, args: tuple[Any, ...]) -> list[dict]:
    """Per argument of ``kernel``: a template, or where it lies in the argument buffer
    (Note [The argument buffer] in ``library.py``), from the AOT metadata ``meta``."""
    from .._runtime.taichi import argument_kinds

    elements = {e["name"]: e for e in meta["args_type"]["content"]["elements_"]}
    params = {tuple(k): v for k, v in meta["args"]}
    layout = []
    slot = 0
    for position, (name, kind) in enumerate(argument_kinds(kernel)):
        entry: dict[str, Any] = {"position": position, "name": name, "kind": kind}
        if kind == "template":
            layout.append(entry)
            continue
        element = elements[f"arg_{slot}"]
        entry["offset"] = element["offset"]
        if kind == "ndarray":
            fields = {f["name"]: f for f in element["type"]["content"]["elements_"]}
            if set(fields) != {"shape", "data_ptr"}:
                raise BuildError(f"{name}: unexpected ndarray fields {sorted(fields)}")
            dims = fields["shape"]["type"]["content"]["elements_"]
            if [d["offset"] for d in dims] != [4 * i for i in range(len(dims))]:
                raise BuildError(f"{name}: unexpected shape layout")
            entry.update(
                ndim=len(dims),
                element_shape=list(params[(slot,)]["element_shape"]),
                shape_offset=element["offset"] + fields["shape"]["offset"],
                data_ptr_offset=element["offset"] + fields["data_ptr"]["offset"],
            )
        else:
            entry["dtype"] = _PRIMITIVE[element["type"]["content"]["type"]]
        layout.append(entry)
        slot += 1
    return layout


def _split_top(text: str) -> list[str]:
    out, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "{[(<"
        depth -= ch in "}])>"
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    return [*out, current.strip()] if current.strip() else out


def runtime_offsets(ll: str) -> dict[str, int]:
    """The offsets of ``thread_pool``, ``parallel_for`` and ``temporaries`` in the
    ``LLVMRuntime`` struct type of the IR ``ll``, and its size (natural alignment), checked
    against Taichi 1.7.4's runtime.cpp: 9 thread_pool, 10 parallel_for, 14 temporaries."""
    match = re.search(r"^(%struct\.LLVMRuntime[.\d]*) = type \{ (.*) \}$", ll, re.M)
    if match is None:
        raise BuildError("no LLVMRuntime struct type in the kernels' IR")
    structs = dict(re.findall(r"^(%struct\.[\w.]+) = type <?\{ (.*?) \}>?$", ll, re.M))
    packed = set(re.findall(r"^(%struct\.[\w.]+) = type <\{", ll, re.M))

    def size_align(t: str) -> tuple[int, int]:
        t = t.strip()
        if t.endswith("*"):
            return 8, 8
        if t in ("i8", "i16", "i32", "i64"):
            n = int(t[1:]) // 8
            return n, n
        array = re.match(r"\[(\d+) x (.*)\]$", t)
        if array:
            size, align = size_align(array.group(2))
            return int(array.group(1)) * size, align
        if t in structs:
            offset, biggest = 0, 1
            for f in _split_top(structs[t]):
                size, align = size_align(f)
                align = 1 if t in packed else align
                offset = -(-offset // align) * align + size
                biggest = max(biggest, align)
            return -(-offset // biggest) * biggest, biggest
        raise BuildError(f"LLVMRuntime: unknown field type {t}")

    fields = _split_top(match.group(2))
    offsets, offset, biggest = [], 0, 1
    for f in fields:
        size, align = size_align(f)
        offset = -(-offset // align) * align
        offsets.append(offset)
        offset += size
        biggest = max(biggest, align)
    if not fields[10].startswith("void (i8*, i32, i32, i8*, void (i8*, i32, i32)*)*"):
        raise BuildError(f"LLVMRuntime field 10 is not parallel_for: {fields[10]}")
    return {
        "thread_pool": offsets[9],
        "parallel_for": offsets[10],
        "temporaries": offsets[14],
        "runtime_size": -(-offset // biggest) * biggest,
    }


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise BuildError(f"{' '.join(command)} failed:\n{done.stderr.strip()}")


def tool_version(program: str) -> str:
    done = subprocess.run([program, "--version"], capture_output=True, text=True)
    found = re.search(r"LLVM version ([\d.]+)", done.stdout)
    return found.group(1) if found else done.stdout.strip().splitlines()[0]


def build(
    out: pathlib.Path | None,
    capture: Callable[[], list[tuple[Any, tuple[Any, ...]]]],
    log: Callable[[str], None] = print,
    mcpu: str = "native",
    built_for: dict | None = None,
) -> pathlib.Path:
    """Build a set from the launches ``capture()`` returns into ``out`` (default: this
    process's set folder); the folder."""
    from .. import init
    from .._runtime.taichi import (
        BACKEND,
        backend_version,
        compile_options,
        cpu_threads,
        export_ahead,
        program_started,
        ti,
    )
    from .native import forget_set, identity, launch_key

    refused = refusal(BACKEND, backend_version())
    if refused:
        raise BuildError(refused)
    generator, cc = find_code_generator(), find_cc()
    started = time.perf_counter()

    def stage(text: str) -> None:
        log(f"[{time.perf_counter() - started:5.1f} s] {text}")

    # No set in use while capturing: every launch through Taichi.
    previous = os.environ.get(library.SET_VARIABLE)
    os.environ[library.SET_VARIABLE] = os.devnull
    forget_set()
    try:
        if not program_started() or not compile_options().startswith(("arch=x64", "arch=arm64")):
            init("cpu")
        launches = with_store_forms(capture())
    finally:
        if previous is None:
            del os.environ[library.SET_VARIABLE]
        else:
            os.environ[library.SET_VARIABLE] = previous
        forget_set()
    this = identity()
    folder = pathlib.Path(out) if out is not None else library.default_folder(this)
    stage(f"captured {len(launches)} kernel instances")
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix=".kernel-set-", dir=folder.parent))
    work.chmod(0o755)
    try:
        module = ti.aot.Module()
        named = {}
        for kernel, args in launches:
            key = launch_key(kernel, args)
            assert key is not None
            name = kernel_name(key)
            export_ahead(module, kernel, args, name)
            named[name] = (kernel, args, key)
        aot = work / "aot"
        module.save(str(aot))
        stage(f"exported {len(named)} kernels with Taichi's AOT")
        meta = taichi_json((aot / "metadata.json").read_text())["cache"]
        kernels: dict[str, Any] = {}
        sources, offsets = [], None
        for name, (kernel, args, key) in named.items():
            spec = meta["kernels"][name]
            ll = (aot / f"{name}.ll").read_text()
            these = runtime_offsets(ll)
            if offsets not in (None, these):
                raise BuildError(f"{name}: another LLVMRuntime layout")
            offsets = these
            # Task names are not unique across kernels: each gets its kernel's name.
            taichi_tasks = [t["name"] for t in spec["compiled_data"]["tasks"]]
            tasks = [f"tiinterp_{name}_task{i}" for i in range(len(taichi_tasks))]
            for old, new in zip(taichi_tasks, tasks, strict=True):
                ll, count = re.subn(rf"@{re.escape(old)}\b", f"@{new}", ll)
                if not count:
                    raise BuildError(f"{name}: task {old} not in its IR")
            path = work / f"{name}.ll"
            path.write_text(ll)
            sources.append(path)
            kernels[name] = {
                "key": list(key),
                "tasks": tasks,
                "args_size": spec["args_size"],
                "args": describe_args(kernel, spec, args),
            }
        assert offsets is not None
        objects = [path.with_suffix(".o") for path in sources]
        if isinstance(generator, Llc):
            with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                pairs = zip(sources, objects, strict=True)
                list(pool.map(lambda io: generator.compile(io[0], io[1], mcpu), pairs))
        else:
            for source, target in zip(sources, objects, strict=True):
                generator.compile(source, target, mcpu)
        stage(f"compiled {len(objects)} kernels with {generator.name}, -mcpu={mcpu}")
        shim = SHIM_C
        for field, value in (
            ("OFF_THREAD_POOL", offsets["thread_pool"]),
            ("OFF_PARALLEL_FOR", offsets["parallel_for"]),
            ("OFF_TEMPORARIES", offsets["temporaries"]),
            ("RUNTIME_SIZE", offsets["runtime_size"]),
            ("THREADS", cpu_threads()),
        ):
            shim = shim.replace(f"@{field}@", str(value))
        (work / "shim.c").write_text(shim)
        _run(
            [
                cc,
                "-O2",
                "-shared",
                "-fPIC",
                "-fopenmp",
                "-o",
                str(work / LIBRARY),
                str(work / "shim.c"),
                *map(str, objects),
            ]
        )
        size = (work / LIBRARY).stat().st_size
        stage(f"linked {LIBRARY} ({size / 1024:.0f} KiB) with {cc} -fopenmp")
        manifest = {
            "identity": this,
            "library": LIBRARY,
            "code_generator": generator.name,
            "mcpu": mcpu,
            "library_bytes": size,
            "runtime_offsets": offsets,
            "kernels": kernels,
            "built_for": built_for or {},
        }
        (work / library.MANIFEST).write_text(json.dumps(manifest, indent=1))
        for path in [*sources, *objects]:
            path.unlink()
        shutil.rmtree(aot)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(work, folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    stage(f"kernel set of {len(kernels)} kernels in {folder}")
    return folder


def existing_set(out: pathlib.Path | None, wanted: dict) -> pathlib.Path | None:
    """The set folder (``out``, or this process's) if it holds a set for this process built
    for at least the modes and dtypes ``wanted`` asks for (with the backward's calls if it
    does), else None. Starts Taichi on the CPU: the folder's key needs its runtime."""
    from .. import init
    from .._runtime.taichi import program_started
    from .native import identity

    refused = refusal(*_backend())
    if refused:
        raise BuildError(refused)
    if not program_started():
        init("cpu")
    this = identity()
    folder = pathlib.Path(out) if out is not None else library.default_folder(this)
    try:
        manifest = library.read_manifest(folder)
    except (OSError, ValueError):
        return None
    built = manifest.get("built_for") or {}
    if (
        manifest.get("identity") != this
        or not (folder / str(manifest.get("library", ""))).is_file()
        or not set(wanted["modes"]) <= set(built.get("modes", ()))
        or not set(wanted["dtypes"]) <= set(built.get("dtypes", ()))
        or (wanted["backward"] and not built.get("backward"))
    ):
        return None
    return folder


def _backend() -> tuple[str, str]:
    from .._runtime.taichi import BACKEND, backend_version

    return BACKEND, backend_version()


def main(argv: Sequence[str] | None = None) -> int:
    from .._rules.filters import MODES

    parser = argparse.ArgumentParser(
        prog="python -m tiinterp._compiled.build", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--modes", nargs="+", default=["bilinear", "bicubic"], metavar="MODE")
    parser.add_argument(
        "--dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"]
    )
    parser.add_argument("--backward", action="store_true", help="also interpolate_backward's")
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        help="the set's folder (default: the "
        "one tiinterp looks in, under ~/.cache/tiinterp/kernel-sets)",
    )
    args = parser.parse_args(argv)
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {unknown}")
    wanted = {"modes": sorted(args.modes), "dtypes": sorted(args.dtypes), "backward": args.backward}
    try:
        built = existing_set(args.out, wanted)
        if built is not None:
            print(f"kernel set up to date: {built}")
            return 0
        build(
            args.out,
            lambda: capture_warmup(args.modes, args.dtypes, args.backward),
            built_for=wanted,
        )
    except BuildError as error:
        print(f"tiinterp: kernel set not built: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
