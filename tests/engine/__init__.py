"""Tests of ``tiinterp/_engine``: the device path, repeated and small calls, batches past 2^19
rows.
"""
