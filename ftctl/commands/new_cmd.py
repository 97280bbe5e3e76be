"""``ftctl new protocol``: write a protocol package to start from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ftctl.commands.common import user_errors
from ftctl.config.errors import ConfigError
from ftctl.console import console

new_app = typer.Typer(help="Write a new protocol package to start from.", no_args_is_help=True)


@new_app.command("protocol")
@user_errors
def protocol_cmd(
    name: Annotated[str, typer.Argument(help="The protocol's name, e.g. mine: what -p takes.")],
    directory: Annotated[Path | None, typer.Option(
        "--dir", help="Where to write it (new or empty; default: ./NAME).")] = None,
) -> None:
    """Write a pip-installable protocol package: a working protocol (restart from the
    last local snapshot, upstream replay; exactly-once on the bundled topologies), its
    params, four mutants that break it in different ways, and a pytest file running the
    conformance kit on it. Its pyproject declares the ftctl.protocols entry point, so after
    `pip install -e DIR` every command takes `-p NAME`.

    Examples:

      ftctl new protocol mine --dir ../mine

      pip install -e ../mine && ftctl conformance -p mine -n 30
    """
    from ftctl.scaffold import ScaffoldError, check_name, write
    from protocols.registry import PROTOCOLS

    root = directory if directory is not None else Path(name)
    try:
        check_name(name, set(PROTOCOLS))
    except ScaffoldError as exc:
        raise ConfigError("ftctl new protocol", "NAME", str(exc)) from None
    try:
        written = write(name, root)
    except ScaffoldError as exc:
        raise ConfigError("ftctl new protocol", "--dir", str(exc)) from None
    except OSError as exc:
        raise ConfigError(str(root), None, f"cannot write: {exc.strerror or exc}") from None
    console.print(f"wrote {root}: {len(written)} files; protocol {name!r} in package "
                  f"{root / name.replace('-', '_')}", highlight=False)
    console.print(f"next:\n  pip install -e {root}\n  ftctl conformance -p {name} -n 30",
                  highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(new_app, name="new")
