"""Tests of the public modules on top: ``tiinterp.funcs``, the torch and JAX bridges, and the
documentation's examples.
"""
