"""The local cluster backend: parsers and CLI errors (fast) and a real cluster (``spark``)."""

from __future__ import annotations

import json
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.cluster import process
from ftctl.cluster.errors import (
    ClusterUsageError,
    InfraError,
    JavaNotFoundError,
    LabelSyntaxError,
)
from ftctl.cluster.java import find_java, parse_java_version, require_java
from ftctl.cluster.labels import expand_labels, format_labels, matches, parse_labels
from ftctl.cluster.local import LocalCluster
from ftctl.cluster.state import STATE_DIR_ENV, ClusterState, load_state

runner = CliRunner()


# --------------------------------------------------------------------------- Java version


@pytest.mark.parametrize(
    ("output", "version", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', "17.0.15", 17),
        ('java version "1.8.0_392"\nJava(TM) SE Runtime Environment', "1.8.0_392", 8),
        ('openjdk version "21" 2023-09-19', "21", 21),
        ('openjdk version "22-ea" 2024-03-19', "22-ea", 22),
        ('openjdk version "11.0.2" 2019-01-15', "11.0.2", 11),
        (
            'Picked up JAVA_TOOL_OPTIONS: -Dfoo=1\nopenjdk version "17.0.2" 2022-01-18',
            "17.0.2",
            17,
        ),
        ("openjdk 21.0.1 2023-10-17\nOpenJDK Runtime Environment", "21.0.1", 21),
    ],
)
def test_parse_java_version(output: str, version: str, major: int) -> None:
    assert parse_java_version(output) == (version, major)


@pytest.mark.parametrize("output", ["", "command not found", 'version "abc"'])
def test_parse_java_version_rejects_garbage(output: str) -> None:
    with pytest.raises(ValueError):
        parse_java_version(output)


def test_require_java_without_any_java_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFoundError) as caught:
        require_java({"PATH": str(tmp_path)})
    assert str(caught.value) == (
        "Java 17+ is required (found: none); install a JDK and set JAVA_HOME"
    )
    assert caught.value.exit_code == 2


def test_require_java_rejects_a_java_home_without_java(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFoundError, match="has no bin/java"):
        find_java({"JAVA_HOME": str(tmp_path), "PATH": ""})


