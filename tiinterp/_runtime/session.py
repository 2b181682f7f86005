"""Which Taichi arch tiinterp runs on, and lazy initialisation.

Nothing here runs at import time: Taichi is initialised on the first call that needs it,
either by :func:`init` or implicitly by the first kernel launch (arch ``$TIINTERP_ARCH``,
default ``"cpu"``). If the caller already initialised Taichi themselves (a Taichi pipeline),
that arch is used as it is.

Note [Taichi after fork]
------------------------
Taichi's runtime does not survive ``fork()``: its CPU thread pool's workers (and Vulkan's
queue threads) are not copied into the child, so the child's first parallel launch or
kernel compile waits for them for ever, and so does finalising the runtime (``ti.reset``,
``ti.init``). That is the hang of a PyTorch ``DataLoader`` worker (forked, the Linux
default) that resizes once the parent has called tiinterp. tiinterp therefore:

- holds its lock across ``fork()`` (``os.register_at_fork``), so that a child never
  inherits a Taichi front end stopped in the middle of another thread's call;
- in the child, keeps the inherited runtime from ever being finalised, even at exit (a
  forked child of any Taichi program otherwise hangs in ``sys.exit``), and on the first
  tiinterp call abandons it and starts a new one on the same arch with the same options
  (:func:`_restart_after_fork`), itself never finalised either. Taichi fields and
  ndarrays made before the fork belong to the inherited runtime and are refused (a
  RuntimeError that says so); the child's results are the parent's. A Taichi program's
  own kernels and fields cannot run on the inherited runtime either: in the child, call
  tiinterp (``tiinterp.init``) before Taichi.
- CUDA cannot be initialised again in a forked child (NVIDIA's rule, as in PyTorch), and
  taichi-forge does not allow a second runtime in one process: there the child's tiinterp
  calls raise a RuntimeError naming the ``"spawn"`` and ``"forkserver"`` start methods,
  never hang.
"""

import atexit
import functools
import logging
import numbers
import os
import threading
import types
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from . import fp_environment
from .archs import ARCH_NAMES
from .capabilities import archs_with, capabilities
from .cuda_threads import THREAD_CONTEXTS
from .launch_thread import LAUNCH_THREAD
from .taichi import (
    BACKEND,
    RuntimeWatch,
    abandon_runtime,
    can_abandon_runtime,
    cpu_threads,
    current_config,
    detach_runtime,
    impl,
    is_arch_supported,
    keep_runtime_forever,
    mark_runtime_inherited,
    materialize,
    program_started,
    runtime_generation,
    taichi_lines_off_stdout,
    taichi_log_level,
    ti,
    verbose,
)
from .worker_placement import marking_births, pin_started_workers

# Best first: what "auto" and "gpu" pick.
_PREFERENCE = ("cuda", "metal", "vulkan", "cpu")
_ARCH_BY_NAME = {"cpu": ti.cpu, "cuda": ti.cuda, "vulkan": ti.vulkan, "metal": ti.metal}
_NAME_BY_ARCH = {
    ti.x64: "cpu",
    ti.arm64: "cpu",
    ti.cuda: "cuda",
    ti.vulkan: "vulkan",
    ti.metal: "metal",
}

# The archs where the backend's reverse-mode autodiff of ndarrays is right.
AUTODIFF_ARCHS = archs_with(BACKEND, "ndarray_autodiff")

log = logging.getLogger("tiinterp")

# Taichi's Python front end and its compiler keep global state (the kernel being compiled,
# the current runtime), so tiinterp runs one call at a time per process: every public
# entry point holds this lock, and init() waits for the calls in flight.
_LOCK = threading.RLock()
P = ParamSpec("P")
R = TypeVar("R")


# Note [Taichi after fork]: the runtime this process inherited from its parent across
# fork(), set in the child, and the arguments of the last init() with its runtime's
# generation, so that the child starts the same configuration again.
_inherited_runtime: object | None = None
_last_init: tuple[int, str, dict[str, Any]] | None = None


def _hold_lock_across_fork() -> None:
    _LOCK.acquire()


def _release_lock_in_parent() -> None:
    _LOCK.release()


def _release_lock_in_child() -> None:
    global _inherited_runtime
    _inherited_runtime = impl.get_runtime() if program_started() else None
    if _inherited_runtime is not None:
        mark_runtime_inherited()
        keep_runtime_forever(_inherited_runtime)
        # Runs before the backend's own exit hook (atexit is last in, first out), which
        # would finalise the inherited runtime (taichi-forge does) and wait for ever.
        atexit.register(_detach_inherited_runtime_at_exit)
    _LOCK.release()


