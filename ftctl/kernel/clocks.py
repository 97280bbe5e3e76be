"""A unit's clock: what time a unit sees, given the host's true time, under clock faults.

Every time a protocol sees (the ``now`` of each event, the ``after`` of each ``SetTimer``)
is read on its unit's clock. A clock without faults reads the host's true time (simulated
seconds in the sim, the task's monotonic clock on Spark). Faults change it from an instant
``at`` (true time) on, and stay until another fault changes it again:

- ``Skew(offset)``: from ``at`` the clock reads true time + ``offset`` (a step to there:
  ``Skew(0)`` ends an earlier skew or jump);
- ``Drift(rate)``: from ``at`` the clock runs ``rate`` local seconds per true second
  (``Drift(1)`` ends a drift); a stall under way stays stalled;
- ``Jump(by)``: one step of ``by`` seconds at ``at`` (negative: back);
- ``Stall(seconds)``: time stops for ``seconds``, then runs on at the rate it had. It does
  not catch up by default: the unit stays behind by the stall, as under a negative skew
  (a time source that froze and resumed where it stopped). ``catch_up=True`` resumes with
  a forward step of what the stall held back (a cached time that is refreshed).

Time goes backwards only at a step: a negative ``Jump``, or a ``Skew`` set below the offset
the clock had. Under skews up, drifts, stalls and forward jumps it never decreases.

The clock is a pure value: ``apply`` returns a new clock. ``when(local, after)`` is the
inverse a host needs for timers: the first true time from ``after`` on at which the clock
reads ``local`` or more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

Kind = Literal["skew", "drift", "jump", "stall"]
KINDS: tuple[Kind, ...] = ("skew", "drift", "jump", "stall")


@dataclass(frozen=True, slots=True)
class Skew:
    offset: float  # seconds, + or -


@dataclass(frozen=True, slots=True)
class Drift:
    rate: float  # local seconds per true second; > 0

    def __post_init__(self) -> None:
        if not self.rate > 0 or math.isinf(self.rate):
            raise ValueError(f"drift rate must be a positive number, got {self.rate}")


@dataclass(frozen=True, slots=True)
class Jump:
    by: float  # seconds, + (forward) or - (back)


@dataclass(frozen=True, slots=True)
class Stall:
    seconds: float  # > 0
    catch_up: bool = False

    def __post_init__(self) -> None:
        if not self.seconds > 0 or math.isinf(self.seconds):
            raise ValueError(f"stall seconds must be a positive number, got {self.seconds}")


ClockFault = Skew | Drift | Jump | Stall


def fault_to_dict(f: ClockFault) -> dict[str, Any]:
    """The fault as plain data (the Spark agent's payload)."""
    if isinstance(f, Skew):
        return {"clock": "skew", "offset": f.offset}
    if isinstance(f, Drift):
        return {"clock": "drift", "rate": f.rate}
    if isinstance(f, Jump):
        return {"clock": "jump", "by": f.by}
    return {"clock": "stall", "seconds": f.seconds, "catch_up": f.catch_up}


def fault_from_dict(d: dict[str, Any]) -> ClockFault:
    """The inverse of ``fault_to_dict``; ``ValueError`` names what is wrong."""
    kind = d.get("clock")
    try:
        if kind == "skew":
            return Skew(float(d["offset"]))
        if kind == "drift":
            return Drift(float(d["rate"]))
        if kind == "jump":
            return Jump(float(d["by"]))
        if kind == "stall":
            return Stall(float(d["seconds"]), bool(d.get("catch_up", False)))
    except KeyError as e:
        raise ValueError(f"clock fault {kind!r} needs {e.args[0]!r}") from None
    raise ValueError(f"unknown clock fault {kind!r} (known: {', '.join(KINDS)})")


@dataclass(frozen=True, slots=True)
class Piece:
    """From true time ``start`` on: the reading steps by ``step``, then runs at ``rate``."""

    start: float
    step: float
    rate: float  # 0: stalled


@dataclass(frozen=True, slots=True)
class UnitClock:
    """Pieces in order of ``start``; before the first (and with none) it reads true time."""

    pieces: tuple[Piece, ...] = ()

    def read(self, t: float) -> float:
        """What the unit's clock shows at true time ``t``."""
        ps = self.pieces
        if not ps or t < ps[0].start:
            return t
        local = prev = ps[0].start
        rate = 1.0
        for p in ps:
            if p.start > t:
                break
            local += rate * (p.start - prev) + p.step
            prev, rate = p.start, p.rate
        return local + rate * (t - prev)

    def rate_at(self, t: float) -> float:
        rate = 1.0
        for p in self.pieces:
            if p.start > t:
                break
            rate = p.rate
        return rate

    def when(self, local: float, after: float) -> float:
        """The first true time >= ``after`` at which the clock reads ``local`` or more
        (``math.inf``: never, which a clock whose stalls all end does not do)."""
        t, now, rate = after, self.read(after), self.rate_at(after)
        if now >= local:
            return after
        for p in self.pieces:
            if p.start <= after:
                continue
            # Strictly before the piece: at its start its step applies (a jump back may
            # take the reading below ``local`` again at that very instant).
            if rate > 0 and now + rate * (p.start - t) > local:
                return self._settle(t + (local - now) / rate, local, p.start)
            now += rate * (p.start - t) + p.step
            t, rate = p.start, p.rate
            if now >= local:
                return t
        return self._settle(t + (local - now) / rate, local, math.inf) if rate > 0 else math.inf

    def _settle(self, t: float, local: float, limit: float) -> float:
        # float rounding may leave the reading a hair short of ``local``: step up to it
        for _ in range(64):
            if self.read(t) >= local or t >= limit:
                break
            t = math.nextafter(t, math.inf)
        return min(t, limit)

    def apply(self, fault: ClockFault, at: float) -> UnitClock:
        """This clock with ``fault`` from true time ``at`` on."""
        if isinstance(fault, Stall):
            ps = _split(_split(self.pieces, at), at + fault.seconds)
            held = 0.0
            out = []
            for i, p in enumerate(ps):
                if at <= p.start < at + fault.seconds:
                    held += p.rate * (ps[i + 1].start - p.start)  # the next piece exists
                    p = replace(p, rate=0.0)
                elif p.start == at + fault.seconds and fault.catch_up:
                    p = replace(p, step=p.step + held)
                out.append(p)
            return UnitClock(tuple(out))
        ps = _split(self.pieces, at)
        i = next(k for k, p in enumerate(ps) if p.start == at)
        p = ps[i]
        if isinstance(fault, Jump):
            return UnitClock((*ps[:i], replace(p, step=p.step + fault.by), *ps[i + 1:]))
        if isinstance(fault, Skew):
            return UnitClock((*ps[:i], replace(p, step=p.step + at + fault.offset
                                               - self.read(at)), *ps[i + 1:]))
        later = tuple(q if q.rate == 0 else replace(q, rate=fault.rate) for q in ps[i:])
        return UnitClock((*ps[:i], *later))


def _split(ps: tuple[Piece, ...], at: float) -> tuple[Piece, ...]:
    """``ps`` with a piece starting at ``at`` (no step, the rate in effect there)."""
    if any(p.start == at for p in ps):
        return ps
    rate = UnitClock(ps).rate_at(at)
    return tuple(sorted((*ps, Piece(at, 0.0, rate)), key=lambda p: p.start))
