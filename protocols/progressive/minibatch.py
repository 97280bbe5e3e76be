"""Order-preserving mini-batches and per-channel de-duplication (paper 004, §4; R16-R18).

During progressive recovery a replayed partition must emit exactly what its previous
incarnation emitted, batch for batch, so its receivers can drop what they already have
by sequence number alone. Two things make replays identical:

- **boundaries from offsets**: each source closes mini-batch ``b`` every ``size`` wire
  batches counted from its offset at the episode's checkpoint (``Cutter``), so a restarted
  source and a replaying one cut the same mini-batches (D11);
- **a fixed processing order**: a partition holds mini-batch ``b`` per input channel until
  ``mb(b)`` arrived on every input (an ended input counts as arrived), then processes it
  round-robin over its inputs in ascending channel id, one wire batch per turn, each
  channel in sequence order (``Aligner``; D10).

``Positions`` is R17: per input channel the last accepted ``seq``; a batch is accepted iff
it is of the receiver's generation and exactly the next one. Lower is a duplicate, higher a
gap (a resend will fill it), an older generation is stale, a newer one waits for its
rollback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

T = TypeVar("T")


class Verdict(StrEnum):
    ACCEPT = "accept"
    DUPLICATE = "duplicate"  # seq <= pos: the receiver has it
    GAP = "gap"  # seq > pos + 1: something before it is missing; a resend brings both
    STALE = "stale"  # sent before a rollback the receiver already took
    FUTURE = "future"  # sent after a rollback the receiver has not taken yet


class Positions:
    """R17: the last accepted ``seq`` per input channel; part of the checkpointed state."""

    def __init__(self, channels: Iterable[int], pos: Mapping[int, int] | None = None):
        self.pos = {ch: 0 for ch in channels}
        if pos:
            self.pos.update(pos)

    def judge(self, ch: int, seq: int, gen: int = 0, mine: int = 0) -> Verdict:
        if gen < mine:
            return Verdict.STALE
        if gen > mine:
            return Verdict.FUTURE
        at = self.pos[ch]
        if seq <= at:
            return Verdict.DUPLICATE
        return Verdict.ACCEPT if seq == at + 1 else Verdict.GAP

    def accept(self, ch: int, seq: int, gen: int = 0, mine: int = 0) -> bool:
        """Judge and, if accepted, advance the channel's position."""
        if self.judge(ch, seq, gen, mine) is not Verdict.ACCEPT:
            return False
        self.pos[ch] = seq
        return True

    def resume(self) -> dict[int, int]:
        """The next seq wanted per channel (what a restored instance asks its upstreams)."""
        return {ch: p + 1 for ch, p in self.pos.items()}


@dataclass
class Cutter:
    """A source's mini-batch boundaries: after every ``size``-th wire batch counted from
    the anchor (its offset at the episode's checkpoint), close the next mini-batch."""

    size: int
    sent: int = 0  # wire batches since the anchor
    closed: int = 0  # mini-batches closed so far; the open one is ``closed + 1``

    def after_batch(self) -> int | None:
        """Count one batch sent; the id of the mini-batch it closes, if any."""
        self.sent += 1
        if self.sent % self.size:
            return None
        self.closed += 1
        return self.closed


@dataclass
class Aligner(Generic[T]):
    """R16 at a partition: batches held per mini-batch and input channel, released in the
    fixed order once every live input closed the mini-batch."""

    channels: tuple[int, ...]
    ended: set[int] = field(default_factory=set)
    closed: dict[int, int] = field(default_factory=dict)  # channel -> last mb(b) seen
    held: dict[int, dict[int, list[T]]] = field(default_factory=dict)  # b -> ch -> batches
    done: int = 0  # mini-batches released so far

    def __post_init__(self) -> None:
        self.channels = tuple(sorted(self.channels))
        for ch in self.channels:
            self.closed.setdefault(ch, self.done)

    def add(self, ch: int, item: T) -> None:
        """A batch on ``ch``: it belongs to the mini-batch open on that channel."""
        b = self.closed[ch] + 1
        self.held.setdefault(b, {}).setdefault(ch, []).append(item)

    def close(self, ch: int, b: int) -> None:
        """``mb(b)`` arrived on ``ch``."""
        self.closed[ch] = max(self.closed[ch], b)

    def end(self, ch: int) -> None:
        """``ch`` ended: it counts as having closed every mini-batch."""
        self.ended.add(ch)

    def ready(self) -> list[tuple[int, list[tuple[int, T]]]]:
        """Every mini-batch now complete, oldest first (``pop`` until None)."""
        out = []
        while (one := self.pop()) is not None:
            out.append(one)
        return out

    def pop(self) -> tuple[int, list[tuple[int, T]]] | None:
        """The next mini-batch if it is complete, as its batches in processing order:
        round-robin over channels in ascending id, one batch per turn.

        Once every input ended, the rest go out up to the last one any input closed or
        holds, empty ones too: how many an instance forwards must not depend on whether
        its inputs ended before or after it released them."""
        b = self.done + 1
        live = [ch for ch in self.channels if ch not in self.ended]
        if live:
            if any(self.closed[ch] < b for ch in live):
                return None
        elif b > max([*self.closed.values(), *self.held, 0]):
            return None
        self.done = b
        return b, round_robin(self.held.pop(b, {}))


def round_robin(per_channel: Mapping[int, list[T]]) -> list[tuple[int, T]]:
    """D10: one item per channel per turn, channels in ascending id."""
    queues = {ch: list(items) for ch, items in sorted(per_channel.items())}
    out: list[tuple[int, T]] = []
    while any(queues.values()):
        for ch, q in queues.items():
            if q:
                out.append((ch, q.pop(0)))
    return out
