"""demos/smoke.py: the differentiable smoke demo optimises and writes its images, per arch.

Tiny settings (16 x 16 grid, 8 steps, 20 iterations) keep each run to a few seconds. At
these settings the loss falls 10-13x on both CPU and Vulkan (seeds 0-2, the built-in
target and a picture; 10x with --boundary periodic on the CPU); the tests ask for 4x.
"""

import importlib.util
import pathlib

import numpy as np
import pytest
from PIL import Image

import tiinterp

DEMO = pathlib.Path(__file__).resolve().parents[2] / "demos" / "smoke.py"
TINY = ["--grid", "16", "--steps", "8", "--jacobi", "4", "--iterations", "20"]
OUTPUTS = ("target.png", "initial.png", "final.png", "rollout.gif", "loss.png")


@pytest.fixture(scope="module")
def smoke():
    """The demo as a module (demos/ is not a package)."""
    spec = importlib.util.spec_from_file_location("smoke_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_demo(smoke, arch):
    """Runs ``smoke.main`` on the fixture's arch; Taichi is left initialised on that arch
    (main re-initialises it, which invalidates every field made before)."""

    def run(*argv):
        return smoke.main(["--arch", arch, *argv])

    try:
        yield run
    finally:
        tiinterp.init(arch)


def _check_image(path, min_width=256):
    with Image.open(path) as image:
        image.verify()  # a truncated or corrupt file raises
    with Image.open(path) as image:
        assert image.width >= min_width and image.height > 0, (path, image.size)
        pixels = np.asarray(image.convert("RGB"))
        assert pixels.max() > pixels.min(), f"{path.name} is blank"
        return getattr(image, "n_frames", 1)


def test_smoke_demo_optimises_and_writes_images(run_demo, tmp_path, capsys):
    result = run_demo(*TINY, "--out", str(tmp_path))

    assert result["final_loss"] <= 0.25 * result["initial_loss"], result
    assert len(result["losses"]) == 21
    assert result["seconds"] > 0
    written = {pathlib.Path(p).name: pathlib.Path(p) for p in result["files"]}
    assert sorted(written) == sorted(OUTPUTS)
    for name in OUTPUTS:
        path = tmp_path / name
        assert written[name] == path and path.stat().st_size > 0
        frames = _check_image(path)
        if name == "rollout.gif":
            assert frames == 8 + 1  # the initial state and every step
    captured = capsys.readouterr()
    assert "it 20/20" in captured.err  # the progress bar reached the end
    assert "lower" in captured.out  # the summary line


def test_smoke_demo_draws_a_picture(run_demo, tmp_path):
    """--target: a picture (here a dark square on white, with --invert) becomes the target."""
    picture = np.full((40, 40), 255, dtype=np.uint8)
    picture[10:30, 14:26] = 0
    path = tmp_path / "picture.png"
    Image.fromarray(picture).save(path)
    out = tmp_path / "out"

    result = run_demo(*TINY, "--target", str(path), "--invert", "--out", str(out), "--quiet")

    assert result["final_loss"] <= 0.25 * result["initial_loss"], result
    with Image.open(out / "target.png") as image:
        target = np.asarray(image.convert("L"), dtype=float)
    middle, corner = target[96:160, 96:160].mean(), target[:32, :32].mean()
    assert middle > corner + 100, (middle, corner)  # the square is bright, the rest dark


def test_smoke_demo_on_a_periodic_domain(run_demo, smoke, tmp_path):
    """--boundary periodic: the optimisation still works, and smoke pushed across an edge
    comes back in on the opposite side (with walls none does)."""
    result = run_demo(*TINY, "--boundary", "periodic", "--out", str(tmp_path), "--quiet")
    assert result["final_loss"] <= 0.25 * result["initial_loss"], result
    assert sorted(pathlib.Path(p).name for p in result["files"]) == sorted(OUTPUTS)

    n, steps = 16, 6
    edge_density, mass = {}, {}
    for boundary in ("periodic", "clamp"):
        sim = smoke.SmokeSim(n, steps, 4, boundary)
        density = np.zeros((steps + 1, n, n), dtype=np.float32)
        density[0, 12:16, 6:10] = 1.0  # a block against the bottom edge (large i)
        sim.density.from_numpy(density)
        control = np.zeros((n, n, 2), dtype=np.float32)
        control[..., 0] = 1.0  # everything moves one cell per step towards large i
        sim.control.from_numpy(control)
        sim.rollout()
        last = sim.density.to_numpy()[-1]
        edge_density[boundary] = last[:4, 6:10].sum()  # the top rows, across the edge
        mass[boundary] = last.sum()
    # A uniform flow has no divergence: on the torus the block moves 6 cells, rows 12-15
    # to rows 2-5 (mod 16), whole, as linear sampling at whole cells copies.
    assert abs(edge_density["periodic"] - 8.0) < 1e-4, edge_density
    assert abs(mass["periodic"] - 16.0) < 1e-4, mass
    assert edge_density["clamp"] < 1e-3, edge_density
