"""Bytes for values that only ftctl's own processes read: frames and stored blobs.

**Frames** (``encode``). A value made of plain builtins (str, int, float, tuples, lists,
dicts, sets; what records, control tuples and most operator state are) is encoded with
``marshal`` behind a one-byte tag: about 40% cheaper than pickle for control frames.
Anything marshal refuses (marshal takes exact builtin types only: a protocol's object, a
record value of a user class) falls back to pickle, whose output starts with its PROTO
opcode (0x80) and so never clashes with the tag. Frames between Spark's processes
(``encode_wire``) take marshal's format 2, which keeps no table of objects written.

**Stored blobs** (``encode_blob``: snapshots, a sink's de-duplication state, spilled
chunks) are pickled without the memo (``Pickler.fast``). A blob is large and made of
objects the live state still holds, and marshal (format 3 and later) enters every object
held elsewhere in a table of references as it writes: a causal sink's million record
identities took 0.31 s to marshal, 0.20 s to pickle without the memo, and pickled in 54%
of the bytes. Pickle also keeps exact types, where marshal writes any buffer (a
``bytearray``, an ``array.array``, a NumPy array) as ``bytes``. Without the memo, an
object held twice in a blob is written, and read back, twice; a blob with a cycle, which
only the memo can write, is pickled with it. ``decode`` reads both kinds.

**Shared lists** (``Shared``). A simulator makes each source batch and each pure
operator's output once and hands the same record lists to every run in its process
(``ftctl.runtime.memo``), hundreds of runs. Pickle refers to such a list by number
instead of writing its records, so a causal payload log stores what its batches carry
once per process, not once per run (on Nexmark q5, some 60 MB a schedule). Such bytes
decode only in the process that made them or one forked from it, while the memo holds
the list: they are for a simulator's own store and logs, never for a file or a wire; a
Spark task's lists are never shared.

**Parts** (``encode_part``). A blob may hold values encoded once and kept as they are: a
sink's counts or a payload log, encoded a part at a time, whose every snapshot holds the
parts made for the ones before. Such bytes are a ``Part``; pickled for a store that keeps
them beside the frame (``encode_blob(value, parts)``: the simulator's ``MemoryStore``)
they go out of band (pickle protocol 5's buffers), so each snapshot stores a reference
to the same immutable bytes instead of copying them (a causal sink on Nexmark q0
re-stored some 450 MB of parts a schedule). Anywhere else a part is written in band,
as any bytes.

**Kept values** (``encode_part(value, keep=True)``, ``decode_part``). A part stays the
object it was made as in such a store (a read hands back the part, not a copy), so one
made with ``keep`` also holds the value it encodes, and ``decode_part`` returns that
value instead of decoding the bytes: a simulated sink that restarts reads its counts
back from parts its predecessor made, and decoding a million identities was a tenth of
a Nexmark q0 schedule under lineage (``benchmarks/sim_at_size.py``), the tuples it made
most of what the collection valve then walked. It is the same value the bytes hold, as
the bytes never change and a store fault damages a frame, never a part; a part read
from a file or a wire has no kept value and is decoded. A value made from a part's
(``derived``: a dict of a sink's counts) is made once and kept with the part too.
"""

from __future__ import annotations

import contextlib
import io
import marshal
import pickle
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from ftctl.runtime import shared_records
from ftctl.runtime.shared_records import Shared, shared_list

T = TypeVar("T")

MARSHAL_TAG = b"M"
WIRE_FORMAT = 2  # marshal's format for ``encode_wire``
_PICKLE_PROTO = 0x80  # first byte of every pickle of protocol 2 or later


_NOT_KEPT: Any = object()


class Part(bytes):
    """Bytes that are an encoded value (``encode_part``), never changed once made, and the
    value itself where it was kept (``decode_part``), and values made of it (``derived``)."""

    kept: Any = _NOT_KEPT
    made: dict[Callable[[Any], Any], Any] | None = None


def encode_part(value: Any, keep: bool = False) -> Part:
    """``value`` as ``encode_blob`` encodes it, as a ``Part`` a store may keep apart.
    ``keep``: the part holds ``value`` too, for ``decode_part`` in this process; only for
    a value that nothing changes afterwards and whose readers only read it."""
    part = Part(encode_blob(value))
    if keep:
        part.kept = value
    return part


def decode_part(part: bytes) -> Any:
    """The value ``part`` encodes: the one it kept, else decoded."""
    kept = getattr(part, "kept", _NOT_KEPT)
    return decode(part) if kept is _NOT_KEPT else kept


