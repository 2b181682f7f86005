"""The ``tiinterp`` command (tiinterp/cli.py), end to end in subprocesses.

Each subprocess pays Python's and Taichi's start-up (about 1.5 s) and the first Taichi
kernel launches, so the images of many checks go through one command: the module fixtures
below run the command once and several tests read the results. Argument errors and the
progress display are also checked in-process, where no Taichi call is made; the PNG codec
has its own tests (tests/test_png.py). Images are generated from a generator seeded as the
``rng`` fixture.
"""

import io
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.tolerances import tolerance
from tiinterp import cli
from tiinterp._png import decode_png, encode_png, png_bit_depth
from tiinterp._raster import Raster

REPO = Path(__file__).resolve().parents[1]
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


def save_png16(path, pixels, layout):
    Path(path).write_bytes(encode_png(Raster(pixels, layout)))


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


def read_output(path):
    """(pixels as (H, W, C), Pillow's mode or "PNG16 <layout>") of an output file."""
    data = Path(path).read_bytes()
    if png_bit_depth(data[:32]) == 16:
        raster = decode_png(data)
        return raster.pixels, f"PNG16 {raster.layout}"
    with Image.open(path) as image:
        pixels = np.asarray(image)
        return pixels.reshape(image.height, image.width, -1), image.mode


# --- Formats x bit depths x channel layouts, in one command --------------------------------

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
    "gray8.jpg": ("pillow", "L", 8, "L", 1),
    "rgb8.jpg": ("pillow", "RGB", 8, "RGB", 3),
    "cmyk8.jpg": ("pillow", "CMYK", 8, "CMYK", 4),
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
        (save_png16 if writer == "png16" else save_pillow)(inputs / name, pixels, layout)
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
    # Files that fail, each with its own message; the others are still written.
    tiff_rgb16(inputs / "rgb16.tiff", photo(rng, HEIGHT, WIDTH, 3, np.uint16))
    (inputs / "broken.png").write_bytes((inputs / "rgb8.png").read_bytes()[:100])
    (inputs / "text.jpg").write_text("not a picture\n")
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
    # own depth: within half an 8-bit level plus rounding.
    difference = np.abs(wide.astype(np.float64) / 257 - narrow.astype(np.float64))
    assert difference.max() <= 0.5 + 1e-6
    # And the 16-bit result is not 8-bit levels scaled up: the low byte carries information.
    assert np.count_nonzero(wide % 257) > wide.size // 2
    rgba16, _ = read_output(root / "outputs" / "rgba16.png")
    assert np.count_nonzero(rgba16 % 257) > rgba16.size // 2


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


def test_unreadable_files_fail_and_the_others_are_written(matrix):
    root, _, result = matrix
    assert result.returncode == 1
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("tiinterp: error:")]
    assert len(errors) == 3, result.stderr
    joined = "\n".join(errors)
    assert f"inputs{os.sep}rgb16.tiff: 16-bit RGB TIFF files are not supported" in joined
    assert "convert the file to 16-bit PNG" in joined
    assert f"inputs{os.sep}broken.png: " in joined
    assert f"inputs{os.sep}text.jpg: not a PNG, JPEG or TIFF image" in joined
    assert "Traceback" not in result.stderr
    written = sorted(path.name for path in (root / "outputs").iterdir())
    expected = [*MATRIX, "bilevel.png", "palette.png", "rgb16_of_rgb8.png", "rotated.jpg"]
    assert written == sorted(expected)
    # Not a terminal: one line per written image.
    line = f"inputs{os.sep}gray8.png -> outputs{os.sep}gray8.png (80x60 -> 37x28, 8-bit gray)"
    assert line in result.stderr.splitlines()


# --- Against PIL, and alpha -----------------------------------------------------------------

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


# --- Inputs and outputs ---------------------------------------------------------------------


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
    result = run_cli(*args, "--force", "--quiet", cwd=tmp_path, console_script=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == result.stderr == ""
    for name in ("one.png", "two.png"):
        pixels, mode = read_output(tmp_path / "out" / name)
        assert (mode, pixels.shape) == ("RGB", (18, 24, 3))


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


def test_help_and_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["resize", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for expected in (*cli.RESIZE_MODES, "default: lanczos3", "--no-antialias", "640x", "--force"):
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
