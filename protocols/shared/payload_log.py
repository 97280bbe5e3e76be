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
resends a bounded chunk per event (``LoggedInstance.resend_chunk``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from ftctl.codec import decode, encode
from ftctl.runtime.messages import Batch


class PayloadLog:
    __slots__ = ("_encoded", "_items", "_keys", "_sorted")

    def __init__(self, encoded: bool = False) -> None:
        self._encoded = encoded
        self._keys: list[int] = []
        self._items: list[Batch | bytes] = []
        # Keys come in increasing order (seqs, sender times), so a resend's start is found
        # by bisection; should one ever not, lookups scan instead.
        self._sorted = True

    def append(self, key: int, batch: Batch) -> None:
        if self._keys and key < self._keys[-1]:
            self._sorted = False
        self._keys.append(key)
        if self._encoded:
            self._items.append(encode((batch.records, batch.seq, batch.watermark, batch.meta)))
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
        else:
            kept = [i for i, k in enumerate(keys) if k > upto]
            self._keys = [keys[i] for i in kept]
            self._items = [self._items[i] for i in kept]

    def drop_oldest(self) -> None:
        del self._keys[0]
        del self._items[0]

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[Batch]:
        return map(self._batch, self._items)

    def _batch(self, item: Batch | bytes) -> Batch:
        if isinstance(item, Batch):
            return item
        records, seq, watermark, meta = decode(item)
        return Batch(records, seq, watermark, meta)
