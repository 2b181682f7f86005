"""Image files for the ``tiinterp`` command: PNG, JPEG and TIFF in and out of a Raster.

Pillow reads and writes the files, except those it would reduce to 8 bits per channel or
cannot write: 16-bit PNG goes through libpng (:mod:`tiinterp.cli.png`, by imagecodecs), and
16-bit colour TIFF (gray+alpha, RGB, RGBA) through tifffile, as does the white-is-zero gray
that Pillow does not open (big-endian 16-bit, gray+alpha). Pillow, imagecodecs and
tifffile are imported only when a file needs them: they are optional dependencies (the
``cli`` extra), and a missing one is an ImageError that says how to install it.

Three guards keep a run from harming the machine or the files: an image whose header
declares more than ``max_pixels`` pixels is refused before any pixel is decoded (a small
file can declare 100000 x 100000); an output is written to a hidden temporary file that is
renamed over the target only once complete, keeping the permission bits of the file it
replaces (the temporary name is short enough for any output name the file system takes);
and while the command runs (:func:`signals_stop_the_command`), SIGINT, SIGTERM and SIGHUP
raise :class:`Interrupted`, so that the temporary file is removed on the way out (those of
writes in worker threads, which get no signals, by :func:`abandon_writes`).

An input is opened once and decoded from that one file object, never reopened by name: a
pipe (``/dev/stdin``, a shell's ``<(...)``) can be read only once, so one that is not
seekable is read into memory first (:func:`read_stream`, bounded), and Pillow, given a
file object rather than a name, does not map an uncompressed TIFF file into memory (Note
[TIFF orientation]).
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import signal
import stat
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any, NoReturn

import numpy as np

from .png import PNG_SIGNATURE, decode_png, encode_png, png_bit_depth, png_size
from .raster import LAYOUT_CHANNELS, ImageError, Raster

# The Pillow plugins that may open a file: the JPEG one also returns what Pillow calls MPO
# (many cameras' JPEG files).
PILLOW_FORMATS = ("PNG", "JPEG", "TIFF")
PILLOW_MISSING = (
    "the tiinterp command needs Pillow to read and write images: pip install 'tiinterp[cli]'"
)
TIFFFILE_MISSING = (
    "the tiinterp command needs tifffile for 16-bit colour TIFF: pip install 'tiinterp[cli]'"
)
# The largest image read by default, in pixels (16384 x 16384): a decoded 8-bit RGBA image
# of this size takes 1 GiB, and resampling it in float32 several times that.
DEFAULT_MAX_PIXELS = 1 << 28
# The most bytes read from a pipe, beyond what an image of --max-pixels pixels can take
# uncompressed (8 bytes a pixel: 16-bit RGBA): room for metadata, thumbnails, other pages.
STREAM_SLACK_BYTES = 64 * 2**20
# The longest file name where the file system does not say (Linux's NAME_MAX, and Windows'
# and macOS's limit in characters).
DEFAULT_NAME_MAX = 255
# mkstemp's random part of a temporary file's name.
TEMPORARY_RANDOM_CHARS = 8
# EXIF's Orientation tag (0x0112) -> the (H, W, C) array as a viewer shows it; each is the
# NumPy form of the Pillow transpose ImageOps.exif_transpose applies for that value.
ORIENTATIONS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    2: lambda pixels: pixels[:, ::-1],  # FLIP_LEFT_RIGHT
    3: lambda pixels: pixels[::-1, ::-1],  # ROTATE_180
    4: lambda pixels: pixels[::-1],  # FLIP_TOP_BOTTOM
    5: lambda pixels: pixels.transpose(1, 0, 2),  # TRANSPOSE
    6: lambda pixels: np.rot90(pixels, -1),  # ROTATE_270 (clockwise by 90 degrees)
    7: lambda pixels: pixels.transpose(1, 0, 2)[::-1, ::-1],  # TRANSVERSE
    8: lambda pixels: np.rot90(pixels, 1),  # ROTATE_90 (counter-clockwise)
}
# Pillow's modes of 16-bit gray (native, little- and big-endian).
GRAY16_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
# TIFF tags (TIFF 6.0; the ICC profile's is Adobe's) and values that tifffile's reader uses.
TIFF_ORIENTATION = 274
TIFF_ICC_PROFILE = 34675
TIFF_MINISWHITE, TIFF_MINISBLACK, TIFF_RGB = 0, 1, 2  # PhotometricInterpretation
TIFF_PHOTOMETRIC = 262
# The PhotometricInterpretation values, as the refusal of a file tifffile reads names them.
TIFF_PHOTOMETRIC_NAMES = {0: "white-is-zero gray", 3: "palette", 5: "CMYK", 6: "YCbCr"}
TIFF_SEPARATE_PLANES = 2  # PlanarConfiguration
TIFF_UNSIGNED = 1  # SampleFormat
# ExtraSamples: what a sample after the colour ones is.
TIFF_UNSPECIFIED, TIFF_PREMULTIPLIED_ALPHA, TIFF_ALPHA = 0, 1, 2
# The lossless TIFF compressions an output keeps from its TIFF input, by Pillow's names,
# with their Compression tag values (as tifffile takes them).
LOSSLESS_TIFF_COMPRESSIONS = {
    "raw": 1,
    "tiff_lzw": 5,
    "tiff_adobe_deflate": 8,
    "packbits": 32773,
    "tiff_deflate": 32946,
}
TIFF_COMPRESSION_NAMES = {code: name for name, code in LOSSLESS_TIFF_COMPRESSIONS.items()}
# Pillow modes read as another layout: 1-bit as gray, premultiplied alpha ("La", "RGBa") as
# plain alpha, palette with alpha ("PA") and YCbCr as RGB(A), padded RGB ("RGBX") as RGB.
LAYOUT_BY_PILLOW_MODE = {
    "1": "L",
    "La": "LA",
    "PA": "RGBA",
    "RGBa": "RGBA",
    "RGBX": "RGB",
    "YCbCr": "RGB",
}


def pillow() -> Any:
    """Pillow's Image module, or an ImageError naming the extra that installs it."""
    try:
        from PIL import Image
    except ImportError:
        raise ImageError(PILLOW_MISSING) from None
    return Image


