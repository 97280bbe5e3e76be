"""The Parquet sink files the out-of-core checker reads: a column of plain words or ints is
encoded a column at a time, and must give the bytes ``canon.encode`` gives value by value,
or the verdict would compare golden and output in two different encodings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftctl import codec
from ftctl.verify import canon, sinkfile
from ftctl.verify.checker import compare
from ftctl.verify.outofcore import compare_files, connect
from ftctl.verify.sinkfile import encode_column, original, write_sink

INT64 = st.integers(-(2**63), 2**63 - 1)
# Byte-length edges of the canonical int: 2^(8k-1) and its neighbours, either sign.
EDGES = st.builds(lambda k, d, s: s * ((1 << (8 * k - 1)) + d), st.integers(1, 8),
                  st.integers(-1, 1), st.sampled_from([1, -1]))


def _by_value(values: list[Any]) -> tuple[list[bytes], list[bytes | None]]:
    pairs = [canon.encode(v) for v in values]
    return ([c for c, _ in pairs],
            [codec.encode(v) if lossy else None for v, (_, lossy) in zip(values, pairs,
                                                                          strict=True)])


@given(st.lists(st.one_of(INT64, EDGES), max_size=50))
def test_an_int_column_encodes_as_each_value_would(values: list[int]) -> None:
    got, originals = encode_column(values)
    assert (got.to_pylist(), originals.to_pylist()) == _by_value(values)


@given(st.lists(st.text(), max_size=50))
def test_a_str_column_encodes_as_each_value_would(values: list[str]) -> None:
    got, originals = encode_column(values)
    assert (got.to_pylist(), originals.to_pylist()) == _by_value(values)


@pytest.mark.parametrize("values", [
    ["a\udc80", "b"],          # a lone surrogate: Arrow refuses it, value by value
    [2**64, 1], [-(2**63) - 1],  # past 64 bits
    [True, 1], [1.0, 2], ["a", 1], [(1, "a"), (2, "b")], [None, None],
])
def test_other_columns_go_value_by_value(values: list[Any]) -> None:
    got, originals = encode_column(values)
    assert (got.to_pylist(), originals.to_pylist()) == _by_value(values)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.sampled_from(["a", "b", "é", "\U0001f600"]), max_size=40),
       values=st.lists(st.integers(-300, 2**40), max_size=40),
       lost=st.integers(0, 39), again=st.integers(0, 39))
def test_words_and_counts_judge_as_in_memory_across_row_groups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: list[str], values: list[int],
        lost: int, again: int) -> None:
    monkeypatch.setattr(sinkfile, "ROW_GROUP", 7)  # several groups, a partial last one
    golden = list(zip(keys, values, strict=False))
    output = list(golden)
    if output:
        del output[lost % len(output)]
        output.insert(again % (len(output) + 1), golden[again % len(golden)])
    g = write_sink(tmp_path / "g.parquet", golden)
    o = write_sink(tmp_path / "o.parquet", output)
    table = pq.read_table(g)
    assert table.column("seq").to_pylist() == list(range(len(golden)))
    assert [(original(k, ko), original(v, vo)) for k, v, ko, vo in zip(
        *(table.column(c).to_pylist() for c in ("k", "v", "ko", "vo")), strict=True)] == golden
    con = connect(tmp_path / "tmp")
    try:
        for mode in ("multiset", "ordered-per-key", "final-per-key"):
            files = compare_files(con, "out", mode, g, o, max_divergences=3)
            mem = compare("out", mode, golden, output, max_divergences=3)
            assert files.anomalies() == mem.anomalies()
            assert [(d.key, d.index, d.expected, d.actual) for d in files.divergences] \
                == [(d.key, d.index, d.expected, d.actual) for d in mem.divergences]
    finally:
        con.close()
