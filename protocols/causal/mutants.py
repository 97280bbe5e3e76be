"""Planted bugs of ``causal`` (shared/specs/causal.md section 5, where today's code has the part).

Each is one overridden method; the conformance kit must find a seeded schedule on which it
breaks exactly-once or stops the run. "Children resumed one early" (row 4) and "parents
resumed one early" (5) send duplicates that receivers would drop by identity; they are
caught because every resend and every replacement's resume starts with a ``RESUME``
marker naming its first sender time, which the receiver checks against what it has
(``CausalInstance._resumed``): no duplicate may leave a replacement or a resending
parent. "t_min = max" and "T* from the parents' clocks" (6, 7) override the
coordinator's ``plan_of``: a stateless replacement starts from T* (R = T*), so both move
where it starts and where its parents resend from; the kit catches them and so does the
coordinator's plan of the worked example E1 (tests/test_causal_examples.py). "depth off
by one" (11, 12): see below.
"Diff log trimmed beyond g" (10) changes no output; the completeness check (R7) stops the
run before the replay.

Rules of ``depth`` = f (spec M1-M5) not planted, because no bundled topology can tell:
"diffs keep f levels" (row 12), "fallback not triggered beyond f" and "members asked by
their children only" (M3). Each removes only the observations a member's causes are read
from below a restarted child; with N5 every event of a member reaches each of its children,
so those observations add something only when all of its children restart with it and one
of them has a surviving child. Every bundled member with a single child is a source (its
events are regenerated, not replayed) or feeds a sink (nothing below it): planted, each
survived 60 seeds on every bundled topology with identical outputs. tests/
test_causal_depth.py and tests/test_causal_examples.py (E3) catch them by their plans.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ftctl.runtime.messages import Batch
from protocols.causal.coordinator import CausalCoordinator, _Recovery
from protocols.causal.instance import CausalInstance
from protocols.causal.messages import Plan, Query, TrimDiffLog
from protocols.causal.recovery import RecoveryPlan
from protocols.contract.actions import Control, CoordinatorAction, Restart
from protocols.contract.messages import Msg
from protocols.contract.spec import Mutant
from protocols.contract.view import ClusterView
from protocols.shared.logged import Resend
from protocols.shared.payload_log import PayloadLog
from protocols.shared.treeclock import Plain, TreeClock, t_min_of


def _line(cls: type) -> str:
    """A mutant's description: its docstring on one line."""
    return " ".join((cls.__doc__ or "").split())


def _replan(acts: list[CoordinatorAction],
            change: Callable[[Plan], Plan]) -> list[CoordinatorAction]:
    """``acts`` with every recovery plan sent replaced by ``change(plan)``."""
    return [Control(a.instance, change(a.msg)) if isinstance(a, Control)
            and isinstance(a.msg, Plan) else a for a in acts]


class ResumeLate(CausalCoordinator):
    """A recovered instance resumes to each child one batch too late."""

    def _plan_if_ready(self, b: str, rec: _Recovery) -> list[CoordinatorAction]:
        return _replan(super()._plan_if_ready(b, rec), lambda p: dataclasses.replace(
            p, resume={ch: s + 1 for ch, s in p.resume.items()}))


class ResumeEarly(CausalCoordinator):
    """A recovered instance resumes to each child one batch too early (spec row 4)."""

    def _plan_if_ready(self, b: str, rec: _Recovery) -> list[CoordinatorAction]:
        return _replan(super()._plan_if_ready(b, rec), lambda p: dataclasses.replace(
            p, resume={ch: s - 1 for ch, s in p.resume.items()}))


class ReplayReversed(CausalCoordinator):
    """The observed events are replayed in reverse B-time order."""

    def _plan_if_ready(self, b: str, rec: _Recovery) -> list[CoordinatorAction]:
        return _replan(super()._plan_if_ready(b, rec),
                       lambda p: dataclasses.replace(p, replay=list(reversed(p.replay))))


class NoReplay(CausalCoordinator):
    """Replay is switched off: a replacement processes its parents' batches in arrival order."""

    def _plan_if_ready(self, b: str, rec: _Recovery) -> list[CoordinatorAction]:
        return _replan(super()._plan_if_ready(b, rec),
                       lambda p: dataclasses.replace(p, replay=[]))


class ParentsResumeLate(CausalCoordinator):
    """A replacement's parents resend from one batch after the one it needs next."""

    def _resends(self, b: str, plan: RecoveryPlan) -> list[Control]:
        return [Control(c.instance, dataclasses.replace(c.msg, start=c.msg.start + 1))
                for c in super()._resends(b, plan) if isinstance(c.msg, Resend)]


class ParentsResumeEarly(CausalCoordinator):
    """A replacement's parents resend from one batch before the one it needs next (spec
    row 5)."""

    def _resends(self, b: str, plan: RecoveryPlan) -> list[Control]:
        return [Control(c.instance, dataclasses.replace(c.msg, start=c.msg.start - 1))
                for c in super()._resends(b, plan) if isinstance(c.msg, Resend)]


