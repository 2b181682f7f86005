"""The arch names tiinterp takes (``init(arch=...)``, ``--arch``), apart from
:mod:`tiinterp._runtime.session` so that the command line can parse its arguments before Taichi is
imported (Note [Lazy kernel modules] in ``__init__.py``)."""

ARCH_NAMES = ("cpu", "cuda", "vulkan", "metal", "gpu", "auto")
