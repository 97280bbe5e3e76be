"""A schedule whose run raises is a failed schedule with its seed, never a traceback."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.sim import runner as sim_runner
from ftctl.sim.runner import ScheduleCrashed

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = str(ROOT / "topologies" / "wordcount.yaml")


@pytest.fixture
def crashing_faulty_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs with a failure schedule raise, as a protocol's own consistency check does
    (causal's CausalIncomplete); the fault-free runs the simulator starts with do not."""
    real = sim_runner.SimHost.run

    def run(self: Any) -> Any:
        if self.progress_due is not None:  # faults to strike; none in the fault-free runs
            raise RuntimeError("replay expects p#1 as 1, the channel is past it")
        return real(self)

    monkeypatch.setattr(sim_runner.SimHost, "run", run)


@pytest.mark.parametrize("args", [["-n", "3", "--first-seed", "7"], ["--seed", "7"]])
def test_a_crashing_schedule_is_one_line_naming_its_seed(
    crashing_faulty_runs: None, args: list[str],
) -> None:
    result = CliRunner().invoke(app, ["sim", WORDCOUNT, "-p", "none", *args,
                                      "--faults", "crash,pause"])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # typer's exit, nothing raised past it
    lines = [line for line in result.output.splitlines() if line.strip()]
    error = [line for line in lines if "error:" in line]
    assert len(error) == 1, lines
    assert "seed 7: RuntimeError: replay expects p#1" in error[0]
    assert f"ftctl sim {WORDCOUNT} -p none --seed 7 --faults crash,pause" in error[0]


def test_the_crash_line_replays_with_the_same_input_and_params(
    crashing_faulty_runs: None,
) -> None:
    # A seed replayed without --records or --param is another run: the line carries both.
    result = CliRunner().invoke(app, ["sim", WORDCOUNT, "-p", "causal", "-n", "2",
                                      "--param", "depth=3", "--records", "3000",
                                      "--faults", "crash,pause"])
    assert result.exit_code == 1, result.output
    error = [line for line in result.output.splitlines() if "error:" in line]
    assert (f"ftctl sim {WORDCOUNT} -p causal --param depth=3 --records 3000 --seed 1 "
            "--faults crash,pause") in error[0], error


def test_the_crash_survives_the_trip_back_from_a_worker_process() -> None:
    """``-j N`` workers send exceptions back pickled: the seed must come with it."""
    back = pickle.loads(pickle.dumps(ScheduleCrashed(12, "CausalIncomplete: x")))
    assert (back.seed, str(back)) == (12, "seed 12: CausalIncomplete: x")
