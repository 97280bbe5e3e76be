"""Seeded failure schedules for the simulation host.

A schedule strikes at event indices: after the host has processed that many events (each
fault an occurrence on the trigger engine's progress trigger, ``ftctl/sim/nemesis.py``),
one instance or several at once (a correlated burst) crash, or a non-crash fault starts:
a pause, a partition, a delay, message drops, a slow unit or a node loss
(``SimHost.inject``), or a correlated failure (``ftctl/sim/correlated.py``): two
neighbouring instances of one operator, or capacity lost and returned in stages. Strike
points spread over the whole run, so some land during a snapshot, some while a recovery
is under way. ``--faults`` takes the registry's names (``ftctl.config.fault_kinds``, the
scenario files' vocabulary); ``crash`` (kill-task) and ``node`` (kill-worker) are aliases,
and the names these schedules and their records use. Each kind is drawn by the registry's
``draw`` for it (``draw_*`` here, the store's in ``ftctl/sim/store_faults.py``).

Durations and sizes are simulated seconds, drawn against the host's time constants: a
pause lasts 0.3-2.5 x ``HANG_TIMEOUT`` (so a share of them is declared hung), a delay
adds 2-30 x ``NET_DELAY`` per message. Targets are drawn by the host when the fault
strikes, among the live units (``target`` None), unless the fault names them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from ftctl.config.fault_kinds import FAULT_TYPES, realization

# Simulated-time constants shared with the host (seconds).
NET_DELAY = 0.0004  # nominal one-way latency of a message
# A unit that handles nothing for this long is declared failed (cause "heartbeat"), as the
# Spark host's HEARTBEAT_TIMEOUT (1.5 s) does with a SIGSTOPped task. Scaled to sim time
# like the detection delay of a crash (2-6 ms here, 150-300 ms on Spark).
HANG_TIMEOUT = 0.01

# A kind as ``ftctl sim``'s schedules name it: the registry's name, or its ``sim_name``
# (``crash`` for kill-task, ``node`` for kill-worker; ``ftctl.config.fault_kinds``).
FaultKind = str
# Every kind ``--faults`` draws, by its schedules' name, in the registry's order.
KNOWN_KINDS: tuple[FaultKind, ...] = tuple(k.sim_name or n for n, k in FAULT_TYPES.items()
                                           if k.draw)
# The mixed set the conformance kit draws (without ``drop``, the correlated kinds and the
# store kinds, so its pinned schedules keep their draws); order is part of the draw.
FAULT_KINDS: tuple[FaultKind, ...] = ("crash", "pause", "partition", "delay", "slow", "node")
# Faults of the snapshot store, drawn by `ftctl sim --faults` (``ftctl/sim/store_faults.py``;
# Spark realizes the same kinds in ``chaos/store_faults.py``).
STORE_KINDS: tuple[FaultKind, ...] = ("corrupt", "truncate", "delete", "store-unavailable",
                                      "lose-unsynced")
# A full or slow store: drawn on top like the store kinds, but outside the kit's
# all-faults set, so its pinned schedules keep their draws.
STORE_LOAD_KINDS: tuple[FaultKind, ...] = ("store-full", "store-slow")
# What the conformance kit's all-faults cases draw: the mixed set and the store kinds.
ALL_KINDS: tuple[FaultKind, ...] = FAULT_KINDS + STORE_KINDS
CRASH_ONLY: tuple[FaultKind, ...] = ("crash",)
# Correlated failures (``ftctl/sim/correlated.py``): two instances of one operator, the
# second its neighbour by index, at once (``pair``) or just after the first one's
# replacement started (``after-restart``); the kit draws them for ring protocols.
NEIGHBOUR_KINDS: tuple[FaultKind, ...] = ("pair", "after-restart")
# Capacity lost and returned node by node on a cluster with no spare slots (``staged``);
# the kit draws it for protocols that plan on capacity.
STAGED_KINDS: tuple[FaultKind, ...] = ("staged",)
AFTER_RESTART_WITHIN = 0.003  # the second strike 0-3 ms after the replacement starts:
# while the tuples it was sent as its stand-in handed it back are still in flight
# ``--faults`` takes the registry's names and the schedules' own (``crash``, ``node``);
# reports use the registry's.
ALIASES: dict[str, FaultKind] = {n: k.sim_name for n, k in FAULT_TYPES.items() if k.sim_name}
SCENARIO_NAMES: dict[str, str] = {kind: name for name, kind in ALIASES.items()}
# The registry's entry of each kind by its schedules' name.
_BY_SIM_NAME: dict[FaultKind, str] = {k.sim_name or n: n for n, k in FAULT_TYPES.items()}


@dataclass(frozen=True)
class SimFault:
    """A fault the simulation host strikes with (``SimHost.inject``), at ``at_event`` in a
    schedule. ``strike`` carries it out: by default the host method ``actuator`` names; a
    kind whose model lives in a module of its own overrides ``strike`` there instead, so
    the host needs no new method."""

    at_event: int
    actuator: ClassVar[str] = ""

    def strike(self, host: Any) -> None:
        getattr(host, self.actuator)(self)


@dataclass(frozen=True)
class Strike(SimFault):
    actuator = "_strike"
    count: int  # how many live instances crash together
    # Optional fixed targets (replaying a recorded schedule); otherwise drawn at strike time.
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pause(SimFault):
    """The unit handles nothing for ``duration`` (SIGSTOP/SIGCONT); what reaches it waits."""

    actuator = "_pause"
    duration: float
    target: str | None = None
    hang_after: float | None = None  # declared hung after this long; None: the host's timeout


@dataclass(frozen=True)
class Partition(SimFault):
    """Messages between ``target`` and ``peer`` (both ways, channels and peer messages) are
    dropped for ``duration``; ``peers`` empty: one neighbour of ``target`` drawn at strike
    time (``draw_peer``), or every peer."""

    actuator = "_link_fault"
    duration: float
    target: str | None = None
    peers: tuple[str, ...] = ()
    draw_peer: bool = True  # no peers given: one neighbour drawn at strike time (else all)


@dataclass(frozen=True)
class Delay(SimFault):
    """Every message ``target`` sends (channels and peer messages) takes ``extra`` seconds
    longer for ``duration``; FIFO order per channel is kept."""

    actuator = "_link_fault"
    extra: float
    duration: float
    target: str | None = None
    peers: tuple[str, ...] = ()  # empty: every peer
    both_ways: bool = False  # also what the peers send to ``target`` (as on Spark)
    jitter: float = 0.0  # uniform extra on top of ``extra``; FIFO still kept


@dataclass(frozen=True)
class Drop(SimFault):
    """Each message between ``target`` and ``peers`` (both ways) is lost with
    ``probability`` for ``duration`` (scenario files' ``drop``)."""

    actuator = "_link_fault"
    probability: float
    duration: float
    target: str | None = None
    peers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Slow(SimFault):
    """The unit handles each event ``factor`` times slower for ``duration``."""

    actuator = "_slow"
    factor: float
    duration: float
    target: str | None = None


@dataclass(frozen=True)
class NodeLoss(SimFault):
    """A node (a random live one, or ``node``) goes down; it is back after ``down_for``."""

    actuator = "_node_loss"
    down_for: float
    node: str | None = None


@dataclass(frozen=True)
class Pair(SimFault):
    """A live instance (drawn, or ``target``) of an operator with several instances and
    the next instance of that operator (by index, round the ring) crash together."""

    actuator = "_pair"
    target: str | None = None


@dataclass(frozen=True)
class AfterRestart(SimFault):
    """A live instance (drawn, or ``target``) crashes; ``within`` seconds after its
    replacement starts, the instance before it (by index, round the ring) crashes too."""

    actuator = "_after_restart"
    within: float
    target: str | None = None


@dataclass(frozen=True)
class StagedLoss(SimFault):
    """``nodes`` live nodes go down at once (one stays up) and return one at a time, each
    ``gaps[i]`` after the one before (the first after ``gaps[0]``)."""

    actuator = "_staged_loss"
    nodes: int
    gaps: tuple[float, ...]


@dataclass
class FailureSchedule:
    strikes: list[SimFault] = field(default_factory=list)

    @classmethod
    def random(cls, rng: random.Random, horizon: int, max_failures: int,
               max_burst: int, kinds: Sequence[FaultKind] = CRASH_ONLY) -> FailureSchedule:
        """Up to ``max_failures`` faults of the given kinds at event indices in [1, horizon].

        Crash only (the default) draws exactly as before the other kinds existed, so every
        seed pinned against crash schedules keeps its schedule. Store kinds are drawn on
        top, from a generator of their own seeded by the other strikes: the others keep
        the draws they had without them.
        """
        kinds = tuple(kinds)
        store = tuple(k for k in kinds if k in STORE_KINDS + STORE_LOAD_KINDS)
        if store:
            rest = tuple(k for k in kinds if k not in store)
            schedule = (cls.random(rng, horizon, max_failures, max_burst, rest) if rest
                        else cls())
            extra = random.Random(repr((schedule.strikes, horizon, store)))
            schedule.strikes += [draw(extra.choice(store), extra, horizon)
                                 for _ in range(extra.randint(1, max_failures))]
            schedule.strikes.sort(key=lambda s: s.at_event)
            return schedule
        mixed = kinds != CRASH_ONLY
        # One correlated failure per schedule: a ring protocol's fault model is one failure
        # at a time (a pair is already two), and three such in one ring of three overlap
        # every takeover with another
        n = 1 if set(kinds) <= set(NEIGHBOUR_KINDS) else rng.randint(1, max_failures)
        strikes = [draw(rng.choice(kinds) if mixed else "crash", rng, horizon, max_burst)
                   for _ in range(n)]
        strikes.sort(key=lambda s: s.at_event)
        return cls(strikes)


# (kind, rng, horizon, max_burst) -> the fault; the registry names one per kind.
Draw = Callable[[str, random.Random, int, int], SimFault]


def draw(kind: FaultKind, rng: random.Random, horizon: int, max_burst: int = 1) -> SimFault:
    """One random ``kind`` fault at an event index in [1, horizon], by the registry's
    ``draw`` of that kind."""
    spec_name = _BY_SIM_NAME.get(kind, kind)
    spec = FAULT_TYPES.get(spec_name)
    if spec is None or spec.draw is None:
        raise ValueError(f"unknown fault kind {kind!r}")
    made: Draw = realization(spec.draw)
    return made(spec_name, rng, horizon, max_burst)


# The draws. Each takes its event index first, then (all but crash) the span a partition,
# delay, slow or node loss lasts, used or not: the order of draws is what keeps every
# pinned seed's schedule.

def event_index(rng: random.Random, horizon: int) -> int:
    return rng.randint(1, max(1, horizon))


def span(rng: random.Random) -> float:
    return rng.uniform(0.002, 0.02)


def draw_crash(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    burst = 1 if rng.random() < 0.7 else rng.randint(2, max(2, max_burst))
    return Strike(event_index(rng, horizon), burst)


def draw_pause(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, _ = event_index(rng, horizon), span(rng)
    return Pause(at, HANG_TIMEOUT * rng.uniform(0.3, 2.5))


def draw_partition(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, s = event_index(rng, horizon), span(rng)
    return Partition(at, s / 2)


def draw_delay(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, s = event_index(rng, horizon), span(rng)
    return Delay(at, NET_DELAY * rng.uniform(2, 30), s)


def draw_slow(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, s = event_index(rng, horizon), span(rng)
    return Slow(at, rng.uniform(2, 10), s)


def draw_node(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, s = event_index(rng, horizon), span(rng)
    return NodeLoss(at, s)


def draw_drop(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, s = event_index(rng, horizon), span(rng)
    return Drop(at, rng.uniform(0.2, 1.0), s / 2)


def draw_pair(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, _ = event_index(rng, horizon), span(rng)
    return Pair(at)


def draw_after_restart(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, _ = event_index(rng, horizon), span(rng)
    return AfterRestart(at, rng.uniform(0, AFTER_RESTART_WITHIN))


def draw_staged(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, s = event_index(rng, horizon), span(rng)
    return StagedLoss(at, 2, (s, rng.uniform(0.002, 0.02)))


def kind_names() -> str:
    """The names ``--faults`` takes, scenario names first (for help and errors)."""
    names = [SCENARIO_NAMES.get(k, k) for k in KNOWN_KINDS]
    return ", ".join(names) + "; aliases " + ", ".join(
        f"{k} = {n}" for k, n in SCENARIO_NAMES.items())


def parse_kinds(text: str) -> tuple[FaultKind, ...]:
    """``"kill-task,pause"`` -> ``("crash", "pause")``: scenario names or this module's
    (ValueError naming a bad kind)."""
    out: list[FaultKind] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind = ALIASES.get(part, part)
        if kind not in KNOWN_KINDS:
            raise ValueError(f"unknown fault kind {part!r} (known: {kind_names()})")
        if kind not in out:
            out.append(cast(FaultKind, kind))
    if not out:
        raise ValueError(f"no fault kind given (known: {kind_names()})")
    return tuple(out)
