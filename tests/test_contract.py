"""Contract v2 types: params parsing and validation, views, and the default logic."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.sim.golden import golden_output
from ftctl.verify.checker import verify
from protocols.contract import (
    BatchIn,
    ControlIn,
    CoordinatorLogic,
    Emit,
    FailureDetected,
    GraphView,
    Guarantee,
    InstanceId,
    InstanceLogic,
    InstanceView,
    MarkerIn,
    NoParams,
    ParamError,
    ProtocolParams,
    Report,
    Restart,
    Send,
    SourceReady,
    Started,
    Stop,
    parse_items,
    validate,
)
from protocols.contract.actions import Control

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


class Nested(ProtocolParams):
    window: float = Field(default=2.0, gt=0)


class Example(ProtocolParams):
    depth: int = Field(default=2, ge=1)
    mode: str = "a"
    burst: Nested = Nested()


def test_dotted_keys_nest_and_pydantic_coerces() -> None:
    given = parse_items(["depth=3", "burst.window=5"])
    assert given == {"depth": "3", "burst": {"window": "5"}}
    p = validate(Example, given)
    assert (p.depth, p.burst.window) == (3, 5.0)


@pytest.mark.parametrize(("items", "message"), [
    (["depth=0"], "depth must be >= 1, got '0'"),
    (["depth=x"], "depth must be an integer, got 'x'"),
    (["burst.window=0"], "burst.window must be > 0"),
    (["deep=1"], "unknown parameter 'deep' for ex (known: depth, mode, burst)"),
])
def test_bad_params_are_one_line_naming_the_param(items: list[str], message: str) -> None:
    with pytest.raises(ParamError) as err:
        validate(Example, parse_items(items), "ex")
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("item", ["depth", "=1", "a..b=1"])
def test_malformed_items_are_refused(item: str) -> None:
    with pytest.raises(ParamError):
        parse_items([item])


def test_params_are_frozen() -> None:
    with pytest.raises(ValueError):
        Example().depth = 5  # type: ignore[misc]


def test_views_describe_the_graph() -> None:
    graph = ExecutionGraph(load_topology(TOPOLOGIES / "diamond.yaml"))
    view = GraphView(graph)
    assert view.queries == {"out": frozenset({"tags", "ones", "evens", "all", "merge", "out"})}
    me = InstanceView.of(graph, "merge[1]")
    assert me.ring == ("merge[0]", "merge[1]") and me.successor == "merge[0]"
    assert me.inputs == tuple(graph.instances["merge[1]"].inputs) and not me.is_sink


class _View:
    """The few ClusterView answers the default coordinator asks for."""

    def __init__(self) -> None:
        self.inc: dict[str, int] = {}

    def incarnation(self, i: str) -> int:
        return self.inc.get(i, 0)


def _run(graph: ExecutionGraph, lose_eos_to: str | None = None) -> dict[str, list[Any]]:
    """Drive the default logic synchronously, FIFO per channel; optionally lose the first
    end-of-stream marker to one instance and let the coordinator restart it."""
    logics: dict[str, InstanceLogic[NoParams]] = {}
    coord: CoordinatorLogic[NoParams] = CoordinatorLogic(GraphView(graph), NoParams())
    view = _View()
    out: dict[str, list[Any]] = {}
    queue: deque[tuple[str, Any]] = deque()

    def start(iid: str) -> None:
        core = InstanceCore(graph, iid)
        logics[iid] = InstanceLogic(InstanceView.of(graph, iid), {InstanceId(iid): core},
                                    NoParams())
        perform(iid, logics[iid].handle(Started(InstanceId(iid), view.incarnation(iid),
                                                "initial"), 0.0))

    def perform(iid: str, acts: list[Any]) -> None:
        for a in acts:
            if isinstance(a, Send):
                dst = graph.channels[a.channel].dst
                ev = (BatchIn if not hasattr(a.msg, "kind") else MarkerIn)(
                    InstanceId(dst), a.channel, a.msg)
                queue.append((dst, ev))
            elif isinstance(a, Emit):
                out.setdefault(graph.instances[a.slot].op, []).extend(a.records)
            elif isinstance(a, Report):
                coordinate(coord.handle(_report(iid, a), view))  # type: ignore[arg-type]

    def coordinate(acts: list[Any]) -> None:
        for a in acts:
            if isinstance(a, Stop):
                for i in a.instances:
                    view.inc[i] = view.incarnation(i) + 1
            elif isinstance(a, Restart):
                start(a.instance)
            elif isinstance(a, Control):
                queue.append((a.instance, ControlIn(a.msg)))

    for iid in graph.order:
        start(iid)
    lost = False
    for src in graph.sources:
        while logics[src].more_to_produce(InstanceId(src)):
            perform(src, logics[src].handle(SourceReady(InstanceId(src), 0.0), 0.0))
    while queue:
        dst, ev = queue.popleft()
        if dst == lose_eos_to and isinstance(ev, MarkerIn) and not lost:
            lost = True  # the marker dies with its receiver, which the detector finds
            coordinate(coord.handle(FailureDetected(frozenset({InstanceId(dst)}), 0.0),
                                    view))  # type: ignore[arg-type]
            continue
        perform(dst, logics[dst].handle(ev, 0.0))
    assert coord.finished(view)  # type: ignore[arg-type]
    return out


def _report(iid: str, a: Report) -> Any:
    from protocols.contract import ReportIn

    return ReportIn(InstanceId(iid), 0, a.msg, 0.0)


def _golden(graph: ExecutionGraph, out: dict[str, list[Any]]) -> bool:
    topo = graph.topology
    return verify(topo.sink_modes(), golden_output(graph), out, Guarantee.EXACTLY_ONCE,
                  complete=True).passed


@pytest.mark.parametrize("name", ["wordcount", "diamond"])
def test_default_logic_computes_the_golden_output(name: str) -> None:
    graph = ExecutionGraph(load_topology(TOPOLOGIES / f"{name}.yaml"))
    assert _golden(graph, _run(graph))


def test_a_replacement_learns_which_inputs_ended() -> None:
    # The last sink's end-of-stream marker is lost with it: the default coordinator
    # restarts it and sends InputEnded for the inputs whose senders ended, so the run
    # finishes (``_run`` asserts ``finished``). What the sink emitted stays visible.
    graph = ExecutionGraph(load_topology(TOPOLOGIES / "diamond.yaml"))
    sink = graph.sinks[-1]
    assert len(graph.instances[sink].inputs) == 2  # the second marker alone cannot end it
    assert _golden(graph, _run(graph, lose_eos_to=sink))


def test_a_guarantee_may_depend_on_the_topology() -> None:
    from dataclasses import replace

    from protocols.contract import Guarantee
    from protocols.contract.view import GraphView
    from protocols.replica_ring.spec import SPEC

    chain = GraphView(ExecutionGraph(load_topology(TOPOLOGIES / "replica-chain.yaml")))
    wide = GraphView(ExecutionGraph(load_topology(TOPOLOGIES / "diamond.yaml")))
    narrowed = replace(SPEC, guarantee_on=lambda p, g: (  # diamond sums in "merge"
        Guarantee.NONE if any(g.operator_of(i) == "merge" for i in g.order) else p.semantics))
    params = narrowed.default_params()
    assert narrowed.guarantee_of(params) is Guarantee.EXACTLY_ONCE  # no graph: the params'
    assert narrowed.guarantee_of(params, chain) is Guarantee.EXACTLY_ONCE
    assert narrowed.guarantee_of(params, wide) is Guarantee.NONE
