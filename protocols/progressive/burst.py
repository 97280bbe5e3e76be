"""Burst detection and the coordinator's recovery mode (paper 004, §4; spec R7-R10).

A burst is more than ``threshold`` distinct nodes lost within ``window`` seconds. The
paper uses one such window twice: a burst switches adaptive upstream buffering on, and
failed nodes above a threshold choose progressive over blocking recovery (D12: one
detector for both). ``next_mode`` is the transition table of R8-R10.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Mode(StrEnum):
    NORMAL = "normal"  # no failure being recovered; only sources buffer
    BLOCKING = "blocking"  # recovering without extra buffers (a lone failure)
    PROGRESSIVE = "progressive"  # recovering with recovery buffers and mini-batches


class BurstDetector:
    """Remembers ``(t, node)`` losses; ``burst(now)`` asks R7's question."""

    def __init__(self, window: float, threshold: int):
        self.window = window
        self.threshold = threshold
        self.losses: list[tuple[float, str]] = []

    def lost(self, now: float, nodes: Iterable[str]) -> bool:
        """Record nodes lost at ``now``; whether that makes a burst."""
        self.losses += [(now, n) for n in nodes]
        return self.burst(now)

    def burst(self, now: float) -> bool:
        """More than ``threshold`` distinct nodes lost in ``(now - window, now]``."""
        lo = now - self.window
        self.losses = [(t, n) for t, n in self.losses if t > lo]
        return len({n for t, n in self.losses if t <= now}) > self.threshold


@dataclass(frozen=True, slots=True)
class Transition:
    """The mode after a failure, and whether every live instance rolls back (R8, R9)."""

    mode: Mode
    rollback: bool


def next_mode(mode: Mode, burst: bool) -> Transition:
    """R8: a first failure rolls everyone back and picks the mode by the detector. R9: a
    blocking episode has no buffers to replay one partition from, so it rolls back again,
    turning progressive on a burst. R10: a progressive episode only restores the new ones."""
    if mode is Mode.PROGRESSIVE:
        return Transition(Mode.PROGRESSIVE, False)
    return Transition(Mode.PROGRESSIVE if burst else Mode.BLOCKING, True)
