"""What the size of a resend's chunk costs: lineage resending a purged child a source's
whole history (``LoggedInstance.resend_chunk``, ``protocols/shared/logged.py``).

``topologies/sharder.yaml``'s source, ``votes[0]``, runs under lineage's instance logic
in one process, with no host, and produces ``--votes`` votes; its sends are dropped, its
payload log (encoded) kept. Then its child asks for everything again (``Resend`` from
batch 1) and the resend runs to the end, one timer event after another. Per chunk size,
in a fresh process, with garbage collection as in a Spark task (``ManualGC``), a full
collection run after every event while that event's output is still alive (the worst
moment for the task's heartbeat thread to collect):

  - events: how many the resend took,
  - total s: the instance's time for the whole resend, collections included,
  - longest event s: the longest single event (decoding its chunk),
  - longest collection s: the longest of those collections,
  - peak MB: how far the process's peak resident memory rose during the resend.

    python benchmarks/resend_chunk.py [--votes 5000000] [--chunks all,4096,1024,256,64]

A Spark task's heartbeat thread runs the timed collection, which holds the interpreter
for its whole length, against the driver's 4.5 s heartbeat timeout; what it traverses is
what the events since the last one left alive. An event's length is how long the task
sends nothing. The host's own cost per event (shipping the batches, firing the timer) is
not included.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(votes: int, chunk: int | None) -> dict[str, float]:
    from ftctl.config.load import load_topology
    from ftctl.runtime.graph import ExecutionGraph
    from ftctl.runtime.instance import InstanceCore
    from ftctl.runtime.messages import Batch
    from ftctl.spark.gcpolicy import ManualGC
    from protocols.contract.actions import Send, SetTimer
    from protocols.contract.events import ControlIn, SourceReady, Started, TimerFired
    from protocols.contract.names import InstanceId
    from protocols.contract.params import NoParams
    from protocols.contract.view import InstanceView
    from protocols.lineage.instance import LineageInstance
    from protocols.shared.logged import Resend

    topo = load_topology(ROOT / "topologies" / "sharder.yaml").with_input(records=votes)
    graph = ExecutionGraph(topo)
    (source,) = graph.sources
    me = InstanceId(source)
    inst = LineageInstance(InstanceView.of(graph, me), {me: InstanceCore(graph, me)},
                           NoParams())
    inst.resend_chunk = chunk
    inst.handle(Started(me, 0, "initial"), 0.0)
    ready = SourceReady(me, 0.0)
    while inst.more:
        inst.handle(ready, 0.0)
    (ch,) = inst.plog
    logged = len(inst.plog[ch])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    events = resent = 0
    longest_event = longest_gc = total = 0.0
    with ManualGC(every=0.0) as gc_policy:
        nxt: object = ControlIn(Resend(ch, 1))
        while nxt is not None:
            t0 = time.perf_counter()
            acts = inst.handle(nxt, 0.0)  # type: ignore[arg-type]
            t1 = time.perf_counter()
            gc_policy.tick(time.monotonic())
            t2 = time.perf_counter()
            events += 1
            longest_event = max(longest_event, t1 - t0)
            longest_gc = max(longest_gc, t2 - t1)
            total += t2 - t0
            resent += sum(1 for a in acts if type(a) is Send and type(a.msg) is Batch)
            timers = [a for a in acts if type(a) is SetTimer]
            nxt = TimerFired(timers[0].key, 0.0) if timers else None
            del acts
    if resent != logged:
        raise SystemExit(f"resent {resent} batches of {logged} logged")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    return {"events": events, "batches": resent, "total_s": total,
            "longest_event_s": longest_event, "longest_gc_s": longest_gc,
            "peak_mb": peak / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--votes", type=int, default=5_000_000)
    ap.add_argument("--chunks", default="all,4096,1024,256,64",
                    help="batches per event, comma-separated; 'all' for one event")
    ap.add_argument("--chunk", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.chunk is not None:  # one measurement, in this fresh process
        chunk = None if args.chunk == "all" else int(args.chunk)
        print(json.dumps(measure(args.votes, chunk)))
        return
    print(f"votes[0] resends {args.votes:,} votes to its purged child, lineage, encoded log")
    print(f"{'chunk':>6} {'events':>7} {'total s':>8} {'longest event s':>16} "
          f"{'longest collection s':>21} {'peak MB':>8}")
    for c in args.chunks.split(","):
        c = c.strip()
        if c != "all" and not (c.isdigit() and int(c) > 0):
            raise SystemExit(f"--chunks: {c!r} is neither 'all' nor a positive count")
        out = subprocess.run([sys.executable, __file__, "--votes", str(args.votes),
                              "--chunk", c], check=True, capture_output=True, text=True,
                             cwd=ROOT).stdout  # fmt: skip
        r = json.loads(out)
        print(f"{c:>6} {r['events']:>7,} {r['total_s']:>8.2f} {r['longest_event_s']:>16.3f} "
              f"{r['longest_gc_s']:>21.3f} {r['peak_mb']:>8.0f}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
