"""Selective rollback (§2.3, §3.3): restore ``H(p)@f``, the events whose time is in ``f``,
whatever order they were processed in, not the longest prefix inside ``f``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from protocols.falkirk.frontier import Domain, Frontier, contains

__all__ = ["consumed_bar", "contains", "history_at"]

Ev = TypeVar("Ev")


def history_at(history: Iterable[Ev], frontier: Frontier, domain: Domain,
               time_of: Callable[[Ev], object]) -> list[Ev]:
    """The subsequence of ``history`` whose times lie in ``frontier`` (order kept)."""
    return [ev for ev in history if contains(domain, frontier, time_of(ev))]


def consumed_bar(history: Sequence[Ev], frontier: Frontier, domain: Domain,
                 time_of: Callable[[Ev], object],
                 is_message: Callable[[Ev], bool]) -> list[object]:
    """The times of messages in the filtered history (M̄ before taking ``↓``)."""
    return sorted({time_of(ev) for ev in history_at(history, frontier, domain, time_of)
                   if is_message(ev)}, key=repr)
