"""What grows with a run's length is spilled past a bounded tail and read back whole."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.console import EXIT_INFRA
from ftctl.results import list_runs
from ftctl.run import execute as execute_mod
from ftctl.sim.golden import golden_output
from ftctl.spark.latency import LatencyLog
from ftctl.spill import ChunkFile, RowLog
from ftctl.verify.golden import golden_files as real_golden_files
from ftctl.verify.golden import golden_for as real_golden_for
from ftctl.verify.outofcore import verify_outputs as real_verify_outputs
from protocols.registry import get_protocol

ROOT = Path(__file__).resolve().parent.parent


def test_a_chunk_file_gives_back_its_chunks_in_order(tmp_path: Path) -> None:
    f = ChunkFile(tmp_path / "deep" / "x.pickle")
    assert list(f) == [] and not f.path.exists()  # nothing written, nothing read
    for k in range(3):
        f.append([k, str(k)])
    assert list(f) == [[0, "0"], [1, "1"], [2, "2"]]
    # The records on disk are counted as written: a chunk's length, or what its owner says.
    assert f.records == 6
    f.append(("columns", [1.0, 2.0, 3.0]), records=3)
    assert f.records == 9 and f.chunks == 4


def test_a_chunk_file_gives_back_every_type_and_shape_as_written(tmp_path: Path) -> None:
    """Without the memo a chunk still reads back exactly: arrays stay arrays (marshal
    would make them bytes), a value shared twice comes back twice, a cycle is kept."""
    from array import array
    from fractions import Fraction

    f = ChunkFile(tmp_path / "x.pickle")
    shared = ("w1", 3)
    plain = [shared, shared, ("w2", 1)]
    other = [(array("d", [1.5, 2.5]), Fraction(1, 3)), ("k", frozenset({1}))]
    cycle: list[Any] = ["loop"]
    cycle.append(cycle)
    for chunk in (plain, other, cycle, plain):
        f.append(chunk)
    back = list(f)
    assert back[0] == plain == back[3] and back[1] == other
    assert type(back[1][0][0]) is array and type(back[1][0][1]) is Fraction
    assert back[2][0] == "loop" and back[2][1] is back[2]


def test_a_row_log_keeps_a_bounded_tail_and_reads_every_row_back(tmp_path: Path) -> None:
    log = RowLog(tmp_path / "rows.pickle", keep=4)
    for k in range(11):
        log.append((k, f"i{k % 3}"))
        assert len(log.tail) < 4
    assert log.rows() == [(k, f"i{k % 3}") for k in range(11)]
    # Without a file, everything stays in memory.
    mem = RowLog(keep=4)
    for k in range(11):
        mem.append(k)
    assert len(mem.tail) == 11 and mem.rows() == list(range(11))


def test_a_spilling_latency_log_holds_a_bounded_tail_and_keeps_every_sample(
    tmp_path: Path,
) -> None:
    log = LatencyLog(tmp_path / "latency.pickle", keep=10)
    expected = []
    for k in range(40):
        iid = f"out[{k % 2}]"
        log.add(iid, [(float(k), k / 4), (k + 0.5, k / 8)])
        expected += [(iid, float(k) - 1.0, k / 4), (iid, k + 0.5 - 1.0, k / 8)]
        assert len(log.t) <= 11
    assert len(log) == 80 == len(expected)  # the spilled samples counted with the tail
    assert log.rows(t0=1.0) == expected


def run_on(host: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
           topology: Topology | None = None, protocol: str = "none",
           quiet: bool = False) -> int:
    """``execute`` of ``topology`` (default wordcount) under ``protocol`` with ``host`` for
    the Spark host and no Spark session; ``--json`` unless ``quiet``."""
    session = SimpleNamespace(sparkContext=SimpleNamespace(applicationId="app-1"))
    monkeypatch.setattr(execute_mod, "start_session", lambda *a, **k: session)
    monkeypatch.setattr(execute_mod, "stop_session", lambda spark: None)
    monkeypatch.setattr(execute_mod, "SparkHost", host)
    topology = topology or load_topology(ROOT / "topologies" / "wordcount.yaml")
    info = get_protocol(protocol)
    req = execute_mod.RunRequest(topology=topology, info=info, params=info.resolve({}),
                                 master="spark://127.0.0.1:7077", workers=1,
                                 results=tmp_path / "results", timeout=60,
                                 as_json=not quiet, quiet=quiet)
    return execute_mod.execute(req)


def test_a_failed_run_leaves_no_spill_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The host dies mid-run after spilling: the run is marked failed, the scratch is gone."""

    class DyingHost:
        def __init__(self, *args: Any, spill: Path, **kwargs: Any) -> None:
            self.spill = spill

        def run(self) -> None:
            ChunkFile(self.spill / "out[0].pickle").append([("k", 1)])
            raise RuntimeError("lost the driver's socket")

    assert run_on(DyingHost, tmp_path, monkeypatch) == EXIT_INFRA
    assert "lost the driver's socket" in capsys.readouterr().err
    (run,) = list_runs(tmp_path / "results")
    assert run.status() == "failed"
    assert not (run.path / execute_mod.SPILL).exists()


