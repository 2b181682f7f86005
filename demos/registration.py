"""Differentiable image registration in Taichi with tiinterp: find the smooth deformation that
warps a moving image onto a fixed one.

    python demos/registration.py [--arch cpu|vulkan|cuda|...] [--size 128] [--out DIR]

The unknown is a displacement field on a coarse control grid (a ``ti.Vector.field`` of
2-vectors). Each iteration, inside one ``ti.ad.Tape``:

1. ``tiinterp.interpolate_into`` upsamples the control field (bicubic) to one displacement
   per pixel;
2. a kernel adds it to the identity grid (``F.grid_sample``'s normalised coordinates);
3. ``tiinterp.grid_sample_into`` warps the moving image by that grid (bilinear);
4. a kernel sums the squared difference to the fixed image, plus a smoothness penalty on
   the control field.

The tape's backward runs tiinterp's hand-written adjoints of steps 3 and 1 (gradients to the
grid, then to the control field) and Taichi's autodiff of the user kernels; Adam updates the
control field. Coarse to fine: each level doubles the control grid (the field itself is
upsampled with ``interpolate_into``, a vector field) and the image resolution.

Writes, into demos/out/registration/: ``registration.png`` (fixed, moving, warped and both
differences), ``deformation.png`` (the recovered deformation grid over the moving image,
next to the true one) and ``loss.png`` (the loss curve, level by level).
"""

import argparse
import pathlib
import sys
import time

import numpy as np
from matplotlib.figure import Figure
from PIL import Image, ImageDraw

import tiinterp

ti = tiinterp.taichi_module()  # taichi or taichi_forge, whichever tiinterp runs on

OUT_DIR = pathlib.Path(__file__).resolve().parent / "out" / "registration"


# --- The images --------------------------------------------------------------------------


def phantom(size):
    """A grey test image with smooth edges: a ring, a disc, a square, a bar and a blob."""
    y, x = (np.mgrid[0:size, 0:size] + 0.5) / size

    def soft(distance, width=0.02):
        return 0.5 * (1.0 - np.tanh(distance / width))

    image = 0.1 + 0.6 * soft(np.abs(np.hypot(x - 0.35, y - 0.4) - 0.2) - 0.04)
    image += 0.5 * soft(np.hypot(x - 0.7, y - 0.68) - 0.12)
    image += 0.4 * soft(np.maximum(np.abs(x - 0.68), np.abs(y - 0.27)) - 0.09)
    image += 0.3 * soft(np.abs(y - 0.8) - 0.03) * soft(np.abs(x - 0.3) - 0.18)
    image += 0.3 * np.exp(-((x - 0.35) ** 2 + (y - 0.4) ** 2) / 0.004)
    return image.astype(np.float32)


def identity_grid(size):
    """``F.grid_sample``'s identity grid with align_corners=True: (1, size, size, 2), x first."""
    t = np.linspace(-1.0, 1.0, size)
    gy, gx = np.meshgrid(t, t, indexing="ij")
    return np.stack([gx, gy], axis=-1)[None]


def true_displacement(size, amplitude, seed):
    """A smooth random displacement (size, size, 2) in grid units, of peak ``amplitude``:
    a 4 x 4 random field upsampled bicubically (tiinterp on NumPy)."""
    rng = np.random.default_rng(seed)
    coarse = rng.standard_normal((1, 2, 4, 4))
    fine = tiinterp.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=True)
    fine *= amplitude / np.abs(fine).max()
    return np.moveaxis(fine[0], 0, -1)


# --- The Taichi pipeline -----------------------------------------------------------------


