"""Interpolation filters: each is a function of the distance to a sample plus a radius.

:data:`FORMULAS` is the one table of the filters' formulas: each entry holds every form of
one filter that the package computes (its NumPy weight, its slope where a derivative is
used, its support, a faster row form where it has one) and says whether it has a Taichi
form, which ``_kernels.filter_funcs.DEVICE_FORMS`` holds under the same name (Taichi's forms
sit in ``_kernels``, above this part). Every user reads a filter from its entry: the resize
modes here, ``scale_and_translate``'s kernels (``_rules/scale_translate.py``), the samplers
of ``tiinterp.funcs``, and the test oracle; ``tests/rules/test_filter_forms.py`` checks that
the forms of each entry agree.

The table :data:`FILTERS` is the single place that says which filter a mode uses, how many
taps it reads per output and what happens at the border. Formulas and the references they
match are in ``docs/semantics.md``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Keys' cubic convolution parameter. PyTorch/OpenCV use -0.75 for plain bicubic; PIL, and so
# PyTorch's and JAX's antialiased bicubic, use -0.5 (Keys 1981, "Cubic convolution
# interpolation for digital image processing", eq. 15 family).
KEYS_A_PYTORCH = -0.75
KEYS_A_PIL = -0.5

Curve = Callable[[np.ndarray], np.ndarray]


def triangle(x: np.ndarray) -> np.ndarray:
    """Linear interpolation's hat function, ``max(0, 1 - |x|)``."""
    return np.maximum(0.0, 1.0 - np.abs(x))


def keys_cubic(x: np.ndarray, a: float = KEYS_A_PYTORCH) -> np.ndarray:
    """Keys' cubic convolution kernel evaluated in the dtype of ``x``.

    The two polynomial pieces are written in the same Horner order as PyTorch's
    ``cubic_convolution1`` / ``cubic_convolution2`` so float32 results round the same way.
    """
    x = np.abs(x)
    a = x.dtype.type(a)
    one, two, three = x.dtype.type(1), x.dtype.type(2), x.dtype.type(3)
    five, eight, four = x.dtype.type(5), x.dtype.type(8), x.dtype.type(4)
    inner = ((a + two) * x - (a + three)) * x * x + one
    outer = ((a * x - five * a) * x + eight * a) * x - four * a
    return np.where(x <= one, inner, np.where(x < two, outer, x.dtype.type(0)))


def _sign(x: np.ndarray) -> np.ndarray:
    """The slope of ``|x|`` as JAX's ``abs`` gives it: -1 below 0, 1 from 0 on (the slopes
    here are the ones from the right at 0)."""
    return np.where(x < 0, -1.0, 1.0)


def triangle_slope(x: np.ndarray) -> np.ndarray:
    """``d triangle / dx`` as JAX differentiates ``max(0, 1 - |x|)``: ``|x|`` has slope
    :func:`_sign`, and ``max`` gives each of its arguments half the slope at a tie (at ``|x|
    = 1``)."""
    x = np.asarray(x, dtype=np.float64)
    rest = 1.0 - np.abs(x)
    to_rest = np.where(rest > 0.0, 1.0, np.where(rest == 0.0, 0.5, 0.0))
    return _sign(x) * -to_rest


def keys_cubic_slope(x: np.ndarray, a: float = KEYS_A_PYTORCH) -> np.ndarray:
    """``d keys_cubic / dx`` at a signed ``x``, in float64: the derivative of each piece in
    the same Horner order. At ``|x| = 1`` both pieces give ``a`` exactly, so which one the
    join takes changes no bit."""
    x = np.asarray(x, dtype=np.float64)
    sign = _sign(x)
    x = np.abs(x)
    inner = (3.0 * (a + 2.0) * x - 2.0 * (a + 3.0)) * x
    outer = (3.0 * a * x - 10.0 * a) * x + 8.0 * a
    return sign * np.where(x <= 1.0, inner, np.where(x < 2.0, outer, 0.0))


