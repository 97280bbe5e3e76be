"""Result tables that keep every word and every figure whole, at any width, in a TTY or a pipe.

rich's defaults cut a cell that does not fit to "…" or fold it mid-word: at 80 columns
(or in a CI log, where rich assumes 80) the compare table read `0.06`/`69` for 0.0669 and
the sim summary printed `duplicated` one letter per line. ``print_table`` never makes a
column narrower than its longest word (a figure and its unit, `495,062 B`, count as
one). The first layout that fits the width is printed:

1. the table as built (rich's box), if it fits on one line per row;
2. compact (no box, two spaces between columns), headers wrapped at their spaces;
3. the same with short headers (``SHORT`` and the caller's), which a legend line explains;
4. the same with long cells wrapped at their spaces;
5. with several rows and a key column, the columns split over up to three tables, each
   repeating the key column(s) that name a row;
6. one block per row of ``header: value`` lines.

Titles and legend lines that are wider than the table are printed as lines of their own,
so in a pipe (where the console soft-wraps, see ``ftctl.console``) they stay whole.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console, JustifyMethod, RenderableType
from rich.style import StyleType
from rich.table import Table
from rich.text import Text

import ftctl.console as _consoles

GAP = 2  # characters between two columns in the compact layouts
MAX_PARTS = 3  # more tables than this for one table's columns reads worse than blocks
# Short forms of headers several commands share (verdict counts); a caller adds its own.
SHORT = {"faults injected": "faults", "instances failed": "failed", "duplicated": "dup",
         "unexpected": "unexp", "reordered": "reord"}


def _text(cell: RenderableType) -> Text:
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


# A figure and its unit ("495,062 B", "0.21 s") count as one word: a column is never
# narrower than the pair, so a cell line holding just the pair is never parted.
_FIGURE = re.compile(r"\d[\d,.]* (?:s|ms|B|KB|MB|GB|KiB|MiB|GiB|%)(?=$|[\s,;)])")


def _longest_word(text: str) -> int:
    words = text.split() + _FIGURE.findall(text)
    return max((cell_len(w) for w in words), default=0)


def _line_len(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


@dataclass
class _Column:
    header: str
    short: str  # the header when short headers are used (== header when it has none)
    justify: JustifyMethod
    style: StyleType
    header_style: StyleType
    cells: list[RenderableType]  # as given, so a compact table renders them as rich would
    texts: list[Text]  # the same as text, to measure and for the ``header: value`` blocks

    def head(self, short: bool) -> str:
        return self.short if short else self.header

    def least(self, short: bool, wrap_cells: bool) -> int:
        """The narrowest this column may be: its longest header word, and its longest
        cell (or, when cells may wrap, its longest word)."""
        cells = (_longest_word(t.plain) if wrap_cells else _line_len(t.plain)
                 for t in self.texts)
        return max(1, _longest_word(self.head(short)), *cells)

    def natural(self, short: bool) -> int:
        return max(1, cell_len(self.head(short)), *(_line_len(t.plain) for t in self.texts))


def columns_of(table: Table, short: Mapping[str, str] | None = None) -> list[_Column]:
    out = []
    for col in table.columns:
        header = _text(col.header).plain
        cells = list(col.cells)
        out.append(_Column(header, (short or {}).get(header, header), col.justify, col.style,
                           col.header_style, cells, [_text(c) for c in cells]))
    return out


def _room(widths: list[int], width: int) -> int:
    """What is left of ``width`` once columns of ``widths`` and the gaps between them are set."""
    return width - sum(widths) - GAP * (len(widths) - 1)


def _widths(cols: list[_Column], width: int, short: bool, wrap_cells: bool) -> list[int] | None:
    """Column widths that fit ``width``, or None. Room beyond the least widths goes to the
    columns that need the least more to show everything on one line, so as many columns
    as possible have a one-line header."""
    widths = [c.least(short, wrap_cells) for c in cols]
    room = _room(widths, width)
    if room < 0:
        return None
    natural = [c.natural(short) for c in cols]
    for i in sorted(range(len(cols)), key=lambda i: natural[i] - widths[i]):
        more = max(0, min(natural[i] - widths[i], room))
        widths[i] += more
        room -= more
    return widths


_TRIES = ((False, False), (True, False), (True, True))  # (short headers, wrap cells)


def _fit(cols: list[_Column], width: int) -> tuple[list[int], bool] | None:
    for short, wrap in _TRIES:
        widths = _widths(cols, width, short, wrap)
        if widths is not None:
            return widths, short
    return None


def _fits(cols: list[_Column], width: int, how: tuple[bool, str]) -> bool:
    """Whether ``cols`` fit ``width`` with short headers or not, ``how`` wide: "one line"
    (every header and cell on one line), "whole" (cells whole) or "words"."""
    short, wide = how
    return _room([c.natural(short) if wide == "one line" else c.least(short, wide == "words")
                  for c in cols], width) >= 0


# How to split, best looking first: all on one line, then fewer tables.
_SPLITS = ((False, "one line"), (True, "one line"), (True, "whole"), (True, "words"))


def _split(cols: list[_Column], key: int, width: int,
           how: tuple[bool, str]) -> list[list[_Column]] | None:
    """The columns after the key ones, in order, over as few tables as fit (each table
    starts with the key columns), or None if one column alone does not fit."""
    keys = cols[:key]
    parts: list[list[_Column]] = []
    group: list[_Column] = []
    for col in cols[key:]:
        if _fits([*keys, *group, col], width, how):
            group.append(col)
            continue
        if not group or not _fits([*keys, col], width, how):
            return None
        parts.append(group)
        group = [col]
    if group:
        parts.append(group)
    return [keys + g for g in parts]


def _compact(cols: list[_Column], widths: list[int], short: bool, like: Table) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                  show_header=like.show_header, header_style=like.header_style,
                  style=like.style, row_styles=like.row_styles)
    for col, w in zip(cols, widths, strict=True):
        table.add_column(col.head(short), justify=col.justify, style=col.style,
                         header_style=col.header_style, width=w, overflow="fold")
    for r in range(len(cols[0].cells) if cols else 0):
        table.add_row(*(c.cells[r] for c in cols))
    return table


def _print_compact(con: Console, title: Text | None, cols: list[_Column], widths: list[int],
                   short: bool, like: Table) -> None:
    table = _compact(cols, widths, short, like)
    if title is not None:
        if title.cell_len <= sum(widths) + GAP * (len(widths) - 1):
            table.title, table.title_style = title, like.title_style
        else:
            _print_title(con, title, like)
    con.print(table, soft_wrap=False)


def _print_title(con: Console, title: Text, like: Table) -> None:
    con.print(title, style=like.title_style or "table.title", highlight=False)


def _print_blocks(con: Console, title: Text | None, cols: list[_Column], key: int,
                  like: Table) -> None:
    """One block per row: the key column(s) as ``header: value``, then the others indented."""
    if title is not None:
        _print_title(con, title, like)
    keys, rest = cols[:key], cols[key:]
    indent = "  " if keys else ""
    pad = max((cell_len(c.header) for c in rest if c.header), default=0) + 2
    for r in range(len(cols[0].texts) if cols else 0):
        if r and not keys:  # no key line starts the next block: a blank line does
            con.print()
        for c in keys:
            con.print(Text.assemble(f"{c.header}: " if c.header else "", c.texts[r]),
                      style="bold", highlight=False)
        for c in rest:
            label = f"{c.header}:".ljust(pad) if c.header else ""
            con.print(Text.assemble(indent, label, c.texts[r]), highlight=False)


def _print_legend(con: Console, entries: list[str], width: int) -> None:
    """Entries joined by "; " into lines of at most ``width``; an entry is never split."""
    line = ""
    for entry in entries:
        if line and cell_len(line) + 2 + cell_len(entry) > width:
            con.print(line, style="dim", highlight=False, markup=False)
            line = ""
        line = f"{line}; {entry}" if line else entry
    if line:
        con.print(line, style="dim", highlight=False, markup=False)


def print_table(table: Table, legend: Mapping[str, str] | None = None,
                console: Console | None = None, *, short: Mapping[str, str] | None = None,
                key: int = 1) -> None:
    """Print ``table`` in the first layout that fits the console (see the module doc).

    ``legend`` explains headers (printed for those shown); ``short`` gives a header its
    abbreviation for narrow consoles, added to ``SHORT`` (explained under the table when
    used); the first ``key`` columns name a row, repeated when the columns are split over
    several tables (0: none does, as in a table of one row of counts).
    """
    con = console or _consoles.console
    width = con.width
    title = _text(table.title) if table.title else None
    cols = columns_of(table, {**SHORT, **(short or {})})
    rows = table.row_count
    shown: list[tuple[str, str]] = []  # (header shown, full header)
    natural = table.__rich_measure__(con, con.options.update_width(10_000)).maximum
    if natural <= width:
        plain = copy.copy(table)
        if title is not None and title.cell_len > natural:
            plain.title = None
            _print_title(con, title, table)
        con.print(plain, soft_wrap=False)
        shown = [(c.header, c.header) for c in cols]
    elif (fitted := _fit(cols, width)) is not None:
        widths, use_short = fitted
        _print_compact(con, title, cols, widths, use_short, table)
        shown = [(c.head(use_short), c.header) for c in cols]
    else:
        parts = None
        if rows > 1 and key:  # without a key column, split rows could not be matched up
            parts = next((p for how in _SPLITS if (p := _split(cols, key, width, how))
                          is not None and len(p) <= MAX_PARTS), None)
        if parts is not None:
            for i, part in enumerate(parts):
                if i:  # so the next header is not read as one more row
                    con.print()
                part_fit = _fit(part, width)
                assert part_fit is not None  # _split only makes parts that fit
                _print_compact(con, title if i == 0 else None, part, *part_fit, table)
                shown += [(c.head(part_fit[1]), c.header) for c in part]
        else:
            _print_blocks(con, title, cols, key, table)
            shown = [(c.header, c.header) for c in cols]
    notes: dict[str, str] = {}
    for head, full in shown:
        if head != full:
            notes[head] = (legend or {}).get(full, full)
        elif legend and head in legend:
            notes[head] = legend[head]
    if notes:
        _print_legend(con, [f"{k}: {v}" for k, v in notes.items()], width)


def seconds_cell(v: float | None) -> str:
    """A time in seconds as a table cell: two decimals, "-" when there is none."""
    return "-" if v is None else f"{v:.2f}"
