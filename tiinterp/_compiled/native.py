"""Which launches go to the kernel set: a launcher (as ``_runtime/taichi.py``'s ``launch``)
that runs a SIMD kernel's launch natively where the set for this process holds its form and
template values, and hands every other launch to the launcher it wraps (the JIT).

Only the CPU path uses it (``_engine/cpu_path.py``: the CPU arch, host arrays), and only
outside Taichi's autodiff (a native launch is not on a ``ti.ad.Tape``). The set is looked up
once per Taichi runtime (its key holds the runtime's thread count and compile options:
:func:`identity`), and again after :func:`look_again` (``tiinterp.warmup`` calls it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._kernels.simd import kernel_form
from .._runtime.taichi import (
    BACKEND,
    RuntimeWatch,
    autodiff_active,
    backend_version,
    compile_options,
    cpu_threads,
    template_positions,
)
from . import library


def identity() -> dict:
    """What the running Taichi CPU runtime needs of a set (``library.set_identity``)."""
    return library.set_identity(BACKEND, backend_version(), cpu_threads(), compile_options())


def launch_key(kernel: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The key of a set's kernel for ``kernel(*args)``: its form and template values in
    order (``library.key_of``); None for a kernel that is not a SIMD kernel."""
    form = kernel_form(kernel)
    if form is None:
        return None
    return library.key_of((*form, *(args[i] for i in sorted(template_positions(kernel)))))


class _Active:
    """The set of the current runtime, looked up at its first use in each runtime."""

    def __init__(self) -> None:
        self.watch = RuntimeWatch()
        self.kernels: library.KernelSet | None = None
        # key -> native kernel or None, per (kernel, template values): found once.
        self.found: dict[tuple[Any, ...], Any] = {}
        # While the build captures: each launch's (kernel, args), else None.
        self.captured: list[tuple[Any, tuple[Any, ...]]] | None = None

    def get(self) -> library.KernelSet | None:
        if self.watch.changed():
            self.kernels = library.kernel_set(identity())
            self.found = {}
        return self.kernels


_ACTIVE = _Active()


def active_set() -> library.KernelSet | None:
    """The kernel set this process launches from now, or None."""
    return _ACTIVE.get()


def forget_set() -> None:
    """Look for this process's set again at the next launch: one built since the last
    look is found, and one that did not match is read again."""
    library.forget()
    _ACTIVE.watch = RuntimeWatch()


def look_again() -> library.KernelSet | None:
    """:func:`forget_set`, then the set found now (Taichi started), or None."""
    forget_set()
    return active_set()


def _host_array(value: Any) -> bool:
    flags = getattr(value, "flags", None)
    if flags is not None:
        return bool(flags.c_contiguous)
    return bool(value.device.type == "cpu" and value.is_contiguous() and not value.requires_grad)


class NativeFirst:
    """A launcher: ``kernel(*args)`` natively where the active set has it (through the
    wrapped launcher's ``record_native`` if it records: ``LaunchRecorder``), else by the
    wrapped ``launcher``."""

    __slots__ = ("_launcher", "_record")

    def __init__(self, launcher: Callable[..., Any]) -> None:
        self._launcher = launcher
        self._record = getattr(launcher, "record_native", None)

    def __call__(self, kernel: Any, *args: Any) -> Any:
        active = _ACTIVE
        if active.captured is not None:
            active.captured.append((kernel, args))
        kernels = active.get()
        if kernels is None:
            return self._launcher(kernel, *args)
        key = (kernel, *(args[i] for i in template_positions(kernel)))
        native = active.found.get(key, active)
        if native is active:
            found = launch_key(kernel, args)
            native = active.found[key] = None if found is None else kernels.find(found)
        if (
            native is None
            or autodiff_active()
            or not all(_host_array(a) for a in args if hasattr(a, "shape"))
        ):
            return self._launcher(kernel, *args)
        if self._record is not None:
            self._record(native, args)
        else:
            native(args)
        return None


class capture:
    """A context in which every launch through :class:`NativeFirst` is kept in
    ``launches`` as ``(kernel, args)`` (the build's capture: ``_compiled/build.py``)."""

    def __init__(self) -> None:
        self.launches: list[tuple[Any, tuple[Any, ...]]] = []

    def __enter__(self) -> list[tuple[Any, tuple[Any, ...]]]:
        _ACTIVE.captured = self.launches
        return self.launches

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.captured = None
