"""A causal sink's ``seen`` counts where they differ from its visible ones, as its local
snapshots store them.

After a fallback a sink's ``seen`` counts start again below its visible ones, and the
replay raises them back one record at a time. Each snapshot in between must store the
differences, and on Nexmark q1 (a million identities, nearly all distinct) that was
hundreds of thousands of them per snapshot, every one looked up again, copied and encoded
anew. Differences only shrink while the counts stay apart: a record of an identity that
differs is suppressed and raises ``seen`` toward the visible count, any other is shown and
raises both alike. So the first snapshot encodes every difference once, as a base part,
and each later one adds a part holding only what the suppressed records changed since:
the identities that caught up and the new counts of those still below. Each is a
``Part``, which a store that can keeps once for every snapshot holding it
(``ftctl.codec``). A new base is encoded when the parts since the last one hold more
entries than the differences left (so a snapshot stores at most about three times what
differs), or when there are ``MAX_PARTS`` of them.
"""

from __future__ import annotations

from typing import Any

from ftctl.codec import decode_part, encode_part
from protocols.shared.packed_counts import MAX_PARTS


class SeenApart:
    """The parts a sink's next snapshot stores for its differences, and the suppressed
    identities since its last one (``note``)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.since = 0  # entries in the parts after the base
        self.caught: list[Any] = []  # identities whose seen count reached the visible one
        self.below: list[Any] = []  # identities raised but still below (repeats allowed)

    def note(self, caught: list[Any], below: list[Any]) -> None:
        """What one batch's suppressed records did (``LoggedInstance.dedup``)."""
        self.caught += caught
        self.below += below

    def clear(self) -> None:
        """The counts are equal again, or set apart anew: nothing noted still holds."""
        self.parts, self.since = [], 0
        self.caught, self.below = [], []

    def base(self, differ: dict[Any, int]) -> list[bytes]:
        """Every difference, ``differ`` having just been found from all the counts."""
        self.clear()
        self.parts = [encode_part((list(differ), list(differ.values()), []), keep=True)]
        return list(self.parts)

    def changes(self, differ: dict[Any, int], seen: dict[Any, int]) -> list[bytes]:
        """``differ`` brought up to date with what was noted since the last call (in
        place: no snapshot holds it, only parts made of it), and the parts that store it."""
        caught, below = self.caught, self.below
        self.caught, self.below = [], []
        if not caught and not below:
            return list(self.parts)
        changed = {i: seen[i] for i in below}
        if changed:
            for i in caught:
                changed.pop(i, None)  # below earlier in the interval, caught up since
        for i in caught:
            del differ[i]
        differ.update(changed)
        self.since += len(changed) + len(caught)
        if self.since > len(differ) or len(self.parts) >= MAX_PARTS:
            return self.base(differ)
        self.parts.append(encode_part((list(changed), list(changed.values()), caught), keep=True))
        return list(self.parts)


def unpack_apart(parts: list[bytes]) -> dict[Any, int]:
    """The differences ``SeenApart`` stored: per identity, its ``seen`` count."""
    differ: dict[Any, int] = {}
    for part in parts:
        identities, counts, caught = decode_part(part)
        differ.update(zip(identities, counts, strict=True))
        for i in caught:
            differ.pop(i, None)
    return differ
