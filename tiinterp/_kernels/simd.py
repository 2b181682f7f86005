"""SIMD resampling kernels for the CPU: rows as vector lanes.

Taichi 1.7.4 vectorises a kernel only where it stores a value of a vector type: a store of
one scalar at a time never becomes SIMD code, because LLVM's SLP vectoriser starts from
chains of stores and Taichi reloads an ndarray's data pointer after every store (seen in
the generated code), whereas a vector-typed store writes every lane from one pointer.
Compiled with ``real_matrix_scalarize=False``, which these kernels always are
(Note [Vector types under any options] in ``_runtime/taichi.py``), a ``ti.Vector`` of ``LANES``
floats is an LLVM vector and each of its arithmetic operations one packed instruction, so
these kernels hold ``LANES`` neighbouring *rows* (or columns) in one vector and apply each
tap's weight to all lanes at once.

``plane`` resamples both trailing axes of ``(P, H, W)`` in one launch (the separable passes
fused, so the intermediate never leaves the cache): for each group of ``LANES`` output rows
it combines input rows, one output row at a time, into vectors of ``LANES`` columns in a
per-thread scratch line, transposes each ``LANES x LANES`` block into vectors that are one
column of the ``LANES`` rows, resamples those along the columns with one broadcast weight
per tap, and transposes back on the way out; its input lines are at least ``LANES`` long
(Note [Front-end cost]). ``middle`` resamples the middle axis of ``(A, L, B)``, where the
lanes are ``LANES`` consecutive elements of B. A last-axis-only pass is ``plane`` with
identity row taps.

A source is read in 16-byte half vectors where it allows, else by scalar loads (Note
[Half-vector loads]). Results are written in one of three store forms (Note [Store
forms]): whole vectors, half vectors, or scalars. Every output sums
its taps in the table's order, as the reference kernels do, in the source. The compiled
order is LLVM's: under Taichi's default fast math it may reassociate the sums and fuse
multiply-adds, and may do so differently in two compilations of one sum (a serial and a
parallel loop, unrolled and looped taps), which then agree to rounding only (measured in
docs/guide/archs.md, tested in tests/kernels/test_simd_configuration.py and
tests/engine/test_small_calls.py); with ``fast_math=False`` they agree bit for bit.
"""

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._runtime.arrays import aligned_empty
from .._runtime.taichi import launch, launch_with_vector_types, ti

# Elements of one 256-bit vector: 8 float32, 4 float64.
VECTOR_BYTES = 32
HALF_VECTOR_BYTES = 16
HALVES_FROM = 2**16

