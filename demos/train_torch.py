"""Train a PyTorch model with tiinterp's differentiable, antialiased Lanczos inside it.

    python demos/train_torch.py                  # 600 steps on the CPU, about 40 s
    python demos/train_torch.py --compile        # the same model under torch.compile
    python demos/train_torch.py --steps 1500 --out /tmp/ae

A downsampling-aware autoencoder, as in learned image downscaling (Kim et al., "Task-Aware
Image Downscaling", ECCV 2018): an encoder network filters each image into 8 feature maps,
which ``tiinterp.torch.interpolate(..., mode="lanczos3", antialias=True)`` shrinks 4x into
a small code (its first 3 channels are the image's thumbnail); the decoder enlarges the
code back with ``tiinterp.torch.interpolate(..., mode="bilinear")`` and a refinement
network. Both networks train together, end to end, so the gradient of the reconstruction
loss flows through both resampling steps (tiinterp's hand-written adjoints, registered as
the ops' autograd formulas). The layers that could change the output start at zero, so the
untrained model *is* plain Lanczos shrinking and bilinear enlarging: the loss curve shows
what the learned filters gain over it, and a second line shows plain Lanczos both ways.

The images are generated (antialiased discs and boxes on colour gradients), a new batch
every step, so no dataset is downloaded. Training is deterministic: the same seed gives the
same losses, bit for bit (``torch.use_deterministic_algorithms(True)``).

Writes to ``--out`` (default ``demos/out/train_torch``): ``loss.png`` (training loss per
step, held-out loss, and the two plain baselines) and ``before_after.png`` (held-out
images: original, plain Lanczos down + bilinear up, the learned code's thumbnail, the
trained model's reconstruction). Prints the held-out loss and PSNR before and after.
"""

import argparse
import math
import pathlib
import sys
import time

# isort: split
import tiinterp.torch as titorch  # before torch's own heavy imports: tiinterp's quiet import

# isort: split
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import nn

import tiinterp

OUT_DIR = pathlib.Path(__file__).resolve().parent / "out" / "train_torch"


# --- Generated images -----------------------------------------------------------------------


def make_scenes(rng, count, size, supersample=2):
    """``count`` RGB scenes of ``size`` x ``size`` in [0, 1], float32 ``(N, 3, H, W)``:
    a colour gradient with discs and boxes on it, antialiased by averaging
    ``supersample`` x ``supersample`` points per pixel."""
    fine = size * supersample
    centres = (np.arange(fine) + 0.5) / fine
    y, x = centres[:, None], centres[None, :]
    scenes = np.empty((count, 3, fine, fine))
    for scene in scenes:
        corner_a, corner_b = rng.uniform(0, 1, (2, 3, 1, 1))
        angle = rng.uniform(0, 2 * np.pi)
        ramp = np.cos(angle) * x + np.sin(angle) * y
        ramp = (ramp - ramp.min()) / (ramp.max() - ramp.min())
        scene[...] = corner_a + (corner_b - corner_a) * ramp
        for _ in range(rng.integers(3, 7)):
            colour = rng.uniform(0, 1, (3, 1, 1))
            cy, cx = rng.uniform(0.1, 0.9, 2)
            if rng.integers(2):
                mask = (y - cy) ** 2 + (x - cx) ** 2 < rng.uniform(0.05, 0.25) ** 2
            else:
                hy, hx = rng.uniform(0.05, 0.25, 2)
                mask = (abs(y - cy) < hy) & (abs(x - cx) < hx)
            scene[:, mask] = colour[:, :, 0]
    pooled = scenes.reshape(count, 3, size, supersample, size, supersample).mean(axis=(3, 5))
    return pooled.astype(np.float32)


# --- The model ---------------------------------------------------------------------------------


def _conv(inputs, outputs):
    # "reflect", not "replicate": PyTorch 2.13's Inductor miscompiles the backward of
    # replicate padding (a stride assertion in replication_pad2d_backward), with or without
    # tiinterp in the model, which would break --compile.
    return nn.Conv2d(inputs, outputs, 3, padding=1, padding_mode="reflect")


