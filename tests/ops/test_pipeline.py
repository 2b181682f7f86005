"""interpolate_into inside ti.ad.Tape: a small pipeline (resample -> user loss kernel)
whose src.grad comes from tiinterp's adjoint, checked against interpolate_backward and
finite differences on every arch, with Taichi fields and (where Taichi can differentiate
them: ``requires_autodiff``) ndarrays. The refusal of ndarrays elsewhere is tested in
tests/runtime/test_capabilities.py."""

import numpy as np
import pytest

import tiinterp
from tests.cases import MODES_2D
from tests.tolerances import tolerance
from tiinterp._runtime.session import supports_float64
from tiinterp._runtime.taichi import ti

SRC, DST = (2, 2, 7, 9), (2, 2, 11, 5)
TAICHI_DTYPES = {"float32": ti.f32, "float64": ti.f64}


class Pipeline:
    """src -> interpolate_into -> dst -> loss = sum(w * dst ** 2), on fields or ndarrays."""

    def __init__(self, storage, dtype, x, w):
        real = TAICHI_DTYPES[dtype]
        make = ti.field if storage == "field" else ti.ndarray
        self.storage = storage
        self.src = make(real, SRC, needs_grad=True)
        self.dst = make(real, DST, needs_grad=True)
        self.w = make(real, DST)
        self.loss = make(real, (), needs_grad=True)
        self.w.from_numpy(w)
        self.set_input(x)

        if storage == "field":

            @ti.kernel
            def loss_from_fields():
                for i in ti.grouped(self.dst):
                    self.loss[None] += self.w[i] * self.dst[i] ** 2

            self._loss = loss_from_fields
        else:

            @ti.kernel
            def loss_from_ndarrays(
                dst: ti.types.ndarray(), w: ti.types.ndarray(), loss: ti.types.ndarray()
            ):
                for i in ti.grouped(dst):
                    loss[None] += w[i] * dst[i] ** 2

            self._loss = lambda: loss_from_ndarrays(self.dst, self.w, self.loss)

    def set_input(self, x):
        self.src.from_numpy(x)

    def forward(self, mode):
        tiinterp.interpolate_into(self.src, self.dst, mode=mode)
        self._loss()

    def gradient(self, mode):
        if self.storage == "ndarray":  # a Tape clears field gradients only
            self.src.grad.fill(0)
            self.dst.grad.fill(0)
        with ti.ad.Tape(loss=self.loss):
            self.forward(mode)
        return self.src.grad.to_numpy()

    def loss_value(self, x, mode):
        self.set_input(x)
        self.loss.fill(0)
        self.forward(mode)
        return float(self.loss.to_numpy() if self.storage == "ndarray" else self.loss[None])


@pytest.mark.parametrize(
    "storage", ["field", pytest.param("ndarray", marks=pytest.mark.requires_autodiff)]
)
@pytest.mark.parametrize(
    "dtype", ["float32", pytest.param("float64", marks=pytest.mark.requires_float64)]
)
@pytest.mark.parametrize("mode", MODES_2D)
def test_tape_gradient_matches_adjoint_and_finite_differences(arch, rng, storage, dtype, mode):
    # requires_float64 has skipped float64 where the device lacks it; tiinterp must agree.
    assert dtype != "float64" or supports_float64(), f"{arch}: float64 expected"
    x = rng.standard_normal(SRC).astype(dtype)
    w = rng.standard_normal(DST).astype(dtype)
    pipeline = Pipeline(storage, dtype, x, w)
    grad = pipeline.gradient(mode)

    y = tiinterp.interpolate(x, size=DST[2:], mode=mode)
    expected = tiinterp.interpolate_backward(2 * w * y, SRC, mode=mode)
    assert np.abs(grad - expected).max() <= tolerance("tape", dtype) * np.abs(expected).max()
    np.testing.assert_allclose(
        pipeline.dst.to_numpy(), y, rtol=0, atol=tolerance("tape_values", dtype)
    )

    if dtype == "float64":
        direction = rng.standard_normal(SRC)
        step = 1e-4
        numeric = (
            pipeline.loss_value(x + step * direction, mode)
            - pipeline.loss_value(x - step * direction, mode)
        ) / (2 * step)
        analytic = np.sum(grad * direction)
        assert abs(numeric - analytic) <= (
            tolerance("tape_finite_difference", dtype) * max(1.0, abs(analytic))
        )


@pytest.mark.parametrize("storage", ["field", "ndarray"])
def test_interpolate_into_outside_a_tape_equals_interpolate(arch, rng, storage):
    x = rng.standard_normal(SRC).astype(np.float32)
    make = ti.field if storage == "field" else ti.ndarray
    src, dst = make(ti.f32, SRC), make(ti.f32, DST)
    src.from_numpy(x)
    assert tiinterp.interpolate_into(src, dst, mode="bicubic", align_corners=True) is dst
    np.testing.assert_allclose(
        dst.to_numpy(),
        tiinterp.interpolate(x, size=DST[2:], mode="bicubic", align_corners=True),
        rtol=0,
        atol=tolerance("interpolate_into", "float32"),
    )


def test_interpolate_into_rejects_bad_arguments(arch):
    src, dst = ti.field(ti.f32, SRC), ti.field(ti.f32, DST)
    with pytest.raises(
        TypeError,
        match=r"src: expected a Taichi field or ndarray \(scalar, vector or matrix "
        "elements\\), got ndarray",
    ):
        tiinterp.interpolate_into(np.zeros(SRC, np.float32), dst)
    with pytest.raises(TypeError, match="dst: expected the dtype of src"):
        tiinterp.interpolate_into(src, ti.field(ti.f64, DST))
    with pytest.raises(
        ValueError, match=r"dst: expected \(N, C\) = \(2, 2\) as in src, got \(2, 3\)"
    ):
        tiinterp.interpolate_into(src, ti.field(ti.f32, (2, 3, 4, 4)))
    with pytest.raises(ValueError, match=r"dst: expected 2 axes like src \(4, 4\)"):
        tiinterp.interpolate_into(ti.field(ti.f32, (4, 4)), dst)
    loss = ti.field(ti.f32, (), needs_grad=True)
    with (
        pytest.raises(ValueError, match=r"src: expected gradients inside ti\.ad\.Tape"),
        ti.ad.Tape(loss=loss),
    ):
        tiinterp.interpolate_into(src, dst, mode="bilinear")


@pytest.mark.parametrize(
    "mode, src_shape, dst_shape, antialias",
    [
        ("linear", (1, 2, 9), (1, 2, 4), True),
        ("trilinear", (1, 2, 4, 5, 6), (1, 2, 6, 3, 7), False),
        ("area", (2, 1, 6, 8), (2, 1, 4, 3), False),
    ],
)
def test_interpolate_into_takes_every_dimensionality(
    arch, rng, mode, src_shape, dst_shape, antialias
):
    x = rng.standard_normal(src_shape).astype(np.float32)
    src, dst = ti.field(ti.f32, src_shape), ti.ndarray(ti.f32, dst_shape)
    src.from_numpy(x)
    tiinterp.interpolate_into(src, dst, mode=mode, antialias=antialias)
    np.testing.assert_allclose(
        dst.to_numpy(),
        tiinterp.interpolate(x, size=dst_shape[2:], mode=mode, antialias=antialias),
        rtol=0,
        atol=tolerance("interpolate_into", "float32"),
    )
