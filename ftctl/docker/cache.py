"""Where image-build inputs are cached between runs (outside any repository checkout).

The base root-filesystem tarball and the dependency wheels take minutes to make and do
not change with the project, so they live in a machine-wide cache: ``$FTCTL_CACHE_DIR``,
else ``/var/cache/ftctl`` when writable (root, CI), else ``~/.cache/ftctl``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

CACHE_DIR_ENV = "FTCTL_CACHE_DIR"
_SYSTEM_CACHE = Path("/var/cache/ftctl")


def cache_dir() -> Path:
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        path = Path(configured).expanduser()
    elif _writable(_SYSTEM_CACHE):
        path = _SYSTEM_CACHE
    else:
        path = Path.home() / ".cache" / "ftctl"
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)


def digest(parts: Iterable[bytes | str], length: int = 12) -> str:
    """A short, stable content hash of ``parts`` (length-prefixed, so ("ab","c") != ("a","bc"))."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:length]


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
