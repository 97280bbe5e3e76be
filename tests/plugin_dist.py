"""Make a protocol distribution visible to ``importlib.metadata`` without pip or network:
its source directory on ``sys.path`` and a hand-written ``.dist-info`` whose
``entry_points.txt`` declares the ``ftctl.protocols`` entries, as an install would."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from protocols.registry import PROTOCOLS

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "protocol_plugin"


def write_dist_info(site: Path, dist: str, version: str, entries: Mapping[str, str]) -> Path:
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[ftctl.protocols]\n{lines}")
    return info


@contextmanager
def installed(site: Path, source: Path, dist: str, version: str,
              entries: Mapping[str, str]) -> Iterator[None]:
    """``dist`` installed for this process and for processes it starts (PYTHONPATH), then
    removed again: sys.path, the environment, imported modules and the registry's cache."""
    write_dist_info(site, dist, version, entries)
    paths = [str(site), str(source)]
    before_env = os.environ.get("PYTHONPATH")
    before_mods = set(sys.modules)
    sys.path[:0] = paths
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [before_env])])
    PROTOCOLS.rescan()
    try:
        yield
    finally:
        for p in paths:
            sys.path.remove(p)
        if before_env is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before_env
        for name in set(sys.modules) - before_mods:
            if getattr(sys.modules[name], "__file__", None) and str(
                    sys.modules[name].__file__).startswith(str(source)):
                del sys.modules[name]
        PROTOCOLS.rescan()
