"""``print_table`` picks the first layout that fits and never splits a word or a figure."""

from __future__ import annotations

import io
import re

from rich.table import Table

from ftctl.console import make_console
from ftctl.tables import print_table

HEADERS = ["protocol", "guarantee", "held", "lost", "dup", "detect s", "restart s",
           "recover s"]
ROWS = [["none", "at-most-once", "no", "126,094", "59,086", "0.0669", "0.165", "-"],
        ["checkpoint", "exactly-once", "yes", "0", "0", "0.108", "0.136", "7.26"],
        ["causal", "exactly-once", "yes", "0", "0", "0.25", "0.256", "-"]]
LEGEND = {"dup": "duplicated records", "unused": "never shown"}


def _render(width: int, headers: list[str] = HEADERS, rows: list[list[str]] = ROWS,
            title: str = "compare", **kw: object) -> str:
    buf = io.StringIO()
    table = Table(title=title)
    for h in headers:
        table.add_column(h, justify="left" if h in ("protocol", "guarantee") else "right")
    for r in rows:
        table.add_row(*r)
    print_table(table, LEGEND, console=make_console(file=buf, width=width), **kw)  # type: ignore[arg-type]
    return buf.getvalue()


def _whole(out: str, text: str) -> bool:
    return re.search(rf"(?<!\S){re.escape(text)}(?!\S)", out) is not None


def test_wide_keeps_the_boxed_table() -> None:
    assert "┃" in _render(200)


def test_80_columns_compact_with_every_figure_whole() -> None:
    out = _render(80)
    assert "┃" not in out and "…" not in out
    assert all(len(line) <= 80 for line in out.splitlines())
    for cell in (c for r in ROWS for c in r):
        assert _whole(out, cell), cell
    assert "dup: duplicated records" in out
    assert "never shown" not in out  # a legend entry only for headers the table has


def test_too_wide_splits_over_tables_that_repeat_the_key_column() -> None:
    out = _render(50)
    assert out.count("protocol") == 2  # two tables, each naming its rows
    assert all(len(line) <= 50 for line in out.splitlines())
    for cell in (c for r in ROWS for c in r):
        assert _whole(out, cell), cell
    for header in HEADERS:  # on one line each: the tables are split before they wrap
        assert header in out, header


def test_narrower_still_prints_one_block_per_row() -> None:
    out = _render(24)
    assert "protocol: checkpoint" in out
    assert re.search(r"(?m)^  lost:\s+126,094$", out)
    assert re.search(r"(?m)^  guarantee:\s+exactly-once$", out)


def test_short_headers_when_the_long_ones_do_not_fit() -> None:
    headers = ["schedules", "faults injected", "duplicated", "unexpected", "reordered"]
    rows = [["20", "38", "0", "0", "0"]]
    wide = _render(120, headers, rows, key=0)
    assert "duplicated" in wide and "dup:" not in wide
    out = _render(44, headers, rows, key=0)
    assert _whole(out, "dup") and _whole(out, "unexp")
    assert "dup: duplicated" in out and "unexp: unexpected" in out
    assert "faults: faults injected" in out


def test_a_title_wider_than_the_table_is_a_line_of_its_own() -> None:
    title = "wordcount under rack-failure (1 run(s) each): cost, before the first fault"
    out = _render(60, HEADERS[:3], [r[:3] for r in ROWS], title=title)
    assert title in out.splitlines()
    out = _render(60, title=title)  # the compact and the split layouts too
    assert title in out.splitlines()


def test_legend_lines_fit_and_keep_each_entry_whole() -> None:
    headers = ["protocol", *(f"h{i}" for i in range(8))]
    LEGEND.update({f"h{i}": f"what column {i} holds, in a few words" for i in range(8)})
    try:
        out = _render(60, headers, [["none", *map(str, range(8))]])
    finally:
        for i in range(8):
            LEGEND.pop(f"h{i}")
    for i in range(8):
        assert any(f"h{i}: what column {i} holds, in a few words" in line
                   for line in out.splitlines()), i


def test_blocks_without_a_key_column_are_apart() -> None:
    out = _render(12, ["schedules", "lost"], [["20", "0"], ["30", "1"]], key=0)
    assert out.splitlines()[1:] == ["schedules: 20", "lost:      0", "",
                                    "schedules: 30", "lost:      1"]
