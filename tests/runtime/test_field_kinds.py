"""Taichi data declared every way a Taichi user can, through ``interpolate_into``,
``grid_sample_into`` and the ``tiinterp.funcs`` samplers: SNode kinds (dense, bitmasked,
pointer, dynamic; quantized types in ``BitpackedFields`` and ``quant_array``), ``offset=``,
layouts (axis order, blocks, several fields in one SNode, SOA / AOS vectors), element types.
Each gives the result of the same call on the data read with ``to_numpy`` (the NumPy path),
or a TypeError that names what is not supported.

Sparse fields hold their active cells: inactive ones read as 0, as ``to_numpy`` reads them
(bitmasked cells are deactivated after being written, so that their old values are still in
memory); tiinterp writes every cell of an output, activating it. Sparse SNodes and quantized
types exist only where Taichi has them (CPU, CUDA): elsewhere the tests check that Taichi
refuses to declare them, which is why tiinterp never meets them there.

In tiinterp's CPU SIMD configuration the samplers run on scalar fields and ndarrays (every
sampler and boundary), and refuse vector and matrix fields and ``ti.ad`` with a clear error.
"""

import numpy as np
import pytest

import tiinterp
from tests.public.test_funcs import BOUNDARIES, SAMPLERS, padded_reference
from tests.tolerances import tolerance
from tiinterp import funcs
from tiinterp._runtime.elements import SPARSE_ARCHS
from tiinterp._runtime.session import current_arch, simd_configuration, supports_float64
from tiinterp._runtime.taichi import current_config, submodule, ti

OFFSET = (-3, 2, -1, 4, 1)
DENSE_KINDS = ("dense", "offset", "column_major", "blocked", "shared")
SPARSE_KINDS = ("bitmasked", "bitmasked_offset", "pointer", "pointer_bitmasked", "dynamic")
KINDS = DENSE_KINDS + SPARSE_KINDS


def taichi_has(extension):
    """Whether Taichi offers ``extension`` (ti.extension.sparse, .quant) on this arch."""
    is_supported = submodule("lang.misc").is_extension_supported
    return is_supported(current_config().arch, extension)


def sparse_unavailable(kind):
    """How a sparse ``kind`` is turned away on this arch: "taichi" where Taichi has no sparse
    SNodes (after checking that it refuses to declare one, so that tiinterp never meets
    one), "tiinterp" where tiinterp refuses them with a TypeError (taichi-forge's Vulkan),
    None where they are read and written."""
    if kind not in SPARSE_KINDS:
        return None
    if not taichi_has(ti.extension.sparse):
        with pytest.raises(RuntimeError, match="not supported on this backend"):
            ti.root.bitmasked(ti.ij, (2, 2))
        return "taichi"
    return None if current_arch() in SPARSE_ARCHS else "tiinterp"


REFUSED_SPARSE = r"expected a field without sparse SNodes on arch '\w+', got one under"


def _new(dtype, element, **options):
    if not element:
        return ti.field(dtype, **options)
    if len(element) == 1:
        return ti.Vector.field(element[0], dtype, **options)
    return ti.Matrix.field(*element, dtype, **options)


