"""Tests of ``tiinterp/_kernels`` that look at one kernel family: the CPU's SIMD configuration,
grid_sample's gather adjoint.
"""
