"""Every error bound of the test suite, in one table keyed by (reference, dtype).

``tolerance(reference, dtype)`` looks one up; ``reference`` names what a result is compared
with (and how), ``dtype`` is the dtype the computation ran in ("float32" / "float64", or a
NumPy dtype, or Taichi's "f32" / "f64"). Where two tests compare against different things, or
measure the error differently, each bound has its own name, even when the values agree.

Unless an entry says otherwise, errors are ``relative_error(actual, expected)``:
``max |actual - expected| / max |expected|``, on N(0, 1) data.
"""

import numpy as np

TOLERANCE = {
    # --- Resize (interpolate / interpolate_backward) ----------------------------------------------
    # Against the float64 oracle (tests/oracle.py). float32 includes the float32 coordinate
    # arithmetic PyTorch mandates: a source coordinate rounded to float32 moves a sample by
    # up to ulp(src).
    ("oracle", "float32"): 1e-5,
    ("oracle", "float64"): 1e-14,
    # Against the stored PyTorch references (tests/data/golden_resize.npz). PyTorch forms 2-D
    # weights as products, in float32 for float32 data (measured worst vs tiinterp 1.1e-6
    # bicubic).
    ("pytorch", "float32"): 3e-6,
    ("pytorch", "float64"): 1e-14,
    # Against the stored JAX references (lanczos). JAX evaluates lanczos weights in float32
    # (measured 5.3e-6 from the float64 oracle where tiinterp is 1.3e-7).
    ("jax", "float32"): 1e-5,
    ("jax", "float64"): 1e-14,
    # Against Pillow's Image.resize on float images (tests/cli/test_pil_filters.py): float32
    # samples, float64 weights and sums rounded to float32 once, as tiinterp's float64 result
    # is rounded here (measured worst 5.9e-8, one float32 rounding).
    ("pil", "float64"): 2.5e-7,
    # Against ImageMagick 6.9 Q16 HDRI's -resize (tests/ops/test_forward_references.py,
    # tests/data/golden_imagemagick.npz), which filters in float32 (measured 1.5e-7).
    ("imagemagick", "float32"): 1e-6,
    ("imagemagick", "float64"): 1e-6,
    # Against cv2.resize (tests/ops/test_forward_references.py, tests/data/golden_opencv.npz):
    # lanczos4 and area-opencv. OpenCV rounds lanczos4's source coordinate to float32, as
    # tiinterp does, and computes weights in float32 (measured 2.8e-7; area-opencv 1.2e-7).
    ("opencv", "float32"): 1e-6,
    ("opencv", "float64"): 1e-6,
    # Against scipy.ndimage.zoom(order=3) (tests/ops/test_forward_references.py,
    # tests/data/golden_scipy.npz), which prefilters and interpolates in float64; tiinterp's
    # float32 sums 56 float32 products per axis (measured 3.2e-7 and 8.5e-15).
    ("scipy", "float32"): 1e-6,
    ("scipy", "float64"): 5e-14,
    # Cubic B-spline sampling (tests/rules/test_bspline.py): the prefilter's table times the
    # spline's equations against the identity (the 5e-16 cut plus rounding: measured
    # 7.8e-16); bspline_coefficients_into then funcs.sample_bspline against the oracle's
    # exact solve and against scipy.ndimage.map_coordinates(order=3), both in float64
    # (float32: coefficients summed from 55 float32 products per axis, then 16 or 64 taps;
    # measured 1.3e-6 against both; float64: 5.5e-15 and 9.9e-15).
    ("bspline_prefilter", "float64"): 2e-15,
    ("bspline_oracle", "float32"): 3e-6,
    ("bspline_oracle", "float64"): 2e-14,
    ("scipy_spline", "float32"): 3e-6,
    ("scipy_spline", "float64"): 3e-14,
    # tiinterp.scale_and_translate against jax.image.scale_and_translate in the same run
    # (tests/ops/test_scale_and_translate.py). Both compute the sample coordinates and the
    # weights in the image's dtype, in sums of their own order (measured 6.9e-7 over 6
    # random inputs of every case, and 6.9e-16).
    ("jax_scale_translate", "float32"): 1e-6,
    ("jax_scale_translate", "float64"): 1e-14,
    # ... and its gradients (image, scale, translation) against jax.grad, float64 (measured
    # 1.1e-14, the translation's).
    ("jax_scale_translate_grad", "float64"): 1e-13,
    # Gradients with respect to the scale and the translation against central differences
    # (step 1e-6) of <scale_and_translate(x), g>, relative to max(1, |analytic|): the loss
    # is smooth there, so truncation (~1e-12) and rounding (~1e-10) (measured 9.7e-10).
    ("finite_difference_parameters", "float64"): 1e-8,
    # scale_and_translate_backward's gradients="autodiff" (ti.ad through the weights computed
    # from the parameters in Taichi) against the hand-written derivative tables, at
    # parameters off the weights' kinks: the same formulas in another order (measured
    # 1.1e-14 over 3 geometries x 6 methods x antialias on and off).
    ("autodiff_parameters", "float64"): 5e-14,
    # Against tests/data/golden_resize_modes.npz (antialias, area, lanczos5, 1-D and 3-D;
    # PyTorch or JAX as each case names). float32: PyTorch's float32 weights, JAX's float32
    # lanczos.
    ("modes_golden", "float32"): 1e-5,
    ("modes_golden", "float64"): 1e-13,
    # Two evaluations of the same sums of products in a different order (adjoint vs ti.ad;
    # the SIMD configuration vs the default, tests/kernels/test_simd_configuration.py: 6.3e-7 and
    # 7.6e-16 measured on taichi 1.7.4, fast math reordering and fusing differently; a
    # serial loop vs a parallel one in the SIMD configuration, tests/engine/test_small_calls.py:
    # 3.8e-7 and 1.0e-15 on taichi 1.7.4; the cubic B-spline's 56-tap sums, adjoint vs
    # ti.ad: 2.8e-7 and 1.0e-15).
    ("reorder", "float32"): 1e-6,
    ("reorder", "float64"): 2e-15,
    # <A x, g> vs <x, A^T g>, relative to sum |A x * g|: both sides sum the same products.
    ("dot", "float32"): 1e-5,
    ("dot", "float64"): 1e-13,
    # The adjoint vs central differences (step 1e-3) of <interpolate(x), g> along random
    # directions, relative to max(1, |analytic|): resize is linear in x, so only rounding.
    ("finite_difference", "float64"): 1e-9,
    # NaN / Inf inputs (tests/ops/test_nonfinite.py): the finite values of the result against
    # PyTorch's, computed in the same run.
    ("pytorch_nonfinite", "float32"): 1e-5,
    ("pytorch_nonfinite", "float64"): 1e-12,
    # float32 axes of 200,000 -> 500,000 samples against PyTorch in the same run
    # (test_robustness.py): rounding the product first drifted by up to 7.8e-3.
    ("pytorch_long_axis", "float32"): 1e-6,
    # Torch tensors through tiinterp vs torch.nn.functional.interpolate and its autograd
    # gradient in the same run (tests/runtime/test_array_kinds.py), float64 bicubic, absolute
    # error (atol).
    ("pytorch_tensor", "float64"): 1e-14,
    # Taichi ndarray / torch.Tensor / autodiff results vs the NumPy adjoint or forward
    # (tests/runtime/test_array_kinds.py), float32; absolute error (atol) on N(0, 1) data. Taichi
    # ndarrays cannot be reshaped, so on the CPU they take the generic kernel while NumPy
    # takes the fused one: the same sums, in another order.
    ("array_kinds", "float32"): 1e-6,
    # The same float32 bicubic resize on every available arch vs the CPU's result
    # (tests/runtime/test_runtime.py), absolute error (atol): the archs may round differently.
    ("cross_arch", "float32"): 2e-6,
    # The fused gather against the same passes run separately (tests/engine/test_device_path.py):
    # the same sums in the same order, so only a compiler's fused multiply-adds can differ
    # (Note [Fused summation order]); relative_error, bilinear/bicubic/lanczos3.
    ("fused_gather", "float32"): 0.0,
    # A float64 tap table (tiinterp._rules.taps) as a dense matrix vs the oracle's matrix
    # (tests/rules/test_taps.py), absolute error (atol).
    ("taps", "float64"): 1e-14,
    # --- grid_sample ------------------------------------------------------------------------------
    # Against the stored PyTorch results (tests/data/golden_grid_sample.npz) and, for large
    # batches, PyTorch float64 in the same run, as the issue asks on N(0, 1) data: absolute
    # error relative to the larger of 1 and the largest reference value (grid gradients scale
    # with the image size).
    ("grid_pytorch", "float32"): 1e-5,
    ("grid_pytorch", "float64"): 1e-10,
    # method="autodiff" vs the adjoint of grid_sample, on the grid_pytorch scale.
    ("grid_reorder", "float32"): 1e-5,
    ("grid_reorder", "float64"): 1e-10,
    # <grid_sample(x), g> vs <x, grad_input>, relative to sum |x * grad_input|.
    ("grid_dot", "float64"): 1e-12,
    # grad_grid vs central differences (step 1e-6) along a random direction, relative to
    # max(1, |numeric|): the seeded grid has no tap boundary or padding fold within a step.
    ("grid_finite_difference", "float64"): 1e-6,
    # Torch tensors through tiinterp vs torch.nn.functional.grid_sample in the same run,
    # float64 bicubic reflection, absolute error (atol).
    ("grid_pytorch_tensor", "float64"): 1e-12,
    # --- tiinterp.torch, the PyTorch bridge (tests/public/test_torch_bridge.py) -------------------
    # tiinterp.torch.interpolate vs F.interpolate, values and autograd gradients, in the same
    # run, relative_error (the nearest modes' values are compared exactly). Measured worst:
    # 9.0e-7 (float32 bicubic), 1.3e-15 (float64 antialiased bicubic); the bounds are the
    # "pytorch" ones.
    ("torch_bridge", "float32"): 3e-6,
    ("torch_bridge", "float64"): 1e-14,
    # tiinterp.torch.grid_sample vs F.grid_sample, values and both gradients, on the
    # "grid_pytorch" scale (absolute error relative to max(1, max |reference|)), with its
    # bounds. Measured worst: 2.2e-7 (float32), 4.4e-16 (float64).
    ("torch_bridge_grid", "float32"): 1e-5,
    ("torch_bridge_grid", "float64"): 1e-10,
    # A model under torch.compile vs eagerly (loss and gradients), absolute error (atol): the
    # tiinterp ops run the same kernels either way, but the backend may fuse or reorder the
    # torch code around them (measured: 0 with aot_eager and with inductor).
    ("torch_compile", "float32"): 1e-6,
    # --- interpolate_into inside ti.ad.Tape (tests/ops/test_pipeline.py) --------------------------
    # The Tape's src.grad vs interpolate_backward of the same loss gradient, relative to
    # max |expected|: the same adjoint, on data that went through a Taichi loss kernel.
    ("tape", "float32"): 1e-5,
    ("tape", "float64"): 1e-13,
    # The pipeline's dst vs interpolate of the same input, absolute error (atol): ten times
    # the Tape bound.
    ("tape_values", "float32"): 1e-4,
    ("tape_values", "float64"): 1e-12,
    # The Tape's gradient vs central differences (step 1e-4) of the quadratic loss,
    # relative to max(1, |analytic|).
    ("tape_finite_difference", "float64"): 1e-7,
    # interpolate_into on fields / ndarrays vs interpolate on NumPy arrays, outside a Tape,
    # float32, absolute error (atol), as "array_kinds".
    ("interpolate_into", "float32"): 1e-6,
    # A device arch's float32 resizes against the CPU's (tests/ops/test_arch_agreement.py),
    # relative to max(1, max |result|): the two compile the same sums with different
    # contractions and orders (lavapipe, 114 forward and 114 adjoint cases: worst 3.3e-7
    # and 4.2e-7; 61 of each not bit-identical).
    ("arch_agreement", "float32"): 1e-6,
    # --- tiinterp.funcs samplers (tests/public/test_funcs.py) -------------------------------------
    # A sampled value (or a field gradient, which is the tap weight) vs the independent
    # reference_sample, relative to max(1, |expected|).
    ("funcs", "float32"): 1e-5,
    ("funcs", "float64"): 1e-12,
    # Tape gradients vs central differences (step 1e-6) of the samplers' loss, relative to
    # max(1, |numeric|): with respect to the field values (linear) and to the points.
    ("funcs_field_finite_difference", "float64"): 1e-7,
    ("funcs_point_finite_difference", "float64"): 1e-6,
    # The point gradient along an axis inside the array, at a point far outside along
    # another, vs central differences (step 1e-6) of the float64 reference_sample:
    # 1000 times ("funcs", dtype), for the differences' truncation and rounding.
    ("funcs_far_point_derivative", "float32"): 1e-2,
    ("funcs_far_point_derivative", "float64"): 1e-9,
    # --- tiinterp.jax (tests/public/test_jax_bridge.py) -------------------------------------------
    # jax.test_util.check_grads(order=1 or 2, modes=["rev"]) atol and rtol: <vjp(ct), v> vs
    # <ct, central difference (its default step, 1e-4) along v>. A resize is linear in its
    # input, so only rounding separates the two (every case passes at 1e-11).
    ("jax_check_grads", "float64"): 1e-9,
    # The same for grid_sample, with step 1e-6: its output is a polynomial of degree up to 3
    # per axis in the grid between kinks (bicubic, trilinear), and the difference's
    # truncation error (step 1e-4: up to 1e-6) and rounding (step 1e-6: the worst case
    # between 1e-9 and 1e-8) show.
    ("jax_grid_check_grads", "float64"): 1e-7,
    # Forward and jax.grad against jax.image.resize in the same run (lanczos3/5, antialiased
    # linear family and bicubic), relative_error.
    ("jax_image_resize", "float32"): 1e-5,
    ("jax_image_resize", "float64"): 1e-14,
    # --- The tiinterp command (tests/cli/test_cli.py) ---------------------------------------------
    # |tiinterp resize - PIL's Image.resize(size, Image.LANCZOS)| in 8-bit levels, lanczos3
    # with antialias, on the test's smooth-plus-noise pictures (97x83 -> 40x31, 37x29 ->
    # 90x71). PIL rounds to 8 bits between its horizontal and vertical passes, tiinterp only
    # at the end (a two-pass tiinterp with PIL's rounding between reproduces PIL exactly).
    # Gray, RGB and RGBA's alpha: measured max 1, mean 0.13 to 0.22.
    ("cli_pil_lanczos_max", "uint8"): 1,
    ("cli_pil_lanczos_mean", "uint8"): 0.25,
    # RGBA colour (alpha 128..255): PIL also keeps the premultiplied colour in 8 bits and
    # unmultiplies that, which amplifies its rounding by 255 / alpha; measured max 3 (down)
    # and 4 (up), mean 0.57 and 0.70.
    ("cli_pil_lanczos_rgba_colour_max", "uint8"): 4,
    ("cli_pil_lanczos_rgba_colour_mean", "uint8"): 0.75,
}

_TAICHI_NAMES = {"f32": "float32", "f64": "float64"}


def tolerance(reference, dtype):
    """The error bound for comparing a ``dtype`` result with ``reference``."""
    name = _TAICHI_NAMES.get(dtype, dtype) if isinstance(dtype, str) else dtype
    name = np.dtype(name).name
    try:
        return TOLERANCE[(reference, name)]
    except KeyError:
        raise KeyError(
            f"no tolerance for ({reference!r}, {name!r}) in tests/tolerances.py; "
            "add one with a comment saying where its size comes from"
        ) from None


def golden_tolerance(mode, dtype):
    """The bound against the stored references of tests/data/golden_resize.npz: JAX for the
    lanczos modes, PyTorch otherwise."""
    return tolerance("jax" if mode.startswith("lanczos") else "pytorch", dtype)


def relative_error(actual, expected):
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(np.abs(expected).max(), 1e-300)
    return np.abs(np.asarray(actual, dtype=np.float64) - expected).max() / scale
