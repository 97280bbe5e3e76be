"""``ftctl chaos --master`` against a cluster as on other hosts: docker workers with their
own PID namespaces that see, of the driver's files, only the snapshot store's volume.

One run (~30-50 s on this 2-core machine, most of it cluster and session start) kills a
task, then an executor, then a worker. The driver runs under a hook that logs every
signal it sends; a sampler records the worker containers' processes (host pid, pid
inside the container, start time) every 50 ms while the run goes. The test asserts that
the kills were carried out by the task's agent inside its container (the killed
processes are gone, the driver signalled none of them nor any other container process),
that the snapshots went to the store volume, that the output was exactly-once, and that
no container is left. Skipped only when no Docker engine answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from ftctl.docker.cluster import DockerCluster
from ftctl.docker.image import build_image
from ftctl.kernel.history import read_history
from ftctl.spark.agent import EXECUTOR_CLASS, WORKER_CLASS
from ftctl.store import DirectoryStore
from protocols.checkpoint.instance import FINAL
from tests.dockerkit import containers_of

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"
INSTANCES = ("lines[0]", "split[0]", "split[1]", "count[0]", "count[1]", "out[0]")
SCENARIO = """\
name: agent-kills
seed: 3
faults:
  - {type: kill-task, at: 4.0, target: "count[0]"}
  - {type: kill-executor, at: 8.0, target: "split[1]"}
  - {type: kill-worker, at: 12.0, target: "out[0]"}
"""

# The driver, with every signal it sends logged (os.kill is what psutil and subprocess
# call too) before ftctl's command line runs as usual.
_HOOKED_DRIVER = """
import json, os, runpy, sys
log = open(sys.argv[1], "a")
def hooked(real):
    def send(pid, sig):
        log.write(json.dumps([pid, int(sig)]) + "\\n")
        log.flush()
        return real(pid, sig)
    return send
os.kill, os.killpg = hooked(os.kill), hooked(os.killpg)
sys.argv = ["ftctl", *sys.argv[2:]]
runpy.run_module("ftctl.cli", run_name="__main__")
"""


@dataclass(frozen=True)
class Seen:
    """A process of a worker container, as the host saw it."""

    container: str
    host_pid: int
    inner_pid: int  # its pid in the container's namespace
    start: float
    role: str  # "worker", "executor" (the JVMs by main class), "spawning", else "other"
    executor: str | None  # the Spark executor id it runs under (or is), if any
    ancestors: tuple[int, ...]  # host pids, nearest first


def _inner_pid(pid: int) -> int | None:
    """The pid of host process ``pid`` in its innermost PID namespace."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except OSError:
        return None
    return None


def _role(cmdline: list[str]) -> str:
    joined = " ".join(cmdline)
    return "worker" if WORKER_CLASS in joined else \
        "executor" if EXECUTOR_CLASS in joined else \
        "spawning" if "jspawnhelper" in joined else "other"


class Sampler(threading.Thread):
    """Every process under each worker container's main process, every 50 ms.

    A fault whose target is being restarted strikes as soon as the new task registers,
    so a victim may live only a moment: each round reads the process table once and
    reads a process's details once it has exec'd into its own program."""

    EVERY = 0.05

    def __init__(self, containers: Mapping[str, int]) -> None:
        super().__init__(daemon=True)
        self.containers = dict(containers)
        self.seen: dict[tuple[int, float], Seen] = {}
        self.done = threading.Event()
        self.longest = 0.0  # the longest time between two rounds, for a miss's report

    def run(self) -> None:
        last = time.monotonic()
        while not self.done.wait(self.EVERY):
            by_parent: dict[int, list[psutil.Process]] = {}
            for proc in psutil.process_iter():
                try:
                    by_parent.setdefault(proc.ppid(), []).append(proc)
                except psutil.Error:
                    continue
            for name, main in self.containers.items():
                todo = list(by_parent.get(main, []))
                while todo:
                    proc = todo.pop()
                    todo += by_parent.get(proc.pid, [])
                    self._sample(name, proc)
            now = time.monotonic()
            self.longest, last = max(self.longest, now - last), now

    def _sample(self, container: str, proc: psutil.Process) -> None:
        try:
            key = (proc.pid, proc.create_time())
        except psutil.Error:
            return
        if key in self.seen and self.seen[key].role == "other":
            return
        # A process a JVM launches runs first as a copy of that JVM, then as Java's spawn
        # helper, under the same pid: its role is right only after the last exec, so
        # only a Python process (which forks but never execs) is read just once. An
        # exiting process shows no command line: keep what was seen.
        try:
            line = [(p.pid, p.cmdline()) for p in [proc, *proc.parents()]]
        except psutil.Error:
            return
        if not line[0][1]:
            return
        inner = _inner_pid(proc.pid)
        args = next((c for _, c in line if "--executor-id" in c), [])
        executor = args[args.index("--executor-id") + 1] if args else None
        if inner is not None:
            self.seen[key] = Seen(container, proc.pid, inner, key[1], _role(line[0][1]),
                                  executor, tuple(pid for pid, _ in line[1:]))

    def above(self, process: Seen, role: str) -> Seen:
        """The ``role`` JVM ``process`` ran under."""
        (found,) = [s for s in self.seen.values()
                    if s.role == role and s.host_pid in process.ancestors]
        return found


