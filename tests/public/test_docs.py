"""The public API's documentation: every public function has a runnable, passing example,
numpy-style sections, full type hints, and the documents it cites exist."""

import inspect
import json
import pathlib
import subprocess
import sys
import typing

import pytest

import tiinterp

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUNCTIONS = [
    getattr(tiinterp, name)
    for name in tiinterp.__all__
    if inspect.isfunction(getattr(tiinterp, name))
]
SAMPLERS = [getattr(tiinterp.funcs, name) for name in tiinterp.funcs.__all__]
# The modules whose docstrings hold the examples: the public functions' homes and funcs.
EXAMPLE_MODULES = sorted({f.__module__ for f in FUNCTIONS} | {"tiinterp.funcs"})

# The examples say ``import taichi as ti``, the usual name; on taichi-forge they run with
# that name given to taichi_forge, as its users' ``import taichi_forge as ti`` would.
_RUN_DOCTESTS = """
import doctest, importlib, json, sys
from tiinterp._runtime.taichi import BACKEND, ti
sys.modules["taichi"] = ti
results = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module):
        runner.run(test)
        if test.examples:
            results[test.name] = [e.source for e in test.examples]
    failed, attempted = runner.summarize(verbose=False)
    results[name + ":summary"] = [failed, attempted]
print("RESULTS" + json.dumps(results))
"""


@pytest.fixture(scope="module")
def doctest_run():
    """The examples of every public module, run in a fresh process: they call
    ``tiinterp.init``, which would reset the Taichi runtime of the tests in this one."""
    run = subprocess.run(
        [sys.executable, "-c", _RUN_DOCTESTS, *EXAMPLE_MODULES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("RESULTS"))
    return json.loads(line[len("RESULTS") :]), run.stdout


@pytest.mark.parametrize("module", EXAMPLE_MODULES)
def test_examples_pass(doctest_run, module):
    results, output = doctest_run
    failed, attempted = results[module + ":summary"]
    assert attempted > 0, f"{module} has no examples"
    assert failed == 0, output[-5000:]


@pytest.mark.parametrize("function", FUNCTIONS + SAMPLERS, ids=lambda f: f.__name__)
def test_every_public_function_is_called_in_an_example(doctest_run, function):
    results, _ = doctest_run
    module = function.__module__
    sources = [
        source
        for name, examples in results.items()
        if not name.endswith(":summary") and name.startswith(module)
        for source in examples
    ]
    # A sampler is a ti.func: its example passes it to a kernel rather than calling it.
    used = (f"{function.__name__}(", f"funcs.{function.__name__}")
    assert any(u in source for source in sources for u in used), (
        f"no example in {module} uses {function.__name__}"
    )


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_numpy_style_sections(function):
    doc = inspect.getdoc(function)
    for section in ("Parameters", "Returns", "Examples"):
        if section == "Parameters" and not inspect.signature(function).parameters:
            continue
        assert f"\n{section}\n{'-' * len(section)}\n" in doc, f"{function.__name__}: {section}"
    # These three raise nothing of their own.
    if function not in (tiinterp.current_arch, tiinterp.available_archs, tiinterp.taichi_module):
        assert "\nRaises\n------\n" in doc, function.__name__
    parameters = inspect.signature(function).parameters
    documented = doc.split("\nParameters\n")[1].split("\nReturns\n")[0] if parameters else ""
    for name in parameters:
        assert name.lstrip("*") in documented, f"{function.__name__}: parameter {name}"


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_full_type_hints(function):
    hints = typing.get_type_hints(function)
    signature = inspect.signature(function)
    missing = [name for name in signature.parameters if name not in hints]
    assert not missing, f"{function.__name__}: no type hint for {missing}"
    assert "return" in hints, f"{function.__name__}: no return type"


def test_keyword_only_after_input_size():
    parameters = inspect.signature(tiinterp.interpolate_backward).parameters
    kinds = [p.kind for p in parameters.values()]
    assert kinds[:2] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 2
    assert all(kind is inspect.Parameter.KEYWORD_ONLY for kind in kinds[2:])
    with pytest.raises(TypeError, match="positional argument"):
        tiinterp.interpolate_backward(None, (1, 1, 2), "linear")


def test_package_declares_its_types_and_exports():
    assert (ROOT / "tiinterp" / "py.typed").is_file()
    assert sorted(tiinterp.__all__) == sorted(set(tiinterp.__all__))
    assert all(hasattr(tiinterp, name) for name in tiinterp.__all__)


def test_cited_documents_exist():
    """Every ``docs/...`` path that the package's docstrings or the README cite exists."""
    import re

    texts = [path.read_text() for path in (ROOT / "tiinterp").glob("*.py")]
    texts.append((ROOT / "README.md").read_text())
    cited = {match for text in texts for match in re.findall(r"docs/[\w./-]+\.\w+", text)}
    assert "docs/semantics.md" in cited
    missing = sorted(path for path in cited if not (ROOT / path).exists())
    assert not missing, missing
