"""The filters as ``ti.func``: value and slope of each, for kernels that compute weights on
the device (``funcs`` samplers, ``grid_sample``, ``scale_and_translate``'s autodiff).
:data:`DEVICE_FORMS` holds them under the names of the one table of filters,
``_rules/filters.py``'s ``FORMULAS`` (whose NumPy forms build the resize tap tables), for
each entry of it that has a Taichi form: Taichi's forms live here, a part above ``_rules``.
``tests/rules/test_filter_forms.py`` holds each to its entry's NumPy forms. The formulas and
the references they match are in ``docs/semantics.md``.
"""

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._rules.filters import FORMULAS, JAX_LANCZOS_CUT, KEYS_A_PIL, KEYS_A_PYTORCH
from .._runtime.taichi import ti


@ti.func
def clamp_index(index, extent):
    """``index`` clamped to ``[0, extent - 1]`` (per component for vectors): the border
    sample replicated."""
    return ti.min(ti.max(index, 0), extent - 1)


def float32_pair(value: float) -> tuple[float, float]:
    """``value`` as two float32-exact parts whose sum carries ~48 bits."""
    high = float(np.float32(value))
    return high, float(np.float32(value - high))


@ti.func
def constant(like, value: ti.template()):
    """``value`` in the dtype of ``like``. A bare Python float becomes a float32 constant in
    Taichi, which would cost a float64 computation half its digits."""
    high, low = ti.static(float32_pair(value))
    return like * 0.0 + high + low


# Note [Slopes at the kinks]
# Interpolation with a kinked filter (linear's tent, at every sample) has no derivative with
# respect to the point where the point sits on a sample; tiinterp gives the one that
# floor-based interpolation defines, the slope towards the next sample up: with ``i =
# floor(x)``, ``t = x - i``, the value ``(1 - t) f[i] + t f[i + 1]`` has slope ``f[i + 1] -
# f[i]`` for every ``t`` in ``[0, 1)``, ``t = 0`` included. PyTorch's ``grid_sample``
# backward and DiffTaichi's hand-written bilinear give it too. ``ti.ad`` differentiates a
# formula by the branch it takes, so the formula must take the right one there: the tent
# written as ``max(0, 1 - |x|)`` gave ``|x|`` the slope 0 at ``x = 0`` and ``max`` its
# second argument's at the tie, so on a constant field of 5 the slope came out 5, not 0.
# So linear's two weights are written ``1 - t`` and ``t`` (tent_weights), never the tent;
# the smooth filters (Keys' cubic, lanczos, the B-spline) have one slope at their joins.
# Where a coordinate is clipped to an end (grid_sample's border and reflection padding) the
# slope is PyTorch's: 0 at and past the end (grid.py's _clip).


@ti.func
def tent_weights(t):
    """The two tent weights of taps ``floor(x)`` and ``floor(x) + 1`` at ``t = x -
    floor(x)``: ``(1 - t, t)``, whose ``ti.ad`` slopes, ``(-1, 1)``, are the floor-based ones
    at ``t = 0`` too (Note [Slopes at the kinks])."""
    return ti.Vector([1.0 - t, t])


@ti.func
def triangle(x):
    """The tent ``max(0, 1 - |x|)`` (as ``_rules.filters.triangle``), for the weights that
    ``ti.ad`` differentiates only away from the kinks or as JAX does (``scale_and_translate``'s
    autodiff); an interpolator's two weights are :func:`tent_weights`."""
    return ti.max(0.0, 1.0 - ti.abs(x))


@ti.func
def cubic_bspline(x):
    """The cubic B-spline ``beta3`` (as ``_rules.filters.cubic_bspline``): ``2/3 - x^2 + |x|^3 /
    2`` on ``|x| < 1``, ``(2 - |x|)^3 / 6`` on ``1 <= |x| < 2``, else 0."""
    x = ti.abs(x)
    outer = ti.max(2.0 - x, 0.0)
    inner = constant(x, 2.0 / 3.0) - x * x + 0.5 * x * x * x
    return ti.select(x < 1.0, inner, outer * outer * outer / 6.0)


@ti.func
def keys_cubic(x, a: ti.template()):
    """Keys' cubic convolution kernel (Keys 1981) with parameter ``a``, in PyTorch's Horner
    order (as ``_rules.filters.keys_cubic``)."""
    x = ti.abs(x)
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    outer = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return ti.select(x <= 1.0, inner, ti.select(x < 2.0, outer, 0.0))


@ti.func
def keys_cubic_slope(x, a: ti.template()):
    """``d keys_cubic / dx`` at a signed ``x``."""
    s = ti.select(x < 0, -1.0, 1.0)
    x = ti.abs(x)
    inner = (3.0 * (a + 2.0) * x - 2.0 * (a + 3.0)) * x
    outer = (3.0 * a * x - 10.0 * a) * x + 8.0 * a
    return s * ti.select(x <= 1.0, inner, ti.select(x < 2.0, outer, 0.0))


