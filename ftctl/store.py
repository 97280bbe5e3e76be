"""Stable storage for snapshots, and the external sink that output is committed to."""

from __future__ import annotations

import os
import pickle
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol


class SnapshotStore(Protocol):
    def put(self, snapshot: int, instance: str, blob: Any) -> None: ...
    def get(self, snapshot: int, instance: str) -> Any: ...
    def discard_after(self, snapshot: int) -> None: ...
    def snapshots_of(self, instance: str) -> list[int]: ...
    def bytes_written(self) -> int: ...


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

    def snapshots_of(self, instance: str) -> list[int]:
        return sorted(s for s, i in self.blobs if i == instance)

    def bytes_written(self) -> int:
        return 0


class DirectoryStore:
    """Snapshots as files ``<dir>/<snapshot>/<instance>.pkl``, written atomically.

    Only ftctl's own processes write here, so pickle is safe to read back.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._bytes = 0

    def _path(self, snapshot: int, instance: str) -> Path:
        return self.root / f"{snapshot:08d}" / f"{instance}.pkl"

    def put(self, snapshot: int, instance: str, blob: Any) -> None:
        path = self._path(snapshot, instance)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = pickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        self._bytes += len(data)

    def get(self, snapshot: int, instance: str) -> Any:
        with open(self._path(snapshot, instance), "rb") as f:
            return pickle.load(f)

    def discard_after(self, snapshot: int) -> None:
        for d in self.root.iterdir():
            if d.is_dir() and d.name.isdigit() and int(d.name) > snapshot:
                for f in d.iterdir():
                    f.unlink()
                d.rmdir()

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
