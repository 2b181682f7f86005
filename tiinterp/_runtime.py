"""Which Taichi arch tiinterp runs on, and lazy initialisation.

Nothing here runs at import time: Taichi is initialised on the first call that needs it,
either by :func:`init` or implicitly (CPU, or ``$TIINTERP_ARCH``) by the first kernel launch.
If the caller already initialised Taichi themselves (a Taichi pipeline), that arch is used
as it is.
"""
from __future__ import annotations

import os

import taichi as ti
from taichi.lang import impl

ARCH_NAMES = ("cpu", "cuda", "vulkan", "metal", "gpu", "auto")

_ARCH_BY_NAME = {
    "cpu": ti.cpu,
    "cuda": ti.cuda,
    "vulkan": ti.vulkan,
    "metal": ti.metal,
    "gpu": ti.gpu,
}

_NAME_BY_ARCH = {
    ti.x64: "cpu",
    ti.arm64: "cpu",
    ti.cuda: "cuda",
    ti.vulkan: "vulkan",
    ti.metal: "metal",
}


def _taichi_is_initialized() -> bool:
    return impl.get_runtime().prog is not None


def init(arch: str = "cpu", **taichi_options) -> str:
    """Initialise (or re-initialise) Taichi for tiinterp on ``arch``.

    ``arch`` is one of ``"cpu"``, ``"cuda"``, ``"vulkan"``, ``"metal"``, ``"gpu"`` (any GPU
    backend Taichi finds) or ``"auto"``. Extra keyword arguments go to ``ti.init`` unchanged
    (for example ``offline_cache=False`` or ``cpu_max_num_threads=2``). Returns the name of the
    arch that Taichi actually started on.

    Calling it again resets Taichi: every Taichi field and ndarray created before becomes
    invalid, as with ``ti.init``.
    """
    if not isinstance(arch, str):
        raise TypeError(f"arch: expected a str, one of {ARCH_NAMES}, got {type(arch).__name__}")
    name = arch.strip().lower()
    if name not in ARCH_NAMES:
        raise ValueError(f"arch: expected one of {ARCH_NAMES}, got {arch!r}")
    taichi_arch = _ARCH_BY_NAME.get(name, ti.cpu)
    if name == "auto":
        taichi_arch = ti.gpu
    if name == "gpu" or name == "auto":
        ti.init(arch=taichi_arch, **taichi_options)
    else:
        # Taichi silently falls back to the CPU when a GPU arch is missing; refuse instead.
        ti.init(arch=taichi_arch, **taichi_options)
        started = current_arch()
        if started != name:
            ti.reset()
            raise RuntimeError(
                f"arch {name!r} is not available on this machine (Taichi fell back to {started!r}); "
                "use arch='auto' to take the best available one"
            )
    return current_arch()


def ensure_initialized() -> None:
    """Initialise Taichi on the default arch if nobody has yet."""
    if not _taichi_is_initialized():
        init(os.environ.get("TIINTERP_ARCH", "cpu"))


def current_arch() -> str:
    """The arch Taichi runs on now, as a name such as ``"cpu"``; initialises CPU if needed."""
    ensure_initialized()
    arch = impl.current_cfg().arch
    return _NAME_BY_ARCH.get(arch, str(arch).rsplit(".", 1)[-1])
