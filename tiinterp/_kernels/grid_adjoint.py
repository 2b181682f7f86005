"""A deterministic parallel counting sort, for the gather adjoint of ``grid_sample``.

The adjoint (``_engine/grid_path.py``) makes one entry per (point, tap): a
key (the input pixel the tap reads) and an id (its position in (point, tap) order). Here the
entries are sorted by key, stably, so that each pixel's ids come out ascending, and where
each tile of pixels starts in the sorted entries is found. One thread per tile (and group
of channels) then adds its entries in that order.

On CPU cores the sort is an LSD radix sort on int32 scratch, ``bits`` per pass
(``_engine.grid_path.radix_bits`` chooses them). In a pass, one thread per block of
``2^bits`` consecutive entries counts its block's digits; an exclusive scan of those counts
in (digit, block) order gives every (digit, block) the first position of its entries; the
same thread then places its block's entries there, in their order. Every position is a
function of the keys alone: no atomics, the same result whatever the thread timing or count,
and the order within a key is the order of the ids. G1's keys take 2 such passes of 5
launches each with 11-bit digits, 3 with a GPU's 8-bit ones.

On GPUs it is a counting sort by the whole key, in three launches and a scan
(:func:`sort_by_key_counting`): one thread per entry counts its key (atomic adds of 1:
the counts do not depend on their order), an exclusive scan of the counts gives each key
its first position, one thread per entry takes the next free position of its key (an
atomic add again, so entries of one key land in any order), and then one thread per key
sorts its ids ascending: the sorted entries, and so the sums, are the radix sort's, bit for
bit.

These are the kernels and the order of their launches; which sort runs where, and the
scratch they work in, is ``_engine/grid_path.py``'s choice.
"""

from typing import Any

from .._runtime.taichi import ti

# Elements per thread in each level of the exclusive scan.
SCAN_SEGMENT = 256


@ti.kernel
def longest_run(bounds: ti.types.ndarray(), count: ti.i32) -> ti.i32:
    """The largest ``bounds[t + 1] - bounds[t]`` for ``t < count``: the most entries of
    one tile, read back as a value rather than by copying ``bounds`` to the host."""
    longest = 0
    for t in range(count):
        ti.atomic_max(longest, bounds[t + 1] - bounds[t])
    return longest


