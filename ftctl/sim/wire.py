"""An opt-in bandwidth model for the simulation host: more bytes and more messages cost time.

``SimHost`` gives every message the same latency draw (``NET_DELAY``), so a protocol that
sends six times as many messages runs exactly as long. ``WiredSimHost`` gives each unit one
outgoing link (or, ``shared``, one link for all). A message occupies its sender's link for
``per_message + bytes / bandwidth`` seconds, after whatever the link is still sending; it
arrives that long after it was handed to the link, plus the plain host's latency draw. The
draws, the kernel and the protocol are the plain host's, so a wired run keeps its guarantee
and only its clock differs; the plain host (``_transfer`` returns 0) is unchanged.

What a message weighs is the caller's model (``size``); by default its encoded bytes
(``ftctl.codec.encode``). The constants are modelled, not measured on any network; every
result built on them must name them (``WireModel.describe``). A link slower than the
protocol's timers can keep itself busy with their resends and pings: set them long.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ftctl.codec import encode
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import FailureSchedule
from ftctl.sim.host import SimHost
from protocols.contract.params import ProtocolParams
from protocols.contract.spec import ProtocolSpec


@dataclass(frozen=True)
class WireModel:
    """An outgoing link: ``per_message`` seconds per message plus its bytes at
    ``bandwidth`` bytes per second. One per unit, or with ``shared`` one for all units
    (every instance on one machine, as in a single-host test bed)."""

    per_message: float = 20e-6
    bandwidth: float = 10e6
    shared: bool = False

    def cost(self, size: int) -> float:
        return self.per_message + size / self.bandwidth

    def describe(self) -> str:
        return (f"wire modelled: {self.per_message * 1e6:g} us per message + bytes at "
                f"{self.bandwidth / 1e6:g} MB/s, "
                + ("one link shared by all units" if self.shared
                   else "one outgoing link per unit"))


def encoded_size(msg: Any) -> int:
    """A message's weight when the caller models none: its encoded bytes."""
    return len(encode(msg))


class WiredSimHost(SimHost):
    """``SimHost`` whose messages queue on their sender's link (see the module docstring).

    Measures ``wire_bytes`` and ``wire_messages`` (everything that went on a link) and
    ``last_output`` (when a sink last received records: the run's length, which the
    host's end time is not, since timers keep running after the output is complete).
    """

    def __init__(self, graph: ExecutionGraph, protocol: ProtocolSpec[Any],
                 params: ProtocolParams, seed: int, wire: WireModel | None = None,
                 size: Callable[[Any], int] = encoded_size,
                 schedule: FailureSchedule | None = None):
        super().__init__(graph, protocol, params, seed, schedule=schedule, max_events=None)
        self.wire = wire or WireModel()
        self.size = size
        self.link_free: dict[str, float] = {}  # unit -> when its link has sent its queue
        self.wire_bytes = 0
        self.wire_messages = 0
        self.last_output = 0.0

    def _transfer(self, sender: str, msg: Any) -> float:
        # A unit standing in for another slot sends that slot's messages on its own link.
        unit = ("" if self.wire.shared
                else self.routing.unit_of(sender) if self.routing.moved else sender)
        size = self.size(msg)
        self.wire_bytes += size
        self.wire_messages += 1
        done = max(self.now, self.link_free.get(unit, 0.0)) + self.wire.cost(size)
        self.link_free[unit] = done
        return done - self.now

    def emit(self, slot: str, records: Sequence[tuple[Any, Any]],
             uid: Hashable | None = None) -> None:
        super().emit(slot, records, uid)
        if records:
            self.last_output = self.now
