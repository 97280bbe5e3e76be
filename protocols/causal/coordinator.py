"""``CausalCoordinator``: local recovery of failed components within f, a whole-graph
fallback beyond (see the package docstring)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protocols.causal.instance import restarts_from_tstar, sink_refs
from protocols.causal.messages import (
    Answer,
    CausalInit,
    Covered,
    Durable,
    FoldDiffLog,
    LocalSnapshot,
    Plan,
    Query,
    Replayed,
    ResendTo,
    Restored,
    TrimDiffLog,
)
from protocols.causal.params import CausalParams
from protocols.causal.recovery import RecoveryPlan, longest_failed_path, plan_recovery
from protocols.contract.actions import (
    REPLAYING,
    SNAPSHOTTING,
    Control,
    CoordinatorAction,
    DeclarePhase,
    Note,
    Restart,
    Stop,
)
from protocols.contract.events import FailureDetected, ReportIn
from protocols.contract.logic import CoordinatorLogic
from protocols.contract.messages import Ended
from protocols.contract.names import ChannelId, InstanceId
from protocols.contract.view import ClusterView, GraphView
from protocols.shared.logged import SLOT, Resend, TrimPayloadLog
from protocols.shared.treeclock import Plain, TreeClock, plain_child

# A stateless instance's children fold their diff logs about it once its g has moved
# this many snapshot intervals (``snapshot_every``) since the last fold (``_fold``).
FOLD_EVERY = 10


@dataclass
class _Recovery:
    rid: int
    waiting: set[tuple[str, tuple[str, ...]]]  # (instance asked, path it reads along)
    answers: list[Answer] = field(default_factory=list)
    restore: TreeClock | None = None  # the replacement's restore clock R, once reported
    restored: bool = False  # reported; a stateless one reports no clock: R is T* (R3)


class CausalCoordinator(CoordinatorLogic[CausalParams]):
    def __init__(self, graph: GraphView, params: CausalParams):
        super().__init__(graph, params)
        self.epoch = 0
        self.rid = 0
        self.recovering: dict[str, _Recovery] = {}
        self.replaying: set[str] = set()
        # T* of each stateless replacement once planned: its clock until it runs (R3),
        # what a failed parent's plan reads as its answer (M2).
        self.tstars: dict[str, TreeClock] = {}
        # Per channel, the sender time its receiver's durable restore clock holds (its
        # newest local snapshot's level-1 entry): the lowest a recovery may resend from.
        self.durable: dict[int, int] = {}
        self.g: dict[str, int] = {}  # the last g sent to each stateless instance
        # Each stateful instance's newest local snapshot time: its g (spec T3).
        self.snapped: dict[str, int] = {}
        # The g each stateless instance's children last folded their diff logs at.
        self.folded: dict[str, int] = {}
        # Per replacement, the instances restarted with it (spec M4: a parent among them
        # gets no resend control; its replacement's own resume to B' is the resend).
        self.peers: dict[str, frozenset[str]] = {}
        # Each instance's incarnation (the recovery that restarted it; 0 from the start or
        # a fallback): resends and resumes name the one they are for.
        self.incarnation: dict[str, int] = {}
        # Per stateless replacement started from T*, the parents whose g is still below
        # T*[A], with that T*[A]. Its predecessor's diff-log entries about A up to T*[A]
        # are gone while a recovery of A could still need those above g(A) (spec T3), so
        # until g(A) reaches T*[A] a failure of A is adjacent to it: its recovery is not
        # over (f counts failures during recovery) and the two restart as one component.
        self.exposed: dict[str, dict[str, int]] = {}

    def initial(self, view: ClusterView) -> list[CoordinatorAction]:
        return [Restart(i, init=self._init(i)) for i in self.graph.order]

    def _init(self, iid: str, recover: bool = False) -> CausalInit:
        # One channel per (parent, child) pair in these graphs, so a parent's id (what a
        # diff records) names the input channel.
        chans = self.graph.channels
        parents = {chans[c].src: c for c in self.graph.inputs(iid)}
        return CausalInit(self.epoch, recover, parents, self.incarnation.get(iid, 0))

    # ------------------------------------------------------------ reports

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        chans = self.graph.channels
        instance, msg = ev.instance, ev.msg
        if isinstance(msg, Restored):
            rec = self.recovering.get(instance)
            if rec is None or rec.restored:
                return []
            rec.restore, rec.restored = msg.clock, True
            return self._plan_ready(instance, rec)
        if isinstance(msg, Covered):
            acts = self._durable(msg.ptime)
            self._unexpose()
            return acts
        if isinstance(msg, LocalSnapshot):
            self.snapped[instance] = max(self.snapped.get(instance, 0), msg.time)
            acts = [DeclarePhase(SNAPSHOTTING, False, msg.time, holder=instance),
                    *self._durable(msg.ptime)]
            acts += [Control(InstanceId(chans[ch].dst), TrimDiffLog(ch, msg.time, instance))
                     for ch in self.graph.out_channels(instance)]
            self._unexpose()
            return acts
        if isinstance(msg, Answer):
            return self._on_answer(instance, msg)
        if isinstance(msg, Replayed):
            if instance not in self.replaying:
                return []
            self.replaying.discard(instance)
            return [DeclarePhase(REPLAYING, False, holder=instance)]
        if isinstance(msg, Ended):
            # A replacement waits for its parents' resend, end of stream included: no
            # input is ever ended for it by the coordinator.
            self.ended.add(instance)
        return []

    def g_of(self, a: str) -> int:
        """g(A) (spec T3): the lowest A-time any recovery could restart A from."""
        return self.g.get(a, 0) if self.stateless(a) else self.snapped.get(a, 0)

    def _expose(self, b: str, plan: RecoveryPlan) -> None:
        """Record the parents of stateless B' whose g is below T*[A] (see ``exposed``). A
        source regenerates its events without reading its children's logs."""
        need = {a: start - 1 for a, start in plan.parents.items()
                if self.graph.inputs(a) and self.g_of(a) < start - 1}
        if need:
            self.exposed[b] = need
        else:
            self.exposed.pop(b, None)

    def _unexpose(self) -> None:
        """Drop the exposures a moved g now covers."""
        for c in list(self.exposed):
            left = {a: t for a, t in self.exposed[c].items() if self.g_of(a) < t}
            if left:
                self.exposed[c] = left
            else:
                del self.exposed[c]

    def _durable(self, ptime: Mapping[ChannelId, int]) -> list[CoordinatorAction]:
        """A receiver's durable restore clock moved to ``ptime`` (per input channel): its
        parents trim their payload logs to it (spec T2), and a stateless parent learns
        its new g, the lowest time any recovery restarts it from (T3)."""
        chans = self.graph.channels
        durable = self.durable
        for ch, p in ptime.items():
            # Monotone: a restore clock only moves forward (a replacement restores the
            # newest snapshot, or starts from a T* at or past g), so a report that
            # arrives late never lowers it.
            durable[ch] = max(durable.get(ch, 0), p)
        acts: list[CoordinatorAction] = [
            Control(InstanceId(chans[ch].src), TrimPayloadLog(ch, p)) for ch, p in ptime.items()]
        for a in sorted({chans[ch].src for ch in ptime}):  # a deterministic trace
            if self.stateless(a):
                g = min(self.durable.get(c, 0) for c in self.graph.out_channels(a))
                if g > self.g.get(a, 0):
                    self.g[a] = g
                    acts.append(Control(InstanceId(a), Durable(g)))
                    acts += self._fold(a, g)
        return acts

    def _fold(self, a: str, g: int) -> list[CoordinatorAction]:
        """FoldDiffLog to a stateless ``a``'s children once its g has moved FOLD_EVERY
        snapshot intervals since their last fold (spec T3).

        A fold is only an economy: an entry left unfolded is merged by T* all the same.
        Sent at every move of g (about every ``snapshot_every`` events of ``a``), the
        folds added half again to the controls a sharder child handles; on Spark that
        cost nothing on an idle machine but nearly doubled a run with one core busy
        (paired figures in docs/protocols.md). The gap keeps the diff logs bounded."""
        if g < self.folded.get(a, 0) + FOLD_EVERY * self.params.snapshot_every:
            return []
        self.folded[a] = g
        gs = {**self.snapped, **self.g}
        chans = self.graph.channels
        return [Control(InstanceId(chans[ch].dst), FoldDiffLog(ch, gs))
                for ch in self.graph.out_channels(a)]

    def _on_answer(self, child: str, answer: Answer) -> list[CoordinatorAction]:
        rec = self.recovering.get(answer.about)
        key = (child, tuple(answer.via))
        if rec is None or rec.rid != answer.rid or key not in rec.waiting:
            return []
        rec.waiting.discard(key)
        rec.answers.append(answer)
        return self._plan_ready(answer.about, rec)

    def _plan_ready(self, b: str, rec: _Recovery) -> list[CoordinatorAction]:
        """B's plan if it can be made, then those of failed parents that waited for it
        (M2: a failed stateless child's restore clock is its T*)."""
        if self.recovering.get(b) is not rec:
            return []  # planned already
        acts = self._plan_if_ready(b, rec)
        if acts:
            for p in self.graph.upstream(b):
                if (r := self.recovering.get(p)) is not None:
                    acts += self._plan_ready(p, r)
        return acts

    def _plan_if_ready(self, b: str, rec: _Recovery) -> list[CoordinatorAction]:
        if rec.waiting or not rec.restored:
            return []
        # Spec M2, children first: a failed stateless child's restore clock is its T*,
        # known once its own plan is made.
        if any(c in self.recovering and self.stateless(c) for c in self.graph.downstream(b)):
            return []
        del self.recovering[b]
        self.replaying.add(b)
        chans = self.graph.channels
        direct = [a for a in rec.answers if len(a.via) == 1]
        clocks: dict[str, TreeClock] = {}
        trees = [n for a in rec.answers for n in a.trees]
        bases: list[Plain] = []
        for a in direct:
            c = chans[a.channel].dst
            clocks[c] = a.clock
            if c in self.tstars:
                clocks[c] = a.clock.copy()
                clocks[c].apply(self.tstars[c])
                sub = plain_child(self.tstars[c].to_plain(), b)
                if sub is not None:
                    bases.append(sub)
        floor = ({chans[ch].dst: self.durable.get(ch, 0) for ch in self.graph.out_channels(b)}
                 if rec.restore is None else None)
        plan = self.plan_of(b, clocks, trees, self.graph.upstream(b), rec.restore, floor,
                            bases)
        if rec.restore is None:
            self.tstars[b] = plan.tstar
            self._expose(b, plan)
            # Spec M2: B' asks each parent from 1 + T*[A], its restore clock from now on;
            # a parent planned later in this component floors its t_min there.
            for ch in self.graph.inputs(b):
                src = chans[ch].src
                self.durable[ch] = max(self.durable.get(ch, 0), plan.parents[src] - 1)
        rclock = rec.restore if rec.restore is not None else plan.tstar
        # Spec R5: B' sends to each child from 1 + its level-1 entry for B.
        resume = {a.channel: plan.children[chans[a.channel].dst] for a in direct}
        upto = max(plan.t.values(), default=0)
        resends = self._resends(b, plan)
        to = {ch: self.incarnation.get(chans[ch].dst, 0) for ch in resume}
        pos = {a.channel: a.pos for a in direct}
        # B' replays from its plan until it reports Replayed (spec R8).
        return [DeclarePhase(REPLAYING, True, holder=InstanceId(b)),
                Control(InstanceId(b), Plan(plan.replay, resume, plan.tstar, upto, to, pos)),
                *resends,
                Note("causal-replay", {"instance": b, "s": rclock.time,
                                       "stateless": rec.restore is None,
                                       "t": plan.t, "floor": floor,
                                       "t_min": plan.t_min,
                                       "tstar": plan.tstar.to_plain(),
                                       "replay": len(plan.replay),
                                       "resume": {str(k): v for k, v in resume.items()},
                                       "children": plan.children,
                                       "parents": {str(c.msg.channel): c.msg.start
                                                   for c in resends
                                                   if isinstance(c.msg, Resend)}})]

    @staticmethod
    def plan_of(b: str, clocks: Mapping[str, TreeClock], trees: list[Plain],
                parents: Iterable[str], restore: TreeClock | None,
                floor: Mapping[str, int] | None, bases: list[Plain]) -> RecoveryPlan:
        """B's plan from its children's answers (spec R1-R6): ``plan_recovery``, every
        observed event replayed (B' skips those at or below its restored time)."""
        return plan_recovery(b, clocks, trees, parents, restore=restore, after=0,
                             floor=floor, bases=bases)

    def _resends(self, b: str, plan: RecoveryPlan) -> list[Control]:
        """Spec R4: each parent A resends to B' from 1 + R[A]. A parent restarting in the
        same component gets none (M4): its replacement resumes to B' at 1 + B's answer,
        the same entry of R, and its regenerated output is the resend."""
        chans = self.graph.channels
        # A peer done replaying before B's plan is made (B stateful: it waits for no
        # parent) still resumed itself to B' at 1 + B's answer: no second resend.
        busy = set(self.recovering) | self.replaying | self.peers.get(b, frozenset())
        to = self.incarnation.get(b, 0)
        return [Control(InstanceId(a), ResendTo(ch, plan.parents[a], to))
                for ch in self.graph.inputs(b)
                if (a := chans[ch].src) not in busy]

    # ------------------------------------------------------------ failures

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed: set[str] = set(ev.instances)
        if self.finished(view):
            return [Note("ignored", {"failed": sorted(failed), "reason": "run finished"})]
        f = self.params.depth
        if self.params.clocks == "off":
            return self._fallback(failed, view, {"reason": "no-clocks", "f": f})
        comps = self.components(failed)
        lengths = [longest_failed_path(c, self.graph.downstream) for c in comps]
        beyond = [(n, sorted(c)) for n, c in zip(lengths, comps, strict=True) if n > f]
        if beyond:
            n, comp = max(beyond)
            return self._fallback(failed, view, {"reason": "beyond-f", "component": comp,
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
            self.exposed.pop(b, None)
            self.tstars.pop(b, None)
            self.peers[b] = frozenset(members)
            self.rid += 1
            recs[b] = self.recovering[b] = _Recovery(self.rid, set(self._queries(b, members)))
            self.incarnation[b] = self.rid
            acts.append(Restart(InstanceId(b), restore=self._slot(b, view),
                                init=self._init(b, recover=True),
                                extra=self._sink_chain(b)))
        for b in members:  # every replacement is up before any is asked
            acts += [Control(InstanceId(x), Query(b, via, recs[b].rid))
                     for x, via in sorted(recs[b].waiting)]
        for b in members:
            acts += self._plan_ready(b, recs[b])
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
                    if (m in nodes or n in self.exposed.get(m, ())) and m not in comp:
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

    def _fallback(self, failed: set[str], view: ClusterView,
                  cause: dict[str, Any]) -> list[CoordinatorAction]:
        self.epoch += 1
        self.recovering.clear()
        self.replaying.clear()
        self.tstars.clear()
        self.durable.clear()
        self.g.clear()
        self.snapped.clear()
        self.folded.clear()
        self.peers.clear()
        self.incarnation.clear()
        self.exposed.clear()
        self.ended.clear()
        order = self.graph.order
        acts: list[CoordinatorAction] = [
            Stop(order),
            Note("causal-fallback", {"failed": sorted(failed), "epoch": self.epoch,
                                     **cause}),
        ]
        acts += [Restart(iid, restore=self._slot(iid, view) if self.graph.is_sink(iid) else None,
                         init=self._init(iid), extra=self._sink_chain(iid))
                 for iid in order]
        return acts

    def stateless(self, iid: str) -> bool:
        """An operator without state persists nothing and restores nothing (spec R3)."""
        return restarts_from_tstar(self.graph.execution.instances[iid].kind)

    def _slot(self, iid: str, view: ClusterView) -> int | None:
        """What ``iid``'s replacement restores: nothing when it has no state (spec R3) or
        never stored its slot. A task that died before it first ran never wrote the
        snapshot its start takes; its replacement starts from nothing, reports a zero
        restore clock and its parents resend from their first batch. Nothing was trimmed
        for it (trims follow its snapshots) and, as a sink, it made nothing visible."""
        if self.stateless(iid) or SLOT not in view.stored(InstanceId(iid)):
            return None
        return SLOT

    def _sink_chain(self, iid: str) -> tuple[int, ...]:
        return (sink_refs(self.params, len(self.graph.inputs(iid)))
                if self.graph.is_sink(iid) else ())
