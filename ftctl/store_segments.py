"""The directory store's layout: objects appended to segment files, found by a catalog.

Each process that writes to the store appends the objects it writes, framed, to a segment
file of its own (``segments/<writer>-<n>.seg``), and starts the next one past
``SEGMENT_BYTES``. The store's owner (the coordinator's process) alone decides which object
is an instance's part of a snapshot: it appends one line per change to ``catalog``
(``Catalog``), and a process that reads objects without owning the store (a task adopting
a slot) replays the lines it has not seen yet.

Why not a file per object: each write then cost a file creation, and the coordinator's
rename of it over the previous one a deletion. On an ext4 disk without a journal a new
inode skips every inode freed in the last seconds, so a source committing its offset
before every batch spent most of its CPU in the kernel; appending costs one ``write``.

A filesystem that cannot append (an object store) gets a segment per object: the same
catalog, each segment holding one object.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

# A writer starts a new segment once its current one holds this many bytes: a segment
# whose objects are all replaced or discarded is deleted only once its writer moved on.
SEGMENT_BYTES = 32 << 20
# The owner writes its catalog anew, live parts only, once the log holds this many bytes
# and four times what it held when last written anew: a long run's log (a line per
# offset a source commits) would otherwise grow without end, and a task that adopts a
# slot late in it would read all of it.
COMPACT_BYTES = 4 << 20
# The longest first line of a compacted log (``["g", generation]``).
HEAD_BYTES = 32

_SEGMENT = re.compile(r"([0-9a-f]{16})-(\d{6,})\.seg")


@dataclass(frozen=True, slots=True)
class Located:
    """Where one stored object's framed bytes are."""

    segment: str
    offset: int
    size: int


def pending_name(loc: Located) -> str:
    """What a writer tells the owner of an object it wrote (``DirectoryStore.adopt``)."""
    return f"{loc.segment}@{loc.offset}"


def parse_pending(name: str, size: int) -> Located:
    """The object a ``pending_name`` names; ValueError unless it is one."""
    segment, _, offset = name.partition("@")
    if _SEGMENT.fullmatch(segment) is None or not offset.isdigit() or size < 0:
        raise ValueError(f"not a pending store object: {name!r}")
    return Located(segment, int(offset), size)


def _sealed_key(segment: str) -> tuple[str, int]:
    m = _SEGMENT.fullmatch(segment)
    if m is None:
        raise ValueError(f"not a segment name: {segment!r}")
    return m.group(1), int(m.group(2))


