"""Tests of the command line (``tiinterp/cli``): end to end in subprocesses, image files, PIL's
filters.
"""
