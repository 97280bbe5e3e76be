"""Nexmark: the seeded generator and the nine bundled queries against the spec's frozen
reference (shared spec nexmark.md, section 6): sizes and digests of each query's result
on a 5,000-event stream (seed 42, 100 events/s, 10 auctions in flight)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.sources import make_source
from ftctl.sim.golden import golden_output
from ftctl.verify.oracle import final_per_key

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parent.parent / "topologies" / "nexmark"
SEEDED = {"event_rate": 100, "in_flight_auctions": 10}
# sha256 of repr(sorted(result.items())), 16 hex digits; the number of keys.
EXPECTED = {
    "q0": ("7c1d93a9df155a28", 5000), "q1": ("000e2e06296e6075", 4600),
    "q2": ("f29037e83977e933", 18), "q3": ("e8a5ca8f3ccb0ee6", 6),
    "q4": ("3fad29c6eaee0d11", 5), "q5": ("bbea6ad500013643", 29),
    "q6": ("3342ac7f5d5d4afe", 33), "q7": ("4cef1951d02602f4", 5),
    "q8": ("fdac7a311d0a9d32", 83),
}
FIRST_FIVE = [
    (0, ("P", 1000, "john abrams", "los angeles", "AZ", 0), 0),
    (1, ("A", 1000, 1010, 14, 18236700, 27802770, 10, 3249), 10),
    (2, ("A", 1001, 1000, 11, 441174, 442051, 20, 853), 20),
    (3, ("A", 1002, 1000, 10, 5671, 11232, 30, 2494), 30),
    (4, ("B", 1002, 1001, 4215, "Facebook", 40), 40),
]


def digest(result: dict[Any, Any]) -> str:
    return hashlib.sha256(repr(sorted(result.items())).encode()).hexdigest()[:16]


def seeded(query: str, records: int = 5000, seed: int = 42, **params: Any) -> Topology:
    topo = load_topology(ROOT / f"{query}.yaml").with_input(records=records, seed=seed)
    return topo.with_operators([
        op.model_copy(update={"params": {**op.params, **SEEDED, **params}})
        if op.type == "source.nexmark" else op for op in topo.operators])


def test_generator_first_events_and_proportions() -> None:
    gen = make_source("source.nexmark", 42, SEEDED)
    events = gen(0, 5000)
    assert events[:5] == FIRST_FIVE
    kinds = [v[0] for _, v, _ in events]
    assert (kinds.count("P"), kinds.count("A"), kinds.count("B")) == (100, 300, 4600)
    assert sorted(v[1] for _, v, _ in events if v[0] == "A") == list(range(1000, 1300))
    # Any batch boundaries give the same events.
    assert gen(0, 7) + gen(7, 1234) + gen(1234, 5000) == events


def test_strided_split_is_the_same_multiset_in_time_order() -> None:
    graph = ExecutionGraph(seeded("q0", records=1001))
    parts = []
    for iid in graph.sources:
        lo, hi = graph.source_range(iid)
        gen = graph.make_operator(iid)
        part = gen(lo, 100) + gen(100, hi)  # type: ignore[operator]
        assert [r[2] for r in part] == sorted(r[2] for r in part)
        parts.extend(part)
    whole = make_source("source.nexmark", 42, SEEDED)(0, 1001)
    assert sorted(parts) == whole


@pytest.mark.parametrize("query", sorted(EXPECTED))
def test_query_result_matches_the_frozen_digest(query: str) -> None:
    (records,) = golden_output(ExecutionGraph(seeded(query))).values()
    result = final_per_key(records)
    assert (digest(result), len(result)) == EXPECTED[query]
