"""``ftctl run --backend``: the backend reaches the run as given, or is refused in one line.

A run on containers end to end is ``tests/test_docker_chaos.py`` (``ftctl chaos`` goes
through the same ``execute``, exactly-once with every container removed after).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from tests.conftest import ROOT

runner = CliRunner()
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_the_backend_reaches_the_run(backend: str, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    seen: list[Any] = []

    def fake_execute(req: Any) -> int:
        seen.append(req)
        return 0

    monkeypatch.setattr("ftctl.commands.run_cmd.execute", fake_execute)
    res = runner.invoke(app, ["run", str(WORDCOUNT), "--backend", backend, "-p", "checkpoint",
                              "--results", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    (req,) = seen
    assert (req.backend, req.info.name, req.master) == (backend, "checkpoint", None)


def test_an_unknown_backend_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(WORDCOUNT), "--backend", "podman",
                              "--results", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert "--backend" in res.output and "podman" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "r").exists()
