"""Planted bugs of ``progressive`` (spec §7), each a subclass replacing one decision.

tests/test_progressive_mutants.py plants each one into the check named in ``CAUGHT_BY``
and fails if the check still passes. ``MUTANTS`` is what the conformance kit runs (the
bugs that break exactly-once); ``SCHEDULING_MUTANTS`` only change the order and times of
recovery and are caught by the exact scheduler tests alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from protocols.contract.actions import RECOVERING, Control, CoordinatorAction, DeclarePhase
from protocols.contract.names import InstanceId, SnapshotRef
from protocols.contract.spec import Mutant
from protocols.contract.view import ClusterView
from protocols.progressive.burst import Mode
from protocols.progressive.coordinator import ProgressiveCoordinator
from protocols.progressive.instance import ProgressiveInstance
from protocols.progressive.messages import SINK_COUNTS, Ready, Resend
from protocols.progressive.minibatch import Positions, Verdict
from protocols.progressive.params import ProgressiveParams
from protocols.progressive.schedule import Blocking, Planner, ProfitDensity, Query
from protocols.shared.packed_counts import PackedCounts

# ---------------------------------------------------------------- the scheduler (R12)


class DensityInverted(ProfitDensity):
    """PD = cost / priority."""

    def density(self, q: Query, remaining: Mapping[str, int], failed: Sequence[Query]) -> float:
        return 1.0 / super().density(q, remaining, failed)


class NoShare(ProfitDensity):
    """f_k taken as 1: sharing does not count."""

    def density(self, q: Query, remaining: Mapping[str, int], failed: Sequence[Query]) -> float:
        return q.priority / sum(remaining.get(op, 0) for op in q.operators)


class DeclarationOrder(ProfitDensity):
    """Failed queries tried in declaration order, not by density."""

    def ranked(self, failed: Sequence[Query], pd: Mapping[str, float],
               remaining: Mapping[str, int], index: Mapping[str, int]) -> list[Query]:
        return sorted(failed, key=lambda q: index[q.name])


class FitStrict(ProfitDensity):
    """A query fits only if its cost is below the free slots (the paper's wording)."""

    def fits(self, cost: int, free: int) -> bool:
        return cost < free


class StopAtMisfit(ProfitDensity):
    """The greedy stops at the first query that does not fit."""

    def choose(self, ranked: Sequence[Query], remaining: Mapping[str, int],
               free: int) -> Query | None:
        head = ranked[0] if ranked else None
        return head if head is not None and self.fits(self.cost(head, remaining), free) else None


class NoUpdate(ProfitDensity):
    """Densities computed once per plan, not after each pick."""

    def densities(self, failed: Sequence[Query], remaining: Mapping[str, int],
                  first: Mapping[str, float] | None) -> dict[str, float]:
        if first is not None:
            return {q.name: first[q.name] for q in failed}
        return super().densities(failed, remaining, first)


class CostWholeOperator(ProfitDensity):
    """C_k counts every instance of O_k, not only the pending ones."""

    def density(self, q: Query, remaining: Mapping[str, int], failed: Sequence[Query]) -> float:
        whole = {op: self.sizes.get(op, c) for op, c in remaining.items() if c}
        return super().density(q, whole, failed)


class TieReverse(ProfitDensity):
    """Ties broken by reverse declaration order."""

    def ranked(self, failed: Sequence[Query], pd: Mapping[str, float],
               remaining: Mapping[str, int], index: Mapping[str, int]) -> list[Query]:
        return sorted(failed, key=lambda q: (-pd[q.name], self.cost(q, remaining),
                                             -index[q.name]))


PLANNER_BUGS: dict[str, type[ProfitDensity]] = {
    "density-inverted": DensityInverted, "no-share": NoShare,
    "declaration-order": DeclarationOrder, "fit-strict": FitStrict,
    "stop-at-misfit": StopAtMisfit, "no-update": NoUpdate,
    "cost-whole-operator": CostWholeOperator, "tie-reverse": TieReverse,
}


def coordinator_with(planner: type[ProfitDensity]) -> type[ProgressiveCoordinator]:
    """The coordinator planning with a mutant planner."""

    def make_planner(self: ProgressiveCoordinator, params: ProgressiveParams) -> Planner:
        if params.schedule != "profit-density":
            return ProgressiveCoordinator.make_planner(self, params)
        return planner(fit=params.fit, leftover=params.leftover, sizes=self._sizes())

    return type(f"ProgressiveCoordinator_{planner.__name__}", (ProgressiveCoordinator,),
                {"make_planner": make_planner, "__doc__": planner.__doc__})


# ---------------------------------------------------------------- the coordinator


class NoReplan(ProgressiveCoordinator):
    """Plans only once per episode (at the failure or the first arrival)."""

    def may_plan(self) -> bool:
        return self.planned == 0


class ReleaseAllAtEnd(ProgressiveCoordinator):
    """Progressive mode starts nothing until every pending instance fits."""

    def make_planner(self, params: ProgressiveParams) -> Planner:
        return Blocking()


class BuffersOffEarly(ProgressiveCoordinator):
    """Recovery ends as soon as the last pending instance is started (buffers off early)."""

    def plan(self, view: ClusterView, why: str) -> list[CoordinatorAction]:
        acts = super().plan(view, why)
        if acts and not self.pending and self.mode is Mode.PROGRESSIVE:
            self.starting.clear()
            acts += self.end_episode(max(self.cps.complete, self.k), view)
        return acts


class NoResendFromStarting(ProgressiveCoordinator):
    """A replacement's Ready asks only ready upstreams to resend, not those still starting."""

    def on_ready(self, i: InstanceId, msg: Ready, view: ClusterView) -> list[CoordinatorAction]:
        # the fix's one line undone: a starting upstream may already run and have sent
        # to ``i`` before ``i`` was up; those batches are then never sent again
        starting = set(self.starting)
        acts = super().on_ready(i, msg, view)
        return [a for a in acts if not (isinstance(a, Control) and isinstance(a.msg, Resend)
                                        and a.instance in starting)]


class RecoveringLeftOpen(ProgressiveCoordinator):
    """An episode ends (Normal) but never leaves recovering: later recoveries never open it."""

    def end_episode(self, m: int, view: ClusterView) -> list[CoordinatorAction]:
        return [a for a in super().end_episode(m, view)
                if not (isinstance(a, DeclarePhase) and a.phase == RECOVERING)]


# ---------------------------------------------------------------- the instance


class ArrivalOrder(ProgressiveInstance):
    """Recovery batches processed in arrival order (no order preservation)."""

    def hold(self, ch: int, batch: Any) -> list[Any]:
        return self.process(ch, batch)


class _GePositions(Positions):
    def judge(self, ch: int, seq: int, gen: int = 0, mine: int = 0) -> Verdict:
        v = super().judge(ch, seq, gen, mine)
        return Verdict.ACCEPT if v is Verdict.DUPLICATE and seq == self.pos[ch] else v


class DedupGe(ProgressiveInstance):
    """A receiver accepts seq >= pos: the batch at the position passes again."""

    def positions(self, channels: list[int], pos: dict[int, int] | None) -> Positions:
        return _GePositions(channels, pos)


class NoGenFence(ProgressiveInstance):
    """Messages of an older generation are accepted after a rollback."""

    def stale(self, gen: int) -> bool:
        return False

    def receive(self, ch: int, m: Any) -> list[Any]:
        if isinstance(getattr(m, "meta", None), int) and m.meta < self.gen:
            m.meta = self.gen  # taken as current
        elif isinstance(getattr(m, "meta", None), tuple) and m.meta[0] < self.gen:
            return super().receive(ch, type(m)(m.kind, m.id, meta=(self.gen, *m.meta[1:])))
        return super().receive(ch, m)


class NoAdaptiveBuffering(ProgressiveInstance):
    """A burst is detected but the recovery buffers stay off."""

    def buffer_on(self) -> None:
        return None


class TrimOnPersist(ProgressiveInstance):
    """A source trims its buffer at its own punctuation, before cp(P_k) is complete."""

    def punctuate(self, now: float) -> list[Any]:
        acts = super().punctuate(now)
        self.source_buf.trim(self.next_punct - 1)
        return acts


class SinkNoCounts(ProgressiveInstance):
    """A sink shows replayed records again after a rollback."""

    def visible(self, records: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        super().visible(records)
        return records


class SinkSkipsDeltas(ProgressiveInstance):
    """A restarted sink restores its base of visible counts but not the deltas after it."""

    def restore_counts(self, extra: Mapping[SnapshotRef, Any]
                       ) -> tuple[dict[Any, int], PackedCounts]:
        return super().restore_counts({SINK_COUNTS: extra.get(SINK_COUNTS)})


class SinkDedupPerKey(ProgressiveInstance):
    """A multiset sink counts visible records per key, as if a rollback replayed each
    key's records in their original order (a join's or a merge's replay does not).

    Caught by tests/test_progressive_joins.py, not shipped to the kit: its topologies
    without joins do not tell it apart (the same choice as causal's and lineage's)."""

    def __init__(self, me: Any, cores: Any, params: Any):
        super().__init__(me, cores, params)
        self.identity = _by_key


def _by_key(key: Any, value: Any) -> Any:
    return key


INSTANCE_BUGS: dict[str, type[ProgressiveInstance]] = {
    "arrival-order": ArrivalOrder, "dedup-ge": DedupGe, "no-gen-fence": NoGenFence,
    "no-adaptive-buffering": NoAdaptiveBuffering, "trim-on-persist": TrimOnPersist,
    "sink-no-counts": SinkNoCounts, "sink-skips-deltas": SinkSkipsDeltas,
}
COORDINATOR_BUGS: dict[str, type[ProgressiveCoordinator]] = {
    "no-replan": NoReplan, "release-all-at-end": ReleaseAllAtEnd,
    "buffers-off-early": BuffersOffEarly, "no-resend-from-starting": NoResendFromStarting,
    "recovering-left-open": RecoveringLeftOpen,
    **{name: coordinator_with(p) for name, p in PLANNER_BUGS.items()},
}

ALL_MUTANTS: tuple[Mutant, ...] = (
    *(Mutant(name, (c.__doc__ or name).strip(), coordinator=c)
      for name, c in COORDINATOR_BUGS.items()),
    *(Mutant(name, (c.__doc__ or name).strip(), instance=c)
      for name, c in INSTANCE_BUGS.items()),
)

# Bugs of *which* query comes back *when*: the output stays exactly-once under each, so
# the conformance kit's guarantee check cannot see them. The exact scheduler tests catch
# every one (tests/test_progressive_mutants.py: the spec's worked examples E1-E5, U3).
SCHEDULE_ONLY = frozenset({"release-all-at-end", "density-inverted", "no-share",
                           "declaration-order", "stop-at-misfit", "no-update",
                           "cost-whole-operator", "tie-reverse"})
# What the kit runs: every planted bug that breaks exactly-once on some schedule (or the
# phase contract its phase-triggered cases judge: recovering-left-open).
MUTANTS = tuple(m for m in ALL_MUTANTS if m.name not in SCHEDULE_ONLY)
SCHEDULING_MUTANTS = tuple(m for m in ALL_MUTANTS if m.name in SCHEDULE_ONLY)
