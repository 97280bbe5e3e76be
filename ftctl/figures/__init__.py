"""Seed-paper figures, reproduced by ``ftctl figure NAME``.

Each module in this package whose name starts with ``fig_`` defines ``FIGURE``, a
:class:`Figure`. Modules are found by name, so adding a figure touches no shared file.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class FigureRunFailed(RuntimeError):
    """A run a figure needs did not finish: the figure cannot be drawn. ``ftctl figure``
    says so in one line, with where what it wrote so far is."""


@dataclass(frozen=True)
class FigureOptions:
    """What the command line hands a figure: where to write, which host, free-form options."""

    out: Path
    host: str = "sim"  # "sim" or "spark"; a figure refuses a host it does not support
    quick: bool = False  # a smaller run, for tests and a first look
    options: Mapping[str, str] = field(default_factory=dict)  # --opt key=value


@dataclass(frozen=True)
class FigureResult:
    """A table (header + rows of plain values), the files written, and a JSON-able summary."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    files: tuple[Path, ...] = ()
    summary: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Figure:
    name: str  # "<paper>-<figure>", e.g. "001-fig7"
    paper: str  # the paper file's number in shared papers, e.g. "001"
    title: str
    hosts: tuple[str, ...]  # hosts it runs on
    run: Callable[[FigureOptions], FigureResult]
    # --opt keys it reads -> what each does and its default (``ftctl figure NAME --help``)
    options: Mapping[str, str] = field(default_factory=dict)


def figures() -> dict[str, Figure]:
    """Every figure in this package, by name, in name order."""
    found: dict[str, Figure] = {}
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("fig_"):
            continue
        fig = getattr(importlib.import_module(f"{__name__}.{mod.name}"), "FIGURE", None)
        if isinstance(fig, Figure):
            found[fig.name] = fig
    return dict(sorted(found.items()))
