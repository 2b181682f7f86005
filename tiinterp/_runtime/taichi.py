"""The one place where tiinterp imports Taichi and reaches into its internals
(``taichi.lang.*`` and ``ti._logging``), so that a change of Taichi version has one module
to fix.

- Two backends, one API: ``taichi`` (1.7.4, the last release, Python <= 3.13) and its
  maintained fork ``taichi_forge`` (the same package layout under another name, Python
  3.10-3.14). The backend is chosen once, at import: ``TIINTERP_TAICHI=taichi|taichi_forge``
  if set; else the one the program has already imported (its kernels and tiinterp's must
  share one runtime); else ``taichi`` if installed, else ``taichi_forge``.

- Quiet import and start-up: Taichi prints a banner on ``import taichi`` and
  "[Taichi] Starting on arch=..." on every ``ti.init``, on stdout, which corrupts programs
  that write data there. tiinterp drops those lines unless ``TIINTERP_VERBOSE=1``, in
  which case they go to stderr. (Taichi's ``ENABLE_TAICHI_HEADER_PRINT=0`` turns off the
  banner only; the ``ti.init`` line is a bare ``print`` that no setting turns off.)
- Runtime generations: every ``ti.init`` / ``ti.reset`` replaces Taichi's Python runtime
  object and frees every field and ndarray made before. Taichi does not notice when such a
  stale object is used again (the result is zeros, an "invalid DeviceAllocation" error or an
  abort), so tiinterp tags each ndarray and field with the generation of the runtime that
  made it and compares generations before touching one. Nor when one is released later:
  see Note [Ndarrays outliving their runtime].
- A runtime inherited across ``fork()`` is abandoned, never finalised: see
  Note [Taichi after fork] in ``_runtime/session.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import importlib.util
import io
import itertools
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from .capabilities import capabilities

_TAICHI_LINE = "[Taichi] "


def verbose() -> bool:
    return os.environ.get("TIINTERP_VERBOSE", "").strip().lower() not in ("", "0", "false", "no")


class _TaichiLineFilter(io.TextIOBase):
    """A stdout stand-in that sends Taichi's own lines to stderr (verbose) or nowhere, and
    everything else to the real stdout (another thread may print meanwhile)."""

    def __init__(self, target):
        super().__init__()
        self._target = target
        self._dropped_line = False

    def write(self, text: str) -> int:
        # print() writes the message and its "\n" in two calls.
        if text.startswith(_TAICHI_LINE) or (self._dropped_line and text == "\n"):
            self._dropped_line = text != "\n"
            if verbose():
                sys.stderr.write(text)
            return len(text)
        self._dropped_line = False
        return self._target.write(text)

    def flush(self) -> None:
        self._target.flush()


@contextlib.contextmanager
def taichi_lines_off_stdout():
    with contextlib.redirect_stdout(_TaichiLineFilter(sys.stdout)):
        yield


@contextlib.contextmanager
def _notebook_detection_on_real_stdout():
    """Taichi decides on import whether it runs in a notebook or IDE (``sys.stdout is not
    sys.__stdout__``) and if so logs a line and makes every kernel launch flush a print
    buffer; under the filter below it would always think so. Its ``TI_ENABLE_PYBUF``
    setting, unless the user set it, is given the answer for the program's real stdout."""
    if "TI_ENABLE_PYBUF" in os.environ:
        yield
        return
    os.environ["TI_ENABLE_PYBUF"] = "1" if sys.stdout is not sys.__stdout__ else "0"
    try:
        yield
    finally:
        del os.environ["TI_ENABLE_PYBUF"]


BACKENDS = ("taichi", "taichi_forge")
_BACKEND_VARIABLE = "TIINTERP_TAICHI"
_INSTALL = {"taichi": "pip install tiinterp", "taichi_forge": "pip install 'tiinterp[forge]'"}


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _choose_backend() -> str:
    chosen = os.environ.get(_BACKEND_VARIABLE, "").strip()
    if chosen:
        if chosen not in BACKENDS:
            raise ImportError(
                f"{_BACKEND_VARIABLE}: expected one of {', '.join(BACKENDS)}, got {chosen!r}"
            )
        if not _installed(chosen):
            raise ImportError(
                f"{_BACKEND_VARIABLE}={chosen}, but {chosen} is not installed ({_INSTALL[chosen]})"
            )
        return chosen
    imported = [name for name in BACKENDS if name in sys.modules]
    if len(imported) == 1:
        return imported[0]
    for name in BACKENDS:
        if _installed(name):
            return name
    raise ImportError(
        "tiinterp needs Taichi: taichi (pip install tiinterp, Python 3.10-3.13) or "
        "taichi-forge (pip install 'tiinterp[forge]', Python 3.10-3.14); neither is installed"
    )


BACKEND = _choose_backend()

with _notebook_detection_on_real_stdout(), taichi_lines_off_stdout():
    ti: Any = importlib.import_module(BACKEND)


