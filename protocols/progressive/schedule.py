"""Which failed instances to start when capacity is short (paper 004, §5; spec R11-R14).

A *query* is a sink operator and every operator upstream of it. An instance is *pending*
while it is failed and not yet started again; one pending instance needs one slot. A query
is failed while one of its instances is pending and recovered once the last one started.

Three schedules, each a pure planner over ``(queries, pending instances, free slots)``:

- ``profit-density`` (R12): whole queries in order of profit density, Eq. PD of the paper,
  ``PD(Q) = prt(Q) / sum over O_k in Q with C_k > 0 of C_k / f_k``, where ``C_k`` counts the
  pending instances of ``O_k`` not started in this plan yet (D2) and ``f_k`` the still-failed
  queries containing ``O_k``, Q itself included (D1). After every pick the densities are
  recomputed: a started shared operator makes its other queries cheaper.
- ``topological`` (R13): pending instances one by one in execution order while slots last
  (operator-centric, progressive).
- ``blocking`` (R11): everything at once when the free slots cover every pending instance,
  nothing before (operator-centric, blocking: Flink, Storm).

``ProfitDensity`` keeps each decision in its own method so a planted bug (a mutant)
replaces one method. ``replay`` plays arrivals of capacity through a planner, the way the
coordinator re-plans at every arrival (R14), and gives each query's recovery time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Schedule = Literal["profit-density", "topological", "blocking"]
SCHEDULES: tuple[Schedule, ...] = ("profit-density", "topological", "blocking")
Fit = Literal["le", "lt"]
Leftover = Literal["idle", "prefill"]


def operator_of_slot(iid: str) -> str:
    """``"count[1]"`` -> ``"count"`` (ftctl's instance ids)."""
    return iid.split("[", 1)[0]


@dataclass(frozen=True, slots=True)
class Query:
    """A sink operator (the query's name) with the operators it needs and its priority."""

    name: str
    operators: frozenset[str]
    priority: float = 1.0


@dataclass(frozen=True, slots=True)
class Pick:
    """One query chosen by a profit-density plan, with its density and cost at the time."""

    query: str
    density: float
    cost: int


@dataclass(frozen=True, slots=True)
class Plan:
    """Instances to start now (execution order within each pick), what was picked, and the
    slots left free."""

    started: tuple[str, ...]
    picks: tuple[Pick, ...] = ()
    free: int = 0


class Planner:
    """A schedule: ``plan(queries, pending, free)``. ``pending`` is in execution order."""

    name: Schedule = "blocking"

    def __init__(self, operator_of: Callable[[str], str] = operator_of_slot):
        self.operator_of = operator_of

    def plan(self, queries: Sequence[Query], pending: Sequence[str], free: int) -> Plan:
        raise NotImplementedError


class Blocking(Planner):
    """R11: all pending instances once they all fit, else none."""

    name: Schedule = "blocking"

    def plan(self, queries: Sequence[Query], pending: Sequence[str], free: int) -> Plan:
        if pending and free >= len(pending):
            return Plan(tuple(pending), (), free - len(pending))
        return Plan((), (), free)


class Topological(Planner):
    """R13: pending instances in execution order while a slot is free."""

    name: Schedule = "topological"

    def plan(self, queries: Sequence[Query], pending: Sequence[str], free: int) -> Plan:
        take = tuple(pending[:max(0, free)])
        return Plan(take, (), free - len(take))


class ProfitDensity(Planner):
    """R12: the greedy of the paper's §5, with the decisions of spec §4 (D1-D8)."""

    name: Schedule = "profit-density"

    def __init__(self, operator_of: Callable[[str], str] = operator_of_slot, fit: Fit = "le",
                 leftover: Leftover = "idle", sizes: Mapping[str, int] | None = None):
        super().__init__(operator_of)
        self.fit = fit
        self.leftover = leftover
        self.sizes = dict(sizes or {})  # operator -> all its instances (for a mutant only)

    # ------------------------------------------------------------ one decision each

    def cost(self, q: Query, remaining: Mapping[str, int]) -> int:
        """Slots Q still needs: its operators' pending instances not started yet."""
        return sum(remaining.get(op, 0) for op in q.operators)

    def density(self, q: Query, remaining: Mapping[str, int], failed: Sequence[Query]) -> float:
        """Eq. PD. Only operators with pending instances count (D2); ``f_k`` includes Q (D1)."""
        denom = 0.0
        for op in q.operators:
            c = remaining.get(op, 0)
            if c:
                denom += c / sum(1 for o in failed if op in o.operators)
        return q.priority / denom

    def fits(self, cost: int, free: int) -> bool:
        """D4: a query of exactly the free slots fits (``fit: lt`` is the paper's wording)."""
        return cost < free if self.fit == "lt" else cost <= free

    def ranked(self, failed: Sequence[Query], pd: Mapping[str, float],
               remaining: Mapping[str, int], index: Mapping[str, int]) -> list[Query]:
        """D7: by density, then cheaper first, then the sink declared first."""
        return sorted(failed, key=lambda q: (-pd[q.name], self.cost(q, remaining),
                                             index[q.name]))

    def choose(self, ranked: Sequence[Query], remaining: Mapping[str, int],
               free: int) -> Query | None:
        """D5: the first query in rank order that fits, scanning the whole list."""
        return next((q for q in ranked if self.fits(self.cost(q, remaining), free)), None)

    def densities(self, failed: Sequence[Query], remaining: Mapping[str, int],
                  first: Mapping[str, float] | None) -> dict[str, float]:
        """Recomputed after every pick (``first`` is the plan's opening densities)."""
        return {q.name: self.density(q, remaining, failed) for q in failed}

    # ------------------------------------------------------------ the greedy

    def plan(self, queries: Sequence[Query], pending: Sequence[str], free: int) -> Plan:
        op_of = self.operator_of
        remaining: dict[str, int] = {}
        for iid in pending:
            remaining[op_of(iid)] = remaining.get(op_of(iid), 0) + 1
        index = {q.name: i for i, q in enumerate(queries)}
        started: list[str] = []
        picks: list[Pick] = []
        first: dict[str, float] | None = None
        while True:
            failed = [q for q in queries if self.cost(q, remaining) > 0]
            if not failed:
                break
            pd = self.densities(failed, remaining, first)
            if first is None:
                first = pd
            q = self.choose(self.ranked(failed, pd, remaining, index), remaining, free)
            if q is None:
                break
            cost = self.cost(q, remaining)
            picks.append(Pick(q.name, pd[q.name], cost))
            free -= cost
            # Instances of operators an earlier pick started are not started twice.
            started += [i for i in pending if op_of(i) in q.operators and op_of(i) in remaining]
            for op in q.operators:
                remaining.pop(op, None)
        if self.leftover == "prefill" and free > 0:
            extra = self._prefill(queries, pending, remaining, started, free)
            started += extra
            free -= len(extra)
        return Plan(tuple(started), tuple(picks), free)

    def _prefill(self, queries: Sequence[Query], pending: Sequence[str],
                 remaining: Mapping[str, int], started: Sequence[str], free: int) -> list[str]:
        """D8 ``leftover: prefill``: the top-ranked query's instances, in order, while free."""
        failed = [q for q in queries if self.cost(q, remaining) > 0]
        if not failed:
            return []
        index = {q.name: i for i, q in enumerate(queries)}
        pd = self.densities(failed, remaining, None)
        top = self.ranked(failed, pd, remaining, index)[0]
        taken = set(started)
        todo = [i for i in pending if i not in taken and self.operator_of(i) in top.operators]
        return todo[:free]


def planner(schedule: Schedule, *, fit: Fit = "le", leftover: Leftover = "idle",
            operator_of: Callable[[str], str] = operator_of_slot) -> Planner:
    if schedule == "profit-density":
        return ProfitDensity(operator_of, fit, leftover)
    if schedule == "topological":
        return Topological(operator_of)
    if schedule == "blocking":
        return Blocking(operator_of)
    raise ValueError(f"unknown schedule {schedule!r} (known: {', '.join(SCHEDULES)})")


# ---------------------------------------------------------------- arrivals over time


@dataclass
class Timeline:
    """What a schedule did over a series of capacity arrivals."""

    recovered: dict[str, float] = field(default_factory=dict)  # query -> arrival time
    plans: list[Plan] = field(default_factory=list)  # one per arrival
    pending: tuple[str, ...] = ()  # instances never started

    def picks(self) -> list[list[str]]:
        return [[p.query for p in plan.picks] for plan in self.plans]

    def available_after(self, times: Sequence[float]) -> list[int]:
        """Recovered queries after each of ``times``."""
        return [sum(1 for v in self.recovered.values() if v <= t) for t in times]

    def weighted(self, queries: Sequence[Query]) -> float:
        """Sum of priority x recovery time over the recovered queries."""
        return sum(q.priority * self.recovered[q.name] for q in queries
                   if q.name in self.recovered)


def replay(p: Planner, queries: Sequence[Query], pending: Sequence[str],
           arrivals: Sequence[tuple[float, int]]) -> Timeline:
    """Plan at every arrival ``(t, slots)``; unused slots carry over (R14). A query is
    recovered at the arrival whose plan starts its last pending instance."""
    left = list(pending)
    failed = [q for q in queries if any(p.operator_of(i) in q.operators for i in left)]
    out = Timeline()
    free = 0
    for t, slots in arrivals:
        free += slots
        plan = p.plan(queries, left, free)
        free = plan.free
        out.plans.append(plan)
        gone = set(plan.started)
        left = [i for i in left if i not in gone]
        ops = {p.operator_of(i) for i in left}
        for q in failed:
            if q.name not in out.recovered and not (q.operators & ops):
                out.recovered[q.name] = t
    out.pending = tuple(left)
    return out
