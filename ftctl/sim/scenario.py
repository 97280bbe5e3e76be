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

Kinds:

- kill-task: a crash of the instance (a selector: of a live instance on a matching node).
- kill-executor, kill-worker, container-kill: the node running the target (or a matching
  live node) goes down; the lost node is remembered for ``restore-capacity``.
- kill-group: every matching live node goes down at seeded offsets within ``window``.
- restore-capacity: lost nodes (matching the selector; ``random``: all) come back, at once
  or at ``chaos/arrivals.py``'s offsets.
- pause, slow: the instance (a selector: every unit on one matching node).
- container-pause: every unit on the node; container-stop: the node goes down, and comes
  back after ``duration`` (none: stays lost); container-restart: down and back at once.
  A container-pause is declared hung after ``SPARK_HANG_TIMEOUT x scale`` (4.5 s on Spark,
  where frozen processes do not look stopped), a pause after the heartbeat timeout.
- partition, delay (``ms`` + ``jitter_ms``), drop (``probability``): between the target and
  ``peer`` (omitted: every peer), both ways, as on Spark.
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

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from chaos.arrivals import arrival_offsets
from chaos.context import matches
from chaos.plan import check_cluster, check_triggers, from_scenario
from chaos.schedule import PlannedFault, occurrence
from ftctl.config.scenario import (
    PHASE_HOLDER,
    RECOVERING,
    STORE_FAULTS,
    WORKER_KEY,
    RestoreParams,
    parse_target,
)
from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.pace import Pace
from ftctl.sim.cluster import SimCluster, SimNode
from ftctl.sim.faults import (
    Delay,
    Drop,
    LoseUnsynced,
    Partition,
    Pause,
    Slow,
    StoreDamage,
    StoreOutage,
    Strike,
)
from ftctl.sim.host import SimHost

SPARK_RUN_SECONDS = 25.0  # ftctl chaos's run length without a rate (run.chaos.TARGET_SECONDS)
SPARK_HEARTBEAT_TIMEOUT = 1.5  # ftctl/spark/host.py HEARTBEAT_TIMEOUT: a stopped task
SPARK_HANG_TIMEOUT = 4.5  # ftctl/spark/host.py HANG_TIMEOUT: a silent one not seen stopped
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
        """Schedule every occurrence on ``host`` (triggers as hooks)."""
        _Replay(self, host).install()


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


@dataclass
class _Follower:
    """An ``after`` template and how many occurrences of it were planned."""

    template: PlannedFault
    fired: int = 0


