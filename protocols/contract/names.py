"""The names every part of the contract shares: slots, units, channels, snapshot refs, time."""

from __future__ import annotations

from typing import Any, NewType

InstanceId = NewType("InstanceId", str)
"""A slot of an operator, such as ``"count[1]"``. Channels address slots, not processes."""

UnitId = NewType("UnitId", str)
"""A running process (a sim unit, a Spark task). It hosts its own slot, and more after a
takeover (``AdoptSlot``). Until a protocol routes otherwise, a slot's unit has its name."""

ChannelId = int
"""An edge between two slots, numbered by ``ftctl.runtime.graph.ExecutionGraph``."""

SnapshotRef = int
"""A name in one instance's namespace of stable storage. Protocols choose the numbering
(checkpoint: the snapshot id; lineage/causal: fixed slots overwritten in place)."""

LogicalTime = int
"""Totally ordered per instance: an epoch, a snapshot id, or the top of a frontier."""

Blob = Any
"""Protocol-owned state, opaque to the kernel and hosts; must be codec-encodable
(``ftctl.codec``: plain dicts, lists, tuples, numbers, strings)."""

KV = tuple[Any, Any]
"""A record as the outside world sees it: ``(key, value)``, without event time."""
