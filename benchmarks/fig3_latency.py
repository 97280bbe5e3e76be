"""Paper 000, Figure 3 shape: propagation latency vs offered load, with and without tree clocks.

Runs ``topologies/sharder.yaml`` fault-free on one warm local Spark cluster at each
offered load (``--rate`` votes/s, paced by the sources' schedule) under ``causal`` (tree
clocks piggybacked on every batch, diff logs, payload logs, local snapshots), under
``causal:clocks=off`` (the same protocol without clocks or diff logs: "without tree
clocks") and under ``none`` (no clocks and no logging at all). Each point is one
``execute`` run of ``ftctl run``'s machinery:

    python benchmarks/fig3_latency.py [--rates 2000,5000,10000,20000] [--seconds 10]
                                      [--protocols none,causal:clocks=off,causal]
                                      [--out fig3_latency.png]

Latency is the host's sink output latency: from when a record was due at the source
(its batch's slot on the rate schedule) to when the sink outputs it. The median (and
p90) over the run's samples after the first second (start-up) is reported. At each load,
the clocks' overhead = causal / causal:clocks=off - 1, the whole protocol's = causal /
none - 1; a point whose run fell behind its schedule (the last record out more than 2 s
late) is over the host's maximum load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from ftctl.commands.runner import RunContext, RunExtension, RunRequest, execute
from ftctl.config.load import load_topology
from ftctl.spark.host import HostResult
from protocols.registry import PROTOCOLS, resolve_params

ROOT = Path(__file__).resolve().parent.parent
SHARDER = ROOT / "topologies" / "sharder.yaml"
WARMUP = 1.0  # seconds of output ignored at the start (tasks warming up)


class Capture(RunExtension):
    def __init__(self) -> None:
        self.result: HostResult | None = None
        self.passed = False

    def host_done(self, ctx: RunContext, result: HostResult) -> None:
        self.result = result

    def summarize(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        self.passed = bool(summary["passed"])


def point(master: str, protocol: str, rate: float, seconds: float,
          work: Path) -> dict[str, Any]:
    """One run; ``protocol`` is a name, optionally with ``:key=value`` parameters."""
    topology = load_topology(SHARDER)
    topology.input.records = int(rate * seconds)
    topology.input.rate = rate
    name, _, spec = protocol.partition(":")
    given = dict(kv.split("=", 1) for kv in spec.split("+") if kv)
    info = PROTOCOLS[name]
    cap = Capture()
    req = RunRequest(topology, info, resolve_params(info, given), master=master, workers=2,
                     results=work / "results", timeout=600.0, as_json=True, quiet=True)
    code = execute(req, cap)
    assert cap.result is not None, f"{protocol} at {rate}: run failed (exit {code})"
    lat = cap.result.latency
    t0 = min((t for _, t, _ in lat), default=0.0)
    vals = sorted(v for _, t, v in lat if t >= t0 + WARMUP)
    if not vals:
        raise SystemExit(f"{protocol} at {rate}: no latency samples")
    return {"protocol": protocol, "rate": rate, "passed": cap.passed,
            "p50_ms": 1000 * statistics.median(vals),
            "p90_ms": 1000 * vals[int(0.9 * (len(vals) - 1))],
            "last_ms": 1000 * vals[-1] if vals else None, "samples": len(vals),
            "behind": max(v for _, _, v in lat) > 2.0,
            "load": round(os.getloadavg()[0], 1)}


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    labels = {"causal": "causal (tree clocks)", "causal:clocks=off": "causal, clocks off",
              "none": "none (no logging)"}
    for proto in dict.fromkeys(r["protocol"] for r in rows):
        label = labels.get(proto, proto)
        pts = [(r["rate"], r["p50_ms"]) for r in rows if r["protocol"] == proto]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=label)
    ax.set_xlabel("offered load (votes/s)")
    ax.set_ylabel("propagation latency p50 (ms)")
    ax.set_title("sharder: latency vs load (Spark)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="2000,5000,10000,20000")
    ap.add_argument("--protocols", default="none,causal:clocks=off,causal")
    ap.add_argument("--seconds", type=float, default=10.0, help="input length per point")
    ap.add_argument("--out", type=Path, default=Path("fig3_latency.png"))
    args = ap.parse_args()
    from ftctl.cluster import LocalCluster

    work = Path(tempfile.mkdtemp(prefix="ftctl-fig3-"))
    print(f"load average before {os.getloadavg()}")
    cluster = LocalCluster(workers=2, cores=24, memory="2g", state_dir=work / "cluster")
    rows: list[dict[str, Any]] = []
    try:
        cluster.up()
        for rate in (float(r) for r in args.rates.split(",")):
            for proto in args.protocols.split(","):
                row = point(cluster.master_url, proto, rate, args.seconds, work)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        cluster.down()
    print(f"\n{'rate/s':>8} {'protocol':>17} {'ok':>3} {'p50 ms':>8} {'p90 ms':>8} "
          f"{'behind':>6} {'load1':>5}")
    for r in rows:
        print(f"{r['rate']:>8,.0f} {r['protocol']:>17} {'yes' if r['passed'] else 'NO':>3} "
              f"{r['p50_ms']:>8.1f} {r['p90_ms']:>8.1f} {'yes' if r['behind'] else 'no':>6} "
              f"{r['load']:>5}")
    by = {(r["protocol"], r["rate"]): r["p50_ms"] for r in rows}
    for rate in sorted({r["rate"] for r in rows}):
        c, n = by.get(("causal", rate)), by.get(("none", rate))
        off = by.get(("causal:clocks=off", rate))
        if c is not None and off:
            print(f"{rate:>8,.0f}/s: tree clocks' p50 overhead {c / off - 1:+.0%}")
        if c is not None and n:
            print(f"{rate:>8,.0f}/s: causal vs none p50 overhead {c / n - 1:+.0%}")
    plot(rows, args.out)
    print(f"wrote {args.out}; load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
