"""The local cluster's state file: everything needed to find, inspect and stop it later,
possibly from another ftctl process (``cluster up`` in one shell, ``run`` or ``down`` in another).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_DIR_ENV = "FTCTL_STATE_DIR"
STATE_FILE = "cluster.json"
_LOCK_FILE = "cluster.lock"
STATE_VERSION = 1
# Written beside cluster.json by the docker backend (``ftctl.docker.meta``); its presence
# says which backend a state dir belongs to.
DOCKER_META_FILE = "docker.json"


def default_state_dir() -> Path:
    """``$FTCTL_STATE_DIR`` if set, else ``.ftctl/cluster`` under the current directory.

    Always absolute: the path is baked into daemon command lines and compared later,
    possibly from a different working directory.
    """
    configured = os.environ.get(STATE_DIR_ENV)
    path = Path(configured) if configured else Path.cwd() / ".ftctl" / "cluster"
    return path.expanduser().resolve()


@dataclass
class DaemonInfo:
    """One Spark daemon process as ftctl started it."""

    pid: int
    create_time: float
    host: str
    port: int
    ui_port: int
    log: str


@dataclass
class WorkerInfo(DaemonInfo):
    """A worker: its process, resources, labels and the id the master gave it."""

    name: str = ""
    worker_id: str | None = None
    cores: int = 1
    memory: str = "1g"
    labels: dict[str, str] = field(default_factory=dict)
    work_dir: str = ""
    killed: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class ClusterState:
    """Contents of ``cluster.json``."""

    state_dir: str
    spark_home: str
    java: str
    java_version: str
    started_at: float
    master_url: str
    ui_url: str
    master: DaemonInfo
    workers: list[WorkerInfo] = field(default_factory=list)
    version: int = STATE_VERSION
    # Set for a cluster that lives only as long as one command (`ftctl run`, `compare`):
    # once that process is gone, the cluster is abandoned (``ftctl.cluster.abandoned``).
    owner_pid: int | None = None
    owner_create_time: float | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        # Flat pid list for tools (and people) that just want to know what to kill.
        data["pids"] = [self.master.pid, *(w.pid for w in self.workers if not w.killed)]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        data = dict(data)
        data.pop("pids", None)
        master = DaemonInfo(**data.pop("master"))
        workers = [WorkerInfo(**w) for w in data.pop("workers", [])]
        return cls(master=master, workers=workers, **data)


def state_path(state_dir: Path) -> Path:
    return state_dir / STATE_FILE


def load_state(state_dir: Path) -> ClusterState | None:
    """The recorded state, or None when there is none (or it is unreadable garbage)."""
    try:
        data = json.loads(state_path(state_dir).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None
    try:
        return ClusterState.from_json(data)
    except (TypeError, KeyError):
        return None


def save_state(state: ClusterState) -> None:
    """Write atomically: readers (``cluster status`` in another shell) never see half a file."""
    state_dir = Path(state.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".cluster-", suffix=".json", dir=state_dir)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(state.to_json(), handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, state_path(state_dir))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_state(state_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        state_path(state_dir).unlink()


@contextlib.contextmanager
def state_lock(state_dir: Path) -> Iterator[None]:
    """Serialise read-modify-write of the state file across ftctl processes."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / _LOCK_FILE, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def state_lock_if_free(state_dir: Path) -> Iterator[bool]:
    """Like ``state_lock`` without waiting: yields False when another process holds it
    (a cluster starting or stopping there, whose state file may be half-way)."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        (state_dir / _LOCK_FILE).touch()
    except OSError:
        yield False
        return
    with open(state_dir / _LOCK_FILE, "a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def is_docker_state_dir(state_dir: Path) -> bool:
    return (state_dir / DOCKER_META_FILE).is_file()
