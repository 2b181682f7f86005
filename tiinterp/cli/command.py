"""The ``tiinterp`` command: resize PNG, JPEG and TIFF files with tiinterp's modes.

``tiinterp resize IN... -o OUT (--size WxH | --scale S)``; ``tiinterp resize --help`` says
everything. This module is the command: its arguments, the plan of which file goes where,
and the progress it reports. The images themselves are elsewhere: :mod:`tiinterp.cli.raster`
(an image in memory, resampled by one ``tiinterp.interpolate`` call, premultiplied by
alpha), :mod:`tiinterp.cli.image_files` (reading and writing the files, through Pillow, and
tifffile for 16-bit colour TIFF: the ``cli`` extra) and :mod:`tiinterp.cli.png` (16-bit PNG
through libpng, which Pillow reads at 8 bits per channel and cannot write).
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import glob
import math
import os
import re
import shutil
import signal
import sys
import textwrap
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, NoReturn

from .. import __version__
from .._rules.filters import ALIASES, ANTIALIAS_MODES, MODE_DIMS, MODES
from .._runtime.archs import ARCH_NAMES
from .image_files import (
    DEFAULT_MAX_PIXELS,
    Interrupted,
    abandon_writes,
    accept_writes,
    check_pixels,
    is_stream,
    pillow,
    read_image,
    read_stream,
    signals_stop_the_command,
    sniff_format,
    write_image,
)
from .raster import ImageError, Planes, Raster, resample_planes, to_planes, to_raster

PROG = "tiinterp"
# The 2-D modes, in tiinterp.MODES' order ("linear" and "trilinear" are 1-D and 3-D only).
RESIZE_MODES = tuple(mode for mode in MODES if 2 in MODE_DIMS[ALIASES.get(mode, mode)])
DEFAULT_MODE = "lanczos3"
DEFAULT_QUALITY = 92
FORMAT_BY_EXTENSION = {
    ".png": "PNG",
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".tif": "TIFF",
    ".tiff": "TIFF",
}
EXTENSION_BY_FORMAT = {"PNG": ".png", "JPEG": ".jpg", "TIFF": ".tif"}
FORMAT_CHOICES = {"png": "PNG", "jpeg": "JPEG", "jpg": "JPEG", "tiff": "TIFF", "tif": "TIFF"}
# The longest side --size and --scale can ask for: tiinterp's arrays hold at most 2^31 - 1
# elements, so no image side can be longer.
MAX_SIDE = 2**31 - 1


def error_line(message: str) -> str:
    """An error as the command prints it on stderr (argparse's form, without the usage)."""
    return f"{PROG}: error: {message}"


# --- The output size -----------------------------------------------------------------------


def output_size(
    width: int, height: int, size: tuple[int | None, int | None] | None, scale: float | None
) -> tuple[int, int]:
    """(width, height) of the output, at least 1 x 1, nearest-pixel rounding: ``size`` is
    (width, height) with at most one None (that side keeps the aspect ratio), else ``scale``
    multiplies both sides."""
    if scale is not None:
        return max(1, math.floor(width * scale + 0.5)), max(1, math.floor(height * scale + 0.5))
    out_width, out_height = size if size is not None else (width, height)
    if out_width is None and out_height is not None:
        out_width = max(1, math.floor(width * out_height / height + 0.5))
    if out_height is None and out_width is not None:
        out_height = max(1, math.floor(height * out_width / width + 0.5))
    return (
        out_width if out_width is not None else width,
        out_height if out_height is not None else height,
    )


# --- Inputs, outputs and the plan ----------------------------------------------------------


@dataclass
class Job:
    source: Path
    target: Path
    image_format: str
    # The source's content, read while planning, where it is a pipe (is_stream): it cannot
    # be read again. None for a file, which is opened when the job reads it.
    data: bytes | None = None


def has_image_extension(path: Path) -> bool:
    return path.suffix.lower() in FORMAT_BY_EXTENSION


# Note [Links to folders]
# -r and a pattern's ** do not descend into a symbolic link to a folder that they come
# across, as find, grep -r, du and rsync -r do not (and Python's os.walk, pathlib's **):
# a link to "." or to a folder above it made the walk go round for ever (one such link put
# outputs 40 folders deep before the names grew too long; two made it exponential, without
# end), and a link elsewhere (to "/", to a shared drive) would read far more than the folder
# given. Each link passed is a note on stderr. A link named on the command line, or matched
# by a pattern's * (one level, as the pattern spells it), is followed: the user asked for
# it. Links to files are read wherever they are (they cannot make a loop); an image reached
# by several names is read once (expand_inputs).


def link_note(link: Path) -> str:
    return (
        f"{link}: a symbolic link to a folder, not followed (name it, or the folder it "
        "points to, to read its images)"
    )


def scan_folder(folder: Path, recursive: bool, skip: Path | None, notes: list[str]) -> list[Path]:
    """The image files of ``folder`` by extension (not hidden ones: macOS leaves "._name"
    companions that are not images), sorted; subfolders too if ``recursive``, but not
    ``skip`` (the output folder, so that a second run does not resize its own outputs) and
    not symbolic links to folders (Note [Links to folders]): ``notes`` gets each one."""
    found = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            if not recursive:
                continue
            if entry.is_symlink():
                notes.append(link_note(entry))
            elif skip is None or entry.resolve() != skip:
                found += scan_folder(entry, recursive, skip, notes)
        elif entry.is_file() and has_image_extension(entry):
            found.append(entry)
    return found


def _names(folder: str) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` ("" for the current one) by name; none where it cannot be
    listed (not a folder, no permission), as glob lists."""
    try:
        with os.scandir(folder or os.curdir) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return []


def _below(folder: str, with_files: bool, notes: list[str]) -> list[str]:
    """What ``**`` matches under ``folder``: the folder itself and every folder below it
    (and with ``with_files``, every file too), not hidden ones, not descending into
    symbolic links to folders (Note [Links to folders])."""
    if not os.path.isdir(folder or os.curdir):
        return []
    found = [folder]
    pending = deque([folder])
    while pending:
        parent = pending.popleft()
        for entry in _names(parent):
            if entry.name.startswith("."):
                continue
            path = os.path.join(parent, entry.name)
            try:
                is_folder = entry.is_dir()
            except OSError:
                continue
            if is_folder and entry.is_symlink():
                notes.append(link_note(Path(path)))
            elif is_folder:
                found.append(path)
                pending.append(path)
            elif with_files:
                found.append(path)
    return found


def expand_pattern(pattern: str, notes: list[str]) -> list[str]:
    """The paths ``pattern`` matches, as ``glob.glob(pattern, recursive=True)`` finds them
    (``*``, ``?`` and ``[...]`` within a name, not matching a leading "." unless the pattern
    does; ``**`` for any number of folders), except that ``**`` does not descend into
    symbolic links to folders: glob's does, and a link to "." made it loop for ever (Note
    [Links to folders]). ``notes`` gets each link passed."""
    separators = [os.sep] + ([os.altsep] if os.altsep else [])
    drive, rest = os.path.splitdrive(pattern)
    folders_only = rest.endswith(tuple(separators))
    parts = re.split("|".join(map(re.escape, separators)), rest)
    base = drive + os.sep if rest[:1] in separators else drive
    parts = [part for part in parts if part]
    paths = [base]
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        matched: list[str] = []
        for path in paths:
            if part == "**":
                matched += _below(path, last and not folders_only, notes)
            elif glob.has_magic(part):
                matched += [
                    os.path.join(path, entry.name)
                    for entry in _names(path)
                    if fnmatch.fnmatch(entry.name, part)
                    and (part.startswith(".") or not entry.name.startswith("."))
                ]
            else:
                matched.append(os.path.join(path, part))
        paths = matched
    exists = os.path.isdir if folders_only else os.path.lexists
    return [path for path in dict.fromkeys(paths) if path and exists(path)]


def _missing(path: Path) -> str:
    """Why an input that os.path.exists says is not there cannot be read: "no such file or
    folder", or what else stat says (a name too long, a folder without permission)."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.ENOTDIR) and error.strerror:
            return error.strerror
    except ValueError:  # a NUL character
        pass
    return "no such file or folder"


@dataclass
class Inputs:
    files: list[tuple[Path, Path]]  # (path, its name relative to the output folder)
    errors: list[str]
    notes: list[str]  # symbolic links to folders not followed (Note [Links to folders])
    folder_like: bool  # a folder or a pattern was given: the output is a folder


def expand_inputs(arguments: Sequence[str], recursive: bool, skip: Path | None) -> Inputs:
    """Files, folders and glob patterns (for shells that pass them on unexpanded) -> files,
    each once."""
    files: list[tuple[Path, Path]] = []
    errors = []
    notes: list[str] = []
    folder_like = False
    for argument in arguments:
        path = Path(argument)
        # os.path's tests, not Path's: they answer False for a name too long for the file
        # system (ENAMETOOLONG), where Path's raise before Python 3.12.
        if os.path.isdir(path):
            folder_like = True
            in_folder = scan_folder(path, recursive, skip, notes)
            files += [(file, file.relative_to(path)) for file in in_folder]
            if not in_folder:
                has_subfolders = any(entry.is_dir() for entry in path.iterdir())
                hint = (
                    " (--recursive reads its subfolders)"
                    if has_subfolders and not recursive
                    else ""
                )
                errors.append(f"{argument}: no PNG, JPEG or TIFF files in this folder{hint}")
        elif os.path.exists(path):
            files.append((path, Path(path.name)))
        elif glob.has_magic(argument):
            folder_like = True
            matches = [Path(match) for match in sorted(expand_pattern(argument, notes))]
            found: list[tuple[Path, Path]] = []
            for match in matches:
                if match.is_dir():
                    found += [
                        (file, file.relative_to(match))
                        for file in scan_folder(match, recursive, skip, notes)
                    ]
                elif has_image_extension(match):
                    found.append((match, Path(match.name)))
            files += found
            if not found:
                errors.append(f"{argument}: no PNG, JPEG or TIFF file matches this pattern")
        else:
            errors.append(f"{argument}: {_missing(path)}")
    unique: dict[str, tuple[Path, Path]] = {}
    for path, name in files:
        unique.setdefault(os.path.realpath(path), (path, name))
    return Inputs(list(unique.values()), errors, list(dict.fromkeys(notes)), folder_like)


def plan_jobs(
    args: argparse.Namespace, inputs: Inputs, fail: Callable[[str], NoReturn]
) -> tuple[list[Job], list[str]]:
    """One job per input file, and the errors of files that cannot be planned. ``fail``
    (the subparser's ``error``) exits with status 2 for a bad ``-o``."""
    pil = pillow()
    out = Path(args.output)
    forced_format = FORMAT_CHOICES[args.format] if args.format else None
    ends_with_separator = args.output.endswith(os.sep) or bool(
        os.altsep and args.output.endswith(os.altsep)
    )
    suffix = out.suffix.lower()
    into_folder = os.path.isdir(out) or ends_with_separator
    if not into_folder and suffix not in FORMAT_BY_EXTENSION:
        if suffix in pil.registered_extensions():
            fail(f"-o {args.output}: tiinterp writes PNG, JPEG and TIFF files, not {suffix}")
        if not (inputs.folder_like or len(args.inputs) > 1):
            fail(
                f"-o {args.output}: cannot tell the output format from the name (expected "
                f"{', '.join(FORMAT_BY_EXTENSION)}); to write into a folder, create it first "
                "or end the name with '/'"
            )
        into_folder = True
    if into_folder and os.path.exists(out) and not os.path.isdir(out):
        fail(f"-o {args.output}: exists and is not a folder")
    if not into_folder and len(inputs.files) > 1:
        fail(
            f"-o {args.output}: {len(inputs.files)} input images need an output folder, "
            "not a file name"
        )
    file_format = None if into_folder else FORMAT_BY_EXTENSION[suffix]
    if forced_format and file_format and forced_format != file_format:
        fail(f"--format {args.format} disagrees with the extension of -o {args.output}")
    jobs = []
    errors: list[str] = []
    for path, name in inputs.files:
        # A pipe (/dev/stdin, <(...)) is read now, once: what sniff_format reads of it, then
        # the reader, could not be read again.
        data = None
        if is_stream(path):
            try:
                data = read_stream(path, args.max_pixels)
            except (ImageError, OSError, MemoryError) as error:
                errors.append(f"{path}: {_reason(error)}")
                continue
        if file_format is not None:
            jobs.append(Job(path, out, file_format, data))
            continue
        known = FORMAT_BY_EXTENSION.get(name.suffix.lower())
        if known is None:  # a file named on the command line, such as "scan" or "x.dat"
            try:
                known = sniff_format(path, data)
            except OSError as error:
                errors.append(f"{path}: {_reason(error)}")
                continue
            if known is None:
                errors.append(f"{path}: not a PNG, JPEG or TIFF file")
                continue
            name = name.with_name(name.name + EXTENSION_BY_FORMAT[known])
        image_format = known
        if forced_format and forced_format != image_format:
            image_format = forced_format
            name = name.with_suffix(EXTENSION_BY_FORMAT[image_format])
        jobs.append(Job(path, out / name, image_format, data))
    return jobs, errors


def check_targets(jobs: Sequence[Job], force: bool) -> list[str]:
    """Outputs that would be written twice, are folders, or exist (without ``force``). An
    output whose name is too long for the file system is left to fail when it is written,
    as one error line (os.path's tests answer False for it: see expand_inputs)."""
    errors = []
    first_source: dict[str, Path] = {}
    for job in jobs:
        key = os.path.normcase(os.path.abspath(job.target))
        if key in first_source:
            errors.append(
                f"{job.target}: would be written twice (from {first_source[key]} and {job.source})"
            )
            continue
        first_source[key] = job.source
        if os.path.isdir(job.target):
            errors.append(f"{job.target}: is a folder")
        elif os.path.islink(job.target) and not force:  # a dangling one too: exists() follows it
            errors.append(
                f"{job.target}: exists, a symbolic link (use --force to replace the link "
                "itself; the file it points to is left alone)"
            )
        elif os.path.exists(job.target) and not force:
            errors.append(f"{job.target}: exists (use --force to overwrite it)")
    return errors


# --- Progress on stderr --------------------------------------------------------------------


class Progress:
    """A one-line progress bar when stderr is a terminal and there are several images, one
    line per image otherwise, nothing but errors with ``quiet``."""

    def __init__(self, total: int, quiet: bool, stream: IO[str]) -> None:
        self.total = total
        self.quiet = quiet
        self.stream = stream
        self.bar = not quiet and total > 1 and stream.isatty()
        self.done = 0
        self.failed = 0
        self.current = ""

    def _draw(self) -> None:
        columns = shutil.get_terminal_size((80, 24)).columns
        width = 24
        filled = width * self.done // max(1, self.total)
        count = f"{self.done:>{len(str(self.total))}}/{self.total}"
        line = f"{count} [{'#' * filled}{'.' * (width - filled)}] {self.current}"
        self.stream.write("\r" + line[: max(1, columns - 1)] + "\x1b[K")
        self.stream.flush()

    def clear(self) -> None:
        """Erase the bar, if any, so that another line can be written."""
        if self.bar:
            self.stream.write("\r\x1b[K")

    def start(self, what: Path | str) -> None:
        """The bar names ``what`` (an input, or a step such as --warmup's) as under way."""
        self.current = str(what)
        if self.bar:
            self._draw()

    def finished(self, line: str) -> None:
        self.done += 1
        if self.bar:
            self._draw()
        elif not self.quiet:
            print(line, file=self.stream, flush=True)

    def _print(self, line: str) -> None:
        """``line`` under the bar: the bar is erased, and drawn again after it."""
        self.clear()
        print(line, file=self.stream, flush=True)
        if self.bar:
            self._draw()

    def error(self, message: str) -> None:
        self._print(error_line(message))

    def failed_one(self, message: str) -> None:
        self.failed += 1
        self.done += 1
        self.error(message)

    def note(self, message: str) -> None:
        if not self.quiet:
            self._print(f"{PROG}: note: {message}")

    def close(self) -> None:
        if self.bar:
            self.clear()
            resized = self.done - self.failed
            failed = f", {self.failed} failed" if self.failed else ""
            print(f"resized {resized} of {self.total} images{failed}", file=self.stream)
            self.stream.flush()


# --- The command line -----------------------------------------------------------------------


def _shown(text: str) -> str:
    """An argument as an error message quotes it: whole, or its start if it is long."""
    if len(text) <= 40:
        return repr(text)
    return f"{text[:24]!r}... ({len(text)} characters)"


def parse_size(text: str) -> tuple[int | None, int | None]:
    """``640x480``, ``640x`` or ``x480`` -> (width, height), a missing side None."""
    match = re.fullmatch(r"\s*(\d*)\s*[xX]\s*(\d*)\s*", text, re.ASCII)
    if not match or not (match[1] or match[2]):
        raise argparse.ArgumentTypeError(
            "expected WIDTHxHEIGHT, WIDTHx or xHEIGHT in pixels (such as 640x480), "
            f"got {_shown(text)}"
        )
    sides = []
    for digits in match[1], match[2]:
        # Compared as text first: int() refuses numbers of over 4300 digits.
        significant = digits.lstrip("0")
        if len(significant) > len(str(MAX_SIDE)) or (significant and int(significant) > MAX_SIDE):
            raise argparse.ArgumentTypeError(
                f"expected sizes of at most {MAX_SIDE} pixels, got {_shown(text)}"
            )
        sides.append(int(digits) if digits else None)
    width, height = sides
    if width == 0 or height == 0:
        raise argparse.ArgumentTypeError(f"expected sizes of at least 1 pixel, got {_shown(text)}")
    return width, height


def parse_scale(text: str) -> float:
    """``0.5`` or ``50%`` -> 0.5."""
    number = text.strip()
    percent = number.endswith("%")
    try:
        scale = float(number[:-1] if percent else number) / (100.0 if percent else 1.0)
    except ValueError:
        scale = math.nan
    if not (math.isfinite(scale) and scale > 0):
        raise argparse.ArgumentTypeError(
            f"expected a positive number or percentage (such as 0.5 or 50%), got {_shown(text)}"
        )
    if scale > MAX_SIDE:
        raise argparse.ArgumentTypeError(
            f"expected a scale of at most {MAX_SIDE} (no side can be longer than {MAX_SIDE} "
            f"pixels), got {_shown(text)}"
        )
    return scale


def parse_quality(text: str) -> int:
    try:
        quality = int(text)
    except ValueError:
        quality = 0
    if not 1 <= quality <= 100:
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to 100, got {_shown(text)}")
    return quality


def parse_max_pixels(text: str) -> int:
    """A positive number of pixels. Beyond 30 digits every value means the same (no file
    declares that many pixels), and int() refuses numbers of over 4300 digits."""
    match = re.fullmatch(r"\s*(\d+)\s*", text, re.ASCII)
    significant = match[1].lstrip("0") if match else ""
    if not significant:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of pixels, at least 1 (such as 500000000), got {_shown(text)}"
        )
    return int(significant) if len(significant) <= 30 else 10**30


RESIZE_DESCRIPTION = """\
Resize PNG, JPEG and TIFF images with tiinterp's interpolation kernels.

Images keep their bit depth (8 or 16 bits per channel) and their channels
(gray, gray+alpha, RGB, RGBA; CMYK in JPEG and TIFF); palette images become
RGB or RGBA, 1-bit ones 8-bit gray. 8-bit images are resampled in float32,
16-bit ones in float64 (where the arch has it); results are rounded to the
nearest level and clipped.
Colour with alpha is resampled premultiplied by alpha: transparent pixels do
not bleed into the edges of opaque ones, and fully transparent output pixels
are 0 in every channel."""

RESIZE_EPILOG = f"""\
formats:
  The output format is the extension of -o (.png, .jpg/.jpeg, .tif/.tiff) or,
  for a folder, each input's own (or --format). JPEG holds 8-bit colour
  without alpha: a 16-bit image is reduced to 8 bits and alpha is composited
  over white, with a note. EXIF and TIFF orientation is applied to the pixels
  (the output is the input as a viewer shows it, white-is-zero gray TIFF
  too); of the metadata, only the ICC colour profile is kept.

inputs:
  A pipe can be an input: cat x.png | tiinterp resize /dev/stdin -o y.png,
  or <(...); it is read once, into memory. -r and a pattern's ** do not go
  into symbolic links to folders they come across (as find and grep -r do
  not), each one noted on stderr; a linked folder named as IN is read.

limits:
  An image whose header declares more than --max-pixels pixels (default
  {DEFAULT_MAX_PIXELS:,}, 16384x16384) is refused before it is decoded (a
  small file can declare a huge size), and so is an output that would be
  larger.

overwriting:
  Outputs are written to a hidden temporary file, renamed when complete. With
  --force, an existing file keeps its permission bits; a symbolic link is
  replaced by the new file, as mv does, and the file it points to is kept.

exit status:
  0 if every image was written, 1 if any failed, 2 for bad arguments. On
  SIGINT (Ctrl-C), SIGTERM or SIGHUP, the output being written is removed and
  the command ends by that signal (the shell's status 130, 143 or 129).

examples:
  {PROG} resize photo.jpg -o small.jpg --scale 25%
  {PROG} resize scans/ -o thumbs/ --size 256x --format jpeg
  {PROG} resize 'frames/*.png' -o out/ --size 640x480 --mode bicubic"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help lines wrapped at spaces only: a mode such as ``area-opencv`` stays whole."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def build_parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The ``tiinterp`` parser and its ``resize`` subparser."""
    try:
        pillow = f"Pillow {metadata.version('pillow')}"
    except metadata.PackageNotFoundError:
        pillow = "Pillow not installed"
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Resample images with tiinterp's interpolation kernels (Taichi).",
        epilog=f"example: {PROG} resize photos/ -o small/ --size 800x\n\n"
        f"Run '{PROG} resize --help' for the options of resize.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"{PROG} {__version__} (Taichi {metadata.version('taichi')}, {pillow})",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    resize = commands.add_parser(
        "resize",
        help="resize PNG, JPEG and TIFF images",
        description=RESIZE_DESCRIPTION,
        epilog=RESIZE_EPILOG,
        formatter_class=_HelpFormatter,
    )
    resize.add_argument(
        "inputs",
        nargs="+",
        metavar="IN",
        help="image files, folders (their .png, .jpg, .jpeg, .tif and .tiff files) or glob "
        "patterns such as 'photos/*.jpg' (expanded here if the shell did not)",
    )
    resize.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT",
        help="the output file for one input file; otherwise a folder (created if missing), "
        "where each output keeps its input's name",
    )
    target = resize.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--size",
        type=parse_size,
        metavar="WxH",
        help="output size in pixels, width first: 640x480 (exactly; the aspect ratio may "
        "change), 640x or x480 (the other side keeps the aspect ratio)",
    )
    target.add_argument(
        "--scale",
        type=parse_scale,
        metavar="S",
        help="scale both sides by S, such as 0.5 or 50%%; sizes round to the nearest pixel",
    )
    resize.add_argument(
        "--mode",
        choices=RESIZE_MODES,
        default=DEFAULT_MODE,
        metavar="MODE",
        help=f"interpolation: {', '.join(RESIZE_MODES)} (default: {DEFAULT_MODE}; "
        "'lanczos' is lanczos3 with antialias, PyTorch's name)",
    )
    resize.add_argument(
        "--antialias",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="widen the filter when shrinking, as PIL does, so that fine detail does not "
        f"alias (default: on for {', '.join(m for m in RESIZE_MODES if m in ANTIALIAS_MODES)}"
        "; nearest, nearest-exact and area take none)",
    )
    resize.add_argument(
        "--format",
        choices=sorted(FORMAT_CHOICES),
        metavar="FMT",
        help="output format for a folder output: png, jpeg or tiff (default: each input's)",
    )
    resize.add_argument(
        "--quality",
        type=parse_quality,
        default=DEFAULT_QUALITY,
        metavar="Q",
        help=f"JPEG quality, 1 to 100 (default: {DEFAULT_QUALITY})",
    )
    resize.add_argument(
        "--max-pixels",
        type=parse_max_pixels,
        default=DEFAULT_MAX_PIXELS,
        metavar="N",
        help="refuse inputs whose header declares more than N pixels, before decoding them, "
        f"and outputs of more (default: {DEFAULT_MAX_PIXELS}, 16384x16384)",
    )
    resize.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="folder inputs: also the images in their subfolders (the output keeps the "
        "subfolders); symbolic links to folders are not followed",
    )
    resize.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="overwrite existing output files (keeping their permission bits; a symbolic link "
        "is replaced, not the file it points to)",
    )
    resize.add_argument(
        "--arch",
        choices=ARCH_NAMES,
        metavar="ARCH",
        help=f"Taichi arch: {', '.join(ARCH_NAMES)} (default: $TIINTERP_ARCH, else cpu)",
    )
    resize.add_argument(
        "--warmup",
        action="store_true",
        help="compile the kernels --mode takes for any image size before the first image "
        "(tiinterp.warmup: seconds, while the first images are read), so that no image "
        "waits for one; pays off on folders of many sizes, not on one image (with a "
        "kernel set for this machine, `make kernels`, the kernels in it are ready and none "
        "of them is compiled, with or without --warmup)",
    )
    resize.add_argument("-q", "--quiet", action="store_true", help="print errors only, no progress")
    return parser, resize


class FileFailure(Exception):
    """One image failed; the message is its error line (without the "tiinterp: error:")."""


def _reason(error: BaseException) -> str:
    if isinstance(error, MemoryError):
        return "not enough memory"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


# Note [The command's pipeline]
# A folder's images go through three stages: decoding (Pillow, png.py for 16-bit PNG, tifffile),
# resampling (one tiinterp call each) and encoding. Decoding and encoding run in worker
# threads while the main thread resamples: the codecs (zlib, libjpeg, libtiff) and NumPy
# release the GIL, and tiinterp's calls run one at a time anyway. Every read is queued at
# once, before Taichi is imported and initialised (~0.45 s on a 2-core machine), so that
# the images are decoded while the kernels get ready. Memory stays bounded: decoded images
# waiting to be resampled hold at most READ_BUDGET_BYTES (one image always may, however
# large, plus those being decoded), and at most WRITE_BEHIND results wait to be written.
# Reads take their share of the budget in the order of the inputs, so that the image the
# main thread waits for is never held up by later ones. Results are reported in the order
# of the inputs. Only the main thread gets signals: when one stops the command, the
# temporary files the writers hold are removed (image_files.abandon_writes) before the
# process ends. The codecs release the GIL in short pieces (a PNG's chunks), and with
# Python's default switch interval a reader waits up to 5 ms for the GIL after each piece
# while the main thread imports Taichi: a 1920x1080 PNG took 0.39 s to read instead of
# 0.12 s, so the command switches threads every SWITCH_SECONDS while it runs (measured on
# a 2-core machine).
CODEC_THREADS = max(2, min(4, os.cpu_count() or 1))
SWITCH_SECONDS = 1e-4
READ_BUDGET_BYTES = 512 * 2**20
WRITE_BEHIND = 2 * CODEC_THREADS


class ReadBudget:
    """The bytes of decoded images waiting for the main thread, shared out in the order of
    the inputs (Note [The command's pipeline])."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.turn = 0  # the input whose read takes its share next
        self.closed = False
        self.changed = threading.Condition()

    def take(self, turn: int, nbytes: int) -> None:
        """Waits for input ``turn``'s turn and for room for its ``nbytes``, then takes them.
        Raises FileFailure once the command stops (:meth:`close`)."""
        with self.changed:
            self.changed.wait_for(
                lambda: (
                    self.closed
                    or (self.turn == turn and (self.used == 0 or self.used + nbytes <= self.limit))
                )
            )
            if self.closed:
                raise FileFailure("the command stopped")
            self.used += nbytes
            self.turn += 1
            self.changed.notify_all()

    def give_back(self, nbytes: int) -> None:
        with self.changed:
            self.used -= nbytes
            self.changed.notify_all()

    def close(self) -> None:
        """Wakes every read waiting for its share: the command stops."""
        with self.changed:
            self.closed = True
            self.changed.notify_all()


def read_job(job: Job, max_pixels: int) -> tuple[Raster, Planes | None, list[str]]:
    """The image of ``job``, an 8-bit one also as float32 planes (16-bit ones wait for the
    arch: float64 where it has it), and the notes its reading made.

    Raises
    ------
    FileFailure
        The input cannot be read.
    """
    notes: list[str] = []
    try:
        raster = read_image(job.source, notes, max_pixels, job.data)
    except (ImageError, OSError, MemoryError) as error:
        raise FileFailure(f"{job.source}: {_reason(error)}") from None
    except Exception as error:  # Pillow's answer to some broken files: struct.error, ...
        raise FileFailure(f"{job.source}: cannot read the image ({_reason(error)})") from None
    try:
        planes = to_planes(raster, wide=False) if raster.bits == 8 else None
    except MemoryError as error:
        raise FileFailure(f"{job.source}: {_reason(error)}") from None
    return raster, planes, notes


def resize_planes(
    job: Job, raster: Raster, planes: Planes | None, args: argparse.Namespace, antialias: bool
) -> tuple[Planes, str]:
    """``raster`` (as ``planes`` if already converted) resized as ``args`` say, and the
    report line of ``job``.

    Raises
    ------
    FileFailure
        The output would be too large, or tiinterp cannot make it.
    """
    width, height = output_size(raster.width, raster.height, args.size, args.scale)
    try:
        check_pixels(width, height, args.max_pixels, "the output")
    except ImageError as error:
        raise FileFailure(f"{job.source}: {error}") from None
    try:
        if planes is None:
            from .._runtime.session import supports_float64

            planes = to_planes(raster, wide=supports_float64())
        result = resample_planes(planes, width, height, args.mode, antialias)
    except MemoryError:
        raise FileFailure(f"{job.source}: not enough memory for {width}x{height}") from None
    except ValueError as error:  # tiinterp's limits (2**31 - 1 elements per array)
        raise FileFailure(f"{job.source}: cannot resize to {width}x{height}: {error}") from None
    line = (
        f"{job.source} -> {job.target} ({raster.width}x{raster.height} -> {width}x{height}, "
        f"{raster.describe()})"
    )
    return result, line


def write_job(job: Job, result: Planes, quality: int, notes: list[str]) -> None:
    """Write ``result`` as ``job`` says, adding to ``notes`` what the format changed.

    Raises
    ------
    FileFailure
        The output cannot be written.
    """
    try:
        raster = to_raster(result)
        write_image(
            raster,
            job.target,
            job.image_format,
            notes,
            quality=quality,
            source=job.source,
            source_data=job.data,
        )
    except (ImageError, OSError, ValueError, MemoryError) as error:
        raise FileFailure(f"{job.target}: {_reason(error)}") from None
    finally:
        job.data = None  # a pipe's content: no stage reads it again


@dataclass
class Outcome:
    """What becomes of one job, reported in the order of the inputs: its write (a future),
    or the failure that ended it before."""

    job: Job
    notes: list[str]
    line: str = ""
    write: Future[None] | None = None
    failure: str = ""


def report(outcome: Outcome, progress: Progress) -> None:
    """The outcome's lines, once its write has ended."""
    failure = outcome.failure
    if outcome.write is not None:
        try:
            outcome.write.result()
        except FileFailure as error:
            failure = str(error)
    if failure:
        progress.failed_one(failure)
        return
    progress.finished(outcome.line)
    for note in outcome.notes:
        progress.note(f"{outcome.job.target}: {note}")


def start_taichi(arch: str, progress: Progress) -> bool:
    """Imports tiinterp's kernels and initialises Taichi on ``arch``; False, with the error
    printed, if the arch cannot start."""
    from .. import init

    try:
        init(arch)
    except (RuntimeError, ValueError, TypeError) as error:
        # init speaks Python (arch='auto'); say it in options.
        message = re.sub(r"arch='(\w+)'", r"--arch \1", str(error))
        progress.clear()
        print(error_line(f"--arch {arch}: {message}"), file=progress.stream)
        return False
    return True


def warm_up(mode: str, antialias: bool, progress: Progress) -> None:
    """``--warmup``: :func:`tiinterp.warmup` of ``mode`` in float32 (8-bit images; 16-bit
    ones compile their float64 kernels when they come), the bar saying so."""
    from .._ops.warmup import warmup

    progress.start(f"compiling {mode}'s kernels (--warmup)")
    started = time.perf_counter()
    warmup(mode, antialias=antialias)
    progress.note(f"--warmup: {mode}'s kernels compiled in {time.perf_counter() - started:.1f} s")


Read = tuple[Raster, Planes | None, list[str], int]


def read_in_turn(job: Job, turn: int, budget: ReadBudget, max_pixels: int) -> Read:
    """:func:`read_job`, then the bytes it holds taken from ``budget`` as input ``turn``
    (returned last, for the main thread to give back)."""
    nbytes = 0
    try:
        raster, planes, notes = read_job(job, max_pixels)
        nbytes = raster.pixels.nbytes + (0 if planes is None else planes.values.nbytes)
        return raster, planes, notes, nbytes
    finally:
        budget.take(turn, nbytes)  # a failed read too: the next input's turn comes


def run_jobs(
    jobs: Sequence[Job], args: argparse.Namespace, antialias: bool, progress: Progress
) -> bool:
    """Every job through Note [The command's pipeline]; False if Taichi could not start."""
    readers = ThreadPoolExecutor(CODEC_THREADS, thread_name_prefix="tiinterp-read")
    writers = ThreadPoolExecutor(CODEC_THREADS, thread_name_prefix="tiinterp-write")
    budget = ReadBudget(READ_BUDGET_BYTES)
    outcomes: deque[Outcome] = deque()
    accept_writes()
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_SECONDS)
    try:
        reads = [
            readers.submit(read_in_turn, job, turn, budget, args.max_pixels)
            for turn, job in enumerate(jobs)
        ]
        progress.start(jobs[0].source)  # the bar shows while Taichi starts
        if not start_taichi(args.arch or os.environ.get("TIINTERP_ARCH", "cpu"), progress):
            return False
        if args.warmup:
            warm_up(args.mode, antialias, progress)
        for job, read in zip(jobs, reads, strict=True):
            progress.start(job.source)
            outcome = Outcome(job, [])
            try:
                raster, planes, outcome.notes, nbytes = read.result()
            except FileFailure as failure:
                outcome.failure = str(failure)
            else:
                try:
                    result, outcome.line = resize_planes(job, raster, planes, args, antialias)
                    outcome.write = writers.submit(
                        write_job, job, result, args.quality, outcome.notes
                    )
                except FileFailure as failure:
                    outcome.failure = str(failure)
                finally:
                    del raster, planes
                    budget.give_back(nbytes)
            outcomes.append(outcome)
            while outcomes and (len(outcomes) > WRITE_BEHIND or _ended(outcomes[0])):
                report(outcomes.popleft(), progress)
        while outcomes:
            report(outcomes.popleft(), progress)
    except BaseException:
        abandon_writes()
        raise
    finally:
        sys.setswitchinterval(switch_interval)
        budget.close()
        readers.shutdown(wait=False, cancel_futures=True)
        writers.shutdown(wait=False, cancel_futures=True)
    return True


def _ended(outcome: Outcome) -> bool:
    return outcome.write is None or outcome.write.done()


def resize_command(args: argparse.Namespace, fail: Callable[[str], NoReturn]) -> int:
    """``tiinterp resize``; ``fail`` is the subparser's ``error`` (exit status 2)."""
    if args.mode not in ANTIALIAS_MODES and args.mode not in ALIASES and args.antialias:
        fail(
            f"--antialias: mode {args.mode} takes no antialias (it applies to "
            f"{', '.join(m for m in RESIZE_MODES if m in ANTIALIAS_MODES)})"
        )
    if args.mode in ALIASES and args.antialias is False:
        fail(
            f"--no-antialias: mode {args.mode} is antialiased lanczos3; use "
            f"--mode {ALIASES[args.mode]} --no-antialias"
        )
    antialias = args.mode in ANTIALIAS_MODES or args.mode in ALIASES
    if args.antialias is not None:
        antialias = args.antialias
    progress_stream = sys.stderr
    try:
        pil = pillow()
    except ImageError as error:
        print(error_line(str(error)), file=progress_stream)
        return 1
    # read_image checks every header against --max-pixels before decoding; Pillow's own
    # guard, at other limits, would warn on stderr or refuse what --max-pixels allows.
    pil.MAX_IMAGE_PIXELS = None
    out = Path(args.output)
    skip = out.resolve() if os.path.isdir(out) else None
    inputs = expand_inputs(args.inputs, args.recursive, skip)
    jobs, plan_errors = plan_jobs(args, inputs, fail)
    errors = inputs.errors + plan_errors
    blocking = check_targets(jobs, args.force)
    if blocking:
        for message in errors + blocking:
            print(error_line(message), file=progress_stream)
        print(f"{PROG}: nothing was written", file=progress_stream)
        return 1
    progress = Progress(len(jobs), args.quiet, progress_stream)
    for message in errors:
        progress.error(message)
    for message in inputs.notes:
        progress.note(message)
    if jobs and not run_jobs(jobs, args, antialias, progress):
        return 1
    progress.close()
    return 1 if errors or progress.failed else 0


def _end_by_signal(signum: int) -> None:
    """Ends the process by ``signum``'s default action, as a careful Unix tool does once it has
    cleaned up: the shell then sees 128 + its number, and a script or ``make`` running the
    command knows that it was interrupted rather than that it failed. Nothing is done where
    that is not possible (Windows, a thread other than the main one)."""
    if os.name != "posix" or threading.current_thread() is not threading.main_thread():
        return
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tiinterp`` command with ``argv`` (default: ``sys.argv[1:]``); returns the
    exit status (argparse exits with 2 itself for bad arguments).

    SIGINT (Ctrl-C), SIGTERM and SIGHUP stop the command: the output being written is
    removed, one line on stderr says so, and the process ends by that signal, so the shell
    reports 128 + its number (130, 143, 129). Where it cannot end so (Windows, not the main
    thread), that status is returned."""
    try:
        with signals_stop_the_command():
            parser, resize = build_parser()
            args = parser.parse_args(argv)
            return resize_command(args, resize.error)
    except (Interrupted, KeyboardInterrupt) as stop:
        signum = stop.signum if isinstance(stop, Interrupted) else int(signal.SIGINT)
    # On a terminal, the line replaces the progress bar and the "^C" echoed after it.
    erase = "\r\x1b[K" if sys.stderr.isatty() else ""
    print(f"{erase}{PROG}: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
    _end_by_signal(signum)
    return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
