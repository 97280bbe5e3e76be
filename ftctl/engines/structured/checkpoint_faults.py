"""Store faults on a Structured Streaming run's checkpoint location.

A query's checkpoint location (``checkpoints/<sink>/``) holds what its recovery reads:
``offsets/N`` (the write-ahead log: the input range of batch N, written before the batch
runs), ``commits/N`` (batch N's output is done) and the state store's files
(``state/<op>/<partition>/.../<version>.zip``, RocksDB's; version N+1 after batch N).
``corrupt``, ``truncate`` and ``delete`` strike one such file of the log the run names
(``--param checkpoint_file=offsets|commits|state``): the scenario's ``snapshot`` (a batch
id, a state version), else the newest, the one a restarted driver reads first. The damage
is ftctl's own (``ftctl.store.damaged``); the file is replaced whole (written beside it,
then moved over it). Hadoop's checksum file beside it (``.N.crc``) is left as it was, as a
disk fault would leave it. Nothing happens until a driver reads the file: a running
query keeps its offsets in memory, so a driver kill after the damage is what tests it.

``store-unavailable`` is refused: the checkpoint location is a local folder that the
driver, as root, can always read; making it unavailable would mean moving it under the
running query, which then writes a fresh location in its place.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from ftctl.store import damaged

LOGS = ("offsets", "commits", "state")
DAMAGE = ("corrupt", "truncate", "delete")
_STATE_FILE = re.compile(r"(\d+)\.(zip|changelog|delta|snapshot)")


@dataclass
class Damaged:
    path: Path
    kind: str
    size: int  # bytes before


def stored_files(location: Path, log: str) -> dict[int, list[Path]]:
    """The files of ``log`` in one query's checkpoint location, by batch id (offsets,
    commits) or state version; checksum files (dot names) are not stored objects."""
    out: dict[int, list[Path]] = {}
    if log == "state":
        for p in sorted((location / "state").rglob("*")):
            m = _STATE_FILE.fullmatch(p.name)
            if m and p.is_file():
                out.setdefault(int(m[1]), []).append(p)
        return out
    folder = location / log
    for p in sorted(folder.iterdir()) if folder.is_dir() else ():
        if p.name.isdigit() and p.is_file():
            out[int(p.name)] = [p]
    return out


def damage(location: Path, log: str, kind: str, snapshot: int | None,
           at: float) -> Damaged | None:
    """Damage one file of ``log`` (``at``: where, as a fraction of its bytes); None when
    there is none to damage (no batch yet, or no such ``snapshot``)."""
    files = stored_files(location, log)
    number = max(files, default=None) if snapshot is None else snapshot
    if number is None or number not in files:
        return None
    path = files[number][0]
    data = path.read_bytes()
    if kind == "delete":
        path.unlink()
        return Damaged(path, kind, len(data))
    tmp = path.with_name(f".damaged-{secrets.token_hex(6)}")
    tmp.write_bytes(damaged(data, cast(Literal["corrupt", "truncate"], kind), at))
    os.replace(tmp, path)
    return Damaged(path, kind, len(data))
