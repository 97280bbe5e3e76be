"""``CausalCoordinator``: local recovery of failed components within f, a whole-graph
fallback beyond (see the package docstring)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from protocols.causal.instance import SINK_SLOT
from protocols.causal.messages import (
    Answer,
    CausalInit,
    LocalSnapshot,
    Plan,
    Query,
    Replayed,
    Restored,
    TrimDiffLog,
)
from protocols.causal.params import CausalParams
from protocols.causal.recovery import RecoveryPlan, longest_failed_path, plan_recovery
from protocols.contract.actions import Control, CoordinatorAction, Note, Restart, Stop
from protocols.contract.events import FailureDetected, ReportIn
from protocols.contract.logic import CoordinatorLogic
from protocols.contract.messages import Ended
from protocols.contract.names import InstanceId
from protocols.contract.view import ClusterView, GraphView
from protocols.shared.logged import SLOT, Resend, TrimPayloadLog
from protocols.shared.treeclock import TreeClock


@dataclass
class _Recovery:
    rid: int
    waiting: set[tuple[str, tuple[str, ...]]]  # (instance asked, path it reads along)
    answers: list[Answer] = field(default_factory=list)
    restore: TreeClock | None = None  # the replacement's restore clock R, once reported


class CausalCoordinator(CoordinatorLogic[CausalParams]):
    def __init__(self, graph: GraphView, params: CausalParams):
        super().__init__(graph, params)
        self.epoch = 0
        self.rid = 0
        self.recovering: dict[str, _Recovery] = {}
        self.replaying: set[str] = set()

    def initial(self, view: ClusterView) -> list[CoordinatorAction]:
        return [Restart(i, init=self._init(i)) for i in self.graph.order]

    def _init(self, iid: str, recover: bool = False) -> CausalInit:
        # One channel per (parent, child) pair in these graphs, so a parent's id (what a
        # diff records) names the input channel.
        chans = self.graph.channels
        parents = {chans[c].src: c for c in self.graph.inputs(iid)}
        return CausalInit(self.epoch, recover, parents)

    # ------------------------------------------------------------ reports

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        chans = self.graph.channels
        instance, msg = ev.instance, ev.msg
        if isinstance(msg, Restored):
            rec = self.recovering.get(instance)
            if rec is None or rec.restore is not None:
                return []
            rec.restore = msg.clock
            return self._plan_if_ready(instance, rec)
        if isinstance(msg, LocalSnapshot):
            acts: list[CoordinatorAction] = [
                Control(InstanceId(chans[ch].src), TrimPayloadLog(ch, p))
                for ch, p in msg.ptime.items()]
            acts += [Control(InstanceId(chans[ch].dst), TrimDiffLog(ch, msg.time, instance))
                     for ch in self.graph.out_channels(instance)]
            return acts
        if isinstance(msg, Answer):
            return self._on_answer(instance, msg)
        if isinstance(msg, Replayed):
            self.replaying.discard(instance)
            return []
        if isinstance(msg, Ended):
            # A replacement waits for its parents' resend, end of stream included: no
            # input is ever ended for it by the coordinator.
            self.ended.add(instance)
        return []

    def _on_answer(self, child: str, answer: Answer) -> list[CoordinatorAction]:
        rec = self.recovering.get(answer.about)
        key = (child, tuple(answer.via))
        if rec is None or rec.rid != answer.rid or key not in rec.waiting:
            return []
        rec.waiting.discard(key)
        rec.answers.append(answer)
        return self._plan_if_ready(answer.about, rec)

    def _plan_if_ready(self, b: str, rec: _Recovery) -> list[CoordinatorAction]:
        if rec.waiting or rec.restore is None:
            return []
        del self.recovering[b]
        self.replaying.add(b)
        chans = self.graph.channels
        direct = [a for a in rec.answers if len(a.via) == 1]
        plan = plan_recovery(b, {chans[a.channel].dst: a.clock for a in direct},
                             (n for a in rec.answers for n in a.trees),
                             self.graph.upstream(b), restore=rec.restore, after=0)
        # Spec R5: B' sends to each child from 1 + its level-1 entry for B.
        resume = {a.channel: plan.children[chans[a.channel].dst] for a in direct}
        upto = max(plan.t.values(), default=0)
        resends = self._resends(b, plan)
        return [Control(InstanceId(b), Plan(plan.replay, resume, plan.tstar, upto)),
                *resends,
                Note("causal-replay", {"instance": b, "s": rec.restore.time,
                                       "t": plan.t, "t_min": plan.t_min,
                                       "tstar": plan.tstar.to_plain(),
                                       "replay": len(plan.replay),
                                       "resume": {str(k): v for k, v in resume.items()},
                                       "children": plan.children,
                                       "parents": {str(c.msg.channel): c.msg.start
                                                   for c in resends
                                                   if isinstance(c.msg, Resend)}})]

    def _resends(self, b: str, plan: RecoveryPlan) -> list[Control]:
        """Spec R4: each parent A resends to B' from 1 + R[A]. A parent restarting in the
        same component gets none (M4): its replacement resumes to B' at 1 + B's answer,
        the same entry of R, and its regenerated output is the resend."""
        chans = self.graph.channels
        busy = set(self.recovering) | self.replaying
        return [Control(InstanceId(a), Resend(ch, plan.parents[a]))
                for ch in self.graph.inputs(b)
                if (a := chans[ch].src) not in busy]

    # ------------------------------------------------------------ failures

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed: set[str] = set(ev.instances)
        if self.finished(view):
            return [Note("ignored", {"failed": sorted(failed), "reason": "run finished"})]
        f = self.params.depth
        if self.params.clocks == "off":
            return self._fallback(failed, {"reason": "no-clocks", "f": f})
        comps = self.components(failed)
        lengths = [longest_failed_path(c, self.graph.downstream) for c in comps]
        beyond = [(n, sorted(c)) for n, c in zip(lengths, comps, strict=True) if n > f]
        if beyond:
            n, comp = max(beyond)
            return self._fallback(failed, {"reason": "beyond-f", "component": comp,
                                           "L": n, "f": f})
        members = sorted(set().union(*comps))
        acts: list[CoordinatorAction] = [Stop(tuple(InstanceId(m) for m in members))]
        acts += [Note("causal-recover", {"members": sorted(c), "failed": sorted(c & failed),
                                         "L": n, "f": f})
                 for n, c in zip(lengths, comps, strict=True)]
        recs: dict[str, _Recovery] = {}
        for b in members:
            self.ended.discard(InstanceId(b))
            self.replaying.discard(b)
            self.rid += 1
            recs[b] = self.recovering[b] = _Recovery(self.rid, set(self._queries(b, members)))
            acts.append(Restart(InstanceId(b), restore=SLOT, init=self._init(b, recover=True),
                                extra=self._sink_slot(b)))
        for b in members:  # every replacement is up before any is asked
            acts += [Control(InstanceId(x), Query(b, via, recs[b].rid))
                     for x, via in sorted(recs[b].waiting)]
        for b in members:
            acts += self._plan_if_ready(b, recs[b])
        return acts

    def components(self, failed: set[str]) -> list[set[str]]:
        """Spec M1: the connected sets of failed or still recovering instances that hold a
        newly failed one (a recovering neighbour is restarted again with it)."""
        nodes = set(failed) | set(self.recovering) | self.replaying
        seen: set[str] = set()
        comps = []
        for start in sorted(failed):
            if start in seen:
                continue
            comp, todo = {start}, [start]
            while todo:
                n = todo.pop()
                for m in (*self.graph.upstream(n), *self.graph.downstream(n)):
                    if m in nodes and m not in comp:
                        comp.add(m)
                        todo.append(m)
            seen |= comp
            comps.append(comp)
        return comps

    def _queries(self, b: str, members: Collection[str]) -> list[tuple[str, tuple[str, ...]]]:
        """Whom to ask about B, and along which path (spec M3): B's children, and every
        instance reached from B through restarting instances only, at most f hops down,
        where B sits at level k of the diffs and its cause at level k + 1 <= f + 1."""
        out: list[tuple[str, tuple[str, ...]]] = []
        todo: list[tuple[str, tuple[str, ...]]] = [(c, (b,)) for c in self.graph.downstream(b)]
        while todo:
            x, via = todo.pop()
            out.append((x, via))
            if x in members and len(via) < self.params.depth:
                todo += [(y, (x, *via)) for y in self.graph.downstream(x)]
        return out

    def _fallback(self, failed: set[str], cause: dict[str, Any]) -> list[CoordinatorAction]:
        self.epoch += 1
        self.recovering.clear()
        self.replaying.clear()
        self.ended.clear()
        order = self.graph.order
        acts: list[CoordinatorAction] = [
            Stop(order),
            Note("causal-fallback", {"failed": sorted(failed), "epoch": self.epoch,
                                     **cause}),
        ]
        acts += [Restart(iid, restore=SLOT if self.graph.is_sink(iid) else None,
                         init=self._init(iid), extra=self._sink_slot(iid))
                 for iid in order]
        return acts

    def _sink_slot(self, iid: str) -> tuple[int, ...]:
        return (SINK_SLOT,) if self.graph.is_sink(iid) else ()
