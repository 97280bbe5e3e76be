"""Result tables that keep every header and figure whole at any width, in a TTY or a pipe.

rich's default is to cut a cell that does not fit to "…": at 80 columns (or in a CI log,
where rich assumes 80) the compare table lost the names of its columns. ``print_table``
lets no column cut: a header or a cell wraps at its spaces (or folds), each column is at
least as wide as its longest word where the width allows it, and a narrow console gets
the light box. Short headers can be explained by a legend printed under the table.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ftctl.console import console as default_console


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain


def fit(table: Table, width: int) -> Table:
    """Make ``table`` lose nothing at ``width`` columns (changes it in place).

    Every column gets at least its longest word (so "exactly-once" or "1,062,436" is never
    split; if all words cannot fit, at least every figure stays whole and a long header
    word folds), then the room left goes to the columns that need the least more to show
    their header and cells on one line. Nothing is ever cut.
    """
    table.box = box.SIMPLE_HEAD  # one space between columns instead of a 3-character rule
    table.pad_edge = False
    table.show_edge = False
    longest, figures, natural = [], [], []
    for col in table.columns:
        col.overflow = "fold"
        col.no_wrap = False
        header = _plain(col.header)
        cells = [_plain(c) for c in col.cells]
        figures.append(max((len(w) for t in cells for w in t.split()), default=1))
        longest.append(max([figures[-1], *(len(w) for w in header.split())]))
        natural.append(max(len(t) for t in (header, *cells)))
    pads = 3 * (len(table.columns) - 1)  # between two columns: padding, divider, padding
    # Whole words everywhere if they fit; else whole figures, and a long header word folds.
    widths = longest if sum(longest) + pads <= width else figures
    room = width - pads - sum(widths)
    if room < 0:
        return table
    widths = list(widths)
    # First whole header words, then whole lines; the cheapest columns first each time.
    for target in (longest, natural):
        for i in sorted(range(len(widths)), key=lambda i: target[i] - widths[i]):
            more = max(0, min(target[i] - widths[i], room))
            widths[i] += more
            room -= more
    for col, w in zip(table.columns, widths, strict=True):
        col.width = w
    return table


def print_table(table: Table, legend: Mapping[str, str] | None = None,
                console: Console | None = None) -> None:
    """Print ``table`` whole, then one line per abbreviated header it uses."""
    con = console or default_console
    natural = table.__rich_measure__(con, con.options.update_width(10_000)).maximum
    if natural > con.width:
        fit(table, con.width)
    else:
        for col in table.columns:
            col.overflow = "fold"
    con.print(table)
    used = {str(c.header) for c in table.columns}
    notes = [f"{k}: {v}" for k, v in (legend or {}).items() if k in used]
    if notes:
        con.print("; ".join(notes), style="dim", highlight=False, markup=False,
                  soft_wrap=False)
