"""The run store: atomic writes, events, outputs round-trip, status semantics."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.config.errors import ConfigError
from ftctl.kernel.history import HistoryError
from ftctl.results import (
    RunStore,
    atomic_write_json,
    decode_value,
    encode_value,
    encode_values,
    list_runs,
    mark_abandoned,
)


def _store(tmp_path: Path) -> RunStore:
    return RunStore.create(tmp_path, topology="wordcount", protocol="checkpoint")


def test_create_names_the_run_and_marks_it_running(tmp_path: Path) -> None:
    run = _store(tmp_path)
    assert re.fullmatch(r"\d{8}-\d{6}-wordcount-checkpoint-[0-9a-f]{4}", run.run_id)
    assert run.path == tmp_path / run.run_id
    assert run.status() == "running"
    assert not run.finished
    assert not run.passed()


def test_atomic_json_write_leaves_no_temp_files_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    atomic_write_json(target, {"a": 1})
    atomic_write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert os.listdir(tmp_path) == ["x.json"]


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    atomic_write_json(target, {"a": 1})
    with pytest.raises(TypeError):
        atomic_write_json(target, {1j: "complex keys are not JSON"})
    assert json.loads(target.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["x.json"]


def test_config_and_verdict_round_trip(tmp_path: Path) -> None:
    run = _store(tmp_path)
    run.write_config({"topology": {"name": "wordcount"}, "path": Path("/tmp/x")})
    run.write_verdict({"passed": True, "sinks": []})
    assert run.read_config() == {"topology": {"name": "wordcount"}, "path": "/tmp/x"}
    assert run.read_verdict() == {"passed": True, "sinks": []}


def test_events_are_appended_in_order_with_times(tmp_path: Path) -> None:
    run = _store(tmp_path)
    run.event("fault-injected", fault="0.0", type="kill-task", target="count[1]")
    run.event("failure-detected", instances=["count[1]"])
    # A second handle (another process reopening the run) appends to the same log.
    RunStore.open(run.run_id, root=tmp_path).event(
        "instance-started", instance="count[1]", incarnation=1, reason="restart")
    events = run.read_events()
    assert [(e["v"], e["seq"], e["kind"]) for e in events] == [
        (2, 1, "fault-injected"), (2, 2, "failure-detected"), (2, 3, "instance-started")]
    assert events[0]["data"]["target"] == "count[1]" and events[2]["instance"] == "count[1]"
    assert all(isinstance(e["wall"], str) and e["host"] == "spark" for e in events)
    times = [e["t"] for e in events]
    assert times == sorted(times) and times[0] >= 0
    assert [e.kind for e in run.read_history()] == [e["kind"] for e in events]


def test_torn_last_event_line_is_skipped(tmp_path: Path) -> None:
    run = _store(tmp_path)
    run.event("node-up", node="w1")
    with open(run.path / "events.jsonl", "a") as f:
        f.write('{"kind": "det')  # the process died mid-write
    assert [e["kind"] for e in run.read_events()] == ["node-up"]


def test_records_the_schema_does_not_declare_are_refused(tmp_path: Path) -> None:
    run = _store(tmp_path)
    with pytest.raises(HistoryError):
        run.event("fault", n=1)
    with pytest.raises(HistoryError):
        run.event("node-up", node="w1", t=3)
    assert run.read_events() == []


def test_outputs_round_trip_with_str_int_and_tuple_values(tmp_path: Path) -> None:
    run = _store(tmp_path)
    outputs: dict[str, list[tuple[Any, Any]]] = {
        "out": [("w1", 1), ("w2", 1), ("w1", 2)],
        "votes": [(10, 1), (390, 2), (int(np.int64(7)), 3)],
        "win": [("#tag1", (50, 1)), ("#tag1", (100, 2)), (("a", 1), None)],
        "empty": [],
    }
    run.write_outputs(outputs)
    back = RunStore.open(run.path).read_outputs()
    assert back == outputs
    assert isinstance(back["win"][0][1], tuple)


def test_outputs_span_row_groups_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    import ftctl.results as results

    monkeypatch.setattr(results, "OUTPUT_ROW_GROUP", 4)
    run = _store(tmp_path)
    outputs: dict[str, list[tuple[Any, Any]]] = {"out": [(i % 3, i) for i in range(10)]}
    run.write_outputs(outputs)
    assert pq.ParquetFile(run.path / "outputs" / "out.parquet").num_row_groups == 3
    assert RunStore.open(run.path).read_outputs() == outputs


def test_numpy_scalars_are_stored_as_plain_values(tmp_path: Path) -> None:
    run = _store(tmp_path)
    run.write_outputs({"out": [(np.int64(3), (np.int64(1), np.float64(0.5)))]})
    assert run.read_outputs() == {"out": [(3, (1, 0.5))]}


_scalars = st.one_of(st.text(), st.integers(), st.booleans(), st.none())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    _scalars, _scalars,
    st.floats(allow_nan=False, allow_infinity=False), st.tuples(st.integers(), st.text()),
    st.integers(-(2**63), 2**63 - 1).map(np.int64))))
def test_a_column_encodes_as_its_values_do(values: list[Any]) -> None:
    # A column of plain scalars takes a faster path; any column must give the same text.
    assert encode_values(values) == [encode_value(v) for v in values]
    plain = [v for v in values if type(v) in (str, int, bool, type(None))]
    assert encode_values(plain) == [encode_value(v) for v in plain]
    assert [decode_value(t) for t in encode_values(plain)] == plain


def test_non_literal_output_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a Python literal"):
        _store(tmp_path).write_outputs({"out": [("k", object())]})


def test_metrics_round_trip(tmp_path: Path) -> None:
    run = _store(tmp_path)
    rows = [{"t": 0.5, "throughput": 100.0}, {"t": 1.0, "throughput": 90.0}]
    run.write_metrics(rows)
    assert run.read_metrics() == rows


@pytest.mark.parametrize("status", ["complete", "failed"])
def test_complete_and_failed_are_finished(tmp_path: Path, status: str) -> None:
    run = _store(tmp_path)
    run.mark(status)
    assert run.status() == status
    assert run.finished


def test_passed_needs_complete_status_and_passing_verdict(tmp_path: Path) -> None:
    run = _store(tmp_path)
    run.write_verdict({"passed": True})
    assert not run.passed()  # still running: an interrupted run never passes
    run.mark("incomplete", reason="interrupted")
    assert not run.passed()
    run.mark("complete")
    assert run.passed()
    run.write_verdict({"passed": False})
    assert not run.passed()


def test_missing_or_garbled_status_reads_incomplete(tmp_path: Path) -> None:
    run = _store(tmp_path)
    (run.path / "status.json").write_text("{not json")
    assert run.status() == "incomplete"
    (run.path / "status.json").unlink()
    assert run.status() == "incomplete"
    assert not run.finished


def _killed(run: RunStore) -> None:
    """Record ``run`` as running in a process that is gone (this pid, another start)."""
    doc = json.loads((run.path / "status.json").read_text())
    doc["owner"]["create_time"] -= 3600.0  # the pid now belongs to someone else
    atomic_write_json(run.path / "status.json", doc)


def test_the_next_run_marks_a_killed_one_abandoned(tmp_path: Path) -> None:
    killed, alive = _store(tmp_path), _store(tmp_path)
    _killed(killed)
    assert mark_abandoned(tmp_path) == [killed.run_id]  # ftctl cluster status does this
    _killed(alive)  # killed too, found by the next run instead
    _store(tmp_path)
    for run in (killed, alive):
        doc = json.loads((run.path / "status.json").read_text())
        assert doc["status"] == "abandoned" and doc["reason"].startswith("killed"), doc
        assert not run.finished and not run.passed()
        assert [e["kind"] for e in run.read_events()].count("killed") == 1
    assert mark_abandoned(tmp_path) == []  # a live run (this process) is left running


def test_unknown_status_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        _store(tmp_path).mark("passed")


def test_open_by_id_prefix_and_path(tmp_path: Path) -> None:
    run = _store(tmp_path)
    run.write_config({"x": 1})
    for ref in (run.run_id, run.path, str(run.path)):
        again = RunStore.open(ref, root=tmp_path)
        assert again.path == run.path and again.run_id == run.run_id
        assert again.read_config() == {"x": 1}
    assert RunStore.open(run.run_id[:-2], root=tmp_path).path == run.path
    with pytest.raises(ConfigError):
        RunStore.open("no-such-run", root=tmp_path)


def test_verdict_absent_reads_none(tmp_path: Path) -> None:
    assert _store(tmp_path).read_verdict() is None


def test_list_runs_newest_first_ignoring_other_dirs(tmp_path: Path) -> None:
    first = _store(tmp_path)
    second = RunStore.create(tmp_path, topology="sharder", protocol="none", kind="sim")
    (tmp_path / ".golden").mkdir()
    meta = json.loads((first.path / "run.json").read_text())
    meta["created_epoch"] -= 10  # make the order independent of clock resolution
    (first.path / "run.json").write_text(json.dumps(meta))
    assert [r.run_id for r in list_runs(tmp_path)] == [second.run_id, first.run_id]
    assert list_runs(tmp_path / "absent") == []
