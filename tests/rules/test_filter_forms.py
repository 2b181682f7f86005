"""The one table of filters (``tiinterp/_rules/filters.py``'s ``FORMULAS``, the Taichi forms
in ``tiinterp/_kernels/filter_funcs.py``'s ``DEVICE_FORMS``): every user reads its filter
from an entry, and the forms of each entry agree. Their NumPy weight against their Taichi
weight in float64 at many points (on the integers, the half-integers, at the support's edge
and beyond), their slope against central finite differences of their weight, and their
support against where the weight becomes 0. Which numbers a filter must give (PyTorch's,
PIL's, JAX's...) is the golden tests' concern; this one holds the forms to each other."""

import numpy as np
import pytest

from tiinterp._kernels.filter_funcs import DEVICE_FORMS, tent_weights
from tiinterp._rules.filters import FILTERS, FORMULAS, JAX_LANCZOS_CUT
from tiinterp._rules.scale_translate import FORMULA_NAMES, KERNELS
from tiinterp._runtime.taichi import ti

NAMES = sorted(FORMULAS)
DEVICE = sorted(DEVICE_FORMS)


def _points(support):
    """Where the forms are compared: a fine grid over the support and a sample past it,
    the integers and half-integers, and the support's edge and its neighbours, both signs."""
    reach = support + 2.0
    grid = np.linspace(-reach, reach, 4001)
    steps = np.arange(-np.ceil(reach), np.ceil(reach) + 0.5, 0.5)
    edge = support + np.array([-1e-9, -1e-12, 0.0, 1e-12, 1e-9, 0.5, 10.0, 1e6])
    small = np.array([0.0, 1e-300, 1e-12, 1e-6, JAX_LANCZOS_CUT, 2e-3])
    return np.unique(np.concatenate([grid, steps, edge, -edge, small, -small]))


@pytest.mark.parametrize("name", NAMES)
def test_support_is_where_the_weight_becomes_zero(name):
    """0 past the support, and not 0 everywhere just inside it: the radius tiinterp reads
    is the filter's, no more and no less."""
    formula = FORMULAS[name]
    x = _points(formula.support)
    outside = np.abs(x) > formula.support
    assert np.all(formula.weight(x)[outside] == 0)
    inside = formula.support - np.linspace(1e-3, 0.25, 50)
    assert np.any(formula.weight(inside) != 0) or np.any(formula.weight(-inside) != 0)
    assert formula.radius == np.ceil(formula.support)


def _knots(name, support):
    """Where the entry's weight has a kink or a jump: the joins of its pieces, its support's
    edge, and JAX's flat top."""
    knots = [0.0, support, *range(1, int(np.ceil(support)))]
    if name.endswith("_jax") and name.startswith("lanczos"):
        knots.append(JAX_LANCZOS_CUT)
    return np.array(knots)


@pytest.mark.parametrize("name", [n for n in NAMES if FORMULAS[n].slope is not None])
def test_slope_is_the_weight_s_derivative(name):
    """Central differences of the weight, in float64, away from the knots (where the slope
    is a convention: JAX's, the one from the right at 0)."""
    formula = FORMULAS[name]
    h = 1e-6
    x = np.random.default_rng(53).uniform(-formula.support - 1, formula.support + 1, 4000)
    x = np.concatenate([x, np.arange(-formula.support - 1, formula.support + 1, 0.125) + 1e-3])
    knots = _knots(name, formula.support)
    x = x[np.min(np.abs(np.abs(x)[:, None] - knots[None, :]), axis=1) > 10 * h]
    difference = (formula.weight(x + h) - formula.weight(x - h)) / (2 * h)
    np.testing.assert_allclose(formula.slope(x), difference, rtol=0, atol=1e-8)
    # At 0 (from the right) the smooth filters have slope 0, the tent -1.
    assert formula.slope(np.array([0.0]))[0] == (-1.0 if name == "triangle" else 0.0)


def test_forms_that_round_differently_are_one_function():
    """Note [Forms that round differently]: Keys' A = -0.5 in PyTorch's order and in PIL's,
    and lanczos as sinc(x) sinc(x / r) and as JAX writes it, agree to rounding (JAX's to
    1 - (pi x)^2 (1 + 1/r^2) / 6 under its cut, where it is 1)."""
    x = _points(3.0)
    np.testing.assert_allclose(
        FORMULAS["keys_jax"].weight(x), FORMULAS["keys_pil"].weight(x), rtol=0, atol=4e-16
    )
    for radius in (3, 5):
        sinc = FORMULAS[f"lanczos{radius}"].weight(_points(radius))
        jax = FORMULAS[f"lanczos{radius}_jax"].weight(_points(radius))
        top = np.abs(_points(radius)) <= JAX_LANCZOS_CUT
        np.testing.assert_allclose(jax[~top], sinc[~top], rtol=0, atol=1e-15)
        assert np.all(jax[top] == 1) and np.all(np.abs(sinc[top] - 1) < 2e-6)


def test_rows_form_is_the_weight():
    """The cardinal spline's rows, to rounding (``frac - offset`` rounds in the weight's
    argument, not in the rows')."""
    formula = FORMULAS["cardinal_spline"]
    frac = np.concatenate([np.linspace(0, 1, 257), [1e-12, 1 - 1e-12]])
    offsets = np.arange(1 - formula.radius, formula.radius + 1)
    np.testing.assert_allclose(
        formula.rows(frac, offsets),
        formula.weight(frac[:, None] - offsets[None, :]),
        rtol=0,
        atol=1e-15,
    )


