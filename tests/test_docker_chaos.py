"""``ftctl chaos`` on the docker backend: container faults and a rack failure, exactly-once.

The first test drives the four container faults on a bare cluster (~18 s); the second is
one ``ftctl chaos`` process (its own cluster of containers, ~75-100 s on this 2-core
machine, most of it cluster and session start), kept short with ``--records``/``--rate``,
with a pause and a rack failure in the one run; the third puts the Structured Streaming
engine through a container kill on a docker cluster its run starts (~80 s). (``--kill N
--target container`` plans the same container-kill and restore-capacity as the
container-faults scenario: tests/test_container_faults.py checks that plan without a
cluster.) Skipped as a whole
only when no Docker engine answers. Every test removes, in ``finally``, any container its
runs left (found by the state dir label, under the test's tmp dir) and asserts there was
none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import docker
import pytest

from chaos.containers import ContainerKill, ContainerPause, ContainerRestart, ContainerStop
from chaos.hostctx import HostFaultContext
from ftctl.docker.cluster import DockerCluster
from ftctl.docker.image import build_image
from ftctl.docker.meta import LABEL_CLUSTER, LABEL_STATE_DIR
from ftctl.kernel.history import read_history

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"
# container-pause, kill-group of rack=a, restore-capacity: one run where chaos/
# container-faults.yaml and chaos/rack-failure.yaml would take two clusters
PAUSE_THEN_RACK = ROOT / "tests" / "fixtures" / "docker-pause-then-rack.yaml"
SHORT = ["--records", "16000", "--rate", "1000"]  # a 16 s run
FOUR_WORKERS = ["--workers", "4", "--label", "rack=a", "--label", "rack=a",
                "--label", "rack=b", "--label", "rack=b"]  # fmt: skip


def _containers_under(directory: Path) -> list[Any]:
    """ftctl containers whose state dir is under ``directory`` (this test's runs only:
    other runs on the same engine are not this test's business)."""
    client = docker.from_env()
    try:
        found = client.containers.list(all=True, filters={"label": LABEL_CLUSTER})
        return [c for c in found
                if c.labels.get(LABEL_STATE_DIR, "").startswith(str(directory))]
    finally:
        client.close()


@pytest.fixture(scope="module", autouse=True)
def image() -> str:
    return build_image().tag  # cached: seconds; here so no run's timing includes a build


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """The runs' cwd (their state dirs go under it); no container of theirs may outlive
    the test, whatever happened."""
    left: list[Any] = []
    try:
        yield tmp_path
    finally:
        left = _containers_under(tmp_path)
        for container in left:
            container.remove(force=True)
    assert left == [], f"containers left behind: {[c.name for c in left]}"


def _chaos(args: list[str], cwd: Path, timeout: float = 300) -> dict[str, Any]:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "ftctl.cli", "chaos", str(WORDCOUNT), "--backend", "docker",
         "--protocol", "checkpoint", *SHORT, "--json", "--results", str(cwd / "results"),
         *args],
        cwd=cwd, text=True, capture_output=True, timeout=timeout, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary: dict[str, Any] = json.loads(proc.stdout)
    assert summary["passed"] and summary["complete"]
    assert not any(summary["anomalies"].values()), summary["anomalies"]
    assert summary["oracle"] == {"passed": True, "mismatches": 0}
    return summary


