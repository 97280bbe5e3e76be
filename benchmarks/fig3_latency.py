"""Paper 000, Figure 3 shape: propagation latency vs offered load, with and without tree clocks.

Runs ``topologies/sharder.yaml`` fault-free on one warm local Spark cluster at each
offered load (``--rate`` votes/s, paced by the sources' schedule) under ``causal`` (tree
clocks piggybacked on every batch, diff logs, payload logs, local snapshots), under
``causal:clocks=off`` (the same protocol without clocks or diff logs: "without tree
clocks") and under ``none`` (no clocks and no logging at all). Each point is one
``execute`` run of ``ftctl run``'s machinery:

    python benchmarks/fig3_latency.py [--rates 2000,5000,10000,20000] [--seconds 10]
                                      [--protocols none,causal:clocks=off,causal]
                                      [--repeat 1] [--out fig3_latency.png]

Latency is the host's sink output latency: from when a record was due at the source
(its batch's slot on the rate schedule) to when the sink outputs it. The median (and
p90) over the run's samples after the first second (start-up) is reported. At each load,
the clocks' overhead = causal / causal:clocks=off - 1, the whole protocol's = causal /
none - 1; a point whose run fell behind its schedule (the last record out more than 2 s
late) is over the host's maximum load. With ``--repeat K`` the whole sweep runs K times,
interleaved (so drifts in the machine's load hit every protocol alike); a point's p50 is
the median of its K runs and an overhead the median of the K paired ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from ftctl.config.load import load_topology
from ftctl.run.execute import RunContext, RunExtension, RunRequest, execute
from ftctl.spark.host import HostResult
from protocols.registry import PROTOCOLS

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
    topology = load_topology(SHARDER).with_input(records=int(rate * seconds), rate=rate)
    name, _, spec = protocol.partition(":")
    given = dict(kv.split("=", 1) for kv in spec.split("+") if kv)
    info = PROTOCOLS[name]
    cap = Capture()
    req = RunRequest(topology, info, info.resolve(given), master=master, workers=2,
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
    ap.add_argument("--repeat", type=int, default=1, help="sweeps, interleaved")
    ap.add_argument("--out", type=Path, default=Path("fig3_latency.png"))
    args = ap.parse_args()
    from ftctl.cluster import LocalCluster

    work = Path(tempfile.mkdtemp(prefix="ftctl-fig3-"))
    print(f"load average before {os.getloadavg()}")
    cluster = LocalCluster(workers=2, cores=24, memory="2g", state_dir=work / "cluster")
    rows: list[dict[str, Any]] = []
    try:
        cluster.up()
        for rep in range(args.repeat):
            for rate in (float(r) for r in args.rates.split(",")):
                for proto in args.protocols.split(","):
                    row = point(cluster.master_url, proto, rate, args.seconds, work)
                    row["rep"] = rep
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        cluster.down()
    report(rows)
    plot(_medians(rows), args.out)
    print(f"wrote {args.out}; load average after {os.getloadavg()}")


def _medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (protocol, rate): the median p50 and p90 of its runs."""
    out = []
    for key in dict.fromkeys((r["protocol"], r["rate"]) for r in rows):
        runs = [r for r in rows if (r["protocol"], r["rate"]) == key]
        out.append({**runs[0], "p50_ms": statistics.median(r["p50_ms"] for r in runs),
                    "p90_ms": statistics.median(r["p90_ms"] for r in runs),
                    "passed": all(r["passed"] for r in runs),
                    "behind": any(r["behind"] for r in runs), "runs": len(runs)})
    return out


def report(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'rate/s':>8} {'protocol':>17} {'ok':>3} {'p50 ms':>8} {'p90 ms':>8} "
          f"{'behind':>6} {'load1':>5}")
    for r in rows:
        print(f"{r['rate']:>8,.0f} {r['protocol']:>17} {'yes' if r['passed'] else 'NO':>3} "
              f"{r['p50_ms']:>8.1f} {r['p90_ms']:>8.1f} {'yes' if r['behind'] else 'no':>6} "
              f"{r['load']:>5}")
    by = {(r["protocol"], r["rate"], r.get("rep", 0)): r["p50_ms"] for r in rows}
    reps = sorted({r.get("rep", 0) for r in rows})
    for m in _medians(rows):
        if m["runs"] > 1:
            print(f"{m['rate']:>8,.0f} {m['protocol']:>17} median p50 {m['p50_ms']:.1f} ms "
                  f"of {m['runs']} runs")
    for proto in dict.fromkeys(r["protocol"] for r in rows):
        kept = [m["rate"] for m in _medians(rows) if m["protocol"] == proto and not m["behind"]]
        print(f"{proto}: highest load kept on schedule here "
              + (f"{max(kept):,.0f} votes/s" if kept else "none"))
    for rate in sorted({r["rate"] for r in rows}):
        for what, base in (("tree clocks'", "causal:clocks=off"), ("causal vs none", "none")):
            ratios = [by[("causal", rate, k)] / by[(base, rate, k)] - 1 for k in reps
                      if ("causal", rate, k) in by and by.get((base, rate, k))]
            if ratios:
                each = " ".join(f"{x:+.0%}" for x in ratios)
                print(f"{rate:>8,.0f}/s: {what} p50 overhead {statistics.median(ratios):+.0%}"
                      + (f" (median of {each})" if len(ratios) > 1 else ""))


if __name__ == "__main__":
    main()
