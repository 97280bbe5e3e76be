"""``FalkirkCoordinator``: F* from reports, the fixed point on failure, GC (spec §3, §5).

Normal operation: every ``Available`` report grows an instance's chain F*, every sink's
``Committed`` becomes ``CommitOutput`` and grows its channels' chains; after each, the
low-watermark is recomputed and what lies below it is collected (``DiscardSnapshots``
with a lower bound, ``TrimLog`` to loggers).

A failure is handled in rounds (R1-R9): pause every live instance, collect their exact
TOP metadata, solve Figure 6 over the failed set, then restart the failed instances and
roll back (``RollBack``) the live ones whose frontier moved, rewind live receivers of a
rolled-back sender, and once all of them are ready, replay logged edges and resume.
A failure during a round starts a new one over the union.

A stored object a restart or rollback needs that is bad (``StoreFault``) is not
available: the entries of F* that need it go (``fallback.py``) and a new round solves
the fixed point over what is left, with the instance that needed it as failed. Where no
consistent choice is left, the run stops, naming the object.

Sinks are modelled per input channel (spec §2): node ``"<sink>@<channel>"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from protocols.contract.actions import (
    SNAPSHOTTING,
    CommitOutput,
    Control,
    CoordinatorAction,
    DeclarePhase,
    DiscardSnapshots,
    DiscardStaged,
    Note,
    Restart,
    RollBack,
    Stop,
    StopRun,
)
from protocols.contract.events import FailureDetected, ReportIn, StoreFault
from protocols.contract.logic import CoordinatorLogic
from protocols.contract.messages import Ended
from protocols.contract.names import InstanceId
from protocols.contract.view import ClusterView, GraphView
from protocols.falkirk.fallback import ref_epoch, without
from protocols.falkirk.fixedpoint import FixedPoint, NoFrontier
from protocols.falkirk.frontier import EPOCHS, TOP, Frontier, sub
from protocols.falkirk.gc import Watermark
from protocols.falkirk.messages import (
    Available,
    Committed,
    Pause,
    Paused,
    Ready,
    Replay,
    Resume,
    Rewind,
    Setup,
    TrimLog,
    checkpoint_ref,
    segment_ref,
)
from protocols.falkirk.model import Dataflow, Edge, Entry, Node
from protocols.falkirk.params import FalkirkParams, operator_kinds
from protocols.falkirk.policy import Policy
from protocols.falkirk.recovery import RollbackPlan, solution_plan

AUTO_EPOCHS = 16  # epochs per run when epoch_records is 0 (spec D11)


def epoch_shape(graph: GraphView, params: FalkirkParams) -> tuple[int, int]:
    """(source batches per epoch, last data epoch): every source uses the same epoch
    count; a shorter one closes its missing epochs empty (spec §2)."""
    eg = graph.execution
    batch = eg.topology.input.batch
    most = max((math.ceil((hi - lo) / batch) for lo, hi in
                (eg.source_range(s) for s in graph.sources)), default=1)
    if params.epoch_records > 0:
        every = max(1, params.epoch_records // batch)
    else:
        every = max(1, math.ceil(most / AUTO_EPOCHS))
    return every, max(0, math.ceil(most / every) - 1)


def sink_node(sink: str, channel: int) -> str:
    return f"{sink}@{channel}"


class FalkirkCoordinator(CoordinatorLogic[FalkirkParams]):
    solver: type[FixedPoint] = FixedPoint
    watermark: type[Watermark] = Watermark

    def __init__(self, graph: GraphView, params: FalkirkParams):
        super().__init__(graph, params)
        kinds = operator_kinds(graph)
        self.policy: dict[str, Policy] = {}
        for i in graph.order:
            op = graph.operator_of(i)
            self.policy[i] = params.policy_of(op, kinds[op] == "stateful", kinds[op])
        self.every, self.last = epoch_shape(graph, params)
        self.fin = self.last + 1  # the end-of-stream pseudo-epoch
        self.chains: dict[str, list[Entry]] = {}
        for i in graph.order:
            if graph.is_source(i):
                self.chains[i] = [self._top_source(i)]
            elif graph.is_sink(i):
                for ch in graph.inputs(i):
                    self.chains[sink_node(i, ch)] = [self._sink_entry(ch, -1)]
            else:
                self.chains[i] = [self._entry(i, -1)]
        self.committed: dict[str, int] = dict.fromkeys(graph.sinks, -1)
        self.lw: dict[str, Frontier] = {
            p: TOP if p in graph.sources else -1 for p in self.chains}
        self.round = 0
        self.failed: set[str] = set()
        self.awaiting_pause: set[str] = set()
        self.paused: dict[str, Paused] = {}
        self.awaiting_ready: set[str] = set()
        self.after_ready: list[CoordinatorAction] = []
        self.held: set[str] = set()  # paused instances to resume
        self.restarted: set[str] = set()  # restarted this round, not resumed yet
        self.unsettled: set[str] = set()  # reset (restart, rollback, rewind) since a resume
        self.gc_marks: dict[str, int] = {}  # per instance, refs below this are discarded
        self.trimmed: dict[int, int] = {}  # per logged channel, in-memory log trimmed to
        self.gc_due = True  # lw moved since the last deletions were worked out
        self.dsts = {c.id: sink_node(c.dst, c.id) if graph.is_sink(c.dst) else c.dst
                     for c in graph.channels}  # a channel's receiving node
        self.edges = {str(c.id): Edge(c.src, self.dsts[c.id]) for c in graph.channels}
        self.shape: Dataflow | None = None  # the first flow built, for its edge lists
        self.rounds: list[dict[str, object]] = []
        self.bad: StoreFault | None = None  # the bad object a round under way falls back past

    # ------------------------------------------------------------ the model

    def _ins(self, p: str) -> list[str]:
        return [str(d) for d in self.graph.inputs(p)]

    def _outs(self, p: str) -> list[str]:
        return [str(e) for e in self.graph.out_channels(p)]

    def _entry(self, p: str, k: int) -> Entry:
        """A persisted ``↓k`` with the safe overestimates M̄ = D̄ = N̄ = ↓k (spec D5)."""
        logs = self.policy[p].logs
        return Entry(k, consumed=dict.fromkeys(self._ins(p), k),
                     discarded={} if logs else dict.fromkeys(self._outs(p), k), notified=k,
                     logged={e: tuple(range(k + 1)) for e in self._outs(p)} if logs else {})

    def _top_source(self, p: str) -> Entry:
        """A source's log is its whole replayable input: a durable TOP (spec D8)."""
        return Entry(TOP, logged={e: tuple(range(self.fin + 1)) for e in self._outs(p)},
                     durable=True)

    def _sink_entry(self, ch: int, k: int) -> Entry:
        return Entry(k, consumed={str(ch): k})

    def _top(self, p: str, rep: Paused) -> Entry:
        """The exact Xi at TOP a paused instance reported (spec R2)."""
        logs = self.policy[p].logs
        sent = {str(e): rep.sent.get(e, -1) for e in self.graph.out_channels(p)}
        return Entry(TOP, consumed={str(d): rep.consumed.get(d, -1)
                                    for d in self.graph.inputs(p)},
                     discarded={} if logs else sent, notified=rep.completed,
                     logged={e: tuple(range(v + 1)) for e, v in sent.items()} if logs else {})

    def dataflow(self, tops: Mapping[str, Paused] | None = None) -> Dataflow:
        """The persisted chains, plus the TOP of every paused instance when given."""
        chains = {p: list(c) for p, c in self.chains.items()}
        closed: dict[int, int] = {}
        for i, rep in (tops or {}).items():
            closed.update({ch: rep.closed.get(ch, -1) for ch in self.graph.inputs(i)})
            if self.graph.is_sink(i):
                for ch in self.graph.inputs(i):
                    chains[sink_node(i, ch)].append(
                        Entry(TOP, consumed={str(ch): rep.consumed.get(ch, -1)}))
            elif not self.graph.is_source(i):
                chains[i].append(self._top(i, rep))
        edges = self.edges
        if tops:
            edges = {e: Edge(x.src, x.dst, closed=closed.get(int(e)))
                     for e, x in self.edges.items()}
        flow = Dataflow({p: Node(EPOCHS, tuple(c)) for p, c in chains.items()}, edges)
        if self.shape is None:
            self.shape = flow
        else:
            flow.share_adjacency(self.shape)
        return flow

    def nodes_of(self, instances: set[str]) -> set[str]:
        out = set()
        for i in instances:
            if self.graph.is_sink(i):
                out |= {sink_node(i, ch) for ch in self.graph.inputs(i)}
            else:
                out.add(i)
        return out

    # ------------------------------------------------------------ start

    def setup(self, i: str, frontier: int, hold: bool) -> Setup:
        offset = self.graph.instance(i).index if self.params.stagger == "on" else 0
        return Setup(self.round, frontier, self.last, self.every, hold, offset,
                     self.committed.get(i, -1))

    def initial(self, view: ClusterView) -> list[CoordinatorAction]:
        return [Restart(i, init=self.setup(i, -1, hold=False)) for i in self.graph.order]

    def finished(self, view: ClusterView) -> bool:
        return (not self.failed and not self.awaiting_ready
                and all(c >= self.fin for c in self.committed.values()))

    # ------------------------------------------------------------ reports

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        msg, i = ev.msg, ev.instance
        if isinstance(msg, Available):
            done = ([DeclarePhase(SNAPSHOTTING, False, msg.epoch, holder=i)]
                    if msg.kind == "checkpointed" else [])
            return done + self._grow(i, msg.epoch)
        if isinstance(msg, Committed):
            return self._committed(i, msg.epoch)
        if isinstance(msg, Paused) and msg.round == self.round and i in self.awaiting_pause:
            self.paused[i] = msg
            self.awaiting_pause.discard(i)
            return self._solve_when_paused()
        if isinstance(msg, Ready) and msg.round == self.round and i in self.awaiting_ready:
            self.awaiting_ready.discard(i)
            return self._resume_when_ready()
        if isinstance(msg, Ended):
            self.ended.add(i)
        return []

    def _grow(self, i: str, epoch: int) -> list[CoordinatorAction]:
        chain = self.chains[i]
        # empty: a bad object took every entry and no round has solved without it yet
        if not chain or (chain[-1].front is not TOP and epoch > chain[-1].front):
            chain.append(self._entry(i, epoch))
            return self._collect()
        return []

    def _committed(self, sink: str, epoch: int) -> list[CoordinatorAction]:
        if epoch <= self.committed[sink]:
            return []
        acts: list[CoordinatorAction] = [CommitOutput(InstanceId(sink), epoch)]
        for k in range(self.committed[sink] + 1, epoch + 1):
            for ch in self.graph.inputs(sink):
                self.chains[sink_node(sink, ch)].append(self._sink_entry(ch, k))
        self.committed[sink] = epoch
        return acts + self._collect()

    # ------------------------------------------------------------ GC (G1-G3)

    def _collect(self) -> list[CoordinatorAction]:
        flow = self.dataflow()
        try:
            lw = self.watermark(flow).solve().fronts
        except NoFrontier:
            # only after a bad object took an entry out of F*: were everyone to fail now,
            # no consistent choice would exist, so nothing is garbage yet
            return []
        acts: list[CoordinatorAction] = []
        for p, k in lw.items():
            if k is TOP or not sub(EPOCHS, self.lw[p], k) or k == self.lw[p]:
                continue
            self.lw[p] = k
            self.gc_due = True
            # D9: keep the entry at lw itself; everything below can never be restored
            self.chains[p] = [e for e in self.chains[p] if e.front is TOP or e.front >= k]
        if not self.gc_due:
            return []  # what follows reads only lw: unchanged, it was all done already
        self.gc_due = False
        for i in self.graph.order:
            if self.graph.is_source(i) or self.graph.is_sink(i):
                continue
            below = self._gc_bound(i)
            # refs start at 3 (state at epoch 0): a lower bound below that frees nothing
            if below is not None and below > self.gc_marks.get(i, checkpoint_ref(0)):
                self.gc_marks[i] = below
                acts.append(DiscardSnapshots(InstanceId(i), below=below))
            if self.policy[i].logs:
                for e in self.graph.out_channels(i):
                    k = self.lw[self.flow_dst(e)]
                    if k is not TOP and k > self.trimmed.get(e, -1):
                        self.trimmed[e] = k
                        acts.append(Control(InstanceId(i), TrimLog(e, k)))
        if acts:
            acts.append(Note("falkirk-gc", {p: (-2 if v is TOP else v)
                                            for p, v in self.lw.items()}))
        return acts

    def flow_dst(self, ch: int) -> str:
        return self.dsts[ch]

    def _gc_bound(self, i: str) -> int | None:
        """Refs ``< bound`` of ``i`` are garbage: checkpoints below lw(i), and log
        segments every receiver keeps at its lw (spec G2)."""
        pol = self.policy[i]
        bounds = []
        if pol.stateful and self.lw[i] is not TOP:
            bounds.append(checkpoint_ref(self.lw[i]))
        if pol.logs:
            keeps = [self.lw[self.flow_dst(e)] for e in self.graph.out_channels(i)]
            m = min((k for k in keeps if k is not TOP), default=self.fin)
            bounds.append(segment_ref(m) + 1)
        return min(bounds) if bounds else None

    # ------------------------------------------------------------ failures (R1-R9)

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        return [Stop(tuple(sorted(ev.instances))), *self._new_round(ev.instances)]

    def _new_round(self, instances: frozenset[InstanceId]) -> list[CoordinatorAction]:
        """Pause every live instance and solve once all paused, over ``instances`` and
        whatever the round under way had restarted and not yet seen ready."""
        self.round += 1
        self.failed |= set(instances)
        self.failed |= self.awaiting_ready & self.restarted  # not yet running: failed
        live = [i for i in self.graph.order if i not in self.failed]
        self.awaiting_pause = set(live)
        self.awaiting_ready = set()
        self.after_ready = []
        self.paused = {}
        self.held |= set(live)
        acts: list[CoordinatorAction] = [Control(InstanceId(i), Pause(self.round))
                                         for i in live]
        return acts + self._solve_when_paused()

    def on_store_fault(self, ev: StoreFault, view: ClusterView) -> list[CoordinatorAction]:
        """Fall back past a bad object: F* without what needs it, solved again with the
        instance that needed it (stopped by the host, not started) as failed."""
        chain = self.chains.get(ev.instance)
        left = without(chain, ev.snapshot) if chain is not None else []
        if ev.kind == "unavailable" or chain is None or len(left) == len(chain):
            # unreachable, not bad; or nothing of F* needs it (a rule would loop on it)
            return [self._stop(ev)]
        self.chains[ev.instance] = left
        self.bad = ev
        if not ev.fenced:
            return []  # its start was superseded already: that round solves without it
        return self._new_round(ev.fenced)

    def _stop(self, ev: StoreFault) -> StopRun:
        return StopRun(f"{ev.kind} snapshot {ev.snapshot} of {ev.instance}", ev.instance,
                       ev.snapshot)

    def _solve_when_paused(self) -> list[CoordinatorAction]:
        if self.awaiting_pause:
            return []
        plan = self._plan()
        if plan is None:  # only a bad object leaves no consistent choice
            assert self.bad is not None
            return [self._stop(self.bad)]
        for p, f in plan.frontiers.items():  # never below the low-watermark (spec §9)
            assert sub(EPOCHS, self.lw[p], f), f"{p} rolls back below its low-watermark"
        fell: list[CoordinatorAction] = []
        if self.bad is not None:
            fell.append(Note("falkirk-fallback", {
                "bad": self.bad.snapshot, "instance": self.bad.instance,
                "kind": self.bad.kind, "round": self.round,
                "frontiers": {p: (-2 if f is TOP else f) for p, f in plan.frontiers.items()}}))
            self.bad = None
        return fell + self._recover(plan)

    def _solve(self) -> RollbackPlan:
        flow = self.dataflow(self.paused)
        fenced = {str(c.id) for c in self.graph.channels if c.dst in self.unsettled}
        fp = self.solver(flow, self.nodes_of(self.failed), fenced=fenced)
        return solution_plan(fp, fp.solve())

    def _plan(self) -> RollbackPlan | None:
        """The round's plan; None where a bad object leaves no consistent choice.

        Without a bad object a choice always exists (§3.6: the entry at the low-watermark
        fits). With one, what is left above the watermark may not fit; then the run falls
        back further, below the watermark, where that needs nothing GC deleted."""
        try:
            return self._solve()
        except NoFrontier:
            if self.bad is None:
                raise
        if not self._add_below_watermark():
            return None
        try:
            return self._solve()
        except NoFrontier:
            return None

    def _add_below_watermark(self) -> bool:
        """Put entries GC dropped below the low-watermark back into F* wherever restoring
        them needs nothing GC discarded: every input comes from a source (whose input is
        replayable) or from an instance that does not log (and so re-executes instead of
        replaying a log trimmed at the watermark). The initial state needs no stored
        object, nor does a stateless instance at any epoch below its chain (a logger's
        restart gets back only segments above its receivers' watermark, still stored)."""
        added = False
        for p, chain in self.chains.items():
            if (chain and chain[0].front is TOP) or not self._from_scratch(p):
                continue
            sink, _, ch = p.partition("@")
            stateless = not ch and not self.policy[sink].stateful
            below = chain[0].front if chain else self._bad_epoch(p) if stateless else 0
            # the initial state, and a stateless instance every epoch up to its chain
            fronts = list(range(-1, below)) if stateless else [-1] if below != -1 else []
            new = [self._sink_entry(int(ch), k) if ch else self._entry(sink, k)
                   for k in fronts]
            if new:
                self.chains[p] = [*new, *chain]
                self.lw[p] = new[0].front  # the next report's GC raises it again
                added = True
        return added

    def _bad_epoch(self, p: str) -> int:
        """Below which a chain the bad object emptied may take entries back: its epoch."""
        if self.bad is None or self.bad.instance != p:
            return 0
        return ref_epoch(self.bad.snapshot)[1]

    def _from_scratch(self, p: str) -> bool:
        ins = [int(p.partition("@")[2])] if "@" in p else self.graph.inputs(p)
        return all(self.graph.is_source(src) or not self.policy[src].logs
                   for src in (self.graph.channels[c].src for c in ins))

    def _frontier(self, i: str, plan: RollbackPlan) -> Frontier:
        if self.graph.is_sink(i):
            fs = [plan.frontiers[sink_node(i, ch)] for ch in self.graph.inputs(i)]
            return TOP if all(f is TOP for f in fs) else min(f for f in fs if f is not TOP)
        return plan.frontiers[i]

    def _recover(self, plan: RollbackPlan) -> list[CoordinatorAction]:
        r = self.round
        acts: list[CoordinatorAction] = []
        restarted: set[str] = set()
        moved: dict[str, int] = {}
        for i in self.graph.order:
            f = self._frontier(i, plan)
            if i in self.failed:
                start: int = self.committed[i] if self.graph.is_sink(i) else (
                    -1 if f is TOP else f)
                if self.graph.is_source(i):
                    start = self._source_resume(i, plan)
                if self.graph.is_sink(i):
                    # What the dead sink staged past its last commit is recomputed by its
                    # replacement: keeping it would make those records visible twice.
                    acts.append(DiscardStaged(InstanceId(i), self.committed[i]))
                acts.append(Restart(InstanceId(i), restore=self._restore_ref(i, start),
                                    extra=self._segments(i, plan),
                                    init=self.setup(i, start, hold=True)))
                restarted.add(i)
            elif f is not TOP and not self.graph.is_sink(i) and self.params.rollback == "restart":
                # spec D12: a live instance whose frontier moved restarts at it (Stop fences)
                acts.append(Restart(InstanceId(i), restore=self._restore_ref(i, f),
                                    extra=self._segments(i, plan),
                                    init=self.setup(i, f, hold=True)))
                restarted.add(i)
            elif f is not TOP and not self.graph.is_sink(i):
                acts.append(RollBack(InstanceId(i), to=f, restore=self._restore_ref(i, f)))
                moved[i] = f
        rewinds = self._rewinds(plan, restarted, moved)
        self._forget_above(plan, restarted | set(moved), rewinds)
        acts += [Control(InstanceId(d), Rewind(r, up)) for d, up in sorted(rewinds.items())]
        self.restarted = restarted
        self.awaiting_ready = restarted | set(moved) | set(rewinds)
        self.unsettled |= self.awaiting_ready
        self.after_ready = self._replays(plan, restarted, moved)
        acts.append(Note("falkirk-rollback", {
            "round": r, "failed": sorted(self.failed),
            "frontiers": {p: (-2 if f is TOP else f) for p, f in plan.frontiers.items()},
            "restarted": sorted(restarted), "rolled_back": sorted(moved),
            "rewound": sorted(rewinds),
            "replay": {e: [min(ts), max(ts)] for e, ts in plan.replay.items() if ts}}))
        self.rounds.append({"round": r, "restarted": sorted(restarted),
                            "rolled_back": sorted(moved)})
        self.failed = set()
        return acts + self._resume_when_ready()

    def _forget_above(self, plan: RollbackPlan, reset: set[str],
                      rewinds: Mapping[str, Mapping[int, int]]) -> None:
        """§3.6: after rolling back to f(p), F*'(p) = {f' ∈ F*(p) : f' ⊆ f(p)}.

        A checkpoint above the frontier records the effect of events that are undone now
        (epochs its senders re-execute, closes that died in flight); keeping it would
        let a later round restore it over a receiver that no longer holds what it says
        was sent, and let the low-watermark rise on it and trim logs still needed. A
        sink's channel keeps nothing above what it was rewound to: its staged epochs of
        that channel come again from the sender."""
        for i in reset:
            if self.graph.is_sink(i) or self.graph.is_source(i):
                continue
            f = plan.frontiers[i]
            if f is not TOP:
                self.chains[i] = [e for e in self.chains[i] if e.front <= f]
        for sink in self.graph.sinks:
            for ch in self.graph.inputs(sink):
                node = sink_node(sink, ch)
                k = plan.frontiers[node]
                up = rewinds.get(sink, {}).get(ch)
                if up is not None:
                    k = up if k is TOP else min(k, up)
                if k is not TOP:
                    self.chains[node] = [e for e in self.chains[node] if e.front <= k]

    def _rewinds(self, plan: RollbackPlan, restarted: set[str],
                 moved: Mapping[str, int]) -> dict[str, dict[int, int]]:
        """Per live, kept receiver: the input channels whose sender rolled back (or a
        sink's rolled-back channels) and the last epoch it keeps of each (R11)."""
        rewinds: dict[str, dict[int, int]] = {}
        for c in self.graph.channels:
            dst = c.dst
            if dst in restarted or dst in moved:
                continue
            # what the receiver keeps of c: its own frontier (a sink's channel) and what
            # the sender's new frontier still fixes (R11); a restarted source regenerates
            keep: Frontier = TOP
            if self.graph.is_sink(dst):
                keep = plan.frontiers[sink_node(dst, c.id)]
            if c.src in moved or (c.src in restarted and not self.graph.is_source(c.src)):
                src_f = plan.frontiers[c.src]
                keep = src_f if keep is TOP else min(int(keep), -1 if src_f is TOP else src_f)
            if keep is not TOP:
                rewinds.setdefault(dst, {})[c.id] = int(keep)
        return rewinds

    def _source_resume(self, i: str, plan: RollbackPlan) -> int:
        """A restarted source regenerates from the first epoch some receiver lacks."""
        keeps = []
        for e in self.graph.out_channels(i):
            keeps.append(self._kept(e, plan))
        return min(keeps, default=-1)

    def _kept(self, ch: int, plan: RollbackPlan) -> int:
        dst = self.flow_dst(ch)
        k = plan.frontiers[dst]
        closed = self.paused.get(self.graph.channels[ch].dst)
        c = closed.closed.get(ch, -1) if closed is not None else -1
        return c if k is TOP else min(k, c) if closed is not None else k

    def _restore_ref(self, i: str, k: int) -> int | None:
        pol = self.policy[i]
        if pol.stateful and k >= 0:
            return checkpoint_ref(k)
        return None

    def _segments(self, i: str, plan: RollbackPlan) -> tuple[int, ...]:
        """A restarted logger gets back its whole log L(e, f): every segment up to its
        frontier that some receiver may still need (above the receivers' watermark), not
        only this round's replay, since a later round may roll a receiver back further."""
        if not self.policy[i].logs or self.graph.is_source(i):
            return ()
        f = plan.frontiers[i]
        if f is TOP or f < 0:
            return ()
        keeps = [self.lw[self.flow_dst(e)] for e in self.graph.out_channels(i)]
        m = min((k for k in keeps if k is not TOP), default=f)
        return tuple(segment_ref(t) for t in range(max(m + 1, 0), f + 1))

    def _replays(self, plan: RollbackPlan, restarted: set[str],
                 moved: Mapping[str, int]) -> list[CoordinatorAction]:
        """Replay controls for every channel whose receiver lost part of it (R9)."""
        acts: list[CoordinatorAction] = []
        for c in self.graph.channels:
            u, v = c.src, c.dst
            lost = v in self.unsettled or (
                self.graph.is_sink(v) and plan.frontiers[sink_node(v, c.id)] is not TOP)
            if not lost or (u in restarted and self.graph.is_source(u)):
                continue  # a restarted source regenerates from its Setup frontier anyway
            if (u in moved or u in restarted) and not self.policy[u].logs:
                continue  # a rolled-back non-logger re-executes instead (R9)
            after = self._after(c.id, plan)
            sent = self.paused[u].sent.get(c.id, -1) if u in self.paused else self.fin
            # a source's log holds its future too: replay only what it had already sent
            epochs = tuple(sorted({t for t in plan.replay.get(str(c.id), ())
                                   if after < t <= sent}))
            done = self.paused[u].completed if u in self.paused else self.fin
            if epochs or after < done:  # otherwise the receiver lacks nothing
                acts.append(Control(InstanceId(u), Replay(self.round, c.id, after, epochs)))
        return acts

    def _after(self, ch: int, plan: RollbackPlan) -> int:
        """The last epoch the receiver holds of ``ch``: its frontier, and for a live one
        no more than it closed (a reset earlier in an unfinished round lost the rest)."""
        v = self.flow_dst(ch)
        f = plan.frontiers[v]
        dst = self.graph.channels[ch].dst
        rep = self.paused.get(dst)
        closed = rep.closed.get(ch, -1) if rep is not None and dst not in self.failed else None
        if f is TOP:
            return closed if closed is not None else -1
        return f if closed is None else min(f, closed)

    def _resume_when_ready(self) -> list[CoordinatorAction]:
        if self.awaiting_ready or self.awaiting_pause:
            return []
        acts = list(self.after_ready)
        acts += [Control(InstanceId(i), Resume(self.round)) for i in self.graph.order
                 if i in self.held or i in self.restarted]
        self.after_ready = []
        self.held = set()
        self.restarted = set()
        self.unsettled = set()
        return acts
