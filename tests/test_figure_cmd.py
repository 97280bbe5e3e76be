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
