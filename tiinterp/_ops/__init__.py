"""The operations users call: ``interpolate`` (``resize``), ``grid_sample``,
``scale_and_translate`` (``scale_translate``, and its ``ti.ad`` gradients,
``scale_translate_autodiff``), the steps between Taichi data (``pipeline``) and the kernels
compiled ahead of a program's calls (``warmup``). Each checks its arguments once
(``_rules``), then hands a plan to ``_engine``. ``tiinterp/__init__.py`` re-exports them.
"""
