"""tiinterp.torch, the PyTorch autograd bridge: gradients (gradcheck, gradgradcheck), the
custom ops' registrations (opcheck), equality with F.interpolate / F.grid_sample,
torch.compile, determinism, argument errors and the Resize module.

Small shapes throughout: the numbers themselves are the core tests' business, this file
tests the bridge. gradcheck runs in fast mode (it compares ``v^T J u`` for random ``u``,
``v`` rather than every Jacobian entry: for these maps, linear in the input, a wrong entry
still shows), and the full Jacobian once per op.
"""

import copy
import doctest
import inspect
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

import tiinterp.torch as titorch
from tests.tolerances import relative_error, tolerance
from tiinterp import _torch_support as torch_support
from tiinterp._ops import grid_sample as grid_ops
from tiinterp._rules.filters import ALIASES, ALIGN_CORNERS_MODES, ANTIALIAS_MODES, MODE_DIMS, MODES
from tiinterp._runtime import taichi as _taichi
from tiinterp._runtime.taichi import submodule as taichi_submodule

# torch 2.13's own torch/utils/mkldnn.py, imported by torch.compile's Inductor, defines
# script methods, which torch 2.13 deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"
)

DTYPES = {"float32": torch.float32, "float64": torch.float64}
DTYPE_PARAMS = ["float32", pytest.param("float64", marks=pytest.mark.requires_float64)]


@pytest.fixture(autouse=True)
def _torch_seed():
    """gradcheck's fast mode and nn.Conv2d's initialisation draw from torch's generator."""
    torch.manual_seed(20261130)


def tensor(rng, shape, dtype=torch.float64, requires_grad=False):
    values = torch.from_numpy(rng.standard_normal(shape)).to(dtype)
    return values.requires_grad_(requires_grad)


# --- Cases --------------------------------------------------------------------------------------

# Per number of spatial axes: the input of an upsampling (by scale_factor 1.6: samples
# 1 / 1.6 apart) and of a downsampling (to DOWN_SIZE, by size), and that size.
UP_SHAPE = {1: (1, 2, 6), 2: (1, 2, 5, 6), 3: (1, 1, 4, 5, 3)}
DOWN_SHAPE = {1: (1, 2, 11), 2: (1, 2, 9, 8), 3: (1, 1, 7, 6, 5)}
DOWN_SIZE = {1: (4,), 2: (4, 3), 3: (3, 2, 2)}


def resize_call(dims, direction):
    """The input shape and the size / scale_factor arguments of a case."""
    if direction == "up":
        return UP_SHAPE[dims], {"scale_factor": 1.6}
    return DOWN_SHAPE[dims], {"size": DOWN_SIZE[dims]}


def interpolate_cases():
    """Every mode x spatial dims x antialias x align_corners that tiinterp takes, up and
    down."""
    cases = []
    for mode in MODES:
        canonical = ALIASES.get(mode, mode)
        if mode in ALIASES:
            antialiases = (True,)
        elif canonical in ANTIALIAS_MODES:
            antialiases = (False, True)
        else:
            antialiases = (False,)
        for dims in MODE_DIMS[canonical]:
            for antialias in antialiases:
                aligns = (None, True) if canonical in ALIGN_CORNERS_MODES and not antialias else ()
                for align_corners in aligns or (None,):
                    for direction in ("up", "down"):
                        case_id = f"{mode}-{dims}d-aa{int(antialias)}-ac{align_corners}-{direction}"
                        cases.append(
                            pytest.param(
                                mode, dims, antialias, align_corners, direction, id=case_id
                            )
                        )
    return cases


INTERPOLATE_CASES = interpolate_cases()

GRID_CASES = [
    pytest.param(dims, mode, padding, align, id=f"{dims}d-{mode}-{padding}-ac{align}")
    for dims, modes in ((2, ("nearest", "bilinear", "bicubic")), (3, ("nearest", "bilinear")))
    for mode in modes
    for padding in ("zeros", "border", "reflection")
    for align in (False, True)
]
GRID_INPUT_SHAPE = {2: (2, 2, 4, 5), 3: (1, 2, 3, 4, 5)}
GRID_POINTS = {2: (3, 2), 3: (2, 2, 2)}


def off_kink_grid(rng, input_shape, points_shape, align_corners, dtype=torch.float64):
    """A grid ``(N, *points_shape, D)`` of points kept off every kink of grid_sample, so that
    finite differences are valid: in pixel units each coordinate is ``k + f`` with ``k`` in
    ``-2 .. size`` (so some points are outside, exercising the padding) and ``f`` in
    ``[0.15, 0.35]`` or ``[0.65, 0.85]``, away from the integers (tap boundaries, the
    border clamp, reflection about 0 or size - 1) and from the halves (nearest rounding,
    reflection about -0.5 or size - 0.5)."""
    spatial = input_shape[2:]
    shape = (input_shape[0], *points_shape)
    components = []
    for axis in range(len(spatial)):  # component 0 runs along the last axis (x, width)
        size = spatial[len(spatial) - 1 - axis]
        pixel = (
            rng.integers(-2, size + 1, shape)
            + rng.uniform(0.15, 0.35, shape)
            + 0.5 * rng.integers(0, 2, shape)
        )
        grid = pixel * 2 / (size - 1) - 1 if align_corners else (2 * pixel + 1) / size - 1
        components.append(grid)
    return torch.from_numpy(np.stack(components, axis=-1)).to(dtype)


# --- Import -------------------------------------------------------------------------------------


def test_torch_is_imported_only_on_request_and_its_absence_is_explained():
    script = """
import sys
import tiinterp
print("torch imported by tiinterp:", "torch" in sys.modules)
sys.modules["torch"] = None  # as if torch were not installed
try:
    import tiinterp.torch
except ImportError as error:
    print("ImportError:", error)
"""
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    assert "torch imported by tiinterp: False" in run.stdout
    assert "ImportError: tiinterp.torch needs PyTorch 2.11 or newer" in run.stdout
    assert "pip install 'tiinterp[torch]'" in run.stdout


