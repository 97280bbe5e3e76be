"""A sink's records as a Parquet file the out-of-core checker reads.

Columns: ``seq`` (the record's place in the sink's output), ``k`` and ``v`` (canonical bytes,
``ftctl.verify.canon``: compared as bytes) and ``ko``/``vo`` (the original in
``ftctl.codec`` bytes, only where the canonical form normalized it; null otherwise, so plain
words and counts are stored once). Written in row groups as records arrive, so neither the
writer nor DuckDB ever needs the whole output in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ftctl import codec
from ftctl.verify import canon

SCHEMA = pa.schema([("seq", pa.int64()), ("k", pa.binary()), ("v", pa.binary()),
                    ("ko", pa.binary()), ("vo", pa.binary())])
ROW_GROUP = 65_536  # records a row group: a few MB in memory while it fills


class SinkWriter:
    """Appends one sink's records, in order, to a Parquet file (written on ``close``
    atomically: a half-written file never looks complete)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(self.path.name + ".part")
        self._writer = pq.ParquetWriter(self._tmp, SCHEMA)
        self._rows: list[tuple[Any, Any]] = []
        self._written = 0  # records in the file so far

    def write(self, records: Iterable[tuple[Any, Any]]) -> None:
        rows = self._rows
        it = iter(records)
        while True:
            rows += islice(it, ROW_GROUP - len(rows))
            if len(rows) < ROW_GROUP:
                return
            self._flush()
            rows = self._rows

    def _flush(self) -> None:
        rows, self._rows = self._rows, []
        if not rows:
            return
        n = len(rows)
        keys = [k for k, _ in rows]  # unpacking checks each record is a pair
        values = [v for _, v in rows]
        k, ko = encode_column(keys)
        v, vo = encode_column(values)
        seq = pa.array(np.arange(self._written, self._written + n, dtype=np.int64))
        self._writer.write_table(pa.Table.from_arrays([seq, k, v, ko, vo], schema=SCHEMA))
        self._written += n

    def close(self) -> Path:
        self._flush()
        self._writer.close()
        self._tmp.replace(self.path)
        return self.path


def encode_column(values: Sequence[Any]) -> tuple[pa.Array, pa.Array]:
    """The canonical bytes of ``values`` (``canon.encode`` of each) and their originals
    where the canonical form normalized them (null elsewhere).

    A column of only ``str`` or only ``int`` (a word count's words and counts, the
    sharder's article ids) is encoded by Arrow and NumPy a column at a time, byte for byte
    what ``canon.encode`` gives; every other column goes value by value. The writer's
    time was most of a golden run's: 2.5 us a record value by value, 0.6-0.7 so.
    """
    kinds = set(map(type, values))
    if len(kinds) == 1:
        try:
            if str in kinds:
                return _str_column(values), pa.nulls(len(values), pa.binary())
            if int in kinds:
                return _int_column(values), pa.nulls(len(values), pa.binary())
        except (UnicodeEncodeError, OverflowError):
            pass  # a lone surrogate, an int past 64 bits: value by value below
    canonical, originals = [], []
    for value in values:
        c, lossy = canon.encode(value)
        canonical.append(c)
        originals.append(codec.encode(value) if lossy else None)
    return pa.array(canonical, pa.binary()), pa.array(originals, pa.binary())


def _str_column(values: Sequence[str]) -> pa.Array:
    """``b"s"`` + UTF-8 (``canon``), for a column of strings Arrow can hold (no lone
    surrogates: Arrow refuses them, the caller goes value by value)."""
    utf8 = pa.array(values, pa.string()).cast(pa.binary())
    return pc.binary_join_element_wise(_STR_TAG, utf8, _NO_SEP)


_STR_TAG, _NO_SEP = pa.scalar(b"s"), pa.scalar(b"")
# floor(bit_length / 8) of a magnitude is how many of these it reaches (2^7, 2^15, ...).
_BYTE_STEPS = np.array([1 << (8 * k - 1) for k in range(1, 9)], dtype=np.uint64)


def _int_column(values: Sequence[int]) -> pa.Array:
    """``b"i"`` + ``bit_length // 8 + 1`` big-endian two's-complement bytes (``canon``),
    for a column of ints within 64 bits (``OverflowError`` otherwise)."""
    a = np.array(values, dtype=np.int64)
    neg = a < 0
    # |n| without overflow at -2^63: ~n + 1 in unsigned arithmetic.
    mag = np.where(neg, (~a).astype(np.uint64) + np.uint64(1), a.astype(np.uint64))
    length = 1 + (mag[:, None] >= _BYTE_STEPS[None, :]).sum(axis=1)  # 1..9 bytes
    rows = np.empty((len(a), 10), dtype=np.uint8)
    rows[:, 0] = ord("i")
    rows[:, 1] = np.where(neg, 0xFF, 0)  # the sign byte of a 9-byte length
    rows[:, 2:] = a.astype(">i8").view(np.uint8).reshape(-1, 8)
    keep = np.arange(10)[None, :] >= (10 - length)[:, None]
    keep[:, 0] = True
    data = rows[keep]  # row by row: the tag, then the value's last ``length`` bytes
    offsets = np.zeros(len(a) + 1, dtype=np.int32)
    np.cumsum(length + 1, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(a),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def write_sink(path: Path, records: Iterable[tuple[Any, Any]]) -> Path:
    """``records`` (one sink's output, in order) as a Parquet file at ``path``."""
    writer = SinkWriter(path)
    writer.write(records)
    return writer.close()


def original(canonical: bytes | None, orig: bytes | None) -> Any:
    """A stored record part as the value it was written from."""
    if orig is not None:
        return codec.decode(orig)
    return None if canonical is None else canon.decode(canonical)
