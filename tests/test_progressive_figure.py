"""``ftctl figure 004-fig5`` at plan level: the spec's E4 numbers and the plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftctl.figures import FigureOptions, figures
from ftctl.figures.fig_004_fig5 import arrivals


def test_paper_arrivals_of_both_samples() -> None:
    assert [round(t, 1) for t in arrivals(1)] == [121.9, 165.4, 165.6, 186.0, 194.8, 208.6,
                                                  256.2, 356.9]
    assert [round(t, 1) for t in arrivals(2)] == [171.0, 196.5, 260.1, 277.6, 281.8, 283.8,
                                                  338.1, 357.0]


def test_fig5_queries_back_per_arrival(tmp_path: Path) -> None:
    res = figures()["004-fig5"].run(FigureOptions(out=tmp_path))
    rows = {r[0]: r for r in res.rows}
    assert rows["PRG Sample-1"][2] == "2 4 6 8 10 12 14 15"
    assert rows["PRG Sample-2"][2] == "2 4 6 8 10 12 14 15"
    assert rows["topological Sample-1"][2] == "0 1 2 3 4 4 9 15"
    assert rows["OPC Sample-1"][2] == "0 0 0 0 0 0 0 15"
    assert rows["checkpoint Sample-1"][2] == "0 0 0 0 0 0 0 15"
    assert rows["BestCase"][3:] == ("180.0", "180.0", "180.0")
    means = [rows[n][5] for n in ("PRG Sample-1", "topological Sample-1", "OPC Sample-1")]
    assert means == ["196.9", "275.6", "356.9"] and rows["PRG Sample-2"][5] == "265.0"
    picks = res.summary["PRG Sample-1"]["picks"]  # type: ignore[index]
    assert picks[0] == ["out1", "out2"] and picks[-1] == ["out15"]
    assert res.files[0].stat().st_size > 10_000


@pytest.mark.parametrize("scale", ["0.05"])
def test_scaled_arrivals(tmp_path: Path, scale: str) -> None:
    res = figures()["004-fig5"].run(FigureOptions(out=tmp_path, options={"scale": scale}))
    row = next(r for r in res.rows if r[0] == "PRG Sample-1")
    assert row[3] == f"{121.9 * 0.05:.1f}" and row[2] == "2 4 6 8 10 12 14 15"