def keys_cubic_pil(x: np.ndarray) -> np.ndarray:
    """Keys' cubic with ``A = -0.5``, the antialiasing bicubic filter of PIL, PyTorch, JAX,
    in float64 and in the form PIL's ``bicubic_filter`` (and PyTorch's antialias
    ``aa_filter``) writes it: the same function as ``keys_cubic(x, -0.5)``, but near
    ``|x| = 1`` the two forms round to different tiny weights, one of them exactly 0, and
    ``0 * inf`` is NaN where ``1e-32 * inf`` is not."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    a = KEYS_A_PIL
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    outer = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, inner, np.where(x < 2.0, outer, 0.0))


def pil_box(x: np.ndarray) -> np.ndarray:
    """PIL's ``box_filter``: 1 on ``(-0.5, 0.5]``, else 0."""
    x = np.asarray(x, dtype=np.float64)
    return np.where((x > -0.5) & (x <= 0.5), 1.0, 0.0)


# PIL's hamming_filter writes its constants as float literals (0.54f, 0.46f), which C
# widens to double: these values, not 0.54 and 0.46.
_HAMMING_CONSTANT, _HAMMING_COSINE = float(np.float32(0.54)), float(np.float32(0.46))


def pil_hamming(x: np.ndarray) -> np.ndarray:
    """PIL's ``hamming_filter``: ``sinc(x) (0.54 + 0.46 cos(pi x))`` for ``|x| < 1``."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    angle = np.where(x == 0, 1.0, x * np.pi)
    window = np.sin(angle) / angle * (_HAMMING_CONSTANT + _HAMMING_COSINE * np.cos(angle))
    return np.where(x == 0, 1.0, np.where(x < 1, window, 0.0))


def mitchell_netravali(x: np.ndarray) -> np.ndarray:
    """Mitchell and Netravali's cubic with ``B = C = 1/3`` (\"Reconstruction filters in
    computer graphics\", 1988, eq. 8), ImageMagick's default for enlarging. Not
    interpolating: 8/9 at 0 and 1/18 at 1."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    b = c = 1.0 / 3.0
    inner = ((12 - 9 * b - 6 * c) * x**3 + (-18 + 12 * b + 6 * c) * x**2 + (6 - 2 * b)) / 6
    outer = (
        (-b - 6 * c) * x**3 + (6 * b + 30 * c) * x**2 + (-12 * b - 48 * c) * x + (8 * b + 24 * c)
    ) / 6
    return np.where(x < 1, inner, np.where(x < 2, outer, 0.0))


