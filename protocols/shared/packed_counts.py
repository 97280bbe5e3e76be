"""A sink's visible counts as its snapshots store them: encoded a part at a time.

A sink keeps one visible count per record identity, and nearly every record of Nexmark
q1 is an identity of its own: encoding them whole with every local snapshot was 40% of a
simulated causal run. Counts only grow, and a dict keeps new keys at the end of its
order, so while no count already encoded changes, the parts encoded for earlier
snapshots still hold and only the identities added since are encoded. Each is a
``Part``: a store that can keeps it once for every snapshot holding it (``ftctl.codec``).

A sink that stores a delta with every output (``CountsChain``) encodes, while every count
it adds is a first one, the delta's identities alone as a part, and hands that part to
its ``PackedCounts`` too (``add_fresh``). The next ``pack`` then finds the identities
added since the last one already encoded, in those parts, and stores them as one part
made of those parts instead of encoding each identity a second time: on Nexmark q0 (a
million distinct records) that second encoding was a tenth of a schedule under lineage.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain, islice
from typing import Any

from ftctl.codec import decode_part, derived, encode_part

# Parts kept before they are encoded again as one: a long run's snapshots would otherwise
# each add one, however few identities they bring.
MAX_PARTS = 64


class PackedCounts:
    """The encoded parts of one counts dict, covering its first ``covered`` entries."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.covered = 0
        # Parts of first counts (``ones_part``) that hold, between them, ``fresh``
        # identities added since ``covered``; None once something else was added.
        self.pending: list[bytes] | None = []
        self.fresh = 0

    def stale(self) -> None:
        """A count already encoded changed (or the dict was replaced): encode anew."""
        self.parts = []
        self.covered = 0
        self.pending, self.fresh = [], 0

    def add_fresh(self, part: bytes, n: int) -> None:
        """``part`` (``ones_part``) holds ``n`` identities just added to the dict, each
        at 1: ``pack`` may store it rather than encode them again."""
        if self.pending is not None:
            self.pending.append(part)
            self.fresh += n

    def not_fresh(self) -> None:
        """Identities were added that no ``add_fresh`` part holds: ``pack`` encodes."""
        self.pending = None

    def copy(self) -> PackedCounts:
        """The same parts, for another name of the dict they were made of."""
        other = PackedCounts()
        other.parts, other.covered = list(self.parts), self.covered
        other.pending = None  # what comes next is added to one name, not to both
        return other

    def pack(self, counts: dict[Any, int]) -> list[bytes]:
        """``counts`` as parts to store; ``unpack`` reads them back."""
        if len(counts) < self.covered or len(self.parts) >= MAX_PARTS:
            self.stale()  # not the dict the parts were made of, or parts to merge
        if len(counts) > self.covered or not self.parts:
            added = len(counts) - self.covered
            if self.pending and self.fresh == added:
                # Each pending part's identities were new when it was made, so they are
                # distinct, and there are as many as were added: they are what was added.
                self.parts.append(encode_part(self.pending, keep=True))
            else:
                self.parts.append(encode_part(newest(counts, added), keep=True))
            self.covered = len(counts)
        self.pending, self.fresh = [], 0
        return list(self.parts)

    def unpack(self, parts: list[bytes]) -> dict[Any, int]:
        """The counts ``parts`` hold (``unpack``), these parts now covering them: a
        restored dict is encoded again only once a count in it changes, not whole with
        the next snapshot (a million identities after every restart of a q0 sink)."""
        counts = unpack(parts)
        self.parts, self.covered = list(parts), len(counts)
        self.pending, self.fresh = [], 0
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


def part_counts(value: Any) -> dict[Any, int]:
    """The counts one part holds, as a dict: a part of ``newest``'s identities and counts,
    of first counts (``ones_part``), or of parts of first counts (``PackedCounts.pack``)."""
    if type(value) is list:  # parts of first counts: each identity in one of them, at 1
        return dict.fromkeys(chain.from_iterable(decode_part(p)[0] for p in value), 1)
    identities, values = value
    if values is None:
        return dict.fromkeys(identities, 1)
    return dict(zip(identities, values, strict=True))


