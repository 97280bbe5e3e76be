"""A topology as Structured Streaming queries: what compiles, and the refusal of the rest.

Pure: no Spark here, so ``validate`` and the tests judge a topology without a JVM. The
driver (``ftctl.engines.structured.query``) builds its DataFrames from the same plan.

Each sink becomes one streaming query. Stateless operators (map, filter, flat_map,
key_by) run ftctl's own functions in ``mapInPandas``; a keyed running aggregate (count,
sum, max, avg) runs in ``applyInPandasWithState`` (state in the state store, one output
per input as the golden run has); an event-time window is Spark's own ``window`` +
``withWatermark`` aggregation in append mode. Spark allows one such stateful operator on a
path from a source to a sink in the shapes ftctl uses, so a second one is refused.

A ``join`` is Spark's stream-stream inner join on the key, which emits every matching pair
once, when its second side arrives, as ftctl's operator does (both keep every record: the
state is unbounded on both engines). A ``window_join`` adds the tumbling window's start to
the key and a time-range condition (the two event times less than ``size`` apart) with a
watermark on each input, so Spark can drop a side's records once no record of the other
can share their window. A join one of whose inputs comes from bounded ``source.table``
sources through stateless operators only is a stream-static join: the table is read once as
a static DataFrame, the join keeps no state, and it counts as no stateful operator.
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
JOINS = ("join", "window_join")
TABLE = "source.table"
KEYED = ("count", "sum", "max", "avg")
WINDOW_AGGS = ("count", "sum", "max", "avg")
# Why each operator the engine does not compile is refused: what Spark would need.
_CANNOT: dict[str, str] = {
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
    ports: list[int] = field(default_factory=list)  # the input port of each of ``inputs``
    # A join's input port fed by bounded tables only (a stream-static join), else None.
    static_port: int | None = None

    @property
    def stateful(self) -> bool:
        if self.kind in JOINS:
            return self.static_port is None
        return self.kind in KEYED or self.kind == "window"

    def port_inputs(self, port: int) -> list[str]:
        return [n for n, p in zip(self.inputs, self.ports, strict=True) if p == port]


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
        if op.type not in (*STATELESS, *KEYED, *JOINS, "window", "sink"):
            raise Refused(file, f"{where}.type", "cannot express",
                          f"operator type {op.type!r} is not compiled")
        if op.type == "window" and op.params.get("agg", "count") not in WINDOW_AGGS:
            raise Refused(file, f"{where}.params.agg", "cannot express",
                          f"window agg {op.params.get('agg')!r} (compiled: "
                          f"{', '.join(WINDOW_AGGS)})")
        edges = [e for e in topology.edges if e.dst == op.name]
        stages[op.name] = Stage(op.name, op.type, [e.src for e in edges], dict(op.params),
                                op.function, types[op.name][0].get(0, "any"),
                                [e.port for e in edges])
    sinks = [op.name for op in topology.operators if op.type == "sink"]
    plan = Plan(topology, sources, stages, sinks)
    _mark_static_sides(plan, topology)
    _check_one_stateful(plan, topology, file)
    _check_join_order(plan, topology, file)
    return plan


def _mark_static_sides(plan: Plan, topology: Topology) -> None:
    """A join with exactly one input port fed only by tables (through stateless
    operators) joins the stream against that table, read once. Both ports tables: each is
    read as a stream, and the join is a stream-stream one."""
    kinds = {op.name: op.type for op in topology.operators}
    memo: dict[str, bool] = {}

    def static(name: str) -> bool:
        if name not in memo:
            stage = plan.stages.get(name)
            if stage is None:
                memo[name] = kinds[name] == TABLE
            else:
                memo[name] = stage.kind in STATELESS and bool(stage.inputs) and all(
                    static(n) for n in stage.inputs)
        return memo[name]

    for stage in plan.stages.values():
        if stage.kind in JOINS:
            tables = [p for p in (0, 1) if all(static(n) for n in stage.port_inputs(p))]
            stage.static_port = tables[0] if len(tables) == 1 else None


def _check_join_order(plan: Plan, topology: Topology, file: str) -> None:
    """Spark emits a joined pair in the micro-batch its second side arrives in, ftctl's
    window_join when the watermark closes the window, pairs sorted: the same multiset, in
    another order. A sink that checks the order per key, or the last record per key,
    after a join is refused."""
    modes = topology.sink_modes()
    names = [op.name for op in topology.operators]
    for sink in plan.sinks:
        if modes[sink] == "multiset":
            continue
        joins = sorted(n for n in plan.upstream(sink) if n in plan.stages
                       and plan.stages[n].kind in JOINS)
        if joins:
            raise Refused(file, f"operators[{names.index(sink)}] ({sink}).mode",
                          "cannot express", f"{modes[sink]} after {joins[0]!r}: Spark "
                          "emits a joined pair when its second side arrives, not in the "
                          "order ftctl's join gives a key's pairs (multiset is compiled)")


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
