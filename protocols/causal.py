"""``causal``: causal logging with tree clocks (paper 000), extended to stateful instances.

Normal operation (per instance, no coordination):

- The message unit is a **batch**: one tree-clock diff per batch, not per record. An
  instance's time counts the batches it has processed (a source's, the batches it made).
- Processing a batch from parent P builds the diff ``self:time+1 -> P's piggybacked diff``
  (``protocols/treeclock.py``), logs it in the **diff log** of that input channel and applies
  it to the instance's clock. Every batch sent carries the last diff in ``Batch.meta``.
- Diffs are truncated to ``depth + 1`` levels below the root (``depth`` is f, how many
  adjacent failures are recovered locally), so the piggyback is constant-size.
- Every batch sent is kept in the **payload log** of its output channel.
- **No silent events** (spec N5): an event that sends nothing on an output channel sends
  an empty batch there, so each child's diff log holds every event of its parent up to
  the child's position and replay can place all of them.
- **Local snapshots.** Every ``snapshot_every`` processed batches per input channel
  (``snapshot_every`` times the number of inputs) an instance persists, in
  its own store slot, its operator state, per-input positions, clock, diff log and payload
  log (the payload log, because batches in flight when it crashes must be resent). No
  instance waits for another. A sink also persists, with every output it makes visible
  and in the same step, the visible count of each key output since its last local
  snapshot (a second slot, ``SINK_SLOT``): a few plain entries per output instead of a
  whole snapshot. A replacement sink takes the larger count per key of the two slots.
  The paper recovers stateless nodes from T* alone; here the
  per-channel batch numbering and round-robin counters are state even in a stateless
  operator, so every instance takes these local snapshots (tiny for stateless ones).
- **Garbage collection.** When an instance reports a snapshot, its parents drop payload
  log entries up to the snapshot's input positions and its children drop diff-log entries
  about it up to the snapshot's time: a replacement never needs older ones.

Recovery of a failed instance B (nobody else stops, pauses or rolls back):

1. B' restores B's newest local snapshot and holds all input. It reports ``ready`` with its
   input positions; the coordinator asks each parent to resend from there (payload logs).
2. The coordinator asks B's children (``query`` controls, ``answer`` reports) for their
   position on the channel from B and the diffs in which B appears: B's time and the
   parent batch (parent id, parent time) that caused it. ``t_min`` is the smallest B time
   the children have seen, T* applies every B diff up to it to an all-zero clock.
3. The plan tells B' where to resume to each child (1 + the child's position: regenerated
   batches below it are filtered, i.e. sent duplicates are never sent) and the observed
   events in B-time order. B' processes its parents' batches in exactly that order
   (**execution replay**), so the batches it regenerates are the ones its children saw;
   batches that no child observed are processed afterwards in arrival order.
4. Children de-duplicate by per-channel ``seq`` in any case; sinks also persist, with each
   output, how many records per key they made visible (``protocols/logged.py``).

Batches a parent's FIFO channel delivers before an observed one are processed first even if
unobserved. An unobserved batch processed after later observed ones cannot change what was
observed when, as in every operator here, a record's effect reaches a child on the channel
its key is routed to; operators that spread one key's effect over several output channels
(or round-robin output from several inputs) would need the full determinant log.

**Without clocks** (``clocks: off``, for measuring what the clocks cost, paper 000's
Fig. 3): batches carry no diff and no diff log is kept; local snapshots, payload logs and
sink de-duplication stay. With no record of the order children observed, every failure
takes the fallback below.

**Adjacent failures: ``depth`` is f** (spec causal.md M1-M5). The failed *component* is a
connected set of failed or still recovering instances (a recovering neighbour is restarted
again with the new failure); L is the number of instances on its longest directed path.
With L <= f the component alone restarts: each member's children (a restarted child
answers from its restored snapshot) and every instance reached from it through restarting
instances only, k <= f hops down, answer with what their diff logs say about it (at level
k, its cause at level k + 1 <= f + 1: why diffs keep f + 1 levels), and each member gets
its own plan. Nothing outside the component stops.

**Beyond f (still exactly-once).** With L > f the causes of the most upstream member are
cut from every surviving diff, so its order cannot be read. Then the whole graph is
restarted from the sources in a new epoch (the lineage baseline applied to everything):
stale snapshots are ignored, and sinks keep their per-key visible counts so the
recomputation only adds what was never visible. The run's events get a
``causal-fallback`` with reason ``beyond-f``, the failed instances, the component, L and
f (or reason ``no-clocks`` under ``clocks: off``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from ftctl.runtime.actions import Persist, Send
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Message
from protocols.base import Control, CoordinatorProtocol, Event, PlanStep, Start, Stop
from protocols.contract.params import ProtocolParams
from protocols.logged import SLOT, LoggedInstance, eos_ok
from protocols.shared.treeclock import Plain, TreeClock, plain_child, t_min_of


class CausalParams(ProtocolParams):
    """``--param`` keys of ``causal``."""

    depth: int = Field(default=2, ge=1, description="f, the adjacent failures recovered "
                       "locally: diffs keep depth + 1 levels below the root; a failed "
                       "component with a longer path falls back to a whole-graph restart.")
    snapshot_every: int = Field(default=10, ge=1, description="Processed batches per "
                                "input channel between two local snapshots.")
    clocks: Literal["on", "off"] = Field(default="on", description="off: no diffs are "
                                         "piggybacked or logged (measures what clocks "
                                         "cost); every failure takes the fallback.")


ReplayEvent = tuple[int, str | None, int]  # (B time, parent id, parent time)
SINK_SLOT = 2  # a sink's visible counts per key since its last local snapshot


class CausalInstance(LoggedInstance):
    def __init__(self, core: InstanceCore, params: CausalParams, blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        init = init or {}
        self.depth = params.depth + 1
        # ``clocks: off`` measures what the clocks cost (paper 000, Fig. 3): no diff is
        # piggybacked or logged, so a failure can only be recovered by the fallback.
        self.clocks = params.clocks == "on"
        # Per input channel: a merging instance (a sink behind 20 shards) gets many small
        # batches, each a slice of one upstream batch.
        self.every = params.snapshot_every * max(1, len(core.inputs))
        self.epoch = int(init.get("epoch", 0))
        self.clock = TreeClock(core.id)
        self.time = 0
        # Diffs in plain form (``TreeClock.receive_plain``): shared by the batches that
        # carry them, the diff log and snapshots, and marshal-able on the wire.
        self.last_diff: Plain | None = None
        self.dlog: dict[int, list[tuple[int, Plain]]] = {ch: [] for ch in core.inputs}
        self.pending: dict[int, deque[Batch]] = {ch: deque() for ch in core.inputs}
        self.eos_wait: set[int] = set()
        self.replay: deque[ReplayEvent] = deque()
        self.tstar: TreeClock | None = None
        self.awaiting = bool(init.get("recover"))
        self.since = 0
        self.snaps = 0
        self.touched: dict[Any, int] = {}  # sinks: visible counts since the last snapshot
        # The coordinator names each input channel's parent: a diff names instances.
        self.chan_of: dict[str, int] = dict(init.get("parents", {}))
        blob, visible = _split(blob)
        current = blob is not None and blob["epoch"] == self.epoch
        if current:
            self._restore(blob)
        elif blob is not None:
            self.emitted = dict(blob["emitted"])  # visible output outlives epochs
        for k, n in visible.items():
            if n > self.emitted.get(k, 0):
                self.emitted[k] = n
        # Until the next local snapshot, SINK_SLOT must keep what the last incarnation
        # made visible, or this incarnation's first output would overwrite it.
        self.touched = dict(visible)
        if not current:
            self._persist()  # a slot exists before any failure can need it
        if self.awaiting:
            self.report("ready", {ch: self.pos[ch] + 1 for ch in core.inputs})
            if self.done:
                self.report("eos")

    # ------------------------------------------------------------ snapshots

    def _blob(self) -> dict[str, Any]:
        done = {ch: self.pos[ch] - len(q) for ch, q in self.pending.items()}
        return {
            "epoch": self.epoch, "n": self.snaps, "core": self.core.snapshot_state(),
            # Clocks and batches as plain tuples: the blob is marshalled, several times
            # cheaper than pickling thousands of small objects (``ftctl.codec``).
            "pos": done, "time": self.time, "clock": self.clock.to_plain(),
            "last": self.last_diff,
            "plog": {ch: [(b.records, b.seq, b.watermark, b.meta) for b in v]
                     for ch, v in self.plog.items()},
            "dlog": {ch: list(v) for ch, v in self.dlog.items()},
            "done": self.done, "seen": dict(self.seen), "emitted": dict(self.emitted),
        }

    def _restore(self, blob: dict[str, Any]) -> None:
        self.core.restore_state(blob["core"])
        self.pos = dict(blob["pos"])
        self.time = blob["time"]
        self.snaps = blob["n"]
        self.clock = TreeClock.from_plain(blob["clock"])
        self.last_diff = blob["last"]
        self.plog = {ch: [Batch(r, seq, wm, m) for r, seq, wm, m in v]
                     for ch, v in blob["plog"].items()}
        self.dlog = {ch: list(v) for ch, v in blob["dlog"].items()}
        self.done = blob["done"]
        self.seen = dict(blob["seen"])
        self.emitted = dict(blob["emitted"])

    def _persist(self) -> None:
        self.snaps += 1
        self.since = 0
        blob = self._blob()
        self.touched = {}  # the snapshot holds every visible count
        self.core.actions.append(Persist(SLOT, self.core.id, blob))
        self.report("persisted", {"pos": blob["pos"], "time": self.time})

    def persist_sink(self, out: list[tuple[Any, Any]]) -> None:
        # Only what this output changed since the last local snapshot: plain values, so
        # cheap to store with every output (``SINK_SLOT``).
        touched, emitted = self.touched, self.emitted
        for k, _ in out:
            touched[k] = emitted[k]
        self.core.actions.append(Persist(SINK_SLOT, self.core.id, dict(touched)))

    # ------------------------------------------------------------ normal operation

    def stamp(self, ch: int, batch: Batch) -> None:
        batch.meta = self.last_diff if self.clocks else None

    def on_step(self, now: float) -> bool:
        if self.awaiting:
            return True  # a recovering source waits for where to resume
        self.time += 1
        self.last_diff = (self.core.id, self.time, ())
        self.clock.time = self.time
        more = super().on_step(now)
        self._tick()
        return more

    def on_message(self, ch: int, msg: Message) -> None:
        if not isinstance(msg, Batch) and msg.kind == "eos" and eos_ok(msg, self.pos[ch]):
            if ch not in self.core.finished:
                self.eos_wait.add(ch)
                self._pump()
            self.filter_sends()
            return
        super().on_message(ch, msg)

    def process(self, ch: int, batch: Batch) -> None:
        self.pending[ch].append(batch)
        self._pump()

    def _run(self, ch: int, batch: Batch, at: int | None = None) -> None:
        self.time = at if at is not None and at > self.time else self.time + 1
        if self.clocks:
            diff = TreeClock.receive_plain(self.core.id, self.time, batch.meta, self.depth)
            self.clock.apply_plain(diff)
            self.last_diff = diff
            self.dlog[ch].append((batch.seq, diff))
        sent = len(self.core.actions)
        self.core.deliver(ch, batch)
        if self.clocks and not self.core.is_sink:
            self._no_silent_event(sent)
        self.after_deliver()
        self._tick()

    def _no_silent_event(self, since: int) -> None:
        """Every event sends on every output channel, an empty batch if nothing else.

        Spec causal.md N5: an event no child sees leaves no diff anywhere, so a replacement
        cannot place it, and where it lands changes what later events send (a watermark
        that advances one event earlier or later adds or removes a watermark-only batch,
        shifting every later ``seq`` its children de-duplicate by).
        """
        core = self.core
        got = {a.channel for a in core.actions[since:] if type(a) is Send}
        wm = core.wm_sent if core.needs_wm else None
        for out in core.out_channels:
            if out not in got:
                core.send(out, Batch([], watermark=wm))

    def _tick(self) -> None:
        self.since += 1
        if self.since >= self.every:
            self._persist()

    def _pump(self) -> None:
        while not self.awaiting:
            if self.replay:
                t, parent, ptime = self.replay[0]
                ch = self.chan_of.get(parent) if parent is not None else None
                q = self.pending.get(ch) if ch is not None else None
                if ch is None or q is None:
                    self.replay.popleft()  # nothing to match (a source's own event)
                    continue
                if not q:
                    return  # the batch to replay next has not been resent yet
                b = q.popleft()
                btime = b.meta[1] if b.meta is not None else 0
                if btime == ptime:
                    self.replay.popleft()
                    self._run(ch, b, t)
                elif btime < ptime:
                    self._run(ch, b)  # FIFO forces it before the observed one
                else:  # the observed batch is already behind us: stop steering
                    q.appendleft(b)
                    self.replay.popleft()
                continue
            if self.tstar is not None:
                self.clock.apply(self.tstar)
                self.tstar = None
                self.report("replayed")
            ran = False
            for ch, q in self.pending.items():
                if q:
                    self._run(ch, q.popleft())
                    ran = True
            if not ran:
                break
        if not self.awaiting and not self.replay:
            for ch in sorted(self.eos_wait):
                if not self.pending[ch]:
                    self.eos_wait.discard(ch)
                    self.on_eos(ch)

    # ------------------------------------------------------------ controls

    def on_control(self, payload: Any) -> None:
        kind = payload.get("kind") if isinstance(payload, dict) else None
        if kind == "query":
            self._answer(payload)
        elif kind == "plan":
            self._plan(payload)
        elif kind == "gcdiff":
            ch, upto, src = payload["channel"], payload["upto"], payload["src"]
            self.dlog[ch] = [e for e in self.dlog[ch] if _time_of(e[1], src) > upto]
        else:
            super().on_control(payload)
        self.filter_sends()

    def _answer(self, q: dict[str, Any]) -> None:
        # ``via``: the senders from this instance's parent down to B (spec M3); [B] for a
        # child of B.
        about, via = q["about"], q["via"]
        ch = self.chan_of[via[0]]
        self.report("answer", {"rid": q["rid"], "about": about, "via": via, "channel": ch,
                               "pos": self.pos[ch], "clock": self.clock.copy(),
                               "trees": observations(self.dlog[ch], via)})

    def _plan(self, plan: dict[str, Any]) -> None:
        self.awaiting = False
        for ch, start in plan["resume"].items():
            self.resend(ch, start)
        self.replay = deque(e for e in plan["replay"] if e[0] > self.time)
        self.tstar = plan["tstar"]
        self._pump()


def _split(blob: Any) -> tuple[dict[str, Any] | None, dict[Any, int]]:
    """A sink's start blob is (local snapshot, {SINK_SLOT: visible counts})."""
    if isinstance(blob, tuple):
        main, also = blob
        return main, also.get(SINK_SLOT) or {}
    return blob, {}


