"""Store faults on Spark: a kill after a ``corrupt`` of the target's newest snapshot,
then a slow store, a full one and a ``lose-unsynced``, in the same run (no Spark run of
their own).

The driver flips a byte of ``count[0]``'s newest snapshot file, then its task is killed:
the recovery reads the damaged object. Aligned checkpoint falls back to an older snapshot
and stays exactly-once; default (unaligned) checkpoint stops the run safely, naming it.
Snapshots every 3 s, the damage 4.5 s in (half way between two) and the kill 50 ms after
it: no newer snapshot completes in between, so the damaged one is the one the recovery
reads. The aligned run goes on: the store is slow (20 ms an operation) from 5.5 s for 1 s,
then full from 6.5 s for 3.5 s, long enough for a snapshot's writes to fail there: their
writers die, and no restore uses the snapshot they could not write. ``count[1]`` loses its
unsynced writes at 8 s, while the store is full: checkpoint reports each snapshot in the
frame that adopts it, so there are none, and its recovery too restores what was complete
before the store filled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftctl.cluster import LocalCluster
from ftctl.kernel.history import HistoryEvent
from tests.test_chaos_spark import _chaos, _events

pytestmark = pytest.mark.spark

SCENARIO = """\
name: corrupt-then-kill
faults:
  - {id: damage, type: corrupt, at: 4.5, target: "count[0]"}
  - {type: kill-task, after: {fault: damage, delay: 50ms}, target: "count[0]"}
"""
# The aligned run goes on after its recovery: a slow store, then a full one. (The run that
# stops would only wait for them to strike and heal after it ended.)
THEN_SLOW_AND_FULL = """\
  - {type: store-slow, at: 5.5, duration: 1.0, target: random, params: {latency: 0.02}}
  - {type: store-full, at: 6.5, duration: 3.5, target: random}
  - {type: lose-unsynced, at: 8.0, target: "count[1]"}
"""


@pytest.fixture(scope="module")
def cluster(spark_cluster: LocalCluster) -> LocalCluster:
    return spark_cluster  # tests/conftest.py: one warm cluster for the session


def _run(cluster: LocalCluster, tmp_path: Path, faults: str, *params: str
         ) -> tuple[int, dict[str, object], list[HistoryEvent], str]:
    scenario = tmp_path / "corrupt.yaml"
    scenario.write_text(faults)
    results = tmp_path / "results"
    args = ["--scenario", str(scenario), "--protocol", "checkpoint", "--param", "interval=3",
            *[a for p in params for a in ("--param", p)], "--master", cluster.master_url,
            "--records", "3000", "--rate", "300", "--json", "--results", str(results)]
    proc = _chaos(args, tmp_path)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout), _events(results), proc.stderr


def _damaged(events: list[HistoryEvent]) -> int:
    (hit,) = [e.data for e in events
              if e.kind == "fault-injected" and e.data["type"] == "corrupt"]
    assert hit["resolved"] == "count[0]"
    return int(hit["details"]["snapshot"])


def test_aligned_checkpoint_recovers_from_an_older_snapshot(cluster: LocalCluster,
                                                           tmp_path: Path) -> None:
    code, summary, events, err = _run(cluster, tmp_path, SCENARIO + THEN_SLOW_AND_FULL,
                                      "alignment=aligned")
    assert code == 0, err[-3000:]
    assert summary["passed"] and summary["outcome"] == "exactly-once"
    snapshot = _damaged(events)
    (failed,) = [e for e in events if e.kind == "store-read-failed"]
    assert (failed.instance, failed.data["snapshot"], failed.data["problem"]) == (
        "count[0]", snapshot, "corrupt")
    (slow,) = _injected(events, "store-slow")
    (full,) = _injected(events, "store-full")
    assert slow.data["details"]["latency"] == 0.02 and slow.t < full.t
    # the replacements restore something older than the bad snapshot (or start fresh)
    restarts = [e for e in events if e.kind == "instance-started"
                and e.data.get("reason") == "restart"]
    restores = [e.data.get("restore") for e in restarts if e.t < full.t]
    assert restores and all(r is None or r < snapshot for r in restores)
    assert not [e for e in events if e.kind == "run-stopped"]
    # the full store killed writers; their restarts restore what was complete before it
    (healed,) = [e for e in events if e.kind == "fault-healed"
                 and e.data["type"] == "store-full"]
    assert [e for e in events if e.kind == "failure-detected" and full.t < e.t < healed.t]
    complete = {e.data["data"]["snapshot"] for e in events
                if e.note == "snapshot-complete" and e.t < full.t}
    later = [e.data.get("restore") for e in restarts if e.t > full.t]
    assert later and set(later) <= complete
    # lose-unsynced: killed through the task's agent (--master), nothing unsynced to take
    (lose,) = _injected(events, "lose-unsynced")
    assert lose.data["resolved"] == "count[1]" and full.t < lose.t
    assert lose.data["details"] == {"via": "agent", "lost": [], "bytes": 0}
    killed = lose.data["pids"][0]
    (inc,) = [e.incarnation or 0 for e in events if e.kind == "instance-registered"
              and e.instance == "count[1]" and e.data["pid"] == killed and e.t < lose.t][-1:]
    # The killed incarnation is replaced: detected dead, or (when the kill comes a moment
    # before another failure's rollback) fenced by that rollback as it died.
    assert [e for e in events if e.kind == "instance-started" and e.instance == "count[1]"
            and (e.incarnation or 0) > inc]
    # A detection of count[1] before its next incarnation registers names the process
    # killed, never the next incarnation on the strength of the killed one's death.
    regs = {e.incarnation or 0: e.t for e in events if e.kind == "instance-registered"
            and e.instance == "count[1]"}
    until = min([t for i, t in regs.items() if i > inc], default=float("inf"))
    detected = [e for e in events if e.kind == "failure-detected"
                and regs[inc] < e.t < until and "count[1]" in e.data["instances"]]
    assert detected[:1] == [] or detected[0].data["pids"].get("count[1]") == killed


def _injected(events: list[HistoryEvent], kind: str) -> list[HistoryEvent]:
    return [e for e in events if e.kind == "fault-injected" and e.data["type"] == kind]


def test_default_checkpoint_stops_safely_naming_the_object(cluster: LocalCluster,
                                                          tmp_path: Path) -> None:
    code, summary, events, err = _run(cluster, tmp_path, SCENARIO)
    snapshot = _damaged(events)
    why = f"corrupt snapshot {snapshot} of count[0]"
    assert code == 0, err[-3000:]  # stopped safely: no failure of the protocol
    assert summary["outcome"] == f"stopped safely: {why}"
    assert not summary["passed"] and not summary["complete"]
    (stop,) = [e for e in events if e.kind == "run-stopped"]
    assert stop.data["reason"] == why and stop.instance == "count[0]"
    assert [e.data["problem"] for e in events if e.kind == "store-read-failed"] == ["corrupt"]
