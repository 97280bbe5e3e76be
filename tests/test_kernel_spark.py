"""Contract-v2 protocols on Spark: the kernel the simulation runs, driven by the Spark host.

Each protocol runs two kills under ``ftctl chaos`` on one shared local cluster and must
keep its guarantee with its own mechanism visible in the event log: falkirk's rollback
rounds (in place: live instances restore without a restart), replica-ring's slot
takeovers, progressive's recovery of queries.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftctl.cluster import LocalCluster
from ftctl.kernel.history import HistoryEvent, read_history

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cluster(spark_cluster: LocalCluster) -> LocalCluster:
    return spark_cluster  # tests/conftest.py: one warm cluster for the session


KILL_2 = ("--kill", "2")
# count[1] then split[0] (tests/fixtures/falkirk-in-place.yaml), rollback=in-place
IN_PLACE = ("--param", "rollback=in-place", "--scenario",
            str(ROOT / "tests" / "fixtures" / "falkirk-in-place.yaml"))


def _chaos(topology: str, protocol: str, cluster: LocalCluster, results: Path,
           faults: tuple[str, ...] = KILL_2,
           ) -> tuple[subprocess.CompletedProcess[str], list[HistoryEvent]]:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "ftctl.cli", "chaos", str(ROOT / "topologies" / topology),
         "-p", protocol, *faults, "--records", "20000", "--rate", "1000",
         "--master", cluster.master_url, "--results", str(results)],
        cwd=results.parent, text=True, capture_output=True, timeout=400, env=env)
    runs = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(runs) == 1, proc.stderr[-3000:]
    lines = (runs[0] / "events.jsonl").read_text().splitlines()
    return proc, read_history(json.loads(line) for line in lines)


def _kills_detected(events: list[HistoryEvent]) -> list[str]:
    injects = [e for e in events if e.kind == "fault-injected"]
    assert len(injects) == 2
    detected = {i for e in events if e.kind == "failure-detected" for i in e.data["instances"]}
    return [e.data["resolved"] for e in injects if e.data["resolved"] in detected]


@pytest.mark.parametrize(("topology", "protocol", "faults", "mechanism"), [
    ("wordcount.yaml", "falkirk", IN_PLACE, "falkirk-rollback"),
    ("replica-chain.yaml", "replica-ring", KILL_2, "route-changed"),
    ("progressive-small.yaml", "progressive", KILL_2, "rollback"),
])
def test_kills_keep_the_guarantee_through_the_protocols_own_recovery(
        cluster: LocalCluster, tmp_path: Path, topology: str, protocol: str,
        faults: tuple[str, ...], mechanism: str) -> None:
    proc, events = _chaos(topology, protocol, cluster, tmp_path / "results", faults)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    assert "PASSED" in proc.stdout
    assert len(_kills_detected(events)) == 2
    # The protocol recovered its own way (the kernel ran its coordinator's actions).
    kinds = {e.note or e.kind for e in events}
    assert mechanism in kinds, sorted(kinds)
    # Replacements were new incarnations, started by the kernel's restart commands.
    assert any(e.kind == "instance-started" and (e.incarnation or 0) >= 1 for e in events)
    # The kernel frames the run in the history, on Spark as in the simulation.
    starts = [e.seq for e in events if e.kind == "run-started"]
    ends = [e.seq for e in events if e.kind == "run-finished"]
    running = [e.seq for e in events if e.kind == "instance-running"]
    assert len(starts) == len(ends) == 1 and starts[0] < min(running) <= max(running) < ends[0]
    if protocol == "falkirk":
        # Its sinks commit per epoch: each commit is a record with what it made visible.
        assert sum(e.data["records"] for e in events if e.kind == "output-committed") > 0
        _rolled_back_in_place(events)
    elif protocol == "replica-ring":
        _rings_on_distinct_executors(events)


def _rolled_back_in_place(events: list[HistoryEvent]) -> None:
    """The first kill (count[1]) restarts count[1] alone; the splits and count[0], which
    fed it or share its inputs, roll back in place: same incarnation, no restart."""
    first = next(e.payload for e in events if e.note == "falkirk-rollback")
    assert (first["restarted"], first["rolled_back"]) == (
        ["count[1]"], ["count[0]", "split[0]", "split[1]"])
    second_kill = [e.seq for e in events if e.kind == "fault-injected"][1]
    rolled = [e for e in events if e.kind == "instance-rolled-back" and e.seq < second_kill]
    assert sorted((e.instance, e.incarnation) for e in rolled) == [
        ("count[0]", 0), ("split[0]", 0), ("split[1]", 0)]
    started = {e.instance for e in events if e.kind == "instance-started"
               and e.seq < second_kill}
    assert started == {"count[1]"}


def _rings_on_distinct_executors(events: list[HistoryEvent]) -> None:
    """Each ring's first replicas registered from three different executors (one per
    worker), so losing a worker takes at most one replica of each ring."""
    where = {e.instance: e.data.get("executor") for e in events
             if e.kind == "instance-registered" and e.incarnation == 0}
    for op in ("split", "evens", "tag"):
        executors = [where.get(f"{op}[{i}]") for i in range(3)]
        assert None not in executors and len(set(executors)) == 3, (op, where)


def test_an_installed_plugin_protocol_recovers_on_executors_that_lack_it(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """The fixture distribution is installed for the ftctl command only (PYTHONPATH set
    after the shared cluster started): its executors import the protocol from what the
    driver shipped, and its recovery keeps exactly-once on a kill."""
    from tests.plugin_dist import FIXTURE, installed

    with installed(tmp_path / "site", FIXTURE, "ftctl-fixture-proto", "0.3.1",
                   {"fixture": "fixture_proto.spec:SPEC"}):
        proc, events = _chaos("wordcount.yaml", "fixture", cluster, tmp_path / "results",
                              ("--kill", "1", "--records", "6000"))  # the last one counts
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    assert "PASSED" in proc.stdout
    (run,) = [p for p in (tmp_path / "results").iterdir() if (p / "config.json").exists()]
    assert json.loads((run / "config.json").read_text())["protocol"] == "fixture"
    assert any(e.kind == "failure-detected" for e in events)
    assert any(e.kind == "instance-started" and (e.incarnation or 0) >= 1 for e in events)
