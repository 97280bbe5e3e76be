"""A run's verdict in bounded driver memory: neither the golden run's output nor the
Spark host's is ever held whole by the driver of ``ftctl run``.

Python's own allocations are traced (DuckDB's and Arrow's are not Python's): what the
driver holds while it computes golden's files, and while it judges, summarises and
stores a run's output, must stay well below what the same output takes as lists."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

from ftctl import results as results_mod
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.results import list_runs
from ftctl.run import execute as execute_mod
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import golden as sim_golden
from ftctl.sim.golden import golden_output
from ftctl.store import SinkStore
from ftctl.verify import oracle as oracle_mod
from ftctl.verify import sinkfile
from ftctl.verify.golden import golden_files, golden_for
from tests.test_spill import run_on

ROOT = Path(__file__).resolve().parent.parent
SMALL = 1_000  # in-memory tail and row group while a test runs: far below its output


def _wordcount(lines: int) -> Topology:
    topo = load_topology(ROOT / "topologies" / "wordcount.yaml")
    # Three sink instances: the files keep their records in instance order.
    ops = [op.model_copy(update={"parallelism": 3}) if op.type == "sink" else op
           for op in topo.operators]
    return topo.model_copy(update={
        "operators": ops, "input": topo.input.model_copy(update={"records": lines})})


def _peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()`` and the most Python memory it held above what it started with."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.fixture
def small_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_golden, "SPILL_KEEP", SMALL)
    monkeypatch.setattr(sinkfile, "ROW_GROUP", SMALL)
    monkeypatch.setattr(results_mod, "OUTPUT_ROW_GROUP", SMALL)


def test_sink_records_stream_from_the_spill_in_by_operator_order(tmp_path: Path) -> None:
    store = SinkStore(tmp_path / "spill", keep=5)
    for k in range(40):  # out[1] and out[10] sort as strings, as by_operator sorts them
        store.commit(f"out[{k % 11}]", k // 11 + 1, [(f"w{k}", k), (f"w{k}", -k)])
        store.append(f"side[{k % 2}]", [(k, str(k))])
    streamed = store.streamed()
    whole = store.by_operator()
    assert {s: list(r) for s, r in streamed.items()} == whole
    assert {s: len(r) for s, r in streamed.items()} == {"out": 80, "side": 40}
    assert ("w3", -3) in streamed["out"] and ("w3", 4) not in streamed["out"]
    # Most of it is on disk and read from there each time it is iterated.
    on_disk = sum(p.records for p in streamed["out"].parts if not isinstance(p, list))
    assert on_disk > 60
    assert list(streamed["out"]) == whole["out"]


def test_len_of_spilled_records_reads_no_file(tmp_path: Path) -> None:
    store = SinkStore(tmp_path / "spill", keep=2)
    store.commit("out[0]", 1, [("a", 1)] * 7)
    records = store.streamed()["out"]
    for f in (tmp_path / "spill").iterdir():
        f.unlink()
    assert len(records) == 7  # what figures read after the run folder's spill is gone


def test_the_golden_run_writes_its_files_without_holding_its_output(
        tmp_path: Path, small_buffers: None) -> None:
    golden_files(_wordcount(10), golden_output, tmp_path / "warm-up")  # imports, caches
    topo = _wordcount(5_000)  # 40,000 records at the sinks
    whole, held_whole = _peak(lambda: golden_output(ExecutionGraph(topo)))
    files, held = _peak(lambda: golden_files(topo, golden_output, tmp_path / "g"))
    assert held < held_whole / 3, (held, held_whole)
    # The same records, in the same order, as the in-memory golden output.
    (sink,) = files
    table = pq.read_table(files[sink])
    assert table.num_rows == len(whole[sink]) == 40_000
    keys = [sinkfile.original(k, ko) for k, ko in zip(table.column("k").to_pylist(),
                                                      table.column("ko").to_pylist(),
                                                      strict=True)]
    assert keys == [k for k, _ in whole[sink]]
    # The scratch folder it spilled to is gone.
    assert [p.name for p in (tmp_path / "g").iterdir()] == [files[sink].parent.name]


def test_the_golden_run_spills_while_it_runs(tmp_path: Path, small_buffers: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Every time a sink makes output visible, no sink instance holds more than its tail
    (plus what that call brought) in memory, and at the simulation's end all but the
    tails are on disk."""
    topo = _wordcount(1_000)  # 8,000 records at the sinks
    seen: list[tuple[int, int, int]] = []  # (largest tail, records brought, on disk)

    def watch(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: SinkStore, instance: str, *args: Any) -> Any:
            out = real(self, instance, *args)
            records = args[-1] if real is real_commit else args[0]
            seen.append((max(len(t) for t in self.visible.values()), len(records),
                         sum(f.records for f in self._files.values())))
            return out
        return call

    real_commit, real_append = sim_golden._OnDisk.commit, sim_golden._OnDisk.append
    monkeypatch.setattr(sim_golden._OnDisk, "commit", watch(real_commit))
    monkeypatch.setattr(sim_golden._OnDisk, "append", watch(real_append))
    golden_files(topo, golden_output, tmp_path)
    assert len(seen) > 10
    assert max(tail - brought for tail, brought, _ in seen) <= SMALL
    assert seen[-1][2] >= 8_000 - 3 * SMALL


