"""Spec causal.md E4: a sink recognises a duplicate by its identity, whatever order the
sink's inputs interleave in after a restart, for ``causal`` (message identity, S1; record
identity across a fallback, S2) and ``lineage`` (record identity).

The sink is the multiset sink ``out[0]`` of topologies/replica-chain.yaml, fed by three
instances; two of them are P1 = tag[0] and P2 = tag[1]. Before the crash P1:1 (k, a) is
visible; after the restart the arrivals are P2:1 (k, b), P1:1 (k, a), P1:2 (k, c). By
identity the visible output becomes a, b, c; by per-key counts it would be a, a, c (the
planted ``sink-dedup-per-key`` mutants).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.kernel.writes import fewer_writes
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from protocols.causal.instance import RESUME, SINK_REF, CausalInstance, delta_counts, sink_refs
from protocols.causal.messages import CausalInit, Plan, Restored
from protocols.causal.mutants import SinkDedupPerKey as CausalPerKey
from protocols.causal.params import CausalParams
from protocols.causal.recovery import plan_recovery
from protocols.causal.seen_apart import SeenApart, unpack_apart
from protocols.contract.actions import Emit, InstanceAction, Persist, Report
from protocols.contract.events import BatchIn, ControlIn, MarkerIn, Started
from protocols.contract.logic import InstanceLogic
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.view import InstanceView
from protocols.lineage.instance import CHAIN_LENGTH, SINK_REFS, LineageInstance
from protocols.lineage.mutants import SinkDedupPerKey as LineagePerKey
from protocols.shared.logged import SLOT, LoggedInstance, Ready, identities, record_identity
from protocols.shared.packed_counts import delta_dict, unpack
from protocols.shared.treeclock import TreeClock
from tests.conftest import load

SINK = InstanceId("out[0]")
GRAPH = ExecutionGraph(load("replica-chain"))
P1, P2, P3 = "tag[0]", "tag[1]", "tag[2]"
CH = {GRAPH.channels[ch].src: ch for ch in GRAPH.instances[SINK].inputs}
A, B, C = ("k", ("a", "x"), 5), ("k", ("b", "x"), 6), ("k", ("c", "y"), 7)


def _make(cls: type[InstanceLogic[Any]], params: Any) -> InstanceLogic[Any]:
    return cls(InstanceView.of(GRAPH, SINK), {SINK: InstanceCore(GRAPH, SINK)}, params)


def _batch(parent: str, seq: int, *recs: tuple[Any, ...]) -> BatchIn:
    # The diff a parent piggybacks: its own time (== seq here) and one cause.
    meta = (parent, seq, (("evens[0]", seq, ()),))
    return BatchIn(SINK, CH[parent], Batch(list(recs), seq, None, meta))


def _emitted(acts: list[InstanceAction]) -> list[tuple[Any, Any]]:
    return [r for a in acts if isinstance(a, Emit) for r in a.records]


def _chain(slots: dict[int, Any]) -> dict[int, Any]:
    """What a replacement sink is given to read: its chain's refs, None where absent."""
    return {r: slots.get(r) for r in sink_refs(CausalParams(), len(CH))}


def _last_delta(slots: dict[int, Any]) -> Any:
    """The newest delta of the sink's chain: of the newest epoch and snapshot, the
    highest ``j``."""
    return max((b for r, b in slots.items() if r >= SINK_REF),
               key=lambda b: (b["epoch"], b["snap"], b["j"]))


def _slots(acts: list[InstanceAction], into: dict[int, Any]) -> dict[int, Any]:
    for a in acts:
        if isinstance(a, Persist):
            into[a.ref] = a.blob
    return into


def _arrivals(inst: InstanceLogic[Any]) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    for ev in (_batch(P2, 1, B), _batch(P1, 1, A), _batch(P1, 2, C)):
        out += _emitted(inst.handle(ev, 0.0))
    return out


# ---------------------------------------------------------------- causal


def _causal_crash(cls: type[CausalInstance]) -> tuple[list[tuple[Any, Any]], dict[int, Any]]:
    """First incarnation: P1:1 (k, a) made visible; what it made visible and stored."""
    parents = dict(CH)
    inst = _make(cls, CausalParams())
    slots = _slots(inst.handle(Started(SINK, 0, "initial", init=CausalInit(0, False, parents)),
                               0.0), {})
    acts = inst.handle(_batch(P1, 1, A), 0.0)
    return _emitted(acts), _slots(acts, slots)


