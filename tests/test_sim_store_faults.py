"""Store faults on the simulation host (ftctl/sim/store_faults.py): a damaged or deleted
object stops a recovery that needs it (the run stops safely, naming it, under the default
rule), an outage kills the writers it catches, lose-unsynced takes writes not yet durable;
and a stopped run whose output is not a start of golden's is a violation."""

from __future__ import annotations

import json
import random
import re

import pytest
from typer.testing import CliRunner

from chaos.plan import check_delivery
from ftctl.cli import app
from ftctl.config.load import load_topology
from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import faults as sf
from ftctl.sim import store_faults as stf
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost, SimResult
from ftctl.sim.runner import Simulator, sim_params
from ftctl.store import NeverStored
from ftctl.verify.checker import verify
from protocols.contract.spec import Guarantee
from protocols.mutants import mutants_of
from protocols.registry import PROTOCOLS, get_protocol
from tests.conftest import TOPOLOGIES, load

pytestmark = pytest.mark.sim

TOPOLOGY = "windowed"


def _run(protocol: str, faults: list[tuple[float, sf.SimFault]]) -> SimResult:
    graph = ExecutionGraph(load(TOPOLOGY))
    host = SimHost(graph, PROTOCOLS[protocol], sim_params(graph, PROTOCOLS[protocol], {}), 3)
    for t, f in faults:
        host.at(t, lambda f=f: host.inject(f))  # type: ignore[misc]
    return host.run()


def _verdict(result: SimResult) -> object:
    graph = ExecutionGraph(load(TOPOLOGY))
    return verify(load(TOPOLOGY).sink_modes(), golden_output(graph), result.outputs,
                  Guarantee.EXACTLY_ONCE, complete=result.complete, stopped=result.stopped)


def _kinds(result: SimResult, kind: str) -> list[HistoryEvent]:
    return [e for e in result.events if e.kind == kind]


def test_the_store_kinds_parse_and_leave_the_mixed_set_as_it_was() -> None:
    assert sf.parse_kinds("corrupt,truncate,delete,store-unavailable,lose-unsynced") \
        == sf.STORE_KINDS
    assert not set(sf.STORE_KINDS) & set(sf.FAULT_KINDS)  # pinned kit schedules keep draws


@pytest.mark.parametrize("seed", range(5))
def test_store_strikes_come_on_top_of_the_draws_without_them(seed: int) -> None:
    def draw(kinds: tuple[sf.FaultKind, ...]) -> tuple[list[sf.SimFault], int]:
        rng = random.Random(seed)
        strikes = sf.FailureSchedule.random(rng, 500, 3, 3, kinds).strikes
        return strikes, rng.getrandbits(64)  # what a run then seeds its host with

    base, host = draw(sf.FAULT_KINDS)
    every, host_too = draw(sf.ALL_KINDS)
    store = [f for f in every if type(f) in (stf.StoreDamage, stf.StoreOutage, stf.LoseUnsynced)]
    assert [f for f in every if f not in store] == base and host_too == host and store


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "delete"])
def test_a_bad_object_a_restart_needs_stops_the_run_safely_naming_it(damage: str) -> None:
    # progressive has no rule of its own for a bad object: the default stops the run
    result = _run("progressive", [(0.012, stf.StoreDamage(0, damage, "win[0]")),  # type: ignore[arg-type]
                                  (0.0121, sf.Strike(0, 1, ("win[0]",)))])
    (hit,) = _kinds(result, "fault-injected")[:1]
    snapshot = hit.data["snapshot"]
    problem = "missing" if damage == "delete" else "corrupt"
    (failed,) = _kinds(result, "store-read-failed")
    assert (failed.instance, failed.data["snapshot"], failed.data["problem"]) == (
        "win[0]", snapshot, problem)
    assert result.stopped == f"{problem} snapshot {snapshot} of win[0]"
    assert _kinds(result, "run-stopped")[0].data["reason"] == result.stopped
    verdict = _verdict(result)
    assert verdict.stopped_safely and not verdict.passed  # type: ignore[attr-defined]
    assert verdict.outcome == f"stopped safely: {result.stopped}"  # type: ignore[attr-defined]


