"""``ftctl figure 004-fig5``: at plan level the spec's E4 numbers and the plot; at run level
on the simulation host, queries back in steps at the node arrivals, exactly-once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftctl.config.load import load_topology
from ftctl.figures import FigureOptions, figures
from ftctl.figures.fig_004_fig5 import TOPOLOGY, arrivals
from ftctl.figures.fig_004_runs import baselines, run_fig5
from ftctl.metrics.queries import QueryMetricsParams
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.golden import golden_output
from protocols.registry import get_protocol


def test_paper_arrivals_of_both_samples() -> None:
    assert [round(t, 1) for t in arrivals(1)] == [121.9, 165.4, 165.6, 186.0, 194.8, 208.6,
                                                  256.2, 356.9]
    assert [round(t, 1) for t in arrivals(2)] == [171.0, 196.5, 260.1, 277.6, 281.8, 283.8,
                                                  338.1, 357.0]


def test_fig5_queries_back_per_arrival(tmp_path: Path) -> None:
    res = figures()["004-fig5"].run(FigureOptions(out=tmp_path, options={"level": "plan"}))
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
    res = figures()["004-fig5"].run(FigureOptions(out=tmp_path, options={"scale": scale,
                                                                         "level": "plan"}))
    row = next(r for r in res.rows if r[0] == "PRG Sample-1")
    assert row[3] == f"{121.9 * 0.05:.1f}" and row[2] == "2 4 6 8 10 12 14 15"


def test_fig5_run_level_on_the_simulation_host() -> None:
    """A tiny scale of the run-level figure: 8 sink nodes die at 1 s and return at the
    paper's Sample-1 offsets x 0.005; PRG brings queries back two by two as nodes come,
    OPC all at the last node, both exactly-once. (Availability by RL needs arrivals spread
    over several window slides, scale 0.05: ``ftctl figure 004-fig5``.)"""
    scale = 0.005
    topo = load_topology(TOPOLOGY)
    topo = topo.model_copy(update={"input": topo.input.model_copy(update={"records": 3600})})
    timing = {"interval": 20.0 * scale, "burst_window": 200.0 * scale}
    prg = get_protocol("progressive")
    base = baselines(topo, prg, timing)
    golden = golden_output(ExecutionGraph(topo))
    times = arrivals(1, scale)
    metrics = QueryMetricsParams(step=20.0 * scale)
    runs = {name: run_fig5(name, topo, prg, timing | given, 1.0, times, metrics, base, golden)
            for name, given in [("PRG", {}), ("OPC", {"schedule": "blocking"})]}
    for r in runs.values():
        assert r.exactly_once and r.result.complete, r.name
        assert len(r.recovered) == 15
    prg_back = sorted(runs["PRG"].recovered.values())
    opc_back = sorted(runs["OPC"].recovered.values())
    # PRG: each arrival's two picks start right at it (plus the start delay)
    for k, t in enumerate(times[:7]):
        assert t <= prg_back[2 * k] < t + 0.02 and prg_back[2 * k + 1] < t + 0.02
    assert times[7] <= prg_back[14] < times[7] + 0.02
    assert all(times[7] <= b < times[7] + 0.02 for b in opc_back)
    # Output resumes with the first node under PRG, with the last under OPC; the replayed
    # backlog shows as relative latency far above 1.2 that settles below it once caught up.
    steps = runs["PRG"].availability.t
    for name, resumes in [("PRG", 1.0 + times[0]), ("OPC", 1.0 + times[7])]:
        rl = runs[name].availability.rl
        after = [(t, v) for k, t in enumerate(steps) if t > 1.0
                 for v in [max((x[k] for x in rl.values() if x[k] is not None), default=None)]
                 if v is not None]
        assert resumes - 0.1 <= after[0][0] <= resumes + 0.1, name
        assert max(v for _, v in after) > 3 and after[-1][1] <= 1.2, (name, after)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("given", [{}, {"threshold": "1.5"}])
def test_run_level_takes_the_threshold_like_the_spark_figure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: dict[str, str]) -> None:
    from ftctl.figures import fig_004_fig5

    seen: list[float] = []

    def first_run(*args: object, **kw: object) -> None:
        seen.append(args[6].threshold)  # type: ignore[attr-defined]
        raise _Stop

    monkeypatch.setattr(fig_004_fig5, "baselines", lambda *a: {})
    monkeypatch.setattr(fig_004_fig5, "golden_output", lambda *a: {})
    monkeypatch.setattr(fig_004_fig5, "run_fig5", first_run)
    with pytest.raises(_Stop):
        fig_004_fig5.run(FigureOptions(out=tmp_path, quick=True, options=given))
    assert seen == [float(given.get("threshold", "1.2"))]


@pytest.mark.parametrize("host", ["sim", "spark"])
@pytest.mark.parametrize("value", ["abc", "0", "-1", "inf"])
def test_a_bad_threshold_is_one_line_exit_2_on_both_hosts(tmp_path: Path, host: str,
                                                          value: str) -> None:
    from typer.testing import CliRunner

    from ftctl.cli import app

    res = CliRunner().invoke(app, ["figure", "004-fig5", "--host", host, "--quick",
                                   "--out", str(tmp_path), "--opt", f"threshold={value}"])
    assert res.exit_code == 2, res.output
    assert "threshold" in res.stderr and len(res.stderr.strip().splitlines()) == 1