class LanczosAutoencoder(nn.Module):
    """Encoder -> antialiased Lanczos shrink -> bilinear enlarge -> decoder.

    The code is ``code_channels`` feature maps at 1 / ``factor`` of the image's size: its
    first 3 channels are the image shrunk by Lanczos plus a learned correction, the others
    learned side information (where edges are, how sharp). The decoder adds its output to
    the enlarged first 3 channels.
    """

    def __init__(self, factor=4, hidden=32, code_channels=8, enlarge="bilinear"):
        super().__init__()
        self.factor, self.enlarge = factor, enlarge
        self.encoder = nn.Sequential(
            _conv(3, hidden), nn.GELU(), _conv(hidden, hidden), nn.GELU(),
            _conv(hidden, code_channels),
        )  # fmt: skip
        self.decoder = nn.Sequential(
            _conv(code_channels, hidden), nn.GELU(), _conv(hidden, hidden), nn.GELU(),
            _conv(hidden, 3),
        )  # fmt: skip
        # Untrained, the model is plain resampling: the decoder's last layer and the encoder's
        # correction of the image channels start at 0 (the side channels start random, so
        # that the decoder's first layer has something to learn from).
        nn.init.zeros_(self.decoder[-1].weight)
        nn.init.zeros_(self.decoder[-1].bias)
        with torch.no_grad():
            self.encoder[-1].weight[:3] = 0
            self.encoder[-1].bias[:3] = 0

    def encode(self, images):
        features = self.encoder(images)
        # The image itself rides in the first 3 channels: at step 0 the code is its
        # Lanczos thumbnail (shown in before_after.png) and the rest is 0.
        features = features + nn.functional.pad(images, (0, 0, 0, 0, 0, features.shape[1] - 3))
        return titorch.interpolate(
            features, scale_factor=1 / self.factor, mode="lanczos3", antialias=True
        )

    def decode(self, code):
        enlarged = titorch.interpolate(code, scale_factor=self.factor, mode=self.enlarge)
        return enlarged[:, :3] + self.decoder(enlarged)

    def forward(self, images):
        return self.decode(self.encode(images))


def psnr(mse):
    return 10 * math.log10(1.0 / mse)


# --- Output ------------------------------------------------------------------------------------


class ProgressBar:
    """``[#######-------]  step 120/300  loss 1.234e-03  12.3 s`` redrawn in place on stderr."""

    def __init__(self, total, width=30, stream=None):
        self.total, self.width = total, width
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()

    def update(self, step, loss):
        filled = self.width * step // self.total
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self.start
        self.stream.write(
            f"\r[{bar}]  step {step:>{len(str(self.total))}}/{self.total}  "
            f"loss {loss:.3e}  {elapsed:5.1f} s"
        )
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