def test_a_stopped_run_with_wrong_output_is_a_violation() -> None:
    graph = ExecutionGraph(load(TOPOLOGY))
    golden = golden_output(graph)
    (sink,) = golden
    modes = load(TOPOLOGY).sink_modes()
    prefix = {sink: golden[sink][:5]}
    assert verify(modes, golden, prefix, Guarantee.EXACTLY_ONCE, complete=False,
                  stopped="corrupt snapshot 3 of win[0]").stopped_safely
    key = golden[sink][3][0]
    skipped = {sink: [r for r in golden[sink] if r[0] == key][1:2]}  # its first is missing
    bad = verify(modes, golden, skipped, Guarantee.EXACTLY_ONCE, complete=False,
                 stopped="corrupt snapshot 3 of win[0]")
    assert not bad.stopped_safely and bad.outcome == "violated"
    assert bad.totals() == {"not-a-prefix": 1}
    # what a run stopped early may show depends on the guarantee: none promises nothing
    assert verify(modes, golden, skipped, Guarantee.NONE, complete=False,
                  stopped="corrupt snapshot 3 of win[0]").stopped_safely
    assert verify(modes, golden, skipped, Guarantee.AT_MOST_ONCE, complete=False,
                  stopped="corrupt snapshot 3 of win[0]").stopped_safely


def test_a_stopped_final_per_key_sink_is_judged_by_its_keys_not_its_early_values() -> None:
    # A final-per-key sink promises each key's last value; the ones before depend on the
    # interleaving, so a run stopped early may show values golden never did.
    golden = {"out": [("a", 1), ("b", 5), ("a", 2), ("a", 3)]}
    modes = {"out": "final-per-key"}
    for guarantee in (Guarantee.EXACTLY_ONCE, Guarantee.AT_LEAST_ONCE,
                      Guarantee.AT_MOST_ONCE):
        early = verify(modes, golden, {"out": [("a", 7), ("a", 8)]}, guarantee,
                       complete=False, stopped="corrupt snapshot 1 of events[2]")
        assert early.stopped_safely, guarantee
        stray = verify(modes, golden, {"out": [("a", 7), ("z", 1)]}, guarantee,
                       complete=False, stopped="corrupt snapshot 1 of events[2]")
        assert not stray.stopped_safely and stray.totals() == {"not-a-prefix": 1}


def test_nexmark_q4_stopped_by_a_corrupt_snapshot_stops_safely() -> None:
    # `ftctl sim topologies/nexmark/q4.yaml -p causal --records 50000 --faults <every
    # kind> --seed 8`: a corrupt source snapshot stops the run after the means per
    # category had shown values of this interleaving only; it was judged violated.
    sim = Simulator(load_topology(TOPOLOGIES / "nexmark/q4.yaml").with_input(records=50_000),
                    PROTOCOLS["causal"], {}, kinds=tuple(sf.KNOWN_KINDS))
    out = sim.run_one(8)
    assert out.result.stopped and out.result.stopped.startswith("corrupt snapshot")
    assert out.verdict.stopped_safely, out.verdict.totals()


def test_an_outage_kills_the_writers_it_catches_and_output_stays_exactly_once() -> None:
    result = _run("checkpoint", [(0.010, stf.StoreOutage(0, 0.004))])
    failed = _kinds(result, "store-write-failed")
    assert failed and all(e.t < 0.0141 for e in failed)
    assert result.complete and _verdict(result).passed  # type: ignore[attr-defined]


def test_lose_unsynced_takes_only_writes_not_yet_reported() -> None:
    # checkpoint reports each snapshot right after persisting it: nothing is left unsynced
    # by the time its report is out, so a lose-unsynced crash loses nothing
    result = _run("checkpoint", [(0.012, stf.LoseUnsynced(0, "win[0]"))])
    (crash,) = _kinds(result, "fault-injected")
    assert crash.data["type"] == "lose-unsynced" and crash.data["lost"] == []
    assert _verdict(result).passed  # type: ignore[attr-defined]


def test_spark_takes_lose_unsynced_as_the_other_store_kinds() -> None:
    # chaos/store_faults.py; on a cluster ftctl did not start the task's agent kills it
    for master in (None, "spark://elsewhere:7077"):
        check_delivery("s.yaml", "lose-unsynced", "random", None, master)
        check_delivery("s.yaml", "corrupt", "random", None, master)
    check_delivery("s.yaml", "lose-unsynced", "random", None, None, sim=True)


