"""``ftctl chaos`` on local Spark clusters: random kills, lost records, the event log, a rack.

The kill runs share one module cluster (``--master``); the rack failure needs labelled
workers that ftctl itself starts and kills, so it brings its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ftctl.cluster import LocalCluster
from ftctl.kernel.history import HistoryEvent
from ftctl.results import RunStore

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"
RACK = ROOT / "chaos" / "rack-failure.yaml"


def _chaos(args: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # the recovery table unabridged
    return subprocess.run([sys.executable, "-m", "ftctl.cli", "chaos", str(WORDCOUNT), *args],
                          cwd=cwd, text=True, capture_output=True, timeout=timeout, env=env)


def _run_dir(results: Path) -> Path:
    (run_dir,) = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return run_dir


def _events(results: Path) -> list[HistoryEvent]:
    return RunStore.open(_run_dir(results)).read_history()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    state = tmp_path_factory.mktemp("chaos-cluster")
    with LocalCluster(workers=2, cores=12, state_dir=state) as c:
        yield c


def test_kills_under_checkpoint_are_exactly_once(cluster: LocalCluster, tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = _chaos(["--kill", "2", "--protocol", "checkpoint", "--master", cluster.master_url,
                   "--results", str(results)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "PASSED" in proc.stdout
    assert "recovery per fault" in proc.stdout and "detect" in proc.stdout
    run_dir = _run_dir(results)
    report = json.loads((run_dir / "recovery.json").read_text())
    assert len(report["faults"]) == 2
    for row in report["faults"]:
        assert row["fault"] == "kill-task"
        assert row["detection_s"] is not None and 0 <= row["detection_s"] < 0.5
        assert row["restart_s"] is not None and row["first_output_s"] is not None
    assert (run_dir / "latency.png").exists() and (run_dir / "throughput.png").exists()
    assert (run_dir / "schedule.json").exists()

    # The event log: inject time, target and pid of each fault, then its detection.
    events = _events(results)
    injects = [e.data for e in events if e.kind == "fault-injected"]
    assert len(injects) == 2
    for inj in injects:
        assert isinstance(inj["at"], float) and inj["resolved"] and inj["pids"]
        # --master: a cluster ftctl did not start; the task's agent killed itself.
        assert inj["details"] == {"via": "agent"}
        detected = [e for e in events if e.kind == "failure-detected"
                    and inj["pids"][0] in e.data.get("pids", {}).values()]
        assert detected, f"no detection of {inj['resolved']} (pid {inj['pids'][0]})"
    kinds = {e.note or e.kind for e in events}
    assert {"instance-started", "rollback", "source-rewound", "recovered"} <= kinds


# The second kill is timed relative to the first (``after``), 1.5 s after its injection.
RELATIVE = """\
name: kill-then-kill
faults:
  - {id: first, type: kill-task, at: 4.0, target: "count[0]"}
  - {type: kill-task, after: {fault: first, delay: 1500ms}, target: "split[1]"}
"""


def test_kills_under_none_lose_records(cluster: LocalCluster, tmp_path: Path) -> None:
    results = tmp_path / "results"
    scenario = tmp_path / "relative.yaml"
    scenario.write_text(RELATIVE)
    proc = _chaos(["--scenario", str(scenario), "--protocol", "none",
                   "--master", cluster.master_url, "--records", "30000", "--rate", "2000",
                   "--json", "--results", str(results)], tmp_path)
    # none's counts restart empty: on wordcount it promises nothing, the run only finishes
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["guarantee"] == "none"
    assert summary["anomalies"].get("lost", 0) > 0
    assert len(summary["recovery"]) == 2
    assert all(r["detection_s"] is not None for r in summary["recovery"])
    first, second = [e.data for e in _events(results) if e.kind == "fault-injected"]
    assert (first["resolved"], second["resolved"]) == ("count[0]", "split[1]")
    assert second["planned"]["after_fault"] == 0 and second["planned"]["delay"] == 1.5
    # planned at the first's injection + 1.5 s; struck within the nemesis' poll and the kill
    assert 1.5 <= second["at"] - first["at"] < 1.8


def test_bad_scenario_target_is_refused_before_the_run(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: bad\nfaults:\n  - type: kill-task\n    at: 1.0\n"
                        "    target: nope[7]\n")
    proc = _chaos(["--scenario", str(scenario), "--results", str(tmp_path / "r")], tmp_path)
    assert proc.returncode == 2
    assert "nope[7]" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


def test_rack_failure_is_exactly_once_under_checkpoint(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = _chaos(["--scenario", str(RACK), "--protocol", "checkpoint", "--workers", "4",
                   "--label", "rack=a", "--label", "rack=a", "--label", "rack=b",
                   "--label", "rack=b", "--json", "--results", str(results)], tmp_path,
                  timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["passed"]
    events = _events(results)
    kills = [e.data for e in events if e.kind == "fault-step" and e.data["step"] == "worker-killed"]
    # --label cycles over workers in start order: w0 and w1 are rack a.
    assert len(kills) == 2 and {e["worker"] for e in kills} == {"w0", "w1"}
    assert max(e["at"] for e in kills) - min(e["at"] for e in kills) <= 2.0
    started = [e.data for e in events
               if e.kind == "fault-step" and e.data["step"] == "worker-started"]
    assert len(started) == 2 and min(e["at"] for e in started) > max(e["at"] for e in kills)
