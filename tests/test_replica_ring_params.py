"""replica-ring: params, topology scope, the ring detector, and ``ftctl figure 002-table1``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from protocols.contract.spec import Guarantee
from protocols.contract.view import GraphView
from protocols.replica_ring.params import Flaw, Policy, ReplicaRingParams, Variant
from protocols.replica_ring.records import Record, RecordState, RecordTable
from protocols.replica_ring.ring import PingDetector, RingMember, choose_taker
from protocols.replica_ring.scope import check_topology

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


def test_defaults_and_policy_per_semantics():
    p = ReplicaRingParams()
    assert p.semantics is Guarantee.EXACTLY_ONCE and p.variant is Variant.FIXED
    pol = p.policy()
    assert pol.dedup and pol.records and pol.ack_after_sync and pol.idempotent_sink
    amo = Policy.of(ReplicaRingParams(semantics="at-most-once"))
    assert not amo.records and not amo.dedup and amo.amo
    alo = Policy.of(ReplicaRingParams(semantics="at-least-once"))
    assert alo.records and not alo.dedup and not alo.idempotent_sink
    faithful = Policy.of(ReplicaRingParams(variant="faithful"))
    assert not (faithful.ack_after_sync or faithful.table_transfer or faithful.ring_walk
                or faithful.fence or faithful.purge_on_delete or faithful.idempotent_sink)


def test_without_names_single_fixes():
    p = ReplicaRingParams(without="F1, F6")
    assert p.without == {Flaw.ACK_BEFORE_SYNC, Flaw.NO_RING_WALK}
    pol = p.policy()
    assert not pol.ack_after_sync and not pol.ring_walk and pol.fence and pol.table_transfer


@pytest.mark.parametrize(("given", "field"), [
    ({"ping_every": 0.2, "ping_timeout": 0.1}, "ping_timeout"),
    ({"semantics": "twice"}, "semantics"),
    ({"semantics": "none"}, "semantics"),  # no delivery promise: not a ring semantics
    ({"variant": "faithful", "without": "F1"}, "without"),
    ({"without": "F2"}, "without"),
    ({"replicas": 1}, "replicas"),
    ({"state": "mirror"}, "state"),
    ({"pings": 3}, "pings"),
])
def test_bad_params_name_the_field(given, field):
    with pytest.raises(ValidationError) as e:
        ReplicaRingParams.model_validate(given)
    assert field in str(e.value)


@pytest.mark.parametrize(("stem", "refusal"), [
    ("sharder", "operator 'sharder' has parallelism 1; a ring needs at least 2 replicas"),
    ("wordcount", "operator 'count' keeps state (count)"),
    ("diamond", "operator 'merge' keeps state (sum)"),
    ("windowed", "(window) is not supported"),
    ("nexmark/q4", "operator 'wb' (nexmark.winning_bids) is not supported"),
    ("nexmark/q8", "operator 'same-window' (window_join) is not supported"),
    ("joins/join-then-count", "operator 'match' (join) is not supported"),
])
def test_bundled_stateful_topologies_are_refused_in_one_line(stem, refusal):
    why = check_topology(load_topology(TOPOLOGIES / f"{stem}.yaml"), ReplicaRingParams())
    assert why is not None and refusal in why and "\n" not in why


@pytest.mark.parametrize("path", sorted(TOPOLOGIES.rglob("*.yaml")), ids=lambda p: p.stem)
def test_a_topology_is_accepted_only_without_state(path):
    # Tuple records carry no operator state: a taker of a stateful slot would go on from
    # nothing. Nexmark's q4, q6 and q8 (avg, winning bids, a windowed join) were accepted
    # by a list of names that predated them, and lost their output on every crash.
    graph = ExecutionGraph(load_topology(path))
    stateful = sorted({graph.instances[i].op for i in graph.order
                       if not graph.instances[i].is_source
                       and getattr(graph.make_operator(i), "stateful", False)})
    why = check_topology(graph.topology, ReplicaRingParams())
    if stateful:  # refused for its state, or for an operator before it (sharder)
        assert why is not None, stateful
    else:
        assert why is None or "parallelism" in why, why


def test_the_bundled_replica_chain_is_accepted():
    topo = load_topology(TOPOLOGIES / "replica-chain.yaml")
    assert check_topology(topo, ReplicaRingParams()) is None
    assert check_topology(topo, ReplicaRingParams(replicas=3)) is None


def test_the_contract_check_hook_reports_the_scope():
    ok = GraphView(ExecutionGraph(load_topology(TOPOLOGIES / "replica-chain.yaml")))
    assert ReplicaRingParams().check(ok) == []
    bad = GraphView(ExecutionGraph(load_topology(TOPOLOGIES / "wordcount.yaml")))
    assert ReplicaRingParams().check(bad) == [
        "replica-ring: operator 'count' keeps state (count), which tuple records cannot "
        "recover"]


def test_stateless_chain_is_accepted_and_parallelism_checked(tmp_path):
    path = tmp_path / "chain.yaml"
    path.write_text(
        "name: chain\ninput: {records: 10, batch: 1}\noperators:\n"
        "  - {name: src, type: source.text}\n"
        "  - {name: a, type: map, function: identity, parallelism: 3}\n"
        "  - {name: b, type: filter, function: even_key, parallelism: 2}\n"
        "  - {name: out, type: sink}\n"
        "edges:\n  - {from: src, to: a, partition: round-robin}\n"
        "  - {from: a, to: b, partition: hash}\n  - {from: b, to: out}\n")
    topo = load_topology(path)
    assert check_topology(topo, ReplicaRingParams()) is None
    assert "'b' has parallelism 2, not replicas=3" in str(
        check_topology(topo, ReplicaRingParams(replicas=3)))
    ops = topo.operators
    single = topo.with_operators([ops[0], ops[1].model_copy(update={"parallelism": 1}), *ops[2:]])
    assert "'a' has parallelism 1; a ring needs at least 2" in str(
        check_topology(single, ReplicaRingParams()))


def test_ping_detector_suspects_after_the_timeout_and_not_before():
    d = PingDetector(every=0.05, timeout=0.15)
    assert d.tick(0.0, [1]) == ([1], [])
    d.pong(1)
    assert d.tick(0.05, [1]) == ([1], [])  # answered: ping again
    assert d.tick(0.10, [1]) == ([], [])  # outstanding since 0.05
    assert d.tick(0.15, [1]) == ([], [])
    assert d.tick(0.20, [1]) == ([], [1])  # 0.05 + 0.15: suspected once
    assert d.tick(0.25, [1]) == ([], [])
    d.clear(1)  # the slot is served again by its taker
    assert d.tick(0.30, [1]) == ([1], [])


def test_takeover_and_reinstatement_move_ping_duty():
    b2 = RingMember(2, 3)
    assert b2.ping_targets() == [0]
    b2.adopt(1)
    assert b2.represents == [2, 1] and b2.ping_targets() == [0]
    b2.release(1)
    assert b2.represents == [2]
    b2.release(2)  # a unit never releases its own slot
    assert b2.represents == [2]


def test_taker_choice_faithful_stalls_fixed_walks():
    alive = {0: True, 1: False, 2: False}
    assert choose_taker(1, 3, alive.__getitem__, walk=False) is None
    assert choose_taker(1, 3, alive.__getitem__, walk=True) == 0
    assert choose_taker(1, 3, {0: True, 1: False, 2: True}.__getitem__, walk=False) == 2
    assert choose_taker(0, 2, {0: False, 1: False}.__getitem__, walk=True) is None


def test_record_table_keeps_purged_records_and_keys_by_uid():
    t = RecordTable()
    t.insert(Record(7, 1, 1))
    t.insert(Record(7, 2, 2), replace=False)  # a colleague's copy never overwrites
    assert t.get(7, 2) is not None and t.get(7, 2).emitter == 1  # type: ignore[union-attr]
    t.purge(7, 1)
    assert t.knows(7, "src") and len(t) == 1 and t.pending_of(1) == []
    assert next(iter(t)).state is RecordState.PURGED


def test_figure_prints_table1_beside_the_paper(tmp_path):
    res = CliRunner().invoke(app, ["figure", "002-table1", "--out", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    rows = {row[0]: row for row in data["rows"]}
    assert sorted(rows) == [1, 2, 3, 4]
    col = {name: i for i, name in enumerate(data["header"])}
    for r, paper in ((2, 400), (4, 2400)):
        assert (rows[r][col["M(R)"]] == rows[r][col["sim records"]] == rows[r][col["paper"]]
                == paper)
    assert rows[3][col["M(R)"]] == 1200 and rows[1][col["M(R)"]] == 0
    assert [rows[r][col["msg/tup"]] for r in (1, 2, 3, 4)] == [6, 10, 14, 18]
    assert [rows[r][col["sim msg/tup"]] for r in (1, 2, 3, 4)] == [6, 10, 14, 18]
    assert all(rows[r][col["all"]] == rows[r][col["sim all"]] for r in rows)
    assert all(rows[r][col["sim AMO rec"]] == 0 for r in rows)


def test_cli_refuses_what_replica_ring_cannot_run_correctly():
    # a stateful operator: one line naming it, exit 2, before any run
    res = CliRunner().invoke(app, ["sim", "topologies/wordcount.yaml", "-p", "replica-ring"])
    assert res.exit_code == 2 and "operator 'count' keeps state" in res.output
    # the Spark commands refuse it the same way, before any cluster starts
    for cmd in (["run"], ["chaos", "--kill", "3"]):
        res = CliRunner().invoke(app, [cmd[0], "topologies/wordcount.yaml", "-p",
                                       "replica-ring", *cmd[1:]])
        assert res.exit_code == 2 and "operator 'count' keeps state" in res.output, res.output


def test_timing_left_unset_takes_the_cluster_values_on_a_real_cluster():
    from protocols.contract.params import RunShape
    from protocols.registry import PROTOCOLS
    from protocols.replica_ring.params import CLUSTER_TIMING

    spec = PROTOCOLS["replica-ring"]
    on_cluster = spec.resolve({})  # no nominal duration: a real cluster
    assert {k: getattr(on_cluster, k) for k in CLUSTER_TIMING} == CLUSTER_TIMING
    in_sim = spec.resolve({}, RunShape(nominal_duration=3.0))
    assert (in_sim.ping_every, in_sim.ping_timeout, in_sim.retry_every) == (0.05, 0.15, 0.05)
    # A user who sets any timing param chooses all of it; a task re-resolving the
    # driver's params (all fields set) keeps them.
    chosen = spec.resolve({"ping_every": "0.1", "ping_timeout": "1"})
    assert (chosen.ping_every, chosen.ping_timeout, chosen.retry_every) == (0.1, 1.0, 0.05)
    assert spec.resolve(on_cluster.model_dump(mode="json")) == on_cluster
