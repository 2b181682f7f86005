"""``warmup``: compile the kernels of a mode's resizes now, before the calls that need them.

A Taichi kernel is compiled on its first launch in each process, and even with a warm
kernel cache Taichi runs its Python front end over it first (0.1-0.4 s a kernel on the CPU:
Note [Bounded kernel variants] in ``_kernels/simd.py``). ``warmup`` makes the calls that
reach each kernel form a mode's resizes take, on small synthetic images, so that a server
or a batch job pays for them at start rather than on its first requests.

With a kernel set for this machine (``make kernels``, ``python -m tiinterp._compiled.build``:
Note [A kernel set's ties] in ``_compiled/__init__.py``), the kernels it holds need no
compilation: warmup looks for the set first, and its calls launch those kernels natively
(milliseconds); only the forms outside the set are compiled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._compiled.native import forget_set
from .._rules import validate as v
from .._rules.filters import ANTIALIAS_MODES, MODE_DIMS, MODES
from .._runtime.session import serialized
from .resize import interpolate, interpolate_backward

# Note [What warmup runs]
# The kernel forms a 2-D resize takes follow from a few classes of its arguments, not from
# its sizes (Note [Bounded kernel variants] in _kernels/simd.py): per axis, whether it is
# resized, and by a table of 1-2 taps, of up to 16 (the SIMD kernels) or a wider one (the
# generic kernel); whether the source and the result hold more than 2^16 elements (the
# large forms: half-vector loads, parallel loops, compile-time widths up to 8); the store
# form (rows a multiple of the vector's lanes or not); rows narrower than a vector (no
# ``plane``); on the device path, fused or separate passes. So warmup resizes a few
# synthetic images (small, small with rows of 61, narrow, large) with each axis kept (a
# kept axis still has several taps in some modes), doubled, halved, quartered (a large
# source, a small result) and cut to a tenth (an antialiased tenth is wider than 16 taps),
# in every pairing. A small result's loops run serially where they have at most 512
# iterations (Note [Small loops run serially] in _kernels/simd.py), so two tall, narrow
# images give small results of more lines than that, halved or doubled (3 x 200 or 3 x 800
# lines of 13 or 16: rows of scalars and of vectors). The one class it leaves out is a large
# result's compile-time widths of 3 to 8 taps (each width pair its own kernel: 36 per store
# form).
_AXIS_SCALES = (1.0, 2.0, 0.5, 0.25, 0.1)
# Input spatial shapes: small results (64 lines, and 61: not a multiple of any lane count),
# small results of many lines, lines narrower than a vector, then large results.
_BASES_2D = ((64, 64), (61, 61), (400, 13), (400, 16), (40, 5), (256, 256), (255, 257))


def _calls_2d() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    calls: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for shape in _BASES_2D:
        for scale_h in _AXIS_SCALES:
            for scale_w in _AXIS_SCALES:
                size = (max(1, round(shape[0] * scale_h)), max(1, round(shape[1] * scale_w)))
                calls.append(((1, 3, *shape), size))
    return calls


_DTYPES = {"float32": np.float32, "float64": np.float64}


def _calls(mode: str, dims: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The (input shape, output size) pairs of ``mode``'s calls on ``dims`` spatial axes
    (2-D for the modes that take several)."""
    if dims == 2:
        return _calls_2d()
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
    :func:`interpolate_backward`) on synthetic images of three channels, one per class of
    call that selects a kernel form (Note [What warmup runs] in ``_ops/warmup.py``). After
    it, a 2-D resize of those modes whose result has at most 2^16 elements (a thumbnail)
    compiles nothing new, whatever its size and scale, either axis kept or not (tested on
    the CPU and on Vulkan). A larger result may still compile the form of its own tap
    counts, on the CPU (3 to 8 taps per axis, each pair once per process). 1-D and 3-D
    modes get a line or a volume per form. Taichi is initialised first if it is not (as by
    any call). On the CPU, warmup first looks for this machine's kernel set (built by
    ``make kernels`` or ``python -m tiinterp._compiled.build``, in
    ``~/.cache/tiinterp/kernel-sets`` or ``$TIINTERP_KERNEL_SET``): the kernels it holds
    are compiled already and are not compiled again, in this call or later ones.

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
    forget_set()  # a set built since the last look is used
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
