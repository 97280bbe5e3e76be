"""A causal sink's chain of deltas (spec S1, ``CausalInstance.persist_sink``).

Each output persists what changed since the one before. A delta names only the input
channels that moved since it (the sink behind the sharder's 20 shards runs one of them
per batch), and restoring the chain, delta by delta or folded as a host folds several
outputs' deltas into one write (``fold_sink_deltas``), leaves the sink where each output
left it: the same visible time and position on every channel, the same clock.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from functools import reduce
from typing import Any

import pytest

from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.host import SimHost
from ftctl.sim.runner import MAX_STEP, sim_params
from protocols.causal.instance import SINK_REF, CausalInstance, delta_counts, fold_sink_deltas
from protocols.contract.actions import Persist
from protocols.contract.events import Started
from protocols.registry import PROTOCOLS
from tests.conftest import load

pytestmark = pytest.mark.sim


class _Recorded(CausalInstance):
    """The sink as it starts, then each delta with the state it must restore."""

    initial: Any = None
    deltas: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def start(self, ev: Started) -> None:
        super().start(ev)
        if self.core.is_sink:
            type(self).initial = copy.deepcopy(self)

    def persist_sink(self, out: list[tuple[Any, Any]]) -> None:
        super().persist_sink(out)
        last = self.out[-1]
        assert type(last) is Persist and last.ref >= SINK_REF
        type(self).deltas.append((last.blob, _state(self)))


def _state(s: CausalInstance) -> dict[str, Any]:
    return {"vis": dict(s.ptime),
            "pos": {ch: s.pos[ch] - len(q) for ch, q in s.pending.items()},
            "last": {ch: log[-1] for ch, log in s.dlog.items() if log},
            "clock": _canonical(s.clock.to_plain()), "time": s.time,
            "emitted": dict(s.emitted), "seen": dict(s.seen)}


def _canonical(node: Any) -> Any:
    """A clock's plain form with each node's children sorted: they are in the order the
    diffs were applied, and a folded delta applies one channel's diffs before another's."""
    iid, t, children = node
    return (iid, t, tuple(sorted(map(_canonical, children))))


def _restored(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    fresh = copy.deepcopy(_Recorded.initial)
    for d in deltas:
        fresh._restore_sink(d)
    return _state(fresh)


@pytest.fixture(scope="module")
def chain() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    # No local snapshot after the first: one chain, the whole run long.
    graph = ExecutionGraph(load("sharder").with_input(records=3000))
    spec = dataclasses.replace(PROTOCOLS["causal"], instance=_Recorded)
    params = sim_params(graph, spec, {"snapshot_every": 100_000}, MAX_STEP)
    _Recorded.deltas = []
    SimHost(graph, spec, params, 0, max_step=MAX_STEP).run()
    assert _Recorded.initial is not None and len(_Recorded.deltas) > 100
    return _Recorded.deltas


def test_a_delta_names_only_the_channels_that_moved(
        chain: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    inputs = len(_Recorded.initial.core.inputs)
    assert inputs == 20
    sizes = [len(blob["vis"]) for blob, _ in chain]
    assert all(set(blob["vis"]) == set(blob["pos"]) for blob, _ in chain)
    assert max(sizes[1:]) < inputs
    assert sizes.count(1) > 0.9 * len(sizes)


def test_restoring_the_chain_leaves_the_sink_where_each_output_left_it(
        chain: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    fresh = copy.deepcopy(_Recorded.initial)
    for j, (blob, live) in enumerate(chain):
        fresh._restore_sink(blob)
        assert _state(fresh) == live, f"after delta {j}"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_folded_deltas_restore_as_the_deltas_do(
        chain: list[tuple[dict[str, Any], dict[str, Any]]], seed: int) -> None:
    # Split the chain at random points; each piece folded into one delta, as a host
    # writes the deltas of the outputs it carries out at once.
    rng = random.Random(seed)
    blobs = [blob for blob, _ in chain]
    cuts = sorted(rng.sample(range(1, len(blobs)), 12))
    pieces = [blobs[a:b] for a, b in zip([0, *cuts], [*cuts, len(blobs)], strict=True)]
    folded = [reduce(fold_sink_deltas, piece) for piece in pieces]
    assert _restored(folded) == chain[-1][1]
    for k, cut in enumerate(cuts):
        assert _restored(folded[:k + 1]) == chain[cut - 1][1], f"after piece {k}"


def test_a_delta_of_first_counts_is_a_list_and_folds_with_counted_ones() -> None:
    # Nearly every output of a Nexmark sink is each record's first count: its delta is
    # the identities alone, and folding it with a delta of counts keeps both.
    def delta(j: int, emitted: Any, seen: dict[Any, int]) -> dict[str, Any]:
        return {"epoch": 0, "snap": 1, "j": j, "time": j, "vis": {0: j}, "pos": {0: j},
                "dlog": {}, "emitted": emitted, "seen": seen}

    firsts = delta(0, [("a", 1), ("b", 2)], {})
    counted = delta(1, {("a", 1): 2, ("c", 3): 1}, {("a", 1): 1})
    assert delta_counts(firsts["emitted"]) == {("a", 1): 1, ("b", 2): 1}
    folded = fold_sink_deltas(firsts, counted)
    assert folded["emitted"] == {("a", 1): 2, ("b", 2): 1, ("c", 3): 1}
    assert folded["seen"] == {("a", 1): 1}
    both = fold_sink_deltas(firsts, delta(1, [("d", 4)], {}))
    assert delta_counts(both["emitted"]) == {("a", 1): 1, ("b", 2): 1, ("d", 4): 1}