# Note [Front-end cost]
# A kernel's first launch in each new process runs Taichi's Python front end over it, and
# the front end visits every AST node once per unrolled copy; for each visit it also
# formats the node's source position for its error messages (measured: 0.18 s of a 0.39 s
# first antialiased lanczos3 call, 9,332 visits). LLVM then compiles the cached IR again,
# in time that grows with the unrolled code too. So what ``plane`` unrolls is kept small:
# - under Taichi's default options its row pass is a run-time loop over the group's LANES
#   rows, each storing its vectors into the scratch line, which the transposes read back:
#   unrolled over the rows, the row pass's loads made 42% of a first bicubic call's 7,510
#   visits; looped, the call makes 3,078, and its first call with a warm cache took 0.25 s
#   instead of 0.43 (under load). The SIMD configuration, chosen for speed, keeps the rows
#   unrolled (``rows_pass_unrolled``): the looped form ran W1 bilinear and W2 antialiased
#   bicubic 0.92-0.94x as fast there. Row tables of at most UNROLLED_ROW_TAPS taps
#   (bilinear, nearest enlargements) are unrolled under every option: their unrolled row
#   pass is small, and looping it cost bilinear W2 1.22x, W1 and W3 1.07-1.08x the time
#   (best of 11, three rounds), for 70 ms less on a first bilinear call (warm cache: 0.22 s
#   against 0.15) and 43 ms on a first nearest enlargement (0.17 against 0.13);
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
UNROLLED_TAPS = 8
UNROLLED_ROW_TAPS = 2
# Note [Bounded kernel variants]
# Each distinct value of a kernel's compile-time arguments is its own Taichi kernel, and
# Taichi 1.7.4 runs its Python front end over each one in every new process before it can
# read the compiled code from its cache (0.1-0.4 s each: Note [Front-end cost]). A tap
# count that follows the image's size (an antialiased downscaling's window grows with the
# scale) then made every new image size a new kernel: 20 photos of 20 sizes, resized to 64
# columns with antialias, compiled 5 ``plane`` kernels for lanczos3 and 13 for bilinear, at
# 0.2-0.7 s each. So a table's width is a compile-time constant only where that pays and
# the set of widths is small: up to UNROLLED_ROW_TAPS (nearest, linear: their unrolled
# row pass is small; looped, bilinear's W4 backward took 1.8x as long, one run under
# load, relative to PyTorch in the same run), up to UNROLLED_TAPS for
# results of more than HALVES_FROM elements (where unrolled taps run faster), and in the
# SIMD configuration; otherwise the kernel is its WIDE form, which reads the width at run
# time and loops over the taps, in the same order (the sums are those of the looped form
# the wider tables always took; where the unrolled form was used before, the two agree to
# rounding, as Note [Front-end cost]'s forms do). Results of at most HALVES_FROM elements
# (a thumbnail, a small call) also run serially, so a mode resizes them, whatever their
# size and scale, with ``plane`` kernels of widths 1, 2 or WIDE per axis, for each load
# and store form. For larger results, the widths up to UNROLLED_TAPS join them: a bounded
# set per mode. The price is on a first call: Taichi's offline cache keeps LLVM IR, not
# machine code, and the WIDE form's is larger, so a first bicubic (1, 3, 64, 64) ->
# (128, 128) in a new process with a warm cache took 0.33-0.37 s against 0.21-0.23 with its
# 4 taps unrolled (bilinear's 0.31-0.33 either way); ``tiinterp.warmup`` pays it at start.
WIDE = 0
# Note [Half-vector loads]
# Taichi 1.7.4 computes an ndarray element's offset in 32-bit arithmetic and widens it to
# 64 bits, so LLVM cannot prove that ``source[p, i, j0 + c]`` for c = 0..LANES-1 are
# neighbours, and its SLP vectoriser makes the LANES scalar loads one gather instruction
# (seen in the generated code; 16 per 8 x 8 block in a bilinear row pass). A load of a
# vector-typed element is one load, but Taichi marks it aligned to the vector's size, and
# such a load from a misaligned address faults (tried: a segmentation fault 20 bytes off).
# NumPy allocates on 16-byte boundaries (glibc's malloc on x86-64), so ``plane`` and
# ``middle`` read a source whose data starts on one and whose lines are a multiple of HALF
# elements long as lines of 16-byte vectors, two per LANES-wide load (``halves``).
# Measured (best of 9-21, two rounds, Taichi's default options): W1 bicubic forward 19.0 ms
# against 21.4, backward 20.3 against 26.3, W3 bilinear backward 2.16 against 2.44, W2
# bilinear 2-3% (memory-bound). Sources of at most HALVES_FROM elements keep the scalar
# loads: the second variant of each kernel would cost a compilation for calls that are
# mostly launch overhead (the resize tests took 21% longer from a cold cache with it); so
# do results of at most HALVES_FROM elements, whatever their source (a thumbnail of a
# photo: the variant was a compilation more for every class of call, by the photo's size,
# Note [Bounded kernel variants]). The two variants sum in the same order; under fast
# math they agree to rounding.

# Note [Store forms]
# A vector-typed store is one instruction, marked aligned to the vector's size as loads are
# (Note [Half-vector loads]), so each kernel has three forms, by the result's address and
# row length (``store_form``): ``"vectors"`` stores 32-byte vectors, for results on a
# 32-byte boundary (those tiinterp allocates) whose rows are a multiple of LANES long;
# ``"halves"`` stores each vector as two 16-byte halves, for such rows on a 16-byte
# boundary only, which is where NumPy's allocator puts most ``out=`` arrays (glibc's malloc
# on x86-64 aligns to 16 bytes); ``"scalars"`` stores one element at a time, for everything
# else. Scalar stores are not vectorised (the module's docstring): W1 bilinear into a
# NumPy ``out=`` 16 bytes off a 32-byte boundary took 22.4-24.0 ms with them, 15.2-16.3
# with half vectors, against 13.8-14.4 into an aligned one (best of 27, Taichi's default
# options). The three forms sum alike; the vector and half-vector forms gave the same bits
# (tests/runtime/test_array_kinds.py). As with the loads, results of at most HALVES_FROM
# elements do not take the half-vector form. They keep the vector form where it applies,
# although one form (scalars) for every small result would compile a kernel less for a
# folder of photos: scalar stores make a larger kernel, and a first small bicubic call in a
# new process took 0.47-0.49 s with them against 0.38-0.40 with vectors (warm cache).

# Vector blocks of a line that one parallel iteration of ``middle`` computes.
BLOCKS_PER_CHUNK = 64

# Note [Small loops run serially]
# Taichi 1.7.4's CPU backend hands each thread at least 512 consecutive iterations of a
# parallel loop (``cpu_block_dim_adaptive`` overrides ``ti.loop_config(block_dim=...)``), so
# a loop of at most 512 iterations runs on one thread anyway, after waking every thread of
# the pool: 40-80 us per launch on a 2-core machine, against 8 us for the same launch with
# the loop serialised (measured). The kernels take ``serial``, a compile-time flag, and the
# CPU path sets it for such loops. Fast math lets LLVM contract the two compilations'
# multiply-adds differently, so they agree to rounding (measured in the SIMD configuration,
# whose kernels these are: 3.8e-7 float32, 1.0e-15 float64 relative to the largest value;
# tests/engine/test_small_calls.py).
CPU_THREAD_BLOCK = 512
# ``plane`` and ``gather`` loop over more iterations than they have jobs (Note [Workers and
# threads]), so they run serially by the size of their result instead: up to 2^16 outputs,
# tens of microseconds of work on one thread.
SERIAL_OUTPUTS = 2**16

