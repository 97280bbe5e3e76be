"""How many empty slots to keep waiting: enough to cover the largest failure domain.

A failure domain is one worker, or every worker sharing a label value (``rack=a``). When
one is lost, its instances restart at once on warm slots only if enough waiting slots
sit on the surviving side. Instances and empty slots are both spread over the workers
(``ftctl.spark.placement``, ``JobRunner``), so a domain of ``d`` of ``W`` workers holds
about ``d/W`` of each: the pool ``S`` must satisfy ``S * (W - d) / W >= lost + 1``, where
``lost = ceil(n * d / W)`` of the ``n`` instances, for every domain short of the whole
cluster. A fenced survivor's slot needs no spare: it takes a restart itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def domains(labels: Sequence[Mapping[str, str]]) -> list[frozenset[int]]:
    """Every failure domain of these workers (one labels mapping per worker): each
    worker alone, and each group sharing a label value."""
    out = {frozenset([w]) for w in range(len(labels))}
    groups: dict[tuple[str, str], set[int]] = {}
    for w, ls in enumerate(labels):
        for kv in ls.items():
            groups.setdefault(kv, set()).add(w)
    out.update(frozenset(g) for g in groups.values())
    return sorted(out, key=lambda d: (-len(d), sorted(d)))


def standby_pool(instances: int, labels: Sequence[Mapping[str, str]]) -> int:
    """Empty slots that keep ``lost + 1`` on the surviving side of every domain short of
    the whole cluster; 1 (a single kill's replacement) on one worker or fewer."""
    w = len(labels)
    need = 1
    for dom in domains(labels):
        d = len(dom)
        if d >= w:
            continue  # losing every worker leaves nowhere to restart
        lost = math.ceil(instances * d / w)
        need = max(need, math.ceil((lost + 1) * w / (w - d)))
    return need