class TMinMax(CausalCoordinator):
    """t_min is the largest of the children's B-times instead of the smallest (spec R1,
    row 6): a stateless replacement starts past what some child has, which loses it."""

    @staticmethod
    def plan_of(b: str, clocks: Mapping[str, TreeClock], trees: list[Plain],
                parents: Iterable[str], restore: TreeClock | None,
                floor: Mapping[str, int] | None, bases: list[Plain]) -> RecoveryPlan:
        plan = CausalCoordinator.plan_of(b, clocks, trees, parents, restore, floor, bases)
        if not plan.t:
            return plan
        top = max(plan.t, key=lambda c: min(plan.t[c], (floor or {}).get(c, plan.t[c])))
        most = CausalCoordinator.plan_of(b, {top: clocks[top]}, trees, parents, restore,
                                         floor, bases)
        return dataclasses.replace(most, t=plan.t, children=plan.children)


class TStarFromParents(CausalCoordinator):
    """T* takes each parent's newest time the answers name, the parents' clocks as far as
    recovery sees them, instead of the children's subtrees up to t_min (spec R2, row 7):
    the parents resend nothing a child still lacks."""

    @staticmethod
    def plan_of(b: str, clocks: Mapping[str, TreeClock], trees: list[Plain],
                parents: Iterable[str], restore: TreeClock | None,
                floor: Mapping[str, int] | None, bases: list[Plain]) -> RecoveryPlan:
        parents = list(parents)
        plan = CausalCoordinator.plan_of(b, clocks, trees, parents, restore, floor, bases)
        tstar = TreeClock(b, plan.t_min)
        for node in (*trees, *bases):
            tstar.apply_plain((b, 0, node[2]))
        tstar.time = plan.t_min
        rclock = restore if restore is not None else tstar
        return dataclasses.replace(plan, tstar=tstar, parents={
            a: 1 + t_min_of(a, [rclock]) for a in parents})


class AnswerDropsNewest(CausalInstance):
    """A child answering a recovery query leaves out the newest diff-log entry about B."""

    def _answer(self, q: Query) -> None:
        ch = self.chan_of.get(q.about)
        log = self.dlog.get(ch, []) if ch is not None else []
        newest = log.pop() if log else None
        super()._answer(q)
        if newest is not None:
            log.append(newest)


class PayloadTrimmedEarly(CausalInstance):
    """A parent trims its payload log one batch further than the child's snapshot allows."""

    def gc(self, ch: int, upto: int) -> None:
        super().gc(ch, upto + 1)


class SnapshotWithoutPayloadLog(CausalInstance):
    """A local snapshot leaves out the payload log: what was in flight cannot be resent."""

    def _blob(self) -> dict[str, Any]:
        blob = super()._blob()
        blob["plog"] = {ch: PayloadLog().pack() for ch in blob["plog"]}
        return blob


class NoSinkCounts(CausalInstance):
    """A sink makes every record visible again, ignoring its visible counts."""

    def flush_sink(self) -> None:
        self.emitted = {}
        super().flush_sink()


class SinkVectorWithoutClock(CausalInstance):
    """A replacement sink resumes after its persisted vector but keeps its snapshot's clock
    and diff log: a parent failing with it is planned from answers that lag what the sink
    made visible, and resumes after batches it never replayed."""

    def _restore_sink(self, sink: dict[str, Any]) -> None:
        super()._restore_sink({**sink, "dlog": {}, "time": 0})


class SinkDedupPerKey(CausalInstance):
    """A sink de-duplicates by per-key counts from its last local snapshot, as before spec
    S1: a replacement's parents resend from the snapshot, and the first records of a key
    to arrive again are taken for the ones already visible (spec E4). Only the join
    topologies send one key with different values to a multiset sink on several
    channels."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.identity = _key_only

    def _restore_sink(self, sink: dict[str, Any]) -> None:
        sink = {**sink, "epoch": None}  # only the visible counts: no positions, no diffs
        super()._restore_sink(sink)


def _key_only(k: Any, v: Any) -> Any:
    return k


class DiffLogTrimmedEarly(CausalInstance):
    """A child trims its diff log about a parent five of the parent's times past the
    parent's snapshot (spec T3, row 10): a replacement's plan misses events (R7)."""

    def control(self, msg: Msg) -> None:
        if isinstance(msg, TrimDiffLog):
            msg = dataclasses.replace(msg, upto=msg.upto + 5)
        super().control(msg)


class ResumeWithoutWatermark(CausalInstance):
    """A RESUME marker carries no watermark: a map restarted from T* in a topology with
    event time forwards a lower watermark than its predecessor did at the same times."""

    def _wm_before(self, ch: int, start: int) -> int | None:
        return None


class ResumeWatermarkOneLate(CausalInstance):
    """A RESUME marker carries the watermark of the first batch it resends instead of the
    one before it: a map restarted from T* forwards a watermark too early."""

    def _wm_before(self, ch: int, start: int) -> int | None:
        return super()._wm_before(ch, start + 1)


class FallbackForgetsSinks(CausalCoordinator):
    """The whole-graph fallback restarts sinks without their visible counts."""

    def _fallback(self, failed: set[str], view: ClusterView,
                  cause: dict[str, Any]) -> list[CoordinatorAction]:
        acts = super()._fallback(failed, view, cause)
        return [Restart(a.instance, init=a.init) if isinstance(a, Restart) else a
                for a in acts]


class SilentEvents(CausalInstance):
    """An event that sends nothing stays silent (spec N5 off): no child logs its diff."""

    def _no_silent_event(self, since: int, force: bool = False) -> None:
        return


class QuietWithoutCarry(CausalInstance):
    """A quiet instance's silent events stay silent (rule N6 without its carry): the
    diffs of the events it sent a channel nothing for never reach that child."""

    def stamp(self, ch: int, batch: Batch) -> None:
        if ch in self.carry:
            self.carry[ch] = []
        super().stamp(ch, batch)


class ClocksOneLevel(CausalInstance):
    """depth ignored: diffs keep one level (the sender), so a failed member's causes are
    read nowhere below a restarted child."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.depth = 1


