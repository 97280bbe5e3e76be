"""The rows ftctl's records travel in through Structured Streaming, and back.

A record ``(key, value, ts)`` is a row of ``seq`` (its order: the source offset, scaled
through each flat_map), ``k`` and ``v`` (the key and value, pickled: any Python value, and
a key Spark can group by as bytes), ``ts`` (event time, ms), ``due`` (when ftctl wrote it,
epoch seconds: latency is measured from it) and ``end`` (the end-of-input marker, which
carries the final watermark past every window and is never output).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from typing import Any

# Spark's DDL for a record row, and its Arrow twin for the files ftctl writes.
SCHEMA = "seq long, k binary, v binary, ts long, due double, end boolean"
# seq of the j-th output of a flat_map of the record with seq s: s * FANOUT + j.
FANOUT = 4096
# Event time of the end marker: past every window of any run (about 35 years in ms).
END_TS = 2**40
END_KEY = b"\x00end"


def arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("seq", pa.int64()), ("k", pa.binary()), ("v", pa.binary()),
                      ("ts", pa.int64()), ("due", pa.float64()), ("end", pa.bool_())])


def dumps(x: Any) -> bytes:
    # Protocol 4 everywhere: the same key pickles to the same bytes in every process,
    # which grouping by the bytes relies on.
    return pickle.dumps(x, protocol=4)


def loads(b: bytes) -> Any:
    # Only ftctl's own processes write these rows (the feed and the driver it started).
    return pickle.loads(b)


def table(rows: Iterable[tuple[int, Any, Any, int, float]], end: bool = False) -> Any:
    """An Arrow table of records ``(seq, key, value, ts, due)``."""
    import pyarrow as pa

    seq, k, v, ts, due = [], [], [], [], []
    for s, key, val, t, d in rows:
        seq.append(s)
        k.append(dumps(key))
        v.append(dumps(val))
        ts.append(t)
        due.append(d)
    return pa.table({"seq": seq, "k": k, "v": v, "ts": ts, "due": due,
                     "end": [end] * len(seq)}, schema=arrow_schema())


def end_marker(due: float) -> Any:
    """The end-of-input row: its event time closes every window."""
    import pyarrow as pa

    return pa.table({"seq": [-1], "k": [END_KEY], "v": [dumps(None)], "ts": [END_TS],
                     "due": [due], "end": [True]}, schema=arrow_schema())


def records_of(frames: Iterator[Any]) -> Iterator[tuple[list[tuple[Any, Any, int] | None], Any]]:
    """Each pandas frame as ftctl records (None for the end marker) and the frame (for its
    seq/due/end columns)."""
    for pdf in frames:
        recs = [None if e else (loads(k), loads(v), int(t)) for k, v, t, e in
                zip(pdf["k"], pdf["v"], pdf["ts"], pdf["end"], strict=True)]
        yield recs, pdf
