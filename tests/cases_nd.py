"""Cases for every mode of the registry (``tiinterp/_rules/filters.py``) with and without
antialias, on 1-D, 2-D and 3-D inputs: a new mode is tested here by being registered. Shared
by tests/ops/test_resize_modes.py and tests/data/make_golden.py."""

import zlib

import numpy as np

from tiinterp._rules.filters import REGISTRY

# isort: split
from tests.cases import mode_variants, output_hw

CORE_2D = {(mode, bool(align_corners)) for mode, align_corners in mode_variants()}

# (geometry id, input spatial shape, forward keyword arguments) per dimensionality
GEOMETRIES_ND = {
    1: [
        ("1d-up", (7,), dict(size=11)),
        ("1d-down", (13,), dict(size=6)),
        ("1d-scale", (7,), dict(scale_factor=1.5)),
        ("1d-from-1", (1,), dict(size=4)),
        ("1d-down-far", (40,), dict(size=3)),
    ],
    2: [
        ("2d-up", (5, 7), dict(size=(11, 16))),
        ("2d-down", (13, 17), dict(size=(6, 5))),
        ("2d-down-scale", (13, 17), dict(scale_factor=(0.37, 0.61))),
        ("2d-down-4x", (24, 20), dict(scale_factor=0.25)),
        ("2d-identity", (6, 9), dict(size=(6, 9))),
        ("2d-to-1", (5, 6), dict(size=(1, 1))),
        ("2d-thin", (1, 40), dict(size=(3, 25))),
    ],
    3: [
        ("3d-mixed", (3, 4, 5), dict(size=(5, 2, 7))),
        ("3d-scale", (4, 6, 3), dict(scale_factor=(0.5, 1.5, 2.0))),
        ("3d-down", (9, 8, 10), dict(size=(4, 3, 5))),
    ],
}


def _variants(mode):
    """(align_corners, antialias) pairs a mode takes: every filter mode plainly, with
    corners aligned and antialiased; an alias antialiased only (it requires it)."""
    if mode.filter is None:
        return [(None, False)]
    if mode.alias_of is not None:
        return [(False, True)]
    return [(False, False), (True, False), (False, True)]


def _modes_nd(dims):
    """(mode, align_corners, antialias, reference) for every mode of the registry that
    takes ``dims`` spatial axes: reference "pytorch" or "jax" (the library whose numbers the
    registry says the call gives), or None where no library's numbers are stored (then the
    oracle checks it). The 2-D calls that tests/cases.py's geometries already run on
    every arch are left out."""
    cases = []
    for mode in REGISTRY.values():
        if dims not in mode.dims:
            continue
        for align_corners, antialias in _variants(mode):
            if dims == 2 and (mode.name, bool(align_corners)) in CORE_2D and not antialias:
                continue
            reference = mode.reference(dims, align_corners, antialias)
            # PIL, OpenCV and ImageMagick have no gradients: tests/cli/test_pil_filters.py and
            # tests/ops/test_forward_references.py compare forward results with them.
            stored = reference is not None and reference.library in ("pytorch", "jax")
            library = reference.library if stored else None
            cases.append((mode.name, align_corners, antialias, library))
    return cases


MODES_ND = {dims: _modes_nd(dims) for dims in GEOMETRIES_ND}


def nd_key(geometry_id, mode, align_corners, antialias, dtype):
    return f"{geometry_id}|{mode}|{align_corners}|aa={antialias}|{dtype}"


def nd_cases():
    for dims, geometries in GEOMETRIES_ND.items():
        for geometry_id, spatial, kwargs in geometries:
            for mode, align_corners, antialias, reference in MODES_ND[dims]:
                for dtype in ("float32", "float64"):
                    yield (
                        geometry_id,
                        spatial,
                        kwargs,
                        mode,
                        align_corners,
                        antialias,
                        reference,
                        dtype,
                    )


def nd_inputs(key, spatial, kwargs, dtype):
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    shape = (2, 2) + tuple(spatial)
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape[:2] + output_hw(spatial, kwargs)).astype(dtype)
    return x, g


# Libraries whose numbers are stored forward only (they have no gradients), one file each:
# tests/data/golden_<library>.npz.
FORWARD_ONLY = ("opencv", "imagemagick", "scipy")

# SciPy's geometries: every input axis has 12 samples or more, because SciPy 1.17's cubic
# spline prefilter with mode="reflect" is off on short axes (by about 0.27^(2n) on n samples:
# 4e-4 at 3, 1e-6 at 5; scipy issue gh-24550) where tiinterp solves for the exact spline.
# The short axes are checked against the oracle's exact solve (tests/ops/test_resize_modes.py).
SCIPY_GEOMETRIES = [
    ("1d-up", (15,), (37,)),
    ("1d-down", (40,), (13,)),
    ("2d-up", (14, 19), (31, 23)),
    ("2d-down", (25, 16), (12, 40)),
    ("2d-same", (12, 20), (12, 20)),
    ("3d-mixed", (12, 13, 14), (7, 20, 14)),
]


# OpenCV's geometries beyond the 2-D ones given by ``size``: one axis growing while the
# other shrinks (INTER_AREA's 2-tap rule on both), and a footprint that leaves 0.0005 of a
# sample at its end (INTER_AREA drops parts of 1e-3 or less).
OPENCV_GEOMETRIES = [("2d-mixed", (9, 30), (14, 11)), ("2d-sliver", (3, 2000), (3, 1999))]


def _forward_geometries(library):
    """(geometry id, input spatial shape, output size) a library's golden data covers:
    SciPy's own (any dims), else the 2-D geometries given by ``size`` (``cv2.resize`` rounds
    a scale factor's output size, PyTorch floors it), OpenCV's with its own."""
    if library == "scipy":
        return SCIPY_GEOMETRIES
    extra = OPENCV_GEOMETRIES if library == "opencv" else []
    return extra + [
        (g, spatial, kwargs["size"]) for g, spatial, kwargs in GEOMETRIES_ND[2] if "size" in kwargs
    ]


def forward_reference_cases():
    """(library, key, spatial, size, mode, library's name, align_corners, antialias, dtype)
    for every mode whose registry entry names a library in FORWARD_ONLY."""
    for name, mode in REGISTRY.items():
        for reference in mode.references:
            if reference.library not in FORWARD_ONLY or mode.alias_of is not None:
                continue
            aligns = [a for a in reference.align_corners if a is not None] or [None]
            for geometry_id, spatial, size in _forward_geometries(reference.library):
                if len(spatial) not in reference.dims:
                    continue
                for align_corners in aligns:
                    for dtype in ("float32", "float64"):
                        corners = "|corners" if align_corners else ""
                        key = f"{geometry_id}|{name}{corners}|{dtype}"
                        yield (
                            reference.library,
                            key,
                            spatial,
                            size,
                            name,
                            reference.name,
                            align_corners,
                            reference.antialias[0],
                            dtype,
                        )
