"""falkirk falls back past a bad stored object on the simulation host: the newest
checkpoint of an instance is corrupted, then the instance is killed; its restart cannot
read it, the coordinator solves the fixed point again without it (here, with GC having
discarded everything older, down to the initial state where the logs allow) and the run
finishes exactly-once. Where no consistent choice is left, it stops, naming the object."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import faults as sf
from ftctl.sim import store_faults as stf
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost, SimResult
from ftctl.sim.runner import sim_params
from ftctl.verify.checker import Verdict, verify
from protocols.contract.spec import Guarantee
from protocols.falkirk.fallback import ref_epoch
from protocols.registry import get_protocol
from tests.conftest import load

pytestmark = pytest.mark.sim


def _run(topology: str, victim: str, at: float, params: Mapping[str, object] | None = None,
         protocol: str = "falkirk") -> tuple[SimResult, Verdict]:
    graph = ExecutionGraph(load(topology))
    spec = get_protocol(protocol)
    host = SimHost(graph, spec, sim_params(graph, spec, dict(params or {})), 3)
    # no snapshot named: the newest object of the victim, the one its restart restores
    host.at(at, lambda: host.inject(stf.StoreDamage(0, "corrupt", victim)))
    host.at(at + 0.0001, lambda: host.inject(sf.Strike(0, 1, (victim,))))
    result = host.run()
    verdict = verify(load(topology).sink_modes(), golden_output(graph), result.outputs,
                     Guarantee.EXACTLY_ONCE, complete=result.complete, stopped=result.stopped)
    return result, verdict


def _notes(result: SimResult, name: str) -> list[HistoryEvent]:
    return [e for e in result.events if e.note == name]


def test_a_corrupt_newest_checkpoint_falls_back_to_the_initial_state() -> None:
    result, verdict = _run("windowed", "win[0]", 0.011)
    (hit,) = [e for e in result.events if e.kind == "fault-injected"
              and e.data["type"] == "corrupt"]
    (failed,) = [e for e in result.events if e.kind == "store-read-failed"]
    bad = hit.data["snapshot"]
    assert failed.data["snapshot"] == bad and ref_epoch(bad) == ("state", 3)
    (fell,) = _notes(result, "falkirk-fallback")
    data = fell.data["data"]
    assert (data["bad"], data["instance"]) == (bad, "win[0]")
    # GC kept only the checkpoint at the low-watermark (3), the bad one: win[0] restarts
    # empty, and what it depends on or feeds (ones, the other window, the sink's
    # channels) with it; the source (-2: TOP) regenerates its input
    assert data["frontiers"] == {"tags[0]": -2, "ones[0]": -1, "ones[1]": -1, "win[0]": -1,
                                 "win[1]": -1, "out[0]@6": -1, "out[0]@7": -1}
    assert result.stopped is None and result.complete and verdict.passed


@pytest.mark.parametrize(("topology", "victim", "at", "params"), [
    ("wordcount", "count[0]", 0.02, {}),
    ("wordcount", "count[0]", 0.02, {"rollback": "in-place", "epoch_records": 50}),
    ("diamond", "merge[1]", 0.02, {"default_stateful": "eager", "stagger": "on"}),
    ("windowed", "win[0]", 0.011, {"rollback": "in-place"}),
])
def test_the_fallback_stays_exactly_once_away_from_defaults(
        topology: str, victim: str, at: float, params: dict[str, object]) -> None:
    result, verdict = _run(topology, victim, at, params)
    (fell,) = _notes(result, "falkirk-fallback")
    assert fell.data["data"]["instance"] == victim
    assert result.stopped is None and result.complete and verdict.passed


def test_a_bad_log_segment_falls_back_to_an_older_epoch_of_the_logger() -> None:
    # ones logs its output: segment 12 (epoch 4) of ones[0] is bad and GC kept only its
    # entry at 4, which needs it. Stateless, ones[0] restores epoch 3 without any object
    # (its receivers keep epoch 3, nothing of its log below is needed) and re-executes
    # 4; the windows that consumed its epochs 4-5 roll back to their checkpoint at 3 and
    # the sink's channels with them; ones[1] keeps running
    result, verdict = _run("windowed", "ones[0]", 0.011, {"default_stateless": "log"})
    assert ref_epoch(12) == ("segment", 4)
    (fell,) = _notes(result, "falkirk-fallback")
    assert (fell.data["data"]["bad"], fell.data["data"]["instance"]) == (12, "ones[0]")
    assert fell.data["data"]["frontiers"] == {
        "tags[0]": -2, "ones[0]": 3, "ones[1]": -2, "win[0]": 3, "win[1]": 3,
        "out[0]@6": 3, "out[0]@7": 3}
    assert result.stopped is None and result.complete and verdict.passed


def test_no_consistent_choice_left_stops_the_run_naming_the_object() -> None:
    # win[0]'s only checkpoint (3, at the low-watermark) is bad; its initial state would
    # need epochs 0-3 of ones' logs again, trimmed at the watermark: the run stops
    result, verdict = _run("windowed", "win[0]", 0.011, {"default_stateless": "log"})
    assert result.stopped == "corrupt snapshot 9 of win[0]"
    assert not _notes(result, "falkirk-fallback")
    assert verdict.stopped_safely


def test_falling_back_alone_leaves_what_depends_on_the_bad_checkpoint_wrong() -> None:
    # the shipped mutant: count[0] restarts empty while split keeps the frontier solved
    # with the bad checkpoint, so count[0] never sees the epochs it lost again
    result, verdict = _run("wordcount", "count[0]", 0.02, protocol="falkirk/fallback-alone")
    (fell,) = _notes(result, "falkirk-fallback")
    assert fell.data["data"]["frontiers"]["split[0]"] == 7
    assert fell.data["data"]["frontiers"]["count[0]"] == -1
    assert not verdict.passed and not verdict.stopped_safely
    # the correct rule rolls split back with it
    result, verdict = _run("wordcount", "count[0]", 0.02)
    (fell,) = _notes(result, "falkirk-fallback")
    assert fell.data["data"]["frontiers"]["split[0]"] == -1 and verdict.passed
