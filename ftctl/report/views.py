"""What a report shows of a stored run, read from its folder, on one aligned time axis.

Every run's event clock starts when its folder was created, so cluster and session start
(tens of seconds, never the same twice) would put the same fault at a different time in
each run. A report counts time from the run's ``running`` event instead: the moment the
topology runs, which is also when the fault schedule's offsets start. The same fault of
a replayed schedule then sits at the same place for every protocol.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftctl.kernel.history import HistoryEvent
from ftctl.metrics.series import SERIES_JSON, throughput_from_counts
from ftctl.results import RunStore


@dataclass
class FaultView:
    kind: str
    target: str
    start: float  # seconds since the topology started running
    end: float | None  # heal, or None (a kill has no end)
    error: str | None = None

    @property
    def duration(self) -> str:
        return "-" if self.end is None else f"{self.end - self.start:.1f} s"


@dataclass
class RecoveryView:
    """One fault as the coordinator and the output saw it, with absolute marks."""

    kind: str
    target: str
    at: float
    detected: float | None
    restarted: float | None
    recovered: float | None
    detection_s: float | None
    restart_s: float | None
    first_output_s: float | None
    recovery_s: float | None
    recovery_rl_s: float | None
    throughput_dip: float | None


@dataclass
class RunView:
    run_id: str
    protocol: str
    guarantee: str
    topology: str
    status: str
    passed: bool
    complete: bool
    verdict_words: str
    sinks: list[dict[str, Any]]
    divergences: list[dict[str, Any]]
    oracle_words: str | None
    faults: list[FaultView] = field(default_factory=list)
    recoveries: list[RecoveryView] = field(default_factory=list)
    latency: list[tuple[float, float]] = field(default_factory=list)
    latency_p99: list[tuple[float, float]] = field(default_factory=list)
    throughput: list[tuple[float, float]] = field(default_factory=list)
    availability: dict[str, Any] | None = None
    snapshot_bytes: int = 0
    t0: float = 0.0  # event-clock time of the first "instance-running"

    @property
    def judged(self) -> bool:
        """False for a run with no delivery promise: its losses are counted, not judged."""
        return self.guarantee != NO_GUARANTEE

    @property
    def outcome(self) -> str:
        """One word for the run: passed, failed, or (no promise) finished."""
        if not self.judged:
            return "finished" if self.complete else "did not finish"
        return "passed" if self.passed else "failed"


NO_GUARANTEE = "none"  # Guarantee.NONE: no delivery promise, only finishing is judged


def count(n: int, what: str) -> str:
    return f"{n:,} {what}" if n != 1 else f"1 {what.rstrip('s')}"


def no_guarantee_words(totals: Mapping[str, int]) -> str:
    """A run with no delivery promise (``none`` where an operator keeps state), in the
    report and the terminal alike: "no guarantee to check; 1,234 lost, 56 duplicated".
    Its counts are facts, not a pass: "none held" or PASSED read as if something had
    been checked."""
    found = [f"{totals[k]:,} {k}" for k in ("lost", "duplicated", "unexpected")
             if totals.get(k)]
    return "no guarantee to check; " + (", ".join(found) or "no record lost or duplicated")


def verdict_words(verdict: dict[str, Any], complete: bool) -> str:
    """"exactly-once held" or "exactly-once broken: 12 records lost, 3 duplicated"."""
    guarantee = verdict.get("guarantee", "the guarantee")
    if not complete:
        return f"the run did not finish: {guarantee} not judged"
    sinks = verdict.get("sinks", [])
    lost = sum(int(s.get("lost", 0)) for s in sinks)
    dup = sum(int(s.get("duplicated", 0)) for s in sinks)
    unexpected = sum(int(s.get("unexpected", 0)) for s in sinks)
    found = [count(lost, "records lost") if lost else "", f"{dup:,} duplicated" if dup else "",
             f"{unexpected:,} unexpected" if unexpected else ""]
    found = [f for f in found if f]
    if guarantee == NO_GUARANTEE:
        return no_guarantee_words({"lost": lost, "duplicated": dup, "unexpected": unexpected})
    held = bool(verdict.get("passed"))
    words = f"{guarantee} {'held' if held else 'broken'}"
    if found:
        words += (": " if not held else " (allowed: ") + ", ".join(found) + ("" if not held
                                                                           else ")")
    return words


def _value(v: Any) -> str:
    """A diverging record as words: a missing one is "nothing", not Python's None."""
    return "nothing" if v is None or v == "None" else str(v)


def _oracle_words(oracle: dict[str, Any] | None) -> str | None:
    if not oracle:
        return None
    name = oracle.get("oracle", "oracle")
    if oracle.get("passed"):
        return f"Spark SQL oracle ({name}): all {oracle.get('keys', 0):,} keys match"
    return (f"Spark SQL oracle ({name}): {oracle.get('total_mismatches', 0):,} of "
            f"{oracle.get('keys', 0):,} keys differ")


