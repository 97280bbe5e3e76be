"""Queries in the topology YAML (papers/004: a query is a sink and what it needs, with a
priority) and the per-query metrics of Fig. 5: relative latency and available queries."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.config.load import load_topology
from ftctl.metrics.queries import (
    QueryAvailability,
    QueryMetricsParams,
    available_over_time,
    before_fault,
    came_back,
    fault_free,
    query_availability,
    relative_latency,
    up_intervals,
)
from ftctl.runtime.queries import topology_queries

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"
SMALL = (TOPOLOGIES / "progressive-small.yaml").read_text()
LINE = SMALL.splitlines().index("  - {sink: out3, priority: 2}") + 1


def test_queries_are_derived_with_priorities() -> None:
    topo = load_topology(TOPOLOGIES / "progressive-small.yaml")
    got = [(q.name, sorted(q.operators), q.priority) for q in topology_queries(topo)]
    assert got == [
        ("out1", ["cnt", "ones", "out1", "tags"], 1.0),
        ("out2", ["ones", "out2", "tags", "win"], 1.0),
        ("out3", ["both", "cnt", "ones", "out3", "tags", "win"], 2.0),
    ]


@pytest.mark.parametrize(("replace", "message"), [
    ("{sink: out3, priority: 2}", None),
    ("{sink: out9, priority: 2}",
     "+0: queries[0].sink: no sink named 'out9' (sinks: out1, out2, out3)"),
    ("{sink: cnt}",
     "+0: queries[0].sink: 'cnt' is a count, not a sink (sinks: out1, out2, out3)"),
    ("{sink: out3, priority: -2}", "+0: queries[0].priority: must be > 0.0, got -2"),
    ("{sink: out3, priority: 0}", "+0: queries[0].priority: must be > 0.0, got 0"),
    ("{sink: out3, weight: 2}", "+0: queries[0]: unknown field 'weight'"),
    ("{sink: out3}\n  - {sink: out3, priority: 3}",
     "+1: queries[1].sink: query 'out3' is already given (queries[0])"),
])
def test_bad_queries_exit_2_with_one_line(tmp_path: Path, replace: str,
                                          message: str | None) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(SMALL.replace("{sink: out3, priority: 2}", replace))
    result = CliRunner().invoke(app, ["validate", str(path)])
    out = result.output  # stdout and stderr together
    assert "Traceback" not in out
    if message is None:
        assert result.exit_code == 0, out
        return
    assert result.exit_code == 2
    offset, text = message.split(": ", 1)
    assert f"t.yaml:{LINE + int(offset)}: {text}" in out and len(out.strip().splitlines()) == 1


# ---------------------------------------------------------------- metrics

# Two queries, latency points every 0.5 s; the fault at t = 10.
SERIES = {
    "out1": [(8.0, 0.1), (8.5, 0.1), (9.0, 0.1), (9.5, 0.1),  # before: 0.1 s
             (12.0, 0.5), (12.5, 0.3),  # back at 12 but slow
             (14.0, 0.11), (14.5, 0.12), (16.0, 0.1), (16.5, 0.1)],
    "out2": [(8.0, 0.2), (9.0, 0.2), (9.5, 0.2),
             (16.0, 0.3), (16.5, 0.2)],
}
PARAMS = QueryMetricsParams(step=2.0, baseline_window=2.0)


def test_baselines() -> None:
    assert before_fault(SERIES, 10.0, PARAMS) == {"out1": 0.1, "out2": 0.2}
    assert before_fault(SERIES, 10.0, QueryMetricsParams(min_baseline_points=4)) == \
        {"out1": 0.1, "out2": None}
    assert fault_free({"a": [(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)], "b": []}) == \
        {"a": 2.0, "b": None}


def test_relative_latency_and_available_queries() -> None:
    assert relative_latency(SERIES["out1"], 0.1, [12.0, 14.0], 2.0) == \
        [pytest.approx(4.0), pytest.approx(1.15)]
    assert relative_latency(SERIES["out1"], None, [12.0], 2.0) == [None]
    av = query_availability(SERIES, {"out1": 0.1, "out2": 0.2}, 8.0, 16.5, PARAMS,
                            t_fault=10.0)
    assert av.t == [8.0, 10.0, 12.0, 14.0, 16.0]
    assert av.rl["out1"] == [1.0, None, pytest.approx(4.0), pytest.approx(1.15),
                             pytest.approx(1.0)]
    assert av.rl["out2"] == [1.0, None, None, None, pytest.approx(1.25)]
    assert av.available == [2, 0, 0, 1, 1]  # out2 at 1.25 is above 1.2
    assert av.mean_rl == [1.0, None, pytest.approx(4.0), pytest.approx(1.15),
                          pytest.approx(1.125)]
    assert av.back == {"out1": 14.0, "out2": None}
    loose = query_availability(SERIES, {"out1": 0.1, "out2": 0.2}, 8.0, 16.5,
                               PARAMS.model_copy(update={"threshold": 1.3}), t_fault=10.0)
    assert loose.available == [2, 0, 0, 1, 2] and loose.back == {"out1": 14.0, "out2": 16.0}
    doc = av.to_json()
    assert doc["available"] == [2, 0, 0, 1, 1] and doc["total"] == 2


def test_came_back_needs_to_stay() -> None:
    steps = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert came_back(steps, [1.0, 1.0, 3.0, 1.0, 1.1], 1.2, 0.5) == 3.0
    assert came_back(steps, [1.0, 1.0, 1.0, 1.0, 2.0], 1.2, 0.5) is None
    assert came_back(steps, [1.0, None, 1.0, 1.0, 1.0], 1.2, 0.5) == 2.0


def test_up_intervals_follow_node_down_and_restarts() -> None:
    queries = {"q1": frozenset({"a", "s1"}), "q2": frozenset({"a", "b", "s2"})}
    ops = {"a[0]": "a", "b[0]": "b", "s1[0]": "s1", "s2[0]": "s2"}
    # A version 1 history (read through upgrade_v1) works as well as the sim's own.
    events = [{"t": 1.0, "event": "node-down", "node": "w1", "instances": ["b[0]", "s1[0]"]},
              {"t": 1.5, "event": "plan"},
              {"t": 2.0, "event": "restarted", "instance": "s1[0]"},
              {"t": 3.0, "event": "fault", "instances": ["a[0]"]},
              {"t": 3.5, "event": "restarted", "instance": "a[0]"},
              {"t": 4.0, "event": "restarted", "instance": "b[0]"}]
    up = up_intervals(events, queries, ops, end=9.0)
    assert up == {"q1": [(0.0, 1.0), (2.0, 3.0), (3.5, 9.0)], "q2": [(0.0, 1.0), (4.0, 9.0)]}


def test_available_needs_running_and_a_low_rl_since_the_restart() -> None:
    avail = QueryAvailability(t=[0.0, 1.0, 2.0, 3.0, 4.0],
                              rl={"q1": [1.0, None, 5.0, None, 1.1],
                                  "q2": [1.0, None, None, 1.0, None]},
                              baselines={}, threshold=1.2)
    up = {"q1": [(0.0, 1.5), (2.2, 9.0)], "q2": [(0.0, 9.0)]}
    # q1: available at 0 (RL 1.0); down at the end of step 1; back at 2.2 but its only
    # RL since is 5.0 in step 2 until 1.1 in step 4. q2 keeps its last RL through gaps.
    assert available_over_time(avail, up) == [2, 1, 1, 1, 2]
