"""The snapshot directory store: what tasks on the coordinator's machine rely on."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any, cast

import pytest

from ftctl import codec
from ftctl.codec import MARSHAL_TAG, encode_blob
from ftctl.config.load import load_topology
from ftctl.kernel.outputs import Outputs
from ftctl.kernel.unit import Unit
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch, Marker
from ftctl.spill import PickledChunk
from ftctl.store import (
    MAGIC,
    CorruptObject,
    DirectoryStore,
    MemoryStore,
    Sealed,
    SinkStore,
    damaged,
    seal,
)
from protocols.checkpoint.instance import SNAPSHOT, CheckpointInstance
from protocols.checkpoint.params import CheckpointParams
from protocols.contract.actions import Persist, StageOutput
from protocols.contract.events import BatchIn, MarkerIn, Started
from protocols.contract.names import InstanceId

ROOT = Path(__file__).resolve().parent.parent
HEADER_BYTES = 16


def test_a_store_made_from_a_relative_path_is_found_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver names the store relative to its working directory; a Spark task runs in
    # the executor's, and must still find it (else every blob crosses the control link).
    monkeypatch.chdir(tmp_path)
    store = DirectoryStore(Path("results/run/snapshots"))
    key = store.key()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    writer = DirectoryStore.shared(str(store.root), key)
    assert writer is not None
    name, size = writer.write_pending(3, "out[0]", {"output": [("a", 1)]})
    store.adopt(3, "out[0]", name, size)
    assert store.get(3, "out[0]") == {"output": [("a", 1)]}
    assert store.snapshots_of("out[0]") == [3]


def test_a_store_with_another_key_is_not_shared(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "snapshots")
    store.key()
    assert DirectoryStore.shared(str(store.root), "not-the-key") is None
    assert DirectoryStore.shared(str(tmp_path / "missing"), store.key()) is None


class Opaque:
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.n == self.n


def test_a_blob_comes_back_with_its_exact_types_from_either_store(tmp_path: Path) -> None:
    """Blobs are pickled without the memo (``codec.encode_blob``): a buffer stays the
    type it was (marshal would make it ``bytes``), a value held twice comes back twice,
    a cycle is kept, and an object of the protocol's own class is pickled whole. A frame
    written before, with a marshal payload, still reads."""
    from array import array
    from fractions import Fraction

    shared = ("w1", 3)
    cycle: list[Any] = ["loop"]
    cycle.append(cycle)
    blob = {"counts": {shared: 1, ("w2",): 2}, "twice": [shared, shared],
            "buffers": (array("q", [1, 2]), bytearray(b"ab")), "ratio": Fraction(1, 3),
            "state": Opaque(7), "finished": {1, 2}}
    directory, memory = DirectoryStore(tmp_path), MemoryStore()
    directory.put(1, "out[0]", blob)
    directory.put(2, "out[0]", cycle)
    memory.put(1, "out[0]", blob)
    for back in (directory.get(1, "out[0]"), memory.get(1, "out[0]")):
        assert back == blob and back["twice"][0] == back["twice"][1] == shared
        assert [type(b) for b in back["buffers"]] == [array, bytearray]
        assert type(back["ratio"]) is Fraction
    looped = directory.get(2, "out[0]")
    assert looped[0] == "loop" and looped[1] is looped
    # A task without the store's disk sends the blob framed (``Sealed``): stored as is.
    directory.put(3, "out[0]", Sealed(seal(blob)))
    assert type(directory.get(3, "out[0]")["buffers"][0]) is array
    # The costed simulation charges what the store holds, without the frame's header.
    assert memory.payload_bytes(1, "out[0]") == len(codec.encode_blob(blob))
    # Framed objects written with a marshal payload (before blobs were pickled) read.
    old = codec.encode({"output": [("a", 1)]})
    assert old[:1] == MARSHAL_TAG
    directory.put(4, "out[0]", Sealed(struct.pack(">4sQI", MAGIC, len(old),
                                                  zlib.crc32(old)) + old))
    assert directory.get(4, "out[0]") == {"output": [("a", 1)]}


def test_a_memory_store_keeps_parts_beside_the_frame_and_still_checks_it(
        tmp_path: Path) -> None:
    # A sink's snapshots each hold every part made for the ones before: the simulator's
    # store keeps one reference to them, not a copy per snapshot.
    import numpy as np

    part = codec.encode_part({("bid", i): 1 for i in range(20_000)})
    assert type(part) is codec.Part
    live = np.arange(4)
    blob = {"emitted": [part], "state": live, "n": 3}
    memory, directory = MemoryStore(), DirectoryStore(tmp_path)
    memory.put(1, "sink[0]", blob)
    memory.put(2, "sink[0]", {"emitted": [part, part]})
    directory.put(1, "sink[0]", blob)
    for frame in (memory.blobs[(1, "sink[0]")], memory.blobs[(2, "sink[0]")]):
        assert len(frame) < len(part) // 10  # the part is not in it
    # Charged as a store on disk writes it: the part's bytes are in the payload.
    assert memory.payload_bytes(2, "sink[0]") >= 2 * len(part)
    live[0] = 99  # any other buffer is copied in: changing it later changes no snapshot
    for back in (memory.get(1, "sink[0]"), directory.get(1, "sink[0]")):
        assert back["emitted"] == [part] and type(back["emitted"][0]) is codec.Part
        assert list(back["state"]) == [0, 1, 2, 3] and back["n"] == 3
        assert codec.decode(back["emitted"][0]) == codec.decode(part)
    # Damage to the frame is refused by its checksum, as damage to the whole object is.
    memory.blobs[(2, "sink[0]")] = damaged(memory.blobs[(2, "sink[0]")], "corrupt", 0.5)
    with pytest.raises(CorruptObject):
        memory.get(2, "sink[0]")
    memory.delete(1, "sink[0]")
    assert (1, "sink[0]") not in memory.parts


def test_a_kept_part_comes_back_as_itself_from_a_memory_store_and_decodes_elsewhere(
        tmp_path: Path) -> None:
    # A restarted simulated sink reads its counts from the parts its predecessor made:
    # the memory store hands back those very parts, whose kept value is read instead of
    # decoding the bytes; a store on disk gives bytes alone, which decode to the same.
    value = ([("bid", i) for i in range(1000)], [1] * 1000)
    part = codec.encode_part(value, keep=True)
    plain = codec.encode_part(value)
    assert codec.decode_part(part) is value
    assert codec.decode_part(plain) == value and codec.decode_part(plain) is not value
    memory, directory = MemoryStore(), DirectoryStore(tmp_path)
    for store in (memory, directory):
        store.put(1, "sink[0]", {"emitted": [part, plain]})
    kept, other = memory.get(1, "sink[0]")["emitted"]
    assert kept is part and codec.decode_part(kept) is value
    assert other is plain  # out of band, a part without a kept value is itself too
    read, _ = directory.get(1, "sink[0]")["emitted"]
    assert type(read) is codec.Part and read == part and read is not part
    assert codec.decode_part(read) == value and codec.decode_part(read) is not value
    # A value derived from a part is made once per part and shared; bytes that are no
    # ``Part`` are decoded and derived anew each time.
    made: list[int] = []

    def counts(v: tuple[list[Any], list[int]]) -> dict[Any, int]:
        made.append(1)
        return dict(zip(*v, strict=True))

    first = codec.derived(kept, counts)
    assert first == dict(zip(*value, strict=True)) and codec.derived(kept, counts) is first
    assert codec.derived(read, counts) == first and len(made) == 2
    assert codec.derived(bytes(part), counts) == first and len(made) == 3
    assert codec.derived(bytes(part), counts) is not codec.derived(bytes(part), counts)


def test_a_checkpoint_blob_with_channel_state_is_plain_and_restores() -> None:
    # Channel state travels as tuples, so a sink's blob is marshalled; its held output is
    # staged beside it; restoring the blob replays the recorded batches.
    topology = load_topology(ROOT / "topologies" / "wordcount.yaml")
    graph = ExecutionGraph(topology)
    params = CheckpointParams(interval=1.0)
    sink = InstanceId("out[0]")
    unit = Unit(CheckpointInstance, graph, sink, params, 0)
    unit.handle(Started(sink, 0, "initial"), 0.0)
    first, second = unit.core.inputs
    acts = [*unit.handle(BatchIn(sink, first, Batch([("a", 1, 5)], 1)), 0.0),
            *unit.handle(MarkerIn(sink, first, Marker(SNAPSHOT, 1)), 0.0),
            *unit.handle(BatchIn(sink, second, Batch([("b", 2, 6)], 1)), 0.0),  # channel state
            *unit.handle(MarkerIn(sink, second, Marker(SNAPSHOT, 1)), 0.0)]
    blob = next(a for a in acts if isinstance(a, Persist)).blob
    assert codec.encode(blob)[:1] == MARSHAL_TAG
    assert next(a for a in acts if isinstance(a, StageOutput)).records == [("a", 1)]
    again = Unit(CheckpointInstance, graph, sink, params, 1)
    again.handle(Started(sink, 1, "restart", codec.decode(codec.encode(blob))), 0.0)
    held = cast(CheckpointInstance, again.logic).held
    assert held == [("b", 2)] and again.core.records_in == 1


def test_a_store_behind_a_file_uri_works_like_a_folder(tmp_path: Path) -> None:
    uri = (tmp_path / "elsewhere").as_uri()
    store = DirectoryStore(uri)
    assert store.root == uri
    store.put(1, "a[0]", {"n": 1})
    store.put(2, "a[0]", {"n": 2})
    writer = DirectoryStore.shared(uri, store.key())
    assert writer is not None
    name, size = writer.write_pending(2, "b[0]", [1, 2, 3])
    store.adopt(2, "b[0]", name, size)
    assert (store.get(1, "a[0]"), store.get(2, "b[0]")) == ({"n": 1}, [1, 2, 3])
    assert store.snapshots_of("a[0]") == [1, 2] and store.snapshots_of("b[0]") == [2]
    # the writer appended to a segment of its own, the owner's catalog names it
    segments = sorted(p.name for p in (tmp_path / "elsewhere" / "segments").iterdir())
    assert len(segments) == 2 and (tmp_path / "elsewhere" / "catalog").is_file()
    store.discard_after(1)
    assert store.snapshots_of("a[0]") == [1] and store.snapshots_of("b[0]") == []
    store.delete(1, "a[0]")
    store.delete(1, "a[0]")  # already gone: fine
    assert store.snapshots_of("a[0]") == []
    assert DirectoryStore.shared((tmp_path / "other").as_uri(), store.key()) is None


def test_a_store_pyarrow_cannot_open_is_one_line_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ftctl.cli import app

    result = CliRunner().invoke(app, ["run", str(ROOT / "topologies" / "wordcount.yaml"),
                                      "--store", "nosuchfs://x/y", "--results", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--store" in lines[0] and "nosuchfs://x/y" in lines[0], lines
    assert not any(tmp_path.iterdir())


def test_a_spilling_sink_store_keeps_a_bounded_tail_and_reads_everything_back(
    tmp_path: Path,
) -> None:
    spill = tmp_path / "spill"
    store = SinkStore(spill, keep=5)
    for epoch in range(1, 8):
        store.commit("out[0]", epoch, [(f"k{epoch}", i) for i in range(3)])
    store.commit("out[0]", 3, [("late", 0)])  # already committed: ignored
    store.append("out[1]", [("a", 1), ("b", 2), ("a", 1)] * 3, uid="batch")
    store.append("out[1]", [("a", 1)], uid="batch")  # a repeat of its record 0: ignored

    # Memory never holds more than ``keep`` plus one commit's records per instance.
    assert len(store.visible["out[0]"]) <= 5 < store.count("out[0]")
    assert (spill / "out[0].pickle").exists()
    assert store.count("out[0]") == 21 and store.count("out[1]") == 9
    assert store.records("out[0]") == [(f"k{e}", i) for e in range(1, 8) for i in range(3)]
    assert store.by_operator() == {
        "out": store.records("out[0]") + [("a", 1), ("b", 2), ("a", 1)] * 3}
    # Without a spill directory nothing is written and everything stays in memory.
    mem = SinkStore(keep=5)
    for epoch in range(1, 8):
        mem.commit("out[0]", epoch, [(f"k{epoch}", i) for i in range(3)])
    assert len(mem.visible["out[0]"]) == 21 == mem.count("out[0]")
    assert mem.by_operator() == {"out": store.records("out[0]")}


@pytest.mark.parametrize("spilled", [True, False])
def test_pickled_output_is_kept_as_it_came_in_order_with_the_rest(
        tmp_path: Path, spilled: bool) -> None:
    # A Spark sink's output crosses pickled; with a spill the bytes are written as they
    # are, after whatever the tail in memory holds, and read back in emit order.
    store = SinkStore(tmp_path / "spill" if spilled else None, keep=5)
    store.append("out[0]", [("a", 1), ("b", 1)])
    store.append_pickled("out[0]", PickledChunk(encode_blob([("a", 2), ("c", 1)]), 2))
    store.append_pickled("out[1]", PickledChunk(encode_blob([("z", 1)]), 1))
    store.append("out[0]", [("b", 2)])
    store.append_pickled("out[0]", PickledChunk(encode_blob([("a", 3)]), 1))
    want = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3)]
    assert store.records("out[0]") == want and store.count("out[0]") == 6
    assert store.count("out[1]") == 1
    assert {op: list(r) for op, r in store.streamed().items()} == {"out": [*want, ("z", 1)]}
    # Spilled: nothing of it was held in memory (the bytes went straight to the file).
    assert not store.visible["out[0]"] if spilled else len(store.visible["out[0]"]) == 6


@pytest.mark.parametrize("spilled", [True, False])
def test_staged_output_commits_in_the_order_staged_whether_pickled_or_not(
        tmp_path: Path, spilled: bool) -> None:
    # A Spark sink's staged output crosses pickled and stays bytes until its commit; the
    # simulation's stays records. Mixed in one epoch, the commit keeps the staging order.
    outputs = Outputs(SinkStore(tmp_path / "spill" if spilled else None, keep=2))
    outputs.stage("out[0]", 0, [("a", 1)])
    outputs.stage_pickled("out[0]", 0, PickledChunk(encode_blob([("b", 1), ("a", 2)]), 2))
    outputs.stage("out[0]", 0, [("c", 1)])
    outputs.stage("out[0]", 0, [("d", 1)])
    outputs.stage_pickled("out[0]", 1, PickledChunk(encode_blob([("e", 1)]), 1))
    outputs.stage_pickled("out[0]", 2, PickledChunk(encode_blob([("lost", 1)]), 1))
    outputs.discard("out[0]", after=1)
    assert outputs.commit("out[0]", 1) == 6  # records made visible
    assert outputs.sinks.records("out[0]") == [
        ("a", 1), ("b", 1), ("a", 2), ("c", 1), ("d", 1), ("e", 1)]
    outputs.stage("out[0]", 1, [("again", 1)])  # an epoch already committed stays as it was
    assert outputs.commit("out[0]", 1) == 0 and outputs.sinks.count("out[0]") == 6


@pytest.mark.parametrize("n", [0, 1, 6, 7, 13])
def test_sink_output_is_pickled_in_bounded_pieces_that_commit_as_one_epoch(
        tmp_path: Path, n: int) -> None:
    # A checkpoint's sink stages an epoch's output at once: read back as one pickle, the
    # driver decoded all of it at once. In pieces of at most ``size``, in order, and an
    # epoch with no output still staged (its commit is due).
    records = [(f"k{i % 3}", i) for i in range(n)]
    pieces = PickledChunk.pieces(records, size=3)
    assert [p.count for p in pieces] == ([3] * (n // 3) + [n % 3] if n % 3 or not n
                                         else [3] * (n // 3))
    assert [r for p in pieces for r in p.records()] == records
    outputs = Outputs(SinkStore(tmp_path / "spill", keep=2))
    for p in pieces:
        outputs.stage_pickled("out[0]", 4, p)
    assert outputs.commit("out[0]", 4) == n
    assert list(outputs.sinks.streamed()["out"]) == records