def _causal_restart(cls: type[CausalInstance], slots: dict[int, Any], epoch: int = 0,
                    ) -> tuple[InstanceLogic[Any], list[InstanceAction]]:
    inst = _make(cls, CausalParams())
    init = CausalInit(epoch, epoch == 0, dict(CH))
    acts = inst.handle(Started(SINK, 1, "restart", restored=slots[SLOT],
                               extra=_chain(slots), init=init), 0.0)
    if epoch == 0:
        inst.handle(ControlIn(Plan([], {}, TreeClock(SINK))), 0.0)
        # Each parent's resend starts with where it resumes: 1 + R[parent] (spec R4).
        assert isinstance(inst, CausalInstance)
        for ch in CH.values():
            inst.handle(MarkerIn(SINK, ch, Marker(RESUME, meta=(inst.got[ch] + 1, None))), 0.0)
    return inst, acts


def test_e4_causal_sink_resumes_after_what_it_made_visible() -> None:
    before, slots = _causal_crash(CausalInstance)
    assert before == [A[:2]]
    # The persisted vector: the delta names the channel that moved, the snapshot before
    # it the others.
    assert _last_delta(slots)["vis"] == {CH[P1]: 1}
    assert slots[SLOT]["ptime"] == {CH[P1]: 0, CH[P2]: 0, CH[P3]: 0}
    inst, acts = _causal_restart(CausalInstance, slots)
    # R4 with R := the persisted vector: parents resend after what is visible.
    [restored] = [a.msg for a in acts if isinstance(a, Report) and isinstance(a.msg, Restored)]
    assert plan_recovery(SINK, {}, [], CH, restore=restored.clock).parents == {
        P1: 2, P2: 1, P3: 1}
    after = _arrivals(inst)
    assert Counter(before + after) == Counter([A[:2], B[:2], C[:2]])
    # Its clock and diff log cover the visible batch, so a failed parent's replacement
    # resumes after it (spec R1 reads the sink's level-1 entry).
    assert isinstance(inst, CausalInstance)
    assert inst.clock.children[P1].time == 2 and inst.clock.children[P2].time == 1


def _persisted(acts: list[InstanceAction]) -> list[int]:
    return [a.ref for a in acts if isinstance(a, Persist)]


def test_causal_sink_persists_each_output_once_and_a_replacement_goes_on_after_it() -> None:
    # Each output's delta holds what changed since the one before: output j after the
    # snapshot goes to SINK_REF + j, and a replacement's first output goes after the
    # chain it restored (overwriting a delta would lose what it held, below).
    first = _make(CausalInstance, CausalParams())
    slots = _slots(first.handle(Started(SINK, 0, "initial",
                                        init=CausalInit(0, False, dict(CH))), 0.0), {})
    acts = first.handle(_batch(P1, 1, A), 0.0)
    assert _persisted(acts) == [SINK_REF] and _emitted(acts) == [A[:2]]
    acts += first.handle(_batch(P2, 1, B), 0.0)
    assert _persisted(acts) == [SINK_REF, SINK_REF + 1]
    slots = _slots(acts, slots)
    second = slots[SINK_REF + 1]
    assert list(second["emitted"]) == [record_identity("multiset")(*B[:2])]
    assert second["dlog"] == {CH[P2]: [(1, second["dlog"][CH[P2]][0][1])]}
    assert isinstance(first, CausalInstance)
    inst, _ = _causal_restart(CausalInstance, slots)
    assert isinstance(inst, CausalInstance)
    # The chain rebuilt the clock the crashed sink had, not only its level-1 entries
    # (without the first delta, P1's cause below it is missing).
    assert first.clock.leq(inst.clock)
    acts = inst.handle(_batch(P1, 2, C), 0.0)
    assert _persisted(acts) == [SINK_REF + 2] and _emitted(acts) == [C[:2]]
    slots = _slots(acts, slots)
    # A whole-graph fallback: channels renumber, and only the visible counts of all three
    # deltas tell the same records apart from new ones.
    again, acts = _causal_restart(CausalInstance, slots, epoch=1)
    shown = _emitted(acts)
    for ev in (_batch(P2, 1, B), _batch(P1, 1, A), _batch(P1, 2, C)):
        shown += _emitted(again.handle(ev, 0.0))
    assert shown == []


