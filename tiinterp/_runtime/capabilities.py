"""What each Taichi backend can do on each arch: the one table that tiinterp's checks and its
test selection (``tests/conftest.py``) read.

A quirk of a (backend, arch) pair is a field of its row, with the issue or measurement
behind it; code asks the row (``capabilities(BACKEND, arch)``), never compares backend or
arch names itself. Backends: ``"taichi"`` (1.7.4) and ``"taichi_forge"`` (0.7); archs:
``"cpu"``, ``"cuda"``, ``"vulkan"``, ``"metal"``. This module imports nothing of Taichi.
"""

from __future__ import annotations

from dataclasses import dataclass

ARCHS = ("cpu", "cuda", "vulkan", "metal")


@dataclass(frozen=True)
class Capabilities:
    """One (backend, arch) pair.

    ``ndarray_autodiff``: ``ti.ad`` over ndarrays gives right gradients. taichi 1.7.4's is
    wrong on Vulkan (taichi-dev/taichi#8524), taichi-forge 0.7's right there (measured: it
    agrees with the adjoint to 1.2e-7); neither has it on Metal.
    ``sparse_fields``: fields under sparse SNodes are read and written correctly. taichi-forge
    0.7 declares them on Vulkan too, where (measured) its ``ti.is_active`` crashes the process
    and a struct-for over a 3-D or 4-D pointer field misses cells.
    ``float64``: True where 64-bit floats always work; None where the device decides
    (Vulkan's and Metal's ``shaderFloat64``, probed at run time by ``supports_float64``).
    ``max_array_bytes``: the largest array a kernel takes, None for no limit: taichi-forge
    0.7 refuses an array argument of 2^31 bytes or more at launch ("Array shape exceeds the
    int32 indexing ABI", measured: float32 from 2^29 elements on).
    ``prepared_launches``: tiinterp's prepared launches (Note [Prepared launches] in
    ``_runtime/taichi.py``) are written for this backend's launcher (taichi 1.7.4's).
    ``frees_ndarrays_through_current_runtime``: a released ndarray is freed through the
    current runtime, not its own (Note [Ndarrays outliving their runtime] in
    ``_runtime/taichi.py``).
    ``recompiles_for_new_options``: a kernel's launch compiles it again when the program's
    compile options differ from those it was compiled under (taichi-forge 0.7, measured: the
    CPU's SIMD kernels compiled with vector types on their first launch, scalarised on their
    second; Note [Vector types under any options] in ``_runtime/taichi.py``).
    ``streams_end_with_threads``: a thread's device stream is destroyed when the thread ends,
    while other threads' launches may wait on it (taichi-forge 0.7 on Vulkan, measured: a
    crash; on Metal taken to be the same, not measured): calls from threads other than the
    main one run on tiinterp's launch thread (Note [taichi-forge's streams and threads that
    end] in ``_runtime/launch_thread.py``).
    """

    ndarray_autodiff: bool
    sparse_fields: bool
    float64: bool | None
    max_array_bytes: int | None
    prepared_launches: bool
    frees_ndarrays_through_current_runtime: bool
    recompiles_for_new_options: bool
    streams_end_with_threads: bool


def _row(
    autodiff: bool, sparse: bool, float64: bool | None, forge: bool, graphics: bool = False
) -> Capabilities:
    return Capabilities(
        ndarray_autodiff=autodiff,
        sparse_fields=sparse,
        float64=float64,
        max_array_bytes=2**31 - 1 if forge else None,
        prepared_launches=not forge,
        frees_ndarrays_through_current_runtime=not forge,
        recompiles_for_new_options=forge,
        streams_end_with_threads=forge and graphics,
    )


TABLE: dict[tuple[str, str], Capabilities] = {
    ("taichi", "cpu"): _row(autodiff=True, sparse=True, float64=True, forge=False),
    ("taichi", "cuda"): _row(autodiff=True, sparse=True, float64=True, forge=False),
    ("taichi", "vulkan"): _row(autodiff=False, sparse=False, float64=None, forge=False),
    ("taichi", "metal"): _row(autodiff=False, sparse=False, float64=None, forge=False),
    ("taichi_forge", "cpu"): _row(autodiff=True, sparse=True, float64=True, forge=True),
    ("taichi_forge", "cuda"): _row(autodiff=True, sparse=True, float64=True, forge=True),
    ("taichi_forge", "vulkan"): _row(
        autodiff=True, sparse=False, float64=None, forge=True, graphics=True
    ),
    ("taichi_forge", "metal"): _row(
        autodiff=False, sparse=False, float64=None, forge=True, graphics=True
    ),
}


def capabilities(backend: str, arch: str) -> Capabilities:
    """The row of ``backend`` on ``arch``."""
    return TABLE[backend, arch]


def archs_with(backend: str, capability: str) -> tuple[str, ...]:
    """The archs on which ``backend`` has ``capability`` (a field of :class:`Capabilities`
    that is true there), e.g. for an error message."""
    return tuple(a for a in ARCHS if getattr(TABLE[backend, a], capability))