def _detach_inherited_runtime_at_exit() -> None:
    if _inherited_across_fork():
        detach_runtime()


# Windows has no fork() (nor os.register_at_fork): nothing to guard there.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_hold_lock_across_fork,
        after_in_parent=_release_lock_in_parent,
        after_in_child=_release_lock_in_child,
    )


def _inherited_across_fork() -> bool:
    return _inherited_runtime is not None and impl.get_runtime() is _inherited_runtime


def serialized(function: Callable[P, R]) -> Callable[P, R]:
    """Run ``function`` under tiinterp's process-wide lock, on CUDA with Taichi's context
    current in the calling thread (Note [Taichi's CUDA context in every thread]); on
    taichi-forge's graphics archs, from threads other than the main one, on tiinterp's
    launch thread (Note [taichi-forge's streams and threads that end])."""

    @functools.wraps(function)
    def locked(*args: P.args, **kwargs: P.kwargs) -> R:
        if LAUNCH_THREAD.archs and LAUNCH_THREAD.wanted():
            return LAUNCH_THREAD.run(functools.partial(locked, *args, **kwargs))
        with _LOCK:
            if THREAD_CONTEXTS.active:
                THREAD_CONTEXTS.ensure_current()
            return function(*args, **kwargs)

    return locked


@serialized
@functools.lru_cache(maxsize=1)
def available_archs() -> tuple[str, ...]:
    """The archs this machine can run, best first, e.g. ``("vulkan", "cpu")``.

    A GPU arch counts only when Taichi was built with it and its driver answers (a Vulkan
    instance can be created, libcuda loads, ...). Probed once per process; Taichi is not
    initialised by the probe.

    Returns
    -------
    tuple of str
        Names from ``"cuda"``, ``"metal"``, ``"vulkan"``, ``"cpu"``.

    Examples
    --------
    >>> import tiinterp
    >>> "cpu" in tiinterp.available_archs()
    True
    """
    with taichi_log_level(ti.ERROR):  # Taichi warns about every missing driver while probing
        return tuple(name for name in _PREFERENCE if is_arch_supported(_ARCH_BY_NAME[name]))


def _hardware_archs(available: tuple[str, ...]) -> list[str]:
    """The available archs that run on real hardware, best first. A Vulkan device that is a
    software rasteriser (Mesa's lavapipe, SwiftShader) runs on the CPU several times slower
    than Taichi's CPU backend (measured 7x with lavapipe), so it never counts as a GPU."""
    from .vulkan_devices import has_hardware_vulkan_device

    return [a for a in available if a != "vulkan" or has_hardware_vulkan_device()]


def _resolve(name: str) -> str:
    available = available_archs()
    if name == "auto":
        return _hardware_archs(available)[0]
    if name == "gpu":
        gpus = [a for a in _hardware_archs(available) if a != "cpu"]
        if not gpus:
            software = (
                (
                    " (Vulkan is present, but only as a software rasteriser on the CPU; "
                    "ask for arch='vulkan' to use it anyway)"
                )
                if "vulkan" in available
                else ""
            )
            raise RuntimeError(
                f"arch 'gpu': no GPU arch is available on this machine "
                f"(available: {', '.join(available)}){software}; use "
                "arch='auto' to fall back to the CPU"
            )
        return gpus[0]
    if name not in available:
        raise RuntimeError(
            f"arch {name!r} is not available on this machine (available: "
            f"{', '.join(available)}); use arch='auto' to take the best one"
        )
    return name


# Default types that tiinterp's kernels cannot compile under (measured on taichi 1.7.4):
# default_ip=ti.i64 fails Taichi's type check in nearest and nearest-exact ("[type_check.cpp]
# Assertion failure"); default_fp=ti.f16 aborts the process in grid_sample (SIGABRT) and
# fails its backward ("[alg_simp.cpp:get_inverse@79] Not supported").
def _unsupported_defaults(default_ip: Any, default_fp: Any) -> str | None:
    """Which default type Taichi was (or would be) started with that tiinterp refuses."""
    if default_ip is not None and default_ip != ti.i32:
        return f"default_ip: expected ti.i32 (Taichi's default), got {default_ip}"
    if default_fp is not None and default_fp == ti.f16:
        return f"default_fp: expected ti.f32 or ti.f64, got {default_fp}"
    return None


