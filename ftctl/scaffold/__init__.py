"""``ftctl new protocol``: a pip-installable protocol package to start from.

The package is ``skeleton/`` copied with its names replaced: the protocol name
``protocol-skeleton``, the Python package ``protocol_skeleton`` and the distribution
``ftctl-protocol-skeleton``. The skeleton is an ordinary importable package, so the
conformance kit runs it in ftctl's own tests as ``-p <its import path>:SPEC``.
"""

from __future__ import annotations

import re
from pathlib import Path

SKELETON = Path(__file__).resolve().parent / "skeleton"
NAME, PACKAGE = "protocol-skeleton", "protocol_skeleton"
NAME_RULE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_SKIPPED = {"__pycache__", "__init__.py"}  # the skeleton's own __init__: ftctl's, not theirs


class ScaffoldError(ValueError):
    """A name or directory ``new protocol`` refuses; the message is one line."""


def package_of(name: str) -> str:
    return name.replace("-", "_")


def check_name(name: str, taken: set[str]) -> None:
    if not NAME_RULE.match(name):
        raise ScaffoldError(f"{name!r} is not a protocol name: lower-case letters and digits, "
                            "words joined by '-', starting with a letter")
    if name in taken:
        raise ScaffoldError(f"{name!r} is already a protocol ({', '.join(sorted(taken))} are "
                            "taken)")


def files(name: str) -> dict[Path, str]:
    """Every file of the package for protocol ``name``, by path relative to its root."""
    package = package_of(name)
    out: dict[Path, str] = {}
    for path in sorted(SKELETON.rglob("*")):
        rel = path.relative_to(SKELETON)
        own_init = rel.parts == (PACKAGE, "__init__.py")
        if path.is_dir() or (_SKIPPED & set(rel.parts) and not own_init):
            continue
        target = Path(*(package if p == PACKAGE else p for p in rel.parts))
        if target.suffix == ".in":
            target = target.with_suffix("")
        text = path.read_text()
        out[target] = text.replace(PACKAGE, package).replace(NAME, name)
    return out


def write(name: str, root: Path) -> list[Path]:
    """Write the package into ``root`` (new, or an empty directory); the files written."""
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ScaffoldError(f"{root} already exists and is not an empty directory")
    written = []
    for rel, text in files(name).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
