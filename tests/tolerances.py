"""Per-dtype error bounds shared by the forward and backward tests.

Errors are ``max |actual - expected| / max |expected|`` on N(0, 1) data.
"""
import numpy as np

# Against the float64 oracle. float32 includes the float32 coordinate arithmetic PyTorch
# mandates: a source coordinate rounded to float32 moves a sample by up to ulp(src).
ORACLE_TOL = {"float32": 1e-5, "float64": 1e-14}

# Against the stored references. PyTorch forms 2-D weights as products, in float32 for
# float32 data (measured worst vs tiinterp 1.1e-6 bicubic); JAX evaluates lanczos weights in
# float32 (measured 5.3e-6 from the float64 oracle where tiinterp is 1.3e-7).
GOLDEN_TOL = {
    ("pytorch", "float32"): 3e-6,
    ("pytorch", "float64"): 1e-14,
    ("jax", "float32"): 1e-5,
    ("jax", "float64"): 1e-14,
}


def golden_tolerance(mode, dtype):
    return GOLDEN_TOL[("jax" if mode.startswith("lanczos") else "pytorch", dtype)]


def relative_error(actual, expected):
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(np.abs(expected).max(), 1e-300)
    return np.abs(np.asarray(actual, dtype=np.float64) - expected).max() / scale

# Two evaluations of the same sums of products in a different order (adjoint vs ti.ad).
REORDER_TOL = {"float32": 1e-6, "float64": 1e-15}

# <A x, g> vs <x, A^T g>, relative to sum |A x * g|: both sides sum the same products.
DOT_TOL = {"float32": 1e-5, "float64": 1e-13}
