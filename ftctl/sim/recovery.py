"""Recovery times per fault on the simulation host, and their spread over many schedules.

Per fault (a ``fault-injected`` record), in simulated seconds since it struck:

- ``detect``: the coordinator's ``failure-detected``;
- ``restart``: the first instance restarted (``instance-started``) or rolled back in place
  after the detection;
- ``recovered``: every restart the detection caused runs again (the ``recovered`` record;
  after a rollback in place, the protocol's plan);
- ``first_output``: the first output a sink made visible (emitted or committed) after the
  restart.

``recovered`` is the end of ``ftctl.metrics.recovery.recovery_breakdown``'s ``start`` part,
so it means what it means for a Spark run. A fault whose first detection comes after the
next fault struck caused no failure of its own (a pause that ended before the hang
timeout, a delay): it has no times; faults of one kind that strike before a detection (a
kill-group's nodes) share it. Faults are grouped by their scenario names (``kill-task`` for
a crash); ``restore-capacity`` brings capacity back and is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ftctl.kernel.history import HistoryEvent
from ftctl.metrics.recovery import (
    fault_windows,
    first_event_after,
    measured,
    recovery_breakdown,
)
from ftctl.sim.faults import SCENARIO_NAMES

MEASURES = ("detect", "restart", "recovered", "first_output")
RESTARTS = ("instance-started", "instance-rolled-back")
# One fault's times: (kind, detect, restart, recovered, first_output); None: never came.
FaultTimes = tuple[str, float | None, float | None, float | None, float | None]


def fault_times(events: Sequence[HistoryEvent], outputs: Sequence[float]) -> list[FaultTimes]:
    """The recovery times of every fault in one run's history; ``outputs``: when sinks
    emitted, in order (committed output is read from ``output-committed``)."""
    # Capacity coming back and clock faults fail nothing: no recovery is measured after
    # them, and the returns are not counted as faults.
    windows = sorted((w for w in fault_windows(events) if w.fault != "restore-capacity"),
                     key=lambda w: w.t)
    shown = sorted([*outputs, *(e.t for e in events if e.kind == "output-committed"
                                and e.data.get("records"))])
    out: list[FaultTimes] = []
    for k, w in enumerate(windows):
        kind = SCENARIO_NAMES.get(w.fault, w.fault)
        if not measured(kind):
            out.append((kind, None, None, None, None))
            continue
        # Faults of one kind struck before a detection share it (a group's nodes, a burst)
        following = next((x.t for x in windows[k + 1:] if x.fault != w.fault
                          and measured(SCENARIO_NAMES.get(x.fault, x.fault))), math.inf)
        detected = first_event_after(events, ("failure-detected",), w.t)
        if detected is None or (detected >= following and following > w.t):
            out.append((kind, None, None, None, None))
            continue
        restarted = first_event_after(events, RESTARTS, detected)
        after = restarted if restarted is not None else detected
        first = next((t for t in shown if t > after), None)
        parts = recovery_breakdown(w.t, events, first, None)
        running = _since_fault(parts, ("detect", "plan", "start"))
        out.append((kind, _round(detected - w.t),
                    None if restarted is None else _round(restarted - w.t),
                    running, None if first is None else _round(first - w.t)))
    return out


def _since_fault(parts: dict[str, Any], names: Sequence[str]) -> float | None:
    """The sum of the breakdown's first ``names`` parts: when the last of them ended."""
    values = [parts.get(n) for n in names]
    return None if None in values else _round(sum(v for v in values if v is not None))


def _round(v: float) -> float:
    return round(v, 9)


def spread(values: Iterable[float]) -> dict[str, float] | None:
    """Median, 95th percentile (nearest rank) and max; None without values."""
    xs = sorted(values)
    if not xs:
        return None
    mid = len(xs) // 2
    median = xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2
    p95 = xs[max(0, math.ceil(0.95 * len(xs)) - 1)]
    return {"median": round(median, 6), "p95": round(p95, 6), "max": round(xs[-1], 6)}


def summarize(times: Iterable[FaultTimes]) -> dict[str, dict[str, Any]]:
    """Per fault kind: how many struck, how many caused a detected failure, and the spread
    of each measure over the faults that reached it."""
    by_kind: dict[str, list[FaultTimes]] = {}
    for t in times:
        by_kind.setdefault(t[0], []).append(t)
    out: dict[str, dict[str, Any]] = {}
    for kind in sorted(by_kind):
        rows = by_kind[kind]
        entry: dict[str, Any] = {"faults": len(rows),
                                 "failed": sum(1 for r in rows if r[1] is not None)}
        for i, name in enumerate(MEASURES, start=1):
            vals = [v for r in rows if isinstance(v := r[i], float)]
            got: dict[str, Any] | None = spread(vals)
            if got is not None:
                got["n"] = len(vals)
            entry[name] = got
        out[kind] = entry
    return out
