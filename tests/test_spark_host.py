"""The Spark host on a local standalone cluster: end to end, task kills, Ctrl-C.

``ftctl run`` is exercised as a subprocess (exit codes, results directory, no leftover
processes); the checkpoint kill runs in-process on the module's cluster so it can watch
the instance's progress and strike mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from ftctl.cluster import LocalCluster
from ftctl.config.load import load_topology
from ftctl.kernel.history import HistoryEvent
from ftctl.results import RunStore
from ftctl.run.simspread import run_on_context
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.golden import golden_output
from ftctl.sim.spread import SimJob
from ftctl.spark.host import SparkHost
from ftctl.spark.placement import (
    executor_id,
    free_cores,
    launched_executors,
    live_executors,
)
from ftctl.spark.session import start_session, stop_session
from ftctl.verify.checker import verify
from ftctl.verify.golden import golden_for
from protocols.contract.params import validate
from protocols.registry import PROTOCOLS

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"
VICTIM = "count[0]"


def _ftctl(args: list[str], cwd: Path, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ftctl.cli", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _leftovers(marker: str) -> list[str]:
    """Processes still mentioning ``marker`` (a run's state dir) or running spark-class."""
    found = []
    me = os.getpid()
    for p in psutil.process_iter(["pid", "ppid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if p.info["pid"] == me:
                continue
            if marker in cmd or ("spark-class" in cmd and p.info["ppid"] == me):
                found.append(f"{p.info['pid']}: {cmd[:120]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _run_dirs(results: Path) -> list[Path]:
    if not results.exists():
        return []
    return sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith("."))


def _status(run_dir: Path) -> str:
    return str(json.loads((run_dir / "status.json").read_text())["status"])


def _wait_event(results: Path, kind: str, instance: str | None, timeout: float,
                proc: subprocess.Popen[str]) -> HistoryEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"ftctl run ended early: {proc.communicate()}"
        for run_dir in _run_dirs(results):
            events = run_dir / "events.jsonl"
            if not events.exists():
                continue
            for ev in RunStore.open(run_dir).read_history():  # skips a half-written line
                if ev.kind == kind and (instance is None or ev.instance == instance):
                    return ev
        time.sleep(0.1)
    raise AssertionError(f"no {kind} event within {timeout} s")


# ---------------------------------------------------------------------- standalone runs


def test_run_wordcount_end_to_end(tmp_path: Path) -> None:
    """Cold run: starts its own cluster, verifies against golden and oracle, leaves nothing."""
    results = tmp_path / "results"
    proc = _ftctl(["run", str(WORDCOUNT), "--json", "--results", str(results)], cwd=tmp_path)
    out, err = proc.communicate(timeout=150)
    assert proc.returncode == 0, err[-2000:]
    summary = json.loads(out)
    assert summary["passed"] and summary["complete"]
    assert summary["oracle"] == {"passed": True, "mismatches": 0}
    run_dir = Path(summary["path"]) if Path(summary["path"]).is_absolute() else \
        tmp_path / summary["path"]
    assert _status(run_dir) == "complete"
    assert (run_dir / "verdict.json").exists() and (run_dir / "metrics.jsonl").exists()
    state_dir = tmp_path / ".ftctl" / "runs" / summary["run_id"]
    assert not _leftovers(str(state_dir)), _leftovers(str(state_dir))


def test_sigint_tears_down_and_marks_incomplete(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = _ftctl(["run", str(WORDCOUNT), "--records", "200000", "--rate", "20000",
                   "--results", str(results)], cwd=tmp_path)
    try:
        _wait_event(results, "instance-registered", None, timeout=120, proc=proc)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode not in (0, None)
    (run_dir,) = _run_dirs(results)
    assert _status(run_dir) == "incomplete"
    state_dir = tmp_path / ".ftctl" / "runs" / run_dir.name
    assert not _leftovers(str(state_dir)), _leftovers(str(state_dir))


# ---------------------------------------------------------------------- on the module cluster


@pytest.fixture(scope="module")
def cluster(spark_cluster: LocalCluster) -> LocalCluster:
    return spark_cluster  # tests/conftest.py: one warm cluster for the session


@pytest.fixture(scope="module")
def spark(cluster: LocalCluster) -> Iterator[Any]:
    session = start_session(cluster.master_url, "ftctl-test-spark-host", slots=6)
    try:
        yield session
    finally:
        stop_session(session)


def test_launched_executors_read_free_cores_from_the_scheduler(spark: Any) -> None:
    """Every executor of the cluster launches with free cores, read through py4j from the
    scheduler backend (a call that failed would fall back to the registered executors and
    hide that placement no longer waits for launches). The session waits for its slots
    only, which one executor holds: the others may still be registering or launching."""
    sc = spark.sparkContext
    deadline = time.monotonic() + 60
    while len(launched_executors(sc)) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    registered = live_executors(sc)
    assert len(registered) == 3  # one executor per worker
    backend = sc._jsc.sc().schedulerBackend()
    for where in registered:
        assert free_cores(backend.getExecutorAvailableCpus(executor_id(where))) > 0
    assert launched_executors(sc) == registered


@pytest.mark.parametrize("small", [False, True], ids=["store-defaults", "small-store"])
def test_kill_under_checkpoint_is_exactly_once(spark: Any, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               small: bool) -> None:
    """With ``small``, every writer's segments roll over every few objects (the driver's
    size reaches the tasks with the store's key) and the driver writes its catalog anew
    every few dozen changes, while the replacement restores from it."""
    from ftctl import store_segments

    if small:
        monkeypatch.setattr(store_segments, "SEGMENT_BYTES", 1_024)
        monkeypatch.setattr(store_segments, "COMPACT_BYTES", 2_000)
    topology = load_topology(WORDCOUNT).with_input(records=20000, rate=5000)
    graph = ExecutionGraph(topology)
    info = PROTOCOLS["checkpoint"]
    params = info.resolve({"interval": 0.5})
    host = SparkHost(spark.sparkContext, graph, info, params, "test-ckpt", tmp_path / "snapshots",
                     rate=topology.input.rate, timeout=120)
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            # After a snapshot or two, mid-stream.
            if VICTIM in host.pids and host.counts[VICTIM][0] > 40_000:
                os.kill(host.pids[VICTIM], signal.SIGKILL)
                killed.append(host.pids[VICTIM])
                return
            time.sleep(0.05)

    threading.Thread(target=killer, daemon=True).start()
    result = host.run()
    assert killed, "the run ended before the kill"
    assert result.complete and result.detections >= 1
    assert any(e.note == "rollback" for e in result.events)
    verdict = verify(topology.sink_modes(), golden_for(topology, golden_output), result.outputs,
                     info.guarantee, complete=result.complete)
    assert verdict.passed, verdict.totals()
    if small:
        # what each writer's newest segment is: tasks' and the driver's, rolled over
        newest: dict[str, int] = {}
        for seg in (tmp_path / "snapshots" / "segments").iterdir():
            token, number = seg.stem.split("-")
            newest[token] = max(newest.get(token, 0), int(number))
        assert sum(n >= 2 for n in newest.values()) >= 2, newest
        assert host.store._generation >= 2


def test_simulated_schedules_as_spark_tasks_match_one_process(spark: Any) -> None:
    """``ftctl sim --master``: the seeds go out as tasks and the summary is the one a single
    process computes, seed for seed (a planted bug, so failing seeds are compared too)."""
    from protocols.registry import resolve

    info, planted_params = resolve("checkpoint/commit-early")
    job = SimJob(load_topology(ROOT / "topologies" / "diamond.yaml"), info.name,
                 validate(info.params, planted_params, info.name), kinds=("crash", "slow"))
    sim = job.simulator()
    seen: list[int] = []
    on_spark = run_on_context(spark.sparkContext, sim, job, 40, 7, progress=seen.append)
    local = sim.run_many(40, 7)
    assert local.failing_seeds and len(local.failing_seeds) < 40
    assert (on_spark.failing_seeds, on_spark.violations) == (local.failing_seeds,
                                                             local.violations)
    assert (on_spark.delays, on_spark.resent) == (local.delays, local.resent)
    assert (on_spark.failures, on_spark.faults) == (local.failures, local.faults)
    assert seen and seen[-1] == 40
