"""The harness behind ``method="autodiff"``: Taichi's ``ti.ad`` reverse mode over ndarrays.

Resize and grid_sample both record their forward as kernel launches on ndarrays that carry
gradients, seed the output's gradient and replay the launches' ``.grad`` kernels in reverse.
Taichi supports this on the CPU and CUDA only (``_runtime.session.require_autodiff``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._runtime.arrays import copy_array
from .._runtime.taichi import ti

# A kernel and the arguments of one launch of it.
Launch = tuple[Any, tuple[Any, ...]]


def differentiable(dtype: Any, shape: Sequence[int], values: Any = None) -> Any:
    """A Taichi ndarray with a zeroed gradient, holding ``values`` (any array kind of that
    shape) or zeros."""
    array = ti.ndarray(dtype, tuple(shape), needs_grad=True)
    if values is None:
        array.fill(0)
    else:
        copy_array(values, array)
    array.grad.fill(0)
    return array


def reverse(launches: Sequence[Launch], output: Any, grad_output: Any) -> None:
    """Run ``launches``, set ``output.grad = grad_output`` and run the launches' reverse:
    every ndarray they read then holds its gradient in ``.grad``."""
    for kernel, args in launches:
        kernel(*args)
    copy_array(grad_output, output.grad)
    for kernel, args in reversed(launches):
        kernel.grad(*args)
