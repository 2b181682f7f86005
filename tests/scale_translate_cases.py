"""scale_and_translate cases shared by the tests and tests/data/make_golden.py (which stores
``jax.image.scale_and_translate``'s values and gradients for them)."""

import zlib

import numpy as np

from tiinterp._rules.scale_translate import METHODS

# (id, input shape, spatial_dims, output shape, scale, translation): 1-3 spatial axes, in
# the middle of the array or at its end, negative axes, an axis kept (scale 1, no shift),
# outputs partly and wholly outside the input (JAX's mask), strong shrinking.
GEOMETRIES = [
    ("1d", (3, 17), (1,), (3, 11), (0.7,), (0.9,)),
    ("2d-nchw", (2, 2, 9, 11), (2, 3), (2, 2, 13, 7), (1.4, 0.6), (-1.3, 0.8)),
    ("2d-nhwc", (2, 9, 11, 3), (1, 2), (2, 6, 16, 3), (0.55, 1.6), (1.2, -2.4)),
    ("3d", (1, 6, 7, 5), (-3, -2, -1), (1, 4, 9, 5), (0.7, 1.3, 1.0), (0.25, -0.5, 0.0)),
    ("2d-outside", (1, 1, 9, 9), (2, 3), (1, 1, 9, 9), (1.0, 1.1), (4.5, -3.0)),
    ("2d-shrink", (1, 1, 40, 30), (2, 3), (1, 1, 5, 7), (0.12, 0.25), (0.3, 0.1)),
]


def scale_translate_cases():
    """(id, input shape, spatial_dims, output shape, scale, translation, method,
    antialias) for every geometry, method and antialias."""
    for geometry in GEOMETRIES:
        for method in METHODS:
            for antialias in (True, False):
                yield (*geometry, method, antialias)


def case_key(geometry_id, method, antialias):
    return f"{geometry_id}-{method}-aa{antialias}"


def inputs(geometry_id, in_shape, out_shape, dtype):
    """Seeded input and output gradient of one geometry."""
    rng = np.random.default_rng(zlib.crc32(f"scale_and_translate|{geometry_id}".encode()))
    return (
        rng.standard_normal(in_shape).astype(dtype),
        rng.standard_normal(out_shape).astype(dtype),
    )


def jax_values_and_gradients(case, dtype):
    """``jax.image.scale_and_translate``'s result for one case in ``dtype`` and, for
    float64, ``jax.grad`` of ``sum(result * g)`` with respect to the image, the scale and
    the translation (None for float32), in JAX's 64-bit mode."""
    import jax
    import jax.numpy as jnp

    from tests.jax_x64 import x64

    geometry_id, in_shape, dims, out_shape, scale, translation, method, antialias = case
    x, g = inputs(geometry_id, in_shape, out_shape, dtype)

    def resample(image, s, t):
        return jax.image.scale_and_translate(
            image, out_shape, dims, s, t, method=method, antialias=antialias
        )

    with x64():
        arguments = (jnp.asarray(x), jnp.asarray(scale, dtype), jnp.asarray(translation, dtype))
        values = np.asarray(resample(*arguments))
        if dtype != "float64":
            return values, None

        def loss(*arguments):
            return jnp.sum(resample(*arguments) * g)

        gradients = jax.grad(loss, argnums=(0, 1, 2))(*arguments)
        return values, tuple(np.asarray(gradient) for gradient in gradients)
