"""The kernels: Taichi code only, one module per family.

The filters as ``ti.func``, under the names of the table of filters in ``_rules``
(``filter_funcs``), the CPU's one-axis resampling (``resample``, and its SIMD forms in
``simd``), the device path's fused gather (``gather``), and grid_sample's sampler and its
deterministic adjoint (``grid``, ``grid_adjoint``). Each adjoint sits next to its forward.
Imports ``_runtime`` and ``_rules``. Nothing here reads the arch: which kernel runs where,
in what launches, is ``_engine``'s choice (tests/rules/test_package_structure.py).
"""
