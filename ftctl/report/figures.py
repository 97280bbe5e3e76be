"""Interactive plotly figures of runs, every panel on one time axis aligned to the faults.

One figure per report: a fault timeline on top (a bar per fault: its target, from inject
to heal, a kill as a short bar), then per run (protocol) its throughput and its output
latency, sharing the x axis with the timeline, so zooming one zooms all. Each fault is a
shaded band through every panel; detection, restart and recovery are marked per run.
The figure is returned as HTML without plotly's JavaScript: the page inlines it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ftctl.report.views import RunView

FAULT_COLOR = "rgba(214, 39, 40, {a})"
MARKS = (("detected", "detected", "#ff7f0e", "triangle-up"),
         ("restarted", "restarted", "#9467bd", "diamond"),
         ("recovered", "recovered (latency back within 10%)", "#2ca02c", "star"))
KILL_WIDTH = 0.4  # seconds: a kill has no duration, but a bar must be seen
GAP_S = 1.0  # no output for longer than this: the line breaks


def timeline_html(runs: Sequence[RunView], div_id: str = "ftctl-timeline") -> str:
    fig = timeline_figure(runs)
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def timeline_figure(runs: Sequence[RunView]) -> go.Figure:
    with_avail = [r for r in runs if r.availability and r.availability.get("total", 0) > 1]
    titles = ["faults of each run (inject to heal)"]
    for r in runs:
        titles += [f"{r.protocol}: sink throughput (records/s)",
                   f"{r.protocol}: output latency (s)"]
    titles += [f"{r.protocol}: available queries" for r in with_avail]
    rows = len(titles)
    heights = [0.6] + [1.0] * (rows - 1)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.03,
                        subplot_titles=titles, row_heights=heights)
    for r in runs:
        _fault_bars(fig, r, label_run=len(runs) > 1)
    marked: set[str] = set()
    # Lines and bands are collected and set once: plotly's add_vline/add_vrect scan every
    # shape already added, which took minutes on a long run with hundreds of faults.
    shapes: list[dict[str, Any]] = []
    for i, r in enumerate(runs):
        thr_row, lat_row = 2 + 2 * i, 3 + 2 * i
        _line(fig, r.throughput, f"{r.protocol} throughput", thr_row, "#1f77b4", "records/s")
        _line(fig, r.latency, f"{r.protocol} latency p50", lat_row, "#2ca02c", "s")
        if r.latency_p99:
            _line(fig, r.latency_p99, f"{r.protocol} latency p99", lat_row, "#ff7f0e", "s",
                  visible="legendonly")
        fig.update_yaxes(title_text="records/s", row=thr_row, col=1)
        fig.update_yaxes(title_text="s", row=lat_row, col=1)
        for row in (thr_row, lat_row):
            _marks(fig, r, row, marked, shapes)
            shapes += _bands(r, row)
    for j, r in enumerate(with_avail):
        row = 2 + 2 * len(runs) + j
        assert r.availability is not None
        fig.add_trace(go.Scatter(
            x=r.availability["t"], y=r.availability["available"], mode="lines",
            line={"shape": "hv", "color": "#8c564b"}, name=f"{r.protocol} available queries",
            showlegend=False), row=row, col=1)
        fig.update_yaxes(title_text=f"of {r.availability['total']}",
                         range=[-0.2, r.availability["total"] + 0.2], row=row, col=1)
    for j, r in enumerate(with_avail):
        shapes += _bands(r, 2 + 2 * len(runs) + j)
    fig.update_layout(shapes=shapes)
    fig.update_xaxes(title_text="seconds since the topology started running", row=rows, col=1)
    fig.update_layout(height=170 + 190 * (rows - 1), margin={"l": 70, "r": 20, "t": 40, "b": 50},
                      hovermode="x unified", template="plotly_white",
                      legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0})
    return fig


def _spanning(row: int, x0: float, x1: float, **style: Any) -> dict[str, Any]:
    """A shape across the full height of subplot ``row`` (what add_vline/add_vrect make)."""
    axis = "" if row == 1 else str(row)
    return {"type": "rect" if x1 != x0 else "line", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
            "xref": f"x{axis}", "yref": f"y{axis} domain", **style}


def _bands(run: RunView, row: int) -> list[dict[str, Any]]:
    """The run's own faults as shaded bands in its own panels (each run struck at its time)."""
    return [_spanning(row, f.start, f.end if f.end is not None else f.start + KILL_WIDTH,
                      fillcolor=FAULT_COLOR.format(a=0.15), line={"width": 0})
            for f in run.faults]