def _scan_space(size: int) -> int:
    """Scratch the scan of ``size`` elements needs beyond them: its per-segment sums."""
    total = 0
    while size > SCAN_SEGMENT:
        size = -(-size // SCAN_SEGMENT)
        total += size
    return total


def _stride(entries: int, bits: int) -> int:
    """The distance between consecutive digits' counts: the blocks of ``entries`` entries,
    rounded up to an odd number of 64-byte lines. The counts one block updates then fall
    in distinct CPU cache sets; a power-of-two stride puts them all in one (measured:
    passes 2-3x slower)."""
    lines = -(-entries // (16 << bits)) or 1
    return 16 * (lines + 1 - lines % 2)


def table_size(entries: int, bits: int) -> int:
    """int32 elements of the sort's scratch for ``entries`` entries: keys and ids (two of
    each, passes alternate), the (digit, block) counts and the scan's sums."""
    counts = (1 << bits) * _stride(entries, bits)
    return 4 * entries + counts + _scan_space(counts)


@ti.kernel
def _segment_sums(
    table: ti.types.ndarray(), at: ti.i32, size: ti.i32, segments: ti.i32, sums: ti.i32
):
    """``table[sums + s]`` = the sum of segment ``s`` of ``table[at : at + size]``."""
    # Every loop's count is an argument: taichi-forge's Vulkan backend refuses a count
    # computed in the kernel ("Direct range bound must remain in its task body").
    for s in range(segments):
        total = 0
        for i in range(s * SCAN_SEGMENT, ti.min((s + 1) * SCAN_SEGMENT, size)):
            total += table[at + i]
        table[sums + s] = total


@ti.kernel
def _scan_segments(
    table: ti.types.ndarray(), at: ti.i32, size: ti.i32, segments: ti.i32, bases: ti.i32
):
    """Exclusive scan of each segment of ``table[at : at + size]``, starting from
    ``table[bases + s]`` (from 0 if ``bases`` is negative)."""
    for s in range(segments):
        running = 0
        if bases >= 0:
            running = table[bases + s]
        for i in range(s * SCAN_SEGMENT, ti.min((s + 1) * SCAN_SEGMENT, size)):
            value = table[at + i]
            table[at + i] = running
            running += value


def _exclusive_scan(table: Any, at: int, size: int, free: int) -> None:
    """``table[at : at + size]`` replaced by its exclusive prefix sums; ``table[free:]``
    holds the sums of its segments (``_scan_space``)."""
    if size <= SCAN_SEGMENT:
        _scan_segments(table, at, size, 1, -1)
        return
    segments = -(-size // SCAN_SEGMENT)
    _segment_sums(table, at, size, segments, free)
    _exclusive_scan(table, free, segments, free + segments)
    _scan_segments(table, at, size, segments, free)


@ti.kernel
def _count_digits(
    table: ti.types.ndarray(),
    keys: ti.i32,
    entries: ti.i32,
    block: ti.i32,
    shift: ti.i32,
    buckets: ti.i32,
    counts: ti.i32,
    stride: ti.i32,
):
    """``table[counts + d * stride + b]``: the entries of block ``b`` whose digit is ``d``
    (blocks past the entries count none)."""
    for b in range(stride):
        for d in range(buckets):
            table[counts + d * stride + b] = 0
        for i in range(b * block, ti.min((b + 1) * block, entries)):
            slot = counts + ((table[keys + i] >> shift) & (buckets - 1)) * stride + b
            # Not ``+=``, which Taichi makes an atomic add: the thread owns the count.
            table[slot] = table[slot] + 1


@ti.kernel
def _place(
    table: ti.types.ndarray(),
    keys: ti.i32,
    ids: ti.i32,
    keys_out: ti.i32,
    ids_out: ti.i32,
    entries: ti.i32,
    block: ti.i32,
    blocks: ti.i32,
    shift: ti.i32,
    buckets: ti.i32,
    counts: ti.i32,
    stride: ti.i32,
):
    """Each of the ``blocks`` blocks' entries, in their order, to the positions the scanned
    counts give; ``ids`` negative: the entries' ids are their positions (the first pass)."""
    for b in range(blocks):
        for i in range(b * block, ti.min((b + 1) * block, entries)):
            key = table[keys + i]
            slot = counts + ((key >> shift) & (buckets - 1)) * stride + b
            to = table[slot]
            table[slot] = to + 1
            table[keys_out + to] = key
            if ids < 0:
                table[ids_out + to] = i
            else:
                table[ids_out + to] = table[ids + i]


def sort_by_key(table: Any, entries: int, top_key: int, bits: int) -> tuple[int, int]:
    """Sort the ``entries`` keys in ``table[:entries]`` (each in ``[0, top_key]``) stably,
    with their ids (0, 1, ... in the order given), ``bits`` per pass at most. Returns where
    the sorted keys and ids start in ``table`` (of ``table_size(entries, bits)`` elements
    or more)."""
    key_bits = max(1, top_key.bit_length())
    passes = -(-key_bits // bits)
    width = -(-key_bits // passes)
    keys, keys_out, ids, ids_out = 0, entries, -1, 2 * entries
    counts, stride, block = 4 * entries, _stride(entries, bits), 1 << bits
    for shift in range(0, key_bits, width):
        buckets = 1 << min(width, key_bits - shift)
        _count_digits(table, keys, entries, block, shift, buckets, counts, stride)
        size = buckets * stride
        _exclusive_scan(table, counts, size, counts + size)
        blocks = -(-entries // block)
        launch = (keys, ids, keys_out, ids_out, entries, block, blocks, shift, buckets, counts)
        _place(table, *launch, stride)
        keys, keys_out = keys_out, keys
        ids, ids_out = ids_out, (3 * entries if ids < 0 else ids)
    return keys, ids


def counting_table_size(entries: int, top_key: int) -> int:
    """int32 elements of :func:`sort_by_key_counting`'s scratch: keys, sorted keys and
    ids, two counts per key and the scan's sums."""
    keys = top_key + 1
    return 3 * entries + 2 * keys + _scan_space(keys)


@ti.kernel
def _count_keys(table: ti.types.ndarray(), entries: ti.i32, counts: ti.i32, keys: ti.i32):
    """``table[counts + k]``: how many of the ``entries`` keys at ``table[0:]`` are ``k``."""
    for k in range(keys):
        table[counts + k] = 0
    for i in range(entries):
        ti.atomic_add(table[counts + table[i]], 1)


@ti.func
def _sift_down(table: ti.template(), at, root, end):
    """Restore the max-heap ``table[at : at + end]`` below ``root``."""
    while 2 * root + 1 < end:
        child = 2 * root + 1
        if child + 1 < end and table[at + child] < table[at + child + 1]:
            child += 1
        if table[at + root] < table[at + child]:
            swap = table[at + root]
            table[at + root] = table[at + child]
            table[at + child] = swap
            root = child
        else:
            root = end  # done


@ti.func
def _sort_run(table: ti.template(), at, length):
    """Sort ``table[at : at + length]`` ascending in place: insertion sort for the short
    runs a key usually has (a few taps of nearby points), heapsort for long ones (every
    point on one pixel), so no run costs more than ``length * log(length)``."""
    if length <= 32:
        for i in range(1, length):
            value = table[at + i]
            j = i
            while j > 0 and table[at + j - 1] > value:
                table[at + j] = table[at + j - 1]
                j -= 1
            table[at + j] = value
    else:
        for t in range(length // 2):
            _sift_down(table, at, length // 2 - 1 - t, length)
        for t in range(length - 1):
            end = length - 1 - t
            swap = table[at]
            table[at] = table[at + end]
            table[at + end] = swap
            _sift_down(table, at, 0, end)


@ti.kernel
def _place_by_count(
    table: ti.types.ndarray(),
    entries: ti.i32,
    keys_out: ti.i32,
    ids_out: ti.i32,
    starts: ti.i32,
    cursors: ti.i32,
    keys: ti.i32,
    sorted_keys: ti.i32,
):
    """Entries to their key's positions (``starts``: the scanned counts), then the ids of
    each of the first ``sorted_keys`` keys sorted ascending."""
    for k in range(keys):
        table[cursors + k] = table[starts + k]
    for i in range(entries):
        key = table[i]
        to = ti.atomic_add(table[cursors + key], 1)
        table[keys_out + to] = key
        table[ids_out + to] = i
    for k in range(sorted_keys):
        first = table[starts + k]
        _sort_run(table, ids_out + first, table[cursors + k] - first)


def sort_by_key_counting(table: Any, entries: int, top_key: int) -> tuple[int, int]:
    """:func:`sort_by_key` as a counting sort (the module's note), in ``table`` of
    ``counting_table_size(entries, top_key)`` elements or more. The entries of ``top_key``
    (the taps that read nothing, never summed) are grouped but not ordered."""
    keys = top_key + 1
    keys_out, ids_out, starts = entries, 2 * entries, 3 * entries
    cursors = starts + keys
    _count_keys(table, entries, starts, keys)
    _exclusive_scan(table, starts, keys, cursors + keys)
    _place_by_count(table, entries, keys_out, ids_out, starts, cursors, keys, top_key)
    return keys_out, ids_out


@ti.func
def _lower_bound(table: ti.template(), keys, count, key):
    """The first position in the sorted ``table[keys : keys + count]`` holding ``key`` or
    more (``count`` if none)."""
    low, high = 0, count
    while low < high:
        middle = low + (high - low) // 2
        if table[keys + middle] < key:
            low = middle + 1
        else:
            high = middle
    return low


@ti.kernel
def tile_bounds(
    table: ti.types.ndarray(),
    keys: ti.i32,
    entries: ti.i32,
    bounds: ti.types.ndarray(),
    count: ti.i32,
    tiles: ti.i32,
    pixels: ti.i32,
    span: ti.i32,
):
    """``bounds[t]``: where tile ``t``'s keys start in the sorted keys. The keys are
    ``item * pixels + pixel``; each item's pixels make ``tiles`` tiles of ``span``
    (its last one shorter); ``count`` is one more than there are tiles, for the end of
    the last."""
    for t in range(count):
        item = t // tiles
        key = item * pixels + (t - item * tiles) * span
        bounds[t] = _lower_bound(table, keys, entries, key)


@ti.kernel
def sorted_values(
    table: ti.types.ndarray(), ids: ti.i32, entries: ti.i32, values: ti.types.ndarray()
):
    """``values[entries + i] = values[id of sorted entry i]``: the values in sorted order,
    read in sequence by the sums that follow."""
    for i in range(entries):
        values[entries + i] = values[table[ids + i]]
