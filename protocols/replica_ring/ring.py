"""The ring of one operator's replicas: who pings whom, who takes over a dead slot (§4).

Slots ``0..R-1`` are fixed; a *unit* is a running replica. A unit hosts its own slot and
every slot it took over (``represents``, own index first, §4.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


def successor(i: int, size: int) -> int:
    """§4.1: ping(i) = (i + 1) % number of replicas."""
    return (i + 1) % size


@dataclass(slots=True)
class RingMember:
    """One unit's place in the ring: the slots it represents (§4.2)."""

    index: int
    size: int
    represents: list[int] = field(default_factory=list)
    self_ping: bool = False  # mutant 'self-ping': drop §4.2's guard
    ping_prev: bool = False  # mutant 'ping-prev': ping the predecessor

    def __post_init__(self) -> None:
        if not self.represents:
            self.represents = [self.index]

    def next_of(self, i: int) -> int:
        return (i - 1) % self.size if self.ping_prev else successor(i, self.size)

    def ping_targets(self) -> list[int]:
        """Slots this unit pings: the successor of each slot it hosts, never itself.

        The guard is why ``represents`` exists: a two-replica survivor would otherwise
        ping its own taken-over slot (§4.2).
        """
        out = []
        for i in self.represents:
            t = self.next_of(i)
            if t in self.represents and not self.self_ping:
                continue
            out.append(t)
        return out

    def adopt(self, slot: int) -> None:
        """Takeover (§4.2): represent ``slot`` too; its ping duty comes with it."""
        if slot not in self.represents:
            self.represents.append(slot)

    def release(self, slot: int) -> None:
        """Reinstatement (§4.3): the returning replica's index leaves the list."""
        if slot != self.index and slot in self.represents:
            self.represents.remove(slot)


def detectors_of(slot: int, size: int, ping_prev: bool = False) -> list[int]:
    """Slots whose host pings ``slot`` (one, in a ring of two or more)."""
    probe = RingMember(0, size, ping_prev=ping_prev)
    return [s for s in range(size) if probe.next_of(s) == slot]


def choose_taker(dead: int, size: int, live: Callable[[int], bool], walk: bool,
                 ping_prev: bool = False) -> int | None:
    """The slot whose unit takes over ``dead`` (§4.1, last sentence), or None.

    The paper asks the dead slot's successor. If that one is dead too it has no next step
    and retries forever (faithful: None, the run stalls). The fixed variant walks on round
    the ring to the first slot whose unit answers (flaw F6).
    """
    probe = RingMember(0, size, ping_prev=ping_prev)
    t = probe.next_of(dead)
    seen = {dead}
    while not live(t):
        if not walk or t in seen:
            return None
        seen.add(t)
        t = probe.next_of(t)
    return None if t == dead else t


@dataclass(slots=True)
class PingDetector:
    """Ping period and timeout (§4.1) as a timer-driven state machine.

    ``tick(now, targets)`` is called every ``every`` seconds: it names the slots to ping now
    (those without an outstanding ping) and the slots newly suspected (a ping unanswered
    for ``timeout``). ``pong`` clears a slot's outstanding ping. A crash is suspected within
    ``[timeout, timeout + every]`` of the last answered ping, plus network delays.
    """

    every: float
    timeout: float
    deadlines: dict[int, float] = field(default_factory=dict)
    suspected: set[int] = field(default_factory=set)

    def tick(self, now: float, targets: list[int]) -> tuple[list[int], list[int]]:
        late = sorted(s for s, d in self.deadlines.items() if now >= d)
        for s in late:
            del self.deadlines[s]
            self.suspected.add(s)
        for s in list(self.deadlines):
            if s not in targets:  # duty moved away (reinstatement): forget it
                del self.deadlines[s]
        pings = [t for t in targets if t not in self.deadlines and t not in self.suspected]
        for t in pings:
            self.deadlines[t] = now + self.timeout
        return pings, late

    def pong(self, slot: int) -> None:
        self.deadlines.pop(slot, None)

    def clear(self, slot: int) -> None:
        """The slot is served again (taken over or reinstated): ping it afresh."""
        self.suspected.discard(slot)
        self.deadlines.pop(slot, None)
