"""A chaos-scenario file (``ftctl chaos --scenario``, ``chaos/*.yaml``) on the simulation host.

Time. A scenario's seconds are wall-clock seconds of the run ``ftctl chaos`` would make of
the topology: ``SPARK_RUN_SECONDS`` (25 s) when the topology sets no rate, else its
records per source over its rate. The simulated run takes ``nominal_duration`` (the sources'
emission time); every time in the scenario (``at``, ``every``, ``duration``, ``window``,
delays, arrival gaps) is multiplied by ``scale = nominal / spark seconds``, so a fault at 40%
of the Spark run strikes at 40% of the simulated run. The hang timeout scales alike
(``SPARK_HEARTBEAT_TIMEOUT x scale``): a pause long enough to be declared hung on Spark is
declared hung here.

Nodes. The run has ``--workers`` nodes named ``w0``, ``w1``... (as ``ftctl chaos``'s local
cluster names its workers) carrying the ``--label`` labels, cycled; ``worker=w1`` selects by
name. Each node has room for every instance twice over, unless ``--slots`` makes capacity
scarce (``N`` per node, ``key=value:N`` for the nodes with that label): then restarts wait
for a free slot, and capacity that comes back is what the protocol plans on. Instances
start round-robin. Nodes that leave or return at one instant (a ``restore-capacity`` all at
once) are all applied before the coordinator hears ``CapacityChanged``, once.

Kinds: what each occurrence does on the simulated cluster is ``ftctl/sim/actuator.py``'s
(the simulation host's fault actuator), by the registry's ``sim`` realization of its kind.

- ``during: P`` (``trigger: during-checkpoint`` is ``snapshotting``): at each opening of P
  in the kernel's phase set, after the actions that opened it and only if it is still
  open then; refused for a protocol that never declares P. ``recovering`` (``trigger:
  during-recovery``): at each failure detection. ``count`` occurrences at most. ``target:
  phase-holder``: a running instance holding P then (none: ``fault-skipped``).
- ``after``: ``after: {fault: ID, delay: D}`` strikes D (scaled) after each occurrence of
  fault ID is injected (a strike that injects nothing, its target not up, starts nothing);
  ``after: {phase: P, delay: D}`` D after the run enters P: ``recovering`` at a failure
  detection, any other phase when a ``DeclarePhase`` opens it while no occurrence of it is
  open. ``count`` such occurrences (default 1).

Every occurrence is logged ``fault-injected``/``fault-healed`` (crashes and node losses also
as ``fault``/``node-down``), or ``fault-skipped`` with the reason when its target is not up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.plan import check_cluster, check_triggers, from_scenario
from chaos.schedule import PlannedFault
from ftctl.config.scenario import WORKER_KEY
from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.pace import Pace
from ftctl.sim.actuator import SPARK_HANG_TIMEOUT, SimActuator  # noqa: F401 (re-exported)
from ftctl.sim.cluster import SimCluster, SimNode
from ftctl.sim.host import SimHost
from ftctl.sim.nemesis import SimNemesis

SPARK_RUN_SECONDS = 25.0  # ftctl chaos's run length without a rate (run.chaos.TARGET_SECONDS)
SPARK_HEARTBEAT_TIMEOUT = 1.5  # ftctl/spark/host.py HEARTBEAT_TIMEOUT: a stopped task
SLOTS_PER_INSTANCE = 2  # each node holds every instance twice over, as ftctl chaos sizes them


def spark_seconds(topology: Topology) -> float:
    """How long ``ftctl chaos`` runs this topology: 25 s, or records per source / rate."""
    pace = Pace.of(topology.input)
    if topology.input.rate is None or pace is None:
        return SPARK_RUN_SECONDS
    graph = ExecutionGraph(topology)
    spans = [hi - lo for lo, hi in (graph.source_range(s) for s in graph.sources)]
    return pace.due(max(spans, default=0)) or SPARK_RUN_SECONDS


@dataclass
class SimScenario:
    """A planned scenario and how its seconds and workers map onto a simulated run."""

    name: str
    source: str
    faults: list[PlannedFault]
    seed: int
    scale: float  # simulated seconds per scenario second
    labels: list[dict[str, str]]  # per node w0, w1, ...
    instances: list[str]
    spark_seconds: float  # the ftctl chaos run the scenario's seconds refer to
    # Slots per node w0, w1, ... (``--slots``); None: every instance twice over.
    slots: list[int] | None = None

    @property
    def hang_timeout(self) -> float:
        return SPARK_HEARTBEAT_TIMEOUT * self.scale

    def cluster(self) -> SimCluster:
        roomy = SLOTS_PER_INSTANCE * len(self.instances)
        slots = self.slots or [roomy] * len(self.labels)
        return SimCluster(SimNode(f"w{i}", n, dict(labels))
                          for i, (labels, n) in enumerate(zip(self.labels, slots, strict=True)))

    def slot_options(self) -> list[str]:
        """``--slots`` values that size the nodes as they are: one per node that differs
        from the first (a replay line)."""
        if self.slots is None:
            return []
        first = self.slots[0]
        return [str(first), *(f"worker=w{i}:{n}" for i, n in enumerate(self.slots) if n != first)]

    def install(self, host: SimHost) -> None:
        """Hand every occurrence to ``host``'s nemesis (``ftctl/sim/nemesis.py``)."""
        SimNemesis(host, self.faults, self.seed, self.scale, self.instances).install()


