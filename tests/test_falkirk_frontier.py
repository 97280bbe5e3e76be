"""Falkirk Wheel's worked examples (spec section 6) through the pure solver, exactly."""

from __future__ import annotations

import pytest

from protocols.falkirk import examples as X
from protocols.falkirk.fixedpoint import FixedPoint
from protocols.falkirk.frontier import EPOCHS
from protocols.falkirk.mutants import CORRECT
from protocols.falkirk.recovery import plan
from protocols.falkirk.selective import consumed_bar, history_at
from tests.falkirk_cases import (
    EXPECTED,
    SMALL,
    brute_force,
    example_problems,
    fig3_problems,
)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_example_frontiers_replay_orders_watermark_and_gc(name: str) -> None:
    assert example_problems(name) == []


@pytest.mark.parametrize("name", SMALL)
def test_small_examples_are_the_greatest_consistent_choice(name: str) -> None:
    ex = EXPECTED[name][0]()
    assert brute_force(ex.flow, set(ex.failed)) == FixedPoint(ex.flow, ex.failed).solve().fronts


def test_selective_restore_fig3() -> None:
    assert fig3_problems(CORRECT) == []
    history = [(0, "msg", 2), (1, "msg", 5), (0, "msg", 3), (0, "note", None)]
    assert history_at(history, 0, EPOCHS, lambda ev: ev[0]) == [
        (0, "msg", 2), (0, "msg", 3), (0, "note", None)]
    assert consumed_bar(history, 0, EPOCHS, lambda ev: ev[0],
                        lambda ev: ev[1] == "msg") == [0]


def test_only_instances_whose_frontier_moved_roll_back() -> None:
    assert plan(X.sharder_firewall().flow, {"s1"}).rolled_back == ("out@s1", "s1")
    assert plan(X.sharder_ephemeral().flow, {"s1"}).rolled_back == (
        "out@s0", "out@s1", "out@s2", "s0", "s1", "s2", "sharder")
    assert plan(X.fig7b(True).flow, {"y"}).kept == ("p", "q", "r")
    # a failed source restarts at TOP: it is the only one restarted
    assert plan(X.inflight_flow(), {"lines"}).rolled_back == ("lines",)


def test_discarded_downstream_output() -> None:
    # F1: s1 restarts at 3, so whatever out@s1 holds of s1 beyond epoch 3 is void
    assert dict(plan(X.sharder_firewall().flow, {"s1"}).discard) == {"s1>out": 3}
    # G: split0 restarts at 5: both its channels are void beyond 5
    assert dict(plan(X.inflight_flow(), {"split0"}).discard) == {
        "b0": 5, "b1": 5, "o0": 5, "o1": 5}


def test_solver_counts_sweeps_until_nothing_changes() -> None:
    ex = X.fig7a()
    # x starts at its last checkpoint (TOP died with it); y drops reading x, then z
    # reading y, then a sweep that changes nothing: one sweep alone would leave z at TOP
    assert FixedPoint(ex.flow, ex.failed).solve().sweeps == 3


def test_figure_001_fig7_prints_every_example(tmp_path) -> None:
    from ftctl.figures import FigureOptions, figures

    res = figures()["001-fig7"].run(FigureOptions(out=tmp_path))
    rows = {(r[0], r[2]): r for r in res.rows}
    assert rows[("A", "y")][3:5] == ("{e2:4, e5:3}", "rolls back")
    assert rows[("A", "u")][6] == "e1: e1:7 e1:8 e1:9 e1:10"
    assert rows[("F1", "s1")][3:6] == ("<=3", "failed, restarts", "<=3")
    assert rows[("F1", "s0")][3:5] == ("TOP", "keeps running")
    assert rows[("D", "q")][6] == "e6: (1, 4)"
    assert {r[0] for r in res.rows} == set(EXPECTED)
