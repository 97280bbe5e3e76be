"""Choosing a cluster backend by name: ``make_cluster("docker", workers=2, ...)``.

Both backends have LocalCluster's public API (DockerCluster is a subclass), so callers
type against LocalCluster. Here, above both packages, because ``ftctl.docker`` builds on
``ftctl.cluster`` and not the other way round. The docker backend is imported only when
asked for: the local one must not need the Docker SDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from ftctl.cluster.errors import ClusterUsageError
from ftctl.cluster.local import LocalCluster
from ftctl.cluster.state import default_state_dir, is_docker_state_dir

Backend = Literal["local", "docker"]
BACKENDS: tuple[str, ...] = ("local", "docker")
# Options only the docker backend understands; a local cluster ignores them, so callers
# (ftctl run) can pass one set of options whatever the backend.
DOCKER_OPTIONS = frozenset({"image", "mounts", "cpus", "mem_limit", "run_id", "own_pids",
                            "client"})


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        expected = ", ".join(BACKENDS)
        raise ClusterUsageError(f"unknown backend {backend!r}: expected one of {expected}")
    return backend


def make_cluster(backend: str = "local", **opts: Any) -> LocalCluster:
    """A not-yet-started cluster of ``backend`` with LocalCluster's constructor options."""
    if check_backend(backend) == "docker":
        from ftctl.docker.cluster import DockerCluster

        return DockerCluster(**opts)
    return LocalCluster(**{k: v for k, v in opts.items() if k not in DOCKER_OPTIONS})


def detect_backend(state_dir: Path | str | None = None) -> str:
    """The backend whose cluster is recorded in ``state_dir`` (local when unsure)."""
    directory = Path(state_dir).resolve() if state_dir else default_state_dir()
    return "docker" if is_docker_state_dir(directory) else "local"


def attach_cluster(state_dir: Path | str | None = None, backend: str | None = None) -> LocalCluster:
    """A handle on the running cluster in ``state_dir``; backend detected unless given."""
    chosen = check_backend(backend) if backend else detect_backend(state_dir)
    if chosen == "docker":
        from ftctl.docker.cluster import DockerCluster

        return DockerCluster.attach(state_dir)
    return LocalCluster.attach(state_dir)
