"""The simulation host's fault actuator: one planned occurrence (``chaos.schedule``) of
any kind, carried out in the model.

The planner and the trigger engine decide what strikes when; this module decides what an
occurrence does on the simulated cluster. Each kind's realization is the function the
registry (``ftctl.config.fault_kinds``) names as its ``sim``: it gets the actuator (the
host, the nodes lost so far, how targets resolve to units and nodes), the occurrence, a
generator seeded by it and its scaled duration. Kinds:

- kill-task: a crash of the instance (a selector: of a live instance on a matching node).
- kill-executor, kill-worker, container-kill: the node running the target (or a matching
  live node) goes down; the lost node is remembered for ``restore-capacity``.
- kill-group: every matching live node goes down at seeded offsets within ``window``.
- restore-capacity: lost nodes (matching the selector; ``random``: all) come back, at once
  or at ``chaos/arrivals.py``'s offsets.
- pause, slow: the instance (a selector: every unit on one matching node).
- container-pause: every unit on the node, declared hung after ``SPARK_HANG_TIMEOUT x
  scale`` (frozen processes do not look stopped); container-stop: the node goes down and
  comes back after ``duration`` (none: stays lost); container-restart: down and back.
- partition, delay (``ms`` + ``jitter_ms``), drop (``probability``): between the target and
  ``peer`` (omitted: every peer), both ways, as on Spark.
- the store's kinds: ``ftctl/sim/store_faults.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from chaos.arrivals import arrival_offsets
from chaos.context import matches
from chaos.schedule import PlannedFault
from ftctl.config.fault_kinds import FAULT_TYPES, realization
from ftctl.config.scenario import WORKER_KEY, RestoreParams, parse_target
from ftctl.sim.cluster import SimCluster
from ftctl.sim.faults import Delay, Drop, Partition, Pause, Slow, Strike

if TYPE_CHECKING:
    from ftctl.sim.host import SimHost

SPARK_HANG_TIMEOUT = 4.5  # ftctl/spark/host.py HANG_TIMEOUT: a silent one not seen stopped

# (actuator, occurrence, its generator, its scaled duration): one kind's realization.
Realize = Callable[["SimActuator", PlannedFault, random.Random, float], None]


class SimActuator:
    """Carries out planned occurrences on ``host``; ``scale`` simulated seconds per
    scenario second; ``on_injected(p)`` when an occurrence injected something (a group:
    its first node), for what follows it."""

    def __init__(self, host: SimHost, scale: float, instances: Sequence[str],
                 on_injected: Callable[[PlannedFault], None]) -> None:
        self.host = host
        self.scale = scale
        self.instances = list(instances)
        self.on_injected = on_injected
        self.lost: list[str] = []  # nodes down, for restore-capacity

    def strike(self, p: PlannedFault) -> None:
        """Carry out ``p`` by its kind's realization; the kinds the simulation does not
        realize are logged skipped (``chaos.plan`` refuses them before the run)."""
        ref = FAULT_TYPES[p.type].sim if p.type in FAULT_TYPES else None
        if ref is None:
            self.host.skip_fault(p.type, p.target, "no meaning on the simulation host")
            return
        realize: Realize = realization(ref)
        realize(self, p, random.Random(p.seed), (p.duration or 0.0) * self.scale)

    def link(self, p: PlannedFault, rng: random.Random, duration: float) -> None:
        unit = self.instance(p, rng)
        if unit is None:
            return
        peers = self.peers(p.params.get("peer"), unit, rng)
        if peers == ():
            self.host.skip_fault(p.type, unit, f"no peer {p.params.get('peer')} of {unit}")
            return
        given = peers or ()
        if p.type == "partition":
            self.host.inject(Partition(0, duration, unit, given, draw_peer=False))
        elif p.type == "delay":
            ms = float(p.params.get("ms", 0.0)) / 1000 * self.scale
            jitter = float(p.params.get("jitter_ms", 0.0)) / 1000 * self.scale
            self.host.inject(Delay(0, ms, duration, unit, given, both_ways=True, jitter=jitter))
        else:
            self.host.inject(Drop(0, float(p.params.get("probability", 1.0)), duration, unit,
                                  given))

    def peers(self, peer: str | None, src: str, rng: random.Random) -> tuple[str, ...] | None:
        """The other ends of a link fault: None = every peer; () = none found."""
        if peer is None:
            return None
        t = parse_target(peer)
        others = [i for i in self.instances if i != src]
        if t.kind == "instance":
            return (peer,)
        if t.kind == "operator":
            return tuple(i for i in others if i.partition("[")[0] == t.operator)
        if t.kind == "random":
            return (rng.choice(others),) if others else ()
        nodes = set(self.matching(dict(t.labels)))
        cluster = self.cluster()
        return tuple(i for i in others if cluster.where.get(i) in nodes)

    # ------------------------------------------------------------ targets

    def cluster(self) -> SimCluster:
        assert self.host.cluster is not None, "a scenario run has nodes"
        return self.host.cluster

    def matching(self, selector: Mapping[str, str]) -> list[str]:
        """Live nodes whose labels (and name, as ``worker``) match ``selector``."""
        return [n.id for n in self.cluster().nodes.values()
                if n.alive and matches({**n.labels, WORKER_KEY: n.id}, selector)]

    def instance(self, p: PlannedFault, rng: random.Random) -> str | None:
        """The instance an instance fault hits; a selector: one on a matching live node."""
        t = parse_target(p.target)
        if t.kind != "selector":
            return p.target  # resolved by the plan; the host logs it skipped if not up
        nodes = set(self.matching(dict(t.labels)))
        on = sorted(i for i, n in self.cluster().where.items()
                    if n in nodes and i in self.host.live)
        if not on:
            self.host.skip_fault(p.type, p.target, f"no running instance on a node matching "
                                                   f"{p.target}")
            return None
        return rng.choice(on)

    def node(self, p: PlannedFault, rng: random.Random) -> str | None:
        """The node a node fault hits: a matching live one, a random live one, or the one
        running the target instance."""
        t = parse_target(p.target)
        if t.kind in ("selector", "random"):
            live = self.matching(dict(t.labels))
            if not live:
                self.host.skip_fault(p.type, p.target, f"no live node matches {p.target}")
                return None
            return rng.choice(live)
        node = self.cluster().where.get(p.target)
        if node is None or p.target not in self.host.live:
            self.host.skip_fault(p.type, p.target, f"{p.target} is not running")
            return None
        return node

    def units(self, p: PlannedFault, rng: random.Random) -> list[str | None]:
        """What a pause or slow hits: the instance, or every unit on one node."""
        t = parse_target(p.target)
        if p.type != "container-pause" and t.kind != "selector":
            return [p.target]
        node = self.node(p, rng)
        if node is None:
            return []
        on = self.cluster().on(node)
        if not on:
            self.host.skip_fault(p.type, node, f"no unit runs on {node}")
        return list(on)

    # ------------------------------------------------------------ nodes

    def down(self, p: PlannedFault, node: str, back_after: float | None) -> None:
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

    def group(self, p: PlannedFault, rng: random.Random) -> None:
        t = parse_target(p.target)
        selector = dict(t.labels)
        if t.kind == "random":
            pairs = sorted({(k, v) for n in self.cluster().nodes.values() if n.alive
                            for k, v in n.labels.items()})
            if not pairs:
                self.host.skip_fault(p.type, p.target, "no live node has labels")
                return
            selector = dict([rng.choice(pairs)])
        members = self.matching(selector)
        if not members:
            self.host.skip_fault(p.type, p.target, f"no live node matches {p.target}")
            return
        window = (p.window or 0.0) * self.scale
        offsets = sorted(rng.uniform(0.0, window) for _ in members)
        rng.shuffle(members)
        for node, offset in zip(members, offsets, strict=True):
            self.host.at(self.host.now + offset, partial(self.group_down, p, node))

    def group_down(self, p: PlannedFault, node: str) -> None:
        self.down(p, node, None)
        self.on_injected(p)  # the group's first node down starts what follows it

    def restore(self, p: PlannedFault, rng: random.Random) -> None:
        t = parse_target(p.target)
        cluster = self.cluster()
        wanted = dict(t.labels) if t.kind == "selector" else {}
        back = [n for n in self.lost
                if matches({**cluster.nodes[n].labels, WORKER_KEY: n}, wanted)]
        self.lost = [n for n in self.lost if n not in back]
        params = RestoreParams.model_validate(p.params)
        offsets = arrival_offsets(params, len(back), rng)
        fid = self.host.fault_injected(p.type, p.target, None, nodes=back,
                                       offsets=[round(o * self.scale, 6) for o in offsets])
        for node, offset in zip(back, offsets, strict=True):
            self.host.at(self.host.now + offset * self.scale,
                         partial(self.host.node_up, node))
        # healed once the last lost node is back (at once when none was lost)
        self.host.at(self.host.now + max(offsets, default=0.0) * self.scale,
                     partial(self.host.fault_healed, fid, p.type, p.target))


# ---------------------------------------------------------------- the kinds' realizations


def kill_task(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    unit = act.instance(p, rng)
    if unit is not None:
        act.host.inject(Strike(0, 1, (unit,)))


def node_lost(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    node = act.node(p, rng)
    if node is not None:
        act.down(p, node, None)


def node_stopped(act: SimActuator, p: PlannedFault, rng: random.Random,
                 duration: float) -> None:
    node = act.node(p, rng)
    if node is not None:
        act.down(p, node, duration if p.duration else None)


def node_restarted(act: SimActuator, p: PlannedFault, rng: random.Random,
                   duration: float) -> None:
    node = act.node(p, rng)
    if node is not None:
        act.down(p, node, 0.0)


def kill_group(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    act.group(p, rng)


def restore_capacity(act: SimActuator, p: PlannedFault, rng: random.Random,
                     duration: float) -> None:
    act.restore(p, rng)


def pause(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    for unit in act.units(p, rng):
        act.host.inject(Pause(0, duration, unit))


def container_pause(act: SimActuator, p: PlannedFault, rng: random.Random,
                    duration: float) -> None:
    hang = SPARK_HANG_TIMEOUT * act.scale
    for unit in act.units(p, rng):
        act.host.inject(Pause(0, duration, unit, hang_after=hang))


def slow(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    for unit in act.units(p, rng):
        act.host.inject(Slow(0, float(p.params.get("factor", 2.0)), duration, unit))


def link(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    act.link(p, rng, duration)
