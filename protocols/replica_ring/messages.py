"""Messages between replicas, their neighbours and the coordinator (spec section 2).

Slots are addressed by instance id (``"B[1]"``); the host routes each slot to the unit
currently hosting it. ``Pong`` and ``RecordOk`` are the returns of the paper's synchronous
calls and are not part of Table 1.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

Slot = str  # an instance id, "op[i]"


def slot_of(op: str, index: int) -> Slot:
    return f"{op}[{index}]"


def split_slot(slot: Slot) -> tuple[str, int]:
    op, _, rest = slot.rpartition("[")
    return op, int(rest.rstrip("]"))


@dataclass(frozen=True, slots=True)
class Data:
    """A tuple along an edge; ``origin`` is the sending unit's own slot (where its copy is)."""

    uid: Hashable
    payload: Any
    origin: Slot


@dataclass(frozen=True, slots=True)
class Ack:
    uid: Hashable


@dataclass(frozen=True, slots=True)
class RecordMsg:
    uid: Hashable
    origin: Slot
    emitter: int


@dataclass(frozen=True, slots=True)
class RecordOk:
    uid: Hashable
    slot: Slot  # the colleague slot that confirms (a taker confirms for two)


@dataclass(frozen=True, slots=True)
class Purge:
    uid: Hashable
    origin: Slot


@dataclass(frozen=True, slots=True)
class Delete:
    uid: Hashable


@dataclass(frozen=True, slots=True)
class Ping:
    slot: Slot


@dataclass(frozen=True, slots=True)
class Pong:
    slot: Slot


@dataclass(frozen=True, slots=True)
class Takeover:
    slot: Slot


@dataclass(frozen=True, slots=True)
class Fetch:
    uid: Hashable


@dataclass(frozen=True, slots=True)
class Refetch:
    """The origin's answer to ``Fetch``; ``found`` False: it holds no copy (lost)."""

    uid: Hashable
    payload: Any
    found: bool = True


@dataclass(frozen=True, slots=True)
class Reinstate:
    slot: Slot


@dataclass(frozen=True, slots=True)
class Table:
    """The stand-in's record table, handed to a reinstated replica (fix of F4)."""

    slot: Slot
    records: tuple[tuple[Hashable, Hashable, int, bool], ...]  # uid, origin, emitter, purged


Message = (Data | Ack | RecordMsg | RecordOk | Purge | Delete | Ping | Pong | Takeover
           | Fetch | Refetch | Reinstate | Table)
# what Table 1 counts under each kind name (message class -> kind)
KIND: dict[type, str] = {Data: "data", Ack: "ack", RecordMsg: "record", RecordOk: "record_ok",
                         Purge: "purge", Delete: "delete", Ping: "ping", Pong: "pong",
                         Takeover: "takeover", Fetch: "fetch", Refetch: "refetch",
                         Reinstate: "reinstate", Table: "table"}
