"""The one-axis resampling kernels, for tables of any width, forward and adjoint alike.

``resample_axis`` resamples one axis of an N-D array by an :class:`~tiinterp._rules.taps.AxisTaps`
table: the passes too wide for the fused gather (``_kernels/gather.py``) on GPU archs, and
those too wide for the SIMD kernels (``_kernels/simd.py``) on the CPU. The adjoint applies
it with the transposed tables (see ``_rules/taps.py``); ``method="autodiff"`` runs Taichi's
``ti.ad`` reverse of its accumulating form ``resample_axis_accumulate``.
"""

from .._runtime.taichi import ti


@ti.kernel
def resample_axis(
    source: ti.types.ndarray(),
    result: ti.types.ndarray(),
    axis: ti.template(),
    index: ti.types.ndarray(dtype=ti.i32, ndim=2),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    weight: ti.types.ndarray(ndim=2),
    first_tap: ti.i32,
    last_tap: ti.i32,
):
    """``result[..., o, ...] = sum_k weight[o, k] * source[..., index[o, k], ...]`` on
    ``axis``, for ``k < count[o]`` (an :class:`~tiinterp._rules.taps.AxisTaps` table), the
    taps ``first_tap <= k < last_tap`` of it: a launch from a later ``first_tap`` goes on
    with the sums in ``result``, in the same order (Note [The loop limit of software
    Vulkan] in ``_runtime/vulkan_devices.py``)."""
    for out in ti.grouped(result):
        o = out[axis]
        total = weight[o, 0] * 0  # a zero of the data dtype
        if first_tap > 0:
            total = result[out]
        tap = out
        for k in range(first_tap, ti.min(count[o], last_tap)):
            tap[axis] = index[o, k]
            total += weight[o, k] * source[tap]
        result[out] = total


@ti.kernel
def resample_axis_accumulate(
    source: ti.types.ndarray(),
    result: ti.types.ndarray(),
    axis: ti.template(),
    index: ti.types.ndarray(dtype=ti.i32, ndim=2),
    count: ti.types.ndarray(dtype=ti.i32, ndim=1),
    weight: ti.types.ndarray(ndim=2),
    first: ti.i32,
    chunk: ti.i32,
):
    """``result +=`` the resampling of ``source`` on ``axis``: the form of
    ``resample_axis`` that ``method="autodiff"`` differentiates. Every (output, tap) pair is
    its own parallel iteration, so there is no loop inside the kernel body: Taichi's
    reverse mode then needs no autodiff stack, whose default depth (32) an antialiased
    downsampling window exceeds (measured: the process crashes). One launch covers the
    ``chunk`` result elements from flat index ``first`` (the caller splits the result so
    that ``chunk * taps`` stays below 2^31: Taichi's loop counter is 32-bit)."""
    dims = ti.static(len(result.shape))
    for flat_in_chunk, k in ti.ndrange(chunk, weight.shape[1]):
        out = ti.Vector([0] * dims)
        rest = first + flat_in_chunk
        for d in ti.static(range(dims - 1, -1, -1)):
            out[d] = rest % result.shape[d]
            rest //= result.shape[d]
        o = out[axis]
        if k < count[o]:
            tap = out
            tap[axis] = index[o, k]
            result[out] += weight[o, k] * source[tap]
