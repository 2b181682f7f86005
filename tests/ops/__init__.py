"""Tests of the operations (``tiinterp/_ops``): resize, grid_sample, scale_and_translate and
the steps between Taichi data, against the oracle, PyTorch and JAX, forward, backward, on
every arch.
"""
