"""``ftctl sim --scenario``: chaos-scenario files on the simulation host (ftctl/sim/scenario.py)
and ``--faults``: every bundled scenario runs, its seconds scale onto the simulated run,
its kinds keep their Spark meaning; what the sim cannot run is one line, exit 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import scenario as simsc
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator, nominal_duration, sim_params
from ftctl.sim.scenario import SimScenario, load_sim_scenario
from protocols.registry import PROTOCOLS
from tests.conftest import load

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parent.parent
CHAOS = ROOT / "chaos"
RACKS = ["--workers", "4", "--label", "rack=a", "--label", "rack=b"]
runner = CliRunner()

# The topology each bundled scenario is written for (the rest: wordcount) and the extra
# options it needs.
TOPOLOGY = {"kill-sharder": "sharder"}
OPTIONS = {"rack-failure": RACKS}
# What each scenario leaves in the history of every run ("crash": crash faults injected).
EXPECT = {
    # the pause follows the recovery, when checkpoint's rollback restarts every task
    "cascading-failure": {"crash": 2, "fault-skipped": 1},
    # count[0]'s node frozen 3 s (under the 4.5 s hang rule: its three units stall and
    # resume), lines[0]'s node killed, then replaced
    "container-faults": {"fault-injected": 5, "fault-healed": 4, "zombie-fenced": 0,
                         "node-down": 1, "node-up": 1, "failure-detected": 1},
    "flapping": {"fault-injected": 2, "zombie-fenced": 2},
    "kill-during-checkpoint": {"crash": 2},
    "kill-sharder": {"crash": 1},
    "partition": {"fault-injected": 1, "fault-healed": 1},
    "rack-failure": {"fault-injected": 3, "fault-healed": 1, "node-down": 2, "node-up": 2},
    "single-kill": {"crash": 1},
}


def _scenario(name: str, topology: str = "wordcount",
              labels: list[dict[str, str]] | None = None) -> tuple[SimScenario, Simulator]:
    topo = load(topology)
    sc = load_sim_scenario(CHAOS / f"{name}.yaml", topo,
                           nominal_duration(ExecutionGraph(topo)), labels or [{}, {}])
    return sc, Simulator(topo, PROTOCOLS["checkpoint"], {}, scenario=sc)


def _events(events: list[HistoryEvent], kind: str) -> list[HistoryEvent]:
    """Host events of ``kind`` (``crash``: crashes) or protocol notes named ``kind``."""
    if kind == "crash":
        return [e for e in events if e.kind == "fault-injected" and e.data["type"] == "crash"]
    return [e for e in events if kind in (e.kind, e.note)]


def test_every_bundled_scenario_is_known_here() -> None:
    assert sorted(p.stem for p in CHAOS.glob("*.yaml")) == sorted(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_every_bundled_scenario_runs_on_the_sim(name: str) -> None:
    topology = TOPOLOGY.get(name, "wordcount")
    res = runner.invoke(app, ["sim", str(ROOT / "topologies" / f"{topology}.yaml"),
                              "-p", "checkpoint", "-n", "3", "--json",
                              "--scenario", str(CHAOS / f"{name}.yaml"),
                              *OPTIONS.get(name, [])])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["faults"] == name and out["passed"] and out["faults_injected"] > 0
    labels = [{"rack": "a"}, {"rack": "b"}] * 2 if name in OPTIONS else None
    _, sim = _scenario(name, topology, labels)
    for seed in (1, 2):
        outcome = sim.run_one(seed)
        assert outcome.verdict.passed
        for kind, n in EXPECT[name].items():
            assert len(_events(outcome.result.events, kind)) == n, (kind, seed)


def test_scenario_seconds_scale_onto_the_simulated_run() -> None:
    sc, sim = _scenario("single-kill")
    nominal = nominal_duration(sim.graph)
    assert sc.scale == pytest.approx(nominal / simsc.SPARK_RUN_SECONDS)
    assert sc.hang_timeout == pytest.approx(simsc.SPARK_HEARTBEAT_TIMEOUT * sc.scale)
    (fault,) = _events(sim.run_one(1).result.events, "crash")
    assert fault.t == pytest.approx(3.0 * sc.scale, abs=1e-6)  # at: 3.0 (12% of 25 s)


def test_the_scale_constants_are_the_spark_sides() -> None:
    from ftctl.run.chaos import TARGET_SECONDS
    from ftctl.spark.host import HANG_TIMEOUT, HEARTBEAT_TIMEOUT

    assert (simsc.SPARK_RUN_SECONDS, simsc.SPARK_HEARTBEAT_TIMEOUT, simsc.SPARK_HANG_TIMEOUT) == (
        TARGET_SECONDS, HEARTBEAT_TIMEOUT, HANG_TIMEOUT)


def test_flapping_pauses_are_declared_hung_and_fenced() -> None:
    sc, sim = _scenario("flapping")
    events = sim.run_one(4).result.events
    injected = _events(events, "fault-injected")
    assert [(e.payload["target"], e.t) for e in injected] == [
        ("count[0]", pytest.approx(8.0 * sc.scale)), ("count[0]", pytest.approx(16.0 * sc.scale))]
    hung = [e for e in _events(events, "failure-detected") if e.payload.get("cause") == "heartbeat"]
    assert [e.t for e in hung] == [pytest.approx(e.t + sc.hang_timeout) for e in injected]


def test_partition_fences_the_receiver_for_frames_lost() -> None:
    _, sim = _scenario("partition")
    events = sim.run_one(1).result.events
    (inj,) = _events(events, "fault-injected")
    assert (inj.data["type"], inj.data["target"], inj.data["peers"]) == (
        "partition", "split[0]", ["count[0]"])
    lost = _events(events, "frame-lost")
    assert lost and {(e.instance, e.payload["sender"]) for e in lost} <= {("count[0]", "split[0]"),
                                                                    ("split[0]", "count[0]")}


def test_rack_failure_takes_the_rack_down_within_the_window_and_brings_it_back() -> None:
    sc, sim = _scenario("rack-failure", labels=[{"rack": "a"}, {"rack": "b"}] * 2)
    events = sim.run_one(2).result.events
    down = _events(events, "node-down")
    assert sorted(e.payload["node"] for e in down) == ["w0", "w2"]  # rack=a
    assert all(5.0 * sc.scale <= e.t <= 7.0 * sc.scale + 1e-9 for e in down)
    up = _events(events, "node-up")
    assert sorted(e.payload["node"] for e in up) == ["w0", "w2"]
    gaps = sorted(e.t for e in up)
    assert gaps[0] >= 11.0 * sc.scale - 1e-9  # 10 s + a 1-3 s gap
    assert 1.0 * sc.scale - 1e-9 <= gaps[1] - gaps[0] <= 3.0 * sc.scale + 1e-9


def test_kill_during_checkpoint_strikes_while_a_snapshot_is_taken() -> None:
    _, sim = _scenario("kill-during-checkpoint")
    events = sim.run_one(3).result.events
    kills = _events(events, "crash")
    assert len(kills) == 2
    # each after a snapshot began and before it completed (or was abandoned for a rollback)
    done = [e.t for e in _events(events, "snapshot-complete")]
    assert all(not any(k.t == t for t in done) for k in kills)


def test_after_a_fault_strikes_exactly_its_delay_after_the_injection() -> None:
    sc, sim = _scenario("cascading-failure")
    for seed in (1, 2, 3):
        first, second = _events(sim.run_one(seed).result.events, "crash")
        assert first.t == pytest.approx(3.0 * sc.scale, abs=1e-12)
        assert second.t - first.t == pytest.approx(2.0 * sc.scale, abs=1e-12)  # delay: 2s


def test_after_a_phase_strikes_its_delay_after_the_phase_is_entered() -> None:
    """Under causal (local recovery) the task paused 0.2 s after the recovery began is
    running: the pause strikes then, once (count defaults to 1), though two recoveries run."""
    sc, _ = _scenario("cascading-failure")
    sim = Simulator(load("wordcount"), PROTOCOLS["causal"], {}, scenario=sc)
    events = sim.run_one(1).result.events
    detected = _events(events, "failure-detected")
    (pause,) = [e for e in _events(events, "fault-injected") if e.data["type"] == "pause"]
    assert len(detected) == 2
    assert pause.t == pytest.approx(detected[0].t + 0.2 * sc.scale, abs=1e-12)


def test_after_a_declared_phase_follows_declare_phase(tmp_path: Path) -> None:
    """A phase other than recovering/snapshotting is seen through the host's DeclarePhase:
    the follower strikes its delay after the first instance opens the phase, once."""
    path = tmp_path / "phase.yaml"
    path.write_text("name: p\nfaults:\n  - type: kill-task\n    target: count[0]\n"
                    "    after: {phase: draining, delay: 1s}\n")
    topo = load("wordcount")
    draining = dataclasses.replace(PROTOCOLS["causal"], phases=("draining",))
    sc = load_sim_scenario(path, topo, nominal_duration(ExecutionGraph(topo)), [{}, {}],
                           protocol=draining)
    graph = ExecutionGraph(topo)
    host = SimHost(graph, PROTOCOLS["causal"], sim_params(graph, PROTOCOLS["causal"], {}),
                   seed=1, cluster=sc.cluster())
    sc.install(host)
    host.at(0.001, lambda: host.phase("draining", True, 1))
    host.at(0.0012, lambda: host.phase("draining", True, 2))  # already open: no new edge
    host.at(0.002, lambda: host.phase("draining", False, 1))
    events = host.run().events
    (kill,) = _events(events, "crash")
    assert kill.data["instances"] == ["count[0]"]
    assert kill.t == pytest.approx(0.001 + 1.0 * sc.scale, abs=1e-12)


@pytest.mark.parametrize(("args", "message"), [
    (["topologies/wordcount.yaml", "--scenario", "chaos/rack-failure.yaml"],
     "error: chaos/rack-failure.yaml: target: kill-group: no worker has labels rack=a"),
    (["topologies/wordcount.yaml", "--scenario", "chaos/kill-sharder.yaml"],
     "error: chaos/kill-sharder.yaml: faults: fault 0 (kill-task): no instance 'sharder[0]'"),
    (["topologies/wordcount.yaml", "-p", "lineage", "--scenario",
      "chaos/kill-during-checkpoint.yaml"],
     "error: chaos/kill-during-checkpoint.yaml: trigger: during-checkpoint needs a protocol "
     "that takes snapshots; lineage never enters 'snapshotting'"),
    (["topologies/wordcount.yaml", "-p", "lineage", "--scenario", "PHASE"],
     "error: PHASE: faults[0].after.phase: lineage never enters phase 'snapshotting' (its "
     "phases: recovering, replaying, purging)"),
    (["topologies/wordcount.yaml", "--faults", "crash,kill"],
     "error: --faults: unknown fault kind 'kill'"),
    (["topologies/wordcount.yaml", "--faults", "pause", "--scenario", "chaos/flapping.yaml"],
     "error: --faults: draws random schedules"),
    (["topologies/wordcount.yaml", "--scenario", "chaos/flapping.yaml", "--label", "rack"],
     "error: --label: bad label 'rack'"),
])
def test_what_cannot_run_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    phase = tmp_path / "phase.yaml"
    phase.write_text("name: p\nfaults:\n  - type: kill-task\n    target: random\n"
                     "    after: {phase: snapshotting}\n")
    args = [str(phase) if a == "PHASE" else a for a in args]
    message = message.replace("PHASE", str(phase))
    monkeypatch.chdir(ROOT)
    res = runner.invoke(app, ["sim", *args])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(message) and res.output.count("\n") == 1, res.output


def test_sim_faults_option_draws_every_kind_and_replays_a_seed() -> None:
    topo = str(ROOT / "topologies" / "wordcount.yaml")
    # judged at most once: none promises nothing on wordcount, whose count keeps state
    res = runner.invoke(app, ["sim", topo, "-p", "none", "-n", "40", "--json",
                              "--faults", "pause,partition", "--expect", "at-most-once"])
    out = json.loads(res.output)
    assert res.exit_code == 1 and out["faults"] == ["pause", "partition"]
    assert out["faults_injected"] > 40 and out["violating_schedules"] > 0
    seed = out["failing_seeds"][0]
    again = runner.invoke(app, ["sim", topo, "-p", "none", "--faults", "pause,partition",
                                "--expect", "at-most-once", "--seed", str(seed)])
    assert again.exit_code == 1 and "violated" in again.output
    assert "fault-injected" in again.output
