"""The ``tiinterp`` command (tiinterp/cli/command.py), end to end in subprocesses.

Each subprocess pays Python's and Taichi's start-up (about 1.5 s) and the first Taichi
kernel launches, so the images of many checks go through one command: the module fixtures
below run the command once and several tests read the results. Argument errors, the
progress display, the readers and writers (EXIF orientation, decompression bombs,
permissions, links, full and read-only disks) are also checked in-process, where no Taichi
call is made; signals go to subprocesses that import tiinterp but resample by a copy.
16-bit PNG has its own tests (tests/cli/test_png.py); 16-bit colour TIFF, read and written by
tifffile, is tested here. Images are generated from a generator seeded as the ``rng``
fixture.
"""

import argparse
import contextlib
import errno
import glob
import io
import json
import logging
import os
import re
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zlib
from pathlib import Path

import imagecodecs
import numpy as np
import pytest
import tifffile
from PIL import Image, ImageFile, ImageOps

from tests.tolerances import tolerance
from tiinterp.cli import command as cli
from tiinterp.cli import image_files as _image_files
from tiinterp.cli.png import PNG_SIGNATURE, chunk
from tiinterp.cli.raster import ImageError, Raster

REPO = Path(__file__).resolve().parents[2]
SEED = 20261130
# The console script pip installs next to the interpreter ([project.scripts]).
CONSOLE_SCRIPT = Path(sys.executable).with_name("tiinterp.exe" if os.name == "nt" else "tiinterp")