def _time_of(diff: Plain, src: str) -> int:
    node = plain_child(diff, src)
    return node[1] if node is not None else 0


# ---------------------------------------------------------------- recovery, pure

def observations(dlog: Iterable[tuple[int, Plain]], via: Sequence[str]) -> list[Plain]:
    """The subtrees rooted at ``via[-1]`` in the diffs of a diff log, read along ``via``.

    ``via[0]`` is the sender at level 1 of each diff, ``via[1]`` its cause at level 2, and
    so on: ``[B]`` reads a child's log of B's channel; ``[C, B]`` reads, in a log of C's
    channel, the B events that caused C's. Each subtree is B's own diff as logged: its
    root ``(B, B-time)`` and, below it, its cause (if the diff kept that level).
    """
    out: list[Plain] = []
    for _, diff in dlog:
        node: Plain | None = diff
        for x in via:
            node = plain_child(node, x) if node is not None else None
        if node is not None:
            out.append(node)
    return out


@dataclass(frozen=True)
class RecoveryPlan:
    """What the coordinator tells B' and its neighbours (spec causal.md R1-R6)."""

    t: dict[str, int]  # per child: B's time in the child's level-1 entry (R1)
    t_min: int
    tstar: TreeClock  # R2
    children: dict[str, int]  # B' sends to each child from 1 + t (R5)
    parents: dict[str, int]  # each parent resends from 1 + R[A] (R4)
    replay: list[ReplayEvent]  # observed B events after the restore time, by B-time (R6)


