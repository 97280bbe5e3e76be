"""``RollBack`` through the kernel on the simulation host: a running instance restores a
stored snapshot in place. Its unit and incarnation stay, its channels are fenced, and the
rollback takes effect in order with the controls the coordinator sent around it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from ftctl.kernel.commands import Log, RollBackUnit
from ftctl.kernel.coordinator import CoordinatorKernel
from ftctl.kernel.outputs import Outputs
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.host import SimHost
from ftctl.sim.runner import sim_params
from ftctl.store import MemoryStore, SinkStore
from protocols.contract import (
    Control,
    ControlIn,
    CoordinatorLogic,
    Guarantee,
    InstanceAction,
    InstanceLogic,
    Msg,
    Note,
    Persist,
    ProtocolParams,
    ProtocolSpec,
    Report,
    ReportIn,
    RollBack,
    RollBackTo,
    RunStarted,
    SetTimer,
    TimerFired,
    fixed,
)
from protocols.contract.names import InstanceId
from tests.conftest import load

pytestmark = pytest.mark.sim

ROLLED_BACK = "instance-rolled-back"  # the history kind of a RollBack

TARGET = InstanceId("count[0]")
SAVED = {"mark": "saved before the rollback"}


@dataclass(frozen=True, slots=True)
class Mark(Msg):
    n: int


@dataclass(frozen=True, slots=True)
class Saved(Msg):
    ref: int


class NotingInstance(InstanceLogic[ProtocolParams]):
    """Default processing; notes every Mark and rollback it handles. Mark(0) persists a
    blob and reports it."""

    def on_control(self, ev: ControlIn, now: float) -> list[InstanceAction]:
        if isinstance(ev.msg, Mark):
            acts: list[InstanceAction] = [Note("mark", {"slot": self.me.id, "n": ev.msg.n})]
            if ev.msg.n == 0:
                acts += [Persist(self.me.id, 5, SAVED), Report(Saved(5))]
            return acts
        return super().on_control(ev, now)

    def on_rollback(self, ev: RollBackTo, now: float) -> list[InstanceAction]:
        return [Note("rolled", {"slot": ev.slot, "to": ev.to, "restored": ev.restored})]


class RollingCoordinator(CoordinatorLogic[ProtocolParams]):
    """Midway through the run, asks count[0] to persist; once it has, sends Mark(1),
    RollBack(count[0]) and Mark(2) in one go."""

    def on_run_started(self, ev: RunStarted, view: Any) -> list[Any]:
        return [SetTimer("persist", 0.02)]

    def on_timer(self, ev: TimerFired, view: Any) -> list[Any]:
        return [Control(TARGET, Mark(0))]

    def on_report(self, ev: ReportIn, view: Any) -> list[Any]:
        if isinstance(ev.msg, Saved):
            return [Control(TARGET, Mark(1)), RollBack(TARGET, to=7, restore=ev.msg.ref),
                    Control(TARGET, Mark(2))]
        return super().on_report(ev, view)


SPEC: ProtocolSpec[ProtocolParams] = ProtocolSpec(
    name="rollback-test", paper="-", description="test protocol", params=ProtocolParams,
    instance=NotingInstance, coordinator=RollingCoordinator,
    guarantee=fixed(Guarantee.NONE), messages=(Mark, Saved))


def test_a_live_instance_rolls_back_in_place_in_order_with_its_controls() -> None:
    graph = ExecutionGraph(load("wordcount"))
    host = SimHost(graph, SPEC, sim_params(graph, SPEC, {}), seed=2)
    first_unit: list[Any] = []
    host.at(0.001, lambda: first_unit.append(host.live[TARGET]))
    touching = {*graph.instances[TARGET].inputs, *graph.out_channels(TARGET)}
    in_flight: list[tuple[int, int]] = []  # on its channels, when it rolls back and after
    take = host._do_rollback

    def observed(unit: Any, c: RollBackUnit) -> None:
        before = sum(len(host.queues[ch]) for ch in touching)
        take(unit, c)
        in_flight.append((before, sum(len(host.queues[ch]) for ch in touching)))

    host._do_rollback = observed  # type: ignore[method-assign]
    result = host.run()
    assert result.complete
    notes = [(e.note, e.payload) for e in result.events
             if e.note in ("mark", "rolled") and e.payload["slot"] == TARGET]
    assert notes == [("mark", {"slot": TARGET, "n": 0}), ("mark", {"slot": TARGET, "n": 1}),
                     ("rolled", {"slot": TARGET, "to": 7, "restored": SAVED}),
                     ("mark", {"slot": TARGET, "n": 2})]
    # the same unit and incarnation ran throughout: no stop, no restart
    assert host.live[TARGET] is first_unit[0] and host.live[TARGET].inc == 0
    assert not [e for e in result.events if e.kind in ("instance-started", "instance-stopped")]
    [record] = [e for e in result.events if e.kind == ROLLED_BACK]
    assert (record.instance, record.incarnation, record.data) == (TARGET, 0,
                                                                 {"to": 7, "restore": 5})
    assert result.stats.rollbacks == 1
    # what was in flight on its channels was dropped; its channels, and only those, were
    # fenced once (their data epoch moved on)
    [(before, after)] = in_flight
    assert before > 0 and after == 0
    assert [host.chan_epoch[c.id] for c in graph.channels] == [
        1 if c.id in touching else 0 for c in graph.channels]
    assert host.kernel.epoch(TARGET) == 1 and host.kernel.incarnation(TARGET) == 0


def test_the_kernel_skips_a_rollback_of_an_instance_that_is_not_running() -> None:
    graph = ExecutionGraph(load("wordcount"))
    store = MemoryStore()
    store.put(5, TARGET, SAVED)
    kernel = CoordinatorKernel(RollingCoordinator, graph, ProtocolParams(), store,
                               Outputs(SinkStore()))
    kernel.start(0.0)
    started = kernel.start_unit(TARGET, 0)
    assert started is not None
    cmds = kernel.handle(ReportIn(TARGET, 0, Saved(5), 0.1))
    assert cmds[1:3] == [RollBackUnit(TARGET, 0, 1, RollBackTo(TARGET, 7, SAVED)),
                         Log(ROLLED_BACK, {"instance": TARGET, "to": 7, "restore": 5,
                                          "incarnation": 0})]
    kernel.lost(TARGET)
    acts = kernel.handle(ReportIn(TARGET, 1, Saved(5), 0.2))
    assert [a for a in acts if isinstance(a, RollBackUnit)] == []
    assert Log(ROLLED_BACK, {"instance": TARGET, "to": 7, "restore": 5,
                            "skipped": "count[0] is stopped"}) in acts
    assert kernel.epoch(TARGET) == 2  # the stop raised it too (incarnation 1, 1 rollback)
