"""tiinterp.torch under PyTorch's own conventions for operators: gradcheck with forward-mode
AD and batched gradients, torch.autograd.forward_ad, the torch.func transforms (grad, jvp,
vjp, jacrev, jacfwd, hessian, vmap, nested), channels_last in and out, TorchScript (Resize,
as nn.Upsample, and modules calling interpolate and grid_sample), and the refusal of the
derivatives grid_sample does not have.

The references are PyTorch's F.interpolate and F.grid_sample under the same transforms (for
forward-mode AD of grid_sample, which PyTorch lacks, its reverse-mode Jacobian). Shapes,
modes and dtypes are those tests/public/test_torch_bridge.py compiles kernels for.
"""

import io

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import func

import tiinterp._rules.validate as validate
import tiinterp.torch as titorch
from tests.public.test_torch_bridge import (
    DOWN_SHAPE,
    DOWN_SIZE,
    GRID_INPUT_SHAPE,
    GRID_POINTS,
    UP_SHAPE,
    off_kink_grid,
    tensor,
)
from tests.tolerances import relative_error, tolerance

# torch 2.13 deprecates torch.jit.script (which nn.Upsample's users still call), and its
# Inductor imports define script methods.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning",
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
    "ignore:`torch.jit.save` is deprecated:DeprecationWarning",
    "ignore:`torch.jit.load` is deprecated:DeprecationWarning",
)

BOUND = tolerance("torch_bridge", "float64")
GRID_BOUND = tolerance("torch_bridge_grid", "float64")


@pytest.fixture(autouse=True)
def _torch_seed():
    """gradcheck and the batched checks draw their probes from torch's generator."""
    torch.manual_seed(20261130)


def assert_close(actual, expected, bound=BOUND):
    assert actual.shape == expected.shape
    assert relative_error(actual.detach(), expected.detach()) <= bound


# (spatial dims, input shape, interpolate's arguments): upsampling by a factor, downsampling
# to a size with antialiasing, 1-3 spatial axes.
RESIZE_CASES = [
    pytest.param(2, UP_SHAPE[2], {"scale_factor": 1.6, "mode": "bicubic"}, id="2d-bicubic-up"),
    pytest.param(
        2,
        DOWN_SHAPE[2],
        {"size": DOWN_SIZE[2], "mode": "bilinear", "antialias": True},
        id="2d-bilinear-aa-down",
    ),
    pytest.param(1, UP_SHAPE[1], {"scale_factor": 1.6, "mode": "linear"}, id="1d-linear-up"),
    pytest.param(
        3,
        DOWN_SHAPE[3],
        {"size": DOWN_SIZE[3], "mode": "trilinear", "align_corners": True},
        id="3d-trilinear-ac-down",
    ),
]


# --- gradcheck, PyTorch's own check of an operator's derivatives --------------------------------


@pytest.mark.requires_float64
@pytest.mark.parametrize(("dims", "shape", "options"), RESIZE_CASES)
def test_interpolate_gradcheck_forward_ad_and_batched(arch, rng, dims, shape, options):
    """As PyTorch's tests check F.interpolate: forward-mode AD, batched gradients and
    tangents (vmap over the backward and over the jvp), and both second-order checks
    (reverse over reverse, forward over reverse)."""
    x = tensor(rng, shape, requires_grad=True)

    def resize(a):
        return titorch.interpolate(a, **options)

    assert torch.autograd.gradcheck(
        resize,
        (x,),
        fast_mode=True,
        check_forward_ad=True,
        check_batched_grad=True,
        check_batched_forward_grad=True,
    )
    assert torch.autograd.gradgradcheck(
        resize, (x,), fast_mode=True, check_fwd_over_rev=True, check_batched_grad=True
    )


