"""Container faults without an engine: against the fake context (containers played by
stand-in processes), their planning, the host context's refusal on a process backend, and
`ftctl chaos` refusing them (exit 2, one line) before a local run starts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from chaos.containers import ContainerKill, ContainerPause, ContainerRestart, ContainerStop
from chaos.context import Ledger
from chaos.faults import FaultError, KillWorker, RestoreCapacity
from chaos.hostctx import NOT_CONTAINERS, HostFaultContext
from chaos.plan import Schedule, check_cluster, from_kills
from chaos.schedule import plan
from ftctl.config.errors import ConfigError
from ftctl.config.scenario import Scenario
from tests.fakectx import FakeContext

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ["lines[0]", "split[0]", "count[0]", "out[0]"]


@pytest.fixture
def ctx() -> Iterator[FakeContext]:
    fake = FakeContext()
    try:
        fake.add_worker({"rack": "a"})  # worker-0
        fake.add_worker({"rack": "b"})  # worker-1
        yield fake
    finally:
        fake.close()


def _status(pid: int) -> str:
    return str(psutil.Process(pid).status())


def test_container_kill_by_name_is_lost_capacity_for_restore(ctx: FakeContext) -> None:
    ledger = Ledger()
    record = ContainerKill("worker=worker-1", ledger=ledger).inject(ctx)
    assert record.target == "worker-1" and record.details["action"] == "kill"
    assert ctx.container_calls == [("worker-1", "kill", None)]
    assert [w.id for w in ctx.workers()] == ["worker-0"]
    RestoreCapacity("random", ledger=ledger).inject(ctx)
    assert [dict(w.labels) for w in ctx.workers()] == [{"rack": "a"}, {"rack": "b"}]


def test_container_pause_freezes_until_healed(ctx: FakeContext) -> None:
    pause = ContainerPause("rack=a", duration=1.0)
    record = pause.inject(ctx)
    pid = record.pids[0]
    assert _status(pid) == psutil.STATUS_STOPPED
    pause.heal(ctx)
    pause.heal(ctx)  # idempotent: unpaused once
    assert _status(pid) != psutil.STATUS_STOPPED
    assert [c[1] for c in ctx.container_calls] == ["pause", "unpause"]


def test_container_stop_with_a_duration_starts_it_again(ctx: FakeContext) -> None:
    ledger = Ledger()
    stop = ContainerStop("rack=b", {"timeout": 0}, duration=1.0, ledger=ledger)
    stop.inject(ctx)
    assert ctx.container_calls == [("worker-1", "stop", 0.0)]
    assert "worker-1" not in {w.id for w in ctx.workers()}
    stop.heal(ctx)
    assert "worker-1" in {w.id for w in ctx.workers()} and ledger.lost == []


def test_container_stop_without_a_duration_is_lost_capacity(ctx: FakeContext) -> None:
    ledger = Ledger()
    stop = ContainerStop("rack=b", ledger=ledger)
    stop.inject(ctx)
    stop.heal(ctx)  # the end of the run: nothing to start
    assert [w.id for w in ledger.lost] == ["worker-1"]
    assert [c[1] for c in ctx.container_calls] == ["stop"]


def test_container_restart_and_random_picks_are_seeded(ctx: FakeContext) -> None:
    picks = {ContainerRestart("random", seed=s).inject(ctx).target for s in range(12)}
    assert picks == {"worker-0", "worker-1"}
    before = {w.id: w.pid for w in ctx.workers()}
    record = ContainerRestart("random", {"timeout": 3}, seed=5).inject(ctx)
    assert ctx.container_calls[-1] == (record.target, "restart", 3.0)
    assert {w.id: w.pid for w in ctx.workers()}[record.target] != before[record.target]


def test_heal_of_a_container_killed_meanwhile_reports_and_goes_on(ctx: FakeContext) -> None:
    steps: list[tuple[str, dict[str, Any]]] = []
    pause = ContainerPause("rack=a", on_step=lambda k, d: steps.append((k, d)))
    pause.inject(ctx)
    ContainerKill("rack=a").inject(ctx)  # the engine would refuse to unpause it now
    pause.heal(ctx)
    assert steps and steps[0][0] == "heal-failed" and steps[0][1]["worker"] == "worker-0"


def test_plan_keeps_random_for_container_faults_and_resolves_operators() -> None:
    sc = Scenario.model_validate({"name": "t", "faults": [
        {"type": "container-kill", "at": 1, "target": "random"},
        {"type": "container-pause", "at": 2, "target": "count", "duration": 1},
        {"type": "container-stop", "at": 3, "target": "worker=w1"},
    ]})  # fmt: skip
    targets = [p.target for p in plan(sc, INSTANCES, 10.0)]
    assert targets == ["random", "count[0]", "worker=w1"]


# --------------------------------------------------------------------------- host context


class _ProcessCluster:
    """The backend surface of LocalCluster: no container methods."""

    def __init__(self, ctx: FakeContext) -> None:
        self.ctx = ctx
        worker = ctx.live_workers["worker-0"]
        self.recorded = [SimpleNamespace(name="w0", pid=worker.pid, labels={"rack": "a"},
                                         killed=False)]  # fmt: skip

    def workers(self, include_killed: bool = False) -> list[SimpleNamespace]:
        return list(self.recorded)

    def worker_pids(self) -> dict[str, int]:
        return {w.name: w.pid for w in self.recorded}

    def kill_worker(self, which: str | int, sig: int = 9) -> SimpleNamespace:
        return self.recorded[0]

    def start_worker(self, labels: object = None, *, wait: bool = True) -> SimpleNamespace:
        return self.recorded[0]


class _ContainerCluster(_ProcessCluster):
    """Adds DockerCluster's container methods; records what was asked."""

    def __init__(self, ctx: FakeContext) -> None:
        super().__init__(ctx)
        self.calls: list[tuple[str, Any]] = []

    def _call(self, what: str, which: str | int, arg: Any = None) -> SimpleNamespace:
        from ftctl.cluster.errors import ClusterUsageError

        if which != "w0":
            raise ClusterUsageError(f"no worker {which!r} in this cluster")
        self.calls.append((what, arg))
        return self.recorded[0]

    def stop_worker(self, which: str | int, timeout: float | None = None) -> SimpleNamespace:
        return self._call("stop", which, timeout)

    def restart_container(self, which: str | int, wait: bool = False) -> SimpleNamespace:
        return self._call("start", which, wait)

    def restart_worker(self, which: str | int, timeout: float | None = None,
                       wait: bool = False) -> SimpleNamespace:
        return self._call("restart", which, (timeout, wait))

    def pause_worker(self, which: str | int) -> SimpleNamespace:
        return self._call("pause", which)

    def unpause_worker(self, which: str | int) -> SimpleNamespace:
        return self._call("unpause", which)


