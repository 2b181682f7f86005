"""A griffe extension for `make docs`: renders tiinterp's docstrings, written for ``help()``
and Sphinx-style numpydoc, as the Markdown that mkdocstrings expects.

The docstrings stay plain reStructuredText-flavoured numpydoc (what ``help()`` and IDEs
show); only their rendering on the site changes:

- Sphinx roles (``:func:`interpolate```, ``:mod:`tiinterp.funcs```) become cross-references
  (``[`interpolate`][interpolate]``), resolved by mkdocstrings-python's ``scoped_crossrefs``
  from the object that holds the docstring, so that a broken one fails the strict build.
- An indented literal block announced by ``::`` becomes a fenced Python block, and a doctest
  outside an ``Examples`` section becomes a fenced ``pycon`` block: Markdown would read
  ``>>>`` as nested block quotes.
- A document cited by its path in the repository (``docs/semantics.md``) becomes a link
  to its page on the site.
- A parameter line naming several parameters without a type (``mode, align_corners``,
  numpydoc's "as in the forward call" idiom) is split into one entry per name, each with the
  same description: griffe would otherwise give all of them the first one's annotation.

mkdocs.yml loads it with ``extensions: [docs/griffe_tiinterp.py:TiinterpDocstrings]``.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

ROLE = re.compile(r":(?:func|meth|class|mod|data|attr|obj):`~?([\w.]+)`")
# Roles naming Python's own objects: there is no inventory to link them to (the site is
# built offline), so they stay code.
EXTERNAL_ROLE = re.compile(r":(?:exc|py:\w+):`~?([\w.]+)`")
# Documents that docstrings cite by path, and the anchor of their title on the site (autorefs
# knows every heading): the citation becomes a link.
CITED_PAGES = {"docs/semantics.md": "what-tiinterp-computes", "docs/guide/modes.md": "resize-modes"}
SECTION_UNDERLINE = re.compile(r"^-{3,}$")
# `name1, name2, ...` alone on a line (no ` : type`): several parameters sharing one entry.
SHARED_PARAMETERS = re.compile(r"^(\s*)(\*{0,2}\w+(?:, \*{0,2}\w+)+)\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """The index after the block that starts at ``start`` and is indented deeper than
    ``indent`` (blank lines inside it included, trailing ones not)."""
    end = start
    for index in range(start, len(lines)):
        if lines[index].strip():
            if _indent(lines[index]) <= indent:
                break
            end = index + 1
    return end


def _fence_literal_blocks(lines: list[str]) -> list[str]:
    result: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        following = index + 1
        if line.rstrip().endswith("::") and following < len(lines) and not lines[following].strip():
            start = following + 1
            end = _block_end(lines, start, _indent(line))
            if end > start:
                stripped = line.rstrip()[:-1]  # "text::" reads "text:"
                prefix = " " * _indent(line)
                body = textwrap.dedent("\n".join(lines[start:end])).splitlines()
                result += [stripped, "", prefix + "```python"]
                result += [prefix + body_line if body_line else "" for body_line in body]
                result += [prefix + "```"]
                index = end
                continue
        result.append(line)
        index += 1
    return result


def _fence_doctests(lines: list[str]) -> list[str]:
    """Fence the doctests that are not in an ``Examples`` section (griffe renders those)."""
    result: list[str] = []
    section = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        if index + 1 < len(lines) and SECTION_UNDERLINE.match(lines[index + 1].strip()):
            section = line.strip()
        if line.lstrip().startswith(">>>") and section != "Examples":
            end = index
            while end < len(lines) and lines[end].strip():
                end += 1
            prefix = " " * _indent(line)
            result += [prefix + "```pycon", *lines[index:end], prefix + "```"]
            index = end
            continue
        result.append(line)
        index += 1
    return result


def _split_shared_parameters(lines: list[str]) -> list[str]:
    result: list[str] = []
    section = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        if index + 1 < len(lines) and SECTION_UNDERLINE.match(lines[index + 1].strip()):
            section = line.strip()
        match = SHARED_PARAMETERS.match(line)
        if match and section in ("Parameters", "Other Parameters"):
            end = _block_end(lines, index + 1, _indent(line))
            description = lines[index + 1 : end]
            for name in match.group(2).split(", "):
                result += [match.group(1) + name, *description]
            index = end
            continue
        result.append(line)
        index += 1
    return result


def _cross_references(text: str) -> str:
    text = ROLE.sub(lambda match: f"[`{match.group(1)}`][{match.group(1)}]", text)
    text = EXTERNAL_ROLE.sub(lambda match: f"`{match.group(1)}`", text)
    for path, anchor in CITED_PAGES.items():
        text = text.replace(f"``{path}``", f"[`{path}`][{anchor}]")
    return text


def markdown_docstring(text: str) -> str:
    """A numpydoc docstring as mkdocstrings' Markdown (what this extension applies)."""
    lines = text.splitlines()
    lines = _fence_literal_blocks(lines)
    lines = _fence_doctests(lines)
    lines = _split_shared_parameters(lines)
    return _cross_references("\n".join(lines))


class TiinterpDocstrings(griffe.Extension):
    """Rewrites every docstring of a loaded package once (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = markdown_docstring(obj.docstring.value)
            stack.extend(member for member in obj.members.values() if not member.is_alias)
