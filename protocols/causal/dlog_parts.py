"""An instance's diff log per input channel as its local snapshots store it: encoded a
part at a time.

A diff-log entry is dropped only once the instances it names (up to f levels up) have
snapshots past it (spec T3), so a log behind a parent that snapshots rarely (a large
state, ``snapshot_balance``) holds thousands of entries at every snapshot of its own: a
Nexmark q6 sink behind tail averages stored 30 KB of them per snapshot, each pickled
anew. Entries are only appended to a log's list, and a trim or a fold makes a new list,
so while the list is the one the parts were made of, the next snapshot encodes only the
entries appended since. Each part is a ``Part`` a store that can keeps once for every
snapshot holding it (``ftctl.codec``).
"""

from __future__ import annotations

from typing import Any

from ftctl.codec import decode_part, encode_part
from protocols.shared.packed_counts import MAX_PARTS

Entry = tuple[int, Any]  # (the batch's seq, the event's diff in plain form)


class DiffLogParts:
    """The parts that hold one diff log's first ``covered`` entries."""

    __slots__ = ("_last", "_log", "covered", "parts")

    def __init__(self) -> None:
        self._log: list[Entry] | None = None
        self._last: Entry | None = None  # the last entry covered, as a check
        self.covered = 0
        self.parts: list[bytes] = []

    def _holds(self, log: list[Entry]) -> bool:
        n = self.covered
        return (log is self._log and len(log) >= n and len(self.parts) < MAX_PARTS
                and (n == 0 or log[n - 1] is self._last))

    def pack(self, log: list[Entry]) -> list[bytes]:
        """``log`` as parts to store; ``unpack`` reads them back."""
        if not self._holds(log):
            self._log, self.covered, self.parts = log, 0, []
        if len(log) > self.covered or not self.parts:
            self.parts.append(encode_part(log[self.covered:], keep=True))
            self.covered = len(log)
            self._last = log[-1] if log else None
        return list(self.parts)

    def adopt(self, log: list[Entry], parts: list[bytes]) -> None:
        """``log`` was restored from ``parts``: they cover it until it changes."""
        self._log, self.covered, self.parts = log, len(log), list(parts)
        self._last = log[-1] if log else None


def unpack(parts: list[bytes]) -> list[Entry]:
    log: list[Entry] = []
    for part in parts:
        log += decode_part(part)
    return log
