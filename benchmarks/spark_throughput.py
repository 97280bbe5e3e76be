"""Throughput of wordcount on the Spark host, against a plain single-process Python loop.

Prints records/s (source lines; each line is 8 words) for:
  - the same pipeline as one Python loop (the ceiling: no processes, sockets or pickling),
  - ``ftctl run --protocol none`` on a warm local cluster,
  - ``ftctl run --protocol checkpoint --param interval=1.0`` on the same cluster,
and the ratios; then the wall time of a cold ``ftctl run topologies/wordcount.yaml``
(starting its own cluster) against the same run on a warm cluster (``--master``).

    python benchmarks/spark_throughput.py [--records 400000] [--repeat 3] [--batch 100]
                                          [--no-cold]

Spark throughput is measured from the moment every instance is running to the end of
the run (the host's ``processing_s``); task start-up is in the wall times below. For the
same window it prints the CPU each group of processes used per 1,000 lines (driver,
driver JVM, executors' JVMs, cluster daemons, each operator's tasks; ``process_cpu.py``),
beside the plain loop's: on 2 cores the Spark run keeps up with the loop only while all
of them together use less than twice the loop's. Every
run is printed; figures and ratios use the median of ``--repeat`` runs, because other
work on a small machine makes single runs noisy (the load average is printed too).
``--batch`` overrides the topology's ``input.batch`` (lines per source batch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from process_cpu import CpuSampler, processing_window  # a sibling script, not a package

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"


def plain_loop(records: int, batch: int | None) -> float:
    """records/s of lines -> split -> count -> sink in one process, batch by batch."""
    from ftctl.config.load import load_topology
    from ftctl.runtime.actions import Emit, Send
    from ftctl.runtime.graph import ExecutionGraph
    from ftctl.runtime.instance import InstanceCore

    topology = load_topology(WORDCOUNT).with_input(records=records, batch=batch)
    graph = ExecutionGraph(topology)
    cores = {i: InstanceCore(graph, i) for i in graph.order}
    dst = {c.id: cores[c.dst] for c in graph.channels}
    out: list[Any] = []

    def drain(core: InstanceCore) -> None:
        for a in core.take_actions():
            if type(a) is Send:
                d = dst[a.channel]
                d.deliver(a.channel, a.msg)  # type: ignore[arg-type]
                drain(d)
            elif type(a) is Emit:
                out.extend(a.records)

    source = cores[graph.sources[0]]
    t0 = time.perf_counter()
    while source.source_next():
        drain(source)
    drain(source)
    return records / (time.perf_counter() - t0)


def ftctl(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, float]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ftctl.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, time.monotonic() - t0


def spark_run(master: str, protocol: list[str], records: int, env: dict[str, str],
              cwd: Path, topology: Path = WORDCOUNT) -> dict[str, Any]:
    """One ``ftctl run``'s summary, with ``wall_s`` and ``cpu``: CPU seconds per process
    group while its records flowed (``process_cpu``)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ftctl.cli", "run", str(topology),
                             "--master", master, "--records", str(records), "--json",
                             *protocol], cwd=cwd, env=env, stdout=subprocess.PIPE, text=True)
    sampler = CpuSampler(proc.pid)
    out, _ = proc.communicate()
    sampler.stop()
    if proc.returncode != 0:
        raise SystemExit(f"ftctl run {' '.join(protocol)} exited {proc.returncode}: "
                         f"{out[-2000:]}")
    summary: dict[str, Any] = json.loads(out)
    summary["wall_s"] = time.monotonic() - t0
    start, end, tasks = processing_window(cwd / summary["path"], summary["processing_s"])
    summary["cpu"] = sampler.window(start, end, tasks)
    return summary


