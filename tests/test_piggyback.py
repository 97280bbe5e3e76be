"""Piggyback bytes and clock-only batches (``ftctl.kernel.piggyback``), counted where the
hosts send batches: what ``ftctl figure 000-fig3`` reports next to causal's latency."""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.codec import encode
from ftctl.config.load import load_topology
from ftctl.kernel.piggyback import Piggyback, merge
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator, sim_params
from ftctl.spark import wire
from ftctl.spark.driver import EV_JOB_DONE, ControlServer
from ftctl.spark.host import SparkHost
from ftctl.spark.task import InstanceTask, TaskPayload
from protocols.causal.messages import CausalInit
from protocols.contract.events import BatchIn, Started
from protocols.contract.names import ChannelId, InstanceId
from protocols.registry import PROTOCOLS, get_protocol

ROOT = Path(__file__).resolve().parent.parent
SHARDS = 20  # topologies/sharder.yaml: votes -> sharder -> 20 count shards -> out


def test_clock_only_is_empty_without_a_new_watermark_and_bytes_size_the_meta() -> None:
    pb = Piggyback()
    diff = ("a[0]", 7, (("b[0]", 3, ()),))
    pb.observe(0, Batch([("k", 1, 5)], meta=diff))
    pb.observe(1, Batch([], meta=diff))  # the same event's diff, nothing else: clock-only
    pb.observe(0, Batch([], watermark=4))  # a channel's first watermark: not clock-only
    pb.observe(0, Batch([], watermark=4))  # no newer one: clock-only
    pb.observe(0, Batch([], watermark=9))  # advances
    pb.observe(1, Batch([], watermark=2))  # channel 1's own first watermark
    pb.observe(1, Batch([], watermark=1, meta=("a[0]", 8, ())))  # behind it: clock-only
    size, root = len(encode(diff)), len(encode(("a[0]", 8, ())))
    assert pb.to_dict() == {"batches": 7, "clock_only": 3, "bytes": 2 * size + root,
                            "max": size}
    assert merge([pb.to_dict(), None, {"batches": 3, "clock_only": 1, "bytes": 30,
                                       "max": 90}]) == {
        "batches": 10, "clock_only": 4, "bytes": 2 * size + root + 30, "max": 90,
        "mean": round((2 * size + root + 30) / 10, 2)}
    assert merge([]) == {"batches": 0, "clock_only": 0, "bytes": 0, "max": 0, "mean": 0.0}
    # a meta that may change between sends is sized at every send, not once
    pb, meta = Piggyback(), ["a[0]"]
    pb.observe(0, Batch([], meta=meta))
    pb.observe(0, Batch([], meta=meta))
    meta.append("x" * 50)
    pb.observe(0, Batch([], meta=meta))
    assert pb.bytes == 2 * len(encode(["a[0]"])) + len(encode(meta))


def _sim(protocol: str, given: dict[str, str]) -> dict[str, Any]:
    topo = load_topology(ROOT / "topologies" / "sharder.yaml").with_input(records=1000)
    graph = ExecutionGraph(topo)
    info = PROTOCOLS[protocol]
    result = SimHost(graph, info, sim_params(graph, info, given), 3).run()
    assert result.complete
    return merge([result.stats.piggyback.to_dict()])


def test_simulated_sharder_counts_causals_clock_only_batches_and_none_has_none() -> None:
    none, off, causal = _sim("none", {}), _sim("causal", {"clocks": "off"}), _sim("causal", {})
    # none: every batch carries records (sharder has no watermarks) and nothing else
    assert none["clock_only"] == none["bytes"] == none["max"] == 0
    # the source's 10 batches; each of its batches, split by key, reaches most shards
    assert SHARDS + 10 < none["batches"] < 2 * SHARDS * 11 + 10
    # clocks off: the same batches, each with its bare sender time, and no clock-only one
    assert (off["batches"], off["clock_only"]) == (none["batches"], 0)
    assert off["max"] == len(encode(("sharder[0]", 11, ()))) and off["mean"] > 0
    # causal: N5 adds only clock-only batches: every shard's end-of-stream event outputs
    # nothing (no window to fire) and still sends one, and so does each event of a shard
    # whose sharder batch had no key of its
    assert causal["clock_only"] == causal["batches"] - none["batches"]
    assert causal["clock_only"] >= SHARDS
    # and each batch carries a diff naming its sender's parents: more bytes than a root
    assert causal["mean"] > off["mean"] and causal["max"] > off["max"]


