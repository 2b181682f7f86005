"""``python -m tiinterp``: the ``tiinterp`` command (see :mod:`tiinterp.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":  # not when a documentation tool imports the package's modules
    sys.exit(main())