def submodule(path: str):
    """The backend's module ``path`` (``"lang.impl"`` is ``taichi.lang.impl`` or
    ``taichi_forge.lang.impl``)."""
    return importlib.import_module(f"{BACKEND}.{path}")


impl = submodule("lang.impl")
Ndarray = submodule("lang._ndarray").Ndarray
ScalarNdarray = submodule("lang._ndarray").ScalarNdarray
Field = submodule("lang.field").Field
ScalarField = submodule("lang.field").ScalarField
is_arch_supported = submodule("lang.misc").is_arch_supported

_generations = itertools.count(1)
_generation_lock = threading.RLock()
_GENERATION = "_tiinterp_generation"


# Note [Ndarrays outliving their runtime]
# Taichi 1.7.4 frees an ndarray, when its Python object is released, through whichever
# runtime is current then (``ScalarNdarray.__del__``: ``impl.get_runtime().prog.
# delete_ndarray(self.arr)``), which looks the C++ ndarray up by its address. An ndarray of
# an earlier runtime was freed with that runtime, and the allocator may since have handed
# its address to an ndarray of the current one: releasing the stale Python object then
# frees that live ndarray, and its next use reads freed memory ("RuntimeError: argument not
# found" at a launch: the message of a failed shape check, which Taichi formats without its
# argument; "invalid DeviceAllocation"; or garbage). Stale ndarrays are released in a later
# runtime all the time: tiinterp's per-runtime caches (device tables, pools) empty
# themselves at their first use in the next runtime, cyclic garbage (a traceback's frames)
# goes whenever the collector runs, a user's own whenever the user drops them. So a Vulkan
# call after a re-init failed at random. taichi-forge frees through the ndarray's own
# runtime.
#
# The rule: no ndarray is deleted through a runtime other than its own. tiinterp keeps a
# weak set of the ndarrays made in the current runtime. When it first sees a new runtime (at
# the latest at the new runtime's first ndarray, whose constructor asks for the generation
# before allocating: before any address of the old runtime can be handed out again), it
# detaches the survivors of the old one from their freed C++ ndarrays (``arr = None``, an
# Ndarray's state before it allocates), so that releasing them deletes nothing. Ndarrays
# made before tiinterp was imported are not known to it and keep Taichi's behaviour.
_BACKEND_CAPABILITIES = capabilities(BACKEND, "cpu")  # for the fields true of every arch
_DELETES_THROUGH_CURRENT_RUNTIME = _BACKEND_CAPABILITIES.frees_ndarrays_through_current_runtime
_ndarrays_of_this_runtime: weakref.WeakSet[Any] = weakref.WeakSet()


def runtime_generation() -> int:
    """A number that changes with every ``ti.init`` / ``ti.reset`` (each makes a new
    Python runtime object, which is tagged the first time it is seen)."""
    runtime = impl.get_runtime()
    with _generation_lock:
        if _GENERATION not in vars(runtime):
            setattr(runtime, _GENERATION, next(_generations))
            _detach_stale_ndarrays()
        return vars(runtime)[_GENERATION]


# Forks seen by this process: a child counts one more than its parent had.
_forks = [0]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))


class RuntimeWatch:
    """Tells whether the Taichi runtime and the process are still those of the last look,
    for caches of what only one runtime can run, looked up on every call: ~0.05 us, against
    ~0.35 for :func:`runtime_generation` and ~0.2 for ``os.getpid()`` (measured). Holds a
    weak reference to the runtime (Note [Bound host launches]: never the program)."""

    __slots__ = ("_forks", "_runtime")

    def __init__(self) -> None:
        self._runtime: Callable[[], Any] = lambda: None
        self._forks = -1

    def changed(self) -> bool:
        runtime = impl.get_runtime()
        if self._runtime() is runtime and self._forks == _forks[0]:
            return False
        self._runtime, self._forks = weakref.ref(runtime), _forks[0]
        return True


def _detach_stale_ndarrays() -> None:
    """Note [Ndarrays outliving their runtime], when a new runtime is first seen."""
    for array in list(_ndarrays_of_this_runtime):
        array.arr = None
    _ndarrays_of_this_runtime.clear()


def _register_ndarray(array: object) -> None:
    if _DELETES_THROUGH_CURRENT_RUNTIME:
        _ndarrays_of_this_runtime.add(array)


def _tag_with_generation(cls: type, register: Callable[[object], None] | None = None) -> None:
    original = vars(cls)["__init__"]
    if getattr(original, "_tiinterp_tags", False):
        return

    @functools.wraps(original)
    def __init__(self: object, *args: object, **kwargs: object) -> None:
        with _generation_lock:
            setattr(self, _GENERATION, runtime_generation())
            if register is not None:
                register(self)
        original(self, *args, **kwargs)

    setattr(__init__, "_tiinterp_tags", True)  # noqa: B010  (mypy: no such attribute)
    cls.__init__ = __init__  # type: ignore[misc]