@pytest.mark.requires_float64
@pytest.mark.parametrize(
    ("dims", "mode", "padding_mode", "align_corners"),
    [(2, "bicubic", "reflection", False), (3, "bilinear", "border", True)],
)
def test_grid_sample_gradcheck_forward_ad_and_batched(
    arch, rng, dims, mode, padding_mode, align_corners
):
    shape = GRID_INPUT_SHAPE[dims]
    x = tensor(rng, shape, requires_grad=True)
    grid = off_kink_grid(rng, shape, GRID_POINTS[dims], align_corners).requires_grad_()

    def sample(a, g):
        return titorch.grid_sample(a, g, mode, padding_mode, align_corners)

    assert torch.autograd.gradcheck(
        sample,
        (x, grid),
        fast_mode=True,
        check_forward_ad=True,
        check_batched_grad=True,
        check_batched_forward_grad=True,
    )


# --- Forward-mode AD ----------------------------------------------------------------------------


@pytest.mark.requires_float64
def test_forward_ad_tangents(arch, rng):
    """torch.autograd.forward_ad: interpolate's tangent is F.interpolate's; grid_sample's,
    with respect to the input and the grid together, is its reverse-mode Jacobian (F's)
    applied to the tangents."""
    x, t = tensor(rng, UP_SHAPE[2]), tensor(rng, UP_SHAPE[2])
    options = {"scale_factor": 1.6, "mode": "bicubic"}
    with fwAD.dual_level():
        ours = fwAD.unpack_dual(titorch.interpolate(fwAD.make_dual(x, t), **options)).tangent
        theirs = fwAD.unpack_dual(F.interpolate(fwAD.make_dual(x, t), **options)).tangent
    assert ours is not None
    assert_close(ours, theirs)

    shape = GRID_INPUT_SHAPE[2]
    x, t = tensor(rng, shape), tensor(rng, shape)
    grid = off_kink_grid(rng, shape, GRID_POINTS[2], False)
    grid_t = tensor(rng, grid.shape)
    options = {"mode": "bicubic", "padding_mode": "zeros", "align_corners": False}
    with fwAD.dual_level():
        y = titorch.grid_sample(fwAD.make_dual(x, t), fwAD.make_dual(grid, grid_t), **options)
        ours = fwAD.unpack_dual(y).tangent
    jac_x, jac_grid = torch.autograd.functional.jacobian(
        lambda a, g: F.grid_sample(a, g, **options), (x, grid)
    )
    expected = torch.tensordot(jac_x, t, dims=4) + torch.tensordot(jac_grid, grid_t, dims=4)
    assert_close(ours, expected, GRID_BOUND)


# --- torch.func ---------------------------------------------------------------------------------


def _square_sum(f):
    return lambda *args: f(*args).square().sum()


@pytest.mark.requires_float64
def test_torch_func_on_interpolate(arch, rng):
    """Each transform of titorch.interpolate equals the same transform of F.interpolate,
    nested ones included (second derivatives through the op)."""
    options = {"scale_factor": 1.6, "mode": "bicubic"}

    def ours(a):
        return titorch.interpolate(a, **options)

    def theirs(a):
        return F.interpolate(a, **options)

    x, t = tensor(rng, UP_SHAPE[2]), tensor(rng, UP_SHAPE[2])
    small = tensor(rng, (1, 1, 3, 4))
    batch = tensor(rng, (3, *UP_SHAPE[2]))
    for transform in (
        lambda f: func.jvp(f, (x,), (t,))[1],
        lambda f: func.vjp(f, x)[1](f(x))[0],
        lambda f: func.grad(_square_sum(f))(x),
        lambda f: func.jacrev(f)(small),
        lambda f: func.jacfwd(f)(small),
        lambda f: func.hessian(_square_sum(f))(small),
        lambda f: func.jacrev(func.grad(_square_sum(f)))(small),
        lambda f: func.vmap(f)(batch),
        lambda f: func.vmap(f, in_dims=2, out_dims=1)(batch.movedim(0, 2)),
        lambda f: func.vmap(func.grad(_square_sum(f)))(batch),
        lambda f: func.vmap(lambda a: func.jvp(f, (a,), (t,))[1])(batch),
    ):
        assert_close(transform(ours), transform(theirs))


