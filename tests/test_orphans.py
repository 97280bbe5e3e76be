"""No orphans: a per-run cluster dies with the process that started it, even by SIGKILL;
what survives anyway is listed by ``cluster status`` and removed by ``cluster prune``; a
killed run's status stops saying ``running``.

The fast tests stand a Python process named ``java`` (a symlink) carrying a cluster's
state-dir marker in for a daemon JVM: teardown finds daemons by exactly that. The Spark
tests SIGKILL a real ``ftctl run``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.cluster.abandoned import find_abandoned, prune_abandoned
from ftctl.cluster.process import wait_until
from ftctl.cluster.state import ClusterState, DaemonInfo, save_state
from ftctl.cluster.teardown import marker_arg
from ftctl.results import RunStore

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"
runner = CliRunner()


def _gone(procs: list[psutil.Process]) -> bool:
    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            continue
    return not alive


def _fake_daemon(tmp_path: Path, state_dir: Path) -> subprocess.Popen[bytes]:
    """A process named ``java`` with ``state_dir``'s marker on its command line."""
    java = tmp_path / "bin" / "java"
    java.parent.mkdir(exist_ok=True)
    if not java.exists():
        java.symlink_to(sys.executable)
    return subprocess.Popen([str(java), "-c", "import time; time.sleep(120)",
                             marker_arg(state_dir)], start_new_session=True)


@pytest.fixture
def daemons() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for popen in started:
        if popen.poll() is None:
            popen.kill()
        popen.wait()


OWNER = """
import sys, time
from pathlib import Path
from ftctl.cluster.watchdog import Watchdog
from ftctl.cluster.local import LocalCluster
dog = Watchdog(Path(sys.argv[1]), LocalCluster)
print(dog.pid, flush=True)
if sys.argv[2] == "release":
    dog.release()
    print("released", flush=True)
time.sleep(120)
"""


def _owner(state_dir: Path, mode: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(state_dir), mode], text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_watchdog_tears_down_when_its_owner_is_sigkilled(
        tmp_path: Path, daemons: list[subprocess.Popen[bytes]]) -> None:
    state_dir = tmp_path / "state"
    owner, dog = _owner(state_dir, "hold")
    daemon = _fake_daemon(tmp_path, state_dir)
    daemons.append(daemon)
    time.sleep(0.5)
    assert daemon.poll() is None
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_until(lambda: daemon.poll() is not None, 15), "daemon outlived its owner"
    assert wait_until(lambda: not psutil.pid_exists(dog) or
                      psutil.Process(dog).status() == psutil.STATUS_ZOMBIE, 10)
    assert "owner gone" in (state_dir / "watchdog.log").read_text()


def test_released_watchdog_exits_and_leaves_the_cluster_alone(
        tmp_path: Path, daemons: list[subprocess.Popen[bytes]]) -> None:
    state_dir = tmp_path / "state"
    daemon = _fake_daemon(tmp_path, state_dir)
    daemons.append(daemon)
    owner, dog = _owner(state_dir, "release")
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "released"
        assert not psutil.pid_exists(dog) or \
            psutil.Process(dog).status() == psutil.STATUS_ZOMBIE
        owner.kill()
        owner.wait()
        time.sleep(1.0)
        assert daemon.poll() is None, "a released watchdog must not tear down"
    finally:
        if owner.poll() is None:
            owner.kill()


def _state(state_dir: Path, master: subprocess.Popen[bytes], owner: psutil.Process) -> None:
    proc = psutil.Process(master.pid)
    save_state(ClusterState(
        state_dir=str(state_dir), spark_home="", java="", java_version="",
        started_at=proc.create_time(), master_url="spark://127.0.0.1:1", ui_url="",
        master=DaemonInfo(pid=proc.pid, create_time=proc.create_time(), host="127.0.0.1",
                          port=1, ui_port=2, log=""),
        owner_pid=owner.pid, owner_create_time=owner.create_time()))


def test_prune_stops_clusters_whose_owner_is_gone_and_only_those(
        tmp_path: Path, daemons: list[subprocess.Popen[bytes]]) -> None:
    runs = tmp_path / "runs"
    dead_dir, live_dir, unrecorded_dir = runs / "dead", runs / "live", tmp_path / "lost"
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended_proc = psutil.Process(ended.pid)
    ended.wait()
    dead, live, unrecorded = (_fake_daemon(tmp_path, d)
                              for d in (dead_dir, live_dir, unrecorded_dir))
    daemons += [dead, live, unrecorded]
    wait_until(lambda: all(psutil.Process(p.pid).name() == "java"
                           for p in (dead, live, unrecorded)), 5)
    _state(dead_dir, dead, ended_proc)
    _state(live_dir, live, psutil.Process())

    found = {Path(c.state_dir).name: c for c in find_abandoned([runs])}
    assert "live" not in found
    assert found["dead"].reason == f"its ftctl process ({ended_proc.pid}) is gone"
    assert found["dead"].pids == [dead.pid]
    assert found["lost"].reason == "its state file is gone"

    pruned = {Path(c.state_dir).name for c in prune_abandoned([runs])}
    assert {"dead", "lost"} <= pruned and "live" not in pruned
    assert wait_until(lambda: dead.poll() is not None and unrecorded.poll() is not None, 10)
    assert live.poll() is None
    assert not (dead_dir / "cluster.json").exists() and (live_dir / "cluster.json").exists()


