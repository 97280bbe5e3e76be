"""Channel machinery of the log-based protocols (``protocols/logged.py``)."""

from __future__ import annotations

from ftctl.runtime.actions import Send
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from protocols.lineage import LineageInstance
from tests.conftest import load


def _sharder() -> tuple[LineageInstance, int, int]:
    graph = ExecutionGraph(load("sharder"))
    core = InstanceCore(graph, "sharder[0]")
    inst = LineageInstance(core, {}, None, None)
    return inst, core.inputs[0], core.out_channels[0]


def _replay(inst: LineageInstance, ch: int, batches: int) -> list[int]:
    """Deliver ``batches`` batches of votes; the seqs sent on the first output channel."""
    for seq in range(1, batches + 1):
        inst.on_message(ch, Batch([(f"a{seq}", 1, seq)] * 40, seq, None))
    out = inst.core.out_channels[0]
    return [a.msg.seq for a in inst.core.take_actions()
            if type(a) is Send and a.channel == out and type(a.msg) is Batch]


def test_a_resend_from_the_start_filters_nothing() -> None:
    inst, inp, out = _sharder()
    inst.on_control({"kind": "resend", "channel": out, "from": 1})
    assert inst.resume == {}
    sent = _replay(inst, inp, 30)
    assert sent and sent == sorted(sent) and sent[0] == 1


def test_a_resend_from_later_drops_what_the_child_has() -> None:
    inst, inp, _ = _sharder()
    sent_all = _replay(inst, inp, 30)
    inst2, inp2, out2 = _sharder()
    start = sent_all[len(sent_all) // 2]
    inst2.on_control({"kind": "resend", "channel": out2, "from": start})
    assert _replay(inst2, inp2, 30) == [s for s in sent_all if s >= start]
    inst2.on_control({"kind": "resend", "channel": out2, "from": 1})
    assert out2 not in inst2.resume
