"""tiinterp.funcs on users' layouts: a boundary per axis (``("clamp", "periodic")``) in
every sampler and in ``warp``, and ``frame(f, t)``, one step of a field that keeps every time
step (or any leading index), read in place.

Per-axis boundaries: values against ``numpy.pad`` axis by axis (tests/public/test_funcs.py's
reference), ``ti.ad`` gradients with respect to the field and the points against central
finite differences, and the adjoint (dot-product) identity of the field's gradient: each
boundary on each axis with ``sample_linear``, pairs of them with every other sampler.
Frames: the same numbers and gradients as the step copied into a field of its own, for
scalar and vector fields, ndarrays, two leading indices, offsets and a bitmasked field;
``warp`` of frames; no warning from Taichi; the refusals."""

import contextlib
import warnings

import numpy as np
import pytest

import tiinterp
from tests.public.test_funcs import (
    BATCH,
    SamplerPipeline,
    check_values_and_gradients,
    off_the_kinks,
    padded_reference,
)
from tests.runtime.test_field_kinds import REFUSED_SPARSE, sparse_unavailable
from tests.tolerances import tolerance
from tiinterp import funcs
from tiinterp._runtime.taichi import ti

# Each boundary on each axis once (2-D), and twice on three axes (3-D).
PAIRS = [
    ("clamp", "periodic"),
    ("periodic", "clamp"),
    ("zero", "mirror"),
    ("mirror", "reflect"),
    ("reflect", "zero"),
]
TRIPLES = [("periodic", "clamp", "reflect"), ("zero", "mirror", "periodic")]


def _axis_case(sampler, boundary, shape, channels):
    return pytest.param(sampler, boundary, shape, channels, id=f"{sampler}-{'-'.join(boundary)}")


# Each boundary on each axis with sample_linear, in 2-D (vector field) and 3-D; the other
# samplers share its per-axis code (_interpolate, sample_nearest's loop): two pairs each,
# one for lanczos3, whose gradient kernels take 12-16 s to compile (its weights are
# test_funcs.py's).
AXIS_CASES = [
    *(_axis_case("linear", boundary, (6, 5), 2) for boundary in PAIRS),
    *(_axis_case("linear", boundary, (4, 5, 3), 1) for boundary in TRIPLES),
    *(
        _axis_case(sampler, boundary, (6, 5), 1)
        for sampler in ("nearest", "cubic")
        for boundary in PAIRS[1:3]
    ),
    _axis_case("lanczos3", PAIRS[0], (6, 5), 1),
]


@pytest.mark.requires_float64
@pytest.mark.parametrize("sampler, boundary, shape, channels", AXIS_CASES)
def test_a_boundary_per_axis(arch, rng, sampler, boundary, shape, channels):
    """Values against numpy.pad axis by axis, ti.ad gradients against finite differences,
    and <A x, c> == <x, A^T c> with A^T c the field's ti.ad gradient."""
    n = np.array(shape, dtype=np.float64)
    values = rng.standard_normal(shape + ((channels,) if channels > 1 else ()))
    points = off_the_kinks(rng.uniform(-2.5 * n, 3.5 * n, (BATCH, len(shape))))
    pipeline = SamplerPipeline(shape, channels, points, sampler, ti.f64, boundary)
    check_values_and_gradients(
        pipeline, sampler, values, points, lambda v, p: padded_reference(v, p, sampler, boundary)
    )
    loss = pipeline.value(values, points)  # sum_i c_i sample_i, c_i = i + 1: <A x, c>
    field_grad, _ = pipeline.gradients(values, points)
    adjoint = float(np.sum(values * field_grad))
    assert abs(loss - adjoint) <= tolerance("dot", "float64") * np.sum(np.abs(values * field_grad))


