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


# ---------------------------------------------------------------- record types
# The fields of a record's value, by type name. Sources declare the type they make,
# functions the type they take and make (``typed``), so validation checks every edge and
# key_by, argmax and tail_avg can name a field instead of an index.

ANY = "any"
SAME = "same"  # a function's output has the type of its input
RECORD_TYPES: dict[str, tuple[str, ...]] = {
    ANY: (),
    "int": (),
    "tally": (),  # the value is always 1
    "count": (),
    "text.line": (),
    "text.word": (),
    "tag.user": (),
    "mean": ("sum", "count"),
    "window": ("end", "acc"),
    "pair": ("left", "right"),
    "nexmark.event": ("kind",),
    "nexmark.person": ("kind", "id", "name", "city", "state", "date_time"),
    "nexmark.auction": ("kind", "id", "seller", "category", "initial_bid", "reserve",
                        "date_time", "expires"),
    "nexmark.bid": ("kind", "auction", "bidder", "price", "channel", "date_time"),
    "nexmark.winning": ("seller", "category", "price", "expires"),
    "nexmark.q1": ("auction", "bidder", "price", "date_time"),
    "nexmark.q2": ("auction", "price"),
    "nexmark.q3": ("name", "city", "state", "auction"),
    "nexmark.q5": ("auction", "count"),
    "nexmark.q6": ("auction", "price"),
    "nexmark.q7": ("auction", "bidder", "price"),
    "nexmark.q8": ("person", "name", "reserve", "end"),
}


def typed(takes: str, makes: str) -> Any:
    """Declare the record type a function takes and the one its output records have."""

    def mark(fn: Any) -> Any:
        fn.takes, fn.makes = takes, makes
        return fn

    return mark


def accepts(takes: str, given: str) -> bool:
    """Whether records of type ``given`` may flow into a port that takes ``takes``."""
    return ANY in (takes, given) or takes == given or (
        takes == "nexmark.event" and given.startswith("nexmark.")
        and given in ("nexmark.person", "nexmark.auction", "nexmark.bid"))


def field_index(record_type: str, field: str | int) -> int:
    """The index of ``field`` in values of ``record_type``; ValueError naming the fields."""
    if isinstance(field, int) and not isinstance(field, bool):
        if field < 0:
            raise ValueError(f"field index must be >= 0, got {field}")
        return field
    fields = RECORD_TYPES.get(record_type, ())
    if field not in fields:
        known = ", ".join(fields) if fields else "none; it has no named fields"
        raise ValueError(f"{field!r} is not a field of {record_type} (fields: {known})")
    return fields.index(str(field))
