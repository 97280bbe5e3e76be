"""The seam between a core and its protocol: the core hands back its output, the
protocol decides what becomes of a sink's records (``InstanceLogic.on_output``)."""

from __future__ import annotations

from typing import Any

from ftctl.kernel.unit import Unit
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from ftctl.runtime.partition import hash_split
from protocols.contract.actions import Emit, InstanceAction, Send
from protocols.contract.events import BatchIn, Started
from protocols.contract.logic import InstanceLogic
from protocols.contract.names import InstanceId
from protocols.contract.params import ProtocolParams
from tests.conftest import load

GRAPH = ExecutionGraph(load("wordcount"))
SINK = InstanceId("out[0]")


class Holding(InstanceLogic[ProtocolParams]):
    """Keeps a sink's records instead of making them visible."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.held: list[tuple[Any, Any]] = []

    def on_output(self, slot: InstanceId, records: list[tuple[Any, Any]]
                  ) -> list[InstanceAction]:
        self.held += records
        return []


def _sink_batch(unit: Unit, n: int) -> list[InstanceAction]:
    ch = unit.core.inputs[0]
    return unit.handle(BatchIn(SINK, ch, Batch([("a", n, n), ("b", n, n)], n)), 0.0)


def test_a_sink_core_hands_back_its_records_unemitted() -> None:
    core = InstanceCore(GRAPH, SINK)
    core.deliver(core.inputs[0], Batch([("a", 1, 5), ("b", 2, 6)], 1))
    core.deliver(core.inputs[1], Batch([("c", 3, 7)], 1))
    out = core.take_output()
    assert out.records == [("a", 1), ("b", 2), ("c", 3)] and out.sends == []
    assert core.take_output().records == []  # taken once


def test_by_default_a_sinks_records_are_emitted_and_a_protocol_may_hold_them() -> None:
    plain = Unit(InstanceLogic, GRAPH, SINK, ProtocolParams(), 0)
    plain.handle(Started(SINK, 0, "initial"), 0.0)
    assert _sink_batch(plain, 1) == [Emit(SINK, [("a", 1), ("b", 1)])]
    holding = Unit(Holding, GRAPH, SINK, ProtocolParams(), 0)
    holding.handle(Started(SINK, 0, "initial"), 0.0)
    assert _sink_batch(holding, 1) == [] and _sink_batch(holding, 2) == []
    assert holding.logic.held == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]  # type: ignore[attr-defined]


def test_an_inner_instance_hands_back_numbered_sends_split_by_hash_split() -> None:
    core = InstanceCore(GRAPH, "split[0]")
    core.deliver(core.inputs[0], Batch([(0, "a b c d e f", 0), (1, "g h a b", 1)]))
    out = core.take_output()
    assert out.records == [] and all(type(a) is Send for a in out.sends)
    words = [r for a in out.sends for r in a.msg.records]  # type: ignore[union-attr]
    chans = core.spec.outputs[0].channels
    expected = hash_split(sorted(words), chans)
    assert {a.channel: sorted(a.msg.records) for a in out.sends} == {  # type: ignore[union-attr]
        ch: sorted(recs) for ch, recs in expected.items()}
    assert [a.msg.seq for a in out.sends] == [1] * len(out.sends)  # type: ignore[union-attr]
    assert len(expected) == 2  # both channels get words: the test can tell them apart
