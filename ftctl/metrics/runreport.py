"""A chaos run's recovery report: series from the Spark host, shifted onto the event clock.

The host's metrics and latency samples count from the host's start; ``events.jsonl`` counts
from the run directory's creation. ``shift`` (event clock minus host clock, taken at one
instant) puts both on the event clock before ``recovery_report`` compares them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftctl.kernel.history import Records, read_history
from ftctl.metrics.plots import write_plots
from ftctl.metrics.recovery import (
    FaultWindow,
    RecoveryReport,
    Series,
    fault_windows,
    measured,
    recovery_report,
)
from ftctl.metrics.series import SERIES_JSON, bucket_quantiles, throughput_from_counts
from ftctl.results import atomic_write_json

BUCKET = 0.1  # seconds per latency point
# Not failures: capacity coming back is part of the fault before it.

@dataclass
class RunSeries:
    latency_p50: Series
    latency_p99: Series
    throughput: Series
    latency_by_sink: Mapping[str, Series]


def build_series(latency: Sequence[tuple[str, float, float]],
                 metrics: Sequence[Mapping[str, Any]], sinks: Sequence[str],
                 shift: float) -> RunSeries:
    samples = [(t + shift, v) for _iid, t, v in latency]
    q = bucket_quantiles(samples, BUCKET, (50, 99))
    per_sink: dict[str, list[tuple[float, float]]] = {}
    for iid, t, v in latency:
        per_sink.setdefault(iid.split("[", 1)[0], []).append((t + shift, v))
    by_sink = {k: bucket_quantiles(v, BUCKET, (50,))[50] for k, v in per_sink.items()}
    rows = [{**r, "t": float(r["t"]) + shift} for r in metrics]
    # Records reaching the sinks, replays included, over every incarnation.
    thr = throughput_from_counts(rows, sinks, field="total_in")
    return RunSeries(q[50], q[99], thr, by_sink)


def write_series(run_dir: Path, series: RunSeries, shift: float) -> Path:
    """The run's sink throughput and output latency on the event clock, for every run
    (``recovery.json`` has them only under chaos): a report of a plain run plots them on
    the axis of its events, and ``shift`` (event clock minus host clock) reads the host's
    own rows (metrics.jsonl) onto it too."""
    path = Path(run_dir) / SERIES_JSON
    atomic_write_json(path, {"shift": round(shift, 6), "throughput": series.throughput,
                             "latency_p50": series.latency_p50,
                             "latency_p99": series.latency_p99})
    return path


def windows(events: Records, shift: float) -> list[FaultWindow]:
    """Fault windows at the moment each fault struck.

    A fault's event is logged when its inject returns (a group kill: after its last kill;
    killing a worker's process tree takes a second or two), so the time comes from the
    fault's own ``at`` (the host clock, shifted), or a group's first kill.
    """
    out = []
    evs = read_history(events)
    injects = [e for e in evs if e.kind == "fault-injected"]
    for w, e in zip(fault_windows(evs), injects, strict=True):
        t = w.t
        kills = (e.data.get("details") or {}).get("kills") or []
        if kills:
            t = float(kills[0]["t"]) + shift
        elif "at" in e.data:
            t = float(e.data["at"]) + shift
        out.append(FaultWindow(t, w.heal, w.fault, w.target))
    return out


def analyze(run_dir: Path, events: Records, series: RunSeries,
            shift: float, title: str = "") -> tuple[RecoveryReport, list[FaultWindow]]:
    """The per-fault report; writes recovery.json and the PNG plots into ``run_dir``."""
    every = windows(events, shift)
    faults = [w for w in every if measured(w.fault)]
    report = recovery_report(faults, events, series.latency_p50, series.throughput,
                             latency_by_sink=series.latency_by_sink)
    doc = report.to_json()
    doc["injected"] = injected(events)
    doc["series"] = {"latency_p50": series.latency_p50, "latency_p99": series.latency_p99,
                     "throughput": series.throughput}
    atomic_write_json(run_dir / "recovery.json", doc)
    write_plots(run_dir, throughput=series.throughput, latency_p50=series.latency_p50,
                latency_p99=series.latency_p99, faults=every,
                recoveries=report.faults, availability=report.availability, title=title)
    return report, faults


def injected(events: Records) -> list[dict[str, Any]]:
    """Every fault as the history has it: inject time, target, pids, heal time, errors."""
    evs = read_history(events)
    heals = {e.fault: e.t for e in evs if e.kind == "fault-healed"}
    out = []
    for e in evs:
        if e.kind in ("fault-injected", "fault-error"):
            d = e.data
            out.append({
                "fault": d["type"], "target": d.get("resolved", d.get("target")),
                "t": e.t, "at": d.get("at"), "pids": d.get("pids", []),
                "heal_t": heals.get(e.fault),
                "error": d.get("error"),
                "optional": bool((d.get("planned") or {}).get("optional", False)),
            })
    return out


def undelivered(faults: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The faults of ``injected`` that were never delivered and were not optional: the
    run did not test what its schedule said, so it fails (exit 1)."""
    return [f for f in faults if f.get("error") and not f.get("optional")]
