"""``ftctl chaos`` on local Spark clusters: random kills, lost records, the event log, a rack.

The kill runs share one module cluster (``--master``); the rack failure needs labelled
workers that ftctl itself starts and kills, so it brings its own (under progressive, whose
restarts wait for the workers' cores as they come back).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftctl.cluster import LocalCluster
from ftctl.kernel.history import HistoryEvent
from ftctl.results import RunStore

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"
PROGRESSIVE = ROOT / "topologies" / "progressive-small.yaml"
RACK = ROOT / "chaos" / "rack-failure.yaml"


def _chaos(args: list[str], cwd: Path, timeout: float = 240,
           topology: Path = WORDCOUNT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # the recovery table unabridged
    return subprocess.run([sys.executable, "-m", "ftctl.cli", "chaos", str(topology), *args],
                          cwd=cwd, text=True, capture_output=True, timeout=timeout, env=env)


def _run_dir(results: Path) -> Path:
    (run_dir,) = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return run_dir


def _events(results: Path) -> list[HistoryEvent]:
    return RunStore.open(_run_dir(results)).read_history()


@pytest.fixture(scope="module")
def cluster(spark_cluster: LocalCluster) -> LocalCluster:
    return spark_cluster  # tests/conftest.py: one warm cluster for the session


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
    # No standby slots: each restart is a Spark job of its own (the path a restart takes
    # beyond the standby pool), which this run covers for every host protocol.
    proc = _chaos(["--scenario", str(scenario), "--protocol", "none", "--spares", "0",
                   "--master", cluster.master_url, "--records", "30000", "--rate", "2000",
                   "--json", "--results", str(results)], tmp_path)
    # none's counts restart empty: on wordcount it promises nothing, the run only finishes
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["guarantee"] == "none"
    assert summary["anomalies"].get("lost", 0) > 0
    assert len(summary["recovery"]) == 2
    assert all(r["detection_s"] is not None for r in summary["recovery"])
    events = _events(results)
    starts = [e.data for e in events if e.kind == "instance-started"]
    assert [(d["start"], d["spare"]) for d in starts] == [("job", False)] * 2, starts
    first, second = [e.data for e in events if e.kind == "fault-injected"]
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


def test_rack_failure_under_progressive_restores_queries_as_workers_return(
        tmp_path: Path) -> None:
    """Both rack=a workers of three (5 cores each) die; they come back one by one. The
    kernel sees the workers' cores as slots: what does not fit on the cores left waits for
    a worker to come back, and every plan starts what profit density picks with the cores
    then free, in that order."""
    results = tmp_path / "results"
    proc = _chaos(["--scenario", str(RACK), "--protocol", "progressive", "--workers", "3",
                   "--label", "rack=a", "--label", "rack=a", "--label", "rack=b",
                   "--cores", "5", "--spares", "0", "--records", "8000", "--rate", "400",
                   "--json", "--results", str(results)], tmp_path, timeout=300,
                  topology=PROGRESSIVE)
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

    # The capacity view: the loss of w0 and w1, then their replacements joining.
    caps = [e for e in events if e.kind == "capacity-changed"]
    assert {w for e in caps for w in e.data.get("left", [])} == {"w0", "w1"}
    assert {w for e in caps for w in e.data.get("joined", [])} == {"w3", "w4"}
    first_join = min(e.seq for e in caps if e.data.get("joined"))
    detected = [e for e in events if e.kind == "failure-detected"]
    restarts = [e for e in events if e.kind == "instance-started"
                and e.data["reason"] == "restart"]
    assert detected and restarts
    # What fit on the cores left started at the failure; the rest waited for a worker to
    # come back (a plan made on capacity), not in Spark's queue.
    on_capacity = [e for e in events if e.note == "plan" and e.data["data"]["why"] == "capacity"]
    assert on_capacity and min(e.seq for e in on_capacity) > first_join
    _plans_follow_profit_density(events)


def _plans_follow_profit_density(events: list[HistoryEvent]) -> None:
    """Replay the history's plans through the pure planner: each started exactly what
    profit density picks for the instances then pending and the cores then free, and the
    host started those next."""
    from ftctl.config.load import load_topology
    from ftctl.runtime.graph import ExecutionGraph
    from ftctl.runtime.queries import topology_queries
    from protocols.progressive.schedule import ProfitDensity, Query

    graph = ExecutionGraph(load_topology(PROGRESSIVE))
    queries = [Query(q.name, q.operators, q.priority)
               for q in topology_queries(graph.topology)]
    pending: list[str] = []
    plans = 0
    for k, e in enumerate(events):
        if e.kind == "failure-detected":
            pending += [i for i in e.data["instances"] if i not in pending]
        elif e.note == "plan":
            note = e.data["data"]
            assert len(note["started"]) <= note["free"]
            then = [x.instance for x in events[k + 1:] if x.kind == "instance-started"]
            # Started next, in the kernel's placement order (by priority, the density of
            # the best query each serves), which need not be the plan's listing order.
            assert sorted(then[:len(note["started"])]) == sorted(note["started"])
            if note["mode"] == "progressive":  # a blocking episode waits for room for all
                order = [i for i in graph.order if i in pending]
                want = ProfitDensity().plan(queries, order, note["free"]).started
                assert list(want) == note["started"], (order, note)
                plans += 1
            pending = [i for i in pending if i not in note["started"]]
    assert plans >= 1 and not pending


def test_a_worker_kill_is_served_by_warm_slots_on_spread_instances(tmp_path: Path) -> None:
    """Three workers ftctl starts, the default standby pool: the first plan puts each
    operator's instances on distinct workers; a worker's loss is then a test (it ran
    instances), every restart is handed to a slot (no Spark job waited for), and the
    recovery breakdown's parts add up to the measured recovery."""
    scenario = tmp_path / "kill-worker.yaml"
    scenario.write_text("name: kill-worker\nseed: 1\nfaults:\n"
                        "  - {type: kill-worker, at: 3.0, target: 'count[0]'}\n")
    results = tmp_path / "results"
    proc = _chaos(["--scenario", str(scenario), "--protocol", "checkpoint", "--workers", "3",
                   "--json", "--results", str(results)], tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["passed"] and summary["struck_nothing"] == []
    events = _events(results)
    first = next(e for e in events if e.kind == "instance-running")
    where = first.data["placement"]
    assert len(set(where.values())) == 3, where
    for op in ("split", "count"):
        assert where[f"{op}[0]"] != where[f"{op}[1]"], where
    killed = next(e.data["resolved"] for e in events if e.kind == "fault-injected")
    assert killed == where["count[0]"]
    restarts = [e for e in events if e.kind == "instance-started"]
    assert len(restarts) == 6  # checkpoint: a global rollback
    assert all(e.data["start"] in ("slot", "queued") for e in restarts), restarts
    (row,) = summary["recovery"]
    b = row["breakdown"]
    assert b["restarts"] == 6 and "job" not in b["started_by"]
    parts = [b[k] for k in ("detect", "plan", "start", "replay")]
    assert None not in parts
    if row["recovery_s"] is not None:
        assert sum(parts) + b["catch_up"] == pytest.approx(row["recovery_s"], abs=1e-3)
    else:  # never back within 10% before the input ended: up to the first output
        running = b["detect"] + b["plan"] + b["start"]
        assert sum(parts) == pytest.approx(max(row["first_output_s"], running), abs=1e-3)
