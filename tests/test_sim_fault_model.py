"""The simulation host's fault model (``ProtocolSpec.spared`` and ``unsettled``): a strike
never leaves a group with no unit up, and a unit in an unsettled phase is not up."""

from __future__ import annotations

from typing import Any

from ftctl.kernel.phases import Phases
from ftctl.sim.striking import Striking
from protocols.contract.actions import REINSTATING
from protocols.replica_ring.spec import SPEC


class _Host(Striking):
    """Only what ``_spare`` reads: live units, the groups, the kernel's phase set."""

    def __init__(self, live: list[str], groups: list[set[str]]) -> None:
        self.live = dict.fromkeys(live)  # type: ignore[assignment]
        self.spared = tuple(frozenset(g) for g in groups)
        self.unsettled = SPEC.unsettled
        self.kernel = type("K", (), {"open_phases": Phases()})()
        self.logged: list[tuple[str, dict[str, Any]]] = []

    def _log(self, kind: str, **data: Any) -> Any:
        self.logged.append((kind, data))


def test_replica_ring_calls_a_replica_waiting_for_its_table_unsettled() -> None:
    assert SPEC.unsettled == (REINSTATING,)


def test_a_strike_that_would_empty_a_ring_keeps_its_last_unit() -> None:
    host = _Host(["a", "b", "c"], [{"a", "b"}])
    assert host._spare(["a"]) == ["a"]  # b stays up
    assert host._spare(["a", "b"]) == ["a"]  # b kept: the ring's last unit
    assert host.logged[-1][1]["instances"] == ["b"]


def test_a_replica_still_reinstating_is_no_survivor() -> None:
    """Paper 002 §1 assumes one replica fails at a time: while ``b``, back in the ring,
    still waits for its record table, the failure is not over and ``a`` holds the ring's
    only copy of its records."""
    host = _Host(["a", "b"], [{"a", "b"}])
    host.kernel.open_phases.declare(REINSTATING, True, 1, "b")
    assert host._spare(["a"]) == []
    assert host._empties_group(["a"])
    (kind, data), = host.logged
    assert kind == "fault-skipped" and data["instances"] == ["a"]
    host.kernel.open_phases.declare(REINSTATING, False, 1, "b")  # its table is in
    assert host._spare(["a"]) == ["a"]
    assert not host._empties_group(["a"])