def plot_losses(train, held_out, baselines, path):
    # A bare Figure (no pyplot) draws off-screen, whatever matplotlib backend is configured.
    fig = Figure(figsize=(7, 4.2), dpi=100)
    ax = fig.subplots()
    ax.semilogy(np.arange(1, len(train) + 1), train, color="#9dbbd6", linewidth=1, label="train")
    steps, losses = zip(*held_out, strict=True)
    ax.semilogy(steps, losses, "o-", color="#1d5c96", linewidth=2, label="held out")
    for (label, value), style in zip(baselines.items(), ("--", ":"), strict=True):
        ax.axhline(value, color="#d1495b", linestyle=style, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("mean squared error")
    ax.set_title("Autoencoder through tiinterp's antialiased Lanczos (4x)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def save_before_after(rows, path):
    """A grid of images, one labelled row per entry of ``rows`` (label -> ``(N, 3, H, W)``
    in [0, 1]); each image is drawn with its own pixels visible (no smoothing)."""
    columns = len(next(iter(rows.values())))
    fig = Figure(figsize=(1.6 * columns + 1.8, 1.6 * len(rows)), dpi=100)
    axes = fig.subplots(len(rows), columns, squeeze=False)
    for row, (label, images) in zip(axes, rows.items(), strict=True):
        for ax, image in zip(row, images, strict=True):
            ax.imshow(np.clip(image.transpose(1, 2, 0), 0, 1), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


# --- Command line ------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--arch", default="cpu", help="Taichi arch: cpu (CPU tensors without copies), vulkan, ..."
    )
    parser.add_argument("--steps", type=int, default=600, help="training steps (batches)")
    parser.add_argument("--batch", type=int, default=8, help="images per batch")
    parser.add_argument("--size", type=int, default=48, help="image side, a multiple of --factor")
    parser.add_argument("--factor", type=int, default=4, help="shrink factor of the thumbnail")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed of the images and weights")
    parser.add_argument(
        "--compile", action="store_true", help="run the model under torch.compile(fullgraph=True)"
    )
    parser.add_argument("--out", type=pathlib.Path, default=OUT_DIR, help="output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    args = parser.parse_args(argv)
    for name in ("steps", "batch", "factor"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.size < args.factor or args.size % args.factor:
        parser.error(f"--size must be a positive multiple of --factor ({args.factor})")
    if not args.lr > 0:
        parser.error("--lr must be positive")
    return args


def plain_resampling(images, factor, enlarge):
    """Lanczos shrinking (antialiased) and ``enlarge`` enlarging, nothing learned."""
    small = titorch.interpolate(images, scale_factor=1 / factor, mode="lanczos3", antialias=True)
    return titorch.interpolate(small, scale_factor=factor, mode=enlarge)


def main(argv=None):
    """Train; returns a dict of the losses, time taken and files written."""
    args = parse_args(argv)
    start = time.perf_counter()
    tiinterp.init(args.arch)  # on "cpu", torch's CPU tensors reach the kernels without copies
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(args.seed)
    held_out_rng = np.random.default_rng(10_000 + args.seed)
    held_out = torch.from_numpy(make_scenes(held_out_rng, 8, args.size))

    model = LanczosAutoencoder(args.factor)
    run = torch.compile(model, fullgraph=True) if args.compile else model
    optimiser = torch.optim.Adam(model.parameters(), lr=args.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, args.steps)

    def evaluate():
        with torch.no_grad():
            return nn.functional.mse_loss(run(held_out), held_out).item()

    baseline = evaluate()  # the untrained model: plain Lanczos down, bilinear up
    with torch.no_grad():
        lanczos_both = plain_resampling(held_out, args.factor, "lanczos3")
        lanczos_both = nn.functional.mse_loss(lanczos_both, held_out).item()
    train_losses, held_out_losses = [], [(0, baseline)]
    every = max(1, args.steps // 10)
    progress = None if args.quiet else ProgressBar(args.steps)
    for step in range(1, args.steps + 1):
        batch = torch.from_numpy(make_scenes(rng, args.batch, args.size))
        loss = nn.functional.mse_loss(run(batch), batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        train_losses.append(loss.item())
        if step % every == 0 or step == args.steps:
            held_out_losses.append((step, evaluate()))
        if progress:
            progress.update(step, train_losses[-1])
    if progress:
        progress.close()
    final = held_out_losses[-1][1]

    args.out.mkdir(parents=True, exist_ok=True)
    files = [args.out / "loss.png", args.out / "before_after.png"]
    baselines = {
        "untrained: Lanczos down, bilinear up": baseline,
        "Lanczos down, Lanczos up": lanczos_both,
    }
    plot_losses(train_losses, held_out_losses, baselines, files[0])
    with torch.no_grad():
        shown = held_out[:6]
        plain = plain_resampling(shown, args.factor, model.enlarge)
        code = model.encode(shown)
        learned = model.decode(code)
    side = held_out.shape[-1] // args.factor
    save_before_after(
        {
            "original": shown.numpy(),
            "untrained:\nLanczos down,\nbilinear up": plain.numpy(),
            f"learned code\n(first 3 of 8\nchannels, {side}x{side})": code[:, :3].numpy(),
            "trained\nreconstruction": learned.numpy(),
        },
        files[1],
    )
    seconds = time.perf_counter() - start
    if not args.quiet:
        print(
            f"held-out MSE: untrained (Lanczos down, bilinear up) {baseline:.3e} "
            f"({psnr(baseline):.2f} dB) -> trained {final:.3e} ({psnr(final):.2f} dB), "
            f"{baseline / final:.2f}x lower; Lanczos both ways: {lanczos_both:.3e} "
            f"({psnr(lanczos_both):.2f} dB); {args.steps} steps in {seconds:.1f} s"
        )
        print("wrote " + ", ".join(str(f) for f in files))
    return {
        "baseline": baseline,
        "lanczos_both": lanczos_both,
        "final": final,
        "train_losses": train_losses,
        "held_out_losses": held_out_losses,
        "seconds": seconds,
        "files": files,
    }


if __name__ == "__main__":
    main()
