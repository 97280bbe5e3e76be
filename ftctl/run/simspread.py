"""``ftctl sim --master``: simulated schedules run as Spark tasks on a cluster.

The simulation is pure Python, so a cluster needs nothing but ftctl on its executors: the
seeds go out as an RDD, each partition rebuilds the ``Simulator`` from the ``SimJob``
(once per Python worker, which the session keeps for reuse) and maps its seeds to
``ScheduleRecord``s, and the driver collects them and folds them in seed order, exactly as
``ftctl sim`` does locally (``ftctl.sim.spread``): the same seeds give the same summary.

The seeds go in waves of one partition per task slot, so the progress line moves and
``--fail-fast`` stops after the wave holding the first violation.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ftctl.cluster import LocalCluster
from ftctl.cluster.errors import InfraError
from ftctl.sim.runner import ScheduleRecord, SimSummary, Simulator
from ftctl.sim.spread import CHUNK, SimJob, fold, run_seeds
from ftctl.spark import wire
from ftctl.spark.session import driver_conf, first_line, start_session, stop_session, task_slots

LOCAL = "local"  # ``--master local``: a standalone cluster started for this command
WAVES = 4  # waves per run: progress and fail-fast granularity against per-wave idle tails
# Python workers stay up between tasks, so a worker's cached simulator serves the next
# partition; the Spark host turns reuse off for its own reasons (an instance's threads).
SIM_CONF = {"spark.python.worker.reuse": "true"}


def check_master(value: str) -> str | None:
    """None if ``value`` is a master ``ftctl sim`` accepts, else why not (one line)."""
    if value == LOCAL or value.startswith("spark://"):
        return None
    return f"expected spark://host:port or {LOCAL!r}, got {value!r}"


def run_on_spark(sim: Simulator, job: SimJob, n: int, first: int, master: str,
                 progress: Callable[[int], None] | None = None,
                 fail_fast: bool = False, step: Callable[[str], None] | None = None,
                 bind: str = wire.HOST) -> SimSummary:
    """``sim.run_many(n, first)`` with the schedules run as tasks on ``master``; the
    driver listens for its executors on ``bind``."""
    with sim_session(master, step, bind) as (sc, url):
        try:
            return run_on_context(sc, sim, job, n, first, progress, fail_fast)
        except Exception as exc:  # a failed Spark job: an executor without ftctl, a lost one
            raise InfraError(f"the schedules failed on {url}: {first_line(exc)}") from exc


@contextlib.contextmanager
def sim_session(master: str, step: Callable[[str], None] | None = None,
                bind: str = wire.HOST) -> Iterator[tuple[Any, str]]:
    """A SparkContext on ``master`` (``local``: on a local cluster started for it) and the
    master's URL; everything started here is stopped on the way out."""
    say = step or (lambda _msg: None)
    logs = Path(tempfile.mkdtemp(prefix="ftctl-sim-"))
    cluster: LocalCluster | None = None
    spark: Any = None
    try:
        if master == LOCAL:
            cluster = LocalCluster(1, cores=os.cpu_count() or 1, state_dir=logs / "cluster",
                                   owned=True)
            cluster.up(progress=say)
            master = cluster.master_url
        say(f"starting a Spark session on {master}")
        spark = start_session(master, "ftctl-sim", slots=1, log_dir=logs,
                              conf={**SIM_CONF, **driver_conf(bind)})
        yield spark.sparkContext, master
    finally:
        if spark is not None:
            stop_session(spark)
        if cluster is not None:
            cluster.down()
        shutil.rmtree(logs, ignore_errors=True)


def run_on_context(sc: Any, sim: Simulator, job: SimJob, n: int, first: int,
                   progress: Callable[[int], None] | None = None,
                   fail_fast: bool = False) -> SimSummary:
    """``sim.run_many(n, first)`` as tasks of the running SparkContext ``sc``."""
    return fold(sim, _waves(sc, job, first, n), progress, fail_fast)


def _waves(sc: Any, job: SimJob, first: int, n: int) -> Iterator[list[ScheduleRecord]]:
    slots = max(1, task_slots(sc))
    per_task = max(CHUNK, math.ceil(n / (slots * WAVES)))
    work = functools.partial(_partition, job)
    start, end = first, first + n
    while start < end:
        stop = min(end, start + slots * per_task)
        seeds = list(range(start, stop))
        parts = math.ceil(len(seeds) / per_task)
        # ``collect`` keeps partition order, and each partition its seeds' order.
        yield sc.parallelize(seeds, parts).mapPartitions(work).collect()
        start = stop


def _partition(job: SimJob, seeds: Iterator[int]) -> list[ScheduleRecord]:
    return run_seeds(job, list(seeds))
