"""The fault agent inside each task (``ftctl.spark.agent``): on a cluster ftctl did not start
(``--master``) process faults travel over the control connection and the task carries
them out on itself; the driver signals nothing."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from chaos.faults import FaultError, KillExecutor, KillTask, KillWorker, NotRunning, Pause, Slow
from chaos.hostctx import HostFaultContext
from chaos.plan import Schedule, check_cluster
from chaos.schedule import PlannedFault
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.spark import agent, wire
from ftctl.spark.task import TaskPayload
from protocols.contract.events import Started
from protocols.contract.names import InstanceId

ROOT = Path(__file__).resolve().parent.parent

# A task process as on an executor, without Spark: its control reader serves the driver.
_TASK = """
import pickle, sys
from ftctl.spark.task import InstanceTask
task = InstanceTask(pickle.loads(bytes.fromhex(sys.argv[1])))
print("up", flush=True)
task._control_reader()
"""


@pytest.fixture
def task() -> Any:
    token = wire.new_token()
    listener = wire.listen(token)
    topology = load_topology(ROOT / "topologies" / "wordcount.yaml")
    payload = TaskPayload(run_id="r", instance="count[0]", inc=0, protocol="none", params={},
                          topology=topology.model_dump(by_alias=True),
                          started=Started(InstanceId("count[0]"), 0, "start"),
                          coordinator=listener.address, token=token)
    proc = subprocess.Popen([sys.executable, "-c", _TASK, pickle.dumps(payload).hex()],
                            stdout=subprocess.PIPE, text=True)
    conn = wire.accept(listener)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    try:
        yield proc, conn
    finally:
        wire.shutdown(conn)
        listener.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _status(pid: int) -> str:
    try:
        return str(psutil.Process(pid).status())
    except psutil.NoSuchProcess:
        return "gone"


def _until(cond: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False


def test_a_paused_task_stops_itself_and_resumes_after_the_duration(task: Any) -> None:
    proc, conn = task
    conn.send((wire.CONTROL, agent.payload("pause", 0.8)))  # as the host's ``_tell`` sends
    assert _until(lambda: _status(proc.pid) == psutil.STATUS_STOPPED, 5), "the task stops"
    stopped = time.monotonic()
    assert _until(lambda: _status(proc.pid) != psutil.STATUS_STOPPED, 5), "and resumes"
    assert time.monotonic() - stopped >= 0.6, "not before its duration"
    assert proc.poll() is None
    # Running again: it still takes commands from the driver.
    wire.send(conn, (wire.CONTROL, agent.payload("kill")))
    assert proc.wait(10) == -9


def test_a_slowed_task_is_stopped_part_of_the_time_then_runs_freely(task: Any) -> None:
    proc, conn = task
    wire.send(conn, (wire.CONTROL, agent.payload("slow", 1.0, factor=5.0)))
    seen = set()
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        seen.add(_status(proc.pid))
        time.sleep(0.003)
    assert psutil.STATUS_STOPPED in seen and len(seen) > 1, seen
    # Its last stop ends within a period of the duration; a busy machine may oversleep it.
    assert _until(lambda: _status(proc.pid) != psutil.STATUS_STOPPED, 5), "it is let go"
    # ... and stays running: the duty cycle is over, not paused between two stops.
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        assert _status(proc.pid) != psutil.STATUS_STOPPED
        time.sleep(0.003)
    assert proc.poll() is None


def test_a_slowdown_counts_from_when_the_task_took_it_not_from_its_helper_start() -> None:
    # A helper that comes up after the slowdown was due to end (a busy machine) stops
    # nothing; counted from its own start it would run the duty cycle for 0.3 s more.
    code = ("import os, subprocess, sys, time\n"
            "h = subprocess.Popen([sys.executable, '-m', 'ftctl.spark.agent', str(os.getpid()),"
            " '0.3', '5', '0.1', repr(time.monotonic() - 10)])\n"
            "print(h.wait(), flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    seen = set()
    while proc.poll() is None:
        seen.add(_status(proc.pid))
        time.sleep(0.002)
    assert proc.stdout is not None and proc.stdout.read().strip() == "0"
    assert psutil.STATUS_STOPPED not in seen, seen


def test_kill_executor_outside_an_executor_kills_the_task_itself(task: Any) -> None:
    proc, conn = task
    wire.send(conn, (wire.CONTROL, agent.payload("kill-executor")))
    assert proc.wait(10) == -9


# A process whose command line names a Spark main class, with one child: a worker JVM
# over an executor JVM over a task, as far as the agent looks (command lines).
_PARENT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[2], *sys.argv[3:]])
time.sleep(60)
"""
_KILL_WORKER = (
    "from ftctl.spark import agent; agent.carry_out(agent.payload('kill-worker'))")


