"""What the docker tests ask the engine directly (not through the code under test)."""

from __future__ import annotations

from typing import Any

import pytest


def skip_unless_engine() -> None:
    """Skip the calling test module, saying why, when no Docker engine answers."""
    from ftctl.docker.engine import docker_host, engine_reachable

    if not engine_reachable():
        pytest.skip(f"no Docker engine reachable (DOCKER_HOST={docker_host()})",
                    allow_module_level=True)


def containers_of(key: str) -> list[Any]:
    """Every container, running or not, labelled with cluster key ``key``."""
    import docker

    from ftctl.docker.meta import LABEL_CLUSTER

    client = docker.from_env()
    try:
        return list(client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={key}"}))
    finally:
        client.close()
