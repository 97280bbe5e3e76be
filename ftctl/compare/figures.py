"""The figures compare reports per run and per protocol (medians and spread over repeats)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Output in the first second is start-up, not steady state.
WARMUP_S = 1.0


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
    throughput_rps: float | None  # sink records/s before the first fault
    latency_p50_s: float | None  # sink output latency before the first fault
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


def _median(values: Sequence[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return statistics.median(xs) if xs else None


def _spread(values: Sequence[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return max(xs) - min(xs) if len(xs) > 1 else (0.0 if xs else None)


def steady_window(start: float, faults: Sequence[float]) -> tuple[float, float]:
    """From the first output plus a warm-up to the first fault (or forever).

    Only this window is fault-free for every protocol: after a fault, protocols that roll
    back or recompute replay old records (high latency) and then catch up (a throughput
    burst), which would flatter or penalise them for reasons that are not overhead.
    """
    return (start + WARMUP_S, min(faults, default=float("inf")))


def steady_latency(samples: Sequence[tuple[float, float]],
                   window: tuple[float, float]) -> float | None:
    """Median output latency over samples (t, latency) inside the window."""
    lo, hi = window
    kept = [lat for t, lat in samples if lo <= t < hi]
    return statistics.median(kept) if kept else None


def steady_throughput(series: Sequence[tuple[float, int]],
                      window: tuple[float, float]) -> float | None:
    """Records/s from a cumulative count series (t, total) inside the window."""
    lo, hi = window
    inside = [(t, n) for t, n in series if lo <= t < hi]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    return (n1 - n0) / (t1 - t0)


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
        detection_s=_median([r.detection_s for r in runs]),
        restart_s=_median([r.restart_s for r in runs]),
        recovery_s=_median([r.recovery_s for r in runs]),
        recovery_spread_s=_spread([r.recovery_s for r in runs]),
        throughput_rps=_median([r.throughput_rps for r in runs]),
        latency_p50_s=_median([r.latency_p50_s for r in runs]),
        throughput_overhead=None, latency_overhead=None,
        records_processed=_median([float(r.records_processed) for r in runs]),
        snapshot_bytes=_median([float(r.snapshot_bytes) for r in runs]),
        run_ids=[r.run_id for r in runs],
        restarts=_median([float(r.restarts) for r in runs]),
        replayed=_median([float(r.replayed) for r in runs]),
        takeover_s=_median([r.takeover_s for r in runs]),
        messages_per_record=_median([r.messages_per_record for r in runs]),
        first_output_s=_median([r.first_output_s for r in runs]),
        breakdown=median_breakdown([r.breakdown for r in runs]))


def median_breakdown(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each part's median over the runs; how restarts started, summed."""
    out: dict[str, Any] = {}
    for key in ("detect", "plan", "start", "replay", "catch_up", "restarts", "replayed",
                "restore_s", "restore_bytes"):
        out[key] = _median([p.get(key) for p in parts])
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
