"""A step-level model of the replica ring on the chain ``src -> A[R] -> B[R] -> sink``.

Tuple ``u`` is routed to ``A[u % R]`` and then ``B[u % R]``. Tuples enter one at a time and
the model runs to quiescence between them. A schedule is a set of one-shot hooks on
``(operator, unit index, uid, step)``; a hook crashes units, suspects one falsely,
reinstates one, defers an action, or pauses the hooked unit (``YIELD``: its continuation
runs after the work queued so far and the work that work queues). The result is the
number of tuples lost and duplicated at the sink, and the messages sent by kind.

Steps of a receiving unit follow the paper's Figure 3: ``recv -> acked -> sync1 -> synced
-> processed -> sent`` (the fixed variant moves ``acked`` after the sync, flaw F1).

The model decides nothing the protocol does not: ring duty, taker choice, records and
delivery tables are the shared pure pieces of this package; it only plays the network
(synchronous calls, FIFO work queue, bounded retries standing in for "until success").
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, cast

from protocols.contract.spec import Guarantee
from protocols.replica_ring.params import Policy, ReplicaRingParams, Variant
from protocols.replica_ring.records import DeliveryTable, Origin, Record, RecordTable
from protocols.replica_ring.ring import RingMember, choose_taker, detectors_of

Op = Literal["A", "B"]
Step = Literal["recv", "acked", "sync1", "synced", "processed", "sent"]
SRC = "src"
RETRIES = 20  # "retry until success" (§4.2), bounded so a stalled schedule ends
FRESH_BASE = 10_000  # mutant 'fresh-uid': new ids start here


# ---------------------------------------------------------------- schedule vocabulary

@dataclass(frozen=True)
class Crash:
    op: Op
    idx: int


@dataclass(frozen=True)
class Suspect:
    """False suspicion: the unit stays up (paused); its colleagues take its slot over."""

    op: Op
    idx: int


@dataclass(frozen=True)
class Reinstate:
    op: Op
    idx: int


@dataclass(frozen=True)
class Later:
    """Run ``action`` after the work queued so far."""

    action: Crash | Suspect | Reinstate


class _Yield:
    def __repr__(self) -> str:
        return "YIELD"


YIELD = _Yield()
Action = Crash | Suspect | Reinstate | Later | _Yield
HookKey = tuple[Op, int, int, Step]


@dataclass(frozen=True)
class Schedule:
    """Tuples to inject, actions before them, and step hooks."""

    tuples: tuple[int, ...]
    pre: tuple[Crash | Suspect | Reinstate, ...] = ()
    hooks: Mapping[HookKey, tuple[Action, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    lost: int
    duplicated: int
    messages: Mapping[str, int]

    @property
    def pair(self) -> tuple[int, int]:
        return (self.lost, self.duplicated)


class _Crashed(Exception):
    pass


class _Paused(Exception):
    pass


# ---------------------------------------------------------------- units

class Unit:
    def __init__(self, op: Op, idx: int, size: int, policy: Policy):
        self.op, self.idx = op, idx
        self.alive, self.fenced = True, False
        self.ring = RingMember(idx, size, self_ping=policy.has("self-ping"),
                               ping_prev=policy.has("ping-prev"))
        self.records = RecordTable(key_with_origin=policy.has("dedup-emitter"))
        self.delivery = DeliveryTable()

    def __repr__(self) -> str:
        return f"{self.op}[{self.idx}]"


class ChainModel:
    def __init__(self, size: int, params: ReplicaRingParams,
                 mutants: Iterable[str] = ()):
        self.R = size
        self.p = params.policy(frozenset(mutants))
        self.fixed = params.variant is Variant.FIXED
        self.hooks: dict[HookKey, tuple[Action, ...]] = {}
        self.units: dict[Op, list[Unit]] = {
            op: [Unit(op, i, size, self.p) for i in range(size)] for op in ("A", "B")}
        self.route: dict[Op, list[Unit]] = {op: list(us) for op, us in self.units.items()}
        self.msgs: Counter[str] = Counter()
        self.q: deque[Callable[[], None]] = deque()
        self.sink: Counter[int] = Counter()
        self.sink_seen: set[int] = set()
        self.fresh = FRESH_BASE

    # ------------------------------------------------------------ schedule actions
    def act(self, a: Crash | Suspect | Reinstate | Later) -> None:
        if isinstance(a, Crash):
            u = self.units[a.op][a.idx]
            if u.alive:
                u.alive = False
                self.q.append(lambda: self.detect(u))
        elif isinstance(a, Suspect):
            u = self.units[a.op][a.idx]
            if self.p.fence:
                u.fenced = True  # the coordinator stops the suspect before the route moves
            self.q.append(lambda: self.detect(u))
        elif isinstance(a, Reinstate):
            self.reinstate(a.op, a.idx)
        else:
            inner = a.action
            self.q.append(lambda: self.act(inner))

    def hook(self, u: Unit, uid: int, step: Step) -> None:
        acts = self.hooks.pop((u.op, u.idx, uid, step), ())
        for a in acts:
            if not isinstance(a, _Yield):
                self.act(a)
        if not u.alive:
            raise _Crashed
        if any(isinstance(a, _Yield) for a in acts):
            raise _Paused

    # ------------------------------------------------------------ ring
    def pings(self, u: Unit) -> list[int]:
        return u.ring.ping_targets()

    def colleagues(self, u: Unit) -> list[int]:
        """Slots a record is synced to, in index order (both variants)."""
        slots = [s for s in range(self.R) if s not in u.ring.represents]
        if self.p.has("sync-skips-successor"):
            slots = [s for s in slots if s != u.ring.next_of(u.idx)]
        return slots

    def detect(self, dead: Unit) -> None:
        op = dead.op
        route = self.route[op]

        def live(s: int) -> bool:
            return route[s] is not dead and route[s].alive

        for d in list(dead.ring.represents):
            if route[d] is not dead:
                continue
            pingers = detectors_of(d, self.R, self.p.has("ping-prev"))
            if not any(live(s) for s in pingers) and not self.p.ring_walk:
                continue  # faithful: the slot's only pinger was on the dead unit
            t = choose_taker(d, self.R, live, self.p.ring_walk, self.p.has("ping-prev"))
            if t is not None:  # faithful: a dead successor is asked forever (F6)
                self.takeover(route[t], d)

    def takeover(self, taker: Unit, d: int) -> None:
        self.msgs["takeover"] += 1
        taker.ring.adopt(d)
        if not self.p.has("no-route"):
            self.route[taker.op][d] = taker
        if self.p.amo or self.p.has("takeover-ignores-pending"):
            return
        for rec in taker.records.pending_of(d):
            rec.emitter = taker.idx
            self.q.append(partial(self.fetch, taker, cast(int, rec.uid), rec.origin))

    def reinstate(self, op: Op, idx: int) -> None:
        host = self.route[op][idx]
        new = Unit(op, idx, self.R, self.p)
        self.units[op][idx] = new
        self.msgs["reinstate"] += 1
        if not self.p.has("reinstate-keeps-index"):
            host.ring.release(idx)
        if self.p.table_transfer:
            new.records = host.records.copy()
        self.route[op][idx] = new

    # ------------------------------------------------------------ recovery
    def fetch(self, taker: Unit, uid: int, origin: Origin, tries: int = 0) -> None:
        if not taker.alive:
            return
        self.msgs["fetch"] += 1
        if origin == SRC:  # a source regenerates from its offset
            self.replay(taker, uid, origin)
            return
        assert isinstance(origin, int)
        o = self.route["A"][origin]
        if not o.alive:
            if tries < RETRIES:
                self.q.append(lambda: self.fetch(taker, uid, origin, tries + 1))
            return
        if o.delivery.holds(uid):
            self.replay(taker, uid, origin)
        elif (self.fixed and tries < RETRIES and o.records.pending_uid(uid)
              and not self.p.has("not-found-while-regenerating")):
            # the origin's taker is still regenerating the tuple (T5): ask again
            self.q.append(lambda: self.fetch(taker, uid, origin, tries + 1))

    def replay(self, taker: Unit, uid: int, origin: Origin) -> None:
        # D6: replays bypass the exactly-once check, or §5.6 read literally loses them
        if (self.p.has("replay-through-dedup") and self.p.dedup
                and taker.records.knows(uid, origin)):
            return
        self.proceed(taker, uid, origin)

    # ------------------------------------------------------------ data path
    def deliver(self, u: Unit, uid: int, origin: Origin) -> bool:
        """Receiver side up to the ack (steps 1-5). True when the sender got an ack."""
        acked = False
        try:
            self.hook(u, uid, "recv")
            if not self.p.records:  # at-most-once (§5.4): process, send, forget
                self.hook(u, uid, "acked")
                self.q.append(lambda: self.cont(u, uid, origin))
                return True
            if self.p.dedup and u.records.knows(uid, origin):  # §5.6
                self.msgs["ack"] += origin != SRC
                return True
            early = not self.p.ack_after_sync
            if early:
                self.msgs["ack"] += origin != SRC
                acked = True
                self.hook(u, uid, "acked")
            rec = Record(uid, origin, u.idx)
            u.records.insert(rec)
            if not self.p.has("drop-records"):
                for n, s in enumerate(self.colleagues(u)):
                    c = self.route[u.op][s]
                    self.msgs["record"] += 1
                    if c.alive:
                        c.records.insert(rec, replace=False)
                    if n == 0:
                        self.hook(u, uid, "sync1")
            if not early:
                self.msgs["ack"] += origin != SRC
                acked = True
                self.hook(u, uid, "acked")
            self.q.append(lambda: self.cont(u, uid, origin))
            return True
        except (_Crashed, _Paused):
            return acked

    def cont(self, u: Unit, uid: int, origin: Origin) -> None:
        if not u.alive:
            return
        try:
            self.hook(u, uid, "synced")
        except _Crashed:
            return
        except _Paused:
            self.q.append(lambda: self.q.append(lambda: self.cont(u, uid, origin)))
            return
        self.proceed(u, uid, origin)

    def proceed(self, u: Unit, uid: int, origin: Origin) -> None:
        """Steps (6)-(8) at u; also what a taker runs for a fetched tuple."""
        try:
            out = uid
            if self.p.has("fresh-uid") and u.op == "A":
                self.fresh += 1
                out = self.fresh
            if self.p.has("purge-before-ack") and not self.p.amo:
                self.purge(u, uid, origin)
            self.hook(u, uid, "processed")
            u.delivery.keep(out)
            self.send(u, out, uid, origin)
        except _Crashed:
            pass

    def send(self, u: Unit, out: int, uid: int, origin: Origin, tries: int = 0) -> None:
        if not u.alive or u.fenced:
            return
        self.msgs["data"] += 1
        if u.op == "B":
            ok = self.to_sink(u, out)
        else:
            v = self.route["B"][out % self.R]
            ok = v.alive and self.deliver(v, out, u.idx)
        if self.p.amo:
            return  # §5.4: a failed send is dropped, nothing is purged
        if not ok:
            if tries < RETRIES:
                self.q.append(lambda: self.send(u, out, uid, origin, tries + 1))
            return
        try:
            self.hook(u, uid, "sent")
        except _Crashed:
            return
        if not self.p.has("purge-before-ack") and not self.p.purge_on_delete:
            self.purge(u, uid, origin)
        if self.p.has("origin-drops-on-ack"):
            u.delivery.release(out)

    def purge(self, u: Unit, uid: int, origin: Origin) -> None:
        """Step (8): purge at every colleague and here; tell the origin to delete."""
        for s in [s for s in range(self.R) if s not in u.ring.represents]:
            self.msgs["purge"] += 1
            self.route[u.op][s].records.purge(uid, origin)
        u.records.purge(uid, origin)
        if origin != SRC:
            assert isinstance(origin, int)
            self.msgs["delete"] += 1
            o = self.route["A"][origin]
            if o.alive:
                o.delivery.release(uid)
                if self.p.purge_on_delete:
                    self.purge(o, uid, SRC)  # F5: the origin's record lives until delete

    def to_sink(self, u: Unit, out: int) -> bool:
        if not self.p.amo:
            self.msgs["ack"] += 1
        if not (self.p.idempotent_sink and out in self.sink_seen):
            self.sink[out] += 1
        self.sink_seen.add(out)
        if not self.p.amo and self.fixed:  # N5: the sink commits, then sends delete
            self.q.append(lambda: self.sink_delete(u, out))
        return True

    def sink_delete(self, u: Unit, out: int) -> None:
        self.msgs["delete"] += 1
        if u.alive:
            u.delivery.release(out)
            self.purge(u, out, u.records.origin_of(out, SRC))

    # ------------------------------------------------------------ driver
    def settle(self) -> None:
        while self.q:
            self.q.popleft()()

    def run(self, schedule: Schedule) -> Outcome:
        self.hooks = dict(schedule.hooks)
        for a in schedule.pre:
            self.act(a)
            self.settle()
        for uid in schedule.tuples:
            a_unit = self.route["A"][uid % self.R]
            if a_unit.alive:
                self.deliver(a_unit, uid, SRC)
            self.settle()
        sent = set(schedule.tuples)
        lost = sum(1 for t in schedule.tuples if self.sink[t] == 0)
        dup = sum(n - 1 for n in self.sink.values() if n > 1)
        dup += sum(1 for t in self.sink if t not in sent)  # unknown uids count as wrong output
        return Outcome(lost, dup, dict(self.msgs))


def play(schedule: Schedule, semantics: Guarantee, variant: Variant | str, size: int = 3,
         mutants: Iterable[str] = (), **params: object) -> Outcome:
    """One schedule under one semantics and variant."""
    p = ReplicaRingParams.model_validate(
        {"semantics": semantics, "variant": variant, **params})
    return ChainModel(size, p, mutants).run(schedule)


SEMANTICS: Sequence[Guarantee] = (
    Guarantee.AT_MOST_ONCE, Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE)