@ti.data_oriented
class Registration:
    """The fields and kernels of one pyramid level: images of ``size`` x ``size`` pixels and
    a ``control`` x ``control`` grid of displacements (grid units, x then y)."""

    def __init__(self, fixed, moving, control, smoothness):
        size = fixed.shape[-1]
        self.size, self.control_size = size, control
        self.fixed = ti.field(ti.f32, (1, 1, size, size))
        self.moving = ti.field(ti.f32, (1, 1, size, size))
        self.control = ti.Vector.field(2, ti.f32, (control, control), needs_grad=True)
        self.displacement = ti.Vector.field(2, ti.f32, (size, size), needs_grad=True)
        self.grid = ti.Vector.field(2, ti.f32, (1, size, size), needs_grad=True)
        self.warped = ti.field(ti.f32, (1, 1, size, size), needs_grad=True)
        self.loss = ti.field(ti.f32, (), needs_grad=True)
        self.fixed.from_numpy(fixed[None, None])
        self.moving.from_numpy(moving[None, None])
        self.smoothness = smoothness

    # Taichi's autodiff takes kernels whose statements all sit in the loop: the constants are
    # Python values (ti.static).
    @ti.kernel
    def _to_grid(self):
        for i, j in self.displacement:
            step = ti.static(2.0 / (self.size - 1))
            identity = ti.Vector([j * step - 1.0, i * step - 1.0])
            self.grid[0, i, j] = identity + self.displacement[i, j]

    @ti.kernel
    def _squared_error(self):
        for i, j in ti.ndrange(self.size, self.size):
            scale = ti.static(1.0 / (self.size * self.size))
            difference = self.warped[0, 0, i, j] - self.fixed[0, 0, i, j]
            self.loss[None] += scale * difference * difference

    @ti.kernel
    def _roughness(self):
        # Squared differences of neighbouring control points, per unit of grid spacing.
        for i, j in self.control:
            n = ti.static(self.control_size)
            weight = ti.static(self.smoothness * (n - 1) ** 2 / (n * n))
            if i + 1 < n:
                self.loss[None] += weight * (self.control[i + 1, j] - self.control[i, j]).norm_sqr()
            if j + 1 < n:
                self.loss[None] += weight * (self.control[i, j + 1] - self.control[i, j]).norm_sqr()

    def forward(self):
        tiinterp.interpolate_into(
            self.control, self.displacement, mode="bicubic", align_corners=True
        )
        self._to_grid()
        tiinterp.grid_sample_into(
            self.moving, self.grid, self.warped, "bilinear", "border", align_corners=True
        )
        self._squared_error()
        self._roughness()

    def step(self):
        """The loss and its gradient with respect to the control field."""
        with ti.ad.Tape(loss=self.loss):
            self.forward()
        return float(self.loss[None]), self.control.grad.to_numpy()

    def image_error(self):
        """Mean squared difference of the warped and the fixed image (no penalty)."""
        return float(np.mean((self.warped.to_numpy() - self.fixed.to_numpy()) ** 2))


def upsample_control(control, size):
    """A control field (n, n, 2) on the next level's (size, size) grid, through
    ``interpolate_into`` on a Taichi vector field (the same bicubic map that turns the
    control field into displacements, so the deformation carries over)."""
    n = control.shape[0]
    coarse = ti.Vector.field(2, ti.f32, (n, n))
    fine = ti.Vector.field(2, ti.f32, (size, size))
    coarse.from_numpy(control)
    tiinterp.interpolate_into(coarse, fine, mode="bicubic", align_corners=True)
    return fine.to_numpy()


class Adam:
    """Adam (Kingma and Ba 2015) on one NumPy array."""

    def __init__(self, shape, rate, beta1=0.9, beta2=0.999, epsilon=1e-8):
        self.rate, self.beta1, self.beta2, self.epsilon = rate, beta1, beta2, epsilon
        self.m, self.v, self.t = np.zeros(shape), np.zeros(shape), 0

    def update(self, value, gradient):
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * gradient
        self.v = self.beta2 * self.v + (1 - self.beta2) * gradient**2
        m = self.m / (1 - self.beta1**self.t)
        v = self.v / (1 - self.beta2**self.t)
        return value - self.rate * m / (np.sqrt(v) + self.epsilon)


