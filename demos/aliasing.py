"""Aliasing: a zone plate shrunk 4x with every mode, antialias off and on.

    python demos/aliasing.py [--arch cpu] [--size 256]

A zone plate (concentric rings whose frequency grows with the radius) is the classic test
of a downsampler: frequencies above the new Nyquist limit fold back into false rings
(moire). Plain resampling reads only the taps near each output and keeps them; with
``antialias=True`` the filter is stretched by the downsampling factor (PIL's convention, as
in PyTorch and JAX) and they average out to grey. ``area`` and ``area-opencv`` average
whole blocks, so they antialias by construction. Writes demos/out/aliasing.png: one row per
mode, the result without and with antialias, each shown at the input's size by pixel
replication.
"""

import argparse
import pathlib

import numpy as np
from PIL import Image, ImageDraw

import tiinterp

OUT = pathlib.Path(__file__).resolve().parent / "out" / "aliasing.png"
# The 2-D modes ("linear" and "trilinear" are bilinear's 1-D and 3-D names, "lanczos"
# PyTorch's name for antialiased lanczos3).
MODES = tuple(m for m in tiinterp.MODES if m not in {"linear", "trilinear", "lanczos"})
AVERAGING = {"area", "area-opencv"}
ANTIALIAS = set(MODES) - {"nearest", "nearest-exact"} - AVERAGING
FACTOR = 4


def zone_plate(size):
    y, x = np.mgrid[0:size, 0:size].astype(np.float64) - size / 2
    # Local frequency r / size cycles per pixel: it reaches Nyquist (0.5) at the corners.
    return (0.5 + 0.5 * np.cos(np.pi * (x**2 + y**2) / size))[None, None]


def to_image(plane, zoom=1):
    pixels = (np.clip(plane, 0, 1) * 255).astype(np.uint8)
    image = Image.fromarray(pixels)
    return image.resize((image.width * zoom, image.height * zoom), Image.NEAREST)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--size", type=int, default=256, help="zone plate size in pixels")
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    args = parser.parse_args(argv)
    print(f"tiinterp {tiinterp.__version__} on {tiinterp.init(args.arch)}")
    plate = zone_plate(args.size)
    cell, pad, label_w, header = args.size, 12, 130, 28
    canvas = Image.new("L", (label_w + 3 * (cell + pad), header + len(MODES) * (cell + pad)), 255)
    draw = ImageDraw.Draw(canvas)
    titles = (
        f"input {args.size} x {args.size}",
        f"shrunk {FACTOR}x, antialias=False",
        f"shrunk {FACTOR}x, antialias=True",
    )
    for i, title in enumerate(titles):
        draw.text((label_w + i * (cell + pad), 8), title, fill=0)
    for row, mode in enumerate(MODES):
        y = header + row * (cell + pad)
        draw.text((8, y + cell // 2), mode, fill=0)
        canvas.paste(to_image(plate[0, 0]), (label_w, y))
        plain = tiinterp.interpolate(plate, scale_factor=1 / FACTOR, mode=mode)
        canvas.paste(to_image(plain[0, 0], FACTOR), (label_w + cell + pad, y))
        if mode in ANTIALIAS:
            smooth = tiinterp.interpolate(plate, scale_factor=1 / FACTOR, mode=mode, antialias=True)
            canvas.paste(to_image(smooth[0, 0], FACTOR), (label_w + 2 * (cell + pad), y))
            aliased = np.abs(plain - 0.5)[..., -16:, -16:].mean()
            clean = np.abs(smooth - 0.5)[..., -16:, -16:].mean()
            print(
                f"  {mode:14s} corner contrast (aliasing) {aliased:.3f} -> {clean:.3f} "
                "with antialias"
            )
        else:
            note = (
                "averages blocks: antialiased already"
                if mode in AVERAGING
                else "one sample per output: no antialias option"
            )
            draw.text((label_w + 2 * (cell + pad) + 10, y + cell // 2), note, fill=0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(args.out)
    print(f"saved {args.out}")
    return args.out


if __name__ == "__main__":
    main()
