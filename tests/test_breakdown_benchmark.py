"""``benchmarks/recovery_breakdown.py``'s cases strike what they say (no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.plan import from_scenario
from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from tests.benchscripts import load_benchmark

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> Any:
    return load_benchmark("recovery_breakdown")


def test_each_case_is_a_valid_scenario_striking_distinct_instances(tmp_path: Path) -> None:
    import yaml

    bench = _bench()
    order = list(ExecutionGraph(load_topology(ROOT / "topologies" / "diamond.yaml")).order)
    for case, kinds in (("k1", {"kill-task"}), ("k4", {"kill-task"}), ("k8", {"kill-task"}),
                        ("worker", {"kill-worker"}), ("rack", {"kill-group"})):
        spec = bench.scenario(case, order)
        faults = spec["faults"]
        assert {f["type"] for f in faults} == kinds
        assert len({f["at"] for f in faults}) == 1  # struck together
        if case.startswith("k"):
            targets = [f["target"] for f in faults]
            assert len(targets) == int(case[1:]) == len(set(targets))
            assert order[0] not in targets  # the first source keeps feeding the rest
        path = tmp_path / f"{case}.yaml"
        path.write_text(yaml.safe_dump(spec))
        assert len(from_scenario(path, order, 30.0, None).faults) == len(faults)
    assert bench.scenario("k8", order[:5]) is None  # too few instances: skipped
