"""A sink's visible counts as its snapshots store them: encoded a part at a time.

A sink keeps one visible count per record identity, and nearly every record of Nexmark
q1 is an identity of its own: encoding them whole with every local snapshot was 40% of a
simulated causal run. Counts only grow, and a dict keeps new keys at the end of its
order, so while no count already encoded changes, the parts encoded for earlier
snapshots still hold and only the identities added since are encoded. Each is a
``Part``: a store that can keeps it once for every snapshot holding it (``ftctl.codec``).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import Any

from ftctl.codec import derived, encode_part

# Parts kept before they are encoded again as one: a long run's snapshots would otherwise
# each add one, however few identities they bring.
MAX_PARTS = 64


class PackedCounts:
    """The encoded parts of one counts dict, covering its first ``covered`` entries."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.covered = 0

    def stale(self) -> None:
        """A count already encoded changed (or the dict was replaced): encode anew."""
        self.parts = []
        self.covered = 0

    def copy(self) -> PackedCounts:
        """The same parts, for another name of the dict they were made of."""
        other = PackedCounts()
        other.parts, other.covered = list(self.parts), self.covered
        return other

    def pack(self, counts: dict[Any, int]) -> list[bytes]:
        """``counts`` as parts to store; ``unpack`` reads them back."""
        if len(counts) < self.covered or len(self.parts) >= MAX_PARTS:
            self.stale()  # not the dict the parts were made of, or parts to merge
        if len(counts) > self.covered or not self.parts:
            self.parts.append(encode_part(newest(counts, len(counts) - self.covered), keep=True))
            self.covered = len(counts)
        return list(self.parts)

    def unpack(self, parts: list[bytes]) -> dict[Any, int]:
        """The counts ``parts`` hold (``unpack``), these parts now covering them: a
        restored dict is encoded again only once a count in it changes, not whole with
        the next snapshot (a million identities after every restart of a q0 sink)."""
        counts = unpack(parts)
        self.parts, self.covered = list(parts), len(counts)
        return counts


def newest(counts: dict[Any, int], n: int) -> tuple[list[Any], list[int]]:
    """The last ``n`` entries of ``counts`` as their identities and counts, newest first
    (parts hold disjoint identities, so their order does not matter). Read from the end
    of both views: ``islice`` from the start walks every entry before them (a q1 sink's
    snapshots, each skipping the hundreds of thousands already encoded, spent a tenth of
    a schedule so), and a dict of them would hash every identity again."""
    return (list(islice(reversed(counts.keys()), n)),
            list(islice(reversed(counts.values()), n)))


def unpack(parts: list[bytes]) -> dict[Any, int]:
    counts: dict[Any, int] = {}
    for part in parts:
        counts.update(derived(part, part_counts))  # a dict's entries, not rehashed
    return counts


def part_counts(value: tuple[list[Any], list[int]]) -> dict[Any, int]:
    """The counts one part holds, as a dict."""
    identities, values = value
    return dict(zip(identities, values, strict=True))


# ---------------------------------------------------------------- a base and its deltas

# A sink that stores its counts with every output (lineage, progressive) stores a base
# (``PackedCounts.pack``'s parts) and, per output, a delta of the counts that output
# changed: storing every count with every output cost the square of the outputs.


class CountsChain:
    """Which counts the next delta holds, and where it goes in a chain of ``length``.

    ``touch`` the identities whose visible count changed; ``next`` gives the next delta
    (its index in the chain and its counts) or None once the chain is at its longest,
    when the caller writes a base and calls ``restart``."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.written = 0  # deltas since the base
        self.touched: set[Any] = set()
        self.ones = True  # every identity touched since the last delta is at 1

    def touch(self, identities: Iterable[Any], first: bool) -> None:
        """``first``: each of ``identities`` was counted for the first time (and once)."""
        self.ones = self.ones and first
        self.touched.update(identities)

    def restart(self) -> None:
        """A base was written: it holds every count."""
        self.written = 0
        self.touched = set()
        self.ones = True

    def next(self, counts: dict[Any, int]) -> tuple[int, dict[Any, int]] | None:
        if self.written >= self.length:
            return None
        touched, ones = self.touched, self.ones
        self.touched, self.ones = set(), True
        j = self.written
        self.written += 1
        # First counts need no lookup (a million distinct records a Nexmark q0 sink).
        return j, (dict.fromkeys(touched, 1) if ones else {i: counts[i] for i in touched})


def with_deltas(base: list[bytes] | None, deltas: Iterable[dict[Any, int] | None],
                packed: PackedCounts | None = None) -> dict[Any, int]:
    """The counts of ``base`` raised by every delta present. A delta an older base
    already covers (left from an earlier chain) changes nothing: counts only grow.
    ``packed``, if given, then holds the counts as ``base``'s parts, unless a delta
    raised a count already there (new identities come after the parts)."""
    counts = (unpack(base) if packed is None else packed.unpack(base)) if base else {}
    raised = False
    for delta in deltas:
        for i, n in (delta or {}).items():
            m = counts.get(i)
            if m is None:
                counts[i] = n
            elif n > m:
                counts[i] = n
                raised = True
    if raised and packed is not None:
        packed.stale()
    return counts


def fold_deltas(older: dict[Any, int], newer: dict[Any, int]) -> dict[Any, int]:
    """Two consecutive deltas as one (``Chain.fold``): the newer count holds."""
    return {**older, **newer}
