"""Structured Streaming on a standalone cluster, without Spark: how each fault kind is
carried out with and without a cluster whose workers ftctl has, which workers a
``kill-group`` of ``rack=a`` strikes (the protocols' realization, on stand-in worker
processes), and ``compare`` handing its cluster to the engine."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from chaos.plan import from_kills, from_scenario
from ftctl.cli import app
from ftctl.cluster.abandoned import RUNS_DIR
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.engines.structured import cli, compare, driverproc
from ftctl.engines.structured.runner import EngineRequest
from ftctl.engines.structured.workers import WorkerFaults
from ftctl.runtime.graph import ExecutionGraph
from tests.cli_fuzz import one_line

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"
ORDER = ExecutionGraph(load_topology(WORDCOUNT)).order
RACKS = [{"rack": "a"}, {"rack": "a"}, {"rack": "b"}, {"rack": "b"}]


def _scenario(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nseed: 1\nfaults:\n" + body)
    return path


def _rack_failure(tmp_path: Path, window: float = 2.0, restore: str = "") -> Path:
    return _scenario(tmp_path, f"  - {{type: kill-group, at: 0.2, target: rack=a, "
                               f"window: {window}}}\n"
                               "  - {type: restore-capacity, at: 0.6, target: rack=a"
                               f"{restore}}}\n")


# ------------------------------------------------------------------ how each kind is carried out


def test_without_a_cluster_a_worker_fault_is_one_driver_kill_that_says_what_it_stands_for(
        tmp_path: Path) -> None:
    planned = from_scenario(Path(ROOT / "chaos" / "rack-failure.yaml"), ORDER, 25.0, None).faults
    faults = cli.from_planned(planned, "rack-failure.yaml")
    assert [(f.type, f.at, f.instead_of, f.planned) for f in faults] == [
        ("kill-driver", 5.0, "kill-group", None)]  # restore-capacity: nothing to restore
    # --kill --target worker: the protocols' schedule, each kill a driver kill here
    kills = cli.kills(2, "worker", 20.0, 1, instances=ORDER)
    assert [(f.type, f.instead_of) for f in kills] == [("kill-driver", "kill-worker")] * 2
    assert [f.instead_of for f in cli.kills(1, "executor", 20.0, 1)] == ["kill-executor"]
    assert [f.instead_of for f in cli.kills(1, "driver", 20.0, 1)] == [""]


def test_on_a_cluster_ftctl_started_worker_faults_ride_to_the_protocols_realization() -> None:
    planned = from_scenario(Path(ROOT / "chaos" / "rack-failure.yaml"), ORDER, 25.0, None).faults
    faults = cli.from_planned(planned, "rack-failure.yaml", cluster=True, workers=True)
    assert [(f.type, f.at) for f in faults] == [("kill-group", 5.0), ("restore-capacity", 10.0)]
    assert [f.planned for f in faults] == planned and not any(f.instead_of for f in faults)
    # --kill N --target worker: the schedule a protocol's chaos run gets, restores included
    kills = cli.kills(2, "worker", 20.0, 1, cluster=True, instances=ORDER, workers=True)
    assert [f.planned for f in kills] == sorted(from_kills(2, "worker", ORDER, 20.0, 1).faults,
                                                key=lambda p: p.at or 0.0)
    assert sorted(f.type for f in kills) == ["kill-worker", "kill-worker", "restore-capacity",
                                             "restore-capacity"]
    # the engine's own kinds stay its own on a cluster
    own = cli.from_planned(from_kills(1, "executor", ORDER, 20.0, 1).faults, "x",
                           cluster=True, workers=True)
    assert [(f.type, f.planned) for f in own] == [("kill-executor", None)]


def test_worker_faults_on_a_cluster_ftctl_has_not_are_refused_in_one_line(
        tmp_path: Path) -> None:
    planned = from_scenario(Path(ROOT / "chaos" / "rack-failure.yaml"), ORDER, 25.0, None).faults
    with pytest.raises(ConfigError, match="kill-group on rack=a needs the workers of a "
                                          "cluster ftctl started"):
        cli.from_planned(planned, "rack-failure.yaml", cluster=True)
    container = from_scenario(_scenario(tmp_path, "  - {type: container-kill, at: 1.0, "
                                                  "target: rack=a}\n"), ORDER, 10.0, None)
    with pytest.raises(ConfigError, match="container-kill needs the docker backend"):
        cli.from_planned(container.faults, "s.yaml", cluster=True, workers=True)


def test_chaos_on_a_master_ftctl_did_not_start_refuses_the_rack_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FTCTL_STATE_DIR", str(tmp_path / "no-cluster"))
    res = CliRunner().invoke(app, [
        "chaos", str(WORDCOUNT), "-p", "structured-streaming", "--scenario",
        str(ROOT / "chaos" / "rack-failure.yaml"), "--master", "spark://127.0.0.1:1"])
    assert res.exit_code == 2, res.output
    one_line(res.output, "rack-failure.yaml")
    assert "needs the workers of a cluster ftctl started" in res.output


def test_an_engine_on_a_cluster_spreads_one_executor_per_worker() -> None:
    spread = driverproc.conf("spark://h:1", "r", executors=4)
    assert (spread["spark.executor.cores"], spread["spark.cores.max"]) == ("1", "4")
    local = driverproc.conf("local[2]", "r")
    assert "spark.executor.cores" not in local and local["spark.cores.max"] == "2"


# ------------------------------------------------------------------ the realization, on stand-ins


@dataclass
class _Worker:
    name: str
    pid: int
    labels: dict[str, str]
    proc: subprocess.Popen[bytes]
    killed: bool = False


@dataclass
class FakeCluster:
    """Stand-in workers: a shell each, whose child ``sleep`` stands for the executor it
    runs (a descendant, as a standalone worker's executor is). Implements what the
    protocols' faults use of ``LocalCluster``."""

    labels: list[dict[str, str]]
    master_url: str = "spark://fake:7077"
    members: list[_Worker] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    started: list[dict[str, str]] = field(default_factory=list)
    ups: int = 0
    downs: int = 0

    def __post_init__(self) -> None:
        for labels in self.labels:
            self._spawn(labels)

    def _spawn(self, labels: dict[str, str]) -> _Worker:
        proc = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
        w = _Worker(f"w{len(self.members)}", proc.pid, dict(labels), proc)
        self.members.append(w)
        return w

    def executor(self, name: str) -> psutil.Process:
        w = next(w for w in self.members if w.name == name)
        end = time.monotonic() + 5
        while not (kids := psutil.Process(w.pid).children()) and time.monotonic() < end:
            time.sleep(0.01)
        return kids[0]

    def workers(self, include_killed: bool = False) -> list[_Worker]:
        return [w for w in self.members if include_killed or not w.killed]

    def worker_pids(self) -> dict[str, int]:
        return {w.name: w.pid for w in self.members if not w.killed}

    def kill_worker(self, which: str | int, sig: int = 9) -> _Worker:
        w = next(w for w in self.members if w.name == which)
        w.killed = True
        self.killed.append(w.name)
        return w

    def start_worker(self, labels: Any = None, *, wait: bool = True) -> _Worker:
        self.started.append(dict(labels or {}))
        return self._spawn(dict(labels or {}))

    def up(self) -> None:
        self.ups += 1

    def down(self) -> None:
        self.downs += 1
        self.stop()

    def stop(self) -> None:
        for w in self.members:
            with contextlib.suppress(psutil.Error):
                for kid in psutil.Process(w.pid).children(recursive=True):
                    kid.kill()
            w.proc.kill()
            w.proc.wait()


@pytest.fixture
def racks() -> Iterator[FakeCluster]:
    cluster = FakeCluster(RACKS)
    try:
        yield cluster
    finally:
        cluster.stop()


class _Events:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def clock(self) -> float:
        return time.monotonic() - self.t0

    def __call__(self, kind: str, **data: Any) -> None:
        self.seen.append((kind, data))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [d for k, d in self.seen if k == kind]


def _strike(faults: list[Any], cluster: FakeCluster, events: _Events,
            app: str | None = "app-1", wait: float = 3.0) -> WorkerFaults:
    strikes = WorkerFaults([f.planned for f in faults], cluster, ORDER, lambda: app,
                           events.clock, events)
    strikes.start()
    end = time.monotonic() + wait
    while time.monotonic() < end and len(events.of("fault-injected")) < len(faults):
        time.sleep(0.02)
    strikes.stop()
    return strikes


def test_a_rack_failure_strikes_exactly_the_rack_a_workers_and_restores_them(
        tmp_path: Path, racks: FakeCluster) -> None:
    planned = from_scenario(_rack_failure(tmp_path, window=0.3), ORDER, 10.0, None).faults
    faults = cli.from_planned(planned, "s.yaml", cluster=True, workers=True)
    events = _Events()
    strikes = _strike(faults, racks, events)
    assert sorted(racks.killed) == ["w0", "w1"]  # rack=a, never rack=b
    group, restore = events.of("fault-injected")
    assert group["type"] == "kill-group" and group["resolved"] == "rack=a"
    kills = group["details"]["kills"]
    assert sorted(k["worker"] for k in kills) == ["w0", "w1"]
    assert all(0.0 <= k["offset"] <= 0.3 for k in kills)
    assert group["at"] >= 0.2  # offsets from the start, as the engine's own faults
    assert restore["type"] == "restore-capacity"
    assert racks.started == [{"rack": "a"}, {"rack": "a"}]
    assert sorted(s["replaces"] for s in restore["details"]["started"]) == ["w0", "w1"]
    assert strikes.errors == []


def test_a_rack_b_failure_spares_rack_a(tmp_path: Path, racks: FakeCluster) -> None:
    path = _scenario(tmp_path, "  - {type: kill-group, at: 0.1, target: rack=b, window: 0.1}\n")
    faults = cli.from_planned(from_scenario(path, ORDER, 10.0, None).faults, "s.yaml",
                              cluster=True, workers=True)
    _strike(faults, racks, _Events())
    assert sorted(racks.killed) == ["w2", "w3"]


def test_a_worker_kill_aimed_at_an_instance_strikes_the_worker_of_its_executor(
        racks: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # the query's executors run on w1 and w3; instance i stands for executor i mod 2
    host = {racks.executor(w).pid: w for w in ("w1", "w3")}
    executors = sorted((psutil.Process(pid) for pid in host), key=lambda p: p.pid)
    monkeypatch.setattr(driverproc, "executors",
                        lambda app: executors if app == "app-1" else [])
    faults = cli.kills(1, "worker", 1.0, 1, cluster=True, instances=ORDER, workers=True)
    target = faults[0].planned.target
    expected = host[executors[ORDER.index(target) % 2].pid]
    events = _Events()
    _strike(faults[:1], racks, events)
    assert racks.killed == [expected], events.seen
    assert events.of("fault-injected")[0]["resolved"] == expected


def test_a_worker_kill_before_the_query_has_executors_waits_then_is_undelivered(
        racks: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driverproc, "executors", lambda app: [])
    faults = cli.kills(1, "worker", 0.5, 1, cluster=True, instances=ORDER, workers=True)
    events = _Events()
    strikes = WorkerFaults([faults[0].planned], racks, ORDER, lambda: None, events.clock,
                           events)
    strikes.nemesis.defer_limit = 0.3
    strikes.start()
    end = time.monotonic() + 3
    while not strikes.errors and time.monotonic() < end:
        time.sleep(0.02)
    strikes.stop()
    assert racks.killed == [] and events.of("fault-deferred")
    assert len(strikes.errors) == 1 and strikes.errors[0].startswith("kill-worker")


# ------------------------------------------------------------------ compare hands its cluster over


def _compare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: compare.ClusterShape,
             repeat: int) -> list[EngineRequest]:
    seen: list[EngineRequest] = []

    def execute(req: EngineRequest) -> int:
        seen.append(req)
        return 0  # no summary: the run counts as not finished, which is fine here

    monkeypatch.setattr(compare, "execute", execute)
    planned = from_scenario(ROOT / "chaos" / "rack-failure.yaml", ORDER, 25.0, None).faults
    runs, failed = compare.engine_runs(load_topology(WORDCOUNT), planned, "rack-failure.yaml",
                                       repeat, tmp_path, 60.0, 25.0, cli.engine_params(None),
                                       lambda _m: None, shape)
    assert runs == [] and len(failed) == repeat
    return seen


def test_compare_runs_the_engine_on_a_fresh_cluster_of_the_protocols_shape_per_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[FakeCluster] = []

    def start() -> FakeCluster:
        made.append(FakeCluster(RACKS, master_url=f"spark://fake:{7000 + len(made)}"))
        return made[-1]

    seen = _compare(tmp_path, monkeypatch, compare.ClusterShape(None, start, True), 2)
    assert [(c.ups, c.downs) for c in made] == [(1, 1), (1, 1)]
    assert [r.master for r in seen] == [c.master_url for c in made]
    assert [r.cluster for r in seen] == made
    assert [f.type for f in seen[0].faults] == ["kill-group", "restore-capacity"]
    assert all(f.planned is not None for f in seen[0].faults)


def test_compare_shares_one_cluster_across_the_engine_runs_when_no_worker_dies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[FakeCluster] = []

    def start() -> FakeCluster:
        made.append(FakeCluster([{}, {}]))
        return made[-1]

    seen = _compare(tmp_path, monkeypatch, compare.ClusterShape(None, start, False), 2)
    assert len(made) == 1 and (made[0].ups, made[0].downs) == (1, 1)
    assert [r.cluster for r in seen] == [made[0], made[0]]


def test_compare_shape_is_the_protocols_cluster(tmp_path: Path) -> None:
    from ftctl.compare.runner import CompareRequest

    req = CompareRequest(load_topology(WORDCOUNT), None, [], {}, 1, 4,  # type: ignore[arg-type]
                         ["rack=a", "rack=a", "rack=b", "rack=b"], tmp_path, 60.0,
                         state_dir=tmp_path / "state")
    shape = compare.cluster_shape(req, True)
    cluster = shape.start()
    assert shape.master is None and shape.fresh_per_run
    assert cluster.n_workers == 4 and [dict(x) for x in cluster.labels] == RACKS
    assert cluster.owned and cluster.state_dir == (tmp_path / "state" /
                                                   "structured-streaming").resolve()


def test_compare_refuses_what_the_engine_cannot_carry_out_before_any_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FTCTL_STATE_DIR", str(tmp_path / "no-cluster"))
    schedule = from_kills(1, "worker", ORDER, 20.0, 1)
    with pytest.raises(ConfigError, match="needs the workers of a cluster ftctl started"):
        compare.check_engine_cluster(schedule, "spark://127.0.0.1:1", "local")
    compare.check_engine_cluster(schedule, None, "local")  # compare starts the cluster
    compare.check_engine_cluster(schedule, None, "docker")  # ...in containers
    containers = from_kills(1, "container", ORDER, 20.0, 1)
    with pytest.raises(ConfigError, match=r"container-kill needs the docker backend"):
        compare.check_engine_cluster(containers, None, "local")
    compare.check_engine_cluster(containers, None, "docker")
    kills = from_kills(1, "task", ORDER, 20.0, 1)
    compare.check_engine_cluster(kills, "spark://127.0.0.1:1", "local")


# ------------------------------------------------------------------ chaos starts its own cluster


@dataclass
class _Started:
    """What ``ftctl chaos`` handed the engine, and the clusters it made and stopped."""

    shapes: list[dict[str, Any]] = field(default_factory=list)
    clusters: list[FakeCluster] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    state_dirs: list[Path] = field(default_factory=list)


@pytest.fixture
def own_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Started]:
    from ftctl.engines.structured import cluster as engine_cluster

    seen = _Started()

    def starter(backend: str, workers: int, cores: int | None, labels: list[str] | None,
                results: Path, state_dir: Path) -> Any:
        seen.shapes.append({"backend": backend, "workers": workers, "cores": cores,
                            "labels": labels})
        seen.state_dirs.append(state_dir)

        def start() -> FakeCluster:
            seen.clusters.append(FakeCluster([{}] * workers, master_url="spark://own:7077"))
            return seen.clusters[-1]
        return start

    def run(topology: Any, mutant: Any, params: Any, **kw: Any) -> int:
        seen.runs.append(kw)
        return 0

    monkeypatch.setattr(engine_cluster, "starter", starter)
    monkeypatch.setattr(cli, "run", run)
    yield seen
    for c in seen.clusters:
        for w in c.members:
            with contextlib.suppress(ProcessLookupError):
                w.proc.kill()
            w.proc.wait()


