"""The source schedule of paced runs (``ftctl.runtime.pace``) and who follows it."""

from __future__ import annotations

import pytest

from ftctl.config.topology import InputSpec, RateChange
from ftctl.run.chaos import expected_seconds
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.pace import Pace
from ftctl.spark.latency import LatencyProbe
from tests.conftest import load


def test_unpaced_input_has_no_pace() -> None:
    assert Pace.of(InputSpec(records=10)) is None


def test_one_rate() -> None:
    pace = Pace.of(InputSpec(records=1000, rate=100.0))
    assert pace is not None
    assert pace.due(0) == 0.0 and pace.due(250) == pytest.approx(2.5)


def test_the_pace_changes_once_at_the_given_record() -> None:
    spec = InputSpec(records=1000, rate=100.0, rate_change=RateChange(at=100, rate=10.0))
    pace = Pace.of(spec)
    assert pace is not None
    assert pace.due(100) == pytest.approx(1.0)  # still the first rate
    assert pace.due(150) == pytest.approx(1.0 + 50 / 10.0)
    assert pace.due(1000) == pytest.approx(1.0 + 900 / 10.0)


def test_the_sink_judges_latency_by_the_changed_schedule() -> None:
    topology = load("sharder").with_input(records=10_000, rate=1000.0,
                                          rate_change=RateChange(at=2000, rate=100.0))
    graph = ExecutionGraph(topology)
    probe = LatencyProbe(graph, topology.input.rate)
    probe.anchor = 50.0
    batch = topology.input.batch
    # A record's ts is its index times ms_per_record (1.0): the batch it left in is due.
    assert probe.due(float(1000 + batch // 2)) == pytest.approx(50.0 + 1.0)
    assert probe.due(float(3000)) == pytest.approx(50.0 + 2.0 + 1000 / 100.0)
    # Chaos sizes its default fault window by the same schedule.
    assert expected_seconds(graph) == pytest.approx(2.0 + 8000 / 100.0)
