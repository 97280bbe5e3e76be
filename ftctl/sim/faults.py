"""Seeded failure schedules for the simulation host.

A schedule strikes at event indices: after the host has processed that many events,
one instance or several at once (a correlated burst) crash, or a non-crash fault starts:
a pause, a partition, a delay, message drops, a slow unit or a node loss
(``SimHost.inject``), or a correlated failure (``ftctl/sim/correlated.py``): two
neighbouring instances of one operator, or capacity lost and returned in stages. Strike
points spread over the whole run, so some land during a snapshot, some while a recovery
is under way. ``--faults`` takes the scenario files'
names too: ``kill-task`` is ``crash``, ``kill-worker`` is ``node``.

Durations and sizes are simulated seconds, drawn against the host's time constants: a
pause lasts 0.3-2.5 x ``HANG_TIMEOUT`` (so a share of them is declared hung), a delay
adds 2-30 x ``NET_DELAY`` per message. Targets are drawn by the host when the fault
strikes, among the live units (``target`` None), unless the fault names them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, cast, get_args

# Simulated-time constants shared with the host (seconds).
NET_DELAY = 0.0004  # nominal one-way latency of a message
# A unit that handles nothing for this long is declared failed (cause "heartbeat"), as the
# Spark host's HEARTBEAT_TIMEOUT (1.5 s) does with a SIGSTOPped task. Scaled to sim time
# like the detection delay of a crash (2-6 ms here, 150-300 ms on Spark).
HANG_TIMEOUT = 0.01

FaultKind = Literal["crash", "pause", "partition", "delay", "slow", "node", "drop",
                    "pair", "after-restart", "staged",
                    "corrupt", "truncate", "delete", "store-unavailable", "lose-unsynced"]
# Every kind; the mixed set the conformance kit draws is FAULT_KINDS (without ``drop``, the
# correlated kinds and the store kinds, so its pinned schedules keep their draws).
KNOWN_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
FAULT_KINDS: tuple[FaultKind, ...] = KNOWN_KINDS[:6]
# Faults of the snapshot store (``ftctl/sim/store_faults.py``); simulation host only.
STORE_KINDS: tuple[FaultKind, ...] = ("corrupt", "truncate", "delete", "store-unavailable",
                                      "lose-unsynced")
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
# The scenario files' names (chaos/*.yaml) for the kinds named otherwise here: ``--faults``
# takes either, and reports use the scenario names.
ALIASES: dict[str, FaultKind] = {"kill-task": "crash", "kill-worker": "node"}
SCENARIO_NAMES: dict[str, str] = {kind: name for name, kind in ALIASES.items()}


@dataclass(frozen=True)
class Strike:
    at_event: int
    count: int  # how many live instances crash together
    # Optional fixed targets (replaying a recorded schedule); otherwise drawn at strike time.
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pause:
    """The unit handles nothing for ``duration`` (SIGSTOP/SIGCONT); what reaches it waits."""

    at_event: int
    duration: float
    target: str | None = None
    hang_after: float | None = None  # declared hung after this long; None: the host's timeout


@dataclass(frozen=True)
class Partition:
    """Messages between ``target`` and ``peer`` (both ways, channels and peer messages) are
    dropped for ``duration``; ``peers`` empty: one neighbour of ``target`` drawn at strike
    time (``draw_peer``), or every peer."""

    at_event: int
    duration: float
    target: str | None = None
    peers: tuple[str, ...] = ()
    draw_peer: bool = True  # no peers given: one neighbour drawn at strike time (else all)


@dataclass(frozen=True)
class Delay:
    """Every message ``target`` sends (channels and peer messages) takes ``extra`` seconds
    longer for ``duration``; FIFO order per channel is kept."""

    at_event: int
    extra: float
    duration: float
    target: str | None = None
    peers: tuple[str, ...] = ()  # empty: every peer
    both_ways: bool = False  # also what the peers send to ``target`` (as on Spark)
    jitter: float = 0.0  # uniform extra on top of ``extra``; FIFO still kept


@dataclass(frozen=True)
class Drop:
    """Each message between ``target`` and ``peers`` (both ways) is lost with
    ``probability`` for ``duration`` (scenario files' ``drop``)."""

    at_event: int
    probability: float
    duration: float
    target: str | None = None
    peers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Slow:
    """The unit handles each event ``factor`` times slower for ``duration``."""

    at_event: int
    factor: float
    duration: float
    target: str | None = None


@dataclass(frozen=True)
class NodeLoss:
    """A node (a random live one, or ``node``) goes down; it is back after ``down_for``."""

    at_event: int
    down_for: float
    node: str | None = None


@dataclass(frozen=True)
class Pair:
    """A live instance (drawn, or ``target``) of an operator with several instances and
    the next instance of that operator (by index, round the ring) crash together."""

    at_event: int
    target: str | None = None


@dataclass(frozen=True)
class AfterRestart:
    """A live instance (drawn, or ``target``) crashes; ``within`` seconds after its
    replacement starts, the instance before it (by index, round the ring) crashes too."""

    at_event: int
    within: float
    target: str | None = None


@dataclass(frozen=True)
class StagedLoss:
    """``nodes`` live nodes go down at once (one stays up) and return one at a time, each
    ``gaps[i]`` after the one before (the first after ``gaps[0]``)."""

    at_event: int
    nodes: int
    gaps: tuple[float, ...]


@dataclass(frozen=True)
class StoreDamage:
    """One stored object is corrupted (a byte flipped), truncated or deleted: ``snapshot``
    of ``instance``, else the newest object of an instance drawn at strike time."""

    at_event: int
    kind: Literal["corrupt", "truncate", "delete"]
    instance: str | None = None
    snapshot: int | None = None


@dataclass(frozen=True)
class StoreOutage:
    """Every read and write of the store fails for ``duration``."""

    at_event: int
    duration: float


@dataclass(frozen=True)
class LoseUnsynced:
    """A unit crashes and its writes not yet made durable (acknowledged) vanish."""

    at_event: int
    target: str | None = None


SimFault = (Strike | Pause | Partition | Delay | Drop | Slow | NodeLoss | Pair | AfterRestart
            | StagedLoss | StoreDamage | StoreOutage | LoseUnsynced)


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
        store = tuple(k for k in kinds if k in STORE_KINDS)
        if store:
            rest = tuple(k for k in kinds if k not in STORE_KINDS)
            schedule = (cls.random(rng, horizon, max_failures, max_burst, rest) if rest
                        else cls())
            extra = random.Random(repr((schedule.strikes, horizon, store)))
            schedule.strikes += [_draw(extra.choice(store), extra.randint(1, max(1, horizon)),
                                       extra) for _ in range(extra.randint(1, max_failures))]
            schedule.strikes.sort(key=lambda s: s.at_event)
            return schedule
        mixed = kinds != CRASH_ONLY
        # One correlated failure per schedule: a ring protocol's fault model is one failure
        # at a time (a pair is already two), and three such in one ring of three overlap
        # every takeover with another
        n = 1 if set(kinds) <= set(NEIGHBOUR_KINDS) else rng.randint(1, max_failures)
        strikes: list[SimFault] = []
        for _ in range(n):
            kind = rng.choice(kinds) if mixed else "crash"
            if kind == "crash":
                burst = 1 if rng.random() < 0.7 else rng.randint(2, max(2, max_burst))
                strikes.append(Strike(rng.randint(1, max(1, horizon)), burst))
            else:
                strikes.append(_draw(kind, rng.randint(1, max(1, horizon)), rng))
        strikes.sort(key=lambda s: s.at_event)
        return cls(strikes)


def _draw(kind: FaultKind, at: int, rng: random.Random) -> SimFault:
    span = rng.uniform(0.002, 0.02)  # how long a partition, delay, slow or node loss lasts
    if kind == "pause":
        return Pause(at, HANG_TIMEOUT * rng.uniform(0.3, 2.5))
    if kind == "partition":
        return Partition(at, span / 2)
    if kind == "delay":
        return Delay(at, NET_DELAY * rng.uniform(2, 30), span)
    if kind == "slow":
        return Slow(at, rng.uniform(2, 10), span)
    if kind == "node":
        return NodeLoss(at, span)
    if kind == "drop":
        return Drop(at, rng.uniform(0.2, 1.0), span / 2)
    if kind == "pair":
        return Pair(at)
    if kind == "after-restart":
        return AfterRestart(at, rng.uniform(0, AFTER_RESTART_WITHIN))
    if kind == "staged":
        return StagedLoss(at, 2, (span, rng.uniform(0.002, 0.02)))
    if kind in ("corrupt", "truncate", "delete"):
        return StoreDamage(at, cast(Literal["corrupt", "truncate", "delete"], kind))
    if kind == "store-unavailable":
        return StoreOutage(at, span / 2)
    if kind == "lose-unsynced":
        return LoseUnsynced(at)
    raise ValueError(f"unknown fault kind {kind!r}")


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