def test_the_golden_output_is_not_held_while_the_run_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Computed before the cluster starts and written to its files, dropped during the run
    (the tasks need the memory at paper sizes); the verdict reads the files."""

    class Outputs(dict):  # a dict that a weak reference can watch
        pass

    made: list[weakref.ref[Outputs]] = []
    alive_during_run: list[bool] = []

    def produce(graph: Any, spill: Path) -> Outputs:
        out = Outputs(out=[("k", 1)])
        made.append(weakref.ref(out))
        return out

    def golden_files(topology: Any, _produce: Any) -> dict[str, Path]:
        return real_golden_files(topology, produce, tmp_path / "golden")

    class WatchingHost:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def run(self) -> None:
            gc.collect()
            alive_during_run.extend(ref() is not None for ref in made)
            raise RuntimeError("stop after looking")

    monkeypatch.setattr(execute_mod, "golden_files", golden_files)
    assert run_on(WatchingHost, tmp_path, monkeypatch) == EXIT_INFRA
    assert alive_during_run == [False]  # made once before the run, and let go


def test_the_verdict_is_judged_out_of_core_in_the_run_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose sink lost its first record: the verdict says so, and the files the
    out-of-core checker wrote in the run's spill folder are gone afterwards."""
    topology = load_topology(ROOT / "topologies" / "wordcount.yaml")
    golden = real_golden_for(topology, golden_output, tmp_path / "golden")
    seen: list[bool] = []

    def verify_outputs(*args: Any, **kwargs: Any) -> Any:
        verdict = real_verify_outputs(*args, **kwargs)
        seen.append(args[4].parent.name == execute_mod.SPILL)  # spilled in the run folder
        return verdict

    class LossyHost:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def run(self) -> Any:
            return SimpleNamespace(
                outputs={s: recs[1:] for s, recs in golden.items()}, complete=False,
                seconds=1.0, started_at=0.0, metrics=[], latency=[], detections=[],
                restarts=[], records_in=0, records_out=0, stopped=None)

        def now(self) -> float:
            return 1000.0  # far ahead of the run's own clock: the offset is negative

    monkeypatch.setattr(execute_mod, "golden_files", lambda topo, produce: real_golden_files(
        topo, produce, tmp_path / "golden"))
    monkeypatch.setattr(execute_mod, "verify_outputs", verify_outputs)
    assert run_on(LossyHost, tmp_path, monkeypatch, topology,
                  quiet=True) == execute_mod.EXIT_FAILED
    (run,) = list_runs(tmp_path / "results")
    (sink,) = run.read_verdict()["sinks"]
    assert sink["lost"] == 1 and seen == [True]  # the one record each sink lost
    assert not (run.path / execute_mod.SPILL).exists()
    # Every run, chaos or not, leaves the report its series on the events' clock, with
    # the host clock's offset (the fake host's clock is ahead of the run's).
    series = json.loads((run.path / "series.json").read_text())
    assert series["shift"] < 0 and series["throughput"] == series["latency_p50"] == []


def test_a_chunk_file_writes_with_the_memo_where_fast_mode_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Pickler.fast`` is marked deprecated: a Python without it still spills."""
    import pickle

    class NoFast(pickle.Pickler):
        @property  # type: ignore[override]
        def fast(self) -> bool:
            return False

        @fast.setter
        def fast(self, _on: bool) -> None:
            raise AttributeError("fast")

    monkeypatch.setattr(pickle, "Pickler", NoFast)
    f = ChunkFile(tmp_path / "x.pickle")
    f.append([("w1", 3), ("w1", 3)])
    assert list(f) == [[("w1", 3), ("w1", 3)]]