def derived(part: bytes, make: Callable[[Any], T]) -> T:
    """``make`` of the value ``part`` encodes, made once for a ``Part`` and kept with it:
    a sink that restarts again and again reads its counts from the same parts, and
    hashing a million identities into a dict each time was a tenth of a Nexmark q0
    schedule under lineage, where merging a dict made before costs a tenth of that. The
    value is shared by every caller: read it, never change it."""
    if type(part) is not Part:
        return make(decode(part))
    made = part.made
    if made is None:
        made = part.made = {}
    value = made.get(make, _NOT_KEPT)
    if value is _NOT_KEPT:
        value = made[make] = make(decode_part(part))
    return cast(T, value)


def _part(data: Any) -> Part:
    """A ``Part`` unpickled: the very one pickled when it went out of band and came back
    (a ``PickleBuffer`` over it), so it keeps its kept value; else one of the bytes."""
    if type(data) is pickle.PickleBuffer:
        with data.raw() as view:
            if type(view.obj) is Part:
                return view.obj
    return Part(data)


class _Pickler(pickle.Pickler):
    # Called only for objects of types other than the exact builtins (so never for a
    # record's tuple, str or int): the lists of a ``Shared`` type go by reference; a
    # ``Part`` as a buffer, which ``_keep_apart`` takes out of band where asked.
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is Shared:
            return shared_list, (shared_records.PROCESS, obj.number)
        if type(obj) is Part:
            return _part, (pickle.PickleBuffer(obj),)
        return NotImplemented


def _keep_apart(parts: list[pickle.PickleBuffer]) -> Any:
    """A pickler's ``buffer_callback`` that puts each ``Part`` in ``parts``, out of band,
    and keeps any other buffer in band: another's (a NumPy array's) may change later."""
    def callback(buf: pickle.PickleBuffer) -> bool:
        with buf.raw() as view:
            if type(view.obj) is not Part:
                return True
        parts.append(buf)
        return False
    return callback


def _pickled(value: Any, fast: bool, parts: list[pickle.PickleBuffer] | None = None) -> bytes:
    buf = io.BytesIO()
    pickler = _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL,
                       buffer_callback=None if parts is None else _keep_apart(parts))
    if fast:
        # The docs have called the attribute deprecated since Python 3.0, with no
        # replacement and no warning; should it go, blobs are pickled with the memo.
        with contextlib.suppress(AttributeError):
            pickler.fast = True
    pickler.dump(value)
    return buf.getvalue()


def encode(value: Any) -> bytes:
    """``value`` as bytes: marshal when it is made of plain values, pickle otherwise."""
    try:
        return MARSHAL_TAG + marshal.dumps(value)
    except ValueError:  # "unmarshallable object" (a ``Shared`` list among them)
        return _pickled(value, fast=False)


def encode_wire(value: Any) -> bytes:
    """``encode`` for a frame that crosses a socket once and is decoded at once: marshal's
    format 2, which keeps no table of the objects it wrote. Format 4 enters every object
    something else also holds in that table, and a task's records are such objects (a
    sink's output shares its words and counts with its input; small ints are shared by
    all): 4,000 such ``(word, count)`` records encode in 51 ns a record against 87.
    Format 2 writes an object held twice twice, and strings as UTF-8, so frames are up
    to 40% larger."""
    try:
        return MARSHAL_TAG + marshal.dumps(value, WIRE_FORMAT)
    except ValueError:  # not plain values (or nested too deep): pickle, as ``encode``
        return _pickled(value, fast=False)


def encode_blob(value: Any, parts: list[pickle.PickleBuffer] | None = None) -> bytes:
    """``value`` pickled without the memo (with it when ``value`` holds a cycle). Given
    ``parts``, each ``Part`` in ``value`` is appended to it instead of written: decoding
    needs them back (``decode(..., parts)``)."""
    try:
        return _pickled(value, True, parts)
    except (ValueError, RecursionError):  # a cycle: "fast mode: can't pickle cyclic ..."
        if parts is not None:
            parts.clear()
        return _pickled(value, False, parts)


def decode(buf: bytes | memoryview, parts: Sequence[pickle.PickleBuffer] = ()) -> Any:
    if buf[:1] == MARSHAL_TAG:
        return marshal.loads(memoryview(buf)[1:])
    if buf[:1] and buf[0] == _PICKLE_PROTO:
        return pickle.loads(buf, buffers=parts)
    raise ValueError(f"unknown encoding {bytes(buf[:1])!r}")
