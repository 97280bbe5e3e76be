"""What the docker tests ask the engine directly (not through the code under test)."""

from __future__ import annotations

import functools
from typing import Any

import pytest


@functools.cache
def _no_engine() -> str | None:
    """Why the docker tests cannot run (None: they can); the engine is asked once."""
    from ftctl.docker.engine import docker_host, engine_reachable

    return None if engine_reachable() else (
        f"no Docker engine reachable (DOCKER_HOST={docker_host()})")


def skip_unless_engine() -> None:
    """Skip the calling test, saying why, when no Docker engine answers. Called
    (tests/conftest.py) when a ``docker`` test is about to run, not at import: a
    module-level skip was reported by every run, ``-m browser`` included."""
    why = _no_engine()
    if why is not None:
        pytest.skip(why)


def containers_of(key: str) -> list[Any]:
    """Every container, running or not, labelled with cluster key ``key``."""
    import docker

    from ftctl.docker.meta import LABEL_CLUSTER

    client = docker.from_env()
    try:
        return list(client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={key}"}))
    finally:
        client.close()
