"""One output channel's payload log: the batches sent on it, addressed by a key (their
``seq``, or under ``causal`` their sender time), kept so that any suffix can be sent again
and any prefix dropped.

A log either keeps the ``Batch`` objects (``causal``: trimmed as children checkpoint, so
it stays short and is read often) or keeps each batch encoded (``lineage``: never
trimmed before the end, so it holds every batch the instance ever sent). On
``topologies/sharder.yaml`` lineage's logs take about 300 bytes per vote as objects (a
batch, its list, and a tuple, key and count per record) and about 100 encoded
(``benchmarks/payload_log_memory.py``), for about half a CPU second more per million
votes. Encoding also freezes a batch as it was sent. A resend decodes fresh objects; a
whole history at once would be tens of millions of them in one event, so lineage
resends a bounded chunk per event (``LoggedInstance.resend_chunk``). A batch whose
record list is ``Shared`` (a simulator's memo made it and holds it, never to change)
and that carries no meta is kept as its fields instead: there is nothing to freeze,
the list costs no memory the memo does not already spend, and encoding it (a reference
to the list, pickled) was about a twentieth of a Nexmark schedule under lineage.

A causal local snapshot stores the whole log (``pack``), and a log lives across many
snapshots: on the sharder at 16,000 votes/s a shard's log to the sink held about 500
batches at each of its snapshots, and rebuilding and pickling them was half of what the
shards did. A sent batch never changes, so ``pack`` encodes each batch once, in parts
of consecutive batches, and a snapshot stores the parts still in the log.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Any

from ftctl.codec import decode, encode, encode_part
from ftctl.runtime.messages import Batch
from ftctl.runtime.shared_records import Shared

# Parts kept before ``pack`` encodes the log again as one: every snapshot adds one.
MAX_PARTS = 32

# A batch as ``pack`` stores it: (records, seq, watermark, meta).
Plain = tuple[Any, int, "int | None", Any]
# ``pack``'s form: how many batches of the first part were trimmed since, and the parts.
Packed = tuple[int, list[bytes]]


class PayloadLog:
    __slots__ = ("_base", "_encoded", "_items", "_keys", "_parts", "_sorted")

    def __init__(self, encoded: bool = False) -> None:
        self._encoded = encoded
        self._keys: list[int] = []
        self._items: list[Batch | bytes | Plain] = []
        # Keys come in increasing order (seqs, sender times), so a resend's start is found
        # by bisection; should one ever not, lookups scan instead.
        self._sorted = True
        # ``pack``'s parts as (first, end, bytes): batches numbered in the order they were
        # appended, the first one now in the log being number ``_base``.
        self._base = 0
        self._parts: list[tuple[int, int, bytes]] = []

    def append(self, key: int, batch: Batch) -> None:
        if self._keys and key < self._keys[-1]:
            self._sorted = False
        self._keys.append(key)
        if self._encoded:
            records = batch.records
            if type(records) is Shared and batch.meta is None:
                self._items.append((records, batch.seq, batch.watermark, None))
            else:
                self._items.append(encode((records, batch.seq, batch.watermark, batch.meta)))
        else:
            self._items.append(batch)

    def since(self, start: int, limit: int | None = None) -> list[Batch]:
        """The batches whose key is ``start`` or more, in the order they were sent; the
        first ``limit`` of them when given."""
        keys, items = self._keys, self._items
        if self._sorted:
            first = bisect_left(keys, start)
            end = len(keys) if limit is None else min(len(keys), first + limit)
            return [self._batch(item) for item in items[first:end]]
        picked = [i for i, k in enumerate(keys) if k >= start]
        return [self._batch(items[i]) for i in picked[:limit]]

    def trim(self, upto: int) -> None:
        """Drop the batches whose key is ``upto`` or less."""
        keys = self._keys
        if self._sorted:
            n = bisect_right(keys, upto)
            del keys[:n], self._items[:n]
            self._base += n
        else:
            kept = [i for i, k in enumerate(keys) if k > upto]
            self._keys = [keys[i] for i in kept]
            self._items = [self._items[i] for i in kept]
            self._parts = []  # not a prefix: the parts no longer match the numbering

    def drop_oldest(self) -> None:
        del self._keys[0]
        del self._items[0]
        self._base += 1

    def pack(self) -> Packed:
        """The log as a snapshot stores it, encoding only the batches appended since the
        last ``pack``; ``unpack`` reads it back."""
        base, end = self._base, self._base + len(self._items)
        parts = [p for p in self._parts if p[1] > base]
        if len(parts) >= MAX_PARTS:
            parts = []
        covered = parts[-1][1] if parts else base
        if covered < end:
            # Pickled as blobs are (``encode_part``): marshal was several times slower on
            # records the simulator's memo also holds.
            parts.append((covered, end, encode_part([self._plain(item)
                                                     for item in self._items[covered - base:]])))
        self._parts = parts
        return (base - parts[0][0] if parts else 0), [p[2] for p in parts]

    @staticmethod
    def unpack(packed: Packed) -> list[Plain]:
        """The batches ``pack`` stored, oldest first, as (records, seq, watermark, meta)."""
        skip, parts = packed
        plain: list[Plain] = []
        for part in parts:
            plain += decode(part)
        return plain[skip:]

    def _plain(self, item: Batch | bytes | Plain) -> Any:
        if isinstance(item, Batch):
            return (item.records, item.seq, item.watermark, item.meta)
        return item if isinstance(item, tuple) else decode(item)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[Batch]:
        return map(self._batch, self._items)

    def _batch(self, item: Batch | bytes | Plain) -> Batch:
        if isinstance(item, Batch):
            return item
        records, seq, watermark, meta = item if isinstance(item, tuple) else decode(item)
        return Batch(records, seq, watermark, meta)