def test_a_killed_runs_status_is_marked_abandoned_by_the_next_run(tmp_path: Path) -> None:
    code = ("import os, sys; from ftctl.results import RunStore; "
            "s = RunStore.create(sys.argv[1], topology='t', protocol='p'); print(s.path); "
            "os.kill(os.getpid(), 9)")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], text=True,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -signal.SIGKILL
    path = Path(proc.stdout.strip())
    assert json.loads((path / "status.json").read_text())["status"] == "running"
    # The next run marks it, before anyone reads it; a run whose process is alive (this
    # one) stays running.
    mine = RunStore.create(tmp_path, topology="t", protocol="p")
    doc = json.loads((path / "status.json").read_text())
    assert doc["status"] == "abandoned" and doc["reason"].startswith("killed")
    store = RunStore.open(path)
    assert store.status() == "abandoned"
    assert [e.kind for e in store.read_history()] == ["killed"]
    assert RunStore.open(mine.path).status() == "running"


# ---------------------------------------------------------------------- a real ftctl run


def _java_or_skip() -> None:
    from ftctl.cluster import JavaNotFoundError, require_java

    try:
        require_java()
    except JavaNotFoundError:
        pytest.skip("no Java 17+: cannot start a Spark cluster")


def _start_run(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """``ftctl run`` long enough to be killed mid-run; returns once its executors run:
    the driver JVM, the master, two workers and at least one executor."""
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ftctl.cli", "run", str(WORDCOUNT), "--records", "400000",
         "--rate", "20000", "--results", str(results)],
        cwd=tmp_path, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            tree = psutil.Process(proc.pid).children(recursive=True)
            if len(_jvms(tree)) >= 5:
                (run_dir,) = results.glob("*/run.json")
                return proc, run_dir.parent
            time.sleep(0.2)
        raise AssertionError("the run's executors did not start in time")
    except BaseException:
        proc.kill()  # its watchdog cleans up
        raise


def _cmdline(proc: psutil.Process) -> str:
    """The command line, or "" for a process gone or a zombie (spark-class leaves one)."""
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _jvms(procs: list[psutil.Process]) -> list[psutil.Process]:
    found = []
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.name().startswith("java"):
                found.append(p)
    return found


@pytest.mark.spark
def test_sigkill_of_ftctl_run_leaves_no_jvm(tmp_path: Path) -> None:
    _java_or_skip()
    proc, run_dir = _start_run(tmp_path)
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_until(lambda: _gone(tree), 20), \
            [_cmdline(p)[:200] for p in tree if p.is_running()]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert RunStore.open(run_dir).status() == "abandoned"
    result = runner.invoke(app, ["cluster", "status"], env={"DOCKER_HOST": "unix:///nowhere"})
    assert "abandoned" not in result.output


@pytest.mark.spark
def test_status_and_prune_find_what_a_killed_watchdog_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ftctl and its watchdog both SIGKILLed: status lists the cluster, prune removes it."""
    _java_or_skip()
    proc, run_dir = _start_run(tmp_path)
    tree = psutil.Process(proc.pid).children(recursive=True)
    try:
        (dog,) = [p for p in tree if "ftctl.cluster.watchdog import main" in _cmdline(p)]
        dog.send_signal(signal.SIGKILL)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(1.0)
        left = [p for p in _jvms(tree) if p.is_running()]
        assert left, "daemons should survive without their watchdog"
        monkeypatch.chdir(tmp_path)
        env = {"DOCKER_HOST": "unix:///nowhere", "FTCTL_STATE_DIR": str(tmp_path / "none")}
        status = runner.invoke(app, ["cluster", "status"], env=env)
        flat = " ".join(status.output.split())
        assert f"abandoned local cluster in {tmp_path / '.ftctl' / 'runs' / run_dir.name}" \
            in flat, status.output
        assert f"its ftctl process ({proc.pid}) is gone" in flat
        pruned = runner.invoke(app, ["cluster", "prune"], env=env)
        assert pruned.exit_code == 0, pruned.output
        assert "stopped" in pruned.output
        assert wait_until(lambda: _gone(tree), 20), \
            [_cmdline(p)[:200] for p in tree if p.is_running()]
    finally:
        for p in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        if proc.poll() is None:
            proc.kill()
