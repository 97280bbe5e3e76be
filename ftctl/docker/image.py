"""``ftctl image build``: the worker image, built from wheels prepared on the host.

Three layers of caching, from slow to fast to redo:

1. the base (debootstrap'd Debian, ``ftctl-base:<recipe hash>``, tarball cached on disk);
2. the dependency image (``ftctl-deps:<hash of Dockerfile.deps, base id, wheel names>``);
3. the final image (``ftctl:<hash of Dockerfile, entry script, deps tag, project wheel>``).

Each tag is a content hash of its inputs, so "is it built?" is one image lookup, and a
project change rebuilds only layer 3 (seconds).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ftctl.cluster.errors import ClusterUsageError, InfraError
from ftctl.docker import wheels
from ftctl.docker.base import BaseRecipe, ensure_base
from ftctl.docker.cache import cache_dir, digest, file_digest
from ftctl.docker.engine import api_error, connect

IMAGE_REPO = "ftctl"
DEPS_REPO = "ftctl-deps"
# Builds send large contexts and import large tarballs; the SDK's 60 s default is too short.
BUILD_TIMEOUT = 1800.0

Progress = Callable[[str], None]


@dataclass
class ImageBuild:
    """What ``build_image`` did; ``built`` False means every layer came from cache."""

    tag: str
    built: bool
    seconds: float
    base: str
    base_source: str  # "image", "tarball", "debootstrap" or "given"
    steps: dict[str, float] = field(default_factory=dict)
    python: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag, "built": self.built, "seconds": round(self.seconds, 2),
            "base": self.base, "base_source": self.base_source, "python": self.python,
            "steps": {k: round(v, 2) for k, v in self.steps.items()},
        }  # fmt: skip


def _resource(name: str) -> bytes:
    return (resources.files("ftctl.docker") / name).read_bytes()


def build_image(
    base: str | None = None,
    *,
    force: bool = False,
    fresh_base: bool = False,
    progress: Progress | None = None,
    client: Any = None,
) -> ImageBuild:
    """Make sure the worker image for the current code exists; build what is missing.

    ``base``: a public image with python3 (the driver's minor version) and Java 17+ to
    build on instead of the debootstrap'd Debian, where a registry is reachable.
    ``force``: rebuild the deps and final images without the layer cache.
    ``fresh_base``: also redo debootstrap (ignores the cached tarball).
    """
    say = progress or (lambda _msg: None)
    start = time.monotonic()
    steps: dict[str, float] = {}
    owned = client is None
    client = client or connect(timeout=BUILD_TIMEOUT)
    try:
        t = time.monotonic()
        base_tag, base_id, base_source = _base(client, base, fresh_base, say)
        steps["base"] = time.monotonic() - t

        t = time.monotonic()
        pins = wheels.runtime_pins()
        wheel_dir = wheels.dependency_wheels(pins, say)
        wheel_names = sorted(p.name for p in wheel_dir.glob("*.whl"))
        steps["wheels"] = time.monotonic() - t

        deps_file = _resource("Dockerfile.deps")
        deps_tag = f"{DEPS_REPO}:{digest([deps_file, base_id, wheels.python_tag(), *wheel_names])}"
        with tempfile.TemporaryDirectory(prefix="ftctl-image-") as tmp:
            ctx = Path(tmp)
            project = wheels.project_wheel(ctx / "project", wheels.project_version())
            final_file, entry = _resource("Dockerfile"), _resource("ftctl-entry")
            tag = f"{IMAGE_REPO}:{digest([final_file, entry, deps_tag, file_digest(project)])}"
            if not force and _exists(client, tag):
                steps["total"] = time.monotonic() - start
                return ImageBuild(tag, False, steps["total"], base_tag, base_source, steps,
                                  wheels.python_tag())
            t = time.monotonic()
            if force or not _exists(client, deps_tag):
                say(f"building {deps_tag} ({len(wheel_names)} wheels)")
                deps_ctx = ctx / "deps"
                deps_ctx.mkdir()
                (deps_ctx / "Dockerfile.deps").write_bytes(deps_file)
                wheels.copy_wheels(wheel_dir, deps_ctx / "wheels")
                (deps_ctx / "wheels" / "pins.txt").write_text("\n".join(pins) + "\n")
                _docker_build(client, deps_ctx, "Dockerfile.deps", deps_tag,
                              {"BASE": base_tag, "PYTHON_MINOR": wheels.python_tag()}, force, say)
            steps["deps_image"] = time.monotonic() - t

            t = time.monotonic()
            say(f"building {tag}")
            (ctx / "Dockerfile").write_bytes(final_file)
            (ctx / "ftctl-entry").write_bytes(entry)
            labels = {"ftctl.python": wheels.python_tag(), "ftctl.base": base_tag}
            _docker_build(client, ctx, "Dockerfile", tag, {"DEPS": deps_tag}, force, say,
                          labels=labels)
            client.images.get(tag).tag(IMAGE_REPO, "latest")  # a stable name for people
            steps["image"] = time.monotonic() - t
        steps["total"] = time.monotonic() - start
        return ImageBuild(tag, True, steps["total"], base_tag, base_source, steps,
                          wheels.python_tag())
    finally:
        if owned:
            client.close()


def _base(client: Any, base: str | None, fresh: bool, say: Progress) -> tuple[str, str, str]:
    """``(tag, image id, source)`` of the image to build on."""
    if base is not None:
        return base, _given_base_id(client, base, say), "given"
    recipe = BaseRecipe()
    if wheels.python_tag() != recipe.python:
        raise ClusterUsageError(
            f"the driver runs Python {wheels.python_tag()} but the Debian {recipe.suite} base "
            f"has Python {recipe.python}, and PySpark needs the same minor version: run ftctl "
            f"with Python {recipe.python}, or pass --base IMAGE with Python "
            f"{wheels.python_tag()} and Java 17+"
        )
    result = ensure_base(client, recipe, say, force=fresh)
    return result.tag, result.image_id, result.source


def _given_base_id(client: Any, base: str, say: Progress) -> str:
    import docker.errors

    with contextlib.suppress(docker.errors.ImageNotFound):
        return str(client.images.get(base).id)
    say(f"pulling {base}")
    try:
        return str(client.images.pull(base).id)
    except docker.errors.DockerException as exc:
        raise ClusterUsageError(f"base image {base} is not present and could not be pulled: "
                                f"{api_error('pull', exc).message}") from exc


def _exists(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _docker_build(
    client: Any,
    ctx: Path,
    dockerfile: str,
    tag: str,
    buildargs: dict[str, str],
    nocache: bool,
    say: Progress,
    labels: dict[str, str] | None = None,
) -> None:
    """Build through the low-level API so each step can be shown while it runs."""
    import docker.errors

    log = cache_dir() / f"build-{tag.replace(':', '-')}.log"
    try:
        with open(log, "w") as out:
            stream = client.api.build(
                path=str(ctx), dockerfile=dockerfile, tag=tag, buildargs=buildargs,
                nocache=nocache, rm=True, forcerm=True, decode=True, labels=labels,
            )  # fmt: skip
            for chunk in stream:
                text = str(chunk.get("stream") or chunk.get("status") or "")
                out.write(text)
                if text.startswith("Step "):
                    say(f"{tag}: {text.strip()[:90]}")
                if "error" in chunk:
                    out.write(str(chunk["error"]) + "\n")
                    out.flush()
                    message = str(chunk["error"]).strip().splitlines()[-1]
                    raise InfraError(f"docker build of {tag} failed: {message}", log_path=log)
    except docker.errors.DockerException as exc:
        raise api_error(f"docker build of {tag} failed", exc) from exc
