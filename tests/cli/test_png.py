"""16-bit PNG files in the ``tiinterp`` command: read and written by libpng through
imagecodecs (tiinterp/cli/png.py), their metadata read by Pillow, through the command's reader
and writer (tiinterp/cli/image_files.py), in-process.

Files are written the plain way from the specification's definitions (every filter type,
Adam7 or not, every colour type at 8 and 16 bits) and read back exactly; the writer's files
are read back exactly, by the command and by imagecodecs and Pillow; damaged, truncated and
oversized files are refused with a message of tiinterp's. 16-bit TIFF is tested with the
command's other formats (tests/cli/test_cli.py). Images are generated from the seeded ``rng``
fixture.
"""

import io
import logging
import struct
import sys
import zlib

import imagecodecs
import numpy as np
import pytest
from PIL import Image

from tiinterp.cli import image_files as _image_files
from tiinterp.cli import png as _png
from tiinterp.cli.raster import LAYOUT_CHANNELS, ImageError, Raster

# Adam7 passes (PNG specification, 8.2): (first column, first row, column step, row step).
ADAM7 = (
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
)


def gradient_image(rng, height, width, channels, dtype=np.uint16):
    """Diagonal ramps with a little noise: rows that PNG encoders filter with Sub, Up,
    Average or Paeth rather than None."""
    top = np.iinfo(dtype).max
    ramp = np.add.outer(np.linspace(0, 0.6, height), np.linspace(0, 0.3, width))[..., None]
    values = ramp + rng.uniform(0, 0.1, channels) + rng.normal(0, 0.02, (height, width, channels))
    return np.clip(np.floor(values * top + 0.5), 0, top).astype(dtype)


def chunks_of(data):
    """(type, data) of each chunk of a PNG file, read by the specification's layout."""
    position, found = 8, []
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        found.append((kind, data[position + 8 : position + 8 + length]))
        position += 12 + length
    return found


def filter_types(data):
    """The filter type of each row of a non-interlaced PNG file."""
    chunks = chunks_of(data)
    height = struct.unpack(">I", chunks[0][1][4:8])[0]
    stream = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    return np.frombuffer(stream, np.uint8).reshape(height, -1)[:, 0]


def reference_png(pixels, filter_type, interlace=False, chunks=()):
    """A PNG file written the plain way: one filter type for every row, computed byte by
    byte from the definitions in the PNG specification (section 9.2), Adam7 by its table;
    ``chunks`` (type, data) between IHDR and IDAT."""
    height, width, channels = pixels.shape
    depth = 16 if pixels.dtype == np.uint16 else 8
    color_type = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    pixel_bytes = channels * depth // 8
    stream = bytearray()
    for x0, y0, dx, dy in ADAM7 if interlace else ((0, 0, 1, 1),):
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
    body = [_png.PNG_SIGNATURE, _png.chunk(b"IHDR", header)]
    body += [_png.chunk(kind, data) for kind, data in chunks]
    body += [_png.chunk(b"IDAT", zlib.compress(bytes(stream))), _png.chunk(b"IEND", b"")]
    return b"".join(body)


def read(tmp_path, data, notes=None):
    """``data`` as a file read by the command's reader."""
    (tmp_path / "in.png").write_bytes(data)
    return _image_files.read_image(tmp_path / "in.png", [] if notes is None else notes)


@pytest.mark.parametrize("interlace", [False, True])
@pytest.mark.parametrize("filter_type", [0, 1, 2, 3, 4])
def test_every_filter_layout_and_depth_read_exactly(tmp_path, rng, caplog, filter_type, interlace):
    """16-bit files by libpng, 8-bit ones by Pillow: the same levels as were written, and
    nothing logged (imagecodecs makes libpng warn about every interlaced file)."""
    caplog.set_level(logging.WARNING)
    for layout in ("L", "LA", "RGB", "RGBA"):
        for dtype in (np.uint8, np.uint16):
            top = np.iinfo(dtype).max
            pixels = rng.integers(0, top + 1, (11, 13, LAYOUT_CHANNELS[layout])).astype(dtype)
            notes = []
            raster = read(tmp_path, reference_png(pixels, filter_type, interlace), notes)
            assert (raster.layout, raster.pixels.dtype, raster.icc_profile) == (layout, dtype, None)
            np.testing.assert_array_equal(raster.pixels, pixels, err_msg=f"{layout} {dtype}")
            assert notes == []
    assert caplog.records == []


