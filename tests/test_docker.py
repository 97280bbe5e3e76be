"""The docker backend on a real engine: image build and cache, a labelled 2-worker cluster,
container faults, down and prune. Skipped as a whole only when no Docker engine answers.

One cluster serves the module (a start costs ~15 s on this machine); the tests that change
it run in file order. Every fixture removes its containers in ``finally``, and the last
check is that no container with this module's labels is left, even after a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import psutil
import pytest
from typer.testing import CliRunner

from chaos.hostctx import HostFaultContext
from ftctl.cli import app
from ftctl.cluster.state import STATE_DIR_ENV
from ftctl.docker.cluster import DockerCluster
from ftctl.docker.image import ImageBuild, build_image
from ftctl.docker.meta import LABEL_CLUSTER, cluster_key, load_meta, save_meta
from tests.dockerkit import containers_of

pytestmark = pytest.mark.docker

runner = CliRunner()


def _remove_all(key: str) -> None:
    for container in containers_of(key):
        container.remove(force=True)


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.fixture(scope="module")
def image() -> ImageBuild:
    return build_image()


@pytest.fixture(scope="module")
def cluster(image: ImageBuild, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerCluster]:
    state_dir = tmp_path_factory.mktemp("docker-cluster")
    cluster = DockerCluster(
        workers=2, cores=1, memory="512m", labels=["rack=a", "rack=b"], state_dir=state_dir,
        image=image.tag, mounts=[state_dir / "results"],
    )  # fmt: skip
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()
        _remove_all(cluster.key)  # a second net: nothing may outlive the tests


# --------------------------------------------------------------------------- image


def test_image_is_cached_the_second_time(image: ImageBuild) -> None:
    again = build_image()
    assert again.tag == image.tag
    assert not again.built, "a second build with nothing changed must not rebuild"
    assert again.seconds < 30


def test_image_has_the_drivers_python_and_the_project(image: ImageBuild) -> None:
    client = docker.from_env()
    try:
        out = client.containers.run(
            image.tag,
            ["python", "-c", "import sys, pyspark, ftctl.spark.task; "
             "print('%d.%d' % sys.version_info[:2], pyspark.__version__)"],
            remove=True, network_mode="none",
        )  # fmt: skip
    finally:
        client.close()
    import pyspark

    assert out.decode().split() == [f"{sys.version_info.major}.{sys.version_info.minor}",
                                    pyspark.__version__]


# --------------------------------------------------------------------------- the cluster


def test_status_shows_both_workers_alive_with_labels(cluster: DockerCluster) -> None:
    env = {STATE_DIR_ENV: str(cluster.state_dir)}
    result = runner.invoke(app, ["cluster", "status", "--backend", "docker", "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["running"] and report["alive_workers"] == 2
    assert [w["labels"] for w in report["workers"]] == [{"rack": "a"}, {"rack": "b"}]
    # Auto-detected from the state dir when --backend is left out.
    assert runner.invoke(app, ["cluster", "status"], env=env).exit_code == 0


def test_containers_are_labelled_and_limited(cluster: DockerCluster) -> None:
    by_name = {c.name: c for c in containers_of(cluster.key)}
    assert len(by_name) == 3
    worker = by_name[f"ftctl-{cluster.key}-w0"]
    assert worker.labels["ftctl.label.rack"] == "a"
    assert worker.labels["ftctl.run"] == cluster.run_id
    assert worker.labels[LABEL_CLUSTER] == cluster_key(cluster.state_dir)
    host = worker.attrs["HostConfig"]
    assert host["NetworkMode"] == "host"
    assert host["NanoCpus"] == 1_000_000_000
    assert host["Memory"] == (512 + 1536) * 1024 * 1024


def test_worker_pids_are_host_pids(cluster: DockerCluster) -> None:
    pids = cluster.worker_pids()
    assert len(pids) == 2
    for pid in pids.values():
        assert "java" in psutil.Process(pid).name()
    assert cluster.worker_processes("w0")[0].pid == cluster.worker("w0").pid


def test_kill_worker_container_marks_it_dead(cluster: DockerCluster) -> None:
    victim = cluster.worker("w0")
    cluster.kill_worker("w0")
    assert not psutil.pid_exists(victim.pid) or psutil.Process(victim.pid).status() == "zombie"
    _wait(lambda: cluster.master_worker_state("w0") == "DEAD", 60, "the master to see w0 DEAD")
    assert "w0" not in {w.name for w in cluster.workers()}
    statuses = {w.name: w.state for w in cluster.status().workers}
    assert statuses == {"w0": "DEAD", "w1": "ALIVE"}


def test_start_worker_adds_a_labelled_container(cluster: DockerCluster) -> None:
    worker = cluster.start_worker({"rack": "a"})
    assert worker.worker_id is not None
    assert [w.name for w in cluster.workers_by_label("rack=a")] == [worker.name]
    alive = [w for w in cluster.status().workers if w.state == "ALIVE"]
    assert sorted(w.name for w in alive) == ["w1", worker.name]


def test_pause_and_unpause_freeze_the_container(cluster: DockerCluster) -> None:
    cluster.pause_worker("w1")
    try:
        status = {c.worker: c.status for c in cluster.containers() if c.worker}
        assert status["w1"] == "paused"
        assert psutil.Process(cluster.worker("w1").pid).status() in ("stopped", "disk-sleep",
                                                                     "sleeping")
    finally:
        cluster.unpause_worker("w1")
    assert {c.worker: c.status for c in cluster.containers() if c.worker}["w1"] == "running"


def test_restart_worker_registers_again(cluster: DockerCluster) -> None:
    before = cluster.worker("w1").pid
    worker = cluster.restart_worker("w1", timeout=1, wait=True)
    assert worker.pid != before and worker.worker_id is not None
    assert cluster.master_worker_state("w1") == "ALIVE"


def test_fault_context_drives_the_docker_cluster(cluster: DockerCluster) -> None:
    """chaos reaches containers through the same FaultContext as local processes."""
    ctx = HostFaultContext(clock=time.monotonic, instance_ids=[], task_pids=lambda _i: None,
                           cluster=cluster)  # fmt: skip
    assert {"rack": "b"} in [dict(w.labels) for w in ctx.workers()]
    added = ctx.start_worker({"rack": "c"})  # returns at launch; the test waits for ALIVE
    cluster.wait_alive(added.id, timeout=90)
    assert {"rack": "c"} in [dict(w.labels) for w in ctx.workers()]
    killed = ctx.kill_worker(added.id)
    assert killed.id == added.id and added.id not in {w.id for w in ctx.workers()}


def test_down_removes_every_container(cluster: DockerCluster) -> None:
    cluster.down()
    assert containers_of(cluster.key) == []
    assert not (cluster.state_dir / "cluster.json").exists()


# --------------------------------------------------------------------------- prune


def test_prune_removes_the_containers_of_a_dead_owner(image: ImageBuild, tmp_path: Path) -> None:
    cluster = DockerCluster(workers=0, state_dir=tmp_path / "state", image=image.tag, owned=True)
    try:
        cluster.up()
        meta = load_meta(cluster.state_dir)
        assert meta is not None and meta.owner_pid == os.getpid()
        assert cluster.key not in [p.cluster_key for p in DockerCluster.prune()]  # owner lives
        # A crashed ftctl: the recorded owner is a process that has exited.
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        meta.owner_pid, meta.owner_create_time = dead.pid, time.time() - 1
        save_meta(cluster.state_dir, meta)
        pruned = [p for p in DockerCluster.prune() if p.cluster_key == cluster.key]
        assert len(pruned) == 1 and "is gone" in pruned[0].reason
        assert containers_of(cluster.key) == []
    finally:
        cluster.down()
        _remove_all(cluster.key)
