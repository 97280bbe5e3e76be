"""``causal`` and ``lineage`` on a local Spark cluster: the sharder of paper 000 killed.

Both runs use ``chaos/kill-sharder.yaml`` on one module cluster. Under ``causal`` only the
sharder restarts: the event log shows no stop, restart, rollback or purge of any other
instance. Under ``lineage`` the sharder's whole downstream (20 shards and the sink) is
purged and restarted. Both must verify exactly-once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ftctl.cluster import LocalCluster
from ftctl.kernel.history import HistoryEvent
from ftctl.results import RunStore

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
SHARDER = ROOT / "topologies" / "sharder.yaml"
SCENARIO = ROOT / "chaos" / "kill-sharder.yaml"
VICTIM = "sharder[0]"
DOWNSTREAM = {f"shard[{i}]" for i in range(20)} | {"out[0]"}
# Short runs: 24k votes at 2,000/s (12 s), the kill 8 s in.
INPUT = ["--records", "24000", "--rate", "2000"]


@pytest.fixture(scope="module")
def cluster(spark_cluster: LocalCluster) -> LocalCluster:
    return spark_cluster  # tests/conftest.py: one warm cluster for the session


def _kill_sharder(protocol: str, master: str, tmp_path: Path,
                  *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    results = tmp_path / "results"
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "ftctl.cli", "chaos", str(SHARDER), "--scenario", str(SCENARIO),
         "-p", protocol, "--master", master, *INPUT, *extra, "--json", "--results", str(results)],
        cwd=tmp_path, text=True, capture_output=True, timeout=150, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    (run_dir,) = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    events = RunStore.open(run_dir).read_history()
    inject = [e for e in events if e.kind == "fault-injected"]
    assert len(inject) == 1 and inject[0].data["resolved"] == VICTIM
    return summary, events


def _touched(events: list[HistoryEvent]) -> set[str]:
    """Instances some event stopped, restarted, rolled back or purged."""
    out: set[str] = set()
    for e in events:
        if e.kind == "instance-started" and e.instance is not None:
            out.add(e.instance)
        if e.kind in ("instance-stopped", "failure-detected") or e.note == "rollback":
            out.update(e.payload.get("instances", []))
        if e.note == "purge":
            out.update(e.payload.get("purged", []))
        if e.note == "causal-fallback":
            out.add("<fallback: everything>")
    return out


def test_sharder_kill_under_causal_restarts_only_the_sharder(cluster: LocalCluster,
                                                             tmp_path: Path) -> None:
    summary, events = _kill_sharder("causal", cluster.master_url, tmp_path)
    assert summary["passed"], summary["anomalies"]
    assert summary["restarts"] == 1
    assert _touched(events) == {VICTIM}
    assert any(e.note == "causal-replay" and e.payload["instance"] == VICTIM for e in events)
    # By default a spare task took over (``--spares 1``): no Spark job start in recovery.
    (restart,) = [e for e in events if e.kind == "instance-started"]
    assert restart.data["spare"] is True
    # The sharder has no state: its replacement restores no snapshot (0 bytes read) and
    # starts from T* (spec R3).
    assert restart.data["restore"] is None
    assert any(e.note == "causal-replay" and e.payload["stateless"] for e in events)
    pids = [e.data["pid"] for e in events
            if e.kind == "instance-registered" and e.instance == VICTIM]
    assert len(pids) == 2 and pids[0] != pids[1]


def test_sharder_kill_under_lineage_restarts_its_downstream(cluster: LocalCluster,
                                                            tmp_path: Path) -> None:
    summary, events = _kill_sharder("lineage", cluster.master_url, tmp_path)
    assert summary["passed"], summary["anomalies"]
    restarted = {e.instance for e in events if e.kind == "instance-started"}
    assert restarted == {VICTIM} | DOWNSTREAM
    assert "votes[0]" not in _touched(events)
    # One empty slot (the default on a given master) takes one of the 22 restarts; the
    # other 21 go to the slots of the fenced survivors (waiting already, or queued for as
    # they come back): none waits for a Spark job.
    starts = [e.data["start"] for e in events if e.kind == "instance-started"]
    assert len(starts) == 22 and "job" not in starts, starts