@pytest.mark.requires_float64
def test_torch_func_on_grid_sample(arch, rng):
    """grad, jacrev and vmap (input batched, grid batched, both) equal F.grid_sample's;
    jacfwd, which PyTorch's grid_sample lacks, equals F's jacrev."""
    shape = GRID_INPUT_SHAPE[2]
    x = tensor(rng, shape)
    grid = off_kink_grid(rng, shape, GRID_POINTS[2], True)
    options = {"mode": "bilinear", "padding_mode": "border", "align_corners": True}

    def ours(a, g):
        return titorch.grid_sample(a, g, **options)

    def theirs(a, g):
        return F.grid_sample(a, g, **options)

    for argnums in (0, 1):
        # Both Jacobians at once: torch 2.11's F.grid_sample has no jacrev with respect to
        # the grid alone (its batched backward gets an undefined gradient for the input).
        expected = func.jacrev(theirs, (0, 1))(x, grid)[argnums]
        assert_close(func.jacrev(ours, argnums)(x, grid), expected, GRID_BOUND)
        assert_close(func.jacfwd(ours, argnums)(x, grid), expected, GRID_BOUND)
        expected = func.grad(_square_sum(theirs), argnums)(x, grid)
        assert_close(func.grad(_square_sum(ours), argnums)(x, grid), expected, GRID_BOUND)
    xs = torch.stack([x, 2 * x, -x])
    grids = torch.stack([grid, grid.flip(1), -grid])
    for in_dims, args in (((0, None), (xs, grid)), ((None, 0), (x, grids)), (0, (xs, grids))):
        expected = func.vmap(theirs, in_dims)(*args)
        assert_close(func.vmap(ours, in_dims)(*args), expected, GRID_BOUND)


def test_vmap_is_one_call_per_batch(arch, rng, monkeypatch):
    """vmap folds the batch into one tiinterp call (PyTorch's fallback would make one per
    item); a batch past Taichi's 2^31 - 1 elements per array is split, into as few calls as
    fit."""
    calls = []
    resize, sample = titorch._tiinterp_interpolate, titorch._tiinterp_grid_sample

    def resize_spy(x, **options):
        calls.append(tuple(x.shape))
        return resize(x, **options)

    def sample_spy(x, grid, *options):
        calls.append(tuple(x.shape))
        return sample(x, grid, *options)

    monkeypatch.setattr(titorch, "_tiinterp_interpolate", resize_spy)
    monkeypatch.setattr(titorch, "_tiinterp_grid_sample", sample_spy)
    batch = tensor(rng, (5, 2, 3, 8, 6), torch.float32)
    expected = torch.stack([titorch.interpolate(b, size=(4, 3), mode="bilinear") for b in batch])
    calls.clear()
    vmapped = func.vmap(lambda a: titorch.interpolate(a, size=(4, 3), mode="bilinear"))(batch)
    assert calls == [(10, 3, 8, 6)] and torch.equal(vmapped, expected)

    grid = off_kink_grid(rng, (2, 3, 8, 6), (4, 3), False, torch.float32)
    calls.clear()
    func.vmap(lambda a: titorch.grid_sample(a, grid, padding_mode="border"), in_dims=1)(
        batch.movedim(0, 1)
    )
    assert calls == [(2, 15, 8, 6)]  # the batch in the channels, one grid for all

    # Room for two batch items per array (each has 2 * 3 * 8 * 6 input elements).
    monkeypatch.setattr(validate, "MAX_ELEMENTS", 2 * 2 * 3 * 8 * 6)
    calls.clear()
    vmapped = func.vmap(lambda a: titorch.interpolate(a, size=(4, 3), mode="bilinear"))(batch)
    assert calls == [(4, 3, 8, 6), (4, 3, 8, 6), (2, 3, 8, 6)] and torch.equal(vmapped, expected)


# --- What grid_sample has no derivative for -----------------------------------------------------


