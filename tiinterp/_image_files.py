"""Image files for the ``tiinterp`` command: PNG, JPEG and TIFF in and out of a Raster.

Pillow reads and writes the files, except 16-bit PNG, which :mod:`tiinterp._png` handles
(Pillow reads 16-bit colour PNG at 8 bits per channel and cannot write it). For the same
reason 16-bit colour TIFF files are refused rather than silently reduced to 8 bits. Pillow
is imported only when a file is read or written: it is an optional dependency (the ``cli``
extra), and :func:`pillow` says how to install it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from ._png import PNG_SIGNATURE, decode_png, encode_png, png_bit_depth
from ._raster import LAYOUT_CHANNELS, ImageError, Raster

# Pillow's names of the formats read: MPO is what Pillow calls many cameras' JPEG files.
PILLOW_FORMATS = ("PNG", "JPEG", "MPO", "TIFF")
PILLOW_MISSING = (
    "the tiinterp command needs Pillow to read and write images: pip install 'tiinterp[cli]'"
)
# Pillow's modes of 16-bit gray (native, little- and big-endian).
GRAY16_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
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


def _pillow_raster(image: Any) -> Raster:
    """Pillow image -> Raster: palette images become RGB(A), 1-bit ones gray, premultiplied
    alpha plain alpha; refuses what tiinterp cannot keep (16-bit colour TIFF, 32-bit)."""
    from PIL import ImageOps

    mode = image.mode
    if image.format == "TIFF" and mode not in GRAY16_MODES:
        depths = image.tag_v2.get(258, (8,))
        depths = depths if isinstance(depths, tuple) else (depths,)
        if max(depths) > 8:
            raise ImageError(
                f"{max(depths)}-bit {mode} TIFF files are not supported: Pillow reads their "
                "colour at 8 bits per channel; convert the file to 16-bit PNG first"
            )
    if mode in ("I", "F", "I;16S") or mode.startswith("I;32"):
        kind = "floating-point" if mode == "F" else "32-bit integer"
        raise ImageError(f"{kind} images are not supported (8 and 16 bits per channel are)")
    icc_profile = image.info.get("icc_profile") or None
    image = ImageOps.exif_transpose(image)  # the orientation a viewer shows, applied
    if mode in GRAY16_MODES:
        return Raster(np.asarray(image).astype(np.uint16)[..., None], "L", icc_profile)
    if mode == "P":
        target = "RGBA" if "transparency" in image.info else "RGB"
    else:
        target = LAYOUT_BY_PILLOW_MODE.get(mode, mode)
    if target not in LAYOUT_CHANNELS:
        raise ImageError(f"{mode} images are not supported (gray, RGB and CMYK are)")
    if target != mode:
        image = image.convert(target)
    pixels = np.asarray(image, dtype=np.uint8).reshape(image.height, image.width, -1)
    return Raster(pixels, target, icc_profile)


def sniff_format(path: Path) -> str | None:
    """A file's format from its first bytes: "PNG", "JPEG", "TIFF", or None."""
    with open(path, "rb") as file:
        head = file.read(8)
    if head.startswith(PNG_SIGNATURE):
        return "PNG"
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head[:4] in (b"II*\0", b"MM\0*"):
        return "TIFF"
    return None


def read_image(path: Path, notes: list[str]) -> Raster:
    """The first image in a PNG, JPEG or TIFF file. ``notes`` gets what the user should know
    (pages other than the first are ignored).

    Raises
    ------
    ImageError
        Not such a file, one of a kind tiinterp does not keep (16-bit colour TIFF, 32-bit
        or floating-point samples), a corrupt 16-bit PNG file, or Pillow is missing.
    OSError
        The file cannot be read. Pillow raises other exceptions for some broken files.
    """
    with open(path, "rb") as file:
        head = file.read(32)
        if png_bit_depth(head) == 16:
            return decode_png(head + file.read())
    pil = pillow()
    try:
        image = pil.open(path)
    except pil.UnidentifiedImageError:
        kind = sniff_format(path)
        if kind is None:
            raise ImageError("not a PNG, JPEG or TIFF image") from None
        example = " (such as 16-bit gray+alpha)" if kind == "TIFF" else ""
        raise ImageError(
            f"cannot read this {kind} file: damaged, or of a kind Pillow does not read{example}"
        ) from None
    with image:
        if image.format not in PILLOW_FORMATS:
            raise ImageError(f"{image.format} files are not supported (PNG, JPEG and TIFF are)")
        frames = getattr(image, "n_frames", 1)
        if frames > 1:
            notes.append(f"{frames} pages/frames: only the first is resized")
        return _pillow_raster(image)


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
    (alpha composited over white), PNG gets RGB for CMYK; 16-bit colour TIFF is refused."""
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
    if image_format == "TIFF" and raster.bits == 16 and raster.layout != "L":
        raise ImageError(
            f"cannot write {raster.describe()} as TIFF (Pillow writes TIFF colour at 8 bits "
            "per channel); write PNG instead"
        )
    return raster


def _encode_with_pillow(
    raster: Raster, image_format: str, file: IO[bytes], quality: int, compression: str | None
) -> None:
    """``raster`` written to ``file`` by Pillow: JPEG at ``quality``, TIFF compressed by
    ``compression`` (a Pillow name, None for none)."""
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
        options["compression"] = compression
    image.save(file, format=image_format, **options)


def _tiff_compression(path: Path) -> str | None:
    """The lossless compression of a TIFF input to keep, else LZW (lossless, readable
    everywhere); None (uncompressed) where Pillow lacks libtiff."""
    from PIL import features

    if not features.check("libtiff"):
        return None
    keep = ("raw", "tiff_lzw", "tiff_adobe_deflate", "tiff_deflate", "packbits")
    try:
        with pillow().open(path) as image:
            compression = image.info.get("compression") if image.format == "TIFF" else None
    except Exception:  # the input was read before; this is only a preference
        compression = None
    return compression if compression in keep else "tiff_lzw"


def _write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """``write(file)`` into a temporary file next to ``path``, then renamed over it: an
    interrupted or failed write leaves no partial output, and an input may be its own
    output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            write(file)
        # mkstemp makes the file private (0600); give it a new file's usual permissions.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_image(
    raster: Raster, path: Path, image_format: str, notes: list[str], *, quality: int, source: Path
) -> None:
    """Write ``raster`` to ``path`` as ``image_format`` ("PNG", "JPEG" or "TIFF"), converted
    first where the format cannot hold it (``notes`` gets what was changed). 16-bit PNG is
    written by :mod:`tiinterp._png`, the rest by Pillow: JPEG at ``quality``, TIFF with the
    lossless compression of ``source`` if it has one, else LZW.

    Raises
    ------
    ImageError
        The format cannot hold the image (16-bit colour TIFF), or Pillow is missing.
    OSError
        The file cannot be written; no partial file is left.
    """
    raster = _prepare_for_format(raster, image_format, notes)
    if image_format == "PNG" and raster.bits == 16:
        encoded = encode_png(raster)
        _write_atomically(path, lambda file: file.write(encoded))
        return
    compression = _tiff_compression(source) if image_format == "TIFF" else None
    _write_atomically(
        path,
        lambda file: _encode_with_pillow(raster, image_format, file, quality, compression),
    )