def test_require_java_rejects_old_java(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(JavaNotFoundError, match=r"found: 1\.8\.0_392 at"):
        require_java({"JAVA_HOME": str(tmp_path)})


# --------------------------------------------------------------------------- labels


def test_parse_labels() -> None:
    assert parse_labels("rack=a") == {"rack": "a"}
    assert parse_labels("rack=a, zone=eu-1") == {"rack": "a", "zone": "eu-1"}
    assert parse_labels("") == {}
    assert parse_labels({"rack": "b"}) == {"rack": "b"}


@pytest.mark.parametrize("bad", ["rack", "rack:a", "=a", "rack=", "ra ck=a", "rack=a,rack=b"])
def test_parse_labels_rejects_bad_syntax(bad: str) -> None:
    with pytest.raises(LabelSyntaxError) as caught:
        parse_labels(bad)
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_expand_labels_assigns_in_order_and_cycles() -> None:
    racks = [labels["rack"] for labels in expand_labels(["rack=a", "rack=b"], 5)]
    assert racks == ["a", "b", "a", "b", "a"]
    explicit = expand_labels(["rack=a", "rack=a", "rack=b", "rack=b"], 4)
    assert [labels["rack"] for labels in explicit] == ["a", "a", "b", "b"]
    assert expand_labels(None, 2) == [{}, {}]
    assert expand_labels("rack=a", 2) == [{"rack": "a"}, {"rack": "a"}]


def test_label_selectors_and_formatting() -> None:
    labels = {"rack": "a", "zone": "1"}
    assert matches(labels, "rack=a")
    assert matches(labels, "rack=a,zone=1")
    assert not matches(labels, "rack=b")
    assert format_labels(labels) == "rack=a,zone=1"


# --------------------------------------------------------------------------- CLI errors


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cluster-state"
    monkeypatch.setenv(STATE_DIR_ENV, str(directory))
    return directory


def _one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_cli_bad_label_exits_2(state_dir: Path) -> None:
    result = runner.invoke(app, ["cluster", "up", "--label", "rack:a"])
    assert result.exit_code == 2
    assert "bad label 'rack:a'" in _one_error_line(result.output)


def test_cli_missing_java_exits_2(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(state_dir.parent))  # a directory with no java in it
    result = runner.invoke(app, ["cluster", "up"])
    assert result.exit_code == 2
    assert _one_error_line(result.output) == (
        "error: Java 17+ is required (found: none); install a JDK and set JAVA_HOME"
    )


def test_cli_status_without_cluster_exits_2(state_dir: Path) -> None:
    result = runner.invoke(app, ["cluster", "status"])
    assert result.exit_code == 2
    assert "no local cluster is running" in _one_error_line(result.output)


def test_cli_down_without_cluster_is_fine(state_dir: Path) -> None:
    result = runner.invoke(app, ["cluster", "down"])
    assert result.exit_code == 0
    assert "no local cluster running" in result.output


def test_requested_port_in_use_is_a_usage_error(state_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["cluster", "up", "--port", str(port)])
    assert result.exit_code == 2
    line = _one_error_line(result.output)
    # Without Java the Java check answers first; both are exit-2 environment errors.
    assert f"port {port} on 127.0.0.1 is already in use" in line or "Java 17+" in line


def test_bad_memory_and_cores_are_usage_errors(state_dir: Path) -> None:
    with pytest.raises(ClusterUsageError, match="bad worker memory"):
        LocalCluster(memory="lots")
    with pytest.raises(ClusterUsageError, match="bad worker cores"):
        LocalCluster(cores=0)


# --------------------------------------------------------------------------- real cluster

START_TIMEOUT = 180.0  # generous: the test machine is small and shared
STATE_CHANGE_TIMEOUT = 30.0


def _java_or_skip() -> None:
    try:
        require_java()
    except JavaNotFoundError as exc:
        pytest.skip(str(exc))


def _recorded_pids(state: ClusterState) -> list[tuple[int, float]]:
    return [(d.pid, d.create_time) for d in [state.master, *state.workers]]


def _survivors(state_dir: Path, recorded: list[tuple[int, float]]) -> list[str]:
    """Processes that should be gone: recorded daemons, or JVMs naming the state dir."""
    left = [
        f"recorded pid {pid}"
        for pid, created in recorded
        if process.same_process(pid, created) is not None
    ]
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            cmdline = proc.info["cmdline"] or []
            if (
                "java" in (proc.info["name"] or "")
                and any(str(state_dir) in arg for arg in cmdline)
                and process.is_alive(proc)
            ):
                left.append(f"java pid {proc.pid}")
        except psutil.Error:
            continue
    return left


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    return process.wait_until(predicate, timeout, interval=0.2)


@pytest.fixture(scope="module")
def spark_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("spark-cluster") / "state"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(directory))
        yield directory


@pytest.fixture(scope="module")
def cluster(spark_state_dir: Path) -> Iterator[LocalCluster]:
    """A 2-worker cluster shared by the tests below; torn down whatever they do."""
    _java_or_skip()
    local = LocalCluster(2, cores=1, memory="512m", labels=["rack=a", "rack=b"],
                         start_timeout=START_TIMEOUT)  # fmt: skip
    try:
        local.up()
        yield local
    finally:
        local.down()


@pytest.mark.spark
def test_state_dir_comes_from_the_environment(cluster: LocalCluster, spark_state_dir: Path) -> None:
    assert cluster.state_dir == spark_state_dir.resolve()
    state = load_state(cluster.state_dir)
    assert state is not None
    assert state.master_url.startswith("spark://127.0.0.1:")
    assert state.ui_url.startswith("http://127.0.0.1:")
    assert [w.labels for w in state.workers] == [{"rack": "a"}, {"rack": "b"}]
    assert all(w.worker_id for w in state.workers)
    # Nothing is written into the installed pyspark.
    assert not (Path(state.spark_home) / "work").exists()
    assert not (Path(state.spark_home) / "logs").exists()


