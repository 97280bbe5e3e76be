"""A sink's records as a Parquet file the out-of-core checker reads.

Columns: ``seq`` (the record's place in the sink's output), ``k`` and ``v`` (canonical bytes,
``ftctl.verify.canon``: compared as bytes) and ``ko``/``vo`` (the original in
``ftctl.codec`` bytes, only where the canonical form normalized it; null otherwise, so plain
words and counts are stored once). Written in row groups as records arrive, so neither the
writer nor DuckDB ever needs the whole output in memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
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
        self._cols: tuple[list[Any], ...] = ([], [], [], [], [])
        self.records = 0

    def write(self, records: Iterable[tuple[Any, Any]]) -> None:
        seq, ks, vs, kos, vos = self._cols
        for key, value in records:
            k, k_lossy = canon.encode(key)
            v, v_lossy = canon.encode(value)
            seq.append(self.records)
            ks.append(k)
            vs.append(v)
            kos.append(codec.encode(key) if k_lossy else None)
            vos.append(codec.encode(value) if v_lossy else None)
            self.records += 1
            if len(seq) >= ROW_GROUP:
                self._flush()
                seq, ks, vs, kos, vos = self._cols

    def _flush(self) -> None:
        if self._cols[0]:
            self._writer.write_table(pa.Table.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(self._cols, SCHEMA, strict=True)],
                schema=SCHEMA))
        self._cols = ([], [], [], [], [])

    def close(self) -> Path:
        self._flush()
        self._writer.close()
        self._tmp.replace(self.path)
        return self.path


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
