"""Command help as a reader sees it at any terminal width.

Typer's Rich help keeps the line breaks of a docstring's paragraphs and wraps each line
again at the terminal's width, so a docstring written to 92 columns read at 80 breaks
after every line, a word or two short. ``reflow`` joins the lines of each prose
paragraph, so that Rich wraps it once; indented lines (examples, lists of commands) keep
their breaks.
"""

from __future__ import annotations

import inspect

import typer


def reflow(doc: str) -> str:
    """``doc`` with each prose paragraph on one line; indented or bulleted lines kept."""
    out = []
    for para in inspect.cleandoc(doc).split("\n\n"):
        lines = para.splitlines()
        if any(line.startswith((" ", "- ", "* ", "\b")) for line in lines):
            out.append(para)
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def reflow_app(app: typer.Typer) -> None:
    """Reflow the help of every command of ``app`` and of its sub-apps."""
    for cmd in app.registered_commands:
        doc = cmd.help or (cmd.callback.__doc__ if cmd.callback else None)
        if doc:
            cmd.help = reflow(doc)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            reflow_app(group.typer_instance)
