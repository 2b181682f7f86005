"""A kernel set: tiinterp's SIMD kernels compiled ahead of time into one shared library,
found, loaded and launched without Taichi (this module imports no Taichi: a test checks).

A set is a folder holding ``manifest.json`` and the library it names. :func:`kernel_set`
gives the set for this process, or None: the folder ``$TIINTERP_KERNEL_SET`` if set, else
``~/.cache/tiinterp/kernel-sets/<key>`` (:func:`set_key`), read once per key, its library
loaded with ctypes then (a process that never asks, or has no set, pays nothing). A set
whose manifest does not match this process (another key, a missing or unreadable file) is
ignored: the JIT compiles, and under ``TIINTERP_VERBOSE`` one line on stderr says why.

A :class:`NativeKernel` takes the argument tuple tiinterp passes to the Taichi kernel
(templates included, unread), packs Taichi's argument buffer (Note [The argument buffer])
and calls the library's ``tiinterp_launch``. Launches are not reentrant (one argument
buffer per kernel, one runtime): tiinterp's calls are serialised by its lock
(``_runtime/session.py``'s ``serialized``), and a recording's bindings are its own.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import pathlib
import platform
import struct
import sys
from typing import Any

# The format of manifest.json; a set of another format is ignored.
FORMAT = 1
MANIFEST = "manifest.json"
SET_VARIABLE = "TIINTERP_KERNEL_SET"
PACKAGE = pathlib.Path(__file__).resolve().parents[1]
# The modules whose source makes the kernels' code: the SIMD kernels and what they import
# of tiinterp (the compile options are set in _runtime/taichi.py). tests/engine/
# test_kernel_set.py checks the list against simd.py's imports.
KERNEL_SOURCES = ("_kernels/simd.py", "_runtime/arrays.py", "_runtime/taichi.py")

# Taichi's primitive types in the manifest -> struct codes.
_STRUCT_CODES = {"i32": "i", "i64": "q", "f32": "f", "f64": "d", "u1": "B", "i8": "b", "u8": "B"}


def _verbose() -> bool:
    return os.environ.get("TIINTERP_VERBOSE", "").strip().lower() not in ("", "0", "false", "no")


def _warn(message: str) -> None:
    if _verbose():
        print(f"tiinterp: kernel set ignored: {message}", file=sys.stderr)


def sources_hash() -> str:
    """A hash of :data:`KERNEL_SOURCES`' text."""
    digest = hashlib.sha256()
    for name in KERNEL_SOURCES:
        digest.update(name.encode() + b"\0" + (PACKAGE / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cpu_description() -> str:
    """The CPU's model and feature flags (``-mcpu=native`` compiles for them): the first
    processor's lines of /proc/cpuinfo on Linux, else ``platform.processor()``."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    first = text.split("\n\n", 1)[0]
    wanted = ("model name", "flags", "features", "cpu implementer", "cpu part", "vendor_id")
    lines = [
        " ".join(line.split())
        for line in first.splitlines()
        if line.split(":", 1)[0].strip().lower() in wanted
    ]
    return "\n".join(lines)


def set_identity(backend: str, version: str, threads: int, compile_options: str) -> dict:
    """What a set is built for, all of it in its key: the Taichi backend and version, the
    kernels' source, the machine and CPU, the CPU runtime's thread count and the compile
    options that change the kernels' code."""
    return {
        "format": FORMAT,
        "backend": f"{backend} {version}",
        "sources": sources_hash(),
        "machine": platform.machine(),
        "system": platform.system(),
        "cpu": hashlib.sha256(cpu_description().encode()).hexdigest()[:16],
        "threads": int(threads),
        "options": compile_options,
    }


def set_key(identity: dict) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def default_folder(identity: dict) -> pathlib.Path:
    """Where a set for ``identity`` lives unless ``$TIINTERP_KERNEL_SET`` says."""
    explicit = os.environ.get(SET_VARIABLE, "").strip()
    if explicit:
        return pathlib.Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.expanduser("~/.cache")
    return pathlib.Path(cache) / "tiinterp" / "kernel-sets" / set_key(identity)


# Note [The argument buffer]
# Taichi 1.7.4's CPU launcher hands each offloaded task a RuntimeContext whose arg_buffer
# is a struct with one field per non-template argument, in order, at the offsets Taichi
# computed (the AOT metadata, copied into the manifest's ``args``): an ndarray is
# ``{i32 shape[ndim]; <pad to 8>; T *data_ptr}`` (the extents of its index dimensions only,
# a vector element's lanes not among them; no grad pointer where none is needed), a scalar
# its value at its natural alignment. The library's ``tiinterp_launch`` makes the context
# (``{arg_buffer, runtime, cpu_thread_id = 0, result_buffer}``) and calls the kernel's
# tasks in order, as ``cpu::KernelLauncher::launch_llvm_kernel`` does.


class NativeKernel:
    """One kernel of a set (one template setting): ``kernel(args)`` with the tuple tiinterp
    passes to the Taichi kernel. Arrays are C-contiguous NumPy arrays or contiguous torch
    CPU tensors of the kernel's dtype and rank (the caller's duty, as for the JIT)."""

    def __init__(self, library: KernelSet, name: str, spec: dict) -> None:
        self.name = name
        cdll = library.cdll
        tasks = spec["tasks"]
        self._tasks = (ctypes.c_void_p * len(tasks))(
            *(ctypes.cast(getattr(cdll, t), ctypes.c_void_p).value for t in tasks)
        )
        self._tasks_address = ctypes.addressof(self._tasks)
        self._n_tasks = len(tasks)
        self._size = max(8, int(spec["args_size"]))
        self._launch = library.launch_function
        fmt, at, plan, pointers = "<", 0, [], []
        for a in spec["args"]:
            if a["kind"] == "template":
                continue
            if a["kind"] == "ndarray":
                fmt += "x" * (a["shape_offset"] - at) + "i" * a["ndim"]
                at = a["shape_offset"] + 4 * a["ndim"]
                fmt += "x" * (a["data_ptr_offset"] - at) + "Q"
                at = a["data_ptr_offset"] + 8
                plan.append((a["position"], a["ndim"]))
                pointers.append((a["position"], a["data_ptr_offset"]))
            else:
                code = _STRUCT_CODES[a["dtype"]]
                fmt += "x" * (a["offset"] - at) + code
                at = a["offset"] + struct.calcsize("<" + code)
                plan.append((a["position"], -1 if code in "fd" else -2))
        fmt += "x" * (self._size - at)
        self._struct = struct.Struct(fmt)
        if self._struct.size != self._size:
            raise ValueError(
                f"{name}: argument layout of {self._struct.size} bytes, not {self._size}"
            )
        self._plan = tuple(plan)
        self._pointers = tuple(pointers)
        self._buffer = ctypes.create_string_buffer(self._size)
        self._buffer_address = ctypes.addressof(self._buffer)

    def fields(self, args: tuple[Any, ...]) -> list[Any]:
        out: list[Any] = []
        for position, how in self._plan:
            value = args[position]
            if how >= 0:
                out.extend(value.shape[:how])
                out.append(address_of(value))
            elif how == -1:
                out.append(float(value))
            else:
                out.append(int(value))
        return out

    def __call__(self, args: tuple[Any, ...]) -> None:
        self._struct.pack_into(self._buffer, 0, *self.fields(args))
        self._launch(self._buffer_address, self._tasks_address, self._n_tasks)

    def bind(self, args: tuple[Any, ...]) -> NativeBinding:
        """A launch of this kernel on ``args`` with a buffer of its own, whose array
        addresses can be set again (Note [Recorded launches] in ``_runtime/taichi.py``)."""
        return NativeBinding(self, args)


class NativeBinding:
    """``kernel`` on fixed arguments, in a buffer of its own; ``arrays``: each array
    argument's ``(field, array)``, ``field`` what :meth:`set_address` takes."""

    __slots__ = ("_buffer", "_buffer_address", "_launch", "_n_tasks", "_tasks_address", "arrays")

    def __init__(self, kernel: NativeKernel, args: tuple[Any, ...]) -> None:
        self._buffer = ctypes.create_string_buffer(kernel._size)
        self._buffer_address = ctypes.addressof(self._buffer)
        kernel._struct.pack_into(self._buffer, 0, *kernel.fields(args))
        self._launch, self._tasks_address = kernel._launch, kernel._tasks_address
        self._n_tasks = kernel._n_tasks
        self.arrays = [(offset, args[position]) for position, offset in kernel._pointers]

    def set_address(self, field: int, address: int) -> None:
        _POINTER.pack_into(self._buffer, field, address)

    def __call__(self) -> None:
        self._launch(self._buffer_address, self._tasks_address, self._n_tasks)


_POINTER = struct.Struct("<Q")


def address_of(array: Any) -> int:
    """The address of a NumPy array's or a torch tensor's first element."""
    interface = getattr(array, "__array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    return int(array.data_ptr())


class KernelSet:
    """A loaded set: ``find(key)`` gives the kernel compiled for ``key`` (a kernel's form
    and template values, as the manifest lists them), or None."""

    def __init__(self, folder: pathlib.Path, manifest: dict) -> None:
        self.folder = folder
        self.manifest = manifest
        self.cdll = ctypes.CDLL(str(folder / manifest["library"]))
        launch = self.cdll.tiinterp_launch
        launch.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
        launch.restype = None
        self.launch_function = launch
        self._specs = {key_of(spec["key"]): name for name, spec in manifest["kernels"].items()}
        self._kernels: dict[tuple[Any, ...], NativeKernel | None] = {}

    def keys(self) -> list[tuple[Any, ...]]:
        return list(self._specs)

    def find(self, key: tuple[Any, ...]) -> NativeKernel | None:
        if key in self._kernels:
            return self._kernels[key]
        name = self._specs.get(key)
        kernel = None
        if name is not None:
            kernel = NativeKernel(self, name, self.manifest["kernels"][name])
        self._kernels[key] = kernel
        return kernel


def key_of(values: Any) -> tuple[Any, ...]:
    """A kernel's key as a tuple: (kernel name, dtype, store form, every tap unrolled,
    half-vector loads, its template values in order), bools and ints as ints."""
    return tuple(v if isinstance(v, str) else int(v) for v in values)


_sets: dict[str, KernelSet | None] = {}


def kernel_set(identity: dict) -> KernelSet | None:
    """The set for a process of ``identity`` (:func:`set_identity`), loaded once; None
    where there is none, or it does not match (Note [A kernel set's ties])."""
    folder = default_folder(identity)
    cache_key = f"{folder}\0{set_key(identity)}"
    if cache_key not in _sets:
        _sets[cache_key] = _load(folder, identity)
    return _sets[cache_key]


def read_manifest(folder: pathlib.Path) -> dict:
    with open(folder / MANIFEST, encoding="utf-8") as f:
        return json.load(f)


def _load(folder: pathlib.Path, identity: dict) -> KernelSet | None:
    path = folder / MANIFEST
    if not path.exists():
        if os.environ.get(SET_VARIABLE, "").strip():
            _warn(f"{path} does not exist")
        return None
    try:
        manifest = read_manifest(folder)
        if manifest.get("identity") != identity:
            found = manifest.get("identity") or {}
            differ = sorted(k for k in identity if found.get(k) != identity[k])
            _warn(f"{folder} was built for another {', '.join(differ) or 'format'}")
            return None
        return KernelSet(folder, manifest)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        _warn(f"{folder}: {error}")
        return None


def forget() -> None:
    """Forget the sets looked up so far: the next :func:`kernel_set` looks again (a loaded
    library stays loaded, and is found again)."""
    for key in [k for k, v in _sets.items() if v is None]:
        del _sets[key]
