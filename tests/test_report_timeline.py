"""The run report's timeline: fault bands and recovery marks on each run's own panels,
one y range per metric for every protocol, time labels on every panel from 0."""

from __future__ import annotations

from pathlib import Path

from ftctl.report.figures import FAULT_COLOR, MARKS, timeline_figure
from ftctl.report.views import RunView, load_run
from ftctl.results import RunStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "compare-rack-failure"


def _views() -> list[RunView]:
    return [load_run(RunStore.open(p)) for p in sorted(FIXTURES.iterdir())
            if "compare" not in p.name]


def _axes(fig, row: int) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    sub = fig.get_subplot(row, 1)
    return (sub.xaxis.plotly_name.replace("axis", ""),
            sub.yaxis.plotly_name.replace("axis", ""))


def test_every_fault_and_mark_spans_the_panels_of_its_own_run() -> None:
    views = _views()
    assert any(v.recoveries for v in views) and any(v.faults for v in views)
    fig = timeline_figure(views)
    shapes = [s.to_plotly_json() for s in fig.layout.shapes]
    got = {(s["xref"], s["yref"], s["x0"], s["x1"], s["type"]) for s in shapes}
    want = set()
    for i, v in enumerate(views):
        # Row 1 is the fault timeline; run i has throughput row 2+2i and latency row 3+2i.
        for row in (2 + 2 * i, 3 + 2 * i):
            x, y = _axes(fig, row)
            for f in v.faults:
                end = f.end if f.end is not None else f.start + 0.4
                want.add((x, f"{y} domain", f.start, end, "rect"))
            for r in v.recoveries:
                for t in (r.detected, r.restarted, r.recovered):
                    if t is not None:
                        want.add((x, f"{y} domain", t, t, "line"))
    assert got == want
    bands = [s for s in shapes if s["type"] == "rect"]
    assert bands and all(s["fillcolor"] == FAULT_COLOR.format(a=0.15) for s in bands)
    assert all(s["y0"] == 0 and s["y1"] == 1 for s in shapes)


def test_panels_share_a_y_range_per_metric_and_label_time_from_zero() -> None:
    views = _views()
    fig = timeline_figure(views)
    layout = fig.layout.to_plotly_json()
    thr = [layout[fig.get_subplot(2 + 2 * i, 1).yaxis.plotly_name]["range"]
           for i in range(len(views))]
    lat = [layout[fig.get_subplot(3 + 2 * i, 1).yaxis.plotly_name] for i in range(len(views))]
    assert all(r == thr[0] for r in thr) and thr[0][0] == 0
    assert all(a["type"] == "log" and a["range"] == lat[0]["range"] for a in lat)
    # The axis sits above every protocol's steady state (~16,000 records/s here), not at a
    # catch-up burst ten times higher that would flatten it.
    steady = max(v for r in views for t, v in r.throughput if 1.5 < t < 5)
    peak = max(v for r in views for _, v in r.throughput)
    assert steady < thr[0][1] < peak
    xaxes = [v for k, v in layout.items() if k.startswith("xaxis")]
    assert len(xaxes) == 1 + 2 * len(views)
    assert all(a.get("showticklabels") and a["range"][0] == 0 for a in xaxes)
    # No series point before the topology ran: the axis starts at 0, not at -10 s.
    assert min(t for tr in fig.data for t in (tr.x or ()) if isinstance(t, float)) >= 0


def test_detected_restarted_recovered_markers_never_cover_one_another() -> None:
    fig = timeline_figure(_views())
    heights: dict[str, set[float]] = {}
    for tr in fig.data:
        for _, label, *_ in MARKS:
            if tr.name == label:
                assert tr.yaxis != "y" and tr.yaxis is not None  # the overlaid 0-1 axis
                heights.setdefault(label, set()).update(tr.y)
    assert len(heights) == 3
    assert all(len(h) == 1 for h in heights.values())  # one height per kind...
    assert len({h for hs in heights.values() for h in hs}) == 3  # ...a different one each
