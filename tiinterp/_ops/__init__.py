"""The operations users call: ``interpolate`` (``resize``), ``grid_sample``,
``scale_and_translate`` (and its ``ti.ad`` gradients, ``scale_translate_autodiff``), and the
steps between Taichi data (``pipeline``). Each checks its arguments once (``_rules``),
then hands a plan to ``_engine``. ``tiinterp/__init__.py`` re-exports them.
"""
