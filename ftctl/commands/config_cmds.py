"""Placeholder: filled in by its own change."""

import typer


def register(app: typer.Typer) -> None:
    pass