def _node(kind, shape):
    axes = ti.axes(*range(len(shape)))
    block = tuple(2 if n % 2 == 0 else 1 for n in shape)
    blocks = tuple(n // b for n, b in zip(shape, block, strict=True))
    if kind == "column_major":  # the last index outermost
        node = ti.root
        for axis in reversed(range(len(shape))):
            node = node.dense(ti.axes(axis), shape[axis])
        return node
    if kind == "blocked":
        return ti.root.dense(axes, blocks).dense(axes, block)
    if kind == "shared":
        return ti.root.dense(axes, shape)
    if kind in ("bitmasked", "bitmasked_offset"):
        return ti.root.bitmasked(axes, shape)
    if kind == "pointer":
        return ti.root.pointer(axes, blocks).dense(axes, block)
    if kind == "pointer_bitmasked":
        return ti.root.pointer(axes, blocks).bitmasked(axes, block)
    assert kind == "dynamic"
    outer = ti.root.dense(ti.axes(*range(len(shape) - 1)), shape[:-1])
    return outer.dynamic(ti.axes(len(shape) - 1), shape[-1], chunk_size=2)


def declare(kind, dtype, shape, element=(), needs_grad=False):
    """A field of ``kind`` (a needs_grad one has its gradient in the same SNode)."""
    offset = OFFSET[: len(shape)] if "offset" in kind else None
    if kind in ("dense", "offset", "soa"):
        options = {"layout": ti.Layout.SOA if kind == "soa" else ti.Layout.AOS} if element else {}
        return _new(dtype, element, shape=shape, offset=offset, needs_grad=needs_grad, **options)
    field = _new(dtype, element, needs_grad=needs_grad)
    members = [field, field.grad] if needs_grad else [field]
    if kind == "shared":  # another field first in every cell
        members.insert(0, ti.field(dtype))
    _node(kind, shape).place(*members, offset=offset)
    return field


def first_index(field):
    return tuple(field.snode.ptr.offset) or (0,) * len(field.shape)


@ti.kernel
def _activate(field: ti.template(), level: ti.template(), mask: ti.types.ndarray()):
    for i in ti.grouped(mask):
        if mask[i] != 0:
            ti.activate(field.snode.parent(level), i)


@ti.kernel
def _deactivate(field: ti.template(), level: ti.template(), mask: ti.types.ndarray()):
    for i in ti.grouped(mask):
        if mask[i] == 0:
            ti.deactivate(field.snode.parent(level), i)


@ti.kernel
def _write_where(field: ti.template(), values: ti.types.ndarray(), mask: ti.types.ndarray()):
    for i in ti.grouped(mask):
        if mask[i] != 0:
            field[i] = values[i]


def populate(field, kind, values, rng):
    """``values`` written into ``field``; a sparse one is left partly inactive. Returns which
    cells are active."""
    shape = tuple(field.shape)
    active = np.ones(shape, dtype=bool)
    if kind in ("bitmasked", "bitmasked_offset", "pointer_bitmasked"):
        # Written everywhere, then deactivated: the old values stay in memory.
        if kind == "pointer_bitmasked":  # activating a cell does not activate its block
            _activate(field, 2, np.ones(field.snode.parent(2).shape, np.int32))
        _activate(field, 1, np.ones(shape, np.int32))
        field.from_numpy(values)
        active = rng.random(shape) < 0.6
        _deactivate(field, 1, active.astype(np.int32))
    elif kind == "pointer":
        blocks = rng.random(field.snode.parent(2).shape) < 0.6
        _activate(field, 2, blocks.astype(np.int32))
        field.from_numpy(values)
        block = [n // b for n, b in zip(shape, blocks.shape, strict=True)]
        active = np.kron(blocks, np.ones(block, dtype=bool))
    elif kind == "dynamic":
        lengths = rng.integers(0, shape[-1] + 1, shape[:-1])
        active = np.arange(shape[-1]) < lengths[..., None]
        _write_where(field, values, active.astype(np.int32))
    else:
        field.from_numpy(values)
    return active


def numpy_path(src, size, mode):
    """``interpolate`` on ``src.to_numpy()`` of a 2-D scalar field."""
    return tiinterp.interpolate(src.to_numpy()[None, None], size=size, mode=mode)[0, 0]


# --- interpolate_into ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_interpolate_into_reads_and_writes_every_kind(arch, rng, kind):
    """A partly inactive sparse src reads 0 in its inactive cells; every cell of dst is
    written (activated where sparse), old values and inactive cells included; src is left
    as it was."""
    refused = sparse_unavailable(kind)
    if refused == "taichi":
        return
    src = declare(kind, ti.f32, (6, 8))
    dst = declare(kind, ti.f32, (9, 4))
    if refused == "tiinterp":
        with pytest.raises(TypeError, match="src: " + REFUSED_SPARSE):
            tiinterp.interpolate_into(src, dst, mode="bicubic")
        return
    active = populate(src, kind, rng.standard_normal((6, 8)).astype(np.float32), rng)
    populate(dst, kind, np.full((9, 4), 7.0, np.float32), rng)
    before = src.to_numpy()
    np.testing.assert_array_equal(before != 0, active)
    assert active.all() if kind in DENSE_KINDS else 0 < active.sum() < active.size
    tiinterp.interpolate_into(src, dst, mode="bicubic")
    expected = numpy_path(src, (9, 4), "bicubic")
    np.testing.assert_allclose(
        dst.to_numpy(), expected, rtol=0, atol=tolerance("tape_values", "float32")
    )
    np.testing.assert_array_equal(src.to_numpy(), before)


# Vector and matrix fields: SOA and AOS layouts, offsets, sparse SNodes.
ELEMENT_KINDS = [
    ("soa", (2,)),
    ("dense", (2, 2)),
    ("soa", (3, 2)),
    ("offset", (3,)),
    ("blocked", (2,)),
    ("pointer", (2,)),
    ("bitmasked_offset", (2, 2)),
]


@pytest.mark.parametrize("kind, element", ELEMENT_KINDS, ids=[f"{k}-{e}" for k, e in ELEMENT_KINDS])
def test_interpolate_into_vector_and_matrix_kinds(arch, rng, kind, element):
    """Every component resampled as a channel; in the SIMD configuration, refused (Taichi
    1.7.4 miscompiles vector and matrix fields there)."""
    refused = sparse_unavailable(kind)
    if refused == "taichi":
        return
    src = declare(kind, ti.f32, (6, 8), element)
    dst = declare(kind, ti.f32, (9, 4), element)
    if refused == "tiinterp":
        with pytest.raises(TypeError, match="src: " + REFUSED_SPARSE):
            tiinterp.interpolate_into(src, dst, mode="bilinear")
        return
    if simd_configuration():
        with pytest.raises(RuntimeError, match=r"vector or matrix elements.*SIMD configuration"):
            tiinterp.interpolate_into(src, dst, mode="bilinear")
        return
    populate(src, kind, rng.standard_normal((6, 8, *element)).astype(np.float32), rng)
    populate(dst, kind, np.full((9, 4, *element), 7.0, np.float32), rng)
    x = src.to_numpy()
    tiinterp.interpolate_into(src, dst, mode="bilinear")
    channels = np.moveaxis(x.reshape(6, 8, -1), -1, 0)[None]
    expected = tiinterp.interpolate(channels, size=(9, 4), mode="bilinear")[0]
    expected = np.moveaxis(expected, 0, -1).reshape(9, 4, *element)
    np.testing.assert_allclose(
        dst.to_numpy(), expected, rtol=0, atol=tolerance("tape_values", "float32")
    )
    np.testing.assert_array_equal(src.to_numpy(), x)


@ti.kernel
def _weighted_sum(
    dst: ti.template(), weights: ti.types.ndarray(), loss: ti.template(), first: ti.template()
):
    for i in ti.grouped(weights):
        loss[None] += weights[i] * dst[i + ti.Vector(first)]


# The gradient's way into a field is the same for every dense kind, and for every sparse one.
TAPE_KINDS = ("offset", "bitmasked_offset")


@pytest.mark.parametrize("kind", TAPE_KINDS)
def test_interpolate_into_gradients_on_every_kind(arch, rng, kind):
    """Inside ti.ad.Tape: src.grad is interpolate_backward's in src's active cells; an
    inactive cell of a sparse src is no data (it reads as 0) and gets no gradient, so src's
    cells stay as they were."""
    refused = sparse_unavailable(kind)
    if refused == "taichi":
        return
    src = declare(kind, ti.f32, (6, 8), needs_grad=True)
    dst = declare(kind, ti.f32, (9, 4), needs_grad=True)
    loss = ti.field(ti.f32, (), needs_grad=True)
    if refused == "tiinterp":
        with pytest.raises(TypeError, match="src: " + REFUSED_SPARSE), ti.ad.Tape(loss=loss):
            tiinterp.interpolate_into(src, dst, mode="bilinear")
        return
    active = populate(src, kind, rng.standard_normal((6, 8)).astype(np.float32), rng)
    populate(dst, kind, np.zeros((9, 4), np.float32), rng)
    before = src.to_numpy()
    weights = rng.standard_normal((9, 4)).astype(np.float32)
    with ti.ad.Tape(loss=loss):
        tiinterp.interpolate_into(src, dst, mode="bilinear")
        _weighted_sum(dst, weights, loss, first_index(dst))
    expected = tiinterp.interpolate_backward(weights[None, None], (1, 1, 6, 8), mode="bilinear")
    expected = np.where(active, expected[0, 0], 0)
    np.testing.assert_allclose(
        src.grad.to_numpy(), expected, rtol=0, atol=tolerance("tape", "float32")
    )
    np.testing.assert_array_equal(src.to_numpy(), before)
    np.testing.assert_allclose(
        dst.to_numpy(), numpy_path(src, (9, 4), "bilinear"), rtol=0, atol=1e-5
    )


# --- grid_sample_into ---------------------------------------------------------------------------

GRID_KINDS = ("offset", "column_major", "bitmasked_offset", "pointer", "dynamic")


@pytest.mark.parametrize("kind", GRID_KINDS)
def test_grid_sample_into_on_every_kind(arch, rng, kind):
    """src, grid and dst all of ``kind`` (a dynamic one: src and dst, with a dense grid of
    vectors, since a dynamic SNode holds scalars here); inactive grid points read (0, 0)."""
    refused = sparse_unavailable(kind)
    if refused == "taichi":
        return
    src = declare(kind, ti.f32, (1, 2, 4, 6))
    grid_kind = "dense" if kind == "dynamic" else kind
    grid = declare(grid_kind, ti.f32, (1, 3, 4), (2,))
    dst = declare(kind, ti.f32, (1, 2, 3, 4))
    if refused == "tiinterp":
        with pytest.raises(TypeError, match="src: " + REFUSED_SPARSE):
            tiinterp.grid_sample_into(src, grid, dst)
        return
    if simd_configuration():
        with pytest.raises(RuntimeError, match="SIMD configuration"):
            tiinterp.grid_sample_into(src, grid, dst)
        return
    populate(src, kind, rng.standard_normal((1, 2, 4, 6)).astype(np.float32), rng)
    populate(grid, grid_kind, rng.uniform(-1.1, 1.1, (1, 3, 4, 2)).astype(np.float32), rng)
    populate(dst, kind, np.full((1, 2, 3, 4), 7.0, np.float32), rng)
    x, g = src.to_numpy(), grid.to_numpy()
    # The options of a test_grid_sample_into.py case: kernels compiled once for both.
    options = {"mode": "bicubic", "padding_mode": "border", "align_corners": True}
    tiinterp.grid_sample_into(src, grid, dst, **options)
    expected = tiinterp.grid_sample(x, g, **options)
    np.testing.assert_allclose(
        dst.to_numpy(), expected, rtol=0, atol=tolerance("tape_values", "float32")
    )
    np.testing.assert_array_equal(src.to_numpy(), x)
    np.testing.assert_array_equal(grid.to_numpy(), g)


# --- Element types ------------------------------------------------------------------------------


def quantized(kind, shape):
    """A field of a quantized type: a fixed-point one in a BitpackedFields, or a 7-bit
    integer one in a quant_array."""
    if kind == "quant_fixed":
        field = ti.field(ti.types.quant.fixed(16, signed=True, max_value=4.0))
        bits = ti.BitpackedFields(max_num_bits=32)
        bits.place(field)
        ti.root.dense(ti.axes(*range(len(shape))), shape).place(bits)
        return field
    field = ti.field(ti.types.quant.int(7, signed=True))
    outer = ti.root.dense(ti.axes(*range(len(shape) - 1)), shape[:-1])
    # 7 bits per value: shape[-1] of them in one word of at most 64 bits.
    outer.quant_array(ti.axes(len(shape) - 1), shape[-1], max_num_bits=64).place(field)
    return field


OTHER_DTYPES = ("f16", "i32", "u8", "i64")


def test_pipelines_refuse_other_element_types_by_name(arch):
    """f16, integer, quantized and struct fields: a TypeError naming the dtype or the kind
    of field, before anything is copied (Taichi's own hash of a quantized type raised
    "[type.cpp:hash@47] Not supported." here)."""
    dst = ti.field(ti.f32, (1, 1, 3, 3))
    grid = ti.field(ti.f32, (1, 3, 3, 2))
    for name in OTHER_DTYPES:
        src = ti.field(getattr(ti, name), (1, 1, 4, 4))
        with pytest.raises(TypeError, match=f"src: expected dtype f32 or f64, got {name}"):
            tiinterp.interpolate_into(src, dst)
        with pytest.raises(TypeError, match=f"src: expected dtype f32 or f64, got {name}"):
            tiinterp.grid_sample_into(src, grid, dst)
        with pytest.raises(TypeError, match=f"dst: expected dtype f32 or f64, got {name}"):
            tiinterp.interpolate_into(dst, ti.field(getattr(ti, name), (1, 1, 3, 3)))
    struct = ti.Struct.field({"a": ti.f32}, shape=(1, 1, 4, 4))
    for call in (
        lambda: tiinterp.interpolate_into(struct, dst),
        lambda: tiinterp.interpolate_into(dst, struct),
        lambda: tiinterp.grid_sample_into(dst, struct, dst),
    ):
        with pytest.raises(TypeError, match=r"expected a Taichi field or ndarray .* struct field"):
            call()
    if not taichi_has(ti.extension.quant):
        return  # Taichi cannot build such a field here (Vulkan: "Not supported" on first use)
    for kind in ("quant_fixed", "quant_array"):
        field = quantized(kind, (1, 1, 4, 4))
        with pytest.raises(TypeError, match=r"src: expected dtype f32 or f64, got the quantized"):
            tiinterp.interpolate_into(field, dst)
        with pytest.raises(TypeError, match=r"dst: expected dtype f32 or f64, got the quantized"):
            tiinterp.interpolate_into(dst, field)
        with pytest.raises(TypeError, match=r"grid: expected dtype f32 or f64, got the quantized"):
            tiinterp.grid_sample_into(dst, field, dst)


# --- tiinterp.funcs samplers --------------------------------------------------------------------

# The two ways the samplers read: sample_nearest's, and the separable sums that linear, cubic
# and lanczos3 share (test_every_sampler_and_boundary runs every sampler). Each kind of field
# compiles a kernel of its own, so only these two.
READS = (("nearest", "clamp"), ("linear", "zero"))


@ti.kernel
def _sample_each(
    f: ti.template(),
    points: ti.types.ndarray(),
    out: ti.types.ndarray(),
    element: ti.template(),
):
    for i in range(points.shape[0]):
        p = ti.Vector([points[i, 0], points[i, 1]])
        for s in ti.static(range(len(READS))):
            value = SAMPLERS[READS[s][0]](f, p, READS[s][1])
            if ti.static(len(element) == 0):
                out[i, s, 0] = value
            elif ti.static(len(element) == 1):
                for a in ti.static(range(element[0])):
                    out[i, s, a] = value[a]
            else:
                for a, b in ti.static(ti.ndrange(*element)):
                    out[i, s, a * element[1] + b] = value[a, b]


def sample_each(f, points, element=()):
    """The READS of ``f`` at ``points``, shape (points, READS, *element)."""
    out = np.zeros((len(points), len(READS), int(np.prod(element))), np.float32)
    _sample_each(f, points, out, element)
    return out.reshape(len(points), len(READS), *element)


def expected_reads(values, points, first):
    """``padded_reference`` at the points moved to ``values``' first sample."""
    return np.stack(
        [
            [padded_reference(values, p - np.array(first), name, boundary) for p in points]
            for name, boundary in READS
        ],
        axis=1,
    )


def points_in(shape, first, rng, count=12):
    """Points (Taichi index coordinates) inside, near and past the edges of a 2-D field."""
    low = np.array(first) - 2.5
    return rng.uniform(low, low + np.array(shape) + 4.0, (count, 2)).astype(np.float32)


@pytest.mark.parametrize("kind", KINDS)
def test_samplers_read_every_kind(arch, rng, kind):
    """Points are Taichi indices: a field declared with offset=o has its first sample at
    p = o. Inactive cells of a sparse field read as 0 (a bitmasked one's old values too)."""
    refused = sparse_unavailable(kind)
    if refused == "taichi":
        return
    f = declare(kind, ti.f32, (6, 8))
    if refused == "tiinterp":  # while the kernel compiles, before anything runs
        with pytest.raises(TypeError, match="f: " + REFUSED_SPARSE):
            sample_each(f, np.zeros((1, 2), np.float32))
        return
    populate(f, kind, rng.standard_normal((6, 8)).astype(np.float32), rng)
    first = first_index(f)
    points = points_in((6, 8), first, rng)
    got = sample_each(f, points)
    expected = expected_reads(f.to_numpy().astype(np.float64), points, first)
    np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance("funcs", "float32") * 10)


def test_samplers_read_every_element_type(arch, rng):
    """Integer, f16, f64 and quantized fields (where Taichi has them) are read as numbers
    and interpolated in floating point (values that every type holds exactly)."""
    names = ["f16", "i32", "u8", "i64"] + (["f64"] if supports_float64() else [])
    if taichi_has(ti.extension.quant):
        names += ["quant_fixed", "quant_array"]
    values = rng.integers(0, 4, (6, 8))
    points = points_in((6, 8), (0, 0), rng)
    expected = expected_reads(values.astype(np.float64), points, (0, 0))
    for name in names:
        f = (
            quantized(name, (6, 8))
            if name.startswith("quant")
            else ti.field(getattr(ti, name), (6, 8))
        )
        _write_where(f, values.astype(np.float32), np.ones((6, 8), np.int32))
        np.testing.assert_allclose(
            sample_each(f, points),
            expected,
            rtol=0,
            atol=tolerance("funcs", "float32") * 10,
            err_msg=name,
        )


ELEMENT_FIELDS = [("soa", (2,)), ("dense", (2, 2)), ("offset", (3,))]


@pytest.mark.parametrize(
    "kind, element", ELEMENT_FIELDS, ids=[f"{k}-{e}" for k, e in ELEMENT_FIELDS]
)
def test_samplers_read_vector_and_matrix_fields(arch, rng, kind, element):
    """Every component; in the SIMD configuration, a clear refusal (Taichi 1.7.4 aborts in
    LLVM reading a vector field there)."""
    f = declare(kind, ti.f32, (6, 8), element)
    points = points_in((6, 8), first_index(f), rng)
    if simd_configuration():
        with pytest.raises(
            RuntimeError,
            match=r"f: expected a scalar field or a Taichi ndarray .*SIMD.*got a vector or matrix",
        ):
            sample_each(f, points, element)
        return
    populate(f, kind, rng.standard_normal((6, 8, *element)).astype(np.float32), rng)
    got = sample_each(f, points, element)
    expected = expected_reads(f.to_numpy().astype(np.float64), points, first_index(f))
    np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance("funcs", "float32") * 10)


