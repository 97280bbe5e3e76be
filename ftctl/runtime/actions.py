"""Actions: what an instance asks its host to do.

``Send`` and ``Emit`` are the contract's (``protocols.contract.actions`` re-exports them):
an ``InstanceCore`` produces them as they are.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ftctl.runtime.messages import Message


@dataclass(frozen=True, slots=True)
class Send:
    """Put a batch or marker on an output channel. The kernel routes it to the unit that
    currently hosts the channel's destination slot. Batches carry their ``seq`` already."""

    channel: int
    msg: Message


@dataclass(frozen=True, slots=True)
class Emit:
    """Make sink records visible now (at-most/at-least-once sinks, or deduplicated ones).

    ``records`` are ``(key, value)``: event time is not part of the output.
    ``uid``, when given, names the batch and so each record in it: record ``k`` is
    ``(uid, k)``, and the sink store shows a named record once however often it is emitted
    (an idempotent upsert in the outside world). One name for a batch, not one per record:
    a sink's store keeps a count per batch, not a million record ids.
    """

    slot: str
    records: Sequence[tuple[Any, Any]]
    event_times: Sequence[int] = ()
    uid: Hashable | None = None


Action = Send | Emit
