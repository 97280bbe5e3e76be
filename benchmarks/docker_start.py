"""Cluster start time, docker vs local, and image build time, cold vs cached.

    python benchmarks/docker_start.py [--workers 1 2 3] [--repeat 1] [--cold none|images|all]
                                      [--json]

``--cold images`` removes the ftctl images first (the base tarball and the wheels stay
cached: a CI machine that keeps /var/cache/ftctl); ``--cold all`` also builds with an empty
cache directory (debootstrap and ``pip wheel`` from scratch: a new machine). Without
``--cold`` the build is measured as it is (normally: cached). The cached build is always
measured right after.

Each cluster start uses a fresh temporary state dir and is torn down before the next.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ftctl.cluster import LocalCluster
from ftctl.cluster.errors import ClusterError
from ftctl.docker.base import BASE_REPO
from ftctl.docker.cache import CACHE_DIR_ENV
from ftctl.docker.cluster import DockerCluster
from ftctl.docker.engine import connect
from ftctl.docker.image import DEPS_REPO, IMAGE_REPO, build_image


@dataclass
class StartSample:
    backend: str
    workers: int
    all_alive_s: float
    teardown_s: float


@dataclass
class BuildSample:
    kind: str  # cold-all, cold-images, as-is, cached
    seconds: float
    built: bool
    steps: dict[str, float]


def measure_start(make: Callable[[Path], LocalCluster], backend: str, workers: int) -> StartSample:
    with tempfile.TemporaryDirectory(prefix="ftctl-bench-") as tmp:
        cluster = make(Path(tmp) / "state")
        start = time.monotonic()
        try:
            cluster.up()
            alive = time.monotonic() - start
        finally:
            stop = time.monotonic()
            cluster.down()
            teardown = time.monotonic() - stop
    return StartSample(backend, workers, alive, teardown)


def local_maker(workers: int) -> Callable[[Path], LocalCluster]:
    def make(state_dir: Path) -> LocalCluster:
        return LocalCluster(workers, state_dir=state_dir)

    return make


def docker_maker(workers: int, image: str) -> Callable[[Path], LocalCluster]:
    def make(state_dir: Path) -> LocalCluster:
        return DockerCluster(workers, state_dir=state_dir, image=image)

    return make


def remove_images() -> None:
    client = connect()
    try:
        for image in client.images.list():
            if any(tag.split(":")[0] in (IMAGE_REPO, DEPS_REPO, BASE_REPO) for tag in image.tags):
                client.images.remove(image.id, force=True)
    finally:
        client.close()


def measure_build(kind: str) -> BuildSample:
    result = build_image()
    return BuildSample(kind, result.seconds, result.built,
                       {k: round(v, 2) for k, v in result.steps.items()})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--cold", choices=["none", "images", "all"], default="none")
    parser.add_argument("--json", action="store_true", help="print samples as JSON lines")
    args = parser.parse_args()

    def show(sample: StartSample | BuildSample) -> None:
        if args.json:
            print(json.dumps(asdict(sample)), flush=True)
        elif isinstance(sample, BuildSample):
            what = "built" if sample.built else "cached"
            print(f"image build {sample.kind:12s} {sample.seconds:7.1f} s ({what}) {sample.steps}",
                  flush=True)
        else:
            print(f"{sample.backend:6s} {sample.workers} worker(s): all ALIVE "
                  f"{sample.all_alive_s:6.2f} s, teardown {sample.teardown_s:5.2f} s", flush=True)

    try:
        if args.cold != "none":
            remove_images()
        with tempfile.TemporaryDirectory(prefix="ftctl-bench-cache-") as empty_cache:
            if args.cold == "all":
                os.environ[CACHE_DIR_ENV] = empty_cache
            show(measure_build(f"cold-{args.cold}" if args.cold != "none" else "as-is"))
            show(measure_build("cached"))
            os.environ.pop(CACHE_DIR_ENV, None)
        image = build_image().tag
        for _ in range(args.repeat):
            for workers in args.workers:
                show(measure_start(local_maker(workers), "local", workers))
                show(measure_start(docker_maker(workers, image), "docker", workers))
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
