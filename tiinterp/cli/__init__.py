"""The ``tiinterp`` command line: the command itself (``command``), an image in memory and
its resampling (``raster``), and image files (``image_files``, 16-bit PNG in ``png``).
Built on the public API; nothing below imports it."""

from .command import main

__all__ = ["main"]