def cpu_table(runs: dict[str, list[dict[str, float]]], ceiling: float, records: int) -> None:
    """CPU ms per 1,000 source lines while records flowed, per process group (medians
    over the runs; ``all`` is the sum of those medians), beside the plain loop's (its
    wall time: one process, one core)."""
    groups = sorted({g for rs in runs.values() for r in rs for g in r},
                    key=lambda g: (not g.startswith("task"), g))
    names = list(runs)
    print(f"{'CPU ms per 1,000 lines':<24}" + "".join(f"{n:>12}" for n in names))
    per = {n: {g: statistics.median(r.get(g, 0.0) for r in rs) * 1e6 / records
               for g in groups} for n, rs in runs.items()}
    for g in groups:
        print(f"  {g:<22}" + "".join(f"{per[n][g]:12.1f}" for n in names))
    print(f"  {'all':<22}" + "".join(f"{sum(per[n].values()):12.1f}" for n in names))
    print(f"  {'plain Python loop':<22}{1e6 / ceiling:12.1f}")


def with_batch(work: Path, batch: int | None) -> Path:
    """The wordcount topology, with ``input.batch`` overridden when asked."""
    if batch is None:
        return WORDCOUNT
    import yaml

    doc = yaml.safe_load(WORDCOUNT.read_text())
    doc["input"]["batch"] = batch
    path = work / f"wordcount-batch{batch}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=None, help="override input.batch")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-start run")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ftctl-bench-"))
    env = dict(os.environ, FTCTL_STATE_DIR=str(work / "cluster"))
    topology = with_batch(work, args.batch)
    print(f"input.batch {args.batch or 'default'}; load average {os.getloadavg()}")

    loops = [plain_loop(args.records, args.batch) for _ in range(args.repeat)]
    ceiling = statistics.median(loops)
    print(f"plain Python loop      {ceiling:12,.0f} records/s (median; "
          f"{', '.join(f'{x:,.0f}' for x in loops)})")

    code, out, wall = ftctl(["cluster", "up", "--workers", "2", "--cores", "6", "--json"],
                            env, work)
    if code != 0:
        raise SystemExit("ftctl cluster up failed")
    print(f"warm cluster up        {wall:12.1f} s")
    master = json.loads(out)["master_url"]
    try:
        median: dict[str, float] = {}
        protocols = (("none", ["--protocol", "none"]),
                     ("checkpoint", ["--protocol", "checkpoint", "--param", "interval=1.0"]))
        runs: dict[str, list[float]] = {name: [] for name, _ in protocols}
        cpu: dict[str, list[dict[str, float]]] = {name: [] for name, _ in protocols}
        # Interleaved, so a burst of other load on the machine hits both protocols alike.
        for _ in range(args.repeat):
            for name, proto in protocols:
                s = spark_run(master, proto, args.records, env, work, topology)
                runs[name].append(s["records_per_s"])
                cpu[name].append(s["cpu"])
                if s["detections"]:  # a (false) failure detection makes a run slow: say so
                    print(f"  {name} run {len(runs[name])}: {s['detections']} detection(s), "
                          f"{s['restarts']} restart(s), {s['records_per_s']:,.0f} records/s")
        for name, _ in protocols:
            median[name] = statistics.median(runs[name])
            print(f"spark {name:<16} {median[name]:12,.0f} records/s (median; "
                  f"{', '.join(f'{x:,.0f}' for x in runs[name])})")
        none, ckpt = median["none"], median["checkpoint"]
        print(f"none / plain loop      {none / ceiling:12.1%}")
        print(f"checkpoint overhead    {1 - ckpt / none:12.1%}")
        cpu_table(cpu, ceiling, args.records)
        print(f"load average           {os.getloadavg()}")
        warm = spark_run(master, [], 2000, env, work)
        print(f"warm ftctl run         {warm['wall_s']:12.1f} s (default wordcount)")
    finally:
        ftctl(["cluster", "down"], env, work)
    if args.no_cold:
        return
    code, _, cold = ftctl(["run", str(WORDCOUNT), "--json"], env, work)
    print(f"cold ftctl run         {cold:12.1f} s (exit {code}; starts and stops its cluster)")


if __name__ == "__main__":
    main()
