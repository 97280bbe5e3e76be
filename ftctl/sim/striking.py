"""Where every fault enters the simulation host (``SimHost.inject``), and what all fault
kinds share: the target drawn among live units, the ``fault-injected`` / ``fault-healed`` /
``fault-skipped`` records, and the protocol's fault model (``ProtocolSpec.spared``).

Crashes (``Strike``) are carried out here; the other kinds, with the Spark host's meaning,
in ``unit_faults.py`` (pause, slow), ``link_faults.py`` (partition, delay, drop),
``node_faults.py`` (node loss, capacity), ``correlated.py`` and ``store_faults.py``. Each
fault carries itself out (``SimFault.strike``: by default the method ``actuator`` names
here or in those modules), so a new kind adds a fault record, not a branch here. Each
fault is logged, and a fault whose target is not running is logged ``fault-skipped`` with
the reason.

``Striking`` is a base of ``SimHost``: it names what it uses of the host for the type
checker, and holds no state of its own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ftctl.kernel.commands import HostCommand
from ftctl.kernel.coordinator import CoordinatorKernel
from ftctl.kernel.history import HistoryEvent
from ftctl.kernel.routing import Routing
from ftctl.kernel.unit import Unit
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.cluster import SimCluster
from ftctl.sim.faults import SimFault
from ftctl.sim.stats import SimStats
from protocols.contract.events import FailureCause


class Striking:
    """Fault entry points of the simulation host."""

    now: float
    rng: random.Random
    graph: ExecutionGraph
    kernel: CoordinatorKernel
    routing: Routing
    live: dict[str, Unit]
    stats: SimStats
    cluster: SimCluster | None
    spared: tuple[frozenset[str], ...]
    unsettled: tuple[str, ...]
    fault_ids: int

    if TYPE_CHECKING:  # the host's plumbing and the other fault kinds, defined elsewhere
        def _log(self, kind: str, *, instance: str | None = None,
                 incarnation: int | None = None, fault: str | None = None,
                 caused_by: int | None = None, **data: Any) -> HistoryEvent: ...
        def _push(self, t: float, kind: str, data: Any) -> None: ...
        def at(self, t: float, fn: Callable[[], object]) -> None: ...
        def _kill(self, iid: str, crashed: bool = True) -> None: ...
        def _apply(self, cmds: Sequence[HostCommand]) -> None: ...
        def _detected(self, failed: frozenset[str], cause: FailureCause,
                      reasons: dict[str, str], caused_by: int | None = None) -> None: ...

    def _strike(self, strike: Any) -> None:
        alive = sorted(self.live)
        if strike.targets:
            victims = [t for t in strike.targets if t in self.live]
            for t in strike.targets:
                if t not in self.live:
                    self.skip_fault("crash", t, self._not_running(t))
        else:
            victims = self.rng.sample(alive, min(strike.count, len(alive)))
            if not victims:
                self.skip_fault("crash", None, "no live instance")
        if self.spared:
            victims = self._spare(victims)
        if not victims:
            return
        self._crash(victims, "crash")

    def _crash(self, victims: list[str], kind: str | None, **data: Any) -> None:
        """``victims`` die now and are detected after the crash detection delay. ``kind``:
        the fault injected (None: a persist failed, ``store-write-failed``)."""
        self.stats.failures += 1
        self.stats.failed_instances.extend(victims)
        if kind is None:
            crash = self._log("store-write-failed", instances=sorted(victims), **data)
        else:
            self.stats.injected += 1
            crash = self._log("fault-injected", type=kind, instances=sorted(victims),
                              at_event=self.stats.events, **data)
        for v in victims:
            self._apply(self.kernel.lost(v))
            self._kill(v)
        detect = self.now + 0.002 + 0.004 * self.rng.random()
        self._push(detect, "detect", (frozenset(victims), crash.seq))

    def inject(self, fault: SimFault) -> None:
        """Strike with ``fault`` now (a schedule's, a scenario's or a test's): the fault
        carries itself out (``SimFault.strike``), so a new kind adds no branch here."""
        fault.strike(self)

    def skip_fault(self, kind: str, target: str | None, reason: str) -> None:
        self.stats.skipped += 1
        self._log("fault-skipped", type=kind, target=target, reason=reason,
                  at_event=self.stats.events)

    def _not_running(self, iid: str) -> str:
        if iid not in self.kernel.inc:
            return f"no instance {iid}"
        status = self.kernel.status(iid)  # type: ignore[arg-type]
        return f"{iid} is restarting" if status == "pending" else f"{iid} is not running"

    def _target(self, kind: str, target: str | None) -> Unit | None:
        """The live unit a fault strikes (drawn when ``target`` is None); None: skipped."""
        if target is None:
            if not self.live:
                self.skip_fault(kind, None, "no live instance")
                return None
            return self.live[self.rng.choice(sorted(self.live))]
        unit = self.live.get(target)
        if unit is None:
            self.skip_fault(kind, target, self._not_running(target))
        return unit

    def fault_injected(self, kind: str, target: str, duration: float | None,
                  **data: Any) -> int:
        self.fault_ids += 1
        self.stats.injected += 1
        self._log("fault-injected", fault=str(self.fault_ids), type=kind, target=target,
                  duration=None if duration is None else round(duration, 6), **data)
        return self.fault_ids

    def fault_healed(self, fid: int, kind: str, target: str) -> None:
        self._log("fault-healed", fault=str(fid), type=kind, target=target)

    def _up(self, unit: str, lost: Sequence[str] | set[str]) -> bool:
        """Up for the protocol's fault model: running, not among ``lost``, and holding no
        phase the protocol calls unsettled (``ProtocolSpec.unsettled``)."""
        if unit not in self.live or unit in lost:
            return False
        phases = self.kernel.open_phases
        return not any(unit in phases.holders(p) for p in self.unsettled)

    def _empties_group(self, victims: list[str]) -> bool:
        """Whether losing ``victims`` leaves a group of ``spared`` with no unit up."""
        lost = set(victims)
        return any(lost & group and not any(self._up(u, lost) for u in group)
                   for group in self.spared)

    def _spare(self, victims: list[str], kind: str = "crash") -> list[str]:
        """The protocol's fault model (``ProtocolSpec.spared``): keep one unit of each
        group up; the victims that would have emptied a group are skipped."""
        kept = list(victims)
        for group in self.spared:
            hit = sorted(v for v in kept if v in group)
            if hit and not any(self._up(u, kept) for u in group):
                kept.remove(hit[-1])  # it stays up
        if len(kept) < len(victims):
            self._log("fault-skipped", type=kind,
                      instances=sorted(set(victims) - set(kept)),
                      reason="would leave no unit of its group up")
        return kept
