"""A simulator makes each source batch, and the built-in stateless work on it, once per
process (``ftctl.runtime.memo``). Runs must be what they were without it: same trace,
same output, same verdict, a planted bug caught the same way, and nothing kept across
topologies or inputs."""

from __future__ import annotations

from typing import Any

import pytest

from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.memo import BatchMemo
from ftctl.runtime.messages import Batch
from ftctl.runtime.operators import build_operator
from ftctl.sim.golden import golden_output
from ftctl.sim.runner import Simulator
from protocols.registry import get_protocol
from tests.conftest import load

pytestmark = pytest.mark.sim

SEEDS = range(1, 5)


def _q5(records: int = 12_000) -> Topology:
    return load("nexmark/q5").with_input(records=records)


def _q3() -> Topology:  # one source batch feeds two filters: each keeps its own output
    return load("nexmark/q3").with_input(records=12_000)


def _runs(sim: Simulator) -> list[tuple[Any, ...]]:
    out = []
    for seed in SEEDS:
        got = sim.run_one(seed, trace=True)
        out.append((got.result.trace_hash, got.result.outputs, got.verdict.passed,
                    sorted(got.verdict.totals().items())))
    return out


@pytest.mark.parametrize("topology, protocol", [
    (_q5, "causal"), (_q5, "checkpoint"), (_q5, "none"), (_q3, "causal"), (_q3, "lineage"),
    (_q5, "falkirk"), (_q3, "falkirk")])
def test_memo_changes_no_run(topology: Any, protocol: str) -> None:
    spec = get_protocol(protocol)
    kept = Simulator(topology(), spec, {})
    plain = Simulator(topology(), spec, {}, memo=False)
    assert plain.graph.memo is None
    assert kept.golden == plain.golden
    assert _runs(kept) == _runs(plain)
    memo = kept.graph.memo
    assert memo is not None and memo.hits > 0 and memo.kept > 0  # it was used


def test_a_planted_bug_is_caught_the_same_with_the_memo() -> None:
    spec = get_protocol("checkpoint/rollback-failed-only")
    kept = _runs(Simulator(_q5(), spec, {}))
    assert kept == _runs(Simulator(_q5(), spec, {}, memo=False))
    assert any(not passed for _, _, passed, _ in kept)  # the mutant does lose records


def test_no_memo_is_shared_between_inputs() -> None:
    spec = get_protocol("checkpoint")
    small, large = Simulator(_q5(8_000), spec, {}), Simulator(_q5(12_000), spec, {})
    assert small.graph.memo is not large.graph.memo
    for sim, records in ((small, 8_000), (large, 12_000)):
        assert sim.golden == golden_output(ExecutionGraph(_q5(records)))


def test_a_bounded_memo_keeps_what_fits_and_changes_nothing() -> None:
    spec = get_protocol("causal")
    sim = Simulator(_q5(), spec, {})
    sim.graph.memo = BatchMemo(max_kept=3_000)  # a few batches; the rest made each time
    plain = Simulator(_q5(), spec, {}, memo=False)
    assert _runs(sim) == _runs(plain)
    assert 0 < sim.graph.memo.kept <= 3_000


def test_only_batches_the_memo_holds_are_looked_up() -> None:
    memo = BatchMemo()
    calls: list[int] = []

    def make(records: list[Any]) -> list[Any]:
        calls.append(len(records))
        return [r for r in records if r[0] % 2]

    loose = [(1, "a", 0), (2, "b", 0)]
    assert memo.derive("odd", loose, make) == [(1, "a", 0)]
    assert memo.derive("odd", loose, make) == [(1, "a", 0)]
    assert calls == [2, 2] and memo.kept == 0  # not the memo's: made each time, not kept
    held = memo.source("s[0]", 0, 2, lambda lo, hi: list(loose))
    first = memo.derive("odd", held, make)
    assert memo.derive("odd", held, make) is first and calls == [2, 2, 2]
    assert memo.source("s[0]", 0, 2, lambda lo, hi: []) is held


def test_every_run_s_sink_emits_the_same_pairs_for_a_batch_the_memo_holds() -> None:
    """A sink's (key, value) pairs of a kept batch are made once per process: every run
    emits, and its sink counts, those very pairs (a million new ones a Nexmark q0 run
    otherwise); of a batch the memo does not hold they are made each time."""
    from ftctl.runtime.instance import InstanceCore
    from protocols.contract.actions import Emit

    graph = ExecutionGraph(load("nexmark/q0").with_input(records=2_000))
    graph.memo = BatchMemo()
    sink = next(i for i, spec in graph.instances.items() if spec.is_sink)
    ch = graph.instances[sink].inputs[0]
    held = graph.memo.source("s[0]", 0, 2, lambda lo, hi: [(1, "a", 5), (2, "b", 6)])
    loose = [(1, "a", 5), (2, "b", 6)]
    emitted = []
    for _ in range(2):  # two runs' cores
        core = InstanceCore(graph, sink)
        for records in (held, loose):
            core.deliver(ch, Batch(records, 1, None, None))
        emitted.append([a.records for a in core._produced if isinstance(a, Emit)])
    (first_held, first_loose), (second_held, second_loose) = emitted
    assert first_held == first_loose == [(1, "a"), (2, "b")]
    assert second_held is first_held and second_loose is not first_loose


