"""Canonical bytes of a record's key or value, for comparing records outside Python.

The out-of-core checker compares records as bytes, so two values must encode to the same
bytes exactly when Python finds them equal. ``marshal`` and ``pickle`` do not promise that:
both write shared references and interned strings differently depending on how a value was
built, and keep a dict's insertion order. Here numbers that compare equal (``True``, ``1``,
``1.0``) encode alike, dicts and sets are written in sorted order, and every part is
length-prefixed so a tuple's bytes never equal another tuple's.

The encoding normalizes, so it cannot always give the original back (``1.0`` comes back
as ``1``): ``encode`` says when it normalized, and the caller keeps the original then
(``ftctl.codec``) for reports.
"""

from __future__ import annotations

import math
import pickle
import struct
from typing import Any

_LEN = struct.Struct(">I")
_FLOAT = struct.Struct(">d")
_NAN = b"fnan"


class _Lossy:
    """Set when an encoding normalized something the decoder cannot undo."""

    def __init__(self) -> None:
        self.flag = False


def encode(value: Any) -> tuple[bytes, bool]:
    """``value``'s canonical bytes, and whether decoding them would give another repr."""
    t = type(value)
    if t is str:  # the common cases first: words, article ids, counts
        return b"s" + value.encode("utf-8", "surrogatepass"), False
    if t is int:
        return _int(value), False
    lossy = _Lossy()
    return _enc(value, lossy), lossy.flag


def _int(n: int) -> bytes:
    return b"i" + n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True)


def _join(parts: list[bytes]) -> bytes:
    return b"".join(_LEN.pack(len(p)) + p for p in parts)


def _enc(value: Any, lossy: _Lossy) -> bytes:
    t = type(value)
    if value is None:
        return b"N"
    if t is str:
        return b"s" + value.encode("utf-8", "surrogatepass")
    if t is int:
        return _int(value)
    if t is bool:
        lossy.flag = True
        return _int(int(value))
    if t is float:
        lossy.flag = True
        if math.isnan(value):
            return _NAN
        if value.is_integer():  # 1.0 == 1 and -0.0 == 0 in Python
            return _int(int(value))
        return b"f" + _FLOAT.pack(value)
    if t is bytes:
        return b"b" + value
    if t is tuple:
        return b"t" + _join([_enc(x, lossy) for x in value])
    if t is list:
        return b"l" + _join([_enc(x, lossy) for x in value])
    if t is set or t is frozenset:  # a set equals the frozenset of the same elements
        lossy.flag = True
        return b"S" + _join(sorted(_enc(x, lossy) for x in value))
    if t is dict:
        lossy.flag = True
        items = sorted(_LEN.pack(len(k)) + k + _enc(v, lossy)
                       for k, v in ((_enc(k, lossy), v) for k, v in value.items()))
        return b"d" + _join(items)
    # Anything else (a user class): equal when its pickle is; documented as such.
    lossy.flag = True
    return b"p" + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def decode(buf: bytes) -> Any:
    """The value of canonical bytes (normalized: see the module's docstring)."""
    tag, body = buf[:1], buf[1:]
    if tag == b"s":
        return body.decode("utf-8", "surrogatepass")
    if tag == b"i":
        return int.from_bytes(body, "big", signed=True)
    if tag == b"N":
        return None
    if buf == _NAN:
        return math.nan
    if tag == b"f":
        return _FLOAT.unpack(body)[0]
    if tag == b"b":
        return bytes(body)
    if tag in (b"t", b"l", b"S"):
        parts = [decode(p) for p in _split(body)]
        return tuple(parts) if tag == b"t" else parts if tag == b"l" else frozenset(parts)
    if tag == b"d":
        out = {}
        for item in _split(body):
            (n,) = _LEN.unpack_from(item)
            out[decode(item[4:4 + n])] = decode(item[4 + n:])
        return out
    if tag == b"p":
        return pickle.loads(body)  # written by this process's own encoder
    raise ValueError(f"unknown canonical tag {tag!r}")


def _split(body: bytes) -> list[bytes]:
    parts, i = [], 0
    while i < len(body):
        (n,) = _LEN.unpack_from(body, i)
        parts.append(body[i + 4:i + 4 + n])
        i += 4 + n
    return parts