def test_every_user_reads_its_filter_from_the_table():
    """The resize modes' weights and antialias windows, and scale_and_translate's kernels,
    are entries of FORMULAS (box's weight is its entry's mirrored: PIL's box is a function
    of ``tap - src`` and the weight one of ``src - tap``); a mode's radius covers its
    filter's, and a mode says it interpolates where its filter is 1 at 0 and 0 at the other
    integers."""
    weights = {id(f.weight) for f in FORMULAS.values()}
    windows = {id(f) for f in FORMULAS.values()}
    integers = np.arange(-40.0, 41.0)
    for mode, filt in FILTERS.items():
        assert id(filt.window) in windows, mode
        if mode == "box":
            x = _points(1.0)
            assert np.array_equal(filt.weight(x), FORMULAS["box"].weight(-x))
        else:
            assert id(filt.weight) in weights, mode
        formula = next((f for f in FORMULAS.values() if f.weight is filt.weight), filt.window)
        assert filt.radius >= formula.radius, mode
        values = filt.weight(integers)
        exact = np.abs(values - (integers == 0)).max() < 1e-15
        assert exact == filt.interpolating, mode
    for method, name in FORMULA_NAMES.items():
        kernel = KERNELS[method]
        assert kernel.value is FORMULAS[name].weight and kernel.slope is FORMULAS[name].slope
        assert kernel.radius == FORMULAS[name].radius


def test_every_filter_a_kernel_needs_has_its_taichi_form():
    """DEVICE_FORMS holds a Taichi form for exactly the entries that declare one, and each
    of those with a Taichi slope has a NumPy slope to hold it to."""
    assert set(DEVICE_FORMS) == {name for name, f in FORMULAS.items() if f.device}
    for name, form in DEVICE_FORMS.items():
        assert form.slope is None or FORMULAS[name].slope is not None, name
    # scale_and_translate's autodiff computes each method's filter on the device.
    assert set(FORMULA_NAMES.values()) <= set(DEVICE_FORMS)


@ti.kernel
def _evaluate(
    form: ti.template(),
    x: ti.types.ndarray(dtype=ti.f64, ndim=1),
    out: ti.types.ndarray(dtype=ti.f64, ndim=1),
):
    for i in x:
        out[i] = form(x[i])


@ti.kernel
def _tent(
    t: ti.types.ndarray(dtype=ti.f64, ndim=1),
    out: ti.types.ndarray(dtype=ti.f64, ndim=2),
):
    for i in t:
        w = tent_weights(t[i])
        out[i, 0] = w[0]
        out[i, 1] = w[1]


def _on_device(form, x):
    out = np.zeros_like(x)
    _evaluate(form, x, out)
    return out


# Taichi's forms round as the NumPy ones up to an ulp or two (Keys'), but: the B-spline
# writes x^3 as x * x * x and its 2/3 through `constant`, whose two float32 parts carry ~48
# bits (measured: 6.7e-16); lanczos's sine is a polynomial (Note [Forms that round
# differently]; measured: 7.8e-16), and under |x| = 1e-3, where its quotient is 0/0,
# Taichi's lanczos is the series 1 - (pi x)^2 (1 + 1/r^2) / 6, whose next term is
# (pi x)^4 (1/120 + 1/(36 r^2) + 1/(120 r^4)): 1.12e-12 at x = 1e-3 for r = 3 (measured
# the same; JAX's form is 1 there).
LANCZOS = 1.5e-15
DEVICE_TOLERANCE = {
    "cubic_bspline": 1.5e-15,
    "lanczos3": LANCZOS,
    "lanczos3_jax": LANCZOS,
    "lanczos5_jax": LANCZOS,
}
# Under |x| = 1e-3, which Taichi reads as a float32 literal (1e-3 rounded up, 1.00000005e-3).
SERIES, SERIES_END = {"lanczos3": 1.2e-12}, float(np.float32(1e-3))


@pytest.mark.requires_float64
def test_taichi_forms_agree_with_numpy_forms(arch):
    for name in DEVICE:
        formula, form = FORMULAS[name], DEVICE_FORMS[name]
        x = _points(formula.support)
        atol = DEVICE_TOLERANCE.get(name, 4e-16)
        atol = np.where(np.abs(x) < SERIES_END, SERIES.get(name, atol), atol)
        error = np.abs(_on_device(form.weight, x) - formula.weight(x))
        assert np.all(error <= atol), (name, x[np.argmax(error - atol)], error.max())
        if form.slope is not None:
            error = np.abs(_on_device(form.slope, x) - formula.slope(x))
            assert np.all(error <= atol), (name, x[np.argmax(error - atol)], error.max())
    # Linear's interpolator computes its two weights from t = x - floor(x) (Note [Slopes
    # at the kinks]): the tent at t and at t - 1.
    t = np.concatenate([np.linspace(0, 1, 1025)[:-1], [1e-300, 1 - 1e-16]])
    out = np.zeros((t.size, 2))
    _tent(t, out)
    triangle = FORMULAS["triangle"].weight
    np.testing.assert_allclose(out, np.stack([triangle(t), triangle(t - 1)], 1), atol=2e-16)