def load_sim_scenario(path: Path, topology: Topology, nominal: float,
                      labels: Sequence[Mapping[str, str]], seed: int | None = None,
                      protocol: Any = None, slots: Sequence[int] | None = None) -> SimScenario:
    """Plan ``path`` for ``topology`` (raises ``ConfigError`` naming the file and field);
    with ``protocol``, a trigger on a phase it never enters is refused, as ftctl chaos does.
    ``slots``: per node (``node_slots``); None: every node holds every instance twice."""
    graph = ExecutionGraph(topology)
    seconds = spark_seconds(topology)
    schedule = from_scenario(path, graph.order, seconds, seed)
    check_cluster(schedule, None, labels, backend="docker", sim=True)  # containers: nodes
    if protocol is not None:
        check_triggers(schedule, [protocol])
    return SimScenario(schedule.name, str(path), schedule.faults, schedule.seed,
                       nominal / seconds, [dict(x) for x in labels], list(graph.order),
                       seconds, list(slots) if slots is not None else None)


def node_slots(given: Sequence[str], labels: Sequence[Mapping[str, str]],
               instances: int) -> list[int]:
    """Slots per node from ``--slots`` values: ``N`` for every node, ``key=value:N`` for the
    nodes with that label or name (``worker=w1:4``; later values win). ValueError naming
    the bad value, or saying that the nodes cannot hold the ``instances`` at the start."""
    slots = [SLOTS_PER_INSTANCE * instances] * len(labels)
    for value in given:
        label, colon, count = value.rpartition(":")
        try:
            n = int(count)
        except ValueError:
            raise ValueError(f"{value!r} is not N or key=value:N") from None
        key, eq, want = label.partition("=")
        if n < 0 or (colon and not (eq and key and want)):
            raise ValueError(f"{value!r} is not N or key=value:N (N >= 0)")
        for i, node in enumerate(labels):
            if not colon or {**node, WORKER_KEY: f"w{i}"}.get(key) == want:
                slots[i] = n
    if sum(slots) < instances:
        raise ValueError(f"{len(labels)} nodes with {sum(slots)} slots in all cannot hold the "
                         f"topology's {instances} instances")
    return slots


def describe(sc: SimScenario) -> dict[str, Any]:
    """The mapping, for ``--json`` and the replay's header."""
    return {"scenario": sc.name, "file": sc.source, "seed": sc.seed,
            "scale": float(f"{sc.scale:.6g}"), "hang_timeout": float(f"{sc.hang_timeout:.6g}"),
            "nodes": [{"id": f"w{i}", "labels": labels} for i, labels in enumerate(sc.labels)],
            "planned": len(sc.faults), "spark_seconds": round(sc.spark_seconds, 3)}