def cubic_bspline(x: np.ndarray) -> np.ndarray:
    """The cubic B-spline ``beta3``: ``2/3 - x^2 + |x|^3 / 2`` on ``|x| < 1``, ``(2 - |x|)^3
    / 6`` on ``1 <= |x| < 2``."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    return np.where(x < 1, 2 / 3 - x * x + x**3 / 2, np.where(x < 2, (2 - x) ** 3 / 6, 0.0))


# Note [Cardinal cubic spline]
# Cubic B-spline interpolation (scipy.ndimage's order=3) puts a B-spline on each
# coefficient c_k and chooses the c_k so that the curve passes through the samples:
# (c_{k-1} + 4 c_k + c_{k+1}) / 6 = f_k. On an unbounded line the solution is
# c = h * f with h[n] = sqrt(3) ALPHA^|n|, ALPHA = sqrt(3) - 2 (the pole of the inverse
# filter; Unser, Aldroubi and Eden 1991, "Fast B-spline transforms for continuous image
# representation and interpolation"), so the interpolant is a plain convolution
# of the samples with the cardinal spline eta = h * beta3, which is 1 at 0, 0 at the other
# integers and decays as |ALPHA|^|x| (0.268^|x|). Cut at |x| < BSPLINE_RADIUS it is one more
# filter of the registry (56 taps); the samples past the edge are the mirrored samples, as
# the coefficients past the edge are the mirrored coefficients (SciPy's mode="reflect").
# The cut changes no result by more than 5e-16 of the largest sample (the tail sums to
# about 4.7 |ALPHA|^28): float64 results are exact to rounding.
BSPLINE_POLE = np.sqrt(3.0) - 2.0
BSPLINE_RADIUS = 28


# sqrt(3) ALPHA^|n| for n = -BSPLINE_RADIUS - 1 .. BSPLINE_RADIUS + 1, index n + radius + 1.
_SPLINE_COEFFICIENTS = np.sqrt(3.0) * BSPLINE_POLE ** np.abs(
    np.arange(-BSPLINE_RADIUS - 1, BSPLINE_RADIUS + 2, dtype=np.float64)
)


def _spline_basis(u: np.ndarray) -> np.ndarray:
    """The four cubic B-splines on a unit interval at ``u`` in ``[0, 1]``, ``(..., 4)``: the
    weights of ``h[k - 1], h[k], h[k + 1], h[k + 2]`` at ``x = k + u``."""
    v = 1.0 - u
    return np.stack(
        [
            v * v * v / 6,
            2 / 3 - u * u + u * u * u / 2,
            2 / 3 - v * v + v * v * v / 2,
            u * u * u / 6,
        ],
        axis=-1,
    )


def _cut(x: np.ndarray, total: np.ndarray, on_sample: np.ndarray) -> np.ndarray:
    """Exactly 1 at 0 and 0 at the other integers; 0 from ``BSPLINE_RADIUS`` on."""
    total = np.where(on_sample, np.where(x == 0, 1.0, 0.0), total)
    return np.where(np.abs(x) < BSPLINE_RADIUS, total, 0.0)


def cardinal_cubic_spline(x: np.ndarray) -> np.ndarray:
    """The cardinal cubic spline (Note [Cardinal cubic spline]), cut at ``BSPLINE_RADIUS``:
    exactly 1 at 0 and 0 at the other integers. On ``[k, k + 1]``, ``x = k + u``, it is
    ``h[k - 1] B0(u) + h[k] B1(u) + h[k + 1] B2(u) + h[k + 2] B3(u)`` (``_spline_basis``)."""
    x = np.asarray(x, dtype=np.float64)
    inside = np.clip(x, -BSPLINE_RADIUS, BSPLINE_RADIUS - 1)
    whole = np.floor(inside)
    at = whole.astype(np.int64) + BSPLINE_RADIUS + 1  # the index of h[k]
    basis = _spline_basis(inside - whole)
    h = _SPLINE_COEFFICIENTS
    total = sum(h[at + m - 1] * basis[..., m] for m in range(4))
    return _cut(x, total, x == np.floor(x))


def cardinal_cubic_spline_rows(frac: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``cardinal_cubic_spline(frac[:, None] - offsets[None, :])`` for ``frac`` in ``[0,
    1]`` and the integer ``offsets`` of a ``BSPLINE_RADIUS`` table: every tap of a row lies
    at the same place ``u = frac`` of its unit interval, so the four B-splines are evaluated
    once per row and the taps are their product with the spline coefficients (tables of
    56 taps on axes of a million samples: 0.1 s instead of 3 s). A row on a sample (``frac``
    0 or 1) reads that sample alone."""
    frac = np.asarray(frac, dtype=np.float64)
    at = BSPLINE_RADIUS + 1 - np.asarray(offsets, dtype=np.int64)  # the index of h[k]
    coefficients = np.stack([_SPLINE_COEFFICIENTS[at + m - 1] for m in range(4)])  # (4, K)
    weights = _spline_basis(frac) @ coefficients
    on_sample = np.flatnonzero((frac == 0) | (frac == 1))
    weights[on_sample] = frac[on_sample, None] == offsets[None, :]
    return weights


