"""A bad stored object is an unavailable entry of F* (protocols/falkirk/fallback.py): the
fixed point over what is left moves the instance and what depends on it back exactly as
far as consistency needs, built like the paper's worked examples (expected frontiers
written out, and checked against the brute-force greatest consistent choice)."""

from __future__ import annotations

import pytest

from protocols.falkirk.examples import epoch_entry as P
from protocols.falkirk.examples import top_entry as T
from protocols.falkirk.fallback import ref_epoch, unusable, without
from protocols.falkirk.fixedpoint import FixedPoint, NoFrontier
from protocols.falkirk.frontier import EPOCHS, TOP
from protocols.falkirk.messages import checkpoint_ref, segment_ref
from protocols.falkirk.model import Dataflow, Edge, Entry, Node
from tests.falkirk_cases import brute_force


def _flow(b_chain: tuple[Entry, ...] | None = None) -> Dataflow:
    """src -e0-> a -e1-> b -e2-> c -e3-> out, and src -e4-> y -e5-> out2.

    a, b checkpoint at epochs 3 and 6 (lazily, not logging); c checkpoints at 3, 5 and 6
    and logs e3; b failed; everyone else ran up to epoch 7. y shares only the source."""
    chains: dict[str, tuple[Entry, ...]] = {
        "src": (T(sent={}, logged={"e0": 9, "e4": 9}, durable=True, notify=False),),
        "a": (P(-1, ["e0"], ["e1"]), P(3, ["e0"], ["e1"]), P(6, ["e0"], ["e1"]),
              T({"e0": 7}, {"e1": 7}, completed=7)),
        "b": b_chain or (P(-1, ["e1"], ["e2"]), P(3, ["e1"], ["e2"]), P(6, ["e1"], ["e2"])),
        "c": (*(P(k, ["e2"], ["e3"], ["e3"]) for k in (-1, 3, 5, 6)),
              T({"e2": 7}, completed=7, logged={"e3": 7})),
        "out": (*(P(k, ["e3"]) for k in range(-1, 6)), T({"e3": 7}, completed=7)),
        "y": (P(-1, ["e4"], ["e5"]), P(5, ["e4"], ["e5"]), T({"e4": 7}, {"e5": 7}, completed=7)),
        "out2": (P(-1, ["e5"]), P(5, ["e5"]), T({"e5": 7}, completed=7)),
    }
    edges = {n: Edge(s, d) for n, (s, d) in {
        "e0": ("src", "a"), "e1": ("a", "b"), "e2": ("b", "c"), "e3": ("c", "out"),
        "e4": ("src", "y"), "e5": ("y", "out2")}.items()}
    return Dataflow({p: Node(EPOCHS, c) for p, c in chains.items()}, edges)


def _fronts(flow: Dataflow) -> dict[str, object]:
    return FixedPoint(flow, {"b"}).solve().fronts


def test_the_refs_map_back_to_their_epochs() -> None:
    assert [ref_epoch(checkpoint_ref(k)) for k in (0, 6)] == [("state", 0), ("state", 6)]
    assert [ref_epoch(segment_ref(t)) for t in (0, 6)] == [("segment", 0), ("segment", 6)]


def test_without_a_bad_object_b_restores_its_newest_checkpoint() -> None:
    assert _fronts(_flow()) == {"src": TOP, "a": 6, "b": 6, "c": 6, "out": 5, "y": TOP,
                                "out2": TOP}


def test_a_bad_checkpoint_moves_the_instance_and_its_dependants_back() -> None:
    flow = _flow()
    b = without(flow.nodes["b"].entries, checkpoint_ref(6))
    assert [e.front for e in b] == [-1, 3]
    bad = flow.with_entries({"b": tuple(b)})
    # b falls back to 3; a (not logging) must not have discarded what b now lacks: 3;
    # c consumed b's output past 3: back to 3 (not 5); out consumed c's output past 3
    # (c logs, but what out holds of c's epochs 4-5 is void now that c redoes them): 3.
    # y and out2 depend on nothing of b: they keep running.
    expected = {"src": TOP, "a": 3, "b": 3, "c": 3, "out": 3, "y": TOP, "out2": TOP}
    assert _fronts(bad) == expected
    assert brute_force(bad, {"b"}) == expected  # the greatest consistent choice


def test_a_bad_log_segment_takes_out_every_entry_that_would_replay_it() -> None:
    c = _flow().nodes["c"].entries
    # a restart at 5 or 6 replays epoch 4 from c's log; at 3 it re-executes epoch 4
    assert [e.front for e in without(c, segment_ref(4))] == [-1, 3, TOP]
    assert [e.front for e in c if unusable(e, segment_ref(4))] == [5, 6]


def test_with_nothing_left_that_fits_no_consistent_choice_exists() -> None:
    # b's only checkpoint is bad and GC already dropped its initial entry
    flow = _flow(b_chain=(P(6, ["e1"], ["e2"]),))
    with pytest.raises(NoFrontier, match="b"):
        _fronts(flow.with_entries({"b": tuple(without(flow.nodes["b"].entries,
                                                      checkpoint_ref(6)))}))
