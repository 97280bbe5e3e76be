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
