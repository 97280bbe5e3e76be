"""Records and the stable hash that partitions them.

A record is a tuple ``(key, value, ts)``: ``ts`` is event time in milliseconds. Batches of
records, not single records, move through channels and protocol hooks.
"""

from __future__ import annotations

import zlib
from typing import Any

Record = tuple[Any, Any, int]


def stable_hash(key: Any) -> int:
    """A hash that is the same in every process (``hash(str)`` is salted per process)."""
    if isinstance(key, int):
        return key & 0x7FFFFFFF
    return zlib.crc32(str(key).encode())
