"""Simulation host: determinism, protocols under crash schedules, checker sensitivity."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator, sim_params
from ftctl.verify.checker import verify
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES, load

pytestmark = pytest.mark.sim
runner = CliRunner()


def _host(
    name: str, protocol: str, seed: int, schedule: FailureSchedule | None = None, **given: object
) -> SimHost:
    graph = ExecutionGraph(load(name))
    return SimHost(
        graph,
        PROTOCOLS[protocol],
        sim_params(graph, PROTOCOLS[protocol], dict(given)),
        seed,
        schedule,
        hash_trace=True,
    )


def test_same_seed_same_trace() -> None:
    sched = FailureSchedule([Strike(60, 1), Strike(140, 2)])
    a = _host("wordcount", "checkpoint", 5, sched).run()
    b = _host("wordcount", "checkpoint", 5, sched).run()
    c = _host("wordcount", "checkpoint", 6, sched).run()
    assert a.trace_hash == b.trace_hash
    assert a.trace_hash != c.trace_hash
    assert a.stats.failures == 2


def test_simulator_replay_is_deterministic() -> None:
    sim = Simulator(load("diamond"), PROTOCOLS["checkpoint"], {})
    first = sim.run_one(42, trace=True)
    again = sim.run_one(42, trace=True)
    assert first.result.trace == again.result.trace
    assert first.result.trace_hash == again.result.trace_hash


def test_fault_free_checkpoint_equals_golden() -> None:
    graph = ExecutionGraph(load("windowed"))
    golden = golden_output(graph)
    for alignment in ("unaligned", "aligned"):
        params = sim_params(graph, PROTOCOLS["checkpoint"], {"alignment": alignment})
        result = SimHost(graph, PROTOCOLS["checkpoint"], params, 9).run()
        assert result.complete
        # Interleavings differ between runs; the per-key order must not.
        assert verify(
            graph.topology.sink_modes(), golden, result.outputs, Guarantee.EXACTLY_ONCE
        ).passed
        assert result.stats.persists > 0  # snapshots were actually taken


def test_golden_wordcount_counts_every_word() -> None:
    graph = ExecutionGraph(load("wordcount"))
    out = golden_output(graph)["out"]
    # 2000 lines of 8 words: one running-count update per word.
    assert len(out) == 16000
    finals: dict[str, int] = {}
    for word, count in out:
        assert count == finals.get(word, 0) + 1  # per-key order is preserved
        finals[word] = count
    assert sum(finals.values()) == 16000


@pytest.mark.parametrize("topology", ["wordcount", "sharder", "diamond", "windowed"])
@pytest.mark.parametrize("alignment", ["unaligned", "aligned"])
def test_checkpoint_has_no_violations(topology: str, alignment: str) -> None:
    sim = Simulator(load(topology), PROTOCOLS["checkpoint"], {"alignment": alignment})
    summary = sim.run_many(60, seed=1000)
    assert summary.failures > 0
    assert summary.failing_seeds == [], summary.violations


def test_kill_during_recovery_is_survived() -> None:
    # Three bursts close together: later ones land while a rollback is under way.
    sched = FailureSchedule([Strike(80, 2), Strike(84, 1), Strike(90, 3)])
    graph = ExecutionGraph(load("wordcount"))
    params = sim_params(graph, PROTOCOLS["checkpoint"], {})
    result = SimHost(graph, PROTOCOLS["checkpoint"], params, 3, sched).run()
    assert result.complete
    assert verify(
        graph.topology.sink_modes(), golden_output(graph), result.outputs, Guarantee.EXACTLY_ONCE
    ).passed
    assert sum(e.note == "rollback" for e in result.events) >= 2


def test_none_loses_records_and_exits_1() -> None:
    args = ["sim", str(TOPOLOGIES / "wordcount.yaml"), "--protocol", "none",
            "--schedules", "40", "--json"]
    # Its count restarts empty: on wordcount none promises nothing, the runs only finish.
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["guarantee"] == "none"
    res = runner.invoke(app, [*args, "--expect", "exactly-once"])
    assert res.exit_code == 1, res.output
    summary = json.loads(res.output)
    assert summary["violations"]["lost"] > 0
    assert summary["violating_schedules"] > 0


def test_none_holds_at_most_once_where_no_operator_keeps_state() -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "replica-chain.yaml"), "-p", "none",
                              "-n", "40", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["guarantee"] == "at-most-once" and summary["failures_injected"] > 0


def test_sim_cli_passes_for_checkpoint() -> None:
    res = runner.invoke(
        app, ["sim", str(TOPOLOGIES / "sharder.yaml"), "-p", "checkpoint", "-n", "20", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["violating_schedules"] == 0


def test_sim_records_resizes_the_input_and_the_replay_line_keeps_it() -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "nexmark" / "q5.yaml"), "-p",
                              "checkpoint", "-n", "3", "--records", "4000", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["records"] == 4000 and summary["failures_injected"] > 0
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "wordcount.yaml"), "-p", "none",
                              "--expect", "exactly-once", "-n", "20", "--records", "1000"])
    assert res.exit_code == 1, res.output
    assert "--records 1000 --seed" in res.output


def test_sim_seed_replays_with_trace() -> None:
    res = runner.invoke(
        app, ["sim", str(TOPOLOGIES / "wordcount.yaml"), "-p", "none", "--seed", "6",
              "--expect", "at-most-once"]
    )
    assert res.exit_code == 1
    assert "deliver ch" in res.output and "trace hash" in res.output


def test_sim_rejects_unknown_protocol_and_param() -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "wordcount.yaml"), "-p", "nope"])
    assert res.exit_code == 2
    assert "unknown protocol 'nope'" in res.output
    res = runner.invoke(
        app,
        [
            "sim",
            str(TOPOLOGIES / "wordcount.yaml"),
            "-p",
            "checkpoint",
            "--param",
            "alignment=sideways",
        ],
    )
    assert res.exit_code == 2
    assert "alignment must be 'unaligned' or 'aligned', got 'sideways'" in res.output


@pytest.mark.parametrize(("protocol", "item", "message"), [
    ("causal", "depth=0", "depth must be >= 1, got '0'"),
    ("causal", "snapshot_every=x", "snapshot_every must be an integer, got 'x'"),
    ("checkpoint", "interval=-1", "interval must be > 0.0 or 'auto', got '-1'"),
    ("lineage", "depth=2", "unknown parameter 'depth' for lineage"),
])
def test_sim_rejects_a_bad_param_value_before_running(protocol: str, item: str,
                                                      message: str) -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "wordcount.yaml"), "-p", protocol,
                              "--param", item])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert "schedules/min" not in res.output  # refused before any schedule ran