def test_causal_sink_chain_at_its_longest_ends_in_a_snapshot() -> None:
    # Past the refs a replacement is given, a delta would never be read back: the
    # output's state goes into a local snapshot instead, and a new chain starts.
    inst = _make(CausalInstance, CausalParams())
    assert isinstance(inst, CausalInstance)
    refs = sink_refs(CausalParams(), len(CH))
    slots = _slots(inst.handle(Started(SINK, 0, "initial",
                                       init=CausalInit(0, False, dict(CH))), 0.0), {})
    inst.chain = len(refs)
    acts = inst.handle(_batch(P1, 1, A), 0.0)
    assert _persisted(acts) == [SLOT] and _emitted(acts) == [A[:2]]
    assert inst.chain == 0
    slots = _slots(acts, slots)
    again, _ = _causal_restart(CausalInstance, slots, epoch=1)
    assert _emitted(again.handle(_batch(P1, 1, A), 0.0)) == []


def test_causal_sink_knows_a_duplicate_by_parent_time_not_by_position() -> None:
    # Spec S1: identity (parent, parent time). P1:1 is visible; the same sender time at
    # the next channel position is still P1:1, and a sender time that skips (a source's
    # hash output skips channels) is new.
    before, slots = _causal_crash(CausalInstance)
    inst, _ = _causal_restart(CausalInstance, slots)
    again = BatchIn(SINK, CH[P1], Batch([A], 2, None, (P1, 1, (("evens[0]", 1, ()),))))
    assert _emitted(inst.handle(again, 0.0)) == []
    new = BatchIn(SINK, CH[P1], Batch([C], 2, None, (P1, 5, (("evens[0]", 5, ()),))))
    assert _emitted(inst.handle(new, 0.0)) == [C[:2]]
    assert before == [A[:2]]


def test_e4_causal_sink_across_a_fallback_uses_record_identity() -> None:
    before, slots = _causal_crash(CausalInstance)
    inst, _ = _causal_restart(CausalInstance, slots, epoch=1)  # channels renumbered
    assert Counter(before + _arrivals(inst)) == Counter([A[:2], B[:2], C[:2]])


def test_e4_causal_per_key_counts_mutant_gives_a_a_c() -> None:
    before, slots = _causal_crash(CausalPerKey)
    inst, _ = _causal_restart(CausalPerKey, slots)
    assert before + _arrivals(inst) == [A[:2], A[:2], C[:2]]


# ---------------------------------------------------------------- lineage


def _lineage(cls: type[LineageInstance]) -> list[tuple[Any, Any]]:
    inst = _make(cls, NoParams())
    slots = _slots(inst.handle(Started(SINK, 0, "initial"), 0.0), {})
    acts = inst.handle(_batch(P1, 1, A), 0.0)
    before = _emitted(acts)
    _slots(acts, slots)
    # A purge: the sink restarts with its visible counts; everything arrives again.
    again = _make(cls, NoParams())
    acts = again.handle(Started(SINK, 1, "restart", restored=slots[SLOT],
                                extra={r: slots.get(r) for r in SINK_REFS}), 0.0)
    assert [a.msg for a in acts if isinstance(a, Report)] == [Ready(dict.fromkeys(CH.values(), 1))]
    return before + _arrivals(again)


def test_e4_lineage_sink_by_record_identity() -> None:
    assert Counter(_lineage(LineageInstance)) == Counter([A[:2], B[:2], C[:2]])


def test_a_lineage_sink_chain_at_its_longest_ends_in_a_base() -> None:
    # Output CHAIN_LENGTH + 1 writes a base, and the deltas after it overwrite the first
    # chain's: a replacement reading the newest object of each ref has every count.
    inst = _make(LineageInstance, NoParams())
    slots = _slots(inst.handle(Started(SINK, 0, "initial"), 0.0), {})
    n = CHAIN_LENGTH + 2
    for seq in range(1, n + 1):
        _slots(inst.handle(_batch(P1, seq, ("k", ("r", seq), seq)), 0.0), slots)
    assert sorted(slots) == [SLOT, *SINK_REFS]
    assert len(unpack(slots[SLOT]["emitted"])) == CHAIN_LENGTH + 1  # the second base
    assert delta_dict(slots[SINK_REFS[0]]) == {("k", ("r", n)): 1}  # the second chain's first delta
    again = _make(LineageInstance, NoParams())
    _slots(again.handle(Started(SINK, 1, "restart", restored=slots[SLOT],
                                extra={r: slots.get(r) for r in SINK_REFS}), 0.0), {})
    assert again.emitted == {("k", ("r", seq)): 1 for seq in range(1, n + 1)}


def _purged_after(*visible: tuple[Any, ...]) -> LineageInstance:
    """A lineage sink restarted by a purge after ``visible`` became visible (one batch)."""
    inst = _make(LineageInstance, NoParams())
    slots = _slots(inst.handle(Started(SINK, 0, "initial"), 0.0), {})
    _slots(inst.handle(_batch(P1, 1, *visible), 0.0), slots)
    again = _make(LineageInstance, NoParams())
    _slots(again.handle(Started(SINK, 1, "restart", restored=slots[SLOT],
                                extra={r: slots.get(r) for r in SINK_REFS}), 0.0), {})
    assert isinstance(again, LineageInstance)
    return again


