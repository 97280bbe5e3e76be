"""A user's function that returns what its operator cannot use, or raises, ends the run
in one line naming the operator and its function field (exit 2), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ftctl.cli import app
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.sim

runner = CliRunner()


def _with_function(tmp_path: Path, function: str) -> Path:
    doc = yaml.safe_load((TOPOLOGIES / "wordcount.yaml").read_text())
    doc["operators"][1]["function"] = function
    path = tmp_path / "fn.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _refused(args: list[str], *words: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(("function", "why"), [
    ("json:dumps", "'json:dumps' returned str, not a list of records"),  # a str iterates
    ("json:loads", "'json:loads' raised TypeError"),  # a tuple is not JSON text
])
def test_a_flat_map_function_that_breaks_is_one_line(tmp_path: Path, function: str,
                                                      why: str) -> None:
    path = _with_function(tmp_path, function)
    for args in (["sim", str(path), "-n", "1"], ["validate", str(path), "--determinism", "1"]):
        _refused(args, str(path), "operators[1].function", "operator 'split'", why)
