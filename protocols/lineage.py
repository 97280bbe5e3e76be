"""``lineage``: purge the failed instances' downstream and recompute it from the start.

The baseline of paper 000 (Noria's recovery). On a failure of a set F, every instance in
``reachable_from(F)`` (F and everything downstream) is stopped and started empty; nothing
upstream of that purged set is touched. The purged set is rebuilt by replaying all input
from the beginning through it:

- purged sources restart at their first offset (sources are replayable);
- a surviving instance that feeds the purged set resends its **full** output history on
  those channels from its payload log. The choice: instances keep complete payload logs
  (no garbage collection), because a purge can always reach back to the first batch; that
  is the memory cost this baseline pays instead of snapshots.

Replacements report ``ready`` once running; the coordinator then asks each of their
parents to resend from the first batch (a resend before the replacement runs would be
lost with the dead incarnation). Sinks keep their visible output and suppress, per key, as
many records as they already made visible (``protocols/logged.py``), so the recomputation
never duplicates output: exactly-once when each key's output sequence is deterministic.
"""

from __future__ import annotations

from typing import Any

from ftctl.runtime.actions import Persist
from ftctl.runtime.instance import InstanceCore
from protocols.base import CoordinatorProtocol, Event, PlanStep, Start, Stop
from protocols.logged import SLOT, LoggedInstance


class LineageInstance(LoggedInstance):
    def __init__(self, core: InstanceCore, params: Any, blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        if core.is_sink:
            if blob is not None:
                self.emitted = dict(blob["emitted"])
            else:
                # A slot must exist before any failure so a replacement can always restore.
                core.actions.append(Persist(SLOT, core.id, self.sink_blob()))
        if init and init.get("restarted"):
            self.report("ready", {ch: 1 for ch in core.inputs})


class LineageCoordinator(CoordinatorProtocol):
    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[PlanStep]:
        if kind == "ready":
            return [self._resend(ch, start) for ch, start in data.items()]
        return super().on_report(instance, kind, data, now)

    def _resend(self, ch: int, start: int) -> PlanStep:
        from protocols.base import Control

        src = self.graph.channels[ch].src
        return Control(src, {"kind": "resend", "channel": ch, "from": start})

    def on_failure(self, failed: set[str], now: float) -> list[PlanStep]:
        purged = self.graph.reachable_from(failed)
        order = [i for i in self.graph.order if i in purged]
        self.eos_sent -= purged
        steps: list[PlanStep] = [
            Stop(order),
            Event("purge", {"failed": sorted(failed), "purged": order}),
        ]
        for iid in order:
            sink = self.graph.instances[iid].is_sink
            steps.append(Start(iid, restore=SLOT if sink else None, init={"restarted": True}))
        return steps