class RecoveringNeighbourKept(CausalCoordinator):
    """A neighbour still recovering is left out of a new failure's component (spec M1): it
    keeps replaying while the instance it depends on restarts under it."""

    def components(self, failed: set[str]) -> list[set[str]]:
        recovering, replaying = self.recovering, self.replaying
        self.recovering, self.replaying = {}, set()
        try:
            return super().components(failed)
        finally:
            self.recovering, self.replaying = recovering, replaying


class ExposureForgotten(CausalCoordinator):
    """A stateless replacement started from T* is not kept adjacent to its parents (spec
    T3): a parent that fails before its g covers T*[A] restarts alone, and its events up
    to T*[A], whose diffs went with the replacement's predecessor, are read nowhere."""

    def _expose(self, b: str, plan: RecoveryPlan) -> None:
        return


MUTANTS: tuple[Mutant, ...] = (
    Mutant("resume-late", ResumeLate.__doc__ or "", coordinator=ResumeLate, budget=10),
    Mutant("resume-early", ResumeEarly.__doc__ or "", coordinator=ResumeEarly, budget=10),
    Mutant("parents-resume-early", _line(ParentsResumeEarly),
           coordinator=ParentsResumeEarly, budget=10),
    Mutant("replay-reversed", ReplayReversed.__doc__ or "", coordinator=ReplayReversed,
           budget=10),
    Mutant("no-replay", NoReplay.__doc__ or "", coordinator=NoReplay, budget=10),
    Mutant("parents-resume-late", ParentsResumeLate.__doc__ or "",
           coordinator=ParentsResumeLate, budget=10),
    Mutant("t-min-max", _line(TMinMax), coordinator=TMinMax, budget=10),
    Mutant("tstar-from-parents", _line(TStarFromParents), coordinator=TStarFromParents,
           budget=10),
    Mutant("answer-drops-newest", AnswerDropsNewest.__doc__ or "",
           instance=AnswerDropsNewest, budget=10),
    Mutant("payload-trimmed-early", PayloadTrimmedEarly.__doc__ or "",
           instance=PayloadTrimmedEarly, budget=10),
    Mutant("snapshot-without-payload-log", SnapshotWithoutPayloadLog.__doc__ or "",
           instance=SnapshotWithoutPayloadLog, budget=10),
    Mutant("no-sink-counts", NoSinkCounts.__doc__ or "", instance=NoSinkCounts, budget=10),
    Mutant("sink-vector-without-clock", _line(SinkVectorWithoutClock),
           instance=SinkVectorWithoutClock, budget=10),
    Mutant("fallback-forgets-sinks", FallbackForgetsSinks.__doc__ or "",
           coordinator=FallbackForgetsSinks, budget=10),
    Mutant("silent-events", SilentEvents.__doc__ or "", instance=SilentEvents, budget=10),
    Mutant("quiet-without-carry", _line(QuietWithoutCarry), instance=QuietWithoutCarry,
           budget=30),
    Mutant("clocks-one-level", _line(ClocksOneLevel), instance=ClocksOneLevel, budget=10),
    Mutant("recovering-neighbour-kept", _line(RecoveringNeighbourKept),
           coordinator=RecoveringNeighbourKept, budget=10),
    Mutant("sink-dedup-per-key", _line(SinkDedupPerKey), instance=SinkDedupPerKey,
           budget=10),
    Mutant("diff-log-trimmed-early", _line(DiffLogTrimmedEarly),
           instance=DiffLogTrimmedEarly, budget=10),
    Mutant("resume-without-watermark", _line(ResumeWithoutWatermark),
           instance=ResumeWithoutWatermark, budget=10),
    Mutant("resume-watermark-one-late", _line(ResumeWatermarkOneLate),
           instance=ResumeWatermarkOneLate, budget=10),
    Mutant("exposure-forgotten", _line(ExposureForgotten), coordinator=ExposureForgotten,
           budget=30),
)
