"""``warmup``: compile the kernels of a mode's resizes now, before the calls that need them.

A Taichi kernel is compiled on its first launch in each process, and even with a warm
kernel cache Taichi runs its Python front end over it first (0.1-0.4 s a kernel on the CPU:
Note [Bounded kernel variants] in ``_kernels/simd.py``). ``warmup`` makes the calls that
reach each kernel form a mode's resizes take, on small synthetic images, so that a server
or a batch job pays for them at start rather than on its first requests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._rules import validate as v
from .._rules.filters import ANTIALIAS_MODES, MODE_DIMS, MODES
from .._runtime.session import serialized
from .resize import interpolate, interpolate_backward

# (input spatial shape, output spatial shape) of 2-D calls, one per kernel form of the CPU
# path: results of at most 2^16 elements (the WIDE tables, serial loops) with and without
# half-vector loads and vector stores, then larger ones (compile-time tables of up to 8
# taps) enlarging and reducing by 2, with lines that take vector stores and lines that do
# not. Three channels, as images have.
_SHAPES_2D = (
    ((90, 120), (48, 64)),
    ((90, 122), (45, 61)),
    ((300, 400), (48, 64)),
    ((300, 400), (45, 61)),
    ((256, 256), (512, 512)),
    ((512, 512), (256, 256)),
    ((255, 257), (510, 514)),
)
_DTYPES = {"float32": np.float32, "float64": np.float64}


def _calls(mode: str, dims: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The (input shape, output size) pairs of ``mode``'s calls on ``dims`` spatial axes
    (2-D for the modes that take several)."""
    if dims == 2:
        return [((1, 3, *shape), size) for shape, size in _SHAPES_2D]
    # 1-D and 3-D modes: a line or a volume per form (small and large results).
    if dims == 1:
        return [((1, 3, 120), (64,)), ((1, 3, 4096), (8192,)), ((1, 3, 8192), (4096,))]
    return [((1, 1, 12, 16, 16), (6, 8, 8)), ((1, 1, 32, 32, 32), (64, 64, 64))]


@serialized
def warmup(
    modes: str | Sequence[str] | None = None,
    *,
    dtypes: str | Sequence[str] = "float32",
    antialias: bool | None = None,
    backward: bool = False,
) -> None:
    """Compile now the kernels that resizes of ``modes`` take, so that later calls do not.

    Runs each mode's :func:`interpolate` (and with ``backward``, its
    :func:`interpolate_backward`) on small synthetic arrays of three channels, one call per
    kernel form of the current arch's path: on the CPU, results of at most 2^16 elements
    (thumbnails, small calls: one form for any size and scale), then larger ones enlarging
    and reducing by 2, with and without vector-aligned lines. After it, on the CPU, a call
    of those modes with a result of at most 2^16 elements compiles nothing new; a larger
    one may still compile the form of its own tap counts (up to 8 per axis, each once per
    process). On GPU archs it compiles the forms of these calls, and a call of another
    size may still compile one of its own. Taichi is initialised first if it is not (as by
    any call).

    Parameters
    ----------
    modes : str or sequence of str, optional
        Names in :data:`tiinterp.MODES`; None: every mode.
    dtypes : str or sequence of str
        ``"float32"`` and/or ``"float64"``: each is its own set of kernels.
    antialias : bool, optional
        None: both with and without antialias, for the modes that take it; True or False:
        that one only (True is ignored for modes without antialias).
    backward : bool
        Also compile the hand-written adjoints (``interpolate_backward``).

    Returns
    -------
    None
        The kernels stay compiled for the process, until the next :func:`init` (or
        ``ti.init`` / ``ti.reset``), which starts a new Taichi runtime without them.

    Raises
    ------
    TypeError, ValueError
        A mode that is not a name in :data:`tiinterp.MODES`, a dtype other than
        ``"float32"`` and ``"float64"``, a non-bool flag.

    Examples
    --------
    >>> import numpy as np
    >>> import tiinterp
    >>> tiinterp.warmup("bilinear")  # once, at start
    >>> tiinterp.interpolate(np.ones((1, 3, 97, 131), np.float32), size=(48, 64),
    ...                      mode="bilinear", antialias=True).shape
    (1, 3, 48, 64)
    """
    names = _names(modes, "modes", MODES, default=tuple(MODE_DIMS))
    kinds = _names(dtypes, "dtypes", tuple(_DTYPES))
    v.check_flag(antialias, "antialias")
    if not isinstance(backward, (bool, np.bool_)):
        raise TypeError(f"backward: expected a bool, got {backward!r}")
    for mode in names:
        canonical = v.check_mode(mode)
        flags = [False, True] if antialias is None else [bool(antialias)]
        if canonical not in ANTIALIAS_MODES:
            flags = [False]
        elif mode == "lanczos":  # PyTorch's name: antialiased only
            flags = [True]
        for dtype in kinds:
            dims = MODE_DIMS[canonical]
            for shape, size in _calls(mode, 2 if 2 in dims else dims[0]):
                x = np.zeros(shape, _DTYPES[dtype])
                for flag in flags:
                    y = interpolate(x, size=size, mode=mode, antialias=flag)
                    if backward:
                        interpolate_backward(y, shape, mode=mode, antialias=flag)


def _names(
    value: str | Sequence[str] | None,
    name: str,
    allowed: tuple[str, ...],
    default: tuple[str, ...] | None = None,
) -> tuple[str, ...]:
    if value is None and default is not None:
        return default
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, Sequence) or not all(isinstance(item, str) for item in items):
        raise TypeError(f"{name}: expected a str or a sequence of str, got {value!r}")
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        raise ValueError(f"{name}: expected names from {allowed}, got {value!r}")
    return tuple(items)
