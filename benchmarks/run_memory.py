"""Peak memory and wall time of whole ``ftctl run`` runs as the input grows.

    flock /tmp/spark.lock python benchmarks/run_memory.py [--sizes 1000000,10000000]
        [--topologies wordcount,sharder] [--protocol checkpoint] [--pythonpath DIR]

Each topology (``topologies/<name>.yaml``) runs once per size through ``ftctl run
--records N`` (unpaced, a local cluster of 2 workers) in a fresh folder, so the golden run
is computed, not read from the cache (the oracle's expected values may come from the
machine-wide cache: they are a Spark job's, not the driver's). Every ``--every`` seconds
the resident memory of each process under the run is summed per kind (``soak.kind_of``):
the driver's Python process, the driver JVM and the executor JVMs, the Spark daemons, and
the tasks' Python workers. Printed per run: the peak of each kind, the driver's high-water
mark (``VmHWM``, read at every sample, so a peak between samples counts too), the peak
disk space of the run's folder (golden files, snapshot store, spilled output, the
verdict's files; sampled every second: at 100M wordcount lines it is tens of GB), wall
time, the run's verdict and the load average before and after.

``--pythonpath`` runs another checkout's ftctl (for a before/after on one machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak import sample  # sibling scripts, not a package
from verify_memory import TempSpace

ROOT = Path(__file__).resolve().parent.parent
JVM_KINDS = ("driver-jvm", "executors")


def high_water_mb(pid: int) -> float:
    """The process's peak resident memory so far (Linux ``VmHWM``), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_once(topology: str, records: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ftctl-runmem-") as tmp:
        env = dict(os.environ, PYTHONPATH=str(Path(args.pythonpath).resolve()))
        cmd = [sys.executable, "-m", "ftctl.cli", "run",
               str(ROOT / "topologies" / f"{topology}.yaml"), "-p", args.protocol,
               "--records", str(records), "--results", str(Path(tmp) / "results"), "--json"]
        load_before = os.getloadavg()
        t0 = time.monotonic()
        out = open(Path(tmp) / "stdout", "w+")  # noqa: SIM115  (read back below)
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.DEVNULL)
        root = psutil.Process(proc.pid)
        peak: dict[str, float] = {}
        hwm = 0.0
        with TempSpace(Path(tmp)) as disk:
            while proc.poll() is None:
                hwm = max(hwm, high_water_mb(proc.pid))
                s = sample(root)
                s["jvms"] = sum(s.get(k, 0.0) for k in JVM_KINDS)
                for kind, mb in s.items():
                    if not kind.endswith("#n"):
                        peak[kind] = max(peak.get(kind, 0.0), mb)
                time.sleep(args.every)
        wall = time.monotonic() - t0
        out.seek(0)
        text = out.read()
        out.close()
    try:
        summary = json.loads(text[text.index("{"):])
    except ValueError:
        summary = {}
    return {"topology": topology, "records": records, "exit": proc.returncode,
            "passed": summary.get("passed"), "wall_s": round(wall, 1),
            "driver_hwm_mb": round(max(hwm, peak.get("driver", 0.0))),
            **{f"{k}_mb": round(peak.get(k, 0.0)) for k in ("driver", "jvms", "daemons",
                                                            "tasks")},
            "disk_bytes": disk.peak,
            "load": [round(x, 1) for x in (*load_before[:1], *os.getloadavg()[:1])]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000", help="records, comma-separated")
    ap.add_argument("--topologies", default="wordcount,sharder")
    ap.add_argument("--protocol", default="checkpoint")
    ap.add_argument("--pythonpath", default=str(ROOT), help="checkout whose ftctl runs")
    ap.add_argument("--every", type=float, default=0.25, help="seconds between samples")
    args = ap.parse_args()
    print("| topology | records | exit | passed | wall s | driver peak MB | JVMs MB "
          "| daemons MB | tasks MB | disk GB | load before/after |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        for topology in args.topologies.split(","):
            r = run_once(topology, size, args)
            print(f"| {r['topology']} | {size:,} | {r['exit']} | {r['passed']} "
                  f"| {r['wall_s']} | {r['driver_hwm_mb']:,} | {r['jvms_mb']:,} "
                  f"| {r['daemons_mb']:,} | {r['tasks_mb']:,} | {r['disk_bytes'] / 1e9:.2f} "
                  f"| {r['load'][0]} / {r['load'][1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
