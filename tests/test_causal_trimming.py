"""Spec causal.md change 10 and T2/T3: inputs big enough that logs are trimmed and local
snapshots taken mid-run, so recovery reads a snapshot past time 0 and resends from logs
that were trimmed, not from whole histories.

With ``snapshot_every: 2`` (a local snapshot every two batches per input channel) over
seeded schedules of every fault kind: in at least 90% of the schedules a payload log and
a diff log are each trimmed while their instance is still running, and at least half of
the restores of stateful instances read a snapshot with time > 0 (``s`` of
``causal-replay``, the replacement's restore time).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.messages import Batch
from ftctl.sim.runner import Simulator
from protocols.causal.instance import CausalInstance
from protocols.causal.messages import TrimDiffLog
from protocols.contract.messages import Msg
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.sim

KINDS = ("crash", "pause", "partition", "delay", "slow", "node")
TRIMMED: set[str] = set()  # the kinds of log trimmed mid-run in the current schedule


class _Watched(CausalInstance):
    """The protocol's instance, noting each trim that drops an entry before it ended."""

    def gc(self, ch: int, upto: int) -> None:
        n = len(self.plog.get(ch, []))
        super().gc(ch, upto)
        if len(self.plog.get(ch, [])) < n and not self.done:
            TRIMMED.add("payload")

    def control(self, msg: Msg) -> None:
        n = len(self.dlog[msg.channel]) if isinstance(msg, TrimDiffLog) else 0
        super().control(msg)
        if isinstance(msg, TrimDiffLog) and len(self.dlog[msg.channel]) < n and not self.done:
            TRIMMED.add("diff")


@pytest.mark.parametrize(("path", "schedules"), [
    ("diamond.yaml", 60), ("wordcount.yaml", 40), ("windowed.yaml", 40),
    ("joins/join-window.yaml", 30)])
def test_logs_are_trimmed_and_snapshots_restored_mid_run(path: str, schedules: int) -> None:
    spec = dataclasses.replace(PROTOCOLS["causal"], instance=_Watched)
    sim = Simulator(load_topology(TOPOLOGIES / path), spec, {"snapshot_every": 2},
                    kinds=KINDS)
    graph = sim.graph
    stateful = {i for i in graph.order if not graph.instances[i].is_source
                and getattr(graph.make_operator(i), "stateful", False)}
    assert stateful
    both_trimmed = 0
    restores: list[Any] = []
    for seed in range(1, schedules + 1):
        TRIMMED.clear()
        out = sim.run_one(seed)
        assert out.verdict.passed, (path, seed)
        both_trimmed += {"payload", "diff"} == TRIMMED
        restores += [e.payload["s"] for e in out.result.events
                     if e.note == "causal-replay" and e.payload["instance"] in stateful]
    assert both_trimmed >= 0.9 * schedules, (path, both_trimmed)
    assert len(restores) >= 5, path
    assert sum(s > 0 for s in restores) >= 0.5 * len(restores), (path, restores)


def _snapshot_intervals(balance: float) -> tuple[list[tuple[int, int, int]], bool]:
    """Per local snapshot of a shard after its first: (records and events processed
    since the one before, the state's entries at the one before, batches since)."""
    seen: list[tuple[int, int, int]] = []

    class Watched(CausalInstance):
        w_work = 0
        w_batches = 0
        w_last: int | None = None

        def _run(self, ch: int, batch: Batch, at: int | None = None) -> None:
            self.w_work += len(batch.records)
            self.w_batches += 1
            super()._run(ch, batch, at)

        def _tick(self) -> None:
            self.w_work += 1
            super()._tick()

        def _persist(self) -> None:
            if self.core.spec.op == "shard":
                if self.w_last is not None:
                    seen.append((self.w_work, self.w_last, self.w_batches))
                self.w_last = self.core.state_size()
                self.w_work = self.w_batches = 0
            super()._persist()

    spec = dataclasses.replace(PROTOCOLS["causal"], instance=Watched)
    topology = load_topology(TOPOLOGIES / "sharder.yaml").with_input(records=20_000)
    sim = Simulator(topology, spec, {"snapshot_balance": balance})
    return seen, sim.run_one(1).verdict.passed


def test_a_large_state_snapshots_only_after_as_much_work_as_it_holds() -> None:
    # The sharder's 20 shards each count about 100 of 2,000 keys from batches of about
    # 5 votes: every 10 batches is about 60 records and events, fewer than the state
    # once most keys were seen.
    every, _ = _snapshot_intervals(0.0)
    balanced, passed = _snapshot_intervals(1.0)
    assert passed
    assert all(batches == 10 for _, _, batches in every)
    assert all(work >= state and batches >= 10 for work, state, batches in balanced)
    assert any(batches > 10 for _, _, batches in balanced)
    assert len(balanced) < 0.9 * len(every), (len(balanced), len(every))


def test_longer_replays_after_fewer_snapshots_stay_exactly_once() -> None:
    # Four times the state between snapshots: a shard's replacement replays hundreds of
    # its parent's events from the sharder's payload log, with every fault kind.
    topology = load_topology(TOPOLOGIES / "sharder.yaml").with_input(records=20_000)
    sim = Simulator(topology, PROTOCOLS["causal"], {"snapshot_balance": 4.0}, kinds=KINDS)
    replays: list[int] = []
    for seed in range(1, 31):
        out = sim.run_one(seed)
        assert out.verdict.passed, seed
        replays += [e.payload["replay"] for e in out.result.events
                    if e.note == "causal-replay" and e.payload["instance"].startswith("shard")]
    assert replays and max(replays) > 100, replays
