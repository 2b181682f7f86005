"""Cubic B-spline interpolation in Taichi kernels: ``bspline_coefficients_into`` (the
prefilter, a ``ti.ad.Tape`` step with a hand-written adjoint) then
``funcs.sample_bspline``, against the float64 oracle (tests/oracle.py: the spline's
equations solved exactly) and SciPy's ``map_coordinates(order=3)``, on every arch."""

import numpy as np
import pytest

import tiinterp
from tests import oracle
from tests.spline_cases import SHORT_SHAPES, spline_cases, spline_inputs, spline_key
from tests.tolerances import relative_error, tolerance
from tiinterp._engine.passes import autodiff_backward
from tiinterp._rules.bspline import BSPLINE_BOUNDARIES, fold, prefilter_passes, prefilter_taps
from tiinterp._runtime.arrays import NumpyKind
from tiinterp._runtime.taichi import ti

REALS = {"float32": ti.f32, "float64": ti.f64}
DTYPES = ["float32", pytest.param("float64", marks=pytest.mark.requires_float64)]


def _dense(taps):
    matrix = np.zeros((taps.out_size, taps.in_size))
    for row in range(taps.out_size):
        np.add.at(
            matrix[row], taps.index[row, : taps.count[row]], taps.weight[row, : taps.count[row]]
        )
    return matrix


@pytest.mark.parametrize("boundary", BSPLINE_BOUNDARIES)
def test_prefilter_solves_the_spline_equations(boundary):
    """(c[k - 1] + 4 c[k] + c[k + 1]) / 6 = f[k] with c = P f, on axes of every size up to
    two tables' widths (where the folds overlap) and a long one."""
    worst = 0.0
    for size in (*range(1, 61), 130):
        system = np.zeros((size, size))
        for k in range(size):
            for step, w in ((-1, 1 / 6), (0, 4 / 6), (1, 1 / 6)):
                system[k, fold(np.array(k + step), size, boundary)] += w
        prefilter = _dense(prefilter_taps(size, boundary, "float64"))
        worst = max(worst, np.abs(system @ prefilter - np.eye(size)).max())
    assert worst <= tolerance("bspline_prefilter", "float64")


@ti.kernel
def _sample_at(
    c: ti.types.ndarray(),
    points: ti.types.ndarray(),
    values: ti.types.ndarray(),
    boundary: ti.template(),
):
    """``values[k] = sample_bspline(c, points[k])``: compiled once per dtype, number of
    axes and boundary, whatever the shapes."""
    for k in values:
        values[k] = tiinterp.funcs.sample_bspline(c, points[k], boundary)


def _spline_on_ndarrays(samples, points, boundary, dtype):
    real = REALS[dtype]
    src, coefficients = (ti.ndarray(real, samples.shape) for _ in range(2))
    at = ti.Vector.ndarray(points.shape[1], real, len(points))
    values = ti.ndarray(real, len(points))
    src.from_numpy(samples.astype(dtype))
    at.from_numpy(points.astype(dtype))
    tiinterp.bspline_coefficients_into(src, coefficients, boundary)
    _sample_at(coefficients, at, values, boundary)
    return values.to_numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("boundary", "shape", "against_scipy"),
    list(spline_cases()),
    ids=[spline_key(b, s) for b, s, _ in spline_cases()],
)
def test_sample_bspline_matches_the_oracle_and_scipy(
    arch, golden, boundary, shape, against_scipy, dtype
):
    samples, points = spline_inputs(boundary, shape)
    values = _spline_on_ndarrays(samples, points, boundary, dtype)
    expected = oracle.bspline_sample(
        oracle.bspline_coefficients(samples, boundary), points, boundary
    )
    assert relative_error(values, expected) <= tolerance("bspline_oracle", dtype)
    if against_scipy:
        scipy_values = golden("scipy_spline")[spline_key(boundary, shape)]
        assert relative_error(values, scipy_values) <= tolerance("scipy_spline", dtype)
    on_sample = np.all(points == np.floor(points), axis=1) & np.all(
        (points >= 0) & (points < np.array(shape)), axis=1
    )
    at = tuple(points[on_sample].astype(int).T)
    assert relative_error(values[on_sample], samples[at]) <= tolerance("bspline_oracle", dtype)