def _running_at(events: list[HistoryEvent], kind: str = "instance-running") -> float:
    for e in events:
        if e.kind == kind:
            return e.t
    return 0.0


def _shift(series: Any, t0: float) -> list[tuple[float, float]]:
    """A series counted from when the topology started running; what came before (the
    host's samples while tasks started) is not the topology's and is left out, so the
    axis starts at 0."""
    return [(round(float(t) - t0, 3), float(v)) for t, v in series or []
            if float(t) - t0 >= 0]


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def load_run(run: RunStore) -> RunView:
    cfg = run.read_config()
    verdict = run.read_verdict() or {}
    status = run.status()
    complete = bool(verdict.get("complete", status == "complete"))
    history = run.read_history()
    t0 = _running_at(history)
    sinks = verdict.get("sinks", [])
    divergences = [{"sink": s["sink"], **d, "expected": _value(d.get("expected")),
                    "actual": _value(d.get("actual"))}
                   for s in sinks for d in s.get("divergences", [])]
    view = RunView(
        run_id=run.run_id, protocol=str(cfg.get("protocol", "?")),
        guarantee=str(verdict.get("guarantee", "?")),
        topology=str((cfg.get("topology") or {}).get("name", "?")), status=status,
        passed=bool(verdict.get("passed")), complete=complete,
        verdict_words=verdict_words(verdict, complete), sinks=sinks, divergences=divergences,
        oracle_words=_oracle_words(verdict.get("oracle")), t0=t0)
    rec = _read_json(run.path / "recovery.json")
    # Every run since series.json was added has it; before, only chaos runs had series
    # (in recovery.json), and a plain run's metrics.jsonl is on the host's clock.
    series = _read_json(run.path / SERIES_JSON) or (rec or {}).get("series")
    if series:
        view.latency = _shift(series.get("latency_p50"), t0)
        view.latency_p99 = _shift(series.get("latency_p99"), t0)
        view.throughput = _shift(series.get("throughput"), t0)
    else:
        # The host's clock starts as the coordinator logs run-started (within a fraction
        # of a second): the best a run without series.json allows.
        view.throughput = _shift(_throughput_from_metrics(run, cfg),
                                 t0 - _running_at(history, "run-started"))
    if rec:
        view.availability = rec.get("availability")
        if view.availability:
            view.availability = {**view.availability,
                                 "t": [round(float(t) - t0, 3) for t in view.availability["t"]]}
        # (fault, target) -> when each of its occurrences struck, in order
        struck: dict[tuple[Any, Any], list[float]] = {}
        for r in rec.get("faults", []):
            struck.setdefault((r.get("fault"), r.get("target")), []).append(float(r["t_fault"]))
        for f in rec.get("injected", []):
            heal = f.get("heal_t")
            # Logged when its inject returned (a group kill: after its last kill); the
            # recovery report knows when it struck (the first kill).
            times = struck.get((f.get("fault"), f.get("target"))) or [float(f["t"])]
            start = times.pop(0) if len(times) > 1 else times[0]
            view.faults.append(FaultView(
                str(f.get("fault")), str(f.get("target")), round(start - t0, 3),
                None if heal is None else round(float(heal) - t0, 3), f.get("error")))
        for r in rec.get("faults", []):
            at = float(r["t_fault"]) - t0

            def mark(key: str, at: float = at, r: dict[str, Any] = r) -> float | None:
                return None if r.get(key) is None else round(at + float(r[key]), 3)

            view.recoveries.append(RecoveryView(
                str(r.get("fault")), str(r.get("target")), round(at, 3), mark("detection_s"),
                mark("restart_s"), mark("recovery_s"), r.get("detection_s"),
                r.get("restart_s"), r.get("first_output_s"), r.get("recovery_s"),
                r.get("recovery_rl_s"), r.get("throughput_dip")))
    return view


def _throughput_from_metrics(run: RunStore, cfg: dict[str, Any]) -> list[tuple[float, float]]:
    """Sink throughput from metrics.jsonl, on the host's clock (a run from before
    series.json)."""
    path = run.path / "metrics.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ops = (cfg.get("topology") or {}).get("operators", [])
    sink_ops = {o.get("name") for o in ops if str(o.get("type", "")).startswith("sink")}
    sinks = sorted({r["instance"] for r in rows
                    if str(r.get("instance", "")).split("[", 1)[0] in sink_ops})
    if not sinks:
        return []
    field_ = "total_in" if any("total_in" in r for r in rows) else "records_in"
    return [(round(float(t), 3), float(v))
            for t, v in throughput_from_counts(rows, sinks, field=field_)]
