"""Order-preserving mini-batches, per-channel de-duplication, burst detection and the
buffers of progressive recovery (papers/004 §4; spec R1-R4, R7-R10, R16-R18, E6, U2, U6)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.progressive.buffers import Checkpoints, RecoveryBuffer, SourceBuffer
from protocols.progressive.burst import BurstDetector, Mode, Transition, next_mode
from protocols.progressive.minibatch import Aligner, Cutter, Positions, Verdict, round_robin

Batch = list[tuple[str, int]]
# E6: three mini-batches on p's inputs ch0 and ch1 (batches in channel order).
MINIBATCHES: list[dict[int, list[Batch]]] = [
    {0: [[("a", 1)], [("b", 2)]], 1: [[("a", 10)]]},
    {0: [[("a", 3)]], 1: [[("b", 20)], [("a", 30)]]},
    {0: [[("b", 5)]], 1: [[("a", 50)]]},
]
REFERENCE = [[("a", 1)], [("a", 11)], [("b", 2)], [("a", 14)], [("b", 22)], [("a", 44)],
             [("b", 27)], [("a", 94)]]


class RunningSum:
    """p: a keyed running sum; one output batch per input batch, numbered per channel."""

    def __init__(self, state: dict[str, int] | None = None, seq: int = 0):
        self.state = dict(state or {})
        self.seq = seq
        self.aligner: Aligner[Batch] = Aligner((0, 1))

    def arrive(self, events: list[tuple[int, str, object]]) -> list[tuple[int, Batch]]:
        """Feed ``(ch, "batch"|"mb", payload)`` in arrival order; the output ``(seq, batch)``."""
        out = []
        for ch, kind, payload in events:
            if kind == "batch":
                self.aligner.add(ch, payload)  # type: ignore[arg-type]
            else:
                self.aligner.close(ch, payload)  # type: ignore[arg-type]
            for _b, batches in self.aligner.ready():
                for _c, batch in batches:
                    res = []
                    for k, v in batch:
                        self.state[k] = self.state.get(k, 0) + v
                        res.append((k, self.state[k]))
                    self.seq += 1
                    out.append((self.seq, res))
        return out


def arrivals(mbs: list[dict[int, list[Batch]]], first: int, order: list[int]
             ) -> list[tuple[int, str, object]]:
    """Per-channel FIFO streams (batches then ``mb(b)``) merged by ``order`` (channel picks)."""
    streams: dict[int, list[tuple[int, str, object]]] = {0: [], 1: []}
    for b, mb in enumerate(mbs, start=first):
        for ch in (0, 1):
            streams[ch] += [(ch, "batch", x) for x in mb.get(ch, [])]
            streams[ch].append((ch, "mb", b))
    out: list[tuple[int, str, object]] = []
    picks = iter(order)
    while streams[0] or streams[1]:
        live = [c for c in (0, 1) if streams[c]]
        ch = live[next(picks, 0) % len(live)]
        out.append(streams[ch].pop(0))
    return out


def test_e6_replay_is_identical_and_deduplicated() -> None:
    ref = RunningSum().arrive(arrivals(MINIBATCHES, 1, [0, 0, 0, 0, 0, 0, 0, 0]))
    assert [b for _, b in ref] == REFERENCE and [s for s, _ in ref] == list(range(1, 9))
    # d accepted seq 1..6 (mini-batches 1-2) from the first incarnation.
    first = RunningSum().arrive(arrivals(MINIBATCHES[:2], 1, [1, 1, 0, 1, 0, 1]))
    d = Positions([7])
    got = []
    for seq, batch in first:
        assert d.accept(7, seq)
        got.append(batch)
    # p restored from its snapshot after mini-batch 1 (state, out seq 3) replays 2-3 in
    # another interleaving; d drops seq 4..6 and takes 7, 8.
    snap = RunningSum().arrive(arrivals(MINIBATCHES[:1], 1, [0, 1, 0, 1]))
    state = {"a": 11, "b": 2}
    assert snap[-1] == (3, [("b", 2)])
    replayed = RunningSum(state, 3)
    replayed.aligner = Aligner((0, 1), done=1, closed={0: 1, 1: 1})
    again = replayed.arrive(arrivals(MINIBATCHES[1:], 2, [1, 1, 1, 0, 0, 1, 0, 1]))
    assert [s for s, _ in again] == [4, 5, 6, 7, 8]
    assert again[:3] == first[3:]  # identical batches and numbers
    verdicts = [d.judge(7, s) for s, _ in again]
    assert verdicts == [Verdict.DUPLICATE] * 3 + [Verdict.ACCEPT, Verdict.GAP]
    for seq, batch in again:
        if d.accept(7, seq):
            got.append(batch)
    assert got == REFERENCE


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1), max_size=20))
def test_any_interleaving_gives_the_same_output(order: list[int]) -> None:
    assert RunningSum().arrive(arrivals(MINIBATCHES, 1, order)) == \
        RunningSum().arrive(arrivals(MINIBATCHES, 1, []))


def test_round_robin_and_ended_inputs() -> None:
    assert round_robin({1: ["x", "y", "z"], 0: ["a"]}) == [(0, "a"), (1, "x"), (1, "y"),
                                                          (1, "z")]
    al: Aligner[str] = Aligner((3, 1))
    al.add(1, "p")
    al.add(3, "q")
    al.close(1, 1)
    assert al.ready() == []  # mb(1) missing on channel 3
    al.end(3)  # an ended input has closed everything
    assert al.ready() == [(1, [(1, "p"), (3, "q")])]
    al.add(1, "r")
    al.close(1, 2)
    assert al.ready() == [(2, [(1, "r")])]


def test_once_every_input_ended_every_mini_batch_closed_goes_out() -> None:
    """With no live input left, the rest go out up to the last one closed, empty ones
    too: stopping at the first empty one left mini-batch 3 held for good, and how many an
    instance forwarded depended on whether its inputs ended before it released them."""
    al: Aligner[str] = Aligner((0, 1))
    al.add(0, "x")
    al.close(0, 1)
    al.close(0, 2)  # mini-batch 2 is empty
    al.add(0, "y")
    al.close(0, 3)
    al.end(0)
    al.end(1)
    assert al.ready() == [(1, [(0, "x")]), (2, []), (3, [(0, "y")])]
    assert al.held == {} and al.pop() is None


def test_positions_judge_generations_and_gaps() -> None:
    pos = Positions([0, 1], {1: 4})
    assert pos.judge(0, 1) is Verdict.ACCEPT and pos.judge(0, 2) is Verdict.GAP
    assert pos.judge(1, 4) is Verdict.DUPLICATE and pos.judge(1, 5) is Verdict.ACCEPT
    assert pos.judge(0, 1, gen=1, mine=2) is Verdict.STALE
    assert pos.judge(0, 1, gen=3, mine=2) is Verdict.FUTURE
    assert not pos.accept(0, 2) and pos.accept(0, 1) and pos.accept(0, 2)
    assert pos.resume() == {0: 3, 1: 5}


def test_cutter_boundaries_depend_on_batches_since_the_anchor() -> None:
    c = Cutter(3)
    assert [c.after_batch() for _ in range(7)] == [None, None, 1, None, None, 2, None]
    # A source restored at the anchor and one rewound to it cut the same mini-batches.
    d = Cutter(3)
    assert [d.after_batch() for _ in range(7)] == [None, None, 1, None, None, 2, None]


# ---------------------------------------------------------------- burst and modes (U2)


def test_burst_window_and_threshold() -> None:
    det = BurstDetector(window=10.0, threshold=1)
    assert not det.lost(0.0, ["n1"])
    assert det.lost(3.0, ["n2"])  # two distinct nodes within 10 s
    det = BurstDetector(window=10.0, threshold=1)
    assert not det.lost(0.0, ["n1"]) and not det.lost(12.0, ["n2"])  # 12 s apart
    det = BurstDetector(window=10.0, threshold=1)
    assert not det.lost(0.0, ["n1"]) and not det.lost(1.0, ["n1"])  # the same node twice
    assert det.lost(10.0, ["n2", "n3"])  # n1 at 0 is out of (0, 10]; n2, n3 are two


def test_mode_transitions() -> None:
    assert next_mode(Mode.NORMAL, False) == Transition(Mode.BLOCKING, True)
    assert next_mode(Mode.NORMAL, True) == Transition(Mode.PROGRESSIVE, True)
    # A blocking episode hit again rolls back again, progressive on a burst (R9).
    assert next_mode(Mode.BLOCKING, False) == Transition(Mode.BLOCKING, True)
    assert next_mode(Mode.BLOCKING, True) == Transition(Mode.PROGRESSIVE, True)
    # A progressive one restores only the newly failed (R10), burst or not.
    assert next_mode(Mode.PROGRESSIVE, False) == Transition(Mode.PROGRESSIVE, False)
    assert next_mode(Mode.PROGRESSIVE, True) == Transition(Mode.PROGRESSIVE, False)


# ---------------------------------------------------------------- checkpoints and buffers


def test_checkpoint_completes_when_everyone_persisted() -> None:
    cps = Checkpoints(frozenset({"a", "b"}))
    assert not cps.persisted("a", 1) and not cps.persisted("a", 2)
    assert cps.persisted("b", 1) and cps.complete == 1
    assert not cps.persisted("a", 1)  # old news
    assert not cps.persisted("b", 3) and cps.complete == 1
    assert cps.persisted("b", 2) and cps.complete == 2
    assert cps.reports == {3: {"b"}}
    assert cps.rollback() == 2 and cps.reports == {}
    assert not cps.persisted("a", 3)  # b's report of 3 was forgotten with the rollback


def test_source_buffer_trims_only_on_trim_and_replays_after_the_mark() -> None:
    buf: SourceBuffer[str] = SourceBuffer()
    buf.append("r1")
    buf.mark(1)
    buf.append("r2")
    buf.append("r3")
    buf.mark(2)
    buf.append("r4")
    buf.trim(1)  # cp(P1) complete
    assert buf.items == ["r2", "r3", "r4"]
    # U6: the source persisted its part of P2, but cp(P2) is not complete: a rollback to
    # P1 replays exactly what followed P1, from the buffer.
    assert buf.since(1) == ["r2", "r3", "r4"]
    assert buf.rewind(1) == ["r2", "r3", "r4"] and buf.items == [] and 2 not in buf.marks
    buf.append("r2")
    buf.mark(2)
    buf.trim(2)
    assert buf.items == [] and buf.since(2) == []


def test_recovery_buffer_serves_from_a_position_and_is_off_in_normal_mode() -> None:
    rb: RecoveryBuffer[str] = RecoveryBuffer()
    rb.append(0, 1, "b1", batch=True)
    assert rb.size() == 0  # off: nothing kept (C3)
    rb.start([0, 1])
    for s in (1, 2, 3):
        rb.append(0, s, f"b{s}", batch=True)
        rb.append(0, s, f"mb{s}", batch=False)
    assert rb.since(0, 3) == ["mb2", "b3", "mb3"]
    assert rb.since(0, 1) == ["b1", "mb1", "b2", "mb2", "b3", "mb3"]
    assert rb.since(1, 1) == []
    rb.stop()
    assert rb.size() == 0 and rb.since(0, 1) == []
