"""The compare report's recovery breakdown bar: one bar per protocol, parts stacked."""

from __future__ import annotations

import json
import re

from ftctl.compare.breakdown_plot import PARTS, breakdown_html
from ftctl.compare.figures import ProtocolFigures


def _protocol(name: str, breakdown: dict[str, float | None]) -> ProtocolFigures:
    return ProtocolFigures(name, "exactly-once", 1, True, 0, 0, 0.1, 0.2, 1.0, None, None,
                           None, None, None, None, None, [], breakdown=dict(breakdown))


def test_each_part_is_a_trace_with_every_protocols_median() -> None:
    html = breakdown_html([
        _protocol("checkpoint", {"detect": 0.06, "plan": 0.02, "start": 0.19, "replay": 0.0,
                                 "catch_up": 0.3}),
        _protocol("causal", {"detect": 0.05, "plan": 0.01, "start": 0.05, "replay": 0.04,
                             "catch_up": None}),
        _protocol("none", {})])
    specs = json.loads(re.search(r"Plotly.newPlot\(\s*\"[^\"]+\",\s*(\[.*?\]),\s*\{",
                                 html, re.S).group(1))  # type: ignore[union-attr]
    assert [t["name"] for t in specs] == [label for _, label, _ in PARTS]
    assert all(t["y"] == ["checkpoint", "causal"] for t in specs)  # none has no breakdown
    starts = next(t for t in specs if t["name"].startswith("start"))
    assert starts["x"] == [0.19, 0.05]
    catch = next(t for t in specs if t["name"].startswith("catch-up"))
    assert catch["x"] == [0.3, 0.0]  # never back within 10%: nothing to stack
    # The legend reads detect ... catch-up, as the segments left to right (plotly would
    # list a stacked bar's traces in reverse).
    assert '"traceorder":"normal"' in html.replace(" ", "")


def test_no_breakdown_no_chart() -> None:
    assert breakdown_html([_protocol("none", {})]) == ""
