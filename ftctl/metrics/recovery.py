"""Recovery latency per fault, from the event log and output time series. Pure functions.

Inputs, all on one clock (the run's event-log ``t``):

- fault windows: inject (and heal) times, e.g. ``fault_windows(store.read_history())``;
- events: the run's history (docs/history.md; version 1 records are upgraded as they are
  read): the coordinator's ``failure-detected``, ``instance-started`` and (if logged)
  ``recovered``;
- latency: ``[(t, seconds)]``, one point per output bucket (e.g. p50 of the records a sink
  emitted in each 100 ms); a bucket without output has no point;
- throughput: ``[(t, records/s)]``.

Definitions (``RecoverySettings`` holds the numbers):

- baseline latency: median latency over ``baseline_window`` seconds before the fault;
  baseline throughput likewise. Fewer than ``min_baseline_points`` points: no baseline,
  and the latency-based times are None.
- "within" a threshold factor f: a point with latency <= f * baseline. One-sided on
  purpose: output faster than before (an idle pipeline after catch-up) is not a failure.
- disturbance: the first point after the fault that is above the threshold or that comes
  after a gap of more than ``gap_factor`` buckets without output (the outage itself).
  No disturbance: the fault did not show in the output; recovery time 0, ``impact`` False.
- recovered: from the disturbance on, the first point that starts a run of ``hold``
  consecutive points all within the threshold and with no gap between them (a one-bucket
  dip below the threshold during catch-up is not recovery). Recovery time = that point's
  t minus the fault's t. The run never settles: None.
- recovery_s uses f = 1 + ``tolerance`` (10%, ftctl's definition); recovery_rl_s uses
  f = ``relative_threshold`` (1.2, the relative-latency threshold of papers/004).
- detection_s / restart_s / recovered_event_s: fault to the first such event at or after
  it. Faults closer together than a detection share the event: read them with care.
- first_output_s: fault to the first output point after the restart the fault caused
  (after the fault if there was no restart): output that was already in flight downstream
  of a killed task says nothing about the replacement.
- throughput dip: lowest throughput from the fault until recovered (until the end if
  never) relative to the baseline: ``throughput_min_ratio`` (0 = output stopped) and
  ``throughput_dip`` = 1 - ratio.
- available queries (papers/004): per sink, the relative latency of a time step is the
  mean of latency / baseline over its points; the sink is available in that step when
  it is <= ``relative_threshold``. A step without output is unavailable, so choose
  ``step`` longer than the gap between a sink's outputs.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ftctl.config.fault_kinds import FAULT_TYPES
from ftctl.kernel.history import HistoryEvent, Records, read_history

Series = Sequence[tuple[float, float]]

DETECT_EVENTS = ("failure-detected",)
RESTART_EVENTS = ("instance-started",)
RECOVERED_EVENTS = ("recovered",)


def measured(fault: str) -> bool:
    """Whether a recovery is measured after this kind of fault (the registry's
    ``recovers``): not after bringing capacity back or a clock fault."""
    kind = FAULT_TYPES.get(fault)
    return kind is None or kind.recovers


@dataclass(frozen=True)
class RecoverySettings:
    baseline_window: float = 5.0  # seconds before the fault
    min_baseline_points: int = 3
    tolerance: float = 0.10  # "back within 10%"
    relative_threshold: float = 1.2  # papers/004's Θ
    hold: int = 3  # consecutive points that must stay within
    bucket: float | None = None  # seconds per point; None: the median spacing of the series
    gap_factor: float = 1.5  # a spacing above gap_factor * bucket is a gap in output
    step: float = 1.0  # available-queries time step (papers/004's Δ_T)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FaultWindow:
    t: float  # inject time
    heal: float | None = None
    fault: str = ""
    target: str = ""


@dataclass
class FaultRecovery:
    fault: str
    target: str
    t_fault: float
    t_heal: float | None
    detection_s: float | None
    restart_s: float | None
    recovered_event_s: float | None
    first_output_s: float | None
    baseline_latency_s: float | None
    impact: bool | None
    recovery_s: float | None
    recovery_rl_s: float | None
    baseline_throughput: float | None
    min_throughput: float | None
    throughput_min_ratio: float | None
    throughput_dip: float | None
    # Where the seconds went (``recovery_breakdown``): parts that add up to recovery_s.
    breakdown: dict[str, Any] = field(default_factory=dict)

    @property
    def t_recovered(self) -> float | None:
        return None if self.recovery_s is None else self.t_fault + self.recovery_s

    def to_json(self) -> dict[str, Any]:
        out = {k: _round(v) for k, v in asdict(self).items()}
        out["breakdown"] = {k: _round(v) for k, v in self.breakdown.items()}
        return out


@dataclass
class Availability:
    """Number of available queries (sinks) per time step."""

    t: list[float]
    available: list[int]
    total: int
    per_sink: dict[str, list[bool]] = field(default_factory=dict)
    baselines: dict[str, float | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"t": [_round(x) for x in self.t], "available": self.available,
                "total": self.total, "per_sink": self.per_sink,
                "baselines": {k: _round(v) for k, v in self.baselines.items()}}


@dataclass
class RecoveryReport:
    faults: list[FaultRecovery]
    availability: Availability | None
    settings: RecoverySettings

    def to_json(self) -> dict[str, Any]:
        return {"faults": [f.to_json() for f in self.faults],
                "availability": self.availability.to_json() if self.availability else None,
                "settings": self.settings.to_json()}


# ---------------------------------------------------------------------------- the report


def _next_fault(ordered: Sequence[FaultWindow], k: int) -> float | None:
    """When the next fault after ``ordered[k]`` that fails something struck; None if none."""
    return next((f.t for f in ordered[k + 1:] if f.t > ordered[k].t and measured(f.fault)),
                None)


def recovery_report(
    faults: Sequence[FaultWindow],
    events: Records,
    latency: Series,
    throughput: Series,
    *,
    latency_by_sink: Mapping[str, Series] | None = None,
    settings: RecoverySettings | None = None,
) -> RecoveryReport:
    """Per-fault recovery numbers, plus available queries when there is more than one sink."""
    s = settings or RecoverySettings()
    evs = read_history(events)
    lat = sorted(latency)
    thr = sorted(throughput)
    ordered = sorted(faults, key=lambda f: f.t)
    rows = [fault_recovery(f, evs, lat, thr, s, _next_fault(ordered, k))
            for k, f in enumerate(ordered)]
    availability = None
    if latency_by_sink is not None and len(latency_by_sink) > 1 and faults:
        availability = available_queries(latency_by_sink, min(f.t for f in faults), s)
    return RecoveryReport(rows, availability, s)


def fault_recovery(
    fault: FaultWindow,
    events: Records,
    latency: Series,
    throughput: Series,
    settings: RecoverySettings | None = None,
    until: float | None = None,
) -> FaultRecovery:
    """One fault's recovery; ``until``: when the next fault struck (the breakdown counts
    the detections and restarts before it as this fault's)."""
    s = settings or RecoverySettings()
    t_f = fault.t
    events = read_history(events)
    detected = first_event_after(events, DETECT_EVENTS, t_f)
    restarted = first_event_after(events, RESTART_EVENTS, t_f)
    if detected is not None and until is not None and detected > until:
        # Nothing saw this fault before the next one struck (a pause shorter than the
        # failure detector's timeout): what followed is the next fault's.
        detected = restarted = None
    recovered_ev = first_event_after(events, RECOVERED_EVENTS, t_f)
    first_out = next((t for t, _ in latency if t > (restarted if restarted is not None else t_f)),
                     None)
    base = baseline(latency, t_f, s)
    bucket = s.bucket or infer_bucket(latency)
    rec = rec_rl = None
    impact = None
    if base is not None and bucket is not None:
        rec, impact = time_to_recover(latency, t_f, base * (1 + s.tolerance), s.hold, bucket,
                                      s.gap_factor)
        rec_rl, _ = time_to_recover(latency, t_f, base * s.relative_threshold, s.hold, bucket,
                                    s.gap_factor)
    base_thr = baseline(throughput, t_f, s)
    end = t_f + rec if rec is not None else float("inf")
    if rec is not None and bucket is not None:
        # At least `hold` buckets, so a fault without visible impact still gets a window.
        end = max(end, t_f + s.hold * bucket)
    parts = recovery_breakdown(t_f, events, first_out, t_f + rec if rec is not None else None,
                               until)
    during = [v for t, v in throughput if t_f <= t <= end]
    min_thr = min(during) if during else None
    ratio = min_thr / base_thr if min_thr is not None and base_thr else None
    return FaultRecovery(
        fault=fault.fault, target=fault.target, t_fault=t_f, t_heal=fault.heal,
        detection_s=_since(detected, t_f), restart_s=_since(restarted, t_f),
        recovered_event_s=_since(recovered_ev, t_f), first_output_s=_since(first_out, t_f),
        baseline_latency_s=base, impact=impact, recovery_s=rec, recovery_rl_s=rec_rl,
        baseline_throughput=base_thr, min_throughput=min_thr, throughput_min_ratio=ratio,
        throughput_dip=None if ratio is None else 1.0 - ratio, breakdown=parts,
    )


