"""Actions a protocol returns: what the kernel should make happen.

The kernel applies the actions of one ``handle`` call in order. A ``Report`` or ``Emit``
after a ``Persist`` or ``StageOutput`` takes effect only once those writes are durable.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ftctl.runtime.actions import Emit, Send  # the core produces them as they are
from protocols.contract.messages import Msg
from protocols.contract.names import (
    KV,
    Blob,
    InstanceId,
    LogicalTime,
    SnapshotRef,
    UnitId,
)

# ---------------------------------------------------------------- instance side


@dataclass(frozen=True, slots=True)
class StageOutput:
    """Stage sink records under ``epoch``; they become visible with ``CommitOutput``."""

    slot: InstanceId
    epoch: LogicalTime
    records: Sequence[KV]
    event_times: Sequence[int] = ()


@dataclass(frozen=True, slots=True)
class Chain:
    """Marks a ``Persist`` as one delta of a chain of them (``key`` names the chain).

    A host that carries out the actions of several events at once may write consecutive
    deltas of one slot and chain as one, ``fold(older, newer)``, under the newer one's
    ref and in the older one's place, when only ``Emit`` and ``Send`` lie between them
    (``ftctl/kernel/writes.py``). ``fold`` must be pure, and restoring its result must
    leave an instance where restoring both deltas would, whatever the other refs of
    the chain then hold.
    """

    key: Hashable
    fold: Callable[[Blob, Blob], Blob]


@dataclass(frozen=True, slots=True)
class Persist:
    """Write ``blob`` to stable storage as ``slot``'s ``ref`` (replacing what was there)."""

    slot: InstanceId
    ref: SnapshotRef
    blob: Blob
    chain: Chain | None = None  # one delta of a chain: see ``Chain``


@dataclass(frozen=True, slots=True)
class SendPeer:
    """A message to another slot, not along an edge (ring pings, acks against the edge).
    FIFO per pair of units; lost when either end is dead or the link is cut."""

    to: InstanceId
    msg: Msg
    sender: InstanceId | None = None  # the sending slot when a unit hosts several
    # The reply to a call goes to the calling unit itself, not through slot routing: a
    # falsely suspected caller whose slot moved must still get its answer.
    unit: UnitId | None = None


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Fire ``TimerFired(key)`` after ``after`` seconds; replaces a pending timer of ``key``.
    Timers die with the incarnation that set them."""

    key: str
    after: float


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: str


@dataclass(frozen=True, slots=True)
class Report:
    """Tell the coordinator (``ReportIn``), in order, after earlier writes are durable."""

    msg: Msg
    slot: InstanceId | None = None  # the reporting slot when a unit hosts several


@dataclass(frozen=True, slots=True)
class Suspect:
    """Protocol-level failure detection: the coordinator gets ``Suspected``."""

    instance: InstanceId
    reason: str


@dataclass(frozen=True, slots=True)
class Route:
    """Deliver ``slot``'s input (data, peer messages, controls) to unit ``to`` from now on.
    ``to`` equal to the slot's own name reinstates the slot's own unit."""

    slot: InstanceId
    to: UnitId


@dataclass(frozen=True, slots=True)
class AdoptSlot:
    """Host another slot in this unit: the kernel builds its core, restores ``restore``
    (None: empty) and delivers ``Started(reason="adopt")`` for it."""

    slot: InstanceId
    restore: SnapshotRef | None = None


@dataclass(frozen=True, slots=True)
class ReleaseSlot:
    """Stop hosting an adopted slot (its core is dropped)."""

    slot: InstanceId


# The phases the bundled protocols declare (docs/chaos.md lists who enters which, when).
SNAPSHOTTING = "snapshotting"  # taking a snapshot (until persisted, or until reported)
RECOVERING = "recovering"  # the kernel's (detection until restarts run), or a protocol's
REPLAYING = "replaying"  # resending or re-running logged input for a recovery
PURGING = "purging"  # lineage: a failure's downstream restarts, until all are ready
TAKEOVER = "takeover"  # replica-ring: a successor serves a failed slot
REINSTATING = "reinstating"  # replica-ring: the slot's own unit comes back
PLANNING = "planning"  # progressive: failed instances wait for the planner to start them


@dataclass(frozen=True, slots=True)
class DeclarePhase:
    """Enter (``on``) or leave a phase such as ``snapshotting``; fault triggers
    (``during: snapshotting``) ask the kernel's phase set. ``key`` tells overlapping
    occurrences apart (a snapshot id). Only phases listed in ``ProtocolSpec.phases``.

    An instance's occurrence is held by its unit (``target: phase-holder`` strikes it);
    the coordinator's by ``holder``, the instance it concerns, or by nobody. A unit that
    dies leaves the phases it held."""

    phase: str
    on: bool
    key: int | None = None
    holder: InstanceId | None = None  # coordinator side only


@dataclass(frozen=True, slots=True)
class Note:
    """A protocol event for the run history, as ``protocol`` with ``name=kind``."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)