# Note [Values the parallel loop reloads]
# Taichi 1.7.4 keeps a value that a kernel computes before its parallel loop and the loop
# uses in a buffer of the runtime (a "global temporary"), and the loop's code loads it from
# there at each use after a store, since an ndarray store may write anywhere (seen in the
# generated code: three dependent loads, context -> runtime -> buffer, before each of
# ``gather``'s vector gathers). A value computed inside the loop body is a register. So
# ``gather`` computes its per-block offsets in the loop: a (4, 3, 333, 517) -> (480, 640)
# nearest resize took 0.63-0.67 ms against 0.75-0.77, a (8, 16, 512, 512) -> (256, 256)
# one 5.9-6.0 against 7.0-7.1 (medians of 41 and best of 41, two rounds; the first row's
# store taken out of the repeat loop too). ``plane`` ran W1 and W2 bilinear 1.1-1.5x
# slower with its values moved into its loop (whose body keeps many vectors live; not
# investigated further), and ``middle`` a trilinear depth pass the same either way: they
# keep theirs before the loop.

# Note [Workers and threads]
# Taichi's CPU backend splits a parallel loop into blocks of at least CPU_THREAD_BLOCK
# consecutive iterations, one task each, so a loop of n iterations keeps at most
# ceil(n / 512) threads busy. ``plane``'s loop has at least CPU_THREAD_BLOCK iterations per
# thread of the runtime (``plane_workers``), each taking a contiguous run of the jobs (some
# none), and each works in the scratch line of the thread that runs it
# (``ti.global_thread_idx()``: below the runtime's thread count on both backends, 0 in a
# serial loop), one line per thread. With one iteration and one line per job, up to 1,024,
# a call kept at most 2 threads busy on any machine, and 1 with 512 jobs or fewer: a
# (4, 3, 480, 640) -> (333, 517) bilinear adjoint, 504 jobs, took 8.2-8.9 ms on one thread
# of this 2-core machine and 4.x ms on both.


def runs_serially(iterations: int) -> bool:
    """Whether a parallel loop of ``iterations`` is compiled serialised (the Note)."""
    return iterations <= CPU_THREAD_BLOCK


def runs_serially_for(outputs: int) -> bool:
    """Whether ``plane`` or ``gather`` making ``outputs`` values is compiled serialised."""
    return outputs <= SERIAL_OUTPUTS


def plane_workers(jobs: int, threads: int) -> int:
    """``plane``'s loop iterations for ``jobs`` on ``threads`` (Note [Workers and threads])."""
    return max(jobs, CPU_THREAD_BLOCK * threads)


