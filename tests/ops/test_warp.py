"""tiinterp.funcs.warp inside users' kernels: the backward warp out(x) = f(x + u(x)), checked
against grid_sample_into (bilinear, border, align_corners=True is the same map in other
units), its ti.ad gradients against grid_sample_backward and finite differences, on every
arch."""

import numpy as np
import pytest

import tiinterp
from tests.tolerances import tolerance
from tiinterp._runtime.taichi import ti

FLOAT64 = pytest.param("float64", marks=pytest.mark.requires_float64)
REALS = {"float32": ti.f32, "float64": ti.f64}
H, W = 6, 7


class Warp:
    """out = warp(f, u) over out's grid, loss = sum(weights * out), on fields."""

    def __init__(self, real, sampler, boundary):
        self.f = ti.field(real, (H, W), needs_grad=True)
        self.u = ti.Vector.field(2, real, (H, W), needs_grad=True)
        self.out = ti.field(real, (H, W), needs_grad=True)
        self.weights = ti.field(real, (H, W))
        self.loss = ti.field(real, (), needs_grad=True)

        @ti.kernel
        def warp_and_sum():
            for i in ti.grouped(self.out):
                self.out[i] = tiinterp.funcs.warp(self.f, self.u, i, sampler, boundary)
            for i in ti.grouped(self.out):
                self.loss[None] += self.weights[i] * self.out[i]

        self.run = warp_and_sum

    def gradients(self, f, u, weights):
        self.f.from_numpy(f)
        self.u.from_numpy(u)
        self.weights.from_numpy(weights)
        with ti.ad.Tape(loss=self.loss):
            self.run()
        return self.out.to_numpy(), self.f.grad.to_numpy(), self.u.grad.to_numpy()

    def loss_at(self, f, u):
        self.f.from_numpy(f)
        self.u.from_numpy(u)
        self.loss[None] = 0
        self.run()
        return float(self.loss[None])


def as_grid(u):
    """Index displacements (H, W, 2) as grid_sample's (1, H, W, 2) grid (x first) for
    align_corners=True."""
    i, j = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    x = 2.0 * (j + u[..., 1]) / (W - 1) - 1.0
    y = 2.0 * (i + u[..., 0]) / (H - 1) - 1.0
    return np.stack([x, y], axis=-1)[None].astype(u.dtype)


@pytest.mark.parametrize("dtype", ["float32", FLOAT64])
def test_linear_clamp_warp_is_grid_sample_with_border_padding(arch, rng, dtype):
    f = rng.standard_normal((H, W)).astype(dtype)
    u = rng.uniform(-2.5, 2.5, (H, W, 2)).astype(dtype)
    weights = rng.standard_normal((H, W)).astype(dtype)
    warp = Warp(REALS[dtype], tiinterp.funcs.sample_linear, "clamp")
    out, grad_f, grad_u = warp.gradients(f, u, weights)

    grid = as_grid(u)
    options = ("bilinear", "border", True)
    expected = tiinterp.grid_sample(f[None, None], grid, *options)[0, 0]
    grad_input, grad_grid = tiinterp.grid_sample_backward(
        weights[None, None], f[None, None], grid, *options
    )
    # d grid_x / d u_1 = 2 / (W - 1), d grid_y / d u_0 = 2 / (H - 1).
    expected_grad_u = np.stack(
        [grad_grid[0, ..., 1] * 2 / (H - 1), grad_grid[0, ..., 0] * 2 / (W - 1)], axis=-1
    )
    bound = tolerance("funcs", dtype)
    for got, want in ((out, expected), (grad_f, grad_input[0, 0]), (grad_u, expected_grad_u)):
        assert np.abs(got - want).max() <= bound * max(1.0, np.abs(want).max())


@pytest.mark.requires_float64
@pytest.mark.parametrize(
    "sampler, boundary",
    [("sample_linear", "zero"), ("sample_cubic", "periodic"), ("sample_lanczos3", "reflect")],
)
def test_warp_gradients_match_finite_differences(arch, rng, sampler, boundary):
    f = rng.standard_normal((H, W))
    # Away from integer positions, where the linear filter has kinks.
    u = rng.integers(-3, 4, (H, W, 2)) + rng.uniform(0.2, 0.8, (H, W, 2))
    weights = rng.standard_normal((H, W))
    warp = Warp(ti.f64, getattr(tiinterp.funcs, sampler), boundary)
    _, grad_f, grad_u = warp.gradients(f, u, weights)
    step = 1e-6
    for name, analytic in (("f", grad_f), ("u", grad_u)):
        direction = rng.standard_normal(analytic.shape)
        shifted = [
            (f + sign * step * direction, u) if name == "f" else (f, u + sign * step * direction)
            for sign in (1, -1)
        ]
        numeric = (warp.loss_at(*shifted[0]) - warp.loss_at(*shifted[1])) / (2 * step)
        expected = float(np.sum(analytic * direction))
        bound = tolerance("funcs_field_finite_difference", "float64")
        assert abs(numeric - expected) <= bound * max(1.0, abs(expected)), (name, numeric)


def test_warp_of_a_vector_field_in_3d(arch, rng):
    """A 3-D field of 3-vectors warped by a constant displacement of whole samples: each
    output is the input at the shifted index (periodic: wrapped)."""
    shape = (4, 5, 3)
    values = rng.standard_normal((*shape, 3)).astype(np.float32)
    f = ti.Vector.field(3, ti.f32, shape)
    u = ti.Vector.field(3, ti.f32, shape)
    out = ti.Vector.field(3, ti.f32, shape)
    f.from_numpy(values)
    u.fill(0)
    shift = (1, -2, 4)

    @ti.kernel
    def set_shift():
        for i in ti.grouped(u):
            u[i] = ti.Vector(shift, ti.f32)

    @ti.kernel
    def run():
        for i in ti.grouped(out):
            out[i] = tiinterp.funcs.warp(f, u, i, tiinterp.funcs.sample_cubic, "periodic")

    set_shift()
    run()
    expected = np.roll(values, [-s for s in shift], axis=(0, 1, 2))
    np.testing.assert_allclose(out.to_numpy(), expected, rtol=0, atol=1e-5)


@pytest.mark.requires_float64
@pytest.mark.parametrize("boundary", ["clamp", "periodic", "zero"])
def test_gradient_at_zero_displacement_is_the_forward_difference(arch, rng, boundary):
    """At u = 0 every point sits on a sample, the linear sampler's kink: d out / d u is the
    slope towards the next sample up, f[i + e] - f[i] with f[n] what the boundary reads
    past the last sample (Note [Slopes at the kinks]); ti.ad gave errors of 1.78 there."""
    f = rng.standard_normal((H, W))
    weights = rng.standard_normal((H, W))
    past = {"clamp": lambda a, d: np.take(a, [-1], d), "zero": lambda a, d: 0 * np.take(a, [0], d)}
    past["periodic"] = lambda a, d: np.take(a, [0], d)
    expected = (
        np.stack(
            [np.diff(np.concatenate([f, past[boundary](f, d)], axis=d), axis=d) for d in (0, 1)],
            axis=-1,
        )
        * weights[..., None]
    )
    warp = Warp(ti.f64, tiinterp.funcs.sample_linear, boundary)
    out, _, grad_u = warp.gradients(f, np.zeros((H, W, 2)), weights)
    np.testing.assert_array_equal(out, f)
    np.testing.assert_allclose(grad_u, expected, rtol=0, atol=1e-14)
