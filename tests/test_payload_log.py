"""One channel's payload log (``protocols/shared/payload_log.py``): kept as objects or
encoded, it answers every resend and trim alike, and packs for a snapshot what it holds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.runtime.actions import Send
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from ftctl.runtime.shared_records import shared
from protocols.contract.actions import SetTimer
from protocols.contract.events import BatchIn, ControlIn, SourceReady, Started, TimerFired
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.view import InstanceView
from protocols.lineage.instance import LineageInstance
from protocols.shared.logged import Resend
from protocols.shared.payload_log import MAX_PARTS, PayloadLog
from tests.conftest import load

# An op: ("send", n records) | ("trim", upto) | ("resend", start) | ("drop", 0) | ("pack", 0)
OPS = st.lists(st.tuples(st.sampled_from(["send", "send", "trim", "resend", "drop", "pack"]),
                         st.integers(0, 30)), max_size=60)  # fmt: skip
LIMITS = st.one_of(st.none(), st.integers(1, 5))


def _batch(seq: int, n: int, memo: bool = False) -> Batch:
    """A batch; ``memo``: its list a memo's (``Shared``) and, every other seq, no meta."""
    records = [(f"k{seq}-{i}", seq * i, 1000 * seq + i) for i in range(n)]
    meta = None if memo and seq % 2 else ("x[0]", seq, ())
    return Batch(shared(records) if memo else records, seq, seq - 1 if seq % 2 else None, meta)


def _as_tuple(b: Batch) -> tuple[object, ...]:
    return (list(b.records), b.seq, b.watermark, b.meta)