def _checkpoint(alignment: str, target: str, keep: int = 2) -> SimResult:
    graph = ExecutionGraph(load(TOPOLOGY))
    spec = PROTOCOLS["checkpoint"]
    host = SimHost(graph, spec, sim_params(graph, spec, {"alignment": alignment,
                                                          "keep": keep}), 3)
    host.at(0.012, lambda: host.inject(stf.StoreDamage(0, "corrupt", target)))
    host.at(0.0121, lambda: host.inject(sf.Strike(0, 1, ("win[0]",))))
    return host.run()


@pytest.mark.parametrize("keep", [1, 2])
def test_checkpoint_falls_back_to_an_older_snapshot_and_stays_exactly_once(keep: int) -> None:
    # keep=1: no older snapshot is kept, so the fallback is to the initial state
    result = _checkpoint("aligned", "win[0]", keep)
    (bad,) = _kinds(result, "store-read-failed")
    (note,) = [e for e in result.events if e.note == "fallback"]
    k = bad.data["snapshot"]
    assert note.data["data"]["replay_to"] == k
    back = note.data["data"]["snapshot"]
    if keep > 1:
        assert 0 < back < k
    else:
        assert back == 0
    # the replay cut k where it was cut: its commit makes nothing visible a second time
    recommit = [e for e in _kinds(result, "output-committed")
                if e.data["upto"] == k and e.t > bad.t]
    assert [e.data["records"] for e in recommit] == [0]
    assert result.stopped is None and _verdict(result).passed  # type: ignore[attr-defined]


@pytest.mark.parametrize(("alignment", "target"), [("unaligned", "win[0]"),
                                                   ("aligned", "tags[0]")])
def test_checkpoint_stops_where_no_replay_can_cut_again(alignment: str, target: str) -> None:
    # unaligned: a sink's cut depends on its inputs' interleaving; a source's own part
    # bad: where it cut is unknown
    result = _checkpoint(alignment, target)
    assert result.stopped is not None and result.stopped.endswith(f"of {target}")
    assert _verdict(result).stopped_safely  # type: ignore[attr-defined]


def test_sim_counts_stops_apart_and_names_their_objects() -> None:
    res = CliRunner().invoke(app, ["sim", str(TOPOLOGIES / "windowed.yaml"), "-p",
                                   "progressive", "-n", "12", "--faults", "kill-task,corrupt",
                                   "--json"])
    out = json.loads(res.output)
    assert res.exit_code == 0 and out["violating_schedules"] == 0
    assert out["stopped_safely"] == len(out["stops"]) > 0
    # a sink's delta refs are negative (protocols/progressive/messages.py)
    assert all(re.fullmatch(r"(corrupt|missing) snapshot -?\d+ of \w+\[\d+\]", s["reason"])
               for s in out["stops"])


def test_asking_for_an_object_never_stored_is_the_protocols_bug_not_a_store_fault() -> None:
    # falkirk/report-without-persist reports a checkpoint it never persisted: its restart
    # must break the run (the kit's catch), not stop it safely
    spec = get_protocol("falkirk/report-without-persist")
    assert any(m.name == "report-without-persist" for m in mutants_of("falkirk"))
    graph = ExecutionGraph(load("diamond"))
    host = SimHost(graph, spec, sim_params(graph, spec, {}), 3)
    victim = graph.order[-2]
    host.at(0.02, lambda: host.inject(sf.Strike(0, 1, (victim,))))
    with pytest.raises(NeverStored):
        host.run()


def test_a_checkpoint_run_keeps_only_its_newest_complete_snapshots() -> None:
    graph = ExecutionGraph(load(TOPOLOGY))
    spec = PROTOCOLS["checkpoint"]
    host = SimHost(graph, spec, sim_params(graph, spec, {"keep": 2}), 3)
    result = host.run()
    completed = [e.data["data"]["snapshot"] for e in result.events
                 if e.note == "snapshot-complete"]
    assert len(completed) > 3  # enough for some to be collected
    assert {tuple(host.store.snapshots_of(i)) for i in graph.order} == {tuple(completed[-2:])}