@pytest.mark.requires_float64
def test_grid_sample_second_derivatives(arch, rng):
    """With a fixed grid grid_sample is linear in its input: double backward and forward
    over reverse work. A derivative of its gradients with respect to the grid is a
    RuntimeError that says so, never a silent zero."""
    shape = GRID_INPUT_SHAPE[2]
    x = tensor(rng, shape, requires_grad=True)
    grid = off_kink_grid(rng, shape, GRID_POINTS[2], False)

    def sample(a, g):
        return titorch.grid_sample(a, g, "bicubic", "reflection")

    assert torch.autograd.gradgradcheck(
        lambda a: sample(a, grid), (x,), fast_mode=True, check_fwd_over_rev=True
    )
    grid.requires_grad_()
    (grad_grid,) = torch.autograd.grad(sample(x, grid).square().sum(), grid, create_graph=True)
    with pytest.raises(RuntimeError, match="first derivatives only: expected no derivative"):
        grad_grid.sum().backward()
    with pytest.raises(RuntimeError, match="with respect to the grid"):
        func.hessian(lambda g: sample(x.detach(), g).square().sum())(grid.detach())


# --- Memory formats -----------------------------------------------------------------------------

FORMATS = [
    pytest.param(torch.channels_last, (2, 3, 5, 6), "bilinear", id="channels_last"),
    pytest.param(torch.channels_last_3d, (1, 2, 4, 5, 3), "trilinear", id="channels_last_3d"),
    pytest.param(torch.contiguous_format, (2, 3, 5, 6), "bilinear", id="contiguous"),
]


@pytest.mark.parametrize(("memory_format", "shape", "mode"), FORMATS)
def test_memory_format_is_kept(arch, rng, memory_format, shape, mode):
    """As F.interpolate: the output has the input's memory format (the same strides as
    F.interpolate's), and so does the gradient with respect to the input, whatever the
    format of the output's gradient; the values are those of a contiguous input."""
    x = tensor(rng, shape, torch.float32).contiguous(memory_format=memory_format)
    x.requires_grad_()
    size = (7, 4) if len(shape) == 4 else (3, 6, 4)
    ours = titorch.interpolate(x, size=size, mode=mode)
    theirs = F.interpolate(x, size=size, mode=mode)
    assert ours.stride() == theirs.stride()
    assert torch.equal(ours, titorch.interpolate(x.contiguous(), size=size, mode=mode))
    for g in (torch.ones_like(ours), tensor(rng, ours.shape, torch.float32)):
        (grad,) = torch.autograd.grad(ours, x, g, retain_graph=True)
        assert grad.is_contiguous(memory_format=memory_format)
    if len(shape) == 4:  # grid_sample keeps the format too (F.grid_sample does not)
        grid = off_kink_grid(rng, shape, (4, 3), False, torch.float32).requires_grad_()
        y = titorch.grid_sample(x, grid, padding_mode="border")
        assert y.is_contiguous(memory_format=memory_format)
        grad_x, grad_grid = torch.autograd.grad(y, (x, grid), tensor(rng, y.shape, torch.float32))
        assert grad_x.is_contiguous(memory_format=memory_format) and grad_grid.is_contiguous()
        assert torch.equal(y, titorch.grid_sample(x.contiguous(), grid, padding_mode="border"))


def test_opcheck_channels_last(arch, rng):
    """The fake implementations give the real ones' strides for channels_last tensors
    (what torch.compile relies on)."""
    ops = torch.ops.tiinterp

    def channels_last(shape, requires_grad=False):
        values = tensor(rng, shape, torch.float32).contiguous(memory_format=torch.channels_last)
        return values.requires_grad_(requires_grad)

    x, g, g_points = (
        channels_last((2, 3, 5, 6), True),
        channels_last((2, 3, 7, 4), True),
        channels_last((2, 3, 3, 2)),
    )
    grid = off_kink_grid(rng, x.shape, (3, 2), False, torch.float32).requires_grad_()
    for op, args in (
        (ops.interpolate, (x, [7, 4], None, "bilinear", None, False)),
        (ops.interpolate_backward, (g, [2, 3, 5, 6], [7, 4], None, "bilinear", None, False)),
        (ops.grid_sample, (x, grid, "bilinear", "border", False)),
        (
            ops.grid_sample_grad_input,
            (g_points, x.detach(), grid.detach(), "bilinear", "zeros", False),
        ),
    ):
        results = torch.library.opcheck(op, args)
        assert set(results.values()) == {"SUCCESS"}, (op, results)


