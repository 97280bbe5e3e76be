"""Tuple records and the delivery table (§5.2).

A record is small (id, origin, emitter, state); a purged record stays, because
exactly-once compares arriving ids against every record, pending or purged (§5.6).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

Uid = Hashable  # a tuple id: pure function of the input id, so replays repeat it (D4)
Origin = Hashable  # the slot the tuple came from ("src" for a source)


class RecordState(StrEnum):
    PENDING = "pending"
    PURGED = "purged"


@dataclass(slots=True)
class Record:
    uid: Uid
    origin: Origin
    emitter: int  # the slot processing the tuple; a taker rewrites it (T3)
    state: RecordState = RecordState.PENDING


class RecordTable:
    """One unit's shared tuple table, keyed by uid alone.

    The key is the uid, never (uid, origin): a replay arrives from another emitter and must
    still be recognised (mutant 'dedup-emitter' keys by both).
    """

    def __init__(self, key_with_origin: bool = False):
        self._by: dict[Hashable, Record] = {}
        self._with_origin = key_with_origin

    def key(self, uid: Uid, origin: Origin) -> Hashable:
        return (uid, origin) if self._with_origin else uid

    def knows(self, uid: Uid, origin: Origin) -> bool:
        return self.key(uid, origin) in self._by

    def get(self, uid: Uid, origin: Origin) -> Record | None:
        return self._by.get(self.key(uid, origin))

    def insert(self, rec: Record, replace: bool = True) -> None:
        """Own records replace; a colleague's ``record`` never overwrites one held (setdefault)."""
        k = self.key(rec.uid, rec.origin)
        if replace or k not in self._by:
            self._by[k] = Record(rec.uid, rec.origin, rec.emitter, rec.state)

    def purge(self, uid: Uid, origin: Origin) -> None:
        rec = self._by.get(self.key(uid, origin))
        if rec is not None:
            rec.state = RecordState.PURGED

    def pending_of(self, emitter: int) -> list[Record]:
        return [r for r in self._by.values()
                if r.emitter == emitter and r.state is RecordState.PENDING]

    def pending_uid(self, uid: Uid) -> bool:
        return any(r.uid == uid and r.state is RecordState.PENDING for r in self._by.values())

    def origin_of(self, uid: Uid, default: Origin) -> Origin:
        return next((r.origin for r in self._by.values() if r.uid == uid), default)

    def copy(self) -> RecordTable:
        """The table a stand-in hands a reinstated replica (fix of F4)."""
        out = RecordTable(self._with_origin)
        for k, r in self._by.items():
            out._by[k] = Record(r.uid, r.origin, r.emitter, r.state)
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(list(self._by.values()))

    def __len__(self) -> int:
        return len(self._by)


class DeliveryTable:
    """Tuples a unit sent and whose receiver has not yet said ``delete`` (decision D1)."""

    def __init__(self) -> None:
        self._held: dict[Uid, Any] = {}

    def keep(self, uid: Uid, batch: Any = None) -> None:
        self._held[uid] = batch

    def release(self, uid: Uid) -> None:
        self._held.pop(uid, None)

    def holds(self, uid: Uid) -> bool:
        return uid in self._held

    def get(self, uid: Uid) -> Any:
        return self._held.get(uid)

    def __len__(self) -> int:
        return len(self._held)
