"""16-bit PNG files, which Pillow reads at 8 bits per channel (colour) and cannot write.

The ``tiinterp`` command keeps an image's bit depth. Pillow (13) reads 16-bit RGB, RGBA and
gray+alpha PNG files at 8 bits per channel (it keeps the high byte of each sample) and
writes 16-bit PNG in gray only, so these files go through libpng instead, by imagecodecs
(``png_decode``, ``png_encode``; the ``cli`` extra). Palette images and depths below 16
are left to Pillow, which reads them fully.

imagecodecs returns the pixels only, and its error messages cannot be shown: it keeps a
pointer to libpng's message and reads it after libpng has left the function whose stack
held it (imagecodecs 2026.3.6; a damaged chunk name came out as bytes that are not UTF-8).
So the file's chunks are walked here first: a truncated or damaged file, or one with a
critical chunk libpng does not know, gets a message of tiinterp's. The metadata that
tiinterp keeps or applies (the ICC profile, the EXIF orientation wherever Pillow finds it)
is read by Pillow itself, from a 1x1 PNG file that carries the file's metadata chunks
(:func:`decode_png`), exactly as it reads an 8-bit file's, within the same 1 MiB bound on
what a compressed chunk inflates to.

Section numbers are those of the PNG specification, second edition (W3C Recommendation,
2003, https://www.w3.org/TR/2003/REC-PNG-20031110/): 5.2 the signature, 5.3 the chunk
layout and its CRC, 5.4 critical and ancillary chunks, 11.2.2 IHDR, 11.3.3.3 iCCP, 11.3.4
tEXt, zTXt and iTXt; eXIf is the PNG 1.5 extension (Extensions to the PNG 1.2
Specification, version 1.5.0, 2017).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from .raster import ImageError, Raster

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IMAGECODECS_MISSING = (
    "the tiinterp command needs imagecodecs for 16-bit PNG: pip install 'tiinterp[cli]'"
)
# The (H, W, C) array's channel count -> its layout (16-bit PNG holds no CMYK).
LAYOUT_BY_CHANNELS = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
# The chunks Pillow reads the ICC profile and the EXIF orientation from (iCCP; eXIf, and
# ImageMagick's EXIF text or XMP in tEXt, zTXt or iTXt).
METADATA_CHUNKS = (b"iCCP", b"eXIf", b"tEXt", b"zTXt", b"iTXt")
# The critical chunks of a non-palette image; libpng refuses any other (5.4).
KNOWN_CRITICAL = (b"IHDR", b"PLTE", b"IDAT", b"IEND")


def png_bit_depth(head: bytes) -> int | None:
    """The bit depth of a PNG file from its first 25 bytes (signature and IHDR), or None."""
    if len(head) >= 25 and head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR":
        return head[24]
    return None


def png_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG file from its first 24 bytes (signature and IHDR), or None."""
    if len(head) >= 24 and head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR":
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    return None


def imagecodecs() -> Any:
    """The imagecodecs module with its PNG codec, or an ImageError naming the extra."""
    try:
        import imagecodecs as codecs
    except ImportError:
        raise ImageError(IMAGECODECS_MISSING) from None
    # A build without libpng has a stand-in PNG class whose functions raise when called.
    if not codecs.PNG.available:
        raise ImageError(IMAGECODECS_MISSING)
    return codecs


def chunk(kind: bytes, body: bytes) -> bytes:
    """One chunk: length, type, data and the CRC of type and data (5.3)."""
    crc = zlib.crc32(body, zlib.crc32(kind))
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def _metadata_chunks(data: bytes) -> list[bytes]:
    """The whole iCCP, eXIf and text chunks of a PNG file, in order, once every chunk up to
    IEND is checked: present in full, its CRC right, no critical chunk libpng lacks.

    Raises
    ------
    ImageError
        A truncated or corrupt file, or one with an unknown critical chunk.
    """
    if data[:8] != PNG_SIGNATURE:
        raise ImageError("not a PNG file")
    view = memoryview(data)
    position = len(PNG_SIGNATURE)
    kept = []
    while True:
        if position + 12 > len(data):
            raise ImageError("truncated PNG file")
        length, kind = struct.unpack_from(">I4s", data, position)
        end = position + 12 + length
        if end > len(data):
            raise ImageError("truncated PNG file")
        if (position == len(PNG_SIGNATURE)) != (kind == b"IHDR"):
            raise ImageError("corrupt PNG file (IHDR is not its first chunk)")
        crc = zlib.crc32(view[position + 8 : end - 4], zlib.crc32(kind))
        if crc != int.from_bytes(view[end - 4 : end], "big"):
            raise ImageError(f"corrupt PNG file (bad checksum in the {kind!r} chunk)")
        # Bit 5 of the first letter clear (upper case): a critical chunk, which a decoder
        # that does not know it must not ignore (5.4).
        if kind[0] & 0x20 == 0 and kind not in KNOWN_CRITICAL:
            raise ImageError(f"unsupported PNG file (critical chunk {kind.decode('latin-1')})")
        if kind in METADATA_CHUNKS:
            kept.append(data[position:end])
        if kind == b"IEND":
            return kept
        position = end


def decode_png(data: bytes) -> tuple[Raster, bytes]:
    """A PNG file's pixels, ``(H, W, C)`` uint16 for a 16-bit file (a tRNS colour key
    becomes an alpha channel), and a 1x1 8-bit gray PNG file carrying the file's iCCP, eXIf
    and text chunks: Pillow reads the ICC profile and the EXIF orientation from it as from
    the file itself. The raster has no ICC profile yet.

    Raises
    ------
    ImageError
        Not a PNG file, a truncated or corrupt one, or imagecodecs is missing.
    """
    metadata = _metadata_chunks(data)
    codecs = imagecodecs()
    try:
        pixels = codecs.png_decode(data)
    except (RuntimeError, ValueError):  # imagecodecs' PngError, or its garbled message
        raise ImageError("corrupt PNG file (libpng cannot decode its image data)") from None
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    layout = LAYOUT_BY_CHANNELS[pixels.shape[2]]
    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    carrier = b"".join(
        [
            PNG_SIGNATURE,
            chunk(b"IHDR", header),
            *metadata,
            chunk(b"IDAT", zlib.compress(b"\0\0")),  # filter type None, one black pixel
            chunk(b"IEND", b""),
        ]
    )
    return Raster(pixels, layout), carrier


def encode_png(raster: Raster) -> bytes:
    """A PNG file (not interlaced) of ``raster``, by libpng at zlib's default level, each
    row's filter chosen by libpng; the ICC profile, if any, in an iCCP chunk.

    Raises
    ------
    ImageError
        A layout PNG cannot hold (CMYK), or imagecodecs is missing or fails.
    """
    channels = raster.pixels.shape[2]
    if LAYOUT_BY_CHANNELS.get(channels) != raster.layout:
        raise ImageError(f"PNG cannot hold a {raster.layout} image")
    codecs = imagecodecs()
    pixels = np.ascontiguousarray(raster.pixels)
    try:
        data = bytes(codecs.png_encode(pixels[..., 0] if channels == 1 else pixels))
    except (RuntimeError, ValueError):  # as in decode_png, the message cannot be trusted
        raise ImageError(f"libpng cannot encode this {raster.describe()} image") from None
    if not raster.icc_profile:
        return data
    # The iCCP chunk right after IHDR (signature and IHDR: 33 bytes), before the image data
    # as it must be (11.3.3.3).
    body = b"ICC profile\0\0" + zlib.compress(raster.icc_profile)
    return data[:33] + chunk(b"iCCP", body) + data[33:]
