"""A unit's frame is one event's actions, and the Spark host's driver carries out all of
them or none after the one that ends the incarnation (without Spark).

Found on a rack failure under causal: the driver had already suspected a sink whose
worker died (a send to it had failed) when it read the sink's last frames. It adopted
each frame's first item, the sink's persisted visible counts, and dropped the rest, the
output those counts count. The fallback that followed then took 143 records for visible
that never were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftctl import codec
from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark import wire
from ftctl.spark.host import SparkHost, _Task
from ftctl.store import seal
from protocols.registry import get_protocol

ROOT = Path(__file__).resolve().parent.parent
SINK = "out[0]"


class _Conn:
    def send(self, frame: tuple[Any, ...]) -> None:
        pass


def _host(tmp_path: Path) -> SparkHost:
    causal = get_protocol("causal")
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / "diamond.yaml"))
    host = SparkHost(None, graph, causal, causal.resolve({}), "r", tmp_path / "store")
    host.live[SINK] = _Task(host.inc[SINK], _Conn(), 1, None, 0.0,  # type: ignore[arg-type]
                            gone=True)
    return host


def _frame(host: SparkHost, ref: int, records: list[tuple[Any, Any]],
           name: str | None = None) -> tuple[Any, ...]:
    """A sink's event: its visible counts persisted, then the output they count."""
    if name is None:
        name, size = host.store.write_pending(ref, SINK, {"emitted": len(records)})
    else:
        size = 1
    items = [(wire.PERSISTED, SINK, ref, name, size), (wire.EMIT, SINK, records, None)]
    return (wire.MULTI, host.inc[SINK], items, 0, len(records))


def test_a_suspected_units_frames_count_whole(tmp_path: Path) -> None:
    host = _host(tmp_path)
    host._on_msg(SINK, _frame(host, 1, [("#a", 1), ("#b", 1)]))
    host._suspect(SINK, "control connection lost")  # its worker died; not stopped yet
    host._on_msg(SINK, _frame(host, 2, [("#a", 2)]))
    assert host.sinks.records(SINK) == [("#a", 1), ("#b", 1), ("#a", 2)]
    assert host.store.snapshots_of(SINK) == [1, 2]


def test_nothing_after_a_write_that_failed_counts(tmp_path: Path) -> None:
    host = _host(tmp_path)
    host._on_msg(SINK, _frame(host, 1, [("#a", 1)], name=".pending-never-written"))
    assert host.sinks.records(SINK) == []
    assert SINK in host.suspects and "not adoptable" in host.suspects[SINK]


def test_a_stopped_incarnations_frames_count_not_at_all(tmp_path: Path) -> None:
    host = _host(tmp_path)
    frame = _frame(host, 1, [("#a", 1)])
    host.inc[SINK] += 1  # the coordinator stopped it before its frame was read
    host._on_msg(SINK, frame)
    assert host.sinks.records(SINK) == [] and host.store.snapshots_of(SINK) == []


def test_a_blob_sent_in_a_frame_is_stored_with_its_types(tmp_path: Path) -> None:
    """A task without the store's disk sends its blob framed (``store.seal``), through a
    marshalled frame: it is stored as the task pickled it, an array still an array."""
    from array import array

    host = _host(tmp_path)
    blob = {"counts": array("q", [3, 1])}
    frame = codec.decode(codec.encode(
        (wire.MULTI, host.inc[SINK], [(wire.PERSIST, SINK, 4, seal(blob))], 0, 0)))
    host._on_msg(SINK, frame)
    back = host.store.get(4, SINK)
    assert back == blob and type(back["counts"]) is array