def ones_part(identities: list[Any]) -> bytes:
    """A part of first counts: ``identities``, distinct, each at 1."""
    return encode_part((identities, None), keep=True)


def delta_dict(delta: dict[Any, int] | bytes) -> dict[Any, int]:
    """A delta's counts as a dict, whichever form it was stored in."""
    if isinstance(delta, dict):
        return delta
    return derived(delta, part_counts)


# ---------------------------------------------------------------- a base and its deltas

# A sink that stores its counts with every output (lineage, progressive) stores a base
# (``PackedCounts.pack``'s parts) and, per output, a delta of the counts that output
# changed: storing every count with every output cost the square of the outputs.


class CountsChain:
    """Which counts the next delta holds, and where it goes in a chain of ``length``.

    ``touch`` the identities whose visible count changed; ``next`` gives the next delta
    (its index in the chain and its counts) or None once the chain is at its longest,
    when the caller writes a base and calls ``restart``. A delta of first counts alone is
    a ``ones_part``, else a dict."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.written = 0  # deltas since the base
        # While every identity touched since the last delta is a first count they are
        # distinct, and kept in a list (no hashing: a million distinct records into a
        # Nexmark q0 sink); from the first other touch on, a set.
        self.touched: list[Any] | set[Any] = []
        self.ones = True  # every identity touched since the last delta is at 1

    def touch(self, identities: Iterable[Any], first: bool) -> None:
        """``first``: each of ``identities`` was counted for the first time (and once)."""
        touched = self.touched
        if self.ones and first:
            assert isinstance(touched, list)
            touched.extend(identities)
            return
        if self.ones:
            touched = self.touched = set(touched)
            self.ones = False
        assert isinstance(touched, set)
        touched.update(identities)

    def restart(self) -> None:
        """A base was written: it holds every count."""
        self.written = 0
        self.touched = []
        self.ones = True

    def next(self, counts: dict[Any, int], packed: PackedCounts | None = None
             ) -> tuple[int, dict[Any, int] | bytes] | None:
        """The next delta, or None. ``packed`` (the parts of ``counts``) learns what the
        delta adds: a delta of first counts is a part its next ``pack`` may reuse."""
        if self.written >= self.length:
            return None
        j = self.written
        self.written += 1
        return j, self.take(counts, packed)

    def take(self, counts: dict[Any, int], packed: PackedCounts | None = None
             ) -> dict[Any, int] | bytes:
        """The counts touched since the last delta, as the next delta holds them: for a
        base, ``packed`` then learns of them as ``next`` would tell it."""
        touched, ones = self.touched, self.ones
        self.touched, self.ones = [], True
        if ones:  # first counts: no lookup, and encoded once for the delta and the base
            assert isinstance(touched, list)
            part = ones_part(touched)
            if packed is not None:
                packed.add_fresh(part, len(touched))
            return part
        if packed is not None:
            packed.not_fresh()
        return {i: counts[i] for i in touched}


def with_deltas(base: list[bytes] | None, deltas: Iterable[dict[Any, int] | bytes | None],
                packed: PackedCounts | None = None) -> dict[Any, int]:
    """The counts of ``base`` raised by every delta present. A delta an older base
    already covers (left from an earlier chain) changes nothing: counts only grow.
    ``packed``, if given, then holds the counts as ``base``'s parts, unless a delta
    raised a count already there (new identities come after the parts)."""
    counts = (unpack(base) if packed is None else packed.unpack(base)) if base else {}
    raised = False
    for delta in deltas:
        if delta is None:
            continue
        for i, n in delta_dict(delta).items():
            m = counts.get(i)
            if m is None:
                counts[i] = n
            elif n > m:
                counts[i] = n
                raised = True
    if raised and packed is not None:
        packed.stale()
    return counts


def fold_deltas(older: dict[Any, int] | bytes, newer: dict[Any, int] | bytes
                ) -> dict[Any, int]:
    """Two consecutive deltas as one (``Chain.fold``): the newer count holds."""
    return {**delta_dict(older), **delta_dict(newer)}
