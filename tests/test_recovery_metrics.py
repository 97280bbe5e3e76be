"""Recovery metrics on synthetic series whose answers are worked out by hand."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from ftctl.kernel.history import HistoryEvent, read_history
from ftctl.metrics.recovery import (
    FaultWindow,
    RecoverySettings,
    available_queries,
    fault_recovery,
    fault_windows,
    recovery_breakdown,
    recovery_report,
    time_to_recover,
)
from ftctl.metrics.series import bucket_quantiles, throughput_from_counts

T_FAULT = 10.0


def steady(lo: float, hi: float, value: float, step: float = 0.1) -> list[tuple[float, float]]:
    n = round((hi - lo) / step)
    return [(round(lo + k * step, 6), value) for k in range(n)]


# Latency: 50 ms steady before the fault; one in-flight output at 10.1; no output from
# 10.1 to 11.0 (the outage); then catch-up that settles below 55 ms (10%) from 11.7 and
# below 60 ms (1.2x) from 11.4.
AFTER = [
    (10.1, 0.05),
    (11.0, 0.5), (11.1, 0.3), (11.2, 0.2), (11.3, 0.08),
    (11.4, 0.058), (11.5, 0.054), (11.6, 0.059),
    (11.7, 0.052), (11.8, 0.05), (11.9, 0.05),
]
LATENCY = steady(5.0, 10.0, 0.05) + AFTER + steady(12.0, 14.0, 0.05)
THROUGHPUT = [
    *steady(5.0, 10.0, 1000.0),
    (10.1, 400.0),
    *steady(10.2, 11.0, 100.0),
    (11.0, 300.0),
    (11.1, 600.0),
    *steady(11.2, 14.0, 1000.0),
]
EVENTS = [
    # before the fault: not this fault's
    HistoryEvent(1, 2.0, "spark", "instance-started", {"reason": "restart"}, instance="x[0]"),
    HistoryEvent(2, 10.3, "spark", "failure-detected", {"instances": ["count[1]"]}),
    HistoryEvent(3, 10.35, "spark", "instance-started", {"reason": "restart", "restore_bytes": 0},
                 instance="count[1]"),
    HistoryEvent(4, 10.36, "spark", "instance-started", {"reason": "restart"},
                 instance="out[0]"),
]


def test_recovery_times_match_the_hand_computed_values() -> None:
    rec = fault_recovery(FaultWindow(T_FAULT, None, "kill-task", "count[1]"), EVENTS,
                         LATENCY, THROUGHPUT)
    assert rec.baseline_latency_s == pytest.approx(0.05)
    assert rec.detection_s == pytest.approx(0.3)
    assert rec.restart_s == pytest.approx(0.35)
    assert rec.recovered_event_s is None
    assert rec.first_output_s == pytest.approx(1.0)  # the first point after the restart
    assert rec.impact is True
    assert rec.recovery_s == pytest.approx(1.7)  # 11.7: 52, 50, 50 ms all <= 55 ms
    assert rec.recovery_rl_s == pytest.approx(1.4)  # 11.4: 58, 54, 59 ms all <= 60 ms
    assert rec.t_recovered == pytest.approx(11.7)
    assert rec.baseline_throughput == pytest.approx(1000.0)
    assert rec.min_throughput == pytest.approx(100.0)
    assert rec.throughput_min_ratio == pytest.approx(0.1)
    assert rec.throughput_dip == pytest.approx(0.9)
    json.dumps(rec.to_json())


def test_the_breakdown_parts_add_up_to_the_recovery_time() -> None:
    events = [*EVENTS,
              HistoryEvent(5, 10.37, "spark", "instance-started", {"reason": "restart",
                           "start": "queued", "spare": True,
                           "restore_bytes": 4096}, instance="split[0]"),
              HistoryEvent(6, 10.6, "spark", "source-rewound", {"records": 120},
                           instance="lines[0]"),
              HistoryEvent(8, 10.5, "spark", "instance-registered",
                           {"pid": 7, "restore_s": 0.04}, instance="count[1]"),
              HistoryEvent(9, 10.55, "spark", "instance-registered",
                           {"pid": 8, "restore_s": 0.09}, instance="split[0]"),
              HistoryEvent(7, 10.7, "spark", "recovered", {"seconds": 0.4})]
    rec = fault_recovery(FaultWindow(T_FAULT, None, "kill-task", "count[1]"), events,
                         LATENCY, THROUGHPUT)
    b = rec.breakdown
    # detected 10.3, first restart 10.35, all running 10.7, output 11.0, recovered 11.7
    assert b["detect"] == pytest.approx(0.3)
    assert b["plan"] == pytest.approx(0.05)
    assert b["start"] == pytest.approx(0.35)
    assert b["replay"] == pytest.approx(0.3)
    assert b["catch_up"] == pytest.approx(0.7)
    parts = sum(b[k] for k in ("detect", "plan", "start", "replay", "catch_up"))
    assert parts == pytest.approx(rec.recovery_s)
    # Restarts without ``start`` are read by ``spare`` (absent: a job), as older runs wrote.
    assert b["started_by"] == {"job": 2, "queued": 1}
    assert b["restarts"] == 3 and b["replayed"] == 120
    assert b["restore_s"] == pytest.approx(0.09) and b["restore_bytes"] == 4096
    json.dumps(rec.to_json())


def test_a_fault_detected_twice_has_a_breakdown_per_detection() -> None:
    # A rack: its first worker's loss detected at 10.3, its instances restarted and
    # running at 10.7; the second worker's at 10.9 (a restart placed there lost too),
    # restarted at 11.0 and running at 11.4. A later fault at 12.5 is not this one's.
    events = [*EVENTS,
              HistoryEvent(5, 10.7, "spark", "recovered", {"seconds": 0.4}),
              HistoryEvent(6, 10.9, "spark", "failure-detected", {"instances": ["out[0]"]}),
              HistoryEvent(7, 11.0, "spark", "instance-started",
                           {"reason": "restart", "start": "slot"}, instance="out[0]"),
              HistoryEvent(8, 11.05, "spark", "instance-started",
                           {"reason": "restart", "start": "job"}, instance="sum[0]"),
              HistoryEvent(9, 11.4, "spark", "recovered", {"seconds": 0.5}),
              HistoryEvent(10, 12.6, "spark", "failure-detected", {"instances": ["x[0]"]}),
              HistoryEvent(11, 12.7, "spark", "instance-started", {"reason": "restart"},
                           instance="x[0]")]
    b = recovery_breakdown(T_FAULT, events, 11.0, None, until=12.5)
    # The parts follow the first detection, as before.
    assert b["detect"] == pytest.approx(0.3) and b["start"] == pytest.approx(0.35)
    first, second = b["detections"]
    assert first["at"] == pytest.approx(0.3) and first["plan"] == pytest.approx(0.05)
    assert first["start"] == pytest.approx(0.35) and first["restarts"] == 2
    assert first["started_by"] == {"job": 2}
    assert second["at"] == pytest.approx(0.9) and second["plan"] == pytest.approx(0.1)
    assert second["start"] == pytest.approx(0.4) and second["restarts"] == 2
    assert second["started_by"] == {"slot": 1, "job": 1}
    # Every restart of the fault counted, none of the next fault's.
    assert b["restarts"] == 4 and b["started_by"] == {"job": 3, "slot": 1}
    # Without a next fault, latency back at 11.7 ends the fault's detections.
    assert len(recovery_breakdown(T_FAULT, events, 11.0, 11.7)["detections"]) == 2
    assert len(recovery_breakdown(T_FAULT, events, 11.0, None)["detections"]) == 3


def test_a_breakdown_stops_at_the_first_event_that_never_came() -> None:
    # Output before anything restarted running is clamped: replay is never negative.
    done = HistoryEvent(5, 12.0, "spark", "recovered", {"seconds": 1.7})
    early = recovery_breakdown(10.0, [*EVENTS, done], 11.0, 12.5)
    assert early["start"] == pytest.approx(1.65) and early["replay"] == 0.0
    assert early["catch_up"] == pytest.approx(0.5)
    undetected = recovery_breakdown(10.0, [], 11.0, 12.0)
    assert all(undetected[k] is None for k in ("detect", "plan", "start", "replay"))


def test_hold_period_ignores_a_short_dip() -> None:
    series = [(0.1 * k, 0.05) for k in range(30)] + [
        (3.0, 0.2), (3.1, 0.05), (3.2, 0.2), (3.3, 0.05), (3.4, 0.05), (3.5, 0.05)]
    got, impact = time_to_recover(series, 2.95, 0.055, hold=3, bucket=0.1)
    assert impact is True and got == pytest.approx(0.35)  # 3.3, not the one-point dip at 3.1


def test_a_fault_without_visible_impact_recovers_at_once() -> None:
    series = steady(0.0, 20.0, 0.05)
    rec = fault_recovery(FaultWindow(T_FAULT), [], series, steady(0.0, 20.0, 10.0))
    assert rec.impact is False and rec.recovery_s == 0.0 and rec.recovery_rl_s == 0.0
    assert rec.throughput_dip == pytest.approx(0.0)


def test_never_settling_or_no_baseline_gives_none() -> None:
    worse = steady(5.0, 10.0, 0.05) + steady(10.1, 15.0, 0.2)
    rec = fault_recovery(FaultWindow(T_FAULT), [], worse, [])
    assert rec.impact is True and rec.recovery_s is None and rec.recovery_rl_s is None
    assert rec.throughput_dip is None
    early = fault_recovery(FaultWindow(0.15), [], LATENCY, THROUGHPUT)
    assert early.baseline_latency_s is None and early.recovery_s is None


def test_events_and_fault_windows_from_the_log() -> None:
    # A stored version 1 log reads through upgrade_v1.
    log = [
        {"t": 4.0, "kind": "fault-inject", "fault": "pause", "target": "split[0]",
         "resolved": "split[0]", "index": 0, "occurrence": 0},
        {"t": 5.0, "kind": "fault-heal", "fault": "pause", "index": 0, "occurrence": 0},
        {"t": 10.0, "kind": "fault-inject", "fault": "kill-task", "target": "count[1]",
         "index": 1, "occurrence": 0},
    ]
    windows = fault_windows(log)
    assert windows == [FaultWindow(4.0, 5.0, "pause", "split[0]"),
                       FaultWindow(10.0, None, "kill-task", "count[1]")]
    faults = [e for e in read_history(log) if e.kind.startswith("fault-")]
    assert [(e.fault, e.data["type"]) for e in faults] == [
        ("0.0", "pause"), ("0.0", "pause"), ("1.0", "kill-task")]
    history = [*EVENTS, *(replace(e, seq=e.seq + len(EVENTS)) for e in faults)]
    report = recovery_report(windows[1:], history, LATENCY, THROUGHPUT)
    assert report.faults[0].recovery_s == pytest.approx(1.7)
    assert report.availability is None  # one sink
    json.dumps(report.to_json())


def test_available_queries_over_time() -> None:
    by_sink = {
        "a": steady(5.0, 15.0, 0.05),
        "b": steady(5.0, 10.0, 0.05) + steady(12.0, 15.0, 0.05),  # no output 10-12
        "c": steady(5.0, 10.0, 0.05) + steady(10.0, 13.0, 0.1) + steady(13.0, 15.0, 0.055),
    }
    avail = available_queries(by_sink, T_FAULT, start=8.0, end=14.9)
    assert avail.t == pytest.approx([8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0])
    assert avail.available == [3, 3, 1, 1, 2, 3, 3]  # c at 1.1x counts as available
    assert avail.total == 3
    assert avail.per_sink["b"] == [True, True, False, False, True, True, True]
    strict = available_queries(by_sink, T_FAULT, RecoverySettings(relative_threshold=1.05),
                               start=8.0, end=14.9)
    assert strict.available == [3, 3, 1, 1, 2, 2, 2]
    report = recovery_report([FaultWindow(T_FAULT)], [], by_sink["a"], [],
                             latency_by_sink=by_sink)
    assert report.availability is not None and report.availability.total == 3


def test_series_helpers() -> None:
    samples = [(0.01, 1.0), (0.02, 3.0), (0.05, 2.0), (0.25, 5.0)]
    q = bucket_quantiles(samples, bucket=0.1, qs=(50, 100))
    assert q[50] == [(0.0, 2.0), (0.2, 5.0)]  # no point for the empty bucket at 0.1
    assert q[100] == [(0.0, 3.0), (0.2, 5.0)]
    rows = [
        {"t": 0.0, "instance": "out[0]", "records_out": 0},
        {"t": 0.0, "instance": "count[0]", "records_out": 999},
        {"t": 0.5, "instance": "out[0]", "records_out": 100},
        {"t": 1.0, "instance": "out[0]", "records_out": 5},  # restarted: counter reset
        {"t": 1.5, "instance": "out[0]", "records_out": 105},
    ]
    assert throughput_from_counts(rows, ["out[0]"]) == [(0.5, 200.0), (1.0, 0.0), (1.5, 200.0)]


def test_the_terminal_breakdown_has_a_row_per_later_detection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    import ftctl.console as consoles
    from ftctl.run import chaos

    out = io.StringIO()
    monkeypatch.setattr(consoles, "console", Console(file=out, width=120, color_system=None))
    two = {"detect": 0.3, "plan": 0.05, "start": 0.35, "replay": 0.3, "catch_up": 0.7,
           "restarts": 3, "started_by": {"slot": 3},
           "detections": [{"at": 0.3, "plan": 0.05, "start": 0.35, "restarts": 2,
                           "started_by": {"slot": 2}},
                          {"at": 0.9, "plan": 0.1, "start": 0.4, "restarts": 1,
                           "started_by": {"slot": 1}}]}
    chaos.print_breakdown([{"fault": "kill-group", "t_fault": 5.0, "breakdown": two}])
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in out.getvalue().splitlines() if line.startswith("│")]
    # The fault's row: the first detection's restarts; then the second detection's own.
    assert rows == [
        ["kill-group at 5.0", "0.30", "0.05", "0.35", "0.30", "0.70", "2 slot", "-"],
        ["again at +0.90 s", "-", "0.10", "0.40", "-", "-", "1 slot", "-"]]


def test_the_terminal_breakdown_keeps_names_and_counts_whole_at_80_columns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A later detection's name fits its column, and a restarts cell of several kinds
    gives each count its kind on the same line, on an 80-column terminal."""
    import io

    from rich.console import Console

    import ftctl.console as consoles
    from ftctl.run import chaos

    out = io.StringIO()
    monkeypatch.setattr(consoles, "console", Console(file=out, width=80, color_system=None))
    mixed = {"job": 4, "queued": 6, "slot": 1}
    b = {"detect": 0.12, "plan": 0.01, "start": 12.34, "replay": 1.5, "catch_up": 17.6,
         "restarts": 11, "started_by": mixed, "restore_s": 0.41, "restore_bytes": 123456,
         "detections": [{"at": 0.12, "plan": 0.01, "start": 12.34, "restarts": 11,
                         "started_by": mixed},
                        {"at": 1.88, "plan": 0.02, "start": 3.1, "restarts": 3,
                         "started_by": {"job": 2, "slot": 1}}]}
    chaos.print_breakdown([{"fault": "kill-group", "t_fault": 5.0, "breakdown": b}])
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "kill-group at 5.0" in text and "again at +1.88 s" in text
    assert "0.41 s" in text and "123,456 B" in text  # the restore's figures with units
    # every count beside its kind: a count wrapped away from it would not be found
    assert re.findall(r"(\d+) (job|queued|slot)\b", text) == [
        ("4", "job"), ("6", "queued"), ("1", "slot"), ("2", "job"), ("1", "slot")]
    # compare's breakdown: a long protocol name squeezes the other columns
    out.seek(0)
    out.truncate(0)
    chaos.breakdown_table("where it went", "protocol", [  # a rack failure's, as measured
        ("checkpoint", {"detect": 0.25, "plan": 0.07, "start": 0.47, "replay": 0.72,
                        "started_by": {"queued": 3, "slot": 9}, "restore_s": 0.32,
                        "restore_bytes": 23_618}),
        ("causal", {"detect": 0.13, "plan": 0.04, "start": 0.11, "replay": 0.0,
                    "catch_up": 14.74, "started_by": {"job": 1, "slot": 5},
                    "restore_s": 0.21, "restore_bytes": 495_062}),
        ("structured-streaming", {"detect": 0.15, "plan": 22.58, "started_by": {"task": 2}})])
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "0.21 s" in text and "495,062 B" in text


