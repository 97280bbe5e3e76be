"""The comparison's table data, plots and self-contained HTML report."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from ftctl.compare.breakdown_plot import breakdown_html
from ftctl.compare.figures import (
    ProtocolFigures,
    RunFigures,
    add_overheads,
    median_of,
    steady_figures,
)
from ftctl.compare.runner import Comparison
from ftctl.report.figures import timeline_html
from ftctl.report.render import render as render_template
from ftctl.report.views import NO_GUARANTEE, RunView, load_run
from ftctl.results import RunStore, atomic_write_bytes

# Two tables, so each fits a terminal: what happened, and what it cost.
OUTCOME = [
    ("protocol", "protocol"), ("guarantee", "guarantee"), ("held", "guarantee_held"),
    ("lost", "lost"), ("dup", "duplicated"), ("detect s", "detection_s"),
    ("restart s", "restart_s"), ("1st out s", "first_output_s"), ("recover s", "recovery_s"),
    ("spread s", "recovery_spread_s"),
    ("takeover s", "takeover_s"), ("restarted", "restarts"), ("replayed", "replayed"),
]
COST = [
    ("protocol", "protocol"), ("rec/s", "throughput_rps"), ("thr ovh", "throughput_overhead"),
    ("p50 s", "latency_p50_s"), ("lat ovh", "latency_overhead"),
    ("processed", "records_processed"), ("msgs/rec", "messages_per_record"),
    ("snapshots B", "snapshot_bytes"),
]
COLUMNS = OUTCOME + COST[1:]
# What the short headers mean (printed under the tables).
LEGEND = {
    "held": "guarantee held (-: no guarantee to check)", "dup": "duplicated records",
    "detect s": "fault to detection (median)", "restart s": "fault to restart (median)",
    "1st out s": "fault to the first output after its restart (median)",
    "recover s": "fault to latency back within 10% (median)",
    "spread s": "max - min recovery over repeats",
    "rec/s": "sink records/s from the first output + 1 s to the first fault (the report plots it)",
    "restarted": "instances restarted per run (median)",
    "takeover s": "fault to its slot served by another unit (median; replication only)",
    "msgs/rec": "channel and peer messages per record at the sinks, whole run (median)",
    "replayed": "source records read again per run (median)",
    "thr ovh": "throughput overhead vs none", "p50 s": "median output latency, same window",
    "lat ovh": "latency overhead vs none",
    "processed": "records all instances received, whole run, replays included",
    "snapshots B": "snapshot bytes stored",
}


def row(f: ProtocolFigures, columns: list[tuple[str, str]] = COLUMNS) -> list[object]:
    return [getattr(f, attr) for _, attr in columns]


def load_comparison(folder: Path) -> Comparison:
    """A stored comparison (its comparison.json) as the object ``render`` takes."""
    doc = json.loads((Path(folder) / "comparison.json").read_text())
    return Comparison(
        doc["topology"], doc["schedule"], int(doc["repeat"]),
        protocols=[ProtocolFigures(**p) for p in doc["protocols"]],
        runs=[RunFigures(**r) for r in doc["runs"]], recorded_from=doc["recorded_from"],
        failed_runs=list(doc.get("failed_runs", [])))


def write_report(folder: Path, comp: Comparison | None = None,
                 path: Path | None = None) -> Path:
    """Render a comparison's report.html; its runs must sit beside ``folder``."""
    folder = Path(folder)
    target = path or folder / "report.html"
    atomic_write_bytes(target, render(comp or load_comparison(folder), folder).encode())
    return target


def render(comp: Comparison, folder: Path) -> str:
    """The comparison's report: verdict, fault timeline above every protocol's output on
    one time axis, recovery, overhead and storage. Reads each run's folder for its series."""
    views = {r.run_id: load_run(RunStore.open(r.run_id, folder.parent)) for r in comp.runs
             if (folder.parent / r.run_id).is_dir()}
    comp = as_plotted(comp, views)
    runs = [views[r.run_id] for r in _first_run_each(comp) if r.run_id in views]
    faults = runs[0].faults if runs else []
    # As the command's exit code: none is the control, its losses are expected.
    passed = not comp.failed_runs and all(r.passed for r in runs if r.protocol != "none")
    guarantees = {p.protocol: p.guarantee for p in comp.protocols}
    return render_template(
        "compare.html.j2", f"ftctl compare: {comp.topology} under {comp.schedule}",
        comp.to_json(), comp=comp, runs=runs, faults=faults, passed=passed,
        guarantees=guarantees, no_guarantee=NO_GUARANTEE,
        timeline=timeline_html(runs) if runs else "",
        breakdown=breakdown_html(comp.protocols))


def as_plotted(comp: Comparison, views: Mapping[str, RunView]) -> Comparison:
    """The comparison with each run's sink records/s and median latency read again off
    the series its plots show (``steady_figures``), the protocols' medians and the
    overheads against none with them: a comparison stored before they were computed
    that way counted the seconds before the topology ran and gave none a fifth of the
    throughput its plot showed."""
    runs = []
    for r in comp.runs:
        v = views.get(r.run_id)
        if v is not None and v.throughput:
            rps, p50 = steady_figures(v.throughput, v.latency, [f.at for f in v.recoveries])
            r = replace(r, throughput_rps=rps, latency_p50_s=p50)
        runs.append(r)
    protocols = []
    for p in comp.protocols:
        mine = [r for r in runs if r.run_id in p.run_ids]
        if mine:
            p = replace(p, throughput_rps=median_of([r.throughput_rps for r in mine]),
                        latency_p50_s=median_of([r.latency_p50_s for r in mine]),
                        throughput_overhead=None, latency_overhead=None)
        protocols.append(p)
    add_overheads(protocols)
    return replace(comp, runs=runs, protocols=protocols)


def _first_run_each(comp: Comparison) -> list[RunFigures]:
    """One run per protocol for the plots (the first; repeats replay the same schedule)."""
    seen: dict[str, RunFigures] = {}
    for r in comp.runs:
        seen.setdefault(r.protocol, r)
    return list(seen.values())
