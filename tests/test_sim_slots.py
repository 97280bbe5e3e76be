"""Scarce simulated capacity: ``ftctl sim --scenario ... --slots``, capacity that returns at
one instant planned once, and the queries each returning node brings back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.cluster import SimCluster, SimNode
from ftctl.sim.host import SimHost
from ftctl.sim.restores import restore_stages
from ftctl.sim.runner import Simulator, nominal_duration, sim_params
from ftctl.sim.scenario import load_sim_scenario, node_slots
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES, load

pytestmark = pytest.mark.sim

runner = CliRunner()
RACKS = [{"rack": "a"}, {"rack": "b"}] * 5  # w0..w9, as --label rack=a --label rack=b

QUICK_RACK = """\
name: rack-quick
seed: 1
faults:
  - {type: kill-group, at: 1.0, target: rack=a, window: 0.2}
  - type: restore-capacity
    at: 2.0
    target: rack=a
    params: {mode: progressive, distribution: uniform, min: 0.3, max: 0.6}
"""


def test_slots_per_node_and_per_label() -> None:
    assert node_slots(["2"], RACKS, 12) == [2] * 10
    assert node_slots(["2", "rack=b:3"], RACKS, 12) == [2, 3] * 5
    assert node_slots(["worker=w1:5"], RACKS[:2], 3) == [6, 5]  # others keep 2 x instances
    for bad in ("x", "rack=a", "rack:2", "-1"):
        with pytest.raises(ValueError, match="N or key=value:N"):
            node_slots([bad], RACKS, 12)
    with pytest.raises(ValueError, match="cannot hold the topology's 12 instances"):
        node_slots(["1"], RACKS, 12)


def test_slots_are_refused_in_one_line_where_they_cannot_work(tmp_path: Path) -> None:
    topo = str(TOPOLOGIES / "progressive-small.yaml")
    alone = runner.invoke(app, ["sim", topo, "-p", "progressive", "--slots", "2"])
    assert alone.exit_code == 2 and "--slots" in alone.output
    assert "--scenario" in alone.output and "Traceback" not in alone.output
    small = runner.invoke(app, ["sim", topo, "-p", "progressive", "--scenario",
                                "chaos/rack-failure.yaml", "--workers", "4", "--label",
                                "rack=a", "--slots", "2"])
    assert small.exit_code == 2 and "--slots" in small.output
    assert "cannot hold" in small.output and len(small.output.strip().splitlines()) == 1


def _plans(events: list[HistoryEvent]) -> list[tuple[float, dict[str, object]]]:
    return [(e.t, e.data["data"]) for e in events
            if e.kind == "protocol" and e.data.get("name") == "plan"]


def test_nodes_returning_at_one_instant_are_planned_once() -> None:
    graph = ExecutionGraph(load("progressive-small"))
    spec = PROTOCOLS["progressive"]
    nodes = [SimNode("core", 6), *(SimNode(f"n{k}", 2) for k in range(4))]
    host = SimHost(graph, spec, sim_params(graph, spec, {}), seed=2, cluster=SimCluster(nodes))
    for k in range(4):
        host.at(0.006, lambda k=k: host.node_down(f"n{k}"))  # type: ignore[misc]
        host.at(0.012, lambda k=k: host.node_up(f"n{k}"))  # type: ignore[misc]
    res = host.run()
    assert res.complete
    back = [e.t for e in res.events if e.kind == "node-up"]
    assert back == [0.012] * 4
    at_return = [p for t, p in _plans(res.events) if t == 0.012]
    # one plan, on the capacity of the four nodes together
    assert len(at_return) == 1 and at_return[0]["why"] == "capacity"
    assert at_return[0]["free"] >= 8


def test_rack_failure_restores_queries_in_stages_as_capacity_returns(tmp_path: Path) -> None:
    scenario = tmp_path / "rack-quick.yaml"
    scenario.write_text(QUICK_RACK)
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "progressive15.yaml"), "-p",
                              "progressive", "--scenario", str(scenario), "--slots", "12",
                              "--workers", "10", "--label", "rack=a", "--label", "rack=b",
                              "--records", "5000", "-n", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    stages = out["restores"]
    # capacity comes back in stages, one node at a time, after the survivors' stage
    assert stages[0]["nodes_back"] == [] and len(stages) == 6
    assert all(len(s["nodes_back"]) == 1 for s in stages[1:])
    assert [s["t"] for s in stages] == sorted({s["t"] for s in stages})
    restoring = [s for s in stages if s["queries"]]
    assert len(restoring) >= 2  # no single restart of everything
    restored = [q for s in stages for q in s["queries"]]
    assert sorted(restored) == sorted(f"out{k}" for k in range(1, 16))
    # the kill-group's failures are recovered only once capacity returned
    assert out["recovery"]["kill-group"]["restart"]["max"] >= stages[1]["t"] - 1.2
    assert out["passed"]


def test_each_returning_node_restores_what_its_plan_picked_by_profit_density(
        tmp_path: Path) -> None:
    topo = load("progressive15").with_input(records=5000)
    graph = ExecutionGraph(topo)
    path = tmp_path / "rack-quick.yaml"
    path.write_text(QUICK_RACK)
    sc = load_sim_scenario(path, topo, nominal_duration(graph), RACKS,
                           protocol=PROTOCOLS["progressive"],
                           slots=node_slots(["12"], RACKS, len(graph.order)))
    sim = Simulator(topo, PROTOCOLS["progressive"], {}, scenario=sc)
    result = sim.run_one(1).result
    stages = restore_stages(result.events, sim.queries, sim.op_of, result.end_time)
    plans = [(t, p) for t, p in _plans(result.events) if p["why"] == "capacity"]
    for t, nodes, queries in stages[1:]:
        if not queries:
            continue
        picked = [p for at, p in plans if at == t]
        assert len(picked) == 1, f"one plan for the capacity back at {t} ({nodes})"
        # the queries the plan picked by profit density (protocols/progressive/schedule.py)
        # are the ones this node's capacity brought back
        picks = picked[0]["picks"]
        assert set(queries) <= {pick["query"] for pick in picks}
        assert all(pick["pd"] > 0 for pick in picks)
