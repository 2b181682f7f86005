"""tiinterp: differentiable interpolation kernels in Taichi.

Every mode has an exact forward pass matching PyTorch / JAX / burn, and a backward pass both
hand-written (deterministic, every arch) and by Taichi's ``ti.ad``. Importing tiinterp does
not initialise Taichi; the first call does (CPU by default), or :func:`init` picks the arch.
"""
from . import _taichi  # noqa: F401  (first: imports Taichi without its stdout banner)
from . import funcs
from ._filters import MODES
from ._grid_sample import grid_sample, grid_sample_backward
from ._pipeline import interpolate_into
from ._resize import interpolate, interpolate_backward
from ._runtime import available_archs, current_arch, init

__version__ = "0.1.0"

__all__ = ["MODES", "funcs", "grid_sample", "grid_sample_backward", "available_archs", "current_arch", "init", "interpolate", "interpolate_backward",
           "interpolate_into"]
