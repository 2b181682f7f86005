"""demos/aliasing.py runs and writes its labelled comparison grid, per arch."""

import importlib.util
import pathlib

from PIL import Image

import tiinterp

DEMO = pathlib.Path(__file__).resolve().parents[2] / "demos" / "aliasing.py"


def test_aliasing_demo_writes_the_comparison_grid(arch, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("aliasing_demo", DEMO)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    try:
        path = demo.main(["--arch", arch, "--size", "64", "--out", str(tmp_path / "a.png")])
    finally:
        tiinterp.init(arch)
    with Image.open(path) as image:
        assert image.width > 3 * 64 and image.height > len(demo.MODES) * 64
    printed = capsys.readouterr().out
    for mode in demo.ANTIALIAS:
        line = next(line for line in printed.splitlines() if line.strip().startswith(mode + " "))
        before, after = (float(v) for v in line.split("aliasing)")[1].split("with")[0].split("->"))
        # hamming, the shortest window, removes least: 4.3x at 64 pixels (the others 6-8x).
        assert after < before / 4, line