def _alive(pid: int, start: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == start and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DockerCluster]:
    """Two workers in their own PID namespaces, with slots enough for the whole run on
    one (the other's loss is not restored); of the driver's side only the store is
    mounted (the results dir is not)."""
    cluster = DockerCluster(workers=2, cores=12, state_dir=tmp_path / "cluster",
                            image=build_image().tag, mounts=[tmp_path / "store"],
                            own_pids=True)  # fmt: skip
    left: list[Any] = []
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()
        left = containers_of(cluster.key)
        for container in left:
            container.remove(force=True)
    assert left == [], f"containers left behind: {[c.name for c in left]}"


def test_kills_on_a_remote_cluster_are_carried_out_inside_the_containers(
        cluster: DockerCluster, tmp_path: Path) -> None:  # fmt: skip
    for pid in cluster.worker_pids().values():  # a namespace of their own: pid 1 there
        assert _inner_pid(pid) == 1
    scenario = tmp_path / "agent-kills.yaml"
    scenario.write_text(SCENARIO)
    store, results, signals = tmp_path / "store", tmp_path / "results", tmp_path / "signals"
    sampler = Sampler({w.name: w.pid for w in cluster.workers()})
    sampler.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _HOOKED_DRIVER, str(signals), "chaos", str(WORDCOUNT),
             "--protocol", "checkpoint", "--records", "16000", "--rate", "1000",
             "--master", cluster.master_url, "--store", store.as_uri(),
             "--scenario", str(scenario), "--json", "--results", str(results)],
            cwd=tmp_path, text=True, capture_output=True, timeout=300,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
    finally:
        sampler.done.set()
        sampler.join()
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["passed"] and summary["complete"]
    assert summary["oracle"] == {"passed": True, "mismatches": 0}
    assert summary["restarts"] > 0

    lines = (Path(summary["path"]) / "events.jsonl").read_text().splitlines()
    history = list(read_history(map(json.loads, lines)))
    injected = _faults_and_targets(history)
    assert [f["type"] for f, _ in injected] == ["kill-task", "kill-executor", "kill-worker"]
    victims: list[Seen] = []
    for fault, (inner, executor) in injected:
        assert fault["details"] == {"via": "agent"}
        # The pid the task reported (one of its container's, the record's only pid) and
        # the executor it registered from: pids repeat across namespaces.
        assert fault["pids"] == [inner]
        found = [s for s in sampler.seen.values() if s.inner_pid == inner
                 and s.executor == executor and s.role == "other"]
        assert len(found) == 1, (
            f"{fault['type']}: {len(found)} processes seen as pid {inner} under executor "
            f"{executor}; as pid {inner}: "
            f"{[s for s in sampler.seen.values() if s.inner_pid == inner]}; "
            f"longest time between samples {sampler.longest:.2f} s")
        (task,) = found
        assert task.host_pid != inner, "a pid inside a namespace of its own"
        killed = [task]
        if fault["type"] in ("kill-executor", "kill-worker"):
            killed.append(sampler.above(task, "executor"))
        if fault["type"] == "kill-worker":
            killed.append(sampler.above(task, "worker"))
            lost = killed[-1].container
        for process in killed:
            assert not _alive(process.host_pid, process.start), (fault["type"], process)
        victims += killed
    # The node is gone: its container ended with its Worker; the other one lives on.
    status = {c.worker: c.status for c in cluster.containers() if c.worker}
    assert status[lost] == "exited" and list(status.values()).count("running") == 1
    assert len([e for e in history if e.kind == "failure-detected"]) >= 3

    # The driver signalled nothing in the containers, neither by the pids the tasks
    # reported nor by host pids: the kills came from inside.
    sent = [tuple(json.loads(x)) for x in signals.read_text().splitlines()] \
        if signals.exists() else []
    in_containers = {s.host_pid for s in sampler.seen.values()} | \
        {s.inner_pid for s in victims}
    # (Signal 0 only asks whether a pid exists; it delivers nothing.)
    assert [s for s in sent if abs(s[0]) in in_containers and s[1] != 0] == []

    # Snapshots went to the store, written by the tasks in the containers: the results
    # dir (not mounted there) holds none.
    run_id = summary["run_id"]
    # The end-of-stream snapshot holds every instance's state (the store's catalog).
    written = DirectoryStore(store / run_id)
    assert [i for i in INSTANCES if FINAL not in written.snapshots_of(i)] == []
    assert not (Path(summary["path"]) / "snapshots").exists()
    assert str(results) not in cluster.mounts and cluster.mounts == [str(store)]


Target = tuple[int, str | None]


def _faults_and_targets(history: list[Any]) -> list[tuple[Mapping[str, Any], Target]]:
    """Each injected fault with its target task's (pid, executor id) as that task
    registered last before the fault (a task whose executor was dying as it
    registered may not have found its id)."""
    registered: dict[str, Target] = {}
    out: list[tuple[Mapping[str, Any], Target]] = []
    for e in history:
        if e.kind == "instance-registered" and e.instance is not None:
            registered[e.instance] = (int(e.data["pid"]), e.data.get("executor"))
        elif e.kind == "fault-injected":
            out.append((e.data, registered[e.data["resolved"]]))
    return out
