"""What travels on a channel: batches of records and control markers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ftctl.runtime.records import Record


@dataclass(slots=True)
class Batch:
    """Records plus the sender's event-time watermark (None when the topology has no windows).

    ``seq`` numbers the batches of one channel from 1 so receivers and protocols can spot
    gaps and duplicates and resume a channel at a given position.
    """

    records: list[Record]
    seq: int = 0
    watermark: int | None = None
    meta: Any = None  # protocol piggyback (e.g. a tree-clock diff)


@dataclass(slots=True, frozen=True)
class Marker:
    """An in-band control marker: ``snapshot`` tokens and end-of-stream (``eos``)."""

    kind: str
    id: int = 0
    meta: Any = field(default=None, compare=False)


Message = Batch | Marker
