"""Data frames between tasks (``ftctl.spark.wire``)."""

from __future__ import annotations

from dataclasses import dataclass

from ftctl.codec import MARSHAL_TAG
from ftctl.runtime.messages import Batch, Marker
from ftctl.spark import wire
from protocols.shared.treeclock import TreeClock


@dataclass(frozen=True)
class _Point:
    x: int


def _items(records: list, meta: object = None) -> wire.DataItems:
    return [(3, Batch(records, 7, 120, meta)), (4, Marker("eos", None, 12))]


def _same(a: wire.DataItems, b: wire.DataItems) -> None:
    assert [(ch, type(m)) for ch, m in a] == [(ch, type(m)) for ch, m in b]
    ba, bb = a[0][1], b[0][1]
    assert (ba.records, ba.seq, ba.watermark, ba.meta) == (bb.records, bb.seq, bb.watermark,
                                                          bb.meta)
    assert a[1][1] == b[1][1] and a[1][1].meta == b[1][1].meta


def test_plain_records_and_a_plain_clock_diff_travel_marshalled() -> None:
    diff = TreeClock.receive_plain("shard[0]", 5, ("sharder[0]", 4, (("votes[0]", 4, ()),)), 3)
    items = _items([("a", 1, 10), ("b", 2, 11)], meta=diff)
    buf = wire.encode_data("sharder[0]", 2, items, 3)
    assert buf[:1] == MARSHAL_TAG
    src, epoch, back, to = wire.decode_data(buf)
    assert (src, epoch, to) == ("sharder[0]", 2, 3)  # the sender's and the receiver's epochs
    _same(items, back)


def test_records_marshal_refuses_fall_back_to_pickle() -> None:
    items = _items([("a", _Point(1), 10)])
    buf = wire.encode_data("x[0]", 0, items)
    assert buf[:1] != MARSHAL_TAG
    src, epoch, back, to = wire.decode_data(buf)
    assert (src, epoch, to) == ("x[0]", 0, 0)
    _same(items, back)


def test_frames_keep_no_table_of_objects_and_read_back_as_written() -> None:
    # A sink's output shares its words and counts with its input: marshal's format 4
    # entered each of them in a table as it wrote. The wire's format keeps none, so an
    # object held twice is written twice and the frame reads back equal all the same.
    word = "".join(["shared", "word"])  # not interned: one object, held by every record
    records = [(word, 10**20, 2.5, None, True, b"x", frozenset({1}), (i, [i]))
               for i in range(50)]
    items = _items(records)
    frame = wire.encode_data("count[0]", 1, items)
    assert frame[:1] == MARSHAL_TAG
    assert frame.count(word.encode()) == len(records)  # format 4 writes it once
    _same(items, wire.decode_data(frame)[2])
    control = ("multi", 0, [("emit", "out[0]", records, None)], 1, 2)
    assert wire.decode(wire.encode(control)) == control
