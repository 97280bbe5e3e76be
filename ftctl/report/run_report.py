"""The report of one stored run (``ftctl run``, ``chaos``, ``report``): verdict first, then
faults and output on one time axis, recovery, sinks and the event log, in words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftctl.report.figures import timeline_html
from ftctl.report.render import details, render
from ftctl.report.views import load_run
from ftctl.results import RunStore, atomic_write_bytes

MAX_EVENTS = 300


def run_summary(run: RunStore) -> dict[str, Any]:
    import json

    cfg = run.read_config()
    verdict = run.read_verdict() or {}
    recovery_path = run.path / "recovery.json"
    recovery = json.loads(recovery_path.read_text()) if recovery_path.exists() else None
    if recovery:
        recovery = {k: v for k, v in recovery.items() if k != "series"}
    return {
        "run_id": run.run_id, "status": run.status(), "passed": run.passed(),
        "topology": cfg.get("topology", {}).get("name"), "protocol": cfg.get("protocol"),
        "params": cfg.get("params", {}), "verdict": verdict, "recovery": recovery,
    }


def render_run(run: RunStore) -> str:
    view = load_run(run)
    events = [{"t": e.t - view.t0, "kind": e.note or e.kind,
               "details": details(e.payload, instance=e.instance)}
              for e in run.read_history()][:MAX_EVENTS]
    timeline = timeline_html([view]) if (view.throughput or view.latency) else ""
    return render("run.html.j2", f"ftctl {view.protocol} on {view.topology}: "
                  f"{view.outcome}", run_summary(run), run=view,
                  params=(run.read_config().get("params") or {}), events=events,
                  timeline=timeline)


def write_run_report(run: RunStore, path: Path | None = None) -> Path:
    target = path or run.path / "report.html"
    atomic_write_bytes(target, render_run(run).encode())
    return target
