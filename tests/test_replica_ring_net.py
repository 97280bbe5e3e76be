"""replica-ring's message-driven units on a small deterministic network.

A discrete-event loop (constant link delay, timers, a routing table, crashes at chosen
messages) drives the pure units of protocols/replica_ring/unit.py and the coordinator on
the chain src -> A[R] -> B[R] -> out, so Table 1 comes out of counted messages and the
paper's schedules out of real pings, timeouts, takeovers and fetches.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from protocols.contract.spec import Guarantee
from protocols.replica_ring.accounting import PAPER_TABLE1, table1_messages
from protocols.replica_ring.coordinator import Fence, Restart, RingCoordinator
from protocols.replica_ring.messages import (
    KIND,
    Ack,
    Data,
    Fetch,
    Message,
    Purge,
    RecordMsg,
    RecordOk,
    Refetch,
    Reinstate,
    Slot,
    split_slot,
)
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.unit import (
    RETRY,
    Accuse,
    Arm,
    Effect,
    Host,
    Output,
    ReplicaUnit,
    Reply,
    Reroute,
    SinkUnit,
    SourceUnit,
    Tell,
    Unhost,
)

SEMS = (Guarantee.AT_MOST_ONCE, Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE)
DELAY = 0.001
COORD = "coordinator"
# bugs planted in every unit a Net builds (tests/test_replica_ring_mutants.py sets it)
PLANTED: frozenset[str] = frozenset()


@dataclass(frozen=True)
class At:
    """At ``unit``'s ``nth`` message of class ``kind`` for ``uid``: apply the first ``keep``
    effects of handling it (None: do not handle it) and crash. With ``freeze``, the unit
    first stands still that long (it answers nothing, not even pings); then it crashes,
    or, with ``crash`` False, resumes and applies the rest of its effects."""

    unit: Slot
    kind: str
    uid: Hashable
    nth: int = 1
    keep: int | None = None
    freeze: float = 0.0
    crash: bool = True


class Net:
    def __init__(self, size: int, params: ReplicaRingParams, crashes: tuple[At, ...] = (),
                 mutants: frozenset[str] = frozenset()):
        mutants = mutants | PLANTED
        self.size, self.params, self.mutants = size, params, mutants
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.units: dict[Slot, Any] = {}
        self.route: dict[Slot, Slot] = {}
        self.alive: set[Slot] = set()
        self.fenced: set[Slot] = set()
        self.inc: Counter[Slot] = Counter()
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.sink: Counter[Hashable] = Counter()
        self.crashes = list(crashes)
        self.seen: Counter[tuple[Slot, str, Hashable]] = Counter()
        self.thaw: dict[Slot, float] = {}
        self.coord = RingCoordinator(params, {"A": size, "B": size}, mutants)
        self.source = SourceUnit("src[0]", params, lambda uid: (f"A[{uid % size}]", uid))
        self._add("src[0]", self.source, self.source.start())
        self._add("out[0]", SinkUnit("out[0]", params, mutants), [])
        for op in ("A", "B"):
            for i in range(size):
                self._add(f"{op}[{i}]", self._replica(op, i), None)

    def _replica(self, op: str, i: int) -> ReplicaUnit:
        nxt = "B" if op == "A" else "out"

        def process(slot: Slot, uid: Hashable, payload: Any) -> list[tuple[Slot, Hashable, Any]]:
            dest = f"B[{uid % self.size}]" if nxt == "B" else "out[0]"  # type: ignore[operator]
            return [(dest, uid, payload)]

        return ReplicaUnit(op, i, self.size, self.params, process, frozenset({"src"}),
                           self.mutants, incarnation=self.incarnation(f"{op}[{i}]"))

    def incarnation(self, unit: Slot) -> int:
        """Counted from 0 for the first start, as on the hosts."""
        return max(0, self.inc[unit] - 1)

    def _add(self, unit: Slot, obj: Any, effects: list[Effect] | None) -> None:
        self.units[unit] = obj
        self.route[unit] = unit
        self.alive.add(unit)
        self.inc[unit] += 1
        self.apply(unit, obj.start() if effects is None else effects)

    def push(self, after: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (self.now + after, next(self.seq), fn))

    # ------------------------------------------------------------ effects
    def apply(self, unit: Slot, effects: list[Any]) -> None:
        if unit in self.fenced or (unit != COORD and unit not in self.alive):
            return
        for e in effects:
            if isinstance(e, Tell):
                dst = self.route.get(e.to, e.to)
                self.counts[KIND[type(e.msg)], split_slot(unit)[0] if unit != COORD else COORD,
                            split_slot(dst)[0]] += 1
                # routes resolve when a message is sent: in flight, it stays on its link
                self.push(DELAY, lambda e=e, s=unit, d=dst: self.deliver(s, e.to, d, e.msg))
            elif isinstance(e, Reply):
                self.counts[KIND[type(e.msg)], split_slot(unit)[0], split_slot(e.unit)[0]] += 1
                self.push(DELAY, lambda e=e, s=unit: self.deliver(s, e.unit, e.unit, e.msg))
            elif isinstance(e, Arm):
                inc = self.inc[unit]
                self.push(e.after, lambda e=e, u=unit, inc=inc: self.timer(u, e.key, inc))
            elif isinstance(e, Accuse):
                self.push(DELAY, lambda e=e, by=unit: self.apply(COORD, self.coord.on_accuse(
                    e.slot, e.host, by, self.route.__getitem__, lambda u: u in self.alive,
                    self.incarnation)))
            elif isinstance(e, Reroute):
                self.route[e.slot] = e.to
            elif isinstance(e, Output):
                self.sink[e.uid] += 1
            elif isinstance(e, Fence):
                self.fenced.add(e.unit)
                self.alive.discard(e.unit)
            elif isinstance(e, Restart):
                self.fenced.discard(e.slot)
                op, i = split_slot(e.slot)
                self.inc[e.slot] += 1
                new = self._replica(op, i)
                self.units[e.slot] = new
                self.alive.add(e.slot)
                self.apply(e.slot, new.start(reinstating=True))
            elif isinstance(e, Host):
                self.apply(COORD, self.coord.on_adopted(e.slot))
            else:
                assert isinstance(e, Unhost)

    def timer(self, unit: Slot, key: str, inc: int) -> None:
        if unit == COORD:
            self.apply(COORD, self.coord.on_timer(
                key, lambda s: self.route[s], lambda u: u in self.alive))
        elif self.now < self.thaw.get(unit, 0.0):
            self.at(self.thaw[unit], lambda: self.timer(unit, key, inc))
        elif unit in self.alive and self.inc[unit] == inc:
            self.apply(unit, self.units[unit].on_timer(key, self.now))

    def deliver(self, sender: Slot, to: Slot, unit: Slot, msg: Message) -> None:
        if unit not in self.alive:
            return  # lost with the dead unit
        if self.now < self.thaw.get(unit, 0.0):
            self.at(self.thaw[unit], lambda: self.deliver(sender, to, unit, msg))
            return
        uid = getattr(msg, "uid", None)
        k = (unit, type(msg).__name__, uid)
        self.seen[k] += 1
        hit = next((c for c in self.crashes if (c.unit, c.kind, c.uid) == k
                    and c.nth == self.seen[k]), None)
        obj = self.units[unit]
        if hit is not None and hit.keep is None:
            self.crash(unit)
            return
        effects = (obj.on_message(sender, msg, to=to) if isinstance(obj, ReplicaUnit)
                   else obj.on_message(sender, msg))
        if hit is not None and hit.freeze:
            self.apply(unit, effects[:hit.keep])
            self.thaw[unit] = self.now + hit.freeze
            rest = effects[hit.keep:]
            self.at(self.thaw[unit], lambda: self.crash(unit) if hit.crash
                    else self.apply(unit, rest))
        elif hit is not None:
            self.apply(unit, effects[:hit.keep])
            self.crash(unit)
        else:
            self.apply(unit, effects)

    def crash(self, unit: Slot) -> None:
        self.alive.discard(unit)

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), fn))

    def run(self, tuples: tuple[int, ...], until: float | None = None, gap: float = 0.5,
            pre: tuple[Slot, ...] = (), start: float | None = None,
            kills: tuple[tuple[float, Slot], ...] = ()) -> tuple[int, int]:
        for n, unit in enumerate(pre):
            self.at(0.01 + n * 0.5, lambda u=unit: self.crash(u))
        for t, unit in kills:
            self.at(t, lambda u=unit: self.crash(u))
        if start is None:
            start = 0.02 + len(pre) * 0.5
        for n, uid in enumerate(tuples):
            self.at(start + n * gap,
                    lambda uid=uid: self.apply("src[0]", self.source.emit(uid)))
        end = start + len(tuples) * gap + 2.0 if until is None else until
        while self.heap and self.heap[0][0] <= end:
            self.now, _, fn = heapq.heappop(self.heap)
            fn()
        lost = sum(1 for t in tuples if self.sink[t] == 0)
        dup = sum(n - 1 for n in self.sink.values() if n > 1)
        return lost, dup

    def kinds(self, skip_source: bool = True) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (kind, a, b), n in self.counts.items():
            if skip_source and "src" in (a, b):
                continue
            out[kind] += n
        return dict(out)


def play(tuples, sem, variant, crashes=(), pre=(), size=3, mutants=frozenset(), start=None,
         kills=(), **kw) -> tuple[int, int]:
    kw.setdefault("reinstate_after", None)
    p = ReplicaRingParams(semantics=sem, variant=variant, **kw)
    return Net(size, p, tuple(crashes), mutants).run(
        tuple(tuples), pre=tuple(pre), start=start, kills=tuple(kills))


def each(tuples, crashes, variant, pre=(), amo=None, mutants=frozenset(), **kw):
    """Outcomes for the three semantics; ``amo``: the crash point under at-most-once,
    which exchanges no records, acks or deletes to hook on."""
    return tuple(play(tuples, g, variant, amo if amo is not None and g is SEMS[0] else crashes,
                      pre, mutants=mutants, **kw) for g in SEMS)


BEFORE_PROCESSING = (At("B[1]", "Data", 1, keep=0),)  # at-most-once: received, then dead


# ---------------------------------------------------------------- Table 1, counted

def test_table1_from_counted_messages():
    for r in (2, 4):
        check_table1_counted(r)


def check_table1_counted(r: int) -> None:
    p = ReplicaRingParams(semantics="exactly-once", reinstate_after=None)
    net = Net(r, p)
    n = 100 * r
    assert net.run(tuple(range(n)), gap=0.002, until=2.0) == (0, 0)
    k = Counter(net.kinds())
    assert k["record"] == table1_messages(r) == PAPER_TABLE1[r]
    assert k["purge"] == table1_messages(r) and k["record_ok"] == table1_messages(r)
    # data, ack, delete: A->B and B->out hops (the source edge is outside Table 1)
    assert (k["data"], k["ack"], k["delete"]) == (2 * n, 2 * n, 2 * n)
    assert "takeover" not in k and "fetch" not in k


def test_at_most_once_sends_no_records_acks_or_deletes():
    net = Net(2, ReplicaRingParams(semantics="at-most-once", reinstate_after=None))
    assert net.run(tuple(range(200)), gap=0.002, until=2.0) == (0, 0)
    k = Counter(net.kinds())
    assert k["data"] == 400 and not {"record", "ack", "delete", "purge"} & set(k)


# ---------------------------------------------------------------- schedules (R = 3)

Z = (0, 0)


def test_s0_dies_after_sync_before_processing():
    # faithful: B[1] acked first; the second RecordOk finishes the sync, then it dies
    faithful = (At("B[1]", "RecordOk", 1, nth=2, keep=0),)
    fixed = (At("B[1]", "RecordOk", 1, nth=2, keep=1),)  # the ack goes out, then it dies
    assert each((1, 4), faithful, "faithful", amo=BEFORE_PROCESSING) == ((1, 0), Z, Z)
    assert each((1, 4), fixed, "fixed", amo=BEFORE_PROCESSING) == ((1, 0), Z, Z)


def test_s2_dies_right_after_its_ack_f1():
    crash = (At("B[1]", "Data", 1, keep=1),)
    assert each((1,), crash, "faithful", amo=BEFORE_PROCESSING) == ((1, 0),) * 3
    # fixed: no ack before the sync; A[1] retries to slot 1, now served by B[2]
    assert each((1,), BEFORE_PROCESSING, "fixed") == ((1, 0), Z, Z)


def test_s3_partial_sync_misses_the_taker_f2():
    # faithful: ack, then one record (to B[0]), then death
    assert each((1,), (At("B[1]", "Data", 1, keep=2),), "faithful") == (Z, (1, 0), (1, 0))
    assert each((1,), (At("B[1]", "Data", 1, keep=1),), "fixed") == (Z, Z, Z)


def test_s1_dies_after_the_sink_took_its_output_f3():
    crash = (At("B[1]", "Ack", 1, keep=0),)
    assert each((1,), crash, "faithful") == (Z, (0, 1), (0, 1))
    # fixed: step (8) waits for the sink's delete; dying before it replays, the sink dedups
    fixed = (At("B[1]", "Delete", 1, keep=0),)
    assert each((1,), fixed, "fixed") == (Z, (0, 1), Z)


def test_s6_dead_successor_stalls_faithful_ring_walk_fixes_f6():
    tuples = (0, 1, 2, 3, 4, 5)
    # The spec's step model loses the 4 tuples of slots 1 and 2. With messages it is
    # worse: B[0]'s record sync to slot 1 (still routed to the dead B[2]) is retried
    # until success (§4.2) and never confirmed, so B[0] stalls too, except under
    # at-most-once, which syncs nothing.
    assert each(tuples, (), "faithful", pre=("B[1]", "B[2]")) == ((4, 0), (6, 0), (6, 0))
    assert each(tuples, (), "fixed", pre=("B[1]", "B[2]")) == (Z, Z, Z)


def test_every_semantics_holds_without_failures():
    for g in SEMS:
        for v in ("faithful", "fixed"):
            assert play(range(12), g, v) == Z


def test_detection_delay_is_within_the_ping_bounds():
    p = ReplicaRingParams(reinstate_after=None)
    net = Net(3, p)
    net.at(0.5, lambda: net.crash("B[1]"))
    moved: list[float] = []
    real = net.apply

    def spy(unit, effects):
        if any(isinstance(e, Reroute) and e.slot == "B[1]" for e in effects):
            moved.append(net.now)
        real(unit, effects)

    net.apply = spy  # type: ignore[method-assign]
    net.run((), until=2.0)
    assert len(moved) == 1
    delay = moved[0] - 0.5
    lo = p.ping_timeout - p.ping_every - 4 * DELAY
    assert lo <= delay <= p.ping_timeout + p.ping_every + 4 * DELAY, delay
    assert net.route["B[1]"] == "B[2]"


def test_reinstatement_hands_the_table_over_and_takes_the_slot_back():
    p = ReplicaRingParams(reinstate_after=0.5)
    net = Net(3, p)
    net.at(0.1, lambda: net.crash("B[1]"))
    assert net.run((1, 4), until=1.5) == Z
    assert net.route["B[1]"] == "B[1]" and "B[1]" in net.alive
    b1, b2 = net.units["B[1]"], net.units["B[2]"]
    assert b2.ring.represents == [2] and b1.ring.represents == [1]
    assert b1.records.knows(1, "A[1]")  # the stand-in's records came with the table
    assert net.run((7,), until=3.0) == Z and net.sink[7] == 1


def test_s5_reinstated_replica_needs_the_stand_ins_table_f4():
    # B[1] dies at 0.01, is taken over at 0.2 and restarted at 0.3; tuple 0 reaches B[0]
    # while B[2] stands in for slot 1; B[0] freezes after its sync and dies after the
    # reinstatement, so its taker is the new B[1]
    def crash(keep):
        return (At("B[0]", "RecordOk", 0, nth=2, keep=keep, freeze=0.3),)

    amo = (At("B[0]", "Data", 0, keep=0, freeze=0.3),)
    kw = {"pre": ("B[1]",), "start": 0.23, "reinstate_after": 0.1}
    assert each((0,), crash(0), "faithful", amo=amo, **kw) == ((1, 0),) * 3
    assert each((0,), crash(1), "fixed", amo=amo, **kw) == ((1, 0), Z, Z)


def test_s9_false_suspicion_duplicates_unless_fenced_f8():
    # B[1] stands still 0.4 s after its sync; B[0] suspects it and B[2] replays; B[1] then
    # resumes and sends its tuple too
    faithful = (At("B[1]", "RecordOk", 1, nth=2, keep=0, freeze=0.4, crash=False),)
    fixed = (At("B[1]", "RecordOk", 1, nth=2, keep=1, freeze=0.4, crash=False),)
    amo = (At("B[1]", "Data", 1, keep=0, freeze=0.4, crash=False),)
    assert each((1,), faithful, "faithful", amo=amo) == (Z, (0, 1), (0, 1))
    # fixed: the coordinator fences the suspect; at-most-once has nothing to replay
    assert each((1,), fixed, "fixed", amo=amo) == ((1, 0), Z, Z)


def test_s1a_origin_dies_after_the_next_hop_acked():
    crash = (At("A[1]", "Ack", 1, keep=0),)
    for variant in ("faithful", "fixed"):
        # B[1] holds the record: the replay of A[1]'s taker is dropped under exactly-once
        assert each((1,), crash, variant, amo=()) == (Z, (0, 1), Z)


def test_s4b_origin_dies_first_then_the_receiver_f5():
    # B[1] syncs tuple 1 and stands still; A[1] dies and is taken over; then B[1] dies
    kills = ((0.03, "A[1]"),)
    amo = (At("B[1]", "Data", 1, keep=0, freeze=0.5),)
    faithful = (At("B[1]", "RecordOk", 1, nth=2, keep=0, freeze=0.5),)
    fixed = (At("B[1]", "RecordOk", 1, nth=2, keep=1, freeze=0.5),)
    assert each((1,), faithful, "faithful", amo=amo, kills=kills) == ((1, 0),) * 3
    # fixed: A[2] regenerates the tuple (A[1]'s record stayed pending) and B[2] replays it;
    # A[2]'s resend reaches B[2] while that replay is in progress and is not run twice,
    # so at-least-once shows no duplicate here (the spec's step model counts one)
    assert each((1,), fixed, "fixed", amo=amo, kills=kills) == ((1, 0), Z, Z)
    # without the fix the origin's copy dies with it
    assert play((1,), SEMS[2], "fixed", fixed, kills=kills, without="F5") == (1, 0)


def test_two_replica_survivor_takes_over_and_pings_nobody():
    net = Net(2, ReplicaRingParams(reinstate_after=None))
    net.at(0.01, lambda: net.crash("B[0]"))
    assert net.run((0, 1), start=0.5) == Z
    b1 = net.units["B[1]"]
    assert net.route["B[0]"] == "B[1]" and b1.ring.represents == [1, 0]
    assert b1.ring.ping_targets() == []


def test_a_stale_suspicion_does_not_stop_the_slots_new_host():
    # B[0] and B[1] die together; B[2] takes slot 0 over. B[0] is reinstated the moment
    # B[2] suspects slot 1, and pings slot 1 before B[2] has taken it over: the ping is
    # lost with the dead B[1]. When it times out, slot 1 is B[2]'s, which B[0] never
    # pinged: the coordinator tells B[0] who hosts the slot now and stops nobody
    # (stopping B[2] would hand both its slots over and lose what it holds)
    p = ReplicaRingParams(ping_every=0.0015, ping_timeout=0.006, retry_every=0.002,
                          reinstate_after=None)
    net = Net(3, p)
    net.at(0.01, lambda: (net.crash("B[0]"), net.crash("B[1]")))
    real = net.apply
    reinstated: list[float] = []

    def spy(unit: Slot, effects: list[Any]) -> None:
        real(unit, effects)
        if unit == "B[2]" and Accuse("B[1]", ("B[1]", 0)) in effects and not reinstated:
            reinstated.append(net.now)
            real(COORD, [Restart("B[0]")])

    net.apply = spy  # type: ignore[method-assign]
    assert net.run((0, 1, 2, 3), start=0.1, gap=0.01) == Z
    assert reinstated and net.route["B[1]"] == "B[2]"
    assert "B[2]" not in net.fenced and "B[2]" in net.alive
    # the pinger learned the slot's generation from the coordinator's answer
    assert net.units["B[0]"].host_of(1) == ("B[2]", 0)


def test_a_record_for_a_slot_handed_back_is_resent_to_its_replica():
    # B[1] died; B[2] stands in for slot 1 and B[1] is restarted. B[0] syncs tuple 7 while
    # slot 1 still routes to B[2], and that record reaches B[2] after B[2] handed its table
    # to the new B[1]. Confirmed there, it would exist nowhere B[1] looks when it takes
    # slot 0 over; unconfirmed, B[0] sends it again to slot 1, which is B[1]'s by then
    p = ReplicaRingParams()

    def replica(i: int, incarnation: int = 0) -> ReplicaUnit:
        return ReplicaUnit("B", i, 3, p, lambda slot, uid, payload: [("out[0]", uid, payload)],
                           frozenset({"src"}), PLANTED, incarnation=incarnation)

    b0, b2 = replica(0), replica(2)
    b2.take_over(1)
    b1 = replica(1, incarnation=1)
    assert Reply("B[2]", Reinstate("B[1]")) in b1.start(reinstating=True, stand_in="B[2]")
    tables = [e.msg for e in b2.on_message("B[1]", Reinstate("B[1]")) if isinstance(e, Reply)]
    assert len(tables) == 1
    b1.on_message("B[2]", tables[0])
    rec = RecordMsg(7, "A[0]", 0)
    assert b0.on_data("B[0]", Data(7, "x", "A[0]")) == [Tell("B[1]", rec), Tell("B[2]", rec)]
    assert b2.on_message("B[0]", rec, to="B[1]") == []  # not confirmed for slot 1
    assert b2.on_message("B[0]", rec, to="B[2]") == [Reply("B[0]", RecordOk(7, "B[2]"))]
    assert b0.on_message("B[2]", RecordOk(7, "B[2]")) == []
    assert b0.on_timer(RETRY, 0.05) == [Arm(RETRY, 0.05)]  # sent this period
    assert b0.on_timer(RETRY, 0.10) == [Tell("B[1]", rec), Arm(RETRY, 0.05)]
    assert b1.on_message("B[0]", rec, to="B[1]") == [Reply("B[0]", RecordOk(7, "B[1]"))]
    assert b0.on_message("B[1]", RecordOk(7, "B[1]")) == [
        Reply("A[0]", Ack(7)), Tell("out[0]", Data(7, "x", "B[0]"))]
    # B[0] dies before the sink's delete: its taker B[1] has the record and fetches it
    assert Tell("A[0]", Fetch(7)) in b1.take_over(0)
    # a purge for the handed-back slot is sent once: the stand-in passes it on
    assert b2.on_message("B[0]", Purge(7, "A[0]"), to="B[1]") == [Tell("B[1]", Purge(7, "A[0]"))]


def test_an_origin_still_regenerating_does_not_answer_not_found():
    # A[2] takes slot 1 over and re-fetches tuple 5 from the source (T3). A purge of the
    # tuple's record reaches it meanwhile, so no record of its own is pending. B[2], taker
    # of B[1], asks slot 1 for its output 5: the tuple is still being regenerated here,
    # so A[2] answers nothing and B[2] asks again; "not found" would drop it for good (T5)
    p = ReplicaRingParams()
    a2 = ReplicaUnit("A", 2, 3, p, lambda slot, uid, payload: [("B[0]", uid, payload)],
                     frozenset({"src"}), PLANTED)
    a2.on_message("A[1]", RecordMsg(5, "src[0]", 1))
    assert Tell("src[0]", Fetch(5)) in a2.take_over(1)
    a2.on_message("A[0]", Purge(5, "src[0]"))
    assert not a2.records.pending_of(2) and a2.fetching
    assert a2.on_message("B[2]", Fetch(5), to="A[1]") == []
    assert Refetch(5, None, found=False) not in a2.on_message("B[2]", Fetch(5))
