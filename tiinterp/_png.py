"""PNG files read and written with NumPy and zlib, for the 16-bit images Pillow cannot handle.

The ``tiinterp`` command keeps an image's bit depth, and Pillow (13) cannot do that for PNG
beyond 16-bit gray: it reads 16-bit RGB, RGBA and gray+alpha files at 8 bits per channel
(it keeps the high byte of each sample) and cannot write them at all. This module reads and
writes those files itself: non-palette images (colour types 0, 2, 4 and 6) of 8 or 16 bits
per sample, interlaced or not; 8-bit files are supported too, so that the tests can compare
with Pillow, but the command reads and writes them through Pillow. Palette images and depths
below 8 bits are left to Pillow, which reads them fully.

Section numbers are those of the PNG specification, second edition (W3C Recommendation,
2003, also ISO/IEC 15948:2003, https://www.w3.org/TR/2003/REC-PNG-20031110/): 5.2 the
signature, 5.3 the chunk layout and its CRC, 5.4 critical and ancillary chunk names, 8.2
Adam7 interlacing, 9.2 the five row filters of filter method 0 (9.4 the Paeth predictor),
11.2.2 IHDR, 11.3.2.1 tRNS, 11.3.3.3 iCCP, 11.3.4 tEXt, zTXt and iTXt, 12.8 the encoder's
choice of filter; eXIf is the PNG 1.5 extension (Extensions to the PNG 1.2 Specification,
version 1.5.0, 2017).

Every compressed stream is inflated with a bound: the image data to the size its header
declares (the caller checks that size against its own limit first, :func:`png_size`), the
ICC profile and the metadata text to 1 MiB, Pillow's bound for the same chunks, so that a
small file cannot make the reader allocate gigabytes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import numpy as np

from ._raster import LAYOUT_CHANNELS, ImageError, Raster

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The colour types read and written (11.2.2); 3, palette, is left to Pillow.
PNG_LAYOUT_BY_COLOR_TYPE = {0: "L", 4: "LA", 2: "RGB", 6: "RGBA"}
PNG_COLOR_TYPE_BY_LAYOUT = {layout: kind for kind, layout in PNG_LAYOUT_BY_COLOR_TYPE.items()}
# Pillow's bound on a decompressed iCCP, zTXt or iTXt chunk (PngImagePlugin.MAX_TEXT_CHUNK).
MAX_METADATA_BYTES = 1 << 20
# The text keywords (and Pillow's names for them in Image.info) that can hold the EXIF
# orientation: ImageMagick's hex dump of EXIF, and XMP's tiff:Orientation.
ORIENTATION_TEXT_KEYS = ("Raw profile type exif", "XML:com.adobe.xmp")
# Adam7 passes (8.2): (first column, first row, column step, row step).
ADAM7 = (
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
)


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


def _inflate_metadata(compressed: bytes, what: str) -> bytes | None:
    """A zlib stream of metadata, at most MAX_METADATA_BYTES of it; None if the stream is
    broken (dropped, as Pillow does).

    Raises
    ------
    ImageError
        The stream inflates to more than MAX_METADATA_BYTES (Pillow refuses such files too).
    """
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(compressed, MAX_METADATA_BYTES)
    except zlib.error:
        return None
    if inflater.unconsumed_tail:
        raise ImageError(
            f"unsupported PNG file (its {what} inflates to more than "
            f"{MAX_METADATA_BYTES >> 20} MiB)"
        )
    return data


def _paeth(left: np.ndarray, up: np.ndarray, up_left: np.ndarray) -> np.ndarray:
    """The Paeth predictor (9.4) on int16 bytes: whichever neighbour is closest to
    ``left + up - up_left``, ties in the order left, up, up-left."""
    to_left = np.abs(up - up_left)
    to_up = np.abs(left - up_left)
    to_up_left = np.abs(left + up - 2 * up_left)
    return np.where(
        (to_left <= to_up) & (to_left <= to_up_left),
        left,
        np.where(to_up <= to_up_left, up, up_left),
    )


def _predictions(left: np.ndarray, up: np.ndarray, up_left: np.ndarray) -> list[np.ndarray]:
    """What filter types 0 to 4 (None, Sub, Up, Average, Paeth; 9.2) predict for bytes
    whose left, upper and upper-left neighbours (int16) are given; a row stores each
    byte minus its prediction, modulo 256."""
    return [np.zeros_like(left), left, up, (left + up) >> 1, _paeth(left, up, up_left)]


def _unfilter(rows: np.ndarray, width: int, pixel_bytes: int) -> np.ndarray:
    """Undo the row filters of ``rows`` ((h, 1 + width * pixel_bytes) uint8, each row's
    filter type first); returns (h, width, pixel_bytes) uint8.

    A byte depends on its left, upper and upper-left neighbours only, so every pixel of an
    anti-diagonal ``y + x = d`` can be decoded at once: h + w - 1 vectorised steps whatever
    the filters, instead of a Python loop over the pixels of Average and Paeth rows."""
    height = rows.shape[0]
    kinds = rows[:, 0]
    if kinds.size and int(kinds.max()) > 4:
        raise ImageError(f"corrupt PNG file (row filter type {int(kinds.max())})")
    filtered = rows[:, 1:].reshape(height, width, pixel_bytes).astype(np.int16)
    # Row 0 and column 0 are the zeros the filters read beyond the image's edges.
    decoded = np.zeros((height + 1, width + 1, pixel_bytes), np.int16)
    kinds = kinds.astype(np.intp)[:, None]
    for diagonal in range(height + width - 1):
        ys = np.arange(max(0, diagonal - width + 1), min(height, diagonal + 1))
        xs = diagonal - ys
        left = decoded[ys + 1, xs]
        up = decoded[ys, xs + 1]
        up_left = decoded[ys, xs]
        prediction: np.ndarray = np.choose(kinds[ys], _predictions(left, up, up_left))
        decoded[ys + 1, xs + 1] = (filtered[ys, xs] + prediction) & 0xFF
    return decoded[1:, 1:].astype(np.uint8)


def _read_chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(type, data) of each chunk after the signature, up to IEND, CRCs checked (5.3)."""
    position = len(PNG_SIGNATURE)
    while True:
        if position + 12 > len(data):
            raise ImageError("truncated PNG file")
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        crc = data[position + 8 + length : position + 12 + length]
        if len(crc) < 4:
            raise ImageError("truncated PNG file")
        if zlib.crc32(kind + body) != int.from_bytes(crc, "big"):
            raise ImageError(f"corrupt PNG file (bad checksum in the {kind!r} chunk)")
        position += 12 + length
        yield kind, body
        if kind == b"IEND":
            return


