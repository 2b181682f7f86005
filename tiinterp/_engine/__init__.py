"""The engine: running a plan of passes on the arch at hand.

``passes`` takes a checked plan and runs it (``cpu_path`` on the CPU, ``device_path`` on
GPUs), ``repeat_calls`` remembers a signature's prepared call so that a repeat skips the
checks, and ``autodiff`` runs Taichi's ``ti.ad`` where a call asks for it. Imports
``_runtime``, ``_rules`` and ``_kernels``.
"""
