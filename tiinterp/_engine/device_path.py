"""The device path: how GPU archs run a plan's passes (``_rules/plan.py``).

A plan is prepared once per Taichi runtime (:class:`PreparedPasses`): its passes grouped
into launches of the fused ``gather`` kernel (``_kernels/gather.py``), each group's tap
tables padded to a compile-time width and uploaded to the device as Taichi ndarrays, and
the shapes of the intermediates between groups. A call then binds its arrays and launches:
no NumPy array is a kernel argument (Taichi's GPU launchers copy each one to the device and
back, synchronously, on every launch), a 2-D resize or a trilinear 3-D one is one launch,
and intermediates (wide tables only) come from a pool, so a call allocates nothing beyond
its result.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kernels.gather import gather, gather_fields
from .._kernels.resample import resample_axis
from .._rules.plan import Pass
from .._rules.taps import AxisTaps
from .._runtime.arrays import new_ndarray
from .._runtime.dtypes import taichi_float
from .._runtime.scratch import pooled_ndarray
from .._runtime.session import running_arch
from .._runtime.taichi import impl, is_stale, launch, require_current, runtime_generation, ti
from .._runtime.vulkan_devices import GRID_STRIDE_INVOCATIONS, loop_budget, loop_windows

# Tap counts the fused kernel is built for: a table is padded to the next one
# (``AxisTaps.padded``), so a handful of variants serve every mode and scale.
TAP_WIDTHS = (1, 2, 3, 4, 6, 8)
# A group of passes is fused while the taps per output (the product of its widths) stay
# within this: every 2-D mode without antialias, trilinear in 3-D, and the adjoints of
# their moderate upsamplings are one launch; wider windows run as separate passes.
MAX_FUSED_TAPS = 64
# Where the tap counts are compile-time constants (and the compiler unrolls the loops). On
# Vulkan they are read at run time: Mesa's lavapipe pays for an unrolled kernel's size on
# every launch (measured: 12 ms per launch of an 8x8-tap gather, whatever its size).
UNROLLED_ARCHS = ("cuda", "cpu")
# Note [Threads over positions, planes inside] (_kernels/gather.py): a thread loops over
# as many planes as leave at least this many threads in the launch (about what an H100 or
# H200 keeps resident: 132 SMs x 2,048), all of them in the workloads measured there.
MIN_THREADS = 2**18
# Archs where every thread takes one output (one plane) instead. The CPU (dense field
# steps): a Taichi CPU thread runs a block of consecutive iterations, so one output each
# walks the output in order, while a loop over planes jumps a plane's size at every step
# (measured, (16, 32, 96, 96) -> 160^2 field step: bicubic 17.4 ms with one plane per
# thread, 49.3 with every plane; bilinear 14.1 and 28.7). On lavapipe the loop over planes
# is as fast or faster: (8, 16, 64, 64) -> 128^2 bilinear forward 79 ms against 113 with
# one plane per thread (158 with the 4-outputs form before); smaller cases within noise.
ONE_PLANE_PER_THREAD_ARCHS: tuple[str, ...] = ("cpu",)
# Prepared plans and uploaded tables kept per runtime (the least
# recently used go first).
MAX_PREPARED = 256
MAX_TABLES = 512


def _bucket(width: int) -> int | None:
    return next((w for w in TAP_WIDTHS if w >= width), None)


@dataclass(frozen=True)
class _Group:
    """One launch: ``passes`` fused (``taps`` per pass), or one wide pass (``taps`` None)."""

    passes: tuple[Pass, ...]
    taps: tuple[int, ...] | None

    @property
    def axes(self) -> tuple[int, ...]:
        return tuple(p.axis for p in self.passes)


def group_passes(passes: Sequence[Pass]) -> list[_Group]:
    """Consecutive passes fused while their padded widths multiply to at most
    ``MAX_FUSED_TAPS``; a pass too wide for any compile-time width runs alone."""
    groups: list[_Group] = []
    for p in passes:
        width = _bucket(p.taps.width)
        if width is None:
            groups.append(_Group((p,), None))
            continue
        last = groups[-1] if groups else None
        if (
            last is not None
            and last.taps is not None
            and len(last.passes) < 3
            and math.prod(last.taps) * width <= MAX_FUSED_TAPS
        ):
            groups[-1] = _Group((*last.passes, p), (*last.taps, width))
        else:
            groups.append(_Group((p,), (width,)))
    return groups


class _DeviceCache:
    """Device arrays that live as long as the Taichi runtime: uploaded tables and prepared
    plans. Emptied when a new runtime starts (``ti.init``,
    ``ti.reset``, a forked child), whose allocations they would not belong to."""

    def __init__(self) -> None:
        self.generation = -1
        self.tables: OrderedDict[tuple[int, int], tuple[AxisTaps, tuple[Any, ...]]] = OrderedDict()
        self.prepared: OrderedDict[tuple[Any, ...], PreparedPasses] = OrderedDict()

    def current(self) -> _DeviceCache:
        generation = runtime_generation()
        if generation != self.generation:
            self.__init__()  # type: ignore[misc]
            self.generation = generation
        return self

    def device_tables(self, taps: AxisTaps, width: int | None) -> tuple[Any, ...]:
        """``(index, weight)`` padded to ``width``, or ``(index, count, weight)`` as they
        are (``width`` None), as Taichi ndarrays; uploaded once per runtime."""
        key = (id(taps), width or 0)
        found = self.tables.get(key)
        if found is None:
            host = (taps.index, taps.count, taps.weight) if width is None else taps.padded(width)
            device = tuple(_upload(array) for array in host)
            # The table object is kept so that its id stays its own.
            found = self.tables[key] = (taps, device)
            while len(self.tables) > MAX_TABLES:
                self.tables.popitem(last=False)
        else:
            self.tables.move_to_end(key)
        return found[1]


_CACHE = _DeviceCache()


def _upload(array: np.ndarray) -> Any:
    dtype = ti.i32 if array.dtype == np.int32 else taichi_float(array.dtype)
    device = new_ndarray(dtype, array.shape)
    device.from_numpy(np.ascontiguousarray(array))
    return device


class PreparedPasses:
    """A plan's launches on the device, for inputs of one shape."""

    def __init__(self, passes: Sequence[Pass], in_shape: tuple[int, ...], cache: _DeviceCache):
        # Held so that the cache key's id(passes) stays this plan's.
        self.passes = passes
        self.launches: list[tuple[_Group, tuple[Any, ...], tuple[int, ...]]] = []
        shape = list(in_shape)
        for group in group_passes(passes):
            if group.taps is None:
                tables = cache.device_tables(group.passes[0].taps, None)
            else:
                # Padded to the compile-time widths where the kernel unrolls, else as wide
                # as they are (the padding's reads would be wasted).
                unrolled = running_arch() in UNROLLED_ARCHS
                pairs = [
                    cache.device_tables(p.taps, w if unrolled else p.taps.width)
                    for p, w in zip(group.passes, group.taps, strict=True)
                ]
                # Unused table pairs repeat the first: the kernel ignores them.
                pairs += [pairs[0]] * (3 - len(pairs))
                tables = tuple(array for pair in pairs for array in pair)
            for p in group.passes:
                shape[p.axis] = p.taps.out_size
            self.launches.append((group, tables, tuple(shape)))

    def run(self, source: Any, result: Any, kind: Any, cache: _DeviceCache) -> None:
        current = source
        for i, (group, tables, shape) in enumerate(self.launches):
            if i == len(self.launches) - 1:
                target = result
            elif kind.name == "torch":
                target = kind.empty(source, shape)  # PyTorch's caching allocator pools it
            else:
                target = pooled_ndarray(kind.dtype(source), shape, i % 2)
            if group.taps is None:
                _launch_resample(current, target, group.passes[0], tables)
            else:
                _launch_gather(current, target, tables, group)
            current = target


