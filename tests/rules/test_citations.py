"""The names the code and the docs cite are real: every Note cited has one definition in
the package, every dotted name a docstring or comment of the package cites resolves, and
every file of the repository cited exists. A module moved or renamed leaves no citation of
its old name behind (issue 53: ~10 names from before the move into parts)."""

import importlib
import inspect
import pathlib
import re
import types

import pytest

import tiinterp

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tiinterp"
SOURCES = sorted(PACKAGE.rglob("*.py"))
CITING = [
    *SOURCES,
    *sorted((ROOT / "tests").rglob("*.py")),
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "benchmarks").glob("*.py")),
    *sorted((ROOT / "demos").glob("*.py")),
    *sorted((ROOT / "tools").glob("*.py")),
    ROOT / "README.md",
]
NOTE = re.compile(r"Note \[([^\]]+)\]")
# Other projects' names, which this test does not import.
FOREIGN = ("torch", "jax", "jnp", "np", "numpy", "ti", "taichi", "PIL", "scipy", "math", "os")


def _module_name(path):
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _joined(text):
    """``text`` with each line's leading comment marker and the line breaks taken out, so
    that a Note's title wrapped over two comment lines reads as one."""
    return re.sub(r"\n[ \t]*(?:#[ \t]?)?", " ", text)


def _definitions():
    """Note title -> the places that define it: a line that is the Note's name alone, in
    a comment or a docstring of the package (a line that goes on after the name cites it,
    with a word on how it applies there)."""
    found = {}
    for path in SOURCES:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = re.match(r"\s*(?:#\s*)?Note \[([^\]]+)\](.*)$", line)
            if match and not match.group(2).strip():
                found.setdefault(match.group(1), []).append(f"{path.relative_to(ROOT)}:{number}")
    return found


def test_every_cited_note_is_defined_once():
    definitions = _definitions()
    twice = {title: places for title, places in definitions.items() if len(places) > 1}
    assert not twice, f"Notes defined more than once: {twice}"
    undefined = {}
    for path in CITING:
        for match in NOTE.finditer(_joined(path.read_text())):
            title = re.sub(r"\s+", " ", match.group(1))
            if title not in definitions:
                undefined.setdefault(title, set()).add(str(path.relative_to(ROOT)))
    assert not undefined, f"Notes cited but defined nowhere in tiinterp/: {undefined}"


def _resolves(name, module):
    """Whether ``name`` (dotted) is an attribute path from ``module``, from one of its
    classes (a method cited by its bare name), or from the ``tiinterp`` package."""
    starts = [module, tiinterp]
    starts += [value for value in vars(module).values() if inspect.isclass(value)]
    for start in starts:
        value = start
        for part in name.split("."):
            if hasattr(value, part):
                value = getattr(value, part)
            elif isinstance(value, types.ModuleType):
                try:
                    value = importlib.import_module(f"{value.__name__}.{part}")
                except ImportError:
                    break
            else:
                break
        else:
            return True
    return False


# :func:`x`, :class:`x`, ... (Sphinx roles) and ``_part.module.name`` (a private dotted name),
# ``tiinterp.name``.
ROLE = re.compile(r":(?:func|class|mod|data|meth|attr|exc):`~?([\w.]+)`")
PRIVATE = re.compile(r"``(_[a-z]\w*(?:\.\w+)+)``")
PUBLIC = re.compile(r"\btiinterp((?:\.[A-Za-z_]\w*)+)")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_dotted_name_cited_resolves(path):
    module = importlib.import_module(_module_name(path))
    text = path.read_text()
    names = {m.group(1) for m in ROLE.finditer(text)} | {m.group(1) for m in PRIVATE.finditer(text)}
    names |= {m.group(1)[1:] for m in PUBLIC.finditer(text)}
    names = {name.removeprefix("tiinterp.") for name in names}
    stale = sorted(
        name for name in names if name.split(".")[0] not in FOREIGN and not _resolves(name, module)
    )
    assert not stale, f"{path.relative_to(ROOT)} cites names that do not resolve: {stale}"


# A repository file cited by its path: tiinterp/..., tests/..., docs/..., demos/...,
# benchmarks/..., tools/..., or a module of the package by its path there (_kernels/grid.py).
CITED_PATH = re.compile(
    r"(?<![\w/.])((?:tiinterp|tests|docs|demos|benchmarks|tools|_[a-z]+)/[\w/.-]*\w\.(?:py|md|sh))\b"
)


def test_every_cited_file_exists():
    missing = {}
    for path in CITING:
        for match in CITED_PATH.finditer(path.read_text()):
            cited = match.group(1)
            if not ((ROOT / cited).exists() or (PACKAGE / cited).exists()):
                missing.setdefault(cited, set()).add(str(path.relative_to(ROOT)))
    assert not missing, f"files cited that do not exist: {missing}"


PARTS = sorted(
    path.parent for path in PACKAGE.glob("*/__init__.py") if path.parent.name != "__pycache__"
)


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.name)
def test_each_part_says_what_it_holds(part):
    """A part's docstring names each of its modules, and every name it cites in double
    backticks is one of them, another part or module, or a name of the package."""
    package = importlib.import_module(f"tiinterp.{part.name}")
    doc = package.__doc__ or ""
    modules = {path.stem for path in part.glob("*.py") if path.stem != "__init__"}
    unnamed = sorted(name for name in modules if f"``{name}``" not in doc)
    assert not unnamed, f"tiinterp/{part.name}/__init__.py does not name {unnamed}"
    known = modules | {p.name for p in PARTS} | {p.stem for p in PACKAGE.glob("*.py")}
    known |= {"tiinterp"}
    cited = set(re.findall(r"``([A-Za-z_][\w.]*)``", doc))
    unknown = sorted(
        name
        for name in cited
        if name not in known
        and name.split(".")[0] not in FOREIGN
        and not _resolves(name.removeprefix("tiinterp."), package)
    )
    assert not unknown, f"tiinterp/{part.name}/__init__.py cites {unknown}"


def test_the_architecture_page_lists_every_note():
    """docs/architecture.md's index of the Notes: each one defined, with the file that
    defines it, and no other."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = dict(re.findall(r"^\| \[([^\]]+)\] \| `([^`]+)` \|", page, re.MULTILINE))
    defined = {
        title: {str(pathlib.Path(place.split(":")[0]).relative_to("tiinterp")) for place in places}
        for title, places in _definitions().items()
    }
    assert set(rows) == set(defined), (set(defined) - set(rows), set(rows) - set(defined))
    wrong = {title: path for title, path in rows.items() if path not in defined[title]}
    assert not wrong, f"docs/architecture.md places these Notes wrongly: {wrong}"
