"""Which queries came back with which returning capacity, from one simulated run's history.

A stage starts at the first node loss (what the survivors' free slots restore) and at each
instant nodes return (``node-up``; nodes back at one instant are one stage, planned once).
A query is restored when every instance of it runs again (``ftctl.metrics.queries.
up_intervals``); it belongs to the last stage that began at or before that, and a stage
lists its queries in the order they came back. Under progressive recovery that is the
order of profit density the plan picked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ftctl.kernel.history import HistoryEvent
from ftctl.metrics.queries import up_intervals

# (t, nodes that came back then, queries restored in this stage in order); the first
# stage, on the survivors, has no nodes.
Stage = tuple[float, tuple[str, ...], tuple[str, ...]]


def restore_stages(events: Sequence[HistoryEvent], queries: Mapping[str, frozenset[str]],
                   operator_of: Mapping[str, str], end: float) -> list[Stage]:
    """The run's stages; none when no node was lost."""
    lost = next((e.t for e in events if e.kind == "node-down"), None)
    if lost is None:
        return []
    back: dict[float, list[str]] = {}
    for e in events:
        if e.kind == "node-up" and e.t >= lost:
            back.setdefault(e.t, []).append(str(e.data["node"]))
    starts = [(lost, ()), *((t, tuple(nodes)) for t, nodes in sorted(back.items()))]
    restored = sorted((spans[-1][0], q) for q, spans in
                      up_intervals(events, queries, operator_of, end).items()
                      if spans and spans[-1][0] > lost)
    stages: list[Stage] = []
    for k, (t, nodes) in enumerate(starts):
        until = starts[k + 1][0] if k + 1 < len(starts) else float("inf")
        stages.append((t, nodes, tuple(q for at, q in restored if t <= at < until)))
    return stages
