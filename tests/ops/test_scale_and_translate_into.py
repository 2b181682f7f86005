"""scale_and_translate_into: tiinterp.scale_and_translate between Taichi fields or ndarrays,
and inside ti.ad.Tape with gradients to the image and to the scale and the translation
(Taichi fields of one float per axis), against the NumPy functions (themselves checked
against JAX, finite differences and the adjoint identity in test_scale_and_translate.py),
on every arch."""

import numpy as np
import pytest

import tiinterp
from tests.tolerances import relative_error, tolerance
from tiinterp._runtime.taichi import ti

REALS = {"float32": ti.f32, "float64": ti.f64}
# (method, antialias, scale, translation) on a (2, 3, 7, 9) image, axes 2 and 3 -> (5, 12).
CASES = [
    ("linear", True, (0.7, 1.4), (0.3, -1.2)),
    ("cubic", False, (0.5, 1.3), (-0.4, 0.8)),
    ("lanczos3", True, (0.8, 1.25), (0.0, 0.6)),
    ("area", True, (0.6, 1.1), (0.2, -0.3)),
]
IN_SHAPE, OUT_SHAPE = (2, 3, 7, 9), (2, 3, 5, 12)


@pytest.mark.parametrize("storage", ["field", "ndarray"])
@pytest.mark.parametrize("method, antialias, scale, translation", CASES)
def test_values_are_scale_and_translates(arch, storage, method, antialias, scale, translation):
    make = ti.field if storage == "field" else ti.ndarray
    x = np.random.default_rng(1).standard_normal(IN_SHAPE).astype(np.float32)
    src, dst = make(ti.f32, IN_SHAPE), make(ti.f32, OUT_SHAPE)
    src.from_numpy(x)
    tiinterp.scale_and_translate_into(src, dst, scale, translation, method, antialias)
    expected = tiinterp.scale_and_translate(
        x, OUT_SHAPE, (2, 3), scale, translation, method, antialias
    )
    assert relative_error(dst.to_numpy(), expected) <= tolerance("reorder", "float32")


def test_vector_elements_are_channels(arch):
    """A (7, 9) field of 2-vectors (every axis spatial): each component as a scalar image."""
    x = np.random.default_rng(2).standard_normal((7, 9, 2)).astype(np.float32)
    src, dst = ti.Vector.field(2, ti.f32, (7, 9)), ti.Vector.field(2, ti.f32, (5, 12))
    src.from_numpy(x)
    tiinterp.scale_and_translate_into(src, dst, (0.7, 1.4), (0.3, -1.2), "cubic")
    expected = tiinterp.scale_and_translate(x, (5, 12, 2), (0, 1), (0.7, 1.4), (0.3, -1.2), "cubic")
    assert relative_error(dst.to_numpy(), expected) <= tolerance("reorder", "float32")


class Zoom:
    """src -> scale_and_translate_into -> dst -> loss = sum(w * dst), the scale and the
    translation Taichi fields with gradients."""

    def __init__(self, method, antialias, dtype):
        real = REALS[dtype]
        self.method, self.antialias = method, antialias
        self.src = ti.field(real, IN_SHAPE, needs_grad=True)
        self.dst = ti.field(real, OUT_SHAPE, needs_grad=True)
        self.scale = ti.field(real, 2, needs_grad=True)
        self.translation = ti.field(real, 2, needs_grad=True)
        self.w = ti.field(real, OUT_SHAPE)
        self.loss = ti.field(real, (), needs_grad=True)

        @ti.kernel
        def weigh():
            for i in ti.grouped(self.dst):
                self.loss[None] += self.w[i] * self.dst[i]

        self._weigh = weigh

    def gradients(self, x, w, scale, translation):
        for field, value in (
            (self.src, x),
            (self.w, w),
            (self.scale, np.array(scale)),
            (self.translation, np.array(translation)),
        ):
            field.from_numpy(value.astype(self.src.to_numpy().dtype))
        with ti.ad.Tape(loss=self.loss):
            tiinterp.scale_and_translate_into(
                self.src, self.dst, self.scale, self.translation, self.method, self.antialias
            )
            self._weigh()
        return tuple(a.grad.to_numpy() for a in (self.src, self.scale, self.translation))


@pytest.mark.requires_float64
@pytest.mark.parametrize("method, antialias, scale, translation", CASES)
def test_tape_gradients_to_image_scale_and_translation(arch, method, antialias, scale, translation):
    """The Tape's gradients are scale_and_translate_backward's (the same tables and passes:
    bit-identical on the CPU, 1.3e-16 apart on Vulkan, measured), and bit-identical on a
    rerun."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(IN_SHAPE), rng.standard_normal(OUT_SHAPE)
    zoom = Zoom(method, antialias, "float64")
    gradients = zoom.gradients(x, w, scale, translation)
    expected = tiinterp.scale_and_translate_backward(
        w, x, (2, 3), scale, translation, method, antialias
    )
    for actual, wanted in zip(gradients, expected, strict=True):
        assert relative_error(actual, wanted) <= tolerance("reorder", "float64")
    again = zoom.gradients(x, w, scale, translation)
    assert all(np.array_equal(a, b) for a, b in zip(again, gradients, strict=True))


def test_bad_parameters_are_refused(arch):
    src, dst = ti.field(ti.f32, IN_SHAPE), ti.field(ti.f32, OUT_SHAPE)
    with pytest.raises(ValueError, match=r"scale: expected a Taichi array of 2 scalars"):
        tiinterp.scale_and_translate_into(src, dst, ti.field(ti.f32, 3), (0.0, 0.0))
    with pytest.raises(TypeError, match="translation: expected dtype f32 or f64, got i32"):
        tiinterp.scale_and_translate_into(src, dst, (1.0, 1.0), ti.field(ti.i32, 2))
    with pytest.raises(ValueError, match="scale: expected positive numbers"):
        tiinterp.scale_and_translate_into(src, dst, (1.0, -1.0), (0.0, 0.0))
    with pytest.raises(ValueError, match="method: expected one of 'linear'"):
        tiinterp.scale_and_translate_into(src, dst, (1.0, 1.0), (0.0, 0.0), "nearest")
    with pytest.raises(ValueError, match=r"dst: expected \(N, C\) = \(2, 3\)"):
        tiinterp.scale_and_translate_into(src, ti.field(ti.f32, (2, 4, 5, 12)), (1, 1), (0, 0))