def test_kill_worker_kills_the_worker_and_executor_the_task_runs_under() -> None:
    worker = subprocess.Popen([sys.executable, "-c", _PARENT, agent.WORKER_CLASS, _PARENT,
                               agent.EXECUTOR_CLASS, _KILL_WORKER])  # fmt: skip
    try:
        assert worker.wait(20) == -9, "the worker JVM is killed"
        # The executor and the task died too (reparented: gone or a zombie, never left).
        assert _until(lambda: not [p for p in psutil.process_iter(["cmdline"])
                                   if _KILL_WORKER in (p.info["cmdline"] or [])
                                   and _status(p.pid) not in ("gone", psutil.STATUS_ZOMBIE)],
                      10)
    finally:
        worker.kill()
        worker.wait(10)


def test_kill_worker_outside_a_worker_kills_the_task_itself(task: Any) -> None:
    proc, conn = task
    wire.send(conn, (wire.CONTROL, agent.payload("kill-worker")))
    assert proc.wait(10) == -9


class _Agents:
    def __init__(self, running: bool = True) -> None:
        self.calls: list[tuple[str, str, float | None, float]] = []
        self.running = running

    def __call__(self, instance: str, op: str, seconds: float | None, factor: float) -> bool:
        self.calls.append((instance, op, seconds, factor))
        return self.running


def _ctx(agents: _Agents) -> HostFaultContext:
    # The task pid is this test's own: a fault that signalled it would end the test.
    return HostFaultContext(clock=lambda: 1.0, instance_ids=["src[0]", "count[0]"],
                            task_pids=lambda _i: os.getpid(), agent=agents)


def test_process_faults_on_master_go_through_the_agent_and_signal_nothing() -> None:
    agents = _Agents()
    ctx = _ctx(agents)
    records = [KillTask("count[0]").inject(ctx), KillExecutor("count[0]").inject(ctx),
               KillWorker("count[0]").inject(ctx),
               Pause("count[0]", duration=2.0).inject(ctx),
               Slow("count[0]", {"factor": 4.0}, duration=3.0).inject(ctx)]
    assert agents.calls == [("count[0]", "kill", None, 1.0),
                            ("count[0]", "kill-executor", None, 1.0),
                            ("count[0]", "kill-worker", None, 1.0),
                            ("count[0]", "pause", 2.0, 1.0), ("count[0]", "slow", 3.0, 4.0)]
    # Recorded (detections name the pid), not signalled: this process is still here.
    assert all(r.details == {"via": "agent"} and r.pids == [os.getpid()] for r in records)


def test_a_task_not_running_defers_the_fault() -> None:
    with pytest.raises(NotRunning):
        KillTask("count[0]").inject(_ctx(_Agents(running=False)))


def _schedule(*faults: PlannedFault) -> Schedule:
    return Schedule(list(faults), "s", 1, "chaos/s.yaml")


