"""What the docker tests ask the engine directly (not through the code under test)."""

from __future__ import annotations

from typing import Any


def containers_of(key: str) -> list[Any]:
    """Every container, running or not, labelled with cluster key ``key``."""
    import docker

    from ftctl.docker.meta import LABEL_CLUSTER

    client = docker.from_env()
    try:
        return list(client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={key}"}))
    finally:
        client.close()
