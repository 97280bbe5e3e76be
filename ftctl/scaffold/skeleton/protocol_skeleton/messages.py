"""What instances report to the coordinator, besides the shared messages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocols.contract import ChannelId, Msg


@dataclass(frozen=True, slots=True)
class LocalSnapshot(Msg):
    """Report: the instance's snapshot at ``positions`` (input channel -> last batch read)
    is durable, so its parents may forget what it had read."""

    positions: Mapping[ChannelId, int]
