"""Time domains and frontiers.

A frontier is a downward-closed set of logical times. Each domain encodes its frontiers
as small values: the epoch domain as the int ``k`` for ``{0..k}`` (``-1`` is empty), the
vector domains as a per-component bound (sequence numbers per edge, epochs per sink
input channel), the loop domain as the largest ``(epoch, iteration)`` of a lexicographic
down-set. ``TOP`` (keep everything) is one sentinel shared by all domains; only TOP
contains TOP. Comparisons go through the domain of the instance whose frontier is being
constrained, as in Figure 6.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol


class _Top:
    """The frontier containing every time (a live instance's current state)."""

    _instance: _Top | None = None

    def __new__(cls) -> _Top:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "TOP"

    def __reduce__(self) -> str:
        return "TOP"


TOP: Final = _Top()

Frontier = Any  # a domain's frontier value, or TOP
Time = Any  # a domain's time


class Domain(Protocol):
    """The order on one instance's frontiers (TOP is handled by the helpers below)."""

    @property
    def empty(self) -> Frontier: ...

    def le(self, a: Frontier, b: Frontier) -> bool: ...

    def meet(self, a: Frontier, b: Frontier) -> Frontier: ...

    def contains(self, f: Frontier, t: Time) -> bool: ...

    def show(self, f: Frontier) -> str: ...


def sub(dom: Domain, a: Frontier, b: Frontier) -> bool:
    """``a ⊆ b``."""
    if b is TOP:
        return True
    if a is TOP:
        return False
    return dom.le(a, b)


def meet(dom: Domain, a: Frontier, b: Frontier) -> Frontier:
    """``a ∩ b`` (frontiers are closed under intersection)."""
    if a is TOP:
        return b
    if b is TOP:
        return a
    return dom.meet(a, b)


def contains(dom: Domain, f: Frontier, t: Time) -> bool:
    return f is TOP or dom.contains(f, t)


def show(dom: Domain, f: Frontier) -> str:
    return "TOP" if f is TOP else dom.show(f)


# ---------------------------------------------------------------- epochs


class EpochDomain:
    """Totally ordered epochs; frontier ``k`` is ``{0..k}``, ``-1`` is empty."""

    empty: int = -1

    def le(self, a: int, b: int) -> bool:
        return a <= b

    def meet(self, a: int, b: int) -> int:
        return min(a, b)

    def contains(self, f: int, t: int) -> bool:
        return t <= f

    def show(self, f: int) -> str:
        return "empty" if f < 0 else f"<={f}"

    def __repr__(self) -> str:
        return "EPOCHS"


EPOCHS: Final = EpochDomain()


# ---------------------------------------------------------------- vectors


@dataclass(frozen=True, slots=True)
class Vec:
    """Per-component bounds, components at the domain's bottom left out (canonical)."""

    items: tuple[tuple[Hashable, int], ...] = ()

    def get(self, c: Hashable, bottom: int) -> int:
        for k, v in self.items:
            if k == c:
                return v
        return bottom

    @property
    def components(self) -> tuple[Hashable, ...]:
        return tuple(k for k, _ in self.items)


class VectorDomain:
    """Times ``(component, n)`` comparable only within a component (§3.1).

    ``bottom`` is the bound of an untouched component: 0 for sequence numbers (messages
    are numbered from 1), -1 for epochs per input channel (a sink's domain, spec §2).
    """

    def __init__(self, bottom: int, name: str):
        self.bottom = bottom
        self.name = name

    @property
    def empty(self) -> Vec:
        return Vec()

    def of(self, bounds: Mapping[Any, int]) -> Vec:
        return Vec(tuple(sorted(((c, n) for c, n in bounds.items() if n > self.bottom),
                                key=lambda kv: repr(kv[0]))))

    def le(self, a: Vec, b: Vec) -> bool:
        return all(n <= b.get(c, self.bottom) for c, n in a.items)

    def meet(self, a: Vec, b: Vec) -> Vec:
        return self.of({c: min(n, b.get(c, self.bottom)) for c, n in a.items})

    def contains(self, f: Vec, t: tuple[Hashable, int]) -> bool:
        return t[1] <= f.get(t[0], self.bottom)

    def show(self, f: Vec) -> str:
        if not f.items:
            return "empty"
        return "{" + ", ".join(f"{c}:{n}" for c, n in f.items) + "}"

    def __repr__(self) -> str:
        return self.name


SEQUENCES: Final = VectorDomain(0, "SEQUENCES")
CHANNEL_EPOCHS: Final = VectorDomain(-1, "CHANNEL_EPOCHS")


# ---------------------------------------------------------------- loops


class LoopDomain:
    """``(epoch, iteration)`` times ordered lexicographically, as Naiad checkpoints them
    (§4.1). Frontier ``τ`` is ``↓τ``; None is empty. Iterations run ``0..last``."""

    empty: None = None

    def __init__(self, last: int):
        self.last = last

    def le(self, a: tuple[int, int] | None, b: tuple[int, int] | None) -> bool:
        return a is None or (b is not None and a <= b)

    def meet(self, a: tuple[int, int] | None,
             b: tuple[int, int] | None) -> tuple[int, int] | None:
        return None if a is None or b is None else min(a, b)

    def contains(self, f: tuple[int, int] | None, t: tuple[int, int]) -> bool:
        return f is not None and t <= f

    def show(self, f: tuple[int, int] | None) -> str:
        return "empty" if f is None else f"<={f}"

    # edge projections between the epoch domain and the loop (§3.2)

    def ingress(self, k: Frontier) -> Frontier:
        """Epochs ``↓k`` enter as every iteration of those epochs."""
        if k is TOP:
            return TOP
        return None if k < 0 else (k, self.last)

    def egress(self, f: Frontier) -> Frontier:
        """Epoch t leaves fixed once every iteration of t is inside ``f``."""
        if f is TOP:
            return TOP
        if f is None:
            return -1
        t, c = f
        return t if c >= self.last else t - 1

    def feedback(self, f: Frontier) -> Frontier:
        """The loop's back edge adds one to the iteration."""
        if f is TOP or f is None:
            return f
        t, c = f
        return (t, min(c + 1, self.last))

    def __repr__(self) -> str:
        return f"LoopDomain({self.last})"


def greatest(dom: Domain, fronts: Iterable[Frontier]) -> Frontier:
    """The largest of a chain of frontiers."""
    best: Frontier = dom.empty
    for f in fronts:
        if sub(dom, best, f):
            best = f
    return best