InstanceAction = (Send | Emit | StageOutput | Persist | SendPeer | SetTimer | CancelTimer
                  | Report | Suspect | Route | AdoptSlot | ReleaseSlot | DeclarePhase | Note)

# ---------------------------------------------------------------- coordinator side


@dataclass(frozen=True, slots=True)
class Control:
    """Deliver ``msg`` to ``instance`` (``ControlIn``). Held for an incarnation that is
    not running yet, dropped with an incarnation that is stopped."""

    instance: InstanceId
    msg: Msg


@dataclass(frozen=True, slots=True)
class Stop:
    """Fence and kill: the incarnations become stale, their in-flight messages are lost."""

    instances: tuple[InstanceId, ...]


@dataclass(frozen=True, slots=True)
class Restart:
    """Start a new incarnation of ``instance`` (stopping a running one first).

    ``restore``/``extra`` name stored refs of the instance whose blobs ``Started`` gets.
    ``priority``: higher starts first when capacity is short. ``release``: starts with the
    same gate are released together once all registered (``"plan"``: the plan that asked
    for them, today's behaviour); ``None`` releases this start alone. A second Restart of
    a pending start only updates its priority.
    """

    instance: InstanceId
    restore: SnapshotRef | None = None
    extra: tuple[SnapshotRef, ...] = ()
    init: Msg | None = None
    priority: float = 0.0
    release: str | None = "plan"


@dataclass(frozen=True, slots=True)
class RollBack:
    """Roll a live instance back to ``to`` without killing it (``RollBackTo``); the kernel
    fences its channels first."""

    instance: InstanceId
    to: LogicalTime
    restore: SnapshotRef | None = None


@dataclass(frozen=True, slots=True)
class CommitOutput:
    """Make ``sink``'s staged epochs ``<= upto`` visible. Monotone per sink; idempotent
    per ``(sink, epoch)``."""

    sink: InstanceId
    upto: LogicalTime


@dataclass(frozen=True, slots=True)
class DiscardSnapshots:
    """Drop ``instance``'s stored refs ``> after`` (incomplete ones of a dead incarnation)
    and, with ``below``, those ``< below`` (garbage collection under a low watermark).
    ``instance=None``: every instance's, as one pass over the store (a global rollback)."""

    instance: InstanceId | None = None
    after: SnapshotRef | None = None
    below: SnapshotRef | None = None


@dataclass(frozen=True, slots=True)
class DiscardStaged:
    """Drop ``sink``'s staged, uncommitted epochs ``> after`` (they will be recomputed)."""

    sink: InstanceId
    after: LogicalTime


@dataclass(frozen=True, slots=True)
class StopRun:
    """End the run now: the protocol cannot go on without risking wrong output (a stored
    object it needs is unreadable). Every instance is stopped; what is visible stays.
    ``instance`` and ``snapshot`` name the object, when one is the cause."""

    reason: str
    instance: InstanceId | None = None
    snapshot: SnapshotRef | None = None


CoordinatorAction = (Control | Stop | Restart | RollBack | CommitOutput | DiscardSnapshots
                     | DiscardStaged | Route | SetTimer | CancelTimer | Note | DeclarePhase
                     | StopRun)
