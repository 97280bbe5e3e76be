"""Store faults on a Structured Streaming run's checkpoint location, without Spark: which
file each strikes, what it does to it, how a scenario's store faults become the engine's,
and the one it refuses. tests/test_structured_spark.py runs a damaged offsets log on
Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chaos.schedule import PlannedFault
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.engines.structured import cli, runner
from ftctl.engines.structured.checkpoint_faults import damage, stored_files
from ftctl.results import RunStore
from ftctl.store import damaged

ROOT = Path(__file__).resolve().parent.parent


def _location(root: Path, batches: int = 3) -> Path:
    """A query's checkpoint location as Spark lays it out: logs with checksum files
    beside them, RocksDB's zipped versions under state/."""
    for log in ("offsets", "commits"):
        (root / log).mkdir(parents=True)
        for n in range(batches):
            (root / log / str(n)).write_text(f'v1\n{{"batchWatermarkMs":0,"batch":{n}}}\n')
            (root / log / f".{n}.crc").write_bytes(b"crc")
    for part in (0, 1):
        store = root / "state" / "0" / str(part) / "default"
        store.mkdir(parents=True)
        (store / "_metadata").mkdir()
        (store / "_metadata" / "schema").write_bytes(b"schema")
        for version in range(1, batches + 1):
            (store / f"{version}.zip").write_bytes(bytes(range(40 + part)))
            (store / f".{version}.zip.crc").write_bytes(b"crc")
    return root


def test_the_stored_files_of_each_log(tmp_path: Path) -> None:
    loc = _location(tmp_path / "out")
    assert {n: [p.name for p in ps] for n, ps in stored_files(loc, "offsets").items()} == {
        0: ["0"], 1: ["1"], 2: ["2"]}
    state = stored_files(loc, "state")
    assert sorted(state) == [1, 2, 3] and [p.parent.parent.name for p in state[3]] == ["0", "1"]
    assert stored_files(tmp_path / "none", "commits") == {}


@pytest.mark.parametrize("log", ["offsets", "commits", "state"])
def test_a_damage_strikes_the_newest_file_of_the_log_and_nothing_else(tmp_path: Path,
                                                                      log: str) -> None:
    loc = _location(tmp_path / "out")
    before = {p: p.read_bytes() for p in loc.rglob("*") if p.is_file()}
    newest = stored_files(loc, log)[max(stored_files(loc, log))][0]
    got = damage(loc, log, "corrupt", None, 0.25)
    assert got is not None and got.path == newest and got.size == len(before[newest])
    assert newest.read_bytes() == damaged(before[newest], "corrupt", 0.25) != before[newest]
    # the checksum beside it is left as it was, and so is every other file
    after = {p: p.read_bytes() for p in loc.rglob("*") if p.is_file()}
    assert {p for p in after if after[p] != before[p]} == {newest} and set(after) == set(before)


def test_a_named_batch_is_truncated_or_deleted_and_a_missing_one_is_none(
        tmp_path: Path) -> None:
    loc = _location(tmp_path / "out")
    one = loc / "offsets" / "1"
    data = one.read_bytes()
    assert damage(loc, "offsets", "truncate", 1, 0.5) is not None
    assert one.read_bytes() == data[:len(data) // 2]
    got = damage(loc, "commits", "delete", None, 0.5)
    assert got is not None and not (loc / "commits" / "2").exists()
    assert (loc / "commits" / ".2.crc").exists() and (loc / "commits" / "1").exists()
    assert damage(loc, "offsets", "corrupt", 7, 0.5) is None
    assert damage(tmp_path / "empty", "state", "delete", None, 0.5) is None


def test_a_scenarios_store_faults_become_the_engines_and_store_unavailable_is_refused(
        tmp_path: Path) -> None:
    from chaos.plan import from_scenario

    path = tmp_path / "damage.yaml"
    path.write_text("name: damage\nseed: 3\nfaults:\n"
                    "  - {type: corrupt, at: 2.0, target: count, params: {snapshot: 4}}\n"
                    "  - {type: delete, at: 2.5, target: random}\n"
                    "  - {type: kill-driver, at: 3.0, target: random}\n")
    order = ["lines[0]", "split[0]", "count[0]", "count[1]", "out[0]"]
    faults = cli.from_planned(from_scenario(path, order, 10.0, None).faults, str(path))
    assert [(f.type, f.at, f.snapshot) for f in faults] == [
        ("corrupt", 2.0, 4), ("delete", 2.5, None), ("kill-driver", 3.0, None)]
    assert faults[0].target == "count" and faults[1].target in {o.split("[")[0] for o in order}
    # where in the file: drawn from the fault's seed, so every run strikes the same byte
    again = cli.from_planned(from_scenario(path, order, 10.0, None).faults, str(path))
    assert [f.where for f in again] == [f.where for f in faults]
    assert 0 <= faults[0].where < 1 and faults[0].where != faults[1].where
    outage = [PlannedFault(0, 0, "store-unavailable", "count[0]", 1.0, duration=2.0)]
    with pytest.raises(ConfigError) as refused:
        cli.from_planned(outage, "s.yaml")
    assert str(refused.value).startswith("s.yaml: faults: ") and "\n" not in str(refused.value)
    assert "does not carry out store-unavailable" in str(refused.value)


def _events(store: RunStore, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in store.read_events() if e["kind"] == kind]


def test_the_run_damages_the_checkpoint_of_the_targets_sinks_once_there_is_one(
        tmp_path: Path) -> None:
    """Before the first batch there is no file: the fault waits (one ``fault-deferred``);
    then it damages the file of each sink downstream of its target, and fails nothing."""
    topology = load_topology(ROOT / "topologies/ring-fanout.yaml")
    sinks = [op.name for op in topology.operators if op.type == "sink"]
    assert len(sinks) == 2
    store = RunStore.create(tmp_path, topology=topology.name, protocol="structured-streaming")
    req = runner.EngineRequest(topology, checkpoint_file="commits")
    fault = runner.Fault(1.0, "delete", 0, target=sinks[1], where=0.5)
    ids = {"target": runner.DRIVER, "index": 0, "occurrence": 0, "offset": 1.0}
    deferred: set[int] = set()
    assert runner._damage(req, store, fault, ids, deferred) is None
    assert runner._damage(req, store, fault, ids, deferred) is None
    assert len(_events(store, "fault-deferred")) == 1
    for sink in sinks:
        _location(store.path / "checkpoints" / sink, batches=2)
    assert runner._damage(req, store, fault, ids, deferred) is False
    # only the target's sink: the other query's commits are whole
    assert not (store.path / "checkpoints" / sinks[1] / "commits" / "1").exists()
    assert (store.path / "checkpoints" / sinks[0] / "commits" / "1").exists()
    [injected] = _events(store, "fault-injected")
    assert injected["type"] == "delete" and injected["details"]["files"] == [
        f"{sinks[1]}/commits/1"]
    # a target upstream of every sink (or none) strikes every sink's location
    every = runner.Fault(2.0, "delete", 1, target="", where=0.5)
    assert runner._damage(req, store, every, {**ids, "index": 1}, deferred) is False
    assert not (store.path / "checkpoints" / sinks[0] / "commits" / "1").exists()