class ProgressBar:
    """``[#######-------]  it 120/200  level 2/3  loss 1.234e-03  12.3 s`` on stderr."""

    def __init__(self, total, width=30, stream=None):
        self.total, self.width = total, width
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()

    def update(self, iteration, level, levels, loss):
        filled = self.width * iteration // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self.start
        self.stream.write(
            f"\r[{bar}]  it {iteration:>{len(str(self.total))}}/{self.total}  "
            f"level {level}/{levels}  loss {loss:.3e}  {elapsed:5.1f} s"
        )
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


# --- Pictures ----------------------------------------------------------------------------


def grey(image, scale=1.0):
    return Image.fromarray((np.clip(image * scale, 0.0, 1.0) * 255).round().astype(np.uint8))


def draw_grid(image, displacement, lines=16, magnify=3):
    """The moving image (magnified) with the deformed grid: each line of a regular grid on
    the fixed image, drawn where the registration reads the moving image (x + u(x))."""
    size = image.shape[0]
    canvas = grey(image).resize((size * magnify, size * magnify), Image.BICUBIC).convert("RGB")
    draw = ImageDraw.Draw(canvas)
    pixels = (identity_grid(size)[0] + displacement + 1.0) * (size - 1) / 2  # x, y in pixels
    points = (pixels + 0.5) * magnify
    for k in np.linspace(0, size - 1, lines).round().astype(int):
        for path in (points[k, :, :], points[:, k, :]):
            draw.line([(float(x), float(y)) for x, y in path], fill=(255, 170, 0), width=2)
    return canvas


def labelled_row(panels, labels, magnify=3):
    """Panels side by side, each magnified, with a caption strip above."""
    size = panels[0].width * magnify
    row = Image.new("RGB", (len(panels) * (size + 8) - 8, size + 26), "white")
    draw = ImageDraw.Draw(row)
    for k, (panel, label) in enumerate(zip(panels, labels, strict=True)):
        x = k * (size + 8)
        row.paste(panel.convert("RGB").resize((size, size), Image.BICUBIC), (x, 26))
        draw.text((x + 4, 6), label, fill="black")
    return row


def save_pictures(out, fixed, moving, warped, displacement, truth, history):
    out.mkdir(parents=True, exist_ok=True)
    before, after = np.abs(moving - fixed), np.abs(warped - fixed)
    contrast = 1.0 / max(float(before.max()), 1e-6)
    labelled_row(
        [grey(fixed), grey(moving), grey(warped), grey(before, contrast), grey(after, contrast)],
        [
            "fixed",
            "moving",
            "moving, warped (registered)",
            "|moving - fixed|",
            "|warped - fixed| (same scale)",
        ],
    ).save(out / "registration.png")

    found, true = draw_grid(moving, displacement), draw_grid(moving, truth)
    both = Image.new("RGB", (found.width * 2 + 8, found.height + 26), "white")
    both.paste(found, (0, 26))
    both.paste(true, (found.width + 8, 26))
    draw = ImageDraw.Draw(both)
    draw.text((4, 6), "recovered deformation (grid of the fixed image, on the moving one)", "black")
    draw.text((found.width + 12, 6), "true deformation", fill="black")
    both.save(out / "deformation.png")

    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    axes = figure.subplots()
    start = 0
    for level, losses in enumerate(history, 1):
        steps = np.arange(start, start + len(losses))
        axes.semilogy(steps, losses, label=f"level {level}")
        start += len(losses)
    axes.set_xlabel("iteration")
    axes.set_ylabel("loss (mean squared error + smoothness)")
    axes.set_title("Registration, coarse to fine")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "loss.png")
    return [out / name for name in ("registration.png", "deformation.png", "loss.png")]


