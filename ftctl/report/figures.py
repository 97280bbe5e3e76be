"""Interactive plotly figures of runs, every panel on one time axis aligned to the faults.

One figure per report: a fault timeline on top (a bar per fault: its target, from inject
to heal, a kill as a short bar; left out when no run had a fault), then per run
(protocol) its sink throughput and its output latency (left out when no run recorded
latency), sharing the x axis with the timeline, so zooming one zooms all. The x axis
starts at 0, when the topology started running, and every panel has its own time labels.

Each metric has one y range for every protocol, so panels compare at a glance: output
latency on a shared log scale (milliseconds in steady state and seconds of recovery both
read), throughput on a shared linear scale up to twice the highest fault-free throughput,
so a catch-up burst runs off the top instead of flattening every steady line to zero. A
checkbox under the figure gives each panel its own full range back; another shows p99.

Each fault is a shaded band through its run's panels; detection, restart and recovery are
a dotted line each and a marker at their own height (an overlaid 0-1 axis), so marks a few
milliseconds apart never hide one another. The legend is HTML above the figure: a plotly
legend wraps over the panel titles on a narrow page. The figure is returned as HTML
without plotly's JavaScript: the page inlines it once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ftctl.metrics.series import steady_figures
from ftctl.report.views import RunView

FAULT_COLOR = "rgba(214, 39, 40, {a})"
THROUGHPUT_COLOR, P50_COLOR, P99_COLOR = "#1f77b4", "#2ca02c", "#ff7f0e"
# (attribute, words, color, marker, line dash, height on the panel's 0-1 overlay)
MARKS = (("detected", "detected", "#ff7f0e", "triangle-up", "dot", 0.92),
         ("restarted", "restarted", "#9467bd", "diamond", "dash", 0.78),
         ("recovered", "recovered (latency back within 10%)", "#2ca02c", "star", "dashdot",
          0.64))
KILL_WIDTH = 0.4  # seconds: a kill has no duration, but a bar must be seen
GAP_S = 1.0  # no output for longer than this: the line breaks
CAP_FACTOR = 2.0  # the shared throughput axis' top: 2 x the highest steady state
PANEL_PX, STRIP_PX, GAP_PX = 190, 40, 62  # heights: a panel, a fault lane, between panels
X_TITLE = "seconds since the topology started running"


def timeline_html(runs: Sequence[RunView], div_id: str = "ftctl-timeline") -> str:
    fig = timeline_figure(runs)
    plot = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})
    return _legend(runs) + plot + _toggles(fig, div_id, len(runs))


def timeline_figure(runs: Sequence[RunView]) -> go.Figure:
    lanes = sum(len({f.target for f in r.faults}) for r in runs)
    has_latency = any(r.latency for r in runs)
    with_avail = [r for r in runs if r.availability and r.availability.get("total", 0) > 1]
    panels: list[tuple[str, RunView | None]] = [("faults", None)] if lanes else []
    for run in runs:
        panels += [("throughput", run)] + ([("latency", run)] if has_latency else [])
    panels += [("available", run) for run in with_avail]
    titles = [_title(kind, r) for kind, r in panels]
    heights_px = [max(90, STRIP_PX * lanes + 40) if kind == "faults" else PANEL_PX
                  for kind, _ in panels]
    height = sum(heights_px) + GAP_PX * (len(panels) - 1) + 90
    fig = make_subplots(
        rows=len(panels), cols=1, shared_xaxes=True, subplot_titles=titles,
        vertical_spacing=GAP_PX / height if len(panels) > 1 else 0.0,
        row_heights=[h / sum(heights_px) for h in heights_px],
        specs=[[{"secondary_y": kind in ("throughput", "latency")}] for kind, _ in panels])
    # Lines and bands are collected and set once: plotly's add_vline/add_vrect scan every
    # shape already added, which took minutes on a long run with hundreds of faults.
    shapes: list[dict[str, Any]] = []
    thr_top = _capped_top(runs)
    lat_range = _log_range(v for r in runs for _, v in [*r.latency, *r.latency_p99])
    for row, (kind, r) in enumerate(panels, start=1):
        if kind == "faults":
            for run in runs:
                _fault_bars(fig, run, row, label_run=len(runs) > 1)
            fig.update_yaxes(row=row, col=1, type="category", automargin=True)
            continue
        assert r is not None
        if kind == "throughput":
            _line(fig, r.throughput, f"{r.protocol} sink throughput", row, THROUGHPUT_COLOR,
                  "records/s")
            fig.update_yaxes(title_text="records/s", range=[0, thr_top], row=row, col=1,
                             secondary_y=False)
        elif kind == "latency":
            _line(fig, r.latency, f"{r.protocol} latency p50", row, P50_COLOR, "s")
            if r.latency_p99:
                _line(fig, r.latency_p99, f"{r.protocol} latency p99", row, P99_COLOR, "s",
                      visible=False, meta="p99")
            fig.update_yaxes(title_text="s (log)", type="log", range=lat_range, row=row,
                             col=1, secondary_y=False)
        else:
            assert r.availability is not None
            fig.add_trace(go.Scatter(
                x=r.availability["t"], y=r.availability["available"], mode="lines",
                line={"shape": "hv", "color": "#8c564b"},
                name=f"{r.protocol} available queries", showlegend=False), row=row, col=1)
            fig.update_yaxes(title_text=f"of {r.availability['total']}",
                             range=[-0.2, r.availability["total"] + 0.2], row=row, col=1)
        if kind != "available":
            _marks(fig, r, row, shapes)
        shapes += _bands(fig, r, row)
    fig.update_layout(shapes=shapes)
    end = max([0.0, *(t for r in runs for t, _ in [*r.throughput, *r.latency]),
               *(f.end or f.start + KILL_WIDTH for r in runs for f in r.faults)])
    # Every panel its own time labels, in seconds: reading the eighth of eight panels
    # should not need the first's axis. 0 is when the topology started running.
    fig.update_xaxes(showticklabels=True, ticksuffix=" s", range=[0, end * 1.01 or 1],
                     showline=True, linecolor="#bbb")
    fig.update_xaxes(title_text=X_TITLE, row=len(panels), col=1)
    fig.update_layout(height=height, autosize=True, showlegend=False,
                      margin={"l": 70, "r": 20, "t": 30, "b": 60},
                      hovermode="x unified", template="plotly_white")
    return fig


def _title(kind: str, r: RunView | None) -> str:
    if kind == "faults" or r is None:
        return "faults of each run (inject to heal)"
    return {"throughput": f"{r.protocol}: sink throughput (records/s, all sinks)",
            "latency": f"{r.protocol}: output latency (s)",
            "available": f"{r.protocol}: available queries"}[kind]


def _capped_top(runs: Sequence[RunView]) -> float:
    """The shared throughput axis' top: twice the highest fault-free throughput of any
    run (``steady_figures``), or the highest point when that is lower."""
    highest = max((v for r in runs for _, v in r.throughput), default=0.0) or 1.0
    steady = [steady_figures(r.throughput, (), [f.start for f in r.faults])[0] for r in runs]
    known = [s for s in steady if s]
    return min(highest * 1.05, CAP_FACTOR * max(known)) if known else highest * 1.05


def _log_range(values: Iterable[float]) -> list[float] | None:
    """The shared latency axis (log10 units, as plotly's log ranges are)."""
    xs = [v for v in values if v > 0]
    if not xs:
        return None
    return [math.log10(min(xs)) - 0.1, math.log10(max(xs)) + 0.1]


def _ref(fig: go.Figure, row: int) -> tuple[str, str]:
    """The (x, y) axis references of panel ``row`` (its main y axis)."""
    sub = fig.get_subplot(row, 1)
    return (sub.xaxis.plotly_name.replace("axis", ""), sub.yaxis.plotly_name.replace("axis", ""))


def _spanning(fig: go.Figure, row: int, x0: float, x1: float,
              **style: Any) -> dict[str, Any]:
    """A shape across the full height of panel ``row`` (what add_vline/add_vrect make)."""
    x, y = _ref(fig, row)
    return {"type": "rect" if x1 != x0 else "line", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
            "xref": x, "yref": f"{y} domain", **style}


def _bands(fig: go.Figure, run: RunView, row: int) -> list[dict[str, Any]]:
    """The run's own faults as shaded bands in its own panels (each run struck at its time)."""
    return [_spanning(fig, row, f.start, f.end if f.end is not None else f.start + KILL_WIDTH,
                      fillcolor=FAULT_COLOR.format(a=0.15), line={"width": 0}, layer="below")
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
          color: str, unit: str, visible: bool = True, meta: str = "") -> None:
    xs, ys = with_gaps(series)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, showlegend=False,
                             line={"color": color, "width": 1.2}, visible=visible, meta=meta,
                             hovertemplate=f"%{{y:.4g}} {unit}<extra>{name}</extra>"),
                  row=row, col=1, secondary_y=False)


