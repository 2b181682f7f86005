"""The PNG codec (tiinterp/_png.py), which reads and writes the 16-bit colour PNG files
Pillow reads at 8 bits per channel and cannot write.

The decoder is checked against files written the plain way from the specification's
definitions (every filter type, Adam7 or not, every colour type and depth it handles) and
against Pillow's own files; the encoder by round trips and by what Pillow reads of its
files. Images are generated from the seeded ``rng`` fixture.
"""

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from tiinterp import _png
from tiinterp._raster import LAYOUT_CHANNELS, ImageError, Raster


def gradient_image(rng, height, width, channels, dtype=np.uint8):
    """Diagonal ramps with a little noise: rows that PNG encoders filter with Sub, Up,
    Average or Paeth rather than None."""
    top = np.iinfo(dtype).max
    ramp = np.add.outer(np.linspace(0, 0.6, height), np.linspace(0, 0.3, width))[..., None]
    values = ramp + rng.uniform(0, 0.1, channels) + rng.normal(0, 0.02, (height, width, channels))
    return np.clip(np.floor(values * top + 0.5), 0, top).astype(dtype)


def filter_types(data):
    """The filter type of each row of a non-interlaced PNG file."""
    chunks = list(_png._read_chunks(data))
    height = struct.unpack(">I", chunks[0][1][4:8])[0]
    stream = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    return np.frombuffer(stream, np.uint8).reshape(height, -1)[:, 0]


