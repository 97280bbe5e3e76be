"""Records and the stable hash that partitions them.

A record is a tuple ``(key, value, ts)``: ``ts`` is event time in milliseconds. Batches of
records, not single records, move through channels and protocol hooks.
"""

from __future__ import annotations

import zlib
from typing import Any

Record = tuple[Any, Any, int]


# stable_hash is pure, so one cache serves every instance in the process (and survives
# the instance restarts that would otherwise rehash every key).
_CACHE: dict[Any, int] = {}
_CACHE_MAX = 500_000


def stable_hash(key: Any) -> int:
    """A hash that is the same in every process (``hash(str)`` is salted per process)."""
    h = _CACHE.get(key)
    if h is None:
        h = key & 0x7FFFFFFF if isinstance(key, int) else zlib.crc32(str(key).encode())
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = h
    return h


def hash_cache() -> dict[Any, int]:
    """The shared cache, for hot loops that look keys up before calling stable_hash."""
    return _CACHE
