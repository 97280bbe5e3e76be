"""Punctuation checkpoints and the buffers behind them (paper 004, §4; spec R1-R4, R18, R20).

- ``Checkpoints`` (coordinator): ``cp(P_k)`` is complete once every instance reported its
  part of punctuation ``k``. Completion is in id order, so a later completion implies the
  earlier ones; a rollback to ``k`` forgets the partial reports above it.
- ``SourceBuffer`` (every source, always): everything sent since the offset of the latest
  complete checkpoint. ``mark(k)`` remembers where ``P_k`` was injected; only ``trim(k)``,
  sent by the coordinator once ``cp(P_k)`` is complete, drops what came before it (a
  source's own snapshot is not enough: another instance may still fail before ``cp(P_k)``).
  A live source rolled back to ``k`` replays ``since(k)`` instead of regenerating.
- ``RecoveryBuffer`` (every non-sink partition, progressive mode only): what was sent per
  output channel since the rollback, with the batch position at each send, so a restarted
  downstream partition is served from the position it asks for (R18). Dropped on
  ``normal(m)`` (R20).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Checkpoints:
    """Which punctuation checkpoints are complete; instances ``everyone``."""

    everyone: frozenset[str]
    complete: int = 0  # 0: the initial state, complete by definition
    reports: dict[int, set[str]] = field(default_factory=dict)

    def persisted(self, instance: str, k: int) -> bool:
        """``instance`` persisted its part of ``P_k``; True when that completes ``cp(P_k)``."""
        if k <= self.complete:
            return False
        got = self.reports.setdefault(k, set())
        got.add(instance)
        if not self.everyone <= got:
            return False
        self.complete = k
        self.reports = {s: r for s, r in self.reports.items() if s > k}
        return True

    def forget(self, instances: Iterable[str]) -> None:
        """These failed: what they persisted of checkpoints not yet complete does not count.
        Their replacements restore an older point and must reach those punctuations again;
        counting a dead incarnation's part would end a recovery episode (R20) while a
        replacement still replays in mini-batch order."""
        for got in self.reports.values():
            got.difference_update(instances)

    def rollback(self) -> int:
        """Forget partial reports (they belong to a discarded future); the restore point."""
        self.reports.clear()
        return self.complete


@dataclass
class SourceBuffer(Generic[T]):
    """A source's sent messages since the latest trimmed punctuation (R4)."""

    items: list[T] = field(default_factory=list)
    base: int = 0  # position of items[0] among everything ever sent
    marks: dict[int, int] = field(default_factory=dict)  # punctuation k -> position

    @property
    def position(self) -> int:
        return self.base + len(self.items)

    def append(self, item: T) -> None:
        self.items.append(item)

    def mark(self, k: int) -> None:
        """``P_k`` is injected here: what follows is after the checkpoint."""
        self.marks[k] = self.position

    def trim(self, k: int) -> None:
        """``cp(P_k)`` is complete: drop everything sent before ``P_k``."""
        at = self.marks.get(k)
        if at is None or at <= self.base:
            return
        del self.items[: at - self.base]
        self.base = at
        self.marks = {j: p for j, p in self.marks.items() if j >= k}

    def since(self, k: int) -> list[T]:
        """What was sent after ``P_k`` (everything kept when ``P_k`` is the base, k = 0)."""
        at = self.marks.get(k, self.base)
        if at < self.base:
            raise ValueError(f"punctuation {k} was trimmed away")
        return self.items[at - self.base:]

    def rewind(self, k: int) -> list[T]:
        """Roll back to ``P_k``: return what follows it and forget it (it is resent and
        appended again) along with the later marks."""
        out = self.since(k)
        at = self.marks.get(k, self.base)
        del self.items[at - self.base:]
        self.marks = {j: p for j, p in self.marks.items() if j <= k}
        return out


@dataclass
class RecoveryBuffer(Generic[T]):
    """Per output channel, what was sent since buffering went on, each with the channel's
    batch position: a batch's own seq, or for a marker the seq of the batch before it."""

    on: bool = False
    log: dict[int, list[tuple[bool, int, T]]] = field(default_factory=dict)

    def start(self, channels: Iterable[int]) -> None:
        self.on = True
        self.log = {ch: [] for ch in channels}

    def stop(self) -> None:
        self.on = False
        self.log = {}

    def append(self, ch: int, seq: int, item: T, *, batch: bool) -> None:
        """Record ``item`` sent on ``ch`` (nothing is kept while buffering is off)."""
        if self.on:
            self.log.setdefault(ch, []).append((batch, seq, item))

    def since(self, ch: int, start: int) -> list[T]:
        """What a receiver that wants batch ``start`` next has not seen: batches from
        ``start`` on, and the markers sent after batch ``start - 1``."""
        return [m for is_batch, s, m in self.log.get(ch, [])
                if s >= (start if is_batch else start - 1)]

    def size(self) -> int:
        return sum(len(v) for v in self.log.values())
