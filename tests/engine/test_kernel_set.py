"""The kernel set (``tiinterp/_compiled/``, Note [A kernel set's ties]): a small set built
once per session from the JIT's own kernels gives the JIT's bits, kernel by kernel and in
whole calls (first calls and repeats, forward and backward, NumPy and torch); a launch
outside it falls back to the JIT; a set that does not match is ignored; the build refuses
clearly without llc; the library module imports no Taichi.

Needs taichi 1.7.4 (the tests that build are marked ``kernel_set``: deselected elsewhere),
a C compiler and llvmlite (the test group's) or llc."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tiinterp
from tiinterp._compiled import build, library, native
from tiinterp._runtime.arrays import aligned_empty
from tiinterp._runtime.taichi import BACKEND, backend_version, launch, launch_with_vector_types

# Small calls' forms (serial loops, vector and scalar stores, 1-2 and WIDE taps), both dtypes.
CALLS = [((1, 3, 64, 64), 128), ((1, 3, 64, 64), (40, 50)), ((2, 3, 20, 27), (33, 77))]
# A result past 2^16 elements: the parallel forms (the shim's OpenMP parallel-for).
LARGE = ((1, 3, 128, 128), (256, 256))
MODES = ("bilinear", "bicubic")
DTYPES = (np.float32, np.float64)


def _calls() -> None:
    for dtype in DTYPES:
        for shape, size in [*CALLS, LARGE]:
            x = np.random.default_rng(0).random(shape).astype(dtype)
            for mode in MODES:
                y = tiinterp.interpolate(x, size=size, mode=mode)
                tiinterp.interpolate_backward(y, shape, mode=mode)


def _use(folder) -> library.KernelSet | None:
    os.environ["TIINTERP_KERNEL_SET"] = str(folder)
    return native.look_again()


@pytest.fixture(scope="module")
def kernel_set(arch, tmp_path_factory):
    # Only on the CPU with Taichi 1.7.4: the tests that use it are marked kernel_set.
    assert arch == "cpu" and build.refusal(BACKEND, backend_version()) is None
    folder = tmp_path_factory.mktemp("kernels") / "set"
    launches: list = []

    def capture():
        launches.extend(build.capture_calls(_calls))
        return launches

    build.build(folder, capture, log=lambda line: None)
    yield folder, launches
    _use(os.devnull)


@pytest.fixture
def using(kernel_set):
    folder, _ = kernel_set
    found = _use(folder)
    assert found is not None
    yield found
    _use(os.devnull)


@pytest.mark.kernel_set
def test_every_kernel_in_the_set_gives_the_jits_bits(arch, kernel_set, using):
    _, launches = kernel_set
    manifest = library.read_manifest(kernel_set[0])
    assert len(manifest["kernels"]) >= len(launches) >= 8
    rng = np.random.default_rng(1)
    for kernel, args in build.with_store_forms(launches):
        nat = using.find(native.launch_key(kernel, args))
        assert nat is not None
        # Vector loads and stores are aligned (Note [Store forms] in _kernels/simd.py).
        source = aligned_empty(args[0].shape, args[0].dtype)
        source[...] = rng.random(args[0].shape)
        jit_out, native_out = (aligned_empty(args[1].shape, args[1].dtype) for _ in range(2))
        jit_out[...] = native_out[...] = np.nan
        launch_with_vector_types(launch, kernel, source, jit_out, *args[2:])
        launch_with_vector_types(launch, kernel, source, jit_out, *args[2:])  # prepared
        nat((source, native_out, *args[2:]))
        assert np.array_equal(jit_out, native_out), nat.name


def _results(torch_too: bool):
    """Each call's forward (twice: the first call and a repeat) and backward results."""
    out = []
    for dtype in DTYPES:
        for shape, size in CALLS:
            x = np.random.default_rng(2).random(shape).astype(dtype)
            for mode in MODES:
                for _ in range(2):
                    y = tiinterp.interpolate(x, size=size, mode=mode)
                    out.append(y)
                    out.append(tiinterp.interpolate_backward(y, shape, mode=mode))
                if torch_too:
                    import torch

                    t = torch.from_numpy(x)
                    for _ in range(2):
                        out.append(tiinterp.interpolate(t, size=size, mode=mode).numpy())
    return out


@pytest.mark.kernel_set
def test_calls_with_the_set_give_the_jits_bits(arch, kernel_set, using, monkeypatch):
    pytest.importorskip("torch")
    launched = []
    monkeypatch.setattr(
        library.NativeKernel,
        "__call__",
        lambda self, args, original=library.NativeKernel.__call__: (
            launched.append(self.name),
            original(self, args),
        )[1],
    )
    tiinterp.init("cpu", offline_cache=True)  # new caches: first calls again
    with_set = _results(torch_too=True)
    assert launched
    _use(os.devnull)
    tiinterp.init("cpu", offline_cache=True)
    without = _results(torch_too=True)
    assert len(with_set) == len(without)
    for a, b in zip(with_set, without, strict=True):
        assert np.array_equal(a, b)