@ti.kernel
def _warp(
    f: ti.template(),
    u: ti.template(),
    out: ti.template(),
    sampler: ti.template(),
    boundary: ti.template(),
):
    for i in ti.grouped(out):
        out[i] = funcs.warp(f, u, i, sampler, boundary)


def test_warp_on_offset_fields(arch, rng):
    """f, the displacement and the output declared with the same offset=: out[i] reads f at
    the Taichi index i + u[i]."""
    f = declare("offset", ti.f32, (6, 8))
    u = declare("offset", ti.f32, (6, 8), (2,))
    out = declare("offset", ti.f32, (6, 8))
    values = rng.standard_normal((6, 8)).astype(np.float32)
    shift = rng.uniform(-2.5, 2.5, (6, 8, 2)).astype(np.float32)
    f.from_numpy(values)
    if simd_configuration():  # u is a vector field
        with pytest.raises(RuntimeError, match="displacement: expected a scalar field or a"):
            _warp(f, u, out, funcs.sample_cubic, "reflect")
        return
    u.from_numpy(shift)
    _warp(f, u, out, funcs.sample_cubic, "reflect")
    grid = np.stack(np.meshgrid(np.arange(6), np.arange(8), indexing="ij"), axis=-1)
    expected = [
        padded_reference(values.astype(np.float64), p, "cubic", "reflect")
        for p in (grid + shift).reshape(-1, 2)
    ]
    np.testing.assert_allclose(
        out.to_numpy().ravel(), expected, rtol=0, atol=tolerance("funcs", "float32") * 10
    )


