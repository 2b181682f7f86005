"""demos/train_torch.py: a torch model with tiinterp's Lanczos inside trains, per arch.

Small settings (150 steps of 4 images of 32 x 32) keep a run to a few seconds; the held-out
loss then falls below the untrained model's (plain Lanczos down, bilinear up), and two runs
with one seed give the same losses bit for bit.
"""

import importlib.util
import pathlib

import numpy as np
import pytest
from PIL import Image

import tiinterp

DEMO = pathlib.Path(__file__).resolve().parents[2] / "demos" / "train_torch.py"
TINY = ["--steps", "150", "--batch", "4", "--size", "32", "--factor", "4"]


@pytest.fixture(scope="module")
def demo():
    """The demo as a module (demos/ is not a package)."""
    spec = importlib.util.spec_from_file_location("train_torch_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_demo(demo, arch):
    """Runs ``demo.main`` on the fixture's arch (main re-initialises Taichi on it)."""

    def run(*argv):
        return demo.main(["--arch", arch, *argv])

    try:
        yield run
    finally:
        tiinterp.init(arch)


def test_training_beats_plain_lanczos_and_writes_pictures(run_demo, tmp_path, capsys):
    result = run_demo(*TINY, "--out", str(tmp_path))

    assert result["final"] < 0.95 * result["baseline"], result  # measured: 0.92
    assert len(result["train_losses"]) == 150
    assert [step for step, _ in result["held_out_losses"]] == [0, *range(15, 151, 15)]
    for path in result["files"]:
        assert path.parent == tmp_path
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB"))
        assert pixels.max() > pixels.min(), f"{path.name} is blank"
    captured = capsys.readouterr()
    assert "step 150/150" in captured.err  # the progress bar reached the end
    assert "lower" in captured.out  # the summary line


def test_training_is_deterministic(run_demo, tmp_path):
    first = run_demo(*TINY, "--steps", "6", "--out", str(tmp_path / "a"), "--quiet")
    second = run_demo(*TINY, "--steps", "6", "--out", str(tmp_path / "b"), "--quiet")
    assert first["train_losses"] == second["train_losses"]
    assert first["held_out_losses"] == second["held_out_losses"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "0"], "--steps must be at least 1"),
        (["--size", "30", "--factor", "4"], "--size must be a positive multiple"),
        (["--lr", "-1"], "--lr must be positive"),
    ],
)
def test_bad_arguments_exit_with_usage(demo, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        demo.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow  # Inductor compiles the model (20-40 s on a cold cache)
def test_compiled_training_follows_eager(run_demo, tmp_path):
    """--compile (torch.compile(fullgraph=True), Inductor) trains the same model: Inductor
    fuses the convolutions' neighbours differently, so the losses agree to rounding."""
    small = ["--steps", "4", "--batch", "2", "--size", "16", "--quiet"]
    eager = run_demo(*small, "--out", str(tmp_path / "eager"))
    compiled = run_demo(*small, "--compile", "--out", str(tmp_path / "compiled"))
    np.testing.assert_allclose(compiled["train_losses"], eager["train_losses"], rtol=1e-4)
    np.testing.assert_allclose(
        [loss for _, loss in compiled["held_out_losses"]],
        [loss for _, loss in eager["held_out_losses"]],
        rtol=1e-4,
    )
