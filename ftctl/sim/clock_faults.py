"""Clock faults on the simulation host: one unit's clock skews, drifts, jumps or stalls.

``apply_clock_fault(host, unit, fault)`` changes the clock of ``unit``'s running
incarnation from the host's now on (``ftctl/kernel/clocks.py``): every event's ``now`` the
protocol sees there, and every timer it set or sets, go by that clock. Pending timers are
re-armed at the simulated time their due reading now comes (a jump forward past one fires
it at once; a stall holds it). The fault lasts for the incarnation it struck: a restart
starts on the host's clock, as on Spark, where the replacement is a new task.

Nothing else reads a unit's clock: the network, the sources' pacing, the coordinator and
the host's hang detection keep the host's time.

The kinds ``clock-skew``, ``clock-drift``, ``clock-jump`` and ``clock-stall``
(``ftctl.config.fault_kinds``) strike through ``ClockStrike``: drawn by ``draw`` for
``ftctl sim --faults``, realized by ``realize`` for a scenario occurrence (its seconds
scaled to simulated time like every scenario time).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.schedule import PlannedFault
from ftctl.kernel.clocks import ClockFault, Drift, Jump, Skew, Stall, UnitClock, fault_to_dict
from ftctl.sim.faults import SimFault, event_index, span

if TYPE_CHECKING:
    from ftctl.sim.actuator import SimActuator
    from ftctl.sim.host import SimHost


@dataclass(frozen=True)
class ClockStrike(SimFault):
    """``fault`` on ``target``'s clock (None: a live unit drawn at strike time)."""

    fault: ClockFault
    target: str | None = None

    def strike(self, host: Any) -> None:
        kind = f"clock-{fault_to_dict(self.fault)['clock']}"
        unit = host._target(kind, self.target)
        if unit is not None:
            apply_clock_fault(host, unit.id, self.fault)


def _fault(kind: str, step: float, rate: float, seconds: float, catch_up: bool
           ) -> ClockFault:
    """The clock fault of ``kind``: ``step`` is a skew's offset or a jump's size."""
    if kind == "clock-skew":
        return Skew(step)
    if kind == "clock-drift":
        return Drift(rate)
    if kind == "clock-jump":
        return Jump(step)
    return Stall(seconds, catch_up)


# What ``draw`` draws: offsets, steps and stalls of the size of the schedules' other
# faults (``ftctl.sim.faults.span``), drift rates within 2x. The conformance kit compares
# these with the bounds a protocol tolerates (ftctl/conformance/clocks.py).
MAX_STEP = 0.02  # seconds of simulated time: the largest span
DRIFT_RATES = (0.5, 2.0)
# The kinds that may step a unit's clock forward: a jump, and a skew set above the
# offset the clock had (a clock a stall or a slow drift left behind steps forward by
# more than the skew drawn). A stall (drawn without catch_up) and a drift never do.
FORWARD_STEPPING = ("clock-skew", "clock-jump")


def draw(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    """One random clock fault for ``ftctl sim --faults``: offsets, steps and stalls of
    2 ms to ``MAX_STEP`` of simulated time, either sign, drifts within ``DRIFT_RATES``."""
    at, s = event_index(rng, horizon), span(rng)
    sign = rng.choice((-1.0, 1.0))
    rate = rng.uniform(*DRIFT_RATES) if kind == "clock-drift" else 1.0
    fault = _fault(kind, sign * s, rate, s, False)
    return ClockStrike(at, fault)


def realize(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    """A scenario occurrence: the target instance (a selector: one on a matching node)."""
    unit = act.instance(p, rng)
    if unit is None:
        return
    params, scale = p.params, act.scale
    step = params.get("offset", params.get("by", 0.0)) * scale
    fault = _fault(p.type, step, params.get("rate", 1.0), duration,
                   bool(params.get("catch_up", False)))
    act.host.inject(ClockStrike(0, fault, unit))


def apply_clock_fault(host: SimHost, unit_id: str, fault: ClockFault) -> bool:
    """Apply ``fault`` to ``unit_id``'s clock now; False (logged ``fault-skipped``) when
    the unit is not running."""
    data = fault_to_dict(fault)
    kind = f"clock-{data.pop('clock')}"
    unit = host.live.get(unit_id)
    if unit is None:
        if unit_id not in host.graph.instances:
            raise ValueError(f"no instance {unit_id!r}")
        host.skip_fault(kind, unit_id, f"{unit_id} is not running")
        return False
    clock = (unit.clock or UnitClock()).apply(fault, host.now)
    unit.clock = clock
    for (uid, key), (inc, local) in list(host.timer_due.items()):
        if uid != unit_id or inc != unit.inc or (uid, key) not in host.timers:
            continue
        host.timer_seq += 1
        host.timers[uid, key] = host.timer_seq
        due = clock.when(local, host.now)
        if due != math.inf:
            host._push(due, "timer", (uid, inc, key, host.timer_seq))
    duration = fault.seconds if isinstance(fault, Stall) else None
    host.fault_injected(kind, unit_id, duration, **data)
    return True