def test_a_run_is_judged_summarised_and_stored_from_its_spill(
        tmp_path: Path, small_buffers: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's output streams from its spill through the verdict, the oracle and
    ``outputs/``: the driver never holds it whole after the run."""
    import ftctl.metrics.runreport  # noqa: F401  (imported on the way: not the output's)

    topo = _wordcount(5_000)
    golden = golden_for(topo, golden_output, tmp_path / "golden")
    store = SinkStore(tmp_path / "host-spill", keep=SMALL)
    records = [r for recs in golden.values() for r in recs]
    for epoch, i in enumerate(range(0, len(records), 500), start=1):
        store.commit("out[0]", epoch, records[i:i + 500])
    del records
    # What reading the spill back whole (as the host did) takes.
    _, held_whole = _peak(lambda: store.by_operator())
    held: list[int] = []

    class SpilledHost:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def run(self) -> Any:
            tracemalloc.start()  # from the run's end on: the driver's verdict and files
            return SimpleNamespace(
                outputs=store.streamed(), complete=True, seconds=1.0, started_at=0.0,
                metrics=[], latency=[], detections=0, restarts=0, records_in={},
                records_out={}, stopped=None)

        def now(self) -> float:
            return 0.0

    def write_verdict(self: Any, doc: dict[str, Any]) -> None:
        held.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        real_write_verdict(self, doc)

    real_write_verdict = results_mod.RunStore.write_verdict
    monkeypatch.setattr(results_mod.RunStore, "write_verdict", write_verdict)
    monkeypatch.setattr(execute_mod, "golden_files", lambda topology, produce: golden_files(
        topology, produce, tmp_path / "golden"))
    expected = oracle_mod.final_per_key(store.records("out[0]"), "max")
    monkeypatch.setattr(oracle_mod, "expected_values",
                        lambda spark, topology, oracle: (expected, True))
    # checkpoint: exactly-once, so a record lost on the way would fail the run.
    assert run_on(SpilledHost, tmp_path, monkeypatch, topo, "checkpoint",
                  quiet=True) == execute_mod.EXIT_OK
    (run,) = list_runs(tmp_path / "results")
    verdict = run.read_verdict()
    assert verdict is not None and verdict["oracle"]["passed"] and verdict["passed"]
    assert verdict["guarantee"] == "exactly-once"
    assert verdict["sinks"][0]["output_records"] == 40_000
    assert pq.read_metadata(run.path / "outputs" / "out.parquet").num_rows == 40_000
    assert held and held[0] < held_whole / 3, (held, held_whole)
