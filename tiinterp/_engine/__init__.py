"""The engine: running a plan of passes on the arch at hand.

``passes`` takes a checked plan and runs it (``cpu_path`` on the CPU, ``device_path`` on
GPUs), and remembers a signature's prepared call so that a repeat skips the checks (Note
[Repeated calls]); ``autodiff`` runs Taichi's ``ti.ad`` where a call asks for it. Imports
``_runtime``, ``_rules`` and ``_kernels``.
"""
