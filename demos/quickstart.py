"""tiinterp quick start: resize a synthetic test chart in every mode and check a gradient.

    make demo            # or: python demos/quickstart.py [--arch cpu|vulkan|cuda|...]

Writes demos/out/quickstart.png: one row per mode, showing a crop magnified 6x (how each
mode interpolates) and the whole chart shrunk to 40% (how each mode aliases). Then checks
the backward pass of every mode three ways: the hand-written adjoint against Taichi's
autodiff, and both against central finite differences in float64.
"""

import argparse
import pathlib
import time

import numpy as np
from PIL import Image, ImageDraw

import tiinterp

OUT_DIR = pathlib.Path(__file__).resolve().parent / "out"
MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "lanczos3")


def test_chart(size=160):
    """A grey chart with a zone plate, a checkerboard, a ramp, a disc and fine lines."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    half = size // 2
    chart = np.full((size, size), 0.5)
    r2 = (x[:half, :half] - half / 2) ** 2 + (y[:half, :half] - half / 2) ** 2
    chart[:half, :half] = 0.5 + 0.5 * np.cos(np.pi * r2 / (1.2 * half))
    chart[:half, half:] = (x[:half, half:] // 5 + y[:half, half:] // 5) % 2
    chart[half:, :half] = x[half:, :half] / half
    disc = (x[half:, half:] - 1.5 * half) ** 2 + (y[half:, half:] - 1.5 * half) ** 2
    chart[half:, half:] = np.where(disc < (0.3 * half) ** 2, 1.0, 0.15)
    chart[half:, half:][::7, :] = 0.9
    # Three channels (a warm tint) so the batch really is (N, C, H, W) with C = 3.
    rgb = np.stack([chart, 0.92 * chart + 0.04, 0.8 * chart + 0.05])
    return rgb[None].astype(np.float32)  # (1, 3, H, W)


def to_image(array):
    return Image.fromarray((np.clip(array[0].transpose(1, 2, 0), 0, 1) * 255).astype(np.uint8))


def render_grid(chart, crop_box, rows, path, shrunk_zoom=3):
    """Columns: the input, then one per mode; rows: the magnified crop, the shrunk chart
    (enlarged ``shrunk_zoom`` times by pixel replication for viewing only)."""
    pad, header, row_label = 10, 22, 20
    top, left, size = crop_box
    source = to_image(chart)
    ImageDraw.Draw(source).rectangle(
        [left, top, left + size - 1, top + size - 1], outline=(220, 0, 0)
    )
    columns = [("input chart (crop in red)", source, source)]
    for name, (magnified, shrunk) in rows:
        small = to_image(shrunk)
        columns.append(
            (
                name,
                to_image(magnified),
                small.resize(
                    (small.width * shrunk_zoom, small.height * shrunk_zoom), Image.NEAREST
                ),
            )
        )
    cell = max(max(c[1].width, c[2].width) for c in columns)
    width = pad + len(columns) * (cell + pad)
    height = header + 2 * (row_label + cell + pad)
    canvas = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(canvas)
    draw.text((pad, header + 4), "crop magnified 6x (first row of each column)", fill="black")
    draw.text(
        (pad, header + row_label + cell + pad + 4),
        f"whole chart shrunk to 40% (shown {shrunk_zoom}x, pixels replicated)",
        fill="black",
    )
    for i, (name, upper, lower) in enumerate(columns):
        x = pad + i * (cell + pad)
        draw.text((x, 4), name, fill="black")
        canvas.paste(upper if i else source, (x, header + row_label))
        if i:
            canvas.paste(lower, (x, header + 2 * row_label + cell + pad))
    canvas.save(path)


def gradient_check(mode, rng):
    """Worst disagreement of the adjoint with ti.ad autodiff (NaN where the Taichi backend
    cannot differentiate on this arch, which tiinterp refuses) and with central finite
    differences, float64."""
    x = rng.standard_normal((2, 3, 9, 11))
    g = rng.standard_normal((2, 3, 14, 6))
    adjoint = tiinterp.interpolate_backward(g, x.shape, mode=mode)
    vs_autodiff = float("nan")
    try:
        autodiff = tiinterp.interpolate_backward(g, x.shape, mode=mode, method="autodiff")
        vs_autodiff = np.abs(adjoint - autodiff).max()
    except RuntimeError as refusal:
        if "method='autodiff'" not in str(refusal):
            raise
    direction = rng.standard_normal(x.shape)
    step = 1e-3

    def loss(a):
        return np.sum(tiinterp.interpolate(a, size=(14, 6), mode=mode) * g)

    numeric = (loss(x + step * direction) - loss(x - step * direction)) / (2 * step)
    analytic = np.sum(adjoint * direction)
    return vs_autodiff, abs(numeric - analytic) / abs(analytic)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--arch", default="cpu", help="Taichi arch: cpu, cuda, vulkan, metal, gpu, auto"
    )
    args = parser.parse_args()
    arch = tiinterp.init(args.arch)
    taichi = tiinterp.taichi_module()
    version = ".".join(map(str, taichi.__version__))
    print(f"tiinterp {tiinterp.__version__} on {arch} ({taichi.__name__} {version})")

    chart = test_chart()
    crop_box = (60, 60, 32)  # top, left, size
    top, left, size = crop_box
    crop = chart[:, :, top : top + size, left : left + size]  # a view: tiinterp copies as needed
    print("resizing (the first call includes compiling the kernel):")
    rows = []
    for mode in MODES:
        start = time.perf_counter()
        magnified = tiinterp.interpolate(crop, scale_factor=6, mode=mode)
        shrunk = tiinterp.interpolate(chart, scale_factor=0.4, mode=mode)
        elapsed = (time.perf_counter() - start) * 1e3
        rows.append((mode, [magnified, shrunk]))
        print(
            f"  {mode:14s} {crop.shape[2:]} -> {magnified.shape[2:]} and "
            f"{chart.shape[2:]} -> {shrunk.shape[2:]}  {elapsed:6.1f} ms"
        )
    OUT_DIR.mkdir(exist_ok=True)
    path = OUT_DIR / "quickstart.png"
    render_grid(chart, crop_box, rows, path)
    print(f"saved {path}")

    print("gradient check, float64 (adjoint vs ti.ad autodiff | adjoint vs finite differences):")
    rng = np.random.default_rng(0)
    worst = 0.0
    for mode in MODES:
        vs_autodiff, vs_fd = gradient_check(mode, rng)
        worst = max(worst, vs_fd, 0.0 if np.isnan(vs_autodiff) else vs_autodiff)
        print(
            f"  {mode:14s} max |adjoint - autodiff| = {vs_autodiff:.1e}   "
            f"relative FD error = {vs_fd:.1e}"
        )
    verdict = "OK" if worst < 1e-8 else "MISMATCH"
    print(f"gradients {verdict} (worst {worst:.1e})")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    raise SystemExit(main())