PLAN_EVENTS = ("instance-started", "instance-stopped", "instance-rolled-back")
BREAKDOWN_PARTS = ("detect", "plan", "start", "replay", "catch_up")


def recovery_breakdown(t_fault: float, events: Records, first_output: float | None,
                       recovered: float | None, until: float | None = None) -> dict[str, Any]:
    """Where one fault's recovery went, as consecutive parts of it (seconds):

    - ``detect``: the fault to the coordinator's ``failure-detected``;
    - ``plan``: to the protocol's first restart, stop or rollback;
    - ``start``: to every restarted instance running (the ``recovered`` record): on Spark
      slot assignments or job launches, the tasks' restores, their registration and the
      release of their groups (and, under progressive recovery, the wait for capacity);
    - ``replay``: to the first output after the restart (re-reading sources, replaying
      logs, re-processing);
    - ``catch_up``: to latency back within 10% (``recovery_s``).

    Each boundary is the later of its event and the one before, so the parts are never
    negative and add up to the recovery time when there is one; a part whose event never
    came is None, and so is every part after it. These parts follow the fault's first
    detection. A correlated fault (a rack whose workers die one after another, a restart
    lost with its worker) is detected more than once: ``detections`` has one entry per
    detection up to ``recovered`` and ``until`` (the next fault), each with its own
    ``at`` (seconds after the fault), ``plan``, ``start``, ``restarts`` and
    ``started_by``. Over all of them: how the restarts started (``slot``: handed to a
    waiting slot, ``queued``: to a fenced survivor's slot, ``job``: a Spark job launched;
    on the simulation host, ``sim``), the records the restarted sources read again
    (``replayed``), and the restore within ``start``: the snapshot bytes the restarts read
    (``restore_bytes``) and the longest any task took to build its instance and restore
    it (``restore_s``)."""
    evs = read_history(events)
    detected = first_event_after(evs, DETECT_EVENTS, t_fault)
    planned, running = _plan_and_run(evs, detected)
    marks = [detected, planned, running, first_output, recovered]
    out: dict[str, Any] = {}
    prev: float | None = t_fault
    for name, t in zip(BREAKDOWN_PARTS, marks, strict=True):
        if prev is None or t is None:
            out[name], prev = None, None
            continue
        t = max(t, prev)
        out[name], prev = t - prev, t
    horizon = min(t for t in (recovered, until, math.inf) if t is not None)
    found = sorted(e.t for e in evs if e.kind in DETECT_EVENTS and t_fault < e.t <= horizon)
    if detected is not None and detected not in found:
        found.insert(0, detected)  # a detection at the fault's own instant
    starts = [e for e in evs if e.kind == "instance-started" and t_fault <= e.t <= horizon]
    out["detections"] = [_detection(evs, d, t_fault, [e for e in starts if d <= e.t < nxt])
                         for d, nxt in zip(found, [*found[1:], math.inf][:len(found)],
                                           strict=True)]
    out["restarts"] = len(starts)
    out["started_by"] = _started_by(starts)
    out["replayed"] = sum(int(e.data.get("records", 0)) for e in evs
                          if e.kind == "source-rewound" and t_fault <= e.t <= horizon)
    # The restore inside ``start``: snapshot bytes the restarts read, and the longest a
    # task took to build its instance and restore it (they restore side by side).
    out["restore_bytes"] = sum(int(e.data.get("restore_bytes") or 0) for e in starts)
    took = [float(e.data["restore_s"]) for e in evs if e.kind == "instance-registered"
            and e.data.get("restore_s") is not None and t_fault <= e.t <= horizon]
    out["restore_s"] = max(took) if took else None
    return out