def with_gaps(series: Sequence[tuple[float, float]],
              gap: float = GAP_S) -> tuple[list[float | None], list[float | None]]:
    """x and y lists with a None wherever output paused longer than ``gap`` seconds, so
    the line breaks there instead of drawing a straight ramp across the outage."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    last: float | None = None
    for t, v in series:
        if last is not None and t - last > gap:
            xs.append(None)
            ys.append(None)
        xs.append(t)
        ys.append(v)
        last = t
    return xs, ys


def _line(fig: go.Figure, series: Sequence[tuple[float, float]], name: str, row: int,
          color: str, unit: str, visible: bool | str = True) -> None:
    xs, ys = with_gaps(series)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, showlegend=False,
                             line={"color": color, "width": 1.2}, visible=visible,
                             hovertemplate=f"%{{y:.4g}} {unit}<extra>{name}</extra>"),
                  row=row, col=1)


def _fault_bars(fig: go.Figure, run: RunView, label_run: bool) -> None:
    for f in run.faults:
        end = f.end if f.end is not None else f.start + KILL_WIDTH
        label = f"{f.kind} {f.target}"
        lane = f"{run.protocol}: {f.target}" if label_run else f.target
        how_long = "no heal (a kill)" if f.end is None else f"{f.end - f.start:.1f} s"
        fig.add_trace(go.Bar(
            x=[end - f.start], base=[f.start], y=[lane], orientation="h",
            marker={"color": FAULT_COLOR.format(a=0.55 if f.error is None else 0.2)},
            name=label, showlegend=False, text=[f.kind], textposition="inside",
            customdata=[[f.kind, f.target, f.start, how_long, f.error or ""]],
            hovertemplate=("%{customdata[0]} on %{customdata[1]}<br>at %{customdata[2]:.2f} s"
                           ", %{customdata[3]}<br>%{customdata[4]}<extra>fault</extra>")),
            row=1, col=1)
        # A kill is an instant: a cross where it struck, so it is seen at any zoom.
        fig.add_trace(go.Scatter(
            x=[f.start], y=[lane], mode="markers", showlegend=False, hoverinfo="skip",
            marker={"symbol": "x-thin-open", "size": 12, "line": {"width": 2},
                    "color": FAULT_COLOR.format(a=1)}), row=1, col=1)
    fig.update_yaxes(row=1, col=1, type="category")


def _marks(fig: go.Figure, run: RunView, row: int, marked: set[str],
           shapes: list[dict[str, Any]]) -> None:
    """Detection, restart and recovery of each fault: a dotted line and a marker; the
    legend names each kind once."""
    for attr, label, color, symbol in MARKS:
        xs = [getattr(r, attr) for r in run.recoveries if getattr(r, attr) is not None]
        if not xs:
            continue
        shapes += [_spanning(row, x, x, line={"color": color, "width": 1, "dash": "dot"})
                   for x in xs]
        fig.add_trace(go.Scatter(
            x=xs, y=[0] * len(xs), mode="markers", name=label, legendgroup=attr,
            showlegend=attr not in marked, marker={"color": color, "symbol": symbol, "size": 9},
            hovertemplate=f"{run.protocol}: {label} at %{{x:.2f}} s<extra></extra>"),
            row=row, col=1)
        marked.add(attr)