@pytest.mark.requires_float64
def test_warp_takes_a_boundary_per_axis(arch, rng):
    """warp with ("periodic", "clamp"): f read at index + displacement[index], as the
    sampler reads it; its ti.ad gradient with respect to the displacement against finite
    differences."""
    shape = (5, 7)
    f = ti.field(ti.f64, shape)
    u = ti.Vector.field(2, ti.f64, shape, needs_grad=True)
    out = ti.field(ti.f64, shape)
    loss = ti.field(ti.f64, (), needs_grad=True)
    values = rng.standard_normal(shape)
    displacement = off_the_kinks(rng.uniform(-9.0, 9.0, shape + (2,)))
    f.from_numpy(values)

    @ti.kernel
    def run():
        for i in ti.grouped(out):
            value = funcs.warp(f, u, i, funcs.sample_cubic, ("periodic", "clamp"))
            out[i] = value
            loss[None] += value * (i[0] + 2 * i[1] + 1)

    def total(d):
        u.from_numpy(d)
        loss[None] = 0
        run()
        return float(loss[None])

    total(displacement)
    for index in np.ndindex(*shape):
        expected = padded_reference(
            values, np.array(index) + displacement[index], "cubic", ("periodic", "clamp")
        )
        assert abs(out[index] - expected) <= tolerance("funcs", "float64") * max(1, abs(expected))
    u.from_numpy(displacement)
    with ti.ad.Tape(loss=loss):
        run()
    direction = rng.standard_normal(displacement.shape)
    step = 1e-6
    numeric = (total(displacement + step * direction) - total(displacement - step * direction)) / (
        2 * step
    )
    analytic = float(np.sum(u.grad.to_numpy() * direction))
    assert abs(numeric - analytic) <= tolerance("funcs_point_finite_difference", "float64") * max(
        1, abs(numeric)
    )


def test_a_wrong_boundary_tuple_stops_the_compile(arch):
    field = ti.field(ti.f32, (3, 4))

    @ti.kernel
    def run(boundary: ti.template()) -> ti.f32:
        return funcs.sample_linear(field, ti.Vector([0.5, 0.5]), boundary)

    with pytest.raises(
        ti.TaichiCompilationError, match="boundary: expected a name or a tuple of 2"
    ):
        run(("clamp", "zero", "zero"))
    with pytest.raises(ti.TaichiCompilationError, match=r"boundary: expected one of .* got 'wrap'"):
        run(("clamp", "wrap"))


# --- Frames --------------------------------------------------------------------------------


