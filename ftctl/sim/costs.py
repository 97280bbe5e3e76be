"""An opt-in processing-cost model for the simulation host.

``SimHost`` handles every event in zero simulated time, which is right for checking
guarantees and useless for measuring what a protocol costs: a snapshot is free there.
``CostedSimHost`` makes each instance a single server. Handling a batch, a source step
or a persist keeps the instance busy for a modelled time, and anything that reaches a
busy instance waits until it is free (deliveries keep their per-channel order, because
the queue is popped only when the wait is over). Nothing else changes: the protocol,
the kernel and the seeded draws are the plain host's, so a costed run is as exactly-once
as a plain one, and only its clock differs.

The constants are modelled, not measured on any machine; every result built on them
must name them (``CostModel.describe``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ftctl.codec import encode_blob
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch
from ftctl.sim.faults import FailureSchedule
from ftctl.sim.host import SimHost
from ftctl.spill import PickledChunk
from ftctl.store import SinkStore
from protocols.contract.params import ProtocolParams
from protocols.contract.spec import ProtocolSpec


@dataclass(frozen=True)
class CostModel:
    """Seconds an instance stays busy. Per message: ``batch`` plus ``record`` per record
    (a marker costs ``batch``); per persist: ``persist`` plus ``byte`` per encoded byte."""

    batch: float = 50e-6
    record: float = 2e-6
    persist: float = 200e-6
    byte: float = 5e-9

    def describe(self) -> str:
        return (f"costs modelled: {self.batch * 1e6:g} us per message + "
                f"{self.record * 1e6:g} us per record, {self.persist * 1e6:g} us per persist + "
                f"{self.byte * 1e9:g} ns per encoded byte")


class _TimedSinks(SinkStore):
    """A ``SinkStore`` that notes when each record became visible (host time)."""

    def __init__(self, host: CostedSimHost):
        super().__init__()
        self.host = host

    def append(self, instance: str, records: Sequence[tuple[Any, Any]],
               uid: Hashable | None = None) -> None:
        before = self.count(instance)
        super().append(instance, records, uid)  # named: repeats are dropped, count what shows
        self.host.visible_now(instance, self.count(instance) - before)

    def commit_parts(self, instance: str, epoch: int,
                     parts: Sequence[Sequence[tuple[Any, Any]] | PickledChunk]) -> bool:
        done = super().commit_parts(instance, epoch, parts)
        if done:
            self.host.visible_now(instance, sum(len(p) for p in parts))
        return done


class CostedSimHost(SimHost):
    """``SimHost`` with per-instance busy time (see the module docstring).

    Besides the plain result it measures ``exec_s`` (when the last work finished),
    ``persisted_bytes`` (encoded bytes of every persisted blob), ``snapshots`` (distinct
    refs persisted) and ``latencies``: per record that became visible at a sink, the time
    from its arrival at the sink to its visibility (a transactional sink makes records
    visible only when a snapshot completes).
    """

    def __init__(self, graph: ExecutionGraph, protocol: ProtocolSpec[Any],
                 params: ProtocolParams, seed: int, costs: CostModel | None = None,
                 schedule: FailureSchedule | None = None):
        super().__init__(graph, protocol, params, seed, schedule=schedule, max_events=None)
        self.costs = costs or CostModel()
        self.busy: dict[str, float] = {}
        self.persisted_bytes = 0
        self.refs: set[int] = set()
        self.arrivals: dict[str, deque[list[float]]] = {}  # sink -> [time, records left]
        self.latencies: list[float] = []
        self.sinks = _TimedSinks(self)
        self.outputs.sinks = self.sinks
        self.batch = graph.topology.input.batch
        self.sink_ids = frozenset(graph.sinks)

    @property
    def exec_s(self) -> float:
        return max([self.now, *self.busy.values()])

    def _charge(self, iid: str, seconds: float) -> None:
        self.busy[iid] = max(self.now, self.busy.get(iid, 0.0)) + seconds

    def _on_step(self, data: tuple[str, int]) -> None:
        iid = data[0]
        free = self.busy.get(iid, 0.0)
        if free > self.now and iid in self.live:
            self._push(free, "step", data)
            return
        super()._on_step(data)
        self._charge(iid, self.costs.batch + self.costs.record * self.batch)

    def _on_deliver(self, data: tuple[Any, ...]) -> None:
        ch, epoch = data[0], data[1]
        slot = self.graph.channels[ch].dst
        # (ch, epoch) goes to the slot's own unit; a routed delivery names the unit.
        unit = data[2] if len(data) > 2 else slot
        if epoch != self.chan_epoch[ch] or unit not in self.live:
            super()._on_deliver(data)
            return
        free = self.busy.get(unit, 0.0)
        if free > self.now:
            self._push(free, "deliver", data)
            return
        msg = self.queues[ch][0]
        n = len(msg.records) if type(msg) is Batch else 0
        if n and slot in self.sink_ids:
            self.arrivals.setdefault(slot, deque()).append([self.now, float(n)])
        super()._on_deliver(data)
        self._charge(unit, self.costs.batch + self.costs.record * n)

    def persist(self, slot: str, ref: int, blob: Any) -> None:
        super().persist(slot, ref, blob)
        size = self.store.payload_bytes(ref, slot)
        self.persisted_bytes += size
        self.refs.add(ref)
        self._charge(slot, self.costs.persist + self.costs.byte * size)

    def stage(self, slot: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        # A transactional sink's output is written with its part of a snapshot: its bytes
        # cost what they would inside the snapshot blob.
        super().stage(slot, epoch, records)
        size = len(encode_blob(list(records)))
        self.persisted_bytes += size
        self._charge(slot, self.costs.byte * size)

    def visible_now(self, sink: str, n: int) -> None:
        """``n`` records of ``sink`` became visible: pair them with their arrivals, oldest
        first. A sink that emits more than it received (or after a rewind) has no
        arrival left to pair and adds no sample."""
        queue = self.arrivals.get(sink)
        while n > 0 and queue:
            head = queue[0]
            take = min(n, int(head[1]))
            self.latencies.extend([self.now - head[0]] * take)
            head[1] -= take
            n -= take
            if head[1] <= 0:
                queue.popleft()


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by the nearest-rank method; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]
