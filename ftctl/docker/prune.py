"""Finding and removing containers that a crashed ftctl left running.

A per-run cluster (``ftctl run --backend docker``) records its owner process in
``docker.json``; if that process is gone, nobody will ever call ``down`` for it. A
cluster whose state dir no longer describes it (state removed, or a newer cluster in the
same dir) is equally abandoned. A cluster started with ``cluster up`` has no owner and is
left alone unless ``include_live`` is given.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftctl.cluster import process
from ftctl.cluster.state import load_state, remove_state
from ftctl.docker.engine import connect
from ftctl.docker.meta import (
    LABEL_CLUSTER,
    LABEL_RUN,
    LABEL_STATE_DIR,
    DockerMeta,
    load_meta,
    remove_meta,
)


@dataclass
class PrunedCluster:
    cluster_key: str
    run_id: str
    state_dir: str
    reason: str
    containers: list[str] = field(default_factory=list)


def abandoned_reason(key: str, run_id: str, state_dir: Path) -> str | None:
    """Why the cluster with these labels is abandoned, or None if someone still owns it."""
    meta: DockerMeta | None = load_meta(state_dir)
    if meta is None or load_state(state_dir) is None:
        return "its state dir no longer records it"
    if meta.cluster_key != key or meta.run_id != run_id:
        return "a newer cluster uses its state dir"
    if meta.owner_pid is not None and (
        process.same_process(meta.owner_pid, meta.owner_create_time) is None
    ):
        return f"its ftctl process ({meta.owner_pid}) is gone"
    return None


def abandoned_containers(include_live: bool = False, client: Any = None
                         ) -> list[tuple[PrunedCluster, list[Any]]]:
    """Every abandoned ftctl cluster's containers (all clusters with ``include_live``)."""
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for container in client.containers.list(all=True, filters={"label": LABEL_CLUSTER}):
        labels = container.labels
        group = (labels[LABEL_CLUSTER], labels.get(LABEL_RUN, ""),
                 labels.get(LABEL_STATE_DIR, ""))  # fmt: skip
        groups[group].append(container)
    found = []
    for (key, run_id, state_dir), containers in sorted(groups.items()):
        reason = abandoned_reason(key, run_id, Path(state_dir))
        if reason is None and not include_live:
            continue
        found.append((PrunedCluster(key, run_id, state_dir, reason or "asked to (--all)",
                                    sorted(c.name for c in containers)), containers))
    return found


def find_abandoned_containers(client: Any = None) -> list[PrunedCluster]:
    """What ``prune_containers`` would remove, removing nothing."""
    with _client(client) as engine:
        return [cluster for cluster, _ in abandoned_containers(client=engine)]


def prune_containers(include_live: bool = False, client: Any = None) -> list[PrunedCluster]:
    """Remove every abandoned ftctl container (all of them with ``include_live``)."""
    import docker.errors

    with _client(client) as engine:
        pruned: list[PrunedCluster] = []
        for cluster, containers in abandoned_containers(include_live, engine):
            for container in containers:
                with contextlib.suppress(docker.errors.NotFound):
                    container.remove(force=True)
            state_dir = Path(cluster.state_dir)
            meta = load_meta(state_dir)
            if meta is not None and (meta.cluster_key, meta.run_id) == (cluster.cluster_key,
                                                                        cluster.run_id):
                remove_state(state_dir)  # its record would point at removed containers
                remove_meta(state_dir)
            pruned.append(cluster)
        return pruned


@contextlib.contextmanager
def _client(client: Any) -> Iterator[Any]:
    """The given client, or a new one closed afterwards."""
    if client is not None:
        yield client
        return
    owned = connect()
    try:
        yield owned
    finally:
        owned.close()