@contextlib.contextmanager
def _no_taichi_warnings():
    """Taichi warns (SyntaxWarning) at every call of a plain Python function in a kernel;
    frame must not make it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntaxWarning)
        yield


@pytest.mark.requires_float64
@pytest.mark.parametrize("channels", [1, 3])
def test_a_frame_is_its_step(arch, rng, channels):
    """cubic and periodic-clamped sampling of frame(f, t) of a [t, i, j] field: the values
    and ti.ad gradients (to the field, landing in step t only, and to the points) of the
    step copied into a 2-D field of its own."""
    steps, shape = 4, (6, 5)
    make = (
        (lambda s: ti.field(ti.f64, s, needs_grad=True))
        if channels == 1
        else (lambda s: ti.Vector.field(channels, ti.f64, s, needs_grad=True))
    )
    timed, single = make((steps, *shape)), make(shape)
    points = ti.Vector.field(2, ti.f64, BATCH, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)
    element = (channels,) if channels > 1 else ()
    values = rng.standard_normal((steps, *shape, *element))
    timed.from_numpy(values)
    single.from_numpy(values[2])
    points.from_numpy(off_the_kinks(rng.uniform(-3.0, 8.0, (BATCH, 2))))

    @ti.kernel
    def from_frame(t: int):
        for k in points:
            value = funcs.sample_cubic(funcs.frame(timed, t), points[k], ("periodic", "clamp"))
            if ti.static(channels > 1):
                loss[None] += (k + 1) * value.sum()
            else:
                loss[None] += (k + 1) * value

    @ti.kernel
    def from_field():
        for k in points:
            value = funcs.sample_cubic(single, points[k], ("periodic", "clamp"))
            if ti.static(channels > 1):
                loss[None] += (k + 1) * value.sum()
            else:
                loss[None] += (k + 1) * value

    results = []
    with _no_taichi_warnings():
        for run, field in ((lambda: from_frame(2), timed), (from_field, single)):
            with ti.ad.Tape(loss=loss):  # which clears every gradient first
                run()
            results.append((float(loss[None]), points.grad.to_numpy(), field.grad.to_numpy()))
    bound = tolerance("funcs", "float64")
    (frame_loss, frame_points, grad), (field_loss, field_points, field_grad) = results
    assert abs(frame_loss - field_loss) <= bound * max(1, abs(field_loss))
    assert np.abs(frame_points - field_points).max() <= bound * max(1, np.abs(field_points).max())
    assert not grad[[0, 1, 3]].any()
    assert np.abs(grad[2] - field_grad).max() <= bound * max(1, np.abs(field_grad).max())


def test_frames_of_ndarrays_fields_with_offsets_and_two_leading_indices(arch, rng):
    """frame of an ndarray (a kernel argument), of a field declared with offsets (leading
    indices are Taichi indices), and frame(p, (t, k)) of a [t, k, i, j, l] field read by a
    3-D sampler; warp of two frames: each the step copied out, to float32 rounding."""
    values = rng.standard_normal((3, 6, 5)).astype(np.float32)
    nd = ti.ndarray(ti.f32, values.shape)
    nd.from_numpy(values)
    shifted = ti.field(ti.f32, values.shape, offset=(-1, 2, -3))
    shifted.from_numpy(values)
    deep_values = rng.standard_normal((2, 3, 4, 5, 3)).astype(np.float32)
    deep = ti.field(ti.f32, deep_values.shape)
    deep.from_numpy(deep_values)
    u_values = rng.uniform(-2.0, 2.0, (3, 6, 5, 2)).astype(np.float32)
    u = ti.Vector.field(2, ti.f32, u_values.shape[:3])
    u.from_numpy(u_values)
    points = off_the_kinks(rng.uniform(-2.0, 7.0, (BATCH, 3))).astype(np.float32)
    out = ti.ndarray(ti.f32, (BATCH, 4))
    warped = ti.field(ti.f32, values.shape[1:])

    @ti.kernel
    def run(a: ti.types.ndarray(dtype=ti.f32, ndim=3), out: ti.types.ndarray(), t: int):
        for k in range(BATCH):
            p = ti.Vector([points_f[k, 0], points_f[k, 1]])
            step = funcs.frame(a, t)  # a view kept in a variable
            out[k, 0] = funcs.sample_linear(step, p, "mirror")
            out[k, 1] = funcs.sample_linear(funcs.frame(shifted, t - 1), p, "mirror", (-2.0, 3.0))
            q = ti.Vector([points_f[k, 0], points_f[k, 1], points_f[k, 2]])
            out[k, 2] = funcs.sample_cubic(funcs.frame(deep, (1, t)), q, "reflect")
            out[k, 3] = funcs.sample_nearest(funcs.frame(deep, (t - 1, 2)), q, "zero")
        for i in ti.grouped(warped):
            warped[i] = funcs.warp(funcs.frame(shifted, t - 1), funcs.frame(u, t), i)

    points_f = ti.field(ti.f32, points.shape)
    points_f.from_numpy(points)
    with _no_taichi_warnings():
        run(nd, out, 2)
    got = out.to_numpy()
    bound = tolerance("funcs", "float32")
    for k, point in enumerate(points.astype(np.float64)):
        expected = (
            padded_reference(values[2].astype(np.float64), point[:2], "linear", "mirror"),
            padded_reference(values[2].astype(np.float64), point[:2], "linear", "mirror"),
            padded_reference(deep_values[1, 2].astype(np.float64), point, "cubic", "reflect"),
            padded_reference(deep_values[1, 2].astype(np.float64), point, "nearest", "zero"),
        )
        for value, want in zip(got[k], expected, strict=True):
            assert abs(value - want) <= bound * max(1, abs(want)), (k, got[k], expected)
    # shifted's step t - 1 = 1 (Taichi index) is values[2]; warp samples it in index units
    # counted from the field's first index, as a field declared with that offset is.
    for i, j in np.ndindex(*values.shape[1:]):
        at = np.array([i, j], dtype=np.float64) + u_values[2, i, j]
        want = padded_reference(values[2].astype(np.float64), at - (2, -3), "linear", "clamp")
        assert abs(warped[i, j] - want) <= bound * max(1, abs(want))


def test_a_frame_of_a_bitmasked_field_reads_inactive_cells_as_zero(arch, rng):
    """The frame's inactive cells read 0, as the field's own do, where tiinterp reads sparse
    fields; elsewhere the frame is refused as its field is (tests/runtime/test_field_kinds.py's
    rule: Taichi itself refuses to declare one, or tiinterp refuses to read it)."""
    unavailable = sparse_unavailable("bitmasked")
    if unavailable == "taichi":
        return  # sparse_unavailable checked Taichi's refusal
    f = ti.field(ti.f32)
    ti.root.dense(ti.i, 2).bitmasked(ti.jk, (4, 4)).place(f)
    values = rng.standard_normal((2, 4, 4)).astype(np.float32)
    out = ti.field(ti.f32, (4, 4))

    @ti.kernel
    def fill(v: ti.types.ndarray()):
        for t, i, j in ti.ndrange(2, 4, 4):
            if (i + j) % 2 == 0 or t == 0:
                f[t, i, j] = v[t, i, j]

    @ti.kernel
    def run():
        for i, j in out:
            out[i, j] = funcs.sample_linear(funcs.frame(f, 1), ti.Vector([i + 0.5, j]))

    if unavailable == "tiinterp":
        with pytest.raises(ti.TaichiCompilationError, match=REFUSED_SPARSE):
            run()
        return
    fill(values)
    run()
    step = np.where(np.add.outer(np.arange(4), np.arange(4)) % 2 == 0, values[1], 0.0)
    for i, j in np.ndindex(4, 4):
        want = padded_reference(step.astype(np.float64), (i + 0.5, j), "linear", "clamp")
        assert abs(out[i, j] - want) <= tolerance("funcs", "float32") * max(1, abs(want))


def test_the_warning_check_catches_taichis_warning(arch):
    """_no_taichi_warnings turns the warning Taichi gives for a plain Python function
    called in a kernel into an error (so the frame tests would see one)."""

    def plain(x):
        return x

    @ti.kernel
    def run() -> ti.f32:
        return plain(1.0)

    with (
        pytest.raises(ti.TaichiCompilationError, match="Calling non-taichi function"),
        _no_taichi_warnings(),
    ):
        run()


def test_frame_refusals(arch):
    f = ti.field(ti.f32, (3, 4, 5))

    @ti.kernel
    def run(leading: ti.template()) -> ti.f32:
        return funcs.sample_linear(funcs.frame(f, leading), ti.Vector([0.5, 0.5]))

    with pytest.raises(ti.TaichiCompilationError, match="frame: expected 1 to 2 leading"):
        run((0, 1, 2))
    with pytest.raises(ti.TaichiCompilationError, match="frame: expected integer leading"):
        run(1.5)
    with pytest.raises(ti.TaichiCompilationError, match="p: expected a 1-D point"):
        run((0, 1))

    @ti.kernel
    def nested() -> ti.f32:
        return funcs.sample_linear(funcs.frame(funcs.frame(f, 0), 1), ti.Vector([0.5]))

    with pytest.raises(
        ti.TaichiCompilationError, match=r"frame: expected a Taichi field .* got a frame"
    ):
        nested()


# The one-line mappings of docs/guide/pipelines.md: F.grid_sample's paddings as boundaries.
GRID_SAMPLE_PADDINGS = [
    ("border", True, "clamp"),
    ("border", False, "clamp"),
    ("zeros", True, "zero"),
    ("zeros", False, "zero"),
    ("reflection", True, "mirror"),
    ("reflection", False, "reflect"),
]


@pytest.mark.parametrize("padding_mode, align_corners, boundary", GRID_SAMPLE_PADDINGS)
def test_sample_linear_is_bilinear_grid_sample(arch, rng, padding_mode, align_corners, boundary):
    """sample_linear with the boundary the guide maps each padding to gives
    grid_sample(mode="bilinear") (PyTorch's numbers: tests/ops/test_grid_sample.py) at the
    same points, in index coordinates, inside and far outside."""
    shape = (5, 7)
    values = rng.standard_normal(shape).astype(np.float32)
    points = rng.uniform(-12.0, 15.0, (64, 2)).astype(np.float32)
    f = ti.field(ti.f32, shape)
    f.from_numpy(values)
    at = ti.Vector.field(2, ti.f32, len(points))
    at.from_numpy(points)
    out = ti.field(ti.f32, len(points))

    @ti.kernel
    def run():
        for k in at:
            out[k] = funcs.sample_linear(f, at[k], boundary)

    run()
    n = np.array(shape, dtype=np.float64)
    x = points.astype(np.float64)
    normalised = 2 * x / (n - 1) - 1 if align_corners else (2 * x + 1) / n - 1
    grid = normalised[:, ::-1].reshape(1, 1, -1, 2).astype(np.float32)  # (x, y): (j, i)
    expected = tiinterp.grid_sample(
        values[None, None], grid, "bilinear", padding_mode, align_corners
    )[0, 0, 0]
    assert np.abs(out.to_numpy() - expected).max() <= 4 * tolerance("funcs", "float32") * max(
        1, np.abs(expected).max()
    )
