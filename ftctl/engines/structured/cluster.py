"""The standalone cluster a Structured Streaming run's faults strike.

In local mode (``local[N]``) the query's executors live inside its driver, so a fault on an
executor, a worker or a container could only be a driver kill. When a ``chaos`` schedule
strikes one of those and no ``--master`` is given, the run gets a cluster of its own,
started as a protocol's chaos run starts one (``--workers``, ``--label``, ``--cores``,
``--backend``) and stopped after it; ``compare`` starts one of the protocols' shape. The
faults then strike that cluster's workers and containers, and the driver lives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from chaos.hostctx import ContainerBackend
from ftctl.config.scenario import CONTAINER_FAULTS
from ftctl.engines import STRUCTURED
from ftctl.engines.structured.workers import ON_WORKERS

# What only a cluster has: the query's executors, its workers, their containers.
ON_CLUSTER = (*ON_WORKERS, *CONTAINER_FAULTS, "kill-executor")
# ``--kill N --target T``: the targets that strike a cluster.
CLUSTER_TARGETS = ("executor", "worker", "container")
DEFAULT_CORES = 2  # per worker: the query takes one single-core executor on each


def needs_cluster(planned: Sequence[Any]) -> bool:
    """True when a planned schedule strikes what only a cluster has."""
    return any(p.type in ON_CLUSTER for p in planned)


def has_containers(cluster: Any) -> bool:
    """True for a cluster whose workers are containers (the docker backend)."""
    return isinstance(cluster, ContainerBackend)


def starter(backend: str, workers: int, cores: int | None, labels: list[str] | None,
            results: Path, state_dir: Path) -> Callable[[], Any]:
    """A not-yet-started cluster for one run: in containers (``docker``) the run's folders
    (input, checkpoint location, sink store: all under ``results``) are mounted at the
    same path, so the executors read and write them as the driver does."""
    from ftctl.backends import make_cluster

    return lambda: make_cluster(backend, workers=workers, cores=cores or DEFAULT_CORES,
                                labels=labels, state_dir=state_dir,
                                mounts=[results.resolve()], owned=True)


@contextlib.contextmanager
def started(start: Callable[[], Any], say: Callable[[str], None]
            ) -> Iterator[tuple[str, Any]]:
    """(master URL, the cluster) for as long as the block runs; stopped after it, on an
    error or Ctrl-C too (an owned cluster's watchdog stops it if ftctl itself dies)."""
    cluster = start()
    try:
        say(f"starting a cluster for {STRUCTURED}")
        cluster.up()
        yield cluster.master_url, cluster
    finally:
        cluster.down()