def _fault_bars(fig: go.Figure, run: RunView, row: int, label_run: bool) -> None:
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
            row=row, col=1)
        # A kill is an instant: a cross where it struck, so it is seen at any zoom.
        fig.add_trace(go.Scatter(
            x=[f.start], y=[lane], mode="markers", showlegend=False, hoverinfo="skip",
            marker={"symbol": "x-thin-open", "size": 12, "line": {"width": 2},
                    "color": FAULT_COLOR.format(a=1)}), row=row, col=1)


def _marks(fig: go.Figure, run: RunView, row: int, shapes: list[dict[str, Any]]) -> None:
    """Detection, restart and recovery of each fault: a line and a marker each, the
    markers at fixed heights of an overlaid 0-1 axis, whatever the data's scale."""
    for attr, label, color, symbol, dash, height in MARKS:
        xs = [getattr(r, attr) for r in run.recoveries if getattr(r, attr) is not None]
        if not xs:
            continue
        shapes += [_spanning(fig, row, x, x, line={"color": color, "width": 1, "dash": dash})
                   for x in xs]
        fig.add_trace(go.Scatter(
            x=xs, y=[height] * len(xs), mode="markers", name=label, showlegend=False,
            marker={"color": color, "symbol": symbol, "size": 10,
                    "line": {"color": "white", "width": 1}},
            hovertemplate=f"{run.protocol}: {label} at %{{x:.2f}} s<extra></extra>"),
            row=row, col=1, secondary_y=True)
    fig.update_yaxes(range=[0, 1], visible=False, fixedrange=True, row=row, col=1,
                     secondary_y=True)


