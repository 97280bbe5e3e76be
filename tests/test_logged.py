"""Channel machinery of the log-based protocols (``protocols/shared/logged.py``)."""

from __future__ import annotations

from ftctl.runtime.actions import Send
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from protocols.contract.events import BatchIn, ControlIn, Started
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.view import InstanceView
from protocols.lineage.instance import LineageInstance
from protocols.shared.logged import Resend
from tests.conftest import load

SHARDER = InstanceId("sharder[0]")


def _sharder() -> tuple[LineageInstance, int, int]:
    graph = ExecutionGraph(load("sharder"))
    core = InstanceCore(graph, SHARDER)
    inst = LineageInstance(InstanceView.of(graph, SHARDER), {SHARDER: core}, NoParams())
    assert inst.handle(Started(SHARDER, 0, "initial"), 0.0) == []
    return inst, core.inputs[0], core.out_channels[0]


def _replay(inst: LineageInstance, ch: int, batches: int) -> list[int]:
    """Deliver ``batches`` batches of votes; the seqs sent on the first output channel."""
    out = inst.core.out_channels[0]
    sent = []
    for seq in range(1, batches + 1):
        acts = inst.handle(BatchIn(SHARDER, ch, Batch([(f"a{seq}", 1, seq)] * 40, seq, None)),
                           0.0)
        sent += [a.msg.seq for a in acts
                 if type(a) is Send and a.channel == out and type(a.msg) is Batch]
    return sent


def test_a_resend_from_the_start_filters_nothing() -> None:
    inst, inp, out = _sharder()
    inst.handle(ControlIn(Resend(out, 1)), 0.0)
    assert inst.resume == {}
    sent = _replay(inst, inp, 30)
    assert sent and sent == sorted(sent) and sent[0] == 1


def test_a_resend_from_later_drops_what_the_child_has() -> None:
    inst, inp, _ = _sharder()
    sent_all = _replay(inst, inp, 30)
    inst2, inp2, out2 = _sharder()
    start = sent_all[len(sent_all) // 2]
    inst2.handle(ControlIn(Resend(out2, start)), 0.0)
    assert _replay(inst2, inp2, 30) == [s for s in sent_all if s >= start]
    inst2.handle(ControlIn(Resend(out2, 1)), 0.0)
    assert out2 not in inst2.resume