def reference_png(pixels, filter_type, interlace=False, chunks=()):
    """A PNG file written the plain way: one filter type for every row, computed byte by
    byte from the definitions in the PNG specification (section 9.2), Adam7 by its table."""
    height, width, channels = pixels.shape
    depth = 16 if pixels.dtype == np.uint16 else 8
    layout = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]
    color_type = {"L": 0, "LA": 4, "RGB": 2, "RGBA": 6}[layout]
    pixel_bytes = channels * depth // 8
    passes = _png.ADAM7 if interlace else ((0, 0, 1, 1),)
    stream = bytearray()
    for x0, y0, dx, dy in passes:
        sub = pixels[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        raw = sub.astype(">u2" if depth == 16 else np.uint8).tobytes()
        stride = sub.shape[1] * pixel_bytes
        previous = bytes(stride)
        for y in range(sub.shape[0]):
            row = raw[y * stride : (y + 1) * stride]
            out = bytearray([filter_type])
            for i, value in enumerate(row):
                a = row[i - pixel_bytes] if i >= pixel_bytes else 0
                b = previous[i]
                c = previous[i - pixel_bytes] if i >= pixel_bytes else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                paeth = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                predictor = (0, a, b, (a + b) // 2, paeth)[filter_type]
                out.append((value - predictor) % 256)
            stream += out
            previous = row
    header = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, int(interlace))
    body = [_png.PNG_SIGNATURE, _png._chunk(b"IHDR", header)]
    body += [_png._chunk(kind, data) for kind, data in chunks]
    body += [_png._chunk(b"IDAT", zlib.compress(bytes(stream))), _png._chunk(b"IEND", b"")]
    return b"".join(body)


@pytest.mark.parametrize("interlace", [False, True])
@pytest.mark.parametrize("filter_type", [0, 1, 2, 3, 4])
def test_png_decoder_against_plain_encoder_and_pillow(rng, filter_type, interlace):
    for channels in (1, 2, 3, 4):
        for dtype in (np.uint8, np.uint16):
            top = np.iinfo(dtype).max
            pixels = rng.integers(0, top + 1, (11, 13, channels)).astype(dtype)
            data = reference_png(pixels, filter_type, interlace)
            np.testing.assert_array_equal(_png.decode_png(data).pixels, pixels)
            if dtype == np.uint8 or channels == 1:  # what Pillow reads at full depth
                with Image.open(io.BytesIO(data)) as image:
                    theirs = np.asarray(image).reshape(pixels.shape)
                np.testing.assert_array_equal(theirs, pixels)


def test_png_decoder_reads_pillows_adaptive_filters(rng):
    pixels = gradient_image(rng, 40, 50, 3)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    assert len(set(filter_types(buffer.getvalue()))) > 1  # Pillow chose filters row by row
    np.testing.assert_array_equal(_png.decode_png(buffer.getvalue()).pixels, pixels)


@pytest.mark.parametrize("layout", ["L", "LA", "RGB", "RGBA"])
def test_png_encoder_round_trip_and_pillow(rng, layout):
    channels = LAYOUT_CHANNELS[layout]
    wide = gradient_image(rng, 23, 31, channels, np.uint16)
    wide[0, 0] = 65535  # the extremes of the range
    wide[-1, -1] = 0
    data = _png.encode_png(Raster(wide, layout, icc_profile=b"profile bytes"))
    assert len(set(filter_types(data))) > 1  # the filter chosen row by row (12.8)
    decoded = _png.decode_png(data)
    np.testing.assert_array_equal(decoded.pixels, wide)
    assert (decoded.layout, decoded.icc_profile) == (layout, b"profile bytes")
    with Image.open(io.BytesIO(data)) as image:
        theirs = np.asarray(image)
        assert image.info["icc_profile"] == b"profile bytes"
    # Pillow keeps 16-bit gray, and the high bytes of 16-bit colour (gray+alpha as RGBA).
    if layout == "L":
        np.testing.assert_array_equal(theirs, wide[..., 0])
    elif layout == "LA":
        high = (wide >> 8).astype(np.uint8)
        np.testing.assert_array_equal(theirs, high[..., [0, 0, 0, 1]])
    else:
        np.testing.assert_array_equal(theirs, (wide >> 8).astype(np.uint8))
    narrow = gradient_image(rng, 23, 31, channels)
    with Image.open(io.BytesIO(_png.encode_png(Raster(narrow, layout)))) as image:
        np.testing.assert_array_equal(np.asarray(image).reshape(narrow.shape), narrow)


def test_png_colour_key_becomes_alpha_and_corruption_is_reported(rng):
    pixels = rng.integers(0, 65536, (6, 7, 3)).astype(np.uint16)
    pixels[2, 3] = (1, 2, 3)
    data = reference_png(pixels, 4, chunks=[(b"tRNS", struct.pack(">3H", 1, 2, 3))])
    decoded = _png.decode_png(data)
    assert decoded.layout == "RGBA"
    expected_alpha = np.full((6, 7), 65535)
    expected_alpha[2, 3] = 0
    np.testing.assert_array_equal(decoded.pixels[..., 3], expected_alpha)
    damaged = bytearray(data)
    damaged[40] ^= 0xFF
    with pytest.raises(ImageError, match="corrupt PNG file"):
        _png.decode_png(bytes(damaged))
    with pytest.raises(ImageError, match="truncated PNG file"):
        _png.decode_png(data[:60])


def test_png_size_and_orientation_metadata_as_pillow_reads_them(rng):
    """png_size from the header; png_info finds the chunks Pillow reads an EXIF orientation
    from, with the values Pillow's ``Image.info`` has for them (ignoring other text)."""
    pixels = rng.integers(0, 256, (11, 13, 3)).astype(np.uint8)
    exif = b"MM\0*\0\0\0\x08\0\0"
    raw_profile = "\nexif\n      16\n457869660000\n"
    xmp = '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description tiff:Orientation="3"/>'
    chunks = [
        (b"tEXt", b"Comment\0not wanted"),
        (b"eXIf", exif),
        (b"zTXt", b"Raw profile type exif\0\0" + zlib.compress(raw_profile.encode())),
        (b"iTXt", b"XML:com.adobe.xmp\0\1\0\0\0" + zlib.compress(xmp.encode())),
    ]
    data = reference_png(pixels, 1, chunks=chunks)
    assert _png.png_size(data[:24]) == (13, 11)
    assert _png.png_size(b"GIF89a" + data[6:24]) is None
    info = _png.png_info(data)
    assert info == {
        "exif": b"Exif\0\0" + exif,
        "Raw profile type exif": raw_profile,
        "XML:com.adobe.xmp": xmp,
        "xmp": xmp.encode(),
    }
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        assert {key: image.info[key] for key in info} == info


@pytest.mark.parametrize("kind", ["iCCP", "zTXt", "iTXt"])
def test_png_metadata_inflating_past_1_mib_is_refused(rng, kind):
    """A few kilobytes that inflate to 8 MiB in a metadata chunk: refused after inflating
    1 MiB (the ICC profile was inflated whole), as Pillow refuses them (ValueError)."""
    compressed = zlib.compress(bytes(8 << 20), 9)
    body = {
        "iCCP": b"ICC profile\0\0",
        "zTXt": b"Raw profile type exif\0\0",
        "iTXt": b"XML:com.adobe.xmp\0\1\0\0\0",
    }[kind] + compressed
    pixels = rng.integers(0, 65536, (3, 4, 3)).astype(np.uint16)
    wide, narrow = (
        reference_png(levels, 0, chunks=[(kind.encode(), body)])
        for levels in (pixels, (pixels >> 8).astype(np.uint8))
    )
    assert len(wide) < 20_000
    read = _png.decode_png if kind == "iCCP" else _png.png_info
    with pytest.raises(ImageError, match="inflates to more than 1 MiB"):
        read(wide)
    with pytest.raises(ValueError, match="Decompressed data too large"):
        Image.open(io.BytesIO(narrow)).load()
