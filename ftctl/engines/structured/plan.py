"""A topology as Structured Streaming queries: what compiles, and the refusal of the rest.

Pure: no Spark here, so ``validate`` and the tests judge a topology without a JVM. The
driver (``ftctl.engines.structured.query``) builds its DataFrames from the same plan.

Each sink becomes one streaming query. Stateless operators (map, filter, flat_map,
key_by) run ftctl's own functions in ``mapInPandas``; a keyed running aggregate (count,
sum, max, avg) runs in ``applyInPandasWithState`` (state in the state store, one output
per input as the golden run has); an event-time window is Spark's own ``window`` +
``withWatermark`` aggregation in append mode. Spark allows one such stateful operator on a
path from a source to a sink in the shapes ftctl uses, so a second one is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ftctl.config.errors import ConfigError
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.operators import is_source
from ftctl.runtime.topology import Topology
from ftctl.runtime.types import record_types

STATELESS = ("map", "filter", "flat_map", "key_by")
KEYED = ("count", "sum", "max", "avg")
WINDOW_AGGS = ("count", "sum", "max", "avg")
# Why each operator the engine does not compile is refused: what Spark would need.
_CANNOT: dict[str, str] = {
    "join": "not compiled yet (Spark's stream-stream inner join would express it, its "
            "state unbounded: ftctl's join declares no watermark or time range)",
    "window_join": "not compiled yet (Spark's stream-stream join with a time-range "
                   "condition would express it)",
    "reorder": "it emits in event-time order per key across micro-batches, which "
               "Structured Streaming does not offer",
    "tail_avg": "it depends on the order of its inputs, which a micro-batch does not keep",
    "winning_bids": "not compiled yet",
}


class Refused(ConfigError):
    """The engine cannot run the topology, or would run it only at-least-once.
    ``why`` is ``cannot express`` or ``at-least-once only``."""

    def __init__(self, file: str, field_: str, why: str, message: str) -> None:
        super().__init__(file, field_, f"structured-streaming {why}: {message}")
        self.why = why


@dataclass
class SourceInstance:
    op: str
    index: int
    lo: int
    hi: int

    @property
    def dir_name(self) -> str:
        return f"{self.op}-{self.index}"


@dataclass
class Stage:
    name: str
    kind: str  # an operator type: map, filter, flat_map, key_by, count, ..., window, sink
    inputs: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    function: str | None = None
    in_type: str = "any"

    @property
    def stateful(self) -> bool:
        return self.kind in KEYED or self.kind == "window"


@dataclass
class Plan:
    topology: Topology
    sources: dict[str, list[SourceInstance]]
    stages: dict[str, Stage]  # every non-source operator, sinks included
    sinks: list[str]

    def source_instances(self) -> list[SourceInstance]:
        return [s for group in self.sources.values() for s in group]

    def windowed(self, sink: str) -> bool:
        """Whether ``sink``'s query holds an event-time window (needs the end marker)."""
        return any(self.stages[n].kind == "window" for n in self.upstream(sink)
                   if n in self.stages)

    def upstream(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = [name]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in self.stages:
                todo.extend(self.stages[n].inputs)
        return seen


def compile_plan(topology: Topology, file: str = "topology") -> Plan:
    """The plan of ``topology``; ``Refused`` naming the operator's field otherwise."""
    graph = ExecutionGraph(topology)
    types = record_types(topology)
    sources: dict[str, list[SourceInstance]] = {}
    stages: dict[str, Stage] = {}
    for i, op in enumerate(topology.operators):
        where = f"operators[{i}] ({op.name})"
        if is_source(op.type):
            sources[op.name] = [
                SourceInstance(op.name, k, *graph.source_range(f"{op.name}[{k}]"))
                for k in range(op.parallelism)]
            continue
        if op.type in _CANNOT:
            raise Refused(file, f"{where}.type", "cannot express", f"{op.type}: "
                          f"{_CANNOT[op.type]}")
        if op.type not in (*STATELESS, *KEYED, "window", "sink"):
            raise Refused(file, f"{where}.type", "cannot express",
                          f"operator type {op.type!r} is not compiled")
        if op.type == "window" and op.params.get("agg", "count") not in WINDOW_AGGS:
            raise Refused(file, f"{where}.params.agg", "cannot express",
                          f"window agg {op.params.get('agg')!r} (compiled: "
                          f"{', '.join(WINDOW_AGGS)})")
        inputs = [e.src for e in topology.edges if e.dst == op.name]
        stages[op.name] = Stage(op.name, op.type, inputs, dict(op.params), op.function,
                                types[op.name][0].get(0, "any"))
    sinks = [op.name for op in topology.operators if op.type == "sink"]
    plan = Plan(topology, sources, stages, sinks)
    _check_one_stateful(plan, topology, file)
    return plan


def _check_one_stateful(plan: Plan, topology: Topology, file: str) -> None:
    """A second stateful operator on a path from a source is refused: applyInPandasWithState
    or a window aggregation followed by another one is not a chain Spark runs in append
    mode with the guarantee of the first."""
    depth: dict[str, int] = {}  # most stateful operators on a path into the operator

    def of(name: str) -> int:
        if name not in depth:
            stage = plan.stages.get(name)
            if stage is None:
                depth[name] = 0
            else:
                before = max((of(n) for n in stage.inputs), default=0)
                depth[name] = before + int(stage.stateful)
        return depth[name]

    names = [op.name for op in topology.operators]
    for name in names:
        if of(name) > 1:
            i = names.index(name)
            raise Refused(file, f"operators[{i}] ({name}).type", "cannot express",
                          f"a second stateful operator ({plan.stages[name].kind}) after "
                          "another on the same path; Structured Streaming chains them "
                          "only in shapes ftctl does not compile")