def test_user_functions_are_not_memoized() -> None:
    assert build_operator("filter", {}, "nexmark.is_bid", "nexmark.event").pure
    assert build_operator("key_by", {"field": 1}, None, "nexmark.bid").pure
    assert not build_operator("filter", {}, "tests.test_batch_memo:_odd", "any").pure
    assert not build_operator("window", {"size": 4, "slide": 2}, None, "any").pure


def _odd(record: Any) -> bool:
    return bool(record[0] % 2)


def test_the_memos_lists_go_into_snapshots_by_reference(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A payload log of memo batches is stored as references to the memo's lists, read back
    as those very lists in this process, and refused (never misread) anywhere else."""
    from ftctl import codec
    from ftctl.runtime import shared_records
    from protocols.shared.payload_log import PayloadLog

    memo = BatchMemo(max_kept=1_500)
    made = [(i, ("B", i, "Google"), i) for i in range(1_000)]
    held = memo.source("s[0]", 0, 1_000, lambda lo, hi: list(made))
    loose = memo.source("s[0]", 1_000, 2_000, lambda lo, hi: list(made))  # no room left
    assert type(held) is codec.Shared and type(loose) is list and held == loose == made

    def packed(records: list[Any]) -> bytes:
        log = PayloadLog()
        log.append(1, Batch(records, 1, None, None))
        return codec.encode_blob(log.pack())

    by_ref, by_value = packed(held), packed(loose)
    assert len(by_ref) * 100 < len(by_value)
    (records, *_), = PayloadLog.unpack(codec.decode(by_ref))
    assert records is held
    (records, *_), = PayloadLog.unpack(codec.decode(by_value))
    assert records == made and type(records) is list
    assert codec.decode(codec.encode((held, 2)))[0] is held  # frames: lineage's logs
    monkeypatch.setattr(shared_records, "PROCESS", "another process")
    with pytest.raises(ValueError, match="another process"):
        PayloadLog.unpack(codec.decode(by_ref))


def test_a_reference_to_a_list_nobody_holds_is_refused() -> None:
    import gc

    from ftctl import codec
    from ftctl.runtime.shared_records import shared

    gone = shared([(1, "a")])
    blob = codec.encode_blob([gone])
    del gone
    gc.collect()
    with pytest.raises(ValueError, match="does not hold"):
        codec.decode(blob)


def test_a_ring_replica_works_on_the_batches_the_memo_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """replica-ring carries a batch's records to the replica that processes them: the
    list must be the one the memo made, or every run redoes q1's currency map."""
    from ftctl.sim.host import MAX_STEP, SimHost
    spec = get_protocol("replica-ring")
    sim = Simulator(load("nexmark/q1").with_input(records=6_000), spec, {})
    memo = sim.graph.memo
    assert memo is not None
    looked_up: list[bool] = []
    derive = memo.derive

    def counted(who: str, records: list[Any], make: Any) -> Any:
        looked_up.append(memo._held.get(id(records)) is records)
        return derive(who, records, make)

    monkeypatch.setattr(memo, "derive", counted)
    SimHost(sim.graph, spec, sim.params, 0, max_step=MAX_STEP).run()
    assert looked_up and all(looked_up)


def test_falkirk_s_sources_take_their_batches_from_the_memo(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """falkirk makes a source's batch j itself (to regenerate it where it first went):
    through the core, so that a schedule finds every batch the golden run made, and the
    stateless work on it with it."""
    sim = Simulator(_q5(), get_protocol("falkirk"), {})
    memo = sim.graph.memo
    assert memo is not None
    had: list[bool] = []
    source = memo.source

    def counted(iid: str, lo: int, hi: int, make: Any) -> Any:
        had.append((iid, lo, hi) in memo._sources)
        return source(iid, lo, hi, make)

    monkeypatch.setattr(memo, "source", counted)
    hits = memo.hits
    for seed in SEEDS:
        sim.run_one(seed)
    assert had and all(had)
    assert memo.hits - hits > len(had)  # derived work found too, not only the batches