# --- Every sampler and boundary, in both CPU configurations -------------------------------------


@ti.kernel
def _sample_with(
    f: ti.template(),
    points: ti.types.ndarray(),
    out: ti.types.ndarray(),
    sampler: ti.template(),
    boundary: ti.template(),
):
    for i in range(points.shape[0]):
        out[i] = sampler(f, ti.Vector([points[i, 0], points[i, 1]]), boundary)


# Outside the SIMD configuration, test_funcs.py's test_boundaries_match_numpy_pad runs every
# boundary of every sampler: one boundary each here (a 2-D lanczos3 kernel takes ~2 s to
# compile on the CPU).
BOUNDARY_OUTSIDE_SIMD = {
    "nearest": "zero",
    "linear": "mirror",
    "cubic": "reflect",
    "lanczos3": "periodic",
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_every_sampler_and_boundary(arch, rng, name):
    """Every sampler with every boundary on a scalar float32 field in the SIMD configuration,
    where Taichi 1.7.4 aborted the process in LLVM ("Invalid cast!") on the samplers'
    float-to-int cast of a whole vector; one boundary elsewhere."""
    f = ti.field(ti.f32, (5, 7))
    values = rng.standard_normal((5, 7)).astype(np.float32)
    f.from_numpy(values)
    points = points_in((5, 7), (0, 0), rng, 16)
    boundaries = BOUNDARIES if simd_configuration() else (BOUNDARY_OUTSIDE_SIMD[name],)
    for boundary in boundaries:
        out = np.zeros(len(points), np.float32)
        _sample_with(f, points, out, SAMPLERS[name], boundary)
        expected = [padded_reference(values.astype(np.float64), p, name, boundary) for p in points]
        np.testing.assert_allclose(
            out, expected, rtol=0, atol=tolerance("funcs", "float32") * 10, err_msg=boundary
        )


@ti.kernel
def _sample_ndarrays(
    scalars: ti.types.ndarray(dtype=ti.f32, ndim=3),
    vectors: ti.types.ndarray(dtype=ti.math.vec2, ndim=3),
    points: ti.types.ndarray(),
    out: ti.types.ndarray(),
):
    for i in range(points.shape[0]):
        p = ti.Vector([points[i, 0], points[i, 1], points[i, 2]])
        out[i, 0] = funcs.sample_linear(scalars, p, "reflect")
        v = funcs.sample_cubic(vectors, p, "periodic")
        out[i, 1] = v[0]
        out[i, 2] = v[1]


def test_samplers_read_3d_ndarrays_of_scalars_and_vectors(arch, rng):
    """Taichi ndarrays (vector ones included, which the SIMD configuration reads correctly)
    in 3-D."""
    shape = (4, 5, 3)
    scalars = rng.standard_normal(shape).astype(np.float32)
    vectors = rng.standard_normal((*shape, 2)).astype(np.float32)
    scalars_nd = ti.ndarray(ti.f32, shape)
    vectors_nd = ti.Vector.ndarray(2, ti.f32, shape)
    scalars_nd.from_numpy(scalars)
    vectors_nd.from_numpy(vectors)
    points = rng.uniform(-2.5, 6.5, (10, 3)).astype(np.float32)
    out = np.zeros((len(points), 3), np.float32)
    _sample_ndarrays(scalars_nd, vectors_nd, points, out)
    expected = np.array(
        [
            [
                padded_reference(scalars.astype(np.float64), p, "linear", "reflect"),
                *padded_reference(vectors.astype(np.float64), p, "cubic", "periodic"),
            ]
            for p in points
        ]
    )
    np.testing.assert_allclose(out, expected, rtol=0, atol=tolerance("funcs", "float32") * 10)


@ti.kernel
def _sample_point(f: ti.template(), p: ti.types.ndarray(), loss: ti.template()):
    for _ in range(1):
        loss[None] += funcs.sample_linear(f, ti.Vector([p[0], p[1]]))


def test_sampler_gradients_are_refused_only_in_the_simd_configuration(arch):
    """ti.ad through a sampler: the bilinear weights as f.grad, except in the SIMD
    configuration, where Taichi 1.7.4 gives NaN gradients or aborts: a clear error when the
    gradient kernel compiles."""
    f = ti.field(ti.f32, (3, 4), needs_grad=True)
    loss = ti.field(ti.f32, (), needs_grad=True)
    point = np.array([0.25, 2.5], np.float32)
    if simd_configuration():
        with (
            pytest.raises(RuntimeError, match=r"differentiation \(ti\.ad\).*SIMD"),
            ti.ad.Tape(loss=loss),
        ):
            _sample_point(f, point, loss)
        return
    with ti.ad.Tape(loss=loss):
        _sample_point(f, point, loss)
    expected = np.zeros((3, 4), np.float32)
    expected[0:2, 2:4] = np.outer([0.75, 0.25], [0.5, 0.5])
    np.testing.assert_allclose(f.grad.to_numpy(), expected, rtol=0, atol=1e-6)


def test_samplers_refuse_what_they_cannot_read(arch):
    """A point whose dimension is not the field's, and a struct field: TypeError (Taichi's
    TaichiTypeError) while the kernel compiles."""
    f3 = ti.field(ti.f32, (3, 4, 5))
    struct = ti.Struct.field({"a": ti.f32}, shape=(3, 4))

    @ti.kernel
    def read(f: ti.template()) -> ti.f32:
        return funcs.sample_linear(f, ti.Vector([0.5, 0.5]))

    with pytest.raises(TypeError, match=r"p: expected a 3-D point .*, got a 2-D one"):
        read(f3)
    with pytest.raises(TypeError, match=r"f: expected a Taichi field .* struct field"):
        read(struct)
