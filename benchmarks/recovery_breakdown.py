"""Where recovery goes on Spark: restart-to-running and first output per failure size.

For each exactly-once protocol and each case, one ``ftctl chaos`` run on a fresh local
cluster of four workers labelled rack=a, a, b, b (so every case runs on the same standby
pool), with the faults struck together 5 s into the run:

- ``k1``, ``k4``, ``k8``: SIGKILL of k operator tasks (distinct instances);
- ``worker``: one whole worker (the one running the middle instance);
- ``rack``: both workers of rack=a (``kill-group``).

Per run it prints the recovery breakdown (``ftctl.metrics.recovery.recovery_breakdown``):
detection, restart-to-running (detection to the restarted instances running: the plan,
slot assignments or Spark job launches, restores, registration), first output after the
fault, recovery (latency back within 10%), how the restarts started (``slot``, ``queued``
for a fenced survivor's slot, ``job``), and the one-minute load average when the run
ended. One Spark run at a time; about a minute each.

    python benchmarks/recovery_breakdown.py
    python benchmarks/recovery_breakdown.py --protocols checkpoint,causal --cases k1,rack
    python benchmarks/recovery_breakdown.py --before ../old-checkout    # pairs, one machine
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

import yaml

from ftctl.config.load import load_topology
from ftctl.kernel.history import read_history
from ftctl.metrics.recovery import recovery_breakdown
from ftctl.runtime.graph import ExecutionGraph

PROTOCOLS = "checkpoint,causal,falkirk,progressive"
CASES = "k1,k4,k8,worker,rack"
LABELS = ["rack=a", "rack=a", "rack=b", "rack=b"]
AT = 5.0


def scenario(case: str, order: list[str]) -> dict[str, Any] | None:
    """The fault list of ``case`` on a graph whose instances are ``order``; None if the
    topology has too few instances for it."""
    inner = order[1:]  # the first source stays: something must feed the rest
    middle = order[len(order) // 2]
    if case.startswith("k"):
        k = int(case[1:])
        if k > len(inner):
            return None
        # Spread over the graph: every len/k-th instance, the first source left out.
        step = len(inner) / k
        targets = [inner[int(j * step)] for j in range(k)]
        faults = [{"type": "kill-task", "at": AT, "target": t} for t in targets]
    elif case == "worker":
        faults = [{"type": "kill-worker", "at": AT, "target": middle}]
    elif case == "rack":
        faults = [{"type": "kill-group", "at": AT, "target": "rack=a", "window": 0.5}]
    else:
        raise SystemExit(f"unknown case {case!r}: expected one of {CASES}")
    return {"name": f"breakdown-{case}", "seed": 1, "faults": faults}


def run(topology: Path, protocol: str, case: str, spec: dict[str, Any], results: Path,
        spares: int | None, pythonpath: str | None) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(spec, f)
    cmd = [sys.executable, "-m", "ftctl.cli", "chaos", str(topology.resolve()), "-p",
           protocol, "--scenario", f.name, "--workers", str(len(LABELS)),
           "--results", str(results.resolve()), "--json"]
    for label in LABELS:
        cmd += ["--label", label]
    if spares is not None:
        cmd += ["--spares", str(spares)]
    env = dict(os.environ)
    cwd = None
    if pythonpath is not None:  # another checkout's ftctl runs the chaos command
        # From its root: ``-m`` puts the working directory ahead of PYTHONPATH.
        env["PYTHONPATH"] = cwd = str(Path(pythonpath).resolve())
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, cwd=cwd)
    load1 = os.getloadavg()[0]
    os.unlink(f.name)
    try:
        summary = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"protocol": protocol, "case": case, "error": done.stderr.strip()[-300:],
                "load1": load1}
    rows = sorted(summary.get("recovery") or [], key=lambda r: r["t_fault"])
    first = rows[0] if rows else {}
    # Recomputed from the run's history, so that a checkout without the breakdown in its
    # recovery.json is measured the same way.
    b = {}
    if first:
        t = first["t_fault"]
        out, rec = first.get("first_output_s"), first.get("recovery_s")
        lines = (Path(summary["path"]) / "events.jsonl").read_text().splitlines()
        b = recovery_breakdown(t, read_history(json.loads(x) for x in lines if x.strip()),
                               None if out is None else t + out,
                               None if rec is None else t + rec)
    to_running = (None if b.get("plan") is None or b.get("start") is None
                  else b["plan"] + b["start"])
    return {"protocol": protocol, "case": case, "passed": summary.get("passed"),
            "restarts": summary.get("restarts"), "started_by": b.get("started_by"),
            "detect_s": first.get("detection_s"), "to_running_s": to_running,
            "first_output_s": first.get("first_output_s"),
            "recovery_s": first.get("recovery_s"), "breakdown": b,
            "spares": summary.get("spares"), "load1": round(load1, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", type=Path, default=Path("topologies/diamond.yaml"))
    ap.add_argument("--protocols", default=PROTOCOLS)
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--spares", type=int, default=None, help="default: ftctl's own")
    ap.add_argument("--results", type=Path, default=Path("results/breakdown"))
    ap.add_argument("--out", type=Path, default=None, help="also write JSON lines here")
    ap.add_argument("--pythonpath", default=None,
                    help="run the chaos command from this checkout")
    ap.add_argument("--before", default=None, metavar="CHECKOUT",
                    help="run each case first from this other checkout, then from this one, "
                         "so that both rows of a pair see the same machine")
    args = ap.parse_args()
    order = list(ExecutionGraph(load_topology(args.topology)).order)
    print(f"{args.topology} ({len(order)} instances), 4 workers rack=a,a,b,b, "
          f"spares {'default' if args.spares is None else args.spares}")
    head = (f"{'protocol':<12}{'case':<7}{'code':<7}{'ok':<4}{'detect':>7}{'to run':>8}"
            f"{'1st out':>8}{'recover':>8}  {'restarts':<22}{'load1':>6}")
    print(head)
    for protocol in args.protocols.split(","):
        for case in args.cases.split(","):
            spec = scenario(case, order)
            if spec is None:
                print(f"{protocol:<12}{case:<7}skipped: the topology has too few instances")
                continue
            pairs = ([("before", args.before)] if args.before else []) + [
                ("after" if args.before else "this", args.pythonpath)]
            for code, path in pairs:
                row = run(args.topology, protocol, case, spec, args.results, args.spares,
                          path)
                row["code"] = code
                show(row)
                if args.out is not None:
                    with args.out.open("a") as f:
                        f.write(json.dumps(row) + "\n")


def show(row: dict[str, Any]) -> None:
    protocol, case, code = row["protocol"], row["case"], row["code"]

    def s(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"

    if "error" in row:
        print(f"{protocol:<12}{case:<7}{code:<7}error: {row['error']}")
        return
    how = ", ".join(f"{n} {k}" for k, n in sorted((row["started_by"] or {}).items()))
    print(f"{protocol:<12}{case:<7}{code:<7}{'yes' if row['passed'] else 'NO':<4}"
          f"{s(row['detect_s']):>7}{s(row['to_running_s']):>8}"
          f"{s(row['first_output_s']):>8}{s(row['recovery_s']):>8}  "
          f"{how or '-':<22}{row['load1']:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
