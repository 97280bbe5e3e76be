"""The lifecycle records both hosts write (docs/history.md): ``instance-stopped``,
``instance-running``, ``recovered`` and ``source-rewound``.

The kernel decides when they are written from events both hosts report in the same
terms: a detection (``CoordinatorKernel.failure``), a fence, the release of a start group
(every member up), and a restarted source's resume offset. So the simulation host's
history carries them on simulated time, as the Spark host's does on its clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ftctl.kernel.commands import Log
from ftctl.kernel.phases import KERNEL, RECOVERING, Phases


class Lifecycle:
    """Whether a recovery is under way (from its first detection until every start group
    is released), and the offsets restarted sources had reached before their restart."""

    def __init__(self, digits: int = 4, phases: Phases | None = None) -> None:
        self.digits = digits  # of ``recovered``'s seconds: the host's clock resolution
        self.recovering = False
        # A recovery is the kernel's occurrence of the ``recovering`` phase, keyed by its
        # number, so triggers and ``ClusterView.phases`` see the same span as ``recovered``.
        self.phases = phases if phases is not None else Phases()
        self.recoveries = 0
        self.detected_at = 0.0
        # (source, incarnation) -> the furthest offset seen before that restart
        self.rewinding: dict[tuple[str, int], int] = {}

    def detected(self, now: float) -> list[Log]:
        """A failure was detected: a recovery starts, unless one is under way (then its
        time still counts from the first detection). Its ``phase-entered``, if it starts."""
        if self.recovering:
            return []
        self.detected_at = now
        self.recovering = True
        self.recoveries += 1
        return self.phases.declare(RECOVERING, True, self.recoveries, None, origin=KERNEL)

    def running(self, members: Iterable[str],
                placement: Mapping[str, str] | None = None) -> Log:
        """A start group was released: its members process input."""
        data: dict[str, object] = {"instances": sorted(members)}
        if placement:
            data["placement"] = dict(placement)
        return Log("instance-running", data)

    def settled(self, now: float, idle: bool) -> list[Log]:
        """After releases: ``idle`` when no start is waiting for its group to be released;
        then the recovery under way is over."""
        if not (self.recovering and idle):
            return []
        self.recovering = False
        return [Log("recovered", {"seconds": round(now - self.detected_at, self.digits)}),
                *self.phases.declare(RECOVERING, False, self.recoveries, None,
                                     origin=KERNEL)]

    def source_restarted(self, source: str, incarnation: int, reached: int) -> None:
        self.rewinding[(source, incarnation)] = reached

    def waiting(self, source: str, incarnation: int) -> bool:
        """Whether a restarted source's resume offset is still to be recorded."""
        return (source, incarnation) in self.rewinding

    def source_resumed(self, source: str, incarnation: int, start: int) -> Log | None:
        """The restarted source resumes at ``start``: what it reads again runs from there
        to the furthest offset seen before the restart. None if it was not restarted."""
        reached = self.rewinding.pop((source, incarnation), None)
        if reached is None:
            return None
        reached = max(reached, start)
        return Log("source-rewound", {"instance": source, "incarnation": incarnation,
                                      "from": start, "to": reached,
                                      "records": reached - start})


def stopped(instances: Iterable[str]) -> Log:
    """The coordinator fenced ``instances`` (written right after the ``Fence``)."""
    return Log("instance-stopped", {"instances": list(instances)})
