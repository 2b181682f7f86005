"""The runtime: everything that talks to Taichi and to the caller's arrays.

Which Taichi package runs (``taichi``), what each arch can do (``capabilities``,
``archs``), the session's ``init`` and its lock (``session``, with the process-level care
of ``fp_environment``, ``worker_placement``, ``cuda_threads``, ``vulkan_devices`` and
``launch_thread``, the one thread that launches where the backend asks for one), and
the arrays a call is given: their kinds and dtypes (``arrays``, ``dtypes``), Taichi fields
and ndarrays of any element type as flat scalar arrays (``elements``), and the scratch
ndarrays a runtime keeps (``scratch``). The bottom part: it imports no other part.
"""