def _legend(runs: Sequence[RunView]) -> str:
    """What the colours and markers in the figure mean, as HTML that wraps with the page;
    only what the figure shows."""
    symbols = {"triangle-up": "&#9650;", "diamond": "&#9670;", "star": "&#9733;"}
    shown = [
        (any(r.faults for r in runs), f'<span style="background:{FAULT_COLOR.format(a=0.3)}">'
         "&emsp;</span> fault (inject to heal; a kill: a 0.4 s bar and a &#10005;)"),
        (True, f'<span style="color:{THROUGHPUT_COLOR}">&#9473;</span> sink throughput'),
        (any(r.latency for r in runs),
         f'<span style="color:{P50_COLOR}">&#9473;</span> p50 latency'),
        (any(r.latency_p99 for r in runs),
         f'<span style="color:{P99_COLOR}">&#9473;</span> p99 latency (tick below)'),
    ]
    shown += [(any(getattr(x, attr) is not None for r in runs for x in r.recoveries),
               f'<span style="color:{color}">{symbols[symbol]}</span> {escape(label)}')
              for attr, label, color, symbol, _, _ in MARKS]
    return ('<ul class="plot-legend">' + "".join(f"<li>{i}</li>" for ok, i in shown if ok)
            + "</ul>")


def _toggles(fig: go.Figure, div_id: str, runs: int) -> str:
    """Checkboxes under the figure: shared y axes (default) or each panel's own full
    range; p99 latency shown or not."""
    shared: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for name, axis in fig.layout.to_plotly_json().items():
        if (not name.startswith("yaxis") or "range" not in axis or axis.get("fixedrange")
                or axis.get("type") == "category"):
            continue
        shared[f"{name}.range"] = list(axis["range"])
        own[f"{name}.autorange"] = True
    p99 = [i for i, t in enumerate(fig.data) if getattr(t, "meta", None) == "p99"]
    box = ('<label><input type="checkbox" {checked} data-plot="{id}" data-on=\'{on}\' '
           'data-off=\'{off}\' onchange="{js}"> {words}</label>')
    html = [box.format(
        checked="checked", id=div_id, on=escape(json.dumps(shared)),
        off=escape(json.dumps(own)),
        js="Plotly.relayout(this.dataset.plot, JSON.parse(this.checked ? this.dataset.on : "
           "this.dataset.off))",
        words=("one y range per metric for every protocol (throughput up to twice the "
               "highest steady state before the first fault; untick for each panel's own "
               "full range)") if runs > 1 else (
               "throughput axis up to twice the steady state before the first fault "
               "(untick for the full range)"))]
    if p99:
        html.append(box.format(
            checked="", id=div_id, on=json.dumps(p99), off="[]",
            js="Plotly.restyle(this.dataset.plot, {visible: this.checked}, "
               "JSON.parse(this.dataset.on))",
            words="p99 latency"))
    return '<p class="plot-toggles">' + " ".join(html) + "</p>"
