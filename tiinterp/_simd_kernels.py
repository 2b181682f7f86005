"""SIMD resampling kernels for the CPU: rows as vector lanes.

Taichi 1.7.4 vectorises a kernel only where it stores a value of a vector type: a store of
one scalar at a time never becomes SIMD code, because LLVM's SLP vectoriser starts from
chains of stores and Taichi reloads an ndarray's data pointer after every store (seen in
the generated code), whereas a vector-typed store writes every lane from one pointer. With
``ti.init(real_matrix_scalarize=False)`` a ``ti.Vector`` of ``LANES`` floats is an LLVM
vector and each of its arithmetic operations one packed instruction, so these kernels hold
``LANES`` neighbouring *rows* (or columns) in one vector and apply each tap's weight to all
lanes at once. Under Taichi's default options the same kernels compile to scalar code and
stay correct, with half as many lanes (Note [Lanes without SIMD]).

``plane`` resamples both trailing axes of ``(P, H, W)`` in one launch (the separable passes
fused, so the intermediate never leaves the cache): for each group of ``LANES`` output rows
it combines input rows into ``LANES`` vectors per block of ``LANES`` columns, transposes each
``LANES x LANES`` block into a per-worker scratch line whose vectors are one column of the
``LANES`` rows, resamples that line along the columns with one broadcast weight per tap, and
transposes back on the way out; its input lines are at least ``LANES`` long
(Note [Front-end cost]). ``middle`` resamples the middle axis of ``(A, L, B)``, where the
lanes are ``LANES`` consecutive elements of B. A last-axis-only pass is ``plane`` with
identity row taps.

Loads are built from scalar loads (LLVM fuses them into one unaligned vector load), so the
source may sit anywhere. A vector-typed store needs a 32-byte-aligned address (Taichi emits
aligned stores), so each kernel has a form that stores vectors, for results the engine
allocated aligned with a row length a multiple of ``LANES`` in the SIMD configuration, and a
form that stores scalars, for everything else (a user's ``out=``, and every result under
Taichi's default options: Note [Lanes without SIMD]). Every output sums its taps in the
table's order, as the reference kernels do, in the source. The compiled order is LLVM's:
under Taichi's default fast math it may reassociate the sums and fuse multiply-adds, and does so
differently in the vector code and in the scalar code that the default options make, so the
two configurations agree to rounding only (measured in docs/guide/archs.md, tested in
tests/test_simd_configuration.py); with ``fast_math=False`` they agree bit for bit.
"""

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ._taichi import launch, ti

# Elements of one 256-bit vector: 8 float32, 4 float64.
VECTOR_BYTES = 32

# Note [Lanes without SIMD]
# Under Taichi's default options (``real_matrix_scalarize=True``) every ``ti.Vector`` is
# split into scalars before LLVM sees it, so the lanes buy no SIMD instructions there; they
# only set how much of each kernel Taichi's Python front end unrolls, which it does again
# for every kernel signature in every new process, before its offline cache is consulted.
# Half as many lanes there (4 float32, 2 float64) cut a first bilinear call with a warm
# cache from 0.50 s to 0.24 s and a cold one from 1.16 s to 0.39 s, and ran as fast
# (measured; the summation order of every output is the tables', whatever the lanes).
# For the same reason the CPU path stores scalars there even into an aligned result
# (``vector_out`` False): vector stores were no faster (a W4 bilinear call 171 us against
# 167, a 512^2 -> 1024^2 bicubic one 7.1 ms against 6.8, same bits) and every size whose
# rows are a multiple of the lanes would compile a second set of kernels: a folder of
# differently sized images paid both.

# Note [Front-end cost]
# A kernel's first launch in each new process runs Taichi's Python front end over it, and
# the front end visits every AST node once per unrolled copy; for each visit it also
# formats the node's source position for its error messages (measured: 0.18 s of a 0.39 s
# first antialiased lanczos3 call, 9,332 visits). LLVM then compiles the cached IR again,
# in time that grows with the unrolled code too. ``plane`` unrolls its row pass
# LANES * taps times, so what is unrolled there is kept small:
# - each output row's table offset is computed once (``at``);
# - a line ends without a scalar tail loop: its last vector block ends at the line's end,
#   overlapping the block before, whose columns it computes again to the same bits (lines
#   narrower than LANES take the generic kernel);
# - under Taichi's default options, a table of more than UNROLLED_TAPS taps (wide filters:
#   antialiased downscaling, lanczos5) loops over them at run time, in the row and the
#   column pass; the SIMD configuration, chosen for speed, unrolls them all.
# Measured side by side, new processes with a warm cache: a first antialiased lanczos3 call
# went from 9,332 visits to 3,272 and from 0.39-0.42 s to 0.23-0.27 s, a first lanczos5
# call from 0.35-0.36 s to 0.21-0.23 s. The run-time loops cost those filters' calls 4-10%
# (512^2 -> 256^2 antialiased lanczos3 3.05-3.10 ms against 2.92-2.95; 256^2 -> 512^2
# lanczos5 5.5-5.6 against 5.3-5.4; 1080p -> 360p antialiased bicubic 13.9-14.4 against
# 12.9-13.1); narrower tables are unchanged.
# Under Taichi's default options, the row and column passes of wider tables loop over their
# taps at run time (Note [Front-end cost]).
UNROLLED_TAPS = 8
# Vector blocks of a line that one parallel iteration of ``middle`` computes.
BLOCKS_PER_CHUNK = 64