def _host(ctx: FakeContext, cluster: Any) -> HostFaultContext:
    return HostFaultContext(clock=ctx.now, instance_ids=INSTANCES, task_pids=lambda _i: None,
                            cluster=cluster)  # fmt: skip


def test_host_context_refuses_container_faults_on_processes(ctx: FakeContext) -> None:
    host = _host(ctx, _ProcessCluster(ctx))
    with pytest.raises(FaultError, match="docker backend") as info:
        ContainerPause("rack=a").inject(host)
    assert str(info.value) == NOT_CONTAINERS
    assert KillWorker("rack=a").inject(host).target == "w0"  # process faults still work


def test_host_context_drives_container_methods(ctx: FakeContext) -> None:
    cluster = _ContainerCluster(ctx)
    host = _host(ctx, cluster)
    pause = ContainerPause("worker=w0", duration=1.0)
    pause.inject(host)
    pause.heal(host)
    ContainerStop("rack=a", {"timeout": 4}, duration=1.0).inject(host)
    ContainerRestart("random", {"timeout": 0}).inject(host)
    assert cluster.calls == [("pause", None), ("unpause", None), ("stop", 4.0),
                             ("restart", (0.0, False))]
    with pytest.raises(FaultError, match="pause w7: no worker"):
        host.container("w7", "pause")


# --------------------------------------------------------------------------- before the run


def _schedule(*faults: dict[str, Any]) -> Schedule:
    sc = Scenario.model_validate({"name": "t", "faults": list(faults)})
    return Schedule(plan(sc, INSTANCES, 10.0), "t", 1, "s.yaml")


def test_check_cluster_wants_docker_for_container_faults() -> None:
    pause = _schedule({"type": "container-pause", "at": 1, "target": "random", "duration": 1})
    with pytest.raises(ConfigError, match="container-pause needs the docker backend"):
        check_cluster(pause, None, [{}, {}], "local")
    check_cluster(pause, None, [{}, {}], "docker")
    with pytest.raises(ConfigError, match="--master"):
        check_cluster(pause, "spark://127.0.0.1:7077", [{}, {}], "docker")
    kills = from_kills(2, "container", INSTANCES, 10.0, seed=1)
    assert [p.type for p in kills.faults] == ["container-kill"] * 2 + ["restore-capacity"] * 2
    with pytest.raises(ConfigError, match="docker backend"):
        check_cluster(kills, None, [{}, {}], "local")


def test_check_cluster_worker_names() -> None:
    labels = [{"rack": "a"}, {"rack": "b"}]
    ok = _schedule({"type": "container-kill", "at": 1, "target": "worker=w1,rack=b"},
                   {"type": "kill-worker", "at": 2, "target": "worker=w5"})  # restored later
    check_cluster(ok, None, labels, "docker")
    for target, message in (("worker=w1,rack=a", "no worker has labels"),
                            ("worker=node1", "named w0, w1")):
        bad = _schedule({"type": "container-kill", "at": 1, "target": target})
        with pytest.raises(ConfigError, match=message):
            check_cluster(bad, None, labels, "docker")


def test_chaos_refuses_container_faults_on_the_local_backend(tmp_path: Path) -> None:
    scenario = tmp_path / "pause.yaml"
    scenario.write_text("name: p\nfaults:\n  - type: container-pause\n    at: 1.0\n"
                        "    target: random\n    duration: 2.0\n")
    env = {**os.environ, "COLUMNS": "200"}
    for args in (["--kill", "1", "--target", "container"], ["--scenario", str(scenario)]):
        proc = subprocess.run(
            [sys.executable, "-m", "ftctl.cli", "chaos", str(ROOT / "topologies/wordcount.yaml"),
             *args, "--results", str(tmp_path / "r")],
            cwd=tmp_path, text=True, capture_output=True, timeout=120, env=env,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "needs the docker backend (--backend docker)" in lines[0]
        assert not (tmp_path / "r").exists()