def _tifffile() -> Any:
    """The tifffile module, or an ImageError naming the extra that installs it."""
    try:
        import tifffile
    except ImportError:
        raise ImageError(TIFFFILE_MISSING) from None
    return tifffile


class _LibraryLog(logging.Filter):
    """What imagecodecs and tifffile log while this thread reads or writes an image (in
    :func:`_library_log_to_notes`): never printed, as Python would print it on stderr when
    no logging is set up. tifffile's warnings (about damaged tags, mostly) become notes,
    as Pillow's do; libpng's are dropped: the PNG file's chunks were checked before
    decoding (tiinterp.cli.png), and imagecodecs makes libpng warn "Interlace handling should
    be turned on" for every interlaced file. Other threads' records, and records outside a
    read or write, are left alone."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        notes: list[str] | None = getattr(self.local, "notes", None)
        if notes is None:
            return True
        if record.name == "tifffile" and record.levelno >= logging.WARNING:
            note = "tifffile: " + " ".join(record.getMessage().split())
            if note not in notes:
                notes.append(note)
        return False


_library_log = _LibraryLog()
for _name in ("imagecodecs", "tifffile"):
    logging.getLogger(_name).addFilter(_library_log)


@contextlib.contextmanager
def _library_log_to_notes(notes: list[str]) -> Iterator[None]:
    previous = getattr(_library_log.local, "notes", None)
    _library_log.local.notes = notes
    try:
        yield
    finally:
        _library_log.local.notes = previous


def _orientation(image: Any, notes: list[str]) -> int:
    """The EXIF orientation (1 to 8) of a Pillow image, read as ImageOps.exif_transpose
    reads it (EXIF, ImageMagick's text copy of it, XMP); 1 where there is none, or where
    the EXIF data is damaged (with a note: the image itself is still good)."""
    try:
        orientation = image.getexif().get(0x0112, 1)
    except Exception:  # Pillow's answers to damaged EXIF: SyntaxError, struct.error, ...
        notes.append("damaged EXIF data: its orientation, if any, is not applied")
        return 1
    return orientation if isinstance(orientation, int) and orientation in ORIENTATIONS else 1


def _oriented(raster: Raster, orientation: int) -> Raster:
    """``raster`` turned as EXIF ``orientation`` says a viewer shows it."""
    turn = ORIENTATIONS.get(orientation)
    if turn is None:
        return raster
    return Raster(np.ascontiguousarray(turn(raster.pixels)), raster.layout, raster.icc_profile)


def check_pixels(width: int, height: int, max_pixels: int, what: str) -> None:
    """Refuses (ImageError) an image of more than ``max_pixels`` pixels; ``what`` is what
    the message calls it ("the image", "the output")."""
    if width * height > max_pixels:
        raise ImageError(
            f"{what} is {width}x{height}, {width * height:,} pixels, over the limit of "
            f"{max_pixels:,} (--max-pixels raises it)"
        )


# Note [TIFF orientation]
# Pillow turns a TIFF image as its Orientation tag says when it loads the pixels (since
# Pillow 6.2, python-pillow/Pillow#4063), then deletes the tag (since 10.1, #7383: so
# ImageOps.exif_transpose, which loads first, does not turn it again). So a TIFF image
# Pillow reads is taken as loaded, and turning it again (as tiinterp did) turned 3 back to
# the stored pixels and 6 and 8 by 180 degrees. JPEG and PNG images are loaded as stored
# and turned here (ImageOps.exif_transpose's turns, :data:`ORIENTATIONS`), and so are the
# TIFF files tifffile reads (:func:`_read_tiff`): tifffile returns the stored pixels. Since
# Pillow 11 (#8390), a TIFF image of orientation 5 to 8 has its turned size from the start,
# and Pillow's memory mapping of an uncompressed file opened by name (gray, RGBA, 16-bit
# gray) maps the stored rows by that size, scrambling them (seen with Pillow 13.0): files
# are given to Pillow as file objects, which it reads rather than maps (:func:`_opened`).


def _pillow_raster(image: Any, notes: list[str]) -> Raster:
    """Pillow image -> Raster, turned as its EXIF orientation says (Note [TIFF
    orientation]): palette images become RGB(A), 1-bit ones gray, premultiplied alpha plain
    alpha, 16-bit white-is-zero gray black-is-zero; refuses what tiinterp cannot keep
    (32-bit). TIFF colour wider than 8 bits is tifffile's (:func:`_wide_tiff`)."""
    mode = image.mode
    if mode in ("I", "F", "I;16S") or mode.startswith("I;32"):
        kind = "floating-point" if mode == "F" else "32-bit integer"
        raise ImageError(f"{kind} images are not supported (8 and 16 bits per channel are)")
    icc_profile = image.info.get("icc_profile") or None
    # Before loading, which empties the tile list.
    inverted = _white_is_zero_gray16(image)
    if image.format == "TIFF":
        orientation = 1  # applied by Pillow's load
    else:
        # After the pixels for PNG, whose eXIf chunk may follow the image data (so that a
        # decoding error is reported as the file's, not as damaged EXIF).
        if image.format == "PNG":
            image.load()
        orientation = _orientation(image, notes)
    image.load()
    if mode in GRAY16_MODES:
        pixels16 = np.asarray(image).astype(np.uint16)[..., None]
        if inverted:
            pixels16 = np.uint16(np.iinfo(np.uint16).max) - pixels16
        return _oriented(Raster(pixels16, "L", icc_profile), orientation)
    if mode == "P":
        target = "RGBA" if "transparency" in image.info else "RGB"
    else:
        target = LAYOUT_BY_PILLOW_MODE.get(mode, mode)
    if target not in LAYOUT_CHANNELS:
        raise ImageError(f"{mode} images are not supported (gray, RGB and CMYK are)")
    if target != mode:
        image = image.convert(target)
    pixels = np.asarray(image, dtype=np.uint8).reshape(image.height, image.width, -1)
    return _oriented(Raster(pixels, target, icc_profile), orientation)


def _white_is_zero_gray16(image: Any) -> bool:
    """Whether a TIFF image Pillow has opened, not yet loaded, is 16-bit white-is-zero gray
    (PhotometricInterpretation 0) that Pillow will load as stored: 0 white, 65535 black.
    Pillow 13 inverts such gray of 1 to 8 bits (its raw modes "1;I", "L;I", ...), not of 16
    (raw mode "I;16", as black-is-zero); a raw mode of its own for these files would say
    that it inverts them too."""
    if image.format != "TIFF" or image.mode not in GRAY16_MODES:
        return False
    if image.tag_v2.get(TIFF_PHOTOMETRIC) != TIFF_MINISWHITE:
        return False
    raw_modes = set()
    for tile in image.tile:
        args = tile[3]
        raw_modes.add(args[0] if isinstance(args, tuple) and args else args)
    return bool(raw_modes) and raw_modes <= set(GRAY16_MODES)


def _format_of(head: bytes) -> str | None:
    """A file's format from its first 8 bytes: "PNG", "JPEG", "TIFF", or None."""
    if head.startswith(PNG_SIGNATURE):
        return "PNG"
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head[:4] in (b"II*\0", b"MM\0*"):
        return "TIFF"
    return None


def sniff_format(path: Path, data: bytes | None = None) -> str | None:
    """A file's format from its first bytes: "PNG", "JPEG", "TIFF", or None. ``data`` is
    the file's content if it was read before (:func:`read_stream`): a pipe's first bytes
    cannot be read twice."""
    if data is not None:
        return _format_of(data[:8])
    with open(path, "rb") as file:
        return _format_of(file.read(8))


def is_stream(path: Path) -> bool:
    """Whether ``path`` names something other than a regular file that can be read, such as
    a pipe (``/dev/stdin`` in ``cat x.png | tiinterp ...``, a shell's ``<(...)``): what is
    read from it cannot be read again, so it is read once, by :func:`read_stream`, before
    anything else reads it. An error is left to the reading."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def stream_limit(max_pixels: int) -> int:
    """The most bytes :func:`read_stream` takes for ``max_pixels``: an image of that many
    pixels, uncompressed at 8 bytes a pixel (16-bit RGBA), and STREAM_SLACK_BYTES."""
    return 8 * max_pixels + STREAM_SLACK_BYTES


def read_stream(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> bytes:
    """All of ``path``'s content, read once (:func:`is_stream`).

    Raises
    ------
    ImageError
        More than :func:`stream_limit` bytes: no image of ``max_pixels`` pixels is larger.
    OSError
        The file cannot be read.
    """
    with open(path, "rb") as file:
        return _read_all(file, max_pixels)


def _read_all(file: IO[bytes], max_pixels: int) -> bytes:
    """What ``file`` holds, up to :func:`stream_limit`; only its first MiB if that does not
    start as a PNG, JPEG or TIFF file does (``/dev/zero`` is refused at once, as the file
    it is not)."""
    limit = stream_limit(max_pixels)
    chunks: list[bytes] = []
    size = 0
    while chunk := file.read(1 << 20):
        if not chunks and _format_of(chunk[:8]) is None:
            return chunk
        size += len(chunk)
        if size > limit:
            raise ImageError(
                f"more than {limit:,} bytes from a pipe, more than a file of an image of "
                f"{max_pixels:,} pixels takes (--max-pixels raises it)"
            )
        chunks.append(chunk)
    return b"".join(chunks)


@contextlib.contextmanager
def _opened(path: Path, data: bytes | None, max_pixels: int) -> Iterator[IO[bytes]]:
    """The input ``path`` as one seekable file object that every reader shares: ``data``
    (its content, read before), the file itself, or, for a pipe, what it holds read into
    memory (:func:`_read_all`)."""
    if data is not None:
        yield io.BytesIO(data)
        return
    with open(path, "rb") as file:
        if file.seekable():
            yield file
        else:
            yield io.BytesIO(_read_all(file, max_pixels))


def _read_png16(head: bytes, file: IO[bytes], max_pixels: int, notes: list[str]) -> Raster:
    """A 16-bit PNG file by libpng (:func:`tiinterp.cli.png.decode_png`), its size checked
    before the rest is read; its ICC profile and EXIF orientation (applied) read by Pillow
    from the file's metadata chunks, as Pillow reads an 8-bit file's."""
    size = png_size(head)
    if size is not None:
        check_pixels(*size, max_pixels, "the image")
    data = head + file.read()
    raster, carrier = decode_png(data)
    pil = pillow()
    try:
        with pil.open(io.BytesIO(carrier), formats=("PNG",)) as image:
            image.load()
            icc_profile = image.info.get("icc_profile") or None
            orientation = _orientation(image, notes)
    except Exception as error:  # Pillow's answers to damaged metadata: ValueError, SyntaxError
        raise ImageError(f"cannot read this PNG file's metadata ({error})") from None
    return _oriented(Raster(raster.pixels, raster.layout, icc_profile), orientation)


def _wide_tiff(image: Any) -> bool:
    """Whether a TIFF file Pillow has opened holds colour of more than 8 bits per channel,
    which Pillow would read at 8 (16-bit gray it reads fully)."""
    if image.format != "TIFF" or image.mode in GRAY16_MODES:
        return False
    depths = image.tag_v2.get(258, (8,))
    return max(depths if isinstance(depths, tuple) else (depths,)) > 8


def _tiff_layout(page: Any) -> tuple[str, int, bool]:
    """The layout of a TIFF page that tifffile reads for tiinterp: 16-bit, or 8-bit
    white-is-zero gray (+alpha), which Pillow does not read; what its extra sample is
    (TIFF_ALPHA, TIFF_PREMULTIPLIED_ALPHA, TIFF_UNSPECIFIED: dropped, as Pillow drops it at
    8 bits; TIFF_ALPHA if none); and whether its gray is white-is-zero.

    Raises
    ------
    ImageError
        Not 16-bit unsigned gray, gray+alpha, RGB or RGBA, or 8-bit white-is-zero gray or
        gray+alpha.
    """
    depth = int(page.bitspersample)
    sample_format = int(page.sampleformat)
    photometric = int(page.photometric)
    if depth == 8 and sample_format == TIFF_UNSIGNED and photometric != TIFF_MINISWHITE:
        # 8-bit files are Pillow's: tifffile is asked only after Pillow failed to open one.
        raise ImageError("cannot read this TIFF file: damaged, or of a kind Pillow does not read")
    if depth not in (8, 16) or sample_format != TIFF_UNSIGNED:
        kind = {2: "signed integer", 3: "floating-point"}.get(sample_format, "integer")
        raise ImageError(
            f"{kind} TIFF files of {depth} bits per channel are not supported (8 and 16 bits "
            "per channel, unsigned, are)"
        )
    samples = int(page.samplesperpixel)
    colours = {TIFF_MINISWHITE: 1, TIFF_MINISBLACK: 1, TIFF_RGB: 3}.get(photometric)
    extras = tuple(int(extra) for extra in page.extrasamples)
    if (
        colours is None
        or samples not in (colours, colours + 1)
        or len(extras) != samples - colours
        or int(page.imagedepth) != 1
    ):
        kind = TIFF_PHOTOMETRIC_NAMES.get(photometric, f"photometric {photometric}")
        raise ImageError(
            f"{depth}-bit TIFF files of {samples} channel{'s' if samples > 1 else ''} ({kind}) "
            "are not supported (gray, gray+alpha, RGB and RGBA are)"
        )
    layout = "L" if colours == 1 else "RGB"
    extra = extras[0] if extras else TIFF_ALPHA
    if extras and extra != TIFF_UNSPECIFIED:
        layout += "A"
    return layout, extra, photometric == TIFF_MINISWHITE


def _read_tiff(file: IO[bytes], notes: list[str], max_pixels: int) -> Raster:
    """The first page of a TIFF file that Pillow does not read fully (16-bit colour, 16-bit
    big-endian or white-is-zero gray(+alpha)) by tifffile, its size checked before any
    pixel is decoded, turned as its Orientation tag says; premultiplied alpha becomes
    plain, white-is-zero gray black-is-zero.

    Raises
    ------
    ImageError
        Not such a file (see :func:`_tiff_layout`), a damaged one, or tifffile is missing.
    """
    tifffile = _tifffile()
    file.seek(0)  # tifffile reads from the stream's position on
    try:
        with tifffile.TiffFile(file) as tiff:
            page = tiff.pages.first
            check_pixels(int(page.imagewidth), int(page.imagelength), max_pixels, "the image")
            layout, extra, white_is_zero = _tiff_layout(page)
            pixels = page.asarray()
            frames = len(tiff.pages)
            icc_profile = page.tags.valueof(TIFF_ICC_PROFILE)
            orientation = page.tags.valueof(TIFF_ORIENTATION, 1)
            dtype = np.uint16 if int(page.bitspersample) == 16 else np.uint8
    except (ImageError, OSError, MemoryError):
        raise
    except Exception as error:  # tifffile's answers to damaged files: TiffFileError, ...
        raise ImageError(
            f"cannot read this TIFF file: damaged, or of a kind tiinterp does not read ({error})"
        ) from None
    if pixels.ndim == 3 and int(page.planarconfig) == TIFF_SEPARATE_PLANES:
        pixels = np.moveaxis(pixels, 0, -1)
    pixels = pixels.reshape(int(page.imagelength), int(page.imagewidth), -1)
    channels = LAYOUT_CHANNELS[layout]
    pixels = np.ascontiguousarray(pixels[..., :channels], dtype=dtype)
    if extra == TIFF_PREMULTIPLIED_ALPHA:
        pixels = _unpremultiplied(pixels)
    if white_is_zero:  # the gray channel, once its alpha is plain
        pixels[..., 0] = np.iinfo(dtype).max - pixels[..., 0]
    if frames > 1:
        notes.append(f"{frames} pages/frames: only the first is resized")
    raster = Raster(pixels, layout, bytes(icc_profile) if icc_profile else None)
    return _oriented(raster, orientation if isinstance(orientation, int) else 1)


def _unpremultiplied(pixels: np.ndarray) -> np.ndarray:
    """Colour premultiplied by alpha, as plain colour (rounded); colour stays where alpha is
    0 (it weighs nothing in the resampling)."""
    top = float(np.iinfo(pixels.dtype).max)
    alpha = pixels[..., -1:].astype(np.float64)
    colour = pixels[..., :-1] * (top / np.where(alpha > 0, alpha, top))
    colour = np.floor(np.clip(colour, 0.0, top) + 0.5).astype(pixels.dtype)
    return np.concatenate([colour, pixels[..., -1:]], axis=-1)


def read_image(
    path: Path, notes: list[str], max_pixels: int = DEFAULT_MAX_PIXELS, data: bytes | None = None
) -> Raster:
    """The first image in a PNG, JPEG or TIFF file, turned as its EXIF orientation says.
    ``notes`` gets what the user should know (pages other than the first are ignored).
    ``data`` is the file's content if it was read before (:func:`read_stream`, for a pipe);
    otherwise the file is opened once, and read into memory first if it is a pipe.

    Raises
    ------
    ImageError
        Not such a file, one whose header declares more than ``max_pixels`` pixels (refused
        before decoding), one of a kind tiinterp does not keep (32-bit or floating-point
        samples, 16-bit CMYK TIFF), a corrupt 16-bit PNG or TIFF file, or a library it
        needs (Pillow, imagecodecs, tifffile) is missing.
    OSError
        The file cannot be read. Pillow raises other exceptions for some broken files.
    """
    with warnings.catch_warnings(record=True) as caught, _library_log_to_notes(notes):
        # Pillow warns about damaged metadata ("Corrupt EXIF data") in Python's format, with
        # a line of its own source; the user gets a note instead.
        warnings.simplefilter("always")
        with _opened(path, data, max_pixels) as file:
            raster = _read_image(file, notes, max_pixels)
    # Not ResourceWarning: the collector's "unclosed file" about any object of any thread
    # (catch_warnings records the whole process's warnings) is no note about this image.
    ignored = DeprecationWarning | PendingDeprecationWarning | ResourceWarning
    for warning in caught:
        if not issubclass(warning.category, ignored):
            note = "Pillow: " + " ".join(str(warning.message).split())
            if note not in notes:
                notes.append(note)
    return raster


def _read_image(file: IO[bytes], notes: list[str], max_pixels: int) -> Raster:
    head = file.read(32)
    if png_bit_depth(head) == 16:
        return _read_png16(head, file, max_pixels, notes)
    pil = pillow()
    file.seek(0)
    try:
        # Only these formats' headers are parsed: another plugin's _open could do more.
        image = pil.open(file, formats=PILLOW_FORMATS)
    except pil.UnidentifiedImageError:
        kind = _format_of(head)
        if kind is None:
            raise ImageError("not a PNG, JPEG or TIFF image") from None
        if kind == "TIFF":  # Pillow opens no 16-bit gray+alpha or big-endian white-is-zero
            return _read_tiff(file, notes, max_pixels)
        raise ImageError(
            f"cannot read this {kind} file: damaged, or of a kind Pillow does not read"
        ) from None
    with image:
        # Pillow has read the header only: the size is what the file declares, checked
        # before any pixel is decoded.
        check_pixels(image.width, image.height, max_pixels, "the image")
        if not _wide_tiff(image):
            frames = getattr(image, "n_frames", 1)
            if frames > 1:
                notes.append(f"{frames} pages/frames: only the first is resized")
            return _pillow_raster(image, notes)
    return _read_tiff(file, notes, max_pixels)


def _to_8_bits(raster: Raster) -> Raster:
    if raster.bits == 8:
        return raster
    levels = np.floor(raster.pixels.astype(np.float64) / 257.0 + 0.5).astype(np.uint8)
    return Raster(levels, raster.layout, raster.icc_profile)


def _over_white(raster: Raster) -> Raster:
    """An 8-bit image with alpha composited over white, without its alpha channel."""
    alpha = raster.pixels[..., -1:].astype(np.float32) / 255.0
    colour = raster.pixels[..., :-1].astype(np.float32)
    flat = np.floor(colour * alpha + 255.0 * (1.0 - alpha) + 0.5)
    return Raster(flat.astype(np.uint8), raster.layout[:-1], raster.icc_profile)


def _prepare_for_format(raster: Raster, image_format: str, notes: list[str]) -> Raster:
    """``raster`` in a form ``image_format`` can hold: JPEG gets 8-bit colour without alpha
    (alpha composited over white), PNG gets RGB for CMYK."""
    if image_format == "JPEG" and (raster.bits == 16 or raster.has_alpha):
        changes = []
        if raster.bits == 16:
            raster = _to_8_bits(raster)
            changes.append("reduced to 8 bits")
        if raster.has_alpha:
            raster = _over_white(raster)
            changes.append("alpha composited over white")
        notes.append(f"JPEG holds 8-bit colour without alpha: {' and '.join(changes)}")
    if image_format == "PNG" and raster.layout == "CMYK":
        image = pillow().frombytes("CMYK", (raster.width, raster.height), raster.pixels.tobytes())
        pixels = np.asarray(image.convert("RGB"), dtype=np.uint8)
        # A CMYK profile does not describe the converted RGB.
        raster = Raster(pixels, "RGB", None)
        notes.append("PNG has no CMYK: converted to RGB")
    return raster


def _encode_with_pillow(
    raster: Raster, image_format: str, file: IO[bytes], quality: int, compression: str | None
) -> None:
    """``raster`` written to ``file`` by Pillow: JPEG at ``quality``, TIFF compressed by
    ``compression`` (a Pillow name; uncompressed where Pillow lacks libtiff)."""
    from PIL import features

    pil = pillow()
    size = (raster.width, raster.height)
    if raster.bits == 16:
        image = pil.frombytes("I;16", size, raster.pixels.astype("<u2").tobytes())
    else:
        image = pil.frombytes(raster.layout, size, raster.pixels.tobytes())
    options: dict[str, Any] = {}
    if raster.icc_profile:
        options["icc_profile"] = raster.icc_profile
    if image_format == "JPEG":
        options["quality"] = quality
    if image_format == "TIFF":
        options["compression"] = compression if features.check("libtiff") else None
    image.save(file, format=image_format, **options)


def _encode_tiff(raster: Raster, file: IO[bytes], compression: str) -> None:
    """16-bit gray+alpha, RGB or RGBA ``raster`` written to ``file`` by tifffile, compressed
    by ``compression`` (a Pillow name) with the horizontal predictor where it helps (LZW,
    deflate), alpha marked unassociated (plain), the ICC profile kept."""
    tifffile = _tifffile()
    code = LOSSLESS_TIFF_COMPRESSIONS[compression]
    try:
        tifffile.imwrite(
            # Named: tifffile takes a stream's name for a path, and os.fdopen's is an int.
            tifffile.FileHandle(file, name="output.tif"),
            raster.pixels,
            photometric="minisblack" if raster.layout.startswith("L") else "rgb",
            planarconfig="contig",
            extrasamples=[TIFF_ALPHA] if raster.has_alpha else None,
            compression=None if code == 1 else code,
            predictor=True if code in (5, 8, 32946) else None,
            iccprofile=raster.icc_profile,
            metadata=None,
        )
    except (OSError, MemoryError):
        raise
    except Exception as error:  # tifffile's or its codecs' (imagecodecs) own exceptions
        raise ImageError(
            f"tifffile cannot write this {raster.describe()} image ({error})"
        ) from None


def _tiff_compression(source: Path, data: bytes | None) -> str:
    """The lossless compression of a TIFF input to keep (Pillow's name for it), else LZW
    (lossless, readable everywhere). ``data``: the input's content, if read before."""
    try:
        with _opened(source, data, DEFAULT_MAX_PIXELS) as file:
            compression = _input_compression(file)
    except Exception:  # the input was read before; this is only a preference
        compression = None
    return compression if compression in LOSSLESS_TIFF_COMPRESSIONS else "tiff_lzw"


def _input_compression(file: IO[bytes]) -> str | None:
    """The compression (Pillow's name) of a TIFF file, read by Pillow, or by tifffile where
    Pillow cannot open it (16-bit gray+alpha); None for any other file."""
    if _format_of(file.read(8)) != "TIFF":
        return None
    file.seek(0)
    try:
        with pillow().open(file, formats=("TIFF",)) as image:
            compression = image.info.get("compression")
            return compression if isinstance(compression, str) else None
    except Exception:
        file.seek(0)
        with _tifffile().TiffFile(file) as tiff:
            return TIFF_COMPRESSION_NAMES.get(int(tiff.pages.first.compression))


# --- Signals -------------------------------------------------------------------------------

# The signals that stop the command: Ctrl-C, kill/timeout/docker stop, a closed terminal.
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Interrupted(BaseException):
    """A stop signal (SIGINT, SIGTERM, SIGHUP) arrived while the command ran. Derived from
    BaseException, as KeyboardInterrupt is, so that no ``except Exception`` on the way
    (Pillow's, the command's per-file ones) takes it for the failure of one file."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# After a stop signal, how long another one is ignored, so that it cannot cut the removal
# of the temporary file short (a CI runner may signal the process and its group at once).
# The clean-up takes milliseconds: a signal after this finds the command stuck (something
# swallowed Interrupted) and ends it at once.
CLEAN_UP_SECONDS = 5.0


class _SignalState:
    """``holding``: a temporary file is being created, and a signal waits for its name to be
    known (else it could not be removed); ``pending``: such a signal; ``stopping_since``:
    when Interrupted was raised."""

    holding = False
    pending: int | None = None
    stopping_since: float | None = None


_signals = _SignalState()


def _interrupt(signum: int) -> NoReturn:
    _signals.stopping_since = time.monotonic()
    raise Interrupted(signum)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _signals.stopping_since is not None:
        if time.monotonic() - _signals.stopping_since < CLEAN_UP_SECONDS:
            return
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
        return
    if _signals.holding:
        _signals.pending = signum
        return
    _interrupt(signum)


@contextlib.contextmanager
def signals_stop_the_command() -> Iterator[None]:
    """While in this block, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` in the main
    thread; the previous handlers are restored afterwards. A signal that was ignored when the
    block began (``nohup`` ignores SIGHUP, a shell's background job SIGINT) stays ignored.
    Outside the main thread (where Python cannot set handlers) nothing changes: Ctrl-C is
    KeyboardInterrupt as usual."""
    _signals.holding, _signals.pending, _signals.stopping_since = False, None, None
    previous: dict[int, Any] = {}
    try:
        for signum in STOP_SIGNALS:
            handler = signal.getsignal(signum)
            if handler is signal.SIG_IGN:
                continue
            try:
                signal.signal(signum, _on_signal)
            except ValueError:  # not the main thread
                break
            previous[signum] = handler
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """A stop signal that arrives in this block is raised at its end, once the names it
    assigns are assigned. Only the main thread gets signals; elsewhere this does nothing (a
    worker thread's file is removed by :func:`abandon_writes`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _signals.holding = True
    try:
        yield
    finally:
        _signals.holding = False
        if _signals.pending is not None and _signals.stopping_since is None:
            _interrupt(_signals.pending)


class WritesAbandoned(Exception):
    """A write in a worker thread found the command stopping (:func:`abandon_writes`)."""


class _Temporaries:
    """The hidden temporary files being written, by any thread: a file is added as it is
    made and leaves as it is renamed over its output, both under ``lock``, so that
    :func:`abandon_writes` finds every file no rename will complete."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.files: set[str] = set()
        self.abandoned = False


_temporaries = _Temporaries()


def abandon_writes() -> None:
    """Removes the temporary files of every write in progress, and makes writes still
    running fail rather than complete: the command is stopping (a signal) and worker threads
    get no signal of their own. Outputs already renamed are complete and stay."""
    with _temporaries.lock:
        _temporaries.abandoned = True
        for temporary in _temporaries.files:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        _temporaries.files.clear()


def accept_writes() -> None:
    """Writes may complete again (a new run of the command in this process)."""
    with _temporaries.lock:
        _temporaries.abandoned = False


# --- Writing --------------------------------------------------------------------------------


def _new_file_mode() -> int:
    """The permission bits a new file gets: 0666 less the umask (read by setting it)."""
    umask = os.umask(0o22)
    os.umask(umask)
    return 0o666 & ~umask


def _take_permissions(temporary: str, replaced: os.stat_result | None) -> None:
    """Gives ``temporary`` the permission bits of the regular file it replaces (and its
    owner and group, where the system allows: root can, others can keep a group they belong
    to), or else a new file's. Failures are ignored: mkstemp made the file 0600, so a file
    system that refuses chmod leaves it private rather than open."""
    if replaced is None:
        mode = _new_file_mode()
    else:
        mode = stat.S_IMODE(replaced.st_mode) & 0o777
        if hasattr(os, "chown"):
            for owner in (replaced.st_uid, -1):
                try:
                    os.chown(temporary, owner, replaced.st_gid)
                    break
                except OSError:
                    continue
    with contextlib.suppress(OSError):
        os.chmod(temporary, mode)


def _sync(descriptor: int) -> None:
    """The file's data on disk before it is renamed over the output: a full disk or a quota
    can be reported only now (delayed allocation, network file systems), and a crash must
    not leave an empty file where the old one was. File systems that cannot sync (EINVAL)
    are left as they are."""
    try:
        os.fsync(descriptor)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise


def _temporary_prefix(path: Path) -> str:
    """The start of the name of the temporary file that becomes ``path``, ".NAME.", before
    mkstemp's random characters: NAME is the output's name, cut short where the whole would
    be longer than the longest name the file system takes (on Linux's 255 bytes, a name of
    246 bytes or more), at a character's boundary."""
    try:
        name_max = os.pathconf(path.parent, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows), or no answer
        name_max = DEFAULT_NAME_MAX
    if name_max <= 0:
        name_max = DEFAULT_NAME_MAX
    room = max(0, name_max - len("..") - TEMPORARY_RANDOM_CHARS)
    name = os.fsencode(path.name)
    if len(name) <= room:
        return f".{path.name}."
    # The bytes of a character cut in two dropped: the rest encodes to the same bytes.
    return f".{name[:room].decode('utf-8', 'ignore')}."


def _write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """``write(file)`` into a hidden temporary file next to ``path`` (its name from
    :func:`_temporary_prefix`), then renamed over it:
    a failed or interrupted write (a full disk, a signal) leaves no partial output and the
    file it would have replaced intact, and an input may be its own output.

    A regular file replaced keeps its permission bits (and owner and group where allowed).
    A symbolic link is replaced by the new file, as ``mv`` would replace it; the file it
    points to is left alone. Other names of a hard-linked file keep the old content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        existing = os.lstat(path)
    except FileNotFoundError:
        existing = None
    replaced = existing if existing is not None and stat.S_ISREG(existing.st_mode) else None
    temporary: str | None = None
    try:
        with _signals_deferred(), _temporaries.lock:
            if _temporaries.abandoned:
                raise WritesAbandoned(str(path))
            descriptor, temporary = tempfile.mkstemp(
                prefix=_temporary_prefix(path), dir=path.parent
            )
            _temporaries.files.add(temporary)
            file = os.fdopen(descriptor, "wb")
        with file:
            write(file)
            file.flush()
            _sync(file.fileno())
        _take_permissions(temporary, replaced)
        with _temporaries.lock:
            if _temporaries.abandoned:
                raise WritesAbandoned(str(path))
            os.replace(temporary, path)
            _temporaries.files.discard(temporary)
    except BaseException:
        if temporary is not None:
            with _temporaries.lock:
                _temporaries.files.discard(temporary)
            Path(temporary).unlink(missing_ok=True)
        raise


def write_image(
    raster: Raster,
    path: Path,
    image_format: str,
    notes: list[str],
    *,
    quality: int,
    source: Path,
    source_data: bytes | None = None,
) -> None:
    """Write ``raster`` to ``path`` as ``image_format`` ("PNG", "JPEG" or "TIFF"), converted
    first where the format cannot hold it (``notes`` gets what was changed). 16-bit PNG is
    written by libpng (:mod:`tiinterp.cli.png`), 16-bit colour TIFF by tifffile, the rest by
    Pillow: JPEG at ``quality``, TIFF with the lossless compression of ``source`` (whose
    content is ``source_data`` if it was read before: a pipe) if it has one, else LZW. An
    existing file at ``path`` is replaced as :func:`_write_atomically` says (its permission
    bits kept; a symbolic link replaced, not followed).

    Raises
    ------
    ImageError
        The library that writes the file is missing, or fails.
    OSError
        The file cannot be written; no partial file is left, and the file it would have
        replaced is intact.
    """
    with _library_log_to_notes(notes):
        raster = _prepare_for_format(raster, image_format, notes)
        if image_format == "PNG" and raster.bits == 16:
            encoded = encode_png(raster)
            _write_atomically(path, lambda file: file.write(encoded))
            return
        if image_format == "TIFF" and raster.bits == 16 and raster.layout != "L":
            kept = _tiff_compression(source, source_data)
            _write_atomically(path, lambda file: _encode_tiff(raster, file, kept))
            return
        compression = _tiff_compression(source, source_data) if image_format == "TIFF" else None
        _write_atomically(
            path,
            lambda file: _encode_with_pillow(raster, image_format, file, quality, compression),
        )