@pytest.mark.parametrize(
    ("version", "taken"),
    [
        ("2.10.0", False),
        ("2.10.1+cu126", False),
        ("1.13.1", False),
        ("2.11.0", True),
        ("2.11.0+cu130", True),
        ("2.13.0+cpu", True),
        ("2.15.0", True),
        ("2.16.0a0+git1234abc", True),
        ("3.0.0", True),
    ],
)
def test_the_version_gate(version, taken):
    if taken:
        torch_support.check_version(version)
    else:
        with pytest.raises(
            ImportError, match=rf"needs PyTorch 2\.11 or newer, got {re.escape(version)}"
        ):
            torch_support.check_version(version)


def test_a_version_that_is_no_version_is_explained():
    with pytest.raises(
        ImportError, match=r"expected a PyTorch version such as '2\.13\.0', got 'dev'"
    ):
        torch_support.check_version("dev")


def test_an_older_torch_is_refused_at_import():
    script = """
import torch
torch.__version__ = torch.torch_version.TorchVersion("2.10.0")
try:
    import tiinterp.torch
except ImportError as error:
    print("ImportError:", error)
"""
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    assert "ImportError: tiinterp.torch needs PyTorch 2.11 or newer, got 2.10.0" in run.stdout


def test_this_torch_takes_the_dispatcher_registration():
    """CI's torch has every internal: the full bridge is what its suite tests."""
    assert titorch.REGISTRATION == "dispatcher"


class Hiding:
    """``target`` with the attribute at the dotted ``path`` missing, the rest delegated."""

    def __init__(self, target, path):
        self._target, self._path = target, path

    def __getattr__(self, name):
        head, _, rest = self._path.partition(".")
        if name != head:
            return getattr(self._target, name)
        if not rest:
            raise AttributeError(name)
        return Hiding(getattr(self._target, name), rest)


@pytest.mark.parametrize("name", sorted(torch_support.INTERNALS))
def test_each_missing_internal_is_found(name):
    path = torch_support.INTERNALS[name]
    assert torch_support.find_internals(Hiding(torch, path)) == (None, f"torch has no {path}")


def test_a_library_impl_without_keysets_is_found(monkeypatch):
    def impl(self, op_name, fn, dispatch_key=""):
        raise AssertionError("not called")

    monkeypatch.setattr(torch.library.Library, "impl", impl)
    assert torch_support.find_internals(torch) == (
        None,
        "torch.library.Library.impl takes no with_keyset",
    )


def test_an_op_overload_without_redispatch_is_found(monkeypatch):
    monkeypatch.delattr(torch._ops.OpOverload, "redispatch")
    assert torch_support.find_internals(torch) == (None, "torch has no OpOverload.redispatch")


# What the custom_op registration serves, in a process where an internal is hidden: the
# numbers of the dispatcher registration (computed in the same process through tiinterp's
# NumPy API), gradients, double backward, vmap, compile and opcheck; forward-mode AD refused.
CUSTOM_OP_SCRIPT = """
import numpy as np
import torch
import torch._functorch.utils
del torch._functorch.utils.enable_single_level_autograd_function
import torch.autograd.forward_ad as fwAD
import tiinterp
import tiinterp.torch as titorch

print("registration", titorch.REGISTRATION)
torch.manual_seed(7)
x = torch.randn(2, 2, 5, 6, dtype=torch.float64, requires_grad=True)
grid = (torch.rand(2, 3, 4, 2, dtype=torch.float64) * 2 - 1).requires_grad_(True)
y = titorch.interpolate(x, size=(7, 9), mode="bicubic")
g = torch.randn_like(y)
(grad,) = torch.autograd.grad(y, x, g, create_graph=True)
numpy_x = x.detach().numpy()
print("forward", np.array_equal(y.detach().numpy(),
      tiinterp.interpolate(numpy_x, size=(7, 9), mode="bicubic")))
print("backward", np.array_equal(grad.detach().numpy(),
      tiinterp.interpolate_backward(g.numpy(), numpy_x.shape, mode="bicubic")))
sampled = titorch.grid_sample(x, grid, mode="bilinear", align_corners=False)
gs = torch.randn_like(sampled)
grads = torch.autograd.grad(sampled, (x, grid), gs)
expected = tiinterp.grid_sample_backward(gs.numpy(), numpy_x, grid.detach().numpy())
print("grid_backward", all(np.array_equal(a.numpy(), b) for a, b in zip(grads, expected)))
check = dict(fast_mode=True)
resize = lambda a: titorch.interpolate(a, size=(7, 9), mode="bicubic")
print("gradcheck", torch.autograd.gradcheck(resize, (x,), **check))
print("gradgradcheck", torch.autograd.gradgradcheck(resize, (x,), **check))
warp = lambda a, b: titorch.grid_sample(a, b, mode="bilinear", align_corners=False)
print("grid_gradcheck", torch.autograd.gradcheck(warp, (x, grid), **check))
stack = torch.randn(3, 2, 2, 5, 6, dtype=torch.float64)
print("vmap", torch.equal(torch.vmap(resize)(stack), torch.stack([resize(s) for s in stack])))
compiled = torch.compile(lambda a: resize(a).square().sum(), fullgraph=True, backend="aot_eager")
x.grad = None
compiled(x).backward()
twice = 2 * tiinterp.interpolate_backward(resize(x).detach().numpy(), numpy_x.shape, mode="bicubic")
print("compile", np.allclose(x.grad.numpy(), twice, rtol=1e-12, atol=1e-12))
torch.library.opcheck(torch.ops.tiinterp.interpolate.default,
                      (x.detach(), [7, 9], None, "bicubic", None, False))
print("opcheck", True)


def refused(name, call):
    try:
        call()
        print(name, "no error")
    except RuntimeError as error:
        print(name, "refused:", str(error).splitlines()[0])


def dual():
    with fwAD.dual_level():
        resize(fwAD.make_dual(x.detach(), torch.ones_like(x)))


refused("jvp", lambda: torch.func.jvp(resize, (x.detach(),), (torch.ones_like(x),)))
refused("dual", dual)
"""


