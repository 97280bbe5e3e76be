"""Reaching the Docker engine through the Docker SDK (``DOCKER_HOST`` is honoured).

Every docker-backend entry point goes through :func:`connect`, so "no engine" is always
the same one line with exit code 2, whatever command ran into it.
"""

from __future__ import annotations

import os
from typing import Any

from ftctl.cluster.errors import ClusterUsageError, InfraError

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"


class NoDockerEngineError(ClusterUsageError):
    """No Docker engine answers at DOCKER_HOST (or the default socket)."""


def docker_host() -> str:
    """The engine address the SDK will use, for messages."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def no_engine_message() -> str:
    return (
        f"no Docker engine reachable (DOCKER_HOST={docker_host()}): "
        "start dockerd or set DOCKER_HOST"
    )


def connect(timeout: float = 120.0) -> Any:
    """A ``docker.DockerClient`` that has answered a ping.

    The SDK is imported here, not at module level, so the local backend and the rest of
    the CLI work (and start fast) on machines without it.
    """
    try:
        import docker
        import docker.errors
    except ImportError as exc:  # pragma: no cover - docker is a declared dependency
        raise ClusterUsageError(
            "the docker Python package is missing; pip install 'docker>=7'"
        ) from exc
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except docker.errors.DockerException as exc:
        raise NoDockerEngineError(no_engine_message()) from exc
    except OSError as exc:  # socket errors the SDK does not wrap
        raise NoDockerEngineError(no_engine_message()) from exc
    return client


def engine_reachable() -> bool:
    """Whether :func:`connect` would succeed (for tests and CI scripts)."""
    try:
        connect(timeout=5).close()
    except ClusterUsageError:
        return False
    return True


def api_error(what: str, exc: Exception) -> InfraError:
    """One line for an engine error (the SDK's messages embed the whole HTTP exchange)."""
    explanation = getattr(exc, "explanation", None) or str(exc)
    text = str(explanation).strip().splitlines()
    return InfraError(f"{what}: {text[0] if text else type(exc).__name__}")
