"""``depth`` is f, the number of adjacent failures causal recovers locally (spec M1-M5).

Within f only the failed component restarts; beyond f the whole graph is recomputed and
the run's events say so with a ``causal-fallback`` naming the component, L and f."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator, sim_params
from ftctl.verify.checker import verify
from protocols.causal.coordinator import CausalCoordinator
from protocols.causal.instance import CausalInstance
from protocols.causal.messages import CausalInit
from protocols.causal.params import CausalParams
from protocols.contract.events import Started
from protocols.contract.names import InstanceId
from protocols.contract.params import ParamError
from protocols.contract.spec import Guarantee
from protocols.contract.view import GraphView, InstanceView
from protocols.registry import PROTOCOLS
from protocols.shared.treeclock import Plain, TreeClock
from tests.conftest import TOPOLOGIES, load

pytestmark = pytest.mark.sim

PAIR = ("ones[0]", "evens[0]")  # ones[0] -> evens[0]: two adjacent instances of diamond


def _run(topology: str, targets: tuple[str, ...], depth: int, at: int = 400,
         seed: int = 4) -> tuple[list[dict[str, Any]], bool]:
    graph = ExecutionGraph(load(topology))
    params = sim_params(graph, PROTOCOLS["causal"], {"depth": depth})
    schedule = FailureSchedule([Strike(at, len(targets), targets)])
    result = SimHost(graph, PROTOCOLS["causal"], params, seed, schedule).run()
    ok = verify(graph.topology.sink_modes(), golden_output(graph), result.outputs,
                Guarantee.EXACTLY_ONCE, complete=result.complete).passed
    assert result.complete
    return result.events, ok


def _get(e: HistoryEvent, *keys: str) -> tuple[Any, ...]:
    return tuple(e.payload[k] for k in keys)


def _of(events: list[HistoryEvent], kind: str) -> list[HistoryEvent]:
    """Host events of ``kind`` or protocol notes named ``kind``."""
    return [e for e in events if kind in (e.kind, e.note)]


@pytest.mark.parametrize("at", [100, 250, 350])
def test_two_adjacent_failures_recover_locally_with_depth_2(at: int) -> None:
    events, ok = _run("diamond", PAIR, depth=2, at=at)
    assert ok
    assert _of(events, "causal-fallback") == []
    assert sorted(e.instance for e in _of(events, "instance-started")) == sorted(PAIR)
    recover = _of(events, "causal-recover")
    assert [_get(e, "members", "failed", "L", "f") for e in recover] == [
        (["evens[0]", "ones[0]"], ["evens[0]", "ones[0]"], 2, 2)]
    # One plan each: evens[0]'s replacement resumes to merge[0] and merge[1], ones[0]'s to
    # evens[0] (itself restarted: from its restored position), evens[1], all[0], all[1].
    plans = {e.payload["instance"]: e for e in _of(events, "causal-replay")}
    assert sorted(plans) == sorted(PAIR)
    assert len(plans["ones[0]"].payload["resume"]) == 4
    assert len(plans["evens[0]"].payload["resume"]) == 2


@pytest.mark.parametrize("at", [100, 250, 350])
def test_the_same_failures_fall_back_with_depth_1(at: int) -> None:
    events, ok = _run("diamond", PAIR, depth=1, at=at)
    assert ok
    fallback = _of(events, "causal-fallback")
    assert [_get(e, "reason", "failed", "component", "L", "f") for e in fallback] == [
        ("beyond-f", ["evens[0]", "ones[0]"], ["evens[0]", "ones[0]"], 2, 1)]
    assert _of(events, "causal-replay") == []
    restarted = {e.instance for e in _of(events, "instance-started")}
    assert restarted == set(ExecutionGraph(load("diamond")).order)


def test_a_chain_of_three_needs_depth_3() -> None:
    chain = ("split[0]", "count[0]", "out[0]")  # wordcount: split -> count -> sink
    for depth, fallbacks in ((2, 1), (3, 0)):
        events, ok = _run("wordcount", chain, depth=depth, at=100)
        assert ok
        assert len(_of(events, "causal-fallback")) == fallbacks, depth
        if fallbacks:
            assert _of(events, "causal-fallback")[0].payload["L"] == 3
        else:
            assert sorted(e.instance for e in _of(events, "instance-started")) == sorted(chain)


def test_seed_16_of_diamond_recovers_locally_with_depth_2_and_falls_back_with_1() -> None:
    # `ftctl sim topologies/diamond.yaml -p causal --param depth=N --seed 16`: ones[1] and
    # evens[0] fail close together (ones -> evens: L = 2).
    component = ["evens[0]", "ones[1]"]
    by_depth = {}
    for depth in (1, 2):
        out = Simulator(load("diamond"), PROTOCOLS["causal"], {"depth": depth}).run_one(16)
        assert out.verdict.passed and out.result.complete
        by_depth[depth] = out.result.events
    local, fell_back = by_depth[2], by_depth[1]
    assert _of(local, "causal-fallback") == []
    assert [_get(e, "members", "L", "f") for e in _of(local, "causal-recover")
            if e.payload["L"] > 1] == [(component, 2, 2)]
    assert sorted(e.instance for e in _of(local, "instance-started")) == component
    assert [_get(e, "reason", "component", "L", "f")
            for e in _of(fell_back, "causal-fallback")] == [("beyond-f", component, 2, 1)]
    graph = ExecutionGraph(load("diamond"))
    assert {e.instance for e in _of(fell_back, "instance-started")} == set(graph.order)


def test_non_adjacent_failures_stay_local_with_depth_1() -> None:
    events, ok = _run("diamond", ("ones[0]", "merge[1]"), depth=1)
    assert ok
    assert _of(events, "causal-fallback") == []
    assert [_get(e, "members", "L") for e in _of(events, "causal-recover")] == [
        (["merge[1]"], 1), (["ones[0]"], 1)]


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_depth_below_one_is_refused(value: str) -> None:
    with pytest.raises(ParamError, match=r"^depth must be"):
        PROTOCOLS["causal"].resolve({"depth": value})


def test_sim_json_counts_fallbacks_over_all_schedules() -> None:
    # Diamond seeds 1-12: 6 components longer than one instance (each a fallback with
    # depth 1), two longer than two; without clocks every failure falls back (3 of 3).
    runner = CliRunner()
    topo = str(TOPOLOGIES / "diamond.yaml")
    counts = {}
    for given in ("depth=1", "depth=2", "clocks=off"):
        n = "3" if given == "clocks=off" else "12"
        res = runner.invoke(app, ["sim", topo, "-p", "causal", "--param", given, "-n", n,
                                  "--json"])
        assert res.exit_code == 0, res.output
        report = json.loads(res.output)
        assert report["violating_schedules"] == 0
        counts[given] = (report["failures_injected"], report["fallbacks"])
    assert counts == {"depth=1": (22, 6), "depth=2": (22, 2), "clocks=off": (3, 3)}


def test_a_member_is_asked_about_below_restarted_children_up_to_f_hops() -> None:
    # Spec M3: evens[0] and merge[1] restart together; evens[0]'s events are read in its
    # children's logs (level 1) and, below merge[1], in out[0]'s log (level 2).
    graph = ExecutionGraph(load("diamond"))
    members = {"evens[0]", "merge[1]"}
    for depth, deep in ((2, [("out[0]", ("merge[1]", "evens[0]"))]), (1, [])):
        coord = CausalCoordinator(GraphView(graph), CausalParams(depth=depth))
        asked = sorted(coord._queries("evens[0]", members))
        assert asked == sorted([("merge[0]", ("evens[0]",)), ("merge[1]", ("evens[0]",)),
                                *deep])


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_an_instance_logs_diffs_of_depth_plus_one_levels(depth: int) -> None:
    # T1: however deep the sender's diff, the logged one keeps f + 1 levels below its root.
    graph = ExecutionGraph(load("wordcount"))
    me = InstanceId("count[0]")
    core = InstanceCore(graph, me)
    inst = CausalInstance(InstanceView.of(graph, me), {me: core}, CausalParams(depth=depth))
    inst.handle(Started(me, 0, "initial", init=CausalInit(parents={"split[0]": core.inputs[0]})),
                0.0)
    deep: Plain = ("split[0]", 9, (("lines[0]", 8, (("x", 7, (("y", 6, ()),)),)),))
    inst._run(core.inputs[0], Batch([], 1, meta=deep))
    logged = inst.dlog[core.inputs[0]][-1][1]
    assert logged == TreeClock.receive_plain("count[0]", 1, deep, depth + 1)
    assert TreeClock.from_plain(logged).depth() == depth + 2  # root + f + 1 levels