def test_a_lineage_delta_after_a_purge_holds_only_what_it_made_visible() -> None:
    # The replay of what was visible shows nothing and raises no visible count: the
    # next output's delta holds that output's identities, not the replayed ones too.
    again = _purged_after(A, B)
    written: dict[int, Any] = {}
    assert _emitted(_slots_acts(again.handle(_batch(P1, 1, A, B), 0.0), written)) == []
    assert _emitted(_slots_acts(again.handle(_batch(P1, 2, C), 0.0), written)) == [C[:2]]
    assert {r: delta_dict(d) for r, d in written.items()} == {SINK_REFS[0]: {C[:2]: 1}}


def _slots_acts(acts: list[InstanceAction], slots: dict[int, Any]) -> list[InstanceAction]:
    _slots(acts, slots)
    return acts


def test_e4_lineage_per_key_counts_mutant_gives_a_a_c() -> None:
    assert _lineage(LineagePerKey) == [A[:2], A[:2], C[:2]]


def test_identity_is_what_the_sink_mode_fixes() -> None:
    # multiset: the record; per-key modes: the key (the n-th record of a key).
    assert record_identity("multiset")("k", 1) == ("k", 1)
    assert record_identity(None)("k", 1) == ("k", 1)
    assert record_identity("ordered-per-key")("k", 1) == "k"
    assert record_identity("final-per-key")("k", 1) == "k"


def test_a_suppressed_record_stays_counted_across_a_restart_in_the_same_epoch() -> None:
    # (k, a) occurs twice in this input; the first is visible before a fallback. In epoch
    # 1 the recomputed first copy is suppressed, then P2:1 (k, b) is shown, storing the
    # positions {P1: 1, P2: 1}. A crash in epoch 1: the replacement must still count the
    # suppressed copy (its batch is behind the stored positions), so the second (k, a),
    # P1:2, is shown (topologies/joins/join-window.yaml, seed 884 with every fault kind).
    before, slots = _causal_crash(CausalInstance)
    inst, acts = _causal_restart(CausalInstance, slots, epoch=1)
    slots = _slots(acts, dict(slots))
    shown = _emitted(inst.handle(_batch(P1, 1, A), 0.0))
    acts = inst.handle(_batch(P2, 1, B), 0.0)
    shown += _emitted(acts)
    slots = _slots(acts, slots)
    # Both channels moved since the snapshot: the suppressed P1:1 as well as P2:1.
    assert _last_delta(slots)["vis"] == {CH[P1]: 1, CH[P2]: 1}
    again = _make(CausalInstance, CausalParams())
    again.handle(Started(SINK, 2, "restart", restored=slots[SLOT],
                         extra=_chain(slots),
                         init=CausalInit(1, True, dict(CH))), 0.0)
    again.handle(ControlIn(Plan([], {}, TreeClock(SINK))), 0.0)
    for ch in CH.values():
        again.handle(MarkerIn(SINK, ch, Marker(RESUME, meta=(again.got[ch] + 1, None))), 0.0)
    shown += _emitted(again.handle(_batch(P1, 2, A), 0.0))
    assert before + shown == [A[:2], B[:2], A[:2]]


def test_a_snapshot_stores_seen_counts_only_where_they_differ_and_restores_them() -> None:
    # After a fallback the sink's visible (k, a) is not yet seen in the new epoch: the
    # epoch's first snapshot stores that one difference, not a copy of every count. A
    # crash before anything else arrives restores it from the snapshot alone, so the
    # recomputed (k, a) is still taken for the visible one, and (k, c) is new.
    before, slots = _causal_crash(CausalInstance)
    _, acts = _causal_restart(CausalInstance, slots, epoch=1)
    slots = _slots(acts, dict(slots))
    ident = record_identity("multiset")(*A[:2])
    assert unpack(slots[SLOT]["emitted"]) == {ident: 1}
    assert unpack_apart(slots[SLOT]["seen"]) == {ident: 0}
    again = _make(CausalInstance, CausalParams())
    again.handle(Started(SINK, 2, "restart", restored=slots[SLOT], extra=_chain(slots),
                         init=CausalInit(1, True, dict(CH))), 0.0)
    again.handle(ControlIn(Plan([], {}, TreeClock(SINK))), 0.0)
    for ch in CH.values():
        again.handle(MarkerIn(SINK, ch, Marker(RESUME, meta=(again.got[ch] + 1, None))), 0.0)
    shown = _emitted(again.handle(_batch(P1, 1, A), 0.0))
    shown += _emitted(again.handle(_batch(P1, 2, C), 0.0))
    assert before + shown == [A[:2], C[:2]]


