"""Differentiable 2-D smoke: optimise the initial velocity so the smoke draws a target shape.

    python demos/smoke.py                        # default target: the letters "TI"
    python demos/smoke.py --shape ring           # another built-in target
    python demos/smoke.py --target logo.png      # any picture (grayscale, resized to the grid)
    python demos/smoke.py --arch vulkan --grid 96 --steps 48 --iterations 300
    python demos/smoke.py --boundary periodic    # smoke leaving one side enters the other

A blob of smoke sits in the middle of a square box. Each time step follows Stam's "Stable
Fluids" (SIGGRAPH 1999): the velocity is advected by itself (semi-Lagrangian: trace back
along the velocity and interpolate there, with ``tiinterp.funcs.sample_linear``), made
divergence-free by a pressure projection (Jacobi iterations on the pressure Poisson
equation), then carries the density along, again by semi-Lagrangian advection.

``--boundary`` is what lies outside the box, as the samplers' ``boundary`` option:
``clamp`` (the default) repeats the edge cells (closed walls), ``zero`` is still, clean air,
``periodic`` wraps the domain around (a torus): the advection reads across the edges and
the pressure projection's finite differences wrap too. The walls of ``clamp`` and ``zero``
have a zero-gradient pressure.

Every step is differentiable, so ``ti.ad.Tape`` gives the gradient of "how far the last
frame is from the target" (mean squared error) with respect to the initial velocity field,
through the whole rollout. Adam (Kingma & Ba 2015) follows that gradient: the smoke learns
to swirl into the target, as in DiffTaichi's smoke example (Hu et al., ICLR 2020).

Writes to ``--out`` (default ``demos/out/smoke``): ``target.png``, ``initial.png`` (the last
frame with the initial, unoptimised velocity), ``final.png`` (the last frame after
optimisation), ``rollout.gif`` (every frame of the optimised rollout) and ``loss.png`` (the
loss per iteration). Prints the initial and final loss and their ratio.
"""

import argparse
import math
import pathlib
import sys
import time

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from PIL import Image

import tiinterp

ti = tiinterp.taichi_module()  # taichi or taichi_forge, whichever tiinterp runs on

OUT_DIR = pathlib.Path(__file__).resolve().parent / "out" / "smoke"
IMAGE_WIDTH = 256  # images and GIF frames are magnified to at least this many pixels


# --- Targets and initial density ------------------------------------------------------------


def _rasterise(boxes, n, supersample=4):
    """Union of axis-aligned boxes ``(top, left, bottom, right)`` given in fractions of the
    grid, anti-aliased by averaging ``supersample`` x ``supersample`` points per cell."""
    fine = n * supersample
    centres = (np.arange(fine) + 0.5) / fine
    rows, cols = centres[:, None], centres[None, :]
    mask = np.zeros((fine, fine), dtype=bool)
    for top, left, bottom, right in boxes:
        mask |= (rows >= top) & (rows < bottom) & (cols >= left) & (cols < right)
    return mask.reshape(n, supersample, n, supersample).mean(axis=(1, 3))


def letters_ti(n):
    """The letters "T" and "I" (with serifs), white on black."""
    stroke = 0.12
    top, bottom = 0.24, 0.76
    t_left, t_right = 0.16, 0.54
    t_stem = (t_left + t_right - stroke) / 2
    i_left, i_right = 0.62, 0.84
    i_stem = (i_left + i_right - stroke) / 2
    return _rasterise(
        [
            (top, t_left, top + stroke, t_right),  # T: bar
            (top, t_stem, bottom, t_stem + stroke),  # T: stem
            (top, i_left, top + stroke, i_right),  # I: top serif
            (top, i_stem, bottom, i_stem + stroke),  # I: stem
            (bottom - stroke, i_left, bottom, i_right),  # I: bottom serif
        ],
        n,
    )


def ring(n, radius=0.3, width=0.1):
    """An anti-aliased ring around the centre of the box."""
    centres = (np.arange(n) + 0.5) / n - 0.5
    r = np.hypot(centres[:, None], centres[None, :])
    return np.clip((width / 2 - np.abs(r - radius)) * n + 0.5, 0.0, 1.0)


SHAPES = {"ti": letters_ti, "ring": ring}


