"""docs/writing-a-protocol.md works as written: its ``bash`` blocks run in order (``ftctl``
through the CLI, ``pip install -e`` as an entry-point install, pytest in a subprocess),
each with the exit code its ``# exit N`` comment names (else 0); its ``diff`` blocks are
applied; every line of a ``text`` block after a command appears in that command's output."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from contextlib import ExitStack
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import ROOT
from tests.plugin_dist import installed

DOC = ROOT / "docs" / "writing-a-protocol.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
runner = CliRunner()


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(DOC.read_text())]


def apply_diff(diff: str, cwd: Path) -> None:
    """A unified diff without line numbers: each ``@@`` hunk's context and removed lines
    must occur once in the file; they become its context and added lines."""
    lines = diff.splitlines()
    path = cwd / lines[0].removeprefix("--- ")
    text = path.read_text()
    body = lines[2:]
    hunks: list[list[str]] = [[]]
    for line in body:
        if line.startswith("@@"):
            hunks.append([])
        else:
            hunks[-1].append(line)
    for hunk in filter(None, hunks):
        old = "".join(line[1:] + "\n" for line in hunk if not line.startswith("+"))
        new = "".join(line[1:] + "\n" for line in hunk if not line.startswith("-"))
        assert text.count(old) == 1, f"{path}: hunk not found once:\n{old}"
        text = text.replace(old, new)
    path.write_text(text)


def forget_modules_under(root: Path) -> None:
    from protocols.registry import PROTOCOLS

    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(root)):
            del sys.modules[name]
    PROTOCOLS.rescan()


def test_the_tutorial_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ftctl.cli import app

    checkout = tmp_path / "ftctl"
    checkout.mkdir()
    (checkout / "topologies").symlink_to(ROOT / "topologies")
    (checkout / "chaos").symlink_to(ROOT / "chaos")
    monkeypatch.chdir(checkout)
    ran: list[str] = []
    last_output = ""
    with ExitStack() as stack:
        for kind, body in blocks():
            if kind == "diff":
                apply_diff(body, checkout)
                forget_modules_under(tmp_path)  # each command of the page is a new process
                continue
            if kind == "text" and ran:
                for line in filter(None, (raw.strip() for raw in body.splitlines())):
                    assert line in last_output, (ran[-1], line, last_output[-3000:])
                continue
            if kind != "bash":
                continue
            for raw in body.splitlines():
                command, _, comment = raw.partition("#")
                want = int(m.group(1)) if (m := re.match(r"\s*exit (\d+)", comment)) else 0
                argv = shlex.split(command)
                if not argv:
                    continue
                ran.append(command.strip())
                if argv[0] == "ftctl":
                    res = runner.invoke(app, argv[1:])
                    last_output = res.output
                    assert res.exit_code == want, (command, res.output[-3000:])
                elif argv[:3] == ["pip", "install", "-e"]:
                    root = (checkout / argv[3]).resolve()
                    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
                    stack.enter_context(installed(
                        tmp_path / "site", root, project["name"], project["version"],
                        project["entry-points"]["ftctl.protocols"]))
                elif "pytest" in argv:
                    env_items = [a for a in argv if "=" in a and a.split("=")[0].isupper()]
                    rest = argv[len(env_items):]
                    assert rest[:3] == ["python", "-m", "pytest"], command
                    env = {**os.environ, **dict(a.split("=", 1) for a in env_items),
                           "PYTHONPATH": os.pathsep.join(
                               [str(ROOT), os.environ.get("PYTHONPATH", "")])}
                    out = subprocess.run([sys.executable, *rest[1:], "-p", "no:cacheprovider"],
                                         capture_output=True, text=True, env=env)
                    last_output = out.stdout + out.stderr
                    assert out.returncode == want, (command, last_output[-3000:])
                else:
                    raise AssertionError(f"the test cannot run {command!r}: teach it or "
                                         "change the page")
    assert any(c.startswith("ftctl conformance -p mine") for c in ran)
    assert any("mine/trim-received" in c for c in ran)
