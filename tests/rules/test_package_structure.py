"""The package's own rules of structure: its parts, what one part may import of another, and
what one module may use of another."""

import ast
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tiinterp"


def _package_map():
    """tools/package_map.py, which reads the import graph (one reader for the tool's report
    and for these rules)."""
    spec = importlib.util.spec_from_file_location("package_map", ROOT / "tools" / "package_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PACKAGE_MAP = _package_map()
# The public modules, on top of the parts.
PUBLIC = {"__init__.py", "__main__.py", "funcs.py", "torch.py", "jax.py", "py.typed"}


def _reached_private_names(path: pathlib.Path) -> list[str]:
    """Where ``path`` uses another tiinterp module's private names (``from .x import _y``,
    or ``x._y`` through a module it imported); a public name imported under a private alias
    is fine."""
    tree = ast.parse(path.read_text())
    module_aliases = set()
    reached = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            for alias in node.names:
                if alias.name.startswith("__"):
                    continue
                if node.module is None or (alias.asname and not alias.asname.startswith("_")):
                    module_aliases.add(alias.asname or alias.name)
                if node.module is not None and alias.name.startswith("_"):
                    reached.append(
                        f"{path.name}:{node.lineno}: from {'.' * node.level}{node.module} "
                        f"import {alias.name}"
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
    reached = [
        place for path in sorted(PACKAGE.rglob("*.py")) for place in _reached_private_names(path)
    ]
    assert reached == []


def test_the_private_name_check_finds_both_forms(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "from .._rules import validate as v\nfrom .arrays import _hidden\nv._secret\n"
    )
    assert _reached_private_names(source) == [
        "probe.py:2: from .arrays import _hidden",
        "probe.py:3: v._secret",
    ]


def test_every_module_is_public_or_in_a_part_that_says_its_job():
    """Beside the public modules, every module lives in one of the parts, and each part's
    ``__init__`` says what it holds."""
    loose = sorted(
        path.name
        for path in PACKAGE.iterdir()
        if path.is_file() and path.name not in PUBLIC and path.name != "_torch_support.py"
    )
    assert loose == []
    parts = sorted(
        path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"
    )
    assert parts == sorted(p for p in PACKAGE_MAP.PART_ORDER if p != "<top>")
    for part in parts:
        docstring = ast.get_docstring(ast.parse((PACKAGE / part / "__init__.py").read_text()))
        assert docstring and len(docstring.split()) >= 20, part


def test_each_part_imports_only_the_parts_below_it():
    """``PART_ORDER`` (tools/package_map.py), bottom to top: runtime, rules, kernels, engine,
    operations, the public modules, the command line. An import, lazy ones included, never
    runs back up, and no module imports itself round a cycle."""
    graph = PACKAGE_MAP.import_graph(ROOT)
    PACKAGE_MAP.note_packages(ROOT)
    order = PACKAGE_MAP.PART_ORDER
    upward = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if order.index(PACKAGE_MAP.part_of(target)) > order.index(PACKAGE_MAP.part_of(module))
    ]
    assert upward == []
    assert PACKAGE_MAP.cycles(graph) == []


def test_the_layer_check_sees_an_import_back_up(tmp_path):
    package = tmp_path / "tiinterp"
    for part in ("_runtime", "_ops"):
        (package / part).mkdir(parents=True)
        (package / part / "__init__.py").write_text('"""A part."""\n')
    (package / "__init__.py").write_text("")
    (package / "_ops" / "resize.py").write_text("X = 1\n")
    (package / "_runtime" / "session.py").write_text("from .._ops.resize import X\n")
    graph = PACKAGE_MAP.import_graph(tmp_path)
    assert graph["tiinterp._runtime.session"] == {"tiinterp._ops.resize"}


# What tells code the arch it runs on: Taichi's configuration, the public reader of it and
# the device queries.
_ARCH_SOURCES = {
    "current_config",
    "current_cfg",
    "arch",
    "current_arch",
    "has_hardware_vulkan_device",
}


def _names_used(tree: ast.AST) -> set[str]:
    return {
        node.id if isinstance(node, ast.Name) else node.attr
        for node in ast.walk(tree)
        if isinstance(node, (ast.Name, ast.Attribute))
    }


def _arch_readers(paths: list[pathlib.Path]) -> set[str]:
    """The functions of ``paths`` (``_runtime``'s modules) that read the arch themselves: a
    name or attribute of ``_ARCH_SOURCES`` in their body."""
    return {
        node.name
        for path in paths
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and _names_used(node) & _ARCH_SOURCES
    }


def _arch_reads(path: pathlib.Path, readers: set[str]) -> list[str]:
    """Where ``path`` reads the arch: an attribute of ``_ARCH_SOURCES`` (``cfg.arch``), or a
    function of ``readers`` imported from ``_runtime`` (by name, or as an attribute of a
    ``_runtime`` module it imported)."""
    tree = ast.parse(path.read_text())
    found = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in _ARCH_SOURCES
    }
    runtime_modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and "_runtime" in (node.module or ""):
            for alias in node.names:
                if alias.name in readers | _ARCH_SOURCES:
                    found.add(alias.name)
                runtime_modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in runtime_modules
            and node.attr in readers
        ):
            found.add(node.attr)
    return sorted(found)


def test_no_kernel_module_reads_the_arch():
    """``_kernels`` holds Taichi code and the order of its launches; which kernel runs on
    which arch, in what launches, with what scratch, is ``_engine``'s choice (its docstring).
    A kernel module that read the arch (Taichi's configuration, or a ``_runtime`` function
    that reads it, such as ``current_arch`` or ``vulkan_devices.loop_budget``) would make
    that choice where no one looks for it."""
    readers = _arch_readers(sorted((PACKAGE / "_runtime").glob("*.py")))
    assert {"running_arch", "loop_budget"} <= readers
    reads = {
        path.name: found
        for path in sorted((PACKAGE / "_kernels").glob("*.py"))
        if (found := _arch_reads(path, readers))
    }
    assert reads == {}


def test_the_arch_check_sees_each_form_of_read(tmp_path):
    runtime = tmp_path / "budget.py"
    runtime.write_text("def budget():\n    return 1 if current_config().arch == 2 else None\n")
    readers = _arch_readers([runtime])
    assert readers == {"budget"}
    kernel = tmp_path / "kernel.py"
    kernel.write_text(
        "from .._runtime.budget import budget\n"
        "from .._runtime import session\n"
        "from .._runtime.taichi import ti\n"
        "launch = budget\n"
        "session.budget()\n"
        "ti.lang.impl.current_cfg().arch\n"
    )
    assert _arch_reads(kernel, readers) == ["arch", "budget", "current_cfg"]


def test_calls_start_taichi_in_one_place():
    """Note [Where a call starts Taichi]: outside ``_runtime/session.py`` nothing starts
    Taichi but ``start_taichi``: no ``ensure_initialized``, and no public ``current_arch``
    (which starts it) where ``running_arch`` is meant."""
    starts = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE) != pathlib.Path("_runtime/session.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (name := getattr(node.func, "id", getattr(node.func, "attr", None)))
        in {"ensure_initialized", "current_arch"}
    }
    assert starts == set()
