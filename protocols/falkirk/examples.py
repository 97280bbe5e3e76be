"""The paper's worked examples as data (spec section 6), for tests and ``ftctl figure``.

Figure 7's graphs are images missing from the text; these are the reconstructions of the
spec, which satisfy every statement of the captions and §3. Each example is a Dataflow
(instances with their chains F* and metadata Xi, edges with φ) and the failed set; the
expected frontiers live in the tests, written out literally.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from protocols.falkirk.frontier import EPOCHS, SEQUENCES, TOP, LoopDomain
from protocols.falkirk.model import Dataflow, Edge, Entry, Node


@dataclass(frozen=True)
class Example:
    name: str
    title: str
    flow: Dataflow
    failed: frozenset[str]


# ---------------------------------------------------------------- A: Fig. 7(a)


def _seq_entry(consumed: Mapping[str, int], sent: Mapping[str, int], top: bool = False) -> Entry:
    """An entry where the instance consumed ``consumed[d]`` messages on d and sent
    ``sent[e]`` on e, logging all of them (D̄ = ∅)."""
    return Entry(TOP if top else SEQUENCES.of(consumed),
                 consumed={d: SEQUENCES.of({d: n}) for d, n in consumed.items()},
                 logged={e: tuple((e, i) for i in range(1, n + 1)) for e, n in sent.items()},
                 sent=dict(sent))


def _seq_edge(src: str, dst: str, name: str) -> Edge:
    """φ(e)(f) = {(e, 1..messages sent on e at f)} (§3.2)."""
    return Edge(src, dst, project=lambda en: SEQUENCES.of({name: en.sent[name]}))


def fig7a() -> Example:
    E = _seq_entry
    chains = {
        "u": (E({}, {"e1": 0, "e4": 0}), E({}, {"e1": 10, "e4": 9}, top=True)),
        "w": (E({"e4": 0}, {"e5": 0}), E({"e4": 5}, {"e5": 4}),
              E({"e4": 9}, {"e5": 6}, top=True)),
        "x": (E({"e1": 0}, {"e2": 0}), E({"e1": 3}, {"e2": 2}), E({"e1": 6}, {"e2": 5}),
              E({"e1": 8}, {"e2": 7}, top=True)),
        "y": (E({"e2": 0, "e5": 0}, {"e3": 0}), E({"e2": 2, "e5": 1}, {"e3": 1}),
              E({"e2": 4, "e5": 3}, {"e3": 4}), E({"e2": 6, "e5": 5}, {"e3": 6}),
              E({"e2": 7, "e5": 6}, {"e3": 8}, top=True)),
        "z": (E({"e3": 0}, {}), E({"e3": 3}, {}), E({"e3": 5}, {}),
              E({"e3": 8}, {}, top=True)),
    }
    edges = {n: _seq_edge(s, d, n) for n, (s, d) in {
        "e1": ("u", "x"), "e2": ("x", "y"), "e3": ("y", "z"), "e4": ("u", "w"),
        "e5": ("w", "y")}.items()}
    flow = Dataflow({p: Node(SEQUENCES, c) for p, c in chains.items()}, edges,
                    notifications=False)
    return Example("A", "Fig. 7(a): sequence numbers, everyone logs, x failed", flow,
                   frozenset({"x"}))


# ---------------------------------------------------------------- epoch helpers


def epoch_entry(k: int, ins: Sequence[str] = (), outs: Sequence[str] = (),
                logs: Sequence[str] = (), notify: bool = True,
                sent_log: Mapping[str, Sequence[int]] | None = None) -> Entry:
    """A persisted entry ``↓k`` with the safe overestimates M̄ = D̄ = N̄ = ↓k (§3.4); a
    logged edge logs the epochs of ``sent_log`` (default one message per epoch)."""
    sent_log = sent_log or {}
    return Entry(k, consumed={d: k for d in ins},
                 discarded={e: k for e in outs if e not in logs},
                 notified=k if notify else None,
                 logged={e: tuple(t for t in sent_log.get(e, range(k + 1)) if t <= k)
                         for e in logs})


def top_entry(consumed: Mapping[str, int] | None = None,
              sent: Mapping[str, int] | None = None, completed: int = -1,
              logged: Mapping[str, int] | None = None, notify: bool = True,
              durable: bool = False) -> Entry:
    """The precise TOP of a live instance (reported at pause, spec R2): the last epoch of
    a batch consumed per input, sent per non-logged output, completed, logged."""
    return Entry(TOP, consumed=dict(consumed or {}), discarded=dict(sent or {}),
                 notified=completed if notify else None,
                 logged={e: tuple(range(v + 1)) for e, v in (logged or {}).items()},
                 durable=durable)


def _epochs(chains: Mapping[str, Iterable[Entry]], edges: Mapping[str, Edge]) -> Dataflow:
    return Dataflow({p: Node(EPOCHS, tuple(c)) for p, c in chains.items()}, edges)


# ---------------------------------------------------------------- B: Fig. 7(b)


def fig7b(firewall: bool = True) -> Example:
    P, T = epoch_entry, top_entry
    logs = ("e2", "e4") if firewall else ()
    sent_log = {"e2": (0, 0, 0), "e4": (0, 0)}  # three messages on e2, two on e4
    p_top = T({"e1": 0}, {"e2": 0, "e4": 0} if not firewall else {}, completed=0)
    if firewall:
        p_top = Entry(TOP, consumed={"e1": 0}, notified=0, logged=dict(sent_log))
    chains = {
        "q": (P(-1, outs=["e1"]), P(0, outs=["e1"]), T(sent={"e1": 0}, completed=0)),
        "p": (P(-1, ["e1"], ["e2", "e4"], logs, sent_log=sent_log),
              P(0, ["e1"], ["e2", "e4"], logs, sent_log=sent_log), p_top),
        "x": (P(-1, ["e2"], ["e3"]), P(0, ["e2"], ["e3"]),
              T({"e2": 0}, {"e3": 0}, completed=0)),
        "y": (P(-1, ["e3"]),),  # failed mid-epoch: only the initial state
        "r": (P(-1, ["e4"]), P(0, ["e4"]), T({"e4": 0}, completed=0)),
    }
    edges = {n: Edge(s, d) for n, (s, d) in {
        "e1": ("q", "p"), "e2": ("p", "x"), "e3": ("x", "y"), "e4": ("p", "r")}.items()}
    if firewall:
        return Example("B", "Fig. 7(b): one epoch, p logs (an RDD), y failed",
                       _epochs(chains, edges), frozenset({"y"}))
    return Example("B'", "Fig. 7(b) with p not logging, y failed", _epochs(chains, edges),
                   frozenset({"y"}))


# ---------------------------------------------------------------- C: Fig. 5


def fig5() -> Example:
    """Time {1} (the frontier 1), ∅ is -1. q failed; x had been notified of 1."""
    none, one = -1, 1
    chains = {
        "p": (Entry(none), Entry(one, discarded={"e1": one}, notified=one),
              Entry(TOP, discarded={"e1": one}, notified=one)),
        "q": (Entry(none),),
        "r": (Entry(none),
              Entry(one, consumed={"e1": one, "e2": none}, discarded={"e3": none}),
              Entry(TOP, consumed={"e1": one, "e2": none}, discarded={"e3": none})),
        "x": (Entry(none), Entry(one, consumed={"e3": none}, notified=one),
              Entry(TOP, consumed={"e3": none}, notified=one)),
    }
    edges = {n: Edge(s, d) for n, (s, d) in {
        "e1": ("p", "r"), "e2": ("q", "r"), "e3": ("r", "x")}.items()}
    return Example("C", "§3.5 / Fig. 5: notification frontiers, q failed",
                   _epochs(chains, edges), frozenset({"q"}))


# ---------------------------------------------------------------- D: Fig. 7(c)

LOOP = LoopDomain(6)  # iterations 0..6
_LOOP_TIMES = [(t, c) for t in (0, 1) for c in range(7)]


def fig7c() -> Example:
    """A loop: p -e2-> x -e4-> y -e5-> q -e6-> x, q -e3-> r. Only q logs; y failed."""
    log6 = ((0, 1), (0, 2), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5))

    def upto(hi: tuple[int, int]) -> list[tuple[int, int]]:
        return [t for t in _LOOP_TIMES if t <= hi]

    def xe(tau: tuple[int, int]) -> Entry:
        return Entry(tau, consumed={"e2": tau, "e6": tau}, discarded={"e4": tau})

    def ye(tau: tuple[int, int]) -> Entry:
        return Entry(tau, consumed={"e4": tau}, discarded={"e5": LOOP.feedback(tau)})

    def qe(tau: tuple[int, int]) -> Entry:
        return Entry(tau, consumed={"e5": tau},
                     logged={"e6": tuple(t for t in log6 if t <= tau),
                             "e3": (0,) if tau >= (0, 3) else ()})

    nodes = {
        "p": Node(EPOCHS, (Entry(-1, discarded={"e2": None}),
                           Entry(0, discarded={"e2": (0, 0)}),
                           Entry(1, discarded={"e2": (1, 0)}),
                           Entry(TOP, discarded={"e2": (1, 0)}))),  # sends iteration 0 only
        "x": Node(LOOP, (Entry(None, consumed={"e2": None, "e6": None},
                               discarded={"e4": None}),
                         *(xe(t) for t in upto((1, 4))),
                         Entry(TOP, consumed={"e2": (1, 0), "e6": (1, 4)},
                               discarded={"e4": (1, 4)}))),
        "y": Node(LOOP, (Entry(None, consumed={"e4": None}, discarded={"e5": None}),
                         *(ye(t) for t in upto((1, 3))),
                         Entry(TOP, consumed={"e4": (1, 4)}, discarded={"e5": (1, 5)}))),
        "q": Node(LOOP, (Entry(None, consumed={"e5": None}, logged={"e6": (), "e3": ()}),
                         *(qe(t) for t in upto((1, 4))),
                         Entry(TOP, consumed={"e5": (1, 5)}, logged={"e6": log6, "e3": (0,)}))),
        "r": Node(EPOCHS, (Entry(-1, consumed={"e3": -1}), Entry(0, consumed={"e3": 0}),
                           Entry(TOP, consumed={"e3": 0}))),
    }
    edges = {
        "e2": Edge("p", "x", project=lambda en: LOOP.ingress(en.front)),
        "e4": Edge("x", "y"),
        "e5": Edge("y", "q", project=lambda en: LOOP.feedback(en.front)),
        "e6": Edge("q", "x"),
        "e3": Edge("q", "r", project=lambda en: LOOP.egress(en.front)),
    }
    return Example("D", "Fig. 7(c): a loop, (epoch, iteration) lexicographic, q logs, "
                   "y failed", Dataflow(nodes, edges, notifications=False), frozenset({"y"}))


# ---------------------------------------------------------------- F: ftctl sharder


def sharder(stateless: str, checkpoints: Mapping[str, Sequence[int]]) -> Dataflow:
    """votes -> sharder -> s0..s2 -> out, one pseudo-instance per sink channel. Everyone
    completed 6; the sink closed 6 everywhere and committed 5 (6 is in memory only)."""
    P, T = epoch_entry, top_entry
    shards = ("s0", "s1", "s2")
    outs = tuple(f"to{s}" for s in shards)
    logs = outs if stateless == "log" else ()
    chains: dict[str, list[Entry]] = {
        "votes": [*(P(k, outs=["v"], logs=["v"]) for k in range(-1, 7)),
                  T(completed=6, logged={"v": 6}, durable=True)],
        "sharder": [*(P(k, ["v"], outs, logs) for k in range(-1, 7)),
                    T({"v": 6}, {o: 6 for o in outs if o not in logs}, completed=6,
                      logged={o: 6 for o in logs})],
    }
    edges = {"v": Edge("votes", "sharder")}
    for s in shards:
        chains[s] = [*(P(k, [f"to{s}"], [f"{s}>out"]) for k in (-1, *checkpoints[s])),
                     T({f"to{s}": 6}, {f"{s}>out": 6}, completed=6)]
        sink = [*(P(k, [f"{s}>out"], notify=False) for k in range(-1, 7)),
                T({f"{s}>out": 6}, notify=False)]
        sink[-2] = Entry(6, consumed={f"{s}>out": 6}, volatile=True)
        chains[f"out@{s}"] = sink
        edges[f"to{s}"] = Edge("sharder", s, closed=6)
        edges[f"{s}>out"] = Edge(s, f"out@{s}", closed=6)
    return _epochs(chains, edges)


def sharder_firewall() -> Example:
    return Example("F1", "sharder, sharder logs, s1 failed (checkpoints s0 1,3,5 s1 1,3 "
                   "s2 1,3,5)", sharder("log", {"s0": (1, 3, 5), "s1": (1, 3),
                                                "s2": (1, 3, 5)}), frozenset({"s1"}))


def sharder_ephemeral() -> Example:
    return Example("F2", "sharder, ephemeral sharder, s1 failed",
                   sharder("ephemeral", {"s0": (1, 3, 5), "s1": (1, 3), "s2": (1, 3, 5)}),
                   frozenset({"s1"}))


def sharder_domino() -> Example:
    return Example("F3", "sharder, ephemeral sharder, staggered checkpoints (s0 2,4 s1 1,3 "
                   "s2 3,5), s1 failed: the domino effect",
                   sharder("ephemeral", {"s0": (2, 4), "s1": (1, 3), "s2": (3, 5)}),
                   frozenset({"s1"}))


# ---------------------------------------------------------------- G: in flight


def inflight_flow() -> Dataflow:
    """lines -> split0 (ephemeral) -> c0, c1 -> out. split0 completed 6 and sent part of
    7; its epoch-6 batches to c1 were in flight, so c1 closed only 5."""
    P, T = epoch_entry, top_entry
    chains = {
        "lines": [*(P(k, outs=["a"], logs=["a"]) for k in range(-1, 8)),
                  T(completed=7, logged={"a": 7}, durable=True)],
        "split0": [*(P(k, ["a"], ["b0", "b1"]) for k in range(-1, 7)),
                   T({"a": 7}, {"b0": 7, "b1": 7}, completed=6)],
        "c0": [*(P(k, ["b0"], ["o0"]) for k in (-1, 3, 5, 6)),
               T({"b0": 7}, {"o0": 7}, completed=6)],
        "c1": [*(P(k, ["b1"], ["o1"]) for k in (-1, 3, 5)),
               T({"b1": 6}, {"o1": 6}, completed=5)],
        "out@c0": [*(P(k, ["o0"], notify=False) for k in range(-1, 7)),
                   T({"o0": 7}, notify=False)],
        "out@c1": [*(P(k, ["o1"], notify=False) for k in range(-1, 6)),
                   T({"o1": 6}, notify=False)],
    }
    edges = {"a": Edge("lines", "split0", closed=6), "b0": Edge("split0", "c0", closed=6),
             "b1": Edge("split0", "c1", closed=5), "o0": Edge("c0", "out@c0", closed=6),
             "o1": Edge("c1", "out@c1", closed=5)}
    return _epochs(chains, edges)


def inflight() -> Example:
    return Example("G", "ftctl in-flight rule: ephemeral split0 failed mid-epoch 7",
                   inflight_flow(), frozenset({"split0"}))


def source_crash() -> Example:
    return Example("G'", "as G, but the source lines fails: nobody rolls back",
                   inflight_flow(), frozenset({"lines"}))


def all_examples() -> tuple[Example, ...]:
    return (fig7a(), fig7b(True), fig7b(False), fig5(), fig7c(), sharder_firewall(),
            sharder_ephemeral(), sharder_domino(), inflight(), source_crash())
