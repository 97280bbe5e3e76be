"""What the docker backend records beside ``cluster.json``: ``docker.json``.

``cluster.json`` has the same shape for both backends (pids are the host pids of the
containers' main processes), so status, chaos and other processes read it unchanged;
the docker-only facts (image, mounts, limits, and which process owns a per-run cluster)
live here. Its presence also tells ``cluster status``/``down`` which backend a state dir
belongs to.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ftctl.cluster.state import DOCKER_META_FILE
from ftctl.docker.cache import digest

META_FILE = DOCKER_META_FILE

# Container labels. ftctl.cluster finds every container of a state dir (down, prune);
# ftctl.run groups the containers of one run or `cluster up`.
LABEL_CLUSTER = "ftctl.cluster"
LABEL_RUN = "ftctl.run"
LABEL_ROLE = "ftctl.role"
LABEL_WORKER = "ftctl.worker"
LABEL_STATE_DIR = "ftctl.state-dir"
LABEL_PREFIX = "ftctl.label."  # a worker's labels: ftctl.label.rack=a


def cluster_key(state_dir: Path) -> str:
    """The state dir's hash: label value and container-name part, unique per state dir."""
    return digest([str(state_dir)], length=10)


def container_name(key: str, daemon: str) -> str:
    return f"ftctl-{key}-{daemon}"


@dataclass
class DockerMeta:
    image: str
    cluster_key: str
    run_id: str
    mounts: list[str] = field(default_factory=list)
    cpus: float | None = None
    mem_limit: str | None = None
    own_pids: bool = False  # a PID namespace per container (see DockerCluster)
    # Set for a cluster that lives only as long as one command (`ftctl run`): when that
    # process is gone, `cluster prune` knows the containers were left by a crash.
    owner_pid: int | None = None
    owner_create_time: float | None = None


def meta_path(state_dir: Path) -> Path:
    return state_dir / META_FILE


def load_meta(state_dir: Path) -> DockerMeta | None:
    try:
        data: dict[str, Any] = json.loads(meta_path(state_dir).read_text())
        return DockerMeta(**data)
    except (OSError, ValueError, TypeError):
        return None


def save_meta(state_dir: Path, meta: DockerMeta) -> None:
    """Atomic, like the state file: another process may be reading it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".docker-", suffix=".json", dir=state_dir)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(asdict(meta), handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, meta_path(state_dir))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_meta(state_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        meta_path(state_dir).unlink()
