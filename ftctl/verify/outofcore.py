"""The checker's verdict, computed by DuckDB over the sinks' Parquet files.

The same anomalies as ``ftctl.verify.checker.compare`` (which holds both outputs in Python
lists): counts are group-bys and an outer join on canonical bytes, which DuckDB runs within
its memory limit, spilling to ``temp``. Python sees only the diverging keys, streamed in
batches to keep the few smallest by ``repr``, and the records of those few keys.
"""

from __future__ import annotations

import heapq
import json
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ftctl.verify.checker import Divergence, SinkVerdict, Verdict
from ftctl.verify.sinkfile import original, write_sink
from protocols.contract.spec import Guarantee

MEMORY_LIMIT = "512MB"  # DuckDB's own; the documented bound of verification beside Python's
_BATCH = 65_536


def connect(temp: Path | None = None, memory_limit: str = MEMORY_LIMIT,
            threads: int = 2) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection that spills to a folder of its own in ``temp`` (default: the
    system temp dir), where its intermediate files go too; ``close`` removes both."""
    con = duckdb.connect(":memory:")
    base = Path(temp) if temp is not None else Path(tempfile.gettempdir()) / "ftctl-verify"
    base.mkdir(parents=True, exist_ok=True)
    spill = Path(tempfile.mkdtemp(prefix="duckdb-", dir=base))
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute(f"SET temp_directory = '{_quoted(spill)}'")
    con.execute(f"SET threads = {int(threads)}")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar = false")  # it drew over the run's own output
    # "special": the function sees nulls (``vo`` is null for most values) instead of
    # DuckDB answering null for it.
    con.create_function("vrepr", _vrepr, ["BLOB", "BLOB"], "VARCHAR",  # type: ignore[call-overload]
                        type="arrow", null_handling="special")
    return con


def close(con: duckdb.DuckDBPyConnection) -> None:
    """Close a connection of ``connect`` and remove its folder."""
    folder = _temp_dir(con)
    con.close()
    shutil.rmtree(folder, ignore_errors=True)


def _vrepr(v: pa.Array, vo: pa.Array) -> pa.Array:
    """repr of stored values: how the in-memory checker sorts a multiset's values."""
    return pa.array([repr(original(a, b)) for a, b in zip(v.to_pylist(), vo.to_pylist(),
                                                          strict=True)], pa.string())


def _sink_view(con: duckdb.DuckDBPyConnection, name: str, path: Path | None) -> int:
    if path is None:  # a sink with no file wrote nothing
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT NULL::BIGINT seq, "
                    "NULL::BLOB k, NULL::BLOB v, NULL::BLOB ko, NULL::BLOB vo WHERE false")
    else:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS "
                    f"SELECT * FROM read_parquet('{_quoted(Path(path))}')")
    return _one(con, f"SELECT count(*) FROM {name}")


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> Any:
    row = con.execute(sql, params if params is not None else []).fetchone()
    assert row is not None
    return row[0]


def compare_files(con: duckdb.DuckDBPyConnection, sink: str, mode: str,
                  golden: Path | None, output: Path | None,
                  max_divergences: int = 5) -> SinkVerdict:
    """Judge one sink from its golden and output files, as ``checker.compare`` would."""
    con.execute("DROP TABLE IF EXISTS j")
    folder = _temp_dir(con)  # another sink's ranks (``_ranks``)
    (folder / "ranked.json").unlink(missing_ok=True)
    for ranked in ("gr", "orr"):
        shutil.rmtree(folder / ranked, ignore_errors=True)
    v = SinkVerdict(sink, mode, _sink_view(con, "g", golden), _sink_view(con, "o", output))
    if mode == "final-per-key":
        _final_per_key(con, v)
    else:
        _per_key(con, v, mode)
    v.divergences = _divergences(con, mode, max_divergences)
    return v


def _final_per_key(con: duckdb.DuckDBPyConnection, v: SinkVerdict) -> None:
    # The last value of each key; a key missing from the output is lost, any other
    # difference unexpected.
    con.execute("""
        CREATE OR REPLACE TEMP TABLE d AS
        WITH gf AS (SELECT k, arg_max(v, seq) v FROM g GROUP BY k),
             of AS (SELECT k, arg_max(v, seq) v FROM o GROUP BY k)
        SELECT coalesce(gf.k, of.k) k, 0::BIGINT i, of.k IS NULL lost
        FROM gf FULL OUTER JOIN of ON gf.k = of.k
        WHERE gf.v IS DISTINCT FROM of.v""")
    v.lost, v.unexpected = con.execute(
        "SELECT count(*) FILTER (WHERE lost), count(*) FILTER (WHERE NOT lost) FROM d"
    ).fetchone() or (0, 0)