# Note [Why Taichi's constructors are wrapped]
# Every Taichi ndarray and field (scalar, vector, matrix; their .grad too) is built through
# these two base constructors, before any memory is allocated. tiinterp wraps them, when its
# Taichi-side modules are first imported, to record the runtime each object is made in: a
# stale one is then refused with a clear error (``require_current``) instead of a crash or
# garbage, and Note [Ndarrays outliving their runtime] can detach a dead runtime's ndarrays.
# The wrapper only tags (one attribute; ndarrays also join a weak set) and then runs
# Taichi's constructor unchanged; it is installed once, and objects made before it carry no
# tag and are taken as current. Nothing short of this works on Taichi 1.7.4 (checked):
# - an object does not say which runtime made it: an ndarray holds its C++ ndarray (``arr``)
#   and a field its SNodes, both freed with their program, so touching them to ask is
#   itself the use-after-free to avoid, and SNode-tree ids restart at 0 in every runtime;
# - no hook runs at ``ti.init`` / ``ti.reset`` or when an ndarray is made, and looking for
#   ndarrays later (``gc.get_objects()`` at tiinterp's first call in a runtime) cannot tell
#   the user's new ones from stale ones: both exist by then;
# - the runtime keeps no list of its ndarrays that Python can read.
_tag_with_generation(Ndarray, _register_ndarray)
_tag_with_generation(Field)


# Generations of runtimes this process inherited across fork(), unusable here even before
# tiinterp replaces them (Note [Taichi after fork] in _runtime/session.py).
_inherited_generations: set[int] = set()


def mark_runtime_inherited() -> None:
    _inherited_generations.add(runtime_generation())


def _made_in(value) -> int | None:
    return vars(value).get(_GENERATION) if hasattr(value, "__dict__") else None


def is_stale(value) -> bool:
    """Whether ``value`` (a Taichi ndarray or field) belongs to an earlier Taichi runtime,
    or to one this process inherited across fork()."""
    made_in = _made_in(value)
    return made_in is not None and (
        made_in != runtime_generation() or made_in in _inherited_generations
    )


def require_current(value, name: str) -> None:
    if is_stale(value):
        what = "field" if isinstance(value, Field) else "ndarray"
        if _made_in(value) in _inherited_generations:
            raise RuntimeError(
                f"{name}: this Taichi {what} was made before this process was forked, and "
                "Taichi's data does not survive fork(); create it again in this process"
            )
        raise RuntimeError(
            f"{name}: this Taichi {what} was made before the last ti.init / ti.reset / "
            "tiinterp.init, which freed it; create it again after initialising Taichi"
        )


# --- Prepared launches -------------------------------------------------------------------
# Note [Prepared launches]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# Taichi 1.7.4's ``kernel(*args)`` spends ~55 us of Python per call
# (measured): the template-key lookup over every argument (~19 us) and the marshalling of
# each argument by type. ``launch`` keeps, per kernel and argument signature, the compiled
# kernel and one setter per argument, so a repeated call builds the launch context and
# launches (perf notes: 23 us against 78 us for the same kernel, bit-identical). The context
# is rebuilt per call: CUDA's launcher writes into it. Inside a Tape, and on taichi-forge
# (whose launcher differs), kernels are called as usual.


_PREPARED_LAUNCHES = _BACKEND_CAPABILITIES.prepared_launches


@functools.cache
def _template_positions(kernel: Any) -> frozenset[int]:
    template = submodule("types.annotations").template
    arguments = kernel._primal.arguments
    return frozenset(i for i, a in enumerate(arguments) if isinstance(a.annotation, template))


def template_positions(kernel: Any) -> frozenset[int]:
    """The positions of ``kernel``'s ``ti.template()`` arguments."""
    return _template_positions(kernel)