def load_target(path, n, invert=False):
    """A picture as a grayscale ``n`` x ``n`` array in [0, 1] (bright = smoke)."""
    image = Image.open(path).convert("L").resize((n, n), Image.LANCZOS)
    target = np.asarray(image, dtype=np.float32) / 255.0
    return 1.0 - target if invert else target


def initial_blob(n, mass):
    """A disc of density 1 in the middle holding ``mass`` (the target's total density, so
    the incompressible flow can rearrange it into the target), with a one-cell soft edge."""
    radius = min(math.sqrt(mass / math.pi), 0.4 * n)
    centres = np.arange(n) + 0.5 - n / 2
    r = np.hypot(centres[:, None], centres[None, :])
    return np.clip(radius - r + 0.5, 0.0, 1.0)


# --- The simulation ----------------------------------------------------------------------------


BOUNDARIES = ("clamp", "zero", "periodic")


@ti.func
def _neighbour(i, n, periodic: ti.template()):
    """Grid index ``i`` (at most one cell outside ``[0, n - 1]``) wrapped around on a
    periodic domain, else clamped into the grid: zero-gradient walls."""
    result = ti.min(ti.max(i, 0), n - 1)
    if ti.static(periodic):
        result = (i + n) % n
    return result


@ti.func
def _at(field: ti.template(), t, k, i, j, periodic: ti.template()):
    """``field[t, k, i, j]`` with ``(i, j)`` brought into the grid by ``_neighbour``."""
    n = field.shape[2]
    return field[t, k, _neighbour(i, n, periodic), _neighbour(j, n, periodic)]


@ti.data_oriented
class SmokeSim:
    """Stable Fluids on an ``n`` x ``n`` grid for ``steps`` steps, every state kept.

    Velocities are in cells per step (the time step is 1). ``control`` is the initial
    velocity: the parameter being optimised. ``boundary``: one of ``BOUNDARIES``.
    """

    def __init__(self, n, steps, jacobi_iterations, boundary="clamp"):
        self.n, self.steps, self.jacobi_iterations = n, steps, jacobi_iterations
        self.boundary = boundary
        self.periodic = boundary == "periodic"
        self.control = ti.Vector.field(2, float, shape=(n, n), needs_grad=True)
        self.density = ti.field(float, shape=(steps + 1, n, n), needs_grad=True)
        self.velocity = ti.Vector.field(2, float, shape=(steps + 1, n, n), needs_grad=True)
        # Per step: the self-advected velocity, its divergence and every Jacobi iterate of
        # the pressure (iterate 0 is zero), each written once, as ti.ad requires.
        self.advected = ti.Vector.field(2, float, shape=(steps, n, n), needs_grad=True)
        self.divergence = ti.field(float, shape=(steps, n, n), needs_grad=True)
        self.pressure = ti.field(float, shape=(steps, jacobi_iterations + 1, n, n), needs_grad=True)
        self.target = ti.field(float, shape=(n, n))
        self.loss = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def load_control(self):
        for i, j in self.control:
            self.velocity[0, i, j] = self.control[i, j]

    @ti.kernel
    def advect_velocity(self, t: int):
        for i, j in ti.ndrange(self.n, self.n):
            back = ti.Vector([i, j]) - self.velocity[t, i, j]
            self.advected[t, i, j] = tiinterp.funcs.sample_linear(
                tiinterp.funcs.frame(self.velocity, t), back, self.boundary
            )

    @ti.kernel
    def compute_divergence(self, t: int):
        for i, j in ti.ndrange(self.n, self.n):
            n, periodic = ti.static(self.n, self.periodic)
            du = (
                self.advected[t, _neighbour(i + 1, n, periodic), j][0]
                - self.advected[t, _neighbour(i - 1, n, periodic), j][0]
            )
            dv = (
                self.advected[t, i, _neighbour(j + 1, n, periodic)][1]
                - self.advected[t, i, _neighbour(j - 1, n, periodic)][1]
            )
            self.divergence[t, i, j] = 0.5 * (du + dv)

    @ti.kernel
    def jacobi(self, t: int, k: int):
        # One Jacobi sweep of  laplacian(p) = div(u)  with zero-gradient walls (or none on a
        # periodic domain).
        for i, j in ti.ndrange(self.n, self.n):
            p, periodic = ti.static(self.pressure, self.periodic)
            neighbours = (
                _at(p, t, k, i - 1, j, periodic)
                + _at(p, t, k, i + 1, j, periodic)
                + _at(p, t, k, i, j - 1, periodic)
                + _at(p, t, k, i, j + 1, periodic)
            )
            p[t, k + 1, i, j] = 0.25 * (neighbours - self.divergence[t, i, j])

    @ti.kernel
    def subtract_pressure_gradient(self, t: int):
        for i, j in ti.ndrange(self.n, self.n):
            p, k, periodic = ti.static(self.pressure, self.jacobi_iterations, self.periodic)
            gradient = 0.5 * ti.Vector(
                [
                    _at(p, t, k, i + 1, j, periodic) - _at(p, t, k, i - 1, j, periodic),
                    _at(p, t, k, i, j + 1, periodic) - _at(p, t, k, i, j - 1, periodic),
                ]
            )
            self.velocity[t + 1, i, j] = self.advected[t, i, j] - gradient

    @ti.kernel
    def advect_density(self, t: int):
        for i, j in ti.ndrange(self.n, self.n):
            back = ti.Vector([i, j]) - self.velocity[t + 1, i, j]
            self.density[t + 1, i, j] = tiinterp.funcs.sample_linear(
                tiinterp.funcs.frame(self.density, t), back, self.boundary
            )

    @ti.kernel
    def compute_loss(self):
        for i, j in self.target:
            difference = self.density[self.steps, i, j] - self.target[i, j]
            self.loss[None] += difference * difference / (self.n * self.n)

    def rollout(self):
        """Simulate every step from ``control`` and set ``loss``; run it under a Tape."""
        self.load_control()
        for t in range(self.steps):
            self.advect_velocity(t)
            self.compute_divergence(t)
            for k in range(self.jacobi_iterations):
                self.jacobi(t, k)
            self.subtract_pressure_gradient(t)
            self.advect_density(t)
        self.compute_loss()

    def loss_and_gradient(self):
        with ti.ad.Tape(loss=self.loss):
            self.rollout()
        return float(self.loss[None]), self.control.grad.to_numpy()