@pytest.mark.kernel_set
def test_a_kernel_outside_the_set_falls_back_to_the_jit(arch, kernel_set, using):
    x = np.random.default_rng(3).random((1, 3, 64, 64)).astype(np.float32)
    y = tiinterp.interpolate(x, size=(30, 200), mode="lanczos3", antialias=True)
    _use(os.devnull)
    tiinterp.init("cpu", offline_cache=True)
    assert np.array_equal(
        y, tiinterp.interpolate(x, size=(30, 200), mode="lanczos3", antialias=True)
    )


def _copy(folder, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(folder, target)
    return target


@pytest.mark.kernel_set
@pytest.mark.parametrize("damage", ["other key", "corrupt manifest", "no library", "no manifest"])
def test_a_set_that_does_not_match_is_ignored(
    arch, kernel_set, tmp_path, damage, capsys, monkeypatch
):
    folder = _copy(kernel_set[0], tmp_path)
    manifest = folder / library.MANIFEST
    if damage == "other key":
        data = json.loads(manifest.read_text())
        data["identity"]["threads"] += 1
        manifest.write_text(json.dumps(data))
    elif damage == "corrupt manifest":
        manifest.write_text("{not json")
    elif damage == "no library":
        (folder / build.LIBRARY).unlink()
    else:
        manifest.unlink()
    monkeypatch.setenv("TIINTERP_VERBOSE", "1")
    assert _use(folder) is None
    err = capsys.readouterr().err
    assert err.count("kernel set ignored") == 1
    x = np.random.default_rng(4).random((1, 3, 64, 64)).astype(np.float32)
    y = tiinterp.interpolate(x, size=(40, 50), mode="bilinear")
    assert y.shape == (1, 3, 40, 50)


def test_the_build_refuses_clearly_without_a_code_generator(monkeypatch):
    """llvmlite is the build's code generator unless $TIINTERP_LLC names an llc; an llc that
    is not there, or none at all, is refused with what to install."""
    monkeypatch.delenv("TIINTERP_LLC", raising=False)
    assert isinstance(build.find_code_generator(), build.Llvmlite)  # the test group's
    monkeypatch.setenv("TIINTERP_LLC", "no-such-llc-here")
    with pytest.raises(build.BuildError, match="TIINTERP_LLC=no-such-llc-here"):
        build.find_code_generator()
    monkeypatch.delenv("TIINTERP_LLC")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError, match="pip install 'llvmlite"):
        build.find_llc()


def test_the_build_refuses_other_taichi_versions():
    assert "taichi 1.7.4" in build.refusal("taichi_forge", "0.7.0")
    assert "taichi 1.7.4" in build.refusal("taichi", "1.7.3")


def test_the_library_module_imports_no_taichi():
    code = (
        "import sys, tiinterp._compiled.library as l; "
        "print(sorted(m for m in sys.modules if 'taichi' in m))"
    )
    # tiinterp/__init__ imports Taichi: load the module by its file.
    path = pathlib.Path(library.__file__)
    code = (
        "import importlib.util, sys; "
        f"s = importlib.util.spec_from_file_location('library', {str(path)!r}); "
        "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
        "m.kernel_set(m.set_identity('taichi', '1.7.4', 2, 'x')); "
        "print(sorted(n for n in sys.modules if 'taichi' in n or n.startswith('tiinterp')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_key_covers_the_kernels_sources():
    """``library.KERNEL_SOURCES``: simd.py and the tiinterp modules it imports."""
    import ast

    package = pathlib.Path(library.__file__).resolve().parents[1]
    tree = ast.parse((package / "_kernels" / "simd.py").read_text())
    imported = {
        node.module.lstrip(".").replace(".", "/") + ".py"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 2
    }
    assert {"_kernels/simd.py", *imported} == set(library.KERNEL_SOURCES)


def _resize_large(_):
    x = np.random.default_rng(5).random(LARGE[0]).astype(np.float32)
    return tiinterp.interpolate(x, size=LARGE[1], mode="bilinear")


@pytest.mark.kernel_set
def test_a_forked_child_runs_the_sets_parallel_kernels(arch, kernel_set, using, monkeypatch):
    """GNU OpenMP is not fork-safe: a child forked after the set's parallel kernels ran in
    the parent runs their tasks in turn (the shim checks its process), with the parent's
    bits, instead of waiting on the parent's threads."""
    import multiprocessing

    native = []
    launch = library.NativeKernel.__call__
    monkeypatch.setattr(
        library.NativeKernel, "__call__", lambda self, args: native.append(1) or launch(self, args)
    )
    expected = _resize_large(None)
    assert expected.size > 2**16 and native, "the parent's call must run from the set"
    monkeypatch.undo()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.map_async(_resize_large, [None]).get(timeout=120)[0]
    np.testing.assert_array_equal(child, expected)
