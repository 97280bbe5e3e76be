"""Clock faults on the Spark host: the driver's end of the agent's ``clock`` op.

``apply_clock_fault(host, instance, fault)`` has ``instance``'s task set ``fault`` on its
runtime clock (``ftctl/spark/agent.py``, ``InstanceTask._clock_fault``): the clock its
unit's events and timers go by. The system clock, the task's heartbeats and the driver's
own timers are untouched. The fault lasts for that task: a replacement starts on the
host's clock, as on the simulation host (``ftctl/sim/clock_faults.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ftctl.kernel.clocks import ClockFault
from ftctl.spark.agent import clock_payload

if TYPE_CHECKING:
    from ftctl.spark.host import SparkHost


def apply_clock_fault(host: SparkHost, instance: str, fault: ClockFault) -> bool:
    """Send ``fault`` to ``instance``'s task; False if it is not running now."""
    return host.agent_fault(instance, clock_payload(fault))
