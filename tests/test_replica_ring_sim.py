"""replica-ring on ftctl's simulation host: the kernel routes, adopts and counts.

Table 1 is read from the host's own per-kind message counters (``SimStats.kinds``); a
replica killed mid-run is taken over through ``Route``/``AdoptSlot`` and reinstated.
"""

from __future__ import annotations

from collections import Counter

import pytest

from ftctl.kernel.routing import Routing
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.host import SimHost, SimResult
from protocols.contract.spec import Guarantee
from protocols.replica_ring.accounting import PAPER_TABLE1, table1_messages
from protocols.replica_ring.model import SEMANTICS
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.spec import SPEC
from tests.replica_ring_topologies import chain


def run(r: int, semantics: Guarantee) -> SimResult:
    host = SimHost(ExecutionGraph(chain(r, 100 * r, sources=r)), SPEC,
                   ReplicaRingParams(semantics=semantics, reinstate_after=None), seed=1)
    res = host.run()
    assert res.complete and sum(len(v) for v in res.outputs.values()) == 100 * r
    return res


@pytest.mark.parametrize("r", [2, 4])
def test_table1_from_messages_counted_on_the_simulation_host(r):
    k = run(r, Guarantee.EXACTLY_ONCE).stats.kinds
    colleague: Counter[str] = Counter()
    for (kind, a, b), n in k.items():
        if a == b:
            colleague[kind] += n
    assert colleague["RecordMsg"] == table1_messages(r) == PAPER_TABLE1[r]
    assert colleague["Purge"] == colleague["RecordOk"] == table1_messages(r)
    n = 100 * r
    assert {key: k[key] for key in (("Ack", "B", "A"), ("Ack", "out", "B"),
                                     ("Delete", "B", "A"), ("Delete", "out", "B"),
                                     ("data", "A", "B"), ("data", "B", "out"))} == {
        ("Ack", "B", "A"): n, ("Ack", "out", "B"): n, ("Delete", "B", "A"): n,
        ("Delete", "out", "B"): n, ("data", "A", "B"): n, ("data", "B", "out"): n}


def test_at_most_once_sends_no_records_on_the_simulation_host():
    k = run(2, Guarantee.AT_MOST_ONCE).stats.kinds
    assert not {kind for kind, _a, _b in k} & {"RecordMsg", "Purge", "Ack", "Delete"}
    assert k["data", "A", "B"] == 200


def test_routing_table_moves_a_slot_and_back():
    r = Routing()
    assert r.unit_of("B[1]") == "B[1]" and not r.set("B[1]", "B[1]")
    assert r.set("B[1]", "B[2]") and r.unit_of("B[1]") == "B[2]" and r.away("B[2]") == ["B[1]"]
    assert r.set("B[1]", "B[1]") and r.unit_of("B[1]") == "B[1]" and not r.moved


def killed(semantics: Guarantee, victim: str, at: float) -> tuple[SimResult, SimResult]:
    """The fault-free run and one where ``victim`` crashes ``at`` (a fraction) into it."""
    graph = ExecutionGraph(chain(3, 120))
    params = ReplicaRingParams(semantics=semantics, reinstate_after=0.1)
    free = SimHost(graph, SPEC, params, seed=5).run()
    strike = Strike(int(free.stats.events * at), 1, (victim,))
    return free, SimHost(graph, SPEC, params, seed=5,
                         schedule=FailureSchedule([strike])).run()


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize(("victim", "at"), [("B[1]", 0.3), ("A[2]", 0.4)])
def test_a_killed_replica_is_taken_over_and_reinstated_on_the_sim_host(semantics, victim, at):
    free, res = killed(semantics, victim, at)
    gold = Counter(free.outputs["out"])
    got = Counter(res.outputs["out"])
    lost, dup = sum((gold - got).values()), sum((got - gold).values())
    if semantics is not Guarantee.AT_MOST_ONCE:
        assert lost == 0
    if semantics is not Guarantee.AT_LEAST_ONCE:
        assert dup == 0
    routes = [(e.payload["slot"], e.payload["to"]) for e in res.events if e.kind == "route-changed"]
    taker = f"{victim[0]}[{(int(victim[2]) + 1) % 3}]"
    assert routes == [(victim, taker), (victim, victim)]  # taken over, then reinstated
    assert res.complete


def test_sink_store_shows_each_named_record_once():
    from ftctl.store import SinkStore
    store = SinkStore()
    store.append("out[0]", [("a", 1), ("b", 2)], uid=1)
    store.append("out[0]", [("a", 1), ("b", 2)], uid=1)  # the same batch again: nothing
    store.append("out[0]", [("a", 1), ("b", 2), ("c", 3)], uid=1)  # its record 2 is new
    store.append("out[0]", [("a", 1)], uid=1)  # record 0 of it again: nothing
    store.append("out[0]", [("a", 1), ("d", 4)], uid=2)  # another name: both show
    store.append("out[0]", [("a", 1)])  # no name: appended as is
    assert store.visible["out[0]"] == [("a", 1), ("b", 2), ("c", 3), ("a", 1), ("d", 4),
                                       ("a", 1)]


def test_peer_messages_keep_their_order_per_pair_of_units():
    from protocols.replica_ring.messages import Ping
    host = SimHost(ExecutionGraph(chain(3, 9)), SPEC, ReplicaRingParams(), seed=2)
    host.run()  # a finished run: every unit is live and idle
    host.heap.clear()
    for n in range(50):
        host.send_peer("B[0]", "B[1]", Ping(f"B[{n}]"))
    arrivals = sorted(host.heap)
    assert [d[3].slot for _t, _s, _k, d in arrivals] == [f"B[{n}]" for n in range(50)]

