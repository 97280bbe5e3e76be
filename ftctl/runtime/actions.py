"""Actions: what an instance or coordinator asks its host to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ftctl.runtime.messages import Message


@dataclass(slots=True)
class Send:
    """Put ``msg`` on channel ``channel``."""

    channel: int
    msg: Message


@dataclass(slots=True)
class Emit:
    """Make records visible in the external sink now."""

    instance: str
    records: list[tuple[Any, Any]]  # (key, value): event time is not part of the output


@dataclass(slots=True)
class Persist:
    """Write ``blob`` to stable storage as ``instance``'s part of snapshot ``snapshot``."""

    snapshot: int
    instance: str
    blob: Any


@dataclass(slots=True)
class Report:
    """Tell the coordinator something (``persisted``, ``eos``, ``offset``, ...)."""

    instance: str
    kind: str
    data: Any = None


Action = Send | Emit | Persist | Report
