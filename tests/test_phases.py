"""The kernel's phase set (ftctl/kernel/phases.py): occurrences by holder and key, the
kernel's own ``recovering``, and what a dead unit leaves."""

from __future__ import annotations

import pytest

from ftctl.kernel.phases import Phases
from ftctl.sim.faults import Strike
from tests.test_sim_faults import _events, _run


def test_occurrences_overlap_by_holder_and_key_and_the_phase_stays_open_until_all_left() -> None:
    ph = Phases()
    (entered,) = ph.declare("snapshotting", True, 3, "count[0]")
    assert entered.kind == "phase-entered" and entered.data["instance"] == "count[0]"
    assert ph.declare("snapshotting", True, 3, "count[0]") == []  # already open
    ph.declare("snapshotting", True, 3, "count[1]")  # the same snapshot, another holder
    assert ph.holders("snapshotting") == ["count[0]", "count[1]"]
    ph.declare("snapshotting", False, 3, "count[0]")
    assert ph.active("snapshotting") and ph.holders("snapshotting") == ["count[1]"]
    (left,) = ph.drop_holder("count[1]", "stopped")
    assert left.kind == "phase-left" and left.data["reason"] == "stopped"
    assert not ph.active("snapshotting") and ph.names() == frozenset()
    assert ph.openings["snapshotting"] == 1


@pytest.mark.sim
def test_a_recovery_is_the_kernels_recovering_phase_from_detection_to_recovered() -> None:
    _, res = _run("wordcount", "checkpoint", [(0.005, Strike(0, 1, ("count[0]",)))])
    detected = _events(res, "failure-detected")[0]
    recovering = [e for e in res.events
                  if e.kind in ("phase-entered", "phase-left") and e.data["phase"] == "recovering"]
    assert [e.kind for e in recovering] == ["phase-entered", "phase-left"]
    entered, left = recovering
    assert entered.t == detected.t and entered.instance is None
    assert left.t == _events(res, "recovered")[0].t and left.data["key"] == entered.data["key"]
