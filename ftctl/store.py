"""Stable storage for snapshots, and the external sink that output is committed to."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

from ftctl import codec


class SnapshotStore(Protocol):
    def put(self, snapshot: int, instance: str, blob: Any) -> None: ...
    def get(self, snapshot: int, instance: str) -> Any: ...
    def discard_after(self, snapshot: int) -> None: ...
    def delete(self, snapshot: int, instance: str) -> None: ...
    def snapshots_of(self, instance: str) -> list[int]: ...
    def bytes_written(self) -> int: ...


def start_blob(store: SnapshotStore, instance: str, restore: int | None,
               also: tuple[int, ...] = ()) -> Any:
    """What a ``Start`` hands its instance (see ``protocols.base.Start``)."""
    blob = store.get(restore, instance) if restore is not None else None
    if not also:
        return blob
    present = set(store.snapshots_of(instance))
    return blob, {s: store.get(s, instance) if s in present else None for s in also}


class MemoryStore:
    """Stable storage for the simulation host: survives instance failures by construction."""

    def __init__(self) -> None:
        self.blobs: dict[tuple[int, str], Any] = {}
        self.writes = 0

    def put(self, snapshot: int, instance: str, blob: Any) -> None:
        self.blobs[(snapshot, instance)] = blob
        self.writes += 1

    def get(self, snapshot: int, instance: str) -> Any:
        return self.blobs[(snapshot, instance)]

    def discard_after(self, snapshot: int) -> None:
        for key in [k for k in self.blobs if k[0] > snapshot]:
            del self.blobs[key]

    def delete(self, snapshot: int, instance: str) -> None:
        self.blobs.pop((snapshot, instance), None)

    def snapshots_of(self, instance: str) -> list[int]:
        return sorted(s for s, i in self.blobs if i == instance)

    def bytes_written(self) -> int:
        return 0


class DirectoryStore:
    """Snapshots as files ``<dir>/<snapshot>/<instance>.pkl``, written atomically.

    Only ftctl's own processes write here, so what ``codec`` reads back is safe. Instances that
    see the same directory (tasks on the driver's machine, containers with it
    bind-mounted at the same path) write their blobs themselves with ``write_pending``,
    and the coordinator ``adopt``s them once the writer's report is current: a blob never
    travels to the coordinator, and a stopped incarnation's late write is never adopted.
    """

    KEY_FILE = ".store-key"

    def __init__(self, root: Path):
        # Absolute: tasks find the store by this path, and their working directory is
        # the executor's, not the driver's.
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._bytes = 0
        self._key: str | None = None

    def _path(self, snapshot: int, instance: str) -> Path:
        return self.root / f"{snapshot:08d}" / f"{instance}.pkl"

    def key(self) -> str:
        """A random key kept in the directory: a writer that reads it back shares it."""
        if self._key is None:
            self._key = secrets.token_hex(16)
            (self.root / self.KEY_FILE).write_text(self._key)
        return self._key

    @classmethod
    def shared(cls, root: str, key: str) -> DirectoryStore | None:
        """The store at ``root`` if this process sees the same directory as its owner."""
        try:
            if (Path(root) / cls.KEY_FILE).read_text() != key:
                return None
        except OSError:
            return None
        store = cls.__new__(cls)
        store.root, store._bytes, store._key = Path(root), 0, key
        return store

    def _write(self, directory: Path, prefix: str, blob: Any) -> tuple[Path, int]:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix)
        # ``codec``: marshal for plain values. A sink's held output, a second of it per
        # snapshot, took a sink half its time to pickle.
        data = codec.encode(blob)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return Path(tmp), len(data)

    def put(self, snapshot: int, instance: str, blob: Any) -> None:
        path = self._path(snapshot, instance)
        tmp, n = self._write(path.parent, ".tmp-", blob)
        os.replace(tmp, path)
        self._bytes += n

    def write_pending(self, snapshot: int, instance: str, blob: Any) -> tuple[str, int]:
        """Write a blob under a temporary name; returns (name, bytes) for ``adopt``."""
        tmp, n = self._write(self._path(snapshot, instance).parent, ".pending-", blob)
        return tmp.name, n

    def adopt(self, snapshot: int, instance: str, name: str, size: int) -> None:
        """Make a blob written by ``write_pending`` the instance's part of ``snapshot``."""
        if os.sep in name or not name.startswith(".pending-"):
            raise ValueError(f"not a pending snapshot file: {name!r}")
        path = self._path(snapshot, instance)
        os.replace(path.parent / name, path)
        self._bytes += size

    def get(self, snapshot: int, instance: str) -> Any:
        with open(self._path(snapshot, instance), "rb") as f:
            return codec.decode(f.read())

    def discard_after(self, snapshot: int) -> None:
        # Stopped writers may still be adding files: remove what is there, ignore races.
        for d in self.root.iterdir():
            if d.is_dir() and d.name.isdigit() and int(d.name) > snapshot:
                shutil.rmtree(d, ignore_errors=True)

    def delete(self, snapshot: int, instance: str) -> None:
        self._path(snapshot, instance).unlink(missing_ok=True)

    def snapshots_of(self, instance: str) -> list[int]:
        name = f"{instance}.pkl"
        return sorted(int(d.name) for d in self.root.iterdir()
                      if d.name.isdigit() and (d / name).exists())

    def bytes_written(self) -> int:
        return self._bytes


class SinkStore:
    """The external world: what a sink made visible stays visible.

    Transactional commits are idempotent per (sink instance, epoch), like a sink that
    records its last committed transaction id.
    """

    def __init__(self) -> None:
        self.visible: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        self.committed: dict[str, int] = {}

    def append(self, instance: str, records: list[tuple[Any, Any]]) -> None:
        self.visible[instance].extend(records)

    def commit(self, instance: str, epoch: int, records: list[tuple[Any, Any]]) -> bool:
        if self.committed.get(instance, 0) >= epoch:
            return False
        self.committed[instance] = epoch
        self.visible[instance].extend(records)
        return True

    def by_operator(self) -> dict[str, list[tuple[Any, Any]]]:
        """Visible output per sink operator (instances ``out[0]``, ``out[1]`` -> ``out``)."""
        out: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        for iid in sorted(self.visible):
            out[iid.split("[", 1)[0]].extend(self.visible[iid])
        return dict(out)