def _plan_and_run(evs: list[HistoryEvent], detected: float | None
                  ) -> tuple[float | None, float | None]:
    """After a detection: the protocol's first plan, and every restart it planned running
    (the host's ``recovered`` record; in a history without one, the first release of a
    restarted group; a rollback in place: the plan itself, nothing had to start)."""
    if detected is None:
        return None, None
    planned = first_event_after(evs, PLAN_EVENTS, detected)
    if planned is None:
        return None, None
    running = (first_event_after(evs, RECOVERED_EVENTS, planned)
               or first_event_after(evs, ("instance-running",), planned))
    if running is None and not any(e.kind == "instance-started" and e.t >= planned
                                   for e in evs):
        running = planned
    return planned, running


def _detection(evs: list[HistoryEvent], detected: float, t_fault: float,
               starts: list[HistoryEvent]) -> dict[str, Any]:
    planned, running = _plan_and_run(evs, detected)
    plan = None if planned is None else planned - detected
    start = None if planned is None or running is None else max(running, planned) - planned
    return {"at": detected - t_fault, "plan": plan, "start": start,
            "restarts": len(starts), "started_by": _started_by(starts)}


def _started_by(starts: list[HistoryEvent]) -> dict[str, int]:
    how: dict[str, int] = {}
    for e in starts:
        kind = str(e.data.get("start") or ("sim" if e.host == "sim"
                                           else "slot" if e.data.get("spare") else "job"))
        how[kind] = how.get(kind, 0) + 1
    return how


