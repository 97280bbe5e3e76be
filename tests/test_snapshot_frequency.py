"""The cost model of the simulation host and the 003 snapshot-frequency study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.config.load import load_topology
from ftctl.figures import FigureOptions
from ftctl.figures.fig_003_snapshot_frequency import (
    multi_input_channels,
    run,
    spearman,
    with_events,
)
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.costs import CostedSimHost, CostModel, percentile
from ftctl.sim.host import SimHost
from ftctl.sim.runner import sim_params
from ftctl.verify.checker import verify
from protocols.contract.params import NoParams
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS

pytestmark = pytest.mark.sim
ROOT = Path(__file__).resolve().parent.parent


def wordcount(lines: int):
    return ExecutionGraph(with_events(load_topology(ROOT / "topologies/wordcount.yaml"),
                                      lines * 8, "wordcount"))


def test_costs_change_the_clock_not_the_output():
    graph = wordcount(400)
    plain = SimHost(graph, PROTOCOLS["none"], NoParams(), seed=0, max_events=None).run()
    costed = CostedSimHost(graph, PROTOCOLS["none"], NoParams(), seed=0)
    result = costed.run()
    # Other timing, other interleavings: the same output by the sink's own judgement.
    modes = graph.topology.sink_modes()
    assert verify(modes, plain.outputs, result.outputs, Guarantee.EXACTLY_ONCE).passed
    # Every word passes split, count and the sink: each instance is a single server, so
    # the run cannot end before the busiest chain of work is done.
    words = sum(len(v) for v in plain.outputs.values())
    per_sink_work = words * CostModel().record / len(graph.sinks)
    assert costed.exec_s >= per_sink_work
    assert costed.exec_s > plain.end_time


def test_a_busy_instance_makes_deliveries_wait():
    graph = wordcount(400)
    cheap = CostedSimHost(graph, PROTOCOLS["none"], NoParams(), seed=0,
                          costs=CostModel(record=0.0, batch=0.0))
    dear = CostedSimHost(graph, PROTOCOLS["none"], NoParams(), seed=0,
                         costs=CostModel(record=20e-6))
    cheap.run()
    dear.run()
    assert dear.exec_s > 5 * cheap.exec_s


def test_persists_are_measured_and_make_output_wait_for_a_snapshot():
    graph = wordcount(2000)
    params = sim_params(graph, PROTOCOLS["checkpoint"], {"interval": 0.002})
    host = CostedSimHost(graph, PROTOCOLS["checkpoint"], params, seed=0)
    host.run()
    assert len(host.refs) >= 3
    assert host.persisted_bytes > 1000
    # Transactional sinks make records visible at a commit, after they arrived.
    assert host.latencies and min(host.latencies) >= 0 and max(host.latencies) > 0.001
    none = CostedSimHost(graph, PROTOCOLS["none"], NoParams(), seed=0)
    none.run()
    assert max(none.latencies) < max(host.latencies)


def test_percentile_and_spearman():
    assert percentile([], 0.5) == 0.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 0.99) == 99.0
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_multi_input_channels_counts_fan_in_only():
    q0 = ExecutionGraph(load_topology(ROOT / "topologies/nexmark/q0.yaml"))
    q4 = ExecutionGraph(load_topology(ROOT / "topologies/nexmark/q4.yaml"))
    assert multi_input_channels(q4) > multi_input_channels(q0)


def test_shorter_intervals_snapshot_more_and_recover_faster(tmp_path):
    res = run(FigureOptions(out=tmp_path, quick=True, options={
        "events": "16000", "workloads": "wordcount,q1", "intervals": "0.002,off"}))
    points = res.summary["points"]
    assert res.summary["all_exactly_once"]
    for w in ("wordcount", "q1"):
        by = {p["interval"]: p for p in points if p["workload"] == w}
        assert set(by) == {"none", "0.002", "off"}
        # none takes no snapshot; its one ref is the offset each source stores per batch
        assert by["none"]["snapshots"] == 1 and by["none"]["overhead"] is None
        assert by["0.002"]["snapshots"] > by["off"]["snapshots"] >= 1
        assert by["0.002"]["latency_p50_ms"] < by["off"]["latency_p50_ms"]
        assert by["0.002"]["reprocessed"] <= by["off"]["reprocessed"]
        assert by["0.002"]["overhead"] >= by["off"]["overhead"] > -0.01
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["cost_model"].startswith("costs modelled")
    assert len(data["points"]) == len(points)
    assert (tmp_path / "results.csv").read_text().count("\n") == len(points) + 1
    assert (tmp_path / "snapshot-frequency.png").stat().st_size > 10_000


@pytest.mark.parametrize("opt, field", [("workloads=q9x", "workloads"),
                                        ("intervals=0", "intervals"),
                                        ("events=many", "events")])
def test_bad_options_are_one_line_exit_2(tmp_path, opt, field):
    res = CliRunner().invoke(app, ["figure", "003-snapshot-frequency", "--quick",
                                   "--out", str(tmp_path), "--opt", opt])
    assert res.exit_code == 2
    assert f"--opt: {field}:" in res.output
    assert "Traceback" not in res.output
