"""The CLI loads only the command it runs; `ftctl --help` lists every command from summaries
that must match the commands themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command

from ftctl.cli import COMMANDS, build_app, summary_app

ROOT = Path(__file__).resolve().parent.parent


def test_the_summaries_are_the_commands_own_and_in_order():
    full = get_command(build_app())
    quick = get_command(summary_app())
    names = full.list_commands(None)  # type: ignore[attr-defined]
    assert names == quick.list_commands(None) == list(COMMANDS)  # type: ignore[attr-defined]
    for name in names:
        real = full.get_command(None, name).get_short_help_str(limit=500)  # type: ignore[attr-defined]
        shown = quick.get_command(None, name).get_short_help_str(limit=500)  # type: ignore[attr-defined]
        assert shown == real, name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_one_command_alone_keeps_its_name(name):
    """Loaded alone, a command is still `ftctl NAME` (typer would otherwise promote a lone
    command to the whole CLI)."""
    group = get_command(build_app(name))
    assert name in group.list_commands(None)  # type: ignore[attr-defined]


def _modules_after(args: list[str]) -> set[str]:
    code = ("import sys\nfrom ftctl.cli import main\nsys.argv = ['ftctl', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('\\n'.join(sys.modules), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=True)
    return set(out.stderr.split())


def test_help_and_validate_import_nothing_heavy():
    heavy = {"pyspark", "matplotlib", "docker", "numpy", "pyarrow", "psutil"}
    helped = _modules_after(["--help"])
    assert "ftctl.commands.sim_cmd" not in helped and "pydantic" not in helped
    assert not heavy & helped
    validated = _modules_after(["validate", str(ROOT / "topologies" / "wordcount.yaml")])
    assert "ftctl.config.load" in validated
    assert not heavy & validated
    assert "ftctl.commands.chaos_cmd" not in validated
