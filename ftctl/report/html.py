"""Self-contained HTML: tables plus PNG plots embedded as data URIs, no external assets."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:72rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem}
th{background:#f3f3f3;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#176d17;font-weight:600}.fail{color:#b00020;font-weight:600}
img{max-width:100%;border:1px solid #eee;margin:.5rem 0}code{background:#f6f6f6;padding:0 .2rem}
"""


def esc(value: Any) -> str:
    return html.escape(str(value))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], table_id: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for v in row:
            cls = ' class="num"' if isinstance(v, int | float) else ""
            cells.append(f"<td{cls}>{esc(_fmt(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><tr>{head}</tr>{''.join(body)}</table>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return "" if v is None else str(v)


def image(path: Path, alt: str = "") -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{esc(alt or path.stem)}" src="data:image/png;base64,{data}">'


def verdict_badge(passed: bool) -> str:
    return '<span class="pass">passed</span>' if passed else '<span class="fail">FAILED</span>'


def page(title: str, sections: Sequence[str], data: Any = None) -> str:
    """A whole document; ``data`` is embedded as JSON for tools that read the page."""
    blob = ""
    if data is not None:
        payload = json.dumps(data, default=repr).replace("</", "<\\/")
        blob = f'<script type="application/json" id="ftctl-data">{payload}</script>'
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{esc(title)}</h1>"
            + "\n".join(sections) + blob + "</body></html>")
