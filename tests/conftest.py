from __future__ import annotations

import contextlib
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ftctl.config.load import load_topology
from ftctl.config.topology import Topology

if TYPE_CHECKING:
    from ftctl.cluster import LocalCluster
    from ftctl.spark.task import InstanceTask

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = ROOT / "topologies"


@pytest.fixture
def topology_file() -> object:
    def get(name: str) -> Path:
        return TOPOLOGIES / f"{name}.yaml"

    return get


def load(name: str) -> Topology:
    return load_topology(TOPOLOGIES / f"{name}.yaml")


@contextlib.contextmanager
def spark_task(topology: str, instance: str, protocol: str) -> Iterator[InstanceTask]:
    """A Spark host's task for ``instance``, without Spark: registered with a driver's
    control server of its own, closed on exit."""
    from ftctl.runtime.graph import ExecutionGraph
    from ftctl.spark import wire
    from ftctl.spark.driver import ControlServer
    from ftctl.spark.task import InstanceTask, TaskPayload
    from protocols.contract.events import Started
    from protocols.contract.names import InstanceId

    token = wire.new_token()
    server = ControlServer(token, queue.Queue(), wire.HOST, lambda _peer: None)
    graph = ExecutionGraph(load(topology))
    t = InstanceTask(TaskPayload(
        run_id="r", instance=instance, inc=0, protocol=protocol, params={},
        topology=graph.topology.model_dump(by_alias=True),
        started=Started(InstanceId(instance), 0, "initial"), coordinator=server.address,
        token=token))
    try:
        yield t
    finally:
        t._close()
        server.close()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One warm standalone cluster for every Spark test that runs against ``--master``:
    starting one costs seconds of a 2-core machine, and the tests neither kill its workers
    nor change its shape. Three workers, so replica-ring's rings go one replica per worker;
    24 cores each, so the sharder's 23 instances have room for their replacements while the
    old tasks are cancelled. Tests that kill workers start clusters of their own."""
    from ftctl.cluster import LocalCluster

    with LocalCluster(workers=3, cores=24, memory="2g",
                      state_dir=tmp_path_factory.mktemp("shared-cluster")) as c:
        yield c


CLUSTER_MARKERS = ("spark", "docker")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``-n 2 --dist loadgroup`` (the default options) every test of a module that
    starts a cluster runs on one worker, in file order, and the other worker takes the
    rest: one warm Spark cluster for the session, never two clusters (or a cluster and
    Docker containers) at once on a 2-core machine. A whole module goes, not only its
    marked tests, because its other tests start and watch processes of their own."""
    modules = {item.module.__name__ for item in items
               if isinstance(item, pytest.Function)
               and any(item.get_closest_marker(m) for m in CLUSTER_MARKERS)}
    for item in items:
        if isinstance(item, pytest.Function) and item.module.__name__ in modules:
            item.add_marker(pytest.mark.xdist_group("cluster"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``docker`` test is skipped, saying why, when no engine answers; asked only when
    one is about to run (before its fixtures, which would start containers), so
    ``-m browser`` or ``-m sim`` report no Docker skips."""
    if item.get_closest_marker("docker") is not None:
        from tests.dockerkit import skip_unless_engine

        skip_unless_engine()
