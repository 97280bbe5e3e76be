"""The Spark task's runtime clock (ftctl/spark/task.py, ftctl/spark/agent.py), without
Spark: the agent's ``clock`` op sets a fault on the task's unit clock; the unit's events
and timers then go by it, and the system clock is not touched."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.kernel.clocks import Drift, Jump, Skew, Stall
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark import agent
from ftctl.spark.task import InstanceTask
from protocols.contract.events import TimerFired
from tests.conftest import spark_task

ROOT = Path(__file__).resolve().parent.parent
IID = "count[0]"


@pytest.fixture
def task() -> Iterator[InstanceTask]:
    with spark_task("wordcount", IID, "none") as t:
        yield t


def _spy(task: InstanceTask) -> list[tuple[float, Any]]:
    seen: list[tuple[float, Any]] = []
    inner = task.unit.logic.handle

    def handle(ev: Any, now: float) -> Any:
        seen.append((now, ev))
        return inner(ev, now)
    task.unit.logic.handle = handle  # type: ignore[method-assign]
    return seen


def _clock(task: InstanceTask, fault: Any) -> None:
    """What the control reader does with the driver's agent payload."""
    msg = agent.clock_payload(fault)
    assert agent.is_agent_payload(msg) and msg["op"] in agent.OPS
    agent.carry_out(msg, task._clock_fault)


def test_a_skew_set_through_the_agent_moves_what_the_unit_sees(task: InstanceTask) -> None:
    seen = _spy(task)
    wall = time.time()
    _clock(task, Skew(1000.0))
    task.set_timer(task.unit, "t", 0.0)
    task._fire_timers()
    ((now, ev),) = seen
    assert isinstance(ev, TimerFired) and ev.now == now
    assert now == pytest.approx(time.monotonic() + 1000.0, abs=1.0)
    assert abs(time.time() - wall) < 60  # the system clock is where it was


def test_timers_follow_the_task_clock(task: InstanceTask) -> None:
    seen = _spy(task)
    task.set_timer(task.unit, "t", 5.0)
    assert task._wait_for(10.0) == pytest.approx(5.0, abs=0.5)
    _clock(task, Drift(100.0))  # due in 5 s of the unit's clock: 0.05 s of the task's
    assert task._wait_for(10.0) < 0.1
    _clock(task, Stall(50.0))  # nothing is due while the clock stands still
    assert task._wait_for(10.0) == 10.0
    task._fire_timers()
    assert not seen
    _clock(task, Jump(10.0))  # a jump past the due reading makes it due now
    assert task._wait_for(10.0) == 0.0
    task._fire_timers()
    assert [type(ev) for _, ev in seen] == [TimerFired] and not task.timers


def test_a_clock_op_without_a_clock_or_with_bad_data_is_refused() -> None:
    with pytest.raises(ValueError, match="needs the task's clock"):
        agent.carry_out(agent.clock_payload(Skew(1.0)))
    with pytest.raises(ValueError, match="unknown clock fault"):
        agent.carry_out({"kind": agent.AGENT_KIND, "op": "clock", "fault": {"clock": "x"}},
                        lambda f: None)


def test_the_driver_sends_a_clock_fault_to_a_running_task_only(tmp_path: Path) -> None:
    from ftctl.spark.clock_faults import apply_clock_fault
    from ftctl.spark.host import EV_CHAOS, SparkHost
    from protocols.registry import get_protocol

    none = get_protocol("none")
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / "wordcount.yaml"))
    host = SparkHost(None, graph, none, none.resolve({}), "r", tmp_path / "store")
    assert not apply_clock_fault(host, IID, Drift(2.0))  # not running: nothing sent
    assert host.events_q.empty()
    host.live[IID] = object()  # type: ignore[assignment]
    assert apply_clock_fault(host, IID, Drift(2.0))
    kind, op, (iid, payload) = host.events_q.get_nowait()
    assert (kind, op, iid) == (EV_CHAOS, "agent", IID)
    assert payload == agent.clock_payload(Drift(2.0)) and agent.is_agent_payload(payload)