def _chaos(*args: str) -> Any:
    return CliRunner().invoke(app, ["chaos", str(WORDCOUNT), "-p", "structured-streaming",
                                    *args])


def test_chaos_starts_a_cluster_for_worker_faults_and_stops_it_after(
        tmp_path: Path, own_cluster: _Started) -> None:
    res = _chaos("--scenario", str(ROOT / "chaos" / "rack-failure.yaml"), "--workers", "4",
                 "--label", "rack=a", "--label", "rack=a", "--label", "rack=b",
                 "--label", "rack=b", "--cores", "3", "--results", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert own_cluster.shapes == [{"backend": "local", "workers": 4, "cores": 3,
                                   "labels": ["rack=a", "rack=a", "rack=b", "rack=b"]}]
    [made] = own_cluster.clusters
    assert (made.ups, made.downs) == (1, 1)
    [run] = own_cluster.runs
    assert run["master"] == "spark://own:7077" and run["cluster"] is made
    # its state where ``ftctl cluster prune`` looks for abandoned clusters
    [state] = own_cluster.state_dirs
    assert state.parent == RUNS_DIR.resolve()
    assert [(f.type, f.planned is not None) for f in run["faults"]] == [
        ("kill-group", True), ("restore-capacity", True)]


def test_chaos_keeps_local_mode_when_nothing_needs_a_cluster(
        tmp_path: Path, own_cluster: _Started) -> None:
    res = _chaos("--kill", "1", "--target", "task", "--results", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert own_cluster.clusters == []
    assert [(r["master"], r["cluster"]) for r in own_cluster.runs] == [(None, None)]


@pytest.mark.parametrize("target", ["worker", "executor", "container"])
def test_chaos_kill_target_on_a_cluster_gets_one_of_its_own(
        tmp_path: Path, own_cluster: _Started, target: str) -> None:
    backend = "docker" if target == "container" else "local"
    res = _chaos("--kill", "1", "--target", target, "--backend", backend,
                 "--results", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert [s["backend"] for s in own_cluster.shapes] == [backend]
    [run] = own_cluster.runs
    kinds = {f.type: f.planned is not None for f in run["faults"]}
    wanted = {"worker": {"kill-worker": True, "restore-capacity": True},
              "executor": {"kill-executor": False},
              "container": {"container-kill": True, "restore-capacity": True}}[target]
    assert kinds == wanted and not any(f.instead_of for f in run["faults"])


def test_chaos_refuses_container_faults_on_process_workers_and_unknown_labels(
        tmp_path: Path, own_cluster: _Started) -> None:
    res = _chaos("--kill", "1", "--target", "container", "--results", str(tmp_path))
    assert res.exit_code == 2, res.output
    one_line(res.output, "container-kill needs the docker backend")
    res = _chaos("--scenario", str(ROOT / "chaos" / "rack-failure.yaml"),
                 "--results", str(tmp_path))  # no worker has rack=a
    assert res.exit_code == 2, res.output
    one_line(res.output, "rack-failure.yaml")
    assert "no worker has labels rack=a" in res.output
    assert own_cluster.clusters == [] and own_cluster.runs == []


def test_chaos_on_master_local_carries_worker_faults_out_as_driver_kills(
        tmp_path: Path, own_cluster: _Started) -> None:
    """``--master local[2]`` is local mode, not a cluster ftctl lacks the workers of: a
    worker kill there is a driver kill that says what it stands for, not a refusal."""
    res = _chaos("--kill", "1", "--target", "worker", "--master", "local[2]",
                 "--results", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert own_cluster.clusters == []
    [run] = own_cluster.runs
    assert run["master"] == "local[2]" and run["cluster"] is None
    assert [(f.type, f.instead_of) for f in run["faults"]] == [("kill-driver", "kill-worker")]
