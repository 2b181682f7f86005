"""Result memory (Note [Recycled result memory] in tiinterp/_runtime/arrays.py): large buffers are
handed to the next result of their size only once no array uses them, within the bounds."""

import threading

import numpy as np
import pytest

import tiinterp
import tiinterp._runtime.arrays as arrays_module
from tests import oracle
from tests.tolerances import relative_error, tolerance

KIB = 1024


@pytest.fixture
def small_recycling(monkeypatch):
    """Recycling from 4 KiB on, in a pool of its own: the rules at small sizes."""
    monkeypatch.setattr(arrays_module, "RECYCLED_FROM", 4 * KIB)
    monkeypatch.setattr(arrays_module, "_RECYCLED", arrays_module._RecycledBuffers())
    return arrays_module._RECYCLED


def address(array):
    return array.__array_interface__["data"][0]


def test_a_freed_buffer_serves_the_next_array_of_its_size(small_recycling):
    first = arrays_module.aligned_empty((64, 64), np.float32)
    where = address(first)
    assert where % arrays_module.ALIGNMENT == 0
    del first
    second = arrays_module.aligned_empty((64, 64), np.float32)
    assert address(second) == where
    assert second.shape == (64, 64) and second.dtype == np.float32
    assert second.flags.c_contiguous and second.flags.writeable
    # Another size takes a buffer of its own.
    other = arrays_module.aligned_empty((65, 64), np.float32)
    assert address(other) != where


def test_a_buffer_with_a_live_view_is_not_handed_out(small_recycling):
    first = arrays_module.aligned_empty((64, 64), np.float64)
    first[...] = 7.0
    view = first[3:5]
    del first
    second = arrays_module.aligned_empty((64, 64), np.float64)
    second[...] = -1.0
    assert not np.shares_memory(second, view)
    assert np.all(view == 7.0)
    del view, second
    assert len(small_recycling._free) == 2


def test_small_arrays_are_not_recycled(small_recycling):
    small = arrays_module.aligned_empty((4 * KIB // 4 - 1,), np.float32)
    del small
    assert len(small_recycling._free) == 0


def test_the_pool_keeps_at_most_its_count_and_bytes(small_recycling, monkeypatch):
    monkeypatch.setattr(arrays_module, "RECYCLED_BUFFERS", 3)
    for n in range(4, 10):
        arrays_module.aligned_empty((n, KIB), np.uint8)  # dropped at once
    # The newest are kept.
    kept = sorted(b.nbytes for b in small_recycling._free)
    assert kept == [n * KIB + arrays_module.ALIGNMENT for n in (7, 8, 9)]
    monkeypatch.setattr(arrays_module, "RECYCLED_BYTES", 20 * KIB)
    small_recycling._free.clear()
    held = [arrays_module.aligned_empty((8, KIB), np.uint8) for _ in range(3)]
    del held
    assert small_recycling.held_bytes() <= 20 * KIB
    assert len(small_recycling._free) == 2
    # A buffer larger than the whole pool is never kept.
    arrays_module.aligned_empty((21, KIB), np.uint8)
    assert len(small_recycling._free) == 2


def test_threads_never_share_a_live_buffer(small_recycling):
    """Arrays made and dropped in several threads at once: each thread's array keeps the
    values it wrote while it holds it."""
    errors = []

    def work(mark):
        for _ in range(300):
            array = arrays_module.aligned_empty((32, 64), np.float32)
            array[...] = mark
            kept = arrays_module.aligned_empty((32, 64), np.float32)
            kept[...] = -mark
            if not (np.all(array == mark) and np.all(kept == -mark)):
                errors.append(mark)
            del array, kept

    threads = [threading.Thread(target=work, args=(float(i + 1),)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert 0 < len(small_recycling._free) <= arrays_module.RECYCLED_BUFFERS


def test_results_over_recycled_memory_are_correct_and_kept(arch, rng, monkeypatch):
    """At the real threshold: a 32 MiB result is made in a buffer that a freed one left,
    a live result is never overwritten by the next call, and every value is right."""
    pool = arrays_module._RecycledBuffers()
    monkeypatch.setattr(arrays_module, "_RECYCLED", pool)
    shape, size = (1, 2, 1024, 1024), (2048, 2048)  # 32 MiB of float32 out
    x = rng.standard_normal(shape).astype(np.float32)
    z = rng.standard_normal(shape).astype(np.float32)
    # Taichi holds the arguments of a kernel's first launch until its next one.
    tiinterp.interpolate(x, size=size, mode="bilinear")
    first = tiinterp.interpolate(x, size=size, mode="bilinear")
    assert first.nbytes >= arrays_module.RECYCLED_FROM
    kept = first[:, :, :4].copy()
    del first
    freed = [buffer for buffer in pool._free if buffer.nbytes > 32 * 2**20]
    assert freed, "the freed result was not kept"
    second = tiinterp.interpolate(x, size=size, mode="bilinear")
    assert any(np.shares_memory(second, buffer) for buffer in freed)
    third = tiinterp.interpolate(z, size=size, mode="bilinear")
    assert not np.shares_memory(second, third)
    np.testing.assert_array_equal(second[:, :, :4], kept)
    for source, result in ((x, second), (z, third)):
        expected = oracle.resize(source[:, :, :32].astype(np.float64), (64, 2048), "bilinear")
        rows = result[:, :, :63]
        assert relative_error(rows, expected[:, :, :63]) <= tolerance("oracle", "float32")