@pytest.mark.spark
def test_status_shows_two_alive_labelled_workers(cluster: LocalCluster) -> None:
    status = cluster.status()
    assert status.running
    assert [w.state for w in status.workers] == ["ALIVE", "ALIVE"]
    assert [w.labels for w in status.workers] == [{"rack": "a"}, {"rack": "b"}]
    assert all(w.process_alive and w.memory_mb == 512 and w.cores == 1 for w in status.workers)
    assert [w.name for w in cluster.workers_by_label("rack=b")] == ["w1"]
    assert len(cluster.worker_pids()) == 2

    cli = runner.invoke(app, ["cluster", "status", "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output)["alive_workers"] == 2


@pytest.mark.spark
def test_killed_worker_goes_dead_at_the_master(cluster: LocalCluster) -> None:
    victim = cluster.workers_by_label("rack=a")[0]
    killed = cluster.kill_worker(victim.worker_id or victim.name)
    assert killed.killed
    assert process.same_process(victim.pid, victim.create_time) is None
    assert _wait(
        lambda: cluster.master_worker_state(victim.name) in ("DEAD", "ABSENT"),
        STATE_CHANGE_TIMEOUT,
    ), cluster.master_worker_state(victim.name)
    assert victim.worker_id not in cluster.worker_pids()
    assert cluster.workers_by_label("rack=a") == []
    with pytest.raises(ClusterUsageError, match="is not running"):
        cluster.kill_worker(victim.name)


@pytest.mark.spark
def test_start_worker_adds_an_alive_worker(cluster: LocalCluster) -> None:
    added = cluster.start_worker("rack=a", timeout=START_TIMEOUT)
    assert added.worker_id
    assert cluster.master_worker_state(added.name) == "ALIVE"
    status = cluster.status()
    assert len(status.alive_workers) == 2
    assert {w.name for w in status.alive_workers} == {"w1", added.name}
    assert [w.name for w in cluster.workers_by_label("rack=a")] == [added.name]

    # Without waiting: returns at once, the id arrives once the master has it.
    later = cluster.start_worker({"rack": "b"}, wait=False)
    assert later.worker_id is None
    cluster.wait_alive(later.name, timeout=START_TIMEOUT)
    assert cluster.worker(later.name).worker_id
    assert len(cluster.status().alive_workers) == 3
    assert {w.name for w in cluster.workers_by_label("rack=b")} == {"w1", later.name}


@pytest.mark.spark
def test_down_leaves_no_process(cluster: LocalCluster) -> None:
    state = load_state(cluster.state_dir)
    assert state is not None
    recorded = _recorded_pids(state)
    cluster.down()
    assert _wait(lambda: not _survivors(cluster.state_dir, recorded), 10.0), _survivors(
        cluster.state_dir, recorded
    )
    assert load_state(cluster.state_dir) is None


@pytest.mark.spark
def test_failed_start_tears_down(tmp_path: Path) -> None:
    _java_or_skip()
    directory = tmp_path / "state"
    too_short = LocalCluster(1, state_dir=directory, start_timeout=0.5)
    with pytest.raises(InfraError, match="did not become ALIVE") as caught:
        too_short.up()
    assert caught.value.exit_code == 3
    assert caught.value.log_path is not None
    assert _wait(lambda: not _survivors(directory, []), 10.0), _survivors(directory, [])
    assert load_state(directory) is None


@pytest.mark.spark
def test_context_manager_tears_down_on_keyboard_interrupt(tmp_path: Path) -> None:
    _java_or_skip()
    directory = tmp_path / "state"
    recorded: list[tuple[int, float]] = []
    with (
        pytest.raises(KeyboardInterrupt),
        LocalCluster(1, state_dir=directory, start_timeout=START_TIMEOUT) as local,
    ):
        state = load_state(directory)
        assert state is not None
        recorded = _recorded_pids(state)
        assert local.status().alive_workers
        raise KeyboardInterrupt
    assert recorded
    assert _wait(lambda: not _survivors(directory, recorded), 10.0), _survivors(directory, recorded)


@pytest.mark.spark
def test_cli_up_status_down(state_dir: Path) -> None:
    _java_or_skip()
    try:
        up = runner.invoke(app, ["cluster", "up", "-w", "1", "-l", "rack=z", "--timeout", "180"])
        assert up.exit_code == 0, up.output
        assert "spark://127.0.0.1:" in up.output
        again = runner.invoke(app, ["cluster", "up", "-w", "1"])
        assert again.exit_code == 2
        assert "already running" in _one_error_line(again.output)
        status = runner.invoke(app, ["cluster", "status", "--json"])
        assert status.exit_code == 0, status.output
        report = json.loads(status.output)
        assert report["running"] and report["workers"][0]["labels"] == {"rack": "z"}
        state = load_state(state_dir)
        assert state is not None
        recorded = _recorded_pids(state)

        # A master that died is an infrastructure problem: exit 3, one line after the table.
        psutil.Process(state.master.pid).kill()
        assert _wait(lambda: process.same_process(*recorded[0]) is None, 10.0)
        broken = runner.invoke(app, ["cluster", "status"])
        assert broken.exit_code == 3, broken.output
        assert "the Spark master is DOWN" in broken.output
    finally:
        down = runner.invoke(app, ["cluster", "down"])
    assert down.exit_code == 0, down.output
    assert _wait(lambda: not _survivors(state_dir, recorded), 10.0)
    assert load_state(state_dir) is None
