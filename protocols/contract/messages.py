"""Protocol messages: the payloads of reports, controls and peer messages.

A protocol declares its messages as frozen dataclasses deriving from ``Msg`` and lists
them in ``ProtocolSpec.messages``; the kernel encodes each as ``(class name, fields)`` on
the wire, so nothing is unpickled. Fields must be codec-encodable (plain data).

The few messages below are shared: the default instance and coordinator logic use them
for end of stream and source offsets, so every protocol understands them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from protocols.contract.names import ChannelId, SnapshotRef


@dataclass(frozen=True, slots=True)
class Msg:
    """Base of every protocol message. Subclass as ``@dataclass(frozen=True, slots=True)``."""

    def fields(self) -> dict[str, Any]:
        """The message's fields by name (what the wire and the history carry)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class Ended(Msg):
    """Report: this instance passed end of stream on every output channel."""


@dataclass(frozen=True, slots=True)
class Offset(Msg):
    """Report: a source produced everything before ``offset``."""

    offset: int


@dataclass(frozen=True, slots=True)
class Persisted(Msg):
    """Report: the instance's part of ``snapshot`` is durable (checkpoint's report)."""

    snapshot: SnapshotRef


@dataclass(frozen=True, slots=True)
class InputEnded(Msg):
    """Control: the sender of ``channel`` already passed end of stream; a replacement that
    started after the marker was lost with its predecessor treats the channel as ended."""

    channel: ChannelId


SHARED_MESSAGES: tuple[type[Msg], ...] = (Ended, Offset, Persisted, InputEnded)