def plan_recovery(b: str, child_clocks: Mapping[str, TreeClock], trees: Iterable[Plain],
                  parents: Iterable[str], restore: TreeClock | None = None,
                  after: int | None = None) -> RecoveryPlan:
    """The recovery of ``b`` from what its children (and survivors below them) logged.

    ``child_clocks``: each child's clock (a failed child's restore clock); ``trees``: every
    logged subtree rooted at ``b`` (``observations``). ``restore`` is B's restore clock R:
    a local snapshot's clock, or None for the paper's stateless case, where R is T*.
    ``after``: replay events with a B-time above it (default R's time).
    """
    t = {c: t_min_of(b, [clock]) for c, clock in child_clocks.items()}
    tmin = min(t.values(), default=0)
    trees = list(trees)
    tstar = TreeClock(b)
    for node in trees:
        if node[1] <= tmin:
            tstar.apply_plain(node)
    tstar.time = tmin
    rclock = restore if restore is not None else tstar
    cut = rclock.time if after is None else after
    causes: dict[int, tuple[str, int]] = {}
    for node in trees:
        if node[1] > cut and node[2]:
            causes.setdefault(node[1], (node[2][0][0], node[2][0][1]))
    return RecoveryPlan(
        t=t, t_min=tmin, tstar=tstar,
        children={c: 1 + v for c, v in t.items()},
        parents={a: 1 + t_min_of(a, [rclock]) for a in parents},
        replay=[(bt, p, pt) for bt, (p, pt) in sorted(causes.items())])