def lanczos(radius: int) -> Callable[[np.ndarray], np.ndarray]:
    """``L(x) = sinc(x) * sinc(x / radius)`` for ``|x| < radius``, else 0."""

    def weight(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return np.where(np.abs(x) < radius, np.sinc(x) * np.sinc(x / radius), 0.0)

    return weight


# Under this |x| JAX's lanczos is 1 (a flat top, slope 0), the true one 1 - 1.8e-6 at most.
JAX_LANCZOS_CUT = 1e-3


def lanczos_jax(radius: int) -> tuple[Curve, Curve]:
    """JAX's lanczos (``jax._src.image.scale``'s ``_lanczos_kernel``) and its slope, in the
    dtype of ``x``: ``r sin(pi x) sin(pi x / r) / (pi x)^2`` for ``1e-3 < |x| <= r``, 1 at
    ``|x| <= 1e-3``, else 0."""

    def parts(x):
        safe = np.where(x > JAX_LANCZOS_CUT, x, 1.0)
        top = radius * np.sin(np.pi * safe) * np.sin(np.pi * safe / radius)
        top_slope = (
            np.pi
            * radius
            * (
                np.cos(np.pi * safe) * np.sin(np.pi * safe / radius)
                + np.sin(np.pi * safe) * np.cos(np.pi * safe / radius) / radius
            )
        )
        return safe, top, top_slope

    def weight(x):
        x = np.abs(x)
        safe, top, _ = parts(x)
        return np.where(
            x > radius, 0.0, np.where(x > JAX_LANCZOS_CUT, top / (np.pi**2 * safe**2), 1.0)
        )

    def slope(x):
        sign = _sign(x)
        x = np.abs(x)
        safe, top, top_slope = parts(x)
        inside = (top_slope * safe - 2.0 * top) / (np.pi**2 * safe**3)
        return sign * np.where((x > radius) | (x <= JAX_LANCZOS_CUT), 0.0, inside)

    return weight, slope


# Note [Forms that round differently]
# Some filters are computed in two forms that are the same function but round differently,
# and each form is what some reference computes, bit for bit where tiinterp matches it bit
# for bit. They stay two entries of FORMULAS:
# - Keys' cubic with A = -0.5 as PyTorch's cubic_convolution1/2 write it (keys_jax: JAX's
#   scale_and_translate writes it so too) and as PIL's bicubic_filter writes it (keys_pil:
#   PIL, and PyTorch's and JAX's antialiased bicubic). Near |x| = 1 they round to different
#   tiny weights, one of them exactly 0 (keys_cubic_pil's docstring).
# - Lanczos as sinc(x) sinc(x / r) (lanczos3: PIL's and the resize references' numbers),
#   as JAX's scale_and_translate writes it (lanczos3_jax: a flat top under |x| = 1e-3, a
#   quotient of sines, evaluated in the image's dtype), and in Taichi from a polynomial sine
#   (Vulkan and Metal have no float64 sin; _kernels/filter_funcs.py's sin_pi).
# tests/rules/test_filter_forms.py holds each pair to the same function, within rounding.


@dataclass(frozen=True)
class Formula:
    """Every form of one filter: the one place its formula is written.

    ``weight``: the filter at the signed distance ``x`` from a sample (a NumPy array), in
    float64, or in the dtype of ``x`` where its docstring says so (the forms that round as a
    float32 reference does). Symmetric but for PIL's box, which is a function of ``tap -
    src``, as PIL's filters are.
    ``support``: the half-width: the weight is 0 where ``|x| > support``. ``radius``, the
    taps per side of a sample, is its ceiling.
    ``slope``: ``d weight / dx`` at a signed ``x`` (the slope from the right at 0, as JAX's
    ``abs`` has it), where a derivative is used (``scale_and_translate``'s derivative tables),
    else None.
    ``rows``: ``weight(frac[:, None] - offsets[None, :])`` computed faster, where the filter
    has a way (the cardinal spline's 56 taps).
    ``device``: whether the filter has a Taichi form, for the kernels that compute weights on
    the device (``funcs``' samplers, ``grid_sample``, ``scale_and_translate``'s autodiff):
    ``_kernels.filter_funcs.DEVICE_FORMS`` holds it under this entry's name.

    How a mode applies the filter (its taps, its border, whether its weights are divided by
    their sum, whether antialias stretches it) is the mode's :class:`Filter`: one formula
    serves modes with different rules (lanczos4 is OpenCV's, normalised, and PIL's).
    """

    weight: Curve
    support: float
    slope: Curve | None = None
    rows: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    device: bool = False

    @property
    def radius(self) -> int:
        return math.ceil(self.support)


_LANCZOS3_JAX, _LANCZOS5_JAX = lanczos_jax(3), lanczos_jax(5)

# The filters, by name. Adding a filter is adding its entry here (and its Taichi form to
# _kernels/filter_funcs.py's DEVICE_FORMS if it is `device`); docs/architecture.md,
# "Adding a resize mode", lists the rest.
FORMULAS: dict[str, Formula] = {
    "triangle": Formula(triangle, 1, slope=triangle_slope, device=True),
    # Note [Forms that round differently]: keys_jax and keys_pil.
    "keys_pytorch": Formula(keys_cubic, 2, slope=keys_cubic_slope, device=True),
    "keys_jax": Formula(
        functools.partial(keys_cubic, a=KEYS_A_PIL),
        2,
        slope=functools.partial(keys_cubic_slope, a=KEYS_A_PIL),
        device=True,
    ),
    "keys_pil": Formula(keys_cubic_pil, 2),
    "box": Formula(pil_box, 0.5),
    "hamming": Formula(pil_hamming, 1),
    "mitchell": Formula(mitchell_netravali, 2),
    "cubic_bspline": Formula(cubic_bspline, 2, device=True),
    "cardinal_spline": Formula(
        cardinal_cubic_spline, BSPLINE_RADIUS, rows=cardinal_cubic_spline_rows
    ),
    # Note [Forms that round differently]: lanczos and lanczos_jax.
    "lanczos3": Formula(lanczos(3), 3, device=True),
    "lanczos4": Formula(lanczos(4), 4),
    "lanczos5": Formula(lanczos(5), 5),
    "lanczos3_jax": Formula(_LANCZOS3_JAX[0], 3, slope=_LANCZOS3_JAX[1], device=True),
    "lanczos5_jax": Formula(_LANCZOS5_JAX[0], 5, slope=_LANCZOS5_JAX[1], device=True),
}


@dataclass(frozen=True)
class Filter:
    """How one interpolating mode turns a source coordinate into taps and weights.

    ``radius``: taps ``floor(src) + k`` for ``k`` in ``1 - radius .. radius``.
    ``weight``: the filter (a :data:`FORMULAS` entry's ``weight``) as a function of ``src -
    tap`` (evaluated in the table's dtype).
    ``border``: ``"clamp"`` replicates the edge sample for taps outside the input;
    ``"drop"`` discards them and renormalises the remaining weights to sum to 1;
    ``"reflect"`` reads the samples mirrored about the input's edges, ``[b a | a b c d |
    d c]`` (``numpy.pad``'s ``"symmetric"``, SciPy's ``mode="reflect"``).
    ``normalized``: the ``2 * radius`` weights are divided by their sum before the border
    applies (OpenCV's lanczos4, whose window does not sum to 1).
    ``float32_source``: the source coordinate is rounded to float32 whatever the data's
    dtype (OpenCV's ``(float)((dst + 0.5) * scale - 0.5)``: up to 6e-5 of a sample at 2000).
    ``row_weight``: ``weight(frac[:, None] - offsets[None, :])`` computed faster, where the
    filter has a way (its entry's ``rows``: the cubic B-spline's 56 taps).
    ``interpolating``: the filter is 1 at 0 and 0 at the other integers, so that an axis
    that keeps its size may be copied (PyTorch's rule); Mitchell's is not, and blurs it.
    ``clamp_negative_source``: PyTorch clamps the half-pixel source coordinate of linear
    modes at 0 (but not of cubic ones).
    ``float64_weights``: weights are computed in float64 whatever the data dtype (the
    references that define the mode do not pin a float32 evaluation order).
    ``window``: the :data:`FORMULAS` entry that ``antialias=True`` stretches when
    downsampling (PIL's convention; see ``taps._antialiased_taps``), its weight a function
    of ``tap - src`` and its ``support`` the window's half-width before stretching (PIL's
    box: 0.5).
    ``float64_window``: the antialiased window and weights are computed in float64, as PIL
    computes them, whatever the data dtype (else in the data's dtype, as PyTorch does).
    """

    radius: int
    weight: Callable[[np.ndarray], np.ndarray]
    border: str
    clamp_negative_source: bool
    window: Formula
    float64_weights: bool = False
    float64_window: bool = False
    normalized: bool = False
    interpolating: bool = True
    row_weight: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    float32_source: bool = False


@dataclass(frozen=True)
class Reference:
    """A library function whose numbers a mode gives (``docs/semantics.md``), and where.

    ``library``: ``"pytorch"`` (``F.interpolate``'s ``mode=name``), ``"jax"``
    (``jax.image.scale_and_translate``'s ``method=name``, with PyTorch's sample spacing),
    ``"pil"`` (``Image.resize``'s ``resample=Image.Resampling.<name>`` on float images, whose
    numbers tiinterp gives in float64), ``"opencv"`` (``cv2.resize``'s
    ``interpolation=cv2.<name>``) or ``"imagemagick"`` (``convert -filter <name> -resize``,
    HDRI build) or ``"scipy"`` (``scipy.ndimage.zoom``'s ``order=3, mode=<name>``, with
    ``grid_mode=True`` for half-pixel coordinates and ``False`` for aligned corners).
    ``dims``: the spatial axes it takes; ``antialias`` and ``align_corners``: the values of
    those arguments it has.
    """

    library: str
    name: str
    dims: tuple[int, ...]
    antialias: tuple[bool, ...] = (False,)
    align_corners: tuple[bool | None, ...] = (None,)

    def covers(self, dims: int, align_corners: bool | None, antialias: bool) -> bool:
        return (
            dims in self.dims
            and antialias in self.antialias
            and align_corners in self.align_corners
        )


@dataclass(frozen=True)
class Mode:
    """One resize mode: the single place that says what it computes and accepts.

    ``dims``: the spatial axes it takes (PyTorch's rules where PyTorch has the mode).
    ``filter``: its interpolation filter, or None for the modes that pick or average
    samples instead (``nearest``, ``nearest-exact``, ``area``, ``area-opencv``: ``_rules/taps.py``
    builds theirs).
    Only filter modes take ``align_corners`` and ``antialias``.
    ``references``: the library functions it matches, the first that covers a call being
    the one its golden data comes from.
    ``rule``: what it computes, in one line of Markdown (the modes page's table; the formulas
    are in ``docs/semantics.md``). ``also``: other libraries whose numbers it gives.
    ``alias_of``: another mode it names (``antialias=True`` required).
    """

    name: str
    dims: tuple[int, ...]
    filter: Filter | None
    references: tuple[Reference, ...]
    rule: str
    also: str = ""
    alias_of: str | None = None

    def reference(self, dims: int, align_corners: bool | None, antialias: bool) -> Reference | None:
        """The reference whose numbers this call gives, or None where no library has it."""
        for reference in self.references:
            if reference.covers(dims, align_corners, antialias):
                return reference
        return None


_LINEAR = Filter(
    radius=1,
    weight=FORMULAS["triangle"].weight,
    border="clamp",
    clamp_negative_source=True,
    window=FORMULAS["triangle"],
)
_BICUBIC = Filter(
    radius=2,
    weight=FORMULAS["keys_pytorch"].weight,
    border="clamp",
    clamp_negative_source=False,
    window=FORMULAS["keys_pil"],
)

# JAX's "cubic" and PIL's BICUBIC: Keys with A = -0.5, in float64 (as PIL and the antialias
# filter), taps outside the image dropped as JAX drops them.
_CUBIC = Filter(
    radius=2,
    weight=FORMULAS["keys_pil"].weight,
    border="drop",
    clamp_negative_source=False,
    window=FORMULAS["keys_pil"],
    float64_weights=True,
)

# PIL's BOX and HAMMING (PIL is their reference: weights and window in float64). Box as an
# interpolator reads the sample nearest to ``src``, a tie going where PIL's box sends it
# (its ``weight`` is a function of ``src - tap``, PIL's filter of ``tap - src``).
_BOX = Filter(
    radius=1,
    weight=lambda x: FORMULAS["box"].weight(-x),
    border="drop",
    clamp_negative_source=False,
    window=FORMULAS["box"],
    float64_weights=True,
    float64_window=True,
)
_HAMMING = Filter(
    radius=1,
    weight=FORMULAS["hamming"].weight,
    border="drop",
    clamp_negative_source=False,
    window=FORMULAS["hamming"],
    float64_weights=True,
    float64_window=True,
)

# OpenCV's INTER_LANCZOS4: 8 taps around floor(src), their lanczos4 weights divided by
# their sum, taps outside the image replicating the edge (OpenCV's resize border).
_LANCZOS4_OPENCV = Filter(
    radius=4,
    weight=FORMULAS["lanczos4"].weight,
    border="clamp",
    clamp_negative_source=False,
    window=FORMULAS["lanczos4"],
    float64_weights=True,
    normalized=True,
    float32_source=True,
)

# ImageMagick's Mitchell: its resize convention is PIL's (the window stretched when
# shrinking, clipped to the image, weights renormalised), in double precision.
_MITCHELL = Filter(
    radius=2,
    weight=FORMULAS["mitchell"].weight,
    border="drop",
    clamp_negative_source=False,
    window=FORMULAS["mitchell"],
    float64_weights=True,
    float64_window=True,
    interpolating=False,
)


# SciPy's zoom(order=3, mode="reflect"): Note [Cardinal cubic spline]. No library
# antialiases it; tiinterp stretches it as PIL stretches every filter.
_BSPLINE = Filter(
    radius=BSPLINE_RADIUS,
    weight=FORMULAS["cardinal_spline"].weight,
    row_weight=FORMULAS["cardinal_spline"].rows,
    border="reflect",
    clamp_negative_source=False,
    window=FORMULAS["cardinal_spline"],
    float64_weights=True,
    float64_window=True,
)


def _lanczos(radius: int) -> Filter:
    formula = FORMULAS[f"lanczos{radius}"]
    return Filter(
        radius=radius,
        weight=formula.weight,
        border="drop",
        clamp_negative_source=False,
        window=formula,
        float64_weights=True,
    )


_LANCZOS3 = _lanczos(3)
_BOTH = (False, True)
_ALIGNS = (False, None, True)
_HALF_PIXEL = (False, None)


def _pytorch(
    name: str, dims: tuple[int, ...], filtered: bool, antialias: bool = False
) -> Reference:
    return Reference(
        "pytorch",
        name,
        dims,
        _BOTH if antialias else (False,),
        _ALIGNS if filtered else (None,),
    )


def _jax(name: str, antialias: tuple[bool, ...] = _BOTH) -> Reference:
    return Reference("jax", name, (1, 2, 3), antialias, _HALF_PIXEL)


def _pil(name: str) -> Reference:
    """PIL resizes 2-D images, always in the convention of ``antialias=True``."""
    return Reference("pil", name, (2,), (True,), _HALF_PIXEL)


def _nearest_or_area(name: str, rule: str, also: str = "") -> Mode:
    return Mode(name, (1, 2, 3), None, (_pytorch(name, (1, 2, 3), filtered=False),), rule, also)


def _linear(name: str, dims: int) -> Mode:
    return Mode(
        name,
        (dims,),
        _LINEAR,
        (
            _pytorch(name, (dims,), True, antialias=dims == 2),
            _jax("linear", (True,)),
            *([_pil("BILINEAR")] if dims == 2 else []),
        ),
        "half-pixel `src` clamped at 0; edge sample replicated",
    )


_LANCZOS_RULE = "`sinc(x) sinc(x/r)`; taps outside the image dropped, weights renormalised"


# The resize modes, in the order users see them listed.
REGISTRY: dict[str, Mode] = {
    mode.name: mode
    for mode in (
        _nearest_or_area(
            "nearest",
            "`floor(dst * scale)`, rounded as PyTorch rounds it; "
            "`out == in` and `out == 2 * in` are exact",
        ),
        _nearest_or_area(
            "nearest-exact", "`floor((dst + 0.5) * scale)`, PyTorch's rounding", "PIL, scikit-image"
        ),
        _nearest_or_area(
            "area",
            "adaptive average: output `o` averages inputs "
            "`floor(o*in/out) .. ceil((o+1)*in/out) - 1`",
        ),
        Mode(
            "area-opencv",
            (1, 2, 3),
            None,
            (Reference("opencv", "INTER_AREA", (2,), (False,), (None,)),),
            "OpenCV's `INTER_AREA`: when every axis shrinks, each output averages the inputs "
            "its footprint covers, weighed by the part covered; else a 2-tap rule of covered "
            "parts",
        ),
        _linear("linear", 1),
        _linear("bilinear", 2),
        _linear("trilinear", 3),
        Mode(
            "bicubic",
            (2,),
            _BICUBIC,
            (_pytorch("bicubic", (2,), True, antialias=True), _pil("BICUBIC")),
            "Keys cubic, `A = -0.75`; `src` not clamped; edge samples replicated",
        ),
        Mode(
            "cubic",
            (1, 2, 3),
            _CUBIC,
            (_jax("cubic"), _pil("BICUBIC")),
            "Keys cubic, `A = -0.5`; taps outside the image dropped, weights renormalised",
        ),
        Mode(
            "box",
            (1, 2, 3),
            _BOX,
            (_pil("BOX"),),
            "PIL's box, 1 on `(-0.5, 0.5]`: the nearest sample, or with antialias the mean of "
            "the samples an output covers",
        ),
        Mode(
            "hamming",
            (1, 2, 3),
            _HAMMING,
            (_pil("HAMMING"),),
            "PIL's `sinc(x) (0.54 + 0.46 cos(pi x))` on `|x| < 1`; taps outside the image "
            "dropped, weights renormalised",
        ),
        Mode(
            "mitchell",
            (1, 2, 3),
            _MITCHELL,
            (Reference("imagemagick", "Mitchell", (2,), (True,), _HALF_PIXEL),),
            "Mitchell-Netravali cubic, `B = C = 1/3` (not interpolating: it smooths, an axis "
            "of unchanged size too); taps outside the image dropped, weights renormalised",
        ),
        Mode(
            "lanczos3",
            (1, 2, 3),
            _LANCZOS3,
            (_jax("lanczos3"), _pil("LANCZOS")),
            _LANCZOS_RULE,
            "burn",
        ),
        Mode(
            "lanczos4",
            (1, 2, 3),
            _LANCZOS4_OPENCV,
            (Reference("opencv", "INTER_LANCZOS4", (2,), (False,), _HALF_PIXEL),),
            "OpenCV's: `sinc(x) sinc(x/4)` over 8 taps, weights divided by their sum; "
            "edge samples replicated",
        ),
        Mode("lanczos5", (1, 2, 3), _lanczos(5), (_jax("lanczos5"),), _LANCZOS_RULE),
        Mode(
            "bspline",
            (1, 2, 3),
            _BSPLINE,
            (Reference("scipy", "reflect", (1, 2, 3), (False,), _ALIGNS),),
            "cubic B-spline interpolation (its prefilter included): the cardinal cubic spline, "
            "56 taps; samples mirrored past the edges",
        ),
        # PyTorch's name for its lanczos, antialiased lanczos3 on 2 axes.
        Mode(
            "lanczos",
            (1, 2, 3),
            _LANCZOS3,
            (Reference("pytorch", "lanczos", (2,), (True,), _HALF_PIXEL), _jax("lanczos3")),
            "PyTorch's name: `lanczos3` with `antialias=True` (which PyTorch requires for "
            "it, and has for 2-D only)",
            alias_of="lanczos3",
        ),
    )
}

# Views of the registry that the checks and the tap tables read.
MODES = tuple(REGISTRY)
ALIASES = {m.name: m.alias_of for m in REGISTRY.values() if m.alias_of is not None}
MODE_DIMS: dict[str, tuple[int, ...]] = {
    m.name: m.dims for m in REGISTRY.values() if m.alias_of is None
}
FILTERS: dict[str, Filter] = {
    m.name: m.filter for m in REGISTRY.values() if m.filter is not None and m.alias_of is None
}
ANTIALIAS_MODES = tuple(FILTERS)
ALIGN_CORNERS_MODES = tuple(FILTERS)


def modes_taking(dims: int, aliases: bool = False) -> tuple[str, ...]:
    """The modes that resize ``dims`` spatial axes (canonical names unless ``aliases``)."""
    return tuple(
        m.name for m in REGISTRY.values() if dims in m.dims and (aliases or m.alias_of is None)
    )


# grid_sample's modes and padding modes (``F.grid_sample``'s names), as the codes its
# kernels take (``_kernels/grid.py``).
NEAREST, LINEAR, CUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
MODE_CODES = {"nearest": NEAREST, "bilinear": LINEAR, "bicubic": CUBIC}
PADDING_CODES = {"zeros": ZEROS, "border": BORDER, "reflection": REFLECTION}