def _check_taichi_options(options: dict) -> None:
    """Options Taichi would accept and then abort the process on, or fail tiinterp's
    kernels under."""
    threads = options.get("cpu_max_num_threads")
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1
    ):
        raise ValueError(f"cpu_max_num_threads: expected a positive int, got {threads!r}")
    problem = _unsupported_defaults(options.get("default_ip"), options.get("default_fp"))
    if problem is not None:
        raise ValueError(f"{problem}: tiinterp's kernels do not compile under it")


_checked_generation: int | None = None


def _check_callers_taichi() -> None:
    """Taichi started by the caller's own ``ti.init``: refuse the default types tiinterp's
    kernels fail under (checked once per runtime)."""
    global _checked_generation
    generation = runtime_generation()
    if generation == _checked_generation:
        return
    config = current_config()
    problem = _unsupported_defaults(config.default_ip, config.default_fp)
    if problem is not None:
        raise RuntimeError(
            f"Taichi was started with {problem}, and tiinterp's kernels do not compile under "
            "it; start Taichi without that option (ti.init(..., default_ip=ti.i32)), or let "
            "tiinterp.init start it"
        )
    _checked_generation = generation


@serialized
def init(arch: str = "cpu", **taichi_options: Any) -> str:
    """Initialise (or re-initialise) Taichi for tiinterp on ``arch``.

    Optional: the first call that needs Taichi initialises ``$TIINTERP_ARCH`` (default
    ``"cpu"``), and Taichi initialised by the caller is used as it is. Calling ``init``
    again switches arch: Taichi is reset, and every Taichi field and ndarray created before
    becomes invalid, as with ``ti.init`` (passing such a stale one to tiinterp raises a
    ``RuntimeError``). ``init`` waits for tiinterp calls running in other threads.
    Taichi starts quietly: no start-up line on stdout, log level ``"error"`` unless
    ``log_level`` is given or ``TIINTERP_VERBOSE=1`` is set.

    Parameters
    ----------
    arch : {"cpu", "cuda", "vulkan", "metal", "gpu", "auto"}
        ``"gpu"``: the best GPU arch present; ``"auto"``: the best arch present, the CPU if
        there is no GPU. A software Vulkan device (Mesa's lavapipe) counts for neither, only
        when asked for by name.
    **taichi_options
        Passed to ``ti.init`` unchanged, for example ``cpu_max_num_threads=2``. On the CPU,
        ``real_matrix_scalarize=False`` is tiinterp's SIMD configuration: the resize
        kernels compile to SIMD code and run several times faster, but Taichi 1.7.4
        miscompiles vector/matrix fields and ``ti.ad`` through ``ti.Vector`` values under
        it (the ``tiinterp.funcs`` samplers refuse those there); see the Archs guide.

    Returns
    -------
    str
        The arch Taichi runs on now.

    Raises
    ------
    TypeError
        A non-str ``arch`` or an option ``ti.init`` does not know.
    ValueError
        An unknown arch name or an invalid option value.
    RuntimeError
        An arch this machine lacks (the message names the available ones: there is no
        silent fallback).

    Examples
    --------
    >>> import tiinterp
    >>> tiinterp.init("cpu", cpu_max_num_threads=2)
    'cpu'
    """
    if not isinstance(arch, str):
        raise TypeError(f"arch: expected a str, one of {ARCH_NAMES}, got {type(arch).__name__}")
    name = arch.strip().lower()
    if name not in ARCH_NAMES:
        raise ValueError(f"arch: expected one of {ARCH_NAMES}, got {arch!r}")
    _check_taichi_options(taichi_options)
    chosen = _resolve(name)
    forked = _inherited_across_fork()
    if forked:
        _abandon_inherited_runtime()
    taichi_options.setdefault("offline_cache", True)
    if not verbose():
        taichi_options.setdefault("log_level", ti.ERROR)
    try:
        # Note [Subnormals and the caller's floating-point state]: the caller's modes are kept.
        # Note [Workers on their own CPUs]: Taichi's threads are the ones born here.
        with taichi_lines_off_stdout(), fp_environment.preserved(), marking_births() as births:
            ti.init(arch=_ARCH_BY_NAME[chosen], **taichi_options)
    except KeyError as error:  # Taichi's answer to an unknown option
        raise TypeError(f"init: {error.args[0] if error.args else error}") from None
    materialize()
    if chosen == "cpu":
        pin_started_workers(births, cpu_threads())  # Note [Workers on their own CPUs]
    if forked:
        # Note [Taichi after fork]: tearing down a runtime started in a forked child
        # crashes at exit on Vulkan (measured: SIGSEGV under lavapipe); the OS frees it.
        keep_runtime_forever(impl.get_runtime())
    started = _NAME_BY_ARCH.get(current_config().arch)
    if started != chosen:
        ti.reset()
        raise RuntimeError(f"arch {chosen!r}: Taichi started on {started!r} instead")
    _track_cuda_contexts(chosen)
    if name in ("auto", "gpu"):
        log.info("tiinterp: arch=%r picked %r", name, chosen)
    global _last_init
    _last_init = (runtime_generation(), chosen, dict(taichi_options))
    return chosen


