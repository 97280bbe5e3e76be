"""Is every fault of every bundled scenario delivered on a busy machine?

Runs ``ftctl chaos`` once per ``chaos/*.yaml`` scenario on a fresh local cluster (four
workers labelled rack=a, a, b, b, so that ``rack=a`` exists), optionally while ``--burn N``
busy-loop processes keep the machine loaded, and counts from each run's history what the
nemesis planned and what it did: faults injected, deferred (the target was restarting),
and errors (never delivered). A fault marked ``optional`` may end in an error without
failing the row. The one-minute load average is printed beside each run. One Spark run
at a time; about a minute each.

    python benchmarks/scenarios_delivered.py --burn 6            # load about 8 on 2 cores
    python benchmarks/scenarios_delivered.py --protocols checkpoint,progressive
    python benchmarks/scenarios_delivered.py --scenarios chaos/flapping.yaml --burn 0

``container-faults.yaml`` needs the docker backend and runs only with ``--docker``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from ftctl.kernel.history import HistoryEvent, read_history

ROOT = Path(__file__).resolve().parent.parent
LABELS = ["rack=a", "rack=a", "rack=b", "rack=b"]
# Scenarios whose targets name one topology's operators.
TOPOLOGY_OF = {"kill-sharder": "topologies/sharder.yaml"}
DEFAULT_TOPOLOGY = "topologies/wordcount.yaml"
DOCKER_ONLY = {"container-faults"}


@contextmanager
def burning(n: int) -> Iterator[None]:
    """``n`` processes that spin until the block ends: a machine as busy as a shared CI
    runner, reproducibly."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def expected(spec: dict[str, Any]) -> list[tuple[int, int, bool]]:
    """Per fault of a scenario file: its index, the occurrences asked for, optional."""
    return [(i, int(f.get("count", 1)), bool(f.get("optional", False)))
            for i, f in enumerate(spec.get("faults") or [])]


def tally(events: list[HistoryEvent]) -> dict[int, dict[str, Any]]:
    """Per fault index: occurrences injected, deferrals, errors (with their messages)."""
    out: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.kind not in ("fault-injected", "fault-deferred", "fault-error"):
            continue
        index = int(e.data["index"])
        row = out.setdefault(index, {"injected": 0, "deferred": 0, "errors": []})
        if e.kind == "fault-injected":
            row["injected"] += 1
        elif e.kind == "fault-deferred":
            row["deferred"] += 1
        else:
            row["errors"].append(str(e.data.get("error", "?")))
    return out


def delivered(spec: dict[str, Any], counts: dict[int, dict[str, Any]]) -> tuple[bool, str]:
    """Whether every fault the file asks for was injected as often as asked (``optional``
    ones may fail), and a short account of what was not."""
    missing = []
    for index, want, optional in expected(spec):
        got = counts.get(index, {"injected": 0, "errors": []})
        if got["injected"] < want and not optional:
            why = "; ".join(got["errors"])[:120] or "never struck"
            missing.append(f"fault {index}: {got['injected']}/{want} ({why})")
    return not missing, "; ".join(missing)


def run(scenario: Path, protocol: str, results: Path, docker: bool) -> dict[str, Any]:
    name = scenario.stem
    topology = ROOT / TOPOLOGY_OF.get(name, DEFAULT_TOPOLOGY)
    cmd = [sys.executable, "-m", "ftctl.cli", "chaos", str(topology), "-p", protocol,
           "--scenario", str(scenario.resolve()), "--workers", str(len(LABELS)),
           "--results", str(results.resolve()), "--json"]
    for label in LABELS:
        cmd += ["--label", label]
    if docker:
        cmd += ["--backend", "docker"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    load1 = os.getloadavg()[0]
    spec = yaml.safe_load(scenario.read_text())
    try:
        summary = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"scenario": name, "protocol": protocol, "load1": load1,
                "error": (done.stderr.strip() or done.stdout.strip())[-300:]}
    lines = (Path(summary["path"]) / "events.jsonl").read_text().splitlines()
    events = read_history(json.loads(x) for x in lines if x.strip())
    counts = tally(events)
    ok, missing = delivered(spec, counts)
    return {"scenario": name, "protocol": protocol, "passed": summary.get("passed"),
            "delivered": ok, "missing": missing,
            "injected": sum(c["injected"] for c in counts.values()),
            "deferred": sum(c["deferred"] for c in counts.values()),
            "errors": sum(len(c["errors"]) for c in counts.values()),
            "struck_nothing": len(summary.get("struck_nothing") or []),
            "load1": round(load1, 1)}


def show(row: dict[str, Any]) -> None:
    head = f"{row['scenario']:<24}{row['protocol']:<12}"
    if "error" in row:
        print(f"{head}error: {row['error']}", flush=True)
        return
    print(f"{head}{'yes' if row['delivered'] else 'NO':<10}{row['injected']:>9}"
          f"{row['deferred']:>9}{row['errors']:>7}{row['struck_nothing']:>8}  "
          f"{'yes' if row['passed'] else 'NO':<7}{row['load1']:>6.1f}", flush=True)
    if row["missing"]:
        print(f"{'':<36}{row['missing']}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocols", default="checkpoint")
    ap.add_argument("--scenarios", nargs="*", type=Path, default=None,
                    help="default: every chaos/*.yaml")
    ap.add_argument("--burn", type=int, default=0,
                    help="busy-loop processes running beside the runs (load)")
    ap.add_argument("--docker", action="store_true", help="also the docker-only scenarios")
    ap.add_argument("--results", type=Path, default=Path("results/delivery"))
    ap.add_argument("--out", type=Path, default=None, help="also write JSON lines here")
    args = ap.parse_args()
    scenarios = args.scenarios or sorted((ROOT / "chaos").glob("*.yaml"))
    print(f"4 workers rack=a,a,b,b; {args.burn} busy-loop processes beside each run")
    print(f"{'scenario':<24}{'protocol':<12}{'delivered':<10}{'injected':>9}{'deferred':>9}"
          f"{'errors':>7}{'no-test':>8}  {'passed':<7}{'load1':>6}")
    with burning(args.burn):
        for scenario in scenarios:
            docker = scenario.stem in DOCKER_ONLY
            if docker and not args.docker:
                print(f"{scenario.stem:<24}skipped: docker backend only (--docker)")
                continue
            for protocol in args.protocols.split(","):
                row = run(scenario, protocol, args.results, docker)
                show(row)
                if args.out is not None:
                    with args.out.open("a") as f:
                        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
