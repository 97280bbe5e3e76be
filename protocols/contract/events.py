"""Events a protocol receives: instance side (in a unit) and coordinator side (the driver).

The kernel delivers them in order and drops events of stale incarnations before a
protocol sees them: a protocol never compares incarnations itself. ``now`` is the clock of
the unit the event is for (simulated seconds in the sim, the task's monotonic clock on
Spark, unless a clock fault changed it: ``ftctl/kernel/clocks.py``); on the coordinator
side it is the driver's. It is the only time a protocol ever sees, and ``SetTimer``'s
``after`` counts on the same clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ftctl.runtime.messages import Batch, Marker
from protocols.contract.messages import Msg
from protocols.contract.names import Blob, ChannelId, InstanceId, LogicalTime, SnapshotRef, UnitId
from protocols.contract.view import Capacity

StartReason = Literal["initial", "restart", "rollback", "adopt"]

# ---------------------------------------------------------------- instance side


@dataclass(frozen=True, slots=True)
class Started:
    """First event of every incarnation of ``slot``, and of a slot adopted by a takeover.

    ``restored`` is the blob stored under ``Restart.restore`` (None: start empty);
    ``extra`` maps each of ``Restart.extra`` to its blob, None where nothing was stored;
    ``init`` is the coordinator's ``Restart.init`` as given.
    """

    slot: InstanceId
    incarnation: int
    reason: StartReason
    restored: Blob | None = None
    extra: Mapping[SnapshotRef, Blob | None] = field(default_factory=dict)
    init: Msg | None = None


@dataclass(frozen=True, slots=True)
class BatchIn:
    """Records arriving on an input channel of ``slot`` (``batch.seq`` numbers the channel)."""

    slot: InstanceId
    channel: ChannelId
    batch: Batch


@dataclass(frozen=True, slots=True)
class MarkerIn:
    """An in-band marker on an input channel: snapshot tokens, end of stream, punctuations."""

    slot: InstanceId
    channel: ChannelId
    marker: Marker


@dataclass(frozen=True, slots=True)
class SourceReady:
    """A source slot may produce its next batch. Pacing (rate, jitter) is the host's."""

    slot: InstanceId
    now: float


@dataclass(frozen=True, slots=True)
class PeerIn:
    """A message from another instance sent with ``SendPeer``, not along a graph edge:
    ring colleagues, or adjacent operators against the edge (acks, fetches)."""

    sender: InstanceId
    msg: Msg
    to: InstanceId | None = None  # the addressed slot, when this unit hosts several


@dataclass(frozen=True, slots=True)
class ControlIn:
    """A control from the coordinator (``Control``), addressed to ``slot``."""

    msg: Msg
    slot: InstanceId | None = None


@dataclass(frozen=True, slots=True)
class TimerFired:
    """A timer set with ``SetTimer(key, after)`` came due. Shared by both sides."""

    key: str
    now: float


@dataclass(frozen=True, slots=True)
class RollBackTo:
    """Selective rollback of a live slot (``RollBack``): the process stays up, the kernel
    has fenced its channels; the protocol restores ``restored`` and continues at ``to``."""

    slot: InstanceId
    to: LogicalTime
    restored: Blob | None = None


InstanceEvent = (Started | BatchIn | MarkerIn | SourceReady | PeerIn | ControlIn | TimerFired
                 | RollBackTo)

# ---------------------------------------------------------------- coordinator side


@dataclass(frozen=True, slots=True)
class RunStarted:
    """The run began; ``initial`` has been applied."""

    now: float


@dataclass(frozen=True, slots=True)
class InstanceRunning:
    """An incarnation registered and was released (its plan's gate opened)."""

    instance: InstanceId
    incarnation: int
    unit: UnitId
    now: float


@dataclass(frozen=True, slots=True)
class ReportIn:
    """A ``Report`` from a live incarnation; earlier Persist/StageOutput of it are durable."""

    instance: InstanceId
    incarnation: int
    msg: Msg
    now: float


FailureCause = Literal["heartbeat", "exit", "protocol", "storage"]


@dataclass(frozen=True, slots=True)
class FailureDetected:
    """Instances found dead (already fenced by the kernel: their incarnations are stale).

    ``nodes`` names the cluster nodes whose loss caused it, when known (capacity planning).
    """

    instances: frozenset[InstanceId]
    now: float
    cause: FailureCause = "exit"
    reasons: Mapping[InstanceId, str] = field(default_factory=dict)
    nodes: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Suspected:
    """An instance's ``Suspect`` action reached the coordinator (protocol-level detection).
    Nothing is fenced yet: the coordinator may ``Stop`` the suspect."""

    instance: InstanceId
    by: InstanceId
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class CapacityChanged:
    """Nodes left or returned, or starts were placed: the new capacity."""

    capacity: Capacity
    now: float


@dataclass(frozen=True, slots=True)
class StoreFault:
    """A start (or in-place rollback) needs a stored object that cannot be trusted:
    ``kind`` "corrupt" (its bytes are not as written: damaged, truncated) or "missing".
    Nothing was restored from it: the instances whose start needed it (``fenced``) are
    stopped, not started. The coordinator re-plans their recovery, or stops the run
    (``StopRun``; the default)."""

    instance: InstanceId
    snapshot: SnapshotRef
    kind: Literal["corrupt", "missing", "unavailable"]
    why: str
    now: float
    fenced: frozenset[InstanceId] = frozenset()


CoordinatorEvent = (RunStarted | InstanceRunning | ReportIn | FailureDetected | Suspected
                    | CapacityChanged | TimerFired | StoreFault)
