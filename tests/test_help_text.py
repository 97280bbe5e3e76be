"""Every command's ``--help`` reads as prose at 80 columns: a paragraph wraps once, at the
width, not after every line of its docstring."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from ftctl.helptext import reflow

COMMANDS = ["run", "chaos", "sim", "compare protocols", "gate", "conformance", "figure",
            "validate", "cluster up", "new protocol"]


def _paragraphs(text: str) -> list[list[str]]:
    """The prose paragraphs of a help screen's description (before the first box)."""
    body = text.split("╭", 1)[0].splitlines()
    usage = next(i for i, line in enumerate(body) if "Usage:" in line)
    paras: list[list[str]] = [[]]
    for line in body[usage + 1:]:
        stripped = line.rstrip()
        if not stripped.strip():
            paras.append([])
        elif not stripped.startswith("   "):  # deeper lines are examples
            paras[-1].append(stripped)
    return [p for p in paras if p]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_paragraphs_fill_the_width(command: str) -> None:
    from ftctl.cli import app

    res = CliRunner().invoke(app, [*command.split(), "--help"],
                             env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert res.exit_code == 0, res.output
    out = res.output
    assert max(len(line) for line in out.splitlines()) <= 80
    for para in _paragraphs(out):
        # every line but a paragraph's last ends near the width: none breaks early
        short = [line for line in para[:-1] if len(line) < 60]
        assert not short, (command, para)


def test_reflow_joins_prose_and_keeps_examples_and_lists() -> None:
    doc = """Run it.

    A long sentence
    that goes on.

    Examples:

      ftctl gate
      ftctl gate --list

    - one item
    - another
    """
    assert reflow(doc) == ("Run it.\n\nA long sentence that goes on.\n\nExamples:\n\n"
                           "  ftctl gate\n  ftctl gate --list\n\n- one item\n- another")


def _commands() -> list[tuple[list[str], str]]:
    """Every leaf command's words and docstring."""
    import typer.main

    from ftctl.cli import app

    out: list[tuple[list[str], str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out.append((path, "\n\n".join(getattr(cmd, attr, None) or ""
                                            for attr in ("help", "epilog"))))

    walk(typer.main.get_command(app), [])
    return out


def test_every_command_shows_examples_each_line_whole_at_80_columns() -> None:
    # A command split by the terminal is a command a user copies wrong: each line of an
    # example (a long one goes on after a backslash) must fit the width as it is.
    from ftctl.cli import app

    commands = _commands()
    assert len(commands) >= len(COMMANDS)
    broken, without = [], []
    for path, doc in commands:
        parts = re.split(r"\bExamples?:", doc, maxsplit=1)
        examples = [line.strip() for line in parts[-1].splitlines()
                    if len(parts) == 2 and line.strip()]
        if not examples:
            without.append(" ".join(path))
            continue
        res = CliRunner().invoke(app, [*path, "--help"],
                                 env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
        shown = [line.strip() for line in res.output.splitlines()]
        broken += [(" ".join(path), ex) for ex in examples
                   if not any(line == ex for line in shown)]
    assert not broken, broken
    assert not without, f"commands whose help shows no example: {without}"