def test_a_fault_window_starts_when_the_fault_struck_not_when_it_was_recorded() -> None:
    """A container kill returns after Spark already saw the loss: the window starts at the
    record's ``at``, so the detection before the record was written is still this fault's."""
    history = [
        HistoryEvent(1, 20.2, "spark", "failure-detected", {"instances": ["executor 0"],
                                                            "cause": "executor-lost"}),
        HistoryEvent(2, 20.6, "spark", "fault-injected", {"type": "container-kill",
                                                          "target": "w1", "at": 20.0}),
    ]
    [window] = fault_windows(history)
    assert window.t == 20.0
    rec = fault_recovery(window, history, [], [])
    assert rec.detection_s == pytest.approx(0.2)
    # an ``at`` after the record (a clock of another origin) is not taken
    odd = [replace(history[1], data={**history[1].data, "at": 99.0})]
    assert fault_windows(odd)[0].t == 20.6


def test_a_fault_nobody_detected_takes_no_detection_from_the_next_fault() -> None:
    """A 3 s pause under a 120 s heartbeat timeout is seen by nobody; the kill 6 s later is
    detected at once. The pause shows no detection or restart; the kill shows its own."""
    history = [
        HistoryEvent(1, 36.2, "spark", "failure-detected", {"instances": ["executor 1"]}),
        HistoryEvent(2, 37.4, "spark", "instance-started", {"reason": "rescheduled",
                                                            "start": "task"},
                     instance="executor 1"),
    ]
    pause = FaultWindow(30.0, 33.0, "container-pause", "w0")
    kill = FaultWindow(36.0, None, "container-kill", "w1")
    report = recovery_report([pause, kill], history, [], [])
    first, second = report.faults
    assert (first.detection_s, first.restart_s) == (None, None)
    assert second.detection_s == pytest.approx(0.2)
    assert second.restart_s == pytest.approx(1.4)


def test_the_engine_prints_its_faults_with_each_figure_under_its_label_at_80_columns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Structured Streaming's per-fault figures are a table row, as the protocols' are: a
    label never parts from its figure, however wide the numbers."""
    import io

    from rich.console import Console

    import ftctl.console as consoles
    from ftctl.engines.structured import runner

    out = io.StringIO()
    monkeypatch.setattr(consoles, "console", Console(file=out, width=80, color_system=None))
    runner._print_faults([  # the docker run's two faults, as measured
        {"fault": "container-pause", "t_fault": 6.02, "detection_s": None,
         "restart_s": None, "first_output_s": None, "recovery_s": None},
        {"fault": "container-kill", "t_fault": 33.9, "detection_s": 0.13,
         "restart_s": 0.13, "first_output_s": 37.23, "recovery_s": None}])
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    header = next([c.strip() for c in line.split("┃")[1:-1]]
                  for line in text.splitlines() if line.startswith("┃"))
    kill = next([c.strip() for c in line.split("│")[1:-1]]
                for line in text.splitlines() if line.startswith("│ container-kill"))
    assert dict(zip(header, kill, strict=True))["first out s"] == "37.23"
    assert dict(zip(header, kill, strict=True))["detect s"] == "0.13"
