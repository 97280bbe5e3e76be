"""A stand-in for ``spark_points.warm_cluster``: records how the figure asked for its
cluster and hands out a made-up master URL, so a Spark figure is tested without Spark."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

URL = "spark://started:7077"


class FakeWarmCluster:
    def __init__(self) -> None:
        self.started: list[tuple[str | None, int, str]] = []  # (master, cores, prefix)

    @contextlib.contextmanager
    def __call__(self, master: str | None, cores: int, prefix: str) -> Iterator[str]:
        self.started.append((master, cores, prefix))
        yield master or URL
