"""The engine: running a plan on the arch at hand.

``passes`` takes a checked plan of resize passes and runs it (``cpu_path`` on the CPU,
``device_path`` on GPUs), and remembers a signature's prepared call so that a repeat skips
the checks (Note [Repeated calls]); ``grid_path`` plans and runs ``grid_sample`` and its
gradients (chunks, tiles, which sort, scratch, by arch); ``autodiff`` runs Taichi's ``ti.ad``
where a call asks for it. Everything here that depends on the arch is chosen here: the
kernels below choose nothing. Imports ``_runtime``, ``_rules`` and ``_kernels``.
"""