# --- TorchScript --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"size": (4, 3), "mode": "bicubic", "antialias": True},
        {"size": 4, "mode": "bilinear"},
        {"scale_factor": 1.6, "mode": "bicubic"},
        {"scale_factor": (1.6, 1.6), "mode": "bilinear", "recompute_scale_factor": True},
    ],
    ids=["size", "one-size", "factor", "factors-recompute"],
)
def test_resize_scripts(arch, rng, arguments):
    """torch.jit.script(Resize(...)) works, as for nn.Upsample: the same values and
    gradients as the module in Python."""
    module = titorch.Resize(**arguments)
    scripted = torch.jit.script(module)
    shape = DOWN_SHAPE[2] if "size" in arguments else UP_SHAPE[2]
    x = tensor(rng, (2, 3, *shape[2:]), torch.float32, requires_grad=True)
    expected = module(x)
    actual = scripted(x)
    assert torch.equal(actual, expected)
    g = tensor(rng, expected.shape, torch.float32)
    assert torch.equal(*(torch.autograd.grad(y, x, g)[0] for y in (actual, expected)))


def test_scripted_resize_errors(arch, rng):
    """A scripted Resize refuses what the module refuses, with tiinterp's message (as a
    RuntimeError: TorchScript's way), and works inside a scripted model."""
    x = tensor(rng, (2, 3, 8, 6), torch.float32)
    for arguments, inputs, message in (
        ({"size": (5, 4, 3)}, x, "size: expected 2 values, one per spatial axis"),
        ({"scale_factor": (0.5, 0.5, 0.5)}, x, "scale_factor: expected 2 values"),
        ({"scale_factor": 0.01, "recompute_scale_factor": True}, x, "makes an empty output"),
        ({"scale_factor": 1e300}, x, "expected at most 2147483647 elements"),
        ({"scale_factor": 1e30, "recompute_scale_factor": True}, x, "expected at most 214"),
        ({"size": 4, "mode": "bicubic"}, x[:, :, 0], "mode='bicubic': expected a 4-D"),
        ({"size": 4}, x.int(), "expected dtype (torch.)?float32 or (torch.)?float64"),
    ):
        with pytest.raises((ValueError, TypeError), match=message):
            titorch.Resize(**arguments)(inputs)
        with pytest.raises(RuntimeError, match=message):
            torch.jit.script(titorch.Resize(**arguments))(inputs)

    model = torch.nn.Sequential(torch.nn.Identity(), titorch.Resize(size=3, mode="bilinear"))
    assert torch.equal(torch.jit.script(model)(x), model(x))


class _ScriptedDropIns(torch.nn.Module):
    """Every argument form F.interpolate and F.grid_sample take under TorchScript, through
    tiinterp.torch's functions: size as an int, a list and a tuple; scale_factor as a float
    and a list, with and without recompute_scale_factor; align_corners None, False, True."""

    def forward(self, x, small, grid):
        h, w = x.shape[-2:]
        return [
            titorch.interpolate(x, 4, mode="bilinear"),
            titorch.interpolate(x, [7, 4], None, "bicubic", None, None, True),
            titorch.interpolate(small, size=(h, w), mode="bicubic", align_corners=False),
            titorch.interpolate(small, scale_factor=1.6, mode="bicubic"),
            titorch.interpolate(small, scale_factor=[1.6, 1.6], mode="bicubic"),
            titorch.interpolate(
                small, scale_factor=[1.6, 1.6], mode="bilinear", recompute_scale_factor=True
            ),
            titorch.interpolate(x, size=(4, 3), mode="bilinear", antialias=True),
            titorch.grid_sample(small, grid),
            titorch.grid_sample(small, grid, "bilinear", "border", False),
            titorch.grid_sample(
                small, grid, mode="bicubic", padding_mode="reflection", align_corners=True
            ),
        ]