def decode_png(data: bytes) -> Raster:
    """A non-palette 8- or 16-bit PNG file's pixels, ``(H, W, C)`` uint8 or uint16.

    A tRNS colour key (gray or RGB) becomes an alpha channel; the ICC profile is kept.

    Raises
    ------
    ImageError
        Not such a PNG file, or a corrupt one.
    """
    if data[:8] != PNG_SIGNATURE:
        raise ImageError("not a PNG file")
    header = None
    compressed = []
    colour_key = None
    icc_profile = None
    for kind, body in _read_chunks(data):
        if kind == b"IHDR" and len(body) == 13:
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"tRNS":
            colour_key = body
        elif kind == b"iCCP":
            _, _, profile = body.partition(b"\0")
            icc_profile = _inflate_metadata(profile[1:], "ICC profile")
        # Bit 5 of the first letter clear (upper case): a critical chunk, which a decoder
        # that does not know it must not ignore (5.4).
        elif kind[0] & 0x20 == 0 and kind not in (b"IHDR", b"IEND", b"PLTE"):
            raise ImageError(f"unsupported PNG file (critical chunk {kind.decode('latin-1')})")
    if header is None:
        raise ImageError("corrupt PNG file (no IHDR chunk)")
    width, height, depth, color_type, compression, filter_method, interlace = header
    if color_type not in PNG_LAYOUT_BY_COLOR_TYPE or depth not in (8, 16):
        raise ImageError(f"unsupported PNG file (colour type {color_type}, {depth} bits)")
    if compression != 0 or filter_method != 0 or interlace not in (0, 1):
        raise ImageError("unsupported PNG file (unknown compression, filter or interlace)")
    if width == 0 or height == 0:
        raise ImageError("corrupt PNG file (zero width or height)")
    layout = PNG_LAYOUT_BY_COLOR_TYPE[color_type]
    channels = LAYOUT_CHANNELS[layout]
    pixel_bytes = channels * depth // 8
    passes = ADAM7 if interlace else ((0, 0, 1, 1),)
    shapes = [(-(-(height - y0) // dy), -(-(width - x0) // dx)) for x0, y0, dx, dy in passes]
    expected = sum(h * (1 + w * pixel_bytes) for h, w in shapes if h > 0 and w > 0)
    try:
        raw = zlib.decompressobj().decompress(b"".join(compressed), expected)
    except zlib.error as error:
        raise ImageError(f"corrupt PNG file ({error})") from None
    if len(raw) < expected:
        raise ImageError("truncated PNG file (image data too short)")
    stream = np.frombuffer(raw, np.uint8)
    image_bytes = np.empty((height, width, pixel_bytes), np.uint8)
    offset = 0
    for (x0, y0, dx, dy), (rows, columns) in zip(passes, shapes, strict=True):
        if rows <= 0 or columns <= 0:
            continue
        size = rows * (1 + columns * pixel_bytes)
        block = stream[offset : offset + size].reshape(rows, 1 + columns * pixel_bytes)
        image_bytes[y0::dy, x0::dx] = _unfilter(block, columns, pixel_bytes)
        offset += size
    sample = np.dtype(">u2") if depth == 16 else np.dtype(np.uint8)
    pixels = image_bytes.view(sample).reshape(height, width, channels)
    pixels = pixels.astype(np.uint16 if depth == 16 else np.uint8)
    if colour_key is not None and layout in ("L", "RGB") and len(colour_key) == 2 * channels:
        # The key is given in 16-bit samples whatever the depth (PNG spec, 11.3.2.1).
        key = np.array(struct.unpack(f">{channels}H", colour_key), dtype=np.uint32)
        opaque = np.iinfo(pixels.dtype).max
        alpha = np.where(np.all(pixels == key, axis=-1), 0, opaque).astype(pixels.dtype)
        pixels = np.concatenate([pixels, alpha[..., None]], axis=-1)
        layout += "A"
    return Raster(pixels, layout, icc_profile)


def png_info(data: bytes) -> dict[str, str | bytes]:
    """What a PNG file holds of the metadata that Pillow reads an EXIF orientation from, under
    the keys of Pillow's ``Image.info``: "exif" (the eXIf chunk, or a tEXt chunk of that
    name), "Raw profile type exif" and "XML:com.adobe.xmp" (tEXt, zTXt or iTXt text), and
    "xmp" (the iTXt XMP packet's bytes). A later chunk replaces an earlier one, as in Pillow.

    Raises
    ------
    ImageError
        A corrupt or truncated file, or a compressed text of these inflating to more than
        1 MiB.
    """
    info: dict[str, str | bytes] = {}
    for kind, body in _read_chunks(data):
        if kind == b"eXIf":
            info["exif"] = b"Exif\0\0" + body
        elif kind in (b"tEXt", b"zTXt", b"iTXt"):
            keyword, _, rest = body.partition(b"\0")
            name = keyword.decode("latin-1")
            if name == "exif" and kind == b"tEXt":
                info["exif"] = rest
            elif name in ORIENTATION_TEXT_KEYS:
                text = _text_chunk_value(kind, rest, name)
                if text is not None:
                    info[name] = text.decode("utf-8" if kind == b"iTXt" else "latin-1", "replace")
                    if kind == b"iTXt" and name == "XML:com.adobe.xmp":
                        info["xmp"] = text
    return info


def _text_chunk_value(kind: bytes, rest: bytes, name: str) -> bytes | None:
    """The text of a tEXt, zTXt or iTXt chunk (11.3.4) from the bytes after its keyword;
    None where the chunk is malformed or uses an unknown compression (skipped)."""
    if kind == b"tEXt":
        return rest
    if kind == b"zTXt":
        if not rest or rest[0] != 0:
            return None
        return _inflate_metadata(rest[1:], f"{name!r} text")
    if len(rest) < 2:
        return None
    compressed, method, rest = rest[0], rest[1], rest[2:]
    parts = rest.split(b"\0", 2)  # language tag, translated keyword, text
    if len(parts) < 3:
        return None
    if not compressed:
        return parts[2]
    return _inflate_metadata(parts[2], f"{name!r} text") if method == 0 else None


def _chunk(kind: bytes, body: bytes) -> bytes:
    """One chunk: length, type, data and the CRC of type and data (5.3)."""
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def encode_png(raster: Raster) -> bytes:
    """A PNG file (8 or 16 bits per sample, not interlaced) of ``raster``.

    Each row takes the filter whose output has the smallest sum of absolute values as signed
    bytes, the heuristic the PNG specification recommends (section 12.8)."""
    height, width, channels = raster.pixels.shape
    if raster.layout not in PNG_COLOR_TYPE_BY_LAYOUT or LAYOUT_CHANNELS[raster.layout] != channels:
        raise ImageError(f"PNG cannot hold a {raster.layout} image")
    big_endian = raster.pixels.astype(">u2" if raster.bits == 16 else np.uint8)
    samples = np.ascontiguousarray(big_endian).view(np.uint8).reshape(height, width, -1)
    pixel_bytes = samples.shape[2]
    rows = []
    # Blocks of rows keep the five filtered candidates' memory small on large images.
    block_rows = max(1, (1 << 22) // max(1, width * pixel_bytes))
    previous = np.zeros((1, width, pixel_bytes), np.int16)
    for start in range(0, height, block_rows):
        block = samples[start : start + block_rows].astype(np.int16)
        up = np.concatenate([previous, block[:-1]])
        left = np.zeros_like(block)
        left[:, 1:] = block[:, :-1]
        up_left = np.zeros_like(block)
        up_left[:, 1:] = up[:, :-1]
        # int16 -> uint8 keeps the low byte: the filters work modulo 256.
        candidates = (block - np.stack(_predictions(left, up, up_left))).astype(np.uint8)
        signed = candidates.astype(np.int8).astype(np.int32)
        cost = np.abs(signed).reshape(5, block.shape[0], -1).sum(axis=2)
        best = cost.argmin(axis=0)
        chosen = candidates[best, np.arange(block.shape[0])].reshape(block.shape[0], -1)
        rows.append(np.concatenate([best.astype(np.uint8)[:, None], chosen], axis=1))
        previous = block[-1:]
    header = struct.pack(
        ">IIBBBBB", width, height, raster.bits, PNG_COLOR_TYPE_BY_LAYOUT[raster.layout], 0, 0, 0
    )
    parts = [PNG_SIGNATURE, _chunk(b"IHDR", header)]
    if raster.icc_profile:
        body = b"ICC profile\0\0" + zlib.compress(raster.icc_profile)
        parts.append(_chunk(b"iCCP", body))
    data = zlib.compress(np.concatenate(rows).tobytes(), 6)
    parts.append(_chunk(b"IDAT", data))
    parts.append(_chunk(b"IEND", b""))
    return b"".join(parts)
