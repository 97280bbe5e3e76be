"""The coordinator of ``progressive`` (paper 004, §4-§5; spec R3, R7-R15, R19-R20).

Normal operation: punctuation checkpoints complete when every instance persisted its part;
sources then trim their buffers. A failure starts an *episode*: everyone alive rolls back
(live, by control) to the latest complete checkpoint ``k`` with a new generation, in
progressive mode when the burst detector fires, blocking otherwise; the failed instances
become pending. As capacity comes and goes, the planner of the run's schedule decides
which pending instances start (from ``k``); a further failure in progressive mode restores
only the newly failed, a further failure in blocking mode rolls everyone back again. When
nothing is pending or starting, the next complete checkpoint ends the episode (``Normal``).

Free slots are the capacity view's free slots minus starts not yet placed; a host without
a capacity view (no nodes) has room for every pending instance.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols.contract.actions import (
    PLANNING,
    RECOVERING,
    SNAPSHOTTING,
    Control,
    CoordinatorAction,
    DeclarePhase,
    DiscardSnapshots,
    Note,
    Restart,
    Stop,
)
from protocols.contract.events import (
    CapacityChanged,
    FailureDetected,
    InstanceRunning,
    ReportIn,
)
from protocols.contract.logic import CoordinatorLogic
from protocols.contract.messages import Ended, Persisted
from protocols.contract.names import InstanceId
from protocols.contract.view import ClusterView, GraphView
from protocols.progressive.buffers import Checkpoints
from protocols.progressive.burst import BurstDetector, Mode, next_mode
from protocols.progressive.messages import (
    FINAL,
    SINK_COUNTS,
    SINK_DELTAS,
    Checkpointed,
    Finished,
    Init,
    Normal,
    Ready,
    Recover,
    Resend,
    Trim,
)
from protocols.progressive.params import ProgressiveParams
from protocols.progressive.schedule import (
    Blocking,
    Planner,
    ProfitDensity,
    Query,
    Topological,
)


class ProgressiveCoordinator(CoordinatorLogic[ProgressiveParams]):
    def __init__(self, graph: GraphView, params: ProgressiveParams):
        super().__init__(graph, params)
        self.queries = self.make_queries(graph, params)
        self.planner = self.make_planner(params)
        self.cps = Checkpoints(frozenset(graph.order))
        self.detector = BurstDetector(params.burst_window, params.burst_threshold)
        self.mode = Mode.NORMAL
        self.gen = 0
        self.k = 0  # the episode's restore point
        # The last punctuation a partition that failed during this episode had sent: its
        # downstream may hold its output up to the next one, so the episode may end only
        # at a later checkpoint (R20).
        self.horizon = 0
        self.began = 0.0
        self.pending: list[InstanceId] = []  # failed, not started; execution order
        self.starting: set[InstanceId] = set()  # started, not ready yet
        self.failed_queries: set[str] = set()
        self.planned = 0  # plans made in this episode
        # Episodes begun (the key of their ``recovering``) and whether ``planning`` (failed
        # instances wait for the planner) is open.
        self.episodes = 0
        self.planning = False

    # ------------------------------------------------------------ construction

    @staticmethod
    def make_queries(graph: GraphView, params: ProgressiveParams) -> list[Query]:
        """Every sink's query in declaration order, priorities from the topology's
        ``queries`` list, overridden by the ``priorities`` param."""
        from ftctl.runtime.queries import topology_queries

        return [Query(q.name, q.operators, params.priorities.get(q.name, q.priority))
                for q in topology_queries(graph.execution.topology)]

    def make_planner(self, params: ProgressiveParams) -> Planner:
        if params.schedule == "topological":
            return Topological()
        if params.schedule == "blocking":
            return Blocking()
        return ProfitDensity(fit=params.fit, leftover=params.leftover,
                             sizes=self._sizes())

    def _sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for i in self.graph.order:
            op = self.graph.operator_of(i)
            sizes[op] = sizes.get(op, 0) + 1
        return sizes

    # ------------------------------------------------------------ reports

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        msg = ev.msg
        if isinstance(msg, Persisted):
            taken: list[CoordinatorAction] = [
                DeclarePhase(SNAPSHOTTING, False, msg.snapshot, holder=ev.instance)]
            if self.stale(msg):
                return taken
            return taken + self.on_persisted(ev.instance, msg.snapshot, view)
        if isinstance(msg, Ready):
            return self.on_ready(ev.instance, msg, view)
        if isinstance(msg, Ended):
            if isinstance(msg, Finished) and msg.gen < self.gen:
                return []  # ended before a rollback that sent it back to P_k
            # No InputEnded controls: a replacement gets the end-of-stream marker in its
            # upstream's buffer, in order after the batches before it; a control could
            # overtake those batches.
            self.ended.add(ev.instance)
            return []
        return super().on_report(ev, view)

    def stale(self, msg: Persisted) -> bool:
        """Sent before the instance took the latest rollback: the snapshot it reports was
        discarded with the older generation, so it must not complete a checkpoint of this
        one (a checkpoint counted so would be restored from and not be there)."""
        return isinstance(msg, Checkpointed) and msg.gen < self.gen

    def on_persisted(self, i: InstanceId, k: int, view: ClusterView) -> list[CoordinatorAction]:
        if not self.cps.persisted(i, k):
            return []
        acts: list[CoordinatorAction] = [Note("snapshot-complete", {"snapshot": k})]
        if self.mode is Mode.NORMAL:
            acts += [Control(s, Trim(k)) for s in self.graph.sources]
        elif self.recovered() and self.may_end(k):
            acts += self.end_episode(k, view)
        return acts

    def recovered(self) -> bool:
        """Nothing pending or starting: the episode may end at the next checkpoint (R20)."""
        return not self.pending and not self.starting

    def may_end(self, m: int) -> bool:
        """R20: ``cp(P_m)`` ends the episode only if it is new to every partition restored
        in it. A partition that failed after sending ``P_h`` (h > k) had downstream
        neighbours accept its output up to ``P_{h+1}``; its replacement reproduces that
        output number for number only while order preservation is on, so ``Normal`` before
        it sent ``P_{h+1}`` would renumber the rest and the neighbours would drop it as
        duplicates (§4: the new checkpoint means the failure is completely recovered)."""
        return m > self.k and (m > self.horizon or m == FINAL)

    def end_episode(self, m: int, view: ClusterView) -> list[CoordinatorAction]:
        note = Note("recovery-complete", {"k": self.k, "m": m, "mode": str(self.mode),
                                          "seconds": round(view.now - self.began, 6)})
        self.mode = Mode.NORMAL
        return [*(Control(i, Normal(m)) for i in self.graph.order), note,
                DeclarePhase(RECOVERING, False, self.episodes)]

    def on_ready(self, i: InstanceId, msg: Ready, view: ClusterView) -> list[CoordinatorAction]:
        """R15: started upstreams resend what the replacement wants; R19: a query whose
        last pending instance is ready is recovered."""
        if i not in self.starting:
            return []
        self.starting.discard(i)
        acts: list[CoordinatorAction] = []
        for ch, start in msg.resume:
            up = InstanceId(self.graph.channels[ch].src)
            # A starting upstream may already run (its Ready still on the way) and have
            # sent to this one before it was up: it resends from its buffer too.
            if up not in self.pending:
                acts.append(Control(up, Resend(ch, start)))
        acts += self.query_events(view)
        if self.recovered() and self.may_end(self.cps.complete) and self.mode is not Mode.NORMAL:
            acts += self.end_episode(self.cps.complete, view)
        return acts

    def query_events(self, view: ClusterView) -> list[CoordinatorAction]:
        """``query-failed`` / ``query-recovered`` for queries whose state changed."""
        down = {self.graph.operator_of(i) for i in (*self.pending, *self.starting)}
        acts: list[CoordinatorAction] = []
        for q in self.queries:
            failed = bool(q.operators & down)
            if failed and q.name not in self.failed_queries:
                self.failed_queries.add(q.name)
                acts.append(Note("query-failed", {"query": q.name, "t": view.now}))
            elif not failed and q.name in self.failed_queries:
                self.failed_queries.discard(q.name)
                acts.append(Note("query-recovered", {"query": q.name, "t": view.now}))
        return acts

    # ------------------------------------------------------------ failures

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        if self.cps.complete == FINAL:
            return [Note("ignored", {"failed": sorted(ev.instances), "reason": "run finished"})]
        failed = [i for i in self.graph.order if i in ev.instances]
        lost = sorted(ev.nodes) if ev.nodes and self.params.burst_unit == "nodes" else failed
        burst = self.detector.lost(ev.now, lost)
        step = next_mode(self.mode, burst)
        acts: list[CoordinatorAction] = [Stop(tuple(failed))]
        self.ended.difference_update(failed)
        if self.mode is Mode.NORMAL:
            self.began = ev.now
            self.planned = 0
            # The episode recovers until its checkpoint ends it (Normal), longer than
            # the kernel's recovering (until the restarts run).
            self.episodes += 1
            acts.append(DeclarePhase(RECOVERING, True, self.episodes))
        for i in failed:
            self.starting.discard(i)
        self.horizon = max(self.horizon, self.reached(failed, view))
        self.cps.forget(failed)
        self.pending = [i for i in self.graph.order if i in self.pending or i in failed]
        if step.rollback:
            self.gen += 1
            self.k = self.cps.rollback()
            self.horizon = self.k  # everything sent after P_k is of an older generation
            self.mode = step.mode
            acts += [DiscardSnapshots(i, after=self.k) for i in self.graph.order]
            acts.append(Note("rollback", {"failed": failed, "snapshot": self.k, "gen": self.gen,
                                          "mode": str(self.mode), "burst": burst}))
            # A replacement already started in this episode rolls back like a survivor.
            acts += [Control(i, Recover(self.k, self.gen, str(self.mode)))
                     for i in self.graph.order if i not in self.pending]
        else:
            acts.append(Note("failed-during-recovery", {"failed": failed, "snapshot": self.k}))
        acts += self.query_events(view)
        return acts + self.plan(view, "failure") + self.planning_phase()

    def planning_phase(self) -> list[CoordinatorAction]:
        """``planning`` is open while failed instances wait for the planner to start them."""
        if bool(self.pending) == self.planning:
            return []
        self.planning = bool(self.pending)
        return [DeclarePhase(PLANNING, self.planning, self.episodes)]

    def reached(self, failed: Sequence[InstanceId], view: ClusterView) -> int:
        """The last punctuation any of ``failed`` sent: a partition persists its part of
        ``P_h`` in the step that sends ``P_h``, so stable storage knows it even when the
        ``Persisted`` report died with the partition."""
        return max((h for i in failed for h in view.stored(i)
                    if isinstance(h, int) and SINK_COUNTS < h < FINAL), default=0)

    # ------------------------------------------------------------ capacity

    def on_capacity(self, ev: CapacityChanged, view: ClusterView) -> list[CoordinatorAction]:
        return self.plan(view, "capacity") + self.planning_phase()

    def on_running(self, ev: InstanceRunning, view: ClusterView) -> list[CoordinatorAction]:
        return []

    def free_slots(self, view: ClusterView) -> int:
        cap = view.capacity
        if not cap.nodes:
            return len(self.pending)
        unplaced = sum(1 for i in self.starting if i not in cap.placed)
        return max(0, cap.free - unplaced)

    def plan(self, view: ClusterView, why: str) -> list[CoordinatorAction]:
        """R11-R14: start what the schedule picks with the free slots (blocking mode always
        waits for room for everything)."""
        if not self.pending or not self.may_plan():
            return []
        free = self.free_slots(view)
        planner = self.planner if self.mode is Mode.PROGRESSIVE else Blocking()
        plan = planner.plan(self.queries, self.pending, free)
        self.planned += 1
        if not plan.started:
            return []
        density = {p.query: p.density for p in plan.picks}
        started = set(plan.started)
        self.pending = [i for i in self.pending if i not in started]
        self.starting |= {InstanceId(i) for i in started}
        acts: list[CoordinatorAction] = [Note("plan", {
            "mode": str(self.mode), "why": why, "free": free,
            "picks": [{"query": p.query, "pd": round(p.density, 6), "cost": p.cost}
                      for p in plan.picks],
            "started": list(plan.started)})]
        acts += [self.restart(InstanceId(i), self.priority(i, density)) for i in plan.started]
        return acts

    def may_plan(self) -> bool:
        """Whether this episode may plan again (a mutant plans once only)."""
        return True

    def priority(self, i: str, density: dict[str, float]) -> float:
        """A start's placement priority: the best density among the queries it serves."""
        op = self.graph.operator_of(i)
        return max((d for q, d in density.items() if op in self._ops(q)), default=0.0)

    def _ops(self, name: str) -> frozenset[str]:
        return next(q.operators for q in self.queries if q.name == name)

    def restart(self, i: InstanceId, priority: float) -> Restart:
        # Released alone: a query's instances run as soon as each is placed (X3). A sink
        # also gets its visible counts, so it never shows a record twice (R5).
        extra = (SINK_COUNTS, *SINK_DELTAS) if self.graph.is_sink(i) else ()
        return Restart(i, restore=self.k or None, extra=extra,
                       init=Init(self.gen, str(self.mode), self.k), priority=priority,
                       release=None)

    def finished(self, view: ClusterView) -> bool:
        return self.cps.complete == FINAL or super().finished(view)

    @property
    def pending_queries(self) -> Sequence[str]:
        return sorted(self.failed_queries)