@pytest.mark.parametrize(("encoded", "memo"), [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("in_order", [True, False])
@settings(max_examples=300, deadline=None)
@given(ops=OPS, limit=LIMITS, data=st.data())
def test_a_log_answers_like_the_list_of_what_was_sent(
    encoded: bool, memo: bool, in_order: bool, ops: list[tuple[str, int]],
    limit: int | None, data: st.DataObject,
) -> None:
    """Keys in increasing order (what both protocols log) are looked up by bisection;
    keys out of order, by a scan: the answers are the same, and the same again where
    an encoded log keeps a memo's list as it is."""
    log, model, seq = PayloadLog(encoded), [], 0
    sent = []  # a memo holds its lists while anything may decode a reference to them
    for op, arg in ops:
        if op == "send":
            seq += 1
            batch = _batch(seq if in_order else data.draw(st.integers(0, 40)), arg, memo)
            log.append(batch.seq, batch)
            sent.append(batch)
            model.append(_batch(batch.seq, arg, memo))
        elif op == "trim":
            log.trim(arg)
            model = [b for b in model if b.seq > arg]
        elif op == "resend":
            assert [_as_tuple(b) for b in log.since(arg, limit)] == [
                _as_tuple(b) for b in model if b.seq >= arg][:limit]
        elif op == "pack":
            assert [(list(r), *rest) for r, *rest in PayloadLog.unpack(log.pack())] == [
                _as_tuple(b) for b in model]
        elif model:
            log.drop_oldest()
            del model[0]
        assert len(log) == len(model)
        assert [_as_tuple(b) for b in log] == [_as_tuple(b) for b in model]


def test_a_pack_encodes_only_the_batches_sent_since_the_last() -> None:
    """A snapshot packs the whole log every time; the parts an earlier pack encoded are
    reused while their batches are in the log, and dropped once trimmed past."""
    log = PayloadLog()
    for seq in range(1, 6):
        log.append(seq, _batch(seq, 2))
    skip, first = log.pack()
    assert skip == 0 and len(first) == 1
    assert log.pack()[1][0] is first[0]  # nothing new: nothing encoded again
    for seq in range(6, 9):
        log.append(seq, _batch(seq, 2))
    log.trim(2)
    skip, parts = log.pack()
    assert parts[0] is first[0] and len(parts) == 2 and skip == 2
    assert [b[1] for b in PayloadLog.unpack((skip, parts))] == [3, 4, 5, 6, 7, 8]
    log.trim(5)
    skip, parts = log.pack()
    assert len(parts) == 1 and parts[0] is not first[0] and skip == 0
    assert [b[1] for b in PayloadLog.unpack((skip, parts))] == [6, 7, 8]
    for seq in range(9, 9 + 2 * MAX_PARTS):  # a pack per batch: the parts are merged
        log.append(seq, _batch(seq, 1))
        assert len(log.pack()[1]) <= MAX_PARTS
    assert [b[1] for b in PayloadLog.unpack(log.pack())] == list(range(6, 9 + 2 * MAX_PARTS))


def test_an_encoded_log_keeps_the_batch_as_it_was_sent() -> None:
    log = PayloadLog(encoded=True)
    batch = _batch(1, 3)
    log.append(1, batch)
    batch.records.append(("late", 0, 0))  # whoever holds the sent object may change it
    batch.meta = None
    (again,) = log.since(1)
    assert _as_tuple(again) == _as_tuple(_batch(1, 3))
    assert again is not batch


def test_an_encoded_log_keeps_a_memo_list_without_meta_as_it_is() -> None:
    """A memo's list never changes, so there is nothing to freeze: the log refers to it
    (encoding it was about a twentieth of a Nexmark schedule under lineage). With meta, which a
    protocol may change, the batch is encoded as any other."""
    log = PayloadLog(encoded=True)
    bare, stamped = _batch(1, 3, memo=True), _batch(2, 3, memo=True)
    assert bare.meta is None and stamped.meta is not None
    log.append(1, bare)
    log.append(2, stamped)
    stamped.meta = ("changed",)
    again_bare, again_stamped = log.since(1)
    assert again_bare.records is bare.records and again_bare is not bare
    assert again_stamped.meta == ("x[0]", 2, ()) and again_stamped.records == stamped.records


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
        sends = [a for a in acts if type(a) is Send]  # a resend also declares replaying
        assert [_as_tuple(a.msg) for a in sends if type(a.msg) is Batch] == [want]


def test_a_chunked_resend_sends_the_whole_log_in_order_and_what_came_meanwhile() -> None:
    """Lineage resends at most ``resend_chunk`` batches per event, the rest on a timer
    that fires at once; batches the instance produces on the channel meanwhile are
    logged, not sent, and the resend reaches them after the older ones."""
    graph = ExecutionGraph(load("sharder"))
    me = InstanceId("votes[0]")
    core = InstanceCore(graph, me)
    inst = LineageInstance(InstanceView.of(graph, me), {me: core}, NoParams())
    inst.resend_chunk = 4
    inst.handle(Started(me, 0, "initial"), 0.0)
    (ch,) = core.out_channels

    def step() -> list:
        return inst.handle(SourceReady(me, 0.0), 0.0)

    first = [a.msg.seq for _ in range(10) for a in step() if type(a.msg) is Batch]
    assert first == list(range(1, 11))
    resent: list[int] = []
    meanwhile = 0
    acts = inst.handle(ControlIn(Resend(ch, 3)), 0.0)
    while timers := [a for a in acts if type(a) is SetTimer]:
        assert len([a for a in acts if type(a) is Send]) == 4  # one chunk per event
        resent += [a.msg.seq for a in acts if type(a) is Send]
        # the source goes on between chunks: logged, held back
        assert [a for a in step() if type(a) is Send] == []
        meanwhile += 1
        acts = inst.handle(TimerFired(timers[0].key, 0.0), 0.0)
    resent += [a.msg.seq for a in acts if type(a) is Send and type(a.msg) is Batch]
    assert meanwhile >= 2
    assert resent == list(range(3, 11 + meanwhile))  # nothing lost, nothing twice
    assert [a.msg.seq for a in step() if type(a.msg) is Batch] == [11 + meanwhile]


def test_resend_chunk_benchmark_resends_the_whole_log_in_bounded_events() -> None:
    """``benchmarks/resend_chunk.py`` at a test's size: every logged batch comes back, in
    one event without a chunk and in ceil(batches / chunk) events with one (one more when
    the last chunk is full: the resend only learns it is done from a short chunk)."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "resend_chunk.py"
    spec = importlib.util.spec_from_file_location("resend_chunk_benchmark", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    whole = bench.measure(20_000, None)
    assert whole["events"] == 1 and whole["batches"] > 50
    chunked = bench.measure(20_000, 7)
    assert chunked["batches"] == whole["batches"]
    assert chunked["events"] == whole["batches"] // 7 + 1


def test_snapshot_benchmark_stores_the_same_batches_packed_as_whole() -> None:
    """``benchmarks/snapshot_payload_log.py`` at a test's size: both ways of storing the
    log hold the batches still in it after trims, and packing stores them in parts."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "snapshot_payload_log.py"
    spec = importlib.util.spec_from_file_location("snapshot_payload_log_benchmark", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    whole = bench.run(50, 45, 3, 4, packed=False)
    packed = bench.run(50, 45, 3, 4, packed=True)
    assert len(whole["kept"]) == 50 + 45 * 3 - 3 * 4 * (45 // 4)
    assert packed["kept"] == whole["kept"]
