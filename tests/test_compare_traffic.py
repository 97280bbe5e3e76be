"""compare's takeover time and message overhead, from a run's history and host counts."""

from __future__ import annotations

from typing import Any

from ftctl.compare.figures import RunFigures, summarize
from ftctl.compare.report import COLUMNS
from ftctl.compare.traffic import messages_of, per_record, takeover_times


def _ev(seq: int, t: float, kind: str, **data: Any) -> dict[str, Any]:
    return {"v": 2, "seq": seq, "t": t, "host": "spark", "kind": kind, "data": data}


def test_takeover_is_fault_to_the_route_change_of_the_struck_slot() -> None:
    events = [
        _ev(1, 1.0, "route-changed", slot="B[1]", to="B[2]"),  # before any fault
        _ev(2, 2.0, "fault-injected", type="kill-task", resolved="B[1]"),
        _ev(3, 2.4, "route-changed", slot="A[0]", to="A[1]"),  # another slot
        _ev(4, 2.75, "route-changed", slot="B[1]", to="B[2]"),
        _ev(5, 4.0, "route-changed", slot="B[1]", to="B[1]"),  # handed back: not a takeover
        _ev(6, 5.0, "fault-injected", type="kill-task", resolved="A[2]"),
        _ev(7, 5.5, "route-changed", slot="A[2]", to="A[0]"),
        _ev(8, 6.0, "fault-injected", type="kill-task", resolved="src[0]"),  # restarted
    ]
    assert takeover_times(events) == [0.75, 0.5]


def test_a_rollback_run_has_no_takeover() -> None:
    events = [_ev(1, 2.0, "fault-injected", type="kill-task", resolved="count[0]"),
              _ev(2, 2.3, "failure-detected", instances=["count[0]"], cause="crash")]
    assert takeover_times(events) == []


def test_messages_count_channels_and_peers() -> None:
    stats = {"channel_messages": 100, "peer_messages": {"Data": 30, "RecordMsg": 20}}
    assert messages_of(stats) == 150
    assert messages_of({}) == 0
    assert per_record(150, 60) == 2.5
    assert per_record(5, 0) is None


def test_compare_reports_both_per_protocol() -> None:
    def run(takeover: float | None, mpr: float) -> RunFigures:
        return RunFigures("r", "replica-ring", True, 0, 0, 0.1, None, 1.0, None, None, 10, 0,
                          0, 3.0, takeover_s=takeover, messages=10,
                          messages_per_record=mpr)
    figures = summarize("replica-ring", "exactly-once", [run(0.5, 4.0), run(0.7, 6.0)])
    assert figures.takeover_s == 0.6
    assert figures.messages_per_record == 5.0
    attrs = {attr for _, attr in COLUMNS}
    assert {"takeover_s", "messages_per_record"} <= attrs
