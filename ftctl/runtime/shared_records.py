"""Record lists that every run in a simulator's process shares (``ftctl.runtime.memo``),
which encoded bytes refer to by number instead of copying (``ftctl.codec``)."""

from __future__ import annotations

import itertools
import secrets
import weakref
from typing import Any


class Shared(list[Any]):
    """A record list made once, never changed, and held for as long as anything made in
    this process may decode a reference to it (a simulator's memo holds its lists)."""

    __slots__ = ("__weakref__", "number")
    number: int


# A forked process inherits both, with the lists: what its parent encoded decodes there.
PROCESS = secrets.token_hex(8)
_HELD: weakref.WeakValueDictionary[int, Shared] = weakref.WeakValueDictionary()
_NUMBERS = itertools.count()


def shared(records: list[Any]) -> Shared:
    """``records`` as a ``Shared`` list: the caller holds it while references may be read."""
    out = Shared(records)
    out.number = next(_NUMBERS)
    _HELD[out.number] = out
    return out


def shared_list(process: str, number: int) -> Shared:
    """The list a reference names (what decoding one calls); ValueError if not held."""
    found = _HELD.get(number) if process == PROCESS else None
    if found is None:
        raise ValueError("these bytes refer to a record list a simulator's memo shares,"
                         " which this process does not hold (made in another process,"
                         " or freed)")
    return found