def test_sim_summary_sums_piggyback_over_schedules_and_json_reports_it() -> None:
    # What --json reports is the sum of each schedule's counts, largest meta the max.
    topo = ROOT / "topologies" / "wordcount.yaml"
    sim = Simulator(load_topology(topo), PROTOCOLS["causal"], {})
    runs = [sim.run_one(seed).result.stats.piggyback.to_dict() for seed in (4, 5, 6)]
    assert merge(runs) == sim.run_many(3, 4).piggyback_totals()
    assert len({r["batches"] for r in runs}) > 1, "schedules that differ, so a sum shows"
    res = CliRunner().invoke(app, ["sim", str(topo), "-p", "causal", "-n", "3",
                                   "--first-seed", "4", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["piggyback"] == merge(runs)
    res = CliRunner().invoke(app, ["sim", str(topo), "-p", "none", "-n", "3", "--json"])
    none = json.loads(res.output)["piggyback"]
    assert none["batches"] > 0 and none["bytes"] == none["clock_only"] == 0


def _sharder_task(server: ControlServer, token: bytes) -> InstanceTask:
    topo = load_topology(ROOT / "topologies" / "sharder.yaml")
    causal = get_protocol("causal")
    started = Started(InstanceId("sharder[0]"), 1, "initial",
                      init=CausalInit(parents={"votes[0]": ChannelId(0)}))
    return InstanceTask(TaskPayload(
        run_id="r", instance="sharder[0]", inc=1, protocol="causal",
        params=causal.resolve({}).model_dump(), topology=topo.model_dump(by_alias=True),
        started=started, coordinator=server.address, token=token))


class _Jobs:
    def release_spares(self) -> None: ...

    def wait_all(self, timeout: float) -> bool:
        return True


class _Server:
    def __init__(self, extras: dict[tuple[str, int], dict[str, Any]]):
        self.extras = extras

    def close(self) -> None: ...


def test_spark_tasks_report_piggyback_and_the_driver_adds_up_the_last_counts(
        tmp_path: Path) -> None:
    token = wire.new_token()
    server = ControlServer(token, queue.Queue(), wire.HOST, lambda _peer: None)
    task = _sharder_task(server, token)
    try:
        # one key: the sharder's event reaches one shard; the sharder is quiet under
        # causal's rule N6, so the other 19 get nothing until its time is a multiple of
        # `every`
        batch = Batch([("a", 1, 0)] * 5, seq=1, meta=("votes[0]", 1, ()))
        task._do(task.unit.handle(BatchIn(InstanceId("sharder[0]"), ChannelId(0), batch),
                                  0.0))
        sent = task._hb_extra()["piggyback"]
        assert (sent["batches"], sent["clock_only"]) == (1, 0)
        # the batch carries the event's diff: sharder[0] at 1, votes[0] at 1 below
        diff = len(encode(("sharder[0]", 1, (("votes[0]", 1, ()),))))
        assert (sent["bytes"], sent["max"]) == (diff, diff)
    finally:
        task._close()
        server.close()
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / "sharder.yaml"))
    causal = get_protocol("causal")
    host = SparkHost(None, graph, causal, causal.resolve({}), "r", tmp_path / "store")
    host.jobs = _Jobs()  # type: ignore[assignment]
    host.server = _Server({  # type: ignore[assignment]
        ("sharder[0]", 1): {"sent": 0, "piggyback": {**sent, "batches": 0}},  # stale
        ("shard[0]", 1): {"sent": 3, "piggyback": {"batches": 3, "clock_only": 1,
                                                   "bytes": 90, "max": 40}},
        ("shard[1]", 1): {"sent": 0}})  # a heartbeat from before the piggyback was counted
    host.events_q.put((EV_JOB_DONE, "sharder[0]", 1, {
        "records_in": 5, "records_out": 5, "piggyback": sent}))
    host.inc["sharder[0]"] = 1
    host._shutdown()
    total = host._traffic()["piggyback"]
    assert total == {"batches": 1 + 3, "clock_only": 1, "bytes": diff + 90,
                     "max": max(diff, 40), "mean": pytest.approx((diff + 90) / 4, abs=0.01)}
