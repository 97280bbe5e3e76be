"""The writes a Spark task spares when it carries out several events' actions at once."""

from __future__ import annotations

from typing import Any

from ftctl.kernel.writes import fewer_writes
from ftctl.runtime.actions import Emit, Send
from ftctl.runtime.messages import Marker
from protocols.contract.actions import SNAPSHOTTING, Chain, DeclarePhase, Persist, Report
from protocols.contract.messages import Ended
from protocols.contract.names import InstanceId

A, B = InstanceId("out[0]"), InstanceId("out[1]")


def _joined(older: list[int], newer: list[int]) -> list[int]:
    return older + newer


ONE, TWO = Chain(("epoch", 1), _joined), Chain(("epoch", 2), _joined)


def _delta(slot: InstanceId, j: int, chain: Chain = ONE) -> Persist:
    return Persist(slot, 2 + j, [j], chain)


def _show(slot: InstanceId, j: int) -> Emit:
    return Emit(slot, [("k", j)])


def _written(acts: list[Any]) -> list[tuple[str, int, Any]]:
    return [(a.slot, a.ref, a.blob) for a in fewer_writes(acts) if type(a) is Persist]


def test_a_run_of_deltas_is_one_write_before_every_output_it_counts() -> None:
    acts = [_delta(A, 0), _show(A, 0), _delta(A, 1), _show(A, 1), Send(3, Marker("x")),
            _delta(A, 2), _show(A, 2)]
    out = fewer_writes(acts)
    assert out[0] == Persist(A, 4, [0, 1, 2], ONE)  # the last ref, the first place
    assert out[1:] == [_show(A, 0), _show(A, 1), Send(3, Marker("x")), _show(A, 2)]


def test_deltas_of_two_slots_fold_apart() -> None:
    acts = [_delta(A, 0), _show(A, 0), _delta(B, 0), _show(B, 0), _delta(A, 1), _show(A, 1),
            _delta(B, 1), _show(B, 1)]
    assert _written(acts) == [(A, 3, [0, 1]), (B, 3, [0, 1])]
    assert [a for a in fewer_writes(acts) if type(a) is Emit] == [
        a for a in acts if type(a) is Emit]


def test_what_may_end_the_incarnation_between_two_deltas_keeps_them_apart() -> None:
    # The coordinator may stop the unit on a Report or a phase before the rest of its
    # frame: a delta folded across one would count an output never shown.
    for between in (Report(Ended()), DeclarePhase(SNAPSHOTTING, True, 1)):
        acts = [_delta(A, 0), _show(A, 0), between, _delta(A, 1), _show(A, 1)]
        assert _written(acts) == [(A, 2, [0]), (A, 3, [1])]


def test_another_chain_or_a_whole_write_ends_a_run() -> None:
    acts = [_delta(A, 0), _show(A, 0), _delta(A, 1, TWO), _show(A, 1)]
    assert _written(acts) == [(A, 2, [0]), (A, 3, [1])]
    acts = [_delta(A, 0), Persist(A, 0, "snapshot"), _delta(A, 1)]
    assert _written(acts) == [(A, 2, [0]), (A, 0, "snapshot"), (A, 3, [1])]


def test_a_part_written_twice_is_written_once_unless_a_report_lies_between() -> None:
    acts = [Persist(A, 0, "old"), _show(A, 0), Persist(A, 0, "new")]
    assert _written(acts) == [(A, 0, "new")]
    acts = [Persist(A, 0, "old"), Report(Ended()), Persist(A, 0, "new")]
    assert _written(acts) == [(A, 0, "old"), (A, 0, "new")]
