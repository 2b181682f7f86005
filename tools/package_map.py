"""How tiinterp's package is put together, measured: its import graph and where one call's
argument goes.

``python tools/package_map.py graph`` reads every module's imports (those inside functions
too: a lazy import is still a dependency) and prints the parts (subpackages; a top-level
module is its own part), the modules' layers (a module's layer is one more than the highest
of those it imports), any import cycle, and any import of a part that sits above the
importer's part in ``PART_ORDER`` ("runs back up").

``python tools/package_map.py flow`` follows one call's array argument through the package:
every Python frame in tiinterp that receives that object as an argument (the object itself
or, for a NumPy input, any array on its memory: a copy of it ends the trail) is an *entry*
into its module. It prints the modules entered, the *moves* (the innermost frame holding
the argument changes module, on a call or on a return) and the *returns up* (a frame
holding the argument returns into a caller of another module, and the argument then goes
down into a module again: the call came back up to continue, instead of flowing down; the
final unwinding is not counted). Counted module by module, for the first call of a
signature (the checks) and for a repeat.

Both are read-only: run them on any checkout (``PYTHONPATH=<checkout>``).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import pathlib
import sys
from collections import defaultdict
from typing import Any

# Bottom to top: a part may import the parts before it only.
PART_ORDER = ("_runtime", "_rules", "_kernels", "_compiled", "_engine", "_ops", "<top>", "cli")
# Modules run as commands (``python -m``), which drive the whole package as the command line
# does: they sit with it, whatever their folder.
COMMANDS = {
    "tiinterp.__main__": "`python -m tiinterp`",
    "tiinterp._compiled.build": "`python -m tiinterp._compiled.build`: builds a kernel set",
}


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    package = root / "tiinterp"
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(module: str, path: pathlib.Path, node: ast.ImportFrom) -> list[str]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    if node.level:
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    # `from pkg import name` names either a submodule `pkg.name` or an attribute of `pkg`.
    return [stem] + [f"{stem}.{alias.name}" for alias in node.names]


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    modules = _modules(root)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                names = _resolve(module, path, node)
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            found = [name for name in names if name in modules and name != module]
            # `from . import x` names both `pkg` and `pkg.x`: the submodule is the import.
            targets.update(
                name for name in found if not any(o.startswith(name + ".") for o in found)
            )
        graph[module] = targets
    return graph


def part_of(module: str) -> str:
    if module in COMMANDS:
        return "cli"
    pieces = module.split(".")
    if len(pieces) >= 3 or (len(pieces) == 2 and module in _PACKAGES):
        return pieces[1]
    return "<top>"


_PACKAGES: set[str] = set()


def note_packages(root: pathlib.Path) -> None:
    """Tell :func:`part_of` which modules are packages (a part's ``__init__``)."""
    _PACKAGES.update(m for m, p in _modules(root).items() if p.name == "__init__.py")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in graph:
        if node not in index:
            visit(node)
    return found


def _layers(graph: dict[str, set[str]]) -> dict[str, int]:
    layer: dict[str, int] = {}

    def depth(node: str, seen: tuple[str, ...] = ()) -> int:
        if node in layer:
            return layer[node]
        below = [depth(t, (*seen, node)) for t in graph[node] if t not in seen]
        layer[node] = 1 + max(below, default=0)
        return layer[node]

    for node in graph:
        depth(node)
    return layer


def report_graph(root: pathlib.Path) -> None:
    graph = import_graph(root)
    note_packages(root)
    found_cycles = cycles(graph)
    layers = _layers(graph)
    parts: dict[str, list[str]] = defaultdict(list)
    for module in graph:
        parts[part_of(module)].append(module)
    print(f"{len(graph)} modules, {len(parts)} parts, {max(layers.values())} module layers")
    for part in sorted(parts, key=lambda p: PART_ORDER.index(p) if p in PART_ORDER else -1):
        print(f"  {part}: {', '.join(m.split('.')[-1] for m in sorted(parts[part]))}")
    print(f"import cycles: {found_cycles or 'none'}")
    upward = []
    for module, targets in graph.items():
        here = part_of(module)
        for target in targets:
            there = part_of(target)
            if here in PART_ORDER and there in PART_ORDER:
                if PART_ORDER.index(there) > PART_ORDER.index(here):
                    upward.append(f"{module} -> {target}")
    print(f"imports running back up: {sorted(upward) or 'none'}")
    part_graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        for target in targets:
            if part_of(target) != part_of(module):
                part_graph[part_of(module)].add(part_of(target))
    for part in parts:
        part_graph.setdefault(part, set())
    part_layers = _layers(part_graph)
    print(f"parts on {max(part_layers.values())} layers")


class _Trail:
    """sys.setprofile hook: the frames in tiinterp that hold ``target`` as an argument."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.holding: list[tuple[Any, str]] = []  # (frame, module), outermost first
        self.entered: list[str] = []
        self.moves = 0
        self.returns_up = 0
        self.current: str | None = None
        self.came_back = False

    def _holds(self, frame: Any) -> bool:
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        local = frame.f_locals
        values = [local.get(name) for name in code.co_varnames[:count]]
        if code.co_flags & inspect.CO_VARARGS:
            values += list(local.get(code.co_varnames[count], ()))
            count += 1
        if code.co_flags & inspect.CO_VARKEYWORDS:
            values += list(local.get(code.co_varnames[count], {}).values())
        return any(self._same_data(value) for value in values)

    def _same_data(self, value: Any) -> bool:
        import numpy as np

        if value is self.target:
            return True
        # The argument's data under another name: a view, a reshape, a dtype-preserving
        # np.asarray (NumPy inputs only; a copy is new data).
        return (
            isinstance(value, np.ndarray)
            and isinstance(self.target, np.ndarray)
            and np.may_share_memory(value, self.target)
        )

    def _move_to(self, module: str | None) -> None:
        if module is not None and module != self.current and self.current is not None:
            self.moves += 1
        self.current = module

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if not module.startswith("tiinterp") or not self._holds(frame):
                return
            if self.came_back and module != self.current:
                self.returns_up += 1
                self.came_back = False
            self.holding.append((frame, module))
            self.entered.append(module)
            self._move_to(module)
        elif event == "return" and self.holding and self.holding[-1][0] is frame:
            _, module = self.holding.pop()
            if self.holding:
                caller = self.holding[-1][1]
                if caller != module:
                    self.came_back = True
                self._move_to(caller)


def follow(call: Any, target: Any) -> _Trail:
    trail = _Trail(target)
    sys.setprofile(trail)
    try:
        call()
    finally:
        sys.setprofile(None)
    return trail


def report_flow() -> None:
    import numpy as np

    import tiinterp

    tiinterp.init(arch="cpu")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)

    def show(title: str, trail: _Trail) -> None:
        modules = list(dict.fromkeys(trail.entered))
        print(
            f"{title}: {len(modules)} modules, {trail.moves} moves, "
            f"{trail.returns_up} returns up\n  " + " -> ".join(m.split(".", 1)[-1] for m in modules)
        )

    show(
        "interpolate, first call",
        follow(lambda: tiinterp.interpolate(x, size=(24, 20), mode="bilinear"), x),
    )
    show(
        "interpolate, repeated",
        follow(lambda: tiinterp.interpolate(x, size=(24, 20), mode="bilinear"), x),
    )
    ti = tiinterp.taichi_module()
    src = ti.ndarray(ti.f32, (2, 3, 16, 16))
    dst = ti.ndarray(ti.f32, (2, 3, 24, 20))
    src.from_numpy(x)
    show(
        "interpolate_into, first call",
        follow(lambda: tiinterp.interpolate_into(src, dst, mode="bilinear"), src),
    )
    show(
        "interpolate_into, repeated",
        follow(lambda: tiinterp.interpolate_into(src, dst, mode="bilinear"), src),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("graph", "flow"))
    args = parser.parse_args()
    if args.what == "graph":
        report_graph(pathlib.Path(__file__).resolve().parents[1])
    else:
        report_flow()


if __name__ == "__main__":
    main()