@dataclass
class _Replay:
    """One run's replay of a scenario on a host."""

    sc: SimScenario
    host: SimHost
    lost: list[str] = field(default_factory=list)  # nodes down, for restore-capacity
    # after: {fault: ...}: fault index -> the templates that follow it, with their counts
    followers: dict[int, list[_Follower]] = field(default_factory=dict)
    started: set[tuple[int, int]] = field(default_factory=set)  # occurrences injected

    def install(self) -> None:
        for p in self.sc.faults:
            if p.after_fault is not None:
                self.followers.setdefault(p.after_fault, []).append(_Follower(p))
            elif p.after_phase is not None:
                self._after_phase(p)
            elif p.during is None:
                self.host.at((p.at or 0.0) * self.sc.scale, partial(self.strike, p))
            else:
                self._trigger(p)

    def _after_phase(self, template: PlannedFault) -> None:
        follower = _Follower(template)
        phase = template.after_phase
        if phase == RECOVERING:
            self.host.on_detected.append(lambda: self._follow(follower))
        else:
            self.host.on_phase.append(
                lambda entered: self._follow(follower) if entered == phase else None)

    def _follow(self, follower: _Follower) -> None:
        """Plan the follower's next occurrence ``delay`` after now, if it has one left."""
        template = follower.template
        if template.count is not None and follower.fired >= template.count:
            return
        at = self.host.now + template.delay * self.sc.scale
        planned = occurrence(template, follower.fired, self.sc.instances, self.sc.seed,
                             at / self.sc.scale)
        follower.fired += 1
        self.host.at(at, partial(self.strike, planned))

    def _injected(self, p: PlannedFault) -> None:
        """Occurrence ``p`` injected something (its first node, for a group): what
        follows it starts its delay now, once per occurrence."""
        key = (p.index, p.occurrence)
        if key in self.started:
            return
        self.started.add(key)
        for follower in self.followers.get(p.index, ()):
            self._follow(follower)

    def _trigger(self, template: PlannedFault) -> None:
        """``during: P`` (and its ``trigger`` aliases): once per opening of P, after the
        actions that opened it, if it is still open then; ``recovering`` at detections."""
        fired = [0]
        phase = template.during
        phases = self.host.kernel.open_phases

        def fire() -> None:
            if template.count is not None and fired[0] >= template.count:
                return
            if phase != RECOVERING and not phases.active(str(phase)):
                return  # opened and closed by one step: nothing was open to strike in
            at = self.host.now / self.sc.scale
            planned = occurrence(template, fired[0], self.sc.instances, self.sc.seed, at)
            if planned.target == PHASE_HOLDER:
                holder = self._holder(planned, str(phase))
                if holder is None:
                    return
                planned = replace(planned, target=holder)
            fired[0] += 1
            self.strike(planned)

        if phase == RECOVERING:
            self.host.on_detected.append(fire)
        else:
            self.host.on_phase.append(lambda entered: fire() if entered == phase else None)

    def _holder(self, p: PlannedFault, phase: str) -> str | None:
        """A running instance holding ``phase``, drawn with the occurrence's seed."""
        held = [i for i in self.host.kernel.open_phases.holders(phase) if i in self.host.live]
        if not held:
            self.host.skip_fault(p.type, PHASE_HOLDER, f"no running instance holds {phase}")
            return None
        return random.Random(p.seed).choice(held)

    # ------------------------------------------------------------ one occurrence

    def strike(self, p: PlannedFault) -> None:
        before = self.host.stats.injected
        self._dispatch(p)
        if self.host.stats.injected > before:
            self._injected(p)

    def _dispatch(self, p: PlannedFault) -> None:
        scale, host = self.sc.scale, self.host
        rng = random.Random(p.seed)
        duration = (p.duration or 0.0) * scale
        kind = p.type
        if kind == "kill-task":
            unit = self._instance(p, rng)
            if unit is not None:
                host.inject(Strike(0, 1, (unit,)))
        elif kind in ("kill-executor", "kill-worker", "container-kill"):
            node = self._node(p, rng)
            if node is not None:
                self._down(p, node, None)
        elif kind == "container-stop":
            node = self._node(p, rng)
            if node is not None:
                self._down(p, node, duration if p.duration else None)
        elif kind == "container-restart":
            node = self._node(p, rng)
            if node is not None:
                self._down(p, node, 0.0)
        elif kind == "kill-group":
            self._group(p, rng)
        elif kind == "restore-capacity":
            self._restore(p, rng)
        elif kind in ("pause", "slow", "container-pause"):
            # A frozen container's processes do not look stopped: Spark waits HANG_TIMEOUT.
            hang = SPARK_HANG_TIMEOUT * scale if kind == "container-pause" else None
            for unit in self._units(p, rng):
                if kind == "slow":
                    host.inject(Slow(0, float(p.params.get("factor", 2.0)), duration, unit))
                else:
                    host.inject(Pause(0, duration, unit, hang_after=hang))
        elif kind in ("partition", "delay", "drop"):
            self._link(p, rng, duration)
        elif kind in STORE_FAULTS:
            self._store(p, rng, duration)
        else:  # the scenario schema knows no other kind
            host.skip_fault(kind, p.target, "no meaning on the simulation host")

    def _store(self, p: PlannedFault, rng: random.Random, duration: float) -> None:
        """A store fault (``ftctl/sim/store_faults.py``): an object of the target, an
        outage, or the target's crash with its unsynced writes."""
        if p.type == "store-unavailable":
            self.host.inject(StoreOutage(0, duration))
            return
        unit = self._instance(p, rng) if parse_target(p.target).kind != "random" else None
        if unit is None and parse_target(p.target).kind != "random":
            return  # skipped, logged by _instance
        if p.type == "lose-unsynced":
            self.host.inject(LoseUnsynced(0, unit))
        else:
            self.host.inject(StoreDamage(0, p.type, unit, p.params.get("snapshot")))  # type: ignore[arg-type]

    def _link(self, p: PlannedFault, rng: random.Random, duration: float) -> None:
        unit = self._instance(p, rng)
        if unit is None:
            return
        peers = self._peers(p.params.get("peer"), unit, rng)
        if peers == ():
            self.host.skip_fault(p.type, unit, f"no peer {p.params.get('peer')} of {unit}")
            return
        given = peers or ()
        if p.type == "partition":
            self.host.inject(Partition(0, duration, unit, given, draw_peer=False))
        elif p.type == "delay":
            ms = float(p.params.get("ms", 0.0)) / 1000 * self.sc.scale
            jitter = float(p.params.get("jitter_ms", 0.0)) / 1000 * self.sc.scale
            self.host.inject(Delay(0, ms, duration, unit, given, both_ways=True, jitter=jitter))
        else:
            self.host.inject(Drop(0, float(p.params.get("probability", 1.0)), duration, unit,
                                  given))

    def _peers(self, peer: str | None, src: str, rng: random.Random) -> tuple[str, ...] | None:
        """The other ends of a link fault: None = every peer; () = none found."""
        if peer is None:
            return None
        t = parse_target(peer)
        others = [i for i in self.sc.instances if i != src]
        if t.kind == "instance":
            return (peer,)
        if t.kind == "operator":
            return tuple(i for i in others if i.partition("[")[0] == t.operator)
        if t.kind == "random":
            return (rng.choice(others),) if others else ()
        nodes = set(self._matching(dict(t.labels)))
        cluster = self._cluster()
        return tuple(i for i in others if cluster.where.get(i) in nodes)

    # ------------------------------------------------------------ targets

    def _cluster(self) -> SimCluster:
        assert self.host.cluster is not None, "a scenario run has nodes"
        return self.host.cluster

    def _matching(self, selector: Mapping[str, str]) -> list[str]:
        """Live nodes whose labels (and name, as ``worker``) match ``selector``."""
        return [n.id for n in self._cluster().nodes.values()
                if n.alive and matches({**n.labels, WORKER_KEY: n.id}, selector)]

    def _instance(self, p: PlannedFault, rng: random.Random) -> str | None:
        """The instance an instance fault hits; a selector: one on a matching live node."""
        t = parse_target(p.target)
        if t.kind != "selector":
            return p.target  # resolved by the plan; the host logs it skipped if not up
        nodes = set(self._matching(dict(t.labels)))
        on = sorted(i for i, n in self._cluster().where.items()
                    if n in nodes and i in self.host.live)
        if not on:
            self.host.skip_fault(p.type, p.target, f"no running instance on a node matching "
                                                   f"{p.target}")
            return None
        return rng.choice(on)

    def _node(self, p: PlannedFault, rng: random.Random) -> str | None:
        """The node a node fault hits: a matching live one, a random live one, or the one
        running the target instance."""
        t = parse_target(p.target)
        if t.kind in ("selector", "random"):
            live = self._matching(dict(t.labels))
            if not live:
                self.host.skip_fault(p.type, p.target, f"no live node matches {p.target}")
                return None
            return rng.choice(live)
        node = self._cluster().where.get(p.target)
        if node is None or p.target not in self.host.live:
            self.host.skip_fault(p.type, p.target, f"{p.target} is not running")
            return None
        return node

    def _units(self, p: PlannedFault, rng: random.Random) -> list[str | None]:
        """What a pause or slow hits: the instance, or every unit on one node."""
        t = parse_target(p.target)
        if p.type != "container-pause" and t.kind != "selector":
            return [p.target]
        node = self._node(p, rng)
        if node is None:
            return []
        on = self._cluster().on(node)
        if not on:
            self.host.skip_fault(p.type, node, f"no unit runs on {node}")
        return list(on)

    # ------------------------------------------------------------ nodes

    def _down(self, p: PlannedFault, node: str, back_after: float | None) -> None:
        host = self.host
        fid = host.fault_injected(p.type, node, back_after)
        host.node_down(node)
        if back_after is None:
            self.lost.append(node)
            return

        def up() -> None:
            host.node_up(node)
            host.fault_healed(fid, p.type, node)

        host.at(host.now + back_after, up)

    def _group(self, p: PlannedFault, rng: random.Random) -> None:
        t = parse_target(p.target)
        selector = dict(t.labels)
        if t.kind == "random":
            pairs = sorted({(k, v) for n in self._cluster().nodes.values() if n.alive
                            for k, v in n.labels.items()})
            if not pairs:
                self.host.skip_fault(p.type, p.target, "no live node has labels")
                return
            selector = dict([rng.choice(pairs)])
        members = self._matching(selector)
        if not members:
            self.host.skip_fault(p.type, p.target, f"no live node matches {p.target}")
            return
        window = (p.window or 0.0) * self.sc.scale
        offsets = sorted(rng.uniform(0.0, window) for _ in members)
        rng.shuffle(members)
        for node, offset in zip(members, offsets, strict=True):
            self.host.at(self.host.now + offset, partial(self._group_down, p, node))

    def _group_down(self, p: PlannedFault, node: str) -> None:
        self._down(p, node, None)
        self._injected(p)  # the group's first node down starts what follows it

    def _restore(self, p: PlannedFault, rng: random.Random) -> None:
        t = parse_target(p.target)
        cluster = self._cluster()
        wanted = dict(t.labels) if t.kind == "selector" else {}
        back = [n for n in self.lost
                if matches({**cluster.nodes[n].labels, WORKER_KEY: n}, wanted)]
        self.lost = [n for n in self.lost if n not in back]
        params = RestoreParams.model_validate(p.params)
        offsets = arrival_offsets(params, len(back), rng)
        fid = self.host.fault_injected(p.type, p.target, None, nodes=back,
                                       offsets=[round(o * self.sc.scale, 6) for o in offsets])
        for node, offset in zip(back, offsets, strict=True):
            self.host.at(self.host.now + offset * self.sc.scale,
                         partial(self.host.node_up, node))
        # healed once the last lost node is back (at once when none was lost)
        self.host.at(self.host.now + max(offsets, default=0.0) * self.sc.scale,
                     partial(self.host.fault_healed, fid, p.type, p.target))


def describe(sc: SimScenario) -> dict[str, Any]:
    """The mapping, for ``--json`` and the replay's header."""
    return {"scenario": sc.name, "file": sc.source, "seed": sc.seed,
            "scale": float(f"{sc.scale:.6g}"), "hang_timeout": float(f"{sc.hang_timeout:.6g}"),
            "nodes": [{"id": f"w{i}", "labels": labels} for i, labels in enumerate(sc.labels)],
            "planned": len(sc.faults), "spark_seconds": round(sc.spark_seconds, 3)}
