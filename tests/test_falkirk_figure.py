"""``ftctl figure 001-policies``: falkirk's policy mixes against checkpoint's global
rollback on the same schedules; the invariants its table must show."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftctl.figures import FigureOptions, figures
from ftctl.figures.fig_001_policies import BASELINE, MIXES, Run, comparisons, measure, table

pytestmark = pytest.mark.sim

SIZES = {"wordcount": 6, "diamond": 11}


@pytest.fixture(scope="module")
def runs() -> list[Run]:
    out = []
    for t in SIZES:
        out += measure(t, [BASELINE, *MIXES], seeds=3, burst=1)
    return out


def test_every_schedule_is_exactly_once(runs: list[Run]) -> None:
    assert len(runs) == len(SIZES) * 3 * (1 + len(MIXES))
    assert all(r.exactly_once for r in runs)
    assert sum(r.failures for r in runs) > 0


def test_checkpoint_restarts_everything_falkirk_no_more(runs: list[Run]) -> None:
    for r in runs:
        if r.config == BASELINE and r.restarted:
            assert r.restarted == SIZES[r.topology] * r.failures  # global rollback
        assert r.restarted <= SIZES[r.topology] * r.failures
    versus = comparisons(runs)
    assert set(versus) == set(MIXES)
    for mix, counts in versus.items():
        assert counts["more"] == 0, mix
        assert counts["fewer"] + counts["same"] > 0, mix


def test_a_firewall_narrows_the_rollback(runs: list[Run]) -> None:
    """Logging stateless operators stop the upward spread: on each topology the firewall
    mixes restart fewer instances per failure (median) than the defaults."""
    rows = {(r[0], r[1]): r for r in table(runs, SIZES)}
    for t in SIZES:
        default = float(rows[(t, "default")][4])
        assert float(rows[(t, "firewall")][4]) < default
        assert float(rows[(t, "eager-firewall")][4]) < default
        assert float(rows[(t, BASELINE)][6]) == 1.0  # the fraction column
        assert all(rows[(t, c)][9] == 0 for c in (BASELINE, *MIXES))  # no violations


def test_the_figure_runs_from_the_registry(tmp_path: Path) -> None:
    fig = figures()["001-policies"]
    res = fig.run(FigureOptions(out=tmp_path, quick=True,
                                options={"topologies": "diamond", "seeds": "2",
                                         "mixes": "firewall"}))
    assert [r[1] for r in res.rows] == [BASELINE, "firewall"]
    assert res.summary["all_exactly_once"]
    assert {p.name for p in res.files} == {"runs.json", "policies.csv", "policies.png"}
    assert all(p.stat().st_size > 0 for p in res.files)
