"""The figures of ftctl compare, on hand-made series."""

from __future__ import annotations

import pytest

from ftctl.compare.figures import (
    RunFigures,
    add_overheads,
    steady_figures,
    steady_window,
    summarize,
)


def _run(proto: str, recovery: float | None, thr: float, lat: float, ok: bool = True,
         lost: int = 0) -> RunFigures:
    return RunFigures(f"{proto}-{recovery}", proto, ok, lost, 0, 0.1, 0.2, recovery, thr, lat,
                      1000, 0, 1, 10.0)


def test_steady_window_ends_at_the_first_fault() -> None:
    assert steady_window(2.0, [9.0, 5.0]) == (3.0, 5.0)
    assert steady_window(2.0, []) == (3.0, float("inf"))


def test_steady_figures_ignore_start_up_and_what_follows_a_fault() -> None:
    # Tasks starting (zeros), 100 records/s from t=4, a fault at 9, then a replay burst.
    thr = [(t / 2, 0.0) for t in range(8)] + [(4 + t / 2, 100.0 + t % 2) for t in range(10)]
    thr += [(9.5, 2000.0), (10.0, 4000.0)]
    lat = [(5.5, 0.01), (6.5, 0.03), (7.5, 0.02), (9.5, 9.0), (3.0, 5.0)]
    rps, p50 = steady_figures(thr, lat, [9.0])
    # Window: first output (4.0) + warm-up to the fault: the plotted points 5.0..8.5.
    assert rps == pytest.approx(100.5)
    assert p50 == pytest.approx(0.02)
    assert steady_figures([(1.0, 0.0), (2.0, 0.0)], lat, [9.0]) == (None, None)


def test_summary_medians_spread_and_overheads() -> None:
    none = summarize("none", "at-most-once", [_run("none", 1.0, 1000, 0.010, lost=3)])
    ckpt = summarize("checkpoint", "exactly-once",
                     [_run("checkpoint", 2.0, 900, 0.012), _run("checkpoint", 4.0, 900, 0.012),
                      _run("checkpoint", 3.0, 900, 0.012)])
    add_overheads([none, ckpt])
    assert ckpt.recovery_s == 3.0 and ckpt.recovery_spread_s == 2.0
    assert ckpt.throughput_overhead == pytest.approx(0.1)
    assert ckpt.latency_overhead == pytest.approx(0.2)
    assert none.lost == 3 and none.throughput_overhead == 0.0
    bad = summarize("x", "exactly-once", [_run("x", None, 1, 1), _run("x", None, 1, 1, ok=False)])
    assert not bad.guarantee_held and bad.recovery_s is None


def test_summary_gives_the_scope_of_recovery() -> None:
    runs = [_run("falkirk", 1.0, 900, 0.01), _run("falkirk", 1.0, 900, 0.01),
            _run("falkirk", 1.0, 900, 0.01)]
    for r, (restarts, replayed) in zip(runs, [(2, 400), (6, 100), (3, 250)], strict=True):
        r.restarts, r.replayed = restarts, replayed
    f = summarize("falkirk", "exactly-once", runs)
    assert (f.restarts, f.replayed) == (3.0, 250.0)  # medians over the repeats


def test_summary_gives_the_median_first_output_after_a_fault() -> None:
    runs = [_run("causal", 2.0, 900, 0.01) for _ in range(3)]
    for r, first in zip(runs, [0.4, None, 0.2], strict=True):
        r.first_output_s = first
    f = summarize("causal", "exactly-once", runs)
    assert f.first_output_s == pytest.approx(0.3)  # a run without one does not count
    assert f.to_json()["first_output_s"] == f.first_output_s


def test_summary_gives_the_median_breakdown_and_every_restarts_start() -> None:
    runs = [_run("checkpoint", 1.0, 100.0, 0.01), _run("checkpoint", 3.0, 100.0, 0.01),
            _run("checkpoint", 2.0, 100.0, 0.01)]
    for r, (start, how) in zip(runs, [(0.2, {"slot": 6}), (0.4, {"slot": 5, "job": 1}),
                                      (0.3, {"queued": 5, "slot": 1})], strict=True):
        r.breakdown = {"detect": 0.1, "plan": 0.01, "start": start, "replay": 0.1,
                       "catch_up": None if start == 0.4 else 1.0, "restarts": 6,
                       "started_by": how}
    b = summarize("checkpoint", "exactly-once", runs).breakdown
    assert b["start"] == pytest.approx(0.3) and b["detect"] == pytest.approx(0.1)
    assert b["catch_up"] == pytest.approx(1.0)  # the run that never settled has none
    assert b["started_by"] == {"slot": 12, "job": 1, "queued": 5}
