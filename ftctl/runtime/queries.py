"""Queries of a topology: each sink with the operators it needs and its priority.

A query (papers/004, Fig. 1) is a sink operator plus every operator with a path to it;
queries share operators. Its priority comes from the topology's ``queries`` list (1 when
not listed). Queries come in sink declaration order, which breaks ties in recovery plans.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftctl.runtime.topology import Topology


@dataclass(frozen=True, slots=True)
class QueryInfo:
    name: str  # the sink operator
    operators: frozenset[str]  # the sink and everything upstream of it
    priority: float = 1.0


def topology_queries(topology: Topology) -> list[QueryInfo]:
    """Every sink's query, in declaration order (assumes a checked topology)."""
    preds: dict[str, set[str]] = {op.name: set() for op in topology.operators}
    for e in topology.edges:
        preds[e.dst].add(e.src)
    prio = {q.sink: q.priority for q in topology.queries}
    out = []
    for op in topology.operators:
        if op.type != "sink":
            continue
        seen, todo = {op.name}, [op.name]
        while todo:
            for p in preds[todo.pop()] - seen:
                seen.add(p)
                todo.append(p)
        out.append(QueryInfo(op.name, frozenset(seen), prio.get(op.name, 1.0)))
    return out
