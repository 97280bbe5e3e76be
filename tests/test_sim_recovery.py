"""Recovery times per fault kind on the simulation host (ftctl/sim/recovery.py, ftctl sim)."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.sim.faults import (
    HANG_TIMEOUT,
    KNOWN_KINDS,
    Drop,
    FailureSchedule,
    Pause,
    Strike,
    parse_kinds,
)
from ftctl.sim.recovery import fault_times, spread, summarize
from tests.conftest import TOPOLOGIES
from tests.test_sim_faults import _events, _run

pytestmark = pytest.mark.sim

runner = CliRunner()


def test_a_crash_has_its_times_read_from_the_history() -> None:
    _, res = _run("wordcount", "checkpoint", [(0.005, Strike(0, 1, ("count[0]",)))])
    [(kind, detect, restart, recovered, first)] = fault_times(res.events, res.output_times)
    struck = _events(res, "fault-injected")[0].t
    assert kind == "kill-task"
    assert detect == pytest.approx(_events(res, "failure-detected")[0].t - struck)
    assert restart == pytest.approx(_events(res, "instance-started")[0].t - struck)
    assert recovered == pytest.approx(_events(res, "recovered")[0].t - struck)
    assert first is not None and recovered is not None and first > recovered
    # the first output made visible after the restart (checkpoint commits its sinks)
    shown = sorted([*res.output_times, *(e.t for e in _events(res, "output-committed")
                                         if e.data["records"])])
    assert struck + first == pytest.approx(min(t for t in shown if t > struck + restart))


def test_a_pause_shorter_than_the_hang_timeout_fails_nothing() -> None:
    _, res = _run("wordcount", "causal", [(0.005, Pause(0, HANG_TIMEOUT / 3, "split[0]"))])
    assert fault_times(res.events, res.output_times) == [("pause", None, None, None, None)]


def test_summary_spreads_each_measure_over_the_faults_that_reached_it() -> None:
    times = [("kill-task", 0.001 * k, 0.002 * k, 0.002 * k, None) for k in range(1, 21)]
    times.append(("pause", None, None, None, None))
    got = summarize(times)
    assert got["pause"] == {"faults": 1, "failed": 0, "detect": None, "restart": None,
                            "recovered": None, "first_output": None}
    kill = got["kill-task"]
    assert kill["faults"] == kill["failed"] == 20 and kill["first_output"] is None
    assert kill["detect"] == {"median": 0.0105, "p95": 0.019, "max": 0.02, "n": 20}
    assert spread([]) is None


def test_fault_names_of_the_scenarios_are_taken() -> None:
    assert parse_kinds("kill-task,crash,kill-worker,drop") == ("crash", "node", "drop")
    with pytest.raises(ValueError, match="kill-task"):
        parse_kinds("kill")
    drawn = FailureSchedule.random(random.Random(3), 300, 30, 3, ("drop",))
    assert drawn.strikes and all(isinstance(s, Drop) for s in drawn.strikes)
    assert "drop" in KNOWN_KINDS


def test_ftctl_sim_reports_recovery_times_per_fault_kind() -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "wordcount.yaml"), "-p", "causal",
                              "--faults", "kill-task,pause", "-n", "15", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    rec = out["recovery"]
    assert set(rec) <= {"kill-task", "pause"} and rec["kill-task"]["failed"] > 0
    for entry in rec.values():
        for name in ("detect", "restart", "recovered", "first_output"):
            got = entry[name]
            if got is not None:
                assert 0 < got["median"] <= got["p95"] <= got["max"]
                assert got["n"] <= entry["failed"] <= entry["faults"]
    table = runner.invoke(app, ["sim", str(TOPOLOGIES / "wordcount.yaml"), "-p", "causal",
                                "--faults", "kill-task", "-n", "5"])
    assert table.exit_code == 0 and "recovery per fault kind" in table.output
    assert "first output" in table.output and "kill-task" in table.output


def test_an_unknown_fault_name_is_one_line_and_exit_2() -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "wordcount.yaml"), "--faults", "boom"])
    assert res.exit_code == 2
    assert "--faults" in res.output and "Traceback" not in res.output


def test_faults_of_one_kind_before_a_detection_share_it() -> None:
    _, res = _run("wordcount", "causal", [(0.005, Strike(0, 1, ("split[0]",))),
                                          (0.0051, Strike(0, 1, ("split[1]",)))])
    first, second = fault_times(res.events, res.output_times)
    detected = _events(res, "failure-detected")[0].t
    assert detected > 0.0051  # both struck before the first detection
    assert first[1] is not None and second[1] is not None
    assert first[1] - second[1] == pytest.approx(0.0001, abs=1e-6)