def _per_key(con: duckdb.DuckDBPyConnection, v: SinkVerdict, mode: str) -> None:
    # Per (key, value): copies in golden and in the output, as the checker's Counters.
    _counts(con)
    con.execute("""
        CREATE OR REPLACE TEMP TABLE c AS
        SELECT k, sum(CASE WHEN gn > n THEN gn - n ELSE 0 END)::BIGINT lost,
                  sum(CASE WHEN gn > 0 AND n > gn THEN n - gn ELSE 0 END)::BIGINT dup,
                  sum(CASE WHEN gn = 0 THEN n ELSE 0 END)::BIGINT unexpected
        FROM j GROUP BY k""")
    lost, dup, unexpected = con.execute(
        "SELECT coalesce(sum(lost), 0), coalesce(sum(dup), 0), coalesce(sum(unexpected), 0) "
        "FROM c").fetchone() or (0, 0, 0)
    v.lost, v.duplicated, v.unexpected = int(lost), int(dup), int(unexpected)
    if mode == "multiset":  # only keys whose counts differ diverge
        con.execute("CREATE OR REPLACE TEMP TABLE d AS SELECT k, NULL::BIGINT i FROM c")
        return
    # Ordered: every key whose sequence differs, at its first differing position. A key's
    # positions are spread over the parts, so each part gives its first and ``d`` the least.
    con.execute("CREATE OR REPLACE TEMP TABLE d (k BLOB, i BIGINT)")
    for gr, orr in _ranked_parts(con):
        con.execute(f"""
            INSERT INTO d SELECT coalesce(gr.k, orr.k), min(coalesce(gr.i, orr.i)) - 1
            FROM {gr} gr FULL OUTER JOIN {orr} orr ON gr.k = orr.k AND gr.i = orr.i
            WHERE gr.v IS DISTINCT FROM orr.v GROUP BY 1""")
    con.execute("CREATE OR REPLACE TEMP TABLE d AS SELECT k, min(i) i FROM d GROUP BY k")
    # A key out of order with every count equal is reordered.
    v.reordered = _one(con, "SELECT count(*) FROM d ANTI JOIN c ON d.k = c.k")


