"""Peer messages relayed by the Spark host's driver, without Spark: one frame per receiving
unit per pass of the driver's loop, in relay order, ahead of any later control frame to
that unit; and the task carries a frame's messages out in order and answers them in one
frame. A ring's records, acks and fetches run to thousands a second; sent one frame each,
they kept the driver so far behind on a busy machine that pongs missed the ping timeout
and live replicas were fenced over and over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark import wire
from ftctl.spark.host import SparkHost, _Task
from ftctl.spark.task import InstanceTask
from protocols.registry import get_protocol
from protocols.replica_ring.messages import Ping, Pong, Purge
from tests.conftest import spark_task

ROOT = Path(__file__).resolve().parent.parent
CHAIN = ROOT / "topologies" / "replica-chain.yaml"


class _Conn:
    def __init__(self) -> None:
        self.frames: list[tuple[Any, ...]] = []

    def send(self, frame: tuple[Any, ...]) -> None:
        self.frames.append(frame)


def _host(tmp_path: Path) -> tuple[SparkHost, dict[str, _Conn]]:
    ring = get_protocol("replica-ring")
    graph = ExecutionGraph(load_topology(CHAIN))
    host = SparkHost(None, graph, ring, ring.resolve({}), "r", tmp_path / "store")
    conns = {}
    for iid, gone in (("split[0]", True), ("split[1]", True), ("split[2]", False)):
        conns[iid] = _Conn()
        host.live[iid] = _Task(0, conns[iid], 1, None, 0.0, gone=gone)  # type: ignore[arg-type]
    return host, conns


def _peer(sender: str, to: str, msg: Any, unit: str | None = None) -> tuple[Any, ...]:
    return (wire.PEER, sender, to, msg, unit)


def test_relays_go_as_one_frame_per_receiver_in_order(tmp_path: Path) -> None:
    host, conns = _host(tmp_path)
    items = [_peer("split[1]", "split[0]", Ping("split[0]")),
             _peer("split[0]", "split[1]", Purge("u1", "lines[0]")),
             _peer("split[1]", "split[0]", Purge("u2", "lines[0]")),
             _peer("split[0]", "split[2]", Ping("split[2]")),  # not released yet: lost
             _peer("split[2]", "split[1]", Pong("split[2]", ("split[2]", 0)), "split[1]")]
    for item in items:
        host._on_item(item[1], item)
    assert all(not c.frames for c in conns.values())  # nothing goes before the loop's flush
    host._flush_peers()
    assert conns["split[0]"].frames == [(wire.PEERS, [
        ("split[1]", Ping("split[0]"), "split[0]"),
        ("split[1]", Purge("u2", "lines[0]"), "split[0]")])]
    assert conns["split[1]"].frames == [(wire.PEERS, [
        ("split[0]", Purge("u1", "lines[0]"), "split[1]"),
        ("split[2]", Pong("split[2]", ("split[2]", 0)), "split[1]")])]
    assert conns["split[2]"].frames == []
    assert host.peer_kinds == {"Ping": 2, "Purge": 2, "Pong": 1}
    host._flush_peers()  # nothing twice
    assert len(conns["split[0]"].frames) == 1


def test_a_control_frame_goes_after_what_was_relayed_before_it(tmp_path: Path) -> None:
    host, conns = _host(tmp_path)
    host._on_item("split[1]", _peer("split[1]", "split[0]", Ping("split[0]")))
    host._tell("split[0]", (wire.EXIT,))
    host._on_item("split[1]", _peer("split[1]", "split[0]", Purge("u", "lines[0]")))
    host._flush_peers()
    assert [f[0] for f in conns["split[0]"].frames] == [wire.PEERS, wire.EXIT, wire.PEERS]
    assert conns["split[0]"].frames[0][1] == [("split[1]", Ping("split[0]"), "split[0]")]


@pytest.fixture
def task() -> Iterator[InstanceTask]:
    with spark_task("replica-chain", "split[0]", "replica-ring") as t:
        yield t


def test_a_task_answers_a_frame_of_relays_in_order_in_one_frame(task: InstanceTask) -> None:
    sent: list[tuple[Any, ...]] = []
    task._ctrl_send = sent.append  # type: ignore[method-assign]
    task.ctl.append((wire.PEERS, [("split[1]", Ping("split[0]"), "split[0]"),
                                  ("split[2]", Ping("split[0]"), "split[0]")]))
    task._handle_ctl()
    assert len(sent) == 1 and sent[0][0] == wire.MULTI
    pongs = [(item[1], item[2], item[3], item[4]) for item in sent[0][2]
             if item[0] == wire.PEER]
    assert pongs == [("split[0]", "split[1]", Pong("split[0]", ("split[0]", 0)), "split[1]"),
                     ("split[0]", "split[2]", Pong("split[0]", ("split[0]", 0)), "split[2]")]
