"""tiinterp: differentiable interpolation kernels in Taichi.

Every mode has an exact forward pass matching PyTorch / JAX / burn, and a backward pass both
hand-written (deterministic, every arch) and by Taichi's ``ti.ad``. Importing tiinterp does
not initialise Taichi; the first call does (CPU by default), or :func:`init` picks the arch.
The numeric contract of every mode is ``docs/semantics.md``.

Public API (everything else is private):

- :func:`interpolate`, :func:`interpolate_backward`: resize, as ``F.interpolate``.
- :func:`scale_and_translate`, :func:`scale_and_translate_backward`: zoom and shift, as
  ``jax.image.scale_and_translate``, with gradients to the scale and the translation;
  :func:`scale_and_translate_into`: the same between Taichi data, in a ``ti.ad.Tape``.
- :func:`grid_sample`, :func:`grid_sample_backward`: sample at points, as ``F.grid_sample``.
- :func:`interpolate_into`, :func:`grid_sample_into`: resize and warp Taichi fields and
  ndarrays, as steps of a ``ti.ad.Tape``; :func:`bspline_coefficients_into`: the
  coefficients that ``funcs.sample_bspline`` reads.
- :mod:`tiinterp.funcs`: ``ti.func`` samplers for your own kernels.
- :func:`init`, :func:`available_archs`, :func:`current_arch`: the Taichi arch;
  :func:`warmup`: a mode's kernels compiled at start rather than on first use.
- :func:`taichi_module`: the Taichi package tiinterp runs on (``taichi`` or
  ``taichi_forge``).
- :data:`MODES`: the resize modes.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._rules.filters import MODES

# Note [Lazy kernel modules]
# ``import tiinterp`` imports neither Taichi nor a kernel module: each public name below is
# imported on first use. Taichi's own import takes ~0.3 s, which the command line spends
# decoding its first images in worker threads instead (Note [The command's pipeline] in
# cli/command.py), and Taichi's ``ti.func`` and ``ti.kernel`` decorators read the caller's source
# lines through ``inspect`` (about 1 ms each, measured): tiinterp defines ~190 of them, so
# the modules that only grid_sample, the Taichi pipelines, ``tiinterp.funcs`` and the GPU
# archs need are imported when they are first used, here and by local imports where a
# module reaches into one of them (the device path, the Taichi data checks). Every module
# that needs Taichi imports it through ``_runtime/taichi.py``, which keeps Taichi's banner
# off stdout.
_LAZY = {
    "available_archs": ("._runtime.session", "available_archs"),
    "bspline_coefficients_into": ("._ops.pipeline", "bspline_coefficients_into"),
    "current_arch": ("._runtime.session", "current_arch"),
    "funcs": (".funcs", None),
    "grid_sample": ("._ops.grid_sample", "grid_sample"),
    "grid_sample_backward": ("._ops.grid_sample", "grid_sample_backward"),
    "grid_sample_into": ("._ops.pipeline", "grid_sample_into"),
    "init": ("._runtime.session", "init"),
    "interpolate": ("._ops.resize", "interpolate"),
    "interpolate_backward": ("._ops.resize", "interpolate_backward"),
    "interpolate_into": ("._ops.pipeline", "interpolate_into"),
    "scale_and_translate": ("._ops.scale_translate", "scale_and_translate"),
    "scale_and_translate_backward": ("._ops.scale_translate", "scale_and_translate_backward"),
    "scale_and_translate_into": ("._ops.pipeline", "scale_and_translate_into"),
    "taichi_module": ("._runtime.session", "taichi_module"),
    "warmup": ("._ops.warmup", "warmup"),
}

if TYPE_CHECKING:
    from . import funcs
    from ._ops.grid_sample import grid_sample, grid_sample_backward
    from ._ops.pipeline import (
        bspline_coefficients_into,
        grid_sample_into,
        interpolate_into,
        scale_and_translate_into,
    )
    from ._ops.resize import interpolate, interpolate_backward
    from ._ops.scale_translate import scale_and_translate, scale_and_translate_backward
    from ._ops.warmup import warmup
    from ._runtime.session import available_archs, current_arch, init, taichi_module


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tiinterp' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name, __name__)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "MODES",
    "available_archs",
    "bspline_coefficients_into",
    "current_arch",
    "funcs",
    "grid_sample",
    "grid_sample_backward",
    "grid_sample_into",
    "init",
    "interpolate",
    "interpolate_backward",
    "interpolate_into",
    "scale_and_translate",
    "scale_and_translate_backward",
    "scale_and_translate_into",
    "taichi_module",
    "warmup",
]