def _abandon_inherited_runtime() -> None:
    """Note [Taichi after fork]: leave the runtime inherited from the parent, or say why
    this child cannot."""
    arch = _NAME_BY_ARCH.get(current_config().arch, "?")
    if arch == "cuda":
        why = "CUDA cannot be initialised again in a forked child"
    elif not can_abandon_runtime():
        why = f"{BACKEND} cannot start a second Taichi runtime in one process"
    else:
        abandon_runtime()
        return
    raise RuntimeError(
        f"tiinterp: this process was forked after its parent had started Taichi on {arch!r}, "
        f"and {why}; start worker processes with the 'spawn' or 'forkserver' method "
        "(multiprocessing.get_context('spawn'), DataLoader(..., "
        "multiprocessing_context='spawn')), or call tiinterp in the parent only after forking"
    )


def _restart_after_fork() -> None:
    """Note [Taichi after fork]: start again, in this forked child, the configuration the
    parent ran: the arguments of its last ``init``, or the arch and SIMD setting of the
    parent's own ``ti.init``."""
    if _last_init is not None and _last_init[0] == runtime_generation():
        _, arch, options = _last_init
    else:
        config = current_config()
        arch = _NAME_BY_ARCH.get(config.arch, "cpu")
        options = {"real_matrix_scalarize": config.real_matrix_scalarize}
    init(arch, **options)


def _track_cuda_contexts(arch: str) -> None:
    """Note [Taichi's CUDA context in every thread]: on CUDA, from now on every entry point
    makes the context current where a thread has none, starting with this one."""
    if arch == "cuda":
        THREAD_CONTEXTS.activate()
        THREAD_CONTEXTS.ensure_current()
    else:
        THREAD_CONTEXTS.deactivate()


def ensure_initialized() -> None:
    """Initialise Taichi on ``$TIINTERP_ARCH`` (default ``"cpu"``) if nobody has yet, or
    again in a forked child (Note [Taichi after fork]); on CUDA, with Taichi's context
    current in this thread, Taichi started by the caller included."""
    if _inherited_across_fork():
        _restart_after_fork()
    elif not program_started():
        init(os.environ.get("TIINTERP_ARCH", "cpu"))
    else:
        _check_callers_taichi()
        if not THREAD_CONTEXTS.active and current_config().arch == ti.cuda:
            _track_cuda_contexts("cuda")


@serialized
def current_arch() -> str:
    """The arch Taichi runs on now, as a name such as ``"cpu"``.

    Initialises Taichi on ``$TIINTERP_ARCH`` (default ``"cpu"``) if nothing has yet.

    Returns
    -------
    str
        ``"cpu"``, ``"cuda"``, ``"vulkan"`` or ``"metal"``.

    Examples
    --------
    >>> import tiinterp
    >>> tiinterp.init("cpu")
    'cpu'
    >>> tiinterp.current_arch()
    'cpu'
    """
    ensure_initialized()
    return running_arch()


# Note [Where a call starts Taichi]
# Every operation starts Taichi in one place, start_taichi, between its two kinds of checks:
# first everything that needs no Taichi (types, shapes, options, ``out``), so that a refused
# call leaves the process as it was, whatever its dtype; then Taichi is started (on
# ``$TIINTERP_ARCH`` if nobody has started it, again in a forked child, with CUDA's context
# made current in this thread); then the checks that need the arch (float64 on a device
# without it); then the plan and the launches. Below that point code reads the arch with
# running_arch, which never starts Taichi: the public current_arch does, for users.


# The arch that start_taichi found for the runtime it last saw: a runtime already started
# and checked needs nothing more per call (~0.2 us against ~4, measured), except on CUDA,
# whose context is made current per thread.
_STARTED = RuntimeWatch()
_started_arch: list[str | None] = [None]


