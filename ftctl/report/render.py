"""Reports rendered from jinja2 templates, with plotly's JavaScript inlined: no network.

A report is one HTML file that opens anywhere, offline, years later: the page carries
plotly.js itself (about 4.5 MB) rather than a link to a CDN, and the data it shows as JSON
(``<script id="ftctl-data">``) for tools that read reports.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jinja2


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("ftctl.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.globals.update(pct=pct, size=size)
    return env


@functools.cache
def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    # A "</script>" inside the library would end the inline script early.
    return get_plotlyjs().replace("</script", "<\\/script")


def pct(v: float | None) -> str:
    """An overhead as words a reader parses at once: +5% (slower), -31% (faster)."""
    return "-" if v is None else f"{v:+.0%}"


def size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"


def render(template: str, title: str, data: Any, **context: Any) -> str:
    blob = json.dumps(data, default=repr).replace("</", "<\\/")
    return _env().get_template(template).render(
        title=title, plotly_js=plotly_js(), data_json=blob, **context)


def details(fields: Mapping[str, Any], instance: str | None = None) -> str:
    """A history record's fields as "key value, ..." words, not a Python dict."""
    parts = [f"instance {instance}"] if instance is not None else []
    for k, v in fields.items():
        if isinstance(v, list):
            v = ", ".join(str(x) for x in v)
        elif isinstance(v, dict):
            v = ", ".join(f"{a} {b}" for a, b in v.items())
        elif isinstance(v, bool):
            v = "yes" if v else "no"
        parts.append(f"{k} {v}")
    return "; ".join(parts)