def _made(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether this connection holds the temporary table ``table``."""
    return bool(_one(con, "SELECT count(*) FROM duckdb_tables() "
                          "WHERE table_name = $t AND temporary", {"t": table}))


def _counts(con: duckdb.DuckDBPyConnection) -> None:
    """The table ``j``: each (k, v) whose copies in ``g`` and ``o`` differ, as the key
    and both counts (none made if it is there).

    DuckDB's hash aggregate cannot finish tens of millions of distinct (k, v) groups
    within a few hundred MB (it runs out of memory rather than spilling them), so the
    pairs are counted in parts by ``hash(k, v)``, each part's groups within the limit:
    a pair's copies on both sides fall in one part. A few parts each filter the whole
    of both sides; from ``SPLIT_FROM`` parts on, each side is first written out split
    into its parts (``_split``), so that the time grows with the records, not with the
    records times the parts (80 parts at 100M wordcount lines)."""
    if _made(con, "j"):
        return
    con.execute("CREATE TEMP TABLE j (k BLOB, gn BIGINT, n BIGINT)")
    parts = _parts(con)
    if parts < SPLIT_FROM:
        for p in range(parts):
            where = "" if parts == 1 else f"WHERE hash(k, v) % {parts} = {p}"
            _count_part(con, f"(SELECT k, v FROM g {where})", f"(SELECT k, v FROM o {where})")
        return
    folder = Path(tempfile.mkdtemp(prefix="counts-", dir=_temp_dir(con)))
    try:
        split = {side: _split(con, side, parts, folder / side) for side in ("g", "o")}
        for p in range(parts):
            _count_part(con, *(split[side][p] for side in ("g", "o")))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _count_part(con: duckdb.DuckDBPyConnection, golden: str, output: str) -> None:
    """Add to ``j`` the pairs of one part (``golden`` and ``output``: what to select its
    records from) whose counts differ."""
    for source, table in ((golden, "gc"), (output, "oc")):
        con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS "
                    f"SELECT k, v, count(*) n FROM {source} GROUP BY k, v")
    con.execute("""
        INSERT INTO j SELECT coalesce(gc.k, oc.k), coalesce(gc.n, 0), coalesce(oc.n, 0)
        FROM gc FULL OUTER JOIN oc ON gc.k = oc.k AND gc.v = oc.v
        WHERE gc.n IS DISTINCT FROM oc.n""")
    con.execute("DROP TABLE gc; DROP TABLE oc")


def _split(con: duckdb.DuckDBPyConnection, side: str, parts: int,
           folder: Path) -> list[str]:
    """``side``'s (k, v) written to ``folder`` in ``parts`` parts by ``hash(k, v)`` (one
    pass: DuckDB writes a folder of files per part), and for each part what to select its
    records from (an empty relation for a part no record fell in)."""
    con.execute(f"""COPY (SELECT k, v, hash(k, v) % {parts} AS p FROM {side})
                    TO '{_quoted(folder)}' (FORMAT parquet, PARTITION_BY (p))""")
    return [_part_source(folder, p, {"k": "BLOB", "v": "BLOB"}) for p in range(parts)]


def _part_source(folder: Path, p: int, columns: dict[str, str]) -> str:
    """What to select part ``p``'s ``columns`` (name: type) from, of a folder that
    ``PARTITION_BY (p)`` wrote: an empty relation for a part no row fell in."""
    files = folder / f"p={p}"
    if not files.is_dir():
        nulls = ", ".join(f"NULL::{kind} {name}" for name, kind in columns.items())
        return f"(SELECT {nulls} WHERE false)"
    return f"(SELECT {', '.join(columns)} FROM read_parquet('{_quoted(files)}/*.parquet'))"


def _quoted(path: Path) -> str:
    """``path`` inside a SQL string literal (COPY and views cannot take parameters)."""
    return path.as_posix().replace("'", "''")


def _temp_dir(con: duckdb.DuckDBPyConnection) -> Path:
    """Where this connection spills (``connect``): the parts' files go there too."""
    return Path(str(_one(con, "SELECT current_setting('temp_directory')")))


# Parts from which ``_counts`` splits each side into files first: writing a side's parts
# took as long as 9 filtered reads of it (2.4 s and 0.27 s for 20M wordcount records).
SPLIT_FROM = 9
# Bytes of DuckDB's memory limit a record of one side takes while its part is counted.
# A 10M-line wordcount's verdict (80M records a side) at 512 MB counted parts of 20M
# records a side (24 bytes each) and ran out of memory at 40M: this keeps half of that.
ROW_BYTES = 48
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40, "BYTES": 1, "": 1}


