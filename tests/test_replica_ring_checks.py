"""replica-ring's history check (protocols/replica_ring/checks.py): a running unit is fenced
only for a suspicion of its own generation. The simulator judges every run on it
(``ProtocolSpec.checks``), so the conformance kit catches ``stale-suspicion`` by the
healthy unit it stops, whether or not the stop costs output."""

from __future__ import annotations

import pytest

from ftctl.config.load import load_topology
from ftctl.conformance.cases import BUNDLED_TOPOLOGIES
from ftctl.kernel.history import HistoryEvent
from ftctl.sim.runner import Simulator
from protocols.contract.view import GraphView
from protocols.registry import get_protocol
from protocols.replica_ring.checks import (
    FENCED,
    HEALTHY_FENCED,
    RELEASED_CONFIRMED,
    breaches,
    fence_note,
    healthy_fenced,
    released_note,
)
from protocols.replica_ring.spec import rings

pytestmark = pytest.mark.sim

SHORT = {"semantics": "exactly-once", "variant": "fixed", "ping_every": 0.002,
         "ping_timeout": 0.006, "reinstate_after": 0.004, "retry_every": 0.002}


def _note(slot: str, named: tuple[str, int], unit: str, running: bool,
          incarnation: int, seq: int = 1) -> HistoryEvent:
    n = fence_note(slot, named, "evens[2]", unit, running, incarnation)
    return HistoryEvent(seq, 0.01 * seq, "sim", "protocol",
                        {"name": n.kind, "data": dict(n.data)})


def test_a_fence_of_the_named_generation_or_of_a_dead_unit_holds():
    events = [
        _note("evens[0]", ("evens[0]", 0), "evens[0]", True, 0, 1),  # the one pinged
        _note("evens[0]", ("evens[0]", 0), "evens[0]", False, 1, 2),  # dead since
        _note("evens[1]", ("evens[1]", 0), "evens[0]", False, 1, 3),  # moved, to a dead unit
        HistoryEvent(4, 0.04, "sim", "instance-stopped", {"instances": ["evens[1]"]}),
    ]
    assert healthy_fenced(events) == {}


def test_a_running_unit_fenced_for_another_generation_is_counted():
    events = [
        # the slot moved on to evens[0], which never was pinged
        _note("evens[1]", ("evens[1]", 0), "evens[0]", True, 0, 1),
        # the pinged unit runs again as a later incarnation
        _note("evens[1]", ("evens[1]", 0), "evens[1]", True, 1, 2),
    ]
    assert healthy_fenced(events) == {HEALTHY_FENCED: 2}


def test_a_record_confirmed_for_a_slot_handed_back_is_counted_with_the_fences():
    stale = _note("evens[1]", ("evens[1]", 0), "evens[0]", True, 0, 1)
    n = released_note("evens[1]", ("k", 3), "evens[0]")
    confirmed = HistoryEvent(2, 0.02, "sim", "protocol", {"name": n.kind, "data": dict(n.data)})
    assert breaches([stale, confirmed]) == {HEALTHY_FENCED: 1, RELEASED_CONFIRMED: 1}
    assert breaches([]) == {}


def _sim(protocol: str) -> Simulator:
    # the kit's catch: ring-fanout at short timings, a replica struck with its ring
    # successor or just after a restart (+neighbours)
    topo = BUNDLED_TOPOLOGIES / "ring-fanout.yaml"
    return Simulator(load_topology(topo), get_protocol(protocol), SHORT,
                     kinds=("pair", "after-restart"))


def test_stale_suspicion_is_judged_by_the_healthy_unit_it_fences():
    # the protocol fences only the units it suspected, as the generation it suspected,
    # and keeps exactly-once; the mutant fences a running unit of another generation
    seed = 14
    sim = _sim("replica-ring")
    members = frozenset().union(*rings(GraphView(sim.graph)))
    ok = sim.run_one(seed)
    assert ok.verdict.passed and ok.verdict.checks == {}
    notes = [e.data["data"] for e in ok.result.events
             if e.kind == "protocol" and e.data["name"] == FENCED]
    stopped = [i for e in ok.result.events if e.kind == "instance-stopped"
               for i in e.data["instances"] if i in members]  # sources restart as usual
    assert notes and sorted(n["unit"] for n in notes) == sorted(stopped)  # every fence noted
    bad = _sim("replica-ring/stale-suspicion").run_one(seed)
    assert bad.verdict.checks.get(HEALTHY_FENCED, 0) >= 1
    assert not bad.verdict.passed
    assert HEALTHY_FENCED in bad.verdict.totals()


def test_confirm_released_is_judged_by_the_record_it_confirms_for_a_slot_handed_back():
    # the kit's catch (ring-merge, short timings, +neighbours, seed 1): takers re-mark and
    # re-fetch what the record table lacks, so the output may survive the bug; the
    # confirmation for a slot its unit no longer speaks for does not
    seed = 1
    topo = load_topology(BUNDLED_TOPOLOGIES / "ring-merge.yaml")
    sims = [Simulator(topo, get_protocol(p), SHORT, kinds=("pair", "after-restart"))
            for p in ("replica-ring", "replica-ring/confirm-released")]
    ok, bad = (sim.run_one(seed).verdict for sim in sims)
    assert ok.passed and ok.checks == {}
    assert bad.checks.get(RELEASED_CONFIRMED, 0) >= 1 and not bad.passed