def start_taichi(dtype_name: str | None = None, name: str = "input") -> str:
    """Start Taichi for a checked call (Note [Where a call starts Taichi]), refuse an array
    ``name`` of ``dtype_name`` that the arch cannot compute in, and return the arch's name."""
    arch = _started_arch[0]
    if arch is None or arch == "cuda" or _STARTED.changed() or not program_started():
        _started_arch[0] = None
        ensure_initialized()
        arch = running_arch()
        _STARTED.changed()  # the runtime ensure_initialized left, seen now
        _started_arch[0] = arch
    if dtype_name is not None:
        require_dtype_support(dtype_name, name)
    return arch


def running_arch() -> str:
    """The name of the arch Taichi runs on, such as ``"cpu"``; Taichi must have been started
    (by :func:`start_taichi` or the caller). Never starts it."""
    if not program_started():
        raise RuntimeError(
            "tiinterp: the arch was read before Taichi started (a call must go through "
            "start_taichi first); please report this"
        )
    arch = current_config().arch
    return _NAME_BY_ARCH.get(arch, str(arch).rsplit(".", 1)[-1])


def taichi_module() -> types.ModuleType:
    """The Taichi package tiinterp runs on: ``taichi`` (1.7.4) or its maintained fork
    ``taichi_forge``, chosen once when tiinterp is imported.

    The choice: ``$TIINTERP_TAICHI`` (``"taichi"`` or ``"taichi_forge"``) if set; else the
    one the program imported before tiinterp; else ``taichi`` if installed, else
    ``taichi_forge``. Fields, ndarrays and kernels given to tiinterp must come from this
    package (the two have separate runtimes): write your own kernels with
    ``ti = tiinterp.taichi_module()`` to work on either. Does not initialise Taichi.

    Returns
    -------
    types.ModuleType
        The ``taichi`` or ``taichi_forge`` module.

    Examples
    --------
    >>> import tiinterp
    >>> ti = tiinterp.taichi_module()
    >>> ti.__name__ in ("taichi", "taichi_forge")
    True
    """
    return ti


_float64_support: dict[int, bool] = {}


@ti.kernel
def _float64_probe(out: ti.types.ndarray(dtype=ti.f64, ndim=1)):  # type: ignore[no-untyped-def]
    """Writes 1/3 in float64; a device without 64-bit floats fails or rounds it to float32."""
    for i in out:
        out[i] = ti.f64(1.0) / ti.f64(3.0)


def supports_float64() -> bool:
    """Whether the current arch computes in 64-bit floats (probed once per Taichi runtime).

    CPU and CUDA always do; a Vulkan or Metal device only with the ``shaderFloat64``
    feature (Mesa's lavapipe has it, many phone and Apple GPUs do not).
    """
    arch = running_arch()
    if capabilities(BACKEND, arch).float64:
        return True
    key = runtime_generation()
    if key not in _float64_support:
        try:
            probe = ti.ndarray(ti.f64, (1,))
            _float64_probe(probe)
            _float64_support[key] = bool(probe.to_numpy()[0] == 1.0 / 3.0)
        except Exception:  # Taichi raises assorted errors when codegen lacks float64
            _float64_support[key] = False
    return _float64_support[key]


def simd_configuration() -> bool:
    """Whether Taichi runs on the CPU with ``real_matrix_scalarize=False``: tiinterp's SIMD
    configuration (see :func:`init`)."""
    return running_arch() == "cpu" and not current_config().real_matrix_scalarize


def refuse_simd_configuration(name: str) -> None:
    """``name``'s kernels are miscompiled by Taichi 1.7.4 in the SIMD configuration
    (measured: LLVM aborts the process); refuse clearly instead."""
    if simd_configuration():
        raise RuntimeError(
            f"{name}: not available in tiinterp's CPU SIMD configuration "
            "(real_matrix_scalarize=False), which Taichi 1.7.4 miscompiles it under; "
            "start Taichi with its default options: tiinterp.init('cpu')"
        )


def require_autodiff() -> None:
    """Refuse ``method="autodiff"`` clearly where Taichi cannot differentiate ndarrays."""
    arch = running_arch()
    if not capabilities(BACKEND, arch).ndarray_autodiff:
        raise RuntimeError(
            f"method='autodiff': {BACKEND} differentiates ndarrays only on {AUTODIFF_ARCHS}, "
            f"but tiinterp runs on {arch!r}; use method='adjoint' (the default) here"
        )


def require_dtype_support(dtype_name: str, name: str) -> None:
    if dtype_name == "float64" and not supports_float64():
        raise TypeError(
            f"{name}: expected float32 on arch {running_arch()!r}, whose device has "
            "no 64-bit float support, got float64; convert to float32 or use "
            "tiinterp.init('cpu')"
        )
