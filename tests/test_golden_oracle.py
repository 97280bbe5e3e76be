"""The golden cache and the Spark SQL batch oracle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import host
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.verify import oracle_cache
from ftctl.verify.golden import golden_for, topology_hash
from ftctl.verify.oracle import (
    ORACLES,
    final_per_key,
    input_json,
    oracle_check,
    oracle_expected,
    oracle_for,
)
from protocols.registry import PROTOCOLS

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


def _topology(name: str, records: int) -> Topology:
    topo = load_topology(TOPOLOGIES / f"{name}.yaml")
    return topo.model_copy(update={"input": topo.input.model_copy(update={"records": records})})


def test_hash_is_keyed_by_the_input() -> None:
    small, other = _topology("wordcount", 300), _topology("wordcount", 301)
    assert topology_hash(small) == topology_hash(_topology("wordcount", 300))
    assert topology_hash(small) != topology_hash(other)
    reseeded = small.model_copy(update={"input": small.input.model_copy(update={"seed": 8})})
    assert topology_hash(small) != topology_hash(reseeded)


def test_cache_hit_returns_identical_output(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    topo = _topology("wordcount", 300)
    first = golden_for(topo, golden_output, tmp_path)
    assert len(list(tmp_path.iterdir())) == 1

    def no_recompute(graph: Any) -> Any:
        raise AssertionError("cache miss")

    assert golden_for(topo, no_recompute, tmp_path) == first


def test_changed_input_misses_the_cache(tmp_path: Path) -> None:
    a = golden_for(_topology("wordcount", 300), golden_output, tmp_path)
    b = golden_for(_topology("wordcount", 200), golden_output, tmp_path)
    assert len(list(tmp_path.iterdir())) == 2
    assert sum(len(v) for v in b.values()) < sum(len(v) for v in a.values())


def test_corrupt_cache_is_recomputed(tmp_path: Path) -> None:
    topo = _topology("sharder", 300)
    good = golden_for(topo, golden_output, tmp_path)
    (cache,) = tmp_path.iterdir()
    cache.write_bytes(b"\x80\x05 truncated")
    assert golden_for(topo, golden_output, tmp_path) == good
    assert golden_for(topo, golden_output, tmp_path) == good  # and the rewritten file reads back


def test_golden_output_is_never_cut_short(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sharder outputs one count per vote; a run capped by the simulator's event limit
    # (kept for fault schedules that could livelock) stops part-way.
    topo = _topology("sharder", 3000)
    graph = ExecutionGraph(topo)
    capped = SimHost(graph, PROTOCOLS["none"], {}, seed=0, max_events=300).run()
    assert not capped.complete and len(capped.outputs["out"]) < 3000
    monkeypatch.setattr(host, "MAX_EVENTS", 300)
    assert len(golden_output(graph)["out"]) == 3000


def test_unknown_oracle_is_a_config_error() -> None:
    topo = _topology("wordcount", 300).model_copy(update={"oracle": "nope"})
    with pytest.raises(ConfigError) as err:
        oracle_for(topo)
    assert err.value.field == "oracle" and err.value.file == "wordcount"
    assert "unknown oracle 'nope'" in err.value.message and "word-count" in err.value.message


def test_oracle_needs_its_source_type() -> None:
    topo = _topology("sharder", 300).model_copy(update={"oracle": "word-count"})
    with pytest.raises(ConfigError, match=r"source\.text"):
        oracle_for(topo)


def test_no_oracle_means_no_check() -> None:
    topo = _topology("diamond", 300)
    assert oracle_for(topo) is None
    assert oracle_check(None, topo, {}) is None  # type: ignore[arg-type]


def test_final_per_key_max_is_order_independent() -> None:
    records = [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3)]
    assert final_per_key(records, "max") == final_per_key(records[::-1], "max") == {
        "a": 3, "b": 2}
    assert final_per_key(records[::-1], "last") == {"a": 1, "b": 1}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("ftctl-oracle-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.mark.spark
def test_oracle_agrees_with_golden_and_catches_a_wrong_count(spark: Any,
                                                             tmp_path: Path) -> None:
    topo = _topology("wordcount", 300)
    outputs = golden_for(topo, golden_output, tmp_path)
    expected = oracle_expected(spark, topo)
    assert expected == final_per_key(outputs["out"], "max")
    assert sum(expected.values()) == 300 * 8

    result = oracle_check(spark, topo, outputs, cache=False)
    assert result is not None and result.passed
    assert result.keys == len(expected) and result.mismatches == []

    word = outputs["out"][-1][0]
    top = max(c for w, c in outputs["out"] if w == word)
    planted = {"out": [*outputs["out"], (word, top + 1)]}
    bad = oracle_check(spark, topo, planted, cache=False)
    assert bad is not None and not bad.passed
    assert bad.mismatches == [(word, top, top + 1)] and bad.total_mismatches == 1


def test_the_oracle_cache_key_follows_the_input_and_the_oracle() -> None:
    def key(topo: Topology, name: str = "word-count") -> str:
        return oracle_cache.oracle_key(input_json(topo, ORACLES[name]), name)

    small = _topology("wordcount", 300)
    assert key(small) == key(_topology("wordcount", 300))
    assert key(small) == key(small.with_input(rate=10))  # pacing is not input
    assert key(small) != key(_topology("wordcount", 301))
    reseeded = small.model_copy(update={"input": small.input.model_copy(update={"seed": 8})})
    assert key(small) != key(reseeded)
    assert key(small) != key(small, "vote-count")


@pytest.mark.spark
def test_the_oracle_answer_is_kept_and_a_damaged_entry_computed_again(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FTCTL_CACHE_DIR", str(tmp_path / "cache"))
    topo = _topology("wordcount", 300)
    outputs = golden_for(topo, golden_output, tmp_path)
    first = oracle_check(spark, topo, outputs)
    assert first is not None and first.passed and not first.cached
    entries = list((tmp_path / "cache" / "oracle").iterdir())
    assert len(entries) == 1
    again = oracle_check(spark, topo, outputs)
    assert again is not None and again.passed and again.cached
    assert "from the cache" in again.describe() and again.to_json()["cached"] is True
    # the kept answer still catches a wrong count
    word = outputs["out"][-1][0]
    top = max(c for w, c in outputs["out"] if w == word)
    bad = oracle_check(spark, topo, {"out": [*outputs["out"], (word, top + 1)]})
    assert bad is not None and bad.cached and bad.mismatches == [(word, top, top + 1)]
    # another input is another entry
    other = _topology("wordcount", 301)
    fresh = oracle_check(spark, other, golden_for(other, golden_output, tmp_path / "g2"))
    assert fresh is not None and fresh.passed and not fresh.cached
    # a torn entry is computed again and replaced
    entries[0].write_bytes(entries[0].read_bytes()[:20])
    redone = oracle_check(spark, topo, outputs)
    assert redone is not None and redone.passed and not redone.cached
    assert oracle_check(spark, topo, outputs).cached  # type: ignore[union-attr]


@pytest.mark.spark
def test_vote_count_oracle_matches_golden(spark: Any, tmp_path: Path) -> None:
    topo = _topology("sharder", 300)
    outputs = golden_for(topo, golden_output, tmp_path)
    result = oracle_check(spark, topo, outputs, cache=False)
    assert result is not None
    assert result.passed, result.describe()
    missing = {"out": [(k, v) for k, v in outputs["out"] if k != outputs["out"][0][0]]}
    lost = oracle_check(spark, topo, missing, cache=False)
    assert lost is not None and not lost.passed
    assert lost.mismatches[0][2] is None  # the key the output lost
