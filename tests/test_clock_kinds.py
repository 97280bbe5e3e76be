"""The clock fault kinds through the one registry: ``ftctl sim --faults`` draws each,
a scenario sets one on its target's clock (its seconds scaled like every scenario time),
bad params are one line, and the Spark class sets it through the task's clock agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chaos.clock_faults import ClockDrift, ClockSkew, ClockStall
from chaos.faults import FaultError, NotRunning
from chaos.hostctx import HostFaultContext
from ftctl.cli import app
from ftctl.config.fault_kinds import FAULT_TYPES
from ftctl.kernel.clocks import ClockFault, Drift, Skew, Stall
from ftctl.kernel.history import HistoryEvent
from ftctl.metrics.recovery import measured
from ftctl.metrics.runreport import windows
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.recovery import fault_times
from ftctl.sim.runner import Simulator, nominal_duration
from ftctl.sim.scenario import load_sim_scenario
from protocols.registry import PROTOCOLS
from tests.cli_fuzz import one_line
from tests.conftest import ROOT, load

pytestmark = pytest.mark.sim

runner = CliRunner()
KINDS = ("clock-skew", "clock-drift", "clock-jump", "clock-stall")


@pytest.mark.parametrize("kind", KINDS)
def test_sim_faults_draws_each_clock_kind_and_keeps_exactly_once(kind: str) -> None:
    res = runner.invoke(app, ["sim", str(ROOT / "topologies" / "wordcount.yaml"), "-p",
                              "checkpoint", "--faults", kind, "-n", "4", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output.strip().splitlines()[-1])
    assert doc["faults"] == [kind] and doc["passed"]
    assert doc["recovery"][kind]["faults"] >= 4  # struck, none a failure
    assert doc["failures_injected"] == 0


def _run(tmp_path: Path, fault: str) -> list[dict[str, object]]:
    path = tmp_path / "clock.yaml"
    path.write_text(f"name: clock\nfaults:\n  - {fault}\n")
    topo = load("wordcount")
    sc = load_sim_scenario(path, topo, nominal_duration(ExecutionGraph(topo)), [{}, {}])
    sim = Simulator(topo, PROTOCOLS["checkpoint"], {}, scenario=sc)
    one = sim.run_one(1)
    assert one.verdict.passed
    return [dict(e.data, scale=sc.scale) for e in one.result.events
            if e.kind == "fault-injected"]


def test_a_scenario_skews_its_target_by_the_scaled_offset(tmp_path: Path) -> None:
    (hit,) = _run(tmp_path, "{type: clock-skew, at: 1.0, target: 'count[1]', "
                            "params: {offset: -2.0}}")
    assert hit["type"] == "clock-skew" and hit["target"] == "count[1]"
    assert hit["offset"] == pytest.approx(-2.0 * float(hit["scale"]))  # type: ignore[arg-type]


def test_a_scenario_stall_lasts_its_scaled_duration(tmp_path: Path) -> None:
    (hit,) = _run(tmp_path, "{type: clock-stall, at: 1.0, duration: 0.5, target: 'split[0]',"
                            " params: {catch_up: true}}")
    assert hit["type"] == "clock-stall" and hit["catch_up"] is True
    assert hit["seconds"] == pytest.approx(0.5 * float(hit["scale"]))  # type: ignore[arg-type]


@pytest.mark.parametrize(("fault", "says"), [
    ("{type: clock-drift, at: 1.0, target: 'count[0]', params: {rate: 0}}", "rate"),
    ("{type: clock-skew, at: 1.0, target: 'count[0]', params: {offset: .inf}}", "offset"),
    ("{type: clock-jump, at: 1.0, target: 'count[0]'}", "by"),
])
def test_bad_clock_params_are_one_line_and_exit_2(tmp_path: Path, fault: str,
                                                  says: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: bad\nfaults:\n  - {fault}\n")
    res = runner.invoke(app, ["sim", str(ROOT / "topologies" / "wordcount.yaml"), "-p",
                              "checkpoint", "--scenario", str(path)])
    assert res.exit_code == 2, res.output
    one_line(res.output, says)


def _ctx(sent: list[tuple[str, ClockFault]], running: bool = True) -> HostFaultContext:
    def deliver(instance: str, fault: ClockFault) -> bool:
        sent.append((instance, fault))
        return running
    return HostFaultContext(clock=lambda: 7.0, instance_ids=["a[0]"],
                            task_pids=lambda i: None, clock_agent=deliver)


def test_spark_classes_set_the_fault_through_the_clock_agent() -> None:
    sent: list[tuple[str, ClockFault]] = []
    ctx = _ctx(sent)
    rec = ClockSkew("a[0]", {"offset": 1.5}).inject(ctx)
    ClockDrift("a[0]", {"rate": 1.05}).inject(ctx)
    ClockStall("a[0]", {"catch_up": True}, duration=2.0).inject(ctx)
    assert sent == [("a[0]", Skew(1.5)), ("a[0]", Drift(1.05)), ("a[0]", Stall(2.0, True))]
    assert (rec.fault, rec.target, rec.t, rec.pids) == ("clock-skew", "a[0]", 7.0, [])
    assert rec.details == {"via": "agent", "offset": 1.5}
    assert FAULT_TYPES["clock-skew"].hosts == ("sim", "spark")


def test_spark_clock_fault_on_a_stopped_task_or_a_host_without_clocks() -> None:
    with pytest.raises(NotRunning):
        ClockSkew("a[0]", {"offset": 1.0}).inject(_ctx([], running=False))
    bare = HostFaultContext(clock=lambda: 0.0, instance_ids=["a[0]"], task_pids=lambda i: None)
    with pytest.raises(FaultError, match="runtime clock"):
        ClockSkew("a[0]", {"offset": 1.0}).inject(bare)
    with pytest.raises(FaultError, match="duration"):
        ClockStall("a[0]").inject(_ctx([]))


def test_a_failure_after_a_clock_fault_is_put_down_to_the_crash_not_the_clock() -> None:
    """A crash, then a clock fault before its detection: the crash gets the detection and
    its restart, the clock fault (which fails nothing) no recovery at all."""
    def ev(seq: int, t: float, kind: str, **data: object) -> HistoryEvent:
        return HistoryEvent(seq, t, "sim", kind, data, fault=str(seq) if "type" in data
                            else None)

    events = [ev(0, 1.000, "fault-injected", type="crash", target="count[0]"),
              ev(1, 1.001, "fault-injected", type="clock-skew", target="split[0]"),
              ev(2, 1.003, "failure-detected", instances=["count[0]"]),
              ev(3, 1.004, "instance-started", instances=["count[0]"])]
    times = {kind: (detect, restart) for kind, detect, restart, _, _ in
             fault_times(events, [1.01])}
    assert times["kill-task"] == (pytest.approx(0.003), pytest.approx(0.004))
    assert times["clock-skew"] == (None, None)
    # The run report measures recoveries after the crash only.
    assert [w.fault for w in windows(events, 0.0) if measured(w.fault)] == ["crash"]
