"""Messages between replicas, their neighbours and the coordinator (spec section 2).

Slots are addressed by instance id (``"B[1]"``); the host routes each slot to the unit
currently hosting it. ``Pong`` and ``RecordOk`` are the returns of the paper's synchronous
calls and are not part of Table 1.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from protocols.contract.messages import Msg

Slot = str  # an instance id, "op[i]"
# A slot's generation: the unit hosting it and that unit's incarnation. A takeover or a
# reinstatement moves the slot to another generation.
HostId = tuple[Slot, int]


def slot_of(op: str, index: int) -> Slot:
    return f"{op}[{index}]"


def split_slot(slot: Slot) -> tuple[str, int]:
    op, _, rest = slot.rpartition("[")
    return op, int(rest.rstrip("]"))


@dataclass(frozen=True, slots=True)
class Data(Msg):
    """A tuple along an edge; ``origin`` is the sending unit's own slot (where its copy is)."""

    uid: Hashable
    payload: Any
    origin: Slot


@dataclass(frozen=True, slots=True)
class Ack(Msg):
    uid: Hashable


@dataclass(frozen=True, slots=True)
class RecordMsg(Msg):
    uid: Hashable
    origin: Slot
    emitter: int
    # a taker re-fetching the tuple tells its colleagues it emits it now (T3): the held
    # record is re-marked, not confirmed
    remark: bool = False


@dataclass(frozen=True, slots=True)
class RecordOk(Msg):
    uid: Hashable
    slot: Slot  # the colleague slot that confirms (a taker confirms for two)


@dataclass(frozen=True, slots=True)
class Purge(Msg):
    uid: Hashable
    origin: Slot


@dataclass(frozen=True, slots=True)
class Delete(Msg):
    uid: Hashable
    passed: bool = False  # passed on by a reinstated replica to its stand-in


@dataclass(frozen=True, slots=True)
class Ping(Msg):
    slot: Slot


@dataclass(frozen=True, slots=True)
class Pong(Msg):
    slot: Slot
    host: HostId  # who answered for the slot: the pinger learns the slot's generation


@dataclass(frozen=True, slots=True)
class Takeover(Msg):
    slot: Slot


@dataclass(frozen=True, slots=True)
class Fetch(Msg):
    uid: Hashable
    asker: Slot | None = None  # passed on by a reinstated replica: the unit to answer


@dataclass(frozen=True, slots=True)
class Refetch(Msg):
    """The origin's answer to ``Fetch``; ``found`` False: it holds no copy (lost)."""

    uid: Hashable
    payload: Any
    found: bool = True


@dataclass(frozen=True, slots=True)
class Reinstate(Msg):
    slot: Slot


@dataclass(frozen=True, slots=True)
class Table(Msg):
    """The stand-in's record table, handed to a reinstated replica (fix of F4)."""

    slot: Slot
    records: tuple[tuple[Hashable, Hashable, int, bool], ...]  # uid, origin, emitter, purged


@dataclass(frozen=True, slots=True)
class Suspicion(Msg):
    """Report: a ping to ``slot`` went unanswered; ``host`` is the generation the pinger
    last knew for it. The contract's ``Suspect`` carries only a reason, so the coordinator
    acts on this report (``Suspect`` still records the suspicion in the run's history)."""

    slot: Slot
    host: HostId


@dataclass(frozen=True, slots=True)
class Hosted(Msg):
    """Control: the coordinator's answer to a stale suspicion, the slot's generation now."""

    slot: Slot
    host: HostId


@dataclass(frozen=True, slots=True)
class Adopted(Msg):
    """Report: this unit now hosts ``slot`` (its inputs that already ended are told again)."""

    slot: Slot


@dataclass(frozen=True, slots=True)
class Rejoined(Msg):
    """Report: a restarted replica has its slot back (its inputs that ended are told)."""

    slot: Slot


@dataclass(frozen=True, slots=True)
class Quiesce(Msg):
    """Control: every sink ended, the output is final; stop the ping and retry timers so a
    host that runs to quiescence ends."""


@dataclass(frozen=True, slots=True)
class Rejoin(Msg):
    """A restarted replica's init: the unit that stands in for its slot."""

    stand_in: Slot


Message = (Data | Ack | RecordMsg | RecordOk | Purge | Delete | Ping | Pong | Takeover
           | Fetch | Refetch | Reinstate | Table | Hosted)
MESSAGES: tuple[type[Msg], ...] = (Data, Ack, RecordMsg, RecordOk, Purge, Delete, Ping, Pong,
                                   Takeover, Fetch, Refetch, Reinstate, Table, Hosted, Suspicion,
                                   Adopted, Rejoined, Rejoin, Quiesce)
# what Table 1 counts under each kind name (message class -> kind)
KIND: dict[type, str] = {Data: "data", Ack: "ack", RecordMsg: "record", RecordOk: "record_ok",
                         Purge: "purge", Delete: "delete", Ping: "ping", Pong: "pong",
                         Takeover: "takeover", Fetch: "fetch", Refetch: "refetch",
                         Reinstate: "reinstate", Table: "table", Hosted: "hosted"}
