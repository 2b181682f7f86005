"""Taichi kernels. One gather kernel serves every mode, the forward and the adjoint.

``resample_axis`` resamples one axis of an N-D array by an :class:`~tiinterp._taps.AxisTaps`
table. The forward applies it with each axis's table; the hand-written adjoint applies it
with the transposed tables (see ``_taps.py``); ``method="autodiff"`` runs Taichi's
``ti.ad`` reverse of this same kernel (``resample_axis.grad``).
"""

import taichi as ti


@ti.kernel
def resample_axis(
    source: ti.types.ndarray(),
    result: ti.types.ndarray(),
    axis: ti.template(),
    start: ti.types.ndarray(dtype=ti.i32, ndim=1),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    weight: ti.types.ndarray(ndim=2),
):
    """``result[..., o, ...] = sum_k weight[o, k] * source[..., start[o] + k, ...]`` on ``axis``."""
    for index in ti.grouped(result):
        o = index[axis]
        total = weight[o, 0] * 0  # a zero of the data dtype
        tap = index
        for k in range(count[o]):
            tap[axis] = start[o] + k
            total += weight[o, k] * source[tap]
        result[index] = total


@ti.kernel
def copy_array(source: ti.types.ndarray(), target: ti.types.ndarray()):
    """``target[...] = source`` for any two array kinds of one shape, on the device."""
    for index in ti.grouped(target):
        target[index] = source[index]


@ti.kernel
def float64_probe(out: ti.types.ndarray(dtype=ti.f64, ndim=1)):
    """Writes 1/3 in float64; a device without 64-bit floats fails or rounds it to float32."""
    for i in out:
        out[i] = ti.f64(1.0) / ti.f64(3.0)


@ti.kernel
def copy_field_to_array(field: ti.template(), array: ti.types.ndarray()):
    for index in ti.grouped(array):
        array[index] = field[index]


@ti.kernel
def copy_array_to_field(array: ti.types.ndarray(), field: ti.template()):
    for index in ti.grouped(array):
        field[index] = array[index]


@ti.kernel
def add_array_to_field(array: ti.types.ndarray(), field: ti.template()):
    for index in ti.grouped(array):
        field[index] += array[index]


@ti.kernel
def add_array(source: ti.types.ndarray(), target: ti.types.ndarray()):
    for index in ti.grouped(target):
        target[index] += source[index]