# sin(theta) = sum_n (-1)^n theta^(2n+1) / (2n+1)!; ten terms reach double precision for
# |theta| <= pi / 2 (the next term is below 3e-16).
_SIN_TAYLOR = tuple((-1) ** n / math.factorial(2 * n + 1) for n in range(10))


@ti.func
def sin_pi(x):
    """``sin(pi * x)`` from a polynomial: Vulkan and Metal have no float64 ``sin``."""
    k = ti.floor(x + 0.5)
    theta = constant(x, math.pi) * (x - k)
    theta2 = theta * theta
    series = constant(x, _SIN_TAYLOR[9])
    for n in ti.static(range(8, -1, -1)):
        series = series * theta2 + constant(x, _SIN_TAYLOR[n])
    return ti.select(ti.cast(k, ti.i32) % 2 == 0, 1.0, -1.0) * theta * series


@ti.func
def lanczos(x, radius: ti.template()):
    """``sinc(x) sinc(x / radius)`` for ``|x| < radius``, else 0."""
    # = radius sin(pi x) sin(pi x / radius) / (pi x)^2. Near 0 the quotient is 0/0 for
    # autodiff too, so evaluate it at a safe x and use the Taylor series there:
    # 1 - (pi x)^2 (1 + 1/radius^2) / 6.
    pi = constant(x, math.pi)
    small = ti.abs(x) < 1e-3
    safe = ti.select(small, 1.0, x)
    exact = radius * sin_pi(safe) * sin_pi(safe / radius) / (pi * safe) ** 2
    series = 1.0 - (pi * x) ** 2 * constant(x, (radius * radius + 1.0) / (6.0 * radius * radius))
    return ti.select(ti.abs(x) < radius, ti.select(small, series, exact), 0.0)


@ti.func
def lanczos_jax(x, radius: ti.template()):
    """JAX's lanczos (as ``_rules.filters.lanczos_jax``): 1 up to ``|x| = 1e-3`` (a flat top,
    slope 0), the true one beyond."""
    return ti.select(ti.abs(x) <= constant(x, JAX_LANCZOS_CUT), 1.0, lanczos(x, radius))


@ti.func
def keys_cubic_pytorch(x):
    """Keys' cubic with PyTorch's (and OpenCV's) ``A = -0.75``: ``bicubic`` without antialias."""
    return keys_cubic(x, KEYS_A_PYTORCH)


@ti.func
def keys_cubic_pytorch_slope(x):
    """``d keys_cubic_pytorch / dx`` at a signed ``x``."""
    return keys_cubic_slope(x, KEYS_A_PYTORCH)


@ti.func
def keys_cubic_jax(x):
    """Keys' cubic with ``A = -0.5`` in PyTorch's order, as JAX's ``scale_and_translate``
    writes it."""
    return keys_cubic(x, KEYS_A_PIL)


def _with_radius(form: Any, radius: int) -> Any:
    """``form(x, radius)`` as a ``ti.func`` of ``x`` alone (``radius`` a compile-time
    constant, as a template argument is)."""

    @ti.func
    def weight(x):
        return form(x, radius)

    return weight


@dataclass(frozen=True)
class DeviceForm:
    """The Taichi forms of one entry of ``_rules/filters.py``'s ``FORMULAS``: ``weight`` and
    ``slope`` are ``ti.func`` of a signed ``x`` computing that entry's ``weight`` and
    ``slope`` (``slope`` None where no kernel needs it: ``ti.ad`` differentiates the
    weight where a kernel needs a slope of it without one)."""

    weight: Any
    slope: Any = None


# One entry per FORMULAS entry whose ``device`` is set, under its name, and no other
# (tests/rules/test_filter_forms.py checks both ways). grid.py still calls keys_cubic and
# keys_cubic_slope with KEYS_A_PYTORCH itself: the same functions as keys_pytorch's forms.
DEVICE_FORMS: dict[str, DeviceForm] = {
    "triangle": DeviceForm(triangle),
    "keys_pytorch": DeviceForm(keys_cubic_pytorch, keys_cubic_pytorch_slope),
    "keys_jax": DeviceForm(keys_cubic_jax),
    "cubic_bspline": DeviceForm(cubic_bspline),
    "lanczos3": DeviceForm(_with_radius(lanczos, FORMULAS["lanczos3"].radius)),
    "lanczos3_jax": DeviceForm(_with_radius(lanczos_jax, FORMULAS["lanczos3_jax"].radius)),
    "lanczos5_jax": DeviceForm(_with_radius(lanczos_jax, FORMULAS["lanczos5_jax"].radius)),
}
