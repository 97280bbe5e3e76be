"""The figures compare reports per run and per protocol (medians and spread over repeats)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Where the steady state is read: the figures the report's plots show (re-exported).
from ftctl.metrics.series import WARMUP_S as WARMUP_S
from ftctl.metrics.series import steady_figures as steady_figures
from ftctl.metrics.series import steady_window as steady_window


@dataclass
class RunFigures:
    """What one run of one protocol showed."""

    run_id: str
    protocol: str
    passed: bool
    lost: int
    duplicated: int
    detection_s: float | None
    restart_s: float | None
    recovery_s: float | None
    # Before the first fault (``steady_figures``): what the report's plots show there.
    throughput_rps: float | None  # sink records/s (mean of the plotted points)
    latency_p50_s: float | None  # output latency (median of the plotted p50 points)
    records_processed: int  # records every instance received, summed
    snapshot_bytes: int
    restarts: int  # instance incarnations started after the first (every fault's)
    seconds: float
    replayed: int = 0  # source records read again by restarted sources
    takeover_s: float | None = None  # fault to its slot's route change (median over faults)
    # Fault to the first output after the restart it caused: kill to recovered output,
    # detection included (papers/000's recovery time), whatever the latency does after.
    first_output_s: float | None = None
    messages: int = 0  # channel and peer messages of the run
    messages_per_record: float | None = None  # messages per record at the sinks
    # The first fault's recovery breakdown (``ftctl.metrics.recovery.recovery_breakdown``).
    breakdown: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def median_of(values: Sequence[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return statistics.median(xs) if xs else None


def _spread(values: Sequence[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return max(xs) - min(xs) if len(xs) > 1 else (0.0 if xs else None)


@dataclass
class ProtocolFigures:
    """One protocol over K repeats: medians, spread of recovery time, overhead vs none."""

    protocol: str
    guarantee: str
    runs: int
    guarantee_held: bool
    lost: int
    duplicated: int
    detection_s: float | None
    restart_s: float | None
    recovery_s: float | None
    recovery_spread_s: float | None
    throughput_rps: float | None
    latency_p50_s: float | None
    throughput_overhead: float | None  # 1 - throughput / none's
    latency_overhead: float | None  # latency / none's - 1
    records_processed: float | None
    snapshot_bytes: float | None
    run_ids: list[str]
    # The scope of recovery: instances restarted and source records replayed per run.
    restarts: float | None = None
    replayed: float | None = None
    takeover_s: float | None = None
    messages_per_record: float | None = None
    first_output_s: float | None = None
    breakdown: dict[str, Any] = field(default_factory=dict)  # medians of each part

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(protocol: str, guarantee: str, runs: Sequence[RunFigures]) -> ProtocolFigures:
    return ProtocolFigures(
        protocol=protocol, guarantee=guarantee, runs=len(runs),
        guarantee_held=all(r.passed for r in runs),
        lost=sum(r.lost for r in runs), duplicated=sum(r.duplicated for r in runs),
        detection_s=median_of([r.detection_s for r in runs]),
        restart_s=median_of([r.restart_s for r in runs]),
        recovery_s=median_of([r.recovery_s for r in runs]),
        recovery_spread_s=_spread([r.recovery_s for r in runs]),
        throughput_rps=median_of([r.throughput_rps for r in runs]),
        latency_p50_s=median_of([r.latency_p50_s for r in runs]),
        throughput_overhead=None, latency_overhead=None,
        records_processed=median_of([float(r.records_processed) for r in runs]),
        snapshot_bytes=median_of([float(r.snapshot_bytes) for r in runs]),
        run_ids=[r.run_id for r in runs],
        restarts=median_of([float(r.restarts) for r in runs]),
        replayed=median_of([float(r.replayed) for r in runs]),
        takeover_s=median_of([r.takeover_s for r in runs]),
        messages_per_record=median_of([r.messages_per_record for r in runs]),
        first_output_s=median_of([r.first_output_s for r in runs]),
        breakdown=median_breakdown([r.breakdown for r in runs]))


def median_breakdown(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each part's median over the runs; how restarts started, summed."""
    out: dict[str, Any] = {}
    for key in ("detect", "plan", "start", "replay", "catch_up", "restarts", "replayed",
                "restore_s", "restore_bytes"):
        out[key] = median_of([p.get(key) for p in parts])
    how: dict[str, int] = {}
    for p in parts:
        for k, n in (p.get("started_by") or {}).items():
            how[k] = how.get(k, 0) + int(n)
    out["started_by"] = how
    return out


def add_overheads(figures: list[ProtocolFigures], reference: str = "none") -> None:
    """Overheads against the reference protocol's fault-free throughput and latency."""
    ref = next((f for f in figures if f.protocol == reference), None)
    if ref is None:
        return
    for f in figures:
        if f.throughput_rps and ref.throughput_rps:
            f.throughput_overhead = round(1 - f.throughput_rps / ref.throughput_rps, 4)
        if f.latency_p50_s and ref.latency_p50_s:
            f.latency_overhead = round(f.latency_p50_s / ref.latency_p50_s - 1, 4)
