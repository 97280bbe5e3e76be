"""What an ``InstanceCore`` hands back: the output of its steps since it was last taken."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ftctl.runtime.actions import Send


@dataclass(slots=True)
class Output:
    """``sends``: batches (numbered per channel, in the order the core sent them) and
    markers, for an instance with output channels. ``records``: a sink's ``(key, value)``
    records, not yet visible; the protocol decides whether they are emitted, staged, held
    or filtered."""

    sends: list[Send] = field(default_factory=list)
    records: list[tuple[Any, Any]] = field(default_factory=list)
