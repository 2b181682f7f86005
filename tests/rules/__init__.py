"""Tests of ``tiinterp/_rules``: taps, nearest-index rules, checks of arguments and layouts,
the B-spline prefilter, and the package's own structure.
"""