# torch 2.14's Function.apply, on the torch at hand: the C++ _FunctionBase.apply, which from
# 2.14 makes the handover to torch.func itself (Note [An apply without the handover to
# torch.func]); the bridge then applies its Functions through single-level twins, and every
# torch.func transform over the ops must give what plain autograd gives.
CPP_APPLY_SCRIPT = """
import torch
torch.autograd.Function.apply = torch._C._FunctionBase.__dict__["apply"]
from torch import func
import tiinterp.torch as titorch

torch.manual_seed(3)
x = torch.randn(1, 2, 5, 6, dtype=torch.float64)
grid = torch.rand(1, 3, 4, 2, dtype=torch.float64) * 2 - 1
resize = lambda a: titorch.interpolate(a, size=(7, 9), mode="bicubic")
warp = lambda a, b: titorch.grid_sample(a, b, mode="bilinear", align_corners=False)
g = torch.randn(1, 2, 7, 9, dtype=torch.float64)
gs = torch.randn(1, 2, 3, 4, dtype=torch.float64)
xr, gr = x.clone().requires_grad_(), grid.clone().requires_grad_()
(want,) = torch.autograd.grad(resize(xr), xr, g)
want_x, want_grid = torch.autograd.grad(warp(xr, gr), (xr, gr), gs)
from torch.autograd.function import _SingleLevelFunction
from tiinterp._torch_support import plain_apply

class Probe(torch.autograd.Function):
    pass

taken = plain_apply(torch, Probe, _SingleLevelFunction).__self__
print("twin", taken.__name__, issubclass(taken, torch.autograd.Function), titorch.REGISTRATION)
print("grad", torch.equal(func.vjp(resize, x)[1](g)[0], want))
print("jvp", torch.equal(func.jvp(resize, (x,), (x,))[1], resize(x)))
jacobian = func.jacrev(resize)(x).reshape(126, 60)
print("jacrev", torch.allclose(jacobian.T @ g.reshape(126), want.reshape(60)))
_, pullback = func.vjp(warp, x, grid)
print("grid_vjp", all(torch.equal(a, b) for a, b in zip(pullback(gs), (want_x, want_grid))))
print("grid_jacfwd", torch.allclose(
    func.jacfwd(warp, 1)(x, grid).reshape(24, 24).T @ gs.reshape(24), want_grid.reshape(24)))
"""


