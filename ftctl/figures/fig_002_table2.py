"""Paper 002 (DADSTORM), Table 2: run time of exactly-once minus at-most-once, R = 2 and 4.

The paper gives 0.6 / 3.3 (small tuples) and 1.4 / 4.2 (tuples ten times larger), with no
unit and no workload, so only the shape can be reproduced: the difference is positive,
grows with the replication factor R, and its R-part does not grow with the tuple size,
because the colleague traffic is tuple records, not tuples (§6.1, claim C5).

Simulation host (default): Table 1's chain ``src (R) -> A (R) -> B (R) -> out`` with N
tuples per source replica, sources unpaced, on ``WiredSimHost``: every message queues on
one link shared by all units (the paper's single-machine test bed) and costs
``per_message + bytes / bandwidth`` (``ftctl/sim/wire.py``). A tuple weighs ``T`` bytes
(64 or 640) plus a 16-byte header; every other message (records, purges, acks, deletes,
pings) weighs the header alone, TR = 16 B as in the spec. The run time is when the sink
last received records, averaged over seeds. Fitted over R >= 2: Δ(R) = a·R(R-1) + c.

Spark host (``--host spark``): the bundled ``replica-chain`` topology with each ring
operator at parallelism R (``factors``, default 2,3), both semantics, on one local cluster;
the run time is the host's (go to the end), and the messages are the peer messages the
driver relays (``ftctl/figures/table2_spark.py``). Options ``records=N``, ``repeat=K``.

Options: ``seeds=N`` (sim, default 5, ``--quick`` 2), ``factors=1,2,3,4``.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from ftctl.config.errors import ConfigError
from ftctl.figures.fig_002_table1 import chain
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch
from ftctl.sim.wire import WiredSimHost, WireModel
from protocols.contract.spec import Guarantee
from protocols.replica_ring.accounting import tuples_through
from protocols.replica_ring.messages import Data, Refetch
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.spec import SPEC

from . import Figure, FigureOptions, FigureResult, FigureRunFailed

# Paper's Table 2 (rows: small tuples, tuples 10x larger; columns R = 2, 4).
PAPER_TABLE2: dict[str, dict[int, float]] = {"small": {2: 0.6, 4: 3.3},
                                             "large": {2: 1.4, 4: 4.2}}
SIZES: dict[str, int] = {"small": 64, "large": 640}  # tuple bytes T
HEADER = 16  # bytes of a message without a tuple: TR, a tuple record
WIRE = WireModel(per_message=20e-6, bandwidth=10e6, shared=True)
SEMANTICS = (Guarantee.AT_MOST_ONCE, Guarantee.EXACTLY_ONCE)
UNPACED = 1e6  # records/s: sources never wait, so the run time is the wire's


def tuple_sizer(t: int) -> Callable[[Any], int]:
    """Bytes of a message when a tuple weighs ``t``: a batch or a replica-ring tuple
    (data, re-fetched) is the header plus ``t`` per record, anything else the header."""
    def size(msg: Any) -> int:
        if type(msg) is Batch:
            return HEADER + t * len(msg.records)
        if type(msg) in (Data, Refetch) and msg.payload is not None:
            return HEADER + t * len(msg.payload[1])
        return HEADER
    return size


def params(semantics: Guarantee) -> ReplicaRingParams:
    """No failures: a queued ack must not look lost (no resend, no suspicion)."""
    return ReplicaRingParams(semantics=semantics, reinstate_after=None, retry_every=5.0,
                             ping_timeout=5.0)


def measure(r: int, t: int, semantics: Guarantee, seed: int) -> tuple[float, int]:
    """Simulated seconds to the last output, and messages on the wire, of one run."""
    topo = chain(r, tuples_through(r), sources=r).with_input(rate=UNPACED)
    host = WiredSimHost(ExecutionGraph(topo), SPEC, params(semantics), seed, wire=WIRE,
                        size=tuple_sizer(t))
    res = host.run()
    if not res.complete:
        raise FigureRunFailed(f"the failure-free run R={r} T={t} {semantics.value} did not end")
    return host.last_output, host.wire_messages


def fit(deltas: dict[int, float]) -> tuple[float, float, float]:
    """Least squares of Δ(R) = a·R(R-1) + c over R >= 2: (a, c, largest residual)."""
    pts = [(r * (r - 1), d) for r, d in deltas.items() if r >= 2]
    if len(pts) < 2:
        return 0.0, 0.0, 0.0
    mx = statistics.mean(x for x, _ in pts)
    my = statistics.mean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    a = sum((x - mx) * (y - my) for x, y in pts) / sxx
    c = my - a * mx
    return a, c, max(abs(y - (a * x + c)) for x, y in pts)


def shape(deltas: dict[str, dict[int, float]], messages: dict[str, dict[int, int]],
          fits: dict[str, tuple[float, float, float]]) -> dict[str, bool | float]:
    """The orderings Table 2 shows, from measured values."""
    ring = {name: sorted(r for r in d if r >= 2) for name, d in deltas.items()}
    a = {name: f[0] for name, f in fits.items()}
    spread = abs(a["small"] - a["large"]) / a["large"] if a.get("large") else float("inf")
    return {
        "delta_positive": all(deltas[n][r] > 0 for n, rs in ring.items() for r in rs),
        "delta_grows_with_r": all(deltas[n][x] < deltas[n][y] for n, rs in ring.items()
                                  for x, y in itertools.pairwise(rs)),
        "messages_grow_with_r": all(m[x] < m[y] for m in messages.values()
                                    for x, y in itertools.pairwise(sorted(m))),
        "r_part_spread": round(spread, 3),
        "r_part_independent_of_size": spread < 0.25,
    }


def _ints(text: str, field: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError("--opt", field,
                          f"expected integers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise ConfigError("--opt", field, f"expected positive integers, got {text!r}")
    return values


def run_sim(options: FigureOptions) -> FigureResult:
    opts = options.options
    seeds = _ints(opts.get("seeds", "2" if options.quick else "5"), "seeds")[0]
    factors = _ints(opts.get("factors", "1,2,3" if options.quick else "1,2,3,4"), "factors")
    times: dict[str, dict[int, dict[str, float]]] = {}
    messages: dict[str, dict[int, int]] = {}  # exactly-once messages per size and R
    deltas: dict[str, dict[int, float]] = {}
    rows = []
    for name, t in SIZES.items():
        for r in factors:
            mean: dict[str, float] = {}
            for sem in SEMANTICS:
                runs = [measure(r, t, sem, seed) for seed in range(seeds)]
                mean[sem.value] = statistics.mean(s for s, _ in runs)
                if sem is Guarantee.EXACTLY_ONCE:
                    messages.setdefault(name, {})[r] = round(statistics.mean(m for _, m in runs))
                else:
                    amo_messages = round(statistics.mean(m for _, m in runs))
            times.setdefault(name, {})[r] = mean
            delta = mean["exactly-once"] - mean["at-most-once"]
            deltas.setdefault(name, {})[r] = delta
            paper = PAPER_TABLE2[name].get(r)
            rows.append((name, t, r, round(mean["at-most-once"] * 1e3, 2),
                         round(mean["exactly-once"] * 1e3, 2), round(delta * 1e3, 2),
                         amo_messages, messages[name][r], "-" if paper is None else paper))
    fits = {name: fit(d) for name, d in deltas.items()}
    checks = shape(deltas, messages, fits)
    path = options.out / "table2-sim.png"
    _plot(deltas, path)
    ratio = {n: round(d[4] / d[2], 2) for n, d in deltas.items() if 2 in d and 4 in d}
    return FigureResult(
        title="002 Table 2: run time of exactly-once minus at-most-once (simulated ms), "
              f"{seeds} seed(s) each",
        header=("tuples", "T bytes", "R", "AMO ms", "EO ms", "Δ ms", "AMO msgs", "EO msgs",
                "paper Δ"),
        rows=tuple(rows), files=(path,),
        summary={"host": "sim", "wire": WIRE.describe(), "seeds": seeds,
                 "deltas_s": {n: {str(r): v for r, v in d.items()} for n, d in deltas.items()},
                 "messages": {n: {str(r): v for r, v in m.items()} for n, m in messages.items()},
                 "fit": {n: {"a": f[0], "c": f[1], "max_residual": f[2]}
                         for n, f in fits.items()},
                 "ratio_4_2": ratio, "paper": PAPER_TABLE2, "shape": checks},
        notes=(WIRE.describe() + f"; a tuple weighs T + {HEADER} B, any other message "
               f"{HEADER} B; sources unpaced; no failures.",
               "Fit Δ(R) = a·R(R-1) + c over R >= 2: " + "; ".join(
                   f"{n}: a = {f[0] * 1e3:.3f} ms, c = {f[1] * 1e3:.3f} ms, max residual "
                   f"{f[2] * 1e3:.3f} ms" for n, f in fits.items()) + ".",
               f"Δ(4)/Δ(2): {ratio or 'needs R=2 and R=4'} (paper 5.5 small, 3.0 large).",
               "Shape: " + ", ".join(f"{k} = {v}" for k, v in checks.items()) + ".",
               "Δ does not grow with T here: the run is bound by the shared link's total "
               "work, and exactly-once adds only header-sized messages (records, purges, "
               "acks, deletes). The paper's Δ does grow with T (0.6 -> 1.4 at R=2); the "
               "spec attributes that to synchronous confirmation exposing each tuple's "
               "transfer, which a saturated link hides."))


def _plot(deltas: dict[str, dict[int, float]], path: Path) -> None:
    fig = MplFigure(figsize=(6.5, 4), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, d in deltas.items():
        rs = sorted(d)
        ax.plot(rs, [d[r] * 1e3 for r in rs], marker="o", label=f"ftctl sim, {name} tuples")
    for name, cells in PAPER_TABLE2.items():
        rs = sorted(cells)
        ax.plot(rs, [cells[r] for r in rs], linestyle="--", marker="x",
                label=f"paper, {name} tuples (no unit)")
    ax.set_xlabel("replicas per operator R")
    ax.set_ylabel("exactly-once minus at-most-once")
    ax.set_title("DADSTORM Table 2: cost of exactly-once vs replication factor")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path)


def run(options: FigureOptions) -> FigureResult:
    if options.host == "spark":
        from ftctl.figures.table2_spark import run_spark  # pyspark only when asked for

        return run_spark(options)
    return run_sim(options)


FIGURE = Figure(
    name="002-table2",
    paper="002",
    title="DADSTORM Table 2: exactly-once minus at-most-once time vs replicas",
    hosts=("sim", "spark"),
    run=run,
)