# Note [Small loops run serially]
# Taichi 1.7.4's CPU backend hands each thread at least 512 consecutive iterations of a
# parallel loop (``cpu_block_dim_adaptive`` overrides ``ti.loop_config(block_dim=...)``), so
# a loop of at most 512 iterations runs on one thread anyway, after waking every thread of
# the pool: 40-80 us per launch on a 2-core machine, against 8 us for the same launch with
# the loop serialised (measured). The kernels take ``serial``, a compile-time flag, and the
# CPU path sets it for such loops. The two compilations give the same bits under Taichi's
# default options; in the SIMD configuration fast math lets LLVM contract their
# multiply-adds differently, so they agree to rounding there (measured: 3.8e-7 float32,
# 1.0e-15 float64 relative to the largest value; tests/test_small_calls.py).
CPU_THREAD_BLOCK = 512


def runs_serially(iterations: int) -> bool:
    """Whether a parallel loop of ``iterations`` is compiled serialised (the Note)."""
    return iterations <= CPU_THREAD_BLOCK


def middle_chunks(width: int, lanes: int) -> int:
    """The chunks ``middle`` splits each line of ``width`` elements into."""
    return max(1, -(-(width // lanes) // BLOCKS_PER_CHUNK))


def lanes_for(dtype: np.dtype, simd: bool) -> int:
    """Lanes per vector: a 256-bit vector's elements in the SIMD configuration (``simd``);
    half as many under Taichi's default options (Note [Lanes without SIMD])."""
    lanes = VECTOR_BYTES // np.dtype(dtype).itemsize
    return lanes if simd else lanes // 2


class SimdKernels(NamedTuple):
    plane: Any
    middle: Any
    lanes: int


@functools.cache
def simd_kernels(dtype: np.dtype, lanes: int, vector_out: bool) -> SimdKernels:
    """The kernels for ``dtype`` (float32 or float64) with ``lanes`` per vector;
    ``vector_out``: results are ``(.., row length / LANES)`` arrays of aligned vectors, else
    plain arrays."""
    real = ti.f32 if dtype == np.float32 else ti.f64
    vec = ti.types.vector(lanes, real)
    # Lanes fill a whole vector in the SIMD configuration only (lanes_for); there every tap
    # is unrolled, elsewhere only narrow tables' (Note [Front-end cost]).
    unroll_every_tap = lanes * np.dtype(dtype).itemsize == VECTOR_BYTES

    @ti.func
    def load(source: ti.template(), p, i, j0):
        """``source[p, i, j0 : j0 + LANES]`` as one vector."""
        return ti.Vector([source[p, i, j0 + c] for c in ti.static(range(lanes))])

    @ti.func
    def combine_rows(source: ti.template(), p, rows, weights, taps: ti.template(), j0):
        """``sum_k weights[k] * source[p, rows[k], j0 : j0 + LANES]``, taps in order."""
        total = weights[0] * load(source, p, rows[0], j0)
        if ti.static(unroll_every_tap or taps <= UNROLLED_TAPS):
            for k in ti.static(range(1, taps)):
                total += weights[k] * load(source, p, rows[k], j0)
        else:
            for k in range(1, taps):
                total += weights[k] * load(source, p, rows[k], j0)
        return total

    @ti.func
    def combine_rows_at(source: ti.template(), p, rows, weights, taps: ti.template(), j):
        total = weights[0] * source[p, rows[0], j]
        for k in ti.static(range(1, taps)):
            total += weights[k] * source[p, rows[k], j]
        return total

    @ti.func
    def combine_columns(
        line: ti.template(),
        worker,
        index: ti.template(),
        weight: ti.template(),
        taps: ti.template(),
        entry,
    ):
        """One output column of the ``LANES`` rows held in ``line[worker]``, by the taps
        ``entry, entry + 1, ...`` of the packed table."""
        total = weight[entry] * line[worker, index[entry]]
        if ti.static(unroll_every_tap or taps <= UNROLLED_TAPS):
            for k in ti.static(range(1, taps)):
                total += weight[entry + k] * line[worker, index[entry + k]]
        else:
            for k in range(1, taps):
                total += weight[entry + k] * line[worker, index[entry + k]]
        return total

    @ti.func
    def store_rows(result: ti.template(), p, o0, rows_out, qb, columns: ti.template()):
        """Write ``LANES`` output columns (one vector each, lanes = rows) from column block
        ``qb``, transposed back to rows; rows past ``rows_out`` are the clamped copies of a
        short last group and are not written."""
        for r in ti.static(range(lanes)):
            if o0 + r < rows_out:
                if ti.static(vector_out):
                    result[p, o0 + r, qb] = ti.Vector(
                        [columns[c][r] for c in ti.static(range(lanes))]
                    )
                else:
                    for c in ti.static(range(lanes)):
                        result[p, o0 + r, qb * lanes + c] = columns[c][r]

    @ti.kernel
    def plane(
        source: ti.types.ndarray(dtype=real, ndim=3),
        result: ti.types.ndarray(dtype=vec if vector_out else real, ndim=3),
        scratch: ti.types.ndarray(dtype=vec, ndim=2),
        index: ti.types.ndarray(dtype=ti.i32, ndim=1),
        weight: ti.types.ndarray(dtype=real, ndim=1),
        rows_out: ti.i32,
        row_taps: ti.template(),
        width_out: ti.i32,
        col_taps: ti.template(),
        serial: ti.template(),
    ):
        """Resample both axes of ``(P, H, W)`` into ``(P, Ho, Wo)`` (see the module's
        docstring); ``scratch`` is ``(workers, W + 1)`` vectors, each worker taking a
        contiguous run of (plane, row group) jobs. ``index`` and ``weight`` hold the row
        table (Ho, row_taps) followed by the column table (Wo, col_taps), flattened: every
        ndarray argument costs ~10 us per launch in Taichi's Python front end."""
        height = source.shape[1]
        width = source.shape[2]
        columns_at = rows_out * row_taps
        groups = (rows_out + lanes - 1) // lanes
        jobs = source.shape[0] * groups
        workers = scratch.shape[0]
        ti.loop_config(serialize=serial)  # Note [Small loops run serially]
        for worker in range(workers):
            # worker * jobs passes 2^31 for large inputs: split in 64-bit arithmetic.
            begin = ti.cast(ti.cast(worker, ti.i64) * jobs // workers, ti.i32)
            end = ti.cast(ti.cast(worker + 1, ti.i64) * jobs // workers, ti.i32)
            # The slot past the line: the marked taps of empty output columns read 0 there.
            scratch[worker, width] = ti.Vector.zero(real, lanes)
            for job in range(begin, end):
                p = job // groups
                o0 = job % groups * lanes
                # The group's tap rows and weights, kept in registers; a short last group
                # repeats its last row. (Note [Front-end cost]: each table entry is one
                # short expression, as these lines are unrolled lanes * taps times.)
                at = [ti.min(o0 + r, rows_out - 1) * row_taps for r in ti.static(range(lanes))]
                rows = [
                    ti.Vector(
                        [ti.min(index[at[r] + k], height - 1) for k in ti.static(range(row_taps))]
                    )
                    for r in ti.static(range(lanes))
                ]
                # Lanes of empty output rows (marked taps) hold exactly 0.
                keep = [index[at[r]] < height for r in ti.static(range(lanes))]
                weights = [
                    ti.Vector([weight[at[r] + k] for k in ti.static(range(row_taps))])
                    for r in ti.static(range(lanes))
                ]
                # The last block ends at the line's end, overlapping the one before where
                # the width is not a multiple of LANES: its columns are computed again, to
                # the same bits, and no scalar tail loop is unrolled
                # (Note [Front-end cost]); lines narrower than LANES take the generic kernel.
                for jb in range((width + lanes - 1) // lanes):
                    j0 = ti.min(jb * lanes, width - lanes)
                    block = [
                        ti.select(
                            keep[r], combine_rows(source, p, rows[r], weights[r], row_taps, j0), 0
                        )
                        for r in ti.static(range(lanes))
                    ]
                    for c in ti.static(range(lanes)):
                        scratch[worker, j0 + c] = ti.Vector(
                            [block[r][c] for r in ti.static(range(lanes))]
                        )
                for qb in range(width_out // lanes):
                    columns = [
                        combine_columns(
                            scratch,
                            worker,
                            index,
                            weight,
                            col_taps,
                            columns_at + (qb * lanes + c) * col_taps,
                        )
                        for c in ti.static(range(lanes))
                    ]
                    store_rows(result, p, o0, rows_out, qb, columns)
                if ti.static(not vector_out):
                    for q in range(width_out // lanes * lanes, width_out):
                        column = combine_columns(
                            scratch, worker, index, weight, col_taps, columns_at + q * col_taps
                        )
                        for r in ti.static(range(lanes)):
                            if o0 + r < rows_out:
                                result[p, o0 + r, q] = column[r]

    @ti.kernel
    def middle(
        source: ti.types.ndarray(dtype=real, ndim=3),
        result: ti.types.ndarray(dtype=vec if vector_out else real, ndim=3),
        index: ti.types.ndarray(dtype=ti.i32, ndim=2),
        weight: ti.types.ndarray(dtype=real, ndim=2),
        taps: ti.template(),
        chunks: ti.i32,
        serial: ti.template(),
    ):
        """Resample the middle axis of ``(A, L, B)`` into ``(A, Lo, B)``: weighted sums of
        whole lines, ``LANES`` elements per vector, each line split into chunks so that a
        few long lines (a depth pass) still keep every thread busy."""
        width = source.shape[2]
        blocks = width // lanes
        ti.loop_config(serialize=serial)  # Note [Small loops run serially]
        for a, o, chunk in ti.ndrange(source.shape[0], index.shape[0], chunks):
            length = source.shape[1]
            rows = ti.Vector([ti.min(index[o, k], length - 1) for k in ti.static(range(taps))])
            weights = ti.Vector([weight[o, k] for k in ti.static(range(taps))])
            keep = index[o, 0] < length  # else an empty output (marked taps): exactly 0
            for qb in range(
                chunk * BLOCKS_PER_CHUNK, ti.min((chunk + 1) * BLOCKS_PER_CHUNK, blocks)
            ):
                value = ti.select(keep, combine_rows(source, a, rows, weights, taps, qb * lanes), 0)
                if ti.static(vector_out):
                    result[a, o, qb] = value
                else:
                    for c in ti.static(range(lanes)):
                        result[a, o, qb * lanes + c] = value[c]
            if ti.static(not vector_out):
                if chunk == chunks - 1:
                    for q in range(blocks * lanes, width):
                        result[a, o, q] = ti.select(
                            keep, combine_rows_at(source, a, rows, weights, taps, q), 0
                        )

    return SimdKernels(plane, middle, lanes)


def simd_plane(
    source: Any,
    result: Any,
    scratch: np.ndarray,
    tables: tuple[np.ndarray, np.ndarray],
    counts: tuple[int, int, int, int],
    vector_out: bool,
    serial: bool,
    run: Callable[..., Any] = launch,
) -> None:
    """Launch ``plane`` (by ``run``, :func:`launch` or a :class:`HostLaunches`) with the
    packed ``tables`` (:func:`packed_tables`) and ``counts`` (output rows, row taps, output
    columns, column taps)."""
    index, weight = tables
    run(
        simd_kernels(weight.dtype, scratch.shape[2], vector_out).plane,
        source,
        result,
        scratch,
        index,
        weight,
        *counts,
        serial,
    )


def simd_middle(
    source: Any,
    result: Any,
    index: np.ndarray,
    weight: np.ndarray,
    chunks: int,
    lanes: int,
    vector_out: bool,
    serial: bool,
    run: Callable[..., Any] = launch,
) -> None:
    """Launch ``middle`` (by ``run``, as ``plane``) for the table ``(index, weight)``, each
    line in ``chunks`` (:func:`middle_chunks`)."""
    run(
        simd_kernels(weight.dtype, lanes, vector_out).middle,
        source,
        result,
        index,
        weight,
        weight.shape[1],
        chunks,
        serial,
    )


class _Tables:
    """A cache key: table arrays compared by identity (the tables are cached and read-only
    themselves); holding them keeps their ids from being reused while cached."""

    def __init__(self, *arrays: np.ndarray) -> None:
        self.arrays = arrays

    def __hash__(self) -> int:
        return hash(tuple(map(id, self.arrays)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Tables) and all(
            a is b for a, b in zip(self.arrays, other.arrays, strict=True)
        )


@functools.lru_cache(maxsize=64)
def _packed(tables: _Tables) -> tuple[np.ndarray, np.ndarray]:
    row_index, row_weight, col_index, col_weight = tables.arrays
    return (
        np.concatenate([row_index.ravel(), col_index.ravel()]),
        np.concatenate([row_weight.ravel(), col_weight.ravel()]),
    )


def packed_tables(
    rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """``plane``'s one index and one weight array: the row table, then the column table."""
    return _packed(_Tables(*rows, *cols))
