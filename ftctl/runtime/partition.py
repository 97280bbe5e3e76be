"""How records are split onto the channels of a hash-partitioned output group.

A pure function of the records and the channels: the core routes with it, and a protocol
that regenerates a batch (falkirk's sources, replica-ring's replays) calls it to land each
record where its first emission did.
"""

from __future__ import annotations

from collections.abc import Sequence

from ftctl.runtime.records import Record, hash_cache, stable_hash


def hash_split(records: Sequence[Record], chans: Sequence[int]) -> dict[int, list[Record]]:
    """``records`` by ``stable_hash(key) mod len(chans)``; channels that get none are absent."""
    n = len(chans)
    cache = hash_cache()
    buckets: list[list[Record]] = [[] for _ in range(n)]
    for r in records:
        k = r[0]
        h = cache.get(k)
        if h is None:
            h = stable_hash(k)
        buckets[h % n].append(r)
    return {chans[i]: b for i, b in enumerate(buckets) if b}
