"""``ftctl figure``: the listing and its errors (each figure tests its own output)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.figures import figures


def test_unknown_figure_is_one_line_exit_2(tmp_path):
    res = CliRunner().invoke(app, ["figure", "999-nope", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "unknown figure '999-nope'" in res.output
    assert "Traceback" not in res.output


def test_listing_names_every_registered_figure():
    res = CliRunner().invoke(app, ["figure", "--json"])
    assert res.exit_code == 0
    listed = {f["name"] for f in json.loads(res.output)}
    assert listed == set(figures())
    for fig in figures().values():
        assert fig.name.startswith(fig.paper + "-")
        assert set(fig.hosts) <= {"sim", "spark"}


def test_help_with_a_figure_name_lists_its_options():
    res = CliRunner().invoke(app, ["figure", "004-fig5", "--help"])
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    assert "threshold=" in text and "default 1.2" in text and "both hosts" in text
    assert "mini_batch=" in text
    plain = " ".join(CliRunner().invoke(app, ["figure", "--help"]).output.split())
    assert "threshold=" not in plain  # no figure named: no figure's options


def test_list_gives_every_figure_a_line() -> None:
    res = CliRunner().invoke(app, ["figure", "list"])
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    for fig in figures().values():
        assert fig.name in text
    assert "against aggregated state" in text  # 000-fig2's description


def _fake(files: bool):  # type: ignore[no-untyped-def]
    from ftctl.figures import Figure, FigureOptions, FigureResult

    def run(opts: FigureOptions) -> FigureResult:
        written = ()
        if files:
            (opts.out / "plot.png").write_bytes(b"png")
            (opts.out / "points.json").write_text("[]")
            written = (opts.out / "plot.png", opts.out / "points.json")
        return FigureResult("a table", ("x",), ((1,),), files=written)

    return Figure("999-fake", "999", "fake", ("sim",), run)


def test_figure_says_where_its_plot_is_or_that_it_has_none(tmp_path, monkeypatch) -> None:
    import ftctl.commands.figure_cmd as cmd

    for files in (False, True):
        monkeypatch.setattr(cmd, "figures", lambda f=files: {"999-fake": _fake(f)})
        out = tmp_path / f"out-{files}" / "figures"
        res = CliRunner().invoke(app, ["figure", "999-fake", "--out", str(out)])
        assert res.exit_code == 0, res.output
        text = " ".join(res.output.split())
        if files:
            assert f"plot: {out / '999-fake' / 'plot.png'}" in text
            assert f"data: {out / '999-fake' / 'points.json'}" in text
            assert "no plot" not in text
        else:
            assert "this figure has no plot" in text and "plot: " not in text
            # Nothing written: not even the folders --out named were left behind.
            assert not (tmp_path / f"out-{files}").exists()


def test_a_run_that_did_not_finish_is_one_line_exit_1(tmp_path, monkeypatch) -> None:
    import ftctl.commands.figure_cmd as cmd
    from ftctl.figures import Figure, FigureRunFailed

    def run(options):
        (options.out / "runs").mkdir()
        raise FigureRunFailed("causal at 16000/s: the Spark run did not finish")

    monkeypatch.setattr(cmd, "figures", lambda: {"999-fake": Figure(
        "999-fake", "999", "fake", ("sim",), run)})
    res = CliRunner().invoke(app, ["figure", "999-fake", "--out", str(tmp_path)])
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) <= 3
    assert "999-fake: causal at 16000/s: the Spark run did not finish" in text
    assert str(tmp_path / "999-fake") in text
    assert (tmp_path / "999-fake" / "runs").is_dir()  # nothing already written is lost
