"""The rules: what a call means, in plain Python and NumPy (no Taichi kernel).

The one table of the filters' formulas and each mode's filter and radius (``filters``), the
taps a resampled axis reads (``taps``), a call's plan of one-axis passes (``plan``), the
B-spline prefilter (``bspline``), scale-and-translate's rows (``scale_translate``), and the
checks of a call's arguments, arrays, layout and out= arrays (``validate``). Imports
``_runtime`` only (to tell an array's kind and dtype, and what the backend can do).
"""