# ---------------------------------------------------------------------------- building blocks


def baseline(series: Series, t_fault: float, settings: RecoverySettings) -> float | None:
    """Median over the window before the fault; None with too few points."""
    lo = t_fault - settings.baseline_window
    window = [v for t, v in series if lo <= t < t_fault]
    if len(window) < settings.min_baseline_points:
        return None
    return float(statistics.median(window))


def infer_bucket(series: Series) -> float | None:
    """The series' usual spacing: the median gap between consecutive points."""
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(series) if b[0] > a[0]]
    return float(statistics.median(gaps)) if gaps else None


def time_to_recover(
    series: Series, t_fault: float, limit: float, hold: int, bucket: float,
    gap_factor: float = 1.5,
) -> tuple[float | None, bool | None]:
    """(seconds from the fault until latency is back under ``limit`` to stay, impact).

    See the module doc for disturbance and hold. (None, None) when there is no point
    after the fault to judge by; (None, True) when it never settles.
    """
    after = [(t, v) for t, v in series if t > t_fault]
    if not after:
        return None, None
    gap = gap_factor * bucket
    start = None
    prev = t_fault
    for i, (t, v) in enumerate(after):
        if v > limit or t - prev > gap:
            start = i
            break
        prev = t
    if start is None:
        return 0.0, False
    for i in range(start, len(after) - hold + 1):
        run = after[i : i + hold]
        if all(v <= limit for _, v in run) and all(
            b[0] - a[0] <= gap for a, b in itertools.pairwise(run)
        ):
            return run[0][0] - t_fault, True
    return None, True


def first_event_after(events: Records, kinds: Sequence[str], t: float) -> float | None:
    """Time of the first history record of one of ``kinds`` at or after ``t``."""
    times = [e.t for e in read_history(events) if e.kind in kinds and e.t >= t]
    return min(times) if times else None


def fault_windows(events: Records) -> list[FaultWindow]:
    """Fault windows from a run's history (``fault-injected`` / ``fault-healed``, paired by
    their fault occurrence)."""
    evs = read_history(events)
    heals = {e.fault: e.t for e in evs if e.kind == "fault-healed" and e.fault is not None}
    return [
        FaultWindow(_struck_at(e), heals.get(e.fault) if e.fault is not None else None,
                    str(e.data["type"]), str(e.data.get("resolved", e.data.get("target", ""))))
        for e in evs if e.kind == "fault-injected"
    ]


def _struck_at(e: HistoryEvent) -> float:
    """When the fault struck: its record's ``at`` (taken before the action), not when the
    record was written after it. A container kill through the engine takes up to a
    second, and Spark may see the loss before it returns."""
    at = e.data.get("at")
    return float(at) if isinstance(at, int | float) and at <= e.t else e.t


def available_queries(
    latency_by_sink: Mapping[str, Series],
    baseline_before: float,
    settings: RecoverySettings | None = None,
    *,
    start: float | None = None,
    end: float | None = None,
) -> Availability:
    """How many sinks are available in each time step (module doc). Baselines are taken
    from the window before ``baseline_before`` (the first fault)."""
    s = settings or RecoverySettings()
    series = {k: sorted(v) for k, v in latency_by_sink.items()}
    bases = {k: baseline(v, baseline_before, s) for k, v in series.items()}
    points = [t for v in series.values() for t, _ in v]
    lo = start if start is not None else (min(points) if points else 0.0)
    hi = end if end is not None else (max(points) if points else 0.0)
    steps = [lo + k * s.step for k in range(int((hi - lo) / s.step) + 1)] if hi >= lo else []
    per_sink: dict[str, list[bool]] = {}
    for sink, pts in series.items():
        base = bases[sink]
        flags = []
        for t0 in steps:
            rel = [v / base for t, v in pts if t0 <= t < t0 + s.step] if base else []
            flags.append(bool(rel) and statistics.fmean(rel) <= s.relative_threshold)
        per_sink[sink] = flags
    available = [sum(per_sink[k][i] for k in per_sink) for i in range(len(steps))]
    return Availability(steps, available, len(series), per_sink, bases)


def _since(t: float | None, t0: float) -> float | None:
    return None if t is None else t - t0


def _round(v: Any) -> Any:
    if isinstance(v, list):
        return [_round(x) for x in v]
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    return round(v, 6) if isinstance(v, float) else v