_RECORDS = st.lists(st.lists(st.tuples(st.sampled_from("kl"), st.integers(0, 2)), max_size=6),
                    max_size=6)


class _BothCounts(LineageInstance):
    """A lineage sink that keeps ``seen`` beside ``emitted`` while apart, as causal's does
    (``LoggedInstance.dedup``), instead of the gap after a purge."""

    dedup = LoggedInstance.dedup  # type: ignore[assignment]
    rejoin = LoggedInstance.rejoin  # type: ignore[assignment]


@settings(max_examples=200, deadline=None)
@given(batches=_RECORDS, mode=st.sampled_from(["multiset", "ordered-per-key"]))
def test_counting_in_bulk_shows_and_counts_what_counting_one_by_one_does(
        batches: list[list[tuple[str, int]]], mode: str) -> None:
    # Until a restore sets ``seen`` apart from ``emitted`` a sink counts whole batches in C
    # (``count_all``); assigning a count (as a restore does) sends it record by record.
    # Both must show the same records and keep the same counts, repeats in one batch too.
    bulk, one_by_one = _make(LineageInstance, NoParams()), _make(_BothCounts, NoParams())
    assert isinstance(bulk, LineageInstance) and isinstance(one_by_one, LineageInstance)
    one_by_one.seen = {}
    one_by_one._behind = -1  # never one dict again (``rejoin``): record by record throughout
    for inst in (bulk, one_by_one):
        inst.identity = record_identity(mode)
        for records in batches:
            inst.sink_records = list(records)
            inst.flush_sink()
    assert not bulk.apart and one_by_one.apart
    assert _emitted(bulk.out) == _emitted(one_by_one.out) == [r for b in batches for r in b]
    assert bulk.seen == one_by_one.seen == bulk.emitted == one_by_one.emitted


def test_seen_and_emitted_are_one_dict_until_counts_are_raised_apart() -> None:
    # Counting keeps them equal, so a sink counts each record once, in one dict; a restore
    # that raises one of them in place must get two, and they are one again once equal.
    inst = _make(LineageInstance, NoParams())
    assert isinstance(inst, LineageInstance)
    inst.sink_records = [("k", 1), ("k", 1), ("j", 2)]
    inst.flush_sink()
    assert inst.seen is inst.emitted and inst.emitted == {("k", 1): 2, ("j", 2): 1}
    seen, emitted = inst.counts_to_raise()
    assert seen is not emitted and seen == emitted
    emitted[("k", 1)] = 3  # a delta of an older incarnation: shown, not seen here
    assert seen[("k", 1)] == 2
    inst.settle_counts()
    assert inst.apart and inst.seen[("k", 1)] == 2 and inst.emitted[("k", 1)] == 3
    inst.out, inst.sink_records = [], [("k", 1), ("j", 2)]
    inst.flush_sink()
    assert _emitted(inst.out) == [("j", 2)] and inst.seen == inst.emitted
    inst.counts_to_raise()
    inst.settle_counts()  # equal again: counted in bulk, in one dict
    assert not inst.apart and inst.seen is inst.emitted


def test_a_purged_sink_counts_in_one_dict_again_once_its_replay_caught_up() -> None:
    # After a purge ``seen`` starts empty beside the restored visible counts; the replay
    # of what was visible closes the gap, and from then on the counts are one dict.
    again = _purged_after(A, B)
    assert again.apart
    assert _emitted(again.handle(_batch(P1, 1, A), 0.0)) == []
    assert again.apart and again.seen is not again.emitted  # B is still to come
    assert _emitted(again.handle(_batch(P1, 2, B, C), 0.0)) == [C[:2]]
    assert not again.apart and again.seen is again.emitted
    assert again.emitted == {A[:2]: 1, B[:2]: 1, C[:2]: 1}
    assert _emitted(again.handle(_batch(P1, 3, A), 0.0)) == [A[:2]]  # a second A: new
    assert again.emitted[A[:2]] == 2


# ---------------------------------------------------------------- folded chain deltas

_ARRIVALS = st.lists(st.tuples(st.sampled_from([P1, P2, P3]),
                               st.lists(st.tuples(st.sampled_from("kl"), st.integers(0, 2)),
                                        min_size=1, max_size=3), st.booleans()),
                     min_size=1, max_size=14)


