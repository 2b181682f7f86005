"""tiinterp: differentiable interpolation kernels in Taichi.

Every mode has an exact forward pass matching PyTorch / JAX / burn, and a backward pass both
hand-written (deterministic, every arch) and by Taichi's ``ti.ad``. Importing tiinterp does
not initialise Taichi; the first call does (CPU by default), or :func:`init` picks the arch.
The numeric contract of every mode is ``docs/semantics.md``.

Public API (everything else is private):

- :func:`interpolate`, :func:`interpolate_backward`: resize, as ``F.interpolate``.
- :func:`grid_sample`, :func:`grid_sample_backward`: sample at points, as ``F.grid_sample``.
- :func:`interpolate_into`, :func:`grid_sample_into`: resize and warp Taichi fields and
  ndarrays, as steps of a ``ti.ad.Tape``.
- :mod:`tiinterp.funcs`: ``ti.func`` samplers for your own kernels.
- :func:`init`, :func:`available_archs`, :func:`current_arch`: the Taichi arch.
- :func:`taichi_module`: the Taichi package tiinterp runs on (``taichi`` or
  ``taichi_forge``).
- :data:`MODES`: the resize modes.
"""

from . import (
    _taichi,  # noqa: F401  (first: imports Taichi without its stdout banner)
    funcs,
)
from ._filters import MODES
from ._grid_sample import grid_sample, grid_sample_backward
from ._pipeline import grid_sample_into, interpolate_into
from ._resize import interpolate, interpolate_backward
from ._runtime import available_archs, current_arch, init, taichi_module

__version__ = "0.1.0"

__all__ = [
    "MODES",
    "available_archs",
    "current_arch",
    "funcs",
    "grid_sample",
    "grid_sample_backward",
    "grid_sample_into",
    "init",
    "interpolate",
    "interpolate_backward",
    "interpolate_into",
    "taichi_module",
]
