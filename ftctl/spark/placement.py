"""Where the first plan's instances run: replica groups, and each operator's instances,
spread over distinct executors.

A protocol that recovers by replication (replica-ring) needs the replicas of one operator
on different workers, or the loss of one worker takes a whole ring and nobody is left to
take its slots over. Its ``ProtocolSpec.spared`` names those groups. Spark places a
single-task job wherever it has a free core, so the driver asks for the placement: each
group's members get the executors in turn (distinct while the group is no larger than
the number of executors; beyond that they wrap around), and each job's one partition
prefers its executor (``executor_<host>_<id>``, Spark's executor-local task location).
With a standalone cluster's default of one executor per worker and application, distinct
executors are distinct workers. A preference holds while the executor lives and has a
free core (ftctl sizes workers with cores to spare); a task whose executor is gone runs
anywhere. A restart in a job of its own prefers its slot's executor again; one handed to
an idle spare runs where the spare is.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from protocols.contract.spec import ProtocolSpec
from protocols.contract.view import GraphView

# Seconds to wait for one executor per alive worker (or group member) before placing. An
# executor's launch is only waited for while one is missing, and on a busy machine, or in
# containers, the last of them can come 20 s after the first: placed on the first ones
# alone, every instance would share a worker and one worker's loss would take them all.
EXECUTOR_WAIT = 60.0


def spread(groups: Sequence[frozenset[str]], executors: Sequence[str]) -> dict[str, str]:
    """Instance -> executor: each group's members on distinct executors as far as they go.
    Groups start one executor further along each, so the load evens out."""
    if not executors:
        return {}
    out: dict[str, str] = {}
    for g, group in enumerate(groups):
        for i, iid in enumerate(sorted(group)):
            out[iid] = executors[(g + i) % len(executors)]
    return out


def location(executor_id: str, host: str) -> str:
    """Spark's task location string for one executor (``TaskLocation``'s executor form)."""
    return f"executor_{host}_{executor_id}"


def executor_id(where: str) -> str:
    """The executor id of a task location made by ``location``."""
    return where.rsplit("_", 1)[-1]


def live_executors(sc: Any) -> list[str]:
    """The application's executors as task locations, in executor-id order.

    The ids come from the scheduler (``SparkContext.getExecutorIds``); SparkEnv's block
    manager, which pairs ids with hosts, cannot be reached from py4j (its classes refer to
    Spark's shaded protobuf). A task location matches an executor by id (process-local);
    the host only adds a node-local fallback, so the executors' one host is used when they
    share it and a name no executor has otherwise."""
    jvm = sc._jvm
    ids = [str(x) for x in jvm.scala.jdk.javaapi.CollectionConverters.asJava(
        sc._jsc.sc().getExecutorIds())]
    hosts = {str(info.host()) for info in sc.statusTracker()._jtracker.getExecutorInfos()}
    host = hosts.pop() if len(hosts) == 1 else "any"
    ids.sort(key=lambda x: (not x.isdigit(), int(x) if x.isdigit() else 0, x))
    return [location(eid, host) for eid in ids]


def launched_executors(sc: Any) -> list[str]:
    """``live_executors`` less those that registered but have not launched yet.

    An executor registers with the driver, then builds its ``Executor`` and says it has
    launched; until then the driver holds its cores at zero free. A task preferring it
    meanwhile, with ``spark.locality.wait`` at 0, runs on whichever executor has a free
    core: on a loaded machine the whole first plan went to the one executor that had
    launched first, and a rack failure elsewhere took nothing. Free cores are what the
    scheduler backend reports; nothing runs before the first plan, so a launched
    executor has some. Without that report (another backend or Spark version) the
    registered executors are taken."""
    from py4j.protocol import Py4JError

    executors = live_executors(sc)
    try:
        backend = sc._jsc.sc().schedulerBackend()
        return [e for e in executors
                if free_cores(backend.getExecutorAvailableCpus(executor_id(e))) > 0]
    except Py4JError:
        return executors


def free_cores(option: Any) -> float:
    """A Scala ``Option[BigDecimal]`` of free cores as a number (0 when empty). Read from
    its text, ``Some(4.000000000)``: py4j cannot bring a Scala BigDecimal over (it sends
    it as an integer and fails to parse the decimals)."""
    found = re.fullmatch(r"Some\((.*)\)", str(option.toString()))
    return float(found.group(1)) if found else 0.0


def placement(sc: Any, protocol: ProtocolSpec[Any], graph: GraphView,
              wait: float = EXECUTOR_WAIT, workers: int = 0,
              executors_of: Callable[[Any], list[str]] | None = None) -> dict[str, str]:
    """Instance -> preferred executor location: ``protocol``'s groups on distinct
    executors, and the instances of every other operator spread over them too
    (anti-affinity: one worker's loss takes as few of one operator as it can).

    The run starts once the executors offer enough cores, which a cluster's first
    executors may do alone: wait up to ``wait`` seconds for as many launched executors
    as the largest group has members, or as the cluster has alive ``workers`` (one
    executor each), then spread over those there are. ``executors_of`` reads them (tests
    pass a list maker)."""
    groups = list(protocol.spared(graph)) if protocol.spared is not None else []
    read = executors_of or launched_executors
    executors = read(sc)
    need = max([workers, *(len(g) for g in groups)])
    if need:
        deadline = time.monotonic() + wait
        while len(executors) < need and time.monotonic() < deadline:
            time.sleep(0.2)
            executors = read(sc)
    grouped = {i for g in groups for i in g}
    by_op: dict[str, set[str]] = {}
    for iid in graph.order:
        if iid not in grouped:
            by_op.setdefault(graph.operator_of(iid), set()).add(iid)
    return spread([*groups, *(frozenset(v) for _, v in sorted(by_op.items()))], executors)


def pinned_rdd(sc: Any, payload: Any, where: str) -> Any:
    """A one-partition RDD of ``payload`` whose task prefers the executor ``where``.

    ``sc.parallelize`` takes no location; ``SparkContext.makeRDD`` does. The element is
    what ``parallelize`` would have stored: one pickled batch of one item. None when the
    JVM refuses the calls (another Spark version): the job then goes where Spark puts it."""
    from py4j.protocol import Py4JError
    from pyspark.rdd import RDD
    from pyspark.serializers import BatchedSerializer, CPickleSerializer

    jvm = sc._jvm
    try:
        conv = jvm.scala.jdk.javaapi.CollectionConverters
        prefs = jvm.java.util.ArrayList()
        prefs.add(where)
        items = jvm.java.util.ArrayList()
        items.add(jvm.scala.Tuple2(bytearray(CPickleSerializer().dumps([payload])),
                                   conv.asScala(prefs).toList()))
        tag = jvm.scala.reflect.ClassTag.AnyRef()  # a static forwarder py4j can call
        rdd = sc._jsc.sc().makeRDD(conv.asScala(items).toList(), tag)
    except Py4JError:
        return None
    return RDD(rdd.toJavaRDD(), sc, BatchedSerializer(CPickleSerializer(), 1))


def where_this_runs() -> tuple[str | None, str | None]:
    """The executor id and the worker (``host:port``, as the master lists it) whose JVM
    runs this Python worker, read from the executor's command line (``--executor-id``,
    ``--worker-url spark://Worker@host:port``): where a slot is tells the driver which
    failure domain it belongs to. (None, None) outside an executor."""
    try:
        import psutil  # not needed by anything else a task imports
    except ImportError:
        return None, None
    try:
        for proc in psutil.Process().parents():
            args = proc.cmdline()
            if "--executor-id" in args:
                executor = str(args[args.index("--executor-id") + 1])
                worker = None
                if "--worker-url" in args:
                    url = str(args[args.index("--worker-url") + 1])
                    worker = url.rsplit("@", 1)[-1] or None
                return executor, worker
    except (psutil.Error, IndexError):
        return None, None
    return None, None
