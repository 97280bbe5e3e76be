"""A worker fault that struck no instance is named, from the history alone."""

from __future__ import annotations

from typing import Any

from ftctl.kernel.history import HistoryEvent
from ftctl.metrics.struck import last_placement, struck_nothing


def _ev(seq: int, t: float, kind: str, data: dict[str, Any], instance: str | None = None,
        fault: str | None = None) -> HistoryEvent:
    return HistoryEvent(seq, t, "spark", kind, data, instance=instance, fault=fault)


PLACED = [
    _ev(1, 1.0, "instance-registered", {"pid": 1, "worker": "w0"}, "count[0]"),
    _ev(2, 1.1, "instance-registered", {"pid": 2, "worker": "w1"}, "count[1]"),
    # count[1] restarted on w0 before the group kill: w1 and w2 run nothing then
    _ev(3, 3.0, "instance-registered", {"pid": 3, "worker": "w0"}, "count[1]"),
]


def _group(t: float, *workers: str) -> list[HistoryEvent]:
    return [_ev(10 + k, t + k * 0.1, "fault-step", {"type": "kill-group", "target": "rack=b",
                                                    "step": "worker-killed", "worker": w},
                fault="1.0") for k, w in enumerate(workers)]


def test_a_group_kill_of_workers_that_run_nothing_is_named() -> None:
    (line,) = struck_nothing([*PLACED, *_group(5.0, "w1", "w2")])
    assert line.startswith("kill-group rack=b at 5.0 s struck no instance")
    assert "workers w1, w2 ran none" in line


def test_a_kill_that_hits_an_instance_is_a_test() -> None:
    assert struck_nothing([*PLACED, *_group(5.0, "w0", "w2")]) == []
    # Before count[1] moved, w1 ran it.
    assert struck_nothing([*PLACED, *_group(2.0, "w1")]) == []


def test_a_single_worker_kill_and_a_history_without_workers() -> None:
    kill = _ev(20, 6.0, "fault-injected", {"type": "kill-worker", "target": "count[0]",
                                           "resolved": "w3"}, fault="2.0")
    (line,) = struck_nothing([*PLACED, kill])
    assert "kill-worker count[0] at 6.0 s" in line and "worker w3 ran none" in line
    unplaced = [_ev(1, 1.0, "instance-registered", {"pid": 1}, "count[0]"), kill]
    assert struck_nothing(unplaced) == []  # where tasks ran is unknown: no verdict


def test_a_kill_is_placed_at_its_strike_not_at_its_record() -> None:
    # The kill struck w0 at host time 2.5 (history 4.5: shift 2.0); its record was written
    # at 6.0, after count[0]'s replacement had registered on w1.
    events = [*PLACED[:2],
              _ev(3, 5.0, "instance-registered", {"pid": 4, "worker": "w1"}, "count[0]"),
              _ev(4, 6.0, "fault-injected", {"type": "kill-worker", "target": "count[0]",
                                             "resolved": "w0", "at": 2.5}, fault="0.0")]
    assert struck_nothing(events, shift=2.0) == []
    assert len(struck_nothing(events)) == 1  # read at its record's time, it hit nothing


def test_the_last_placement_is_each_instances_newest_registration() -> None:
    assert last_placement(PLACED) == {"count[0]": "w0", "count[1]": "w0"}

