"""Seconds from `LocalCluster.up()` to every worker ALIVE, and teardown time, for 1-3 workers.

    python benchmarks/cluster_start.py [--repeat 3] [--workers 1 2 3] [--json]

Each start uses a fresh temporary state dir and is torn down before the next, so runs do
not share JVMs. The master's own start is reported separately because workers are only
launched once it is ALIVE (see ftctl/cluster/local.py for why).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ftctl.cluster import LocalCluster
from ftctl.cluster.errors import ClusterError


@dataclass
class Sample:
    workers: int
    master_alive_s: float
    all_alive_s: float
    teardown_s: float


def measure(workers: int) -> Sample:
    with tempfile.TemporaryDirectory(prefix="ftctl-bench-") as tmp:
        cluster = LocalCluster(workers, state_dir=Path(tmp) / "state")
        marks: dict[str, float] = {}
        start = time.monotonic()

        def on_progress(message: str) -> None:
            if message.startswith("starting") and "worker" in message:
                marks.setdefault("master_alive", time.monotonic() - start)

        try:
            cluster.up(progress=on_progress)
            all_alive = time.monotonic() - start
        finally:
            stop = time.monotonic()
            cluster.down()
            teardown = time.monotonic() - stop
    return Sample(workers, marks.get("master_alive", float("nan")), all_alive, teardown)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print samples as JSON lines")
    args = parser.parse_args()

    samples: list[Sample] = []
    try:
        for _ in range(args.repeat):
            for workers in args.workers:
                sample = measure(workers)
                samples.append(sample)
                if args.json:
                    print(json.dumps(asdict(sample)), flush=True)
                else:
                    print(
                        f"{workers} worker(s): all ALIVE {sample.all_alive_s:6.2f} s "
                        f"(master ALIVE {sample.master_alive_s:5.2f} s), "
                        f"teardown {sample.teardown_s:5.2f} s",
                        flush=True,
                    )
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if not args.json and args.repeat > 1:
        print("median:")
        for workers in args.workers:
            mine = [s for s in samples if s.workers == workers]
            print(
                f"{workers} worker(s): all ALIVE "
                f"{statistics.median(s.all_alive_s for s in mine):6.2f} s, teardown "
                f"{statistics.median(s.teardown_s for s in mine):5.2f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
