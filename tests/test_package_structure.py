"""The package's own rules of structure: what one module may use of another."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "tiinterp"


def _reached_private_names(path: pathlib.Path, modules: set[str]) -> list[str]:
    """Where ``path`` uses another tiinterp module's private names (``from ._x import _y``,
    or ``_x._y`` through a module it imported); a public name imported under a private alias
    is fine."""
    tree = ast.parse(path.read_text())
    module_aliases = set()
    reached = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for alias in node.names:
                if node.module is None and alias.name in modules:
                    module_aliases.add(alias.asname or alias.name)
                elif node.module is not None and alias.name.startswith("_"):
                    reached.append(
                        f"{path.name}:{node.lineno}: from .{node.module} import {alias.name}"
                    )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            reached.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    return reached


def test_modules_use_only_each_others_public_names():
    """What one module needs of another is that module's public (if package-internal) API,
    so that a private name can change without a search of the package."""
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    reached = [
        place
        for path in sorted(PACKAGE.glob("*.py"))
        for place in _reached_private_names(path, modules)
    ]
    assert reached == []


def test_the_private_name_check_finds_both_forms(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text("from . import _validate as v\nfrom ._arrays import _hidden\nv._secret\n")
    assert _reached_private_names(source, {"_validate", "_arrays"}) == [
        "probe.py:2: from ._arrays import _hidden",
        "probe.py:3: v._secret",
    ]
