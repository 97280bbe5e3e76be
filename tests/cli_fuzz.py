"""What the fuzz tests of input files check on every drawn file: `ftctl validate`
refuses it in one line naming the file, or a command that reads it runs without a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from typer.testing import CliRunner

from ftctl.cli import app

runner = CliRunner()

# Derandomized: CI runs the same examples every time, so a failure is a regression.
FUZZ_SETTINGS = settings(deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                HealthCheck.function_scoped_fixture])


def one_line(output: str, name: str) -> None:
    lines = output.strip().splitlines()
    assert len(lines) == 1 and name in lines[0], output
    assert "Traceback" not in output


def validates(path: Path, doc: Any) -> bool:
    """True when `ftctl validate` accepts the file; else asserts a one-line refusal."""
    checked = runner.invoke(app, ["validate", str(path)])
    assert checked.exception is None or isinstance(checked.exception, SystemExit), (
        doc, checked.exception)
    assert checked.exit_code in (0, 2), checked.output
    if checked.exit_code == 2:
        one_line(checked.stderr, str(path))
    return checked.exit_code == 0


def runs(args: list[str], doc: Any) -> dict[str, Any] | None:
    """The JSON summary of a command that exits 0 or 1, None for a one-line refusal."""
    ran = runner.invoke(app, args)
    assert ran.exception is None or isinstance(ran.exception, SystemExit), (
        doc, ran.exception)
    assert ran.exit_code in (0, 1, 2), ran.output
    if ran.exit_code == 2:
        one_line(ran.stderr, "error:")
        return None
    summary: dict[str, Any] = json.loads(ran.stdout)
    return summary
