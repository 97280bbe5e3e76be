"""When each source record is due on a rate-paced run: the schedule a run is judged by.

A paced source emits its k-th record (counted from the start of its range) ``due(k)``
seconds after the run's anchor; the Spark host's sources sleep until then, and sink
latency is measured from then. ``input.rate`` alone gives ``k / rate``; with
``input.rate_change`` the pace switches once, at record ``at``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftctl.runtime.topology import InputSpec


@dataclass(frozen=True)
class Pace:
    rate: float
    change_at: int | None = None
    rate_after: float | None = None

    @classmethod
    def of(cls, spec: InputSpec) -> Pace | None:
        """The input's pace; None when the sources run as fast as they can."""
        if spec.rate is None:
            return None
        change = spec.rate_change
        if change is None:
            return cls(spec.rate)
        return cls(spec.rate, change.at, change.rate)

    def due(self, k: int) -> float:
        """Seconds after the anchor at which record ``k`` of a source is due."""
        if self.change_at is None or self.rate_after is None or k <= self.change_at:
            return k / self.rate
        return self.change_at / self.rate + (k - self.change_at) / self.rate_after
