"""How long a Spark task's timed garbage collection holds its heartbeat thread, by how
much it keeps alive (``ftctl.spark.gcpolicy``).

A task keeps batches of records as objects (as ``lineage``'s payload logs did before
they were kept encoded; a sink's or an operator's state is still objects). Every
``--tick`` records (default: 10 s of the 12,000 votes/s of ``ftctl figure 000-fig2``'s
build) the timed collection runs, as the heartbeat thread runs it; the longest pause
since the previous row is printed every ``--every`` records, for two policies, each in a
fresh process:
  - ``collect``: a full collection only (the policy before collections froze survivors),
  - ``freeze``: ``ManualGC.tick``, a full collection that then freezes what survived.

    python benchmarks/gc_pause.py [--records 10000000] [--every 2000000] [--tick 120000]
                                  [--batch 100]

The driver declares a task failed after 4.5 s without a heartbeat; on a loaded 2-core
machine a pause takes several times its idle length.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pauses(policy: str, records: int, tick: int, batch: int) -> list[tuple[int, float]]:
    """(records logged, seconds the collection took) at every ``tick`` records."""
    from ftctl.runtime.messages import Batch
    from ftctl.spark.gcpolicy import ManualGC

    log: list[Batch] = []
    out: list[tuple[int, float]] = []
    seq = 0
    with ManualGC(every=0.0) as gc_policy:
        while seq * batch < records:
            for _ in range(max(1, tick // batch)):
                seq += 1
                log.append(Batch([(f"k{i % 1000}", 1, seq) for i in range(batch)], seq=seq))
            started = time.perf_counter()
            if policy == "freeze":
                gc_policy.tick(time.monotonic())
            else:
                gc.collect()
            out.append((seq * batch, time.perf_counter() - started))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--every", type=int, default=2_000_000)
    ap.add_argument("--tick", type=int, default=120_000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--policy", choices=("collect", "freeze"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.policy:
        print(json.dumps(pauses(args.policy, args.records, args.tick, args.batch)))
        return
    got = {}
    for policy in ("collect", "freeze"):
        res = subprocess.run([sys.executable, __file__, "--policy", policy, "--records",
                              str(args.records), "--tick", str(args.tick), "--batch",
                              str(args.batch)], capture_output=True, text=True, check=True,
                             cwd=ROOT)
        got[policy] = json.loads(res.stdout)
    print(f"longest collection per {args.every:,} records, one every {args.tick:,} records")
    print(f"{'records logged':>15} {'collect s':>10} {'freeze s':>10}")
    worst = {p: 0.0 for p in got}
    for i, (n, _) in enumerate(got["collect"]):
        for p in got:
            worst[p] = max(worst[p], got[p][i][1])
        if n // args.every != (n - args.tick) // args.every or i == len(got["collect"]) - 1:
            print(f"{n:>15,} {worst['collect']:>10.3f} {worst['freeze']:>10.3f}")
            worst = {p: 0.0 for p in got}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
