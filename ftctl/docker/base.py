"""The base image: a minimal Debian made with debootstrap and imported into Docker.

No registry may be reachable, so ftctl cannot pull a Python or Spark image; it can reach a
Debian mirror. The base is the host's own distribution (bookworm: Python 3.11, the same
minor version as a driver on this kind of host, which PySpark requires) with Python and a
Java 17 runtime. Its tag carries a hash of the recipe, so a changed recipe is a new base,
and the root-filesystem tarball is cached (see ``ftctl.docker.cache``) because debootstrap
is the slow part of a cold build.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftctl.cluster.errors import ClusterUsageError, InfraError
from ftctl.docker.cache import cache_dir, digest
from ftctl.docker.engine import api_error

BASE_REPO = "ftctl-base"
MIRROR_ENV = "FTCTL_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BaseRecipe:
    """Everything that decides the base's content; its hash names the tag and tarball."""

    suite: str = "bookworm"
    variant: str = "minbase"
    # python3-venv brings ensurepip, so the image gets pip without python3-pip's many deps.
    packages: tuple[str, ...] = ("python3", "python3-venv", "openjdk-17-jre-headless", "procps")
    python: str = "3.11"  # what the suite's python3 is; checked again at image build time

    @property
    def key(self) -> str:
        return digest([self.suite, self.variant, ",".join(self.packages), self.python, "v1"])

    @property
    def tag(self) -> str:
        return f"{BASE_REPO}:{self.key}"


@dataclass
class BaseResult:
    tag: str
    image_id: str
    source: str  # "image" (already imported), "tarball" (cache) or "debootstrap"
    seconds: float


def ensure_base(client: Any, recipe: BaseRecipe, say: Progress, force: bool = False) -> BaseResult:
    """The base image for ``recipe``: reuse it, import the cached tarball, or debootstrap."""
    import time

    import docker.errors

    start = time.monotonic()
    if not force:
        with contextlib.suppress(docker.errors.ImageNotFound):
            image = client.images.get(recipe.tag)
            return BaseResult(recipe.tag, image.id, "image", time.monotonic() - start)
    tarball = cache_dir() / f"base-{recipe.key}.tar"
    source = "tarball"
    if force or not tarball.is_file():
        _debootstrap_tarball(recipe, tarball, say)
        source = "debootstrap"
    say(f"importing {tarball.name} as {recipe.tag}")
    image_id = _docker_import(client, tarball, recipe.tag)
    return BaseResult(recipe.tag, image_id, source, time.monotonic() - start)


def _debootstrap_tarball(recipe: BaseRecipe, tarball: Path, say: Progress) -> None:
    if shutil.which("debootstrap") is None:
        raise ClusterUsageError(
            "debootstrap is not installed (apt-get install debootstrap), or build on a public "
            "image with --base IMAGE"
        )
    if os.geteuid() != 0:
        raise ClusterUsageError(
            "making the base image with debootstrap needs root; or use --base IMAGE"
        )
    mirror = os.environ.get(MIRROR_ENV, DEFAULT_MIRROR)
    with tempfile.TemporaryDirectory(prefix="ftctl-rootfs-", dir=tarball.parent) as tmp:
        root = Path(tmp) / "root"
        log = tarball.with_suffix(".log")
        argv = [
            "debootstrap",
            f"--variant={recipe.variant}",
            f"--include={','.join(recipe.packages)}",
            recipe.suite,
            str(root),
            mirror,
        ]
        say(f"debootstrap {recipe.suite} ({', '.join(recipe.packages)}) from {mirror}")
        _run_logged(argv, log, "debootstrap")
        _slim(root)
        say(f"packing the root filesystem into {tarball}")
        partial = tarball.with_suffix(".tar.partial")
        # Numeric owners: the tarball must not depend on this host's user names.
        _run_logged(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."], log, "tar"
        )
        os.replace(partial, tarball)  # a crash mid-write never leaves a "cached" half tarball


def _slim(root: Path) -> None:
    """Drop what a container never needs: package lists, caches, docs (~100 MB)."""
    for rel in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
        target = root / rel
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        child.unlink()


def _run_logged(argv: list[str], log: Path, what: str) -> None:
    with open(log, "a") as out:
        result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-20:]
        raise InfraError(
            f"{what} failed with exit code {result.returncode}", log_path=log, log_tail=tail
        )


def _docker_import(client: Any, tarball: Path, tag: str) -> str:
    """``docker import`` through the API: the tarball is streamed, never read into memory."""
    import docker.errors

    repo, _, version = tag.partition(":")
    try:
        client.api.import_image_from_file(str(tarball), repository=repo, tag=version)
        return str(client.api.inspect_image(tag)["Id"])
    except docker.errors.DockerException as exc:
        raise api_error(f"docker import of {tarball} failed", exc) from exc
