"""The compare report's stacked bar: where each protocol's first-fault recovery went.

One horizontal bar per protocol, its segments the medians of the breakdown's parts
(``ftctl.metrics.recovery.recovery_breakdown``) in order, so the harness's share
(detection, starting the restarts) and the protocol's own (replay, catch-up) read off
one axis. HTML without plotly's JavaScript: the page inlines it once.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ftctl.compare.figures import ProtocolFigures

PARTS = (("detect", "detect", "#ff7f0e"), ("plan", "plan", "#8c564b"),
         ("start", "start (slots or jobs, restore)", "#9467bd"),
         ("replay", "replay (to first output)", "#1f77b4"),
         ("catch_up", "catch-up (to within 10%)", "#2ca02c"))


def breakdown_html(protocols: Sequence[ProtocolFigures],
                   div_id: str = "ftctl-breakdown") -> str:
    """The bar chart, or "" when no protocol has a breakdown."""
    rows = [p for p in protocols if p.breakdown]
    if not rows:
        return ""
    fig = go.Figure()
    names = [p.protocol for p in rows]
    for key, label, color in PARTS:
        fig.add_bar(name=label, y=names, x=[p.breakdown.get(key) or 0.0 for p in rows],
                    orientation="h", marker_color=color,
                    hovertemplate="%{y}: " + label + " %{x:.3f} s<extra></extra>")
    fig.update_layout(barmode="stack", height=120 + 40 * len(rows),
                      margin={"l": 10, "r": 10, "t": 10, "b": 40},
                      xaxis_title="seconds from the fault",
                      # Left to right, as the segments: plotly reverses a stacked bar legend.
                      legend={"orientation": "h", "y": -0.35, "traceorder": "normal"},
                      template="plotly_white")
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})