# --- Main --------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--arch", default="cpu", help="Taichi arch: cpu, cuda, vulkan, metal, gpu, auto"
    )
    parser.add_argument("--size", type=int, default=128, help="image size (pixels per side)")
    parser.add_argument(
        "--levels", type=int, default=3, help="coarse-to-fine levels (control grid 4, 8, 16...)"
    )
    parser.add_argument("--iterations", type=int, default=80, help="Adam iterations per level")
    parser.add_argument("--rate", type=float, default=0.01, help="Adam's learning rate")
    parser.add_argument(
        "--amplitude", type=float, default=0.15, help="peak true displacement (grid units)"
    )
    parser.add_argument("--smoothness", type=float, default=1e-4, help="penalty weight")
    parser.add_argument("--seed", type=int, default=3, help="seed of the true deformation")
    parser.add_argument("--out", type=pathlib.Path, default=OUT_DIR, help="output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    args = parser.parse_args(argv)
    if args.size < 8 or args.levels < 1 or args.iterations < 1:
        parser.error("expected --size >= 8, --levels >= 1 and --iterations >= 1")
    if args.size >> (args.levels - 1) < 8:
        parser.error(f"--size {args.size} is too small for {args.levels} levels (8 px at least)")
    return args


def main(argv=None):
    """Register; returns the losses, image errors, time taken and the files written."""
    args = parse_args(argv)
    started = time.perf_counter()
    tiinterp.init(args.arch)
    fixed = phantom(args.size)
    truth = true_displacement(args.size, args.amplitude, args.seed)
    # moving(x + u(x)) = fixed(x): the moving image is the fixed one deformed by u's inverse,
    # computed here by sampling the fixed image with the negated field (close to the inverse
    # for a small, smooth u; the registration does not need it exact).
    moving = tiinterp.grid_sample(
        fixed[None, None].astype(np.float64),
        identity_grid(args.size) - truth[None],
        "bicubic",
        "border",
        True,
    )[0, 0].astype(np.float32)

    control = np.zeros((4, 4, 2), np.float32)
    history, bar = [], None if args.quiet else ProgressBar(args.levels * args.iterations)
    iteration = 0
    for level in range(args.levels):
        size = args.size >> (args.levels - 1 - level)
        control_size = 4 << level
        if level:
            control = upsample_control(control, control_size)
        shrink = {"size": (size, size), "mode": "bilinear", "antialias": True}
        images = [
            tiinterp.interpolate(image[None, None], **shrink)[0, 0] if size < args.size else image
            for image in (fixed, moving)
        ]
        step = Registration(*images, control_size, args.smoothness)
        # Finer levels correct what the coarser ones found: smaller steps.
        adam = Adam(control.shape, args.rate * 0.5**level)
        losses = []
        for _ in range(args.iterations):
            step.control.from_numpy(control.astype(np.float32))
            loss, gradient = step.step()
            losses.append(loss)
            control = adam.update(control, gradient).astype(np.float32)
            iteration += 1
            if bar:
                bar.update(iteration, level + 1, args.levels, loss)
        history.append(losses)
    step.control.from_numpy(control)
    step.loss[None] = 0
    step.forward()
    if bar:
        bar.close()

    warped = step.warped.to_numpy()[0, 0]
    displacement = step.displacement.to_numpy()
    initial_error = float(np.mean((moving - fixed) ** 2))
    final_error = step.image_error()
    files = save_pictures(args.out, fixed, moving, warped, displacement, truth, history)
    seconds = time.perf_counter() - started
    pixels = (args.size - 1) / 2
    result = {
        "losses": [loss for losses in history for loss in losses],
        "initial_error": initial_error,
        "final_error": final_error,
        "displacement_error_px": float(
            np.median(np.linalg.norm(displacement - truth, axis=-1)) * pixels
        ),
        "true_displacement_px": float(np.abs(truth).max() * pixels),
        "seconds": seconds,
        "files": files,
    }
    if not args.quiet:
        print(
            f"mean squared error {initial_error:.3e} -> {final_error:.3e} "
            f"({initial_error / final_error:.1f}x lower) in {seconds:.1f} s on {args.arch}; "
            f"true displacement up to {result['true_displacement_px']:.1f} px, recovered with "
            f"a median error of {result['displacement_error_px']:.2f} px"
        )
        for path in files:
            print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
