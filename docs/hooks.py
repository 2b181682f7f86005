"""MkDocs hook for `make docs`: the benchmark figures come from benchmarks/results.json at
build time, so that `make bench` is the only place they are written.

A page asks for them with markers alone on a line:

- ``<!-- bench:table -->``: the results table, formatted by benchmarks/bench.py's own
  ``table()`` (the one `make bench` prints);
- ``<!-- bench:workloads -->``: the workloads' shapes, from bench.py's constants;
- ``<!-- bench:machine -->`` and ``<!-- bench:extras -->``: the machine and the figures
  measured besides the table (kernel launch, first call, extra memory);
- ``<!-- bench:small_calls -->``: benchmarks/small_calls.py's table (small calls, first
  calls, the command line), from benchmarks/small_calls/results.json.

And ``<!-- modes:table -->``: the table of resize modes, from the mode registry
(``tiinterp._rules.filters.REGISTRY``), so that a new mode appears on the modes page by being
registered.

mkdocs.yml loads it with ``hooks: [docs/hooks.py]``. A page with a marker but no results
file, or a marker this hook does not know, fails the build.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
from types import ModuleType
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench.py"
RESULTS = ROOT / "benchmarks" / "results.json"
SMALL_CALLS = ROOT / "benchmarks" / "small_calls.py"
SMALL_CALLS_RESULTS = ROOT / "benchmarks" / "small_calls" / "results.json"
MARKER = re.compile(r"^<!-- bench:(\w+) -->$", re.MULTILINE)
MODES_MARKER = re.compile(r"^<!-- modes:table -->$", re.MULTILINE)


def _bench_module(path: pathlib.Path = BENCH) -> ModuleType:
    """A script of benchmarks/, imported without running it (a script, not a package;
    importing it imports tiinterp, which does not start Taichi)."""
    spec = importlib.util.spec_from_file_location(f"tiinterp_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise PluginError(f"hooks.py: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


def _workloads(bench: ModuleType) -> str:
    lines = [
        f"- **{name}**: `{_shape(in_shape)}` -> `{_shape(size)}`"
        for name, (in_shape, size) in bench.WORKLOADS.items()
    ]
    # EXTRA has one entry per (workload, mode): W2-aa is listed once, with both modes.
    extra: dict[tuple[Any, ...], list[str]] = {}
    for name, in_shape, size, mode, antialias in bench.EXTRA:
        extra.setdefault((name, in_shape, size, antialias), []).append(mode)
    for (name, in_shape, size, antialias), modes in extra.items():
        flag = " with `antialias=True`" if antialias else ""
        lines.append(
            f"- **{name}**: `{_shape(in_shape)}` -> `{_shape(size)}`, {' and '.join(modes)}{flag}"
        )
    return "\n".join(lines)


def _machine(results: dict[str, Any]) -> str:
    machine = results["machine"]
    return (
        f"Measured with Python {machine['python']}, PyTorch {machine['torch']}, "
        f"{machine['threads']} threads for every library, on a machine with "
        f"{machine['cpu_count']} CPU cores, every library on the CPU."
    )


def _extras(results: dict[str, Any]) -> str:
    rows = results["rows"]
    memory = max(r["tiinterp"]["extra_memory_bytes"] / r["tiinterp"]["output_bytes"] for r in rows)
    first = results["first_call_seconds"]
    return (
        f"- An empty Taichi kernel launch takes {results['empty_launch_seconds'] * 1e6:.0f} us, "
        "which bounds how fast a small call (W4) can be.\n"
        f"- Peak extra memory of a forward call: at most {memory:.2f}x the output's size "
        "(a scratch line per worker, no full intermediate image).\n"
        f"- The first call in a fresh process takes {first['cold_cache']:.2f} s with a cold "
        f"Taichi offline cache and {first['warm_cache']:.2f} s with a warm one (compiling)."
    )


def _small_calls(page: Any) -> str:
    if not SMALL_CALLS_RESULTS.is_file():
        shown = SMALL_CALLS_RESULTS.relative_to(ROOT)
        raise PluginError(f"{page.file.src_uri}: no {shown} (`make bench`)")
    results = json.loads(SMALL_CALLS_RESULTS.read_text())
    small_calls = _bench_module(SMALL_CALLS)
    return small_calls.table(results) + "\n\n" + small_calls.summary(results)


def _matches(mode: Any) -> str:
    """The libraries a mode gives the numbers of: its references, then ``also``."""
    names = []
    for reference in mode.references:
        limits = [f"{d}-D" for d in reference.dims] if reference.dims != mode.dims else []
        if reference.antialias == (True,):
            limits.append("antialiased")
        if reference.library == "pytorch":
            names.append("PyTorch" + (f" ({', '.join(limits)})" if limits else ""))
        elif reference.library == "imagemagick":
            names.append(f"ImageMagick `-filter {reference.name} -resize` ({', '.join(limits)})")
        elif reference.library == "opencv":
            names.append(f"OpenCV `cv2.resize` (`{', '.join([reference.name, *limits])}`)")
        elif reference.library == "scipy":
            names.append(f'SciPy `ndimage.zoom(order=3, mode="{reference.name}")`')
        elif reference.library == "pil":
            names.append(f"PIL `{reference.name}` ({', '.join(limits)}, in float64)")
        else:
            names.append(f"`jax.image.resize` (`{', '.join([reference.name, *limits])}`)")
    return "; ".join(names + ([mode.also] if mode.also else []))


def _modes_table() -> str:
    from tiinterp._rules.filters import REGISTRY

    lines = ["| mode | spatial axes | taps per axis | matches | rule |", "|---|---|---|---|---|"]
    for mode in REGISTRY.values():
        if mode.filter is not None:
            taps = str(2 * mode.filter.radius)
        else:
            taps = "varies" if mode.name == "area" else "1"
        axes = ", ".join(map(str, mode.dims))
        lines.append(f"| `{mode.name}` | {axes} | {taps} | {_matches(mode)} | {mode.rule} |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    markdown = MODES_MARKER.sub(lambda _: _modes_table(), markdown)
    if not MARKER.search(markdown):
        return markdown
    if not RESULTS.is_file():
        raise PluginError(f"{page.file.src_uri}: no {RESULTS.relative_to(ROOT)} (`make bench`)")
    results = json.loads(RESULTS.read_text())
    bench = _bench_module()
    render = {
        "table": lambda: bench.table(results),
        "workloads": lambda: _workloads(bench),
        "machine": lambda: _machine(results),
        "extras": lambda: _extras(results),
        "small_calls": lambda: _small_calls(page),
    }

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in render:
            raise PluginError(f"{page.file.src_uri}: unknown marker bench:{name}")
        return render[name]()

    return MARKER.sub(replace, markdown)


def on_serve(server: Any, **kwargs: Any) -> Any:
    """`mkdocs serve` rebuilds when the results or their formatter change."""
    server.watch(str(RESULTS))
    server.watch(str(BENCH))
    return server
