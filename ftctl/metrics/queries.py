"""Per-query relative latency and available queries over time (papers/004, §6, Fig. 5).

Pure functions over a run's latency series (``[(t, seconds)]`` per query, a query being
a sink operator). Definitions, with ``QueryMetricsParams``:

- relative latency RL of a query in a step ``[t, t + step)`` (the paper's Δ_T): the mean
  of ``latency / fault-free latency`` over the step's points; a step without output has
  none (the query produces nothing, so it is not available either);
- the fault-free latency of a query is given (from the golden run: ``fault_free``), or the
  median of its points in the ``baseline_window`` seconds before the fault
  (``before_fault``; the paper's "latency before failure");
- a query is available in a step when its RL is <= ``threshold`` (Θ, 1.2 in the paper;
  spec D19 keeps <=);
- Fig. 5(a) is the mean RL over the queries with output in a step; Fig. 5(b) the number
  of available queries;
- a query is back at the start of the first step after the fault from which it stays
  available to the end of the series.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ftctl.kernel.history import HistoryEvent, read_history

Series = Sequence[tuple[float, float]]


class QueryMetricsParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(default=1.2, gt=0, description="Θ: available when RL <= this.")
    step: float = Field(default=10.0, gt=0, description="Δ_T: seconds per step.")
    baseline_window: float = Field(default=5.0, gt=0,
                                   description="Seconds before the fault for the baseline.")
    min_baseline_points: int = Field(default=1, ge=1,
                                     description="Fewer points before the fault: no baseline.")


@dataclass
class QueryAvailability:
    t: list[float]  # step starts
    rl: dict[str, list[float | None]]  # query -> RL per step (None: no output, no baseline)
    baselines: dict[str, float | None]
    threshold: float
    back: dict[str, float | None] = field(default_factory=dict)  # query -> t it came back

    @property
    def available(self) -> list[int]:
        """Fig. 5(b): available queries per step."""
        return [sum(1 for v in self.rl.values() if _within(v[i], self.threshold))
                for i in range(len(self.t))]

    @property
    def mean_rl(self) -> list[float | None]:
        """Fig. 5(a): mean RL over the queries with output in each step."""
        out: list[float | None] = []
        for i in range(len(self.t)):
            vals = [x for v in self.rl.values() if (x := v[i]) is not None]
            out.append(statistics.fmean(vals) if vals else None)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "available": self.available, "mean_rl": self.mean_rl,
                "rl": self.rl, "baselines": self.baselines, "threshold": self.threshold,
                "back": self.back, "total": len(self.rl)}


def fault_free(latency_by_query: Mapping[str, Series]) -> dict[str, float | None]:
    """Each query's fault-free latency: the median of a golden run's series."""
    return {q: statistics.median(v for _, v in s) if s else None
            for q, s in latency_by_query.items()}


def before_fault(latency_by_query: Mapping[str, Series], t_fault: float,
                 params: QueryMetricsParams | None = None) -> dict[str, float | None]:
    """Each query's latency before the fault: the median over the baseline window."""
    p = params or QueryMetricsParams()
    out: dict[str, float | None] = {}
    for q, s in latency_by_query.items():
        pts = [v for t, v in s if t_fault - p.baseline_window <= t < t_fault]
        out[q] = statistics.median(pts) if len(pts) >= p.min_baseline_points else None
    return out


def relative_latency(series: Series, baseline: float | None, steps: Sequence[float],
                     step: float) -> list[float | None]:
    """Mean RL per step starting at each of ``steps``; None without output or baseline."""
    out: list[float | None] = []
    for t0 in steps:
        pts = [v / baseline for t, v in series if t0 <= t < t0 + step] if baseline else []
        out.append(statistics.fmean(pts) if pts else None)
    return out


def query_availability(latency_by_query: Mapping[str, Series],
                       baselines: Mapping[str, float | None], start: float, end: float,
                       params: QueryMetricsParams | None = None,
                       t_fault: float | None = None) -> QueryAvailability:
    """RL of every query per step from ``start`` up to ``end``, and when each came back
    after ``t_fault`` (None: never within the series, or no fault given)."""
    p = params or QueryMetricsParams()
    n = int((end - start) // p.step) + 1 if end >= start else 0
    steps = [round(start + k * p.step, 9) for k in range(n)]
    rl = {q: relative_latency(sorted(s), baselines.get(q), steps, p.step)
          for q, s in latency_by_query.items()}
    out = QueryAvailability(steps, rl, dict(baselines), p.threshold)
    if t_fault is not None:
        out.back = {q: came_back(steps, v, p.threshold, t_fault) for q, v in rl.items()}
    return out


def came_back(steps: Sequence[float], rl: Sequence[float | None], threshold: float,
              t_fault: float) -> float | None:
    """Start of the first step after ``t_fault`` from which RL stays <= threshold."""
    back = None
    for t0, v in zip(steps, rl, strict=True):
        if t0 < t_fault:
            continue
        back = (t0 if back is None else back) if _within(v, threshold) else None
    return back


def _within(rl: float | None, threshold: float) -> bool:
    return rl is not None and rl <= threshold


def up_intervals(events: Iterable[HistoryEvent | Mapping[str, Any]],
                 queries: Mapping[str, frozenset[str]],
                 operator_of: Mapping[str, str], end: float) -> dict[str, list[tuple[float,
                                                                                     float]]]:
    """When each query had every instance running, from a run's history: an instance is
    down from the ``node-down`` or ``fault-injected`` that killed it until its next
    ``instance-started``."""
    down: dict[str, float] = {}
    per_query: dict[str, list[tuple[float, float]]] = {q: [] for q in queries}
    since: dict[str, float | None] = dict.fromkeys(queries, 0.0)

    def settle(t: float) -> None:
        ops = {operator_of[i] for i in down}
        for q, q_ops in queries.items():
            is_up = not (q_ops & ops)
            start = since[q]
            if is_up and start is None:
                since[q] = t
            elif not is_up and start is not None:
                per_query[q].append((start, t))
                since[q] = None

    for e in read_history(events, host="sim"):
        if e.kind in ("node-down", "fault-injected"):
            for i in e.data.get("instances", ()):
                down.setdefault(i, e.t)
        elif e.kind == "instance-started":
            down.pop(str(e.instance), None)
        else:
            continue
        settle(e.t)
    for q, start in since.items():
        if start is not None:
            per_query[q].append((start, end))
    return per_query


def available_over_time(avail: QueryAvailability,
                        up: Mapping[str, Sequence[tuple[float, float]]]) -> list[int]:
    """Fig. 5(b) for queries that output in bursts (sliding windows fire once a slide): a
    query is available at the end of a step when all its instances run and the last RL it
    showed since they all run again is <= Θ. A step without output keeps the last RL."""
    step = avail.t[1] - avail.t[0] if len(avail.t) > 1 else 0.0
    out = []
    for k, t0 in enumerate(avail.t):
        t1 = t0 + step
        n = 0
        for q, rls in avail.rl.items():
            span = next(((a, b) for a, b in up.get(q, ()) if a <= t1 <= b), None)
            if span is None:
                continue
            last = next((rls[j] for j in range(k, -1, -1)
                         if rls[j] is not None and avail.t[j] + step > span[0]), None)
            n += _within(last, avail.threshold)
        out.append(n)
    return out