class Spline:
    """samples -> bspline_coefficients_into -> coefficients -> sample_bspline at points ->
    values -> loss = sum(w * values), on Taichi fields (a Tape on every arch)."""

    def __init__(self, shape, points, boundary):
        self.boundary = boundary
        self.samples = ti.field(ti.f64, shape, needs_grad=True)
        self.coefficients = ti.field(ti.f64, shape, needs_grad=True)
        self.points = ti.Vector.field(len(shape), ti.f64, len(points), needs_grad=True)
        self.values = ti.field(ti.f64, len(points), needs_grad=True)
        self.w = ti.field(ti.f64, len(points))
        self.loss = ti.field(ti.f64, (), needs_grad=True)
        self.points.from_numpy(points)

        @ti.kernel
        def sample(c: ti.template(), boundary: ti.template()):
            for k in self.values:
                self.values[k] = tiinterp.funcs.sample_bspline(c, self.points[k], boundary)

        @ti.kernel
        def weigh():
            for k in self.values:
                self.loss[None] += self.w[k] * self.values[k]

        self._sample, self._weigh = sample, weigh

    def gradients(self, samples, w):
        """(samples.grad, points.grad) of sum(w * values) through a Tape."""
        self.samples.from_numpy(samples)
        self.w.from_numpy(w)
        with ti.ad.Tape(loss=self.loss):
            tiinterp.bspline_coefficients_into(self.samples, self.coefficients, self.boundary)
            self._sample(self.coefficients, self.boundary)
            self._weigh()
        return self.samples.grad.to_numpy(), self.points.grad.to_numpy()


# 2-D, every boundary. 3-D gradient kernels (64 taps) take 9 s to compile on the CPU: the
# sampler shares its 3-D code with sample_cubic (tests/public/test_funcs.py's 3-D gradients) and
# the prefilter's 3-D adjoint is test_prefilter_adjoint_identity's.
# Then a boundary per axis: each boundary on each axis once.
AXIS_BOUNDARIES = [("reflect", "periodic"), ("periodic", "mirror"), ("mirror", "reflect")]
TAPE_CASES = [("2d", b, (5, 7)) for b in BSPLINE_BOUNDARIES] + [
    ("2d", b, (6, 5)) for b in AXIS_BOUNDARIES
]


def _boundary_id(boundary):
    return boundary if isinstance(boundary, str) else "-".join(boundary)


@pytest.mark.requires_float64
@pytest.mark.parametrize(
    "case, boundary, shape", TAPE_CASES, ids=[c[0] + "-" + _boundary_id(c[1]) for c in TAPE_CASES]
)
def test_tape_gradients_to_samples_and_points(arch, case, boundary, shape):
    """The prefilter's hand-written adjoint and ti.ad through the sampler, in one Tape: the
    samples' gradient against the oracle's (the spline is linear in the samples), the
    points' against central differences of the oracle, and bit-identical on a rerun."""
    samples, points = spline_inputs(boundary, shape)
    rng = np.random.default_rng(len(shape))
    w = rng.standard_normal(len(points))
    spline = Spline(shape, points, boundary)
    grad_samples, grad_points = spline.gradients(samples, w)

    def loss(f, at):
        return w @ oracle.bspline_sample(oracle.bspline_coefficients(f, boundary), at, boundary)

    expected_samples = np.zeros(shape)
    for index in np.ndindex(*shape):
        unit = np.zeros(shape)
        unit[index] = 1.0
        expected_samples[index] = loss(unit, points)
    assert relative_error(grad_samples, expected_samples) <= tolerance("bspline_oracle", "float64")
    step = 1e-6
    coefficients = oracle.bspline_coefficients(samples, boundary)
    expected_points = np.zeros_like(points)
    for k, d in np.ndindex(*points.shape):
        bump = np.zeros(points.shape[1])
        bump[d] = step
        ahead, behind = oracle.bspline_sample(
            coefficients, np.stack([points[k] + bump, points[k] - bump]), boundary
        )
        expected_points[k, d] = w[k] * (ahead - behind) / (2 * step)
    assert relative_error(grad_points, expected_points) <= tolerance("finite_difference", "float64")
    again = spline.gradients(samples, w)
    assert np.array_equal(again[0], grad_samples) and np.array_equal(again[1], grad_points)


