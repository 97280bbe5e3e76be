"""``benchmarks/scenarios_delivered.py`` counts deliveries from a run's history (no cluster)."""

from __future__ import annotations

from typing import Any

from ftctl.kernel.history import HistoryEvent
from tests.benchscripts import load_benchmark


def _ev(seq: int, kind: str, index: int, **data: Any) -> HistoryEvent:
    return HistoryEvent(seq, float(seq), "spark", kind,
                        {"fault": f"{index}.{seq}", "index": index, **data})


SPEC = {"faults": [{"type": "kill-task", "at": 3.0, "count": 2},
                   {"type": "pause", "optional": True, "duration": 0.5},
                   {"type": "kill-task", "at": 5.0}]}


def test_a_fault_short_of_its_count_is_not_delivered_and_says_why() -> None:
    bench = load_benchmark("scenarios_delivered")
    events = [_ev(1, "fault-injected", 0), _ev(2, "fault-deferred", 0, reason="restarting"),
              _ev(3, "fault-error", 0, error="not running (waited 30.0 s)"),
              _ev(4, "fault-error", 1, error="no target"), _ev(5, "fault-injected", 2)]
    counts = bench.tally(events)
    assert counts[0] == {"injected": 1, "deferred": 1,
                         "errors": ["not running (waited 30.0 s)"]}
    ok, missing = bench.delivered(SPEC, counts)
    # fault 1 is optional: its error is allowed; fault 0 struck once of twice.
    assert not ok and missing == "fault 0: 1/2 (not running (waited 30.0 s))"


def test_every_fault_struck_as_often_as_asked_is_delivered() -> None:
    bench = load_benchmark("scenarios_delivered")
    events = [_ev(1, "fault-injected", 0), _ev(2, "fault-injected", 0),
              _ev(3, "fault-injected", 2)]
    assert bench.delivered(SPEC, bench.tally(events)) == (True, "")
    # A fault never mentioned in the history was never struck.
    assert bench.delivered(SPEC, bench.tally(events[:2])) == (False, "fault 2: 0/1 (never struck)")