def _launch_key(kernel: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The kernel and what selects its compiled instance for ``args``."""
    templates = _template_positions(kernel)
    return (kernel, *(_signature(a, i in templates) for i, a in enumerate(args)))


def _signature(value: Any, template: bool) -> Any:
    """What selects a compiled instance of a kernel for ``value``: its value for a
    template, else its kind (with dtype and rank for arrays)."""
    if template:
        return value
    if isinstance(value, Ndarray):
        return ("ndarray", value.dtype, len(value.shape))
    if isinstance(value, (int, float, bool)):
        return type(value)
    return (type(value), value.dtype, len(value.shape))


class _PreparedKernel:
    def __init__(self, kernel: Any, args: tuple[Any, ...]) -> None:
        primal = kernel._primal
        key = primal.ensure_compiled(*args)
        self._kernel = primal.compiled_kernels[key]
        primitive_types = submodule("types.primitive_types")
        ndarray_type = submodule("types.ndarray_type")
        self._setters: list[tuple[int, int, Any]] = []
        slot = 0
        for position, argument in enumerate(primal.arguments):
            annotation = argument.annotation
            if position in _template_positions(kernel):
                continue
            if isinstance(annotation, ndarray_type.NdarrayType):
                element = annotation.dtype
                plain = element is None or id(element) in primitive_types.type_ids
                self._setters.append((position, slot, 0 if plain else element.ndim))
            elif id(annotation) in primitive_types.integer_type_ids:
                self._setters.append((position, slot, "int"))
            elif id(annotation) in primitive_types.real_type_ids:
                self._setters.append((position, slot, "float"))
            else:
                raise TypeError(f"no prepared launch for argument {argument.name}")
            slot += 1
        # Compiled once, here, under the options of this first launch: taichi-forge compiles
        # a kernel again when the program's options have changed since (Note [Vector types
        # under any options]; its SIMD kernels then ran scalarised from the second call on,
        # to different roundings).
        prog = impl.get_runtime().prog
        self._compiled = prog.compile_kernel(prog.config(), prog.get_device_caps(), self._kernel)

    def __call__(self, args: tuple[Any, ...]) -> None:
        context = self._kernel.make_launch_context()
        for position, slot, how in self._setters:
            value = args[position]
            index = (slot,)
            if how == "int":
                context.set_arg_int(index, int(value))
            elif how == "float":
                context.set_arg_float(index, float(value))
            elif isinstance(value, Ndarray):
                context.set_arg_ndarray(index, value.arr)
            else:
                shape = tuple(value.shape)
                shape = shape[: len(shape) - how] if how else shape
                if hasattr(value, "data_ptr"):
                    address, nbytes = value.data_ptr(), value.element_size() * value.nelement()
                else:
                    address, nbytes = value.ctypes.data, value.nbytes
                context.set_arg_external_array_with_shape(index, int(address), nbytes, shape, 0)
        impl.get_runtime().prog.launch_kernel(self._compiled, context)


_prepared_kernels: dict[tuple[Any, ...], _PreparedKernel] = {}
_prepared_generation = [0]
_MAX_PREPARED_KERNELS = 1024


def _preparable(value: Any) -> bool:
    """Arguments a prepared launch passes as they are: Taichi ndarrays, C-contiguous NumPy
    arrays, contiguous torch tensors on the arch's device (Taichi copies the others), and
    scalars and templates."""
    if isinstance(value, (int, float, tuple, bool, Ndarray)):
        return True
    flags = getattr(value, "flags", None)
    if flags is not None:
        return bool(flags.c_contiguous)
    if hasattr(value, "data_ptr"):
        on_cuda = value.device.type == "cuda"
        return (
            value.is_contiguous()
            and not value.requires_grad
            and (on_cuda == (current_config().arch.name == "cuda"))
        )
    return False


def launch(kernel: Any, *args: Any) -> _PreparedKernel | None:
    """``kernel(*args)`` through a prepared launch where one applies (Note [Prepared
    launches]); the prepared launch it used, if any."""
    runtime = impl.get_runtime()
    if not _PREPARED_LAUNCHES or runtime.target_tape is not None or runtime.fwd_mode_manager:
        kernel(*args)
        return None
    if not all(_preparable(a) for a in args):
        kernel(*args)
        return None
    generation = runtime_generation()
    if generation != _prepared_generation[0]:
        _prepared_kernels.clear()
        _prepared_generation[0] = generation
    key = _launch_key(kernel, args)
    prepared = _prepared_kernels.get(key)
    if prepared is None:
        with compile_notice():
            kernel(*args)  # compiles, and checks the arguments as Taichi does
        if len(_prepared_kernels) >= _MAX_PREPARED_KERNELS:
            _prepared_kernels.clear()
        _prepared_kernels[key] = _PreparedKernel(kernel, args)
        return None
    prepared(args)
    return prepared


# Note [Vector types under any options]
# Taichi 1.7.4 and taichi-forge vectorise a CPU kernel only where it stores a value of a
# vector type, which ``real_matrix_scalarize=True`` (Taichi's default) splits into scalars
# before LLVM sees it; the same option set to False makes other kernels miscompile (the perf
# notes; tiinterp's SIMD configuration refuses those). Taichi reads the option from the
# program's compile configuration when it compiles a kernel (its front end and the offline
# cache's key too), and keeps each compiled kernel as compiled: so the CPU path's SIMD
# kernels are compiled with the option off, on their first launch per signature in each
# runtime, and run as compiled afterwards, while every other kernel keeps the options the
# program was started with (measured: vector stores in the SIMD kernels' code, none in a
# kernel compiled next; a cached kernel found again only under the options it was compiled
# with). The option is set back as soon as the launch returns; tiinterp's calls run one at a
# time, but a kernel that another thread of the program compiles during that first launch
# would see the option off too. taichi-forge's launches compile a kernel again when the
# options differ from those it was compiled under (its second launch ran scalarised code,
# to different roundings), so there every launch of these kernels runs with the option off.
_vector_compiled: set[tuple[Any, ...]] = set()
_vector_generation = [0]
# Where a launch compiles the kernel again under changed options (taichi-forge), every
# launch of a SIMD kernel runs with the option off, 0.8 us more per launch (measured).
_RECOMPILES_FOR_NEW_OPTIONS = _BACKEND_CAPABILITIES.recompiles_for_new_options


def launch_with_vector_types(run: Callable[..., Any], kernel: Any, *args: Any) -> None:
    """``run(kernel, *args)`` (``run``: :func:`launch` or a :class:`HostLaunches`), the
    kernel compiled with ``real_matrix_scalarize=False`` whatever the program's options
    (Note [Vector types under any options])."""
    generation = runtime_generation()
    if generation != _vector_generation[0]:
        _vector_compiled.clear()
        _vector_generation[0] = generation
    key = _launch_key(kernel, args)
    if key in _vector_compiled and not _RECOMPILES_FOR_NEW_OPTIONS:
        run(kernel, *args)
        return
    config = impl.get_runtime().prog.config()
    scalarize = config.real_matrix_scalarize
    config.real_matrix_scalarize = False
    try:
        run(kernel, *args)
    finally:
        config.real_matrix_scalarize = scalarize
    _vector_compiled.add(key)


# Note [Compile notice]
# A kernel's first launch in a process runs Taichi's Python front end over it, and compiles
# it when Taichi's offline cache does not hold it yet: up to seconds per kernel signature,
# during which a command-line user sees nothing. On a terminal, a first launch that takes
# longer than COMPILE_NOTICE_SECONDS prints one line on stderr, once per process; scripts
# and logs (stderr not a terminal) get nothing.
COMPILE_NOTICE_SECONDS = 1.0
COMPILE_NOTICE = (
    "tiinterp: compiling Taichi kernels for a new mode or shape "
    "(once; later runs load them from Taichi's cache)...\n"
)
_compile_notice_shown = threading.Event()


def _show_compile_notice(stream: Any) -> None:
    if not _compile_notice_shown.is_set():
        _compile_notice_shown.set()
        stream.write(COMPILE_NOTICE)
        stream.flush()


@contextlib.contextmanager
def compile_notice() -> Any:
    """Note [Compile notice] around a first launch."""
    stream = sys.stderr
    isatty = getattr(stream, "isatty", None)
    if _compile_notice_shown.is_set() or isatty is None or not isatty():
        yield
        return
    timer = threading.Timer(COMPILE_NOTICE_SECONDS, _show_compile_notice, (stream,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


# Note [Bound host launches]
# A plan's step on the CPU launches the same kernel with the same tables, scratch and counts
# every call; only its source and target arrays change. ``HostLaunches`` keeps, per kernel
# and template values, one launch context with those other arguments set once, and sets the
# two arrays per call: setting an external array costs ~2 us of Python (its address through
# ``ndarray.ctypes`` and the setter), a small call set five (measured). Reusing a context is
# sound on the CPU only: Taichi's CPU launcher reads a host array's address from the context
# and writes nothing back (``runtime/cpu/kernel_launcher.cpp``), while it rewrites the
# context of a Taichi ndarray, and the CUDA launcher its argument buffer (Note [Prepared
# launches]). An argument after the first two is set again whenever it is not the object
# set last, so a grown scratch buffer (a new view) is rebound.
#
# A binding holds no reference to the Taichi program (``prog``, or a bound method of it such
# as ``prog.launch_kernel``): bindings outlive their runtime (plans of an old runtime are
# let go at the new runtime's first call), and a program kept alive past ``ti.init`` /
# ``ti.reset`` is destroyed later, under the new one, which corrupts memory (reproduced:
# tests/engine/test_device_path.py followed by tests/runtime/test_field_kinds.py on the CPU
# segfaulted in a later kernel launch, 2 runs of 2; holding the launch context or the
# compiled kernel across the reset did not, 2 of 2 each).


class _HostBinding:
    def __init__(self, prepared: _PreparedKernel, args: tuple[Any, ...]) -> None:
        self._setters = prepared._setters
        self._context = prepared._kernel.make_launch_context()
        self._compiled = prepared._compiled
        self._bound: list[Any] = [None] * len(self._setters)

    def __call__(self, args: tuple[Any, ...]) -> None:
        context, bound = self._context, self._bound
        for i, (position, slot, how) in enumerate(self._setters):
            value = args[position]
            if position > 1 and bound[i] is value:
                continue
            bound[i] = value if position > 1 else None
            if how == "int":
                context.set_arg_int((slot,), int(value))
            elif how == "float":
                context.set_arg_float((slot,), float(value))
            else:
                shape = value.shape[: value.ndim - how] if how else value.shape
                context.set_arg_external_array_with_shape(
                    (slot,), value.ctypes.data, value.nbytes, shape, 0
                )
        impl.get_runtime().prog.launch_kernel(self._compiled, context)


class HostLaunches:
    """:func:`launch` for a caller whose kernels always take C-contiguous NumPy arrays of
    the same dtypes and ranks (a step of a prepared plan on the CPU): per kernel and
    template values, the prepared launch is looked up once, and on the CPU its arguments
    after the source and the target (the first two, which change per call) stay set while
    they are the same objects (Note [Bound host launches]). Those arguments must be the
    caller's own objects, never changed in place. Valid for the runtime it was made in."""

    def __init__(self) -> None:
        self._bindings: dict[tuple[Any, ...], _HostBinding | _PreparedKernel] = {}
        self._on_cpu = current_config().arch.name in ("x64", "arm64")

    def __call__(self, kernel: Any, *args: Any) -> None:
        key = (kernel, *(args[i] for i in _template_positions(kernel)))
        binding = self._bindings.get(key)
        runtime = impl.get_runtime()
        if binding is None or runtime.target_tape is not None or runtime.fwd_mode_manager:
            found = launch(kernel, *args)
            if found is not None:
                self._bindings[key] = _HostBinding(found, args) if self._on_cpu else found
        else:
            binding(args)


# Note [Recorded launches]
# A repeated small call is mostly Python around its launches (a tiny resize: ~19 us of
# tiinterp's own against ~5 us of Taichi's launch, measured): reshaping views, choosing store
# forms, looking up the prepared kernel, reading array addresses. A recording runs a call's
# steps once with a :class:`LaunchRecorder` as their launcher and keeps, per launch, its own
# launch context with every argument set, and the list of arguments that lie in the call's
# source or result (by address: a view of either is its base address plus an offset). A
# replay sets just those, from the new call's addresses, and launches the compiled kernels
# in order. Everything else a recording holds (tables, intermediates, scratch) is its own
# and stays set: replays of one recording must not run at once (tiinterp's calls are
# serialised). The views a step chose depend on the addresses' alignment (store forms,
# half-vector loads), so a recording is valid only for source and result addresses with the
# same remainders as the recorded ones (the caller keys recordings by them). As for bound
# host launches (Note [Bound host launches]), a recording holds no reference to the Taichi
# program, is valid only on the CPU and in the runtime that compiled it, and is not used
# under ``ti.ad.Tape`` or forward-mode AD (the replay then says no, and the call takes the
# full path, which Taichi records). A launch of a kernel compiled ahead (a kernel set:
# ``_compiled/``) is recorded too (``LaunchRecorder.record_native``): its own argument
# buffer, packed once, whose per-call array addresses a replay writes in.


class LaunchRecorder:
    """A launcher (as :class:`HostLaunches`) that runs every launch by :func:`launch` and
    records it; ``launches`` is None once one could not be recorded."""

    def __init__(self) -> None:
        self.launches: list[tuple[_PreparedKernel, tuple[Any, ...], bool]] | None = []

    def __call__(self, kernel: Any, *args: Any) -> None:
        launch(kernel, *args)
        if self.launches is None:
            return
        prepared = _prepared_kernels.get(_launch_key(kernel, args))
        if prepared is None or any(isinstance(a, Ndarray) for a in args):
            self.launches = None
            return
        # Inside launch_with_vector_types the option is off (Note [Vector types under any
        # options]); a backend that recompiles under changed options needs it off again at
        # every replay.
        vector_types = not impl.get_runtime().prog.config().real_matrix_scalarize
        self.launches.append((prepared, args, vector_types and _RECOMPILES_FOR_NEW_OPTIONS))

    def record_native(self, native: Any, args: tuple[Any, ...]) -> None:
        """Run and record a launch of a kernel compiled ahead (``_compiled/library.py``'s
        ``NativeKernel``: ``native(args)`` runs it, ``native.bind(args)`` makes a launch of
        it with a buffer of its own, whose array addresses can be set again)."""
        native(args)
        if self.launches is not None:
            self.launches.append((native, args, False))


class RecordedLaunches:
    """The launches a :class:`LaunchRecorder` recorded, replayed on new per-call arrays
    (Note [Recorded launches]). ``bases``: the ``(address, nbytes)`` of each per-call array
    of the recorded call, in the order a replay gives their new addresses. ``held_bytes``:
    the bytes of the other arrays, which the recording keeps."""

    __slots__ = ("_held", "_launches", "held_bytes")

    def __init__(self, recorder: LaunchRecorder, bases: tuple[tuple[int, int], ...]) -> None:
        if recorder.launches is None:
            raise ValueError("a recording of launches that could not all be recorded")
        self._launches: list[tuple[Any, Any, tuple[list[Any], ...], bool]] = []
        self._held: list[Any] = []
        self.held_bytes = 0
        for prepared, args, vector_types in recorder.launches:
            if not isinstance(prepared, _PreparedKernel):
                self._launches.append(self._native(prepared.bind(args), bases))
                continue
            context = prepared._kernel.make_launch_context()
            per_call = []
            for position, slot, how in prepared._setters:
                value, index = args[position], (slot,)
                if how == "int":
                    context.set_arg_int(index, int(value))
                    continue
                if how == "float":
                    context.set_arg_float(index, float(value))
                    continue
                shape = tuple(value.shape)
                shape = shape[: len(shape) - how] if how else shape
                address, nbytes = int(value.ctypes.data), int(value.nbytes)
                role = next(
                    (k for k, (base, size) in enumerate(bases) if base <= address < base + size),
                    None,
                )
                context.set_arg_external_array_with_shape(index, address, nbytes, shape, 0)
                if role is None:
                    self._held.append(value)
                    self.held_bytes += nbytes
                else:
                    # The address last set is kept: a replay on the same arrays, or on new
                    # ones NumPy placed at the same address, sets nothing (~1.2 us each).
                    per_call.append([index, role, address - bases[role][0], nbytes, shape, address])
            self._launches.append((prepared._compiled, context, tuple(per_call), vector_types))

    def __call__(self, addresses: tuple[int, ...]) -> bool:
        """Replay on the per-call arrays at ``addresses``; False (nothing run) where a
        replay would not be seen by Taichi's autodiff."""
        runtime = impl.get_runtime()
        if runtime.target_tape is not None or runtime.fwd_mode_manager:
            return False
        prog = runtime.prog
        for compiled, context, per_call, vector_types in self._launches:
            if context is None:  # a kernel compiled ahead: ``compiled`` is its binding
                for argument in per_call:
                    address = addresses[argument[1]] + argument[2]
                    if address != argument[3]:
                        compiled.set_address(argument[0], address)
                        argument[3] = address
                compiled()
                continue
            for argument in per_call:
                address = addresses[argument[1]] + argument[2]
                if address != argument[5]:
                    context.set_arg_external_array_with_shape(
                        argument[0], address, argument[3], argument[4], 0
                    )
                    argument[5] = address
            if not vector_types:
                prog.launch_kernel(compiled, context)
                continue
            config = prog.config()
            scalarize = config.real_matrix_scalarize
            config.real_matrix_scalarize = False
            try:
                prog.launch_kernel(compiled, context)
            finally:
                config.real_matrix_scalarize = scalarize
        return True

    def _native(
        self, binding: Any, bases: tuple[tuple[int, int], ...]
    ) -> tuple[Any, None, tuple[list[Any], ...], bool]:
        """A launch of a kernel compiled ahead, as the entries of ``_launches``: its
        binding, no context, and its per-call arrays ``[field, role, offset, address]``."""
        per_call = []
        for field, value in binding.arrays:
            address = int(value.ctypes.data)
            role = next(
                (k for k, (base, size) in enumerate(bases) if base <= address < base + size),
                None,
            )
            if role is None:
                self._held.append(value)
                self.held_bytes += int(value.nbytes)
            else:
                per_call.append([field, role, address - bases[role][0], address])
        return (binding, None, tuple(per_call), False)


def index_offset(value: Any) -> tuple[int, ...]:
    """The first index of each axis: a field's ``offset=`` (zeros without one), zeros for
    an ndarray. Taichi stores no offset as ``()``."""
    offset = tuple(value.snode.ptr.offset) if isinstance(value, Field) else ()
    return offset or (0,) * len(value.shape)


def has_offset(value: Any) -> bool:
    return any(index_offset(value))


def memory_view(address: int, dtype: Any, shape: tuple[int, ...]) -> Any:
    """A NumPy array of ``shape`` over the host memory at ``address`` (not owned: valid
    while the Taichi data there lives)."""
    import numpy as np

    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if nbytes == 0:
        return np.empty(shape, dtype)
    memory = (ctypes.c_char * nbytes).from_address(address)
    return np.frombuffer(memoryview(memory).cast("B"), dtype).reshape(shape)


def host_view(array: Any, dtype: Any, shape: tuple[int, ...] | None = None) -> Any:
    """A NumPy array over a CPU-arch Taichi ndarray's own memory (no copy): Taichi keeps
    ndarrays on the CPU in host memory, 64-byte aligned, elements' components last.
    ``shape``: the index shape and then the element's (default: a scalar ndarray's shape)."""
    address = int(impl.get_runtime().prog.get_ndarray_data_ptr_as_int(array.arr))
    return memory_view(address, dtype, tuple(array.shape) if shape is None else shape)


@contextlib.contextmanager
def taichi_log_level(level):
    """Taichi's log level set to ``level`` for the block, then restored."""
    levels = (ti.TRACE, ti.DEBUG, ti.INFO, ti.WARN, ti.ERROR, ti.CRITICAL)
    previous = next((lv for lv in levels if ti._logging.is_logging_effective(lv)), ti.INFO)
    ti.set_logging_level(level)
    try:
        yield
    finally:
        ti.set_logging_level(previous)


def autodiff_active() -> bool:
    """Whether Taichi records launches for autodiff now (``ti.ad.Tape``, forward mode)."""
    runtime = impl.get_runtime()
    return runtime.target_tape is not None or bool(runtime.fwd_mode_manager)


# The compile options that change a CPU kernel's code (real_matrix_scalarize aside: the SIMD
# kernels are always compiled without it, Note [Vector types under any options]).
_CODE_OPTIONS = ("fast_math", "advanced_optimization", "opt_level", "debug", "check_out_of_bound")


def compile_options() -> str:
    """The running program's arch and the options of ``_CODE_OPTIONS``, as one string: a
    kernel compiled ahead under other options would not give the JIT's bits."""
    config = current_config()
    values = [f"{name}={getattr(config, name, None)}" for name in _CODE_OPTIONS]
    return " ".join([f"arch={config.arch.name}", *values])


def backend_version() -> str:
    return ".".join(map(str, ti.__version__))


def export_ahead(module: Any, kernel: Any, args: tuple[Any, ...], name: str) -> None:
    """Add ``kernel``'s instance for ``args`` (templates and arrays as a launch passes
    them) to the AOT ``module`` (``ti.aot.Module``) under ``name``, compiled without
    ``real_matrix_scalarize`` as every launch of the SIMD kernels is. Not
    ``module.add_kernel``: Taichi 1.7.4's exports ``kernel_cpp``, the instance compiled
    *last*, another one where this instance was compiled before (``Kernel.materialize``
    returns early for a known key without setting it)."""
    produce = submodule("aot.utils").produce_injected_args_from_template
    ndarray_type = submodule("types.ndarray_type").NdarrayType
    primal = kernel._primal
    templates = _template_positions(kernel)
    named = {
        a.name: args[i]
        for i, a in enumerate(primal.arguments)
        if i in templates or isinstance(a.annotation, ndarray_type)
    }
    config = impl.get_runtime().prog.config()
    scalarize = config.real_matrix_scalarize
    config.real_matrix_scalarize = False
    try:
        key = primal.ensure_compiled(*produce(primal, named))
        module._aot_builder.add(name, primal.compiled_kernels[key])
    finally:
        config.real_matrix_scalarize = scalarize
    module._kernels.append(primal)
    module._content.append("kernel:" + name)


def argument_kinds(kernel: Any) -> list[tuple[str, str]]:
    """``(name, kind)`` of each argument of ``kernel``, kind ``"template"``, ``"ndarray"``
    or ``"scalar"``."""
    ndarray_type = submodule("types.ndarray_type").NdarrayType
    templates = _template_positions(kernel)
    return [
        (
            a.name,
            "template"
            if i in templates
            else "ndarray"
            if isinstance(a.annotation, ndarray_type)
            else "scalar",
        )
        for i, a in enumerate(kernel._primal.arguments)
    ]


def program_started() -> bool:
    return impl.get_runtime().prog is not None


def current_config():
    return impl.current_cfg()


def cpu_threads() -> int:
    """The threads of the running Taichi CPU runtime's pool."""
    return max(1, int(current_config().cpu_max_num_threads))


def materialize() -> None:
    """Build Taichi's runtime now, on this thread: Taichi's CPU backend asserts that its
    runtime structures are built on the thread that called ``ti.init``."""
    impl.get_runtime().materialize()


def inside_tape() -> bool:
    return impl.get_runtime().target_tape is not None


# Taichi's C++ Program counts its live instances and refuses a second one ("Only one
# instance at a time"); taichi 1.7.4 exports the counter, taichi-forge's stripped library
# does not.
_INSTANCE_COUNTER = "_ZN6taichi4lang7Program14num_instances_E"


def _instance_counter() -> ctypes.c_int | None:
    try:
        return ctypes.c_int.in_dll(ctypes.CDLL(impl._ti_core.__file__), _INSTANCE_COUNTER)
    except (AttributeError, OSError, ValueError):
        return None


def can_abandon_runtime() -> bool:
    return _instance_counter() is not None


def keep_runtime_forever(runtime: Any) -> None:
    """Never destroy ``runtime``'s C++ program, not even at interpreter exit: for a runtime
    inherited across ``fork()``, whose destructor waits for worker threads that do not
    exist in the child (measured: a forked child of a Taichi program hangs in
    ``sys.exit``)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(runtime.prog))


def detach_runtime() -> None:
    """Make the current runtime no longer Taichi's, without finalising it (Taichi's
    ``ti.reset`` but for the finalisation): the kernels are reset for recompilation."""
    detached = impl.get_runtime()
    impl.pytaichi = impl.PyTaichi(detached.kernels)
    for kernel in detached.kernels:
        kernel.reset()
    impl._ti_core.reset_default_compile_config()


def abandon_runtime() -> None:
    """Give up the current runtime (kept for ever by :func:`keep_runtime_forever`) so that
    ``ti.init`` can start a new one in this process. Raises RuntimeError where the backend
    does not allow a second runtime."""
    counter = _instance_counter()
    if counter is None:
        raise RuntimeError(f"{BACKEND} does not allow a second runtime in one process")
    detach_runtime()
    counter.value = 0


__all__ = [
    "BACKEND",
    "BACKENDS",
    "Field",
    "Ndarray",
    "ScalarField",
    "ScalarNdarray",
    "abandon_runtime",
    "argument_kinds",
    "autodiff_active",
    "backend_version",
    "can_abandon_runtime",
    "compile_options",
    "current_config",
    "detach_runtime",
    "export_ahead",
    "has_offset",
    "host_view",
    "impl",
    "index_offset",
    "inside_tape",
    "is_arch_supported",
    "is_stale",
    "keep_runtime_forever",
    "launch",
    "mark_runtime_inherited",
    "materialize",
    "memory_view",
    "program_started",
    "require_current",
    "runtime_generation",
    "submodule",
    "taichi_lines_off_stdout",
    "taichi_log_level",
    "template_positions",
    "ti",
    "verbose",
]