def _prefilter_on_tape(x, g, boundary, dtype):
    """``(P x, P^T g)``: the coefficients of ``x`` and, from a Tape over ``sum(g * P x)``,
    the prefilter's adjoint of ``g``."""
    real = REALS[dtype]
    src, dst = (ti.field(real, x.shape, needs_grad=True) for _ in range(2))
    g_field, loss = ti.field(real, x.shape), ti.field(real, (), needs_grad=True)
    src.from_numpy(x.astype(dtype))
    g_field.from_numpy(g.astype(dtype))

    @ti.kernel
    def weigh():
        for i in ti.grouped(dst):
            loss[None] += g_field[i] * dst[i]

    with ti.ad.Tape(loss=loss):
        tiinterp.bspline_coefficients_into(src, dst, boundary)
        weigh()
    return dst.to_numpy().astype(np.float64), src.grad.to_numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "boundary", [*BSPLINE_BOUNDARIES, ("periodic", "mirror", "reflect")], ids=_boundary_id
)
def test_prefilter_adjoint_identity(arch, boundary, dtype):
    """<P x, g> == <x, P^T g> on a (4, 3, 29) field, every axis spline, with one boundary
    for all and one per axis."""
    rng = np.random.default_rng(3)
    x, g = (rng.standard_normal((4, 3, 29)).astype(dtype) for _ in range(2))
    coefficients, adjoint = _prefilter_on_tape(x, g, boundary, dtype)
    scale = np.abs(coefficients * g).sum()
    assert abs(np.vdot(coefficients, g) - np.vdot(x, adjoint)) <= tolerance("dot", dtype) * scale


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("boundary", [*BSPLINE_BOUNDARIES, *AXIS_BOUNDARIES], ids=_boundary_id)
def test_handwritten_adjoint_agrees_with_ti_ad(arch, boundary):
    """Taichi's ti.ad reverse of the prefilter's passes gives the Tape's gradient."""
    shape = (6, 31)
    g = np.random.default_rng(4).standard_normal(shape)
    forward, _ = prefilter_passes(shape, (0, 1), boundary, "float64")
    by_ti_ad = autodiff_backward(g, shape, forward, np.empty(shape), NumpyKind)
    _, adjoint = _prefilter_on_tape(np.zeros(shape), g, boundary, "float64")
    assert relative_error(adjoint, by_ti_ad) <= tolerance("reorder", "float64")


@pytest.mark.parametrize("storage", ["field", "ndarray"])
def test_vectors_and_ndarrays_are_their_components(arch, storage):
    """A field (or ndarray) of 2-vectors on a (9, 12) grid: each component's coefficients
    are those of the scalar field of that component."""
    rng = np.random.default_rng(5)
    values = rng.standard_normal((9, 12, 2)).astype(np.float32)
    make = (
        (lambda: ti.Vector.field(2, ti.f32, (9, 12)))
        if storage == "field"
        else (lambda: ti.Vector.ndarray(2, ti.f32, (9, 12)))
    )
    src, dst = make(), make()
    src.from_numpy(values)
    tiinterp.bspline_coefficients_into(src, dst, "mirror")
    for component in range(2):
        scalar, coefficients = ti.field(ti.f32, (9, 12)), ti.field(ti.f32, (9, 12))
        scalar.from_numpy(values[..., component])
        tiinterp.bspline_coefficients_into(scalar, coefficients, "mirror")
        assert relative_error(dst.to_numpy()[..., component], coefficients.to_numpy()) <= tolerance(
            "reorder", "float32"
        )


