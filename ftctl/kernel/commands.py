"""What the coordinator kernel asks its host to do (transport and process control only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocols.contract.events import RollBackTo
from protocols.contract.messages import Msg


@dataclass(frozen=True, slots=True)
class Fence:
    """Kill the units of these instances and drop what is in flight to or from them.
    The kernel has already made their incarnations stale."""

    instances: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StartGroup:
    """Start these incarnations; they are released together once all are up. The host
    calls ``CoordinatorKernel.start_unit`` for each when it actually starts it."""

    starts: tuple[tuple[str, int], ...]  # (instance, incarnation)


@dataclass(frozen=True, slots=True)
class SendControl:
    """Carry ``msg`` to ``instance``; on arrival ask ``CoordinatorKernel.control_arrived``.
    ``slot``: the adopted slot the control is for, when ``instance`` hosts it for another."""

    instance: str
    incarnation: int
    msg: Msg
    slot: str | None = None


@dataclass(frozen=True, slots=True)
class RollBackUnit:
    """Roll the running ``instance`` back in place (``RollBack``): its process stays up.

    Where the unit takes it (in order with the controls sent before it), the host drops
    what is in flight on the unit's channels, both ways, and hands the unit ``event``.
    ``epoch`` is the unit's new data epoch (``CoordinatorKernel.epoch``): data it sent
    before, and data sent to it before, carry an older one and are dropped."""

    instance: str
    incarnation: int
    epoch: int
    event: RollBackTo


@dataclass(frozen=True, slots=True)
class Log:
    """An entry for the run's history (``kind`` with ``data``)."""

    kind: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Trace:
    """A line for the host's trace (deterministic replay diagnostics)."""

    text: str


@dataclass(frozen=True, slots=True)
class SetCoordinatorTimer:
    key: str
    after: float
    token: int  # the host hands it back with ``timer_fired``; older tokens are stale


@dataclass(frozen=True, slots=True)
class CancelCoordinatorTimer:
    key: str


HostCommand = (Fence | StartGroup | SendControl | RollBackUnit | Log | Trace
               | SetCoordinatorTimer | CancelCoordinatorTimer)
