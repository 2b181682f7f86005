"""grid_sample cases shared by the tests and tests/data/make_golden.py."""

import zlib

import numpy as np

INPUT_SHAPES = {2: (2, 3, 5, 7), 3: (2, 2, 4, 5, 6)}
GRID_SHAPES = {2: (2, 4, 6, 2), 3: (2, 3, 4, 5, 3)}
MODES = {2: ("nearest", "bilinear", "bicubic"), 3: ("nearest", "bilinear")}
PADDINGS = ("zeros", "border", "reflection")
# random: inside and a little outside [-1, 1]; borders: exactly on the extreme samples, the
# image edges, pixel centres and edges, and far outside; nan: random with NaN entries.
GRID_KINDS = ("random", "borders", "nan")


def grid_key(dims, mode, padding, align_corners, kind, dtype):
    return f"grid{dims}d|{mode}|{padding}|{align_corners}|{kind}|{dtype}"


def grid_cases():
    for dims in (2, 3):
        for mode in MODES[dims]:
            for padding in PADDINGS:
                for align_corners in (False, True):
                    for kind in GRID_KINDS:
                        for dtype in ("float32", "float64"):
                            yield dims, mode, padding, align_corners, kind, dtype


def grid_inputs(dims, mode, padding, align_corners, kind, dtype):
    """Seeded input, grid and output gradient for one case."""
    key = grid_key(dims, mode, padding, align_corners, kind, dtype)
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    x = rng.standard_normal(INPUT_SHAPES[dims])
    grid = rng.uniform(-1.2, 1.2, GRID_SHAPES[dims])
    if kind == "borders":
        sizes = INPUT_SHAPES[dims][2:][::-1]  # grid component 0 runs along the last axis
        for component, size in enumerate(sizes):
            centres = (
                (2 * np.arange(size) + 1) / size - 1
                if not align_corners
                else 2 * np.arange(size) / max(size - 1, 1) - 1
            )
            edges = 2 * np.arange(size + 1) / size - 1
            special = np.concatenate([[-1.0, 1.0, 0.0, -3.0, 3.0], centres, edges])
            grid[..., component] = rng.choice(special, grid.shape[:-1])
    if kind == "nan":
        grid[rng.random(grid.shape) < 0.15] = np.nan
    g = rng.standard_normal(INPUT_SHAPES[dims][:2] + GRID_SHAPES[dims][1:-1])
    return x.astype(dtype), grid.astype(dtype), g.astype(dtype)