def longest_failed_path(members: Collection[str],
                        downstream: Callable[[str], Iterable[str]]) -> int:
    """L of spec M1: the number of instances on the longest directed path of a failed
    component (a dataflow graph is acyclic)."""
    memo: dict[str, int] = {}

    def longest(n: str) -> int:
        if n not in memo:
            memo[n] = 1 + max((longest(c) for c in downstream(n) if c in members), default=0)
        return memo[n]

    return max((longest(m) for m in members), default=0)


# ---------------------------------------------------------------- coordinator

@dataclass
class _Recovery:
    rid: int
    waiting: set[tuple[str, tuple[str, ...]]]  # (instance asked, path it reads along)
    answers: list[dict[str, Any]] = field(default_factory=list)


class CausalCoordinator(CoordinatorProtocol):
    def __init__(self, graph: Any, params: CausalParams):
        super().__init__(graph, params)
        self.epoch = 0
        self.rid = 0
        self.recovering: dict[str, _Recovery] = {}
        self.replaying: set[str] = set()

    def initial_plan(self) -> list[PlanStep]:
        return [Start(i, init=self._init(i)) for i in self.graph.order]

    def _init(self, iid: str, recover: bool = False) -> dict[str, Any]:
        # One channel per (parent, child) pair in these graphs, so a parent's id (what a
        # diff records) names the input channel.
        chans = self.graph.channels
        parents = {chans[c].src: c for c in self.graph.instances[iid].inputs}
        return {"epoch": self.epoch, "recover": recover, "parents": parents}

    # ------------------------------------------------------------ reports

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[PlanStep]:
        chans = self.graph.channels
        if kind == "ready":
            # A parent recovering in the same component gets the same resume point in its
            # plan (this instance's answer), so it is not asked twice.
            return [Control(chans[ch].src, {"kind": "resend", "channel": ch, "from": s})
                    for ch, s in data.items() if not self._asks(chans[ch].src, instance)]
        if kind == "persisted":
            steps: list[PlanStep] = [
                Control(chans[ch].src, {"kind": "gc", "channel": ch, "upto": p})
                for ch, p in data["pos"].items()]
            steps += [Control(chans[ch].dst, {"kind": "gcdiff", "channel": ch,
                                              "upto": data["time"], "src": instance})
                      for ch in self.graph.out_channels(instance)]
            return steps
        if kind == "answer":
            return self._on_answer(instance, data)
        if kind == "replayed":
            self.replaying.discard(instance)
            return []
        return super().on_report(instance, kind, data, now)

    def _asks(self, parent: str, child: str) -> bool:
        rec = self.recovering.get(parent)
        return rec is not None and (child, (parent,)) in rec.waiting

    def _on_answer(self, child: str, data: dict[str, Any]) -> list[PlanStep]:
        rec = self.recovering.get(data["about"])
        key = (child, tuple(data["via"]))
        if rec is None or rec.rid != data["rid"] or key not in rec.waiting:
            return []
        rec.waiting.discard(key)
        rec.answers.append(data)
        return self._plan_if_ready(data["about"], rec)

    def _plan_if_ready(self, b: str, rec: _Recovery) -> list[PlanStep]:
        if rec.waiting:
            return []
        del self.recovering[b]
        self.replaying.add(b)
        chans = self.graph.channels
        direct = [a for a in rec.answers if len(a["via"]) == 1]
        plan = plan_recovery(b, {chans[a["channel"]].dst: a["clock"] for a in direct},
                             (n for a in rec.answers for n in a["trees"]),
                             self.graph.upstream(b), after=0)
        resume = {a["channel"]: a["pos"] + 1 for a in direct}
        payload = {"kind": "plan", "replay": plan.replay, "resume": resume,
                   "tstar": plan.tstar}
        return [Control(b, payload),
                Event("causal-replay", {"instance": b, "t": plan.t, "t_min": plan.t_min,
                                        "tstar": plan.tstar.to_plain(),
                                        "replay": len(plan.replay),
                                        "resume": {str(k): v for k, v in resume.items()},
                                        "children": plan.children})]

    # ------------------------------------------------------------ failures

    def on_failure(self, failed: set[str], now: float) -> list[PlanStep]:
        if self.finished():
            return [Event("ignored", {"failed": sorted(failed), "reason": "run finished"})]
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
        steps: list[PlanStep] = [Stop(members)]
        steps += [Event("causal-recover", {"members": sorted(c), "failed": sorted(c & failed),
                                           "L": n, "f": f})
                  for n, c in zip(lengths, comps, strict=True)]
        recs: dict[str, _Recovery] = {}
        for b in members:
            self.eos_sent.discard(b)
            self.replaying.discard(b)
            self.rid += 1
            recs[b] = self.recovering[b] = _Recovery(self.rid, set(self._queries(b, members)))
            steps.append(Start(b, restore=SLOT, init=self._init(b, recover=True),
                               also=self._sink_slot(b)))
        for b in members:  # every replacement is up before any is asked
            steps += [Control(x, {"kind": "query", "about": b, "via": list(via),
                                  "rid": recs[b].rid})
                      for x, via in sorted(recs[b].waiting)]
        for b in members:
            steps += self._plan_if_ready(b, recs[b])
        return steps

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

    def _fallback(self, failed: set[str], cause: dict[str, Any]) -> list[PlanStep]:
        self.epoch += 1
        self.recovering.clear()
        self.replaying.clear()
        self.eos_sent.clear()
        order = list(self.graph.order)
        steps: list[PlanStep] = [
            Stop(order),
            Event("causal-fallback", {"failed": sorted(failed), "epoch": self.epoch,
                                      **cause}),
        ]
        for iid in order:
            sink = self.graph.instances[iid].is_sink
            steps.append(Start(iid, restore=SLOT if sink else None, init=self._init(iid),
                               also=self._sink_slot(iid)))
        return steps

    def _sink_slot(self, iid: str) -> tuple[int, ...]:
        return (SINK_SLOT,) if self.graph.instances[iid].is_sink else ()
