"""JAX's 64-bit mode for a ``with`` block, for the tests that compare with JAX in float64."""

import contextlib

import jax


@contextlib.contextmanager
def x64():
    """JAX's 64-bit mode, switched on globally for a ``with`` block and then restored. The
    thread-local ``jax.enable_x64`` context is not enough: tiinterp.jax refuses float64
    under it (see test_thread_local_x64_is_refused_for_float64)."""
    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)