def _arriving(arrivals: list[tuple[str, list[tuple[str, int]], bool]]
              ) -> list[tuple[BatchIn, bool]]:
    """Each parent's batches numbered from 1; the flag: the host flushes after it."""
    seqs: Counter[str] = Counter()
    out = []
    for parent, records, flush in arrivals:
        seqs[parent] += 1
        out.append((_batch(parent, seqs[parent], *[(k, v, 0) for k, v in records]), flush))
    return out


def _written(inst: InstanceLogic[Any], arrivals: list[tuple[BatchIn, bool]],
             plain: dict[int, Any], folded: dict[int, Any]
             ) -> list[tuple[dict[int, Any], dict[int, Any]]]:
    """Both stores after each flush: every delta written, and the host's fewer writes.
    The folded actions show the same outputs in the same order, none before a write."""
    stores = []
    pending: list[InstanceAction] = []
    for i, (ev, flush) in enumerate(arrivals):
        pending += inst.handle(ev, 0.0)
        if flush or i == len(arrivals) - 1:
            fewer = fewer_writes(pending)
            assert _emitted(fewer) == _emitted(pending)
            kinds = [type(a) for a in fewer if type(a) in (Persist, Emit)]
            assert Persist in kinds[:1] or Emit not in kinds
            _slots(pending, plain)
            _slots(fewer, folded)
            stores.append((dict(plain), dict(folded)))
            pending = []
    return stores


def _restored(slots: dict[int, Any], epoch: int) -> tuple[Any, ...]:
    inst, _ = _causal_restart(CausalInstance, slots, epoch)
    assert isinstance(inst, CausalInstance)
    return (inst.emitted, inst.seen, inst.pos, inst.ptime, inst.dlog, inst.time, inst.chain,
            _entries(inst.clock.to_plain()))


def _entries(clock: Any) -> Any:
    """A tree clock's value: its children are keyed by instance, their order is not, and
    a child at time 0 with none below it is no entry (``TreeClock.leq`` reads it so): a
    delta names only the channels that moved, so a chain restored whole or folded may
    leave such a child where the other does not."""
    iid, time, kids = clock
    return iid, time, tuple(sorted(_entries(k) for k in kids if k[1] or k[2]))


@settings(max_examples=150, deadline=None)
@given(first=_ARRIVALS, again=_ARRIVALS)
def test_deltas_written_as_one_restore_what_each_written_alone_does(
        first: list[tuple[str, list[tuple[str, int]], bool]],
        again: list[tuple[str, list[tuple[str, int]], bool]]) -> None:
    # A Spark task carries out a flush's outputs at once and writes each run of a sink's
    # chain deltas as one (``fewer_writes``). After every flush a replacement, in the
    # same epoch or after a fallback, must stand where it would with every delta: at the
    # first incarnation (``seen`` equal to ``emitted``) and after a fallback that replays
    # the same batches (``seen`` apart), with chains short enough to end in snapshots.
    params = CausalParams(snapshot_every=2)
    refs = sink_refs(params, len(CH))
    inst = _make(CausalInstance, params)
    plain = _slots(inst.handle(Started(SINK, 0, "initial",
                                       init=CausalInit(0, False, dict(CH))), 0.0), {})
    stores = _written(inst, _arriving(first), plain, dict(plain))
    for p, f in stores:
        assert _restored(p, 0) == _restored(f, 0)
    plain, folded = stores[-1]
    # The fallback's replacement sees new batches, then every batch again: records it
    # counts but does not show, its ``seen`` apart, lie between the ones it shows.
    inst = _make(CausalInstance, params)
    acts = inst.handle(Started(SINK, 1, "restart", restored=folded[SLOT],
                               extra={r: folded.get(r) for r in refs},
                               init=CausalInit(1, True, dict(CH))), 0.0)
    acts += inst.handle(ControlIn(Plan([], {}, TreeClock(SINK))), 0.0)
    _slots(acts, plain)
    _slots(acts, folded)
    assert isinstance(inst, CausalInstance)
    for ch in CH.values():
        inst.handle(MarkerIn(SINK, ch, Marker(RESUME, meta=(inst.got[ch] + 1, None))), 0.0)
    for p, f in _written(inst, _arriving(again + first), plain, folded):
        assert _restored(p, 1) == _restored(f, 1)
        assert _restored(p, 2) == _restored(f, 2)


@settings(max_examples=200, deadline=None)
@given(batches=_RECORDS, packs=st.lists(st.booleans(), min_size=6, max_size=6),
       shown=st.dictionaries(st.tuples(st.sampled_from("kl"), st.integers(0, 2)),
                             st.integers(1, 2), max_size=3))
