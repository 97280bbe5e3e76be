"""What a simulated run counts (``SimResult.stats``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ftctl.kernel.piggyback import Piggyback


@dataclass
class SimStats:
    events: int = 0
    failures: int = 0
    failed_instances: list[str] = field(default_factory=list)
    recoveries: int = 0
    rollbacks: int = 0  # in-place rollbacks carried out (RollBack)
    messages: int = 0
    records_sent: int = 0
    persists: int = 0
    # messages per (kind, from operator, to operator): "data" for batches on channels,
    # the marker's kind for markers, the message class name for peer messages
    kinds: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    injected: int = 0  # faults of any kind that struck (crashes included)
    skipped: int = 0  # faults logged fault-skipped
    zombie_actions: Counter[str] = field(default_factory=Counter)  # dropped, by action
    # batches' protocol piggyback and clock-only batches, over all units (kernel/piggyback)
    piggyback: Piggyback = field(default_factory=Piggyback)