@pytest.mark.parametrize("layout", ["L", "LA", "RGB", "RGBA"])
def test_16_bit_round_trip_keeps_levels_profile_and_reads_elsewhere(tmp_path, rng, layout):
    """The writer's files (libpng's filter chosen row by row, the ICC profile in iCCP):
    read back exactly by the command and by imagecodecs; Pillow finds the profile and reads
    16-bit gray fully, colour by its high bytes (gray+alpha as RGBA)."""
    wide = gradient_image(rng, 23, 31, LAYOUT_CHANNELS[layout])
    wide[0, 0] = 65535  # the extremes of the range
    wide[-1, -1] = 0
    path = tmp_path / "out.png"
    notes = []
    _image_files.write_image(
        Raster(wide, layout, b"profile bytes"), path, "PNG", notes, quality=92, source=path
    )
    assert notes == []
    data = path.read_bytes()
    assert [kind for kind, _ in chunks_of(data)][:2] == [b"IHDR", b"iCCP"]
    assert len(set(filter_types(data))) > 1
    ours = _image_files.read_image(path, notes)
    np.testing.assert_array_equal(ours.pixels, wide)
    assert (ours.layout, ours.icc_profile, notes) == (layout, b"profile bytes", [])
    theirs = imagecodecs.png_decode(data)
    np.testing.assert_array_equal(theirs.reshape(wide.shape), wide)
    with Image.open(path) as image:
        pillows = np.asarray(image)
        assert image.info["icc_profile"] == b"profile bytes"
    if layout == "L":
        np.testing.assert_array_equal(pillows, wide[..., 0])
    elif layout == "LA":
        np.testing.assert_array_equal(pillows, (wide >> 8).astype(np.uint8)[..., [0, 0, 0, 1]])
    else:
        np.testing.assert_array_equal(pillows, (wide >> 8).astype(np.uint8))


def test_colour_key_becomes_alpha(tmp_path, rng):
    """A tRNS colour key (given in 16-bit samples, PNG specification 11.3.2.1): the pixels
    of that colour transparent, every other opaque."""
    for layout, key in (("RGB", (1, 2, 3)), ("L", (5,))):
        pixels = rng.integers(0, 65536, (6, 7, len(key))).astype(np.uint16)
        pixels[2, 3] = key
        trns = struct.pack(f">{len(key)}H", *key)
        raster = read(tmp_path, reference_png(pixels, 4, chunks=[(b"tRNS", trns)]))
        assert raster.layout == layout + "A"
        np.testing.assert_array_equal(raster.pixels[..., :-1], pixels)
        expected_alpha = np.full((6, 7), 65535)
        expected_alpha[2, 3] = 0
        np.testing.assert_array_equal(raster.pixels[..., -1], expected_alpha)


def damaged_files(rng):
    """name -> (a damaged 16-bit file, the message it must get)."""
    pixels = rng.integers(0, 65536, (6, 7, 3)).astype(np.uint16)
    data = reference_png(pixels, 4)
    idat_at = 8 + 25  # signature and IHDR
    (idat_length,) = struct.unpack(">I", data[idat_at : idat_at + 4])
    stream = bytearray(data[idat_at + 8 : idat_at + 8 + idat_length])
    stream[2] = 0xFF  # the first deflate block of an impossible type, CRC made right
    bad_stream = _png.chunk(b"IDAT", bytes(stream))
    flipped = bytearray(data)
    flipped[idat_at + 7] ^= 0xFF  # the last letter of "IDAT"
    idat_crc = bytearray(data)
    idat_crc[idat_at + 8 + idat_length] ^= 1
    unknown = reference_png(pixels, 4, chunks=[(b"ZZZZ", b"critical")])
    short_stream = _png.chunk(b"IDAT", zlib.compress(b"\0" * 10))
    return {
        "chunk type": (bytes(flipped), "corrupt PNG file (bad checksum in the b'IDA"),
        "IDAT checksum": (bytes(idat_crc), "corrupt PNG file (bad checksum in the b'IDAT' chunk)"),
        "deflate stream": (
            data[:idat_at] + bad_stream + data[idat_at + 12 + idat_length :],
            "corrupt PNG file (libpng cannot decode its image data)",
        ),
        "image data short": (
            data[:idat_at] + short_stream + data[idat_at + 12 + idat_length :],
            "corrupt PNG file (libpng cannot decode its image data)",
        ),
        "critical chunk": (unknown, "unsupported PNG file (critical chunk ZZZZ)"),
        "in IHDR": (data[:30], "truncated PNG file"),
        "in IDAT": (data[:60], "truncated PNG file"),
        "no IEND": (data[:-12], "truncated PNG file"),
        "IEND's checksum cut": (data[:-2], "truncated PNG file"),
    }


