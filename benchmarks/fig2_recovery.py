"""Paper 000, Figure 2 shape: recovery time after losing the sharder vs aggregated state.

Runs ``topologies/sharder.yaml`` (votes -> sharder -> 20 count shards -> sink) on one warm
local Spark cluster, rate-paced: the first ``N`` votes at ``--build-rate`` (default: the
same as ``--rate``), the rest at ``--rate`` (``input.rate_change``). ``settle`` seconds
after vote N was due, ``sharder[0]``'s task is killed; ``tail`` more seconds of input
follow. Building state fast and measuring at a light load keeps the two apart: what the
kill costs, not how close the pipeline already ran to its limit. Each point is one
``ftctl chaos --json`` run:

    python benchmarks/fig2_recovery.py [--sizes 10000,50000] [--rate 2000]
                                       [--build-rate 16000] [--protocols causal,lineage]
                                       [--out fig2.png] [--spares 1]
                                       [--rows earlier-output.txt]

Both protocols get the same ``--spares`` (idle Spark tasks ready to take over a restarted
instance, ``ftctl chaos --spares``): with one, causal's single restart skips Spark's job
start, and lineage's first of 22 restarts does.

Reported per run (all from ftctl's recovery report, on the run's event clock):
  - detect s: kill to the coordinator's verdict (reported separately, not in recovery);
  - first out s: kill to the first sink output after the replacement(s) started;
  - recovery s: detection to output latency back within 10% of the pre-fault baseline
    and staying there (ftctl's ``recovery_s`` minus detection): "output flowing normally
    again". For lineage this includes re-aggregating all N votes in the purged shards.
Every run must verify exactly-once. Prints a table, the load average, writes a PNG.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARDER = ROOT / "topologies" / "sharder.yaml"


def scenario(work: Path, at: float) -> Path:
    path = work / f"kill-sharder-{at:g}.yaml"
    path.write_text(f"name: kill-sharder\nseed: 1\nfaults:\n  - type: kill-task\n"
                    f"    at: {at}\n    target: sharder[0]\n")
    return path


SETTLE = 6.0  # s at --rate before the kill: the recovery baseline is the 5 s before it


def topology(work: Path, n: int, build_rate: float, rate: float) -> Path:
    import yaml

    doc = yaml.safe_load(SHARDER.read_text())
    if build_rate != rate:
        doc["input"].update(rate=build_rate, rate_change={"at": n, "rate": rate})
    path = work / f"sharder-{n}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def point(master: str, protocol: str, n: int, build_rate: float, rate: float, tail: float,
          work: Path, timeout: float, spares: int) -> dict[str, Any]:
    records = n + int(rate * (SETTLE + tail))
    kill_at = round(n / build_rate + SETTLE, 3)
    args = [sys.executable, "-m", "ftctl.cli", "chaos", str(topology(work, n, build_rate, rate)),
            "--scenario", str(scenario(work, kill_at)), "-p", protocol, "--master", master,
            "--records", str(records), "--rate", str(build_rate),
            "--results", str(work / "results"), "--timeout", str(timeout),
            "--spares", str(spares), "--json"]
    done = subprocess.run(args, cwd=work, capture_output=True, text=True, check=False)
    try:
        summary = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"{protocol} N={n}: ftctl chaos exited {done.returncode}: "
                         f"{done.stderr[-1500:]}") from None
    rec = summary["recovery"][0] if summary.get("recovery") else {}
    detect = rec.get("detection_s")
    total = rec.get("recovery_s")
    return {"protocol": protocol, "n": n, "passed": summary["passed"],
            "restarts": summary["restarts"], "spares": spares, "rate": rate,
            "build_rate": build_rate, "detect_s": detect,
            "first_out_s": rec.get("first_output_s"),
            "recovery_s": None if total is None or detect is None else total - detect,
            "run": summary["run_id"]}


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for i, proto in enumerate(sorted({r["protocol"] for r in rows})):
        color = f"C{i}"
        for key, style, what in (("recovery_s", "-", "recovery"),
                                 ("first_out_s", "--", "first output")):
            pts = [(r["n"], r[key]) for r in rows
                   if r["protocol"] == proto and r[key] is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, color=color, marker="o",
                        label=f"{proto}: {what}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("votes aggregated before the kill (N)")
    ax.set_ylabel("seconds")
    ax.set_title("sharder kill: recovery vs state (Spark)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,50000")
    ap.add_argument("--protocols", default="causal,lineage")
    ap.add_argument("--rate", type=float, default=2_000.0,
                    help="votes/s (paced) from vote N on, through the kill")
    ap.add_argument("--build-rate", type=float, default=None,
                    help="votes/s while the first N votes are aggregated (default: --rate)")
    # Lineage restarts 22 instances (10-15 s on a loaded 2-core machine): a shorter tail
    # ends the input before its output flows again, and no recovery can be measured.
    ap.add_argument("--tail", type=float, default=25.0, help="seconds of input after the kill")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--spares", type=int, default=1, help="ftctl chaos --spares, both protocols")
    ap.add_argument("--out", type=Path, default=Path("fig2_recovery.png"))
    ap.add_argument("--rows", type=Path, default=None,
                    help="re-report and re-plot the JSON rows an earlier run printed")
    args = ap.parse_args()
    if args.rows is not None:
        report([json.loads(line) for line in args.rows.read_text().splitlines()
                if line.startswith("{")], args.out)
        return
    from ftctl.cluster import LocalCluster

    work = Path(tempfile.mkdtemp(prefix="ftctl-fig2-"))
    print(f"load average before {os.getloadavg()}")
    cluster = LocalCluster(workers=2, cores=24, memory="2g", state_dir=work / "cluster")
    rows: list[dict[str, Any]] = []
    try:
        cluster.up()
        for n in (int(s) for s in args.sizes.split(",")):
            for proto in args.protocols.split(","):
                row = point(cluster.master_url, proto, n, args.build_rate or args.rate,
                            args.rate, args.tail, work, args.timeout, args.spares)
                row["load"] = round(os.getloadavg()[0], 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        cluster.down()
    report(rows, args.out)


def report(rows: list[dict[str, Any]], out: Path) -> None:
    print(f"\n{'N':>9} {'protocol':>8} {'ok':>3} {'restarts':>8} {'detect s':>8} "
          f"{'first out s':>11} {'recovery s':>10} {'load1':>5}")
    for r in rows:
        def f(v: Any) -> str:
            return "-" if v is None else f"{v:.2f}"
        print(f"{r['n']:>9,} {r['protocol']:>8} {'yes' if r['passed'] else 'NO':>3} "
              f"{r['restarts']:>8} {f(r['detect_s']):>8} {f(r['first_out_s']):>11} "
              f"{f(r['recovery_s']):>10} {r['load']:>5}")
    by = {(r["protocol"], r["n"]): r for r in rows}
    for n in sorted({r["n"] for r in rows}):
        c, ln = by.get(("causal", n)), by.get(("lineage", n))
        if not c or not ln or not c["recovery_s"]:
            continue
        if ln["recovery_s"]:
            print(f"N={n:,}: lineage / causal recovery = {ln['recovery_s'] / c['recovery_s']:.1f}x")
        elif ln["first_out_s"] is not None:
            # Output latency cannot be back to normal before output flows again.
            bound = (ln["first_out_s"] - (ln["detect_s"] or 0)) / c["recovery_s"]
            print(f"N={n:,}: lineage's latency did not settle before the input ended; its "
                  f"recovery is at least its first output: lineage / causal >= {bound:.1f}x")
        if ln["first_out_s"] and c["first_out_s"]:
            print(f"N={n:,}: lineage / causal first output = "
                  f"{ln['first_out_s'] / c['first_out_s']:.1f}x")
    plot(rows, out)
    print(f"wrote {out}; load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