@pytest.mark.parametrize(("fault", "message"), [
    (PlannedFault(0, 0, "pause", "count[0]", at=1.0), "chaos/s.yaml: duration: pause on "
     "count[0] needs a duration with --master: the task's agent resumes it, the driver "
     "cannot reach it"),
    (PlannedFault(0, 0, "kill-worker", "rack=a", at=1.0), "kill-worker on rack=a needs "
     "process access to the workers"),
    (PlannedFault(0, 0, "restore-capacity", "random", at=1.0), "restore-capacity on random "
     "needs process access to the workers"),
])
def test_validate_refuses_what_the_agent_cannot_deliver(fault: PlannedFault,
                                                        message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_cluster(_schedule(fault), "spark://h:7077", [{}])
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_validate_takes_what_the_agent_delivers() -> None:
    check_cluster(_schedule(
        PlannedFault(0, 0, "kill-task", "count[0]", at=1.0),
        PlannedFault(1, 0, "kill-executor", "count[0]", at=2.0),
        PlannedFault(4, 0, "kill-worker", "count[0]", at=2.5),
        PlannedFault(2, 0, "pause", "count[0]", at=3.0, duration=1.0),
        PlannedFault(3, 0, "slow", "count[0]", at=4.0, duration=1.0, params={"factor": 2})),
        "spark://h:7077", [{}])


class _Workers:
    """A cluster of local processes as the fault context sees it: one worker, ``pid``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def workers(self, include_killed: bool = False) -> list[Any]:
        return []

    def worker_pids(self) -> dict[str, int]:
        return {"w0": self.pid}

    def kill_worker(self, which: str | int, sig: int = 9) -> Any:
        raise AssertionError("not in this test")

    def start_worker(self, labels: Any = None, *, wait: bool = True) -> Any:
        raise AssertionError("not in this test")


def test_a_local_pid_is_signalled_only_under_one_of_the_clusters_workers() -> None:
    worker = subprocess.Popen(["bash", "-c", "sleep 60 & wait"])
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        assert _until(lambda: psutil.Process(worker.pid).children(), 5)
        task = psutil.Process(worker.pid).children()[0].pid
        pids = {"count[0]": stranger.pid, "count[1]": task}
        ctx = HostFaultContext(clock=lambda: 1.0, instance_ids=list(pids),
                               task_pids=pids.get, cluster=_Workers(worker.pid))
        with pytest.raises(FaultError, match=f"pid {stranger.pid}, which is no process of "
                           "this run's cluster on this host: not signalled"):
            KillTask("count[0]").inject(ctx)
        assert stranger.poll() is None, "a process outside the cluster is never signalled"
        assert KillTask("count[1]").inject(ctx).pids == [task]
        # gone, or a zombie; read in one call, as the process may be reaped between two
        assert _until(lambda: _status(task) in ("gone", psutil.STATUS_ZOMBIE), 5)
    finally:
        for p in (worker, stranger):
            p.kill()
            p.wait(5)


def test_ftctl_validate_refuses_a_scenario_the_chosen_cluster_cannot_take(
        tmp_path: Path) -> None:  # fmt: skip
    from typer.testing import CliRunner

    from ftctl.cli import app

    scenario = tmp_path / "hang.yaml"
    scenario.write_text("name: hang\nfaults:\n  - {type: pause, at: 1.0, target: \"count[0]\"}\n")
    runner = CliRunner()
    assert runner.invoke(app, ["validate", str(scenario)]).exit_code == 0
    refused = runner.invoke(app, ["validate", str(scenario), "--master", "spark://h:7077"])
    assert refused.exit_code == 2
    assert refused.output.strip().splitlines() == [
        f"error: {scenario}: duration: pause on count[0] needs a duration with --master: "
        "the task's agent resumes it, the driver cannot reach it"]
    rack = str(ROOT / "chaos" / "rack-failure.yaml")
    assert "kill-group on rack=a needs process access to the workers" in runner.invoke(
        app, ["validate", rack, "--master", "spark://h:7077"]).output
    containers = str(ROOT / "chaos" / "container-faults.yaml")
    assert runner.invoke(app, ["validate", containers, "--backend", "local"]).exit_code == 2
    assert runner.invoke(app, ["validate", containers, "--backend", "docker"]).exit_code == 0
