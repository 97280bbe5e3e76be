"""The run report's timeline: fault bands and recovery marks on each run's own panels."""

from __future__ import annotations

from pathlib import Path

from ftctl.report.figures import FAULT_COLOR, timeline_figure
from ftctl.report.views import load_run
from ftctl.results import RunStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "compare-rack-failure"


def test_every_fault_and_mark_spans_the_panels_of_its_own_run() -> None:
    views = [load_run(RunStore.open(p)) for p in sorted(FIXTURES.iterdir())]
    assert any(v.recoveries for v in views) and any(v.faults for v in views)
    shapes = [s.to_plotly_json() for s in timeline_figure(views).layout.shapes]
    got = {(s["xref"], s["yref"], s["x0"], s["x1"], s["type"]) for s in shapes}
    want = set()
    for i, v in enumerate(views):
        # Row 1 is the fault timeline; run i has throughput row 2+2i and latency row 3+2i.
        for row in (2 + 2 * i, 3 + 2 * i):
            ax = f"x{row}", f"y{row} domain"
            for f in v.faults:
                end = f.end if f.end is not None else f.start + 0.4
                want.add((*ax, f.start, end, "rect"))
            for r in v.recoveries:
                for x in (r.detected, r.restarted, r.recovered):
                    if x is not None:
                        want.add((*ax, x, x, "line"))
    assert got == want
    bands = [s for s in shapes if s["type"] == "rect"]
    assert bands and all(s["fillcolor"] == FAULT_COLOR.format(a=0.15) for s in bands)
    assert all(s["y0"] == 0 and s["y1"] == 1 for s in shapes)