class Adam:
    """Adam (Kingma & Ba 2015): per-parameter step sizes, robust to the gradient's scale,
    which varies by orders of magnitude over the optimisation."""

    def __init__(self, beta1=0.9, beta2=0.99, eps=1e-12):
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.m = self.v = None
        self.t = 0

    def step(self, x, grad, lr):
        if self.m is None:
            self.m, self.v = np.zeros_like(grad), np.zeros_like(grad)
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        m_hat = self.m / (1 - self.beta1**self.t)
        v_hat = self.v / (1 - self.beta2**self.t)
        return x - lr * m_hat / (np.sqrt(v_hat) + self.eps)


# --- Output ------------------------------------------------------------------------------------


class ProgressBar:
    """``[#######-------]  it 120/200  loss 1.234e-03  12.3 s`` redrawn in place on stderr."""

    def __init__(self, total, width=30, stream=None):
        self.total, self.width = total, width
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()

    def update(self, iteration, loss):
        filled = self.width * iteration // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self.start
        self.stream.write(
            f"\r[{bar}]  it {iteration:>{len(str(self.total))}}/{self.total}  "
            f"loss {loss:.3e}  {elapsed:5.1f} s"
        )
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


def colourise(density, scale, vmax=1.0):
    """Density (n x n) as an RGB image, magnified ``scale`` times (bicubic, so the smoke
    looks smooth rather than blocky) and coloured with matplotlib's "inferno"."""
    n = density.shape[0]
    big = Image.fromarray(np.asarray(density, dtype=np.float32))  # mode "F": 32-bit float
    big = np.asarray(big.resize((n * scale, n * scale), Image.BICUBIC))
    rgb = colormaps["inferno"](np.clip(big / vmax, 0.0, 1.0))[..., :3]
    return Image.fromarray((rgb * 255).round().astype(np.uint8))


def plot_loss(losses, path):
    # A bare Figure (no pyplot) draws off-screen, whatever matplotlib backend is configured.
    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.subplots()
    ax.semilogy(np.arange(len(losses)), losses, color="#d1495b", linewidth=2)
    ax.set_xlabel("iteration (gradient step)")
    ax.set_ylabel("loss: mean squared error to target")
    ax.set_title("Smoke optimisation: loss of the last frame")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