def _events(summary: dict[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The data of the run's history records of ``kind``."""
    lines = (Path(summary["path"]) / "events.jsonl").read_text().splitlines()
    return [e.data for e in read_history(map(json.loads, lines)) if e.kind == kind]


def test_every_container_fault_on_a_real_engine(image: str, workdir: Path) -> None:
    """The four container faults through the same context ``ftctl chaos`` builds, on a
    cluster without a Spark session (the runs below cover them under load)."""
    cluster = DockerCluster(workers=2, cores=1, memory="512m", labels=["rack=a", "rack=b"],
                            state_dir=workdir / "state", image=image)  # fmt: skip
    try:
        cluster.up()
        ctx = HostFaultContext(clock=time.monotonic, instance_ids=[],
                               task_pids=lambda _i: None, cluster=cluster)  # fmt: skip

        def status(worker: str) -> str:
            return {c.worker: c.status for c in cluster.containers()}[worker]

        pause = ContainerPause("worker=w0", duration=1.0)
        pause.inject(ctx)
        assert status("w0") == "paused"
        pause.heal(ctx)
        assert status("w0") == "running"

        stop = ContainerStop("rack=b", {"timeout": 1}, duration=1.0)
        stop.inject(ctx)
        assert status("w1") == "exited" and "w1" not in {w.id for w in ctx.workers()}
        stop.heal(ctx)  # docker start: the Worker registers again
        cluster.wait_alive("w1", timeout=90)

        before = cluster.worker("w0").pid
        ContainerRestart("worker=w0", {"timeout": 0}).inject(ctx)
        cluster.wait_alive("w0", timeout=90)
        assert cluster.worker("w0").pid != before

        ContainerKill("rack=a").inject(ctx)
        assert status("w0") == "exited" and [w.id for w in ctx.workers()] == ["w1"]
    finally:
        cluster.down()


def test_a_paused_container_then_a_rack_failure_are_exactly_once(workdir: Path) -> None:
    """One run, two kinds of container fault: a container frozen and thawed, then a
    whole rack's containers killed and replaced worker by worker."""
    summary = _chaos(["--scenario", str(PAUSE_THEN_RACK), *FOUR_WORKERS], workdir)
    injected = {e["type"]: e for e in _events(summary, "fault-injected")}
    assert set(injected) == {"container-pause", "kill-group", "restore-capacity"}
    # the pause strikes the worker running count[0] then, whichever that is
    assert injected["container-pause"]["resolved"] in {"w0", "w1", "w2", "w3"}
    (heal,) = _events(summary, "fault-healed")
    assert heal["type"] == "container-pause"
    assert 2.5 <= heal["at"] - injected["container-pause"]["at"] <= 5.0
    steps = _events(summary, "fault-step")
    kills = [e for e in steps if e["step"] == "worker-killed"]
    # --label cycles over workers in start order: w0 and w1 are rack a.
    assert sorted(e["worker"] for e in kills) == ["w0", "w1"]
    assert max(e["at"] for e in kills) - min(e["at"] for e in kills) <= 2.0
    started = [e for e in steps if e["step"] == "worker-started"]
    assert len(started) == 2 and all(e["labels"] == {"rack": "a"} for e in started)
    assert min(e["at"] for e in started) > max(e["at"] for e in kills)
    assert _events(summary, "fault-error") == []
    # the rack's instances died with it: detected and restarted, not missed
    assert summary["detections"] >= 1 and summary["restarts"] > 0


def test_structured_streaming_takes_a_container_kill_on_a_cluster_of_its_own(
        workdir: Path) -> None:
    """The engine's query on a docker cluster its chaos run starts (no ``--master``): a
    container killed under one of its executors is Spark's executor loss, the driver
    lives, the lost work is launched again on a live executor (the restart), and the
    output is exactly-once; the run's containers are gone after it."""
    proc = subprocess.run(
        [sys.executable, "-m", "ftctl.cli", "chaos", str(ROOT / "topologies" / "windowed.yaml"),
         "-p", "structured-streaming", "--backend", "docker", "--kill", "1", "--target",
         "container", "--json", "--results", str(workdir / "results")],
        cwd=workdir, text=True, capture_output=True, timeout=400,
        env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["passed"] and summary["complete"] and summary["anomalies"] == {}, summary
    injected = _events(summary, "fault-injected")
    assert [e["type"] for e in injected] == ["container-kill", "restore-capacity"]
    lines = (Path(summary["path"]) / "events.jsonl").read_text().splitlines()
    history = list(read_history(map(json.loads, lines)))
    killed = next(e.data["at"] for e in history if e.kind == "fault-injected")
    lost = [e for e in history if e.kind == "failure-detected"
            and e.data["cause"] == "executor-lost"]
    assert lost and lost[0].t > killed  # seen by Spark, not by a driver that ended
    restarted = [e for e in history if e.kind == "instance-started" and e.t >= lost[0].t]
    assert restarted and restarted[0].data["start"] == "task"
    assert not any(e.kind == "instance-started" and e.instance == "driver" for e in history)
    [kill] = [f for f in summary["faults"] if f["fault"] == "container-kill"]
    assert kill["detection_s"] is not None and kill["restart_s"] >= kill["detection_s"]
