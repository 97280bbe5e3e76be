"""The nemesis's engine: what strikes, at which occurrence, on which target, and when,
for the faults that wait for something in the run. Both hosts use it; each implements the
port (``FaultPort``) that carries out an occurrence and knows its own clock and phases.

A planned schedule (``chaos.schedule.plan``) has timed occurrences (``at``: handed to the
port at ``start``, each to strike that long after it) and templates that wait:

- ``during: P`` (and its ``trigger`` aliases): an occurrence at each opening of P the host
  reports (``phase_opened``), if P is still open when the template's turn comes; with
  ``target: phase-holder`` on an instance holding P then, drawn with the occurrence's
  seed. An opening with no holder strikes nothing and uses no occurrence (the port is
  told, ``no_holder``), so ``count`` counts strikes; unless the port says it spent it
  (the kit's phase strike on the simulation host, with nothing running to strike).
- ``after: {phase: P, delay: D}``: an occurrence D after each opening of P.
- ``after: {fault: ID, delay: D}``: an occurrence D after each occurrence of ID injected
  something (``injected``; once per occurrence, a group's first node).
- ``trigger: progress`` (``PROGRESS``) with ``params["events"]: N``: one occurrence once the
  host has processed N events (``progressed``): the simulation host's random schedules
  (``ftctl/sim/nemesis.py``), not a scenario file's trigger. Occurrences due together
  strike in (N, index) order.

``count`` occurrences each (``after``: 1 unless given). Occurrence k of a template gets
the target and seed ``chaos.schedule.occurrence`` gives it, so a replay strikes the same;
a template planned with a seed of its own (not 0; ``chaos.schedule.plan`` leaves them 0)
keeps it, so the conformance kit's phase strike draws its holder as it always has. A
``during`` template with ``params["opening"]: k`` lets k - 1 openings pass (open or not
when their turn comes) before it strikes: the kit's crash at the k-th opening. Templates
are served in schedule order, so two waiting for one phase strike in the order the file
gives them.

Times are offsets in scenario seconds from the nemesis's start; the port scales them to its
own clock. The engine holds a lock: on Spark, strikes report injections from their own
threads while the nemesis thread reports phases.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from chaos.schedule import PlannedFault, occurrence
from ftctl.config.scenario import PHASE_HOLDER

PROGRESS = "progress"  # a trigger on host progress: params["events"], events processed
OPENING = "opening"  # a during template's param: strike at the k-th opening, not the first


class FaultPort(Protocol):
    """What a host gives the engine: delivery of occurrences and who holds a phase."""

    def deliver(self, planned: PlannedFault, now: float) -> None:
        """Strike ``planned`` now (``now``: the offset it fires at)."""

    def deliver_after(self, planned: PlannedFault, delay: float) -> None:
        """Strike ``planned`` ``delay`` scenario seconds from now."""

    def phase_holders(self, phase: str) -> Sequence[str]:
        """The running instances holding ``phase`` now."""

    def no_holder(self, planned: PlannedFault, phase: str, now: float) -> bool | None:
        """``planned`` (target phase-holder) found no instance holding ``phase``; True: the
        opening spent the occurrence all the same (else the next opening may strike)."""


@dataclass
class _Waiting:
    """A template and how many occurrences of it were planned."""

    template: PlannedFault
    fired: int = 0
    passed: int = 0  # openings let pass before the first occurrence (``OPENING``)

    @property
    def exhausted(self) -> bool:
        return self.template.count is not None and self.fired >= self.template.count

    @property
    def phase(self) -> str | None:
        """The phase whose openings it waits for (a ``during``'s or an ``after``'s)."""
        return self.template.after_phase or self.template.during


class FaultEngine:
    """Triggers and followers of one schedule over one port (see the module doc)."""

    def __init__(self, schedule: Sequence[PlannedFault], seed: int,
                 instances: Callable[[], Sequence[str]], port: FaultPort) -> None:
        self.seed = seed
        self.instances = instances
        self.port = port
        self._timed = sorted((p for p in schedule if p.at is not None), key=_time_order)
        waiting = sorted((p for p in schedule if p.at is None and p.trigger != PROGRESS),
                         key=_index_order)
        # trigger progress: in the order they fall due
        self._on_progress = sorted((p for p in schedule if p.trigger == PROGRESS),
                                   key=_progress_order, reverse=True)
        # during and after-phase templates, in schedule order
        self._on_phase = [_Waiting(p) for p in waiting
                          if p.after_fault is None and (p.during or p.after_phase)]
        # after: {fault: i}: fault index -> its followers
        self._followers: dict[int, list[_Waiting]] = {}
        for p in waiting:
            if p.after_fault is not None:
                self._followers.setdefault(p.after_fault, []).append(_Waiting(p))
        self._started: set[tuple[int, int]] = set()
        self._lock = threading.RLock()

    def start(self, now: float = 0.0) -> None:
        """The run started at offset ``now``: every timed occurrence is handed to the port,
        ``at - now`` from now, in time order."""
        for p in self._timed:
            self.port.deliver_after(p, max(0.0, (p.at or 0.0) - now))

    def phases(self) -> list[str]:
        """The phases some template still waits for, in schedule order (what a host that
        polls must watch)."""
        with self._lock:
            seen: dict[str, None] = {}
            for w in self._on_phase:
                if not w.exhausted and w.phase is not None:
                    seen.setdefault(w.phase, None)
            return list(seen)

    def waiting(self) -> bool:
        """Some template may still plan an occurrence, or some occurrence waits for the
        host's progress."""
        with self._lock:
            return bool(self._on_progress) or any(not w.exhausted for w in self._all())

    def next_progress(self) -> int | None:
        """The events processed the next progress occurrence waits for (None: none left);
        a host compares its count with it and calls ``progressed`` when it is reached."""
        with self._lock:
            return _events(self._on_progress[-1]) if self._on_progress else None

    def progressed(self, events: int, now: float) -> int | None:
        """The host has processed ``events`` events, at offset ``now``: every occurrence due
        by then strikes, in order. Returns ``next_progress()``."""
        with self._lock:
            due = self._on_progress
            while due and _events(due[-1]) <= events:
                self.port.deliver(due.pop(), now)
            return _events(due[-1]) if due else None

    def phase_opened(self, phase: str, now: float,
                     still_open: Callable[[], bool] = lambda: True) -> None:
        """``phase`` opened at offset ``now``: its ``during`` templates strike (each only
        if ``still_open()`` when its turn comes) and its ``after`` templates start their
        delay."""
        with self._lock:
            for w in self._on_phase:
                if w.phase != phase or w.exhausted:
                    continue
                if w.template.after_phase is not None:
                    self._follow(w, now)
                elif w.passed + 1 < int(w.template.params.get(OPENING, 1)):
                    w.passed += 1
                elif still_open():
                    self._strike_in(w, phase, now)

    def injected(self, planned: PlannedFault, now: float) -> None:
        """An occurrence of ``planned`` injected something at offset ``now``: what follows
        it starts its delay, once per occurrence."""
        with self._lock:
            key = (planned.index, planned.occurrence)
            if key in self._started:
                return
            self._started.add(key)
            for w in self._followers.get(planned.index, ()):
                if not w.exhausted:
                    self._follow(w, now)

    # ------------------------------------------------------------------ occurrences

    def _strike_in(self, w: _Waiting, phase: str, now: float) -> None:
        planned = occurrence(w.template, w.fired, self.instances(), self.seed, now)
        if w.template.seed:
            planned = replace(planned, seed=w.template.seed)
        if planned.target == PHASE_HOLDER:
            held = sorted(self.port.phase_holders(phase))
            if not held:
                if self.port.no_holder(planned, phase, now):
                    w.fired += 1
                return
            planned = replace(planned, target=random.Random(planned.seed).choice(held))
        w.fired += 1
        self.port.deliver(planned, now)

    def _follow(self, w: _Waiting, now: float) -> None:
        delay = w.template.delay
        planned = occurrence(w.template, w.fired, self.instances(), self.seed,
                             round(now + delay, 6))
        w.fired += 1
        self.port.deliver_after(planned, delay)

    def _all(self) -> list[_Waiting]:
        return [*self._on_phase, *(w for ws in self._followers.values() for w in ws)]


def _time_order(p: PlannedFault) -> tuple[float, int, int]:
    return (p.at or 0.0, p.index, p.occurrence)


def _index_order(p: PlannedFault) -> tuple[int, int]:
    return (p.index, p.occurrence)


def _events(p: PlannedFault) -> int:
    return int(p.params["events"])


def _progress_order(p: PlannedFault) -> tuple[int, int, int]:
    return (_events(p), p.index, p.occurrence)
