"""The docker backend without an engine: messages, backend choice, the image's inputs."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from typer.testing import CliRunner

from ftctl.backends import attach_cluster, detect_backend, make_cluster
from ftctl.cli import app
from ftctl.cluster import LocalCluster
from ftctl.cluster.errors import ClusterUsageError
from ftctl.docker import wheels
from ftctl.docker.cluster import DockerCluster, driver_python_paths, memory_mb
from ftctl.docker.engine import NoDockerEngineError, connect
from ftctl.docker.meta import DockerMeta, cluster_key, save_meta

runner = CliRunner()
NOWHERE = "unix:///nonexistent/docker.sock"
NO_ENGINE = f"no Docker engine reachable (DOCKER_HOST={NOWHERE}): start dockerd or set DOCKER_HOST"


def test_connect_without_engine_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    with pytest.raises(NoDockerEngineError) as err:
        connect(timeout=2)
    assert str(err.value) == NO_ENGINE
    assert err.value.exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["image", "build"],
        ["cluster", "up", "--backend", "docker"],
        ["cluster", "prune", "--all"],
    ],
)
def test_cli_without_engine_says_so_in_one_line(args: list[str], tmp_path: Path) -> None:
    env = {"DOCKER_HOST": NOWHERE, "FTCTL_STATE_DIR": str(tmp_path / "state")}
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [f"error: {NO_ENGINE}"]


def test_prune_without_engine_prunes_processes_and_says_containers_were_not_checked(
        tmp_path: Path) -> None:
    env = {"DOCKER_HOST": NOWHERE, "FTCTL_STATE_DIR": str(tmp_path / "state")}
    result = runner.invoke(app, ["cluster", "prune"], env=env)
    assert result.exit_code == 0, result.output
    assert f"containers not checked: {NO_ENGINE}" in " ".join(result.output.split())


def test_docker_only_options_are_refused_for_local(tmp_path: Path) -> None:
    env = {"FTCTL_STATE_DIR": str(tmp_path / "state")}
    for flag in (["--cpus", "1"], ["--own-pids"]):
        result = runner.invoke(app, ["cluster", "up", *flag], env=env)
        assert result.exit_code == 2
        assert f"{flag[0]} applies to --backend docker only" in result.output


def test_make_cluster_picks_the_backend(tmp_path: Path) -> None:
    local = make_cluster("local", workers=1, state_dir=tmp_path, mounts=[tmp_path], owned=True)
    assert type(local) is LocalCluster
    docker = make_cluster("docker", workers=1, state_dir=tmp_path, mounts=[tmp_path])
    assert isinstance(docker, DockerCluster) and docker.mounts == [str(tmp_path.resolve())]
    with pytest.raises(ClusterUsageError, match="unknown backend 'k8s'"):
        make_cluster("k8s")


def test_backend_is_detected_from_the_state_dir(tmp_path: Path) -> None:
    assert detect_backend(tmp_path) == "local"
    save_meta(tmp_path, DockerMeta(image="ftctl:x", cluster_key=cluster_key(tmp_path), run_id="r"))
    assert detect_backend(tmp_path) == "docker"
    with pytest.raises(ClusterUsageError, match="no docker cluster is running"):
        attach_cluster(tmp_path)  # docker.json alone, no cluster.json


def test_memory_sizes() -> None:
    assert memory_mb("512m") == 512 and memory_mb("2g") == 2048
    with pytest.raises(ClusterUsageError):
        memory_mb("1024")


def test_cluster_key_is_per_state_dir(tmp_path: Path) -> None:
    assert cluster_key(tmp_path / "a") != cluster_key(tmp_path / "a2")
    assert cluster_key(tmp_path / "a") == cluster_key(tmp_path / "a")


def test_driver_python_paths_cover_the_interpreter() -> None:
    import sys

    paths = driver_python_paths()
    assert sys.executable in paths
    assert all(Path(p).name.startswith("python") for p in paths)


def test_project_wheel_is_reproducible(tmp_path: Path) -> None:
    first = wheels.project_wheel(tmp_path / "a", "0.1.0")
    second = wheels.project_wheel(tmp_path / "b", "0.1.0")
    assert first.read_bytes() == second.read_bytes()
    names = zipfile.ZipFile(first).namelist()
    assert "ftctl/spark/task.py" in names and "protocols/registry.py" in names
    assert "ftctl-0.1.0.dist-info/RECORD" in names
    assert not any("__pycache__" in n for n in names)


def test_runtime_pins_are_the_installed_versions() -> None:
    import pyspark

    pins = wheels.runtime_pins()
    assert f"pyspark=={pyspark.__version__}" in pins
    assert any(p.startswith("py4j==") for p in pins)  # pulled in as pyspark's dependency
    assert not any(p.startswith(("matplotlib==", "typer==")) for p in pins)


def test_runtime_pins_cover_everything_a_task_imports() -> None:
    """The image installs only the pinned distributions. Import the task module with every
    other distribution hidden, as inside the image: a required import of an unpinned one
    fails here (optional ones, guarded by ImportError, still pass), no Docker needed."""
    import subprocess
    import sys

    pinned = {canonicalize_name(p.split("==")[0]) for p in wheels.runtime_pins()}
    code = """
import re, sys
from importlib.metadata import packages_distributions
def canonicalize_name(d): return re.sub(r"[-_.]+", "-", d).lower()
owners = packages_distributions()
allowed = set(sys.argv[1:])
class Hide:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        dists = {canonicalize_name(d) for d in owners.get(top, ())}
        if top in sys.stdlib_module_names or not dists or dists & allowed:
            return None
        raise ModuleNotFoundError(f"{top} is not in the image", name=top)
sys.meta_path.insert(0, Hide())
import ftctl.spark.task
"""
    allowed = [*sorted(pinned), canonicalize_name(wheels.PROJECT_NAME)]
    res = subprocess.run([sys.executable, "-c", code, *allowed], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr.strip().splitlines()[-1]


class _LaggingContainer:
    """A container whose engine records an unpause only after a few inspections, as
    dockerd does when it takes the new state from the runtime's event."""

    def __init__(self, lag: int) -> None:
        self.status, self.lag, self.reloads = "paused", lag, 0

    def reload(self) -> None:
        self.reloads += 1
        if self.reloads > self.lag:
            self.status = "running"


def test_a_pause_or_unpause_returns_once_the_engine_reports_the_new_state() -> None:
    container = _LaggingContainer(lag=3)
    DockerCluster._settled(container, "paused")
    assert container.status == "running" and container.reloads == 4
    stuck = _LaggingContainer(lag=10**9)  # an engine that never says: bounded, no hang
    DockerCluster._settled(stuck, "paused", timeout=0.2)
    assert stuck.status == "paused" and stuck.reloads >= 2
