"""A contract-v2 protocol registered by spec runs under ``ftctl sim`` through the kernel:
params validated, timers and peer messages delivered, staged output committed per sink."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import Field
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator, sim_params
from protocols.contract import (
    CommitOutput,
    CoordinatorLogic,
    Ended,
    Guarantee,
    InstanceAction,
    InstanceLogic,
    Msg,
    Note,
    PeerIn,
    ProtocolParams,
    ProtocolSpec,
    ReportIn,
    SendPeer,
    SetTimer,
    StageOutput,
    Started,
    TimerFired,
    fixed,
)
from protocols.contract.actions import Emit
from protocols.contract.events import BatchIn
from protocols.contract.logic import core_actions
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES, load

pytestmark = pytest.mark.sim


class PingParams(ProtocolParams):
    ping_every: float = Field(default=0.002, gt=0)


@dataclass(frozen=True, slots=True)
class Ping(Msg):
    n: int


class PingInstance(InstanceLogic[PingParams]):
    """Default processing, but sinks stage their output in epoch 0 (committed at the end),
    and every instance pings its ring successor on a timer."""

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        return [*super().on_started(ev, now), SetTimer("ping", self.params.ping_every)]

    def on_timer(self, ev: TimerFired, now: float) -> list[InstanceAction]:
        core = self.core
        if core.exhausted if self.me.is_source else len(core.finished) == len(core.inputs):
            return []  # ended: a timer left pending would keep the run from ending
        return [SendPeer(self.me.successor, Ping(1)), SetTimer("ping", self.params.ping_every)]

    def on_peer(self, ev: PeerIn, now: float) -> list[InstanceAction]:
        return [Note("pinged", {"by": ev.sender, "to": self.me.id})]

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        acts = super().on_batch(ev, now)
        return [StageOutput(a.slot, 0, a.records) if isinstance(a, Emit) else a for a in acts]


class PingCoordinator(CoordinatorLogic[PingParams]):
    def on_report(self, ev: ReportIn, view: Any) -> list[Any]:
        acts = super().on_report(ev, view)
        if isinstance(ev.msg, Ended) and ev.instance in self.graph.sinks:
            acts.append(CommitOutput(ev.instance, 0))
        return acts


SPEC: ProtocolSpec[PingParams] = ProtocolSpec(
    name="ping-test", paper="-", description="test protocol", params=PingParams,
    instance=PingInstance, coordinator=PingCoordinator,
    guarantee=fixed(Guarantee.AT_MOST_ONCE), messages=(Ping,), needs=frozenset({"peers"}))


@pytest.fixture
def registered() -> Iterator[None]:
    PROTOCOLS[SPEC.name] = SPEC
    yield
    del PROTOCOLS[SPEC.name]


def test_a_spec_runs_fault_free_to_the_golden_output_with_timers_and_peers() -> None:
    graph = ExecutionGraph(load("diamond"))
    result = SimHost(graph, SPEC, sim_params(graph, SPEC, {}), seed=3, hash_trace=True).run()
    sim = Simulator(load("diamond"), SPEC, {})
    assert result.complete
    assert {k: sorted(v) for k, v in result.outputs.items()} == {
        k: sorted(v) for k, v in sim.golden.items()}  # staged, then committed per sink
    pings = [e for e in result.events if e.note == "pinged"]
    assert {(e.payload["by"], e.payload["to"]) for e in pings} >= {("merge[0]", "merge[1]"),
                                                   ("merge[1]", "merge[0]")}
    again = SimHost(graph, SPEC, sim_params(graph, SPEC, {}), seed=3, hash_trace=True).run()
    assert again.trace_hash == result.trace_hash  # timers and peers are seeded too


@pytest.mark.usefixtures("registered")
def test_ftctl_sim_takes_a_registered_spec_and_validates_its_params() -> None:
    runner = CliRunner()
    topo = str(TOPOLOGIES / "wordcount.yaml")
    res = runner.invoke(app, ["sim", topo, "-p", "ping-test", "--param", "ping_every=0"])
    assert res.exit_code == 2 and "ping_every must be > 0.0, got '0'" in res.output
    res = runner.invoke(app, ["sim", topo, "-p", "ping-test", "--seed", "2"])
    assert "Traceback" not in res.output and res.exit_code in (0, 1), res.output
    # the Spark commands validate a spec's params the same way, before any cluster starts
    res = runner.invoke(app, ["run", topo, "-p", "ping-test", "--param", "ping_every=0"])
    assert res.exit_code == 2 and "ping_every must be > 0.0, got '0'" in res.output


def test_core_actions_are_the_contract_actions() -> None:
    from ftctl.runtime.instance import InstanceCore

    graph = ExecutionGraph(load("wordcount"))
    core = InstanceCore(graph, graph.sources[0])
    core.source_next()
    acts = core_actions(core)
    assert acts and all(type(a).__module__ == "ftctl.runtime.actions" for a in acts)
