"""Tree clocks: the causal-logging structure of the ``causal`` protocol.

A tree clock is an inverted tree of instance ids, each with an integer time. The root is
the instance that owns the clock; a node's children are the instances a message could
have come from on its way to the parent, so a root-to-leaf path is a path through the
dataflow read backwards. Times start at 0.

- On receiving a batch whose piggybacked clock (a *diff*) is rooted at the sender P, the
  receiver N builds its own diff: root ``N`` at ``N``'s time + 1 with the sender's diff as
  its only child. It logs that diff and applies it to its clock (entry-wise max).
- On sending, N piggybacks a copy of its last diff.

Trees are truncated at a fixed depth so the piggyback stays constant-size: to recover f
instances failing together, a survivor must see f levels of senders plus the cause of the
deepest one, so the protocol keeps ``depth + 1`` levels below the root.

This module is pure data: no protocol, runtime or I/O knowledge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

Plain = tuple[str, int, tuple[Any, ...]]


@dataclass(slots=True)
class TreeClock:
    id: str
    time: int = 0
    children: dict[str, TreeClock] = field(default_factory=dict)

    # ------------------------------------------------------------ building

    def copy(self) -> TreeClock:
        return TreeClock(self.id, self.time, {k: c.copy() for k, c in self.children.items()})

    def to_plain(self) -> Plain:
        """``(id, time, (child, ...))``: marshal-able, for snapshots (``ftctl.codec``)."""
        return (self.id, self.time, tuple(c.to_plain() for c in self.children.values()))

    @classmethod
    def from_plain(cls, plain: Plain) -> TreeClock:
        iid, time, kids = plain
        return cls(iid, time, {k[0]: cls.from_plain(k) for k in kids})

    @staticmethod
    def receive_plain(owner: str, time: int, sender_diff: Plain | None, depth: int) -> Plain:
        """The diff ``owner`` logs when it processes a message carrying ``sender_diff``.

        Root ``owner`` at ``time`` with the sender's diff, truncated to ``depth - 1``
        levels below it, as its only child. Plain diffs are immutable tuples, so a batch,
        a diff log and a snapshot can all share one without copying, and a data frame
        carrying them stays marshal-able.
        """
        if sender_diff is None:
            return (owner, time, ())
        return (owner, time, (truncate_plain(sender_diff, depth - 1),))

    # ------------------------------------------------------------ combining

    def apply(self, diff: TreeClock) -> None:
        """Entry-wise max of corresponding paths; ``diff`` must share this clock's root."""
        if diff.id != self.id:
            raise ValueError(f"cannot apply a diff rooted at {diff.id} to a clock of {self.id}")
        if diff.time > self.time:
            self.time = diff.time
        for k, child in diff.children.items():
            mine = self.children.get(k)
            if mine is None:
                self.children[k] = child.copy()
            else:
                mine.apply(child)

    def apply_plain(self, diff: Plain) -> None:
        """``apply`` of a diff in plain form, without building it as a tree first."""
        iid, time, kids = diff
        if iid != self.id:
            raise ValueError(f"cannot apply a diff rooted at {iid} to a clock of {self.id}")
        if time > self.time:
            self.time = time
        children = self.children
        for kid in kids:
            mine = children.get(kid[0])
            if mine is None:
                mine = children[kid[0]] = TreeClock(kid[0])
            mine.apply_plain(kid)

    def merged(self, other: TreeClock) -> TreeClock:
        out = self.copy()
        out.apply(other)
        return out

    def leq(self, other: TreeClock) -> bool:
        """True when every entry of this clock is at most the corresponding one in ``other``."""
        if self.id != other.id or self.time > other.time:
            return False
        for k, child in self.children.items():
            theirs = other.children.get(k)
            if theirs is None:
                if any(n.time > 0 for n in child.walk()):
                    return False
            elif not child.leq(theirs):
                return False
        return True

    # ------------------------------------------------------------ queries

    def walk(self) -> Iterator[TreeClock]:
        yield self
        for c in self.children.values():
            yield from c.walk()

    def depth(self) -> int:
        return 1 + max((c.depth() for c in self.children.values()), default=0)


def truncate_plain(plain: Plain, depth: int) -> Plain:
    """A copy of a plain clock keeping ``depth`` levels below the root (0: the root alone)."""
    iid, time, kids = plain
    if not kids:
        return plain
    if depth <= 0:
        return (iid, time, ())
    return (iid, time, tuple(truncate_plain(k, depth - 1) for k in kids))


def plain_child(plain: Plain, node: str) -> Plain | None:
    """The child ``node`` of a plain clock's root, if it has one."""
    for kid in plain[2]:
        if kid[0] == node:
            return kid
    return None


def t_min_of(root: str, child_clocks: Iterable[TreeClock]) -> int:
    """The latest time of ``root`` that every child clock has seen (0 if some saw nothing).

    Reads only the entry directly under each child's root (paper 000, recovery step 1): a
    deeper occurrence of ``root``, reached through another path, says what that other
    path saw, not what the child received from ``root`` itself.
    """
    times = []
    for clock in child_clocks:
        direct = clock.children.get(root)
        times.append(direct.time if direct is not None else 0)
    return min(times, default=0)
