"""Tables keep every header and figure whole at 80 columns in a pipe."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from ftctl.tables import print_table

HEADERS = ["protocol", "guarantee", "held", "lost", "dup", "detect s", "restart s",
           "recover s"]
ROWS = [["none", "at-most-once", "no", "126,094", "59,086", "0.138", "0.165", "-"],
        ["checkpoint", "exactly-once", "yes", "0", "0", "0.108", "0.136", "7.26"],
        ["causal", "exactly-once", "yes", "0", "0", "0.25", "0.256", "-"]]


def _render(width: int) -> str:
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=False, width=width)
    table = Table(title="compare")
    for h in HEADERS:
        table.add_column(h)
    for r in ROWS:
        table.add_row(*r)
    print_table(table, {"dup": "duplicated records", "unused": "never shown"}, console=con)
    return buf.getvalue()


def test_80_columns_cut_nothing_and_split_no_figure() -> None:
    out = _render(80)
    assert "…" not in out
    assert all(len(line) <= 80 for line in out.splitlines())
    words = out.split()
    for cell in (c for r in ROWS for c in r):
        assert cell in words, cell
    for word in (w for h in HEADERS for w in h.split()):  # wrapped at spaces at most
        assert word in words, word
    assert "dup: duplicated records" in out
    assert "never shown" not in out  # a legend entry only for headers the table has


def test_very_narrow_folds_but_never_cuts() -> None:
    out = _render(40)
    assert "…" not in out
    squashed = "".join(out.split())
    for cell in ("exactly-once", "126,094"):
        # folded across lines, every character is still there, in order
        assert all(ch in squashed for ch in cell)


def test_a_wide_console_keeps_the_boxed_table() -> None:
    assert "┃" in _render(200)