def test_damaged_and_truncated_files_are_refused_with_our_messages(tmp_path, rng, caplog):
    """Every kind of damage is an ImageError whose message is tiinterp's: imagecodecs'
    own message cannot be shown (it formats libpng's after libpng has freed it; on a damaged
    chunk name it came out as bytes that are not UTF-8, a UnicodeDecodeError)."""
    caplog.set_level(logging.WARNING)
    for name, (data, message) in damaged_files(rng).items():
        with pytest.raises(ImageError) as refusal:
            read(tmp_path, data)
        assert message in str(refusal.value), name
        assert type(refusal.value) is ImageError
    assert caplog.records == []


def test_size_from_the_header(rng):
    data = reference_png(rng.integers(0, 256, (11, 13, 3)).astype(np.uint8), 1)
    assert _png.png_size(data[:24]) == (13, 11)
    assert _png.png_bit_depth(data[:25]) == 8
    assert _png.png_size(b"GIF89a" + data[6:24]) is None
    assert _png.png_bit_depth(data[:24]) is None


def test_metadata_is_what_pillow_reads_from_the_file_itself(rng):
    """The 1x1 file carrying a 16-bit file's metadata gives Pillow the info it reads from
    an 8-bit file with the same chunks, before and after the image data (other text
    included; pHYs, which tiinterp does not keep, is not carried)."""
    exif = b"MM\0*\0\0\0\x08\0\0"
    raw_profile = "\nexif\n      16\n457869660000\n"
    xmp = '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description tiff:Orientation="3"/>'
    before = [
        (b"iCCP", b"ICC profile\0\0" + zlib.compress(b"a profile")),
        (b"tEXt", b"Comment\0kept as Pillow keeps it"),
        (b"zTXt", b"Raw profile type exif\0\0" + zlib.compress(raw_profile.encode())),
        (b"pHYs", struct.pack(">IIB", 2835, 2835, 1)),
    ]
    after = [
        (b"eXIf", exif),
        (b"iTXt", b"XML:com.adobe.xmp\0\1\0\0\0" + zlib.compress(xmp.encode())),
    ]
    infos = []
    for dtype in (np.uint16, np.uint8):
        pixels = rng.integers(0, 256, (5, 6, 3)).astype(dtype)
        data = reference_png(pixels, 2, chunks=before)
        data = data[:-12] + b"".join(_png.chunk(kind, body) for kind, body in after) + data[-12:]
        if dtype == np.uint16:
            data = _png.decode_png(data)[1]
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            infos.append({key: image.info[key] for key in image.info if key != "dpi"})
    assert infos[0] == infos[1]
    assert infos[0]["icc_profile"] == b"a profile"
    assert infos[0]["exif"] == b"Exif\0\0" + exif
    assert infos[0]["Raw profile type exif"] == raw_profile
    assert infos[0]["xmp"] == xmp.encode()


@pytest.mark.parametrize("kind", ["iCCP", "zTXt", "iTXt"])
def test_metadata_inflating_past_1_mib_is_refused(tmp_path, rng, kind):
    """A few kilobytes that inflate to 8 MiB in a metadata chunk: refused by Pillow's bound
    (1 MiB), for a 16-bit file as for an 8-bit one."""
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
    with pytest.raises(ImageError, match=r"cannot read this PNG file's metadata \(Decompressed"):
        read(tmp_path, wide)
    with pytest.raises(ValueError, match="Decompressed data too large"):
        Image.open(io.BytesIO(narrow)).load()


def test_imagecodecs_missing_is_explained(tmp_path, rng, monkeypatch):
    """Without imagecodecs, a 16-bit PNG file is one error naming the extra; 8-bit files
    are still read (by Pillow)."""
    monkeypatch.setitem(sys.modules, "imagecodecs", None)
    pixels = rng.integers(0, 65536, (3, 4, 1)).astype(np.uint16)
    with pytest.raises(ImageError, match=r"needs imagecodecs for 16-bit PNG: pip install"):
        read(tmp_path, reference_png(pixels, 0))
    with pytest.raises(ImageError, match=r"needs imagecodecs for 16-bit PNG"):
        _png.encode_png(Raster(pixels, "L"))
    narrow = (pixels >> 8).astype(np.uint8)
    np.testing.assert_array_equal(read(tmp_path, reference_png(narrow, 0)).pixels, narrow)