def _launch_resample(source: Any, target: Any, p: Pass, tables: tuple[Any, ...]) -> None:
    """``resample_axis`` of one wide pass, its taps in windows where the arch bounds an
    invocation's loops (Note [The loop limit of software Vulkan])."""
    windows = loop_windows(loop_budget(running_arch()), math.prod(target.shape), p.taps.width)
    for first, last in windows:
        launch(resample_axis, source, target, p.axis, *tables, first, last)


def _launch_gather(
    source: Any,
    target: Any,
    tables: tuple[Any, ...],
    group: _Group,
    accumulate: bool | None = None,
) -> None:
    """One launch of ``gather`` (arrays), or of ``gather_fields`` with ``accumulate`` given
    (fields, in place)."""
    arguments = _gather_arguments(tables, group, tuple(target.shape))
    if accumulate is None:
        launch(gather, source, target, *arguments)
    else:
        # Fields are templates: Taichi's own call keys them.
        gather_fields(source, target, *arguments, accumulate)


def _gather_arguments(
    tables: tuple[Any, ...], group: _Group, shape: tuple[int, ...]
) -> tuple[Any, ...]:
    """The arguments of a ``gather`` launch after its two arrays, for a result of ``shape``."""
    arch = running_arch()
    unrolled = arch in UNROLLED_ARCHS
    fixed = (*(group.taps or ()), 0, 0)[:3] if unrolled else (0, 0, 0)
    lead = min(group.axes)
    planes, positions = math.prod(shape[:lead]), math.prod(shape[lead:])
    per_thread = planes_per_thread(arch, planes, positions)
    budget = loop_budget(arch)
    if not unrolled and budget is not None:
        # Note [The loop limit of software Vulkan]: the tap loops run at run time there,
        # inside the loop over a thread's planes, inside Taichi's over the threads.
        loops_per_plane = math.prod(p.taps.width + 1 for p in group.passes) + 1
        while per_thread > 1:
            threads = positions * -(-planes // per_thread)
            if loop_windows(budget, threads, per_thread, loops_per_plane)[0][1] >= per_thread:
                break
            per_thread = max(1, per_thread // 2)
        threads = positions * -(-planes // per_thread)
        if -(-threads // GRID_STRIDE_INVOCATIONS) * (1 + loops_per_plane) > budget:
            raise ValueError(
                f"a result of {math.prod(shape)} elements with "
                f"{math.prod(p.taps.width for p in group.passes)} taps per output is more "
                "than Mesa's software Vulkan (lavapipe) can compute: its "
                "shaders stop every loop after 65,535 iterations in all, without an error "
                "(docs/guide/archs.md); split the batch, or use arch='cpu'"
            )
    # Arrays hold at most 2^31 - 1 elements (``_rules.validate.MAX_ELEMENTS``), so the threads
    # fit Taichi's 32-bit loop counter.
    threads = positions * -(-planes // per_thread)
    return (*tables, group.axes, fixed, lead, per_thread, threads)


def planes_per_thread(arch: str, planes: int, positions: int) -> int:
    """How many planes each thread of a gather loops over (Note [Threads over positions,
    planes inside]): as many as keep ``MIN_THREADS`` threads, at least one."""
    if arch in ONE_PLANE_PER_THREAD_ARCHS or planes <= 1:
        return 1
    return max(1, min(planes, planes * positions // MIN_THREADS))


class DeviceRepeat:
    """What repeats a call on a GPU arch whose plan is one launch (Note [Repeated calls] in
    ``passes.py``): for inputs of one kind, shape and dtype, the launch's arguments after the
    two arrays are fixed, and from its second call the kernel's prepared launch is called as
    it is (Note [Prepared launches]). Under a ``ti.ad.Tape`` or forward-mode autodiff it
    launches through Taichi's own call, as :func:`_runtime.taichi.launch` does."""

    __slots__ = ("_arguments", "_dtype", "_kind", "_launch", "_out_shape", "_plan")

    def __init__(self, prepared: PreparedPasses, out_shape: tuple[int, ...], kind: Any) -> None:
        group, tables, _ = prepared.launches[0]
        self._plan = prepared  # holds the tables the arguments name
        self._arguments = _gather_arguments(tables, group, out_shape)
        self._out_shape, self._kind = out_shape, kind
        self._launch: Any = None

    def __call__(self, source: Any, result: Any = None) -> Any:
        if self._kind.name == "taichi":
            require_current(source, "input")
        if result is None:
            result = self._kind.empty(source, self._out_shape)
        runtime = impl.get_runtime()
        differentiating = runtime.target_tape is not None or runtime.fwd_mode_manager
        if self._launch is not None and not differentiating:
            self._launch((source, result, *self._arguments))
        else:
            self._launch = launch(gather, source, result, *self._arguments)
        return result

    def takes(self, out: Any, source: Any) -> bool:
        """Whether ``out`` is a result this repeat writes as the full call would: of the
        input's kind, shape and dtype, contiguous, writeable and apart from the input."""
        if type(out) is not type(source) or tuple(out.shape) != self._out_shape:
            return False
        if out.dtype != source.dtype:
            return False
        if self._kind.name == "taichi":
            return out is not source and not is_stale(out)
        return self._kind.unusable_as_out(out, (source,)) is None


def repeat_on_device(
    passes: Sequence[Pass], in_shape: tuple[int, ...], out_shape: tuple[int, ...], kind: Any
) -> DeviceRepeat | None:
    """What repeats the call of ``passes`` on a GPU arch, where its plan is one gather
    launch; else None."""
    if not passes or math.prod(out_shape) == 0 or kind.name not in ("taichi", "torch"):
        return None
    prepared = _prepared(passes, in_shape)
    if len(prepared.launches) != 1 or prepared.launches[0][0].taps is None:
        return None
    return DeviceRepeat(prepared, out_shape, kind)


def _prepared(passes: Sequence[Pass], in_shape: tuple[int, ...]) -> PreparedPasses:
    cache = _CACHE.current()
    key = (id(passes), in_shape)
    prepared = cache.prepared.get(key)
    if prepared is None:
        prepared = cache.prepared[key] = PreparedPasses(passes, in_shape, cache)
        while len(cache.prepared) > MAX_PREPARED:
            cache.prepared.popitem(last=False)
    else:
        cache.prepared.move_to_end(key)
    return prepared


def run_on_device(source: Any, passes: Sequence[Pass], result: Any, kind: Any) -> None:
    """Apply ``passes`` (non-empty) to ``source`` into ``result`` with device tables."""
    _prepared(passes, tuple(source.shape)).run(source, result, kind, _CACHE.current())


def run_fields_in_place(source: Any, passes: Sequence[Pass], result: Any, accumulate: bool) -> bool:
    """Apply ``passes`` to the dense field ``source`` into (``accumulate``: add to) the
    dense field ``result`` of the same element type, in one launch, where the passes fuse
    into one; False (nothing done) where they do not."""
    if not passes:
        return False
    prepared = _prepared(passes, tuple(source.shape))
    if len(prepared.launches) != 1 or prepared.launches[0][0].taps is None:
        return False
    group, tables, _ = prepared.launches[0]
    _launch_gather(source, result, tables, group, accumulate)
    return True
