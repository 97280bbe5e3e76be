"""One channel's payload log (``protocols/shared/payload_log.py``): kept as objects or
encoded, it answers every resend and trim alike."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from protocols.shared.payload_log import PayloadLog
from tests.conftest import load

# An op: ("send", n records) | ("trim", upto) | ("resend", start) | ("drop", 0)
OPS = st.lists(st.tuples(st.sampled_from(["send", "send", "trim", "resend", "drop"]),
                         st.integers(0, 30)), max_size=60)  # fmt: skip


def _batch(seq: int, n: int) -> Batch:
    records = [(f"k{seq}-{i}", seq * i, 1000 * seq + i) for i in range(n)]
    return Batch(records, seq, seq - 1 if seq % 2 else None, ("x[0]", seq, ()))


def _as_tuple(b: Batch) -> tuple[object, ...]:
    return (list(b.records), b.seq, b.watermark, b.meta)


@pytest.mark.parametrize("encoded", [False, True])
@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_a_log_answers_like_the_list_of_what_was_sent(encoded: bool,
                                                      ops: list[tuple[str, int]]) -> None:
    log, model, seq = PayloadLog(encoded), [], 0
    for op, arg in ops:
        if op == "send":
            seq += 1
            batch = _batch(seq, arg)
            log.append(seq, batch)
            model.append(_batch(seq, arg))
        elif op == "trim":
            log.trim(arg)
            model = [b for b in model if b.seq > arg]
        elif op == "resend":
            assert [_as_tuple(b) for b in log.since(arg)] == [
                _as_tuple(b) for b in model if b.seq >= arg]
        elif model:
            log.drop_oldest()
            del model[0]
        assert len(log) == len(model)
        assert [_as_tuple(b) for b in log] == [_as_tuple(b) for b in model]


def test_an_encoded_log_keeps_the_batch_as_it_was_sent() -> None:
    log = PayloadLog(encoded=True)
    batch = _batch(1, 3)
    log.append(1, batch)
    batch.records.append(("late", 0, 0))  # whoever holds the sent object may change it
    batch.meta = None
    (again,) = log.since(1)
    assert _as_tuple(again) == _as_tuple(_batch(1, 3))
    assert again is not batch


def test_lineage_resends_what_it_sent_not_what_the_object_became() -> None:
    """Lineage's logs hold everything sent until the end, so they are kept encoded: a
    resend rebuilds each batch as it was sent."""
    graph = ExecutionGraph(load("sharder"))
    me = InstanceId("sharder[0]")
    core = InstanceCore(graph, me)
    inst = LineageInstance(InstanceView.of(graph, me), {me: core}, NoParams())
    inst.handle(Started(me, 0, "initial"), 0.0)
    acts = inst.handle(BatchIn(me, core.inputs[0], _batch(1, 40)), 0.0)
    sent = [a for a in acts if type(a) is Send and type(a.msg) is Batch]
    assert sent
    before = {a.channel: _as_tuple(a.msg) for a in sent}
    for a in sent:
        a.msg.records.clear()
    for ch, want in before.items():
        acts = inst.handle(ControlIn(Resend(ch, 1)), 0.0)
        assert [_as_tuple(a.msg) for a in acts if type(a.msg) is Batch] == [want]
