"""Clock faults on the simulation host: one unit's clock skews, drifts, jumps or stalls.

``apply_clock_fault(host, unit, fault)`` changes the clock of ``unit``'s running
incarnation from the host's now on (``ftctl/kernel/clocks.py``): every event's ``now`` the
protocol sees there, and every timer it set or sets, go by that clock. Pending timers are
re-armed at the simulated time their due reading now comes (a jump forward past one fires
it at once; a stall holds it). The fault lasts for the incarnation it struck: a restart
starts on the host's clock, as on Spark, where the replacement is a new task.

Nothing else reads a unit's clock: the network, the sources' pacing, the coordinator and
the host's hang detection keep the host's time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ftctl.kernel.clocks import ClockFault, Stall, UnitClock, fault_to_dict

if TYPE_CHECKING:
    from ftctl.sim.host import SimHost


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