def middle_chunks(width: int, lanes: int) -> int:
    """The chunks ``middle`` splits each line of ``width`` elements into."""
    return max(1, -(-(width // lanes) // BLOCKS_PER_CHUNK))


def half_vector_view(source: Any, address: int, lanes: int, outputs: int) -> Any:
    """The 3-D, C-contiguous ``source`` (data at ``address``, ``lanes`` per vector) as
    lines of 16-byte half vectors, where its lines split into them, its data starts on a
    16-byte boundary and it and the result (``outputs`` elements) are large, for the
    ``halves`` kernels (Note [Half-vector loads]); else ``source`` itself."""
    half = lanes // 2
    planes, height, width = source.shape
    small = min(planes * height * width, outputs) <= HALVES_FROM
    if width % half or address % HALF_VECTOR_BYTES or small:
        return source
    return source.reshape(planes, height, width // half, half)


def store_form(address: int, shape: tuple[int, ...], lanes: int) -> str:
    """The store form of a C-contiguous result of ``shape`` whose data is at ``address``
    (Note [Store forms])."""
    if shape[-1] % lanes:
        return "scalars"
    if address % VECTOR_BYTES == 0:
        return "vectors"
    if address % HALF_VECTOR_BYTES == 0 and math.prod(shape) > HALVES_FROM:
        return "halves"
    return "scalars"


def result_view(result: Any, form: str, shape: tuple[int, ...], lanes: int) -> Any:
    """The C-contiguous ``result`` of 3-D ``shape`` as the kernels of store ``form`` take
    it: lines of vectors or of half vectors, or flat."""
    if form == "scalars":
        return result.reshape(-1)
    width = lanes if form == "vectors" else lanes // 2
    return result.reshape(*shape[:-1], shape[-1] // width, width)


def lanes_for(dtype: np.dtype) -> int:
    """Lanes per vector: a 256-bit vector's elements (8 float32, 4 float64)."""
    return VECTOR_BYTES // np.dtype(dtype).itemsize


def compiled_taps(taps: int, outputs: int, unroll_every_tap: bool) -> int:
    """A table's width ``taps`` as the compile-time argument of a kernel writing
    ``outputs`` elements: the width itself, or WIDE (Note [Bounded kernel variants])."""
    if unroll_every_tap or taps <= UNROLLED_ROW_TAPS:
        return taps
    return taps if taps <= UNROLLED_TAPS and outputs > HALVES_FROM else WIDE


class SimdKernels(NamedTuple):
    plane: Any
    gather: Any
    middle: Any
    lanes: int


@functools.cache
def simd_kernels(
    dtype: np.dtype, stores: str, unroll_every_tap: bool, halves: bool = False
) -> SimdKernels:
    """The kernels for ``dtype`` (float32 or float64); ``stores``: the results' store form
    (Note [Store forms]), ``"vectors"`` and ``"halves"`` taking ``(.., rows, row length /
    width)`` arrays of vectors of that width, ``"scalars"`` flat arrays;
    ``unroll_every_tap``: wide tables' taps unrolled too (Note [Front-end cost]);
    ``halves``: ``plane`` and ``middle`` read their sources as ``(.., row length / HALF)``
    arrays of 16-byte-aligned half vectors (Note [Half-vector loads])."""
    real = ti.f32 if dtype == np.float32 else ti.f64
    lanes = lanes_for(dtype)
    half = lanes // 2
    vec = ti.types.vector(lanes, real)
    half_vec = ti.types.vector(half, real)
    # Results: flat for scalar stores, else lines of (half) vectors.
    result_dtype = {"vectors": vec, "halves": half_vec, "scalars": real}[stores]
    result_ndim = 1 if stores == "scalars" else 3

    @ti.func
    def line_width(source: ti.template()):
        """Samples per line of ``source``."""
        return source.shape[2] * (half if ti.static(halves) else 1)

    @ti.func
    def sample(source: ti.template(), p, i, j):
        """``source[p, i, j]``."""
        value = ti.cast(0, real)
        if ti.static(halves):
            value = source[p, i, j // half][j % half]
        else:
            value = source[p, i, j]
        return value

    @ti.func
    def load(source: ti.template(), p, i, j0):
        """``source[p, i, j0 : j0 + LANES]`` as one vector (``j0`` a multiple of HALF
        with ``halves``)."""
        value = ti.Vector.zero(real, lanes)
        if ti.static(halves):
            low = source[p, i, j0 // half]
            high = source[p, i, j0 // half + 1]
            value = ti.Vector(
                [low[c] for c in ti.static(range(half))] + [high[c] for c in ti.static(range(half))]
            )
        else:
            value = ti.Vector([source[p, i, j0 + c] for c in ti.static(range(lanes))])
        return value

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
    def combine_table_lines(
        source: ti.template(),
        p,
        index: ti.template(),
        weight: ti.template(),
        o,
        j,
        one: ti.template(),
    ):
        """``combine_rows`` (with ``one``: ``combine_rows_at``, the one sample ``j`` of each
        line) for output ``o`` of the 2-D table ``(index, weight)``, its taps read at run
        time (rows clamped to the source), for WIDE tables."""
        read = ti.static(sample if one else load)
        length = source.shape[1]
        total = weight[o, 0] * read(source, p, ti.min(index[o, 0], length - 1), j)
        for k in range(1, index.shape[1]):
            total += weight[o, k] * read(source, p, ti.min(index[o, k], length - 1), j)
        return total

    @ti.func
    def combine_rows_at(source: ti.template(), p, rows, weights, taps: ti.template(), j):
        total = weights[0] * sample(source, p, rows[0], j)
        for k in ti.static(range(1, taps)):
            total += weights[k] * sample(source, p, rows[k], j)
        return total

    @ti.func
    def combine_columns(
        line: ti.template(),
        at,
        index: ti.template(),
        weight: ti.template(),
        taps: ti.template(),
        width,
        entry,
    ):
        """One output column of the ``LANES`` rows held in ``line[at]``, by the ``width``
        taps ``entry, entry + 1, ...`` of the packed table (``taps``: ``width`` as a
        compile-time constant, or WIDE)."""
        total = weight[entry] * line[at, index[entry]]
        if ti.static(taps != WIDE and (unroll_every_tap or taps <= UNROLLED_TAPS)):
            for k in ti.static(range(1, taps)):
                total += weight[entry + k] * line[at, index[entry + k]]
        else:
            for k in range(1, width):
                total += weight[entry + k] * line[at, index[entry + k]]
        return total

    @ti.func
    def combine_table_rows(
        source: ti.template(), p, index: ti.template(), weight: ti.template(), at, width, j0
    ):
        """``combine_rows`` with the ``width`` taps read from the packed table from
        ``at`` on (rows clamped to the source), for WIDE tables."""
        height = source.shape[1]
        total = weight[at] * load(source, p, ti.min(index[at], height - 1), j0)
        for k in range(1, width):
            total += weight[at + k] * load(source, p, ti.min(index[at + k], height - 1), j0)
        return total

    @ti.func
    def store_block(result: ti.template(), p, o, rows_out, width_out, qb, value):
        """``value``, the ``LANES`` outputs of row ``o`` of plane ``p`` from column
        ``qb * LANES`` on, into ``result`` (of ``rows_out`` rows of ``width_out``)."""
        if ti.static(stores == "vectors"):
            result[p, o, qb] = value
        elif ti.static(stores == "halves"):
            result[p, o, 2 * qb] = ti.Vector([value[c] for c in ti.static(range(half))])
            result[p, o, 2 * qb + 1] = ti.Vector([value[half + c] for c in ti.static(range(half))])
        else:
            at = (p * rows_out + o) * width_out + qb * lanes
            for c in ti.static(range(lanes)):
                result[at + c] = value[c]

    @ti.func
    def store_rows(result: ti.template(), p, o0, rows_out, width_out, qb, columns: ti.template()):
        """Write ``LANES`` output columns (one vector each, lanes = rows) from column block
        ``qb``, transposed back to rows; rows past ``rows_out`` are the clamped copies of a
        short last group and are not written."""
        for r in ti.static(range(lanes)):
            if o0 + r < rows_out:
                row = ti.Vector([columns[c][r] for c in ti.static(range(lanes))])
                store_block(result, p, o0 + r, rows_out, width_out, qb, row)

    @ti.func
    def rows_pass_unrolled(
        source: ti.template(),
        scratch: ti.template(),
        line,
        index: ti.template(),
        weight: ti.template(),
        p,
        o0,
        rows_out,
        row_taps: ti.template(),
    ):
        """The row pass of the SIMD configuration, where speed comes before compile time
        (Note [Front-end cost]): the group's LANES rows unrolled, each block's LANES x
        LANES values transposed from registers into the column part of the line."""
        height = source.shape[1]
        width = line_width(source)
        at = [ti.min(o0 + r, rows_out - 1) * row_taps for r in ti.static(range(lanes))]
        rows = [
            ti.Vector([ti.min(index[at[r] + k], height - 1) for k in ti.static(range(row_taps))])
            for r in ti.static(range(lanes))
        ]
        keep = [index[at[r]] < height for r in ti.static(range(lanes))]
        weights = [
            ti.Vector([weight[at[r] + k] for k in ti.static(range(row_taps))])
            for r in ti.static(range(lanes))
        ]
        for jb in range((width + lanes - 1) // lanes):
            j0 = ti.min(jb * lanes, width - lanes)
            block = [
                ti.select(keep[r], combine_rows(source, p, rows[r], weights[r], row_taps, j0), 0)
                for r in ti.static(range(lanes))
            ]
            for c in ti.static(range(lanes)):
                scratch[line, j0 + c] = ti.Vector([block[r][c] for r in ti.static(range(lanes))])

    @ti.kernel
    def plane(
        source: ti.types.ndarray(dtype=half_vec if halves else real, ndim=3),
        result: ti.types.ndarray(dtype=result_dtype, ndim=result_ndim),
        scratch: ti.types.ndarray(dtype=vec, ndim=2),
        index: ti.types.ndarray(dtype=ti.i32, ndim=1),
        weight: ti.types.ndarray(dtype=real, ndim=1),
        workers: ti.i32,
        rows_out: ti.i32,
        row_taps: ti.template(),
        row_width: ti.i32,
        width_out: ti.i32,
        col_taps: ti.template(),
        col_width: ti.i32,
        serial: ti.template(),
    ):
        """Resample both axes of ``(P, H, W)`` into ``(P, Ho, Wo)`` (see the module's
        docstring): ``workers`` iterations of a parallel loop, each taking a contiguous
        run of (plane, row group) jobs, with the scratch line of the thread that runs it
        (Note [Workers and threads]). ``index`` and ``weight`` hold the row table
        (Ho, row_width) followed by the column table (Wo, col_width), flattened: every
        ndarray argument costs ~10 us per launch in Taichi's Python front end. ``row_taps``
        and ``col_taps``: the widths as compile-time constants, or WIDE (read at run time:
        Note [Bounded kernel variants])."""
        height = source.shape[1]
        width = line_width(source)
        columns_at = rows_out * row_width
        groups = (rows_out + lanes - 1) // lanes
        jobs = source.shape[0] * groups
        blocks = (width + lanes - 1) // lanes
        # A scratch line: the group's columns (W vectors of LANES rows, then a zero
        # slot), then its rows (LANES runs of ``blocks`` vectors of LANES columns).
        rows_at = width + 1
        ti.loop_config(serialize=serial)  # Note [Small loops run serially]
        for worker in range(workers):
            # worker * jobs passes 2^31 for large inputs: split in 64-bit arithmetic.
            begin = ti.cast(ti.cast(worker, ti.i64) * jobs // workers, ti.i32)
            end = ti.cast(ti.cast(worker + 1, ti.i64) * jobs // workers, ti.i32)
            line = ti.global_thread_idx()
            # The slot past the columns: the marked taps of empty output columns read 0 there.
            scratch[line, width] = ti.Vector.zero(real, lanes)
            for job in range(begin, end):
                p = job // groups
                o0 = job % groups * lanes
                if ti.static(
                    row_taps != WIDE and (unroll_every_tap or row_taps <= UNROLLED_ROW_TAPS)
                ):
                    rows_pass_unrolled(
                        source, scratch, line, index, weight, p, o0, rows_out, row_taps
                    )
                else:
                    # The row pass, one output row of the group at a time (a short last group
                    # repeats its last row): LANES columns per vector. The last block ends at
                    # the line's end, overlapping the one before where the width is not a
                    # multiple of LANES (its columns computed again, to the same bits; lines
                    # narrower than LANES take the generic kernel).
                    for r in range(lanes):
                        at = ti.min(o0 + r, rows_out - 1) * row_width
                        keep = index[at] < height  # else an empty output row (marked taps): 0
                        if ti.static(row_taps == WIDE):
                            for jb in range(blocks):
                                j0 = ti.min(jb * lanes, width - lanes)
                                scratch[line, rows_at + r * blocks + jb] = ti.select(
                                    keep,
                                    combine_table_rows(source, p, index, weight, at, row_width, j0),
                                    0,
                                )
                        else:
                            rows = ti.Vector(
                                [
                                    ti.min(index[at + k], height - 1)
                                    for k in ti.static(range(row_taps))
                                ]
                            )
                            weights = ti.Vector(
                                [weight[at + k] for k in ti.static(range(row_taps))]
                            )
                            for jb in range(blocks):
                                j0 = ti.min(jb * lanes, width - lanes)
                                scratch[line, rows_at + r * blocks + jb] = ti.select(
                                    keep, combine_rows(source, p, rows, weights, row_taps, j0), 0
                                )
                    # Each LANES x LANES block transposed: a vector per column, lanes = rows.
                    for jb in range(blocks):
                        j0 = ti.min(jb * lanes, width - lanes)
                        at = rows_at + jb
                        block = [scratch[line, at + r * blocks] for r in ti.static(range(lanes))]
                        for c in ti.static(range(lanes)):
                            scratch[line, j0 + c] = ti.Vector(
                                [block[r][c] for r in ti.static(range(lanes))]
                            )
                for qb in range(width_out // lanes):
                    columns = [
                        combine_columns(
                            scratch,
                            line,
                            index,
                            weight,
                            col_taps,
                            col_width,
                            columns_at + (qb * lanes + c) * col_width,
                        )
                        for c in ti.static(range(lanes))
                    ]
                    store_rows(result, p, o0, rows_out, width_out, qb, columns)
                if ti.static(stores == "scalars"):
                    for q in range(width_out // lanes * lanes, width_out):
                        column = combine_columns(
                            scratch,
                            line,
                            index,
                            weight,
                            col_taps,
                            col_width,
                            columns_at + q * col_width,
                        )
                        for r in ti.static(range(lanes)):
                            if o0 + r < rows_out:
                                result[(p * rows_out + o0 + r) * width_out + q] = column[r]

    @ti.kernel
    def gather(
        source: ti.types.ndarray(dtype=real, ndim=1),
        result: ti.types.ndarray(dtype=result_dtype, ndim=result_ndim),
        index: ti.types.ndarray(dtype=ti.types.vector(lanes, ti.i32), ndim=1),
        weight: ti.types.ndarray(dtype=vec, ndim=1),
        planes: ti.i32,
        height: ti.i32,
        width: ti.i32,
        rows_out: ti.i32,
        width_out: ti.i32,
        copies: ti.template(),
        serial: ti.template(),
    ):
        """``plane`` for tables of one tap along both axes (nearest, nearest-exact, and
        the adjoints of their downsampling): each output the one sample it reads, times the
        row and the column weight in ``plane``'s order, ``LANES`` outputs of a row per
        vector; no scratch line, no transposes. ``index`` and ``weight`` hold the row
        table, then the column table, each padded to whole vectors (:func:`gather_tables`:
        a column block's indices are one vector load, not a gather of eight). ``copies``:
        every weight is 1 and no tap is marked, so each output is its sample itself (the
        products by 1 are exact, and skipped). ``source`` is the ``(planes, height,
        width)`` input flattened, each output row's input row found once: indexed in three
        dimensions, each block's gather recomputed the row's 32-bit offset (Note
        [Half-vector loads]), and a (4, 3, 333, 517) -> (480, 640) nearest resize took
        0.77-0.81 ms against 0.69-0.74 (medians of 60 calls, two rounds)."""
        ti.loop_config(serialize=serial)  # Note [Small loops run serially]
        for p, o in ti.ndrange(planes, rows_out):
            # Computed in the loop, not before it: Note [Values the parallel loop reloads].
            blocks = width_out // lanes
            columns_at = (rows_out + lanes - 1) // lanes
            row = index[o // lanes][o % lanes]
            keep = row < height  # else an empty output row (a marked tap): 0
            row = ti.min(row, height - 1)
            base = (p * height + row) * width
            # With ``copies``, the first of a run of output rows reading one input row makes
            # them all (an enlargement's repeated rows: stores, not gathers, after the first).
            repeats = 1
            if ti.static(copies):
                # (Taichi evaluates both sides of ``and``: the reads stay in the row table.)
                before = ti.max(o - 1, 0)
                if o > 0 and index[before // lanes][before % lanes] == row:
                    repeats = 0
                else:
                    while True:
                        after = ti.min(o + repeats, rows_out - 1)
                        if o + repeats >= rows_out or index[after // lanes][after % lanes] != row:
                            break
                        repeats += 1
            for qb in range(blocks * ti.min(repeats, 1)):
                columns = index[columns_at + qb]
                value = ti.Vector.zero(real, lanes)
                if ti.static(copies):
                    value = ti.Vector([source[base + columns[c]] for c in ti.static(range(lanes))])
                    # The first row stored outside the loop: most rows have no repeat.
                    store_block(result, p, o, rows_out, width_out, qb, value)
                    for d in range(1, repeats):
                        store_block(result, p, o + d, rows_out, width_out, qb, value)
                else:
                    samples = ti.Vector(
                        [
                            source[base + ti.min(columns[c], width - 1)]
                            for c in ti.static(range(lanes))
                        ]
                    )
                    value = ti.select(
                        columns < width,
                        weight[columns_at + qb] * (weight[o // lanes][o % lanes] * samples),
                        0,
                    )
                    value = ti.select(keep, value, 0)
                    store_block(result, p, o, rows_out, width_out, qb, value)
            if ti.static(stores == "scalars"):
                for q in range(blocks * lanes, width_out * ti.min(repeats, 1)):
                    column = index[columns_at + q // lanes][q % lanes]
                    sample = source[base + ti.min(column, width - 1)]
                    value = weight[columns_at + q // lanes][q % lanes] * (
                        weight[o // lanes][o % lanes] * sample
                    )
                    value = ti.select(keep and column < width, value, 0.0)
                    for d in range(repeats):
                        result[(p * rows_out + o + d) * width_out + q] = value

    @ti.kernel
    def middle(
        source: ti.types.ndarray(dtype=half_vec if halves else real, ndim=3),
        result: ti.types.ndarray(dtype=result_dtype, ndim=result_ndim),
        index: ti.types.ndarray(dtype=ti.i32, ndim=2),
        weight: ti.types.ndarray(dtype=real, ndim=2),
        taps: ti.template(),
        chunks: ti.i32,
        serial: ti.template(),
    ):
        """Resample the middle axis of ``(A, L, B)`` into ``(A, Lo, B)``: weighted sums of
        whole lines, ``LANES`` elements per vector, each line split into chunks so that a
        few long lines (a depth pass) still keep every thread busy. ``taps``: the table's
        width as a compile-time constant, or WIDE (Note [Bounded kernel variants])."""
        width = line_width(source)
        blocks = width // lanes
        ti.loop_config(serialize=serial)  # Note [Small loops run serially]
        for a, o, chunk in ti.ndrange(source.shape[0], index.shape[0], chunks):
            length = source.shape[1]
            keep = index[o, 0] < length  # else an empty output (marked taps): exactly 0
            if ti.static(taps == WIDE):
                for qb in range(
                    chunk * BLOCKS_PER_CHUNK, ti.min((chunk + 1) * BLOCKS_PER_CHUNK, blocks)
                ):
                    value = combine_table_lines(source, a, index, weight, o, qb * lanes, False)
                    store_block(result, a, o, index.shape[0], width, qb, ti.select(keep, value, 0))
                if ti.static(stores == "scalars"):
                    if chunk == chunks - 1:
                        for q in range(blocks * lanes, width):
                            value = combine_table_lines(source, a, index, weight, o, q, True)
                            result[(a * index.shape[0] + o) * width + q] = ti.select(keep, value, 0)
            else:
                rows = ti.Vector([ti.min(index[o, k], length - 1) for k in ti.static(range(taps))])
                weights = ti.Vector([weight[o, k] for k in ti.static(range(taps))])
                for qb in range(
                    chunk * BLOCKS_PER_CHUNK, ti.min((chunk + 1) * BLOCKS_PER_CHUNK, blocks)
                ):
                    value = ti.select(
                        keep, combine_rows(source, a, rows, weights, taps, qb * lanes), 0
                    )
                    store_block(result, a, o, index.shape[0], width, qb, value)
                if ti.static(stores == "scalars"):
                    if chunk == chunks - 1:
                        for q in range(blocks * lanes, width):
                            result[(a * index.shape[0] + o) * width + q] = ti.select(
                                keep, combine_rows_at(source, a, rows, weights, taps, q), 0
                            )

    form = (np.dtype(dtype).name, stores, bool(unroll_every_tap), bool(halves))
    for name, kernel in (("plane", plane), ("gather", gather), ("middle", middle)):
        _FORMS[kernel] = (name, *form)
    return SimdKernels(plane, gather, middle, lanes)


# Each kernel :func:`simd_kernels` made, by its form.
_FORMS: dict[Any, tuple[str, str, str, bool, bool]] = {}


def kernel_form(kernel: Any) -> tuple[str, str, str, bool, bool] | None:
    """``(name, dtype name, stores, unroll_every_tap, halves)`` of a kernel that
    :func:`simd_kernels` made (``name``: ``"plane"``, ``"gather"`` or ``"middle"``), else
    None: with its template values, what selects its compiled code (the kernels compiled
    ahead are found by it: ``_compiled/``)."""
    return _FORMS.get(kernel)


def other_store_form(kernel: Any, stores: str) -> Any:
    """The kernel of the same form as ``kernel`` but for the store form ``stores``."""
    name, dtype, _, unroll_every_tap, halves = _FORMS[kernel]
    return getattr(simd_kernels(np.dtype(dtype), stores, unroll_every_tap, halves), name)


def simd_plane(
    source: Any,
    result: Any,
    scratch: np.ndarray,
    tables: tuple[np.ndarray, np.ndarray],
    counts: tuple[int, int, int, int, int],
    stores: str,
    serial: bool,
    unroll_every_tap: bool,
    source_address: int,
    run: Callable[..., Any] = launch,
) -> None:
    """Launch ``plane`` (by ``run``, :func:`launch` or a
    :class:`_runtime.taichi.HostLaunches`) with the packed ``tables``
    (:func:`packed_tables`) and ``counts`` (loop iterations, output rows, row taps, output
    columns, column taps) on the 3-D ``source`` (its data at ``source_address``), read in
    half vectors where it can be (:func:`half_vector_view`)."""
    index, weight = tables
    workers, rows_out, row_taps, width_out, col_taps = counts
    outputs = source.shape[0] * rows_out * width_out
    source = half_vector_view(source, source_address, lanes_for(weight.dtype), outputs)
    launch_with_vector_types(
        run,
        simd_kernels(weight.dtype, stores, unroll_every_tap, source.ndim == 4).plane,
        source,
        result,
        scratch,
        index,
        weight,
        workers,
        rows_out,
        compiled_taps(row_taps, outputs, unroll_every_tap),
        row_taps,
        width_out,
        compiled_taps(col_taps, outputs, unroll_every_tap),
        col_taps,
        serial,
    )


def simd_gather(
    source: Any,
    result: Any,
    tables: tuple[np.ndarray, np.ndarray],
    counts: tuple[int, int],
    copies: bool,
    stores: str,
    serial: bool,
    run: Callable[..., Any] = launch,
) -> None:
    """Launch ``gather`` (by ``run``, as ``plane``) on the ``(P, H, W)`` ``source`` with
    the one-tap ``tables`` (:func:`gather_tables`) and ``counts`` (output rows, output
    columns); ``copies``: see ``gather``."""
    index, weight = tables
    launch_with_vector_types(
        run,
        simd_kernels(weight.dtype, stores, False).gather,
        source.reshape(-1),
        result,
        index,
        weight,
        *source.shape,
        *counts,
        copies,
        serial,
    )


def simd_middle(
    source: Any,
    result: Any,
    index: np.ndarray,
    weight: np.ndarray,
    chunks: int,
    stores: str,
    serial: bool,
    unroll_every_tap: bool,
    source_address: int,
    run: Callable[..., Any] = launch,
) -> None:
    """Launch ``middle`` (by ``run``, as ``plane``) for the table ``(index, weight)``, each
    line in ``chunks`` (:func:`middle_chunks`), on ``source`` as :func:`simd_plane` does."""
    outputs = source.shape[0] * index.shape[0] * source.shape[2]
    source = half_vector_view(source, source_address, lanes_for(weight.dtype), outputs)
    launch_with_vector_types(
        run,
        simd_kernels(weight.dtype, stores, unroll_every_tap, source.ndim == 4).middle,
        source,
        result,
        index,
        weight,
        compiled_taps(weight.shape[1], outputs, unroll_every_tap),
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


@functools.lru_cache(maxsize=64)
def _gather_packed(tables: _Tables) -> tuple[np.ndarray, np.ndarray]:
    row_index, row_weight, col_index, col_weight = tables.arrays
    lanes = lanes_for(row_weight.dtype)

    def whole_vectors(row_part: np.ndarray, col_part: np.ndarray) -> np.ndarray:
        row_vectors, col_vectors = -(-row_part.size // lanes), -(-col_part.size // lanes)
        # Vector-typed loads are aligned loads: the tables start on a vector's boundary.
        packed = aligned_empty((row_vectors + col_vectors, lanes), row_part.dtype)
        packed[...] = 0
        packed.ravel()[: row_part.size] = row_part.ravel()
        packed[row_vectors:].ravel()[: col_part.size] = col_part.ravel()
        return packed

    return whole_vectors(row_index, col_index), whole_vectors(row_weight, col_weight)


def gather_tables(
    rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """``gather``'s index and weight arrays, vectors of ``LANES``: the one-tap row table,
    then the column table, each padded to whole vectors."""
    return _gather_packed(_Tables(*rows, *cols))
