"""Tests of ``tiinterp/_runtime``: array kinds, Taichi data of every kind, the session (init,
archs, threads, forks, worker placement), capabilities and Vulkan devices.
"""
