"""Draws the documentation site's pictures of the modes with tiinterp itself.

    .venv/bin/python docs/make_pictures.py      # needs the demo extra (matplotlib)

Writes docs/pictures/{filters,antialias,grid_sample}.png (small, committed; the site build
does not run this script). Every curve and image is computed by tiinterp's public API on
the CPU, so a picture shows what the library does, not what a textbook formula says.
"""

import pathlib

import matplotlib
import numpy as np

import tiinterp

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend choice: no display needed

OUT = pathlib.Path(__file__).resolve().parent / "pictures"
DPI = 80
# "nearest" is left out: at an integer factor it reads the same samples as "nearest-exact".
FILTER_MODES = (
    "nearest-exact",
    "box",
    "bilinear",
    "hamming",
    "bicubic",
    "cubic",
    "mitchell",
    "lanczos3",
    "lanczos5",
    "bspline",
)


def impulse_responses(path: pathlib.Path) -> None:
    """Each mode's 1-D filter: a unit impulse upsampled 32x, plotted against the source
    coordinate that each output sample reads (half-pixel centres, align_corners=False)."""
    length, factor, centre = 15, 32, 7
    impulse = np.zeros((1, 1, 1, length))  # (N, C, H, W): one row, so bicubic applies too
    impulse[..., centre] = 1.0
    outputs = np.arange(length * factor)
    src = (outputs + 0.5) / factor - 0.5 - centre  # PyTorch's half-pixel source coordinate
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for mode in FILTER_MODES:
        response = tiinterp.interpolate(impulse, size=(1, length * factor), mode=mode)
        ax.plot(src, response[0, 0, 0], label=mode, linewidth=1.4)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlim(-5.5, 5.5)
    ax.set_xlabel("source coordinate - position of the sample (input pixels)")
    ax.set_ylabel("weight of the sample")
    ax.set_title("What one input sample contributes when upsampling (a unit impulse, 32x)")
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def antialias_weights(path: pathlib.Path) -> None:
    """The weights of one output when shrinking 64 -> 16 samples, read off the adjoint: the
    gradient of that output with respect to the input is its row of the resampling matrix."""
    length, size, output = 64, 16, 8
    grad = np.zeros((1, 1, 1, size))
    grad[..., output] = 1.0
    inputs = np.arange(length)
    fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
    for ax, mode in zip(axes, ("bilinear", "bicubic", "lanczos3"), strict=True):
        for antialias, marker in ((False, "o"), (True, ".")):
            weights = tiinterp.interpolate_backward(
                grad, (1, 1, 1, length), mode=mode, antialias=antialias
            )[0, 0, 0]
            read = weights != 0
            ax.plot(
                inputs[read],
                weights[read],
                marker=marker,
                linestyle="-",
                label=f"antialias={antialias}",
            )
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xlim(22, 44)
        ax.set_title(mode)
        ax.set_xlabel("input sample")
    axes[0].set_ylabel(f"weight in output {output}")
    axes[0].legend(fontsize=8)
    fig.suptitle("Shrinking 64 -> 16 samples: the inputs that one output reads, and how much")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def colour_card(size: int) -> np.ndarray:
    """An RGB card, (1, 3, size, size): a checkerboard under a colour ramp, and a disc."""
    y, x = np.mgrid[0:size, 0:size] / size
    checks = ((np.floor(x * 8) + np.floor(y * 8)) % 2) * 0.5 + 0.25
    disc = ((x - 0.62) ** 2 + (y - 0.38) ** 2) < 0.04
    image = np.stack([checks * (0.4 + 0.6 * x), checks * (0.4 + 0.6 * y), checks * 0.8])
    image[:, disc] = np.array([0.95, 0.75, 0.2])[:, None]
    return image[None].astype(np.float32)


def grid_sample_paddings(path: pathlib.Path) -> None:
    """One rotated, zoomed-out grid sampled with each padding mode."""
    image = colour_card(96)
    out = 96
    angle, zoom = np.deg2rad(25.0), 1.6
    v, u = np.meshgrid(np.linspace(-1, 1, out), np.linspace(-1, 1, out), indexing="ij")
    gx = zoom * (np.cos(angle) * u - np.sin(angle) * v)
    gy = zoom * (np.sin(angle) * u + np.cos(angle) * v)
    grid = np.stack([gx, gy], axis=-1)[None].astype(np.float32)  # (1, H, W, 2): x, y
    panels = [("input (96 x 96)", image)]
    for padding in ("zeros", "border", "reflection"):
        sampled = tiinterp.grid_sample(image, grid, mode="bilinear", padding_mode=padding)
        panels.append((f'padding_mode="{padding}"', sampled))
    fig, axes = plt.subplots(1, len(panels), figsize=(10, 2.9))
    for ax, (title, picture) in zip(axes, panels, strict=True):
        ax.imshow(np.clip(picture[0].transpose(1, 2, 0), 0, 1), interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.axis("off")
    fig.suptitle("grid_sample: the input rotated 25 degrees and shown 1.6x smaller (bilinear)")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def main() -> None:
    tiinterp.init("cpu")
    OUT.mkdir(exist_ok=True)
    impulse_responses(OUT / "filters.png")
    antialias_weights(OUT / "antialias.png")
    grid_sample_paddings(OUT / "grid_sample.png")
    for path in sorted(OUT.glob("*.png")):
        print(f"{path.relative_to(OUT.parent.parent)}: {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