def test_a_snapshots_counts_encoded_in_parts_read_back_whole(
        batches: list[list[tuple[str, int]]], packs: list[bool],
        shown: dict[tuple[str, int], int]) -> None:
    # A snapshot encodes only the identities added since the one before
    # (``PackedCounts``); a count that rose in place, in bulk or record by record, must
    # make it encode everything again, or a replacement would restore the older count.
    bulk, one_by_one = (_make(LineageInstance, NoParams()) for _ in range(2))
    assert isinstance(bulk, LineageInstance) and isinstance(one_by_one, LineageInstance)
    one_by_one.emitted = dict(shown)  # restored counts: records below them are suppressed
    one_by_one.seen = {}
    for inst in (bulk, one_by_one):
        inst.identity = record_identity("multiset")
        for records, pack in zip(batches, packs, strict=False):
            inst.sink_records = list(records)
            inst.flush_sink()
            if pack:
                assert unpack(inst.packed.pack(inst.emitted)) == inst.emitted
        assert unpack(inst.packed.pack(inst.emitted)) == inst.emitted
    bulk.emitted = dict(shown)  # replaced whole, as a restore does
    assert unpack(bulk.packed.pack(bulk.emitted)) == bulk.emitted


def test_a_long_runs_count_parts_are_merged_once_there_are_many() -> None:
    from protocols.shared.packed_counts import MAX_PARTS, PackedCounts

    counts: dict[Any, int] = {}
    packed = PackedCounts()
    for i in range(MAX_PARTS + 1):
        counts[("k", i)] = 1
        parts = packed.pack(counts)
        assert unpack(parts) == counts
    assert len(parts) == 1  # the 65th snapshot encoded them all as one
    counts[("k", -1)] = 1
    assert len(packed.pack(counts)) == 2 and unpack(packed.pack(counts)) == counts


@settings(max_examples=200, deadline=None)
@given(batches=_RECORDS, mode=st.sampled_from(["multiset", "ordered-per-key"]))
def test_a_delta_of_first_counts_holds_what_looking_each_count_up_gives(
        batches: list[list[tuple[str, int]]], mode: str) -> None:
    # While every identity a causal sink counts is new, its delta is made without looking
    # the counts up (``CausalInstance.first``); the deltas must be the ones the lookups
    # give, through repeats within a batch and across batches.
    fast, looked_up = (_make(CausalInstance, CausalParams()) for _ in range(2))
    deltas: list[list[Any]] = [[], []]
    for inst, out in zip((fast, looked_up), deltas, strict=True):
        assert isinstance(inst, CausalInstance)
        inst.handle(Started(SINK, 0, "initial", init=CausalInit(0, False, dict(CH))), 0.0)
        inst.identity = record_identity(mode)
        for records in batches:
            if inst is looked_up:
                inst.first = None
            inst.sink_records = list(records)
            inst.flush_sink()
            out += [(a.ref, delta_counts(a.blob["emitted"]), a.blob["seen"]) for a in inst.out
                    if isinstance(a, Persist) and a.ref >= SINK_REF]
            inst.out.clear()
    assert deltas[0] == deltas[1]
    assert len(deltas[0]) == sum(1 for b in batches if b)
    for (_, emitted, _), records in zip(deltas[0], [b for b in batches if b], strict=True):
        assert set(emitted) == set(identities(fast.identity, records))


_COUNTS = st.dictionaries(st.tuples(st.sampled_from("kl"), st.integers(0, 2)),
                          st.integers(1, 3), max_size=6)


@settings(max_examples=300, deadline=None)
@given(emitted=_COUNTS, behind=st.lists(st.integers(0, 3), min_size=6, max_size=6),
       batches=_RECORDS, every=st.integers(1, 3))
def test_the_seen_counts_a_causal_snapshot_stores_are_every_difference(
        emitted: dict[Any, int], behind: list[int], batches: list[list[tuple[str, int]]],
        every: int) -> None:
    # A restored sink whose ``seen`` is behind its visible counts stores the differences
    # with each snapshot; after the first it stores only what suppressed records changed
    # (an identity may rise, and catch up, within one interval of ``every`` batches), and
    # the parts together must still be every identity whose counts differ.
    inst = _make(CausalInstance, CausalParams())
    assert isinstance(inst, CausalInstance)
    inst.handle(Started(SINK, 0, "initial", init=CausalInit(0, False, dict(CH))), 0.0)
    inst.emitted = dict(emitted)
    inst.seen = {i: max(0, n - d) for (i, n), d in zip(emitted.items(), behind, strict=False)}
    for _ in range(2):
        for k, records in enumerate([[], *batches]):
            inst.sink_records = list(records)
            if records:
                inst.flush_sink()
            inst.out.clear()
            if k % every:
                continue
            expect = {i: m for i, n in inst.emitted.items()
                      if (m := inst.seen.get(i, 0)) != n}
            assert unpack_apart(inst._seen_apart()) == expect
        # Set apart again (as a restore does): the identities found before no longer say.
        inst.seen = {i: n - 1 for i, n in inst.emitted.items()}


