"""When replacement workers arrive after a capacity loss (restore-capacity).

Offsets are seconds after the restore starts, one per worker, ascending:

- ``all``: every worker at 0 (the blocking best case: capacity back at once).
- progressive ``fixed``: one worker every ``scale`` seconds (``scale``, ``2*scale``, ...).
- progressive ``uniform``: gaps between consecutive arrivals drawn from ``[min, max]``.
- progressive ``paper``: the arrival shape measured in the progressive-recovery paper
  (papers/004): each requested node takes between 2 and 6 minutes to attach, nodes
  requested together arrive independently, so arrivals are that many independent draws,
  sorted. The text gives only the range, so draws are uniform over it; ``scale`` shrinks
  or stretches it (``scale: 0.05`` gives 6-18 s for a short test run).

All draws come from the caller's seeded RNG, so a replay gets the same arrivals.
"""

from __future__ import annotations

import random

from ftctl.config.scenario import RestoreParams

PAPER_MIN_S = 120.0  # papers/004 Figure 3: attaching a node takes 2 ...
PAPER_MAX_S = 360.0  # ... to 6 minutes


def arrival_offsets(params: RestoreParams, n: int, rng: random.Random) -> list[float]:
    """Seconds after the restore starts at which each of ``n`` workers is started."""
    if n <= 0:
        return []
    if params.mode == "all":
        return [0.0] * n
    if params.distribution == "fixed":
        return [params.scale * (i + 1) for i in range(n)]
    if params.distribution == "uniform":
        offsets, t = [], 0.0
        for _ in range(n):
            t += rng.uniform(params.min, params.max)
            offsets.append(t)
        return offsets
    return sorted(rng.uniform(PAPER_MIN_S, PAPER_MAX_S) * params.scale for _ in range(n))