def test_torch_func_through_the_single_level_twins():
    """The path taken on torch 2.14 and later, run on the torch at hand (CI's 2.13, whose
    own Function.apply takes the other path): the twins serve every transform. (That 2.14's
    C++ apply needs them was measured on 2.14.1 and 2.15.0 wheels, docs/guide/testing.md.)"""
    run = subprocess.run(
        [sys.executable, "-c", CPP_APPLY_SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines.pop("twin") == "ProbeSingleLevel False dispatcher"
    assert lines == dict.fromkeys(("grad", "jvp", "jacrev", "grid_vjp", "grid_jacfwd"), "True")


def test_the_custom_op_registration_where_an_internal_is_missing():
    run = subprocess.run(
        [sys.executable, "-c", CUSTOM_OP_SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines.pop("registration") == "custom_op"
    for name in ("jvp", "dual"):
        assert lines.pop(name).startswith(
            "refused: tiinterp.torch.interpolate: forward-mode AD (torch.func.jvp, jacfwd, "
            "torch.autograd.forward_ad) needs the bridge's own autograd kernels, which this "
            "PyTorch"
        )
    assert lines == dict.fromkeys(
        (
            "forward",
            "backward",
            "grid_backward",
            "gradcheck",
            "gradgradcheck",
            "grid_gradcheck",
            "vmap",
            "compile",
            "opcheck",
        ),
        "True",
    )


def test_public_names():
    assert sorted(titorch.__all__) == [
        "REGISTRATION",
        "Resize",
        "grid_sample",
        "interpolate",
        "scale_and_translate",
    ]
    # F.interpolate's and F.grid_sample's parameters, in their order, with their defaults.
    for ours, theirs in (
        (titorch.interpolate, F.interpolate),
        (titorch.grid_sample, F.grid_sample),
    ):
        ours_parameters = inspect.signature(ours).parameters
        theirs_parameters = inspect.signature(theirs).parameters
        assert list(ours_parameters) == list(theirs_parameters)
        assert [p.default for p in ours_parameters.values()] == [
            p.default for p in theirs_parameters.values()
        ]


# The arguments of tiinterp.interpolate that the bridge's interpolate and Resize share.
RESIZE_ARGUMENTS = {
    "size",
    "scale_factor",
    "mode",
    "align_corners",
    "recompute_scale_factor",
    "antialias",
}


def test_docstrings_cite_the_originals():
    """Each docstring describes what is the bridge's own (tensors, devices, autograd,
    errors, examples) and cites tiinterp's function for the arguments it shares with it,
    whose description has one home there."""
    for function, original, shared in (
        (titorch.interpolate, "tiinterp.interpolate", RESIZE_ARGUMENTS),
        (titorch.Resize, "tiinterp.interpolate", RESIZE_ARGUMENTS),
        (titorch.grid_sample, "tiinterp.grid_sample", {"mode", "padding_mode"}),
    ):
        doc = inspect.getdoc(function)
        for section in ("Parameters", "Raises", "Examples"):
            assert f"\n{section}\n{'-' * len(section)}\n" in doc, (function.__name__, section)
        entries = parameter_entries(doc)
        assert set(entries) == set(inspect.signature(function).parameters), function.__name__
        cited = {
            name
            for name, (typed, first_line) in entries.items()
            if not typed and first_line.startswith(f"As in :func:`{original}`.")
        }
        assert cited == shared, function.__name__


def parameter_entries(doc):
    """A numpydoc Parameters section as ``{name: (whether typed, first line)}``; a line that
    names several parameters without a type (``size, mode``) is an entry for each."""
    section = doc.split("\nParameters\n----------\n")[1].split("\n\n")[0].splitlines()
    entries = {}
    for line, following in zip(section, [*section[1:], ""], strict=True):
        if not line.startswith(" "):
            names, _, kind = line.partition(" : ")
            entries.update((name, (bool(kind), following.strip())) for name in names.split(", "))
    return entries


def test_examples_pass(arch):
    """The docstrings' examples (tests/public/test_docs.py runs those of tiinterp's own modules)."""
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    sources = []
    for test in finder.find(titorch, "tiinterp.torch"):
        runner.run(test)
        sources += [example.source for example in test.examples]
    failed, _ = runner.summarize(verbose=False)
    assert failed == 0
    for used in ("titorch.interpolate(", "titorch.grid_sample(", "titorch.Resize("):
        assert any(used in source for source in sources), used


# --- Gradients ----------------------------------------------------------------------------------


@pytest.mark.requires_float64
@pytest.mark.parametrize(
    ("mode", "dims", "antialias", "align_corners", "direction"), INTERPOLATE_CASES
)
def test_interpolate_gradcheck(arch, rng, mode, dims, antialias, align_corners, direction):
    shape, sizing = resize_call(dims, direction)
    x = tensor(rng, shape, requires_grad=True)

    def resize(a):
        return titorch.interpolate(
            a, mode=mode, align_corners=align_corners, antialias=antialias, **sizing
        )

    assert torch.autograd.gradcheck(resize, (x,), fast_mode=True)


GRADGRAD_CASES = sorted(
    {(mode, dims) for mode in MODES for dims in MODE_DIMS[ALIASES.get(mode, mode)]}
)


@pytest.mark.requires_float64
@pytest.mark.parametrize(("mode", "dims"), GRADGRAD_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("direction", ["up", "down"])
def test_interpolate_gradgradcheck(arch, rng, mode, dims, direction):
    """The backward op's own gradient (the forward op): double backward works."""
    shape, sizing = resize_call(dims, direction)
    antialias = ALIASES.get(mode, mode) in ANTIALIAS_MODES
    x = tensor(rng, shape, requires_grad=True)

    def resize(a):
        return titorch.interpolate(a, mode=mode, antialias=antialias, **sizing)

    assert torch.autograd.gradgradcheck(resize, (x,), fast_mode=True)


@pytest.mark.requires_float64
@pytest.mark.parametrize(("dims", "mode", "padding_mode", "align_corners"), GRID_CASES)
def test_grid_sample_gradcheck(arch, rng, dims, mode, padding_mode, align_corners):
    shape = GRID_INPUT_SHAPE[dims]
    x = tensor(rng, shape, requires_grad=True)
    grid = off_kink_grid(rng, shape, GRID_POINTS[dims], align_corners).requires_grad_()

    def sample(a, g):
        return titorch.grid_sample(a, g, mode, padding_mode, align_corners)

    assert torch.autograd.gradcheck(sample, (x, grid), fast_mode=True)


@pytest.mark.requires_float64
def test_full_jacobians(arch, rng):
    """Every Jacobian entry, once per op: interpolate (and its backward) and grid_sample."""
    x = tensor(rng, (1, 1, 4, 3), requires_grad=True)
    assert torch.autograd.gradgradcheck(
        lambda a: titorch.interpolate(a, size=(3, 5), mode="bicubic", align_corners=True), (x,)
    )
    grid = off_kink_grid(rng, x.shape, (2, 2), False).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, g: titorch.grid_sample(a, g, "bicubic", "reflection"), (x, grid)
    )


def test_only_the_needed_gradients_are_computed(arch, rng, monkeypatch):
    computed = []
    original = grid_ops.grid_sample_gradient

    def spy(wrt, *args):
        computed.append(wrt)
        return original(wrt, *args)

    monkeypatch.setattr(grid_ops, "grid_sample_gradient", spy)
    shape = GRID_INPUT_SHAPE[2]
    for needs_input, needs_grid in ((True, False), (False, True), (True, True)):
        x = tensor(rng, shape, torch.float32, requires_grad=needs_input)
        grid = off_kink_grid(rng, shape, (3, 2), False, torch.float32).requires_grad_(needs_grid)
        computed.clear()
        titorch.grid_sample(x, grid).sum().backward()
        assert computed == ["input"] * needs_input + ["grid"] * needs_grid
        assert (x.grad is not None) == needs_input and (grid.grad is not None) == needs_grid


# --- The ops' registrations ---------------------------------------------------------------------


def opcheck_cases(rng):
    """(op, args) pairs covering every op: size and scale-factor resizes, 1-3 spatial axes,
    both grid dims; the differentiable arguments require grad."""
    ops = torch.ops.tiinterp
    x1, x2, x3 = (tensor(rng, shape, torch.float32, True) for shape in UP_SHAPE.values())
    grid2 = off_kink_grid(rng, x2.shape, (3, 2), True, torch.float32).requires_grad_()
    grid3 = off_kink_grid(rng, x3.shape, (2, 2, 2), False, torch.float32).requires_grad_()
    g1 = tensor(rng, (1, 2, 9), torch.float32, True)
    g2 = tensor(rng, (*x2.shape[:2], 3, 2), torch.float32)
    return [
        (ops.interpolate, (x2, [7, 4], None, "bilinear", True, False)),
        (ops.interpolate, (x1, [9], [1.6], "lanczos5", None, False)),
        (ops.interpolate, (x3, [2, 3, 2], None, "lanczos3", None, True)),
        (ops.interpolate, (x3, [6, 8, 4], [1.6, 1.6, 1.6], "nearest-exact", None, False)),
        (ops.interpolate_backward, (g1, [1, 2, 6], [9], [1.6], "linear", False, False)),
        (ops.interpolate_backward, (g1, [1, 2, 13], [9], None, "area", None, False)),
        (ops.grid_sample, (x2, grid2, "bicubic", "reflection", True)),
        (ops.grid_sample, (x3, grid3, "bilinear", "border", False)),
        (ops.grid_sample_grad_input, (g2, x2.detach(), grid2.detach(), "bilinear", "zeros", False)),
        (ops.grid_sample_grad_grid, (g2, x2.detach(), grid2.detach(), "bicubic", "border", True)),
    ]


def test_opcheck(arch, rng):
    """Schema, fake (meta) vs real implementation, autograd registration, and tracing by
    AOTAutograd with dynamic shapes, for every op."""
    for op, args in opcheck_cases(rng):
        results = torch.library.opcheck(op, args)
        assert set(results.values()) == {"SUCCESS"}, (op, results)


# --- Equality with PyTorch ----------------------------------------------------------------------


def _pytorch_has_lanczos():
    """PyTorch's antialiased lanczos3 (F.interpolate(mode="lanczos")) is newer than 2.11,
    the oldest release the bridge takes: where it is missing, there is nothing to compare
    with."""
    try:
        F.interpolate(torch.ones(1, 1, 4, 4), size=(2, 2), mode="lanczos", antialias=True)
    except (ValueError, NotImplementedError, RuntimeError):
        return False
    return True


PYTORCH_CASES = [
    pytest.param(mode, dims, antialias, align, id=f"{mode}-{dims}d-aa{int(antialias)}-ac{align}")
    for mode, dims_list, antialias, aligns in (
        ("nearest", (1, 2, 3), False, (None,)),
        ("nearest-exact", (1, 2, 3), False, (None,)),
        ("area", (1, 2, 3), False, (None,)),
        ("linear", (1,), False, (False, True)),
        ("bilinear", (2,), False, (False, True)),
        ("trilinear", (3,), False, (False, True)),
        ("bicubic", (2,), False, (False, True)),
        ("bilinear", (2,), True, (False,)),
        ("bicubic", (2,), True, (False,)),
        *((("lanczos", (2,), True, (False,)),) if _pytorch_has_lanczos() else ()),
    )
    for dims in dims_list
    for align in aligns
]


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("direction", ["up", "down"])
@pytest.mark.parametrize(("mode", "dims", "antialias", "align_corners"), PYTORCH_CASES)
def test_interpolate_matches_pytorch(
    arch, rng, mode, dims, antialias, align_corners, direction, dtype
):
    """Values and gradients (through autograd) equal F.interpolate's: exactly for the
    nearest modes' values (index selection), to rounding otherwise."""
    shape, sizing = resize_call(dims, direction)
    shape = (2, 3, *shape[2:])
    x = tensor(rng, shape, DTYPES[dtype], requires_grad=True)
    options = {"mode": mode, "align_corners": align_corners, "antialias": antialias, **sizing}
    ours, theirs = titorch.interpolate(x, **options), F.interpolate(x, **options)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    g = tensor(rng, theirs.shape, DTYPES[dtype])
    (grad_ours,) = torch.autograd.grad(ours, x, g)
    (grad_theirs,) = torch.autograd.grad(theirs, x, g)
    bound = tolerance("torch_bridge", dtype)
    if mode in ("nearest", "nearest-exact"):
        assert torch.equal(ours, theirs)
    else:
        assert relative_error(ours.detach(), theirs.detach()) <= bound
    assert relative_error(grad_ours, grad_theirs) <= bound


# float64: every case (the kernels are those the gradchecks compiled); float32: one padding
# and align_corners per mode and dims (each combination compiles its own Taichi kernels,
# about 2 s; the core tests compare every one with PyTorch's stored results).
GRID_PYTORCH_CASES = [
    pytest.param(*case.values, "float64", marks=pytest.mark.requires_float64, id=f"{case.id}-f64")
    for case in GRID_CASES
] + [
    pytest.param(*case, "float32", id=f"{case[0]}d-{case[1]}-{case[2]}-ac{case[3]}-f32")
    for case in (
        (2, "nearest", "reflection", True),
        (2, "bilinear", "border", False),
        (2, "bicubic", "reflection", False),
        (3, "nearest", "border", False),
        (3, "bilinear", "reflection", True),
    )
]


@pytest.mark.parametrize(
    ("dims", "mode", "padding_mode", "align_corners", "dtype"), GRID_PYTORCH_CASES
)
def test_grid_sample_matches_pytorch(arch, rng, dims, mode, padding_mode, align_corners, dtype):
    """Values and both gradients equal F.grid_sample's (points off the kinks, where
    PyTorch's and tiinterp's one-sided choices could differ)."""
    shape = GRID_INPUT_SHAPE[dims]
    x = tensor(rng, shape, DTYPES[dtype], requires_grad=True)
    grid = off_kink_grid(rng, shape, GRID_POINTS[dims], align_corners, DTYPES[dtype])
    grid.requires_grad_()
    options = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    ours, theirs = titorch.grid_sample(x, grid, **options), F.grid_sample(x, grid, **options)
    g = tensor(rng, theirs.shape, DTYPES[dtype])
    grads_ours = torch.autograd.grad(ours, (x, grid), g)
    grads_theirs = torch.autograd.grad(theirs, (x, grid), g)
    bound = tolerance("torch_bridge_grid", dtype)
    for actual, expected in ((ours, theirs), *zip(grads_ours, grads_theirs, strict=True)):
        scale = max(1.0, expected.detach().abs().max().item())
        assert (actual - expected).abs().max().item() <= bound * scale


# --- torch.compile ------------------------------------------------------------------------------


class _Model(torch.nn.Module):
    """A convolution, an antialiased lanczos shrink (Resize), a bicubic enlargement and a
    grid_sample at trainable points."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 3, padding=1)
        self.shrink = titorch.Resize(scale_factor=0.5, mode="lanczos3", antialias=True)

    def forward(self, x, grid):
        y = self.shrink(self.conv(x))
        y = titorch.interpolate(y, size=(9, 7), mode="bicubic", align_corners=True)
        return titorch.grid_sample(y, grid, padding_mode="reflection").square().mean()


def _loss_and_gradients(model, x, grid):
    loss = model(x, grid)
    gradients = torch.autograd.grad(loss, [*model.parameters(), grid])
    return [loss.detach(), *gradients]


@pytest.mark.parametrize(
    ("backend", "shapes"),
    [
        # aot_eager: AOTAutograd traces the fakes and the backward ops, cheaply. A second
        # input shape makes TorchDynamo recompile with symbolic shapes, and that graph must
        # serve the third shape too (no shape is specialised by the ops' size arithmetic).
        ("aot_eager", ((2, 2, 16, 12), (3, 2, 20, 14), (2, 2, 26, 18))),
        # Inductor compiles C++ for the code around the ops: one shape (about 20 s of CPU
        # time with an empty Inductor cache, a few seconds with a warm one).
        pytest.param("inductor", ((2, 2, 16, 12),), marks=pytest.mark.slow),
    ],
    ids=["aot_eager", "inductor"],
)
def test_compile_fullgraph(arch, rng, backend, shapes):
    """No graph break (fullgraph=True), forward and backward through the fake
    implementations and the backward ops; the eager values and gradients."""
    torch._dynamo.reset()
    counters.clear()
    model = _Model()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    for shape in shapes:
        x = tensor(rng, shape, torch.float32)
        grid = off_kink_grid(rng, (shape[0], 2, 8, 6), (5, 4), False, torch.float32)
        grid.requires_grad_()
        eager = _loss_and_gradients(model, x, grid)
        traced = _loss_and_gradients(compiled, x, grid)
        for actual, expected in zip(traced, eager, strict=True):
            # The custom ops run as they do in eager mode; the rest (a convolution, a mean)
            # is the backend's and may round differently.
            torch.testing.assert_close(
                actual, expected, rtol=0, atol=tolerance("torch_compile", "float32")
            )
    assert counters["stats"]["unique_graphs"] == min(len(shapes), 2)


def test_compile_symbolic_scale_factor(arch, rng):
    """``dynamic=True`` makes a float argument a symbolic float: the output size from it,
    by tiinterp's own rule (``output_geometry``, no copy of it in the bridge), traces
    without a graph break, for the scale factor as for the input's symbolic shape."""
    torch._dynamo.reset()

    def resize(x, factor):
        return titorch.interpolate(x, scale_factor=factor, mode="bilinear")

    compiled = torch.compile(resize, fullgraph=True, dynamic=True, backend="eager")
    for shape, factor in (((1, 2, 5, 6), 1.6), ((1, 2, 9, 8), 0.5)):
        x = tensor(rng, shape, torch.float32)
        assert torch.equal(compiled(x, factor), resize(x, factor))


class _SkipUpsample(torch.nn.Module):
    """A U-Net decoder step: the coarse features resized to the skip connection's size."""

    def forward(self, coarse, skip):
        resized = titorch.interpolate(coarse, size=skip.shape[-2:], mode="bilinear")
        return torch.cat([resized, skip], dim=1)


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
def test_export_with_a_size_from_a_dynamic_dimension(arch, rng, strict):
    """``torch.export`` with the skip's height dynamic: ``size`` is a symbolic int there
    (non-strict mode, the default, refused it as "expected positive integers, got (s69,
    9)"); the exported program takes other heights and gives the eager values."""
    coarse = tensor(rng, (1, 2, 5, 9), torch.float32)
    height = torch.export.Dim("height", min=2, max=4096)
    program = torch.export.export(
        _SkipUpsample(),
        (coarse, tensor(rng, (1, 3, 10, 9), torch.float32)),
        dynamic_shapes={"coarse": {}, "skip": {2: height}},
        strict=strict,
    )
    for skip_height in (10, 13, 31):
        skip = tensor(rng, (1, 3, skip_height, 9), torch.float32)
        assert torch.equal(program.module()(coarse, skip), _SkipUpsample()(coarse, skip))


def test_compiled_argument_errors_are_tiinterp_errors():
    """Without fullgraph, TorchDynamo runs the failing call eagerly: tiinterp's error. (With
    fullgraph=True it reports an "Observed exception" that holds it, as for F.interpolate.)"""
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: titorch.interpolate(x, size=3, mode="bilinaer"))
    with pytest.raises(ValueError, match=r"mode: expected one of .* got 'bilinaer'"):
        compiled(torch.ones(1, 1, 4, 4))


# --- Determinism --------------------------------------------------------------------------------


@pytest.fixture
def deterministic():
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(previous)


def test_deterministic_gradients(arch, rng, deterministic):
    """Under torch.use_deterministic_algorithms(True) nothing refuses to run, and two runs
    give bit-identical gradients."""
    x = tensor(rng, (2, 3, 17, 13), torch.float32)
    grid = off_kink_grid(rng, (2, 3, 9, 6), (11, 7), False, torch.float32)

    def gradients():
        a, g = x.clone().requires_grad_(), grid.clone().requires_grad_()
        y = titorch.interpolate(a, scale_factor=0.55, mode="lanczos3", antialias=True)
        y = titorch.interpolate(y, size=(9, 6), mode="bilinear")
        loss = titorch.grid_sample(y, g, mode="bicubic", padding_mode="border").sin().sum()
        return torch.autograd.grad(loss, (a, g))

    first, second = gradients(), gradients()
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


# --- Arguments, inputs and devices --------------------------------------------------------------

X4 = torch.zeros(1, 1, 4, 4)
GRID = torch.zeros(1, 2, 2, 2)
INTERPOLATE_ERRORS = [
    ({"input": [[1.0]], "size": 2}, TypeError, "input: expected a torch.Tensor, got list"),
    ({"input": X4.int(), "size": 2}, TypeError, "expected dtype torch.float32 or torch.float64"),
    ({"input": X4.to_sparse(), "size": 2}, TypeError, "expected a dense .strided."),
    ({"input": torch.zeros(4, 4), "size": 2}, ValueError, r"expected a 3-D \(N, C, W\) or"),
    ({"input": torch.zeros(1, 1, 0, 4), "size": 2}, ValueError, "every spatial size >= 1"),
    ({"size": 2.5}, TypeError, "size: expected positive integers, got 2.5"),
    ({"size": (2, 3, 4)}, ValueError, "size: expected 2 values, one per spatial axis"),
    ({"size": 0}, ValueError, "size: expected positive integers, got 0"),
    ({}, ValueError, "expected exactly one of size and scale_factor, got neither"),
    ({"size": 2, "scale_factor": 2}, ValueError, "exactly one of size and scale_factor, got both"),
    ({"scale_factor": -1.0}, ValueError, "scale_factor: expected positive finite numbers"),
    ({"scale_factor": "2"}, TypeError, "scale_factor: expected a number or a sequence"),
    ({"scale_factor": 0.1}, ValueError, r"scale_factor: 0.1 makes an empty output axis"),
    ({"scale_factor": 1e300}, ValueError, "expected at most 2147483647 elements"),
    ({"size": 2, "recompute_scale_factor": True}, ValueError, "recompute_scale_factor: expected"),
    ({"size": 2, "mode": "bilinaer"}, ValueError, "mode: expected one of 'nearest'"),
    ({"size": 2, "mode": 3}, TypeError, "mode: expected a str"),
    ({"size": 2, "mode": "linear"}, ValueError, "for a 4-D input use 'bilinear'"),
    ({"size": 2, "align_corners": True}, ValueError, "align_corners: expected None with mode="),
    ({"size": 2, "mode": "bilinear", "align_corners": 1}, TypeError, "align_corners: expected"),
    ({"size": 2, "antialias": True}, ValueError, "antialias: expected False with mode='nearest'"),
    (
        {"size": 2, "mode": "bicubic", "antialias": True, "align_corners": True},
        ValueError,
        "antialias: expected False with align_corners=True",
    ),
    ({"size": 2, "mode": "lanczos"}, ValueError, "antialias: expected True with mode='lanczos'"),
]


@pytest.mark.parametrize(("arguments", "error", "message"), INTERPOLATE_ERRORS)
def test_interpolate_argument_errors(arguments, error, message):
    """Refused in the Python wrapper, before the op's schema sees the arguments (no Taichi
    needed)."""
    arguments = {"input": X4, **arguments}
    with pytest.raises(error, match=message):
        titorch.interpolate(**arguments)


GRID_ERRORS = [
    ({"input": X4.numpy()}, TypeError, "input: expected a torch.Tensor, got ndarray"),
    ({"input": torch.zeros(1, 1, 4)}, ValueError, r"expected a 4-D \(N, C, H, W\) or 5-D"),
    ({"grid": GRID.numpy()}, TypeError, "grid: expected a torch.Tensor, got ndarray"),
    ({"grid": GRID.double()}, TypeError, "grid: expected dtype torch.float32 like the input"),
    ({"grid": torch.zeros(1, 2, 2, 3)}, ValueError, r"grid: expected shape \(N, H_out, W_out, 2\)"),
    ({"grid": torch.zeros(2, 2, 2, 2)}, ValueError, "with N = 1 for input of shape"),
    ({"mode": "linear"}, ValueError, "mode: expected one of .'nearest', 'bilinear', 'bicubic'."),
    (
        {
            "input": torch.zeros(1, 1, 2, 2, 2),
            "grid": torch.zeros(1, 1, 1, 1, 3),
            "mode": "bicubic",
        },
        ValueError,
        "bicubic is 2-D only",
    ),
    ({"padding_mode": "wrap"}, ValueError, "padding_mode: expected one of"),
    ({"align_corners": "yes"}, TypeError, "align_corners: expected True, False or None"),
]


@pytest.mark.parametrize(("arguments", "error", "message"), GRID_ERRORS)
def test_grid_sample_argument_errors(arguments, error, message):
    arguments = {"input": X4, "grid": GRID, **arguments}
    with pytest.raises(error, match=message):
        titorch.grid_sample(**arguments)


def test_numpy_scalars_and_arrays_as_arguments(arch):
    """As tiinterp.interpolate takes them: turned into the op schema's ints, floats, bools."""
    x = torch.ones(1, 1, 4, 4)
    y = titorch.interpolate(
        x, np.array([3, 5]), None, "bilinear", np.bool_(True), None, np.bool_(0)
    )
    assert torch.equal(y, torch.ones(1, 1, 3, 5))
    y = titorch.interpolate(x, scale_factor=np.float32(1.5), mode="bicubic")
    assert y.shape == (1, 1, 6, 6)
    y = titorch.grid_sample(x, torch.zeros(1, 2, 2, 2), align_corners=np.bool_(1))
    assert torch.equal(y, torch.ones(1, 1, 2, 2))


def test_inputs_are_left_alone_and_results_are_new(arch, rng):
    """A requires_grad input is neither modified nor given a .grad by the forward pass
    (Taichi would allocate one for a tensor that requires grad), and no result shares
    memory with an input, even where the values are the input's (a same-size resize, an
    identity grid)."""
    x = tensor(rng, (1, 2, 4, 5), torch.float32, requires_grad=True)
    before, version = x.detach().clone(), x._version
    identity = F.affine_grid(torch.eye(2, 3)[None], (1, 2, 4, 5), align_corners=False)
    results = [
        titorch.interpolate(x, size=(4, 5)),
        titorch.interpolate(x, size=(4, 5), mode="bilinear"),
        titorch.grid_sample(x, identity.requires_grad_(), mode="nearest"),
    ]
    for y in results:
        assert torch.equal(y.detach(), before)
        assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert x.grad is None and x._version == version and torch.equal(x.detach(), before)
    sum(y.sum() for y in results).backward()
    assert torch.equal(x.detach(), before)


def test_contiguous_cpu_tensors_reach_the_kernels_without_copies(arch, rng, monkeypatch):
    """Every kernel launch of a resize and a grid_sample gets the caller's tensors (views of
    them: the same memory), not copies. On arch "cpu" the kernels read that memory; on
    "vulkan" Taichi itself copies to and from the device."""
    Kernel = taichi_submodule("lang.kernel_impl").Kernel

    pointers = []
    launch, prepared_launch = Kernel.__call__, _taichi._PreparedKernel.__call__

    def addresses(args):
        # A CPU call runs on NumPy views of the tensors (Note [Repeated calls]).
        for a in args:
            if isinstance(a, torch.Tensor):
                pointers.append(a.data_ptr())
            elif isinstance(a, np.ndarray):
                pointers.append(a.ctypes.data)

    def spy(self, *args, **kwargs):
        addresses(args)
        return launch(self, *args, **kwargs)

    def prepared_spy(self, args):
        addresses(args)
        return prepared_launch(self, args)

    # Kernels launch through Taichi's call or a prepared launch (Note [Prepared launches]).
    monkeypatch.setattr(Kernel, "__call__", spy)
    monkeypatch.setattr(_taichi._PreparedKernel, "__call__", prepared_spy)
    x = tensor(rng, (1, 2, 6, 7), torch.float32)
    y = titorch.interpolate(x, scale_factor=0.5, mode="bicubic", antialias=True)
    assert x.data_ptr() in pointers and y.data_ptr() in pointers
    pointers.clear()
    grid = off_kink_grid(rng, x.shape, (3, 2), False, torch.float32)
    z = titorch.grid_sample(x, grid)
    assert {x.data_ptr(), grid.data_ptr(), z.data_ptr()} <= set(pointers)


def _placed(device):
    """A stand-in for a tensor on ``device`` (no GPU build of torch here)."""
    return types.SimpleNamespace(device=torch.device(device))


def test_device_errors(arch, monkeypatch):
    """A CUDA tensor while tiinterp is not on arch "cuda", and a CPU tensor while it is,
    are refused (tiinterp never re-initialises Taichi by itself): the messages name the
    fix."""
    with pytest.raises(RuntimeError, match=r"on cuda:0; call tiinterp.init\('cuda'\) once"):
        titorch._require_device(_placed("cuda:0"), "input")
    with pytest.raises(RuntimeError, match="expected a CPU or CUDA tensor, got one on meta"):
        titorch._require_device(_placed("meta"), "grid")
    titorch._require_device(_placed("cpu"), "input")  # any arch but cuda
    monkeypatch.setattr(titorch, "start_taichi", lambda: "cuda")
    with pytest.raises(RuntimeError, match=r"got a CPU tensor; move it with .cuda\(\)"):
        titorch._require_device(_placed("cpu"), "input")
    with pytest.raises(RuntimeError, match=r"expected a tensor on cuda:0, .* got one on cuda:1"):
        titorch._require_device(_placed("cuda:1"), "input")
    titorch._require_device(_placed("cuda:0"), "input")


# --- Resize -------------------------------------------------------------------------------------


def test_resize_round_trip(arch, rng):
    """Nearest x2 then area /2 is the identity, values and gradient; the module repr shows
    its arguments and it holds no state."""
    up = titorch.Resize(scale_factor=2)
    down = titorch.Resize(size=(3, 5), mode="area")
    x = tensor(rng, (2, 3, 3, 5), torch.float32, requires_grad=True)
    y = down(up(x))
    assert torch.equal(y, x)
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad, torch.ones_like(x))
    assert repr(up) == "Resize(scale_factor=2, mode='nearest')"
    assert repr(down) == "Resize(size=(3, 5), mode='area')"
    assert not up.state_dict() and repr(copy.deepcopy(down)) == repr(down)
    lanczos = titorch.Resize(size=[4, 6], mode="lanczos", antialias=True)
    assert repr(lanczos) == "Resize(size=(4, 6), mode='lanczos', antialias=True)"
    expected = titorch.interpolate(x, size=(4, 6), mode="lanczos", antialias=True)
    assert torch.equal(lanczos(x), expected)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({}, ValueError, "expected exactly one of size and scale_factor, got neither"),
        ({"size": 3, "scale_factor": 2}, ValueError, "got both"),
        ({"size": 2.5}, TypeError, "size: expected positive integers"),
        ({"size": (3, -1)}, ValueError, "size: expected positive integers"),
        ({"scale_factor": 0}, ValueError, "scale_factor: expected positive finite numbers"),
        ({"scale_factor": [2, None]}, TypeError, "scale_factor: expected positive finite"),
        ({"size": 3, "mode": "bilinaer"}, ValueError, "mode: expected one of"),
        ({"size": 3, "align_corners": True}, ValueError, "align_corners: expected None"),
        ({"size": 3, "mode": "lanczos3", "antialias": 1}, TypeError, "antialias: expected"),
        ({"size": 3, "recompute_scale_factor": True}, ValueError, "recompute_scale_factor"),
    ],
)
def test_resize_argument_errors(arguments, error, message):
    with pytest.raises(error, match=message):
        titorch.Resize(**arguments)
