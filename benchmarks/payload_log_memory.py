"""What lineage's payload logs cost per vote, kept as objects or encoded
(``protocols/shared/payload_log.py``).

``topologies/sharder.yaml`` (votes -> sharder -> 20 count shards -> sink) runs under
lineage's instance logic in one process, with no host: each batch sent is handed
straight to the instance it is addressed to, and the sink is left out (it logs nothing).
Every instance logs what it sends, as in a lineage run before any failure. Per mode, in a
fresh process: the growth of the process's resident memory per vote, and the CPU seconds
per million votes (log writes and everything else the instances do), with automatic
garbage collection off as in a Spark task.

    python benchmarks/payload_log_memory.py [--votes 2000000]

``ftctl figure 000-fig2`` at 50M votes keeps these logs in two Spark tasks and 20 more:
the per-vote figure times 50M is what the logs alone take.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(encoded: bool, votes: int) -> dict[str, float]:
    import gc

    import psutil

    from ftctl.config.load import load_topology
    from ftctl.runtime.graph import ExecutionGraph
    from ftctl.runtime.instance import InstanceCore
    from ftctl.runtime.messages import Batch
    from protocols.contract.actions import Send
    from protocols.contract.events import BatchIn, SourceReady, Started
    from protocols.contract.names import InstanceId
    from protocols.contract.params import NoParams
    from protocols.contract.view import InstanceView
    from protocols.lineage.instance import LineageInstance

    LineageInstance.encoded_log = encoded
    topo = load_topology(ROOT / "topologies" / "sharder.yaml").with_input(records=votes)
    graph = ExecutionGraph(topo)
    dst = {c.id: c.dst for c in graph.channels}
    insts: dict[str, LineageInstance] = {}
    for iid, spec in graph.instances.items():
        if spec.is_sink:
            continue
        me = InstanceId(iid)
        core = InstanceCore(graph, me)
        insts[iid] = inst = LineageInstance(InstanceView.of(graph, me), {me: core}, NoParams())
        inst.handle(Started(me, 0, "initial"), 0.0)
    (source,) = graph.sources
    gc.disable()  # as in a Spark task (``ftctl.spark.gcpolicy``): no collection mid-batch
    proc = psutil.Process()
    rss0, cpu0 = proc.memory_info().rss, time.process_time()

    def deliver(acts: list) -> None:
        for a in acts:
            if type(a) is Send and type(a.msg) is Batch and dst[a.channel] in insts:
                child = dst[a.channel]
                deliver(insts[child].handle(BatchIn(InstanceId(child), a.channel, a.msg), 0.0))

    ready = SourceReady(InstanceId(source), 0.0)
    while insts[source].more:
        deliver(insts[source].handle(ready, 0.0))
    cpu = time.process_time() - cpu0
    rss = proc.memory_info().rss - rss0
    logged = sum(i.log_size() for i in insts.values())
    return {"bytes_per_vote": rss / votes, "cpu_s_per_million": cpu / votes * 1e6,
            "batches_logged": logged}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--votes", type=int, default=2_000_000)
    ap.add_argument("--mode", choices=["objects", "encoded"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:  # one measurement, in this fresh process
        print(json.dumps(measure(args.mode == "encoded", args.votes)))
        return
    rows = {}
    for mode in ("objects", "encoded"):
        out = subprocess.run([sys.executable, __file__, "--votes", str(args.votes),
                              "--mode", mode], check=True, capture_output=True, text=True,
                             cwd=ROOT).stdout  # fmt: skip
        rows[mode] = json.loads(out)
    print(f"{args.votes:,} votes through votes -> sharder -> 20 shards, lineage logs only")
    print(f"{'mode':<8} {'bytes/vote':>11} {'CPU s/1M votes':>15} {'batches logged':>15}")
    for mode, r in rows.items():
        print(f"{mode:<8} {r['bytes_per_vote']:>11.0f} {r['cpu_s_per_million']:>15.2f} "
              f"{r['batches_logged']:>15,}")
    o, e = rows["objects"], rows["encoded"]
    print(f"encoded/objects: memory {e['bytes_per_vote'] / o['bytes_per_vote']:.2f}x, "
          f"CPU {e['cpu_s_per_million'] / o['cpu_s_per_million']:.2f}x")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
