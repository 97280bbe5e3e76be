"""Seeded failure schedules for the simulation host.

A schedule strikes at event indices: after the host has processed that many events,
one instance or several at once (a correlated burst) crash. Strike points spread over
the whole run, so some land during a snapshot, some while a recovery is under way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Strike:
    at_event: int
    count: int  # how many live instances crash together
    # Optional fixed targets (replaying a recorded schedule); otherwise drawn at strike time.
    targets: tuple[str, ...] = ()


@dataclass
class FailureSchedule:
    strikes: list[Strike] = field(default_factory=list)

    @classmethod
    def random(cls, rng: random.Random, horizon: int, max_failures: int,
               max_burst: int) -> FailureSchedule:
        n = rng.randint(1, max_failures)
        strikes = []
        for _ in range(n):
            burst = 1 if rng.random() < 0.7 else rng.randint(2, max(2, max_burst))
            strikes.append(Strike(rng.randint(1, max(1, horizon)), burst))
        strikes.sort(key=lambda s: s.at_event)
        return cls(strikes)