def test_drop_ins_script(arch, rng):
    """torch.jit.script of a module calling tiinterp.torch.interpolate and grid_sample in
    every argument form compiles, runs, survives torch.jit.save / load, and gives the same
    values and gradients (input and grid) as the module in Python."""
    x = tensor(rng, DOWN_SHAPE[2], torch.float32, requires_grad=True)
    small = tensor(rng, GRID_INPUT_SHAPE[2], torch.float32, requires_grad=True)
    grid = off_kink_grid(rng, small.shape, GRID_POINTS[2], False, torch.float32)
    grid.requires_grad_()
    module = _ScriptedDropIns()
    saved = io.BytesIO()
    torch.jit.save(torch.jit.script(module), saved)
    saved.seek(0)
    scripted = torch.jit.load(saved)
    expected, actual = module(x, small, grid), scripted(x, small, grid)
    assert len(actual) == len(expected) == 10
    for a, e in zip(actual, expected, strict=True):
        assert torch.equal(a, e)
    probes = [tensor(rng, e.shape, torch.float32) for e in expected]
    gradients = [
        torch.autograd.grad(results, (x, small, grid), probes) for results in (actual, expected)
    ]
    for a, e in zip(*gradients, strict=True):
        assert torch.equal(a, e)


def test_scripted_drop_ins_errors(arch, rng):
    """Under TorchScript the drop-ins refuse what they refuse in Python, with the message of
    tiinterp's check: a RuntimeError from the op, a torch.jit.Error (as from F.interpolate's
    own checks under TorchScript) from the scripted code."""
    x = tensor(rng, DOWN_SHAPE[2], torch.float32)
    grid = torch.zeros(2, 3, 4, 2)

    class BothSizes(torch.nn.Module):
        def forward(self, x):
            return titorch.interpolate(x, size=[2, 3], scale_factor=2.0)

    class BadMode(torch.nn.Module):
        def forward(self, x):
            return titorch.interpolate(x, size=[2, 3], mode="bicubicc")

    class BadGrid(torch.nn.Module):
        def forward(self, x, grid):
            return titorch.grid_sample(x, grid, padding_mode="wrap")

    for module, inputs, message in (
        (BothSizes(), (x,), "tiinterp.torch.interpolate: expected exactly one of size"),
        (BadMode(), (x,), "mode: expected one of"),
        (BadGrid(), (x, grid), "grid: expected shape"),
        (BadGrid(), (x, grid[:1]), "padding_mode: expected one of"),
    ):
        with pytest.raises((RuntimeError, torch.jit.Error), match=message):
            torch.jit.script(module)(*inputs)


# --- Sizes past any limit -----------------------------------------------------------------------


def test_absurd_sizes_are_value_errors():
    """Sizes and factors far past 2^31 - 1 elements (past float64's range too) are the
    documented ValueError, from the functions and from Resize, never an OverflowError."""
    x = torch.zeros(1, 1, 4, 4)
    for arguments in ({"size": (10, 10**400)}, {"size": 10**400}, {"scale_factor": 1e300}):
        with pytest.raises(ValueError, match="expected at most 2147483647 elements"):
            titorch.interpolate(x, **arguments)
    with pytest.raises(ValueError, match="scale_factor: expected positive finite numbers"):
        titorch.interpolate(x, scale_factor=(2, 10**400))
    with pytest.raises(ValueError, match="size: expected at most 2147483647 elements"):
        titorch.Resize(size=(10, 10**400))
    with pytest.raises(ValueError, match="output: expected at most 2147483647 elements"):
        titorch.Resize(scale_factor=1e300)(x)  # the input's size decides