def test_nan_reaches_the_coefficients_within_27_samples(arch):
    """The prefilter's taps reach 27 samples each way: a NaN spreads that far, no further."""
    samples = np.ones((1, 90), dtype=np.float32)
    samples[0, 40] = np.nan
    src, dst = ti.field(ti.f32, (1, 90)), ti.field(ti.f32, (1, 90))
    src.from_numpy(samples)
    tiinterp.bspline_coefficients_into(src, dst, "reflect")
    nan = np.isnan(dst.to_numpy()[0])
    assert np.array_equal(np.flatnonzero(nan), np.arange(13, 68))


@pytest.mark.parametrize("shape", SHORT_SHAPES, ids=str)
def test_an_axis_of_one_sample_is_its_coefficient(arch, shape):
    """A constant stays constant on axes of 1-3 samples, every boundary (the coefficients
    of a constant are that constant)."""
    for boundary in BSPLINE_BOUNDARIES:
        src, dst = ti.field(ti.f32, shape), ti.field(ti.f32, shape)
        src.fill(2.5)
        tiinterp.bspline_coefficients_into(src, dst, boundary)
        assert np.abs(dst.to_numpy() - 2.5).max() <= 2.5 * tolerance("bspline_oracle", "float32")


def test_bad_arguments_are_refused(arch):
    src, dst = ti.field(ti.f32, (4, 5)), ti.field(ti.f32, (4, 5))
    with pytest.raises(
        ValueError,
        match="boundary: expected one of 'reflect', 'mirror', 'periodic' or a tuple of them "
        r"\(one per spatial axis\), got 'clamp'",
    ):
        tiinterp.bspline_coefficients_into(src, dst, "clamp")
    with pytest.raises(ValueError, match=r"got \('reflect', 'clamp'\)"):
        tiinterp.bspline_coefficients_into(src, dst, ("reflect", "clamp"))
    with pytest.raises(ValueError, match=r"expected one name or a tuple of 2 .* got 3"):
        tiinterp.bspline_coefficients_into(src, dst, ("reflect",) * 3)
    with pytest.raises(ValueError, match=r"dst: expected src's shape \(4, 5\), got \(4, 6\)"):
        tiinterp.bspline_coefficients_into(src, ti.field(ti.f32, (4, 6)))
    with pytest.raises(ValueError, match="dst: expected another array than src"):
        tiinterp.bspline_coefficients_into(src, src)
    with pytest.raises(TypeError, match="dst: expected dtype f32 or f64, got i32"):
        tiinterp.bspline_coefficients_into(src, ti.field(ti.i32, (4, 5)))

    @ti.kernel
    def clamped() -> ti.f32:
        return tiinterp.funcs.sample_bspline(src, ti.Vector([1.5, 2.0]), "clamp")

    with pytest.raises(ti.TaichiCompilationError, match="'periodic' for sample_bspline"):
        clamped()

    @ti.kernel
    def clamped_along_one_axis() -> ti.f32:
        return tiinterp.funcs.sample_bspline(src, ti.Vector([1.5, 2.0]), ("mirror", "zero"))

    with pytest.raises(ti.TaichiCompilationError, match=r"sample_bspline .*got 'zero'"):
        clamped_along_one_axis()


def test_boundary_per_axis_pairs_with_spatial_axes_as_given(arch):
    """spatial_axes=(2, 0) with boundary=("periodic", "reflect"): axis 2 periodic, axis 0
    reflect, as the oracle computes them, on a (5, 3, 6) field (axis 1 untouched)."""
    rng = np.random.default_rng(11)
    samples = rng.standard_normal((5, 3, 6))
    src, dst = (ti.field(ti.f32, samples.shape) for _ in range(2))
    src.from_numpy(samples.astype(np.float32))
    tiinterp.bspline_coefficients_into(src, dst, ("periodic", "reflect"), spatial_axes=(2, 0))
    expected = np.stack(
        [oracle.bspline_coefficients(samples[:, j, :], ("reflect", "periodic")) for j in range(3)],
        axis=1,
    )
    assert relative_error(dst.to_numpy(), expected) <= tolerance("bspline_oracle", "float32")
