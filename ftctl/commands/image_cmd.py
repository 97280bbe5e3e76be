"""``ftctl image build``: the container image the docker backend runs Spark in."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from ftctl.commands.cluster_cmds import cli_errors, spinner
from ftctl.console import console

image_app = typer.Typer(
    name="image",
    help=(
        "Build the image of the docker cluster backend. The base is a minimal Debian made "
        "with debootstrap (no registry needed) unless --base names a public image; wheels "
        "are prepared on the host, so the build needs no network inside. Tags are content "
        "hashes: nothing is rebuilt unless the code, the pinned dependencies or the recipe "
        "changed.\n\nExit codes: 0 ok, 2 no Docker engine / bad base, 3 the build failed."
    ),
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")


@image_app.command(
    "build",
    epilog=(
        "Examples:\n\n  ftctl image build\n\n  ftctl image build --force\n\n"
        "  ftctl image build --base python:3.11-slim-bookworm   (needs Java in the image)"
    ),
)
def build(
    base: Annotated[
        str | None,
        typer.Option("--base", help="Build on this image (python3 + Java 17+) instead of "
                     "a debootstrap'd Debian."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild the images without the layer cache.")
    ] = False,
    fresh_base: Annotated[
        bool, typer.Option("--fresh-base", help="Also redo debootstrap (ignore the cached "
                           "base tarball).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Build (or find cached) the worker image for the current code.

    Examples:

      ftctl image build

      ftctl image build --base python-java17:local --force
    """
    from ftctl.docker.image import build_image

    with cli_errors():
        started = time.monotonic()
        with spinner("building the ftctl image", quiet=as_json) as say:
            result = build_image(base, force=force, fresh_base=fresh_base, progress=say)
        elapsed = time.monotonic() - started
    if as_json:
        console.print_json(json.dumps(result.to_json()))
        return
    what = "built" if result.built else "cached (nothing to rebuild)"
    console.print(f"[green]{result.tag}[/green] {what} in {elapsed:.1f} s")
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in result.steps.items() if k != "total")
    console.print(f"base {result.base} ({result.base_source}); Python {result.python}; {steps}",
                  highlight=False)