class SegmentWriter:
    """One process's appends to the store: objects go to its open segment."""

    def __init__(self, fs: pafs.FileSystem, directory: str, limit: int | None = None) -> None:
        self.fs = fs
        self.directory = directory
        self.limit = SEGMENT_BYTES if limit is None else limit  # bytes before the next one
        self.token = secrets.token_hex(8)
        self.number = -1
        self._out: Any = None  # the open segment's stream
        self._appends = True  # False: this filesystem cannot append (a segment per object)

    def write(self, data: bytes) -> Located:
        """Append ``data``; where it is. On an error nothing more goes to that segment:
        a half-written object is never followed by another one there."""
        out = self._out
        if out is None or out.tell() >= self.limit:
            out = self._open()
        segment = self._segment()
        try:
            offset = out.tell()
            out.write(data)
            if not self._appends:
                out.close()
                self._out = None
        except BaseException:
            self.close()
            raise
        return Located(segment, offset, len(data))

    def _segment(self) -> str:
        return f"{self.token}-{self.number:06d}.seg"

    def _open(self) -> Any:
        self.close()
        self.number += 1
        if self.number == 0:
            self.fs.create_dir(self.directory, recursive=True)
        path = f"{self.directory}/{self._segment()}"
        if self._appends:
            try:
                self._out = self.fs.open_append_stream(path, compression=None)
                return self._out
            except (NotImplementedError, pa.ArrowNotImplementedError):
                self._appends = False
        self._out = self.fs.open_output_stream(path, compression=None)
        return self._out

    def close(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            with contextlib.suppress(OSError):
                out.close()


class Catalog:
    """Which stored object is each instance's part of each snapshot; and, for the owner,
    which segments no part is in any longer (``Change.dead``: theirs to delete).

    Its log is one JSON array per line: ``["p", snapshot, instance, segment, offset,
    size]`` (the part is that object), ``["d", snapshot, instance]`` (no such part),
    ``["a", snapshot]`` (no part of any snapshot after it). A log the owner compacted
    (``compacted``) starts with ``["g", generation]`` and says with ``["w", segment]``
    how far each writer had got."""

    def __init__(self) -> None:
        self.parts: dict[str, dict[int, Located]] = {}
        self._live: dict[str, int] = {}  # segment -> parts in it
        self._newest: dict[str, int] = {}  # writer token -> its newest segment seen

    def locate(self, snapshot: int, instance: str) -> Located | None:
        return self.parts.get(instance, {}).get(snapshot)

    def snapshots_of(self, instance: str) -> list[int]:
        return sorted(self.parts.get(instance, ()))

    @staticmethod
    def line(entry: list[Any]) -> bytes:
        return json.dumps(entry, separators=(",", ":")).encode() + b"\n"

    def apply(self, entry: list[Any]) -> list[str]:
        """Carry out one log entry; the segments it left with no part and sealed."""
        kind = entry[0]
        if kind == "p":
            _, snapshot, instance, segment, offset, size = entry
            return self._set(snapshot, instance, Located(segment, offset, size))
        if kind == "d":
            old = self.parts.get(entry[2], {}).pop(entry[1], None)
            return self._release(old)
        if kind == "a":
            dead: list[str] = []
            for refs in self.parts.values():
                for ref in [r for r in refs if r > entry[1]]:
                    dead += self._release(refs.pop(ref))
            return dead
        if kind == "w":
            token, number = _sealed_key(entry[1])
            self._newest[token] = max(number, self._newest.get(token, -1))
            return []
        if kind == "g":
            return []
        raise ValueError(f"unknown catalog entry {entry!r}")

    def compacted(self, generation: int) -> bytes:
        """This catalog as a log of its own, ``generation`` first: its live parts, and
        each writer's newest segment (so that a segment it left stays sealed). A segment
        no part is in that its writer may still append to is not in it: a store opened
        again from it leaves that file for good."""
        lines = [self.line(["g", generation])]
        lines += [self.line(["w", f"{token}-{number:06d}.seg"])
                  for token, number in sorted(self._newest.items())]
        lines += [self.line(["p", snapshot, instance, loc.segment, loc.offset, loc.size])
                  for instance, refs in sorted(self.parts.items())
                  for snapshot, loc in sorted(refs.items())]
        return b"".join(lines)

    @staticmethod
    def generation(head: bytes) -> int:
        """The generation of a log that begins with ``head`` (0: never compacted)."""
        first = head.split(b"\n", 1)
        if len(first) < 2 or not first[0].startswith(b'["g",'):
            return 0
        return int(json.loads(first[0])[1])

    def replay(self, data: bytes) -> int:
        """Apply the whole lines of ``data``; how many bytes of it they were."""
        end = data.rfind(b"\n") + 1
        for raw in data[:end].splitlines():
            self.apply(json.loads(raw))
        return end

    def _set(self, snapshot: int, instance: str, loc: Located) -> list[str]:
        refs = self.parts.setdefault(instance, {})
        old = refs.get(snapshot)
        refs[snapshot] = loc
        self._live[loc.segment] = self._live.get(loc.segment, 0) + 1
        dead = self._release(old)
        token, number = _sealed_key(loc.segment)
        if number > self._newest.get(token, -1):
            self._newest[token] = number  # the writer moved on: its older ones are sealed
            dead += [s for s, n in self._live.items() if n == 0 and self._sealed(s)]
        for segment in dead:
            self._live.pop(segment, None)
        return dead

    def _release(self, old: Located | None) -> list[str]:
        if old is None:
            return []
        left = self._live[old.segment] - 1
        self._live[old.segment] = left
        if left == 0 and self._sealed(old.segment):
            del self._live[old.segment]
            return [old.segment]
        return []

    def _sealed(self, segment: str) -> bool:
        token, number = _sealed_key(segment)
        return number < self._newest.get(token, -1)
