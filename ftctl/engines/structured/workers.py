"""Worker faults of a Structured Streaming run on a standalone cluster ftctl started.

``kill-worker``, ``kill-group`` and ``restore-capacity`` strike the cluster's workers
through the protocols' own realizations:
the ``chaos.faults`` classes, run by a ``chaos.nemesis.Nemesis`` against a
``chaos.hostctx.HostFaultContext`` on the cluster, with the same history records
(``fault-injected`` with its kills, ``fault-step``, ``fault-error``). The driver is not
touched: Spark loses the executors those workers ran and reschedules their tasks.

The engine runs no task per operator instance, so a fault aimed at an instance
(``kill-worker`` on ``count[0]``, ``--kill N --target worker``) strikes the worker running
one of the query's executors: the instance's position in the plan's order, modulo the
executors running now (by pid). A label selector (``rack=a``) means the workers that carry
the labels, as for a protocol.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from chaos.hostctx import ClusterBackend, HostFaultContext
from chaos.nemesis import Nemesis
from chaos.schedule import PlannedFault
from ftctl.cluster.errors import ClusterError
from ftctl.cluster.local import LocalCluster
from ftctl.engines.structured import driverproc

# What the cluster's workers take (``kill-executor`` is the engine's own: it finds the
# query's executors by application id, on a cluster ftctl did not start too).
ON_WORKERS = ("kill-worker", "kill-group", "restore-capacity")


def attached(master: str) -> LocalCluster | None:
    """The cluster ``ftctl cluster up`` recorded (the default state dir), if ``master``
    is its URL: ftctl has its workers' processes. None for any other cluster."""
    from ftctl.backends import attach_cluster

    try:
        cluster = attach_cluster()
    except (ClusterError, OSError, ValueError):
        return None
    return cluster if cluster.master_url == master else None


def live_workers(cluster: ClusterBackend) -> int:
    return len(cluster.worker_pids())


class WorkerFaults:
    """The run's worker faults, struck at offsets from ``start()`` (when the feed starts).
    ``errors`` collects the faults that could not be delivered (``fault-error``)."""

    def __init__(self, planned: Sequence[PlannedFault], cluster: ClusterBackend,
                 instances: Sequence[str], app: Callable[[], str | None],
                 clock: Callable[[], float], on_event: Callable[..., None]) -> None:
        self.instances = list(instances)
        self.app = app
        self.errors: list[str] = []
        self._on_event = on_event
        ctx = HostFaultContext(clock=clock, instance_ids=self.instances,
                               task_pids=self.executor_of, cluster=cluster)
        self.nemesis = Nemesis(list(planned), ctx, self._event, name="workers")

    def executor_of(self, instance: str) -> int | None:
        """The pid of the executor that stands for ``instance`` (None: none running)."""
        app = self.app()
        if app is None or instance not in self.instances:
            return None
        running = sorted(p.pid for p in driverproc.executors(app))
        if not running:
            return None
        return running[self.instances.index(instance) % len(running)]

    def _event(self, kind: str, **data: Any) -> None:
        if kind == "fault-error":
            self.errors.append(f"{data.get('type')}: {data.get('error')}")
        self._on_event(kind, **data)

    def start(self) -> None:
        self.nemesis.start()

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # stopping must not mask the run's own error
            self.nemesis.stop()