def test_seen_differences_are_encoded_anew_once_the_changes_outgrow_them() -> None:
    # Each snapshot after the base adds a part of what changed; the parts are encoded
    # again as one base when they hold more entries than the differences left, or when
    # there are MAX_PARTS of them, so a snapshot never stores an unbounded history.
    from protocols.shared.packed_counts import MAX_PARTS

    differ = {("k", i): 0 for i in range(200)}
    seen = dict(differ)
    apart = SeenApart()
    parts = apart.base(differ)
    for j in range(MAX_PARTS + 1):
        seen[("k", 0)] = j + 1  # one identity rises, still below its visible count
        apart.note([], [("k", 0)])
        parts = apart.changes(differ, seen)
        assert unpack_apart(parts) == differ == {**dict.fromkeys(differ, 0), ("k", 0): j + 1}
    assert len(parts) == 2  # the base was encoded anew at the 64th change
    for i in range(1, 101):  # half the identities catch up: a base of what is left
        apart.note([("k", i)], [])
    parts = apart.changes(differ, seen)
    assert len(parts) == 1 and unpack_apart(parts) == differ and len(differ) == 100


@settings(max_examples=200, deadline=None)
@given(base=_COUNTS, deltas=st.lists(_COUNTS, max_size=3))
def test_restored_counts_keep_their_parts_until_a_count_in_them_rises(
        base: dict[Any, int], deltas: list[dict[Any, int]]) -> None:
    # A restart restores a sink's visible counts from a base and its deltas; the base's
    # parts still encode the restored dict's first entries, so the next base encodes
    # only what the deltas added, unless one raised a count the parts hold.
    from ftctl.codec import decode
    from protocols.shared.packed_counts import PackedCounts, with_deltas

    stored = PackedCounts().pack(base)
    packed = PackedCounts()
    counts = with_deltas(stored, deltas, packed)
    assert counts == with_deltas(stored, deltas)
    parts = packed.pack(counts)
    assert unpack(parts) == counts
    raised, now = False, dict(base)  # a count already there rose (the parts may hold it)
    for d in deltas:
        for i, n in d.items():
            raised = raised or n > now.get(i, n)
            now[i] = max(n, now.get(i, n))
    if raised:
        assert len(parts) == 1  # encoded anew, whole
    else:
        assert parts[:len(stored)] == stored
        added = [i for p in parts[len(stored):] for i in decode(p)[0]]
        assert sorted(added) == sorted(set(counts) - set(base))


@settings(max_examples=300, deadline=None)
@given(emitted=_COUNTS, behind=st.lists(st.integers(0, 3), min_size=6, max_size=6),
       batches=_RECORDS, mode=st.sampled_from(["multiset", "ordered-per-key"]))
def test_a_lineage_sinks_gap_shows_what_keeping_both_counts_shows(
        emitted: dict[Any, int], behind: list[int], batches: list[list[tuple[str, int]]],
        mode: str) -> None:
    # After a purge a lineage sink suppresses by one gap per identity instead of keeping
    # ``seen`` beside ``emitted``: it must show the same records, keep the same visible
    # counts and join the two counts again at the same batch, repeats in a batch too.
    gap, both = _make(LineageInstance, NoParams()), _make(_BothCounts, NoParams())
    assert isinstance(gap, LineageInstance) and isinstance(both, LineageInstance)
    seen = {i: max(0, n - d) for (i, n), d in zip(emitted.items(), behind, strict=False)}
    for inst in (gap, both):
        inst.identity = record_identity(mode)
        inst.emitted = dict(emitted)
        inst.seen = dict(seen)
    for records in batches:
        for inst in (gap, both):
            inst.sink_records = list(records)
            inst.flush_sink()
        assert _emitted(gap.out) == _emitted(both.out)
        assert gap.emitted == both.emitted and gap.apart == both.apart
        if gap.gap is not None:
            assert gap.gap == {i: n - m for i, n in both.emitted.items()
                               if (m := both.seen.get(i, 0)) < n}
