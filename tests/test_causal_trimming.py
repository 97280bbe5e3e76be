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