def run_cli(*args, cwd, console_script=False):
    command = [str(CONSOLE_SCRIPT)] if console_script else [sys.executable, "-m", "tiinterp"]
    env = dict(os.environ, TIINTERP_ARCH="cpu")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("TIINTERP_VERBOSE", None)
    return subprocess.run(
        [*command, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def photo(rng, height, width, channels, dtype=np.uint8):
    """A smooth picture with some noise (a photograph's statistics, more or less)."""
    top = np.iinfo(dtype).max
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    planes = []
    for k in range(channels):
        fx, fy, gx, gy = rng.uniform(0.05, 0.4, 4)
        wave = 0.5 + 0.23 * np.sin(fx * xx + fy * yy + k) + 0.15 * np.cos(gx * xx - gy * yy)
        planes.append(wave + rng.normal(0, 0.05, (height, width)))
    return np.clip(np.floor(np.stack(planes, -1) * top + 0.5), 0, top).astype(dtype)


def save_pillow(path, pixels, layout):
    height, width = pixels.shape[:2]
    if pixels.dtype == np.uint16:
        assert layout == "L"
        image = Image.frombytes("I;16", (width, height), pixels.astype("<u2").tobytes())
    else:
        image = Image.frombytes(layout, (width, height), pixels.tobytes())
    image.save(path)


def png_file(pixels):
    """A PNG file of (H, W, C) levels, 8 or 16 bits, by libpng (imagecodecs): signature,
    IHDR, IDAT chunks, IEND."""
    return bytes(imagecodecs.png_encode(pixels[..., 0] if pixels.shape[2] == 1 else pixels))


def save_png16(path, pixels, layout):
    Path(path).write_bytes(png_file(pixels))


def save_tiff16(path, pixels, layout, compression=None, extrasample=2, **options):
    """A TIFF file of 16-bit gray+alpha, RGB or RGBA by tifffile; ``extrasample`` says what
    the alpha channel is (2 plain, 1 premultiplied, 0 unspecified)."""
    tifffile.imwrite(
        path,
        pixels,
        photometric="minisblack" if layout.startswith("L") else "rgb",
        planarconfig="contig",
        extrasamples=[extrasample] if layout.endswith("A") else None,
        compression=compression,
        metadata=None,
        **options,
    )


def tiff_rgb16(path, pixels):
    """An uncompressed little-endian 16-bit RGB TIFF (baseline TIFF 6.0 tags)."""
    height, width, channels = pixels.shape
    data = pixels.astype("<u2").tobytes()
    depths = struct.pack("<3H", 16, 16, 16) + b"\0\0"
    depths_at = 8 + len(data)
    ifd_at = depths_at + len(depths)
    tags = [
        (256, 3, 1, width),
        (257, 3, 1, height),
        (258, 3, 3, depths_at),
        (259, 3, 1, 1),
        (262, 3, 1, 2),
        (273, 4, 1, 8),
        (277, 3, 1, channels),
        (278, 3, 1, height),
        (279, 4, 1, len(data)),
        (284, 3, 1, 1),
    ]
    ifd = struct.pack("<H", len(tags))
    for tag, kind, count, value in tags:
        short_inline = kind == 3 and count == 1
        ifd += struct.pack("<HHI", tag, kind, count)
        ifd += struct.pack("<HH", value, 0) if short_inline else struct.pack("<I", value)
    Path(path).write_bytes(b"II*\0" + struct.pack("<I", ifd_at) + data + depths + ifd + b"\0" * 4)


def png_with_chunks(data, before_idat=(), after_idat=()):
    """A PNG file (from png_file: signature, IHDR, IDAT chunks, IEND) with more chunks, given
    as (type, data), after its IHDR and after its IDAT chunks."""
    ihdr_end = len(PNG_SIGNATURE) + 25
    head, middle, end = data[:ihdr_end], data[ihdr_end:-12], data[-12:]
    extra = [
        b"".join(chunk(kind, body) for kind, body in chunks) for chunks in (before_idat, after_idat)
    ]
    return head + extra[0] + middle + extra[1] + end


def exif_orientation(orientation):
    """EXIF data ("Exif\\0\\0" and a TIFF structure) holding one Orientation tag."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def png_declaring(width, height, bits=8, color_type=0):
    """A PNG file whose header declares width x height, with a few bytes of image data: a
    decompression bomb's header."""
    header = struct.pack(">IIBBBBB", width, height, bits, color_type, 0, 0, 0)
    return b"".join(
        [
            PNG_SIGNATURE,
            chunk(b"IHDR", header),
            chunk(b"IDAT", zlib.compress(bytes(1000))),
            chunk(b"IEND", b""),
        ]
    )


LAYOUTS = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def read_output(path):
    """(pixels as (H, W, C), Pillow's mode) of an output file; the 16-bit files that Pillow
    reads at 8 bits per channel read by imagecodecs or tifffile instead, their mode given as
    "PNG16 <layout>" (16-bit gray PNG too) or "TIFF16 <layout>"."""
    data = Path(path).read_bytes()
    if data.startswith(PNG_SIGNATURE) and data[24] == 16:
        pixels = imagecodecs.png_decode(data)
        pixels = pixels.reshape(*pixels.shape[:2], -1)
        return pixels, f"PNG16 {LAYOUTS[pixels.shape[2]]}"
    if data[:4] in (b"II*\0", b"MM\0*"):
        with tifffile.TiffFile(path) as tiff:
            page = tiff.pages.first
            if page.bitspersample == 16 and page.samplesperpixel > 1:
                pixels = page.asarray()
                return pixels, f"TIFF16 {LAYOUTS[pixels.shape[2]]}"
    with Image.open(path) as image:
        pixels = np.asarray(image)
        return pixels.reshape(image.height, image.width, -1), image.mode


# --- Formats x bit depths x channel layouts, in one command -------------------------------------

WIDTH, HEIGHT = 80, 60
# --size 37x keeps the aspect ratio: 60 * 37 / 80 = 27.75 -> 28.
OUT_SHAPE = (28, 37)
# name: (writer, layout, bits, output's expected mode as read_output reports it, channels)
MATRIX = {
    "gray8.png": ("pillow", "L", 8, "L", 1),
    "graya8.png": ("pillow", "LA", 8, "LA", 2),
    "rgb8.png": ("pillow", "RGB", 8, "RGB", 3),
    "rgba8.png": ("pillow", "RGBA", 8, "RGBA", 4),
    "gray16.png": ("pillow", "L", 16, "PNG16 L", 1),
    "graya16.png": ("png16", "LA", 16, "PNG16 LA", 2),
    "rgb16.png": ("png16", "RGB", 16, "PNG16 RGB", 3),
    "rgba16.png": ("png16", "RGBA", 16, "PNG16 RGBA", 4),
    "gray8.tif": ("pillow", "L", 8, "L", 1),
    "graya8.tif": ("pillow", "LA", 8, "LA", 2),
    "rgb8.tif": ("pillow", "RGB", 8, "RGB", 3),
    "rgba8.tif": ("pillow", "RGBA", 8, "RGBA", 4),
    "gray16.tif": ("pillow", "L", 16, "I;16", 1),
    "graya16.tif": ("tiff16", "LA", 16, "TIFF16 LA", 2),
    "rgb16.tif": ("tiff16", "RGB", 16, "TIFF16 RGB", 3),
    "rgba16.tif": ("tiff16", "RGBA", 16, "TIFF16 RGBA", 4),
    "gray8.jpg": ("pillow", "L", 8, "L", 1),
    "rgb8.jpg": ("pillow", "RGB", 8, "RGB", 3),
    "cmyk8.jpg": ("pillow", "CMYK", 8, "CMYK", 4),
}


# The compression of each 16-bit colour TIFF input (tifffile's names), which its output
# keeps; rgb16.tif is written by hand, uncompressed (tiff_rgb16).
TIFF16_COMPRESSIONS = {"graya16.tif": "adobe_deflate", "rgba16.tif": "packbits"}
WRITERS = {
    "pillow": save_pillow,
    "png16": save_png16,
    "tiff16": lambda path, pixels, layout: (
        save_tiff16(path, pixels, layout, TIFF16_COMPRESSIONS[path.name])
        if path.name in TIFF16_COMPRESSIONS
        else tiff_rgb16(path, pixels)
    ),
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Every supported layout, the conversions (palette, 1-bit, EXIF rotation, 16 bits made
    from 8) and files that must fail, resized by one command into a folder."""
    rng = np.random.default_rng(SEED)
    root = tmp_path_factory.mktemp("matrix")
    inputs = root / "inputs"
    inputs.mkdir()
    sources = {}
    for name, (writer, layout, bits, _, channels) in MATRIX.items():
        dtype = np.uint16 if bits == 16 else np.uint8
        pixels = photo(rng, HEIGHT, WIDTH, channels, dtype)
        sources[name] = pixels
        WRITERS[writer](inputs / name, pixels, layout)
    # 16-bit colour holding exactly the 8-bit image's levels (v * 257): the 16-bit path
    # must agree with the 8-bit one.
    save_png16(inputs / "rgb16_of_rgb8.png", sources["rgb8.png"].astype(np.uint16) * 257, "RGB")
    palette = Image.frombytes("L", (WIDTH, HEIGHT), photo(rng, HEIGHT, WIDTH, 1).tobytes())
    palette = palette.convert("RGB").quantize(16)
    palette.info["transparency"] = 0
    palette.save(inputs / "palette.png", transparency=0)
    Image.frombytes("L", (WIDTH, HEIGHT), photo(rng, HEIGHT, WIDTH, 1).tobytes()).convert("1").save(
        inputs / "bilevel.png"
    )
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    Image.frombytes("RGB", (WIDTH, HEIGHT), photo(rng, HEIGHT, WIDTH, 3).tobytes()).save(
        inputs / "rotated.jpg", exif=exif
    )
    # The same orientation in a 16-bit PNG (read by libpng), in its eXIf chunk.
    rotated16 = png_file(photo(rng, HEIGHT, WIDTH, 3, np.uint16))
    eXIf = [(b"eXIf", exif_orientation(6)[6:])]
    (inputs / "rotated16.png").write_bytes(png_with_chunks(rotated16, eXIf))
    # And in TIFF's Orientation tag, of a file Pillow reads (and turns as it loads it) and
    # of one tifffile reads (16-bit colour), the pixels stored unturned.
    for name, stored, orientation in (
        ("rotated8.tif", photo(rng, HEIGHT, WIDTH, 3), 6),
        ("rotated16.tif", photo(rng, HEIGHT, WIDTH, 3, np.uint16), 8),
    ):
        tag = [(0x0112, "H", 1, orientation, True)]
        tifffile.imwrite(inputs / name, stored, photometric="rgb", extratags=tag, metadata=None)
    # White-is-zero 16-bit gray, dark as stored: light as shown.
    sources["white16.tif"] = photo(rng, HEIGHT, WIDTH, 1, np.uint16) // 4
    tifffile.imwrite(inputs / "white16.tif", sources["white16.tif"], photometric="miniswhite")
    # Files that fail, each with its own message; the others are still written.
    tifffile.imwrite(
        inputs / "cmyk16.tif", photo(rng, HEIGHT, WIDTH, 4, np.uint16), photometric="separated"
    )
    (inputs / "broken.png").write_bytes((inputs / "rgb8.png").read_bytes()[:100])
    (inputs / "text.jpg").write_text("not a picture\n")
    (inputs / "bomb.png").write_bytes(png_declaring(100_000, 100_000))
    (inputs / "notes.txt").write_text("not an image extension: ignored\n")
    result = run_cli("resize", "inputs", "-o", "outputs", "--size", "37x", cwd=root)
    return root, sources, result


@pytest.mark.parametrize("name", MATRIX)
def test_round_trip_keeps_shape_mode_and_bit_depth(matrix, name):
    root, sources, _ = matrix
    _, _, bits, mode, channels = MATRIX[name]
    pixels, read_mode = read_output(root / "outputs" / name)
    assert read_mode == mode
    assert pixels.shape == (*OUT_SHAPE, channels)
    assert pixels.dtype == (np.uint16 if bits == 16 else np.uint8)
    # A lanczos3 resize of a smooth picture stays close to its mean; JPEG's loss included.
    source_mean = sources[name].astype(np.float64).mean() / (257 if bits == 16 else 1)
    output_mean = pixels.astype(np.float64).mean() / (257 if bits == 16 else 1)
    assert abs(output_mean - source_mean) < 3, (output_mean, source_mean)


def test_16_bit_colour_keeps_16_bits_and_agrees_with_8_bit(matrix):
    root, _, _ = matrix
    wide, _ = read_output(root / "outputs" / "rgb16_of_rgb8.png")
    narrow, _ = read_output(root / "outputs" / "rgb8.png")
    # The same levels resampled in float64 (16-bit) and float32 (8-bit), rounded to their
    # own depth. The 8-bit image also rounds its intermediate image to 8-bit levels, as
    # Pillow does (Note [8-bit images as Pillow resizes them]): half a level, times the
    # second pass's sum of |weights| (below 2 for lanczos3). Measured 0.96.
    difference = np.abs(wide.astype(np.float64) / 257 - narrow.astype(np.float64))
    assert difference.max() <= 1.5
    # And the 16-bit result is not 8-bit levels scaled up: the low byte carries information.
    assert np.count_nonzero(wide % 257) > wide.size // 2
    for name in ("rgba16.png", "graya16.tif", "rgb16.tif", "rgba16.tif"):
        wide, _ = read_output(root / "outputs" / name)
        assert np.count_nonzero(wide % 257) > wide.size // 2, name


def test_tiff_outputs_keep_their_input_compression(matrix):
    """16-bit colour TIFF written by tifffile, the rest by Pillow: the input's lossless
    compression kept (the inputs Pillow saved, with its default, and tiff_rgb16's are
    uncompressed)."""
    root, _, _ = matrix
    expected = {name: "NONE" for name in MATRIX if name.endswith(".tif")}
    expected.update({name: kind.upper() for name, kind in TIFF16_COMPRESSIONS.items()})
    for name, compression in expected.items():
        with tifffile.TiffFile(root / "outputs" / name) as tiff:
            assert tiff.pages.first.compression.name == compression, name


def test_palette_bilevel_and_exif_orientation(matrix):
    root, _, _ = matrix
    pixels, mode = read_output(root / "outputs" / "palette.png")
    assert (mode, pixels.shape) == ("RGBA", (*OUT_SHAPE, 4))
    assert pixels[..., 3].min() == 0 < pixels[..., 3].max()  # the palette's transparent entry
    pixels, mode = read_output(root / "outputs" / "bilevel.png")
    assert (mode, pixels.shape) == ("L", (*OUT_SHAPE, 1))
    # Orientation 6: the stored 80x60 is shown as 60x80, so 37 wide is 49 high (80*37/60).
    pixels, mode = read_output(root / "outputs" / "rotated.jpg")
    assert (mode, pixels.shape) == ("RGB", (49, 37, 3))
    pixels, mode = read_output(root / "outputs" / "rotated16.png")
    assert (mode, pixels.shape) == ("PNG16 RGB", (49, 37, 3))


def test_tiff_orientation_and_white_is_zero_gray_from_the_command_line(matrix):
    """The TIFF files of orientation 6 (read by Pillow) and 8 (tifffile) come out 60x80
    like the JPEG file above (the Pillow one came out 80x60, turned twice), and white-is-zero
    16-bit gray comes out as light as it is shown, not as its negative."""
    root, sources, _ = matrix
    pixels, mode = read_output(root / "outputs" / "rotated8.tif")
    assert (mode, pixels.shape) == ("RGB", (49, 37, 3))
    pixels, mode = read_output(root / "outputs" / "rotated16.tif")
    assert (mode, pixels.shape) == ("TIFF16 RGB", (49, 37, 3))
    pixels, mode = read_output(root / "outputs" / "white16.tif")
    assert (mode, pixels.shape) == ("I;16", (*OUT_SHAPE, 1))
    shown = 65535 - sources["white16.tif"].astype(np.float64)
    assert abs(pixels.mean() - shown.mean()) < 3 * 257, (pixels.mean(), shown.mean())


def test_unreadable_files_fail_and_the_others_are_written(matrix):
    root, _, result = matrix
    assert result.returncode == 1
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("tiinterp: error:")]
    assert len(errors) == 4, result.stderr
    joined = "\n".join(errors)
    assert (
        f"inputs{os.sep}cmyk16.tif: 16-bit TIFF files of 4 channels (CMYK) are not "
        "supported (gray, gray+alpha, RGB and RGBA are)"
    ) in joined
    assert f"inputs{os.sep}broken.png: " in joined
    assert f"inputs{os.sep}text.jpg: not a PNG, JPEG or TIFF image" in joined
    # Refused before decoding (Pillow would allocate 10 GB): the default --max-pixels.
    assert (
        f"inputs{os.sep}bomb.png: the image is 100000x100000, 10,000,000,000 pixels, over the "
        "limit of 268,435,456 (--max-pixels raises it)"
    ) in joined
    assert "Traceback" not in result.stderr
    written = sorted(path.name for path in (root / "outputs").iterdir())
    expected = [
        *MATRIX,
        "bilevel.png",
        "palette.png",
        "rgb16_of_rgb8.png",
        "rotated.jpg",
        "rotated16.png",
        "rotated8.tif",
        "rotated16.tif",
        "white16.tif",
    ]
    assert written == sorted(expected)
    # Not a terminal: one line per written image.
    line = f"inputs{os.sep}gray8.png -> outputs{os.sep}gray8.png (80x60 -> 37x28, 8-bit gray)"
    assert line in result.stderr.splitlines()


# --- 16-bit colour TIFF, by tifffile, in-process ------------------------------------------------


# (layout written, ExtraSamples) -> the layout read, as Pillow reads the same file at 8 bits:
# an unspecified extra sample is dropped, premultiplied alpha made plain.
TIFF_EXTRA_SAMPLES = {
    ("LA", 2): "LA",
    ("LA", 1): "LA",
    ("LA", 0): "L",
    ("RGBA", 2): "RGBA",
    ("RGBA", 1): "RGBA",
    ("RGBA", 0): "RGB",
}


def test_16_bit_tiff_layouts_as_pillow_reads_them_at_8_bits(tmp_path, rng):
    """Each kind of extra sample gives the layout Pillow gives the 8-bit file; plain alpha
    and colour are read exactly, premultiplied colour is divided by alpha (within a level,
    where alpha is at least half); separate planes and big-endian samples too."""
    for (layout, extra), expected in TIFF_EXTRA_SAMPLES.items():
        straight = rng.integers(0, 65536, (6, 9, len(layout))).astype(np.uint16)
        straight[..., -1] = rng.integers(32768, 65536, (6, 9))
        stored = straight.copy()
        if extra == 1:
            alpha = straight[..., -1:].astype(np.float64)
            stored[..., :-1] = np.floor(straight[..., :-1] * alpha / 65535 + 0.5)
        save_tiff16(tmp_path / "16.tif", stored, layout, extrasample=extra)
        save_tiff16(tmp_path / "8.tif", (stored >> 8).astype(np.uint8), layout, extrasample=extra)
        ours = _image_files.read_image(tmp_path / "16.tif", [])
        assert ours.layout == _image_files.read_image(tmp_path / "8.tif", []).layout == expected
        difference = np.abs(ours.pixels.astype(np.int64) - straight[..., : len(expected)])
        assert difference.max() <= (1 if extra == 1 else 0), (layout, extra)
    rgb = rng.integers(0, 65536, (6, 9, 3)).astype(np.uint16)
    tifffile.imwrite(
        tmp_path / "planes.tif",
        rgb.transpose(2, 0, 1),
        photometric="rgb",
        planarconfig="separate",
        byteorder=">",
        iccprofile=b"a profile",
    )
    ours = _image_files.read_image(tmp_path / "planes.tif", [])
    np.testing.assert_array_equal(ours.pixels, rgb)
    assert (ours.layout, ours.icc_profile) == ("RGB", b"a profile")


# name -> (how the input is written, the compression its TIFF output gets); zstd, lossless
# too, is not among those kept (none, LZW, deflate, PackBits).
TIFF_SOURCES = {
    "LA deflate.tif": ("LA", "adobe_deflate", "ADOBE_DEFLATE"),  # Pillow cannot open it
    "RGB old deflate.tif": ("RGB", "deflate", "DEFLATE"),  # Pillow can
    "RGBA lzw.tif": ("RGBA", "lzw", "LZW"),
    "RGBA zstd.tif": ("RGBA", "zstd", "LZW"),
    "RGB.png": ("RGB", None, "LZW"),
}


def test_16_bit_tiff_written_exactly_with_the_input_compression(tmp_path, rng):
    """16-bit colour written as TIFF: the same levels and ICC profile, plain alpha, the
    input's lossless compression (else LZW) with the horizontal predictor for LZW and
    deflate; Pillow opens the files (at 8 bits) and finds the same."""
    for name, (layout, compression, expected) in TIFF_SOURCES.items():
        pixels = photo(rng, 7, 10, len(layout), np.uint16)
        source, out = tmp_path / name, tmp_path / "out.tif"
        if compression is None:
            save_png16(source, pixels, layout)
        else:
            save_tiff16(source, pixels, layout, compression, iccprofile=b"profile")
        notes = []
        raster = _image_files.read_image(source, notes)
        _image_files.write_image(raster, out, "TIFF", notes, quality=92, source=source)
        assert notes == []
        ours = _image_files.read_image(out, notes)
        np.testing.assert_array_equal(ours.pixels, pixels, err_msg=name)
        assert (ours.layout, ours.icc_profile) == (layout, raster.icc_profile)
        with tifffile.TiffFile(out) as tiff:
            page = tiff.pages.first
            assert page.compression.name == expected, name
            assert page.predictor.name == "HORIZONTAL"
            assert tuple(page.extrasamples) == ((2,) if layout.endswith("A") else ())
            np.testing.assert_array_equal(page.asarray(), pixels)
        if layout != "LA":
            with Image.open(out) as image:
                assert image.info["compression"] == f"tiff_{expected.lower()}"
                np.testing.assert_array_equal(np.asarray(image), (pixels >> 8).astype(np.uint8))


def test_damaged_16_bit_tiff_and_other_kinds_are_one_error(tmp_path, rng, caplog):
    """tifffile's errors on damaged files (its own, and its codecs') are an ImageError
    naming the file's fault; kinds tiinterp does not read say what it reads. tifffile's
    complaints on the way are not printed: a file that is read gets them as notes."""
    caplog.set_level(logging.WARNING)
    pixels = photo(rng, 32, 24, 2, np.uint16)
    buffer = io.BytesIO()
    save_tiff16(buffer, pixels, "LA", "lzw", rowsperstrip=8)
    data = buffer.getvalue()
    damaged = bytearray(data)
    damaged[len(data) // 2 : len(data) // 2 + 40] = b"\xff" * 40
    files = {
        "cut in the strips": data[: len(data) // 2],
        "cut in the header": data[:20],
        "broken LZW": bytes(damaged),
    }
    for name, content in files.items():
        (tmp_path / "in.tif").write_bytes(content)
        with pytest.raises(ImageError) as refusal:
            _image_files.read_image(tmp_path / "in.tif", [])
        message = str(refusal.value)
        assert message.startswith("cannot read this TIFF file: damaged"), (name, message)
    tifffile.imwrite(tmp_path / "float.tif", rng.random((4, 5, 3), np.float32), photometric="rgb")
    with pytest.raises(ImageError, match=r"^floating-point TIFF files of 32 bits per channel are"):
        _image_files.read_image(tmp_path / "float.tif", [])
    # An XResolution tag whose value lies past the end: tifffile logs an error and reads on.
    entry = ifd_entry(data, 282)
    (tmp_path / "tag.tif").write_bytes(patched(data, entry + 8, "<I", 0xFFFFFF00))
    notes = []
    raster = _image_files.read_image(tmp_path / "tag.tif", notes)
    np.testing.assert_array_equal(raster.pixels, pixels)
    (note,) = [note for note in notes if note.startswith("tifffile: ")]
    assert "invalid value offset 4294967040" in note
    assert caplog.records == []


def test_tifffile_missing_is_explained(tmp_path, rng, monkeypatch):
    """Without tifffile, 16-bit colour TIFF is one error naming the extra, read or written;
    16-bit gray TIFF is still Pillow's."""
    pixels = photo(rng, 4, 5, 3, np.uint16)
    tiff_rgb16(tmp_path / "rgb16.tif", pixels)
    monkeypatch.setitem(sys.modules, "tifffile", None)
    missing = r"needs tifffile for 16-bit colour TIFF: pip install 'tiinterp\[cli\]'"
    with pytest.raises(ImageError, match=missing):
        _image_files.read_image(tmp_path / "rgb16.tif", [])
    out = tmp_path / "out.tif"
    with pytest.raises(ImageError, match=missing):
        _image_files.write_image(Raster(pixels, "RGB"), out, "TIFF", [], quality=92, source=out)
    assert not out.exists()
    gray = Raster(pixels[..., :1], "L")
    _image_files.write_image(gray, out, "TIFF", [], quality=92, source=out)
    np.testing.assert_array_equal(_image_files.read_image(out, []).pixels, gray.pixels)


# --- Against PIL, and alpha ---------------------------------------------------------------------

PIL_CASES = {"down": ((83, 97), (40, 31)), "up": ((29, 37), (90, 71))}  # (H, W) in, (W, H) out


def fringe_image(rng, height, width, bits):
    """A red (RGBA) or gray (gray+alpha) opaque rectangle on transparent pixels of random
    colour, which must not show at the rectangle's edges."""
    top = 65535 if bits == 16 else 255
    dtype = np.uint16 if bits == 16 else np.uint8
    channels = 2 if bits == 16 else 4
    pixels = rng.integers(0, top + 1, (height, width, channels)).astype(dtype)
    pixels[..., -1] = 0
    colour = (40000, top) if bits == 16 else (255, 0, 0, 255)
    pixels[height // 4 : 3 * height // 4, width // 5 : 4 * width // 5] = colour
    return pixels


@pytest.fixture(scope="module")
def pil_runs(tmp_path_factory):
    """For each direction, 8-bit gray, RGB and RGBA photos and the alpha-fringe images
    resized by one command."""
    rng = np.random.default_rng(SEED)
    root = tmp_path_factory.mktemp("pil")
    results = {}
    for direction, ((height, width), (out_width, out_height)) in PIL_CASES.items():
        folder = root / direction
        folder.mkdir()
        for layout, channels in (("L", 1), ("RGB", 3), ("RGBA", 4)):
            pixels = photo(rng, height, width, channels)
            if layout == "RGBA":  # alpha from 128 to 255: PIL keeps 8-bit premultiplied colour
                pixels[..., 3] = 128 + pixels[..., 3] // 2
            save_pillow(folder / f"{layout}.png", pixels, layout)
        save_pillow(folder / "fringe8.png", fringe_image(rng, height, width, 8), "RGBA")
        save_png16(folder / "fringe16.png", fringe_image(rng, height, width, 16), "LA")
        size = f"{out_width}x{out_height}"
        results[direction] = run_cli(
            "resize", direction, "-o", f"{direction}_out", "--size", size, cwd=root
        )
    return root, results


@pytest.mark.parametrize("direction", PIL_CASES)
@pytest.mark.parametrize("layout", ["L", "RGB", "RGBA"])
def test_lanczos3_matches_pil(pil_runs, direction, layout):
    """The default (lanczos3, antialias) against ``Image.resize(size, Image.LANCZOS)``.

    PIL rounds to 8 bits between its horizontal and vertical passes (and, for RGBA, keeps
    premultiplied colour in 8 bits), tiinterp resamples in float32 and rounds once; on
    these images that leaves the levels measured in tests/tolerances.py."""
    root, results = pil_runs
    assert results[direction].returncode == 0, results[direction].stderr
    size = PIL_CASES[direction][1]
    ours, _ = read_output(root / f"{direction}_out" / f"{layout}.png")
    with Image.open(root / direction / f"{layout}.png") as image:
        theirs = np.asarray(image.resize(size, Image.LANCZOS))
    theirs = theirs.reshape(ours.shape).astype(np.int32)
    difference = np.abs(ours.astype(np.int32) - theirs)
    if layout == "RGBA":
        assert difference[..., 3].max() <= tolerance("cli_pil_lanczos_max", "uint8")
        difference = difference[..., :3]
        prefix = "cli_pil_lanczos_rgba_colour"
    else:
        prefix = "cli_pil_lanczos"
    assert difference.max() <= tolerance(f"{prefix}_max", "uint8")
    assert difference.mean() <= tolerance(f"{prefix}_mean", "uint8")


@pytest.mark.parametrize("direction", PIL_CASES)
@pytest.mark.parametrize("name", ["fringe8.png", "fringe16.png"])
def test_transparent_pixels_do_not_fringe(pil_runs, direction, name):
    """Premultiplied resampling: every visible output pixel has exactly the rectangle's
    colour, however random the colour of the transparent pixels around it; fully
    transparent output pixels are 0."""
    root, _ = pil_runs
    pixels, _ = read_output(root / f"{direction}_out" / name)
    alpha = pixels[..., -1]
    top = np.iinfo(pixels.dtype).max
    assert np.count_nonzero((alpha > 0) & (alpha < top)) > 0  # partly transparent edges
    colour = (40000,) if pixels.dtype == np.uint16 else (255, 0, 0)
    assert np.all(pixels[alpha > 0][:, :-1] == colour)
    assert np.all(pixels[alpha == 0] == 0)


# --- Inputs and outputs -------------------------------------------------------------------------


def small_png(path, rng, layout="RGB", size=(12, 9)):
    channels = {"L": 1, "RGB": 3, "RGBA": 4}[layout]
    save_pillow(path, photo(rng, size[1], size[0], channels), layout)


def test_folder_glob_and_recursive_inputs(tmp_path, rng):
    (tmp_path / "album" / "nested").mkdir(parents=True)
    (tmp_path / "frames").mkdir()
    small_png(tmp_path / "album" / "a.png", rng)
    small_png(tmp_path / "album" / "B.JPG", rng)
    small_png(tmp_path / "album" / ".hidden.png", rng)
    small_png(tmp_path / "album" / "nested" / "c.png", rng)
    (tmp_path / "album" / "readme.txt").write_text("ignored")
    for name in ("f1.png", "f2.png", "f3.tif"):
        small_png(tmp_path / "frames" / name, rng)
    # The quoted pattern reaches tiinterp unexpanded, as from a shell that does not glob.
    result = run_cli("resize", "album", "frames/*.png", "-o", "out", "--size", "x6", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "B.JPG",
        "a.png",
        "f1.png",
        "f2.png",
    ]
    pixels, mode = read_output(tmp_path / "out" / "B.JPG")
    assert (mode, pixels.shape) == ("RGB", (6, 8, 3))  # x6 keeps 12x9's aspect ratio
    result = run_cli(
        "resize",
        "album",
        "-o",
        "deep",
        "--recursive",
        "--scale",
        "50%",
        "--format",
        "tiff",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    written = sorted(
        str(p.relative_to(tmp_path / "deep")) for p in (tmp_path / "deep").rglob("*.tif")
    )
    assert written == ["B.tif", "a.tif", os.path.join("nested", "c.tif")]
    pixels, mode = read_output(tmp_path / "deep" / "nested" / "c.tif")
    assert (mode, pixels.shape) == ("RGB", (5, 6, 3))  # 12x9 at 50%: 6x4.5 -> 6x5


def test_warmup_compiles_first_and_changes_no_output(tmp_path, rng):
    """``--warmup`` says what it compiled and how long it took, then writes the bytes a run
    without it writes (without antialias: fewer kernels to compile in the test)."""
    for name, (height, width) in {"a.png": (37, 53), "b.png": (41, 29)}.items():
        save_pillow(tmp_path / name, photo(rng, height, width, 3), "RGB")
    args = ("resize", "a.png", "b.png", "--size", "16x", "--mode", "bilinear", "--no-antialias")
    plain = run_cli(*args, "-o", "plain", cwd=tmp_path)
    warm = run_cli(*args, "-o", "warm", "--warmup", cwd=tmp_path)
    assert plain.returncode == warm.returncode == 0, warm.stderr
    note = warm.stderr.splitlines()[0]
    assert re.fullmatch(r"tiinterp: note: --warmup: bilinear's kernels compiled in \d+\.\d s", note)
    assert warm.stderr.splitlines()[1:] == [
        line.replace("plain", "warm") for line in plain.stderr.splitlines()
    ]
    for name in ("a.png", "b.png"):
        assert (tmp_path / "warm" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes()


def test_existing_outputs_need_force(tmp_path, rng):
    """Through the installed console script: without --force nothing at all is written
    when an output exists, and each existing one is named."""
    assert CONSOLE_SCRIPT.is_file(), "run pip install -e . to install the tiinterp command"
    small_png(tmp_path / "one.png", rng)
    small_png(tmp_path / "two.png", rng)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "two.png").write_bytes(b"keep me")
    args = ("resize", "one.png", "two.png", "-o", "out", "--scale", "2")
    result = run_cli(*args, cwd=tmp_path, console_script=True)
    assert result.returncode == 1
    assert (
        f"tiinterp: error: out{os.sep}two.png: exists (use --force to overwrite it)"
        in result.stderr
    )
    assert (tmp_path / "out" / "two.png").read_bytes() == b"keep me"
    assert not (tmp_path / "out" / "one.png").exists()
    # A private file stays private (it became 0644 through the temporary file).
    (tmp_path / "out" / "two.png").chmod(0o600)
    result = run_cli(*args, "--force", "--quiet", cwd=tmp_path, console_script=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == result.stderr == ""
    for name in ("one.png", "two.png"):
        pixels, mode = read_output(tmp_path / "out" / name)
        assert (mode, pixels.shape) == ("RGB", (18, 24, 3))
    assert stat.S_IMODE((tmp_path / "out" / "two.png").stat().st_mode) == 0o600
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["one.png", "two.png"]


def test_an_output_written_twice_is_an_error(tmp_path, rng):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        small_png(tmp_path / folder / "same.png", rng)
    small_png(tmp_path / "other.png", rng)
    result = run_cli(
        "resize", "a/same.png", "b/same.png", "other.png", "-o", "out", "--scale", "2", cwd=tmp_path
    )
    assert result.returncode == 1
    assert "would be written twice" in result.stderr
    assert f"a{os.sep}same.png" in result.stderr and f"b{os.sep}same.png" in result.stderr
    assert not (tmp_path / "out").exists()


def test_bad_arguments_exit_2_with_usage(tmp_path, rng):
    small_png(tmp_path / "one.png", rng)
    result = run_cli("resize", "one.png", "-o", "x.png", "--size", "12", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: tiinterp resize")
    assert "argument --size: expected WIDTHxHEIGHT" in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "x.png").exists()


BAD_ARGUMENTS = {
    "no size": (["resize", "a.png", "-o", "b.png"], "one of the arguments --size --scale"),
    "both sizes": (
        ["resize", "a.png", "-o", "b.png", "--size", "4x4", "--scale", "2"],
        "not allowed",
    ),
    "zero size": (["resize", "a.png", "-o", "b.png", "--size", "0x4"], "at least 1 pixel"),
    "bad scale": (
        ["resize", "a.png", "-o", "b.png", "--scale", "-2"],
        "--scale: expected a positive",
    ),
    "3-D mode": (
        ["resize", "a.png", "-o", "b.png", "--scale", "2", "--mode", "trilinear"],
        "invalid choice",
    ),
    "no output": (["resize", "a.png", "--scale", "2"], "-o/--output"),
    "antialias nearest": (
        ["resize", "a.png", "-o", "b.png", "--scale", "2", "--mode", "nearest", "--antialias"],
        "takes no antialias",
    ),
    "lanczos without": (
        ["resize", "a.png", "-o", "b.png", "--scale", "2", "--mode", "lanczos", "--no-antialias"],
        "--mode lanczos3 --no-antialias",
    ),
    "quality": (
        ["resize", "a.png", "-o", "b.jpg", "--scale", "2", "--quality", "101"],
        "from 1 to 100",
    ),
    "arch": (["resize", "a.png", "-o", "b.png", "--scale", "2", "--arch", "tpu"], "invalid choice"),
    "unknown extension": (["resize", "a.png", "-o", "b.bmp", "--scale", "2"], "not .bmp"),
    "no extension": (
        ["resize", "a.png", "-o", "b", "--scale", "2"],
        "cannot tell the output format",
    ),
    "file for many": (
        ["resize", "a.png", "c.png", "-o", "b.png", "--scale", "2"],
        "need an output folder",
    ),
    "format mismatch": (
        ["resize", "a.png", "-o", "b.png", "--scale", "2", "--format", "jpeg"],
        "disagrees",
    ),
    "no command": ([], "required: COMMAND"),
    # Numbers that overflowed later (OverflowError tracebacks) or that int() refuses.
    "huge height": (
        ["resize", "a.png", "-o", "b.png", "--size", "x" + "9" * 400],
        "--size: expected sizes of at most 2147483647 pixels, got 'x99999999999999999999999'"
        "... (401 characters)",
    ),
    "huge width": (
        ["resize", "a.png", "-o", "b.png", "--size", "2147483648x"],
        "expected sizes of at most 2147483647 pixels",
    ),
    "width of 5000 digits": (
        ["resize", "a.png", "-o", "b.png", "--size", "9" * 5000 + "x1"],
        "expected sizes of at most 2147483647 pixels",
    ),
    "huge scale": (
        ["resize", "a.png", "-o", "b.png", "--scale", "1e308"],
        "--scale: expected a scale of at most 2147483647",
    ),
    "infinite percentage": (
        ["resize", "a.png", "-o", "b.png", "--scale", "9" * 400 + "%"],
        "--scale: expected a positive number or percentage",
    ),
    "quality of 5000 digits": (
        ["resize", "a.png", "-o", "b.jpg", "--scale", "2", "--quality", "9" * 5000],
        "--quality: expected an integer from 1 to 100",
    ),
    "zero max pixels": (
        ["resize", "a.png", "-o", "b.png", "--scale", "2", "--max-pixels", "0"],
        "--max-pixels: expected a whole number of pixels, at least 1",
    ),
    "max pixels in words": (
        ["resize", "a.png", "-o", "b.png", "--scale", "2", "--max-pixels", "lots"],
        "--max-pixels: expected a whole number of pixels",
    ),
}


@pytest.mark.parametrize("case", BAD_ARGUMENTS)
def test_bad_argument_messages(case, tmp_path, rng, monkeypatch, capsys):
    """The argument checks, in-process (they all run before Taichi is used)."""
    argv, message = BAD_ARGUMENTS[case]
    small_png(tmp_path / "a.png", rng)
    small_png(tmp_path / "c.png", rng)
    monkeypatch.chdir(tmp_path)
    # The command lifts Pillow's image size limit for its own process only.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: tiinterp")
    assert message in captured.err


def test_big_numbers_that_are_fine():
    """The largest --size and --scale accepted, and --max-pixels of any length."""
    _, resize = cli.build_parser()
    base = ["a.png", "-o", "b.png"]
    args = resize.parse_args([*base, "--size", "x002147483647"])
    assert args.size == (None, 2147483647)
    assert args.max_pixels == 1 << 28  # the documented default
    assert resize.parse_args([*base, "--scale", "2147483647"]).scale == 2147483647.0
    args = resize.parse_args([*base, "--scale", "1", "--max-pixels", "9" * 5000])
    assert args.max_pixels >= 10**30  # more than any header can declare
    assert resize.parse_args([*base, "--scale", "1", "--max-pixels", " 007 "]).max_pixels == 7


def test_help_and_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["resize", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for expected in (
        *cli.RESIZE_MODES,
        "default: lanczos3",
        "--no-antialias",
        "640x",
        "--force",
        "--max-pixels N",
        "default: 268435456",
        "symbolic link",
        "SIGTERM",
    ):
        assert expected in text
    result = run_cli("--version", cwd=REPO, console_script=True)
    assert result.returncode == 0
    assert result.stdout.startswith("tiinterp 0.1.0 (Taichi 1.7.4, Pillow ")


def test_pillow_missing_is_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "PIL", None)  # makes `import PIL` raise ImportError
    monkeypatch.chdir(tmp_path)
    status = cli.main(["resize", "a.png", "-o", "b.png", "--scale", "2"])
    assert status == 1
    assert "pip install 'tiinterp[cli]'" in capsys.readouterr().err


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_on_a_terminal_lines_otherwise():
    terminal = FakeTerminal()
    progress = cli.Progress(3, quiet=False, stream=terminal)
    for name in ("a.png", "b.png"):
        progress.start(Path(name))
        progress.finished(f"{name} -> out/{name}")
    progress.start(Path("c.png"))
    progress.failed_one("c.png: broken")
    progress.close()
    text = terminal.getvalue()
    assert "\r2/3 [################........] b.png" in text
    assert "\r\x1b[Ktiinterp: error: c.png: broken\n" in text
    assert text.endswith("resized 2 of 3 images, 1 failed\n")
    assert "a.png -> out/a.png" not in text
    plain = FakeTerminal()
    plain.isatty = lambda: False
    progress = cli.Progress(3, quiet=False, stream=plain)
    progress.start(Path("a.png"))
    progress.finished("a.png -> out/a.png")
    progress.close()
    assert plain.getvalue() == "a.png -> out/a.png\n"
    quiet = FakeTerminal()
    progress = cli.Progress(3, quiet=True, stream=quiet)
    progress.start(Path("a.png"))
    progress.finished("a.png -> out/a.png")
    progress.note("a note")
    progress.close()
    assert quiet.getvalue() == ""


# --- EXIF orientation, whichever reader reads the file ------------------------------------------

# Where a PNG file can carry the orientation (Pillow reads it from each): chunks before and
# after the image data.
ORIENTATION_CARRIERS = {
    "eXIf": lambda o: ([(b"eXIf", exif_orientation(o)[6:])], []),
    "eXIf after IDAT": lambda o: ([], [(b"eXIf", exif_orientation(o)[6:])]),
    "zTXt raw profile": lambda o: (
        [
            (
                b"zTXt",
                b"Raw profile type exif\0\0"
                + zlib.compress(
                    f"\nexif\n{len(exif_orientation(o)):8}\n{exif_orientation(o).hex()}\n".encode()
                ),
            )
        ],
        [],
    ),
    "iTXt XMP": lambda o: (
        [
            (
                b"iTXt",
                b"XML:com.adobe.xmp\0\1\0\0\0"
                + zlib.compress(
                    b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description '
                    + f'tiff:Orientation="{o}"/></x:xmpmeta>'.encode()
                ),
            )
        ],
        [],
    ),
}


@pytest.mark.parametrize("carrier", ORIENTATION_CARRIERS)
def test_16_bit_png_orientation_as_pillow_applies_it_to_8_bit(tmp_path, rng, carrier):
    """Each of the 8 orientations, in 16-bit PNG (libpng) and 8-bit PNG (Pillow):
    turned exactly as ``ImageOps.exif_transpose`` turns the 8-bit file. The 16-bit files were
    read unturned, whatever their metadata."""
    for orientation in range(1, 9):
        for layout in ("L", "RGBA"):
            wide = rng.integers(0, 65536, (5, 7, len(layout))).astype(np.uint16)
            narrow = (wide >> 8).astype(np.uint8)
            before, after = ORIENTATION_CARRIERS[carrier](orientation)
            for name, pixels in (("16.png", wide), ("8.png", narrow)):
                data = png_file(pixels)
                (tmp_path / name).write_bytes(png_with_chunks(data, before, after))
            notes = []
            ours16 = _image_files.read_image(tmp_path / "16.png", notes).pixels
            ours8 = _image_files.read_image(tmp_path / "8.png", notes).pixels
            with Image.open(tmp_path / "8.png") as image:
                shown = ImageOps.exif_transpose(image)
                theirs = np.asarray(shown).reshape(shown.height, shown.width, -1)
            np.testing.assert_array_equal(ours8, theirs, err_msg=f"{orientation} {layout}")
            np.testing.assert_array_equal(ours16 >> 8, theirs, err_msg=f"{orientation} {layout}")
            assert notes == []


# TIFF 6.0's Orientation tag (EXIF's has the same values): where the stored rows and
# columns are on the screen, as turns of the stored (H, W, C) array, written from the
# specification ("the 0th row represents the visual ... side, the 0th column ..."), not
# from tiinterp's table.
SHOWN = {
    1: lambda a: a,  # row 0 top, column 0 left
    2: lambda a: a[:, ::-1],  # row 0 top, column 0 right
    3: lambda a: a[::-1, ::-1],  # row 0 bottom, column 0 right
    4: lambda a: a[::-1],  # row 0 bottom, column 0 left
    5: lambda a: a.swapaxes(0, 1),  # row 0 left, column 0 top
    6: lambda a: a.swapaxes(0, 1)[:, ::-1],  # row 0 right, column 0 top
    7: lambda a: a.swapaxes(0, 1)[::-1, ::-1],  # row 0 right, column 0 bottom
    8: lambda a: a.swapaxes(0, 1)[::-1],  # row 0 left, column 0 bottom
}


def tiff_kinds(rng, height, width):
    """name -> (stored pixels, tifffile.imwrite's options, Pillow reads it fully): one TIFF
    file of each kind tiinterp reads, by each of its readers (Pillow: 8-bit layouts, palette,
    1-bit, 16-bit gray of both byte orders; tifffile: 16-bit colour)."""

    def levels(channels, dtype=np.uint8, top=None):
        top = np.iinfo(dtype).max if top is None else top
        return rng.integers(0, top + 1, (height, width, channels)).astype(dtype).squeeze()

    gray, colour = {"photometric": "minisblack"}, {"photometric": "rgb"}
    alpha = {"extrasamples": [2]}
    return {
        "gray8": (levels(1), gray, True),
        "graya8": (levels(2), {**gray, **alpha}, True),
        "rgb8": (levels(3), colour, True),
        "rgba8": (levels(4), {**colour, **alpha}, True),
        "cmyk8": (levels(4), {"photometric": "separated"}, True),
        "palette": (
            levels(1, top=15),
            {"photometric": "palette", "colormap": rng.integers(0, 65536, (3, 256), np.uint16)},
            True,
        ),
        "bilevel": (levels(1, top=1), {**gray, "bitspersample": 1}, True),
        "gray16": (levels(1, np.uint16), gray, True),
        "gray16 big-endian": (levels(1, np.uint16), {**gray, "byteorder": ">"}, True),
        "graya16": (levels(2, np.uint16), {**gray, **alpha}, False),
        "rgb16": (levels(3, np.uint16), colour, False),
        "rgba16": (levels(4, np.uint16), {**colour, **alpha}, False),
    }


def as_read(image, like):
    """A Pillow image as tiinterp reads it, in the layout of ``like`` (a Raster)."""
    if image.mode not in _image_files.GRAY16_MODES and image.mode != like.layout:
        image = image.convert(like.layout)
    return np.asarray(image).reshape(image.height, image.width, -1)


@pytest.mark.parametrize("compression", [None, "lzw"])
def test_tiff_orientation_is_applied_once_as_a_viewer_shows_it(tmp_path, rng, compression):
    """Each of the 8 orientations in a TIFF file of every kind, its pixels stored unturned
    (tifffile writes them as given): read as the TIFF specification shows them, and as
    Pillow's ImageOps.exif_transpose shows the file (where Pillow reads it fully). Pillow
    turns TIFF pixels as it loads them, and tiinterp turned them again: 3 came out as
    stored, 6 and 8 turned by 180 degrees with width and height swapped. Uncompressed files
    are the ones Pillow maps into memory when opened by name, which scrambles 5 to 8 (Note
    [TIFF orientation]); Pillow is given them in memory here (BytesIO) to get the view."""
    for kind, (stored, options, pillow_reads) in tiff_kinds(rng, 5, 7).items():
        if kind == "bilevel" and compression:
            continue  # tifffile compresses no 1-bit image
        plain = tmp_path / f"{kind}.tif"
        tifffile.imwrite(plain, stored, compression=compression, metadata=None, **options)
        unturned = _image_files.read_image(plain, [])
        if kind not in ("palette", "bilevel"):
            np.testing.assert_array_equal(unturned.pixels, stored.reshape(5, 7, -1), kind)
        for orientation in range(1, 9):
            path = tmp_path / f"{kind} {orientation}.tif"
            tag = [(0x0112, "H", 1, orientation, True)]
            tifffile.imwrite(
                path, stored, compression=compression, metadata=None, extratags=tag, **options
            )
            notes = []
            ours = _image_files.read_image(path, notes)
            what = f"{kind}, orientation {orientation}"
            assert ours.layout == unturned.layout, what
            np.testing.assert_array_equal(ours.pixels, SHOWN[orientation](unturned.pixels), what)
            assert notes == [], what
            if pillow_reads:
                with Image.open(io.BytesIO(path.read_bytes())) as image:
                    shown = as_read(ImageOps.exif_transpose(image), ours)
                np.testing.assert_array_equal(ours.pixels, shown, what)


def test_jpeg_orientation_is_still_applied_once(tmp_path, rng):
    """JPEG's EXIF orientation, which Pillow does not apply as it loads the pixels: applied
    by tiinterp, once, for each of the 8 values and each JPEG layout, as
    ImageOps.exif_transpose shows the file and as the specification turns the same image
    saved without the tag (JPEG encoding is deterministic: the same pixels)."""
    for layout in ("L", "RGB", "CMYK"):
        image = Image.fromarray(photo(rng, 6, 9, len(layout)).squeeze(), mode=layout)
        image.save(tmp_path / "plain.jpg", quality=95)
        unturned = _image_files.read_image(tmp_path / "plain.jpg", []).pixels
        for orientation in range(1, 9):
            path = tmp_path / f"{layout}{orientation}.jpg"
            image.save(path, quality=95, exif=exif_orientation(orientation))
            ours = _image_files.read_image(path, []).pixels
            what = f"{layout}, orientation {orientation}"
            np.testing.assert_array_equal(ours, SHOWN[orientation](unturned), what)
            with Image.open(path) as opened:
                shown = ImageOps.exif_transpose(opened)
                shown = np.asarray(shown).reshape(shown.height, shown.width, -1)
            np.testing.assert_array_equal(ours, shown, what)


def test_damaged_exif_leaves_the_image_unturned_with_a_note(tmp_path, rng):
    """Damaged EXIF data (which failed the whole 8-bit PNG image, and printed Pillow's
    warning) leaves the image unturned, with a note and no warning."""
    pixels = rng.integers(0, 65536, (5, 7, 3)).astype(np.uint16)
    damaged = [(b"eXIf", b"not EXIF at all")]
    for name, stored in (("16.png", pixels), ("8.png", (pixels >> 8).astype(np.uint8))):
        data = png_with_chunks(png_file(stored), damaged)
        (tmp_path / name).write_bytes(data)
        notes = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = _image_files.read_image(tmp_path / name, notes).pixels
        np.testing.assert_array_equal(ours, stored)
        assert notes == ["damaged EXIF data: its orientation, if any, is not applied"]
        assert caught == []
    # An IFD that claims 65535 entries: Pillow's "Corrupt EXIF data" UserWarning, which went
    # to stderr.
    cut = b"Exif\0\0MM\0*\0\0\0\x08\xff\xff"
    Image.fromarray(photo(rng, 16, 24, 3)).save(tmp_path / "cut.jpg", exif=cut)
    notes = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _image_files.read_image(tmp_path / "cut.jpg", notes).pixels.shape == (16, 24, 3)
    assert caught == []
    assert notes == ["Pillow: Corrupt EXIF data. Expecting to read 12 bytes but only got 0."]


def test_unclosed_files_of_other_objects_are_no_notes(tmp_path, rng, monkeypatch):
    """read_image records the warnings of the whole process while it reads (Pillow's about
    damaged metadata become notes): the collector's ResourceWarning about a file some other
    object left open, in any thread, became a note on the image ("Pillow: unclosed file
    <_io.FileIO ...>"), and made a test of the notes fail now and then."""
    small_png(tmp_path / "in.png", rng)
    read = _image_files._read_image

    def collected_meanwhile(*args):
        warnings.warn("unclosed file <_io.FileIO name=12 mode='wb'>", ResourceWarning, 2)
        return read(*args)

    monkeypatch.setattr(_image_files, "_read_image", collected_meanwhile)
    notes = []
    _image_files.read_image(tmp_path / "in.png", notes)
    assert notes == []


# --- White-is-zero gray TIFF --------------------------------------------------------------------


def white_is_zero_kinds(rng):
    """name -> (stored levels (H, W, C), tifffile.imwrite's options): TIFF files whose gray
    is white-is-zero (PhotometricInterpretation 0: 0 is white), of every depth and reader:
    Pillow's 1-, 4- and 8-bit gray (which it inverts) and 16-bit little-endian gray, and
    tifffile's 16-bit big-endian gray and gray+alpha (8- and 16-bit, plain and
    premultiplied alpha), which Pillow does not open. Every level is in the 16-bit files,
    white (0) and black (65535) first."""
    white = {"photometric": "miniswhite"}
    gray16 = np.concatenate([[0, 65535], rng.permutation(65536)[: 5 * 7 - 2]])
    gray16 = gray16.astype(np.uint16).reshape(5, 7, 1)
    alpha16 = rng.integers(1, 65536, (5, 7, 1)).astype(np.uint16)
    premultiplied = np.floor(gray16 * (alpha16 / 65535.0)).astype(np.uint16)
    gray8 = (gray16 >> 8).astype(np.uint8)
    return {
        "1-bit": (np.where(gray8 > 127, 1, 0).astype(np.uint8), {**white, "bitspersample": 1}),
        "4-bit": (gray8 >> 4, {**white, "bitspersample": 4}),
        "8-bit": (gray8, white),
        "16-bit": (gray16, white),
        "16-bit LZW": (gray16, {**white, "compression": "lzw"}),
        "16-bit big-endian": (gray16, {**white, "byteorder": ">"}),
        "8-bit gray+alpha": (
            np.concatenate([gray8, (alpha16 >> 8).astype(np.uint8)], -1),
            {**white, "extrasamples": [2]},
        ),
        "16-bit gray+alpha": (
            np.concatenate([gray16, alpha16], -1),
            {**white, "extrasamples": [2]},
        ),
        "16-bit premultiplied gray+alpha": (
            np.concatenate([premultiplied, alpha16], -1),
            {**white, "extrasamples": [1]},
        ),
    }


def test_white_is_zero_gray_looks_as_in_a_viewer(tmp_path, rng):
    """White-is-zero gray TIFF read as a viewer shows it: stored 0 is white. The 16-bit
    gray file came out as its negative (Pillow reads it as stored, and tiinterp wrote it as
    black-is-zero), big-endian and gray+alpha ones were refused. Each is read as the
    specification says (the largest level less the stored one; premultiplied gray made
    plain first), agrees with Pillow's reading of the 8-bit file (Pillow inverts gray of 1
    to 8 bits), and is written (as black-is-zero gray, TIFF and PNG) looking the same."""
    kinds = white_is_zero_kinds(rng)
    for kind, (stored, options) in kinds.items():
        path = tmp_path / f"{kind}.tif"
        tifffile.imwrite(path, stored.squeeze(), metadata=None, **options)
        notes = []
        ours = _image_files.read_image(path, notes)
        top = {"1-bit": 1, "4-bit": 15}.get(kind, np.iinfo(stored.dtype).max)
        gray = stored[..., :1].astype(np.float64)
        if "premultiplied" in kind:
            gray = np.floor(gray * top / stored[..., 1:] + 0.5)
        shown = np.concatenate([top - gray, stored[..., 1:]], -1)
        scale = {"1-bit": 255, "4-bit": 17}.get(kind, 1)  # Pillow's 8-bit gray
        np.testing.assert_array_equal(ours.pixels, shown * scale, kind)
        assert (ours.layout, notes) == ("LA" if stored.shape[2] == 2 else "L", []), kind
        if ours.bits == 16 and "premultiplied" not in kind:
            # As Pillow shows the 8-bit file of the same levels' high bytes.
            narrow = tmp_path / "narrow.tif"
            tifffile.imwrite(narrow, (stored[..., 0] >> 8).astype(np.uint8), **white_8(options))
            with Image.open(narrow) as image:
                np.testing.assert_array_equal(ours.pixels[..., 0] >> 8, np.asarray(image), kind)
        for image_format in ("TIFF", "PNG"):
            out = tmp_path / f"out.{image_format.lower()}"
            _image_files.write_image(ours, out, image_format, [], quality=92, source=path)
            again = _image_files.read_image(out, [])
            np.testing.assert_array_equal(again.pixels, ours.pixels, f"{kind} {image_format}")
    # White stays white.
    assert _image_files.read_image(tmp_path / "16-bit.tif", []).pixels[0, :2, 0].tolist() == [
        65535,
        0,
    ]


def white_8(options):
    """The options of an 8-bit white-is-zero gray file (no alpha, the same byte order)."""
    return {"photometric": "miniswhite", "byteorder": options.get("byteorder", "<")}


# --- Decompression bombs and --max-pixels -------------------------------------------------------


def patched(data, offset, fmt, *values):
    return data[:offset] + struct.pack(fmt, *values) + data[offset + struct.calcsize(fmt) :]


def ifd_entry(data, tag):
    """Where the first IFD of a little-endian TIFF file has ``tag``'s entry."""
    (ifd_at,) = struct.unpack("<I", data[4:8])
    (count,) = struct.unpack("<H", data[ifd_at : ifd_at + 2])
    for entry in range(ifd_at + 2, ifd_at + 2 + 12 * count, 12):
        if struct.unpack("<H", data[entry : entry + 2])[0] == tag:
            return entry
    raise AssertionError(f"no tag {tag}")


def bomb(kind, rng):
    """A small file of format ``kind`` whose header declares a huge image."""
    if kind == "png8":
        return png_declaring(100_000, 100_000)
    if kind in ("png16 gray", "png16 rgba"):
        return png_declaring(100_000, 100_000, 16, 0 if kind == "png16 gray" else 6)
    if kind == "tiff":
        tags = [
            (256, 4, 100_000),
            (257, 4, 100_000),
            (258, 3, 8),
            (259, 3, 1),
            (262, 3, 1),
            (273, 4, 8),
            (277, 3, 1),
            (278, 4, 100_000),
            (279, 4, 16),
        ]
        ifd = struct.pack("<H", len(tags))
        for tag, kind_, value in tags:
            ifd += struct.pack("<HHII", tag, kind_, 1, value)
        return b"II*\0" + struct.pack("<I", 24) + bytes(16) + ifd + bytes(4)
    if kind in ("tiff16 gray+alpha", "tiff16 rgba"):
        # tifffile's file of 8x8 pixels, its ImageWidth and ImageLength (LONG) made 100000.
        buffer = io.BytesIO()
        layout = "LA" if kind == "tiff16 gray+alpha" else "RGBA"
        save_tiff16(buffer, photo(rng, 8, 8, len(layout), np.uint16), layout)
        data = buffer.getvalue()
        for tag in (256, 257):
            entry = ifd_entry(data, tag)
            assert struct.unpack("<H", data[entry + 2 : entry + 4]) == (4,)  # LONG
            data = patched(data, entry + 8, "<I", 100_000)
        return data
    buffer = io.BytesIO()
    small = Image.fromarray(photo(rng, 8, 8, 3))
    pillow_format = {"jpeg": "JPEG", "gif": "GIF", "bmp": "BMP", "webp": "WEBP"}[kind]
    small.save(buffer, pillow_format, **({"lossless": True} if kind == "webp" else {}))
    data = buffer.getvalue()
    if kind == "jpeg":  # SOF0: marker, length, precision, height, width
        return patched(data, data.index(b"\xff\xc0") + 5, ">HH", 65535, 65535)
    if kind == "gif":  # the logical screen, then the image descriptor
        data = patched(data, 6, "<HH", 65535, 65535)
        return patched(data, data.index(b"\x2c") + 5, "<HH", 65535, 65535)
    if kind == "bmp":  # BITMAPINFOHEADER's width and height
        return patched(data, 18, "<ii", 100_000, 100_000)
    # WebP lossless: 14-bit width - 1 and height - 1 after the VP8L signature byte
    return patched(data, 21, "<I", (data[24] & 0xF0) << 24 | 0x3FFF << 14 | 0x3FFF)


BOMB_MESSAGES = {
    "png8": "100000x100000, 10,000,000,000 pixels",
    "png16 gray": "100000x100000, 10,000,000,000 pixels",
    "png16 rgba": "100000x100000, 10,000,000,000 pixels",
    "jpeg": "65535x65535, 4,294,836,225 pixels",
    "tiff": "100000x100000, 10,000,000,000 pixels",
    # tifffile's header (Pillow opens no such file), Pillow's (it opens 16-bit RGBA).
    "tiff16 gray+alpha": "100000x100000, 10,000,000,000 pixels",
    "tiff16 rgba": "100000x100000, 10,000,000,000 pixels",
    # Formats the command does not read: refused from their signature, header unparsed.
    "gif": "not a PNG, JPEG or TIFF image",
    "bmp": "not a PNG, JPEG or TIFF image",
    "webp": "not a PNG, JPEG or TIFF image",
}


@pytest.mark.parametrize("kind", BOMB_MESSAGES)
def test_decompression_bombs_are_refused_before_decoding(tmp_path, rng, monkeypatch, kind):
    """A header declaring billions of pixels in a file of a few hundred bytes: refused from
    the header. Decoding (Pillow's load, libpng's through decode_png, tifffile's) fails the
    test instead of allocating gigabytes."""

    def decoded(*args, **kwargs):
        raise AssertionError("the image was decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", decoded)
    monkeypatch.setattr(_image_files, "decode_png", decoded)
    monkeypatch.setattr(tifffile.TiffPage, "asarray", decoded)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)  # as the command sets it
    path = tmp_path / "bomb"
    path.write_bytes(bomb(kind, rng))
    assert path.stat().st_size < 2000
    with pytest.raises(ImageError) as refusal:
        _image_files.read_image(path, [])
    assert BOMB_MESSAGES[kind] in str(refusal.value)
    if kind in ("png8", "jpeg", "tiff", "tiff16 rgba"):
        with Image.open(path) as image:  # Pillow reads the same header
            assert f"{image.width}x{image.height}" in str(refusal.value)
        assert "over the limit of 268,435,456 (--max-pixels raises it)" in str(refusal.value)


def resize_args(**options):
    defaults = {"size": None, "scale": 1.0, "mode": "nearest", "quality": 92}
    return argparse.Namespace(**{**defaults, "max_pixels": cli.DEFAULT_MAX_PIXELS, **options})


def resize_one(job, args):
    """One job through the command's three stages, in this thread; its report line."""
    raster, planes, notes = cli.read_job(job, args.max_pixels)
    result, line = cli.resize_planes(job, raster, planes, args, True)
    cli.write_job(job, result, args.quality, notes)
    return line


def copy_instead_of_resampling(monkeypatch):
    """No Taichi: the "resampled" planes are the input's."""
    monkeypatch.setattr(cli, "resample_planes", lambda planes, width, height, *rest: planes)


def test_max_pixels_limits_inputs_and_outputs(tmp_path, rng, monkeypatch):
    """``--max-pixels`` for the input's declared size and the output's, in the command's
    stages (the resampling replaced by a copy: no Taichi here). Outputs too large for a
    float (an OverflowError traceback before) are refused the same way."""
    copy_instead_of_resampling(monkeypatch)
    small_png(tmp_path / "in.png", rng, size=(12, 9))  # 108 pixels
    job = cli.Job(tmp_path / "in.png", tmp_path / "out.png", "PNG")
    refusal = r"in.png: the image is 12x9, 108 pixels, over the limit of 107 \(--max-pixels"
    with pytest.raises(cli.FileFailure, match=refusal):
        resize_one(job, resize_args(max_pixels=107))
    assert not job.target.exists()
    assert "12x9 -> 12x9" in resize_one(job, resize_args(max_pixels=108))
    with pytest.raises(cli.FileFailure, match=r"the output is 24x18, 432 pixels, over the limit"):
        resize_one(job, resize_args(scale=2.0, max_pixels=431))
    largest = resize_args(scale=None, size=(None, cli.MAX_SIDE))
    with pytest.raises(cli.FileFailure, match=r"the output is 2863311529x2147483647, "):
        resize_one(job, largest)
    with pytest.raises(cli.FileFailure, match=r"the output is 25769803764x19327352823, "):
        resize_one(job, resize_args(scale=float(cli.MAX_SIDE)))


# --- Overwriting: permissions, links, full and read-only disks ----------------------------------


def rgb_raster(rng, bits=8):
    return Raster(photo(rng, 6, 5, 3, np.uint16 if bits == 16 else np.uint8), "RGB")


def write(raster, path):
    _image_files.write_image(raster, path, "PNG", [], quality=92, source=path)


def listing(folder):
    return sorted(path.name for path in folder.iterdir())


def test_overwriting_keeps_permissions_and_replaces_links_not_their_files(tmp_path, rng):
    """A replaced file keeps its mode (and owner and group: as root they are changed to
    check that), a new one gets the umask's; a symbolic link is replaced by the new file,
    the file it points to untouched (as mv, not cp); other names of a hard link keep the
    old content. No temporary file is left."""
    private = tmp_path / "private.png"
    private.write_bytes(b"old")
    for mode in (0o600, 0o640, 0o755, 0o444):
        private.chmod(mode)
        if os.geteuid() == 0:
            os.chown(private, 12345, 23456)
        before = private.stat()
        write(rgb_raster(rng), private)
        after = private.stat()
        assert (stat.S_IMODE(after.st_mode), after.st_uid, after.st_gid) == (
            mode,
            before.st_uid,
            before.st_gid,
        )
        assert after.st_ino != before.st_ino  # replaced, not written in place
    previous = os.umask(0o027)
    try:
        write(rgb_raster(rng), tmp_path / "new.png")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.png").stat().st_mode) == 0o640
    target = tmp_path / "target.png"
    target.write_bytes(b"pointed to")
    target.chmod(0o600)
    (tmp_path / "link.png").symlink_to(target)
    (tmp_path / "dangling.png").symlink_to(tmp_path / "nowhere.png")
    os.link(target, tmp_path / "hard.png")
    for name in ("link.png", "dangling.png", "hard.png"):
        write(rgb_raster(rng, 16), tmp_path / name)
        assert not (tmp_path / name).is_symlink()
        assert read_output(tmp_path / name)[1] == "PNG16 RGB"
    assert target.read_bytes() == b"pointed to"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not (tmp_path / "nowhere.png").exists()
    assert listing(tmp_path) == [
        "dangling.png",
        "hard.png",
        "link.png",
        "new.png",
        "private.png",
        "target.png",
    ]


def test_existing_links_need_force(tmp_path):
    """A symbolic link at an output is an existing output, dangling or not (a dangling
    one was replaced without --force)."""
    (tmp_path / "target.png").write_bytes(b"x")
    (tmp_path / "link.png").symlink_to(tmp_path / "target.png")
    (tmp_path / "dangling.png").symlink_to(tmp_path / "nowhere.png")
    jobs = [
        cli.Job(tmp_path / "in.png", tmp_path / name, "PNG")
        for name in ("link.png", "dangling.png")
    ]
    for job, message in zip(jobs, cli.check_targets(jobs, force=False), strict=True):
        assert message == (
            f"{job.target}: exists, a symbolic link (use --force to replace the link itself; "
            "the file it points to is left alone)"
        )
    assert cli.check_targets(jobs, force=True) == []


class FullDisk(io.FileIO):
    """A file on a disk with ``room`` bytes free: writes beyond fail with ENOSPC, as the
    kernel's do."""

    room = 100

    def write(self, data):
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


# The library that writes the file: (bits, format) of the image it is given.
DISK_WRITERS = {"Pillow": (8, "PNG"), "libpng": (16, "PNG"), "tifffile": (16, "TIFF")}


@pytest.mark.parametrize("writer", DISK_WRITERS)
@pytest.mark.parametrize("failure", ["write", "fsync", "read-only", "no permission"])
def test_full_or_read_only_disks_leave_no_file(tmp_path, rng, monkeypatch, writer, failure):
    """ENOSPC from a write or from fsync (where delayed allocation and quotas report it),
    EROFS and EACCES when the temporary file is created: an OSError naming the cause, the
    existing output intact (content and mode), no temporary file left."""
    bits, image_format = DISK_WRITERS[writer]
    out = tmp_path / f"out.{image_format.lower()}"
    out.write_bytes(b"old")
    out.chmod(0o600)
    code = {"write": errno.ENOSPC, "fsync": errno.ENOSPC, "read-only": errno.EROFS}.get(
        failure, errno.EACCES
    )

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    if failure == "write":
        monkeypatch.setattr(os, "fdopen", lambda fd, mode: io.BufferedWriter(FullDisk(fd, "w")))
    elif failure == "fsync":
        monkeypatch.setattr(os, "fsync", fail)
    else:
        monkeypatch.setattr(tempfile, "mkstemp", fail)
    with pytest.raises(OSError) as error:
        _image_files.write_image(
            rgb_raster(rng, bits), out, image_format, [], quality=92, source=out
        )
    assert error.value.errno == code
    assert listing(tmp_path) == [out.name]
    assert out.read_bytes() == b"old"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_unreadable_input_and_full_disk_are_one_error_line(tmp_path, rng, monkeypatch):
    """Through the command's stages (the resampling replaced by a copy: no Taichi here): an
    input that cannot be opened (EACCES; root reads every file, so it is simulated) and a
    full disk are each one error line naming the file and the cause."""
    copy_instead_of_resampling(monkeypatch)
    small_png(tmp_path / "in.png", rng)
    job = cli.Job(tmp_path / "in.png", tmp_path / "out" / "in.png", "PNG")

    def forbidden(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    with monkeypatch.context() as patch:
        patch.setattr(_image_files, "open", forbidden, raising=False)
        with pytest.raises(cli.FileFailure) as failure:
            resize_one(job, resize_args())
    assert str(failure.value) == f"{job.source}: Permission denied"
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: io.BufferedWriter(FullDisk(fd, "w")))
    with pytest.raises(cli.FileFailure) as failure:
        resize_one(job, resize_args())
    assert str(failure.value) == f"{job.target}: No space left on device"
    assert listing(tmp_path / "out") == []


# --- The pipeline: decoding and encoding in worker threads --------------------------------------


def pipeline_folder(tmp_path, rng, count, broken=()):
    """``count`` small PNGs of different sizes (those in ``broken`` are not images)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(count):
        if i in broken:
            (folder / f"image{i:02d}.png").write_bytes(b"not a png")
        else:
            small_png(folder / f"image{i:02d}.png", rng, size=(5 + i, 4 + 2 * i))
    return folder


def test_reading_starts_before_taichi_and_lines_keep_the_input_order(
    tmp_path, rng, monkeypatch, capsys
):
    """Note [The command's pipeline]: the images are being read while Taichi starts, with a
    short switch interval, and the report (written images and failures alike) keeps the
    order of the inputs, whatever order the worker threads finish in. The resampling is a
    copy (no Taichi here)."""
    folder = pipeline_folder(tmp_path, rng, 7, broken=(2, 5))
    copy_instead_of_resampling(monkeypatch)
    read = cli.read_job
    reads_done = []

    def slow_read(job, max_pixels):
        if job.source.name == "image00.png":
            time.sleep(0.2)  # the first input ends last
        try:
            return read(job, max_pixels)
        finally:
            reads_done.append(job.source.name)

    reads_at_start, switching = [], []
    switch_interval = sys.getswitchinterval()

    def start_taichi(arch, progress):
        deadline = time.monotonic() + 30
        while len(reads_done) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        reads_at_start.append(len(reads_done))
        switching.append(sys.getswitchinterval())
        return True

    monkeypatch.setattr(cli, "read_job", slow_read)
    monkeypatch.setattr(cli, "start_taichi", start_taichi)
    status = cli.main(["resize", str(folder), "-o", str(tmp_path / "out"), "--scale", "1"])
    lines = capsys.readouterr().err.splitlines()
    assert status == 1
    assert reads_at_start[0] >= 3
    # Readers get the GIL back quickly while the command runs (the Note), and only then.
    assert switching == [pytest.approx(cli.SWITCH_SECONDS)]
    assert sys.getswitchinterval() == switch_interval
    names = [re.search(r"image\d\d", line)[0] for line in lines]
    assert names == [f"image{i:02d}" for i in range(7)], lines
    assert [i for i, line in enumerate(lines) if "error" in line] == [2, 5]
    assert listing(tmp_path / "out") == [f"image{i:02d}.png" for i in (0, 1, 3, 4, 6)]


def test_waiting_images_stay_within_the_read_budget(tmp_path, rng, monkeypatch, capsys):
    """With a budget smaller than any image, images are still all written, one decoded
    image waiting at a time: reads take their share in the order of the inputs, so the one
    the main thread waits for is never held up (no deadlock)."""
    folder = pipeline_folder(tmp_path, rng, 8)
    copy_instead_of_resampling(monkeypatch)
    monkeypatch.setattr(cli, "start_taichi", lambda arch, progress: True)
    monkeypatch.setattr(cli, "READ_BUDGET_BYTES", 1)
    most, budgets = [], []
    take = cli.ReadBudget.take

    def recorded(budget, turn, nbytes):
        budgets.append(budget)
        take(budget, turn, nbytes)
        most.append(budget.used // nbytes)

    monkeypatch.setattr(cli.ReadBudget, "take", recorded)
    argv = ["resize", str(folder), "-o", str(tmp_path / "out"), "--scale", "1"]
    status = []
    command = threading.Thread(target=lambda: status.append(cli.main(argv)))
    command.start()
    command.join(60)
    deadlocked = command.is_alive()
    for budget in budgets:  # frees a deadlocked run, so that the test can fail
        budget.close()
    command.join()
    assert not deadlocked
    assert status == [0], capsys.readouterr().err
    assert len(listing(tmp_path / "out")) == 8
    assert most == [1] * 8


def test_a_stopped_command_abandons_the_writes_of_its_workers(tmp_path, rng):
    """abandon_writes (what the main thread does on a stop signal) removes the temporary
    file of a write running in another thread and makes that write fail, leaving the file
    it would have replaced intact; writes complete again after accept_writes."""
    target = tmp_path / "out.png"
    target.write_bytes(b"old")
    encoding, release = threading.Event(), threading.Event()
    encode = _image_files._encode_with_pillow

    def held(raster, image_format, file, *args):
        encode(raster, image_format, file, *args)
        encoding.set()
        release.wait(30)

    outcome = []

    def writer():
        try:
            write(rgb_raster(rng), target)
        except _image_files.WritesAbandoned as error:
            outcome.append(error)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_image_files, "_encode_with_pillow", held)
        thread = threading.Thread(target=writer)
        thread.start()
        assert encoding.wait(30)
        assert len([name for name in listing(tmp_path) if name.startswith(".")]) == 1
        _image_files.abandon_writes()
        assert listing(tmp_path) == ["out.png"]
        release.set()
        thread.join(30)
    try:
        assert len(outcome) == 1
        assert listing(tmp_path) == ["out.png"]
        assert target.read_bytes() == b"old"
    finally:
        _image_files.accept_writes()
    write(rgb_raster(rng), target)
    assert read_output(target)[0].shape[2] == 3


# --- Signals ------------------------------------------------------------------------------------

# The command with each stage made to wait (for a file named "go") at a known point, so that
# a signal lands there: reading (the file open, its header read), resizing, writing (the
# encoded image in the hidden temporary file, not yet renamed). Only that waiting and the
# resampling (a copy, so that no Taichi kernel is compiled) are replaced; the signal
# handling and the clean-up are the command's.
SIGNAL_DRIVER = """
import signal, sys, time
from pathlib import Path

stage, folder, hangup = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
# As from an interactive shell (a background job of a script, as in CI, inherits SIGINT
# ignored), or under nohup (SIGHUP ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.signal(signal.SIGHUP, signal.SIG_IGN if hangup == "ignored" else signal.SIG_DFL)

import tiinterp
from tiinterp.cli import image_files as _image_files
from tiinterp.cli import command as cli

def wait(here):
    if here == stage:
        (folder / "ready").write_text(stage)
        while not (folder / "go").exists():
            time.sleep(0.005)

tiinterp.init = lambda arch: None
pillow_raster = _image_files._pillow_raster
encode = _image_files._encode_with_pillow

def reading(*args):
    wait("reading")
    return pillow_raster(*args)

def resizing(planes, *args):
    wait("resizing")
    return planes

def writing(raster, image_format, file, *args):
    encode(raster, image_format, file, *args)
    file.flush()
    wait("writing")

_image_files._pillow_raster = reading
cli.resample_planes = resizing
_image_files._encode_with_pillow = writing
sys.exit(cli.main(sys.argv[4:]))
"""

STAGES = ("reading", "resizing", "writing")
STOP_SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP}


def test_a_signal_while_the_temporary_file_is_made_and_a_stuck_stop(tmp_path, rng, monkeypatch):
    """The handler, called as Python calls it: a signal that lands just as mkstemp has made
    the temporary file (before its name is known to the writer) is raised once the name is
    known, and the file removed; a second signal during the clean-up is ignored; one long
    after (the command did not stop) ends the process by the signal at once. The handlers
    are restored afterwards."""
    made = tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        result = made(*args, **kwargs)
        _image_files._on_signal(signal.SIGTERM, None)
        return result

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_signal)
    before = {signum: signal.getsignal(signum) for signum in _image_files.STOP_SIGNALS}
    with _image_files.signals_stop_the_command():
        with pytest.raises(_image_files.Interrupted) as stop:
            write(rgb_raster(rng), tmp_path / "out.png")
        assert stop.value.signum == signal.SIGTERM
        assert listing(tmp_path) == []
        assert _image_files._on_signal(signal.SIGINT, None) is None  # ignored
        calls = []
        with monkeypatch.context() as patch:
            patch.setattr(signal, "signal", lambda *args: calls.append(("signal", *args)))
            patch.setattr(signal, "raise_signal", lambda *args: calls.append(("raise", *args)))
            patch.setattr(_image_files._signals, "stopping_since", time.monotonic() - 60)
            _image_files._on_signal(signal.SIGINT, None)
        assert calls == [("signal", signal.SIGINT, signal.SIG_DFL), ("raise", signal.SIGINT)]
    assert {signum: signal.getsignal(signum) for signum in before} == before


def wait_for(path, process, seconds=60):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s"
        time.sleep(0.005)


def test_signals_at_every_stage_leave_no_partial_file(tmp_path, rng):
    """SIGINT, SIGTERM and SIGHUP while reading, resizing and writing (the runs side by side):
    the output being replaced (--force) is intact and keeps its mode, no hidden temporary
    file is left, stderr is one line, and the process ends by the signal (the shell's
    128 + N). Under nohup (SIGHUP ignored) SIGHUP changes nothing."""
    small_png(tmp_path / "in.png", rng)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    runs = {}
    cases = [(name, stage) for name in STOP_SIGNALS for stage in STAGES] + [("nohup", "writing")]
    for name, stage in cases:
        folder = tmp_path / f"{name}-{stage}"
        (folder / "out").mkdir(parents=True)
        (folder / "out" / "in.png").write_bytes(b"old")
        (folder / "out" / "in.png").chmod(0o600)
        command = [
            sys.executable,
            "-c",
            SIGNAL_DRIVER,
            stage,
            str(folder),
            "ignored" if name == "nohup" else "default",
            "resize",
            str(tmp_path / "in.png"),
            "-o",
            str(folder / "out" / "in.png"),
            "--scale",
            "1",
            "--force",
        ]
        runs[name, stage] = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    try:
        for (name, stage), process in runs.items():
            folder = tmp_path / f"{name}-{stage}"
            wait_for(folder / "ready", process)
            hidden = [entry for entry in listing(folder / "out") if entry.startswith(".")]
            assert len(hidden) == (1 if stage == "writing" else 0), hidden  # the partial file
            process.send_signal(STOP_SIGNALS.get(name, signal.SIGHUP))
        time.sleep(0.2)  # time for an ignored SIGHUP to do harm
        (tmp_path / "nohup-writing" / "go").write_text("")
        for (name, stage), process in runs.items():
            out, err = process.communicate(timeout=60)
            folder = tmp_path / f"{name}-{stage}"
            assert out == ""
            assert listing(folder / "out") == ["in.png"], (name, stage)
            if name == "nohup":
                assert process.returncode == 0, err
                assert read_output(folder / "out" / "in.png")[0].shape == (9, 12, 3)
                continue
            assert (process.returncode, err) == (
                -STOP_SIGNALS[name],
                f"tiinterp: interrupted by {name}\n",
            ), (name, stage)
            assert (folder / "out" / "in.png").read_bytes() == b"old"
            assert stat.S_IMODE((folder / "out" / "in.png").stat().st_mode) == 0o600
    finally:
        for process in runs.values():
            if process.poll() is None:
                process.kill()
                process.communicate()


# --- Symbolic links to folders (Note [Links to folders]) ----------------------------------------


def without_taichi(monkeypatch, argv):
    """``cli.main(argv)`` in this process, the resampling a copy and no Taichi: its start
    and the question it answers (float64, as the CPU has it) stood in for."""
    copy_instead_of_resampling(monkeypatch)
    monkeypatch.setattr(cli, "start_taichi", lambda arch, progress: True)
    monkeypatch.setattr("tiinterp._runtime.session.supports_float64", lambda: True)
    return cli.main(argv)


def linked_album(root, rng):
    """album/: a.png, sub/b.png, sub/deeper/c.png, and links: album/here -> . (a loop),
    album/elsewhere -> ../outside (a folder outside, holding d.png), album/sub/e.png ->
    ../../e.png (a file outside)."""
    (root / "album" / "sub" / "deeper").mkdir(parents=True)
    (root / "outside").mkdir()
    for name in ("album/a.png", "album/sub/b.png", "album/sub/deeper/c.png", "outside/d.png"):
        small_png(root / name, rng)
    small_png(root / "e.png", rng)
    (root / "album" / "here").symlink_to(".")
    (root / "album" / "elsewhere").symlink_to(os.path.join("..", "outside"))
    (root / "album" / "sub" / "e.png").symlink_to(os.path.join("..", "..", "e.png"))


# What -r reads of linked_album's album, by name in the output folder: its own tree, and the
# link to a file.
ALBUM_TREE = [
    "a.png",
    os.path.join("sub", "b.png"),
    os.path.join("sub", "deeper", "c.png"),
    os.path.join("sub", "e.png"),
]


def link_note(path):
    return (
        f"{path}: a symbolic link to a folder, not followed (name it, or the folder it points "
        "to, to read its images)"
    )


def test_r_and_double_star_do_not_follow_links_to_folders(tmp_path, rng, monkeypatch, capsys):
    """-r and a pattern's ** read the folder's own subfolders, not the symbolic links to
    folders they come across (a loop made -r nest its outputs 40 folders deep), each one a
    note on stderr; a link named on the command line is followed, and links to files are
    read. Each tree here has one loop: finite even where links are followed."""
    linked_album(tmp_path, rng)
    monkeypatch.chdir(tmp_path)
    notes = [link_note(Path("album", "elsewhere")), link_note(Path("album", "here"))]
    inputs = cli.expand_inputs(["album"], True, None)
    assert sorted(str(name) for _, name in inputs.files) == ALBUM_TREE
    assert (inputs.notes, inputs.errors) == (notes, [])
    pattern = os.path.join("album", "**", "*.png")
    inputs = cli.expand_inputs([pattern], False, None)
    assert sorted(str(name) for _, name in inputs.files) == ["a.png", "b.png", "c.png", "e.png"]
    assert (inputs.notes, inputs.errors) == (notes, [])
    # Named, the link is followed (and -r does not follow the links inside it).
    inputs = cli.expand_inputs([os.path.join("album", "elsewhere")], True, None)
    assert ([str(name) for _, name in inputs.files], inputs.notes) == (["d.png"], [])
    # Without -r, no subfolder is read and no link is passed.
    inputs = cli.expand_inputs(["album"], False, None)
    assert ([str(name) for _, name in inputs.files], inputs.notes) == (["a.png"], [])
    # The command: the notes on stderr (not with --quiet), the folder's own tree written.
    status = without_taichi(monkeypatch, ["resize", "album", "-r", "-o", "out", "--scale", "1"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert [line for line in err.splitlines() if "note" in line] == [
        f"tiinterp: note: {note}" for note in notes
    ]
    written = sorted(str(path.relative_to("out")) for path in Path("out").rglob("*.png"))
    assert written == ALBUM_TREE
    status = without_taichi(
        monkeypatch, ["resize", "album", "-r", "-o", "again", "--scale", "1", "-q"]
    )
    assert (status, capsys.readouterr().err) == (0, "")


LINK_LOOPS = """\
import json, sys
from tiinterp.cli import command as cli
inputs = [cli.expand_inputs([argument], True, None) for argument in sys.argv[1:]]
print(json.dumps([[sorted(str(name) for _, name in each.files), each.notes] for each in inputs]))
"""


def test_loops_of_links_end_in_time(tmp_path, rng):
    """Two loops (album/here -> ., album/sub/up -> ..): following links made the walk of -r,
    and glob's **, exponential, without end. In a subprocess with a time limit, so that a
    regression fails rather than hangs."""
    linked_album(tmp_path, rng)
    (tmp_path / "album" / "sub" / "up").symlink_to("..")
    (tmp_path / "album" / "again").symlink_to(".")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    pattern = os.path.join("album", "**", "*.png")
    result = subprocess.run(
        [sys.executable, "-c", LINK_LOOPS, "album", pattern],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,  # 0.5 s
    )
    assert result.returncode == 0, result.stderr
    notes = [link_note(Path("album", name)) for name in ("again", "elsewhere", "here")] + [
        link_note(Path("album", "sub", "up"))
    ]
    folder, matched = json.loads(result.stdout)
    assert folder == [ALBUM_TREE, notes]
    assert matched == [["a.png", "b.png", "c.png", "e.png"], notes]


def test_patterns_match_as_glob_does(tmp_path, monkeypatch):
    """cli.expand_pattern, which replaces glob.glob so that ** passes links to folders by,
    matches what glob.glob(recursive=True) matches in a tree without links: *, ?, [...],
    ** anywhere, hidden names only for a pattern that starts with ".", a trailing separator
    for folders only, relative and absolute patterns."""
    for name in (
        "a.png",
        "b.jpg",
        ".hidden.png",
        "sub/c.png",
        "sub/deeper/d.png",
        "sub/.secret/e.png",
        "other/f.tif",
        "other/sub/g.png",
    ):
        (tmp_path / "tree" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tree" / name).write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    patterns = [
        "tree/*.png",
        "tree/**/*.png",
        "tree/**",
        "tree/**/",
        "**/*.png",
        "tree/*/c.png",
        "tree/s?b/*",
        "tree/[ab].*",
        "tree/.*",
        "tree/**/.*/*.png",
        "tree/*/sub/*.png",
        "tree/**/sub/**/*.png",
        "tree/nothing/**/*.png",
        str(tmp_path / "tree" / "**" / "*.png"),
    ]
    for pattern in patterns:
        pattern = pattern.replace("/", os.sep)
        ours = sorted(os.path.normpath(path) for path in cli.expand_pattern(pattern, []))
        theirs = sorted(os.path.normpath(path) for path in glob.glob(pattern, recursive=True))
        assert ours == theirs, pattern


# --- Long output names --------------------------------------------------------------------------


def name_max(folder):
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):
        pytest.skip("the file system does not say its longest name")


# The writers of test_output_names_up_to_the_longest_are_written: (bits, format, extension).
NAME_WRITERS = {
    "Pillow PNG": (8, "PNG", ".png"),
    "libpng": (16, "PNG", ".png"),
    "tifffile": (16, "TIFF", ".tif"),
    "Pillow TIFF": (8, "TIFF", ".tif"),
    "Pillow JPEG": (8, "JPEG", ".jpg"),
}


def test_output_names_up_to_the_longest_are_written(tmp_path, rng, monkeypatch):
    """Names of up to NAME_MAX bytes (255 on Linux) are written by every writer: the
    hidden temporary file ".NAME.XXXXXXXX" next to them was 10 bytes longer, so names of
    246 bytes and more failed with "File name too long". The temporary name keeps the
    start of the output's name, cut at a character's boundary (UTF-8 names of 2- and 3-byte
    characters), and is renamed over the output as before: an existing file keeps its
    permission bits, and no temporary file is left. A longer name is one OSError."""
    limit = name_max(tmp_path)
    temporaries = []
    mkstemp = tempfile.mkstemp

    def recorded(*args, **kwargs):
        descriptor, name = mkstemp(*args, **kwargs)
        temporaries.append(os.path.basename(name))
        return descriptor, name

    monkeypatch.setattr(tempfile, "mkstemp", recorded)
    written = []
    for writer, (bits, image_format, extension) in NAME_WRITERS.items():
        folder = tmp_path / writer
        folder.mkdir()
        stems = ["n" * (length - 4) for length in range(limit - 10, limit + 1)]
        stems += ["é" * ((limit - 4) // 2), "水" * ((limit - 4) // 3)]
        for stem in stems:
            out = folder / (stem + extension)
            if stem == stems[-1]:  # replaced, keeping its permission bits
                out.write_bytes(b"old")
                out.chmod(0o600)
            temporaries.clear()
            raster = rgb_raster(rng, bits)
            _image_files.write_image(raster, out, image_format, [], quality=92, source=out)
            pixels, _ = read_output(out)
            assert pixels.shape == (6, 5, 3), (writer, len(os.fsencode(out.name)))
            (temporary,) = temporaries
            assert len(os.fsencode(temporary)) <= limit
            assert temporary.startswith(".") and out.name.startswith(temporary[1:-9])
            assert len(temporary) > 20  # still names its output
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        assert listing(folder) == sorted(stem + extension for stem in stems), writer
        written.append(writer)
        too_long = folder / ("n" * (limit - 3) + extension)
        with pytest.raises(OSError) as error:
            _image_files.write_image(
                rgb_raster(rng, bits), too_long, image_format, [], quality=92, source=too_long
            )
        assert error.value.errno == errno.ENAMETOOLONG
        assert listing(folder) == sorted(stem + extension for stem in stems), writer
    assert written == list(NAME_WRITERS)


def test_names_too_long_are_one_error_line(tmp_path, rng, monkeypatch, capsys):
    """Through the command (no Taichi): an input and an output of the longest name are
    written; an input name too long, an output whose name the extension makes too long, and
    an -o name too long are each one error line (before Python 3.12, Path.is_dir and
    Path.exists raised ENAMETOOLONG: a traceback)."""
    limit = name_max(tmp_path)
    monkeypatch.chdir(tmp_path)
    longest = "l" * (limit - 4) + ".png"
    small_png(tmp_path / longest, rng)
    no_extension = "x" * (limit - 2)  # its output gets ".png": limit + 2 bytes
    small_png(tmp_path / "plain.png", rng)
    (tmp_path / no_extension).write_bytes((tmp_path / "plain.png").read_bytes())
    absent = "a" * (limit + 1) + ".png"
    argv = ["resize", longest, no_extension, absent, "-o", "out/", "--scale", "1"]
    status = without_taichi(monkeypatch, argv)
    errors = capsys.readouterr().err.splitlines()
    assert status == 1
    assert f"tiinterp: error: {absent}: File name too long" in errors
    too_long = os.path.join("out", no_extension + ".png")
    assert f"tiinterp: error: {too_long}: File name too long" in errors
    assert listing(tmp_path / "out") == [longest]
    for output, expected in (("o" * (limit - 4) + ".png", 0), ("o" * (limit - 3) + ".png", 1)):
        status = without_taichi(monkeypatch, ["resize", "plain.png", "-o", output, "--scale", "1"])
        err = capsys.readouterr().err
        assert status == expected, err
        if expected:
            assert err == f"tiinterp: error: {output}: File name too long\n"
        else:
            assert read_output(tmp_path / output)[0].shape == (9, 12, 3)


# --- Pipes --------------------------------------------------------------------------------------


def piped_kinds(folder, rng):
    """name -> the bytes of a small file in ``folder``, one of each reader: Pillow's PNG,
    JPEG and TIFF (8-bit; 16-bit white-is-zero gray, orientation 6), libpng's 16-bit PNG,
    tifffile's 16-bit colour TIFF (LZW) and gray+alpha TIFF, which Pillow fails to open
    first. Each fits in a pipe's buffer (64 KiB)."""
    for name, layout in (("rgb8.png", "RGB"), ("rgb8.jpg", "RGB"), ("gray8.tif", "L")):
        save_pillow(folder / name, photo(rng, 9, 12, len(layout)), layout)
    save_png16(folder / "rgba16.png", photo(rng, 9, 12, 4, np.uint16), "RGBA")
    tifffile.imwrite(
        folder / "white16.tif",
        photo(rng, 9, 12, 1, np.uint16),
        photometric="miniswhite",
        extratags=[(0x0112, "H", 1, 6, True)],
    )
    save_tiff16(folder / "rgb16.tif", photo(rng, 9, 12, 3, np.uint16), "RGB", "lzw")
    save_tiff16(folder / "graya16.tif", photo(rng, 9, 12, 2, np.uint16), "LA")
    names = ("rgb8.png", "rgb8.jpg", "gray8.tif", "rgba16.png", "white16.tif", "rgb16.tif")
    return {name: (folder / name).read_bytes() for name in (*names, "graya16.tif")}


def pipe_holding(data):
    """The name (/dev/fd/N) of the reading end of a pipe that holds ``data``, its writing
    end closed: what the shell's <(...) gives, and /dev/stdin in ``cat x | ...``."""
    reading, writing = os.pipe()
    os.write(writing, data)
    os.close(writing)
    return reading, Path(f"/dev/fd/{reading}")


needs_dev_fd = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="pipes by name (/dev/fd) as on Linux"
)


@needs_dev_fd
def test_pipes_are_read_once(tmp_path, rng, monkeypatch):
    """A pipe is read once, into memory, and decoded from there, by every reader: it was
    opened several times, and the first open took its first bytes ("not a PNG, JPEG or TIFF
    image"). The same pixels as from the file; a TIFF output keeps a piped TIFF input's
    compression; what read_stream takes is bounded by --max-pixels (81 bytes of a PNG file
    are too many for 10 pixels, with no room for metadata). Pipes that hold their whole
    content, their writing end closed: a regression fails, it cannot hang."""
    for name, data in piped_kinds(tmp_path, rng).items():
        expected = _image_files.read_image(tmp_path / name, [])
        reading, path = pipe_holding(data)
        try:
            notes = []
            ours = _image_files.read_image(path, notes)
            assert _image_files.is_stream(path)
        finally:
            os.close(reading)
        assert (ours.layout, notes) == (expected.layout, []), name
        np.testing.assert_array_equal(ours.pixels, expected.pixels, name)
        reading, path = pipe_holding(data)
        try:
            content = _image_files.read_stream(path)
        finally:
            os.close(reading)
        assert content == data
        assert (
            _image_files.sniff_format(path, content)
            == {
                ".png": "PNG",
                ".jpg": "JPEG",
                ".tif": "TIFF",
            }[Path(name).suffix]
        )
        if name == "rgb16.tif":
            out = tmp_path / "out.tif"
            _image_files.write_image(
                ours, out, "TIFF", [], quality=92, source=path, source_data=content
            )
            with tifffile.TiffFile(out) as tiff:
                assert tiff.pages.first.compression.name == "LZW"
    assert not _image_files.is_stream(tmp_path / "rgb8.png")
    monkeypatch.setattr(_image_files, "STREAM_SLACK_BYTES", 0)
    reading, path = pipe_holding(PNG_SIGNATURE + bytes(73))
    try:
        with pytest.raises(ImageError) as refusal:
            _image_files.read_stream(path, max_pixels=10)
    finally:
        os.close(reading)
    assert str(refusal.value) == (
        "more than 80 bytes from a pipe, more than a file of an image of 10 pixels takes "
        "(--max-pixels raises it)"
    )


@needs_dev_fd
def test_a_pipe_as_the_only_input(tmp_path, rng, monkeypatch, capsys):
    """``tiinterp resize <(cat x.png) -o out.png``, in this process (no Taichi): the pipe is
    read while the command plans, once, and the output is written (it was refused as "not
    a PNG, JPEG or TIFF image")."""
    data = piped_kinds(tmp_path, rng)["white16.tif"]
    monkeypatch.chdir(tmp_path)
    reading, path = pipe_holding(data)
    try:
        status = without_taichi(monkeypatch, ["resize", str(path), "-o", "out.png", "--scale", "1"])
    finally:
        os.close(reading)
    err = capsys.readouterr().err
    assert status == 0, err
    assert err == f"{path} -> out.png (9x12 -> 9x12, 16-bit gray)\n"
    ours, mode = read_output(Path("out.png"))
    expected = _image_files.read_image(tmp_path / "white16.tif", []).pixels
    assert mode == "PNG16 L"
    np.testing.assert_array_equal(ours, expected)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_pipes_on_the_command_line(tmp_path, rng):
    """As a user runs it: ``cat x.png | tiinterp resize /dev/stdin ...`` and named pipes
    (what a shell's <(...) gives), into a folder, their names without an extension given
    one from the content. In a subprocess with a time limit (the writers of the named
    pipes are let go if it never opens them)."""
    files = piped_kinds(tmp_path, rng)
    fifos = {"tiff16": files["rgb16.tif"], "jpeg": files["rgb8.jpg"]}
    for name in fifos:
        os.mkfifo(tmp_path / name)
    failures = []

    def feed(name, data):
        try:
            with open(tmp_path / name, "wb") as fifo:
                fifo.write(data)
        except OSError as error:  # let go: the command never read it
            failures.append((name, error))

    feeders = [threading.Thread(target=feed, args=item, daemon=True) for item in fifos.items()]
    for feeder in feeders:
        feeder.start()
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "tiinterp",
                "resize",
                "/dev/stdin",
                *fifos,
                "-o",
                "out",
                "--scale",
                "1",
                "--mode",
                "nearest",
            ],
            cwd=tmp_path,
            env=dict(
                os.environ,
                TIINTERP_ARCH="cpu",
                PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            ),
            input=files["rgba16.png"],
            capture_output=True,
            timeout=60,  # 2 s, with Taichi's kernels in its cache
        )
    finally:
        for name in fifos:  # a writer still waiting for a reader is let go
            with contextlib.suppress(OSError):
                os.close(os.open(tmp_path / name, os.O_RDONLY | os.O_NONBLOCK))
        for feeder in feeders:
            feeder.join(10)
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    assert failures == []
    assert listing(tmp_path / "out") == ["jpeg.jpg", "stdin.png", "tiff16.tif"]
    for output, source in (("stdin.png", "rgba16.png"), ("tiff16.tif", "rgb16.tif")):
        pixels, _ = read_output(tmp_path / "out" / output)
        np.testing.assert_array_equal(pixels, _image_files.read_image(tmp_path / source, []).pixels)
    with tifffile.TiffFile(tmp_path / "out" / "tiff16.tif") as tiff:
        assert tiff.pages.first.compression.name == "LZW"  # the piped input's
    pixels, mode = read_output(tmp_path / "out" / "jpeg.jpg")
    source = _image_files.read_image(tmp_path / "rgb8.jpg", []).pixels
    assert (mode, pixels.shape) == ("RGB", source.shape)
    assert np.abs(pixels.astype(np.float64) - source).mean() < 3