def parse_bytes(amount: str) -> int:
    """``512MB``, ``488.2 MiB``: a memory limit as DuckDB is given it or reports it."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", amount)
    if match is None or match[2].upper() not in _UNITS:
        raise ValueError(f"not an amount of memory: {amount!r}")
    return int(float(match[1]) * _UNITS[match[2].upper()])


def _parts(con: duckdb.DuckDBPyConnection) -> int:
    """How many parts ``_counts`` splits the larger side into to stay within the limit."""
    limit = parse_bytes(str(_one(con, "SELECT current_setting('memory_limit')")))
    budget = max(1, limit // ROW_BYTES)
    rows = max(_one(con, "SELECT count(*) FROM g"), _one(con, "SELECT count(*) FROM o"))
    return max(1, -(-rows // budget))


def _ranks(con: duckdb.DuckDBPyConnection) -> None:
    """``g``'s and ``o``'s records as (k, v, vo, i), ``i`` a record's position among its
    key's records from 1, in the folders ``gr`` and ``orr`` of the connection's folder,
    in ``_parts`` parts by ``hash(k, i)`` (a position's record on both sides in one part;
    read with ``_ranked_parts``). Nothing is done if they are there.

    Not by ``hash(k)``: a key's records would all be in one part, and wordcount's most
    frequent word (13% of a Zipf vocabulary of 1,000) made one part of 107M records a
    side at 100M lines against parts of 10.7M, whose join ran out of memory.

    A window ranking holds a partition in memory: one key with tens of millions of
    records (wordcount's most frequent word) exceeds the memory limit, and so does one
    query doing it all, its operators holding memory at once. So each side's positions
    are counted per key as its file is read (``_number_in_order``) or, for a sink of
    more keys than that holds counts for, sorted by key alone, numbered as they stream
    (``_number_runs``) and put back in ``seq`` order; then set beside the records by
    position as they are written into parts (the files are in ``seq`` order, 0, 1, ...;
    a record whose ``seq`` differs from its position's stops the verdict; the records
    and their positions straight into parts took 188 s at 100M lines and 1.13 GB of
    RSS, against 237 s through a file of them all). Each step writes Parquet files:
    DuckDB spills temporary tables uncompressed, and the ranks as tables joined back
    on ``seq`` took 3.0 GB of temp space for 20M wordcount records a side (about 120 GB
    at 100M lines). Comparing the ranks is a join of both sides, which spills too: one
    part at a time, it holds a part's."""
    folder = _temp_dir(con)
    if (folder / "ranked.json").exists():
        return
    parts = _parts(con)
    for side, table in (("g", "gr"), ("o", "orr")):
        by_key, at, ordered = (folder / f"{table}{suffix}.parquet"
                               for suffix in ("_by_key", "_at", "_seq"))
        if not _number_in_order(con, side, ordered):
            con.execute(f"""COPY (SELECT k, seq FROM {side} ORDER BY k, seq)
                            TO '{_quoted(by_key)}' (FORMAT parquet)""")
            _number_runs(by_key, at)
            by_key.unlink()
            con.execute(f"""COPY (SELECT * FROM read_parquet('{_quoted(at)}') ORDER BY seq)
                            TO '{_quoted(ordered)}' (FORMAT parquet)""")
            at.unlink()
        _write_parts(con, f"""
            SELECT *, hash(k, i) % {parts} p FROM (
                SELECT {side}.k, {side}.v, {side}.vo,
                       CASE WHEN {side}.seq = r.seq THEN r.i
                            ELSE error('sink file not in seq order') END i
                FROM {side} POSITIONAL JOIN read_parquet('{_quoted(ordered)}') r)""",
                     folder / table)
        ordered.unlink()
    (folder / "ranked.json").write_text(json.dumps({"parts": parts}))


RANK_BATCH = 1 << 16  # records ``_number_runs`` reads at a time
# How the numberings' (seq, i) files are written: seq steps by one in ``seq`` order and
# i by one along a key, so their deltas pack into a few bits (2.6 bytes a record
# against 10.8 with Parquet's defaults, measured on a Zipf draw of 1,000 words).
_RANK_SCHEMA = pa.schema([("seq", pa.int64()), ("i", pa.int64())])
_RANK_ENCODING: dict[str, Any] = {
    "use_dictionary": False,
    "column_encoding": dict.fromkeys(_RANK_SCHEMA.names, "DELTA_BINARY_PACKED")}
# Keys ``_number_in_order`` counts records of at most (about 100 bytes each in Python);
# a sink with more is numbered by sorting.
STREAM_KEYS = 1 << 20


def _number_in_order(con: duckdb.DuckDBPyConnection, side: str, out: Path) -> bool:
    """``(seq, i)`` for ``side``'s records in ``seq`` order, ``i`` counting each key's
    records from 1, written to ``out`` as the file is read once, holding a count per
    key; False (nothing written) if the sink has more than ``STREAM_KEYS`` keys.

    No sort: at 100M wordcount lines (1,000 words) sorting by key, numbering and
    sorting back by ``seq`` took 163, 74 and 130 s on the output side, the sort by key
    spilling 24 GB at once."""
    counts: dict[bytes, int] = {}
    last = -1  # the previous record's seq
    con.execute("SET preserve_insertion_order = true")  # the file's order, as it is
    try:
        # A relation's reader streams; a DB-API result's holds a copy of every row.
        reader: pa.RecordBatchReader = con.sql(
            f"SELECT k, seq FROM {side}").to_arrow_reader(RANK_BATCH)
        with reader, pq.ParquetWriter(out, _RANK_SCHEMA, **_RANK_ENCODING) as writer:
            for batch in reader:
                n = batch.num_rows
                if not n:
                    continue
                encoded = pc.dictionary_encode(batch.column(0))
                ids = encoded.indices.to_numpy()
                keys = encoded.dictionary.to_pylist()
                before = np.fromiter((counts.get(k, 0) for k in keys), np.int64, len(keys))
                # Each record's place among its key's in this batch: a stable sort by key
                # keeps seq order within a key.
                order = np.argsort(ids, kind="stable")
                by_key = ids[order]
                starts = np.ones(n, dtype=bool)
                starts[1:] = by_key[1:] != by_key[:-1]
                at = np.arange(n)
                begun = np.maximum.accumulate(np.where(starts, at, 0))
                i = np.empty(n, dtype=np.int64)
                i[order] = at - begun + 1 + before[by_key]
                counts.update(zip(keys, (before + np.bincount(ids, minlength=len(keys)))
                                  .tolist(), strict=True))
                if len(counts) > STREAM_KEYS:
                    break
                seq = batch.column(1).to_numpy()
                if seq[0] <= last or bool(np.any(seq[1:] <= seq[:-1])):
                    raise duckdb.InvalidInputException("sink file not in seq order")
                last = int(seq[-1])
                writer.write_table(pa.table({"seq": seq, "i": i}, schema=_RANK_SCHEMA))
    finally:
        con.execute("SET preserve_insertion_order = false")
    if len(counts) > STREAM_KEYS:
        out.unlink()
        return False
    return True


def _number_runs(by_key: Path, out: Path) -> None:
    """``(seq, i)`` for the records of ``by_key`` (``k`` and ``seq``, sorted by both),
    ``i`` counting each key's records from 1, streamed a batch at a time.

    Not DuckDB's ``row_number() OVER (PARTITION BY k ...)``: its window holds a
    partition in memory, and at 100M wordcount lines the most frequent word's tens of
    millions of positions ran out of 512 MB. A sort spills; numbering sorted runs needs
    only the previous batch's last key and count."""
    last: Any = None  # the previous batch's last key, and how many of it there were
    count = 0
    with pq.ParquetWriter(out, _RANK_SCHEMA, **_RANK_ENCODING) as writer:
        for batch in _batches(by_key, ["k", "seq"], RANK_BATCH):
            keys, n = batch.column(0), batch.num_rows
            if not n:
                continue
            starts = np.zeros(n, dtype=bool)
            if n > 1:
                starts[1:] = pc.not_equal(keys.slice(1), keys.slice(0, n - 1)).to_numpy(
                    zero_copy_only=False)
            first = keys[0].as_py()
            starts[0] = last is None or first != last
            at = np.arange(n)
            # The index where each record's run starts in this batch (-1: it began before).
            begun = np.maximum.accumulate(np.where(starts, at, -1))
            i = np.where(begun >= 0, at - begun + 1, count + at + 1)
            writer.write_table(pa.table({"seq": batch.column(1), "i": i}, schema=_RANK_SCHEMA))
            last, count = keys[n - 1].as_py(), int(i[-1])


def _batches(path: Path, columns: list[str], size: int) -> Iterator[pa.RecordBatch]:
    """``path``'s ``columns`` at most ``size`` rows at a time, one row group read at once.

    Not ``ParquetFile.iter_batches``: with pyarrow 26 its allocations grew with what had
    been read (about 5 bytes a record of ``k`` and ``seq``), to 4.3 GB of RSS numbering
    800M records at 100M wordcount lines. A row group DuckDB wrote is 122,880 rows."""
    with pq.ParquetFile(path) as file:
        for group in range(file.num_row_groups):
            yield from file.read_row_group(group, columns=columns).to_batches(size)


def _write_parts(con: duckdb.DuckDBPyConnection, query: str, folder: Path) -> None:
    """``query``'s rows (with a part number ``p``) as a folder of files per part.

    Every part's file is open and buffering at once, and each thread gathers rows for
    all of them: with DuckDB's defaults, 80 parts of the ranked records (k, v, vo, i) ran
    out of 512 MB at 100M wordcount lines. One thread, flushing every 65,536 rows, in row
    groups of 16,384, wrote those 800M records in 139 s."""
    threads = _one(con, "SELECT current_setting('threads')")
    con.execute("SET threads = 1; SET partitioned_write_flush_threshold = 65536")
    try:
        con.execute(f"""COPY ({query}) TO '{_quoted(folder)}'
                        (FORMAT parquet, PARTITION_BY (p), ROW_GROUP_SIZE 16384)""")
    finally:
        con.execute(f"SET threads = {int(threads)}; RESET partitioned_write_flush_threshold")


def _ranked_parts(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """``_ranks``'s records, part by part: what to select each part's golden and output
    records from (``k``, ``v``, ``vo``, ``i``)."""
    _ranks(con)
    folder = _temp_dir(con)
    parts = json.loads((folder / "ranked.json").read_text())["parts"]
    columns = {"k": "BLOB", "v": "BLOB", "vo": "BLOB", "i": "BIGINT"}
    return [(_part_source(folder / "gr", p, columns), _part_source(folder / "orr", p, columns))
            for p in range(parts)]


def _part_of(con: duckdb.DuckDBPyConnection, k: bytes, i: int) -> int:
    """The part of ``_ranks`` the record of key ``k`` at position ``i`` is in."""
    parts = json.loads((_temp_dir(con) / "ranked.json").read_text())["parts"]
    return int(_one(con, f"SELECT hash($k::BLOB, $i::BIGINT) % {parts}", {"k": k, "i": i}))


def _divergences(con: duckdb.DuckDBPyConnection, mode: str, limit: int) -> list[Divergence]:
    """The ``limit`` diverging keys first by repr, each at its first differing record."""
    if limit <= 0:
        return []
    # A key's original is its first occurrence's (golden's, else the output's): the one
    # the checker's dicts keep. Only normalized keys have one apart from their bytes.
    ko = ("NULL" if not _one(con, "SELECT count(ko) FROM g") + _one(con, "SELECT count(ko) FROM o")
          else """CASE WHEN EXISTS (SELECT 1 FROM g WHERE g.k = d.k)
                       THEN (SELECT arg_min_null(ko, seq) FROM g WHERE g.k = d.k)
                       ELSE (SELECT arg_min_null(ko, seq) FROM o WHERE o.k = d.k) END""")
    with warnings.catch_warnings():
        # DuckDB 2 warns that a DB-API result's Arrow reader copies each batch once; its
        # relation API would not, but it refuses to run beside this connection's open
        # results. A batch at a time stays bounded either way; the user sees no warning.
        warnings.simplefilter("ignore", UserWarning)
        reader: Any = con.execute(f"SELECT d.k, d.i, {ko} FROM d").to_arrow_reader(_BATCH)

    def keys() -> Iterator[tuple[str, int, bytes, int | None, bytes | None]]:
        n = 0
        for batch in reader:
            cols = (batch.column(c).to_pylist() for c in range(3))
            for k, i, ko in zip(*cols, strict=True):
                yield repr(original(k, ko)), n, k, i, ko
                n += 1

    # nsmallest keeps a heap of ``limit`` entries: bounded, however many keys diverge.
    chosen = heapq.nsmallest(limit, keys(), key=lambda t: (t[0], t[1]))
    return [_divergence(con, mode, k, i, original(k, ko)) for _, _, k, i, ko in chosen]


def _divergence(con: duckdb.DuckDBPyConnection, mode: str, k: bytes, i: int | None,
                key: Any) -> Divergence:
    if mode == "final-per-key":
        def last(t: str) -> Any:
            row = con.execute(f"SELECT v, vo FROM {t} WHERE k = ? ORDER BY seq DESC LIMIT 1",
                              [k]).fetchone()
            return original(*row) if row else None
        return Divergence(key, 0, last("g"), last("o"))
    if mode != "multiset":  # ordered: the record at the first differing position
        assert i is not None
        first = i + 1  # the tables count from 1

        part = dict(zip(("gr", "orr"), _ranked_parts(con)[_part_of(con, k, first)],
                        strict=True))

        def nth(t: str) -> Any:
            row = con.execute(f"SELECT v, vo FROM {part[t]} WHERE k = $k AND i = $i",
                              {"k": k, "i": first}).fetchone()
            return original(*row) if row else None
        return Divergence(key, i, nth("gr"), nth("orr"))
    # Multiset: both sides sorted by repr (stable: ties in output order), as the checker.
    # (The key's values are sorted in memory: one key's, only for the few shown.)
    ranked = """(SELECT v, vo, row_number() OVER (ORDER BY vrepr(v, vo), seq) - 1 i
                 FROM (SELECT * FROM {t} WHERE k = $k))"""
    if i is None:
        i = _one(con, f"""
            SELECT coalesce(min(coalesce(a.i, b.i)), 0)
            FROM {ranked.format(t='g')} a FULL OUTER JOIN {ranked.format(t='o')} b
              ON a.i = b.i WHERE a.v IS DISTINCT FROM b.v""", {"k": k})
    assert i is not None

    def at(t: str) -> Any:
        row = con.execute(f"SELECT v, vo FROM {ranked.format(t=t)} WHERE i = $i",
                          {"k": k, "i": i}).fetchone()
        return original(*row) if row else None
    return Divergence(key, i, at("g"), at("o"))


def not_prefix_files(con: duckdb.DuckDBPyConnection, mode: str,
                     guarantee: Guarantee) -> int:
    """``checker.not_prefix`` over the views ``g`` and ``o`` of one sink (``compare_files``
    made them): keys whose output a run that stopped early must not have made visible."""
    if guarantee is Guarantee.NONE:
        return 0
    if mode == "final-per-key":  # only its last values are promised: a key golden lacks
        return int(_one(con, "SELECT count(DISTINCT k) FROM o "
                             "WHERE k NOT IN (SELECT DISTINCT k FROM g)"))
    if guarantee is Guarantee.EXACTLY_ONCE and mode != "multiset":
        # Not a start of golden's: some position of the key's output differs (in any part).
        con.execute("CREATE OR REPLACE TEMP TABLE wrong (k BLOB)")
        for gr, orr in _ranked_parts(con):
            con.execute(f"""
                INSERT INTO wrong SELECT DISTINCT orr.k FROM {orr} orr
                LEFT JOIN {gr} gr ON gr.k = orr.k AND gr.i = orr.i
                WHERE gr.v IS DISTINCT FROM orr.v""")
        return int(_one(con, "SELECT count(DISTINCT k) FROM wrong"))
    # at-least-once: a record golden lacks; otherwise more copies than golden has.
    over = "gn = 0" if guarantee is Guarantee.AT_LEAST_ONCE else "n > gn"
    _counts(con)
    return int(_one(con, f"SELECT count(DISTINCT k) FROM j WHERE {over}"))


def verify_files(modes: dict[str, str], golden: dict[str, Path], output: dict[str, Path],
                 guarantee: Guarantee, complete: bool = True, temp: Path | None = None,
                 memory_limit: str = MEMORY_LIMIT, stopped: str | None = None) -> Verdict:
    """``checker.verify`` over Parquet files per sink (``ftctl.verify.sinkfile``);
    ``stopped``: why the protocol stopped the run, if it did (``checker.Verdict``)."""
    con = connect(temp, memory_limit)
    sinks, wrong = [], 0
    try:
        for name in sorted(modes):
            sinks.append(compare_files(con, name, modes[name], golden.get(name),
                                       output.get(name)))
            if stopped is not None:
                wrong += not_prefix_files(con, modes[name], guarantee)
    finally:
        close(con)
    return Verdict(guarantee, sinks, complete, stopped=stopped, wrong=wrong)


def write_outputs(outputs: Mapping[str, Iterable[tuple[Any, Any]]],
                  folder: Path) -> dict[str, Path]:
    """Each sink's records as a file in ``folder``, for ``verify_files``: streamed, so
    records read from a spill as iterated (``ftctl.spill.SpilledRecords``) stay on disk."""
    return {name: write_sink(Path(folder) / f"{name}.parquet", recs)
            for name, recs in outputs.items()}


def verify_outputs(modes: dict[str, str], golden: dict[str, Path],
                   outputs: Mapping[str, Iterable[tuple[Any, Any]]], guarantee: Guarantee,
                   folder: Path, complete: bool = True, stopped: str | None = None) -> Verdict:
    """A run's outputs against golden's files: the outputs are written to ``folder``
    (where DuckDB spills too), judged, and the folder removed."""
    try:
        return verify_files(modes, golden, write_outputs(outputs, folder / "output"),
                            guarantee, complete, temp=folder / "duckdb", stopped=stopped)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