# --- Command line -------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--arch", default="cpu", help="Taichi arch: cpu, cuda, vulkan, metal, gpu, auto"
    )
    parser.add_argument("--target", type=pathlib.Path, help="picture to draw (default: --shape)")
    parser.add_argument("--invert", action="store_true", help="use the dark parts of --target")
    parser.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        default="ti",
        help="built-in target when no --target is given",
    )
    parser.add_argument("--grid", type=int, default=80, help="grid size (cells per side)")
    parser.add_argument("--steps", type=int, default=40, help="simulation steps per rollout")
    parser.add_argument(
        "--jacobi",
        type=int,
        default=16,
        help="Jacobi iterations of the pressure projection per step",
    )
    parser.add_argument("--iterations", type=int, default=200, help="optimisation iterations")
    parser.add_argument(
        "--lr",
        type=float,
        default=0.2,
        help="Adam learning rate, in cells per step of initial velocity",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the tiny random initial velocity (breaks symmetries)",
    )
    parser.add_argument(
        "--boundary",
        choices=BOUNDARIES,
        default="clamp",
        help="outside the box: clamp (closed walls, the edge cells repeated), zero (still, "
        "clean air) or periodic (the domain wraps around)",
    )
    parser.add_argument("--out", type=pathlib.Path, default=OUT_DIR, help="output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    args = parser.parse_args(argv)
    for name in ("grid", "steps", "iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.jacobi < 0:
        parser.error("--jacobi must be at least 0")
    return args


def main(argv=None):
    """Run the optimisation; returns the losses, the time taken and the files written."""
    args = parse_args(argv)
    start = time.perf_counter()
    tiinterp.init(args.arch)
    n = args.grid

    if args.target is not None:
        target = load_target(args.target, n, args.invert)
    else:
        target = SHAPES[args.shape](n)
    target = target.astype(np.float32)

    sim = SmokeSim(n, args.steps, args.jacobi, args.boundary)
    sim.target.from_numpy(target)
    sim.density.from_numpy(
        np.concatenate([initial_blob(n, target.sum())[None], np.zeros((args.steps, n, n))]).astype(
            np.float32
        )
    )
    rng = np.random.default_rng(args.seed)
    control = 1e-3 * rng.standard_normal((n, n, 2)).astype(np.float32)

    optimiser = Adam()
    progress = None if args.quiet else ProgressBar(args.iterations)
    losses, first_frame = [], None
    for iteration in range(args.iterations + 1):
        sim.control.from_numpy(control)
        loss, grad = sim.loss_and_gradient()
        losses.append(loss)
        if iteration == 0:
            first_frame = sim.density.to_numpy()[-1]
        if progress:
            progress.update(iteration, loss)
        if iteration < args.iterations:  # the last pass only evaluates the final control
            # Decay the step geometrically to lr / 10: large moves first, then settle
            # instead of oscillating around the optimum.
            lr = args.lr * 0.1 ** (iteration / args.iterations)
            control = optimiser.step(control, grad, lr).astype(np.float32)
    if progress:
        progress.close()
    frames = sim.density.to_numpy()

    args.out.mkdir(parents=True, exist_ok=True)
    scale = max(1, math.ceil(IMAGE_WIDTH / n))
    vmax = max(1.0, float(target.max()))
    files = []

    def save(name, image, **options):
        path = args.out / name
        image.save(path, **options)
        files.append(path)

    save("target.png", colourise(target, scale, vmax))
    save("initial.png", colourise(first_frame, scale, vmax))
    save("final.png", colourise(frames[-1], scale, vmax))
    gif = [colourise(frame, scale, vmax) for frame in frames]
    # Hold the first and last frames so the start and the result can be seen.
    durations = [600] + [60] * (len(gif) - 2) + [1500] if len(gif) > 2 else 600
    save("rollout.gif", gif[0], save_all=True, append_images=gif[1:], duration=durations, loop=0)
    plot_loss(losses, args.out / "loss.png")
    files.append(args.out / "loss.png")

    seconds = time.perf_counter() - start
    result = {
        "initial_loss": losses[0],
        "final_loss": losses[-1],
        "seconds": seconds,
        "files": files,
        "losses": losses,
    }
    if not args.quiet:
        print(
            f"loss {losses[0]:.4e} -> {losses[-1]:.4e} "
            f"({losses[0] / max(losses[-1], 1e-30):.1f}x lower) in {seconds:.1f} s; "
            f"images in {args.out}"
        )
    return result


if __name__ == "__main__":
    main()
